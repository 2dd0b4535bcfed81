//! Uploading a body of unknown length: stdin, or another store's object.
//!
//! The first part decides: a body that ends within one part is sent as one
//! PUT; otherwise a multipart upload starts and parts are sent as they fill,
//! up to `workers` at once. Memory is bounded by (workers + 1) × part size,
//! whatever the body's length.
//!
//! Cloud-to-cloud copies go through here too. Within one store (one
//! endpoint, one set of credentials: the same store value) the server
//! copies ([`Store::copy`]: S3 CopyObject or UploadPartCopy, GCS rewrite),
//! pinned to the version read, and no byte passes through the client; the
//! destination's checksum must then equal the source's. Otherwise, or with
//! `TransferOptions::server_side` off (`--no-server-side`), the source is
//! read as one resuming stream, its CRC32C computed on the way and
//! compared with the source's stored checksum, and the destination's with
//! the same value.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use shoal_core::checksum::{CrcKind, OtherCrc, PartKind, Running, crc32c_combine_all};
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{
    BoxByteStream, ByteRange, CopyRequest, Error, ErrorKind, Location, ObjectMeta, Op, PutOptions,
    Result, Store,
};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::composite::PartCheck;
use crate::download::{Received, check_received};
use crate::upload::{abort_quietly, check_result, joined};
use crate::{GcsUpload, Report, TransferOptions, Verified};

/// Reads `reader` as a stream of chunks of up to 1 MiB.
pub fn reader_stream<R: AsyncRead + Send + Unpin + 'static>(
    reader: R,
    name: &str,
) -> BoxByteStream {
    let name = name.to_owned();
    futures::stream::unfold((reader, name, false), |(mut r, name, done)| async move {
        if done {
            return None;
        }
        let mut buf = BytesMut::with_capacity(1 << 20);
        loop {
            match r.read_buf(&mut buf).await {
                Ok(0) if buf.is_empty() => return None,
                Ok(0) => return Some((Ok(buf.freeze()), (r, name, true))),
                Ok(_) if buf.len() >= (1 << 20) - 4096 => {
                    return Some((Ok(buf.freeze()), (r, name, false)));
                }
                Ok(_) => continue,
                Err(e) => return Some((Err(Error::io(Op::Read, &name, e)), (r, name, true))),
            }
        }
    })
    .fuse()
    .boxed()
}

/// Fills a buffer of `size` bytes from `body` (fewer at its end).
async fn fill(body: &mut BoxByteStream, carry: &mut BytesMut, size: usize) -> Result<Bytes> {
    while carry.len() < size {
        match body.next().await {
            Some(chunk) => carry.extend_from_slice(&chunk?),
            None => break,
        }
    }
    let n = carry.len().min(size);
    Ok(carry.split_to(n).freeze())
}

