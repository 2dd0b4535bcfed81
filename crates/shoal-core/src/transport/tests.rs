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
    HttpConfig {
        plain_http: true,
        read_timeout,
        ..HttpConfig::default()
    }
    .build()
    .unwrap()
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
    let http = client(Duration::from_secs(30));
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
    let pool = http.pool.clone().unwrap();
    let settled = async {
        loop {
            let connecting: usize = pool.hosts().values().map(|h| h.connecting).sum();
            let opened = http.connections_opened().unwrap();
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
        http.connections_opened(),
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
    let http = client(Duration::from_secs(30));
    let pool = http.pool.clone().unwrap();
    let uri: Uri = format!("{}/n/7", s.base).parse().unwrap();
    let key = Key::of(&uri, None).unwrap();
    let tcp = TcpStream::connect(uri.authority().unwrap().as_str())
        .await
        .unwrap();
    let (sender, conn) = handshake(tcp).await.unwrap();
    assert!(!sender.is_ready() && !sender.is_closed());
    pool.give(pool.hosts().entry(key.clone()).or_default(), sender);
    let mut got = pool.checkout(&key, &uri).await.unwrap();
    assert_eq!(
        pool.opened.load(Ordering::SeqCst),
        0,
        "a connect was started"
    );
    tokio::spawn(conn);
    poll_fn(|cx| got.poll_ready(cx)).await.unwrap();
    let req = http::Request::get(origin_form(&uri))
        .header(HOST, host_header(&uri))
        .body(reqwest::Body::from(""))
        .unwrap();
    let resp = got.send_request(req).await.unwrap();
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
