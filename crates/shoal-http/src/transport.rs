//! The connections every store request travels on: a pool that opens a
//! connection only for a request nothing else will serve.
//!
//! Why not reqwest's pool (hyper-util's): a request that finds no idle
//! connection there starts a connect *and* waits for a returned one, takes
//! whichever comes first, and lets the connect that lost finish into the
//! pool. At the start of a run of small requests every handshake is still
//! queued when the first connections come back, so each returned connection
//! serves a request whose own connect then lands as a spare: 137 to 351
//! connections (TLS handshakes, each two round trips and a signature on the
//! server) for 132 request slots (bench/results/TLS.md). Its settings
//! cannot stop it (the pool size limits idle connections, not connects),
//! and a connector layer sees connects start but not connections close.
//!
//! # The rule
//!
//! A connect starts only while more requests wait than connects are under
//! way plus connections *coming back*. A connection is coming back when
//! its response was read to its end, hyper took all of its request, and
//! hyper has not yet called it ready; it counts so for at most
//! [`RETURN_GRACE`], then is closed and a waiter gets a connect. A
//! connection is handed to the oldest waiting request, whoever started
//! its connect. So the connections open (or opening) never outnumber the
//! requests that wanted one at the same time, and a caller that bounds its
//! requests (shoal's request slots) bounds its connections, with no cap of
//! its own that a caller holding many open bodies (a Python program with
//! many readers) could hang on. Every waiter is owed something that ends:
//! a connect (the connect timeout) or a returning connection (the grace);
//! the wait itself is bounded as well, so a mistake in the counting fails
//! a request instead of hanging it.
//!
//! The cases the rule has to hold, each pinned by a test against a server
//! that misbehaves on purpose (`transport/tests.rs`):
//! - **An early answer.** A server may answer an upload (a 503, a 403)
//!   before reading its body, then neither read nor close. The answer can
//!   be read to its end while hyper is still writing the body, and the
//!   connection will not be ready until the server reads it all, which it
//!   may never do. Counted as coming back, it held every later request to
//!   the host for ever. A connection whose request hyper had not all taken
//!   when the answer ended is closed instead; one whose request was taken
//!   but is still not ready after the grace (its tail stuck in the
//!   buffers) is closed then. Direct and through a forwarding proxy.
//! - **A slow upload.** The read timeout is the longest silence on the
//!   connection ([`Activity`]): while the request is sent, no byte taken
//!   by the socket (what the server does not read stays in the buffers,
//!   which then take no more); while the answer is awaited and read, no
//!   byte of it. A slow but moving upload never times out; one the server
//!   stopped reading does, after the read timeout. The last bytes in the
//!   socket buffers drain without a sign, so a very slow reader behind
//!   large buffers shows a silence of buffers ÷ pace at the end.
//! - **The connect timeout** covers TCP, a proxy's `CONNECT` and TLS, and
//!   only them; its error names `--connect-timeout`.
//! - **Abandoned bodies.** A response body dropped before its end leaves
//!   bytes on the wire: its connection is closed, never reused. Dropping a
//!   connection ([`Conn`]) ends the task that drives it, so none is left
//!   writing to a server that does not read.
//! - **Close races.** A request whose connection closed before it was
//!   written (a server dropping an idle keep-alive connection) is sent
//!   again on another connection, as hyper-util does: it never reached the
//!   server. A connection that closes while coming back is dropped and a
//!   waiter gets a connect.
//! - **Bodies without a length.** A chunked answer, or an HTTP/1.0 one that
//!   ends when the server closes, is read to its end like any other; the
//!   backends verify such bodies by the object's checksum.
//! - **A connection made but not yet run.** hyper calls a connection
//!   ready only once its task has run; one that lands idle before that is
//!   good and is used, not replaced.
//!
//! # Sending
//!
//! Requests are still built, and responses read, as reqwest's types: the
//! backends' code and error handling do not change. Only the sending is
//! ours: HTTP/1.1 over hyper's connection API, TCP from hyper-util (Happy
//! Eyeballs, connect timeout, keep-alive), TLS from rustls with the same
//! verifier reqwest uses (the platform's roots plus the CA files given).
//! Through an `http://` proxy the pool's connections are to the proxy: a
//! plain-http request is sent to it whole (absolute URL, the proxy's
//! credentials in `Proxy-Authorization`), an https one through a
//! `CONNECT` tunnel (hyper-util's) with TLS to the server inside it; which
//! requests go through which proxy is hyper-util's matcher's answer (the
//! one reqwest uses). An `https://` proxy (TLS to the proxy itself) is
//! left to reqwest's own client. Both are an [`HttpService`], the one
//! method [`Http`] sends through; [`HttpConfig::build`] picks which.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{HOST, HeaderValue, PROXY_AUTHORIZATION, USER_AGENT};
use http::{Method, Uri};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::{Builder, Matcher};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tokio::time::Sleep;
use tower_service::Service;

