//! Request plumbing: build the URL, sign, send, retry, and turn failures
//! into errors a user can act on. Every operation goes through here, so
//! retries, credentials and error wording are decided once.
//!
//! A request is a plain value ([`Request`]) with its body as `Bytes`, so a
//! retry re-signs (fresh date) and re-sends the same bytes without copying.
//! Operations that read a response body retry the whole exchange, parsing
//! included: a connection reset mid-body, or S3's "200 OK with an `<Error>`
//! inside" for a slow CompleteMultipartUpload, is then one more attempt
//! rather than a failed transfer. Errors name the user's `s3://bucket/key`,
//! never the HTTP URL (which may be a virtual host the user never typed).

use std::borrow::Cow;
use std::time::SystemTime;

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use shoal_core::encryption::{CustomerKey, S3Encryption, S3RequestKind};
use shoal_core::retry::RetryPolicy;
use shoal_core::{Error, ErrorKind, Op, Result};
use shoal_http::http::{error_from_reqwest, error_from_response, hint_for, status_hint};

use crate::credential::CredentialSource;
use crate::endpoint::Endpoint;
use crate::sign::sign_request;
use shoal_core::xml::error_code_message;

/// Largest XML response we read into memory. A full ListObjectsV2 page is
/// 1000 keys of up to 1 KiB, tripled by URL encoding, plus ~0.5 KiB of
/// fields each: under 4 MiB. 64 MiB leaves room without letting a broken
/// server stream forever into RAM.
pub(crate) const MAX_XML_BODY: usize = 64 << 20;

/// Everything one request needs, reusable across retries.
#[derive(Debug, Clone)]
pub(crate) struct Request<'a> {
    pub(crate) method: Method,
    pub(crate) op: Op,
    pub(crate) bucket: &'a str,
    pub(crate) key: Option<&'a str>,
    /// The user-facing URL for errors (`s3://bucket/key`).
    pub(crate) target: String,
    pub(crate) query: Vec<(&'static str, String)>,
    /// Lowercase names; all of them are signed.
    /// Names are lowercase (`HeaderName` needs them so); most are static,
    /// custom metadata's (`x-amz-meta-KEY`) are made per request.
    pub(crate) headers: Vec<(Cow<'static, str>, String)>,
    /// None for bodyless requests (GET, HEAD, DELETE).
    pub(crate) body: Option<Bytes>,
}

impl<'a> Request<'a> {
    pub(crate) fn new(method: Method, op: Op, bucket: &'a str, key: Option<&'a str>) -> Self {
        let target = match key {
            Some(k) => format!("s3://{bucket}/{k}"),
            None => format!("s3://{bucket}"),
        };
        Request {
            method,
            op,
            bucket,
            key,
            target,
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
        }
    }
    pub(crate) fn query(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }
    pub(crate) fn header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<String>,
    ) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub(crate) fn body(mut self, body: Bytes) -> Self {
        self.body = Some(body);
        self
    }
}

/// The connection to one endpoint: HTTP client, addressing, credentials.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) http: shoal_http::transport::Http,
    pub(crate) endpoint: Endpoint,
    pub(crate) creds: CredentialSource,
    pub(crate) region: String,
    pub(crate) retry: RetryPolicy,
    /// Add [`REQUEST_PAYER`] to every request (`--request-payer`).
    pub(crate) request_payer: bool,
    /// Keys added to every request that reads or writes an object's bytes.
    pub(crate) encryption: shoal_core::encryption::S3Encryption,
    /// Which of [`S3Encryption::read_keys`] the last read of an object was
    /// taken with.
    pub(crate) read_key: std::sync::atomic::AtomicUsize,
    /// The store's own handle on this client: what a request spawned
    /// after its caller was dropped (an abort, `copy::AbortCopy`) holds.
    pub(crate) me: std::sync::Weak<Client>,
}

/// The header (and presigned-URL parameter) by which a requester agrees to
/// pay for a requester-pays bucket, with its one value.
pub(crate) const REQUEST_PAYER: (&str, &str) = ("x-amz-request-payer", "requester");

impl Client {
    /// Sends with retries; returns the response of a 2xx answer.
    pub(crate) async fn send(&self, req: &Request<'_>) -> Result<reqwest::Response> {
        let what = format!("{} {}", req.op, req.target);
        self.retry.run(&what, || self.send_once(req)).await
    }

