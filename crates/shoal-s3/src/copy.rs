//! Server-side copy: CopyObject, or UploadPartCopy parts above the part
//! size (and always above CopyObject's 5 GiB limit).
//!
//! No byte of the object passes through the client. The source is pinned
//! by its ETag (`x-amz-copy-source-if-match`, on the single copy and on
//! every part), so a source replaced mid-copy fails with `Changed` and a
//! multipart copy is aborted (also when the copy is dropped, on Ctrl-C:
//! [`AbortCopy`]): the destination is the old object or the
//! whole new one. CopyObject keeps the source's metadata
//! (`x-amz-metadata-directive: COPY`) unless the caller replaces it
//! (`REPLACE`, with every field sent, since S3 keeps none of the old);
//! a multipart copy never inherits metadata, so the source's is sent on
//! CreateMultipartUpload. `--no-clobber` is `If-None-Match: *` on the
//! completion of a copy made of parts, as for uploads (see `copy_guarded`:
//! MinIO ignores it on CopyObject).
//!
//! A CopyObject whose answer was lost is not sent again blindly: another
//! writer may have stored the destination since. The destination is read
//! first (`retry::safe`): the source's bytes there (size and checksum)
//! mean done; otherwise the copy is made again as parts whose completion
//! carries the state found (`If-Match` its ETag, or `If-None-Match: *`),
//! so a write landing meanwhile is refused, not replaced.
//!
//! The answer describes the destination from a HEAD after the copy (its
//! checksums, which the caller compares with the source's). Both shapes
//! ask for the source's checksum kind (`x-amz-checksum-algorithm`): a
//! multipart copy declares it on CreateMultipartUpload, reads each part's
//! CRC from CopyPartResult and completes with them and their combination
//! (FULL_OBJECT), so a copy in parts is checked like a single one rather
//! than by its size. The requests sent are added to
//! `CopyRequest::requests` for the summary.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use reqwest::Method;
use shoal_core::checksum::{Checksums, PartKind, crc32c_from_base64};
use shoal_core::retry::safe::{self, Ours, Planned};
use shoal_core::xml::{error_code_kind, read_simple};
use shoal_core::{
    CopyRequest, Error, ErrorKind, MultipartUpload, ObjectMeta, ObjectVersion, Op, PartInfo,
    PutOptions, Result,
};

use crate::client::{Client, Request, read_body, rebuild};
use crate::endpoint::{check_bucket, encode_key};
use crate::object::{precondition, protocol, refused_because, with_object_headers};

/// The whole-object checksum a copy's destination is asked to keep:
/// CRC32C, unless the source's only checksum is a composite CRC32.
fn copy_checksum_kind(src: &ObjectMeta) -> Option<PartKind> {
    match (src.checksums.crc32c(), src.checksums.composite()) {
        (Some(_), _) => Some(PartKind::Crc32c),
        (None, Some(c)) if c.kind == PartKind::Crc32 => Some(PartKind::Crc32),
        (None, Some(_)) => Some(PartKind::Crc32c),
        (None, None) => None,
    }
}

/// Adds `n` requests to the caller's count.
fn count(c: &CopyRequest<'_>, n: usize) {
    if let Some(requests) = c.requests {
        requests.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// CopyObject's limit: larger sources must be copied in parts.
const MAX_COPY_OBJECT: u64 = 5 << 30;

/// A copy's multipart upload, aborted when the copy is dropped before it
/// completed or aborted it (Ctrl-C: the CLI waits for the abort,
/// [`shoal_core::cleanup`]), so no upload of the copy's is left open.
struct AbortCopy {
    upload: MultipartUpload,
    /// None once disarmed (or for a client the store no longer holds).
    client: Option<std::sync::Arc<Client>>,
}

impl AbortCopy {
    fn disarm(mut self) {
        self.client = None;
    }
}

impl Drop for AbortCopy {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let upload = self.upload.clone();
            shoal_core::cleanup::spawn(async move { abort_quietly(&client, &upload).await });
        }
    }
}

/// Aborts a copy's upload, logging (not failing) if that fails; one
/// already gone (completed just before the copy was dropped) is done.
async fn abort_quietly(client: &Client, upload: &MultipartUpload) {
    match client.multipart_abort(upload).await {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            tracing::warn!(error = %e, upload_id = %upload.upload_id, "could not abort the copy's multipart upload; its parts may remain");
        }
        _ => {}
    }
}