/// Uploads `body` to `dst`, choosing one PUT or a multipart upload by size,
/// storing what `put_opts` asks (a type guessed from the key where it sets
/// none).
pub async fn upload_stream(
    store: Arc<dyn Store>,
    body: BoxByteStream,
    dst: &Location,
    put_opts: &PutOptions,
    opts: &TransferOptions,
) -> Result<Report> {
    // A body has no name of its own: its type is guessed from the key.
    let put_opts = &*crate::metadata::typed(put_opts, &dst.key);
    let put_opts = &PutOptions {
        if_not_exists: put_opts.if_not_exists || opts.no_clobber,
        ..put_opts.clone()
    };
    // `fill` may ask again after the end: a fused stream keeps answering None.
    let mut body: BoxByteStream = Box::pin(body.fuse());
    let url = dst.to_string();
    let caps = store.capabilities().clone();
    let part = opts.part_size.max(caps.min_part_size).max(1) as usize;
    let mut carry = BytesMut::new();
    let first = fill(&mut body, &mut carry, part).await?;
    if first.len() < part {
        let crc = crc32c::crc32c(&first);
        let put = PutOptions {
            crc32c: Some(crc),
            ..put_opts.clone()
        };
        let _slot = opts.permit().await;
        opts.rates.bytes(first.len() as u64).await;
        let meta = (store.put(&dst.bucket, &dst.key, first.clone(), &put))
            .await
            .map_err(|e| e.with_url(&url))?;
        opts.add_progress(first.len() as u64);
        let verified = check_result(meta.crc32c, crc, &url)?;
        return Ok(Report {
            resumed: 0,
            bytes: first.len() as u64,
            pieces: 1,
            verified,
            crc32c: crc,
        });
    }

    let one_session = match opts.gcs_upload {
        GcsUpload::Resumable => true,
        GcsUpload::Auto => !caps.native_multipart,
        GcsUpload::Compose | GcsUpload::Xml => false,
    };
    if store.supports_put_stream() && one_session {
        // One resumable session: the first part plus the rest of the body.
        let rest = std::mem::replace(&mut body, Box::pin(futures::stream::empty()));
        let read_ahead = [Ok(first), Ok(carry.split().freeze())];
        let whole: BoxByteStream = Box::pin(futures::stream::iter(read_ahead).chain(rest));
        return put_stream(&store, whole, dst, put_opts, opts).await;
    }
    opts.rates.request().await;
    let start_opts = PutOptions {
        assemble: opts.gcs_upload.assemble(),
        ..put_opts.clone()
    };
    let upload = (store.multipart_start(&dst.bucket, &dst.key, &start_opts))
        .await
        .map_err(|e| e.with_url(&url))?;
    // Dropped (Ctrl-C, a cancelled task) before it completes: aborted.
    let guard = crate::cleanup::AbortUpload::new(&store, &upload);
    let sem = Arc::new(tokio::sync::Semaphore::new(opts.workers.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let mut parts = Vec::new();
    let mut next = Some(first);
    let mut number = 0u32;
    let outcome: Result<()> = async {
        while let Some(data) = next.take() {
            if data.is_empty() && number > 0 {
                break;
            }
            number += 1;
            if number > caps.max_parts {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    Op::Upload,
                    &url,
                    format!("more than {} parts of {part} bytes", caps.max_parts),
                )
                .with_hint("raise --part-size"));
            }
            let permit = sem
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore never closed");
            while let Some(done) = tasks.try_join_next() {
                parts.push(joined(done, &url)?);
            }
            let (store, upload, opts, url2) =
                (store.clone(), upload.clone(), opts.clone(), url.clone());
            let n = number;
            tasks.spawn(async move {
                let _permit = permit;
                let _slot = opts.permit().await;
                let len = data.len() as u64;
                opts.rates.bytes(len).await;
                let crc = crc32c::crc32c(&data);
                let info = (store.multipart_put(&upload, n, data.clone(), crc))
                    .await
                    .map_err(|e| e.with_url(&url2))?;
                opts.add_progress(len);
                Ok::<_, Error>(info)
            });
            let more = fill(&mut body, &mut carry, part).await?;
            if !more.is_empty() {
                next = Some(more);
            }
        }
        while let Some(done) = tasks.join_next().await {
            parts.push(joined(done, &url)?);
        }
        Ok(())
    }
    .await;
    if let Err(e) = outcome {
        tasks.abort_all();
        guard.disarm();
        abort_quietly(&store, &upload).await;
        return Err(e);
    }
    parts.sort_by_key(|p| p.part_number);
    let crc = crc32c_combine_all(parts.iter().map(|p| (p.crc32c, p.size)));
    let bytes = parts.iter().map(|p| p.size).sum();
    opts.rates.request().await;
    let completed = store.multipart_complete(&upload, &parts, Some(crc)).await;
    guard.disarm();
    let meta = match completed {
        Ok(m) => m,
        Err(e) => {
            abort_quietly(&store, &upload).await;
            return Err(e.with_url(&url));
        }
    };
    let verified = check_result(meta.crc32c, crc, &url)?;
    Ok(Report {
        resumed: 0,
        bytes,
        pieces: parts.len(),
        verified,
        crc32c: crc,
    })
}

