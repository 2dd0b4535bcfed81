//! Copying one object between stores, or within one.
//!
//! Within one store (one endpoint, one set of credentials: the same store
//! value) the server copies ([`Store::copy`]: S3 CopyObject or
//! UploadPartCopy, GCS rewrite), pinned to the version read, and no byte
//! passes through the client; the destination's size and strongest common
//! checksum must then equal the source's ([`verify_copy`]), or the copy is
//! deleted (a server that ignores the pin while the source is replaced
//! would otherwise leave a copy of something else). Otherwise, or with
//! `TransferOptions::server_side` off (`--no-server-side`), the source is
//! read as one resuming stream and uploaded as a body of unknown length
//! ([`crate::stream`]); the body itself fails at its end unless it held
//! the source's size and checksum (`exactly`), so a damaged read
//! abandons the upload before the destination is finalised.

use std::sync::Arc;

use futures::StreamExt;
use shoal_core::checksum::Running;
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{
    BoxByteStream, ByteRange, CopyRequest, Error, ErrorKind, Location, ObjectMeta, Op, PutOptions,
    Result, Store,
};

use crate::stream::upload_stream;
use crate::verify::{self, Expected, PartCheck, Received, Verified};
use crate::{Report, Run};

/// Copies an object between two stores (or within one), streaming.
pub async fn copy_object(
    src_store: Arc<dyn Store>,
    src: &Location,
    dst_store: Arc<dyn Store>,
    dst: &Location,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    copy_from(src_store, src, None, dst_store, dst, run, policy).await
}

/// Copies one stored version of an object (`meta`, from
/// [`shoal_core::VersionStore::head_version`] or a listing of every version), current or
/// not: server-side where the store can (S3 `?versionId=` in the copy
/// source, GCS `sourceGeneration`), else streamed from reads of that
/// version. Restoring an old version over its own key is this copy with
/// the destination pinned by the caller's [`PutOptions::if_match`].
pub(crate) async fn copy_version(
    src_store: Arc<dyn Store>,
    src: &Location,
    meta: &ObjectMeta,
    dst_store: Arc<dyn Store>,
    dst: &Location,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    copy_from(src_store, src, Some(meta), dst_store, dst, run, policy).await
}

async fn copy_from(
    src_store: Arc<dyn Store>,
    src: &Location,
    known: Option<&ObjectMeta>,
    dst_store: Arc<dyn Store>,
    dst: &Location,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    let src_url = src.to_string();
    let meta = match known {
        Some(m) => m.clone(),
        None => {
            run.budgets.rates.request().await;
            (src_store.head(&src.bucket, &src.key))
                .await
                .map_err(|e| e.with_url(&src_url).with_op(Op::Copy))?
        }
    };
    if run.opts.server_side
        && same_store(&src_store, &dst_store)
        && let Some(report) = server_copy(&src_store, src, &meta, dst, run).await?
    {
        return Ok(report);
    }
    let body = resuming_stream(
        src_store.clone(),
        &src.bucket,
        &src.key,
        &src_url,
        ByteRange::new(0, meta.size),
        meta.version.clone(),
        None,
        *policy,
    );
    // A short or damaged read must fail the body itself, so the upload is
    // abandoned before the destination object is finalised.
    let expected = Expected::learn(&src_store, src, &meta, Op::Copy, &run.budgets.rates).await?;
    let body = exactly(body, meta.size, expected.clone(), &src_url);
    // The source's type, encoding and metadata, unless asked otherwise.
    let put_opts = run.opts.put.keeping(&meta);
    let mut report = upload_stream(dst_store, body, dst, &put_opts, run).await?;
    report.source_version = meta.version.clone();
    if report.bytes != meta.size {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Copy,
            src_url,
            format!("read {} bytes, the source has {}", report.bytes, meta.size),
        ));
    }
    // `exactly` failed the body unless the checksum it checked matched;
    // a CRC32C is checked once more, on what the upload computed.
    report.verified = match &expected {
        Expected::Crc32c(_) => {
            let sent = Received::crc32c(report.crc32c, report.bytes);
            expected.check(&sent, Op::Copy, &src_url, " reading the source")?
        }
        Expected::Md5(_) | Expected::None => report.verified,
        checked => checked.verified(),
    };
    Ok(report)
}