impl Client {
    pub(crate) async fn copy(&self, req: &CopyRequest<'_>) -> Result<ObjectMeta> {
        check_bucket(Op::Copy, req.src_bucket)?;
        check_bucket(Op::Copy, req.dst_bucket)?;
        let etag = match &req.src.version {
            Some(ObjectVersion::ETag(e)) => Some(e.as_str()),
            _ => None,
        };
        let part = req.part_size.clamp(5 << 20, MAX_COPY_OBJECT);
        let dst_url = format!("s3://{}/{}", req.dst_bucket, req.dst_key);
        let condition = precondition(req.opts, Op::Copy, &dst_url)?;
        // Whether an attempt carried a precondition on the destination: a
        // 412 then may be the destination's, not the source's pin.
        let guarded = std::sync::atomic::AtomicBool::new(condition.is_some());
        // Some(meta): the destination as a probe found it (a lost answer
        // whose copy had landed), so no HEAD is needed for the answer.
        let done = if condition.is_some() || req.src.size > part {
            self.copy_guarded(req, etag, part, condition.as_ref())
                .await
                .map(|()| None)
        } else {
            // One CopyObject, planned against whatever the destination
            // holds. Its answer lost, it is not sent again blindly
            // (`retry::safe`): the destination holding the source's bytes
            // is done; otherwise the copy is made again carrying the state
            // found as its precondition, which CopyObject cannot carry
            // (MinIO ignores it there), so as parts.
            let ours = Ours {
                size: req.src.size,
                checksums: Checksums::default()
                    .with_crc32c(req.src.checksums.crc32c())
                    .with_md5(req.src.checksums.md5()),
            };
            safe::write(
                &self.retry,
                Planned::Any,
                ours,
                |pre| {
                    let (guarded, dst_url) = (&guarded, &dst_url);
                    async move {
                        if pre == Planned::Any {
                            return self.copy_object(req, etag).await.map(|()| None);
                        }
                        let opts = pre.apply(req.opts);
                        let again = CopyRequest {
                            opts: &opts,
                            ..req.clone()
                        };
                        let condition = precondition(&opts, Op::Copy, dst_url)?;
                        guarded.store(true, std::sync::atomic::Ordering::Relaxed);
                        self.copy_guarded(&again, etag, part, condition.as_ref())
                            .await
                            .map(|()| None)
                    }
                },
                || self.probe(req.dst_bucket, req.dst_key),
                Some,
            )
            .await
        };
        let src_url = format!("s3://{}/{}", req.src_bucket, req.src_key);
        match done {
            Err(e) => {
                let guarded = guarded.load(std::sync::atomic::Ordering::Relaxed);
                Err(self.why_refused(e, req, etag, guarded, &src_url).await)
            }
            Ok(Some(found)) => Ok(found),
            Ok(None) => self.head(req.dst_bucket, req.dst_key).await,
        }
    }

