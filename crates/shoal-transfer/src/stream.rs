//! Uploading a body of unknown length: stdin, or another store's object.
//!
//! The first part decides: a body that ends within one part is sent as one
//! PUT; otherwise a multipart upload starts and parts are sent as they fill,
//! up to `workers` at once. Memory is bounded by (workers + 1) × part size,
//! whatever the body's length.
//!
//! Cloud-to-cloud copies go through here too: the source is read as one
//! resuming stream, its CRC32C computed on the way and compared with the
//! source's stored checksum, and the destination's with the same value.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use shoal_core::checksum::crc32c_combine_all;
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{
    BoxByteStream, ByteRange, Error, ErrorKind, Location, Op, PutOptions, Result, Store,
};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::upload::{abort_quietly, check_result, joined};
use crate::{Report, TransferOptions, Verified};

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

/// Uploads `body` to `dst`, choosing one PUT or a multipart upload by size.
pub async fn upload_stream(
    store: Arc<dyn Store>,
    body: BoxByteStream,
    dst: &Location,
    put_opts: &PutOptions,
    opts: &TransferOptions,
) -> Result<Report> {
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

    let upload = (store.multipart_start(&dst.bucket, &dst.key, put_opts))
        .await
        .map_err(|e| e.with_url(&url))?;
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
                let crc = crc32c::crc32c(&data);
                let len = data.len() as u64;
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
        abort_quietly(&store, &upload).await;
        return Err(e);
    }
    parts.sort_by_key(|p| p.part_number);
    let crc = crc32c_combine_all(parts.iter().map(|p| (p.crc32c, p.size)));
    let bytes = parts.iter().map(|p| p.size).sum();
    let meta = match (store.multipart_complete(&upload, &parts, Some(crc))).await {
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
    let meta = (src_store.head(&src.bucket, &src.key))
        .await
        .map_err(|e| e.with_url(&src_url).with_op(Op::Copy))?;
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
    let put_opts = PutOptions {
        content_encoding: meta.content_encoding.clone(),
        ..Default::default()
    };
    let mut report = upload_stream(dst_store, body, dst, &put_opts, opts).await?;
    if report.bytes != meta.size {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Copy,
            src_url,
            format!("read {} bytes, the source has {}", report.bytes, meta.size),
        ));
    }
    if let Some(want) = meta.crc32c {
        if want != report.crc32c {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Copy,
                src_url,
                format!(
                    "CRC32C mismatch reading the source: store {want:08x}, received {:08x}",
                    report.crc32c
                ),
            ));
        }
        report.verified = Verified::Crc32c;
    }
    Ok(report)
}