    /// Sends with retries, reads the body (bounded) and hands it to `parse`;
    /// a retryable error from any of the three repeats the whole exchange.
    pub(crate) async fn send_parse<T>(
        &self,
        req: &Request<'_>,
        parse: impl Fn(&HeaderMap, &[u8]) -> Result<T>,
    ) -> Result<T> {
        let what = format!("{} {}", req.op, req.target);
        self.retry
            .run(&what, || async {
                let resp = self.send_once(req).await?;
                let headers = resp.headers().clone();
                let body = read_body(resp, req.op, &req.target).await?;
                parse(&headers, &body)
            })
            .await
    }

    /// One attempt. A read of an object, when customer keys are given, is
    /// sent with each key it may be under in turn (the one that last worked
    /// first) until one is taken: the key, the copy source's key, none. A
    /// copy's source and its destination are read under their own keys;
    /// only reads go again, which have no body and change nothing.
    pub(crate) async fn send_once(&self, req: &Request<'_>) -> Result<reqwest::Response> {
        let keys = self.encryption.read_keys();
        if keys.len() < 2 || !is_object_read(req) {
            return self.send_with(req, None).await;
        }
        let sent = shoal_core::encryption::read_with_keys(
            &keys,
            &self.read_key,
            |e| {
                matches!(
                    e.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::InvalidInput | ErrorKind::Rejected
                )
            },
            |k| self.send_with(req, Some(k)),
        )
        .await;
        sent.map_err(|e| key_error(&keys, req, e))
    }

    /// One attempt; `read`: the customer key a read goes with (None: the
    /// configured keys, by the request's kind).
    async fn send_with(
        &self,
        req: &Request<'_>,
        read: Option<Option<&CustomerKey>>,
    ) -> Result<reqwest::Response> {
        if let Some(key) = req.key {
            check_key(req.op, &req.target, key)?;
        }
        let url = self.endpoint.url(req.bucket, req.key, &req.query);
        let creds = self.creds.get(req.op, &req.target).await?;
        let payer;
        let encryption = match read {
            Some(k) => self
                .encryption
                .headers_with(S3RequestKind::Access, false, k),
            None => encryption_headers(&self.encryption, req),
        };
        let req = if self.request_payer || !encryption.is_empty() {
            let mut r = req.clone();
            if self.request_payer {
                r = r.header(REQUEST_PAYER.0, REQUEST_PAYER.1);
            }
            for (name, value) in encryption {
                r = r.header(name, value);
            }
            payer = r;
            &payer
        } else {
            req
        };
        let mut headers = HeaderMap::with_capacity(req.headers.len() + 4);
        for (name, value) in &req.headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                Error::invalid(
                    req.op,
                    &req.target,
                    format!("{name:?} cannot be sent as a header name"),
                )
            })?;
            let mut value = header_value(req.op, &req.target, name, value)?;
            value.set_sensitive(S3Encryption::is_secret_header(name));
            headers.insert(header, value);
        }
        if let Some(creds) = &creds {
            let signed = sign_request(
                creds,
                &self.region,
                req.method.as_str(),
                &url,
                &req.headers,
                req.body.as_ref().is_some_and(|b| !b.is_empty()),
                SystemTime::now(),
                req.op,
                &req.target,
            )?;
            for (name, value) in signed {
                let mut v = header_value(req.op, &req.target, name, &value)?;
                v.set_sensitive(true);
                headers.insert(HeaderName::from_static(name), v);
            }
        }
        let mut builder = self.http.request(req.method.clone(), &url).headers(headers);
        if let Some(body) = &req.body {
            builder = builder.body(body.clone());
        }
        tracing::trace!(method = %req.method, target = %req.target, "s3 request");
        let resp = self.http.send(req.op, &req.target, builder).await?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let err = s3_error(req.op, &req.target, resp).await;
        let err = match read {
            Some(_) => err,
            None => key_error(&self.encryption.read_keys(), req, err),
        };
        if creds.is_none() && err.kind() == ErrorKind::PermissionDenied {
            let msg = err.message().to_owned();
            return Err(rebuild(
                &err,
                req.op,
                &req.target,
                msg,
                Some("unsigned requests (--no-sign-request) only reach public data: give credentials".into()),
            ));
        }
        Err(err)
    }
}

