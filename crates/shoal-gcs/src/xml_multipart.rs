//! Multipart uploads over GCS's XML API.
//!
//! Beside compose, GCS has a second way to assemble an object from parts
//! sent in parallel: the XML API's multipart upload, which is S3's protocol
//! (`POST ?uploads`, `PUT ?partNumber=N&uploadId=…`, `POST ?uploadId=…`
//! with the list of parts, `DELETE ?uploadId=…` to abort). Where the
//! server has it, it wins over compose: parts are not objects, so there
//! are no temporaries to name, list and delete afterwards, no tree of
//! 32-way compose requests, and no retention policy or object hold can
//! trap a part. It is what Google's own `transfer_manager`
//! (`upload_chunks_concurrently`) uses.
//!
//! - Every part is sent with `x-goog-hash: crc32c=…`, so the server checks
//!   it; a CRC32C the server echoes back must be ours too.
//! - The finished object has a CRC32C computed by GCS (and no MD5). It is
//!   taken from the completion's `x-goog-hash`, or else read back through
//!   the JSON API, and compared with the one combined from the parts. On a
//!   mismatch the generation just written is deleted, as for compose.
//! - A completion whose answer was lost is retried and finds no upload
//!   (`NoSuchUpload`); the object is then accepted only if its size and
//!   CRC32C are this upload's.
//! - Ids are the server's, prefixed with [`ID_PREFIX`] inside shoal, so
//!   put, complete and abort know which protocol an upload belongs to.
//!
//! Neither fake-gcs-server nor gcp-storage-emulator has this API, so
//! [`GcsConfig`](crate::GcsConfig) turns it on by default for Google's own
//! endpoints only, and its wire format is tested against a scripted local
//! server (`tests/xml_multipart.rs`).

use bytes::Bytes;
use reqwest::header::{
    CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_ENCODING, CONTENT_TYPE, ETAG, HeaderMap,
    HeaderName, HeaderValue,
};
use shoal_core::checksum::{Checksums, crc32c_combine_all, crc32c_to_base64};
use shoal_core::xml::{
    complete_multipart_body, error_code_kind, list_parts_page, list_uploads_page, read_simple,
};
use shoal_core::{
    Error, ErrorKind, ListedPart, MultipartUpload, ObjectMeta, ObjectVersion, Op, PartInfo,
    PendingUpload, PutOptions, Result,
};
use shoal_http::http::error_from_reqwest;

use crate::client::{Client, Query, encode, gs_url, protocol};
use crate::object::parse_goog_hash;

/// Marks an upload id as the XML API's (composite uploads' ids are 32 hex
/// digits of shoal's own).
pub(crate) const ID_PREFIX: &str = "xml:";

/// The smallest part but the last, as on S3.
pub(crate) const MIN_PART_SIZE: u64 = 5 << 20;

/// Whether `upload_id` names an XML API upload.
pub(crate) fn is_xml_upload(upload_id: &str) -> bool {
    upload_id.starts_with(ID_PREFIX)
}

fn server_id(upload: &MultipartUpload) -> &str {
    upload
        .upload_id
        .strip_prefix(ID_PREFIX)
        .unwrap_or(&upload.upload_id)
}

