//! A fault-injecting HTTP proxy: it sits between shoal and a real server
//! (fake-gcs-server, MinIO) on 127.0.0.1 and spoils chosen requests.
//!
//! Why a proxy of our own next to toxiproxy: toxiproxy speaks TCP and
//! cannot tell one HTTP request from the next. The faults that matter most
//! to an object-store client are per request: "the second ranged GET gets
//! 503 with Retry-After", "byte K of this body is flipped", "the body
//! stops at half its Content-Length", "this pooled connection was closed
//! by the server just as it was reused". Each is a [`Rule`] (which request,
//! which [`Fault`]); a seeded [`Random`] mix spoils a share of all requests
//! for soak tests. Every injected fault is logged ([`FaultProxy::injected`])
//! so a test can assert that its fault really happened and cannot pass
//! vacuously.
//!
//! Requests are forwarded untouched (same `Host`, so S3 signatures stay
//! valid), one upstream connection per client connection, so keep-alive
//! reuse on the client side is reuse here too. The proxy runs on its own
//! small tokio runtime: synchronous tests that spawn the `shoal` binary can
//! use it as well as async ones.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What happens to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status without forwarding (the request body is
    /// read and dropped first); `retry_after` is sent in seconds.
    Status {
        /// e.g. 429, 500, 503, 408.
        code: u16,
        /// `Retry-After` header, seconds.
        retry_after: Option<u64>,
    },
    /// Forward; keep the upstream `Content-Length` but send only the first
    /// half of the body, then close: a 200 shorter than it says.
    ShortBody,
    /// Forward; send `n` bytes of the body, then close.
    CutAfter(u64),
    /// Forward; flip the lowest bit of body byte `k` (the last byte when
    /// the body is shorter).
    FlipByte(u64),
    /// No byte at all for this long before the response headers (a stall
    /// when longer than the client's read timeout, a slow start when not).
    DelayHeaders(Duration),
    /// Forward; send `after` bytes of the body, then nothing for `pause`.
    StallBody {
        /// Bytes sent before the silence.
        after: u64,
        /// Length of the silence.
        pause: Duration,
    },
    /// Forward; send the body at about this many bytes per second.
    Throttle(u64),
    /// Forward the body whole but chunked, without `Content-Length` (nor
    /// GCS's `x-goog-stored-content-length`): as servers behind some
    /// gateways answer.
    NoLength,
    /// Close the connection with a TCP reset, without answering.
    Reset,
    /// Forward, let the server finish, then reset the client's connection
    /// without answering: the work done, its response lost.
    LoseResponse,
    /// Forward, let the server finish, then answer this status instead of
    /// the server's (a 503 from a front end after the write happened).
    StatusAfter(u16),
    /// Forward, let the server finish, then let another writer make its
    /// request on a connection of its own (a write of the same key), then
    /// reset the client's connection without answering: the work done, its
    /// response lost, and the object changed before the client can look.
    LoseResponseThen(OtherWrite),
    /// Let another writer make its request first, on a connection of its
    /// own (a write of the same key), then forward this one: the object
    /// changed between what the client read and the request it sends on
    /// what it read (an update's write, pinned to the version seen).
    WriteFirst(OtherWrite),
    /// On a reused keep-alive connection, close it without answering (a
    /// server's idle timeout firing just as the client reuses a pooled
    /// connection). A request on a fresh connection is not touched and
    /// does not count as matched.
    DropReused,
}

impl Fault {
    /// A short name for logs and tallies.
    pub fn kind(&self) -> String {
        match self {
            Fault::Status {
                code,
                retry_after: Some(_),
            } => format!("{code}+retry-after"),
            Fault::Status { code, .. } => code.to_string(),
            Fault::ShortBody => "short-body".into(),
            Fault::CutAfter(_) => "cut".into(),
            Fault::FlipByte(_) => "flipped-byte".into(),
            Fault::DelayHeaders(_) => "delay-headers".into(),
            Fault::StallBody { .. } => "stall-body".into(),
            Fault::Throttle(_) => "throttle".into(),
            Fault::NoLength => "no-length".into(),
            Fault::Reset => "reset".into(),
            Fault::LoseResponse => "lost-response".into(),
            Fault::StatusAfter(code) => format!("{code}-after"),
            Fault::LoseResponseThen(_) => "lost-response-then-written".into(),
            Fault::WriteFirst(_) => "written-first".into(),
            Fault::DropReused => "stale-connection".into(),
        }
    }
}

