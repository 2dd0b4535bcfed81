//! How requests reach a server: proxies and extra trusted CA certificates.
//!
//! Both are read the way curl and the AWS CLI read them, so a machine set up
//! for those works for shoal:
//! - `https_proxy`/`HTTPS_PROXY` for `https://` requests, `http_proxy`/
//!   `HTTP_PROXY` for `http://` ones, `all_proxy`/`ALL_PROXY` for both when
//!   the scheme's own is unset (lower case first, as curl does); `no_proxy`/
//!   `NO_PROXY` lists hosts reached directly (names, `.domain` or `domain`
//!   for a domain and its hosts, IPs, CIDRs, `*` for every host).
//! - Extra roots (`SSL_CERT_FILE`, `AWS_CA_BUNDLE`, `--ca-bundle`) are added to
//!   the roots the platform verifier trusts. `SSL_CERT_FILE` keeps its
//!   OpenSSL meaning too: rustls-native-certs reads it as the system bundle.
//!
//! The matching itself is reqwest's ([`reqwest::Proxy`], [`reqwest::NoProxy`]);
//! this module only gathers the settings, says where each came from (so an
//! error can name the variable or flag), and checks them before a request
//! is sent. Nothing here costs anything when nothing is set: a plain-http
//! endpoint without proxies still skips TLS set-up and proxy matching.
//! CA files are read and checked there but not parsed: the system bundle
//! that `SSL_CERT_FILE` and `AWS_CA_BUNDLE` point at on many machines holds
//! hundreds of certificates, and parsing them would be a visible part of a
//! cold `shoal ls`, which must cost barely more than one request.

use std::fmt;
use std::path::PathBuf;

use shoal_core::error::{Error, Op};

/// A setting and the variable, flag or keyword it came from (`"HTTPS_PROXY"`,
/// `"--ca-bundle"`), so an error about it can say where to fix it.
#[derive(Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    /// Where the value was found.
    pub from: String,
    /// The value.
    pub value: T,
}

impl<T> Sourced<T> {
    /// `value`, found in `from`.
    pub fn new(from: impl Into<String>, value: T) -> Self {
        Sourced {
            from: from.into(),
            value,
        }
    }
}

/// Proxy settings; empty means every request goes straight to its server.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Proxy for `http://` requests.
    pub http: Option<Sourced<String>>,
    /// Proxy for `https://` requests.
    pub https: Option<Sourced<String>>,
    /// Proxy for both when the scheme's own is unset.
    pub all: Option<Sourced<String>>,
    /// Hosts reached directly (curl's `NO_PROXY` syntax).
    pub no_proxy: Option<String>,
}

impl ProxyConfig {
    /// The proxy variables of the environment (lower case first, as curl).
    pub fn from_env() -> Self {
        let var = |lower: &str, upper: &str| {
            [lower, upper].into_iter().find_map(|n| {
                std::env::var(n)
                    .ok()
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| Sourced::new(n, v.trim().to_owned()))
            })
        };
        ProxyConfig {
            http: var("http_proxy", "HTTP_PROXY"),
            https: var("https_proxy", "HTTPS_PROXY"),
            all: var("all_proxy", "ALL_PROXY"),
            no_proxy: var("no_proxy", "NO_PROXY").map(|s| s.value),
        }
    }

    /// One proxy for every request (`--proxy URL`), still bypassed for the
    /// hosts of `NO_PROXY`.
    pub fn with_proxy_for_all(mut self, from: &str, url: &str) -> Self {
        let s = Sourced::new(from, url.trim().to_owned());
        self.http = Some(s.clone());
        self.https = Some(s);
        self.all = None;
        self
    }

    /// Whether no request goes through a proxy: none is set, or `NO_PROXY`
    /// holds `*`. (reqwest's matcher applies `*` to host names only, not to
    /// IP addresses; curl's `*` means every host, so it is decided here.)
    pub fn is_empty(&self) -> bool {
        let everything = self
            .no_proxy
            .as_deref()
            .is_some_and(|n| n.split(',').any(|h| h.trim() == "*"));
        everything || (self.http.is_none() && self.https.is_none() && self.all.is_none())
    }

    /// Whether some proxy is itself reached over TLS (`https://proxy`).
    pub fn needs_tls(&self) -> bool {
        !self.is_empty()
            && [&self.http, &self.https, &self.all]
                .into_iter()
                .flatten()
                .any(|p| p.value.len() >= 8 && p.value[..8].eq_ignore_ascii_case("https://"))
    }

    /// The reqwest proxies, most specific first (reqwest takes the first
    /// that matches a request). Fails on a URL that is not a proxy URL,
    /// naming where it came from, its password hidden.
    pub fn proxies(&self) -> Result<Vec<reqwest::Proxy>, Error> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let no = self
            .no_proxy
            .as_deref()
            .and_then(reqwest::NoProxy::from_string);
        let mut out = Vec::new();
        type Make = fn(&str) -> reqwest::Result<reqwest::Proxy>;
        let kinds: [(&Option<Sourced<String>>, Make); 3] = [
            (&self.http, |u| reqwest::Proxy::http(u)),
            (&self.https, |u| reqwest::Proxy::https(u)),
            (&self.all, |u| reqwest::Proxy::all(u)),
        ];
        for (setting, make) in kinds {
            let Some(s) = setting else { continue };
            check_proxy_url(s)?;
            let p =
                make(&s.value).map_err(|e| bad_proxy(s, &shoal_core::error::chain_message(&e)))?;
            out.push(p.no_proxy(no.clone()));
        }
        Ok(out)
    }
}

