//! V4 signed URLs (`X-Goog-Algorithm=GOOG4-RSA-SHA256`), signed with a
//! service-account key.
//!
//! The RSA-SHA256 signature is google-cloud-auth's (`Signer`, from the
//! key file, signing locally: no request, no IAM permission needed);
//! SHA-256 is aws-lc-rs's. What is written here is only the text both sign:
//! Google's canonical request and string to sign, as documented at
//! <https://cloud.google.com/storage/docs/authentication/canonical-requests>.
//! A signature is all or nothing: one byte of that text unlike the server's
//! and the holder gets 403 with no hint why. So the text is pinned to
//! Google's own conformance cases (`conformance/gcs/v4_signatures.json` of
//! the shared test data, `signingV4Tests`: the canonical request, string to
//! sign and whole URL, signature included, of each case), not to our
//! reading of the docs. The rules that file settles and the docs leave
//! vague: the `host` line carries no port while the URL keeps it;
//! header values are trimmed and inner runs of whitespace collapsed;
//! every query name and value is percent-encoded but for `A-Za-z0-9-_.~`,
//! then the query sorted; an `x-goog-content-sha256` header replaces
//! `UNSIGNED-PAYLOAD`.
//!
//! [`unsigned_v4`] takes any method, headers, query and URL style, and
//! [`presign`] hands all of them through from a [`Presign`]: the
//! conformance cases (POST, virtual-hosted and bucket-bound hosts, signed
//! headers) run through the code users call. By default a URL is path
//! style (`BASE/BUCKET/KEY`) on the store's endpoint
//! (`https://storage.googleapis.com`, or an emulator's address under
//! `STORAGE_EMULATOR_HOST`) with only `host` signed, so a plain `curl URL`
//! is all a holder needs.

use std::time::{Duration, SystemTime};

use google_cloud_auth::signer::Signer;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use shoal_core::{Error, ErrorKind, Op, Presign, PresignStyle, Result};

use crate::client::encode;

#[cfg(test)]
mod conformance_tests;

/// Key bytes left alone in the path: unreserved and `/` (Google's own
/// libraries quote names with `safe="/~"`).
const KEY_PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

const ALGORITHM: &str = "GOOG4-RSA-SHA256";

/// Where the URL names the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UrlStyle {
    /// `HOST/BUCKET/KEY`.
    Path,
    /// `BUCKET.HOST/KEY`.
    VirtualHosted,
    /// `HOST/KEY`: HOST is a domain bound to the bucket (a CNAME, a load
    /// balancer), so the bucket appears nowhere.
    BucketBound,
}

/// Everything a V4 signed URL says, but who signs it.
pub(crate) struct V4Input<'a> {
    /// The HTTP method, as sent (`GET`, `PUT`, `POST`, ...).
    pub(crate) method: &'a str,
    /// `http` or `https`.
    pub(crate) scheme: &'a str,
    /// `host[:port]` as the URL carries it (the signed `host` has no port).
    pub(crate) authority: &'a str,
    /// The endpoint's own path, before the bucket or key (usually empty).
    pub(crate) base_path: &'a str,
    pub(crate) style: UrlStyle,
    pub(crate) bucket: &'a str,
    /// `None`: the bucket itself (a listing).
    pub(crate) key: Option<&'a str>,
    /// Headers the holder must send, signed with `host`.
    pub(crate) headers: &'a [(&'a str, &'a str)],
    /// Query parameters besides the `X-Goog-*` ones the signature adds.
    pub(crate) query: &'a [(&'a str, &'a str)],
    pub(crate) expires: Duration,
    /// When the URL is signed; it expires `expires` later.
    pub(crate) time: SystemTime,
}

/// Everything a URL is made of but the signature.
pub(crate) struct Unsigned {
    /// `scheme://host[:port]` + the path.
    pub(crate) url_base: String,
    /// The sorted, encoded query, signature excluded.
    pub(crate) query: String,
    /// The request the string to sign digests.
    #[cfg_attr(not(test), expect(dead_code, reason = "checked by the tests only"))]
    pub(crate) canonical_request: String,
    /// What the key signs.
    pub(crate) string_to_sign: String,
}