/// Copies an object between two stores (or within one), streaming.
pub async fn copy_object(
    src_store: Arc<dyn Store>,
    src: &Location,
    dst_store: Arc<dyn Store>,
    dst: &Location,
    opts: &TransferOptions,
    policy: &RetryPolicy,
) -> Result<Report> {
    let src_url = src.to_string();
    opts.rates.request().await;
    let meta = (src_store.head(&src.bucket, &src.key))
        .await
        .map_err(|e| e.with_url(&src_url).with_op(Op::Copy))?;
    if opts.server_side
        && same_store(&src_store, &dst_store)
        && let Some(report) = server_copy(&src_store, src, &meta, dst, opts).await?
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
    let other = meta.other_crc_to_check();
    let parts = PartCheck::learn(&src_store, src, &meta, Op::Copy, &opts.rates).await?;
    let parts_kind = parts.as_ref().map(PartCheck::kind);
    let body = exactly(body, meta.size, meta.crc32c, other, parts, &src_url);
    // The source's type, encoding and metadata, unless asked otherwise.
    let put_opts = opts.put.keeping(&meta);
    let mut report = upload_stream(dst_store, body, dst, &put_opts, opts).await?;
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
    let sent = Received {
        crc32c: report.crc32c,
        ..Received::default()
    };
    let again = check_received(
        meta.crc32c,
        None,
        None,
        &sent,
        Op::Copy,
        &src_url,
        " reading the source",
    )?;
    report.verified = match (again, other, parts_kind) {
        (Some(v), _, _) => v,
        (None, Some(want), _) => want.kind().into(),
        (None, None, Some(kind)) => Verified::Parts(kind),
        (None, None, None) => report.verified,
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
    opts: &TransferOptions,
) -> Result<Option<Report>> {
    let put_opts = PutOptions {
        if_not_exists: opts.put.if_not_exists || opts.no_clobber,
        ..opts.put.keeping(meta)
    };
    let req = CopyRequest {
        src_bucket: &src.bucket,
        src_key: &src.key,
        src: meta,
        dst_bucket: &dst.bucket,
        dst_key: &dst.key,
        opts: &put_opts,
        replace_metadata: opts.put.overrides_metadata(),
        part_size: opts.part_size,
        workers: opts.workers,
    };
    let copied = {
        let _slot = opts.permit().await;
        store.copy(&req).await
    };
    let copied = match copied {
        Err(e) if e.kind() == ErrorKind::Unsupported => return Ok(None),
        r => r?,
    };
    let checked = match verify_copy(meta, &copied, &src.to_string(), &dst.to_string()) {
        Ok(Verified::SizeOnly) => verify_composite_copy(store, src, meta, &copied, dst, opts).await,
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
    opts.add_progress(meta.size);
    Ok(Some(Report {
        resumed: 0,
        bytes: meta.size,
        pieces: 1,
        verified,
        crc32c: copied.crc32c.or(meta.crc32c).unwrap_or(0),
    }))
}

/// A source whose only checksum is composite (an S3 multipart upload's
/// `xxxx-N`) against the whole-object CRC its copy was asked to keep: the
/// parts' CRCs must compose into the source's and combine into the
/// copy's. Size only when either side cannot say.
async fn verify_composite_copy(
    store: &Arc<dyn Store>,
    src: &Location,
    meta: &ObjectMeta,
    copied: &ObjectMeta,
    dst: &Location,
    opts: &TransferOptions,
) -> Result<Verified> {
    let Some(composite) = meta.composite else {
        return Ok(Verified::SizeOnly);
    };
    let whole = match composite.kind {
        PartKind::Crc32c => copied.crc32c,
        PartKind::Crc32 => (copied.other_crc)
            .filter(|c| c.kind() == CrcKind::Crc32)
            .map(|c| c.value() as u32),
    };
    let Some(whole) = whole else {
        return Ok(Verified::SizeOnly);
    };
    let Some(check) = PartCheck::learn(store, src, meta, Op::Copy, &opts.rates).await? else {
        return Ok(Verified::SizeOnly);
    };
    match check.matches_whole(whole) {
        Some(true) => Ok(Verified::Parts(composite.kind)),
        None => Ok(Verified::SizeOnly),
        Some(false) => Err(Error::new(
            ErrorKind::Changed,
            Op::Copy,
            src.to_string(),
            format!(
                "the copy at {dst} has a {} that does not match the source's parts ({composite}); it was removed",
                composite.kind.name()
            ),
        )
        .with_hint("the source was probably replaced while it was copied; run the command again")),
    }
}

/// The destination of a server-side copy against its source: the same
/// size, and the strongest checksum both give (CRC32C, then CRC32 or
/// CRC64NVME, then MD5) equal.
pub fn verify_copy(
    src: &ObjectMeta,
    dst: &ObjectMeta,
    src_url: &str,
    dst_url: &str,
) -> Result<Verified> {
    let mismatch = |what: String| {
        Err(Error::new(
            ErrorKind::Changed,
            Op::Copy,
            src_url,
            format!("the copy at {dst_url} {what}; it was removed"),
        )
        .with_hint("the source was probably replaced while it was copied; run the command again"))
    };
    if dst.size != src.size {
        return mismatch(format!("has {} bytes, the source {}", dst.size, src.size));
    }
    if let (Some(a), Some(b)) = (src.crc32c, dst.crc32c) {
        if a != b {
            return mismatch(format!("has CRC32C {b:08x}, the source {a:08x}"));
        }
        return Ok(Verified::Crc32c);
    }
    if let (Some(a), Some(b)) = (src.other_crc, dst.other_crc)
        && a.kind() == b.kind()
    {
        if a != b {
            return mismatch(format!("has another {:?} than the source", a.kind()));
        }
        return Ok(a.kind().into());
    }
    if let (Some(a), Some(b)) = (src.md5, dst.md5) {
        if a != b {
            return mismatch("has another MD5 than the source".into());
        }
        return Ok(Verified::Md5);
    }
    Ok(Verified::SizeOnly)
}

/// Passes `body` through and, at its end, fails it unless it held exactly
/// `size` bytes with CRC32C `crc`, the `other` CRC, and the composite
/// checksum `parts` checks (each when known).
fn exactly(
    body: BoxByteStream,
    size: u64,
    crc: Option<u32>,
    other: Option<OtherCrc>,
    parts: Option<PartCheck>,
    url: &str,
) -> BoxByteStream {
    let url = url.to_owned();
    let sums =
        Running::new(other.map(OtherCrc::kind)).with_parts(parts.as_ref().map(|c| c.sums(0)));
    let state = (body, 0u64, sums, false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut body, n, mut sums, done)| {
            let url = url.clone();
            let parts = parts.clone();
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
                    None => match at_end(n, size, crc, other, parts.as_ref(), &mut sums, &url) {
                        Ok(()) => None,
                        Err(e) => Some((Err(e), (body, n, sums, true))),
                    },
                }
            }
        },
    ))
}

