//! Where every transfer's bytes are checked: one policy for downloads,
//! `cat`/`read`, cloud-to-cloud copies, uploads and `sync --checksum`.
//!
//! The policy is "the strongest checksum the store keeps for the object",
//! the order of `shoal_core::checksum::Checksums`: CRC32C, else its CRC32
//! or CRC64NVME (S3 keeps one algorithm per object), else its composite
//! `xxxx-N` value checked part by part ([`parts`]: needs the part list),
//! else its MD5, else the length only. [`Expected`] is that choice, made
//! once from the object's metadata; the engines ask it which checksum to
//! compute and check rather than pick among the object's checksums (and
//! [`knows_crc`] whether a listing gave enough to check bytes as they
//! arrive). It hands out the running hasher for a slice starting at any
//! offset ([`Expected::running`]), the slices' results combine
//! ([`Received`]), and every mismatch is worded by
//! `shoal_core::checksum::Mismatch`. This module and [`parts`] are the
//! only ones of the transfer engines that tell the kinds apart.
//!
//! MD5 cannot be combined from slices, so it is the last resort and is
//! checked by reading the finished file back ([`Expected::check_file`])
//! or hashing the finished buffer ([`Expected::check_buffer`]); a
//! reader (`cat`, Python's `read`) hashes it in order as it passes the
//! bytes on ([`Md5InOrder`]), which cannot take them back but reports the
//! mismatch naming the object; a copy reports such an object as checked
//! by length.
//!
//! Two CRC crates, one job each. Bytes as they stream by are hashed by
//! crc-fast's folding kernels (`checksum::crc32c_append`, and
//! `CrcKind::digest` for CRC32 / CRC64NVME): hashing is where a transfer
//! spends its checksum CPU, and crc-fast was the faster of the two there.
//! Finished CRC32Cs of slices are joined by the `crc32c` crate's combine
//! (`checksum::crc32c_combine`): a handful of calls per object, where
//! speed does not matter, so it stays the one combine path for CRC32C
//! (crc-fast's combine serves CRC32 and CRC64NVME, which that crate lacks).

mod parts;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use shoal_core::checksum::{
    Checksum, Checksums, Mismatch, OtherCrc, PartKind, PartPiece, Running, crc32c_combine_all,
};
use shoal_core::{Error, ErrorKind, Location, ObjectMeta, Op, Result, Store};

use crate::rate::Rates;
pub(crate) use parts::PartCheck;

/// How the bytes of a finished transfer were checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    /// CRC32C matched the store's.
    Crc32c,
    /// CRC32 matched the store's (S3).
    Crc32,
    /// CRC64NVME matched the store's (S3).
    Crc64Nvme,
    /// Each part's CRC, composed, matched the store's composite checksum
    /// (an S3 multipart object's `xxxx-N`).
    Parts(PartKind),
    /// MD5 matched the store's.
    Md5,
    /// The store had no checksum; only the length was checked.
    SizeOnly,
}

impl From<shoal_core::checksum::CrcKind> for Verified {
    fn from(kind: shoal_core::checksum::CrcKind) -> Self {
        match kind {
            shoal_core::checksum::CrcKind::Crc32 => Verified::Crc32,
            shoal_core::checksum::CrcKind::Crc64Nvme => Verified::Crc64Nvme,
        }
    }
}

impl From<Checksum> for Verified {
    fn from(c: Checksum) -> Self {
        match c {
            Checksum::Crc32c(_) => Verified::Crc32c,
            Checksum::Other(o) => o.kind().into(),
            Checksum::Composite(c) => Verified::Parts(c.kind),
            Checksum::Md5(_) => Verified::Md5,
        }
    }
}

impl std::fmt::Display for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verified::Crc32c => "crc32c",
            Verified::Crc32 => "crc32",
            Verified::Crc64Nvme => "crc64nvme",
            Verified::Parts(PartKind::Crc32c) => "crc32c per part",
            Verified::Parts(PartKind::Crc32) => "crc32 per part",
            Verified::Md5 => "md5",
            Verified::SizeOnly => "size only",
        })
    }
}

/// The checksum an object's bytes must match: the strongest its store
/// keeps (see the module doc).
#[derive(Debug, Clone, Default)]
pub(crate) enum Expected {
    /// A whole-object CRC32C.
    Crc32c(u32),
    /// A whole-object CRC32 or CRC64NVME.
    Other(OtherCrc),
    /// A composite value, with the part boundaries to check it.
    Parts(PartCheck),
    /// An MD5 only (checked by reading a finished file back).
    Md5([u8; 16]),
    /// Nothing: the length is all there is to check.
    #[default]
    None,
}

