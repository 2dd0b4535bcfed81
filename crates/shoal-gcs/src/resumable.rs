//! One stream of unknown length as a GCS resumable upload.
//!
//! For data whose size is not known in advance (a pipe, a generator), the
//! composite upload does not fit (it needs the parts' boundaries up front
//! to parallelise) and a single multipart request would need the whole
//! body in memory. A resumable session takes the stream chunk by chunk:
//!
//! 1. `POST ...?uploadType=resumable` with the object's metadata returns a
//!    session URL (in `Location`).
//! 2. Each chunk is a `PUT` with `Content-Range: bytes a-b/*`; the server
//!    answers 308 with `Range: bytes=0-N`, what it has persisted. Every
//!    chunk but the last must be a multiple of 256 KiB (a GCS rule).
//! 3. The last chunk carries the total (`bytes a-b/TOTAL`), and the answer
//!    is the object resource.
//!
//! Incoming pieces are re-cut into chunks of [`RESUMABLE_CHUNK_SIZE`]; a chunk is
//! only sent once more data is known to follow, so the last request is
//! never empty and always carries the total. A stream that ends before the
//! first chunk fills is sent as an ordinary single-request upload, except
//! through [`shoal_core::Store::put_stream`], whose callers chose a session
//! (`--gcs-upload resumable` is honoured at every size, empty included).
//!
//! A failed chunk is retried by asking the session what it persisted
//! (`Content-Range: bytes */*`) and resending from there; the chunk is
//! still in memory, and GCS persists in 256 KiB units, so the rest is still
//! a valid chunk. (fake-gcs-server gets this wrong: its status query
//! finalises the object. Only retries are affected.)
//!
//! Integrity: a running CRC32C of everything read is compared with the
//! caller's expected one before the session is finalised (a mismatch
//! cancels the session, so nothing is stored), sent as the object's
//! `crc32c` so GCS checks it too, and compared with what the server
//! reports afterwards.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use reqwest::header::{CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, LOCATION};
use shoal_core::{Error, ErrorKind, ObjectMeta, ObjectVersion, Op, PutOptions, Result};
use shoal_http::http::{error_from_reqwest, error_from_response};

use crate::GcsStore;
use crate::client::{Client, Query, gs_url, json_error_message, protocol};
use crate::list::parse_object;
use crate::object::{check_stored_crc, object_metadata};

/// GCS's unit: every chunk but the last is a multiple of it.
const UNIT: usize = 256 * 1024;

/// Bytes per request: 64 units. Large enough that per-request latency
/// (tens of ms) is small next to the transfer of a chunk at hundreds of
/// MB/s, small enough that one stream holds little memory; Google
/// recommends at least 8 MiB.
pub const RESUMABLE_CHUNK_SIZE: usize = 64 * UNIT;

impl GcsStore {
    /// Uploads one stream of unknown length through a resumable session.
    /// `opts.crc32c`, when given, is checked before the object is
    /// finalised; `opts.md5` is sent for the server to check.
    pub async fn resumable_upload(
        &self,
        bucket: &str,
        key: &str,
        chunks: impl Stream<Item = Result<Bytes>>,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        self.client
            .resumable_upload(bucket, key, chunks, opts, RESUMABLE_CHUNK_SIZE, false)
            .await
    }
}

/// What a chunk request achieved.
enum ChunkResult {
    /// The server has bytes `[0, persisted)`.
    Partial(u64),
    /// The object is complete (the body is its resource).
    Done(Bytes),
}

impl Client {
    pub(crate) async fn resumable_upload(
        &self,
        bucket: &str,
        key: &str,
        chunks: impl Stream<Item = Result<Bytes>>,
        opts: &PutOptions,
        chunk_size: usize,
        always_session: bool,
    ) -> Result<ObjectMeta> {
        let url = gs_url(bucket, key);
        let mut chunks = std::pin::pin!(chunks);
        let mut buf = BytesMut::new();
        let mut crc = 0u32;
        let mut offset = 0u64; // bytes acknowledged by the session
        let mut session: Option<String> = None;
        loop {
            let next = chunks.next().await.transpose()?;
            if let Some(piece) = &next {
                crc = shoal_core::checksum::crc32c_append(crc, piece);
                buf.extend_from_slice(piece);
                // Send only once more data is known to follow.
                if buf.len() <= chunk_size {
                    continue;
                }
            }
            let last = next.is_none();
            if last && session.is_none() && !always_session {
                // It all fit in one chunk: one ordinary request.
                check_expected(opts, crc, &url)?;
                let opts = PutOptions {
                    crc32c: Some(crc),
                    ..opts.clone()
                };
                return self.put(bucket, key, buf.freeze(), &opts).await;
            }
            let session_url = match &session {
                Some(s) => s.clone(),
                None => {
                    let s = self.start_session(bucket, key, opts, &url).await?;
                    session = Some(s.clone());
                    s
                }
            };
            if last {
                if let Err(e) = check_expected(opts, crc, &url) {
                    self.cancel_session(&session_url).await;
                    return Err(e);
                }
                let total = offset + buf.len() as u64;
                let body = self
                    .send_chunk(&session_url, offset, buf.freeze(), Some(total), opts, &url)
                    .await?;
                let meta = parse_object(&body, Op::Upload, &url)?;
                if let Err(e) = check_stored_crc(Op::Upload, &url, &meta, crc) {
                    if let Some(ObjectVersion::Generation(g)) = meta.version {
                        let _ = self.delete_if(bucket, key, Some(g)).await;
                    }
                    return Err(e);
                }
                return Ok(meta);
            }
            // Whole chunks only; the rest (≥ 1 byte) waits for more data.
            let send = buf.len() / chunk_size * chunk_size;
            let send = if send == buf.len() {
                send - chunk_size
            } else {
                send
            };
            let chunk = buf.split_to(send).freeze();
            let len = chunk.len() as u64;
            self.send_chunk(&session_url, offset, chunk, None, opts, &url)
                .await?;
            offset += len;
        }
    }

