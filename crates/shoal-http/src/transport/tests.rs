//! The pool against a small HTTP/1.1 server of the test's own, which
//! counts the connections it accepts. The bounds asserted hold whatever
//! order the tasks run in: they follow from the pool's one rule.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::http::HttpConfig;

struct Server {
    base: String,
    accepted: Arc<AtomicUsize>,
}

/// Serves `GET /n/<bytes>` (that many bytes), `/close` (says
/// `connection: close`), `/stall` (half a body, then nothing).
async fn server() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (sock, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(sock));
        }
    });
    Server { base, accepted }
}

async fn serve(mut sock: TcpStream) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + length);
        let mut words = head.split_whitespace();
        let method = words.next().unwrap_or("").to_owned();
        let target = words.next().unwrap_or("");
        // As a forwarding proxy sees it: the whole URL.
        let path = match target.strip_prefix("http://") {
            Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        }
        .to_owned();
        let body_len = path
            .strip_prefix("/n/")
            .map_or(5, |n| n.parse::<usize>().unwrap());
        let close = path == "/close";
        let stall = path == "/stall";
        let mut out = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n{}\r\n",
            if stall { 10 } else { body_len },
            if close { "connection: close\r\n" } else { "" }
        )
        .into_bytes();
        if method != "HEAD" {
            out.extend(std::iter::repeat_n(b'x', if stall { 5 } else { body_len }));
        }
        if sock.write_all(&out).await.is_err() {
            return;
        }
        if stall {
            std::future::pending::<()>().await;
        }
        if close {
            return;
        }
    }
}

fn client(read_timeout: Duration) -> Http {
    pooled(read_timeout).0
}

/// A client, and the pool it sends on (to look into).
fn pooled(read_timeout: Duration) -> (Http, Arc<Pool>) {
    let config = HttpConfig {
        plain_http: true,
        read_timeout,
        ..HttpConfig::default()
    };
    let (reqwest, pool) = config.parts().unwrap();
    let pool = Arc::new(Pool::new(pool.expect("no https proxy: the pool sends")));
    let service = Pooled::new(Arc::clone(&pool), &config.user_agent);
    (Http::new(reqwest, Arc::new(service)), pool)
}