impl Expected {
    /// What `meta` alone says, without asking for a part list: a
    /// composite value is not checkable this way (see [`Expected::learn`]).
    pub(crate) fn listed(meta: &ObjectMeta) -> Self {
        match meta.checksums.whole().next() {
            Some(Checksum::Crc32c(crc)) => Expected::Crc32c(crc),
            Some(Checksum::Other(other)) => Expected::Other(other),
            Some(Checksum::Md5(md5)) => Expected::Md5(md5),
            Some(Checksum::Composite(_)) | None => Expected::None,
        }
    }

    /// The strongest checksum `meta` gives, asking `store` for the part
    /// list when that is a composite one (a request, paced by `rates`).
    pub(crate) async fn learn(
        store: &Arc<dyn Store>,
        src: &Location,
        meta: &ObjectMeta,
        op: Op,
        rates: &Rates,
    ) -> Result<Self> {
        if let Some(check) = PartCheck::learn(store, src, meta, op, rates).await? {
            return Ok(Expected::Parts(check));
        }
        Ok(Expected::listed(meta))
    }

    /// The hasher for bytes of the object from offset `start`: CRC32C
    /// always (resume journals and uploads keep it), plus whichever other
    /// CRC or part CRCs this needs.
    pub(crate) fn running(&self, start: u64) -> Running {
        match self {
            Expected::Other(other) => Running::new(Some(other.kind())),
            Expected::Parts(check) => Running::new(None).with_parts(Some(check.sums(start))),
            _ => Running::new(None),
        }
    }

    /// What a check that passes says: how the bytes were verified.
    pub(crate) fn verified(&self) -> Verified {
        match self {
            Expected::Crc32c(_) => Verified::Crc32c,
            Expected::Other(o) => o.kind().into(),
            Expected::Parts(check) => Verified::Parts(check.kind()),
            Expected::Md5(_) => Verified::Md5,
            Expected::None => Verified::SizeOnly,
        }
    }

    /// Checks bytes already passed on (streamed): `SizeOnly` when the
    /// checksum cannot be had from what was computed (an MD5, or a CRC
    /// `got` lacks). `tail` ends a mismatch's message (what became of the
    /// bytes).
    pub(crate) fn check(&self, got: &Received, op: Op, url: &str, tail: &str) -> Result<Verified> {
        let differs =
            |want: Checksum, got: Checksum| Err(mismatch(op, url, Mismatch::new(want, got), tail));
        match (self, &got.other, &got.pieces) {
            (Expected::Crc32c(want), _, _) if *want != got.crc32c => {
                differs(Checksum::Crc32c(*want), Checksum::Crc32c(got.crc32c))
            }
            (Expected::Crc32c(_), _, _) => Ok(Verified::Crc32c),
            (Expected::Other(want), Some(mine), _) if want != mine => {
                differs(Checksum::Other(*want), Checksum::Other(*mine))
            }
            (Expected::Other(_), Some(_), _) => Ok(self.verified()),
            (Expected::Parts(check), _, Some(pieces)) => check.check(pieces, op, url, tail),
            _ => Ok(Verified::SizeOnly),
        }
    }

    /// Checks the finished file at `path`: `got` is what was computed as
    /// the bytes arrived, and whatever it lacks (an MD5, the other CRC or
    /// part pieces of slices an earlier run fetched, anything of a local
    /// file `sync --checksum` compares) is read back from the file.
    pub(crate) async fn check_file(
        &self,
        mut got: Received,
        path: &Path,
        url: &str,
        op: Op,
        tail: &str,
    ) -> Result<Verified> {
        match self {
            Expected::Other(want) if got.other.is_none() => {
                let d = read_back(path, url, op, want.kind().digest(), |d, b| d.update(b));
                got.other = Some(d.await?.finish());
            }
            Expected::Parts(check) if got.pieces.is_none() => {
                let s = read_back(path, url, op, check.sums(0), |s, b| s.update(b)).await?;
                got.pieces = Some(s.finish());
            }
            Expected::Md5(_) => {
                use md5::Digest;
                let h = read_back(path, url, op, md5::Md5::new(), |h, b| h.update(b)).await?;
                return self.check_md5(&got, Some(h.finalize().into()), op, url, tail);
            }
            _ => {}
        }
        self.check(&got, op, url, tail)
    }
}

