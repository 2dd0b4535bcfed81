//! Which bytes to decompress, and how: zstd and gzip, by content.
//!
//! The choice is made once per object from what is known before its body
//! is decoded, in this order:
//!
//! 1. [`Decompress::Off`]: bytes as stored, always.
//! 2. `Content-Encoding: gzip` (GCS and S3 both store it): the object's
//!    content *is* the decoded bytes, the encoding a storage detail (GCS
//!    would decompress it in flight if we let it; the GCS backend asks for
//!    the stored bytes so checksums can be checked, and we decode here).
//!    Applies in [`Decompress::ContentEncoding`] and [`Decompress::Detect`].
//! 3. [`Decompress::Detect`] only: magic bytes (zstd `28 b5 2f fd`, zstd
//!    skippable frames `5? 2a 4d 18`, gzip `1f 8b`), then the key's
//!    extension (`.zst`, `.zstd`, `.gz`, `.gzip`). The extension matters
//!    only when the magic is missing: such an object is decoded anyway so
//!    that a damaged header is an error, not a silent pass-through.
//!
//! Magic bytes beat extensions because datasets are misnamed more often
//! than corrupt; `cat -d` of `x.txt` holding zstd frames prints the text.
//! Empty objects decode to nothing whatever their name.
//!
//! Concatenations are one stream: several zstd frames (what `zstd` writes
//! for `cat a.zst b.zst`, or a seekable/multi-threaded writer) and several
//! gzip members (`cat a.gz b.gz`, bgzip) decode to the concatenated
//! content, as `zstd -dc` and `gzip -dc` do. Decoding is the libraries'
//! (libzstd through `zstd`, zlib-rs through `flate2`); nothing here
//! touches compressed bits.
//!
//! Errors name the compressed offset where the rejected input starts: the
//! reader feeds the decoders at most [`MAX_FEED`] bytes at a time, so the
//! damage is within that many bytes after the offset given (zstd checks a
//! whole block, up to 128 KiB, once its last byte arrives).

use std::io::{self, BufRead, Read};

use shoal_core::{Error, ErrorKind, Op};

/// Most compressed bytes handed to a decoder in one call; bounds how far
/// an error's offset can be from the damage, at no measurable cost.
pub(crate) const MAX_FEED: usize = 64 << 10;

/// When to decompress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Decompress {
    /// Never: the stored bytes.
    Off,
    /// Only objects stored with `Content-Encoding: gzip` (the default for
    /// `cat`: their content is the decoded bytes).
    #[default]
    ContentEncoding,
    /// Also by magic bytes, then by extension (`cat -d`, `bench read`).
    Detect,
}

/// How one object's bytes are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// Passed through.
    Plain,
    /// Zstandard frames.
    Zstd,
    /// gzip members.
    Gzip,
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Codec::Plain => "plain",
            Codec::Zstd => "zstd",
            Codec::Gzip => "gzip",
        })
    }
}

/// Bytes needed to recognise every format's magic.
pub(crate) const MAGIC_LEN: usize = 4;

/// The codec of the bytes starting with `head` (at least [`MAGIC_LEN`]
/// bytes unless the object is shorter), by magic number only.
pub(crate) fn sniff(head: &[u8]) -> Option<Codec> {
    match head {
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(Codec::Zstd),
        // Skippable frames (0x184D2A50..=0x184D2A5F, little endian) start
        // some zstd streams (seekable format, pzstd).
        [b, 0x2a, 0x4d, 0x18, ..] if b & 0xf0 == 0x50 => Some(Codec::Zstd),
        [0x1f, 0x8b, ..] => Some(Codec::Gzip),
        _ => None,
    }
}

/// The codec a key's extension names.
pub(crate) fn by_extension(key: &str) -> Option<Codec> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    match ext.as_str() {
        "zst" | "zstd" => Some(Codec::Zstd),
        "gz" | "gzip" => Some(Codec::Gzip),
        _ => None,
    }
}

/// Chooses how to decode one object (see the module docs for the order).
/// `head` is the object's first bytes (empty for an empty object).
pub(crate) fn choose(
    mode: Decompress,
    content_encoding: Option<&str>,
    head: &[u8],
    key: &str,
) -> Codec {
    if mode == Decompress::Off || head.is_empty() {
        return Codec::Plain;
    }
    let encoding = content_encoding.map(|e| e.trim().to_ascii_lowercase());
    if matches!(encoding.as_deref(), Some("gzip" | "x-gzip")) {
        return Codec::Gzip;
    }
    if mode == Decompress::ContentEncoding {
        return Codec::Plain;
    }
    sniff(head)
        .or_else(|| by_extension(key))
        .unwrap_or(Codec::Plain)
}

/// A reader of decoded bytes over `input` (compressed bytes in order).
/// Several frames or members are decoded as one stream.
pub(crate) fn decoder<'a, R: BufRead + Send + 'a>(
    codec: Codec,
    input: R,
) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match codec {
        Codec::Plain => Box::new(input),
        Codec::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
        Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
    })
}