/// Whether two stores are one (one endpoint, one set of credentials): what
/// a server-side copy needs. Stores are built once per scheme and shared,
/// so this is the same value, not an equal one.
pub fn same_store(a: &Arc<dyn Store>, b: &Arc<dyn Store>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// A copy made by the server ([`Store::copy`]), pinned to the version
/// `meta` describes, keeping the source's metadata unless the options
/// override it. None: the store cannot, so the caller streams.
async fn server_copy(
    store: &Arc<dyn Store>,
    src: &Location,
    meta: &ObjectMeta,
    dst: &Location,
    run: &Run,
) -> Result<Option<Report>> {
    let put_opts = PutOptions {
        if_not_exists: run.opts.put.if_not_exists || run.opts.no_clobber,
        ..run.opts.put.keeping(meta)
    };
    let requests = std::sync::atomic::AtomicUsize::new(0);
    let req = CopyRequest {
        src_bucket: &src.bucket,
        src_key: &src.key,
        src: meta,
        dst_bucket: &dst.bucket,
        dst_key: &dst.key,
        opts: &put_opts,
        replace_metadata: run.opts.put.overrides_metadata(),
        part_size: run.opts.part_size,
        workers: run.opts.workers,
        requests: Some(&requests),
    };
    let copied = {
        let _slot = run.budgets.permit().await;
        store.copy(&req).await
    };
    let copied = match copied {
        Err(e) if e.kind() == ErrorKind::Unsupported => return Ok(None),
        r => r?,
    };
    let (src_url, dst_url) = (src.to_string(), dst.to_string());
    let checked = match verify_copy(meta, &copied, &src_url, &dst_url) {
        Ok(Verified::SizeOnly) => {
            let sums = &copied.checksums;
            match PartCheck::check_copy(store, src, meta, sums, &run.budgets.rates).await? {
                Ok(v) => Ok(v),
                Err(what) => Err(copy_changed(&src_url, &dst_url, &what)),
            }
        }
        r => r,
    };
    let verified = match checked {
        Ok(v) => v,
        Err(e) => {
            // Not the source's bytes (a server that ignored the pin while
            // the source was replaced): not left behind as a copy of it.
            if let Err(d) = store.delete(&dst.bucket, &dst.key).await {
                tracing::debug!("deleting a copy that failed its check: {d}");
            }
            return Err(e);
        }
    };
    run.budgets.add_progress(meta.size);
    Ok(Some(Report {
        resumed: 0,
        bytes: meta.size,
        pieces: requests.into_inner().max(1),
        verified,
        crc32c: (verify::stored_crc32c(&copied))
            .or(verify::stored_crc32c(meta))
            .unwrap_or(0),
        source_version: meta.version.clone(),
    }))
}

/// The destination of a server-side copy against its source: the same
/// size, and the strongest checksum both give (`verify::check_copy`) equal.
pub(crate) fn verify_copy(
    src: &ObjectMeta,
    dst: &ObjectMeta,
    src_url: &str,
    dst_url: &str,
) -> Result<Verified> {
    if dst.size != src.size {
        let what = format!("has {} bytes, the source {}", dst.size, src.size);
        return Err(copy_changed(src_url, dst_url, &what));
    }
    verify::check_copy(&src.checksums, &dst.checksums)
        .map_err(|what| copy_changed(src_url, dst_url, &what))
}

/// A server-side copy that is not of the source read: `what` says how.
fn copy_changed(src_url: &str, dst_url: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::Changed,
        Op::Copy,
        src_url,
        format!("the copy at {dst_url} {what}; it was removed"),
    )
    .with_hint("the source was probably replaced while it was copied; run the command again")
}

/// Passes `body` through and, at its end, fails it unless it held exactly
/// `size` bytes matching the checksum `expected`.
fn exactly(body: BoxByteStream, size: u64, expected: Expected, url: &str) -> BoxByteStream {
    let url = url.to_owned();
    let sums = expected.running(0);
    let state = (body, 0u64, sums, false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut body, n, mut sums, done)| {
            let url = url.clone();
            let expected = expected.clone();
            async move {
                if done {
                    return None;
                }
                match body.next().await {
                    Some(Ok(chunk)) => {
                        sums.update(&chunk);
                        let n = n + chunk.len() as u64;
                        Some((Ok(chunk), (body, n, sums, false)))
                    }
                    Some(Err(e)) => Some((Err(e), (body, n, sums, true))),
                    None => match at_end(n, size, &expected, std::mem::take(&mut sums), &url) {
                        Ok(()) => None,
                        Err(e) => Some((Err(e), (body, n, sums, true))),
                    },
                }
            }
        },
    ))
}

/// The end-of-body checks of [`exactly`].
fn at_end(n: u64, size: u64, expected: &Expected, sums: Running, url: &str) -> Result<()> {
    if n != size {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Copy,
            url,
            format!("read {n} bytes, the source has {size}; nothing was written"),
        ));
    }
    let got = Received::of(sums, n);
    let tail = " reading the source; nothing was written";
    expected.check(&got, Op::Copy, url, tail).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use shoal_core::checksum::OtherCrc;

    fn body(parts: &[&'static [u8]]) -> BoxByteStream {
        let v: Vec<Result<Bytes>> = parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Box::pin(futures::stream::iter(v))
    }

    /// Drains `exactly` over `parts`, a source of 6 bytes.
    async fn drain(
        parts: &[&'static [u8]],
        crc: Option<u32>,
        other: Option<OtherCrc>,
    ) -> (Vec<u8>, Option<Error>) {
        let expected = match (crc, other) {
            (Some(crc), _) => Expected::Crc32c(crc),
            (None, Some(other)) => Expected::Other(other),
            (None, None) => Expected::None,
        };
        let mut s = exactly(body(parts), 6, expected, "s3://b/k");
        let mut out = Vec::new();
        while let Some(x) = s.next().await {
            match x {
                Ok(b) => out.extend_from_slice(&b),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    #[tokio::test]
    async fn exactly_fails_a_short_or_damaged_body_at_its_end() {
        let crc = crc32c::crc32c(b"abcdef");
        let (out, err) = drain(&[b"abc", b"def"], Some(crc), None).await;
        assert_eq!(out, b"abcdef");
        assert!(err.is_none());

        let (_, err) = drain(&[b"abc", b"de"], None, None).await;
        let e = err.expect("short body fails");
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(
            e.to_string().contains("read 5 bytes, the source has 6"),
            "{e}"
        );

        let (_, err) = drain(&[b"abc", b"deX"], Some(crc), None).await;
        assert!(
            err.expect("crc mismatch")
                .to_string()
                .contains("CRC32C mismatch")
        );

        // A source with only a CRC64NVME (what AWS stores by default).
        let want = shoal_core::checksum::CrcKind::Crc64Nvme.checksum(b"abcdef");
        let (out, err) = drain(&[b"ab", b"cdef"], None, Some(want)).await;
        assert_eq!(out, b"abcdef");
        assert!(err.is_none(), "{err:?}");
        let (_, err) = drain(&[b"ab", b"cdeX"], None, Some(want)).await;
        let e = err.expect("crc64nvme mismatch");
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(e.to_string().contains("CRC64NVME mismatch"), "{e}");
    }
}