use crate::http::HttpConfig;
use crate::network::{parse_ca_file_der, read_ca_file};
use crate::service::{HttpError, HttpService};
use shoal_core::error::{Error, ErrorKind, Op, chain_message};

type Sender = hyper::client::conn::http1::SendRequest<SendBody>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The HTTP client a store holds: reqwest builds its requests, and one
/// [`HttpService`] sends them: [`Pool`]'s connections, or reqwest's own
/// through an https proxy ([`HttpConfig::build`] chooses).
#[derive(Clone)]
pub struct Http {
    reqwest: reqwest::Client,
    service: Arc<dyn HttpService>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("service", &self.service)
            .finish()
    }
}

/// Settings of [`Pool`], taken from [`HttpConfig`].
pub(crate) struct PoolConfig {
    pub(crate) connect_timeout: Duration,
    pub(crate) read_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_idle_per_host: usize,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    /// Which requests go through which proxy (None: none do).
    pub(crate) proxy: Option<Matcher>,
}

impl Http {
    /// A client whose requests `reqwest` builds (its settings matter only
    /// to what it builds) and `service` sends: how a test sends them to a
    /// double of its own. Stores get theirs from [`HttpConfig::build`].
    pub fn new(reqwest: reqwest::Client, service: Arc<dyn HttpService>) -> Self {
        Http { reqwest, service }
    }

    /// A request to `url`, to be sent with [`Http::send`].
    pub fn request(&self, method: Method, url: &str) -> reqwest::RequestBuilder {
        self.reqwest.request(method, url)
    }
    /// `GET url`.
    pub fn get(&self, url: &str) -> reqwest::RequestBuilder {
        self.request(Method::GET, url)
    }
    /// `PUT url`.
    pub fn put(&self, url: &str) -> reqwest::RequestBuilder {
        self.request(Method::PUT, url)
    }
    /// `POST url`.
    pub fn post(&self, url: &str) -> reqwest::RequestBuilder {
        self.request(Method::POST, url)
    }
    /// `DELETE url`.
    pub fn delete(&self, url: &str) -> reqwest::RequestBuilder {
        self.request(Method::DELETE, url)
    }
    /// `HEAD url`.
    pub fn head(&self, url: &str) -> reqwest::RequestBuilder {
        self.request(Method::HEAD, url)
    }

    /// Sends a request built by [`Http::request`]; a transport failure
    /// (no answer, or none in time) is an error about `op` on `url`, which
    /// is what the user is shown. Any HTTP status is an `Ok` response.
    pub async fn send(
        &self,
        op: Op,
        url: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Error> {
        let req = req
            .build()
            .map_err(|e| crate::http::error_from_reqwest(op, url, e))?;
        self.execute(op, url, req).await
    }

    /// [`Http::send`] for a request already built.
    pub async fn execute(
        &self,
        op: Op,
        url: &str,
        req: reqwest::Request,
    ) -> Result<reqwest::Response, Error> {
        self.service
            .call(req)
            .await
            .map_err(|e| e.into_error(op, url))
    }
}

/// [`Pool`] as the [`HttpService`] a client sends through: reqwest's
/// request made hyper's, with the `User-Agent` reqwest's client would have
/// added when sending.
struct Pooled {
    pool: Arc<Pool>,
    user_agent: HeaderValue,
}

impl Pooled {
    fn new(pool: Arc<Pool>, user_agent: &str) -> Self {
        Pooled {
            pool,
            user_agent: HeaderValue::from_str(user_agent)
                .unwrap_or_else(|_| HeaderValue::from_static("shoal")),
        }
    }
}

impl std::fmt::Debug for Pooled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("opened", &self.pool.opened.load(Ordering::Relaxed))
            .finish()
    }
}

#[async_trait]
impl HttpService for Pooled {
    async fn call(&self, req: reqwest::Request) -> Result<reqwest::Response, HttpError> {
        let mut req: http::Request<reqwest::Body> = req.try_into()?;
        req.headers_mut()
            .entry(USER_AGENT)
            .or_insert_with(|| self.user_agent.clone());
        self.pool.send(req).await.map_err(http_error)
    }
}

/// reqwest's client as the service through an https proxy. Its `Debug`
/// names it and nothing more: reqwest's own prints its proxies, whose URLs
/// may hold a password.
struct ViaReqwest(reqwest::Client);

impl std::fmt::Debug for ViaReqwest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ViaReqwest")
    }
}

#[async_trait]
impl HttpService for ViaReqwest {
    async fn call(&self, req: reqwest::Request) -> Result<reqwest::Response, HttpError> {
        self.0.call(req).await
    }
}

