//! `--decryption-keys`: a read of an object goes with the key it was
//! written with, found among the keys given. storage-testbench cannot
//! show this (it checks a key only against the SHA256 header sent beside
//! it, so any key reads any object), so a local server of a few lines
//! plays GCS here: it answers a media GET only when the key's SHA256 is
//! the object's, and refuses as GCS does otherwise.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use shoal_core::encryption::{CustomerKey, GcsEncryption, GcsKey};
use shoal_core::{ByteRange, ErrorKind, Store};
use shoal_gcs::{GcsConfig, GcsStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn sha(k: &CustomerKey) -> String {
    STANDARD.encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, k.bytes()).as_ref())
}

/// Serves `objects` (name -> (key SHA256 or "" for none, body)) and
/// records, per request, the object and the key SHA256 sent.
async fn server(
    objects: HashMap<&'static str, (String, &'static str)>,
) -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
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
            let head = String::from_utf8_lossy(&buf).into_owned();
            let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
            let name = path
                .split("/o/")
                .nth(1)
                .unwrap_or("")
                .split('?')
                .next()
                .unwrap()
                .to_owned();
            let sent = head
                .lines()
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("x-goog-encryption-key-sha256")
                        .then(|| v.trim().to_owned())
                })
                .unwrap_or_default();
            log.lock().unwrap().push((name.clone(), sent.clone()));
            let resp = match objects.get(name.as_str()) {
                Some((want, body)) if *want == sent => format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nx-goog-generation: 1\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                ),
                Some((want, _)) => {
                    let msg = if want.is_empty() {
                        "The target object is not encrypted by a customer-supplied encryption key."
                    } else {
                        "The provided encryption key is incorrect."
                    };
                    let body = format!(r#"{{"error":{{"code":400,"message":"{msg}"}}}}"#);
                    format!(
                        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                }
                None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_owned(),
            };
            sock.write_all(resp.as_bytes()).await.ok();
            sock.shutdown().await.ok();
        }
    });
    (url, seen)
}

async fn read(store: &GcsStore, key: &str) -> shoal_core::Result<String> {
    use futures::TryStreamExt;
    let r = store
        .get(
            "bk",
            key,
            ByteRange {
                start: 0,
                end: None,
            },
            None,
        )
        .await?;
    let chunks: Vec<bytes::Bytes> = r.body.try_collect().await?;
    Ok(String::from_utf8(chunks.concat()).unwrap())
}

#[tokio::test]
async fn each_object_is_read_with_its_own_key() {
    let (a, b, c) = (
        CustomerKey::new([1; 32]),
        CustomerKey::new([2; 32]),
        CustomerKey::new([3; 32]),
    );
    let objects = HashMap::from([
        ("under-c", (sha(&c), "C")),
        ("also-c", (sha(&c), "C2")),
        ("plain", (String::new(), "P")),
        ("under-other", (sha(&CustomerKey::new([9; 32])), "X")),
    ]);
    let (url, seen) = server(objects).await;
    let store = GcsStore::new(GcsConfig {
        endpoint: Some(url),
        anonymous: true,
        retry: shoal_core::retry::RetryPolicy::none(),
        encryption: GcsEncryption {
            key: Some(GcsKey::Customer(a.clone())),
            decryption_keys: vec![b.clone(), c.clone()],
        },
        ..Default::default()
    })
    .unwrap();
    let sent = |from: usize| -> Vec<String> {
        seen.lock().unwrap()[from..]
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    };

    // A, then B, then C: taken.
    assert_eq!(read(&store, "under-c").await.unwrap(), "C");
    assert_eq!(sent(0), [sha(&a), sha(&b), sha(&c)]);
    // The next object starts from the key that last worked: one request.
    assert_eq!(read(&store, "also-c").await.unwrap(), "C2");
    assert_eq!(sent(3), [sha(&c)]);
    // An object under no key refuses C (the last good one) and is read
    // with none, which is tried before A and B again.
    assert_eq!(read(&store, "plain").await.unwrap(), "P");
    assert_eq!(sent(4), [sha(&c), String::new()]);
    // Under none of the keys: one refusal naming them by SHA256 only.
    let n = seen.lock().unwrap().len();
    let e = read(&store, "under-other").await.unwrap_err();
    assert_eq!(sent(n).len(), 4, "each candidate once");
    let shown = e.to_string();
    assert!(
        shown.contains(&sha(&a)) && shown.contains(&sha(&c)),
        "{shown}"
    );
    assert!(!shown.contains(&a.to_base64()), "{shown}");
    // Not found is not a key question: asked once.
    let n = seen.lock().unwrap().len();
    let e = read(&store, "missing").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(sent(n).len(), 1);
}
