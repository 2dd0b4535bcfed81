//! HTTP plumbing shared by the cloud backends: one client configuration,
//! and the translation of HTTP failures into [`Error`]s a user can act on.
//!
//! Defaults and why:
//! - HTTP/1.1 with a large connection pool: S3 speaks only 1.1, and separate
//!   connections out-run one multiplexed HTTP/2 connection for bulk bytes.
//! - `read_timeout` is the longest silence (no byte of the request taken by
//!   the server while it is sent, no byte of the answer while it is
//!   awaited or read), not a whole-request timeout: a 32 GiB slice or a
//!   16 MiB part on a slow shared uplink may take minutes, but a stall of
//!   60 s is a dead connection.
//! - `connect_timeout` apart from it, for TCP, the proxy's `CONNECT` and
//!   TLS together: a server that is not there is known in seconds, and a
//!   slow transfer must not need a long connect limit to go through.
//! - No automatic decompression: a gzip-stored object must arrive as stored
//!   so its checksum can be verified; decompression is the caller's choice.
//! - Proxies and extra CA roots only when some are set ([`crate::network`]):
//!   a plain-http endpoint without proxies pays for neither.

use std::path::PathBuf;
use std::time::Duration;

use crate::network::{ProxyConfig, Sourced};
use shoal_core::error::{Error, ErrorKind, Op, chain_message, one_line};

/// Settings for the shared HTTP client.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Limit on making a connection: TCP connect, a proxy's `CONNECT` and
    /// the TLS handshake, together.
    pub connect_timeout: Duration,
    /// Longest silence on a connection while a request is sent or its
    /// answer awaited or read: no byte taken by the server, or none of
    /// the answer.
    pub read_timeout: Duration,
    /// Idle connections kept per host (must cover the widest fan-out).
    pub pool_max_idle_per_host: usize,
    /// Sent as `User-Agent`.
    pub user_agent: String,
    /// The endpoint is plain `http://` (an emulator, a local MinIO): skip
    /// loading the system's root certificates, which reads ~150 files and
    /// was about half of a cold `shoal ls` against a local server. Any
    /// `https://` request through this client then fails verification.
    pub plain_http: bool,
    /// Proxies (empty: every request goes straight to its server).
    pub proxy: ProxyConfig,
    /// PEM files of CA certificates trusted on top of the platform's roots
    /// (`AWS_CA_BUNDLE`, `--ca-bundle`).
    pub ca_files: Vec<Sourced<PathBuf>>,
    /// `SSL_CERT_FILE`: rustls-native-certs already reads it as the system
    /// bundle (OpenSSL's meaning), so it is only checked here, and a
    /// `ca_files` entry naming the same file is not parsed twice (many
    /// machines point every such variable at the ~200 KB system bundle).
    pub system_ca_file: Option<Sourced<PathBuf>>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            pool_max_idle_per_host: 256,
            user_agent: concat!("shoal/", env!("CARGO_PKG_VERSION")).to_owned(),
            plain_http: false,
            proxy: ProxyConfig::default(),
            ca_files: Vec::new(),
            system_ca_file: None,
        }
    }
}

const CONNECT_TIMEOUT_HINT: &str = "no connection could be made in time; \
     is the endpoint (or the proxy) reachable from here? allow it longer with --connect-timeout SECS";

const PROXY_AUTH_HINT: &str = "the proxy wants credentials: give them in its URL, \
     http://user:password@host:port (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY or --proxy)";

/// A hint that depends on the status alone, whatever the store: a 407
/// comes from a forwarding proxy, not from the store.
pub fn status_hint(status: u16) -> Option<&'static str> {
    (status == 407).then_some(PROXY_AUTH_HINT)
}

/// Maps an HTTP status to a kind.
pub fn status_kind(status: u16) -> ErrorKind {
    match status {
        401 => ErrorKind::Unauthenticated,
        403 => ErrorKind::PermissionDenied,
        404 => ErrorKind::NotFound,
        304 | 412 => ErrorKind::Precondition,
        408 | 429 | 500..=599 => ErrorKind::ServerBusy,
        416 => ErrorKind::InvalidInput,
        400..=499 => ErrorKind::Rejected,
        _ => ErrorKind::Protocol,
    }
}