// The client's settings live in `http`; building it is here, beside the
// pool it sets up.
impl HttpConfig {
    /// Builds a client. Fails on a proxy URL or CA file that cannot be
    /// used (an [`ErrorKind::InvalidInput`] naming where it was given), or
    /// if the TLS stack cannot initialise.
    ///
    /// Requests go on this module's pool (TLS set up here, for it),
    /// through an https proxy on reqwest's client: the one place that
    /// chooses.
    pub fn build(&self) -> Result<Http, Error> {
        let (client, pool) = self.parts()?;
        let service: Arc<dyn HttpService> = match pool {
            Some(c) => Arc::new(Pooled::new(Arc::new(Pool::new(c)), &self.user_agent)),
            None => Arc::new(ViaReqwest(client.clone())),
        };
        Ok(Http::new(client, service))
    }

    /// The client that builds requests (and sends them through an https
    /// proxy), and the pool's settings unless reqwest's client sends.
    pub(crate) fn parts(&self) -> Result<(reqwest::Client, Option<PoolConfig>), Error> {
        let mut b = reqwest::Client::builder();
        let tls = !self.plain_http || self.proxy.needs_tls();
        let own_pool = !self.proxy.needs_tls();
        // Every file is read and checked even when TLS is skipped: a bad
        // file is a mistake to report, not to ignore until the first https
        // endpoint. Only the certificates TLS will use are parsed.
        if let Some(f) = &self.system_ca_file {
            read_ca_file(f)?;
        }
        let mut der_roots = Vec::new();
        for f in &self.ca_files {
            let pem = read_ca_file(f)?;
            let known = self
                .system_ca_file
                .as_ref()
                .is_some_and(|s| s.value == f.value);
            if tls && !known {
                der_roots.extend(parse_ca_file_der(f, &pem)?);
            }
        }
        if !tls || own_pool {
            // reqwest's client only builds requests then: no roots to load.
            b = b.tls_certs_only(std::iter::empty::<reqwest::Certificate>());
        } else if !der_roots.is_empty() {
            let roots = der_roots.iter().map(|d| reqwest::Certificate::from_der(d));
            b = b.tls_certs_merge(roots.collect::<Result<Vec<_>, _>>().map_err(|e| {
                Error::new(
                    ErrorKind::Connect,
                    Op::Credentials,
                    "TLS set-up",
                    chain_message(&e),
                )
            })?);
        }
        // Checked whoever sends, so a bad proxy URL is the same error.
        let proxies = self.proxy.proxies()?;
        if proxies.is_empty() || own_pool {
            // Not reqwest's default of reading the environment again: the
            // caller's ProxyConfig is the whole truth (and `--no-proxy` works).
            b = b.no_proxy();
        } else {
            for p in proxies {
                b = b.proxy(p);
            }
        }
        let idle_timeout = Duration::from_secs(50);
        let client = b
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .pool_idle_timeout(idle_timeout)
            .tcp_nodelay(true)
            .http1_only()
            .user_agent(&self.user_agent)
            .build()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Connect,
                    Op::Credentials,
                    "http client",
                    chain_message(&e),
                )
            })?;
        let pool = if own_pool {
            Some(PoolConfig {
                connect_timeout: self.connect_timeout,
                read_timeout: self.read_timeout,
                idle_timeout,
                max_idle_per_host: self.pool_max_idle_per_host,
                tls: if tls {
                    Some(std::sync::Arc::new(tls_config(der_roots)?))
                } else {
                    None
                },
                proxy: proxy_matcher(&self.proxy)?,
            })
        } else {
            None
        };
        Ok((client, pool))
    }
}

/// The proxies of `p` as hyper-util's matcher (what reqwest matches with).
/// Its parser drops a URL it cannot read without a word, which would send
/// requests around the proxy: each one is tried alone first, and one
/// that does not take is an error naming where it was given.
fn proxy_matcher(p: &crate::network::ProxyConfig) -> Result<Option<Matcher>, Error> {
    if p.is_empty() {
        return Ok(None);
    }
    let probe: Uri = Uri::from_static("http://proxy-check.shoal/");
    let mut b = Matcher::builder();
    type Set = fn(Builder, String) -> Builder;
    let settings: [(&Option<crate::network::Sourced<String>>, Set); 3] = [
        (&p.http, Builder::http),
        (&p.https, Builder::https),
        (&p.all, Builder::all),
    ];
    for (setting, set) in settings {
        let Some(s) = setting else { continue };
        if Matcher::builder()
            .http(s.value.clone())
            .build()
            .intercept(&probe)
            .is_none()
        {
            return Err(Error::invalid(
                Op::Parse,
                crate::network::redact_proxy(&s.value),
                format!("not a usable proxy URL (from {})", s.from),
            )
            .with_hint("give it as http://[user:password@]host:port"));
        }
        b = set(b, s.value.clone());
    }
    if let Some(no) = &p.no_proxy {
        b = b.no(no.clone());
    }
    Ok(Some(b.build()))
}