impl Expected {
    /// Checks a whole object held in memory (`buf`): `got` is what its
    /// slices computed as they arrived, and an MD5, which slices cannot
    /// combine, is computed over the buffer (on the blocking pool: it is
    /// the one pass over the bytes not made as they arrived). Gives the
    /// buffer back.
    pub(crate) async fn check_buffer<B: AsRef<[u8]> + Send + 'static>(
        &self,
        got: &Received,
        buf: B,
        op: Op,
        url: &str,
    ) -> Result<(Verified, B)> {
        if !matches!(self, Expected::Md5(_)) {
            return Ok((self.check(got, op, url, "")?, buf));
        }
        let (mine, buf) = tokio::task::spawn_blocking(move || {
            use md5::Digest;
            let mine: [u8; 16] = md5::Md5::digest(buf.as_ref()).into();
            (mine, buf)
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Io, op, url, e.to_string()))?;
        Ok((self.check_md5(got, Some(mine), op, url, "")?, buf))
    }

    /// [`Expected::check`], and an MD5 against `md5` when the caller could
    /// compute one (bytes hashed in order as they were passed on).
    pub(crate) fn check_md5(
        &self,
        got: &Received,
        md5: Option<[u8; 16]>,
        op: Op,
        url: &str,
        tail: &str,
    ) -> Result<Verified> {
        match (self, md5) {
            (Expected::Md5(want), Some(mine)) if *want != mine => {
                let m = Mismatch::new(Checksum::Md5(*want), Checksum::Md5(mine));
                Err(mismatch(op, url, m, tail))
            }
            (Expected::Md5(_), Some(_)) => Ok(Verified::Md5),
            _ => self.check(got, op, url, tail),
        }
    }
}

/// An MD5 computed over bytes passed on in order, when the object's
/// strongest checksum is one (decided at its first bytes, when the
/// checksum to expect is known).
#[derive(Default)]
pub(crate) struct Md5InOrder {
    hasher: Option<Option<md5::Md5>>,
}

impl Md5InOrder {
    /// Adds `data`, the next bytes of an object that expects `expected`.
    pub(crate) fn update(&mut self, expected: impl FnOnce() -> Expected, data: &[u8]) {
        use md5::Digest;
        let h = self
            .hasher
            .get_or_insert_with(|| matches!(expected(), Expected::Md5(_)).then(md5::Md5::new));
        if let Some(h) = h {
            h.update(data);
        }
    }

    /// The digest, if one was computed (or the object was empty and
    /// expects an MD5).
    pub(crate) fn finish(self, expected: &Expected) -> Option<[u8; 16]> {
        use md5::Digest;
        match self.hasher {
            Some(h) => h.map(|h| h.finalize().into()),
            None => matches!(expected, Expected::Md5(_)).then(|| md5::Md5::new().finalize().into()),
        }
    }
}

/// The one error of bytes that do not match their checksum: `what`
/// differs, `tail` says what became of the bytes.
pub(crate) fn mismatch(op: Op, url: &str, what: impl std::fmt::Display, tail: &str) -> Error {
    Error::new(ErrorKind::Integrity, op, url, format!("{what}{tail}"))
        .with_hint("the data was corrupted in transit or the object changed; retry")
}

/// What bytes received give, for one slice or combined over a whole
/// object: their CRC32C, and the other CRC or part pieces when those were
/// computed.
#[derive(Debug, Default, Clone)]
pub(crate) struct Received {
    pub(crate) crc32c: u32,
    pub(crate) len: u64,
    pub(crate) other: Option<OtherCrc>,
    pub(crate) pieces: Option<Vec<PartPiece>>,
}

impl Received {
    /// What one stream's `sums` computed over `len` bytes.
    pub(crate) fn of(mut sums: Running, len: u64) -> Self {
        Received {
            crc32c: sums.crc32c,
            len,
            other: sums.other(),
            pieces: sums.take_parts(),
        }
    }

    /// A slice known only by its CRC32C (one an earlier run recorded).
    pub(crate) fn crc32c(crc32c: u32, len: u64) -> Self {
        Received {
            crc32c,
            len,
            ..Received::default()
        }
    }

    /// The whole from its slices in order: the other CRC or the part
    /// pieces only when every slice computed them.
    pub(crate) fn combine<'a>(slices: impl IntoIterator<Item = &'a Received>) -> Self {
        let slices: Vec<&Received> = slices.into_iter().collect();
        let other = slices.iter().map(|s| s.other).collect::<Option<Vec<_>>>();
        let other = other.and_then(|o| {
            let kind = o.first()?.kind();
            let lens = slices.iter().map(|s| s.len);
            Some(kind.combine_all(o.iter().map(|c| c.value()).zip(lens)))
        });
        let pieces = slices.iter().map(|s| s.pieces.clone());
        Received {
            crc32c: crc32c_combine_all(slices.iter().map(|s| (s.crc32c, s.len))),
            len: slices.iter().map(|s| s.len).sum(),
            other,
            pieces: pieces.collect::<Option<Vec<_>>>().map(|p| p.concat()),
        }
    }
}

