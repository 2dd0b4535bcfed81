//! `--decryption-keys`: a read of an object goes with the key it was
//! written with, found among the keys given. storage-testbench cannot
//! show this (it checks a key only against the SHA256 header sent beside
//! it, so any key reads any object), so a local server of a few lines
//! plays GCS here: it answers a media GET only when the key's SHA256 is
//! the object's, and refuses as GCS does otherwise. A rewrite is checked
//! the same way against its source's key (`x-goog-copy-source-...`).

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
/// records, per request, the object and the key SHA256 sent (for a
/// rewrite: the source's name and the source key's SHA256, then the
/// destination key's after a `>`).
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
            let rewrite = path.contains("/rewriteTo/");
            let name = path
                .split("/o/")
                .nth(1)
                .unwrap_or("")
                .split(['?', '/'])
                .next()
                .unwrap()
                .to_owned();
            let header = |want: &str| {
                head.lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case(want).then(|| v.trim().to_owned())
                    })
                    .unwrap_or_default()
            };
            let sent = if rewrite {
                header("x-goog-copy-source-encryption-key-sha256")
            } else {
                header("x-goog-encryption-key-sha256")
            };
            let logged = if rewrite {
                format!("{sent}>{}", header("x-goog-encryption-key-sha256"))
            } else {
                sent.clone()
            };
            log.lock().unwrap().push((name.clone(), logged));
            let resp = match objects.get(name.as_str()) {
                Some((want, body)) if *want == sent && rewrite => {
                    let out = format!(
                        r#"{{"kind":"storage#rewriteResponse","done":true,"resource":{{"name":"copy","bucket":"bk","generation":"2","size":"{}"}}}}"#,
                        body.len()
                    );
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                        out.len()
                    )
                }
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

/// A server-side copy reads its source under the source's own key, found
/// among the keys given as a read's is, and writes the destination under
/// `--encryption-key` (or none): gcloud's `--decryption-keys` for copies.
#[tokio::test]
async fn a_rewrite_reads_its_source_with_its_own_key() {
    use shoal_core::{CopyRequest, ObjectMeta, PutOptions};
    let (a, b) = (CustomerKey::new([1; 32]), CustomerKey::new([2; 32]));
    let objects = HashMap::from([("under-b", (sha(&b), "B")), ("plain", (String::new(), "P"))]);
    let (url, seen) = server(objects).await;
    let store_with = |key: Option<GcsKey>| {
        GcsStore::new(GcsConfig {
            endpoint: Some(url.clone()),
            anonymous: true,
            retry: shoal_core::retry::RetryPolicy::none(),
            encryption: GcsEncryption {
                key,
                decryption_keys: vec![b.clone()],
            },
            ..Default::default()
        })
        .unwrap()
    };
    async fn copy(store: &GcsStore, key: &str) -> shoal_core::Result<ObjectMeta> {
        let src = ObjectMeta {
            key: key.into(),
            size: 1,
            ..Default::default()
        };
        let opts = PutOptions::default();
        store
            .copy(&CopyRequest {
                src_bucket: "bk",
                src_key: key,
                src: &src,
                dst_bucket: "bk",
                dst_key: "copy",
                opts: &opts,
                replace_metadata: false,
                part_size: 1 << 30,
                workers: 1,
                requests: None,
            })
            .await
    }
    let sent = |from: usize| -> Vec<String> {
        seen.lock().unwrap()[from..]
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    };

    // Into A: the source is tried under A, then B (taken); the
    // destination goes under A each time.
    copy(&store_with(Some(GcsKey::Customer(a.clone()))), "under-b")
        .await
        .unwrap();
    let to_a = |s: &str| format!("{s}>{}", sha(&a));
    assert_eq!(sent(0), [to_a(&sha(&a)), to_a(&sha(&b))]);
    // Only decryption keys: the copy is written under no key.
    let n = seen.lock().unwrap().len();
    copy(&store_with(None), "under-b").await.unwrap();
    assert_eq!(sent(n), [format!("{}>", sha(&b))]);
    // A source under no key, from a store that last used B: B, then none.
    let store = store_with(None);
    copy(&store, "under-b").await.unwrap();
    let n = seen.lock().unwrap().len();
    copy(&store, "plain").await.unwrap();
    assert_eq!(sent(n), [format!("{}>", sha(&b)), ">".to_owned()]);
}