/// rustls set up as reqwest sets it up: the platform's verifier (its roots
/// plus `extra`), HTTP/1.1 by ALPN.
fn tls_config(
    extra: Vec<rustls::pki_types::CertificateDer<'static>>,
) -> Result<rustls::ClientConfig, Error> {
    use std::sync::Arc;
    let failed = |why: String| Error::new(ErrorKind::Connect, Op::Credentials, "TLS set-up", why);
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = if extra.is_empty() {
        rustls_platform_verifier::Verifier::new(provider.clone())
    } else {
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
    }
    .map_err(|e| failed(e.to_string()))?;
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(c)
}

/// Why a request got no response.
#[derive(Debug)]
enum SendError {
    /// No connection could be made (the request was not sent).
    Connect(BoxError),
    /// No connection within the connect timeout (not sent either).
    ConnectTimeout(Duration),
    /// No connection from the pool within this long (not sent): a bound
    /// that the pool's rule keeps from being reached, there so that no
    /// request can wait on the pool forever.
    PoolTimeout(Duration),
    /// No byte moved on the connection for the read timeout before the
    /// response head came: while the request was being sent (`sending`,
    /// the server took none of it) or while its answer was awaited.
    Silent { limit: Duration, sending: bool },
    /// The connection failed while the request was being sent or answered.
    Exchange(hyper::Error),
    /// The request's URL cannot be sent on a connection of ours.
    Url(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "{e}"),
            SendError::ConnectTimeout(d) => write!(f, "no connection within {}s", d.as_secs_f64()),
            SendError::PoolTimeout(d) => {
                write!(f, "no connection from the pool within {}s", d.as_secs_f64())
            }
            SendError::Silent {
                limit,
                sending: true,
            } => write!(
                f,
                "the server took no byte of the request for {}s",
                limit.as_secs_f64()
            ),
            SendError::Silent {
                limit,
                sending: false,
            } => write!(
                f,
                "no answer within {}s of the request being sent",
                limit.as_secs_f64()
            ),
            SendError::Exchange(e) => write!(f, "{e}"),
            SendError::Url(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Connect(e) => e.source(),
            SendError::Exchange(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

/// What `err` means above the seam: its kind, and whether the request
/// never left.
fn http_error(err: SendError) -> HttpError {
    let (kind, unsent) = match &err {
        SendError::Connect(_) => (ErrorKind::Connect, true),
        SendError::ConnectTimeout(_) => (ErrorKind::Timeout, true),
        SendError::PoolTimeout(_) => (ErrorKind::Timeout, true),
        SendError::Silent { .. } => (ErrorKind::Timeout, false),
        SendError::Exchange(e) if e.is_timeout() => (ErrorKind::Timeout, false),
        SendError::Exchange(_) => (ErrorKind::Connect, false),
        SendError::Url(_) => (ErrorKind::InvalidInput, true),
    };
    HttpError::new(kind, unsent, err)
}

/// Connections to one scheme, host and port, through one proxy or none.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Key {
    https: bool,
    host: String,
    port: u16,
    via: Option<Via>,
}

/// A proxy: where it listens (no credentials in it) and what to tell it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Via {
    proxy: Uri,
    auth: Option<HeaderValue>,
}

impl Key {
    fn of(uri: &Uri, proxies: Option<&Matcher>) -> Result<Key, SendError> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            other => {
                return Err(SendError::Url(format!(
                    "cannot send to a {} URL",
                    other.unwrap_or("scheme-less")
                )));
            }
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| SendError::Url("the URL has no host".into()))?;
        let via = proxies.and_then(|m| m.intercept(uri)).map(|i| Via {
            proxy: i.uri().clone(),
            auth: i.basic_auth().cloned(),
        });
        Ok(Key {
            https,
            host: host.to_owned(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            via,
        })
    }
}

/// What the pool knows of one [`Key`]'s connections.
#[derive(Default)]
struct Host {
    /// Connections not in use, the most recently used last.
    idle: Vec<(Conn, Instant)>,
    /// Requests waiting for a connection, oldest first.
    waiters: VecDeque<oneshot::Sender<Result<Conn, SendError>>>,
    /// Connects under way.
    connecting: usize,
    /// Connections whose response was read to its end and whose request
    /// was all taken, not yet ready for the next request: each will serve
    /// a waiter soon, or stops being counted after [`RETURN_GRACE`].
    returning: usize,
}