/// Rejects what reqwest would take but cannot use: a scheme other than
/// http(s) (SOCKS is not built in), no host.
fn check_proxy_url(s: &Sourced<String>) -> Result<(), Error> {
    let v = &s.value;
    let (scheme, rest) = match v.split_once("://") {
        Some((sc, rest)) => (sc.to_ascii_lowercase(), rest),
        None => ("http".to_owned(), v.as_str()),
    };
    if scheme != "http" && scheme != "https" {
        return Err(bad_proxy(
            s,
            &format!("unsupported proxy scheme '{scheme}://' (use http:// or https://)"),
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() || host.starts_with(':') {
        return Err(bad_proxy(s, "no host"));
    }
    let url = reqwest::Url::parse(&format!("{scheme}://{rest}"))
        .map_err(|e| bad_proxy(s, &e.to_string()))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad_proxy(s, "no host"));
    }
    Ok(())
}

fn bad_proxy(s: &Sourced<String>, why: &str) -> Error {
    // `why` comes from a parser: should it quote the value, the
    // credential goes too.
    let mut why = why.replace(&s.value, &redact_proxy(&s.value));
    if let Some(secret) = userinfo(&s.value).filter(|u| !u.is_empty()) {
        why = why.replace(secret, "***");
    }
    Error::invalid(
        Op::Parse,
        redact_proxy(&s.value),
        format!("not a usable proxy URL (from {}): {why}", s.from),
    )
    .with_hint(
        "give it as http://[user:password@]host:port, with '@', ':', '/', '?' and '#' in the user or password written as %40, %3A, %2F, %3F and %23",
    )
}

/// The part of a proxy setting that may hold a credential: everything
/// between `scheme://` (or the start, when it has no scheme) and the last
/// `@`. Taken from the raw text, not a parse: a password holding `/`, `?`
/// or `#` makes a URL parser see a path, query or fragment there, and an
/// unparseable value still has to be shown without its password. A `@` in
/// a path hides a little too much, never too little.
fn userinfo(s: &str) -> Option<&str> {
    let start = scheme_end(s);
    s[start..].rfind('@').map(|a| &s[start..start + a])
}

/// Where a URL's `scheme://` ends (0 without one). A `://` after anything
/// that cannot be a scheme (`user:pa://ss@host`) is part of the userinfo.
fn scheme_end(s: &str) -> usize {
    match s.find("://") {
        Some(i)
            if i > 0
                && s[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                && s[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            i + 3
        }
        _ => 0,
    }
}

/// A proxy setting as it may be shown: its userinfo (user and password)
/// replaced by `***`, whatever characters the password holds and whether
/// or not the value parses as a URL (see [`userinfo`]).
pub fn redact_proxy(s: &str) -> String {
    match userinfo(s) {
        Some(u) => {
            let start = scheme_end(s);
            format!("{}***{}", &s[..start], &s[start + u.len()..])
        }
        None => s.to_owned(),
    }
}

impl fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Proxy URLs may carry a password.
        let show = |p: &Option<Sourced<String>>| p.as_ref().map(|s| redact_proxy(&s.value));
        f.debug_struct("ProxyConfig")
            .field("http", &show(&self.http))
            .field("https", &show(&self.https))
            .field("all", &show(&self.all))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl fmt::Debug for Sourced<String> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Such a setting may be a proxy URL with a password.
        write!(f, "{}={}", self.from, redact_proxy(&self.value))
    }
}

impl fmt::Debug for Sourced<PathBuf> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.from, self.value.display())
    }
}

fn bad_ca_file(file: &Sourced<PathBuf>, why: String) -> Error {
    Error::invalid(
        Op::Read,
        file.value.display().to_string(),
        format!("{} (from {})", why, file.from),
    )
    .with_hint("give a PEM file of CA certificates")
}