/// A request another writer sends straight to the server
/// ([`Fault::LoseResponseThen`], [`Fault::WriteFirst`]): anything that needs no signature of the
/// proxy's (a GCS emulator's upload, an S3 presigned URL's PUT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherWrite {
    /// e.g. `PUT`, `POST`.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// The body sent.
    pub body: Vec<u8>,
}

impl OtherWrite {
    /// Sends it to `upstream` (host:port); its status.
    async fn send(&self, upstream: &str) -> io::Result<u16> {
        let tcp = TcpStream::connect(upstream).await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
                .await
                .map_err(other)?;
        tokio::spawn(connection);
        let req = Request::builder()
            .method(self.method.as_str())
            .uri(self.target.as_str())
            .header(hyper::header::HOST, upstream)
            .header(hyper::header::CONTENT_LENGTH, self.body.len())
            .body(Full::new(Bytes::from(self.body.clone())))
            .map_err(other)?;
        let resp = sender.send_request(req).await.map_err(other)?;
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        Ok(status)
    }
}

/// Which requests a rule or random fault applies to. Empty matches all.
#[derive(Debug, Clone, Default)]
pub struct When {
    /// HTTP method, e.g. `GET`.
    pub method: Option<String>,
    /// `Some(true)`: only requests with a `Range` header; `Some(false)`: only without.
    pub ranged: Option<bool>,
    /// A substring of the path and query.
    pub contains: Option<String>,
    /// A substring the path and query must not contain.
    pub lacks: Option<String>,
}

impl When {
    /// Every request.
    pub fn any() -> Self {
        When::default()
    }
    /// Requests with this method.
    pub fn method(m: &str) -> Self {
        When {
            method: Some(m.to_owned()),
            ..When::default()
        }
    }
    /// Only ranged (`true`) or unranged (`false`) requests.
    pub fn ranged(mut self, yes: bool) -> Self {
        self.ranged = Some(yes);
        self
    }
    /// Path and query contain `s`.
    pub fn contains(mut self, s: &str) -> Self {
        self.contains = Some(s.to_owned());
        self
    }
    /// Path and query do not contain `s`.
    pub fn lacks(mut self, s: &str) -> Self {
        self.lacks = Some(s.to_owned());
        self
    }

    fn matches(&self, method: &str, target: &str, ranged: bool) -> bool {
        self.method.as_deref().is_none_or(|m| m == method)
            && self.ranged.is_none_or(|r| r == ranged)
            && self.contains.as_deref().is_none_or(|s| target.contains(s))
            && self.lacks.as_deref().is_none_or(|s| !target.contains(s))
    }
}

/// "The `nth` matching request, and the `times - 1` after it, get `fault`."
#[derive(Debug, Clone)]
pub struct Rule {
    when: When,
    fault: Fault,
    nth: usize,
    times: usize,
    seen: usize,
    fired: usize,
}

impl Rule {
    /// The first request matching `when` gets `fault`.
    pub fn new(when: When, fault: Fault) -> Self {
        Rule {
            when,
            fault,
            nth: 1,
            times: 1,
            seen: 0,
            fired: 0,
        }
    }
    /// Start at the `n`th matching request (1-based).
    pub fn nth(mut self, n: usize) -> Self {
        self.nth = n.max(1);
        self
    }
    /// Spoil this many matching requests in a row (`usize::MAX`: all).
    pub fn times(mut self, n: usize) -> Self {
        self.times = n;
        self
    }
}

/// A seeded random mix: `percent` of the requests matching an entry's
/// `When` get one of the entries' faults, chosen uniformly.
#[derive(Debug, Clone)]
pub struct Random {
    /// Seed of the choices (print it so a failing run can be replayed;
    /// concurrent requests arrive in varying order, so a replay repeats
    /// the mix of faults, not the exact request each one hit).
    pub seed: u64,
    /// Share of requests spoiled, 0 to 100.
    pub percent: u32,
    /// The faults to choose from, each with the requests it may hit.
    pub faults: Vec<(When, Fault)>,
}

/// Everything the proxy will do, in order: rules first, then the mix.
#[derive(Debug, Clone, Default)]
pub struct Script {
    rules: Vec<Rule>,
    random: Option<Random>,
    headers: Vec<(String, String)>,
    strip: Option<String>,
}