struct Pool {
    tcp: HttpConnector,
    tls: Option<tokio_rustls::TlsConnector>,
    proxies: Option<Matcher>,
    connect_timeout: Duration,
    read_timeout: Duration,
    idle_timeout: Duration,
    max_idle: usize,
    hosts: Mutex<HashMap<Key, Host>>,
    opened: AtomicU64,
}

/// Sends of a request that never reached the server (its connection
/// closed first) before the failure is the caller's.
const UNSENT_TRIES: usize = 3;

/// How long a connection whose answer was read to its end (and whose
/// request was all taken) counts as coming back while hyper has not
/// called it ready. Normally that is one run of its task, well under a
/// millisecond; one that is still not ready after a second is waiting on
/// its peer to take the end of the request, which a server that answered
/// early may never do. It is closed then, and a waiter gets a connect.
const RETURN_GRACE: Duration = Duration::from_secs(1);

impl Pool {
    fn new(c: PoolConfig) -> Pool {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(c.connect_timeout));
        tcp.set_keepalive(Some(Duration::from_secs(15)));
        Pool {
            tcp,
            tls: c.tls.map(tokio_rustls::TlsConnector::from),
            proxies: c.proxy,
            connect_timeout: c.connect_timeout,
            read_timeout: c.read_timeout,
            idle_timeout: c.idle_timeout,
            max_idle: c.max_idle_per_host,
            hosts: Mutex::new(HashMap::new()),
            opened: AtomicU64::new(0),
        }
    }

    fn hosts(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Host>> {
        // A panic elsewhere while the lock was held leaves counts that are
        // at worst off by one: better than failing every later request.
        self.hosts.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn send(
        self: &Arc<Self>,
        mut req: http::Request<reqwest::Body>,
    ) -> Result<reqwest::Response, SendError> {
        let key = Key::of(req.uri(), self.proxies.as_ref())?;
        let uri = req.uri().clone();
        req.headers_mut()
            .entry(HOST)
            .or_insert_with(|| host_header(&uri));
        match &key.via {
            // To a forwarding proxy: the whole URL, and its credentials.
            Some(via) if !key.https => {
                if let Some(auth) = &via.auth {
                    req.headers_mut().insert(PROXY_AUTHORIZATION, auth.clone());
                }
            }
            _ => *req.uri_mut() = origin_form(&uri),
        }
        *req.version_mut() = http::Version::HTTP_11;
        let mut tries = 0;
        loop {
            tries += 1;
            let mut conn = self.checkout(&key, &uri).await?;
            // Ready at once, or when its task first runs; one that is not
            // within the grace is as good as closed.
            let ready = poll_fn(|cx| conn.sender.poll_ready(cx));
            if !matches!(tokio::time::timeout(RETURN_GRACE, ready).await, Ok(Ok(()))) {
                // Closed while idle: nothing was written on it.
                if tries < UNSENT_TRIES {
                    continue;
                }
            }
            let taken = Arc::new(AtomicBool::new(false));
            // Bytes the request is at least (its head is more): fewer
            // written means the server stopped taking it.
            let body_len = req.body().size_hint().lower();
            let written = conn.activity.written();
            let sending = req.map(|b| SendBody::new(b, Arc::clone(&taken)));
            // The silence counts from now, not from the connection's
            // last use.
            conn.activity.touch();
            let sent = until_silent(
                conn.sender.try_send_request(sending),
                &conn.activity,
                self.read_timeout,
            )
            .await;
            match sent {
                // Dropping `conn` closes it, the request half sent.
                None => {
                    return Err(SendError::Silent {
                        limit: self.read_timeout,
                        sending: !taken.load(Ordering::Relaxed)
                            || conn.activity.written() - written < body_len,
                    });
                }
                Some(Ok(resp)) => {
                    let (parts, body) = resp.into_parts();
                    let body = PooledBody {
                        inner: body,
                        lease: Some(Lease {
                            pool: Arc::downgrade(self),
                            key,
                            conn,
                            taken,
                        }),
                        read_timeout: self.read_timeout,
                        timer: None,
                        armed: false,
                    };
                    return Ok(http::Response::from_parts(parts, reqwest::Body::wrap(body)).into());
                }
                Some(Err(mut e)) => match e.take_message() {
                    Some(back) if tries < UNSENT_TRIES => req = back.map(|b| b.inner),
                    _ => return Err(SendError::Exchange(e.into_error())),
                },
            }
        }
    }

    /// A ready connection to `key`: an idle one, or the first one that
    /// comes back or is made while this request is the oldest waiting.
    ///
    /// The wait is bounded although the rule already bounds it (every
    /// waiter is owed a connect, which ends within the connect timeout,
    /// or a returning connection, which ends within [`RETURN_GRACE`]; a
    /// failed connect goes to the oldest waiter and the others start
    /// theirs again): a mistake in the counting must fail requests, not
    /// hang them.
    async fn checkout(self: &Arc<Self>, key: &Key, uri: &Uri) -> Result<Conn, SendError> {
        let rx = {
            let mut hosts = self.hosts();
            let host = hosts.entry(key.clone()).or_default();
            let now = Instant::now();
            while let Some((s, at)) = host.idle.pop() {
                // A stale or closed one is dropped here, which closes it.
                // Not `!is_ready()`: a connection whose task has not run
                // yet (made while its request was served by another) is
                // not "ready" but good; `send` waits for it to be.
                if !s.sender.is_closed() && now.duration_since(at) < self.idle_timeout {
                    return Ok(s);
                }
            }
            let (tx, rx) = oneshot::channel();
            host.waiters.push_back(tx);
            self.connect_if_needed(key, uri, host);
            rx
        };
        let limit = 2 * self.connect_timeout + RETURN_GRACE;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(SendError::Connect(
                "the connection pool was shut down".into(),
            )),
            // Dropping `rx` takes this request off the waiters.
            Err(_) => Err(SendError::PoolTimeout(limit)),
        }
    }

    /// Starts connects while more requests wait than connects under way
    /// and connections coming back: the one rule that keeps connections
    /// to the requests that wanted one.
    fn connect_if_needed(self: &Arc<Self>, key: &Key, uri: &Uri, host: &mut Host) {
        host.waiters.retain(|w| !w.is_closed());
        while host.waiters.len() > host.connecting + host.returning {
            host.connecting += 1;
            let (pool, key, uri) = (Arc::clone(self), key.clone(), uri.clone());
            tokio::spawn(async move { pool.connect_for_waiters(key, uri).await });
        }
    }

    async fn connect_for_waiters(self: Arc<Self>, key: Key, uri: Uri) {
        let made = tokio::time::timeout(self.connect_timeout, self.connect(&key, &uri)).await;
        let made = match made {
            Ok(r) => r,
            Err(_) => Err(SendError::ConnectTimeout(self.connect_timeout)),
        };
        let mut hosts = self.hosts();
        let host = hosts.entry(key.clone()).or_default();
        host.connecting -= 1;
        match made {
            Ok(made) => {
                self.opened.fetch_add(1, Ordering::Relaxed);
                // Its task drives the connection until it closes; the pool
                // learns of a close from the sender (`is_ready`,
                // `poll_ready`).
                self.give(host, Conn::run(made));
            }
            Err(mut e) => {
                // The failure goes to one waiting request; the others get
                // connects of their own.
                while let Some(w) = host.waiters.pop_front() {
                    match w.send(Err(e)) {
                        Ok(()) => break,
                        Err(Err(back)) => e = back,
                        Err(Ok(_)) => unreachable!("an error was sent"),
                    }
                }
                self.connect_if_needed(&key, &uri, host);
            }
        }
    }

    /// Makes one connection: TCP, TLS for https, HTTP/1.1.
    async fn connect(&self, key: &Key, uri: &Uri) -> Result<Handshaken, SendError> {
        let tls = match (&self.tls, key.https) {
            (_, false) => None,
            (Some(tls), true) => Some(tls),
            (None, true) => {
                return Err(SendError::Url(format!(
                    "TLS is not set up for a plain-http endpoint: cannot reach {uri}"
                )));
            }
        };
        let tcp = match &key.via {
            None => self.tcp.clone().call(uri.clone()).await.map_err(boxed)?,
            Some(via) if !key.https => self
                .tcp
                .clone()
                .call(via.proxy.clone())
                .await
                .map_err(boxed)?,
            Some(via) => {
                let mut tunnel = Tunnel::new(via.proxy.clone(), self.tcp.clone());
                if let Some(auth) = &via.auth {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                tunnel.call(uri.clone()).await.map_err(boxed)?
            }
        }
        .into_inner();
        let Some(tls) = tls else {
            return handshake(tcp).await;
        };
        let name = key.host.trim_start_matches('[').trim_end_matches(']');
        let name = rustls::pki_types::ServerName::try_from(name.to_owned())
            .map_err(|e| SendError::Connect(Box::new(e)))?;
        let stream = tls
            .connect(name, tcp)
            .await
            .map_err(|e| SendError::Connect(Box::new(e)))?;
        handshake(stream).await
    }

    /// Hands a ready connection to the oldest request still waiting, or
    /// keeps it idle.
    fn give(&self, host: &mut Host, mut conn: Conn) {
        while let Some(w) = host.waiters.pop_front() {
            match w.send(Ok(conn)) {
                Ok(()) => return,
                Err(Ok(back)) => conn = back,
                Err(Err(_)) => unreachable!("a connection was sent"),
            }
        }
        if host.idle.len() < self.max_idle {
            host.idle.push((conn, Instant::now()));
        }
    }

    /// A response was read to its end: its connection serves the next
    /// request once hyper has it ready. It is closed instead if hyper had
    /// not taken all of the request (`taken`: the server answered before
    /// reading it, and may never read the rest), or if it is not ready
    /// within [`RETURN_GRACE`].
    fn come_back(self: &Arc<Self>, key: Key, mut conn: Conn, taken: bool) {
        if !taken {
            // Never counted as returning: no waiter was relying on it.
            return;
        }
        if conn.sender.is_ready() {
            let mut hosts = self.hosts();
            self.give(hosts.entry(key).or_default(), conn);
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.hosts().entry(key.clone()).or_default().returning += 1;
        let pool = Arc::clone(self);
        rt.spawn(async move {
            let ready = poll_fn(|cx| conn.sender.poll_ready(cx));
            let ready = matches!(tokio::time::timeout(RETURN_GRACE, ready).await, Ok(Ok(())));
            let mut hosts = pool.hosts();
            let host = hosts.entry(key.clone()).or_default();
            host.returning = host.returning.saturating_sub(1);
            if ready {
                pool.give(host, conn);
            } else {
                drop(conn);
                pool.connect_if_needed(&key, &key_uri(&key), host);
            }
        });
    }
}

fn boxed(e: impl std::error::Error + Send + Sync + 'static) -> SendError {
    SendError::Connect(Box::new(e))
}

/// A connection made but not yet driven: its sender, its clock, and the
/// future that drives it (ends when it closes).
type Handshaken = (
    Sender,
    Arc<Activity>,
    Pin<Box<dyn Future<Output = ()> + Send>>,
);

async fn handshake<T>(io: T) -> Result<Handshaken, SendError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let io = Watched {
        io,
        activity: Arc::clone(&activity),
    };
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(io))
        .await
        .map_err(SendError::Exchange)?;
    Ok((
        sender,
        activity,
        Box::pin(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection closed");
            }
        }),
    ))
}