/// Reads a PEM file of CA certificates and checks that it holds at least
/// one (without parsing them: that is for the files TLS will use). A file
/// that cannot be read or holds no certificate is an error naming the file
/// and where it was given.
pub fn read_ca_file(file: &Sourced<PathBuf>) -> Result<Vec<u8>, Error> {
    const BEGIN: &[u8] = b"-----BEGIN CERTIFICATE-----";
    let pem = std::fs::read(&file.value)
        .map_err(|e| bad_ca_file(file, format!("cannot read CA file: {e}")))?;
    if !pem.windows(BEGIN.len()).any(|w| w == BEGIN) {
        return Err(bad_ca_file(file, "no PEM certificate in CA file".into()));
    }
    Ok(pem)
}

/// The certificates of a file [`read_ca_file`] read, as rustls takes them.
pub fn parse_ca_file_der(
    file: &Sourced<PathBuf>,
    pem: &[u8],
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, Error> {
    use rustls::pki_types::pem::PemObject;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_ca_file(file, format!("bad certificate in CA file: {e}")))?;
    if certs.is_empty() {
        return Err(bad_ca_file(file, "no PEM certificate in CA file".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> ProxyConfig {
        ProxyConfig::default().with_proxy_for_all("--proxy", url)
    }

    #[test]
    fn proxy_urls_are_checked_and_their_passwords_hidden() {
        assert_eq!(cfg("http://proxy:3128").proxies().unwrap().len(), 2);
        assert_eq!(cfg("proxy.corp:3128").proxies().unwrap().len(), 2);
        for bad in [
            "ftp://user:hunter2@proxy:21",
            "http://user:hunter2@proxy:99999",
            "http://user:hunter2@:3128",
            "socks5://user:hunter2@proxy",
        ] {
            let e = cfg(bad).proxies().unwrap_err();
            let s = e.to_string();
            assert!(!s.contains("hunter2"), "{s}");
            assert!(s.contains("--proxy"), "{s}");
            assert_eq!(e.kind(), shoal_core::ErrorKind::InvalidInput, "{s}");
        }
        let mut star = cfg("http://proxy:3128");
        star.no_proxy = Some("example.com, *".into());
        assert!(star.is_empty() && star.proxies().unwrap().is_empty());
        let d = format!("{:?}", cfg("http://u:hunter2@p:1"));
        assert!(!d.contains("hunter2"), "{d}");
    }

    /// Passwords holding the characters that end a URL's authority (`/`,
    /// `?`, `#`), `@` and `:`, or proxies given without a scheme, are never
    /// shown, whether or not the value parses.
    #[test]
    fn proxy_passwords_are_hidden_whatever_they_hold() {
        for pw in [
            "hun#ter2",
            "hun?ter2",
            "hun/ter2",
            "hun@ter2",
            "hun:ter2",
            "a/b?c#d@e:f",
        ] {
            for raw in [
                format!("http://user:{pw}@proxy:3128"),
                format!("https://user:{pw}@proxy"),
                format!("user:{pw}@proxy:3128"),
                format!("user:{pw}@"),
                format!("socks5://user:{pw}@proxy"),
                format!("http://user:{pw}@proxy:99999"),
                format!("user:{pw}@proxy:3128/path?q#f"),
            ] {
                let shown = redact_proxy(&raw);
                assert!(!shown.contains("ter2"), "{raw} -> {shown}");
                assert!(shown.contains("***"), "{raw} -> {shown}");
                let d = format!("{:?}", cfg(&raw));
                assert!(!d.contains("ter2"), "{d}");
                if let Err(e) = cfg(&raw).proxies() {
                    let s = e.to_string();
                    assert!(!s.contains("ter2"), "{raw}: {s}");
                    assert!(s.contains("--proxy"), "{s}");
                }
            }
        }
        // Nothing else is hidden.
        assert_eq!(redact_proxy("http://proxy:3128"), "http://proxy:3128");
        assert_eq!(redact_proxy("proxy:3128"), "proxy:3128");
        assert_eq!(redact_proxy("user:pw@proxy:3128"), "***@proxy:3128");
        assert_eq!(redact_proxy("user:p://w@proxy"), "***@proxy");
        assert_eq!(redact_proxy("http://u:p@proxy:1"), "http://***@proxy:1");
    }

    #[test]
    fn an_empty_or_certificate_free_ca_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ca.pem");
        std::fs::write(&f, "not a certificate\n").unwrap();
        let e = read_ca_file(&Sourced::new("AWS_CA_BUNDLE", f.clone())).unwrap_err();
        assert!(e.to_string().contains("AWS_CA_BUNDLE"), "{e}");
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let missing = dir.path().join("nope.pem");
        let e = read_ca_file(&Sourced::new("--ca-bundle", missing)).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
