//! V4 signed URLs (`X-Goog-Algorithm=GOOG4-RSA-SHA256`), signed with a
//! service-account key.
//!
//! The RSA-SHA256 signature is google-cloud-auth's (`Signer`, from the
//! key file, signing locally: no request, no IAM permission needed);
//! SHA-256 is aws-lc-rs's. What is written here is only the text both sign:
//! Google's canonical request (method, path, sorted query, `host`,
//! `UNSIGNED-PAYLOAD`) and string to sign, as documented at
//! <https://cloud.google.com/storage/docs/authentication/canonical-requests>.
//!
//! The URL addresses the object path style (`BASE/BUCKET/KEY`), on the
//! store's endpoint: `https://storage.googleapis.com` by default, an
//! emulator's address under `STORAGE_EMULATOR_HOST`. Only `host` is
//! signed, so a plain `curl URL` is all a holder needs.

use std::time::{Duration, SystemTime};

use google_cloud_auth::signer::Signer;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use shoal_core::{Error, ErrorKind, Op, PresignMethod, Result};

use crate::client::encode;

/// Key bytes left alone in the path: unreserved and `/` (Google's own
/// libraries quote names with `safe="/~"`).
const KEY_PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

const ALGORITHM: &str = "GOOG4-RSA-SHA256";

/// Everything a URL is made of but the signature.
pub(crate) struct Unsigned {
    /// `scheme://host[:port]` + the path.
    pub(crate) url_base: String,
    /// The sorted, encoded query, signature excluded.
    pub(crate) query: String,
    /// What the key signs.
    pub(crate) string_to_sign: String,
}

/// Builds the canonical request and string to sign for `method` on
/// `bucket/key` at `endpoint`, valid `expires` from `time`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn unsigned(
    endpoint: &str,
    client_email: &str,
    method: PresignMethod,
    bucket: &str,
    key: &str,
    user_project: Option<&str>,
    expires: Duration,
    time: SystemTime,
) -> Result<Unsigned> {
    let target = format!("gs://{bucket}/{key}");
    shoal_core::check_presign_expiry(expires, &target)?;
    let base = reqwest::Url::parse(endpoint).map_err(|e| {
        Error::invalid(
            Op::Presign,
            &target,
            format!("bad endpoint {endpoint}: {e}"),
        )
    })?;
    let host = match (base.host_str(), base.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        (None, _) => {
            return Err(Error::invalid(
                Op::Presign,
                target,
                format!("endpoint {endpoint} has no host"),
            ));
        }
    };
    let path = format!(
        "{}/{}/{}",
        base.path().trim_end_matches('/'),
        encode(bucket),
        utf8_percent_encode(key, KEY_PATH)
    );
    let now = time::OffsetDateTime::from(time);
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
    // Sorted by name, byte order: every `X-Goog-…` sorts before `userProject`.
    let mut params = vec![
        ("X-Goog-Algorithm", ALGORITHM.to_owned()),
        ("X-Goog-Credential", format!("{client_email}/{scope}")),
        ("X-Goog-Date", stamp.clone()),
        ("X-Goog-Expires", expires.as_secs().to_string()),
        ("X-Goog-SignedHeaders", "host".to_owned()),
    ];
    if let Some(p) = user_project {
        params.push(("userProject", p.to_owned()));
    }
    let query = params
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let canonical = format!(
        "{}\n{path}\n{query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD",
        method.as_str()
    );
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes());
    let string_to_sign = format!("{ALGORITHM}\n{stamp}\n{scope}\n{}", hex(digest.as_ref()));
    Ok(Unsigned {
        url_base: format!("{}://{host}{path}", base.scheme()),
        query,
        string_to_sign,
    })
}

/// The signed URL: [`unsigned`]'s text signed by `signer`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn presign(
    signer: &Signer,
    endpoint: &str,
    method: PresignMethod,
    bucket: &str,
    key: &str,
    user_project: Option<&str>,
    expires: Duration,
    time: SystemTime,
) -> Result<String> {
    let target = format!("gs://{bucket}/{key}");
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
    let u = unsigned(
        endpoint,
        &email,
        method,
        bucket,
        key,
        user_project,
        expires,
        time,
    )?;
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
    use shoal_core::MAX_PRESIGN_EXPIRY;

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
            PresignMethod::Get,
            "my-bucket",
            "dir/a b+c%.txt",
            None,
            Duration::from_secs(3600),
            t,
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
            PresignMethod::Get,
            "my-bucket",
            "dir/a b+c%.txt",
            None,
            Duration::from_secs(3600),
            t,
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
            PresignMethod::Get,
            "my-bucket",
            "dir/other",
            None,
            Duration::from_secs(3600),
            t,
        )
        .unwrap();
        assert!(key.verify(other.string_to_sign.as_bytes(), &sig).is_err());
    }

    #[test]
    fn emulator_endpoint_and_user_project() {
        let u = unsigned(
            "http://127.0.0.1:4443",
            "a@b",
            PresignMethod::Put,
            "b",
            "k",
            Some("payer"),
            Duration::from_secs(60),
            SystemTime::UNIX_EPOCH,
        )
        .unwrap();
        assert_eq!(u.url_base, "http://127.0.0.1:4443/b/k");
        assert!(u.query.ends_with("&userProject=payer"), "{}", u.query);
        for bad in [Duration::ZERO, MAX_PRESIGN_EXPIRY + Duration::from_secs(1)] {
            let e = unsigned(
                "http://h",
                "a@b",
                PresignMethod::Get,
                "b",
                "k",
                None,
                bad,
                SystemTime::UNIX_EPOCH,
            )
            .err()
            .unwrap();
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
        }
    }
}