/// One connection of the pool: what sends on it, the task that drives it,
/// and when it last moved a byte. Dropping it closes it, whatever hyper
/// was doing: a connection the pool lets go of is never left writing a
/// request body to a server that does not read (dropping the sender
/// alone would leave its task at that, and the socket open, for ever).
struct Conn {
    sender: Sender,
    task: AbortHandle,
    activity: Arc<Activity>,
}

impl Conn {
    /// Starts driving a connection made by [`handshake`].
    fn run((sender, activity, drive): Handshaken) -> Conn {
        Conn {
            sender,
            task: tokio::spawn(drive).abort_handle(),
            activity,
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// When a connection last moved a byte, either way: the clock of the read
/// timeout while a request is sent and its answer awaited. A byte the
/// socket accepted is the sign the server is taking the request (what it
/// has not read stays in the buffers, which then refuse more).
struct Activity {
    since: tokio::time::Instant,
    /// Nanoseconds from `since` to the last byte moved.
    last: AtomicU64,
    /// Bytes the socket took so far.
    written: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            since: tokio::time::Instant::now(),
            last: AtomicU64::new(0),
            written: AtomicU64::new(0),
        }
    }

    fn wrote(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        self.touch();
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    fn touch(&self) {
        let at = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.fetch_max(at, Ordering::Relaxed);
    }

    fn last(&self) -> tokio::time::Instant {
        self.since + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }
}

/// `fut`'s output, or None once `activity` has seen no byte move for
/// `limit`: a slow but moving exchange never times out, a silent one does
/// after `limit`.
async fn until_silent<F: Future>(
    fut: F,
    activity: &Activity,
    limit: Duration,
) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut timer = std::pin::pin!(tokio::time::sleep_until(activity.last() + limit));
    loop {
        tokio::select! {
            biased;
            out = &mut fut => return Some(out),
            () = &mut timer => {
                let deadline = activity.last() + limit;
                if deadline <= tokio::time::Instant::now() {
                    return None;
                }
                timer.as_mut().reset(deadline);
            }
        }
    }
}

/// A connection's stream, noting in [`Activity`] every byte it moves.
struct Watched<T> {
    io: T,
    activity: Arc<Activity>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.wrote(n);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.wrote(n);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A request body as hyper takes it, noting when hyper has taken the end
/// of it (`taken`): until then the connection is busy with the request,
/// whatever the answer says. A body sent inside [`shoal_core::sent::counting`]
/// goes in slices, each counted as hyper takes it.
struct SendBody {
    inner: reqwest::Body,
    taken: Arc<AtomicBool>,
    counter: Option<Counting>,
}

/// Where a counted body is: the rest of a frame cut into slices, and the
/// offset of the next byte.
struct Counting {
    sent: shoal_core::sent::Sent,
    rest: Bytes,
    offset: u64,
}

impl SendBody {
    fn new(inner: reqwest::Body, taken: Arc<AtomicBool>) -> SendBody {
        if inner.is_end_stream() {
            taken.store(true, Ordering::Relaxed);
        }
        let long = inner
            .size_hint()
            .exact()
            .is_some_and(|n| n >= 2 * shoal_core::sent::SLICE as u64);
        let counter = (shoal_core::sent::current())
            .filter(|_| long)
            .map(|sent| Counting {
                sent,
                rest: Bytes::new(),
                offset: 0,
            });
        SendBody {
            inner,
            taken,
            counter,
        }
    }