/// `Content-Range: bytes 0-9/100` → `(0, 10, 100)`, the end made
/// exclusive; None for anything else (an unknown total `*` included).
/// Both backends read ranged answers through this.
pub fn parse_content_range(v: &str) -> Option<(u64, u64, u64)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let (a, b, total): (u64, u64, u64) = (
        a.trim().parse().ok()?,
        b.trim().parse().ok()?,
        total.trim().parse().ok()?,
    );
    (a <= b && b < total).then_some((a, b + 1, total))
}

/// A 206 answer must start where it was asked to: bytes from elsewhere
/// written at the asked offset would make a wrong file that only the
/// final checksum could catch (and an object without one, never).
pub fn check_range_start(
    url: &str,
    asked_start: u64,
    content_range: &str,
) -> Result<(u64, u64, u64), Error> {
    let (start, end, total) = parse_content_range(content_range).ok_or_else(|| {
        Error::new(
            ErrorKind::Protocol,
            Op::Download,
            url,
            format!(
                "expected Content-Range bytes a-b/total on a 206 answer, got {content_range:?}"
            ),
        )
    })?;
    if start != asked_start {
        return Err(Error::new(
            ErrorKind::Protocol,
            Op::Download,
            url,
            format!("asked for bytes from {asked_start}, server sent {content_range:?}"),
        ));
    }
    Ok((start, end, total))
}

/// `Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT` as Unix nanoseconds
/// (second precision).
pub fn parse_http_date(s: &str) -> Option<i128> {
    let fmt = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    time::PrimitiveDateTime::parse(s.trim(), &fmt)
        .ok()
        .map(|t| t.assume_utc().unix_timestamp_nanos())
}

/// A default hint for a kind of failure of `op` on `url`: what to try,
/// fitted to what the failure can mean there (a 404 on a listing or an
/// upload can only be a missing bucket; on a read, the key may be wrong).
pub fn hint_for(kind: ErrorKind, op: Op, url: &str) -> Option<String> {
    Some(match kind {
        ErrorKind::Unauthenticated => {
            "check the credentials, or use --no-sign-request for public data".into()
        }
        ErrorKind::PermissionDenied => {
            "the credentials lack permission for this; check the bucket's IAM or policy".into()
        }
        ErrorKind::Connect => {
            "is the endpoint right and the server running? see --endpoint-url".into()
        }
        ErrorKind::Timeout => {
            "the server stopped answering; try again, or allow it longer with --read-timeout SECS"
                .into()
        }
        ErrorKind::NotFound => match op {
            Op::List | Op::Upload | Op::Multipart | Op::Compose => {
                "the bucket does not exist: check its name (shoal mb creates one)".into()
            }
            _ => match parent(url) {
                Some(p) => format!("check the bucket and key; `shoal ls {p}` shows what is there"),
                None => "check the bucket and key".into(),
            },
        },
        ErrorKind::ServerBusy => {
            "the server is overloaded or failing; it was retried (--attempts), try again later"
                .into()
        }
        _ => return None,
    })
}

/// The folder an object URL sits in (`gs://b/p/k` → `gs://b/p/`), if the
/// URL names an object.
fn parent(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let key_at = rest.find('/')? + 1;
    let start = url.len() - rest.len();
    let slash = url[start + key_at..]
        .rfind('/')
        .map_or(start + key_at, |i| start + key_at + i + 1);
    Some(&url[..slash])
}

