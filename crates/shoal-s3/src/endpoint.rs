//! Turning `(bucket, key, query)` into the HTTP URL of a request.
//!
//! Keys are opaque: the key is percent-encoded here, once, byte for byte
//! (everything but the unreserved `A-Za-z0-9-_.~` and `/`), and the signer is
//! told to take that path as-is (single encoding, no normalisation). So
//! `a//b`, `100%`, spaces, unicode and a trailing `/` reach the server
//! unchanged. The one thing no encoding can protect is a `.` or `..` path
//! segment: the URL parser under reqwest removes them (WHATWG treats `%2E` as
//! a dot too), so [`Endpoint::url`]'s caller checks the parsed path and
//! refuses such keys instead of silently writing a different object.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use shoal_core::{Error, ErrorKind, Op, Result};

use crate::config::{Addressing, S3Config};

/// Bytes left alone in a key path: RFC 3986 unreserved, plus `/` which S3
/// keys use as a separator and which must stay literal in the path.
const KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// Query values: unreserved only (`/`, `+`, `=`, `&` all encoded), which is
/// also what SigV4's canonical query string wants.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a key for the URL path.
pub fn encode_key(key: &str) -> String {
    utf8_percent_encode(key, KEY).to_string()
}

/// Percent-encodes a query parameter value.
pub(crate) fn encode_query(v: &str) -> String {
    utf8_percent_encode(v, QUERY).to_string()
}

/// A parsed endpoint, ready to build URLs.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    scheme: String,
    /// `host[:port]`, port only when not the scheme's default.
    authority: String,
    /// Path prefix of the endpoint without a trailing `/` (usually empty).
    base_path: String,
    addressing: Addressing,
    /// Whether the user chose the endpoint (vs. AWS's own).
    custom: bool,
}