    fn pending(&self) -> u64 {
        self.counter.as_ref().map_or(0, |c| c.rest.len() as u64)
    }
}

impl HttpBody for SendBody {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        let this = &mut *self;
        let Some(c) = &mut this.counter else {
            let polled = Pin::new(&mut this.inner).poll_frame(cx);
            if matches!(polled, Poll::Ready(None)) {
                this.taken.store(true, Ordering::Relaxed);
            }
            return polled;
        };
        if c.rest.is_empty() {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => c.rest = data,
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(None) => {
                    this.taken.store(true, Ordering::Relaxed);
                    return Poll::Ready(None);
                }
                other => return other,
            }
        }
        let slice = c.rest.split_to(c.rest.len().min(shoal_core::sent::SLICE));
        // The slice before this one has been taken by the connection.
        c.sent.reached(c.offset);
        c.offset += slice.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(slice))))
    }

    fn is_end_stream(&self) -> bool {
        // hyper asks this after each frame, and takes no more once true.
        let end = self.pending() == 0 && self.inner.is_end_stream();
        if end {
            self.taken.store(true, Ordering::Relaxed);
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let pending = self.pending();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + pending);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + pending);
        }
        hint
    }
}

/// The URL a connect for `key` dials (what hyper-util's connector reads).
fn key_uri(key: &Key) -> Uri {
    let scheme = if key.https { "https" } else { "http" };
    format!("{scheme}://{}:{}/", key.host, key.port)
        .parse()
        .unwrap_or_default()
}