/// Builds the canonical request and string to sign of `input`, for the
/// service account `client_email`.
pub(crate) fn unsigned_v4(input: &V4Input<'_>, client_email: &str) -> Result<Unsigned> {
    let target = target(input.bucket, input.key);
    shoal_core::check_presign_expiry(input.expires, &target)?;
    if input.authority.is_empty() {
        return Err(Error::invalid(
            Op::Presign,
            target,
            format!("endpoint {}:// has no host", input.scheme),
        ));
    }
    let key_path = input
        .key
        .map(|k| format!("/{}", utf8_percent_encode(k, KEY_PATH)))
        .unwrap_or_default();
    let base = input.base_path.trim_end_matches('/');
    let (authority, path) = match input.style {
        UrlStyle::Path => (
            input.authority.to_owned(),
            format!("{base}/{}{key_path}", encode(input.bucket)),
        ),
        UrlStyle::VirtualHosted => (
            format!("{}.{}", input.bucket, input.authority),
            format!("{base}{key_path}"),
        ),
        UrlStyle::BucketBound => (input.authority.to_owned(), format!("{base}{key_path}")),
    };
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        path
    };

    let now = time::OffsetDateTime::from(input.time);
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let scope = format!("{}/auto/storage/goog4_request", &stamp[..8]);

    // Header names lowercased, values trimmed and inner whitespace
    // collapsed; sorted by name (stable, so a repeated name's values keep
    // their order and join with ','). The holder's own `host`, if given, wins.
    let mut headers: Vec<(String, String)> = input
        .headers
        .iter()
        .map(|(n, v)| {
            let v: Vec<&str> = v.split_ascii_whitespace().collect();
            (n.trim().to_ascii_lowercase(), v.join(" "))
        })
        .collect();
    if !headers.iter().any(|(n, _)| n == "host") {
        headers.push(("host".to_owned(), without_port(&authority).to_owned()));
    }
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    headers.dedup_by(|later, first| {
        let same = later.0 == first.0;
        if same {
            first.1.push(',');
            first.1.push_str(&later.1);
        }
        same
    });
    let signed_headers = headers
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let payload = headers
        .iter()
        .find(|(n, _)| n == "x-goog-content-sha256")
        .map_or("UNSIGNED-PAYLOAD", |(_, v)| v.as_str());

    // The signature's own parameters win over a caller's of the same name.
    let own = [
        ("X-Goog-Algorithm", ALGORITHM.to_owned()),
        ("X-Goog-Credential", format!("{client_email}/{scope}")),
        ("X-Goog-Date", stamp.clone()),
        ("X-Goog-Expires", input.expires.as_secs().to_string()),
        ("X-Goog-SignedHeaders", signed_headers.clone()),
    ];
    let mut params: Vec<(String, String)> = own
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_str()))
        .chain(
            input
                .query
                .iter()
                .filter(|(k, _)| !own.iter().any(|(o, _)| o == k) && *k != "X-Goog-Signature")
                .map(|(k, v)| (k.to_string(), *v)),
        )
        .map(|(k, v)| (encode(&k), encode(v)))
        .collect();
    params.sort();
    let query = params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");

    let canonical_headers: String = headers.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    let canonical_request = format!(
        "{}\n{path}\n{query}\n{canonical_headers}\n{signed_headers}\n{payload}",
        input.method
    );
    let digest =
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical_request.as_bytes());
    let string_to_sign = format!("{ALGORITHM}\n{stamp}\n{scope}\n{}", hex(digest.as_ref()));
    Ok(Unsigned {
        url_base: format!("{}://{authority}{path}", input.scheme),
        query,
        canonical_request,
        string_to_sign,
    })
}

/// `host[:port]` without the port (an IPv6 literal keeps its brackets).
fn without_port(authority: &str) -> &str {
    match authority.rsplit_once(':') {
        Some((host, port))
            if !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']')) =>
        {
            host
        }
        _ => authority,
    }
}

/// A store's endpoint, split as [`V4Input`] takes it.
struct Endpoint {
    scheme: String,
    authority: String,
    path: String,
}

impl Endpoint {
    /// `endpoint` is a URL, maybe with a path; `target` names the object
    /// in errors.
    fn parse(endpoint: &str, target: &str) -> Result<Endpoint> {
        let base = reqwest::Url::parse(endpoint).map_err(|e| {
            Error::invalid(Op::Presign, target, format!("bad endpoint {endpoint}: {e}"))
        })?;
        if base.host_str().is_none() {
            return Err(Error::invalid(
                Op::Presign,
                target,
                format!("endpoint {endpoint} has no host"),
            ));
        }
        // The authority as written: a default port given (`:443`) stays in
        // the URL, as Google's clients keep it (the parser drops it).
        let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let authority = authority
            .rsplit_once('@')
            .map_or(authority, |(_, a)| a)
            .to_owned();
        Ok(Endpoint {
            scheme: base.scheme().to_owned(),
            authority,
            path: base.path().to_owned(),
        })
    }

    /// The host a bucket-bound URL names: `host` or `scheme://host`; a
    /// bare host takes `scheme`.
    fn bucket_bound(host: &str, scheme: &str, target: &str) -> Result<Endpoint> {
        if host.contains("://") {
            Endpoint::parse(host, target)
        } else {
            Endpoint::parse(&format!("{scheme}://{host}"), target)
        }
    }
}