/// The headers of the XML API's initiate request: what the assembled
/// object stores (its type, encoding, cache control, disposition, custom
/// metadata as `x-goog-meta-KEY`, storage class).
fn initiate_headers(opts: &PutOptions) -> std::result::Result<HeaderMap, String> {
    let mut h = HeaderMap::new();
    let value = |name: &str, v: &str| {
        HeaderValue::from_str(v)
            .map_err(|_| format!("invalid characters in the {name} value {v:?}"))
    };
    let content_type = opts
        .content_type
        .as_deref()
        .unwrap_or("application/octet-stream");
    h.insert(CONTENT_TYPE, value("Content-Type", content_type)?);
    let fixed = [
        (CONTENT_ENCODING, &opts.content_encoding),
        (CACHE_CONTROL, &opts.cache_control),
        (CONTENT_DISPOSITION, &opts.content_disposition),
        (
            HeaderName::from_static("x-goog-storage-class"),
            &opts.storage_class,
        ),
    ];
    for (name, v) in fixed {
        if let Some(v) = v {
            h.insert(name.clone(), value(name.as_str(), v)?);
        }
    }
    // The XML API spells the JSON API's predefined ACLs in kebab case
    // (`publicRead` → `public-read`).
    if let Some(acl) = &opts.acl {
        let mut kebab = String::new();
        for c in acl.chars() {
            if c.is_ascii_uppercase() {
                kebab.push('-');
            }
            kebab.push(c.to_ascii_lowercase());
        }
        h.insert(
            HeaderName::from_static("x-goog-acl"),
            value("x-goog-acl", &kebab)?,
        );
    }
    for (k, v) in &opts.metadata {
        let name = HeaderName::try_from(format!("x-goog-meta-{k}"))
            .map_err(|_| format!("metadata key {k:?} cannot be sent as a header"))?;
        h.insert(name, value(k, v)?);
    }
    Ok(h)
}

impl Client {
    /// `{base}/{bucket}/{object}`: the XML API's object URL. The name is
    /// one encoded segment, as on the JSON API (`pets/dog.png` is sent as
    /// `pets%2Fdog.png`, which GCS documents), so dot segments and `//`
    /// reach the server unchanged instead of being normalised away.
    fn xml_url(&self, upload: &MultipartUpload) -> String {
        format!(
            "{}/{}/{}",
            self.base,
            encode(&upload.bucket),
            encode(&upload.key)
        )
    }

