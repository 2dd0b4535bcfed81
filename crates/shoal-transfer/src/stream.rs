//! Uploading a body of unknown length: stdin, a special file, or another
//! store's object being copied ([`crate::cloud_copy`]).
//!
//! The first part decides: a body that ends within one part is sent as one
//! PUT; otherwise the rest is cut into parts as it arrives and sent as a
//! multipart upload (`multipart.rs`), or, where the store has no
//! native multipart upload (GCS emulators) or `--gcs-upload resumable`
//! asks, as one resumable session. Memory is bounded by (workers + 1) ×
//! part size, whatever the body's length.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use shoal_core::{BoxByteStream, Error, Location, Op, PutOptions, Result, Store, UploadMethod};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::multipart::Multipart;
use crate::verify::check_sent;
use crate::{Report, Run};

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
    run: &Run,
) -> Result<Report> {
    // A body has no name of its own: its type is guessed from the key.
    let put_opts = &*crate::metadata::typed(put_opts, &dst.key);
    let put_opts = &PutOptions {
        if_not_exists: put_opts.if_not_exists || run.opts.no_clobber,
        ..put_opts.clone()
    };
    // `fill` may ask again after the end: a fused stream keeps answering None.
    let mut body: BoxByteStream = Box::pin(body.fuse());
    let caps = store.capabilities();
    let part = run.opts.part_size.max(caps.min_part_size).max(1) as usize;
    let mut carry = BytesMut::new();
    let first = fill(&mut body, &mut carry, part).await?;
    if first.len() < part && !upload_forced(store.as_ref()) {
        let _slot = run.budgets.permit().await;
        return put_one(&store, dst, first, put_opts, run).await;
    }

    let one_session = match caps.upload_method {
        UploadMethod::Session => true,
        UploadMethod::Auto => !caps.native_multipart,
        UploadMethod::Compose | UploadMethod::Native => false,
    };
    if caps.put_stream && one_session {
        // One resumable session: the first part plus the rest of the body.
        let rest = std::mem::replace(&mut body, Box::pin(futures::stream::empty()));
        let read_ahead = [Ok(first), Ok(carry.split().freeze())];
        let whole: BoxByteStream = Box::pin(futures::stream::iter(read_ahead).chain(rest));
        return put_stream(&store, whole, dst, put_opts, run).await;
    }
    let mut upload = Multipart::start(&store, dst, put_opts, run).await?;
    let fed = feed(&mut upload, first, &mut body, &mut carry, part).await;
    upload.finish(fed, || Ok(())).await
}

/// The way the store was told to take uploads (`--gcs-upload`), when it
/// was told one: honoured at every size, so a small file asked to go
/// resumable is a resumable session, and one asked to compose is a
/// composite of one part.
pub(crate) fn upload_forced(store: &dyn Store) -> bool {
    store.capabilities().upload_method != UploadMethod::Auto
}

/// Uploads `data` as one PUT carrying its CRC32C, which the store's must
/// equal. The caller holds the request slot.
pub(crate) async fn put_one(
    store: &Arc<dyn Store>,
    dst: &Location,
    data: Bytes,
    put: &PutOptions,
    run: &Run,
) -> Result<Report> {
    let url = dst.to_string();
    let crc = shoal_core::checksum::crc32c_append(0, &data);
    let put = PutOptions {
        crc32c: Some(crc),
        ..put.clone()
    };
    let size = data.len() as u64;
    run.budgets.rates.bytes(size).await;
    let put = store.put(&dst.bucket, &dst.key, data, &put);
    let meta = (run.budgets.sending(size, put))
        .await
        .map_err(|e| e.with_url(&url))?;
    Ok(Report {
        resumed: 0,
        bytes: size,
        pieces: 1,
        verified: check_sent(&meta.checksums, crc, &url)?,
        crc32c: crc,
        source_version: None,
    })
}

/// Sends `first` and the rest of `body`, `part` bytes at a time, as the
/// parts of `upload`.
async fn feed(
    upload: &mut Multipart,
    first: Bytes,
    body: &mut BoxByteStream,
    carry: &mut BytesMut,
    part: usize,
) -> Result<()> {
    let mut next = Some(first);
    let mut number = 0u32;
    while let Some(data) = next.take() {
        if data.is_empty() && number > 0 {
            break;
        }
        number += 1;
        let len = data.len() as u64;
        (upload.send(number, len, std::future::ready(Ok(data)), drop)).await?;
        let more = fill(body, carry, part).await?;
        if !more.is_empty() {
            next = Some(more);
        }
    }
    Ok(())
}

/// Uploads `body` in one session ([`Store::put_stream`]), counting progress
/// and checking the stored CRC32C against the bytes sent.
pub(crate) async fn put_stream(
    store: &Arc<dyn Store>,
    body: BoxByteStream,
    dst: &Location,
    put_opts: &PutOptions,
    run: &Run,
) -> Result<Report> {
    let url = dst.to_string();
    let sent = Arc::new(std::sync::Mutex::new((0u32, 0u64)));
    let counted = {
        let sent = sent.clone();
        let run = run.clone();
        // Paced as the store pulls the body: one session, smooth.
        run.budgets.rates.pace(body).inspect(move |chunk| {
            if let Ok(c) = chunk {
                let mut s = sent.lock().unwrap_or_else(|p| p.into_inner());
                s.0 = shoal_core::checksum::crc32c_append(s.0, c);
                s.1 += c.len() as u64;
                run.budgets.add_progress(c.len() as u64);
            }
        })
    };
    let _slot = run.budgets.permit().await;
    let meta = (store.put_stream(&dst.bucket, &dst.key, Box::pin(counted), put_opts))
        .await
        .map_err(|e| e.with_url(&url))?;
    let (crc, bytes) = *sent.lock().unwrap_or_else(|p| p.into_inner());
    let verified = check_sent(&meta.checksums, crc, &url)?;
    Ok(Report {
        resumed: 0,
        bytes,
        pieces: 1,
        verified,
        crc32c: crc,
        source_version: None,
    })
}