/// Whether `meta` (a listing's, a HEAD's) has a whole-object CRC, so that
/// bytes can be checked as they arrive without first asking for more
/// (S3 listings have none: their first request then asks for the whole
/// object, whose headers carry it, and the part list if need be).
pub(crate) fn knows_crc(meta: &ObjectMeta) -> bool {
    matches!(
        meta.checksums.strongest(),
        Some(Checksum::Crc32c(_) | Checksum::Other(_))
    )
}

/// The store's CRC32C of an object it made from bytes we sent (`ours`):
/// equal, or the upload failed.
pub(crate) fn check_sent(stored: &Checksums, ours: u32, url: &str) -> Result<Verified> {
    match stored.crc32c() {
        Some(s) if s != ours => {
            let m = Mismatch::new(Checksum::Crc32c(s), Checksum::Crc32c(ours));
            let m = m.sides("the store computed", "the bytes sent give");
            Err(mismatch(Op::Upload, url, m, ""))
        }
        Some(_) => Ok(Verified::Crc32c),
        None => Ok(Verified::SizeOnly),
    }
}

/// A server-side copy (`copied`) against its source by the strongest
/// checksum both have: how it was checked, or how it differs in the words
/// a copy's error uses (the values for a CRC32C, the algorithm for any
/// other).
pub(crate) fn check_copy(
    source: &Checksums,
    copied: &Checksums,
) -> std::result::Result<Verified, String> {
    match source.common(copied) {
        Some(Ok(c)) => Ok(c.into()),
        None => Ok(Verified::SizeOnly),
        Some(Err(m)) if m.name() == "CRC32C" => {
            Err(format!("has CRC32C {}, the source {}", m.got(), m.want()))
        }
        Some(Err(m)) => Err(format!(
            "has another {} than the source",
            m.name().to_lowercase()
        )),
    }
}

/// The CRC32C the store keeps for an object, when it keeps one: what a
/// report of a copy the server made says was moved.
pub(crate) fn stored_crc32c(meta: &ObjectMeta) -> Option<u32> {
    meta.checksums.crc32c()
}

