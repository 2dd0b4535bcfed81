//! What goes on the wire, checked against a one-shot local HTTP server:
//! names as single percent-encoded segments, no `Authorization` header when
//! anonymous, and garbage answers turned into `Protocol` errors.

use shoal_core::{ErrorKind, ListRequest, Store};
use shoal_gcs::{GcsConfig, GcsStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves one request with `response`, returning the request head.
async fn one_shot(response: &'static str) -> (String, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        sock.write_all(response.as_bytes()).await.unwrap();
        sock.shutdown().await.ok();
        String::from_utf8_lossy(&buf).into_owned()
    });
    (format!("http://{addr}"), task)
}

fn store(endpoint: String) -> GcsStore {
    GcsStore::new(GcsConfig {
        endpoint: Some(endpoint),
        anonymous: true,
        retry: shoal_core::retry::RetryPolicy::none(),
        ..Default::default()
    })
    .unwrap()
}

#[tokio::test]
async fn anonymous_requests_carry_no_authorization_and_encode_names() {
    let body = r#"{"name":"sp ace/ü/100%/x+y?#","size":"3","generation":"7"}"#;
    let resp: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let (url, task) = one_shot(resp).await;
    let m = store(url).head("bk", "sp ace/ü/100%/x+y?#").await.unwrap();
    assert_eq!(m.key, "sp ace/ü/100%/x+y?#");
    let head = task.await.unwrap();
    let first = head.lines().next().unwrap();
    assert_eq!(
        first,
        "GET /storage/v1/b/bk/o/sp%20ace%2F%C3%BC%2F100%25%2Fx%2By%3F%23 HTTP/1.1"
    );
    assert!(
        !head.to_ascii_lowercase().contains("authorization"),
        "{head}"
    );
}

#[tokio::test]
async fn html_instead_of_json_is_a_protocol_error() {
    let (url, task) = one_shot(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 21\r\nConnection: close\r\n\r\n<html>captive</html>\n",
    )
    .await;
    let e = store(url)
        .list_page("bk", &ListRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
    assert!(
        e.to_string()
            .starts_with("list gs://bk/: unexpected response"),
        "{e}"
    );
    task.await.unwrap();
}

#[tokio::test]
async fn json_error_bodies_become_messages() {
    let body =
        r#"{"error":{"code":403,"message":"caller does not have storage.objects.get access"}}"#;
    let resp: &'static str = Box::leak(
        format!(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let (url, task) = one_shot(resp).await;
    let e = store(url).head("bk", "k").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert_eq!(e.status(), Some(403));
    assert!(
        e.to_string().starts_with(
            "stat gs://bk/k: HTTP 403 Forbidden: caller does not have storage.objects.get access"
        ),
        "{e}"
    );
    task.await.unwrap();
}
