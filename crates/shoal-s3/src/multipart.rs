//! Multipart upload: start, parts, complete, abort.
//!
//! Uploads are started with `x-amz-checksum-algorithm: CRC32C` and
//! `x-amz-checksum-type: FULL_OBJECT`, so the finished object carries a
//! CRC32C of its whole content (the default, COMPOSITE, gives a checksum of
//! part checksums, `xxxx-N`, which no download can verify against). Each
//! part is sent with its own CRC32C, which the server checks, and the
//! complete request carries the whole-object CRC32C that the caller
//! combined from the parts, so the server checks the assembly too.
//! [`Assemble::Composite`] leaves the type at S3's default, COMPOSITE.
//!
//! CompleteMultipartUpload can answer `200 OK` and still fail: the status
//! is sent early to keep the connection alive, and an `<Error>` document
//! may follow. The body is always parsed, and an `InternalError` inside a
//! 200 is retried like a 500.

use bytes::Bytes;
use reqwest::Method;
use shoal_core::checksum::{Checksums, PartKind, crc32c_from_base64, crc32c_to_base64};
use shoal_core::{
    Assemble, Error, ErrorKind, ListedPart, MultipartUpload, ObjectMeta, ObjectVersion, Op,
    PartInfo, PendingUpload, PutOptions, Result,
};

use crate::client::{Client, Request};
use crate::endpoint::check_bucket;
use crate::object::{full_object_crc, integrity, protocol, with_object_headers};
use shoal_core::xml::{
    complete_multipart_body_as, error_code_kind, list_parts_page, list_uploads_page, read_simple,
};