fn borrowed(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The parts of a [`Presign`]'s URL that [`V4Input`] borrows: where it
/// points, how it names the bucket, and the query with `userProject` (who
/// pays, if set) ahead of the caller's.
struct Resolved {
    ep: Endpoint,
    style: UrlStyle,
    query: Vec<(String, String)>,
}

impl Resolved {
    fn new(
        endpoint: &str,
        bucket: &str,
        key: &str,
        user_project: Option<&str>,
        p: &Presign,
    ) -> Result<Resolved> {
        let target = target(bucket, Some(key));
        let ep = Endpoint::parse(p.endpoint.as_deref().unwrap_or(endpoint), &target)?;
        let (ep, style) = match &p.style {
            PresignStyle::Path => (ep, UrlStyle::Path),
            PresignStyle::VirtualHosted => (ep, UrlStyle::VirtualHosted),
            PresignStyle::BucketBound(host) => (
                Endpoint::bucket_bound(host, &ep.scheme, &target)?,
                UrlStyle::BucketBound,
            ),
        };
        let query = user_project
            .map(|u| ("userProject".to_owned(), u.to_owned()))
            .into_iter()
            .chain(p.query.iter().cloned())
            .collect();
        Ok(Resolved { ep, style, query })
    }

    /// `p` on `bucket/key` (an empty key: the bucket).
    fn input<'a>(
        &'a self,
        bucket: &'a str,
        key: &'a str,
        headers: &'a [(&'a str, &'a str)],
        query: &'a [(&'a str, &'a str)],
        p: &Presign,
    ) -> V4Input<'a> {
        V4Input {
            method: p.method.as_str(),
            scheme: &self.ep.scheme,
            authority: &self.ep.authority,
            base_path: if self.style == UrlStyle::BucketBound {
                ""
            } else {
                &self.ep.path
            },
            style: self.style,
            bucket,
            key: (!key.is_empty()).then_some(key),
            headers,
            query,
            expires: p.expires,
            time: p.signed_at(),
        }
    }
}

/// Shoal's URL for `p` on `bucket/key` at `endpoint`, unsigned, billed to
/// `user_project` if set. What [`presign`] signs, for tests to look at.
#[cfg(test)]
pub(crate) fn unsigned(
    endpoint: &str,
    client_email: &str,
    bucket: &str,
    key: &str,
    user_project: Option<&str>,
    p: &Presign,
) -> Result<Unsigned> {
    let r = Resolved::new(endpoint, bucket, key, user_project, p)?;
    let (headers, query) = (borrowed(&p.headers), borrowed(&r.query));
    unsigned_v4(&r.input(bucket, key, &headers, &query, p), client_email)
}

/// The signed URL for `p` on `bucket/key` (an empty key: the bucket) at
/// `endpoint`, billed to `user_project` if set: what [`unsigned`] builds,
/// signed by `signer`.
pub(crate) async fn presign(
    signer: &Signer,
    endpoint: &str,
    bucket: &str,
    key: &str,
    user_project: Option<&str>,
    p: &Presign,
) -> Result<String> {
    let r = Resolved::new(endpoint, bucket, key, user_project, p)?;
    let (headers, query) = (borrowed(&p.headers), borrowed(&r.query));
    presign_v4(signer, &r.input(bucket, key, &headers, &query, p)).await
}

/// The URL a user would write (for error messages).
fn target(bucket: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => format!("gs://{bucket}/{key}"),
        None => format!("gs://{bucket}"),
    }
}