impl Endpoint {
    pub(crate) fn new(cfg: &S3Config) -> Result<Self> {
        let (raw, custom) = match &cfg.endpoint {
            Some(e) => (e.trim().to_owned(), true),
            None => (aws_endpoint(&cfg.region), false),
        };
        let bad = |msg: &str| Error::invalid(Op::Parse, &raw, msg);
        let url = reqwest::Url::parse(&raw).map_err(|e| {
            bad(&format!(
                "not a valid endpoint URL ({e}); expected e.g. http://127.0.0.1:9000"
            ))
        })?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(bad("endpoint scheme must be http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            // Credentials in a URL end up in logs and error messages.
            return Err(bad(
                "endpoint URL must not contain credentials; use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad("endpoint URL must not have a query or fragment"));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("endpoint URL has no host"))?;
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        };
        Ok(Endpoint {
            scheme: url.scheme().to_owned(),
            authority,
            base_path: url.path().trim_end_matches('/').to_owned(),
            addressing: cfg.addressing,
            custom,
        })
    }

    /// Whether requests for `bucket` put it in the host name.
    pub(crate) fn virtual_host(&self, bucket: &str) -> bool {
        if bucket.is_empty() {
            // The endpoint itself (ListBuckets).
            return false;
        }
        match self.addressing {
            Addressing::Path => false,
            Addressing::VirtualHost => true,
            Addressing::Auto => !self.custom && dns_compatible(bucket) && !bucket.contains('.'),
        }
    }

    /// The request URL. `key` None addresses the bucket itself. Query
    /// values are raw; they are encoded here. An empty value is written as
    /// a bare name (`?uploads`).
    pub(crate) fn url(&self, bucket: &str, key: Option<&str>, query: &[(&str, String)]) -> String {
        let mut s = String::with_capacity(
            self.scheme.len()
                + self.authority.len()
                + bucket.len()
                + key.map_or(0, |k| k.len() * 3)
                + 32,
        );
        s.push_str(&self.scheme);
        s.push_str("://");
        let vhost = self.virtual_host(bucket);
        if vhost {
            s.push_str(bucket);
            s.push('.');
        }
        s.push_str(&self.authority);
        s.push_str(&self.base_path);
        if !vhost {
            s.push('/');
            s.push_str(bucket);
        }
        match key {
            Some(k) => {
                s.push('/');
                s.push_str(&encode_key(k));
            }
            None if vhost => s.push('/'),
            None => {}
        }
        for (i, (name, value)) in query.iter().enumerate() {
            s.push(if i == 0 { '?' } else { '&' });
            s.push_str(name);
            if !value.is_empty() {
                s.push('=');
                s.push_str(&encode_query(value));
            }
        }
        s
    }
}

/// AWS's regional endpoint. China regions live under their own suffix.
fn aws_endpoint(region: &str) -> String {
    if region.starts_with("cn-") {
        format!("https://s3.{region}.amazonaws.com.cn")
    } else {
        format!("https://s3.{region}.amazonaws.com")
    }
}

/// Whether a bucket name can be a DNS label sequence (lowercase letters,
/// digits, `-` and `.`, 3–63 characters).
fn dns_compatible(bucket: &str) -> bool {
    (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !bucket.starts_with(['-', '.'])
        && !bucket.ends_with(['-', '.'])
}

/// Refuses bucket names that would change the meaning of a URL. This is
/// looser than AWS's rules on purpose (legacy buckets and other servers use
/// uppercase and `_`); the server judges the rest.
pub(crate) fn check_bucket(op: Op, bucket: &str) -> Result<()> {
    let ok = !bucket.is_empty()
        && bucket.len() <= 255
        && bucket
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidInput,
            op,
            format!("s3://{bucket}"),
            "invalid bucket name: use letters, digits, '-', '.' and '_'",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(endpoint: Option<&str>, addressing: Addressing) -> Endpoint {
        Endpoint::new(&S3Config {
            endpoint: endpoint.map(str::to_owned),
            region: "eu-west-1".into(),
            addressing,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn keys_are_encoded_byte_for_byte() {
        assert_eq!(encode_key("a b/ü/100%/x+y"), "a%20b/%C3%BC/100%25/x%2By");
        assert_eq!(encode_key("a//b/"), "a//b/");
        assert_eq!(encode_key("A-z_0.9~"), "A-z_0.9~");
        assert_eq!(encode_key("q?#&=\n\x01"), "q%3F%23%26%3D%0A%01");
        assert_eq!(encode_query("a/b c+d=&"), "a%2Fb%20c%2Bd%3D%26");
    }

    #[test]
    fn path_style_for_custom_endpoints() {
        let e = ep(Some("http://127.0.0.1:9000"), Addressing::Auto);
        assert_eq!(
            e.url("b", Some("a b/k/"), &[]),
            "http://127.0.0.1:9000/b/a%20b/k/"
        );
        assert_eq!(
            e.url(
                "b",
                None,
                &[("list-type", "2".into()), ("prefix", "x/".into())]
            ),
            "http://127.0.0.1:9000/b?list-type=2&prefix=x%2F"
        );
        assert_eq!(
            e.url("b", Some("k"), &[("uploads", String::new())]),
            "http://127.0.0.1:9000/b/k?uploads"
        );
        // A path prefix on the endpoint is kept; a trailing slash is not doubled.
        let e = ep(Some("https://proxy.example/s3/"), Addressing::Auto);
        assert_eq!(e.url("b", Some("k"), &[]), "https://proxy.example/s3/b/k");
    }

    #[test]
    fn virtual_host_for_aws() {
        let e = ep(None, Addressing::Auto);
        assert_eq!(
            e.url("my-bucket", Some("k/x"), &[]),
            "https://my-bucket.s3.eu-west-1.amazonaws.com/k/x"
        );
        assert_eq!(
            e.url("my-bucket", None, &[]),
            "https://my-bucket.s3.eu-west-1.amazonaws.com/"
        );
        // Dots would break the wildcard TLS certificate: path style.
        assert_eq!(
            e.url("a.b", Some("k"), &[]),
            "https://s3.eu-west-1.amazonaws.com/a.b/k"
        );
        let e = ep(None, Addressing::Path);
        assert_eq!(
            e.url("my-bucket", Some("k"), &[]),
            "https://s3.eu-west-1.amazonaws.com/my-bucket/k"
        );
        let e = ep(Some("http://localhost:9000"), Addressing::VirtualHost);
        assert_eq!(e.url("b", Some("k"), &[]), "http://b.localhost:9000/k");
    }

    #[test]
    fn bad_endpoints_and_buckets() {
        for bad in [
            "127.0.0.1:9000",
            "ftp://h",
            "http://user:pw@h",
            "http://h/?x=1",
            "http://",
        ] {
            let cfg = S3Config {
                endpoint: Some(bad.into()),
                ..Default::default()
            };
            assert!(Endpoint::new(&cfg).is_err(), "{bad}");
        }
        assert!(check_bucket(Op::Stat, "ok-bucket.1_A").is_ok());
        for bad in ["", "a/b", "a?b", "a b", "ü"] {
            assert_eq!(
                check_bucket(Op::Stat, bad).unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        }
    }

    #[test]
    fn reqwest_keeps_encoded_paths() {
        // What reaches the wire must be what was signed.
        let e = ep(Some("http://127.0.0.1:9000"), Addressing::Auto);
        for key in ["a b/ü/100%/x+y", "a//b", "trailing/", "%2F", "~x"] {
            let url = e.url("b", Some(key), &[]);
            let parsed = reqwest::Url::parse(&url).unwrap();
            assert_eq!(parsed.as_str(), url);
        }
        // Dot segments do not survive parsing; client.rs refuses them.
        let url = e.url("b", Some("x/./y"), &[]);
        assert_ne!(reqwest::Url::parse(&url).unwrap().as_str(), url);
    }
}
