//! Request plumbing: URLs, authorization, retries, and turning HTTP answers
//! into shoal errors. Every request of this crate goes through
//! [`Client::call`], so these rules hold everywhere:
//!
//! - Object names are opaque. They are percent-encoded as *one* path segment
//!   (every byte but the RFC 3986 unreserved set, so `/` becomes `%2F`) and
//!   the same way as query values. `a//b`, `dir/`, `100%`, `x+y?#` reach the
//!   server unchanged; nothing is normalised.
//! - Errors name the user's URL (`gs://bucket/key`) and the operation, not
//!   the HTTP URL: that is what the user typed and can act on.
//! - Each attempt is built afresh by a closure (bodies are `Bytes`, cheap to
//!   clone), so [`RetryPolicy::run`] can re-send it. What is retryable is
//!   the error's kind, decided once in shoal-core.
//! - A success status whose body we cannot read as expected is a `Protocol`
//!   error with a one-line "expected ..." message, never a panic.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use shoal_core::encryption::CustomerKey;
use shoal_core::retry::RetryPolicy;
use shoal_core::{Error, ErrorKind, ObjectMeta, Op, Result};
use shoal_http::http::{error_from_reqwest, error_from_response};

use crate::config::GcsConfig;
use crate::credential::Auth;

/// Everything except RFC 3986 unreserved characters (`A-Za-z0-9-_.~`).
const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a bucket or object name as one path segment, or a value
/// for the query string.
pub(crate) fn encode(s: &str) -> String {
    utf8_percent_encode(s, STRICT).to_string()
}

/// The URL a user would write for this object (used in error messages).
pub(crate) fn gs_url(bucket: &str, key: &str) -> String {
    format!("gs://{bucket}/{key}")
}

/// A query string under construction: `?a=1&b=2`, values encoded.
#[derive(Default)]
pub(crate) struct Query(String);