/// Builds an error from a non-success response, reading a bounded piece of
/// the body. `extract` pulls the server's own message out of the body (XML
/// `<Message>` or JSON `error.message`); the raw body is used otherwise.
pub async fn error_from_response(
    op: Op,
    url: &str,
    resp: reqwest::Response,
    extract: fn(&str) -> Option<String>,
) -> Error {
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = read_bounded(resp, 8 * 1024).await;
    let server_says = extract(&body).unwrap_or_else(|| one_line(&body, 200));
    let reason = status.canonical_reason().unwrap_or("");
    let mut message = format!("HTTP {} {}", status.as_u16(), reason);
    if !server_says.is_empty() {
        message.push_str(": ");
        message.push_str(&server_says);
    }
    let kind = status_kind(status.as_u16());
    let mut err = Error::new(kind, op, url, message).with_status(status.as_u16());
    if let Some(h) = hint_for(kind, op, url) {
        err = err.with_hint(h);
    }
    if let Some(h) = status_hint(status.as_u16()) {
        err = err.with_hint(h);
    }
    if let Some(after) = retry_after {
        err = err.with_retry_after(after);
    }
    err
}

async fn read_bounded(mut resp: reqwest::Response, max: usize) -> String {
    let mut buf = Vec::new();
    while buf.len() < max {
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c[..c.len().min(max - buf.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Translates a transport error (no response, or a broken body).
pub fn error_from_reqwest(op: Op, url: &str, err: reqwest::Error) -> Error {
    let (kind, unsent) = judge_reqwest(&err);
    transport_failure(op, url, kind, unsent, err.without_url())
}

/// What kind of failure a reqwest error is, and whether its request never
/// left (no connection was made).
pub(crate) fn judge_reqwest(err: &reqwest::Error) -> (ErrorKind, bool) {
    let kind = if err.is_timeout() || chain_has_timeout(err) {
        ErrorKind::Timeout
    } else if err.is_connect() {
        ErrorKind::Connect
    } else if err.is_decode() && !chain_has_transport_error(err) {
        // reqwest files a body that breaks mid-stream under "decode" too;
        // only a real decoding failure is a protocol error.
        ErrorKind::Protocol
    } else {
        // Body and request errors: a reset or an early EOF mid-stream.
        ErrorKind::Connect
    };
    (kind, err.is_connect())
}

/// The body of an answer, `expected` bytes long, as a stream whose
/// failures say how much of it had arrived: a body cut short is the
/// server's answer broken off ("the connection closed after 1048576 of
/// 4194304 bytes of the answer"), not a server that could not be reached,
/// so it carries no hint about the endpoint. Both stores' downloads read
/// through it.
///
/// `sent_length`: whether the answer said its length (Content-Length or
/// Content-Range), which the HTTP stack then holds it to; one sent
/// without (chunked, or until the server closes) is held to `expected`
/// here.
pub fn answer_body(
    resp: reqwest::Response,
    op: Op,
    url: String,
    expected: u64,
    sent_length: bool,
) -> shoal_core::store::BoxByteStream {
    use futures::StreamExt;
    let mut got = 0u64;
    let target = url.clone();
    let body = Box::pin(resp.bytes_stream().map(move |r| match r {
        Ok(b) => {
            got += b.len() as u64;
            Ok(b)
        }
        Err(e) => Err(cut_short(op, &url, got, expected, e)),
    }));
    if sent_length {
        body
    } else {
        held_to_length(body, expected, op, target)
    }
}

/// A body sent without a length (chunked, or until the server closes),
/// held to the `size` learnt elsewhere (the range asked, a HEAD of the
/// same version): more or fewer bytes is an error where it shows (a whole
/// object longer than the range asked, or one that changed since its size
/// was learnt).
fn held_to_length(
    body: shoal_core::store::BoxByteStream,
    size: u64,
    op: Op,
    target: String,
) -> shoal_core::store::BoxByteStream {
    use futures::StreamExt;
    let wrong = move |got: u64| {
        let what = if got > size {
            format!("runs past the {size} bytes expected")
        } else {
            format!("ended after {got} of the {size} bytes expected")
        };
        Error::new(
            ErrorKind::Integrity,
            op,
            &target,
            format!("the answer, sent without a length, {what}"),
        )
        .with_hint("the object may have changed while being read; run the command again")
    };
    let state = (body, 0u64, false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut body, n, done)| {
            let wrong = wrong.clone();
            async move {
                if done {
                    return None;
                }
                match body.next().await {
                    Some(Ok(c)) => {
                        let n = n + c.len() as u64;
                        let item = if n > size { Err(wrong(n)) } else { Ok(c) };
                        let done = item.is_err();
                        Some((item, (body, n, done)))
                    }
                    Some(Err(e)) => Some((Err(e), (body, n, true))),
                    None if n == size => None,
                    None => Some((Err(wrong(n)), (body, n, true))),
                }
            }
        },
    ))
}

/// A failure reading an answer's body after `got` of its `expected` bytes.
fn cut_short(op: Op, url: &str, got: u64, expected: u64, err: reqwest::Error) -> Error {
    let protocol = err.is_decode() && !chain_has_transport_error(&err);
    if err.is_timeout() || chain_has_timeout(&err) || protocol {
        return error_from_reqwest(op, url, err);
    }
    Error::new(
        ErrorKind::Connect,
        op,
        url,
        format!(
            "the connection closed after {got} of {expected} bytes of the answer: {}",
            chain_message(&err.without_url())
        ),
    )
    .with_hint("the server answered, then the body was cut short; a retry goes on from where it stopped (--attempts)")
}

/// The error for a request that got no (whole) answer: `kind` as the
/// transport judged it, `unsent` when the request never left (no
/// connection). Every [`HttpService`](crate::HttpService)'s failures come
/// through here ([`HttpError`](crate::HttpError)`::into_error`), so all
/// read the same to a user.
pub(crate) fn transport_failure<E>(
    op: Op,
    url: &str,
    kind: ErrorKind,
    unsent: bool,
    err: E,
) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    let msg = match kind {
        ErrorKind::Connect if unsent => {
            format!("could not connect: {}", chain_message(&err))
        }
        ErrorKind::Timeout => format!("timed out: {}", chain_message(&err)),
        ErrorKind::InvalidInput => chain_message(&err),
        _ => format!("connection failed: {}", chain_message(&err)),
    };
    let mut e = Error::new(kind, op, url, msg);
    if unsent {
        e = e.unsent();
    }
    if let Some(h) = hint_for(kind, op, url) {
        e = e.with_hint(h);
    }
    if kind == ErrorKind::Timeout && unsent {
        // Nothing was sent: it is the connection that took too long (TCP,
        // a proxy's CONNECT or TLS), which the read timeout does not limit.
        e = e.with_hint(CONNECT_TIMEOUT_HINT);
    }
    if kind == ErrorKind::InvalidInput || (unsent && host_unknown(&err)) {
        e = e.permanent();
    }
    let says = chain_message(&err);
    if says.contains("tunnel error: proxy authorization required") {
        e = e.with_hint(PROXY_AUTH_HINT).permanent();
    } else if says.contains("tunnel error") {
        e = e.with_hint(
            "the proxy would not open a connection to the server; \
             check HTTPS_PROXY/ALL_PROXY (or --proxy), or list the host in NO_PROXY",
        );
    }
    if certificate_refused(&err) {
        // Retrying cannot make an unknown issuer known.
        e = e
            .with_hint(
                "the server's TLS certificate is not trusted here; \
                 if it comes from a private CA, give the CA with --ca-bundle FILE, \
                 SSL_CERT_FILE or (S3) AWS_CA_BUNDLE",
            )
            .permanent();
    }
    e.with_source(err)
}

/// Whether the resolver said the host name does not exist (not that it
/// could not ask: "Temporary failure in name resolution" is retried). The
/// standard library gives getaddrinfo's answer as text only; these are
/// glibc's, musl's and macOS's words for EAI_NONAME and EAI_NODATA.
fn host_unknown(err: &(dyn std::error::Error + 'static)) -> bool {
    const UNKNOWN: [&str; 4] = [
        "Name or service not known",
        "No address associated with hostname",
        "Name does not resolve",
        "nodename nor servname provided",
    ];
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            let m = io.to_string();
            if UNKNOWN.iter().any(|u| m.contains(u)) {
                return true;
            }
        }
        cur = e.source();
    }
    false
}