impl Script {
    /// No faults: a transparent proxy.
    pub fn new() -> Self {
        Script::default()
    }
    /// Adds a rule.
    pub fn rule(mut self, r: Rule) -> Self {
        self.rules.push(r);
        self
    }
    /// Adds a header to every forwarded request (the GCS testbench's
    /// `x-retry-test-id`, which shoal itself never sends).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
    /// Adds a random mix.
    pub fn random(mut self, r: Random) -> Self {
        self.random = Some(r);
        self
    }
    /// Serves the server below a path of its own, as a gateway does:
    /// `prefix` (e.g. `/gcs`) is taken off each request's path before it
    /// is forwarded; a request outside it gets a plain-text
    /// `404 page not found`. Bodies (a batch's inner requests) pass
    /// untouched.
    pub fn below(mut self, prefix: &str) -> Self {
        self.strip = Some(prefix.trim_end_matches('/').to_owned());
        self
    }
}

/// One fault the proxy injected.
#[derive(Debug, Clone)]
pub struct Injected {
    /// The request's number (1-based, over the proxy's life).
    pub request: usize,
    /// Method and path+query.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// What was done.
    pub fault: Fault,
}

struct State {
    upstream: String,
    strip: Option<String>,
    headers: Vec<(String, String)>,
    script: Mutex<(Script, Option<StdRng>)>,
    requests: AtomicUsize,
    injected: Mutex<Vec<Injected>>,
    /// Bytes read from and written to clients, headers included.
    client_bytes: Arc<AtomicU64>,
}