    async fn start_session(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
        url: &str,
    ) -> Result<String> {
        let meta = object_metadata(key, opts.crc32c, opts).to_string();
        let body = Bytes::from(meta);
        crate::object::check_write_version(opts, Op::Upload, url)?;
        let g = crate::object::generation_match(opts);
        let q = Query::new()
            .add("uploadType", "resumable")
            .add_opt("ifGenerationMatch", g.as_deref())
            .add_opt("predefinedAcl", opts.acl.as_deref());
        let http_url = format!("{}{}", self.upload_url(bucket), q.as_str());
        let resp = self
            .call(Op::Upload, url, |c| {
                c.post(&http_url)
                    .header(CONTENT_TYPE, "application/json; charset=UTF-8")
                    .body(body.clone())
            })
            .await?;
        resp.headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| protocol(Op::Upload, url, "a session URL in Location", "none sent"))
    }

    /// Sends `data` as the bytes at `offset`, retrying from whatever the
    /// session persisted. Returns the final response body when `total` is
    /// given.
    async fn send_chunk(
        &self,
        session: &str,
        offset: u64,
        data: Bytes,
        total: Option<u64>,
        opts: &PutOptions,
        url: &str,
    ) -> Result<Bytes> {
        let end = offset + data.len() as u64;
        let retrying = AtomicBool::new(false);
        self.retry
            .run(url, || async {
                let mut from = offset;
                if retrying.swap(true, Ordering::Relaxed) {
                    match self
                        .chunk_request(session, None, Bytes::new(), None, opts, url)
                        .await?
                    {
                        ChunkResult::Done(body) => return Ok(body),
                        ChunkResult::Partial(p) => from = p,
                    }
                }
                if from < offset || from > end {
                    return Err(Error::new(
                        ErrorKind::Protocol,
                        Op::Upload,
                        url,
                        format!("the upload session has {from} bytes, expected {offset} to {end}"),
                    ));
                }
                let rest = data.slice((from - offset) as usize..);
                match self
                    .chunk_request(session, Some(from), rest, total, opts, url)
                    .await?
                {
                    ChunkResult::Done(body) if total.is_some() => Ok(body),
                    ChunkResult::Partial(p) if total.is_none() && p == end => Ok(Bytes::new()),
                    ChunkResult::Done(_) => Err(Error::new(
                        ErrorKind::Protocol,
                        Op::Upload,
                        url,
                        "the server finished the upload before its last chunk",
                    )),
                    ChunkResult::Partial(p) => Err(Error::new(
                        // The server lost or refused part of the chunk:
                        // a retry resends from what it has.
                        ErrorKind::ServerBusy,
                        Op::Upload,
                        url,
                        format!("the upload session has {p} bytes after a chunk ending at {end}"),
                    )),
                }
            })
            .await
    }

    /// One PUT to the session. `start == None` is a status query.
    async fn chunk_request(
        &self,
        session: &str,
        start: Option<u64>,
        data: Bytes,
        total: Option<u64>,
        opts: &PutOptions,
        url: &str,
    ) -> Result<ChunkResult> {
        let total_s = total.map_or("*".to_owned(), |t| t.to_string());
        let range = match start {
            Some(a) if !data.is_empty() => {
                format!("bytes {a}-{}/{total_s}", a + data.len() as u64 - 1)
            }
            _ => format!("bytes */{total_s}"),
        };
        let mut req = self
            .http
            .put(session)
            .header(CONTENT_RANGE, range)
            .header(CONTENT_LENGTH, data.len())
            // fake-gcs-server takes the stored type from each chunk request.
            .header(
                CONTENT_TYPE,
                opts.content_type
                    .as_deref()
                    .unwrap_or("application/octet-stream"),
            );
        if let Some(h) = self.auth.headers(Op::Upload, url).await? {
            req = req.headers(h);
        }
        let resp = self.http.send(Op::Upload, url, req.body(data)).await?;
        match resp.status().as_u16() {
            200 | 201 => Ok(ChunkResult::Done(
                resp.bytes()
                    .await
                    .map_err(|e| error_from_reqwest(Op::Upload, url, e))?,
            )),
            308 => {
                let persisted = resp
                    .headers()
                    .get("range")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().strip_prefix("bytes=0-"))
                    .and_then(|n| n.parse::<u64>().ok())
                    .map_or(0, |n| n + 1);
                Ok(ChunkResult::Partial(persisted))
            }
            _ => Err(error_from_response(Op::Upload, url, resp, json_error_message).await),
        }
    }

    /// Best effort: a cancelled session stores nothing.
    async fn cancel_session(&self, session: &str) {
        let mut req = self.http.delete(session);
        if let Ok(Some(h)) = self.auth.headers(Op::Upload, session).await {
            req = req.headers(h);
        }
        let _ = self.http.send(Op::Upload, session, req).await;
    }
}

fn check_expected(opts: &PutOptions, crc: u32, url: &str) -> Result<()> {
    match opts.crc32c {
        Some(want) if want != crc => Err(Error::new(
            ErrorKind::Integrity,
            Op::Upload,
            url,
            format!("the stream's CRC32C is {crc:08x}, expected {want:08x}; nothing was stored"),
        )),
        _ => Ok(()),
    }
}

// Checked at compile time: whole 256 KiB units, and at least Google's
// recommended 8 MiB.
const _: () = assert!(RESUMABLE_CHUNK_SIZE.is_multiple_of(UNIT) && RESUMABLE_CHUNK_SIZE >= 8 << 20);