/// The signed URL: [`unsigned_v4`]'s text signed by `signer`.
pub(crate) async fn presign_v4(signer: &Signer, input: &V4Input<'_>) -> Result<String> {
    let target = target(input.bucket, input.key);
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        // The library's messages are about the key's format, never its bytes.
        Error::new(
            ErrorKind::Unauthenticated,
            Op::Presign,
            &target,
            format!("cannot sign with the service-account key: {what}: {e}"),
        )
        .with_hint("GOOGLE_APPLICATION_CREDENTIALS must name a service-account JSON key with private_key and client_email")
    };
    let email = (signer.client_email().await).map_err(|e| fail("client_email", &e))?;
    let u = unsigned_v4(input, &email)?;
    let sig = (signer.sign(u.string_to_sign.as_bytes()).await).map_err(|e| fail("signing", &e))?;
    Ok(format!(
        "{}?{}&X-Goog-Signature={}",
        u.url_base,
        u.query,
        hex(&sig)
    ))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
    use base64::Engine;
    use shoal_core::{MAX_PRESIGN_EXPIRY, PresignMethod};

    fn at(method: PresignMethod, expires: Duration, time: SystemTime) -> Presign {
        Presign {
            time: Some(time),
            ..Presign::new(method, expires)
        }
    }

    /// A service-account key made for this test (never a real one), and
    /// the matching public key.
    fn test_key() -> (serde_json::Value, Vec<u8>) {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        );
        let json = serde_json::json!({
            "type": "service_account",
            "project_id": "test-project",
            "private_key_id": "test",
            "private_key": pem,
            "client_email": "signer@test-project.iam.gserviceaccount.com",
        });
        (json, pair.public_key().as_ref().to_vec())
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn signed_url_has_googles_shape_and_verifies() {
        let (json, public) = test_key();
        let signer = google_cloud_auth::credentials::service_account::Builder::new(json)
            .build_signer()
            .unwrap();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let url = presign(
            &signer,
            "https://storage.googleapis.com",
            "my-bucket",
            "dir/a b+c%.txt",
            None,
            &at(PresignMethod::Get, Duration::from_secs(3600), t),
        )
        .await
        .unwrap();
        let (base, query) = url.split_once('?').unwrap();
        assert_eq!(
            base,
            "https://storage.googleapis.com/my-bucket/dir/a%20b%2Bc%25.txt"
        );
        let params: Vec<(&str, &str)> = query
            .split('&')
            .map(|p| p.split_once('=').unwrap())
            .collect();
        let names: Vec<&str> = params.iter().map(|p| p.0).collect();
        assert_eq!(
            names,
            [
                "X-Goog-Algorithm",
                "X-Goog-Credential",
                "X-Goog-Date",
                "X-Goog-Expires",
                "X-Goog-SignedHeaders",
                "X-Goog-Signature"
            ]
        );
        let get = |n: &str| params.iter().find(|p| p.0 == n).unwrap().1;
        assert_eq!(get("X-Goog-Algorithm"), "GOOG4-RSA-SHA256");
        assert_eq!(
            get("X-Goog-Credential"),
            "signer%40test-project.iam.gserviceaccount.com%2F20231114%2Fauto%2Fstorage%2Fgoog4_request"
        );
        assert_eq!(get("X-Goog-Date"), "20231114T221320Z");
        assert_eq!(get("X-Goog-Expires"), "3600");
        assert_eq!(get("X-Goog-SignedHeaders"), "host");

        // The signature is RSA-SHA256 of the string to sign, by this key.
        let u = unsigned(
            "https://storage.googleapis.com",
            "signer@test-project.iam.gserviceaccount.com",
            "my-bucket",
            "dir/a b+c%.txt",
            None,
            &at(PresignMethod::Get, Duration::from_secs(3600), t),
        )
        .unwrap();
        let lines: Vec<&str> = u.string_to_sign.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "GOOG4-RSA-SHA256",
                "20231114T221320Z",
                "20231114/auto/storage/goog4_request"
            ]
        );
        assert_eq!(lines[3].len(), 64);
        let sig = unhex(get("X-Goog-Signature"));
        let key = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public);
        key.verify(u.string_to_sign.as_bytes(), &sig).unwrap();
        // ...and of nothing else: another object's text does not verify.
        let other = unsigned(
            "https://storage.googleapis.com",
            "signer@test-project.iam.gserviceaccount.com",
            "my-bucket",
            "dir/other",
            None,
            &at(PresignMethod::Get, Duration::from_secs(3600), t),
        )
        .unwrap();
        assert!(key.verify(other.string_to_sign.as_bytes(), &sig).is_err());
    }

    #[test]
    fn emulator_endpoint_and_user_project() {
        let u = unsigned(
            "http://127.0.0.1:4443",
            "a@b",
            "b",
            "k",
            Some("payer"),
            &at(
                PresignMethod::Put,
                Duration::from_secs(60),
                SystemTime::UNIX_EPOCH,
            ),
        )
        .unwrap();
        assert_eq!(u.url_base, "http://127.0.0.1:4443/b/k");
        // The URL keeps the port, the signed `host` does not (as Google's
        // conformance cases sign `localhost:8080`).
        assert!(
            u.canonical_request.contains("\nhost:127.0.0.1\n"),
            "{}",
            u.canonical_request
        );
        assert!(u.query.ends_with("&userProject=payer"), "{}", u.query);
        for bad in [Duration::ZERO, MAX_PRESIGN_EXPIRY + Duration::from_secs(1)] {
            let e = unsigned(
                "http://h",
                "a@b",
                "b",
                "k",
                None,
                &at(PresignMethod::Get, bad, SystemTime::UNIX_EPOCH),
            )
            .err()
            .unwrap();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
        }
    }
}