/// Whether TLS verification refused the server's certificate (rustls says
/// "invalid peer certificate: UnknownIssuer", "…: NotValidForName", …).
fn certificate_refused(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.to_string().contains("invalid peer certificate") {
            return true;
        }
        cur = e.source();
    }
    false
}

fn chain_has_transport_error(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.is::<hyper::Error>() || e.is::<std::io::Error>() {
            return true;
        }
        cur = e.source();
    }
    false
}

fn chain_has_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(status_kind(404), ErrorKind::NotFound);
        assert_eq!(status_kind(403), ErrorKind::PermissionDenied);
        assert_eq!(status_kind(503), ErrorKind::ServerBusy);
        assert_eq!(status_kind(429), ErrorKind::ServerBusy);
        assert_eq!(status_kind(408), ErrorKind::ServerBusy);
        assert_eq!(status_kind(412), ErrorKind::Precondition);
        assert_eq!(status_kind(400), ErrorKind::Rejected);
    }

    #[test]
    fn content_ranges_and_dates() {
        assert_eq!(parse_content_range("bytes 0-9/100"), Some((0, 10, 100)));
        assert_eq!(parse_content_range("bytes 99-99/100"), Some((99, 100, 100)));
        for bad in [
            "bytes 0-9/*",
            "bytes 9-0/100",
            "bytes 0-100/100",
            "0-9/100",
            "",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad}");
        }
        assert!(check_range_start("u", 10, "bytes 10-19/100").is_ok());
        let e = check_range_start("u", 10, "bytes 0-19/100").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol);
        assert_eq!(
            parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(1_445_412_480_000_000_000)
        );
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:01 GMT"),
            Some(1_000_000_000)
        );
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn not_found_hints_fit_the_operation() {
        let h = |op, url| hint_for(ErrorKind::NotFound, op, url).unwrap();
        assert!(h(Op::List, "gs://nob/").contains("bucket does not exist"));
        assert!(h(Op::Upload, "s3://nob/k").contains("bucket does not exist"));
        assert!(h(Op::Download, "gs://b/p/q/k").contains("`shoal ls gs://b/p/q/`"));
        assert!(h(Op::Stat, "s3://b/k").contains("`shoal ls s3://b/`"));
        assert_eq!(parent("gs://b"), None);
        assert_eq!(parent("gs://b/"), Some("gs://b/"));
        assert!(
            hint_for(ErrorKind::Timeout, Op::Stat, "u")
                .unwrap()
                .contains("--read-timeout")
        );
    }

    #[derive(Debug)]
    struct Wrap(std::io::Error);
    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("dns error")
        }
    }
    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_unknown_host_is_told_from_a_resolver_hiccup() {
        let gai = |m: &str| {
            Wrap(std::io::Error::other(format!(
                "failed to lookup address information: {m}"
            )))
        };
        assert!(host_unknown(&gai("Name or service not known")));
        assert!(host_unknown(&gai("No address associated with hostname")));
        assert!(!host_unknown(&gai("Temporary failure in name resolution")));
        assert!(!host_unknown(&Wrap(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        ))));
    }

    #[tokio::test]
    async fn a_host_that_does_not_resolve_is_not_retried_a_refusal_is() {
        let client = reqwest::Client::new();
        let e = client
            .get("http://no-such-host.invalid/")
            .send()
            .await
            .unwrap_err();
        let err = error_from_reqwest(Op::Stat, "gs://b/k", e);
        assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
        // Without a resolver to ask, the answer is a hiccup, and retried.
        let hiccup = err.to_string().contains("Temporary failure");
        assert_eq!(err.is_retryable(), hiccup, "{err}");
        let e = client.get("http://127.0.0.1:9/").send().await.unwrap_err();
        let err = error_from_reqwest(Op::Stat, "gs://b/k", e);
        assert!(err.is_retryable(), "{err}");
    }
}
