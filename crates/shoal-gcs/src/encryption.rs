//! `--encryption-key` on every request that needs it (issue #54): a
//! customer-supplied key (CSEK) as `x-goog-encryption-*` headers on
//! uploads, media and metadata reads, composes and rewrites; a Cloud KMS key (CMEK) as `kmsKeyName` on inserts
//! and composes, `destinationKmsKeyName` on rewrites. Applied in
//! [`crate::client::Client::finish`], which every request passes.
//!
//! Reads are different: an object takes exactly the key it was written
//! with, and a key sent to an object under another one (or none) is
//! refused. As gcloud does with `--decryption-keys`, a read tries the keys
//! given (`--encryption-key`, then each decryption key, then none), starting
//! from the one that last worked, so a bucket under one key costs one
//! refusal per run, not one per object. A rewrite's source is read the same
//! way (the `x-goog-copy-source-encryption-*` headers), so an object under
//! a decryption key is copied server-side, as gcloud copies it, into the
//! destination's key or none. Only reads and rewrites are tried again: a
//! refused one changed nothing.

use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};
use shoal_core::encryption::{CustomerKey, GcsKey};
use shoal_core::{Error, ErrorKind};

/// Base64 of the key's SHA256: how GCS names a CSEK
/// (`customerEncryption.keySha256`).
pub(crate) fn key_sha256(k: &CustomerKey) -> String {
    k.sha256_base64()
}

fn set(req: &mut reqwest::Request, name: &'static str, value: &str, secret: bool) {
    if let Ok(mut v) = HeaderValue::from_str(value) {
        v.set_sensitive(secret);
        req.headers_mut().insert(HeaderName::from_static(name), v);
    }
}

/// Whether `req` reads an object (its bytes or its metadata): the
/// requests that take the key the object was written with, whichever of
/// the keys given that is (see [`Client::attempt`](crate::client::Client)).
pub(crate) fn is_object_read(req: &reqwest::Request) -> bool {
    let path = req.url().path();
    matches!(*req.method(), Method::GET | Method::HEAD)
        && path.starts_with("/storage/v1/")
        && path.contains("/o/")
}

/// Whether `req` is a server-side copy (`rewriteTo`, `copyTo`): it reads
/// its source under the source's own key, as a read does, whatever key
/// the destination is written with.
pub(crate) fn is_rewrite(req: &reqwest::Request) -> bool {
    let path = req.url().path();
    path.starts_with("/storage/v1/") && (path.contains("/rewriteTo/") || path.contains("/copyTo/"))
}

/// Whether `req` takes one of the read keys: an object read, or a
/// rewrite's source.
pub(crate) fn reads_an_object(req: &reqwest::Request) -> bool {
    is_object_read(req) || is_rewrite(req)
}

fn set_customer(req: &mut reqwest::Request, prefix: &'static [&'static str; 3], k: &CustomerKey) {
    let (b64, sha) = (k.to_base64(), key_sha256(k));
    set(req, prefix[0], "AES256", false);
    set(req, prefix[1], &b64, true);
    set(req, prefix[2], &sha, false);
}

const KEY: [&str; 3] = [
    "x-goog-encryption-algorithm",
    "x-goog-encryption-key",
    "x-goog-encryption-key-sha256",
];
const SOURCE_KEY: [&str; 3] = [
    "x-goog-copy-source-encryption-algorithm",
    "x-goog-copy-source-encryption-key",
    "x-goog-copy-source-encryption-key-sha256",
];