impl State {
    fn pick(
        &self,
        n: usize,
        method: &str,
        target: &str,
        ranged: bool,
        reused: bool,
    ) -> Option<Fault> {
        let mut guard = self.script.lock().unwrap();
        let (script, rng) = &mut *guard;
        let mut chosen = None;
        for r in &mut script.rules {
            if !r.when.matches(method, target, ranged) || r.fired >= r.times {
                continue;
            }
            if r.fault == Fault::DropReused && !reused {
                continue;
            }
            r.seen += 1;
            if r.seen >= r.nth {
                r.fired += 1;
                chosen = Some(r.fault.clone());
                break;
            }
        }
        if chosen.is_none()
            && let (Some(mix), Some(rng)) = (&script.random, rng.as_mut())
            && rng.random_range(0..100) < mix.percent
        {
            let fitting: Vec<&Fault> = mix
                .faults
                .iter()
                .filter(|(w, f)| {
                    w.matches(method, target, ranged) && (reused || *f != Fault::DropReused)
                })
                .map(|(_, f)| f)
                .collect();
            if !fitting.is_empty() {
                chosen = Some(fitting[rng.random_range(0..fitting.len())].clone());
            }
        }
        if let Some(f) = &chosen {
            self.injected.lock().unwrap().push(Injected {
                request: n,
                method: method.to_owned(),
                target: target.to_owned(),
                fault: f.clone(),
            });
        }
        chosen
    }
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FaultProxy {
    /// Starts a proxy on 127.0.0.1 (a free port) in front of `upstream`
    /// (`http://host:port` or `host:port`).
    pub fn start(upstream: &str, script: Script) -> FaultProxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let rng = script
            .random
            .as_ref()
            .map(|r| StdRng::seed_from_u64(r.seed));
        let state = Arc::new(State {
            upstream,
            strip: script.strip.clone(),
            headers: script.headers.clone(),
            script: Mutex::new((script, rng)),
            requests: AtomicUsize::new(0),
            injected: Mutex::new(Vec::new()),
            client_bytes: Arc::new(AtomicU64::new(0)),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("faultproxy")
            .build()
            .expect("fault proxy runtime");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind fault proxy");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let st = state.clone();
        runtime.spawn(async move {
            let listener = TcpListener::from_std(listener).expect("tokio listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(stream, st.clone()));
            }
        });
        FaultProxy {
            addr,
            state,
            runtime: Some(runtime),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Bytes that crossed the client's side of the proxy so far, both
    /// ways, headers included: what a transfer really moved through the
    /// client (a server-side copy moves almost none).
    pub fn client_bytes(&self) -> u64 {
        self.state.client_bytes.load(Ordering::SeqCst)
    }

    /// The faults injected so far, in order.
    pub fn injected(&self) -> Vec<Injected> {
        self.state.injected.lock().unwrap().clone()
    }

    /// Injected faults counted by [`Fault::kind`], sorted by kind.
    pub fn tally(&self) -> Vec<(String, usize)> {
        let mut m = std::collections::BTreeMap::new();
        for i in self.injected() {
            *m.entry(i.fault.kind()).or_insert(0) += 1;
        }
        m.into_iter().collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

type Body = UnsyncBoxBody<Bytes, io::Error>;

/// The client connection; resets instead of closing when told to.
struct ClientIo {
    stream: TcpStream,
    reset: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
}

impl Drop for ClientIo {
    fn drop(&mut self) {
        if self.reset.load(Ordering::SeqCst) {
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for ClientIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.stream).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.bytes.fetch_add(n, Ordering::SeqCst);
        r
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.bytes.fetch_add(*n as u64, Ordering::SeqCst);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

struct Conn {
    state: Arc<State>,
    reset: Arc<AtomicBool>,
    served: AtomicUsize,
    upstream: tokio::sync::Mutex<Option<SendRequest<Incoming>>>,
}

async fn serve_connection(stream: TcpStream, state: Arc<State>) {
    let reset = Arc::new(AtomicBool::new(false));
    let conn = Arc::new(Conn {
        state,
        reset: reset.clone(),
        served: AtomicUsize::new(0),
        upstream: tokio::sync::Mutex::new(None),
    });
    let bytes = conn.state.client_bytes.clone();
    let io = TokioIo::new(ClientIo {
        stream,
        reset,
        bytes,
    });
    let svc = service_fn(move |req| handle(conn.clone(), req));
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, svc)
        .await;
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

async fn handle(conn: Arc<Conn>, req: Request<Incoming>) -> io::Result<Response<Body>> {
    let n = conn.state.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let reused = conn.served.fetch_add(1, Ordering::SeqCst) > 0;
    let method = req.method().as_str().to_owned();
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let ranged = req.headers().contains_key(hyper::header::RANGE);
    let fault = conn.state.pick(n, &method, &target, ranged, reused);
    match &fault {
        Some(Fault::Reset) => {
            conn.reset.store(true, Ordering::SeqCst);
            return Err(other("fault proxy: reset"));
        }
        Some(Fault::DropReused) => return Err(other("fault proxy: stale connection")),
        Some(Fault::Status { code, retry_after }) => {
            // Read the request body first, as a real server would, so the
            // client sees the status and not a broken upload.
            let _ = req.into_body().collect().await;
            let mut b = Response::builder()
                .status(*code)
                .header("content-type", "text/plain");
            if let Some(s) = retry_after {
                b = b.header("retry-after", s.to_string());
            }
            let body = format!("fault proxy: injected {code}");
            return Ok(b
                .body(Full::new(Bytes::from(body)).map_err(other).boxed_unsync())
                .unwrap());
        }
        Some(Fault::DelayHeaders(d)) => tokio::time::sleep(*d).await,
        Some(Fault::WriteFirst(w)) => {
            let status = w.send(&conn.state.upstream).await?;
            if !(200..300).contains(&status) {
                return Err(other(format!(
                    "fault proxy: the other writer's {} {} got {status}",
                    w.method, w.target
                )));
            }
        }
        _ => {}
    }
    let mut req = req;
    if let Some(prefix) = &conn.state.strip {
        let Some(rest) = target
            .strip_prefix(prefix.as_str())
            .filter(|r| r.starts_with('/'))
        else {
            let _ = req.into_body().collect().await;
            return Ok(Response::builder()
                .status(404)
                .header("content-type", "text/plain")
                .body(
                    Full::new(Bytes::from_static(b"404 page not found\n"))
                        .map_err(other)
                        .boxed_unsync(),
                )
                .unwrap());
        };
        *req.uri_mut() = rest.parse().map_err(other)?;
    }
    for (name, value) in conn.state.headers.iter() {
        req.headers_mut().insert(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).map_err(other)?,
            hyper::header::HeaderValue::from_str(value).map_err(other)?,
        );
    }
    let resp = conn.forward(req).await?;
    match &fault {
        Some(Fault::LoseResponse) => {
            let _ = resp.into_body().collect().await;
            conn.reset.store(true, Ordering::SeqCst);
            return Err(other("fault proxy: response lost"));
        }
        Some(Fault::LoseResponseThen(w)) => {
            let _ = resp.into_body().collect().await;
            let status = w.send(&conn.state.upstream).await?;
            if !(200..300).contains(&status) {
                return Err(other(format!(
                    "fault proxy: the other writer's {} {} got {status}",
                    w.method, w.target
                )));
            }
            conn.reset.store(true, Ordering::SeqCst);
            return Err(other("fault proxy: response lost"));
        }
        Some(Fault::StatusAfter(code)) => {
            let _ = resp.into_body().collect().await;
            let body = format!("fault proxy: injected {code} after the server answered");
            return Ok(Response::builder()
                .status(*code)
                .header("content-type", "text/plain")
                .body(Full::new(Bytes::from(body)).map_err(other).boxed_unsync())
                .unwrap());
        }
        _ => {}
    }
    let (mut parts, body) = resp.into_parts();
    if fault == Some(Fault::NoLength) {
        parts.headers.remove(hyper::header::CONTENT_LENGTH);
        parts.headers.remove("x-goog-stored-content-length");
    }
    let len = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let tap = match fault {
        Some(Fault::ShortBody) => Tap::Cut(len.unwrap_or(0) / 2),
        Some(Fault::CutAfter(k)) => Tap::Cut(k),
        Some(Fault::FlipByte(k)) => Tap::Flip(len.map_or(k, |l| k.min(l.saturating_sub(1)))),
        Some(Fault::StallBody { after, pause }) => Tap::Stall { after, pause },
        Some(Fault::Throttle(bps)) => Tap::Throttle(bps.max(20)),
        _ => Tap::None,
    };
    Ok(Response::from_parts(parts, tapped(body, tap)))
}

impl Conn {
    async fn forward(&self, req: Request<Incoming>) -> io::Result<Response<Incoming>> {
        let mut up = self.upstream.lock().await;
        let usable = match up.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            let tcp = TcpStream::connect(&self.state.upstream).await?;
            tcp.set_nodelay(true)?;
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(other)?;
            tokio::spawn(connection);
            *up = Some(sender);
        }
        up.as_mut().unwrap().send_request(req).await.map_err(other)
    }
}

#[derive(Clone, Copy)]
enum Tap {
    None,
    Cut(u64),
    Flip(u64),
    Stall { after: u64, pause: Duration },
    Throttle(u64),
}

struct Tapped {
    body: Incoming,
    tap: Tap,
    off: u64,
    pending: Bytes,
    stalled: bool,
    done: bool,
}

fn tapped(body: Incoming, tap: Tap) -> Body {
    let t = Tapped {
        body,
        tap,
        off: 0,
        pending: Bytes::new(),
        stalled: false,
        done: false,
    };
    let s = futures::stream::unfold(t, |mut t| async move {
        let item = t.next().await?;
        Some((item.map(Frame::data), t))
    });
    StreamBody::new(s).boxed_unsync()
}

impl Tapped {
    async fn next(&mut self) -> Option<io::Result<Bytes>> {
        if self.done {
            return None;
        }
        if let Tap::Cut(n) = self.tap
            && self.off >= n
        {
            // An error from the body makes hyper drop the connection with
            // the rest of the promised Content-Length unsent.
            self.done = true;
            return Some(Err(other("fault proxy: body cut")));
        }
        while self.pending.is_empty() {
            match self.body.frame().await {
                None => return None,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(other(e)));
                }
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        self.pending = d;
                    }
                }
            }
        }
        let mut take = self.pending.len();
        match self.tap {
            Tap::Cut(n) => take = take.min((n - self.off) as usize),
            Tap::Stall { after, pause } if !self.stalled => {
                if self.off >= after {
                    self.stalled = true;
                    tokio::time::sleep(pause).await;
                } else {
                    take = take.min((after - self.off) as usize);
                }
            }
            Tap::Throttle(bps) => {
                // 20 small sends a second.
                take = take.min((bps / 20).max(1) as usize);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ => {}
        }
        let mut out = self.pending.split_to(take);
        if let Tap::Flip(k) = self.tap
            && k >= self.off
            && k < self.off + out.len() as u64
        {
            let mut m = BytesMut::from(&out[..]);
            m[(k - self.off) as usize] ^= 0x01;
            out = m.freeze();
        }
        self.off += out.len() as u64;
        Some(Ok(out))
    }
}