    /// A copy made of parts: one too large for CopyObject, or one that must
    /// not replace what the destination holds unless it is at the version
    /// `condition` names. `If-None-Match: *` on CopyObject is ignored by
    /// MinIO (it copies over an existing object; probed on the 2026-02
    /// release), while on CompleteMultipartUpload every server here
    /// honours it: a copy that must not replace is made of parts, so the
    /// refusal stays atomic, on the server. An empty source has no byte
    /// range to copy: it is an empty PUT with the same precondition.
    async fn copy_guarded(
        &self,
        req: &CopyRequest<'_>,
        etag: Option<&str>,
        part: u64,
        condition: Option<&(&'static str, String)>,
    ) -> Result<()> {
        if condition.is_some() && req.src.size == 0 {
            let opts = self.copy_opts(req);
            count(req, 1);
            return self
                .put(req.dst_bucket, req.dst_key, Bytes::new(), &opts)
                .await
                .map(drop);
        }
        let kind = copy_checksum_kind(req.src);
        match self.copy_parts(req, etag, part, condition, kind).await {
            // MinIO (2026-02) refuses part copies into an upload that
            // declared a checksum ("checksum missing"): copied again
            // without one, the destination then checked by size.
            Err(e)
                if kind.is_some()
                    && e.status() == Some(400)
                    && e.message().contains("checksum") =>
            {
                tracing::debug!("part copy with checksums refused, copying without: {e}");
                self.copy_parts(req, etag, part, condition, None).await
            }
            r => r,
        }
    }

    /// What a destination written anew (not by CopyObject) stores: it
    /// inherits nothing, so the source's metadata is sent unless replaced.
    fn copy_opts(&self, c: &CopyRequest<'_>) -> PutOptions {
        let mut opts = if c.replace_metadata {
            c.opts.clone()
        } else {
            PutOptions {
                storage_class: c.opts.storage_class.clone(),
                ..PutOptions::default().keeping(c.src)
            }
        };
        opts.if_not_exists = c.opts.if_not_exists;
        opts.if_match = c.opts.if_match.clone();
        opts.acl = c.opts.acl.clone();
        opts
    }

    /// `x-amz-copy-source` (and its ETag pin) on a request.
    fn copy_source<'a>(req: Request<'a>, src: &CopyRequest<'_>, etag: Option<&str>) -> Request<'a> {
        let mut source = format!("/{}/{}", src.src_bucket, encode_key(src.src_key));
        // One stored version (a restore): that version, current or not.
        if let Some(ObjectVersion::VersionId(v)) = &src.src.version {
            source = format!("{source}?versionId={}", encode_key(v));
        }
        let req = req.header("x-amz-copy-source", source);
        match etag {
            Some(e) => req.header("x-amz-copy-source-if-match", e),
            None => req,
        }
    }

    async fn copy_object(&self, c: &CopyRequest<'_>, etag: Option<&str>) -> Result<()> {
        let mut req = Request::new(Method::PUT, Op::Copy, c.dst_bucket, Some(c.dst_key));
        req = Self::copy_source(req, c, etag);
        if c.replace_metadata {
            req = with_object_headers(req.header("x-amz-metadata-directive", "REPLACE"), c.opts);
        } else {
            if let Some(class) = &c.opts.storage_class {
                req = req.header("x-amz-storage-class", class.as_str());
            }
            if let Some(acl) = &c.opts.acl {
                req = req.header("x-amz-acl", acl.as_str());
            }
        }
        // The destination keeps a whole-object CRC of its own, as an
        // upload would: CRC32C, or the algorithm of a composite source's
        // parts, so the copy can be checked against the source's parts.
        if let Some(kind) = copy_checksum_kind(c.src) {
            req = req.header("x-amz-checksum-algorithm", kind.name());
        }
        if c.opts.if_not_exists {
            req = req.header("if-none-match", "*");
        }
        let req = req.body(Bytes::new());
        let target = req.target.clone();
        count(c, 1);
        // One attempt (the caller retries, `retry::safe`). A copy may
        // answer 200 and then an <Error> (the status is sent early while
        // the server copies).
        let resp = self.send_once(&req).await?;
        let body = read_body(resp, Op::Copy, &target).await?;
        result_or_error(&body, "CopyObjectResult", &target).map(drop)
    }

    async fn copy_parts(
        &self,
        c: &CopyRequest<'_>,
        etag: Option<&str>,
        part: u64,
        condition: Option<&(&'static str, String)>,
        kind: Option<PartKind>,
    ) -> Result<()> {
        let size = c.src.size;
        let count = size.div_ceil(part).max(1);
        if count > 10_000 {
            return Err(Error::invalid(
                Op::Copy,
                format!("s3://{}/{}", c.dst_bucket, c.dst_key),
                format!("more than 10000 parts of {part} bytes"),
            )
            .with_hint("raise --part-size"));
        }
        let opts = self.copy_opts(c);
        // The parts are asked for the source's checksum kind: the server
        // answers each part's CRC, the completion carries them and their
        // combination as the whole object's, and the destination then has
        // a whole-object CRC the caller compares with the source's, as for
        // a single CopyObject.
        self::count(c, 1);
        let guard = self.start_copy_upload(c, &opts, kind).await?;
        let upload = guard.upload.clone();
        let copied: Result<Vec<(PartInfo, Option<u32>)>> = futures::stream::iter(1..=count)
            .map(|n| {
                let start = (n - 1) * part;
                let end = (start + part).min(size);
                self::count(c, 1);
                self.copy_part(c, etag, &upload, kind, n as u32, start, end)
            })
            .buffer_unordered(c.workers.max(1))
            .try_collect()
            .await;
        let done = match copied {
            Ok(copied) => {
                // Every part's CRC, or (a server that answered none) the
                // parts alone, the destination then checked by size.
                let crcs: Option<Vec<u32>> = copied.iter().map(|(_, crc)| *crc).collect();
                let kind = kind.filter(|_| crcs.is_some());
                let mut parts: Vec<PartInfo> = copied.into_iter().map(|(p, _)| p).collect();
                for (p, crc) in parts.iter_mut().zip(crcs.unwrap_or_default()) {
                    p.crc32c = crc;
                }
                parts.sort_by_key(|p| p.part_number);
                let whole = kind.map(|k| {
                    let combined = parts.iter().fold(None, |acc, p| {
                        Some(match acc {
                            None => p.crc32c,
                            Some(a) => k.combine(a, p.crc32c, p.size),
                        })
                    });
                    (k, combined.unwrap_or_else(|| k.checksum(&[])))
                });
                self::count(c, 1);
                self.multipart_complete_as(&upload, &parts, whole, condition, kind)
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            self::count(c, 1);
            if let Err(a) = self.multipart_abort(&upload).await {
                tracing::debug!("abort after a failed copy: {a}");
            }
            guard.disarm();
            return Err(e);
        }
        guard.disarm();
        Ok(())
    }

    /// CreateMultipartUpload of a copy, the upload held by a guard that
    /// aborts it unless disarmed. The request is sent by a task of its own
    /// (registered with [`shoal_core::cleanup`]): a copy dropped while the
    /// start is in flight (Ctrl-C) cannot learn the upload's id, but the
    /// task does, and aborts it.
    async fn start_copy_upload(
        &self,
        c: &CopyRequest<'_>,
        opts: &PutOptions,
        kind: Option<PartKind>,
    ) -> Result<AbortCopy> {
        let Some(client) = self.me.upgrade() else {
            let upload = self
                .multipart_start_with(c.dst_bucket, c.dst_key, opts, kind)
                .await?;
            return Ok(AbortCopy {
                upload,
                client: None,
            });
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (bucket, key, opts) = (c.dst_bucket.to_owned(), c.dst_key.to_owned(), opts.clone());
        shoal_core::cleanup::spawn(async move {
            let started = client
                .multipart_start_with(&bucket, &key, &opts, kind)
                .await
                .map(|upload| AbortCopy {
                    upload,
                    client: Some(client.clone()),
                });
            // The copy is gone: abort here, where the CLI waits for it.
            if let Err(Ok(mut orphan)) = tx.send(started)
                && let Some(client) = orphan.client.take()
            {
                abort_quietly(&client, &orphan.upload).await;
            }
        });
        rx.await.unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Cancelled,
                Op::Copy,
                format!("s3://{}/{}", c.dst_bucket, c.dst_key),
                "the multipart copy's start was cancelled",
            ))
        })
    }