/// Adds what the keys ask of `req`: writes take `key` (`--encryption-key`);
/// a read of an object, and a rewrite's source, take `read`, the candidate
/// its caller chose
/// ([`GcsEncryption::read_keys`](shoal_core::encryption::GcsEncryption::read_keys)).
pub(crate) fn apply(key: Option<&GcsKey>, read: Option<&CustomerKey>, req: &mut reqwest::Request) {
    if is_object_read(req) {
        if let Some(k) = read {
            set_customer(req, &KEY, k);
        }
        return;
    }
    let rewrite = is_rewrite(req);
    if rewrite && let Some(k) = read {
        set_customer(req, &SOURCE_KEY, k);
    }
    let Some(key) = key else { return };
    let path = req.url().path().to_owned();
    let method = req.method().clone();
    let json = path.starts_with("/storage/v1/");
    let upload = path.starts_with("/upload/storage/v1/");
    let compose = json && path.ends_with("/compose");
    let object = json && path.contains("/o/");
    // The XML API (`/bucket/key`): multipart uploads on Google.
    let xml = !json && !upload && !path.starts_with("/batch") && path[1..].contains('/');
    match key {
        GcsKey::Customer(k) => {
            let takes = upload
                || (object && method == Method::POST)
                || (xml
                    && matches!(
                        method,
                        Method::GET | Method::HEAD | Method::PUT | Method::POST
                    ));
            if !takes {
                return;
            }
            set_customer(req, &KEY, k);
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

/// Whether the server refused a request for its customer key: none given
/// where the object has one, one given where it has none, or another one.
pub(crate) fn is_key_refusal(err: &Error) -> bool {
    if !matches!(
        err.kind(),
        ErrorKind::InvalidInput | ErrorKind::PermissionDenied | ErrorKind::Rejected
    ) {
        return false;
    }
    let m = err.message().to_ascii_lowercase();
    m.contains("encryption key") || m.contains("csek") || m.contains("encrypted")
}

/// A refusal a missing or wrong CSEK explains, said so, naming the keys
/// tried by their SHA256 (never the keys).
pub(crate) fn explain(tried: &[Option<&CustomerKey>], err: Error) -> Error {
    if !is_key_refusal(&err) {
        return err;
    }
    let shas: Vec<String> = tried.iter().flatten().map(|k| key_sha256(k)).collect();
    if shas.is_empty() {
        return err.with_hint(
            "the object is encrypted with a customer-supplied key: give it with --encryption-key or --decryption-keys (Python encryption_key=, decryption_keys=)",
        );
    }
    err.with_hint(format!(
        "the object is under none of the keys given (SHA256 {}): give the key it was written with (--encryption-key or --decryption-keys; Python encryption_key=, decryption_keys=)",
        shas.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, url: &str) -> reqwest::Request {
        reqwest::Request::new(method, url.parse().unwrap())
    }

    #[test]
    fn csek_goes_on_object_requests_only() {
        let ck = CustomerKey::new([9; 32]);
        let k = GcsKey::Customer(ck.clone());
        let mut r = req(Method::GET, "http://h/storage/v1/b/b/o/k?alt=media");
        apply(Some(&k), Some(&ck), &mut r);
        assert!(r.headers().contains_key("x-goog-encryption-key"));
        assert!(r.headers()["x-goog-encryption-key"].is_sensitive());
        // A read takes the candidate its caller chose, not the write key.
        let mut r = req(Method::GET, "http://h/storage/v1/b/b/o/k?alt=media");
        apply(Some(&k), None, &mut r);
        assert!(r.headers().is_empty());
        let mut r = req(Method::GET, "http://h/storage/v1/b/b/o?prefix=x");
        apply(Some(&k), Some(&ck), &mut r);
        assert!(r.headers().is_empty());
        let mut r = req(
            Method::POST,
            "http://h/storage/v1/b/b/o/k/rewriteTo/b/b2/o/k2",
        );
        apply(Some(&k), Some(&ck), &mut r);
        assert!(
            r.headers()
                .contains_key("x-goog-copy-source-encryption-key")
        );
        // A rewrite's source takes the read candidate, its destination the
        // write key; with no read candidate the source goes without one.
        let sha = |r: &reqwest::Request, h: &str| {
            r.headers().get(h).map(|v| v.to_str().unwrap().to_owned())
        };
        let mut r = req(
            Method::POST,
            "http://h/storage/v1/b/b/o/k/rewriteTo/b/b2/o/k2",
        );
        let other = CustomerKey::new([7; 32]);
        apply(Some(&k), Some(&other), &mut r);
        assert_eq!(
            sha(&r, "x-goog-copy-source-encryption-key-sha256"),
            Some(key_sha256(&other))
        );
        assert_eq!(
            sha(&r, "x-goog-encryption-key-sha256"),
            Some(key_sha256(&ck))
        );
        let mut r = req(
            Method::POST,
            "http://h/storage/v1/b/b/o/k/rewriteTo/b/b2/o/k2",
        );
        apply(None, None, &mut r);
        assert!(r.headers().is_empty());
    }

    #[test]
    fn cmek_names_the_key_on_inserts() {
        let k = GcsKey::Kms("projects/p/locations/l/keyRings/r/cryptoKeys/c".into());
        let mut r = req(
            Method::POST,
            "http://h/upload/storage/v1/b/b/o?uploadType=media",
        );
        apply(Some(&k), None, &mut r);
        assert!(r.url().query().unwrap().contains("kmsKeyName=projects"));
        let mut r = req(Method::GET, "http://h/storage/v1/b/b/o/k");
        apply(Some(&k), None, &mut r);
        assert!(!r.url().query().unwrap_or("").contains("kms"));
    }
}