impl Query {
    pub(crate) fn new() -> Self {
        Query(String::new())
    }
    pub(crate) fn add(mut self, name: &str, value: &str) -> Self {
        self.0.push(if self.0.is_empty() { '?' } else { '&' });
        self.0.push_str(name);
        self.0.push('=');
        self.0.push_str(&encode(value));
        self
    }
    pub(crate) fn add_opt(self, name: &str, value: Option<&str>) -> Self {
        match value {
            Some(v) => self.add(name, v),
            None => self,
        }
    }
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The HTTP client bound to one endpoint and one credential source.
pub(crate) struct Client {
    pub(crate) http: shoal_http::transport::Http,
    pub(crate) base: String,
    pub(crate) auth: Auth,
    pub(crate) retry: RetryPolicy,
    /// `userProject` added to every request (requester pays).
    pub(crate) user_project: Option<String>,
    /// `--encryption-key`, added where requests need it (`encryption.rs`).
    pub(crate) encryption: shoal_core::encryption::GcsEncryption,
    /// The server refused a batch request (`batch`): no more are offered.
    pub(crate) batch_refused: std::sync::atomic::AtomicBool,
    /// Which of [`GcsEncryption::read_keys`](shoal_core::encryption::GcsEncryption::read_keys)
    /// the last read of an object was taken with.
    read_key: std::sync::atomic::AtomicUsize,
}

impl Client {
    pub(crate) fn new(cfg: &GcsConfig) -> Result<Self> {
        Ok(Client {
            http: cfg.http.build()?,
            base: cfg.base_url(),
            auth: Auth::new(cfg.anonymous, cfg.credentials_file.clone()),
            retry: cfg.retry,
            user_project: cfg.user_project.clone(),
            encryption: cfg.encryption.clone(),
            batch_refused: std::sync::atomic::AtomicBool::new(false),
            read_key: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// `{base}/storage/v1/b/{bucket}`.
    pub(crate) fn bucket_url(&self, bucket: &str) -> String {
        format!("{}/storage/v1/b/{}", self.base, encode(bucket))
    }

    /// `{base}/storage/v1/b/{bucket}/o/{key}`.
    pub(crate) fn object_url(&self, bucket: &str, key: &str) -> String {
        format!("{}/o/{}", self.bucket_url(bucket), encode(key))
    }

    /// `{base}/upload/storage/v1/b/{bucket}/o`.
    pub(crate) fn upload_url(&self, bucket: &str) -> String {
        format!("{}/upload/storage/v1/b/{}/o", self.base, encode(bucket))
    }

    /// One attempt: authorize, send, and fail on a non-2xx status. A read
    /// of an object, when customer keys are given, goes through
    /// [`Client::read_with_keys`].
    pub(crate) async fn attempt(
        &self,
        op: Op,
        url: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response> {
        let req = match self.auth.headers(op, url).await? {
            Some(h) => req.headers(h),
            None => req,
        };
        let req = req.build().map_err(|e| error_from_reqwest(op, url, e))?;
        let keys = self.encryption.read_keys();
        if keys.len() > 1 && crate::encryption::reads_an_object(&req) {
            return self.read_with_keys(op, url, req, &keys).await;
        }
        let req = self.finish(req);
        self.send(op, url, req)
            .await
            .map_err(|e| crate::encryption::explain(&keys, e))
    }

    async fn send(&self, op: Op, url: &str, req: reqwest::Request) -> Result<reqwest::Response> {
        let resp = self.http.execute(op, url, req).await?;
        if resp.status().is_success() {
            Ok(resp)
        } else {
            Err(classify(
                error_from_response(op, url, resp, server_message).await,
            ))
        }
    }

    /// A read sent with each candidate key in turn until one is taken
    /// (see `encryption.rs`): the one that last worked first.
    async fn read_with_keys(
        &self,
        op: Op,
        url: &str,
        req: reqwest::Request,
        keys: &[Option<&CustomerKey>],
    ) -> Result<reqwest::Response> {
        let sent = shoal_core::encryption::read_with_keys(
            keys,
            &self.read_key,
            crate::encryption::is_key_refusal,
            |k| {
                let r = req.try_clone();
                async move {
                    let Some(mut r) = r else {
                        return Err(Error::new(
                            ErrorKind::Protocol,
                            op,
                            url,
                            "a read with a body cannot be sent again",
                        ));
                    };
                    self.add_project(&mut r);
                    crate::encryption::apply(self.encryption.key.as_ref(), k, &mut r);
                    self.send(op, url, r).await
                }
            },
        )
        .await;
        sent.map_err(|e| crate::encryption::explain(keys, e))
    }

    fn add_project(&self, req: &mut reqwest::Request) {
        if let Some(p) = &self.user_project {
            req.url_mut()
                .query_pairs_mut()
                .append_pair("userProject", p);
        }
    }

    /// What every request carries whatever built it: `userProject` for
    /// requester-pays buckets, and the keys (`encryption.rs`; a read of an
    /// object takes the key that last worked).
    pub(crate) fn finish(&self, mut req: reqwest::Request) -> reqwest::Request {
        self.add_project(&mut req);
        let keys = self.encryption.read_keys();
        let read = keys
            .get(self.read_key.load(Ordering::Relaxed) % keys.len().max(1))
            .copied()
            .flatten();
        crate::encryption::apply(self.encryption.key.as_ref(), read, &mut req);
        req
    }

    /// Sends the request `make` builds, retrying per the policy, and returns
    /// the successful response (its body not yet read).
    pub(crate) async fn call<F>(&self, op: Op, url: &str, make: F) -> Result<reqwest::Response>
    where
        F: Fn(&shoal_http::transport::Http) -> reqwest::RequestBuilder,
    {
        self.retry
            .run(url, || self.attempt(op, url, make(&self.http)))
            .await
    }

    /// One attempt, its whole body read: what the safe retries of writes
    /// and deletes ([`shoal_core::retry::safe`]) send each time.
    pub(crate) async fn once_bytes(
        &self,
        op: Op,
        url: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<Bytes> {
        let resp = self.attempt(op, url, req).await?;
        resp.bytes()
            .await
            .map_err(|e| error_from_reqwest(op, url, e))
    }

    /// The object's metadata now, or None if there is none: the one read a
    /// safe retry makes before sending a write again.
    pub(crate) async fn probe(&self, bucket: &str, key: &str) -> Result<Option<ObjectMeta>> {
        match self.head(bucket, key).await {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Like [`Client::call`], and reads the whole body inside the retry, so
    /// a connection dropped mid-body is retried too.
    pub(crate) async fn call_bytes<F>(&self, op: Op, url: &str, make: F) -> Result<Bytes>
    where
        F: Fn(&shoal_http::transport::Http) -> reqwest::RequestBuilder,
    {
        self.retry
            .run(url, || async {
                let resp = self.attempt(op, url, make(&self.http)).await?;
                resp.bytes()
                    .await
                    .map_err(|e| error_from_reqwest(op, url, e))
            })
            .await
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}
#[derive(Deserialize)]
struct ErrorDetail {
    message: Option<String>,
}

/// The server's own message from a JSON error body
/// (`{"error":{"code":404,"message":"..."}}`).
pub(crate) fn json_error_message(body: &str) -> Option<String> {
    serde_json::from_str::<ErrorBody>(body)
        .ok()?
        .error
        .message
        .filter(|m| !m.is_empty())
}

/// The server's message from an error body: JSON from the JSON API, an
/// S3-style `<Error>` document from the XML API (multipart uploads).
fn server_message(body: &str) -> Option<String> {
    json_error_message(body).or_else(|| shoal_core::xml::error_code_message(body))
}

/// Refines the generic status mapping with what GCS means by it: a 400
/// about a checksum is an integrity failure (the bytes that arrived are not
/// the bytes we declared), not a malformed request.
fn classify(err: Error) -> Error {
    let m = err.message().to_ascii_lowercase();
    let checksum = ((m.contains("crc32c") || m.contains("md5"))
        && (m.contains("match") || m.contains("invalid")))
        || m.contains("baddigest");
    if err.status() == Some(400) && checksum {
        return with_kind(err, ErrorKind::Integrity)
            .with_hint("the data changed or was corrupted on the way; it was not stored");
    }
    err
}

/// The same error with another kind (shoal-core's `Error` has no setter).
pub(crate) fn with_kind(err: Error, kind: ErrorKind) -> Error {
    let mut e = Error::new(kind, err.op(), err.url(), err.message());
    if let Some(s) = err.status() {
        e = e.with_status(s);
    }
    e
}

/// A success response whose body is not what we expected.
pub(crate) fn protocol(op: Op, url: &str, expected: &str, detail: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Protocol,
        op,
        url,
        format!("unexpected response from the server: expected {expected} ({detail})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_opaque_segment() {
        assert_eq!(encode("a//b"), "a%2F%2Fb");
        assert_eq!(encode("dir/"), "dir%2F");
        assert_eq!(
            encode("sp ace/ü/100%/x+y?#"),
            "sp%20ace%2F%C3%BC%2F100%25%2Fx%2By%3F%23"
        );
        assert_eq!(encode("A-z_0.9~"), "A-z_0.9~");
        assert_eq!(encode(".."), "..");
    }

    #[test]
    fn query_values_are_encoded() {
        let q = Query::new()
            .add("prefix", "a b&c=d/")
            .add_opt("delimiter", Some("/"))
            .add_opt("pageToken", None);
        assert_eq!(q.as_str(), "?prefix=a%20b%26c%3Dd%2F&delimiter=%2F");
    }

    #[test]
    fn user_project_goes_on_every_request() {
        let cfg = GcsConfig {
            user_project: Some("pay-er".into()),
            ..Default::default()
        };
        let c = Client::new(&cfg).unwrap();
        for url in [
            "http://h/storage/v1/b/b/o/k?alt=media",
            "http://h/storage/v1/b/b/o",
        ] {
            let r = c.finish(c.http.get(url).build().unwrap());
            assert!(
                r.url().query().unwrap().ends_with("userProject=pay-er"),
                "{}",
                r.url()
            );
        }
        let c = Client::new(&GcsConfig::default()).unwrap();
        let r = c.finish(c.http.get("http://h/x").build().unwrap());
        assert_eq!(r.url().query(), None);
    }

    #[test]
    fn json_error_messages() {
        let body = r#"{"error":{"code":404,"message":"No such object: b/k","errors":[]}}"#;
        assert_eq!(
            json_error_message(body).as_deref(),
            Some("No such object: b/k")
        );
        assert_eq!(json_error_message("<html>nope</html>"), None);
        assert_eq!(json_error_message(r#"{"error":{"code":500}}"#), None);
        assert_eq!(
            server_message("<Error><Code>NoSuchUpload</Code><Message>gone</Message></Error>")
                .as_deref(),
            Some("NoSuchUpload: gone")
        );
    }

    #[test]
    fn checksum_rejections_are_integrity_errors() {
        let e = Error::new(
            ErrorKind::Rejected,
            Op::Upload,
            "gs://b/k",
            "HTTP 400 Bad Request: provided CRC32C \"AAAAAA==\" doesn't match calculated CRC32C \"mnG7TA==\"",
        )
        .with_status(400);
        assert_eq!(classify(e).kind(), ErrorKind::Integrity);
        let e = Error::new(
            ErrorKind::Rejected,
            Op::Upload,
            "gs://b/k",
            "HTTP 400: bad name",
        )
        .with_status(400);
        assert_eq!(classify(e).kind(), ErrorKind::Rejected);
    }
}