/// The encryption headers `req` takes, by what it does: S3 refuses SSE
/// headers on reads and wants the customer key on every request that
/// touches the object's bytes (a part, a range, a HEAD), and nowhere else.
fn encryption_headers(e: &S3Encryption, req: &Request<'_>) -> Vec<(String, String)> {
    if e.is_empty() || req.key.is_none() {
        return Vec::new();
    }
    let has = |name: &str| req.query.iter().any(|(n, _)| *n == name);
    let copy = req.headers.iter().any(|(n, _)| n == "x-amz-copy-source");
    // Sub-resources (tagging, acl, retention...) take no keys.
    let plain = req.query.iter().all(|(n, _)| {
        matches!(
            *n,
            "versionId" | "partNumber" | "uploadId" | "uploads" | "attributes"
        )
    });
    if !plain {
        return Vec::new();
    }
    let kind = match req.method {
        Method::PUT if has("partNumber") => S3RequestKind::Access,
        Method::PUT => S3RequestKind::Create,
        Method::POST if has("uploads") => S3RequestKind::Create,
        // CompleteMultipartUpload: S3 wants the key when the parts carry
        // checksums (ours always do) to compute the whole object's.
        Method::POST if has("uploadId") => S3RequestKind::Access,
        Method::GET | Method::HEAD if !has("uploadId") => S3RequestKind::Access,
        _ => return Vec::new(),
    };
    e.headers(kind, copy)
}

/// Whether `req` reads an object (GetObject, HeadObject, of a version or
/// a part number), the requests [`Client::send_once`] tries keys for.
fn is_object_read(req: &Request<'_>) -> bool {
    matches!(req.method, Method::GET | Method::HEAD)
        && req.key.is_some()
        && req
            .query
            .iter()
            .all(|(n, _)| matches!(*n, "versionId" | "partNumber"))
}

/// A read refusal that a missing or wrong SSE-C key explains, said so:
/// which keys were sent (by their MD5, as S3 names keys) and what to try.
fn key_error(tried: &[Option<&CustomerKey>], req: &Request<'_>, err: Error) -> Error {
    if !is_object_read(req)
        || !matches!(
            err.kind(),
            ErrorKind::PermissionDenied | ErrorKind::InvalidInput | ErrorKind::Rejected
        )
    {
        return err;
    }
    let md5s: Vec<String> = tried.iter().flatten().map(|k| k.md5_base64()).collect();
    let hint = if md5s.is_empty() {
        if err.kind() == ErrorKind::PermissionDenied {
            return err;
        }
        "the object may be encrypted with a customer key (SSE-C): give it with --sse-c-key-file (Python: sse_c_key=)".to_owned()
    } else {
        format!(
            "the object is under none of the customer keys given (MD5 {}): give the key it was written with (--sse-c-key-file, Python: sse_c_key=)",
            md5s.join(", ")
        )
    };
    let msg = err.message().to_owned();
    rebuild(&err, req.op, &req.target, msg, Some(hint))
}

/// Refuses keys the HTTP stack would rewrite (see `endpoint.rs`).
pub(crate) fn check_key(op: Op, target: &str, key: &str) -> Result<()> {
    if key.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(Error::invalid(
            op,
            target,
            "keys with '.' or '..' path segments cannot be addressed over S3's HTTP API by shoal \
             (URL parsing would rewrite them into another key)",
        ));
    }
    Ok(())
}

fn header_value(op: Op, target: &str, name: &str, value: &str) -> Result<HeaderValue> {
    HeaderValue::from_str(value).map_err(|_| {
        Error::invalid(
            op,
            target,
            format!("invalid characters in the {name} header"),
        )
    })
}

/// Reads a whole (XML) response body, bounded by [`MAX_XML_BODY`].
pub(crate) async fn read_body(mut resp: reqwest::Response, op: Op, target: &str) -> Result<Bytes> {
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_XML_BODY as u64)
    {
        return Err(too_big(op, target));
    }
    let mut buf = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| error_from_reqwest(op, target, e))?
    {
        if buf.len() + chunk.len() > MAX_XML_BODY {
            return Err(too_big(op, target));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.into())
}

fn too_big(op: Op, target: &str) -> Error {
    Error::new(
        ErrorKind::Protocol,
        op,
        target,
        format!("expected an XML response under {MAX_XML_BODY} bytes, got more"),
    )
}

/// Builds the error for a non-2xx answer: status, S3 code and message, and a
/// hint that points at the likely cause.
pub(crate) async fn s3_error(op: Op, target: &str, resp: reqwest::Response) -> Error {
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim().trim_matches('"').to_owned())
            .filter(|s| !s.is_empty())
    };
    // HEAD answers carry no body; MinIO puts the code in headers instead.
    let minio_code = header("x-minio-error-code");
    let minio_desc = header("x-minio-error-desc");
    let bucket_region = header("x-amz-bucket-region");
    let err = error_from_response(op, target, resp, extract_error).await;

    let mut message = err.message().to_owned();
    if !message.contains(": ") {
        match (&minio_code, &minio_desc) {
            (Some(c), Some(d)) => message = format!("{message}: {c}: {d}"),
            (Some(c), None) => message = format!("{message}: {c}"),
            _ => {}
        }
    }
    let code = minio_code.unwrap_or_else(|| {
        // "HTTP 403 Forbidden: SignatureDoesNotMatch: ..." -> the code.
        message.split(": ").nth(1).unwrap_or("").to_owned()
    });
    let hint = credential_hint(&code, err.status(), bucket_region.as_deref())
        .or_else(|| code_hint(&code))
        .or_else(|| err.status().and_then(status_hint).map(str::to_owned))
        .or_else(|| hint_for(err.kind(), op, target));
    rebuild(&err, op, target, message, hint)
}