async fn get(http: &Http, url: &str) -> Result<Bytes, Error> {
    let resp = http.send(Op::Download, url, http.get(url)).await?;
    resp.bytes()
        .await
        .map_err(|e| crate::http::error_from_reqwest(Op::Download, url, e))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_never_outnumber_the_requests_that_wanted_one() {
    let s = server().await;
    let (http, pool) = pooled(Duration::from_secs(30));
    for (requests, in_flight) in [(400, 16), (200, 64)] {
        let before = s.accepted.load(Ordering::SeqCst);
        let got: Vec<_> = futures::stream::iter(0..requests)
            .map(|i| {
                let (http, url) = (&http, format!("{}/n/{}", s.base, 1 + i % 3000));
                async move { (i, get(http, &url).await) }
            })
            .buffer_unordered(in_flight)
            .collect()
            .await;
        for (i, r) in got {
            assert_eq!(r.unwrap().len(), 1 + i % 3000);
        }
        let opened = s.accepted.load(Ordering::SeqCst);
        // The second round reuses the first round's connections and opens
        // only what its wider fan-out needs beyond them.
        assert!(
            opened <= in_flight.max(before),
            "{opened} connections for {in_flight} slots"
        );
        assert!(opened - before <= in_flight, "{opened} - {before}");
    }
    // A connect started for a request that a returning connection served
    // may still be landing: both counts are compared once none is under
    // way and the server has accepted what the client made.
    let settled = async {
        loop {
            let connecting: usize = pool.hosts().values().map(|h| h.connecting).sum();
            let opened = pool.opened.load(Ordering::SeqCst);
            if connecting == 0 && opened == s.accepted.load(Ordering::SeqCst) as u64 {
                return opened;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let counted = tokio::time::timeout(Duration::from_secs(30), settled).await;
    assert!(
        counted.is_ok(),
        "client opened {:?}, server accepted {}",
        pool.opened.load(Ordering::SeqCst),
        s.accepted.load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_forwarding_proxy_connections_are_to_it_and_as_few() {
    let proxy = server().await;
    let http = HttpConfig {
        plain_http: true,
        proxy: crate::network::ProxyConfig::default().with_proxy_for_all("--proxy", &proxy.base),
        ..HttpConfig::default()
    }
    .build()
    .unwrap();
    // The host does not resolve: only the proxy can answer.
    let got: Vec<_> = futures::stream::iter(0..200usize)
        .map(|i| {
            let (http, url) = (
                &http,
                format!("http://no-such-host.invalid/n/{}", 1 + i % 50),
            );
            async move { (i, get(http, &url).await) }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for (i, r) in got {
        assert_eq!(r.unwrap().len(), 1 + i % 50);
    }
    let opened = proxy.accepted.load(Ordering::SeqCst);
    assert!(
        (1..=8).contains(&opened),
        "{opened} connections for 8 slots"
    );
}

/// hyper calls a connection "ready" only once its task has run: one made
/// for a request that another connection served lands idle before that.
/// It is a good connection, used by the next request, not closed for a new
/// one (which let connections outnumber the requests that wanted one).
#[tokio::test]
async fn an_idle_connection_whose_task_has_not_run_is_used_not_replaced() {
    let s = server().await;
    let (_http, pool) = pooled(Duration::from_secs(30));
    let uri: Uri = format!("{}/n/7", s.base).parse().unwrap();
    let key = Key::of(&uri, None).unwrap();
    let tcp = TcpStream::connect(uri.authority().unwrap().as_str())
        .await
        .unwrap();
    // Its task is spawned, and runs when this test first waits.
    let conn = Conn::run(handshake(tcp).await.unwrap());
    assert!(!conn.sender.is_ready() && !conn.sender.is_closed());
    pool.give(pool.hosts().entry(key.clone()).or_default(), conn);
    let mut got = pool.checkout(&key, &uri).await.unwrap();
    assert_eq!(
        pool.opened.load(Ordering::SeqCst),
        0,
        "a connect was started"
    );
    poll_fn(|cx| got.sender.poll_ready(cx)).await.unwrap();
    let body = SendBody::new(reqwest::Body::from(""), Arc::default());
    let req = http::Request::get(origin_form(&uri))
        .header(HOST, host_header(&uri))
        .body(body)
        .unwrap();
    let resp = got.sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_is_reused_only_when_its_answer_was_read_to_the_end() {
    let s = server().await;
    let http = client(Duration::from_secs(30));
    let url = format!("{}/n/100", s.base);
    for _ in 0..5 {
        get(&http, &url).await.unwrap();
    }
    let head = http.send(Op::Stat, &url, http.head(&url)).await.unwrap();
    assert_eq!(head.status(), 200);
    drop(head);
    get(&http, &url).await.unwrap();
    assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
    // A body dropped unread leaves its bytes on the wire: that connection
    // is closed, and the next request gets a new one.
    let big = format!("{}/n/1000000", s.base);
    let mut resp = http.send(Op::Download, &big, http.get(&big)).await.unwrap();
    resp.chunk().await.unwrap();
    drop(resp);
    get(&http, &url).await.unwrap();
    assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn connections_the_server_closes_are_replaced() {
    let s = server().await;
    let http = client(Duration::from_secs(30));
    let url = format!("{}/close", s.base);
    for _ in 0..20 {
        assert_eq!(get(&http, &url).await.unwrap().len(), 5);
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 20);
}

#[tokio::test]
async fn a_stalled_body_times_out_and_a_refused_connect_is_unsent() {
    let s = server().await;
    let http = client(Duration::from_millis(300));
    let url = format!("{}/stall", s.base);
    let e = get(&http, &url).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    // Port 9 (discard) is closed on the test machines.
    let e = get(&http, "http://127.0.0.1:9/x").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect, "{e}");
    assert!(e.to_string().contains("could not connect"), "{e}");
    assert!(e.is_retryable(), "{e}");
    let e = get(&http, "https://127.0.0.1:9/x").await.unwrap_err();
    assert!(e.to_string().contains("TLS is not set up"), "{e}");
}

/// A client whose TCP send buffer is `send_buffer` bytes: small enough
/// that a test server's pace shows in what the socket accepts (the
/// kernel would otherwise grow it to megabytes and hide the pace).
fn client_sending_slowly(read_timeout: Duration, send_buffer: usize) -> Http {
    let mut http = client(read_timeout);
    let mut pool = Pool::new(PoolConfig {
        connect_timeout: Duration::from_secs(10),
        read_timeout,
        idle_timeout: Duration::from_secs(50),
        max_idle_per_host: 16,
        tls: None,
        proxy: None,
    });
    pool.tcp.set_send_buffer_size(Some(send_buffer));
    http.service = Arc::new(Pooled::new(Arc::new(pool), "shoal-test"));
    http
}

/// A listener whose accepted sockets have a small receive buffer, for the
/// same reason as [`client_sending_slowly`].
fn small_listener() -> TcpListener {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(16 << 10).unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    sock.listen(64).unwrap()
}

/// Reads one request head from `sock` (and nothing after it, as far as
/// can be helped: what came with it is returned).
async fn read_head(sock: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i + 4]).into_owned();
            return Some((head, buf[i + 4..].to_vec()));
        }
        let mut chunk = [0u8; 1024];
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0)
}

/// Starts a server that runs `handle` on every connection it accepts.
fn serve_with<F, Fut>(listener: TcpListener, handle: F) -> Server
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let base = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (sock, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(handle(sock));
        }
    });
    Server { base, accepted }
}

/// Answers a PUT with 503 before reading its body, then neither reads
/// nor closes (as servers refusing an upload early do); answers anything
/// else with a 5-byte 200, keeping the connection.
async fn answers_uploads_early(mut sock: TcpStream) {
    while let Some((head, _)) = read_head(&mut sock).await {
        if head.starts_with("PUT ") {
            let _ = sock
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy")
                .await;
            std::future::pending::<()>().await;
        }
        let answer: &[u8] = if head.starts_with("HEAD ") {
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
        };
        if sock.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// The early answer to an upload, read to its end, used to count its
/// connection as coming back while hyper was still writing the body the
/// server would never read: the retry and every later request to the
/// host waited on it for ever. It is closed now, and they get a new one.
async fn an_early_answer_leaves_later_requests_a_connection(http: &Http, s: &Server, url: &str) {
    // Larger than the socket buffers on both sides, so the body is still
    // being written when the answer has been read.
    let body = Bytes::from(vec![0u8; 32 << 20]);
    let later = async {
        for _ in 0..2 {
            let put = http.put(url).body(body.clone());
            let resp = http.send(Op::Upload, url, put).await.unwrap();
            assert_eq!(resp.status(), 503);
            assert_eq!(resp.bytes().await.unwrap(), "busy");
        }
        for _ in 0..3 {
            let head = http.send(Op::Stat, url, http.head(url)).await.unwrap();
            assert_eq!(head.status(), 200);
            drop(head);
            assert_eq!(get(http, url).await.unwrap(), "hello");
        }
    };
    // A bound on a hang, not a measure of time: it all takes milliseconds.
    tokio::time::timeout(Duration::from_secs(60), later)
        .await
        .expect("a request after an early answer waited on the pool");
    // One connection for each upload, closed with its answer; one shared
    // by the requests after them.
    assert_eq!(s.accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_to_an_upload_does_not_hold_later_requests() {
    let s = serve_with(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        answers_uploads_early,
    );
    let http = client(Duration::from_secs(30));
    let url = format!("{}/k", s.base);
    an_early_answer_leaves_later_requests_a_connection(&http, &s, &url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_through_a_forwarding_proxy_does_not_hold_later_requests() {
    let proxy = serve_with(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        answers_uploads_early,
    );
    let http = HttpConfig {
        plain_http: true,
        proxy: crate::network::ProxyConfig::default().with_proxy_for_all("--proxy", &proxy.base),
        ..HttpConfig::default()
    }
    .build()
    .unwrap();
    // The host does not resolve: only the proxy can answer.
    let url = "http://no-such-host.invalid/k";
    an_early_answer_leaves_later_requests_a_connection(&http, &proxy, url).await;
}

/// Reads a request's body `piece` bytes at a time, one piece every
/// `every`, then answers 200; `stop_after` bytes read, it stops reading
/// (and keeps the connection open).
async fn reads_slowly(mut sock: TcpStream, piece: usize, every: Duration, stop_after: usize) {
    let Some((head, early)) = read_head(&mut sock).await else {
        return;
    };
    let length = content_length(&head);
    let mut got = early.len();
    let mut buf = vec![0u8; piece];
    while got < length {
        if got >= stop_after {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(every).await;
        let want = piece.min(length - got);
        match sock.read(&mut buf[..want]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got += n,
        }
    }
    let _ = sock
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        .await;
    std::future::pending::<()>().await;
}

/// `--read-timeout` used to limit sending the whole body and awaiting the
/// answer: an upload slower than body/timeout failed on every attempt,
/// however steadily it moved. It is the longest silence now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_but_steady_upload_outlasts_the_read_timeout() {
    // 3 MiB at 16 KiB every 10 ms: about 2 s, twice the read timeout,
    // with the socket taking bytes every 10 ms (a hundredth of it).
    let s = serve_with(small_listener(), |sock| {
        reads_slowly(sock, 16 << 10, Duration::from_millis(10), usize::MAX)
    });
    let http = client_sending_slowly(Duration::from_secs(1), 16 << 10);
    let url = format!("{}/k", s.base);
    let put = http.put(&url).body(Bytes::from(vec![7u8; 3 << 20]));
    let resp = http.send(Op::Upload, &url, put).await.unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_the_server_stops_reading_times_out() {
    let s = serve_with(small_listener(), |sock| {
        reads_slowly(sock, 16 << 10, Duration::from_millis(1), 256 << 10)
    });
    let http = client_sending_slowly(Duration::from_millis(300), 16 << 10);
    let url = format!("{}/k", s.base);
    let put = http.put(&url).body(Bytes::from(vec![7u8; 3 << 20]));
    let e = http.send(Op::Upload, &url, put).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.to_string().contains("took no byte of the request"), "{e}");
    assert!(e.may_have_been_applied(), "{e}");
}

/// A connection that never completes (here a TLS handshake the server
/// never answers) fails after the connect timeout, whatever the read
/// timeout, and says which flag allows it longer.
#[tokio::test]
async fn a_handshake_that_never_completes_hits_the_connect_timeout() {
    let s = serve_with(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        |sock| async move {
            let _keep = sock;
            std::future::pending::<()>().await;
        },
    );
    let http = HttpConfig {
        connect_timeout: Duration::from_millis(300),
        read_timeout: Duration::from_secs(3600),
        ..HttpConfig::default()
    }
    .build()
    .unwrap();
    let url = s.base.replace("http://", "https://") + "/k";
    let e = get(&http, &url).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(!e.may_have_been_applied() && e.is_retryable(), "{e}");
    let shown = format!("{e}");
    assert!(shown.contains("--connect-timeout"), "{shown}");
    assert!(!shown.contains("--read-timeout"), "{shown}");
}

/// Answers every GET with `answer` (head and body as given) and closes
/// if it says so.
async fn answers_with(mut sock: TcpStream, answer: &'static [u8], close: bool) {
    while read_head(&mut sock).await.is_some() {
        if sock.write_all(answer).await.is_err() || close {
            return;
        }
    }
}

/// Bodies without a Content-Length are read to their end: chunked ones
/// (the connection kept), and HTTP/1.0 ones that end when the server
/// closes (the next request gets a new connection).
#[tokio::test]
async fn bodies_without_a_content_length_are_read_to_their_end() {
    const CHUNKED: &[u8] =
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    let s = serve_with(TcpListener::bind("127.0.0.1:0").await.unwrap(), |sock| {
        answers_with(sock, CHUNKED, false)
    });
    let http = client(Duration::from_secs(30));
    let url = format!("{}/k", s.base);
    for _ in 0..3 {
        assert_eq!(get(&http, &url).await.unwrap(), "hello world");
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 1);

    const UNTIL_CLOSE: &[u8] = b"HTTP/1.0 200 OK\r\n\r\nhello world";
    let s = serve_with(TcpListener::bind("127.0.0.1:0").await.unwrap(), |sock| {
        answers_with(sock, UNTIL_CLOSE, true)
    });
    let url = format!("{}/k", s.base);
    for _ in 0..3 {
        assert_eq!(get(&http, &url).await.unwrap(), "hello world");
    }
    assert_eq!(s.accepted.load(Ordering::SeqCst), 3);
}

/// A big body sent inside `sent::counting` is counted as the connection
/// takes it: with the server reading 1 of 3 MiB and then stopping, the
/// count moves past the first slices and stays short of the body (before
/// slicing it stayed 0 until the answer, then jumped by the whole body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counted_body_is_counted_as_the_connection_takes_it() {
    use std::sync::atomic::AtomicU64;
    let s = serve_with(small_listener(), |sock| {
        reads_slowly(sock, 16 << 10, Duration::from_millis(1), 1 << 20)
    });
    let http = client_sending_slowly(Duration::from_secs(30), 16 << 10);
    let url = format!("{}/k", s.base);
    let total = Arc::new(AtomicU64::new(0));
    let sent = shoal_core::sent::Sent::new(total.clone());
    let send = tokio::spawn(async move {
        let put = http.put(&url).body(Bytes::from(vec![7u8; 3 << 20]));
        shoal_core::sent::counting(sent, http.send(Op::Upload, &url, put)).await
    });
    // The server has read 1 MiB (16 KiB a millisecond): the count follows.
    let mut seen = 0;
    for _ in 0..3000 {
        seen = total.load(Ordering::Relaxed);
        if seen >= 512 << 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen >= 512 << 10, "counted {seen} bytes");
    assert!(total.load(Ordering::Relaxed) < 3 << 20);
    send.abort();
}