impl Client {
    pub(crate) async fn multipart_start(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<MultipartUpload> {
        self.multipart_start_with(bucket, key, opts, Some(PartKind::Crc32c))
            .await
    }

    /// Starts an upload whose parts carry `checksums` (CRC32C for
    /// uploads; a copy made of UploadPartCopy parts asks for the source's
    /// kind, and the server answers each part's CRC). None declares no
    /// algorithm.
    pub(crate) async fn multipart_start_with(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
        checksums: Option<PartKind>,
    ) -> Result<MultipartUpload> {
        check_bucket(Op::Multipart, bucket)?;
        let mut req =
            Request::new(Method::POST, Op::Multipart, bucket, Some(key)).query("uploads", "");
        if let Some(kind) = checksums {
            req = req.header("x-amz-checksum-algorithm", kind.name());
        }
        // Composite is S3's default type; it is then completed without a
        // whole-object CRC32C.
        if checksums.is_some() && opts.assemble != Assemble::Composite {
            req = req.header("x-amz-checksum-type", "FULL_OBJECT");
        }
        let req = with_object_headers(req, opts).body(Bytes::new());
        let target = req.target.clone();
        let upload_id = self
            .send_parse(&req, |_, body| {
                let doc = read_simple(body, &["UploadId"]).map_err(|m| {
                    protocol(
                        Op::Multipart,
                        &target,
                        expected("InitiateMultipartUploadResult", &m),
                    )
                })?;
                if doc.root != "InitiateMultipartUploadResult" {
                    return Err(protocol(
                        Op::Multipart,
                        &target,
                        expected(
                            "InitiateMultipartUploadResult",
                            &format!("got <{}>", doc.root),
                        ),
                    ));
                }
                doc.values
                    .into_iter()
                    .next()
                    .flatten()
                    .filter(|id| !id.is_empty())
                    .ok_or_else(|| {
                        protocol(
                            Op::Multipart,
                            &target,
                            "expected an UploadId in InitiateMultipartUploadResult",
                        )
                    })
            })
            .await?;
        Ok(MultipartUpload {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            upload_id,
        })
    }

    pub(crate) async fn multipart_put(
        &self,
        upload: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc32c: u32,
    ) -> Result<PartInfo> {
        check_bucket(Op::Multipart, &upload.bucket)?;
        // S3 numbers parts 1..=10000.
        let url = format!("s3://{}/{}", upload.bucket, upload.key);
        PartInfo::check_number(part_number, 10_000, &url)?;
        let size = data.len() as u64;
        let req = Request::new(
            Method::PUT,
            Op::Multipart,
            &upload.bucket,
            Some(&upload.key),
        )
        .query("partNumber", part_number.to_string())
        .query("uploadId", upload.upload_id.as_str())
        .header("x-amz-checksum-crc32c", crc32c_to_base64(crc32c))
        .body(data);
        let resp = self
            .send(&req)
            .await
            .map_err(|e| integrity(e, &req.target))?;
        let etag = resp
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                protocol(
                    Op::Multipart,
                    &req.target,
                    format!("expected an ETag for part {part_number}"),
                )
            })?
            .to_owned();
        // Servers that echo the part checksum must agree with ours.
        let echo = resp
            .headers()
            .get("x-amz-checksum-crc32c")
            .and_then(|v| v.to_str().ok())
            .and_then(crc32c_from_base64);
        PartInfo {
            part_number,
            etag,
            crc32c,
            size,
        }
        .stored(echo, &req.target)
    }

    pub(crate) async fn multipart_complete(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        crc32c: Option<u32>,
        condition: Option<&(&'static str, String)>,
        part_crcs: bool,
    ) -> Result<ObjectMeta> {
        let kind = part_crcs.then_some(PartKind::Crc32c);
        let whole = crc32c.map(|c| (PartKind::Crc32c, c));
        self.multipart_complete_as(upload, parts, whole, condition, kind)
            .await
    }

    /// CompleteMultipartUpload with each part's CRC in `part_crcs`'s kind
    /// (held in `PartInfo::crc32c` whatever the kind) and the whole
    /// object's CRC of that kind the server must find.
    pub(crate) async fn multipart_complete_as(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        whole: Option<(PartKind, u32)>,
        condition: Option<&(&'static str, String)>,
        part_crcs: Option<PartKind>,
    ) -> Result<ObjectMeta> {
        // Only a CRC32C is read back from the answer.
        let crc32c = whole
            .filter(|(k, _)| *k == PartKind::Crc32c)
            .map(|(_, c)| c);
        check_bucket(Op::Multipart, &upload.bucket)?;
        let target = format!("s3://{}/{}", upload.bucket, upload.key);
        let sorted = PartInfo::in_order(parts, &target)?;
        let mut req = Request::new(
            Method::POST,
            Op::Multipart,
            &upload.bucket,
            Some(&upload.key),
        )
        .query("uploadId", upload.upload_id.as_str())
        .header("content-type", "application/xml");
        if let Some((kind, c)) = whole {
            req = req
                .header(
                    format!("x-amz-checksum-{}", kind.name().to_ascii_lowercase()),
                    crc32c_to_base64(c),
                )
                .header("x-amz-checksum-type", "FULL_OBJECT");
        }
        if let Some((name, value)) = condition {
            req = req.header(*name, value.as_str());
        }
        let req = req.body(Bytes::from(complete_multipart_body_as(
            &sorted,
            part_crcs.map(PartKind::name),
        )));
        let size: u64 = sorted.iter().map(|p| p.size).sum();
        let (etag, server_crc) = match self
            .send_parse(&req, |_, body| parse_complete(body, &target))
            .await
        {
            Ok(done) => done,
            Err(e) if is_no_such_upload(&e) => self
                .completed_by_lost_answer(upload, &target, size, crc32c)
                .await
                .ok_or(e)?,
            Err(e) if condition.is_some() && e.kind() == ErrorKind::Precondition => {
                // A retry whose first attempt assembled the object (its
                // answer lost) meets it as "exists": ours when it holds
                // what the parts combine to. The upload is then freed (it
                // is gone already if that attempt completed it).
                if let Some(done) = self
                    .completed_by_lost_answer(upload, &target, size, crc32c)
                    .await
                {
                    let _ = self.multipart_abort(upload).await;
                    return Ok(self.completed_meta(upload, size, done));
                }
                let why = match condition {
                    Some(("if-match", etag)) => format!("the object is not at etag {etag}"),
                    _ => "the object already exists".into(),
                };
                return Err(e.with_hint(format!("{why}; it was not replaced")));
            }
            Err(e) => return Err(integrity(e, &target)),
        };
        if let (Some(ours), Some(theirs)) = (crc32c, server_crc)
            && ours != theirs
        {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Multipart,
                &target,
                format!("assembled object has CRC32C {theirs:08x}, expected {ours:08x}"),
            ));
        }
        Ok(self.completed_meta(upload, size, (etag, server_crc)))
    }

    /// What a completed upload describes: only a CRC32C the answer (or
    /// the read-back) confirms is claimed (a store that kept none, or does
    /// not say, leaves the upload checked by size).
    fn completed_meta(
        &self,
        upload: &MultipartUpload,
        size: u64,
        (etag, server_crc): (Option<String>, Option<u32>),
    ) -> ObjectMeta {
        ObjectMeta {
            key: upload.key.clone(),
            size,
            checksums: Checksums::default().with_crc32c(server_crc),
            version: etag.map(ObjectVersion::ETag),
            ..Default::default()
        }
    }

    /// A complete whose answer was lost (connection cut after the server
    /// assembled the object) is retried, and the retry finds no upload:
    /// `NoSuchUpload`. The object is then already in place; it is accepted
    /// only if its size and full-object CRC32C are the ones this upload
    /// combined from its parts (without a CRC32C nothing can be proven and
    /// the error stands).
    async fn completed_by_lost_answer(
        &self,
        upload: &MultipartUpload,
        target: &str,
        size: u64,
        crc32c: Option<u32>,
    ) -> Option<(Option<String>, Option<u32>)> {
        let ours = crc32c?;
        let meta = self.head(&upload.bucket, &upload.key).await.ok()?;
        if meta.size != size || meta.checksums.crc32c() != Some(ours) {
            return None;
        }
        tracing::debug!(
            target,
            "multipart complete: answer lost, object already assembled"
        );
        let etag = match meta.version {
            Some(ObjectVersion::ETag(e)) => Some(e),
            _ => None,
        };
        Some((etag, Some(ours)))
    }

    pub(crate) async fn multipart_abort(&self, upload: &MultipartUpload) -> Result<()> {
        check_bucket(Op::Multipart, &upload.bucket)?;
        let req = Request::new(
            Method::DELETE,
            Op::Multipart,
            &upload.bucket,
            Some(&upload.key),
        )
        .query("uploadId", upload.upload_id.as_str());
        match self.send(&req).await {
            Ok(_) => Ok(()),
            // Already gone (aborted, completed, or a retry of our own abort
            // whose answer was lost): the parts are freed either way.
            Err(e) if is_no_such_upload(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn is_no_such_upload(e: &Error) -> bool {
    e.kind() == ErrorKind::NotFound && e.message().contains("NoSuchUpload")
}

fn expected(what: &str, got: &str) -> String {
    format!("expected {what}: {got}")
}

/// ETag and whole-object CRC32C from a CompleteMultipartUploadResult, or
/// the error an `<Error>` body (even under 200) describes.
fn parse_complete(body: &[u8], target: &str) -> Result<(Option<String>, Option<u32>)> {
    let doc = read_simple(
        body,
        &["ETag", "ChecksumCRC32C", "ChecksumType", "Code", "Message"],
    )
    .map_err(|m| {
        protocol(
            Op::Multipart,
            target,
            expected("CompleteMultipartUploadResult", &m),
        )
    })?;
    let [etag, crc, ctype, code, message]: [Option<String>; 5] = doc
        .values
        .try_into()
        .map_err(|_| protocol(Op::Multipart, target, "internal: field count"))?;
    match doc.root.as_str() {
        "CompleteMultipartUploadResult" => Ok((
            etag.filter(|e| !e.is_empty()),
            full_object_crc(crc.as_deref(), ctype.as_deref()),
        )),
        "Error" => {
            let code = code.unwrap_or_default();
            let kind = error_code_kind(&code);
            Err(Error::new(
                kind,
                Op::Multipart,
                target,
                format!(
                    "HTTP 200 OK with an error: {code}: {}",
                    message.unwrap_or_default()
                ),
            ))
        }
        other => Err(protocol(
            Op::Multipart,
            target,
            expected("CompleteMultipartUploadResult", &format!("got <{other}>")),
        )),
    }
}

/// Resuming uploads (issue #55): the parts an upload holds, and the
/// uploads a bucket holds, each every page of them.
impl Client {
    /// ListParts of `upload`: what a resumed upload checks against its
    /// file. An upload that no longer exists is `NotFound`.
    pub(crate) async fn list_parts(&self, upload: &MultipartUpload) -> Result<Vec<ListedPart>> {
        check_bucket(Op::Multipart, &upload.bucket)?;
        let mut out: Vec<ListedPart> = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut req = Request::new(
                Method::GET,
                Op::Multipart,
                &upload.bucket,
                Some(&upload.key),
            )
            .query("uploadId", upload.upload_id.as_str());
            if let Some(m) = &marker {
                req = req.query("part-number-marker", m.as_str());
            }
            let target = req.target.clone();
            let (parts, next) = self
                .send_parse(&req, |_, body| {
                    list_parts_page(body).map_err(|m| {
                        protocol(Op::Multipart, &target, expected("ListPartsResult", &m))
                    })
                })
                .await?;
            out.extend(parts);
            if next.is_none() || next == marker {
                return Ok(out);
            }
            marker = next;
        }
    }

    /// ListMultipartUploads of `bucket` below `prefix`.
    pub(crate) async fn list_uploads(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<PendingUpload>> {
        check_bucket(Op::Multipart, bucket)?;
        let mut out = Vec::new();
        let mut markers: Option<(String, String)> = None;
        loop {
            let mut req = Request::new(Method::GET, Op::Multipart, bucket, None)
                .query("uploads", "")
                .query("prefix", prefix);
            if let Some((k, u)) = &markers {
                req = req
                    .query("key-marker", k.as_str())
                    .query("upload-id-marker", u.as_str());
            }
            let target = req.target.clone();
            let (uploads, next) = self
                .send_parse(&req, |_, body| {
                    list_uploads_page(body).map_err(|m| {
                        protocol(
                            Op::Multipart,
                            &target,
                            expected("ListMultipartUploadsResult", &m),
                        )
                    })
                })
                .await?;
            out.extend(uploads);
            if next.is_none() || next == markers {
                return Ok(out);
            }
            markers = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_results_and_errors_in_200() {
        let ok = br#"<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult><Location>x</Location><Bucket>b</Bucket><Key>k</Key><ETag>"e-2"</ETag><ChecksumCRC32C>4waSgw==</ChecksumCRC32C><ChecksumType>FULL_OBJECT</ChecksumType></CompleteMultipartUploadResult>"#;
        assert_eq!(
            parse_complete(ok, "s3://b/k").unwrap(),
            (Some("\"e-2\"".into()), Some(0xE306_9283))
        );
        let composite = br#"<CompleteMultipartUploadResult><ETag>"e-2"</ETag><ChecksumCRC32C>4waSgw==-2</ChecksumCRC32C></CompleteMultipartUploadResult>"#;
        assert_eq!(parse_complete(composite, "s3://b/k").unwrap().1, None);
        let err = b"<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>";
        let e = parse_complete(err, "s3://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ServerBusy);
        assert!(e.is_retryable());
        assert!(
            e.to_string().contains("InternalError: We encountered"),
            "{e}"
        );
        for bad in [
            &b""[..],
            b"<CompleteMultipartUploadResult>",
            b"<html/>",
            b"\x00\x01",
        ] {
            assert_eq!(
                parse_complete(bad, "s3://b/k").unwrap_err().kind(),
                ErrorKind::Protocol
            );
        }
    }
}
