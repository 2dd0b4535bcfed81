//! SigV4 signing, through `aws-sigv4` (signing is not something to write by
//! hand: canonicalisation has too many corner cases).
//!
//! The settings are what S3 needs for opaque keys:
//! - `PercentEncodingMode::Single`: the path we built is already encoded
//!   once; S3 (unlike other AWS services) does not want it encoded twice.
//! - `UriPathNormalizationMode::Disabled`: `a//b` and a trailing `/` are
//!   part of the key, not something to clean up.
//! - `PayloadChecksumKind::XAmzSha256`: S3 requires `x-amz-content-sha256`.
//!
//! Bodies are sent as `UNSIGNED-PAYLOAD`: hashing every uploaded byte with
//! SHA-256 would cost more CPU than the upload itself, and integrity already
//! comes from `x-amz-checksum-crc32c`, which the server verifies (TLS guards
//! against tampering on the way). Bodyless requests sign the empty-body hash.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation,
    SigningSettings, UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use shoal_core::{Error, ErrorKind, Op, Result};

/// The SigV4 service name for S3.
const SERVICE: &str = "s3";

/// Signs one request and returns the headers to add (`authorization`,
/// `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token`).
/// `headers` are the request's own headers, all of which get signed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sign_request(
    creds: &Credentials,
    region: &str,
    method: &str,
    url: &str,
    headers: &[(std::borrow::Cow<'static, str>, String)],
    has_body: bool,
    time: SystemTime,
    op: Op,
    target: &str,
) -> Result<Vec<(&'static str, String)>> {
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;

    let identity = creds.clone().into();
    let fail = |what: &str, e: &dyn std::error::Error| {
        // Signing errors are about header values or the URL; they never
        // contain the secret key.
        Error::new(
            ErrorKind::InvalidInput,
            op,
            target,
            format!("cannot sign the request: {what}: {}", e),
        )
    };
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| fail("signing parameters", &e))?
        .into();
    let body = if has_body {
        SignableBody::UnsignedPayload
    } else {
        SignableBody::empty()
    };
    let req = SignableRequest::new(
        method,
        url,
        headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())),
        body,
    )
    .map_err(|e| fail("request", &e))?;
    let (instructions, _sig) = sign(req, &params)
        .map_err(|e| fail("signature", &e))?
        .into_parts();
    let (out, _query) = instructions.into_parts();
    Ok(out
        .into_iter()
        .map(|h| (h.name(), h.value().to_owned()))
        .collect())
}

/// A presigned URL: `url` (already holding any parameters of its own)
/// with the SigV4 query parameters (`X-Amz-Algorithm`, `X-Amz-Credential`,
/// `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders`,
/// `X-Amz-Signature`, and `X-Amz-Security-Token` for temporary
/// credentials) added, for `p`'s method, life and signing time. `host`
/// and `p`'s headers are signed (the holder must send those headers as
/// given), and the body is `UNSIGNED-PAYLOAD`, so without headers a plain
/// `curl URL` (or `curl -T file URL` for a PUT) is all its holder needs.
pub(crate) fn presign_url(
    creds: &Credentials,
    region: &str,
    p: &shoal_core::Presign,
    url: &str,
    target: &str,
) -> Result<String> {
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(p.expires);
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;

    let identity = creds.clone().into();
    let fail = |what: &str, e: &dyn std::error::Error| {
        Error::new(
            ErrorKind::InvalidInput,
            Op::Presign,
            target,
            format!("cannot sign the URL: {what}: {e}"),
        )
    };
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(p.signed_at())
        .settings(settings)
        .build()
        .map_err(|e| fail("signing parameters", &e))?
        .into();
    let req = SignableRequest::new(
        p.method.as_str(),
        url,
        p.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| fail("request", &e))?;
    let (instructions, _sig) = sign(req, &params)
        .map_err(|e| fail("signature", &e))?
        .into_parts();
    let (_headers, query) = instructions.into_parts();
    let mut out = url.to_owned();
    let mut sep = if url.contains('?') { '&' } else { '?' };
    for (name, value) in query {
        out.push(sep);
        sep = '&';
        out.push_str(name);
        out.push('=');
        out.push_str(&crate::endpoint::encode_query(&value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_the_path_as_given() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let h = sign_request(
            &creds,
            "us-east-1",
            "GET",
            "http://127.0.0.1:9000/b/a//b/100%25/",
            &[("range".into(), "bytes=0-9".to_owned())],
            false,
            t,
            Op::Download,
            "s3://b/a//b/100%/",
        )
        .unwrap();
        let get = |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_str());
        assert_eq!(
            get("x-amz-content-sha256"),
            Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        assert_eq!(get("x-amz-date"), Some("20231114T221320Z"));
        let auth = get("authorization").unwrap();
        assert!(
            auth.contains("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"),
            "{auth}"
        );
        assert!(!auth.contains("secret"));

        let h = sign_request(
            &creds,
            "us-east-1",
            "PUT",
            "http://h/b/k",
            &[],
            true,
            t,
            Op::Upload,
            "s3://b/k",
        )
        .unwrap();
        assert!(
            h.iter()
                .any(|(k, v)| *k == "x-amz-content-sha256" && v == "UNSIGNED-PAYLOAD")
        );
    }

    #[test]
    fn presigns_in_the_query() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", Some("tok/en".into()), None, "test");
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let p = shoal_core::Presign {
            time: Some(t),
            ..shoal_core::Presign::new(
                shoal_core::PresignMethod::Get,
                std::time::Duration::from_secs(3600),
            )
        };
        let u = presign_url(
            &creds,
            "us-east-1",
            &p,
            "http://127.0.0.1:9000/b/a//b",
            "s3://b/a//b",
        )
        .unwrap();
        assert!(u.starts_with("http://127.0.0.1:9000/b/a//b?"), "{u}");
        for p in [
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Credential=AKIDEXAMPLE%2F20231114%2Fus-east-1%2Fs3%2Faws4_request",
            "X-Amz-Date=20231114T221320Z",
            "X-Amz-Expires=3600",
            "X-Amz-SignedHeaders=host",
            "X-Amz-Security-Token=tok%2Fen",
            "X-Amz-Signature=",
        ] {
            assert!(u.contains(p), "{p} in {u}");
        }
        assert!(!u.contains("secret"), "{u}");
    }
}