/// Feeds the file at `path` to `hasher`, 1 MiB at a time on the blocking
/// pool: for a checksum that could not be computed as the bytes arrived,
/// or of a local file. Errors say `op`.
pub(crate) async fn read_back<H: Send + 'static>(
    path: &Path,
    url: &str,
    op: Op,
    mut hasher: H,
    add: fn(&mut H, &[u8]),
) -> Result<H> {
    use std::io::Read;
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut f = File::open(path)?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(hasher);
            }
            add(&mut hasher, &buf[..n]);
        }
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Io, op, url, e.to_string()))?
    .map_err(|e: std::io::Error| Error::io(op, url, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use shoal_core::checksum::CrcKind;

    /// The strongest checksum wins (the order is `Checksums`'s); a
    /// composite one, which needs the part list, is passed over.
    #[test]
    fn the_strongest_checksum_is_expected() {
        let crc64 = CrcKind::Crc64Nvme.checksum(b"x");
        let meta = |checksums| ObjectMeta {
            checksums,
            ..Default::default()
        };
        let all = Checksums::default()
            .with_crc32c(1)
            .with_other_crc(crc64)
            .with_md5([0; 16]);
        assert!(matches!(Expected::listed(&meta(all)), Expected::Crc32c(1)));
        let no_crc32c = all.with_crc32c(None);
        assert!(matches!(Expected::listed(&meta(no_crc32c)), Expected::Other(c) if c == crc64));
        let composite = shoal_core::checksum::Composite::of_parts(PartKind::Crc32, &[1]);
        let md5 = no_crc32c.with_other_crc(None).with_composite(composite);
        assert!(matches!(Expected::listed(&meta(md5)), Expected::Md5(_)));
        assert!(matches!(
            Expected::listed(&ObjectMeta::default()),
            Expected::None
        ));
    }

    /// An upload whose stored CRC32C differs fails in the same words as
    /// a download ("CRC32C mismatch"), as an integrity error.
    #[test]
    fn a_stored_crc_unlike_the_one_sent_fails_in_the_one_wording() {
        let crc = |c: Option<u32>| Checksums::default().with_crc32c(c);
        let e = check_sent(&crc(Some(1)), 2, "s3://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity);
        let msg = e.to_string();
        assert!(
            msg.contains("CRC32C mismatch: the store computed 00000001"),
            "{msg}"
        );
        assert_eq!(check_sent(&crc(Some(2)), 2, "u").unwrap(), Verified::Crc32c);
        assert_eq!(check_sent(&crc(None), 2, "u").unwrap(), Verified::SizeOnly);
    }

    /// Slices hashed from their offsets combine into the whole's sums.
    #[test]
    fn slices_combine_into_the_whole() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let want = Expected::Other(CrcKind::Crc32.checksum(&data));
        let slices: Vec<Received> = [0usize, 1, 40_000, 100_000]
            .windows(2)
            .map(|w| {
                let mut s = want.running(w[0] as u64);
                s.update(&data[w[0]..w[1]]);
                Received::of(s, (w[1] - w[0]) as u64)
            })
            .collect();
        let whole = Received::combine(&slices);
        assert_eq!(whole.crc32c, crc32c::crc32c(&data));
        assert_eq!(whole.len, data.len() as u64);
        assert_eq!(
            want.check(&whole, Op::Read, "u", "").unwrap(),
            Verified::Crc32
        );
        // A slice that did not compute the other CRC (resumed): not known.
        let resumed = [Received::crc32c(slices[0].crc32c, 1), slices[1].clone()];
        assert!(Received::combine(&resumed).other.is_none());
    }

    /// After a resume the other CRC was not computed for every slice: it is
    /// read back from the file, and still refuses a wrong file.
    #[tokio::test]
    async fn a_resumed_file_is_checked_against_its_crc64nvme_by_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &body).unwrap();
        let meta = ObjectMeta {
            size: body.len() as u64,
            checksums: Checksums::default().with_other_crc(CrcKind::Crc64Nvme.checksum(&body)),
            ..Default::default()
        };
        let v = Expected::listed(&meta)
            .check_file(Received::default(), &path, "s3://b/k", Op::Download, "")
            .await
            .unwrap();
        assert_eq!(v, Verified::Crc64Nvme);
        std::fs::write(&path, &body[1..]).unwrap();
        let e = Expected::listed(&meta)
            .check_file(Received::default(), &path, "s3://b/k", Op::Download, "")
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(e.to_string().contains("CRC64NVME mismatch"), "{e}");
    }

    /// The same for a composite checksum: the file is read back cut at
    /// the part boundaries the store gives (here the memory store's).
    #[tokio::test]
    async fn a_resumed_file_is_checked_against_its_composite_by_reading_it() {
        use shoal_core::memory::MemoryStore;
        use shoal_core::{Assemble, PutOptions};
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        store.buckets().unwrap().create_bucket("b").await.unwrap();
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let opts = PutOptions {
            assemble: Assemble::Composite,
            ..Default::default()
        };
        let mp = store.multipart().unwrap();
        let up = mp.multipart_start("b", "k", &opts).await.unwrap();
        let mut parts = Vec::new();
        for (i, c) in body.chunks(1_100_000).enumerate() {
            let crc = crc32c::crc32c(c);
            let data = Bytes::copy_from_slice(c);
            parts.push(
                mp.multipart_put(&up, i as u32 + 1, data, crc)
                    .await
                    .unwrap(),
            );
        }
        let meta = mp.multipart_complete(&up, &parts, None).await.unwrap();
        assert_eq!(meta.checksums.composite().map(|c| c.parts), Some(3));
        let src = Location::parse("s3://b/k").unwrap();
        let check = Expected::learn(&store, &src, &meta, Op::Download, &Default::default())
            .await
            .unwrap();
        assert!(matches!(check, Expected::Parts(_)), "a part list");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, &body).unwrap();
        let v = check.check_file(Received::default(), &path, "s3://b/k", Op::Download, "");
        assert_eq!(
            v.await.unwrap(),
            Verified::Parts(shoal_core::checksum::PartKind::Crc32c)
        );
        let mut bad = body.clone();
        bad[2_500_000] ^= 4;
        std::fs::write(&path, &bad).unwrap();
        let e = check.check_file(Received::default(), &path, "s3://b/k", Op::Download, "");
        let e = e.await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(
            e.to_string().contains("CRC32C mismatch in part 3 of 3"),
            "{e}"
        );
    }
}