thread_local! {
    /// This thread's zstd context, kept between objects. A context holds
    /// the frame's window (2–8 MiB for common levels); made fresh for each
    /// object, its pages were faulted in again every time, and a dataset
    /// of 2 MiB objects spent a tenth of its CPU in page faults.
    static ZSTD_CTX: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with a reader of decoded bytes over `input`, as [`decoder`]
/// gives, but decoding zstd with this thread's kept context. For callers
/// that decode object after object on the same (pooled) threads.
pub(crate) fn with_decoder<R: BufRead + Send, T>(
    codec: Codec,
    input: R,
    f: impl FnOnce(&mut dyn Read) -> T,
) -> io::Result<T> {
    if codec != Codec::Zstd {
        return Ok(f(&mut *decoder(codec, input)?));
    }
    ZSTD_CTX.with(|cell| {
        // Re-entry cannot happen (decoding calls no decoder); if it did,
        // a fresh context is correct, only slower.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Ok(f(&mut *decoder(codec, input)?));
        };
        let ctx = match &mut *slot {
            Some(c) => c,
            none => none.insert(
                zstd::zstd_safe::DCtx::try_create()
                    .ok_or_else(|| io::Error::other("zstd: cannot allocate a context"))?,
            ),
        };
        let mut d = zstd::stream::read::Decoder::with_context(input, ctx);
        Ok(f(&mut d))
    })
}

/// The one-line error for a decoder's failure at compressed `offset`.
pub(crate) fn decode_error(codec: Codec, url: &str, offset: u64, e: &io::Error) -> Error {
    let what = if e.kind() == io::ErrorKind::UnexpectedEof {
        "truncated"
    } else {
        "corrupt"
    };
    Error::new(
        ErrorKind::Integrity,
        Op::Read,
        url,
        format!("{codec} data {what} at compressed offset {offset}: {e}"),
    )
    .with_hint("the stored object is damaged; --no-decompress reads it as stored")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode(codec: Codec, data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoder(codec, data)?.read_to_end(&mut out)?;
        // The kept context decodes the same, also after a failed frame.
        let mut again = Vec::new();
        with_decoder(codec, data, |r| r.read_to_end(&mut again))??;
        assert_eq!(again, out);
        Ok(out)
    }

    #[test]
    fn magic_beats_extension_and_extension_fills_in() {
        let z = zstd::encode_all(&b"hello"[..], 3).unwrap();
        let g = gzip(b"hello");
        let d = Decompress::Detect;
        assert_eq!(choose(d, None, &z, "a.txt"), Codec::Zstd);
        assert_eq!(choose(d, None, &g, "a.zst"), Codec::Gzip);
        assert_eq!(choose(d, None, b"plain", "a.txt"), Codec::Plain);
        // A damaged header under a telling name is decoded (and fails).
        assert_eq!(choose(d, None, b"xxxx", "a.ZST"), Codec::Zstd);
        assert_eq!(choose(d, None, b"xxxx", "dir.gz/a"), Codec::Plain);
        assert_eq!(choose(d, None, &[0x5e, 0x2a, 0x4d, 0x18], "k"), Codec::Zstd);
        // Empty objects are empty, whatever their name.
        assert_eq!(choose(d, None, b"", "a.gz"), Codec::Plain);
    }

    #[test]
    fn content_encoding_applies_unless_off() {
        let g = gzip(b"x");
        for mode in [Decompress::ContentEncoding, Decompress::Detect] {
            assert_eq!(choose(mode, Some("gzip"), &g, "k"), Codec::Gzip);
        }
        assert_eq!(choose(Decompress::Off, Some("gzip"), &g, "k"), Codec::Plain);
        // Without the header, only Detect looks at the bytes.
        assert_eq!(
            choose(Decompress::ContentEncoding, None, &g, "k.gz"),
            Codec::Plain
        );
    }

    #[test]
    fn concatenated_frames_and_members_decode_whole() {
        let mut z = zstd::encode_all(&b"one\n"[..], 1).unwrap();
        z.extend(zstd::encode_all(&b"two\n"[..], 19).unwrap());
        assert_eq!(decode(Codec::Zstd, &z).unwrap(), b"one\ntwo\n");
        let mut g = gzip(b"one\n");
        g.extend(gzip(b"two\n"));
        assert_eq!(decode(Codec::Gzip, &g).unwrap(), b"one\ntwo\n");
    }

    #[test]
    fn truncated_zstd_is_an_error_not_a_short_read() {
        let z = zstd::encode_all(&vec![7u8; 100_000][..], 3).unwrap();
        let e = decode(Codec::Zstd, &z[..z.len() - 3]).unwrap_err();
        let err = decode_error(Codec::Zstd, "gs://b/k", 42, &e);
        assert_eq!(err.kind(), ErrorKind::Integrity);
        assert!(err.to_string().contains("zstd data"), "{err}");
        assert!(err.to_string().contains("offset 42"), "{err}");
    }

    #[test]
    fn a_kept_zstd_context_starts_clean_after_a_broken_frame() {
        let a = zstd::encode_all(&b"first object, cut short"[..], 3).unwrap();
        let b = zstd::encode_all(&b"second object"[..], 3).unwrap();
        let cut = &a[..a.len() - 3];
        let mut out = Vec::new();
        let r = with_decoder(Codec::Zstd, cut, |r| r.read_to_end(&mut out)).unwrap();
        assert!(r.is_err(), "a cut frame must fail, got {r:?}");
        let mut out = Vec::new();
        with_decoder(Codec::Zstd, &b[..], |r| r.read_to_end(&mut out))
            .unwrap()
            .unwrap();
        assert_eq!(out, b"second object");
    }

    #[test]
    fn truncated_gzip_is_an_error() {
        let g = gzip(&vec![7u8; 100_000]);
        assert!(decode(Codec::Gzip, &g[..g.len() - 5]).is_err());
    }
}
