//! `--encryption-key` on every request that needs it (issue #54): a
//! customer-supplied key (CSEK) as `x-goog-encryption-*` headers on
//! uploads, media and metadata reads, composes and rewrites (with the
//! `x-goog-copy-source-encryption-*` headers for the source, taken to be
//! under the same key); a Cloud KMS key (CMEK) as `kmsKeyName` on inserts
//! and composes, `destinationKmsKeyName` on rewrites. Applied in
//! [`crate::client::Client::finish`], which every request passes.

use aws_lc_rs::digest::{SHA256, digest};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};
use shoal_core::encryption::{CustomerKey, GcsKey};
use shoal_core::{Error, ErrorKind};

/// Base64 of the key's SHA256: how GCS names a CSEK
/// (`customerEncryption.keySha256`).
pub(crate) fn key_sha256(k: &CustomerKey) -> String {
    STANDARD.encode(digest(&SHA256, k.bytes()).as_ref())
}

fn set(req: &mut reqwest::Request, name: &'static str, value: &str, secret: bool) {
    if let Ok(mut v) = HeaderValue::from_str(value) {
        v.set_sensitive(secret);
        req.headers_mut().insert(HeaderName::from_static(name), v);
    }
}

/// Adds what `key` asks of `req`.
pub(crate) fn apply(key: &GcsKey, req: &mut reqwest::Request) {
    let path = req.url().path().to_owned();
    let method = req.method().clone();
    let json = path.starts_with("/storage/v1/");
    let upload = path.starts_with("/upload/storage/v1/");
    let rewrite = json && (path.contains("/rewriteTo/") || path.contains("/copyTo/"));
    let compose = json && path.ends_with("/compose");
    let object = json && path.contains("/o/");
    // The XML API (`/bucket/key`): multipart uploads on Google.
    let xml = !json && !upload && !path.starts_with("/batch") && path[1..].contains('/');
    match key {
        GcsKey::Customer(k) => {
            let takes = upload
                || (object && matches!(method, Method::GET | Method::POST))
                || (xml
                    && matches!(
                        method,
                        Method::GET | Method::HEAD | Method::PUT | Method::POST
                    ));
            if !takes {
                return;
            }
            let (b64, sha) = (k.to_base64(), key_sha256(k));
            set(req, "x-goog-encryption-algorithm", "AES256", false);
            set(req, "x-goog-encryption-key", &b64, true);
            set(req, "x-goog-encryption-key-sha256", &sha, false);
            if rewrite {
                set(
                    req,
                    "x-goog-copy-source-encryption-algorithm",
                    "AES256",
                    false,
                );
                set(req, "x-goog-copy-source-encryption-key", &b64, true);
                set(req, "x-goog-copy-source-encryption-key-sha256", &sha, false);
            }
        }
        GcsKey::Kms(name) => {
            let param = if rewrite {
                "destinationKmsKeyName"
            } else if (upload && method == Method::POST) || compose {
                "kmsKeyName"
            } else {
                return;
            };
            req.url_mut().query_pairs_mut().append_pair(param, name);
        }
    }
}

/// A refusal a missing or wrong CSEK explains, said so, naming the key
/// sent by its SHA256 (never the key).
pub(crate) fn explain(key: Option<&GcsKey>, err: Error) -> Error {
    if !matches!(
        err.kind(),
        ErrorKind::InvalidInput | ErrorKind::PermissionDenied
    ) {
        return err;
    }
    let m = err.message().to_ascii_lowercase();
    if !(m.contains("encryption key") || m.contains("csek") || m.contains("encrypted")) {
        return err;
    }
    match key {
        Some(GcsKey::Customer(k)) => err.with_hint(format!(
            "the object may be under another key than the one given (SHA256 {}): give the key it was written with (--encryption-key, Python encryption_key=)",
            key_sha256(k)
        )),
        _ => err.with_hint(
            "the object is encrypted with a customer-supplied key: give it with --encryption-key (Python encryption_key=)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, url: &str) -> reqwest::Request {
        reqwest::Request::new(method, url.parse().unwrap())
    }

    #[test]
    fn csek_goes_on_object_requests_only() {
        let k = GcsKey::Customer(CustomerKey::new([9; 32]));
        let mut r = req(Method::GET, "http://h/storage/v1/b/b/o/k?alt=media");
        apply(&k, &mut r);
        assert!(r.headers().contains_key("x-goog-encryption-key"));
        assert!(r.headers()["x-goog-encryption-key"].is_sensitive());
        let mut r = req(Method::GET, "http://h/storage/v1/b/b/o?prefix=x");
        apply(&k, &mut r);
        assert!(r.headers().is_empty());
        let mut r = req(
            Method::POST,
            "http://h/storage/v1/b/b/o/k/rewriteTo/b/b2/o/k2",
        );
        apply(&k, &mut r);
        assert!(
            r.headers()
                .contains_key("x-goog-copy-source-encryption-key")
        );
    }

    #[test]
    fn cmek_names_the_key_on_inserts() {
        let k = GcsKey::Kms("projects/p/locations/l/keyRings/r/cryptoKeys/c".into());
        let mut r = req(
            Method::POST,
            "http://h/upload/storage/v1/b/b/o?uploadType=media",
        );
        apply(&k, &mut r);
        assert!(r.url().query().unwrap().contains("kmsKeyName=projects"));
        let mut r = req(Method::GET, "http://h/storage/v1/b/b/o/k");
        apply(&k, &mut r);
        assert!(!r.url().query().unwrap_or("").contains("kms"));
    }
}
