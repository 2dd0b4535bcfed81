//! What an [`S3Store`](crate::S3Store) is built from.
//!
//! The environment is read in exactly one place, [`S3Config::from_env`], so a
//! library user (or a test) can build a config by hand and know nothing else
//! is consulted, except the credential chain, which by its nature reads
//! profiles and env on first use (see `credential.rs`).

use std::fmt;

use shoal_core::retry::RetryPolicy;
use shoal_http::http::HttpConfig;

/// How a bucket appears in request URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Addressing {
    /// Path style for custom endpoints (IPs, localhost, any `--endpoint-url`:
    /// MinIO and most S3-compatible servers only do paths), virtual-host style
    /// for AWS, except for bucket names that are not valid DNS labels or
    /// contain dots (the `*.s3.amazonaws.com` TLS certificate cannot cover
    /// `a.b.s3...`), which fall back to path style.
    #[default]
    Auto,
    /// `https://endpoint/bucket/key`.
    Path,
    /// `https://bucket.endpoint/key`.
    VirtualHost,
}

/// Settings for an S3 or S3-compatible endpoint.
#[derive(Clone)]
pub struct S3Config {
    /// Custom endpoint such as `http://127.0.0.1:9000`; None means AWS
    /// (`https://s3.{region}.amazonaws.com`).
    pub endpoint: Option<String>,
    /// Region used for signing (and for the AWS endpoint).
    pub region: String,
    /// Path or virtual-host style URLs.
    pub addressing: Addressing,
    /// Send unsigned requests (`--no-sign-request`), for public buckets.
    pub anonymous: bool,
    /// Explicit access key id (takes precedence over everything else).
    pub access_key: Option<String>,
    /// Explicit secret access key.
    pub secret_key: Option<String>,
    /// Explicit session token for temporary credentials.
    pub session_token: Option<String>,
    /// Profile for the AWS credential chain (`AWS_PROFILE`).
    pub profile: Option<String>,
    /// Send `x-amz-request-payer: requester` on every request (and put it
    /// in presigned URLs): this account pays for a requester-pays bucket.
    pub request_payer: bool,
    /// Server-side encryption and customer keys for every object request
    /// (`--sse`, `--sse-kms-key-id`, `--sse-c-key-file`).
    pub encryption: shoal_core::encryption::S3Encryption,
    /// HTTP client settings.
    pub http: HttpConfig,
    /// Retry policy for every request.
    pub retry: RetryPolicy,
}

/// The region when nothing says otherwise: the one AWS tools default to, and
/// the one MinIO answers as.
pub const DEFAULT_REGION: &str = "us-east-1";

impl Default for S3Config {
    fn default() -> Self {
        S3Config {
            endpoint: None,
            region: DEFAULT_REGION.to_owned(),
            addressing: Addressing::Auto,
            anonymous: false,
            access_key: None,
            secret_key: None,
            session_token: None,
            profile: None,
            request_payer: false,
            encryption: Default::default(),
            http: HttpConfig::default(),
            retry: RetryPolicy::default(),
        }
    }
}

impl S3Config {
    /// Endpoint, region and profile from the standard AWS variables:
    /// `AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`; `AWS_REGION`, then
    /// `AWS_DEFAULT_REGION`, else `us-east-1`; `AWS_PROFILE`. Credentials are
    /// not read here: they are resolved lazily on the first request.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        S3Config {
            endpoint: var("AWS_ENDPOINT_URL_S3").or_else(|| var("AWS_ENDPOINT_URL")),
            region: var("AWS_REGION")
                .or_else(|| var("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| DEFAULT_REGION.to_owned()),
            profile: var("AWS_PROFILE"),
            ..Default::default()
        }
    }
}

/// Shows whether a secret is set, never its value.
pub(crate) fn redacted(v: &Option<String>) -> &'static str {
    if v.is_some() {
        "Some(<redacted>)"
    } else {
        "None"
    }
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("addressing", &self.addressing)
            .field("anonymous", &self.anonymous)
            // The access key id is not secret, but it identifies an account;
            // it stays out of logs too.
            .field("access_key", &redacted(&self.access_key))
            .field("secret_key", &redacted(&self.secret_key))
            .field("session_token", &redacted(&self.session_token))
            .field("profile", &self.profile)
            .field("request_payer", &self.request_payer)
            .field("encryption", &self.encryption)
            .field("http", &self.http)
            .field("retry", &self.retry)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_secrets() {
        let cfg = S3Config {
            access_key: Some("AKIAEXAMPLEKEYID".into()),
            secret_key: Some("wJalrXUtnFEMI/K7MDENG".into()),
            session_token: Some("FwoGZXIvYXdzEJr".into()),
            ..Default::default()
        };
        let s = format!("{cfg:?}");
        assert!(!s.contains("AKIAEXAMPLEKEYID"), "{s}");
        assert!(!s.contains("wJalrXUtnFEMI"), "{s}");
        assert!(!s.contains("FwoGZXIvYXdzEJr"), "{s}");
        assert!(s.contains("<redacted>"));
    }
}