    pub(crate) async fn xml_start(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<MultipartUpload> {
        let url = gs_url(bucket, key);
        if opts.conditional() {
            return Err(Error::invalid(
                Op::Multipart,
                url,
                "an XML API multipart upload cannot be conditional",
            )
            .with_hint("use --gcs-upload compose for a write that must not replace an object"));
        }
        let mut upload = MultipartUpload {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            upload_id: String::new(),
        };
        let http_url = format!("{}?uploads", self.xml_url(&upload));
        let headers = initiate_headers(opts).map_err(|m| Error::invalid(Op::Multipart, &url, m))?;
        let body = self
            .call_bytes(Op::Multipart, &url, |c| {
                c.post(&http_url)
                    .headers(headers.clone())
                    .body(Bytes::new())
            })
            .await
            .map_err(|e| match e.status() {
                // Emulators answer the XML API's initiate with a 400 (read
                // as a bad JSON upload) or a 404.
                Some(400 | 404 | 405 | 501) => e.with_hint(
                    "if this server lacks the XML API's multipart upload (emulators do), \
                     use --gcs-upload compose, which works everywhere",
                ),
                _ => e,
            })?;
        let id = parse_initiate(&body).map_err(|m| {
            protocol(
                Op::Multipart,
                &url,
                "an UploadId in InitiateMultipartUploadResult",
                m,
            )
        })?;
        upload.upload_id = format!("{ID_PREFIX}{id}");
        Ok(upload)
    }

    pub(crate) async fn xml_put(
        &self,
        upload: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc32c: u32,
    ) -> Result<PartInfo> {
        let url = gs_url(&upload.bucket, &upload.key);
        PartInfo::check_number(part_number, crate::MAX_PARTS, &url)?;
        let q = Query::new()
            .add("partNumber", &part_number.to_string())
            .add("uploadId", server_id(upload));
        let http_url = format!("{}{}", self.xml_url(upload), q.as_str());
        let hash = format!("crc32c={}", crc32c_to_base64(crc32c));
        let size = data.len() as u64;
        let resp = self
            .call(Op::Multipart, &url, |c| {
                c.put(&http_url)
                    .header("x-goog-hash", hash.as_str())
                    .body(data.clone())
            })
            .await?;
        let headers = resp.headers().clone();
        // Drain the (empty) body so the connection goes back to the pool.
        resp.bytes()
            .await
            .map_err(|e| error_from_reqwest(Op::Multipart, &url, e))?;
        let etag = headers
            .get(ETAG)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                protocol(
                    Op::Multipart,
                    &url,
                    "an ETag",
                    format!("none sent for part {part_number}"),
                )
            })?
            .to_owned();
        PartInfo {
            part_number,
            etag,
            crc32c,
            size,
        }
        .stored(goog_crc(&headers), &url)
    }

    pub(crate) async fn xml_complete(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        crc32c: Option<u32>,
    ) -> Result<ObjectMeta> {
        let url = gs_url(&upload.bucket, &upload.key);
        let sorted = PartInfo::in_order(parts, &url)?;
        let size: u64 = sorted.iter().map(|p| p.size).sum();
        let combined = crc32c_combine_all(sorted.iter().map(|p| (p.crc32c, p.size)));
        if let Some(c) = crc32c.filter(|c| *c != combined) {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Multipart,
                url,
                format!("the parts' CRC32Cs combine to {combined:08x}, expected {c:08x}"),
            ));
        }
        let expected = crc32c.unwrap_or(combined);
        let headers = match self.send_complete(upload, &sorted, &url).await {
            Ok(h) => h,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                // A retry after a lost answer finds the upload gone: accept
                // the object only if it is provably this upload's.
                return match self.head(&upload.bucket, &upload.key).await {
                    Ok(m) if m.size == size && m.checksums.crc32c() == Some(expected) => Ok(m),
                    _ => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        let generation = headers
            .get("x-goog-generation")
            .and_then(|v| v.to_str().ok())
            .and_then(|g| g.trim().parse::<i64>().ok());
        let meta = match goog_crc(&headers) {
            Some(crc) => ObjectMeta {
                key: upload.key.clone(),
                size,
                checksums: Checksums::default().with_crc32c(crc),
                version: generation.map(ObjectVersion::Generation),
                ..Default::default()
            },
            None => self
                .head_at(&upload.bucket, &upload.key, generation)
                .await
                .map_err(|e| e.with_op(Op::Multipart))?,
        };
        if meta.checksums.crc32c() == Some(expected) && meta.size == size {
            return Ok(meta);
        }
        Err(self
            .wrong_assembly(upload, &meta, (size, expected), generation, &url)
            .await)
    }

    /// CompleteMultipartUpload, its answer's headers. The body is read and
    /// parsed inside the retry: an `<Error>` under `200 OK` is retried like
    /// the status it stands for.
    async fn send_complete(
        &self,
        upload: &MultipartUpload,
        sorted: &[&PartInfo],
        url: &str,
    ) -> Result<reqwest::header::HeaderMap> {
        let q = Query::new().add("uploadId", server_id(upload));
        let http_url = format!("{}{}", self.xml_url(upload), q.as_str());
        let body = Bytes::from(complete_multipart_body(sorted, false));
        self.retry
            .run(url, || async {
                let req = self
                    .http
                    .post(&http_url)
                    .header(CONTENT_TYPE, "application/xml")
                    .body(body.clone());
                let resp = self.attempt(Op::Multipart, url, req).await?;
                let headers = resp.headers().clone();
                let text = resp
                    .bytes()
                    .await
                    .map_err(|e| error_from_reqwest(Op::Multipart, url, e))?;
                parse_complete(&text, url)?;
                Ok(headers)
            })
            .await
    }

    /// The error for an assembled object that is not what the parts make
    /// (`want`: size and CRC32C), after removing it, and only it: without
    /// its generation, the live object may already be someone else's.
    async fn wrong_assembly(
        &self,
        upload: &MultipartUpload,
        meta: &ObjectMeta,
        want: (u64, u32),
        generation: Option<i64>,
        url: &str,
    ) -> Error {
        let (size, expected) = want;
        let got = meta
            .checksums
            .crc32c()
            .map_or("none".to_owned(), |c| format!("{c:08x}"));
        let err = Error::new(
            ErrorKind::Integrity,
            Op::Multipart,
            url,
            format!(
                "the assembled object has {} bytes and CRC32C {got}, expected {size} and {expected:08x}",
                meta.size
            ),
        );
        match generation {
            Some(g) => match self.delete_if(&upload.bucket, &upload.key, Some(g)).await {
                Ok(_) => err.with_hint("it was deleted; upload again"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not delete an assembled object with a wrong checksum");
                    err
                }
            },
            None => err.with_hint("it was left in place: check it, or upload again"),
        }
    }

    pub(crate) async fn xml_abort(&self, upload: &MultipartUpload) -> Result<()> {
        let url = gs_url(&upload.bucket, &upload.key);
        let q = Query::new().add("uploadId", server_id(upload));
        let http_url = format!("{}{}", self.xml_url(upload), q.as_str());
        match self
            .call_bytes(Op::Multipart, &url, |c| c.delete(&http_url))
            .await
        {
            Ok(_) => Ok(()),
            // Already gone (aborted, completed, or our own retried abort):
            // its parts are freed either way.
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Client {
    /// ListParts: the parts the server holds of `upload`, which a resumed
    /// upload checks against the file. The XML API gives each part's MD5
    /// as its ETag and no CRC32C.
    pub(crate) async fn xml_list_parts(&self, upload: &MultipartUpload) -> Result<Vec<ListedPart>> {
        let url = gs_url(&upload.bucket, &upload.key);
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut q = Query::new().add("uploadId", server_id(upload));
            if let Some(m) = &marker {
                q = q.add("part-number-marker", m);
            }
            let http_url = format!("{}{}", self.xml_url(upload), q.as_str());
            let body = self
                .call_bytes(Op::Multipart, &url, |c| c.get(&http_url))
                .await?;
            let (parts, next) = list_parts_page(&body)
                .map_err(|m| protocol(Op::Multipart, &url, "a ListPartsResult", m))?;
            out.extend(parts);
            match next {
                Some(n) if marker.as_ref() != Some(&n) => marker = Some(n),
                _ => return Ok(out),
            }
        }
    }

    /// ListMultipartUploads: the XML API uploads in progress in `bucket`
    /// whose keys start with `prefix` (ids marked as the XML API's).
    pub(crate) async fn xml_list_uploads(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<PendingUpload>> {
        let url = format!("gs://{bucket}/{prefix}");
        let mut out = Vec::new();
        let mut markers: Option<(String, String)> = None;
        loop {
            let mut q = Query::new().add("uploads", "").add("prefix", prefix);
            if let Some((k, u)) = &markers {
                q = q.add("key-marker", k).add("upload-id-marker", u);
            }
            let http_url = format!("{}/{}{}", self.base, encode(bucket), q.as_str());
            let body = self
                .call_bytes(Op::Multipart, &url, |c| c.get(&http_url))
                .await?;
            let (uploads, next) = list_uploads_page(&body)
                .map_err(|m| protocol(Op::Multipart, &url, "a ListMultipartUploadsResult", m))?;
            // Marked as the XML API's, for put, complete and abort.
            out.extend(uploads.into_iter().map(|u| PendingUpload {
                upload_id: format!("{ID_PREFIX}{}", u.upload_id.trim()),
                ..u
            }));
            match next {
                Some(n) if markers.as_ref() != Some(&n) => markers = Some(n),
                _ => return Ok(out),
            }
        }
    }
}

fn goog_crc(h: &HeaderMap) -> Option<u32> {
    parse_goog_hash(
        h.get_all("x-goog-hash")
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
    .0
}

/// The UploadId of an InitiateMultipartUploadResult.
fn parse_initiate(body: &[u8]) -> std::result::Result<String, String> {
    let doc = read_simple(body, &["UploadId"])?;
    if doc.root != "InitiateMultipartUploadResult" {
        return Err(format!("got <{}>", doc.root));
    }
    doc.values
        .into_iter()
        .next()
        .flatten()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| "no UploadId".to_owned())
}

/// Success, or the error an `<Error>` body (even under 200) describes.
fn parse_complete(body: &[u8], url: &str) -> Result<()> {
    let doc = read_simple(body, &["Code", "Message"])
        .map_err(|m| protocol(Op::Multipart, url, "CompleteMultipartUploadResult", m))?;
    match doc.root.as_str() {
        "CompleteMultipartUploadResult" => Ok(()),
        "Error" => {
            let mut v = doc.values.into_iter().map(Option::unwrap_or_default);
            let (code, message) = (v.next().unwrap_or_default(), v.next().unwrap_or_default());
            Err(Error::new(
                error_code_kind(&code),
                Op::Multipart,
                url,
                format!("HTTP 200 OK with an error: {code}: {message}"),
            ))
        }
        other => Err(protocol(
            Op::Multipart,
            url,
            "CompleteMultipartUploadResult",
            format!("got <{other}>"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initiate_results() {
        let ok = br#"<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Bucket>b</Bucket><Key>k</Key><UploadId>ABPnzm5-x_y</UploadId></InitiateMultipartUploadResult>"#;
        assert_eq!(parse_initiate(ok).unwrap(), "ABPnzm5-x_y");
        for bad in [
            &b"<InitiateMultipartUploadResult><UploadId></UploadId></InitiateMultipartUploadResult>"[..],
            b"<Error><Code>AccessDenied</Code></Error>",
            b"<InitiateMultipartUploadResult>",
            b"",
        ] {
            assert!(parse_initiate(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn completion_errors_under_200() {
        assert!(parse_complete(b"<CompleteMultipartUploadResult><ETag>\"x\"</ETag></CompleteMultipartUploadResult>", "gs://b/k").is_ok());
        let e = parse_complete(
            b"<Error><Code>InternalError</Code><Message>try again</Message></Error>",
            "gs://b/k",
        )
        .unwrap_err();
        assert!(e.is_retryable(), "{e}");
        assert!(e.to_string().contains("InternalError: try again"), "{e}");
        let e = parse_complete(b"<Error><Code>InvalidPart</Code></Error>", "gs://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Rejected);
        let e = parse_complete(b"<html/>", "gs://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol);
    }

    #[test]
    fn ids_say_which_protocol() {
        assert!(is_xml_upload("xml:ABC"));
        assert!(!is_xml_upload(&crate::compose::new_upload_id()));
        let up = MultipartUpload {
            bucket: "b".into(),
            key: "k".into(),
            upload_id: "xml:ABC".into(),
        };
        assert_eq!(server_id(&up), "ABC");
    }

    #[test]
    fn the_initiate_request_carries_what_the_object_stores() {
        let opts = PutOptions {
            content_type: Some("text/html".into()),
            cache_control: Some("max-age=60".into()),
            content_disposition: Some("inline".into()),
            storage_class: Some("COLDLINE".into()),
            metadata: [("owner".to_owned(), "web team".to_owned())].into(),
            ..Default::default()
        };
        let h = initiate_headers(&opts).unwrap();
        assert_eq!(h[CONTENT_TYPE], "text/html");
        assert_eq!(h[CACHE_CONTROL], "max-age=60");
        assert_eq!(h[CONTENT_DISPOSITION], "inline");
        assert_eq!(h["x-goog-storage-class"], "COLDLINE");
        assert_eq!(h["x-goog-meta-owner"], "web team");
        assert!(h.get(CONTENT_ENCODING).is_none());
        // Nothing asked: the type every upload defaults to.
        let h = initiate_headers(&PutOptions::default()).unwrap();
        assert_eq!(h[CONTENT_TYPE], "application/octet-stream");
        assert_eq!(h.len(), 1);
        let bad = PutOptions {
            metadata: [("a b".to_owned(), "v".to_owned())].into(),
            ..Default::default()
        };
        assert!(initiate_headers(&bad).unwrap_err().contains("\"a b\""));
    }
}
