//! `hash`: the CRC32C and MD5 of files and objects, as the stores keep
//! them.
//!
//! A local file is read once, in 1 MiB blocks on a blocking thread, both
//! sums fed from the same block (CRC32C with crc-fast's folding kernels,
//! MD5 with md-5), so a file costs one pass at disk speed; many files are
//! read at once ([`hash_all`]), up to the run's workers. An object's sums
//! are the store's (one HEAD): GCS keeps both (a composed object no MD5),
//! S3 a CRC32C when the writer sent one and an MD5 only as the ETag of a
//! single-part, unencrypted upload. What the store does not keep is said
//! to be missing, never made up; `compute` reads the object's bytes
//! (pinned to the version the HEAD saw) and computes both, and then also
//! checks them against those the store keeps.

use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use shoal_core::{ByteRange, Error, ErrorKind, Location, Op, Result, StoreFor};

use crate::rate::Rates;

/// The sums of one file or object, each absent when the store keeps none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sums {
    /// What was hashed, as given.
    pub url: String,
    /// Its size in bytes.
    pub size: u64,
    /// CRC32C of the bytes.
    pub crc32c: Option<u32>,
    /// MD5 of the bytes.
    pub md5: Option<[u8; 16]>,
    /// Computed from the bytes (a local file, `compute`), not the store's.
    pub computed: bool,
}

/// Both sums fed from the same bytes.
#[derive(Default)]
pub(crate) struct Both {
    crc: u32,
    md5: md5::Md5,
    size: u64,
}

impl Both {
    pub(crate) fn update(&mut self, b: &[u8]) {
        use md5::Digest;
        self.crc = shoal_core::checksum::crc32c_append(self.crc, b);
        self.md5.update(b);
        self.size += b.len() as u64;
    }

    pub(crate) fn finish(self, url: &str) -> Sums {
        use md5::Digest;
        Sums {
            url: url.to_owned(),
            size: self.size,
            crc32c: Some(self.crc),
            md5: Some(self.md5.finalize().into()),
            computed: true,
        }
    }
}

/// The sums of the local file `path`, read once on a blocking thread.
pub(crate) async fn hash_file(path: &str) -> Result<Sums> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let fail = |e| Error::io(Op::Read, &path, e);
        let mut f = std::fs::File::open(&path).map_err(fail)?;
        if f.metadata().map_err(fail)?.is_dir() {
            return Err(Error::invalid(Op::Read, &path, "is a folder")
                .with_hint("hash takes files and objects; list a folder's files to hash them"));
        }
        let mut buf = vec![0u8; 1 << 20];
        let mut both = Both::default();
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => both.update(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(e)),
            }
        }
        Ok(both.finish(&path))
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Io, Op::Read, "a hash task", e.to_string()))?
}

/// The sums the store keeps for the object `loc` (one HEAD), or with
/// `compute` those of its bytes, read whole and checked against the
/// store's.
pub(crate) async fn hash_object(
    loc: &Location,
    compute: bool,
    store_for: &StoreFor,
    rates: &Rates,
) -> Result<Sums> {
    let url = loc.to_string();
    let store = store_for(loc)?;
    rates.request().await;
    let meta = (store.head(&loc.bucket, &loc.key))
        .await
        .map_err(|e| e.with_url(&url).with_op(Op::Stat))?;
    let kept = Sums {
        url: url.clone(),
        size: meta.size,
        crc32c: meta.checksums.crc32c(),
        md5: meta.checksums.md5(),
        computed: false,
    };
    if !compute {
        return Ok(kept);
    }
    let got = read_sums(&store, loc, &meta, rates).await?;
    let differs = |what: &str, kept: String, read: String| {
        Error::new(
            ErrorKind::Integrity,
            Op::Read,
            &url,
            format!("the bytes read have {what} {read}, the store keeps {kept}"),
        )
        .with_hint("the object is damaged or was replaced while read; read it again")
    };
    if let (Some(k), Some(r)) = (kept.crc32c, got.crc32c)
        && k != r
    {
        return Err(differs("CRC32C", format!("{k:08x}"), format!("{r:08x}")));
    }
    if let (Some(k), Some(r)) = (kept.md5, got.md5)
        && k != r
    {
        let hex = shoal_core::checksum::hex;
        return Err(differs("MD5", hex(&k), hex(&r)));
    }
    Ok(got)
}

/// Reads the object `loc` whole, pinned to the version `meta` says, and
/// computes both sums of its bytes as stored (no decoding).
pub(crate) async fn read_sums(
    store: &Arc<dyn shoal_core::Store>,
    loc: &Location,
    meta: &shoal_core::ObjectMeta,
    rates: &Rates,
) -> Result<Sums> {
    let url = loc.to_string();
    let mut both = Both::default();
    if meta.size > 0 {
        rates.request().await;
        let got = (store.get(
            &loc.bucket,
            &loc.key,
            ByteRange::from(0),
            meta.version.as_ref(),
        ))
        .await
        .map_err(|e| e.with_url(&url).with_op(Op::Read))?;
        let mut body = got.body;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| e.with_url(&url))?;
            rates.bytes(chunk.len() as u64).await;
            both.update(&chunk);
        }
    }
    if both.size != meta.size {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Read,
            &url,
            format!("read {} bytes of {}", both.size, meta.size),
        )
        .with_hint("the object changed while read; read it again"));
    }
    Ok(both.finish(&url))
}

/// The sums of every URL (local files and objects), in the order given,
/// `at_once` of them read at a time; each its own result.
pub fn hash_all(
    urls: Vec<Location>,
    compute: bool,
    store_for: StoreFor,
    rates: Rates,
    at_once: usize,
) -> BoxStream<'static, Result<Sums>> {
    futures::stream::iter(urls)
        .map(move |loc| {
            let (store_for, rates) = (store_for.clone(), rates.clone());
            async move {
                if loc.is_local() {
                    hash_file(&loc.key).await
                } else {
                    hash_object(&loc, compute, &store_for, &rates).await
                }
            }
        })
        .buffered(at_once.max(1))
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_is_read_once_for_both() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let s = hash_file(p.to_str().unwrap()).await.unwrap();
        assert_eq!(s.size, data.len() as u64);
        assert_eq!(s.crc32c, Some(crc32c::crc32c(&data)));
        assert_eq!(s.md5, Some(shoal_core::checksum::md5_digest(&data)));
        let e = hash_file(dir.path().to_str().unwrap()).await.unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
    }
}