fn host_header(uri: &Uri) -> HeaderValue {
    let host = uri.host().unwrap_or_default();
    let default = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    let v = match uri.port_u16() {
        Some(p) if p != default => format!("{host}:{p}"),
        _ => host.to_owned(),
    };
    HeaderValue::from_str(&v).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(p) if p.as_str() != "/" => {
            let mut parts = http::uri::Parts::default();
            parts.path_and_query = Some(p.clone());
            Uri::from_parts(parts).unwrap_or_default()
        }
        _ => Uri::default(),
    }
}

/// A connection lent to one response.
struct Lease {
    pool: Weak<Pool>,
    key: Key,
    conn: Conn,
    /// Whether hyper took all of the request (see [`SendBody`]).
    taken: Arc<AtomicBool>,
}

/// A response body on a pooled connection: gives the connection back when
/// read to its end (dropping it earlier closes the connection, as the
/// rest of the body is still on the wire), and fails a read that waits
/// longer than the read timeout.
struct PooledBody {
    inner: Incoming,
    lease: Option<Lease>,
    read_timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether `timer` counts from the current wait.
    armed: bool,
}

impl PooledBody {
    fn release(&mut self) {
        if let Some(l) = self.lease.take()
            && let Some(pool) = l.pool.upgrade()
        {
            let taken = l.taken.load(Ordering::Relaxed);
            pool.come_back(l.key, l.conn, taken);
        }
    }
}

impl HttpBody for PooledBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.armed = false;
                match &frame {
                    None => this.release(),
                    Some(Ok(_)) if this.inner.is_end_stream() => this.release(),
                    Some(Err(_)) => this.lease = None,
                    Some(Ok(_)) => {}
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let deadline = tokio::time::Instant::now() + this.read_timeout;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if !this.armed {
                    // One timer a body, moved on after every frame.
                    timer.as_mut().reset(deadline);
                    this.armed = true;
                }
                if timer.as_mut().poll(cx).is_ready() {
                    this.lease = None;
                    return Poll::Ready(Some(Err(Box::new(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "no data for {}s while reading the response",
                            this.read_timeout.as_secs_f64()
                        ),
                    )))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        if self.inner.is_end_stream() {
            // All of it arrived (or there was none: HEAD, 204): the
            // connection is reusable although nobody read the end.
            self.release();
        }
    }
}

#[cfg(test)]
mod tests;