/// What an S3 error code says better than its status: a 404 for a
/// missing upload is not a missing bucket.
fn code_hint(code: &str) -> Option<String> {
    match code {
        "NoSuchUpload" => Some(
            "the multipart upload was completed or aborted meanwhile (by this run's retry, \
             another process, or a lifecycle rule); run the command again"
                .into(),
        ),
        "NoSuchBucket" => {
            Some("the bucket does not exist: check its name (shoal mb creates one)".into())
        }
        _ => None,
    }
}

/// Builds a new error with the same kind, status and retry-after.
pub(crate) fn rebuild(
    err: &Error,
    op: Op,
    target: &str,
    message: String,
    hint: Option<String>,
) -> Error {
    let mut e = Error::new(err.kind(), op, target, message);
    if let Some(s) = err.status() {
        e = e.with_status(s);
    }
    if let Some(a) = err.retry_after() {
        e = e.with_retry_after(a);
    }
    if let Some(h) = hint {
        e = e.with_hint(h);
    }
    e
}

fn extract_error(body: &str) -> Option<String> {
    error_code_message(body)
}

/// Hints for answers that mean "your credentials or region are wrong", which
/// `status_kind` alone (403 → permission) would misdirect.
fn credential_hint(code: &str, status: Option<u16>, bucket_region: Option<&str>) -> Option<String> {
    let creds = "the server rejected the credentials: check AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY (or the profile in AWS_PROFILE)";
    Some(match code {
        "SignatureDoesNotMatch" => format!("{creds}; a wrong secret key, or a wrong --region, gives this"),
        "InvalidAccessKeyId" | "InvalidClientTokenId" => {
            format!("{creds}; the access key id is unknown to this endpoint")
        }
        "InvalidToken" | "ExpiredToken" | "TokenRefreshRequired" => {
            "the session token is invalid or expired: refresh the credentials (e.g. aws sso login) or unset AWS_SESSION_TOKEN".to_owned()
        }
        "RequestTimeTooSkewed" => "the local clock is wrong: fix the system time".to_owned(),
        "AuthorizationHeaderMalformed" | "PermanentRedirect" | "IllegalLocationConstraintException" => {
            region_hint(bucket_region)
        }
        "AccessDenied" => {
            "the credentials lack permission for this (or are not the ones you meant: check AWS_PROFILE / AWS_ACCESS_KEY_ID); for public data try --no-sign-request".to_owned()
        }
        _ if status == Some(301) => region_hint(bucket_region),
        _ => return None,
    })
}

fn region_hint(bucket_region: Option<&str>) -> String {
    match bucket_region {
        Some(r) => format!("the bucket is in region {r}: set --region {r} or AWS_REGION={r}"),
        None => "the bucket is in another region: set --region or AWS_REGION".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_are_refused() {
        for k in [".", "..", "a/./b", "a/../b", "x/.."] {
            assert_eq!(
                check_key(Op::Upload, "s3://b/k", k).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        }
        for k in ["a//b", ".x", "x.", "...", "a/.b/", "", "/"] {
            assert!(check_key(Op::Upload, "s3://b/k", k).is_ok(), "{k}");
        }
    }

    #[test]
    fn a_missing_upload_is_not_a_missing_bucket() {
        let h = code_hint("NoSuchUpload").unwrap();
        assert!(
            h.contains("completed or aborted") && !h.contains("bucket"),
            "{h}"
        );
        assert!(code_hint("NoSuchBucket").unwrap().contains("shoal mb"));
        assert_eq!(code_hint("NoSuchKey"), None);
    }

    #[test]
    fn credential_hints() {
        assert!(
            credential_hint("SignatureDoesNotMatch", Some(403), None)
                .unwrap()
                .contains("AWS_SECRET_ACCESS_KEY")
        );
        assert!(
            credential_hint("InvalidAccessKeyId", Some(403), None)
                .unwrap()
                .contains("AWS_ACCESS_KEY_ID")
        );
        assert!(
            credential_hint("", Some(301), Some("eu-west-2"))
                .unwrap()
                .contains("--region eu-west-2")
        );
        assert!(credential_hint("NoSuchKey", Some(404), None).is_none());
    }
}