/// The end-of-body checks of [`exactly`].
fn at_end(
    n: u64,
    size: u64,
    crc: Option<u32>,
    other: Option<OtherCrc>,
    parts: Option<&PartCheck>,
    sums: &mut Running,
    url: &str,
) -> Result<()> {
    if n != size {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Copy,
            url,
            format!("read {n} bytes, the source has {size}; nothing was written"),
        ));
    }
    let got = Received::of(std::mem::take(sums));
    let tail = " reading the source; nothing was written";
    check_received(crc, other, parts, &got, Op::Copy, url, tail).map(drop)
}

/// Uploads `body` in one session ([`Store::put_stream`]), counting progress
/// and checking the stored CRC32C against the bytes sent.
pub(crate) async fn put_stream(
    store: &Arc<dyn Store>,
    body: BoxByteStream,
    dst: &Location,
    put_opts: &PutOptions,
    opts: &TransferOptions,
) -> Result<Report> {
    let url = dst.to_string();
    let sent = Arc::new(std::sync::Mutex::new((0u32, 0u64)));
    let counted = {
        let sent = sent.clone();
        let opts = opts.clone();
        // Paced as the store pulls the body: one session, smooth.
        opts.rates.pace(body).inspect(move |chunk| {
            if let Ok(c) = chunk {
                let mut s = sent.lock().unwrap_or_else(|p| p.into_inner());
                s.0 = shoal_core::checksum::crc32c_append(s.0, c);
                s.1 += c.len() as u64;
                opts.add_progress(c.len() as u64);
            }
        })
    };
    let _slot = opts.permit().await;
    let meta = (store.put_stream(&dst.bucket, &dst.key, Box::pin(counted), put_opts))
        .await
        .map_err(|e| e.with_url(&url))?;
    let (crc, bytes) = *sent.lock().unwrap_or_else(|p| p.into_inner());
    let verified = check_result(meta.crc32c, crc, &url)?;
    Ok(Report {
        resumed: 0,
        bytes,
        pieces: 1,
        verified,
        crc32c: crc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut s = exactly(body(parts), 6, crc, other, None, "s3://b/k");
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