    /// UploadPartCopy of source bytes `[start, end)` as part `n`, and the
    /// part's CRC of `kind` when the server answered it.
    #[allow(clippy::too_many_arguments)]
    async fn copy_part(
        &self,
        c: &CopyRequest<'_>,
        etag: Option<&str>,
        upload: &MultipartUpload,
        kind: Option<PartKind>,
        n: u32,
        start: u64,
        end: u64,
    ) -> Result<(PartInfo, Option<u32>)> {
        let mut req = Request::new(Method::PUT, Op::Copy, &upload.bucket, Some(&upload.key))
            .query("partNumber", n.to_string())
            .query("uploadId", upload.upload_id.as_str())
            .header(
                "x-amz-copy-source-range",
                format!("bytes={start}-{}", end - 1),
            );
        req = Self::copy_source(req, c, etag);
        let req = req.body(Bytes::new());
        let target = req.target.clone();
        let (etag, crc) = self
            .send_parse(&req, |_, body| {
                result_with_crc(body, "CopyPartResult", kind, &target)
            })
            .await?;
        let etag = etag
            .ok_or_else(|| protocol(Op::Copy, &target, format!("expected an ETag for part {n}")))?;
        Ok((
            PartInfo {
                part_number: n,
                etag,
                crc32c: 0,
                size: end - start,
            },
            crc,
        ))
    }

    /// A refused copy in words a user can act on. 412 is either pin: the
    /// source's ETag (it was replaced) or `If-None-Match: *` (the
    /// destination exists); with both sent, the source's ETag says which.
    async fn why_refused(
        &self,
        e: Error,
        c: &CopyRequest<'_>,
        etag: Option<&str>,
        guarded: bool,
        src_url: &str,
    ) -> Error {
        if e.kind() != ErrorKind::Precondition {
            return e;
        }
        let source_changed = match (etag, guarded) {
            (None, _) => false,
            (Some(_), false) => true,
            (Some(pinned), true) => match self.head(c.src_bucket, c.src_key).await {
                Ok(now) => now.version != Some(ObjectVersion::ETag(pinned.to_owned())),
                Err(_) => true,
            },
        };
        if source_changed {
            let msg = format!(
                "{}; the source changed since it was read (no longer ETag {})",
                e.message(),
                etag.unwrap_or_default()
            );
            let changed = Error::new(ErrorKind::Changed, Op::Copy, src_url, msg)
                .with_hint("nothing was copied; run the command again to copy the current version");
            return match e.status() {
                Some(s) => changed.with_status(s),
                None => changed,
            };
        }
        if !c.opts.conditional() {
            // The precondition of a retry after a lost answer: the refusal
            // already names what the destination holds (`retry::safe`).
            return e;
        }
        let msg = format!("{}; {}", e.message(), refused_because(c.opts));
        rebuild(&e, Op::Copy, e.url(), msg, None)
    }
}

/// The ETag of a `root` result document, or the error an `<Error>` body
/// (even under 200) describes.
fn result_or_error(body: &[u8], root: &str, target: &str) -> Result<Option<String>> {
    result_with_crc(body, root, None, target).map(|(etag, _)| etag)
}

/// [`result_or_error`], and the `Checksum<KIND>` the result carries (a
/// part copied into an upload that declared that algorithm).
fn result_with_crc(
    body: &[u8],
    root: &str,
    kind: Option<PartKind>,
    target: &str,
) -> Result<(Option<String>, Option<u32>)> {
    let crc_field = match kind {
        Some(PartKind::Crc32) => "ChecksumCRC32",
        _ => "ChecksumCRC32C",
    };
    let doc = read_simple(body, &["ETag", "Code", "Message", crc_field])
        .map_err(|m| protocol(Op::Copy, target, format!("expected {root}: {m}")))?;
    let [etag, code, message, crc]: [Option<String>; 4] = doc
        .values
        .try_into()
        .map_err(|_| protocol(Op::Copy, target, "internal: field count"))?;
    if doc.root == root {
        let crc = kind.and(crc.as_deref().and_then(crc32c_from_base64));
        return Ok((etag.filter(|e| !e.is_empty()), crc));
    }
    if doc.root == "Error" {
        let code = code.unwrap_or_default();
        let kind = match code.as_str() {
            "PreconditionFailed" => ErrorKind::Precondition,
            c => error_code_kind(c),
        };
        return Err(Error::new(
            kind,
            Op::Copy,
            target,
            format!(
                "HTTP 200 OK with an error: {code}: {}",
                message.unwrap_or_default()
            ),
        ));
    }
    Err(protocol(
        Op::Copy,
        target,
        format!("expected {root}, got <{}>", doc.root),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_results_and_errors_in_200() {
        let ok = b"<CopyObjectResult><ETag>\"abc\"</ETag></CopyObjectResult>";
        assert_eq!(
            result_or_error(ok, "CopyObjectResult", "s3://b/k").unwrap(),
            Some("\"abc\"".into())
        );
        let err = b"<Error><Code>PreconditionFailed</Code><Message>no</Message></Error>";
        let e = result_or_error(err, "CopyObjectResult", "s3://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Precondition);
        let e = result_or_error(b"<Other/>", "CopyPartResult", "s3://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol);
    }
}
