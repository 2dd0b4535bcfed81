//! The XML API's multipart upload, on the wire.
//!
//! Neither fake-gcs-server nor gcp-storage-emulator has this API (both
//! refuse `POST ?uploads`), so these tests speak to a scripted local server
//! that answers the way GCS documents it: they pin what shoal sends (URLs,
//! `x-goog-hash`, the part list) and how it reads each answer (ETags, an
//! `<Error>` document, a wrong assembled checksum).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use shoal_core::checksum::{crc32c_combine_all, crc32c_to_base64};
use shoal_core::{Assemble, ErrorKind, MultipartStore, PutOptions, Store};
use shoal_gcs::{GcsConfig, GcsStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const UPLOAD_ID: &str = "ABPnzm7-up_1";
const GENERATION: i64 = 1700000000000042;

#[derive(Default)]
struct State {
    /// "METHOD path" of every request, in arrival order.
    log: Vec<String>,
    /// x-goog-hash of each part request, by part number.
    hashes: BTreeMap<u32, String>,
    parts: BTreeMap<u32, Vec<u8>>,
    /// The complete request's body.
    complete_body: String,
    object: Option<Vec<u8>>,
    /// Report a CRC32C other than the object's in its metadata.
    lie_about_crc: bool,
}

type Shared = Arc<Mutex<State>>;

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    let mut chunk = [0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    buf.drain(..head_end + 4);
    while buf.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf.drain(..len).collect();
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn response(status: &str, headers: &[(&str, String)], body: &str) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

/// The text of every `<tag>` in `xml`, in order.
fn all_text<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    xml.split(open.as_str())
        .skip(1)
        .filter_map(|s| s.split_once(close.as_str()).map(|(t, _)| t))
        .collect()
}

fn answer(state: &Shared, req: &Request) -> Vec<u8> {
    let mut st = state.lock().unwrap();
    st.log.push(format!("{} {}", req.method, req.path));
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    let xml_object = path == "/bk/dir%2Fa%20b";
    match (req.method.as_str(), xml_object, query) {
        ("POST", true, "uploads") => response(
            "200 OK",
            &[],
            &format!(
                "<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Bucket>bk</Bucket><Key>dir/a b</Key><UploadId>{UPLOAD_ID}</UploadId></InitiateMultipartUploadResult>"
            ),
        ),
        ("PUT", true, q) if q.starts_with("partNumber=") => {
            let n: u32 = q["partNumber=".len()..]
                .split('&')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(q.ends_with(&format!("&uploadId={UPLOAD_ID}")), "{q}");
            let hash = req.header("x-goog-hash").unwrap_or("").to_owned();
            let actual = format!("crc32c={}", crc32c_to_base64(crc32c::crc32c(&req.body)));
            st.hashes.insert(n, hash.clone());
            if hash != actual {
                return response(
                    "400 Bad Request",
                    &[("Content-Type", "application/xml".into())],
                    "<?xml version='1.0' encoding='UTF-8'?><Error><Code>BadDigest</Code><Message>The CRC32C you specified did not match what we computed.</Message></Error>",
                );
            }
            st.parts.insert(n, req.body.clone());
            response(
                "200 OK",
                &[("ETag", format!("\"etag-{n}\"")), ("x-goog-hash", actual)],
                "",
            )
        }
        ("POST", true, q) if q == format!("uploadId={UPLOAD_ID}") => {
            let body = String::from_utf8_lossy(&req.body).into_owned();
            let numbers: Vec<u32> = all_text(&body, "PartNumber")
                .iter()
                .map(|n| n.parse().unwrap())
                .collect();
            let etags = all_text(&body, "ETag");
            let mut object = Vec::new();
            for (n, etag) in numbers.iter().zip(&etags) {
                assert_eq!(*etag, format!("&quot;etag-{n}&quot;"), "{body}");
                object.extend_from_slice(&st.parts[n]);
            }
            st.complete_body = body;
            st.object = Some(object);
            response(
                "200 OK",
                &[("x-goog-generation", GENERATION.to_string())],
                "<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Bucket>bk</Bucket><Key>dir/a b</Key><ETag>\"abc-2\"</ETag></CompleteMultipartUploadResult>",
            )
        }
        ("DELETE", true, q) if q == format!("uploadId={UPLOAD_ID}") => {
            response("204 No Content", &[], "")
        }
        ("GET", false, q) if path == "/storage/v1/b/bk/o/dir%2Fa%20b" => {
            assert_eq!(q, format!("generation={GENERATION}"));
            let object = st.object.clone().unwrap_or_default();
            let mut crc = crc32c::crc32c(&object);
            if st.lie_about_crc {
                crc ^= 1;
            }
            response(
                "200 OK",
                &[("Content-Type", "application/json".into())],
                &format!(
                    r#"{{"name":"dir/a b","size":"{}","generation":"{GENERATION}","crc32c":"{}"}}"#,
                    object.len(),
                    crc32c_to_base64(crc)
                ),
            )
        }
        ("DELETE", false, q) if path == "/storage/v1/b/bk/o/dir%2Fa%20b" => {
            assert_eq!(q, format!("ifGenerationMatch={GENERATION}"));
            st.object = None;
            response("204 No Content", &[], "")
        }
        _ => response(
            "404 Not Found",
            &[("Content-Type", "application/xml".into())],
            "<Error><Code>NoSuchKey</Code><Message>not scripted</Message></Error>",
        ),
    }
}

/// A local server answering the XML multipart protocol and the JSON
/// metadata and delete requests that follow it.
async fn serve(state: Shared) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Some(req) = read_request(&mut sock, &mut buf).await {
                    let out = answer(&state, &req);
                    if sock.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

fn store(endpoint: String) -> GcsStore {
    GcsStore::new(GcsConfig {
        endpoint: Some(endpoint),
        anonymous: true,
        retry: shoal_core::retry::RetryPolicy::none(),
        xml_multipart: Some(true),
        ..Default::default()
    })
    .unwrap()
}

fn data(seed: u8, len: usize) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

#[tokio::test]
async fn parts_go_up_in_parallel_and_are_assembled_in_order() {
    let state = Shared::default();
    let s = store(serve(state.clone()).await);
    assert!(s.capabilities().native_multipart);
    assert_eq!(s.capabilities().min_part_size, 5 << 20);
    let up = s
        .multipart_start("bk", "dir/a b", &PutOptions::default())
        .await
        .unwrap();
    let (a, b) = (data(1, 300_000), data(2, 70_001));
    let (ca, cb) = (crc32c::crc32c(&a), crc32c::crc32c(&b));
    // Sent at once and out of order, as parallel part uploads are.
    let (p2, p1) = tokio::join!(
        s.multipart_put(&up, 2, b.clone(), cb),
        s.multipart_put(&up, 1, a.clone(), ca)
    );
    let parts = vec![p2.unwrap(), p1.unwrap()];
    assert_eq!(parts[1].etag, "\"etag-1\"");
    let whole = crc32c_combine_all([(ca, a.len() as u64), (cb, b.len() as u64)]);
    let meta = s
        .multipart_complete(&up, &parts, Some(whole))
        .await
        .unwrap();
    assert_eq!(meta.size, (a.len() + b.len()) as u64);
    assert_eq!(meta.checksums.crc32c(), Some(whole));
    assert_eq!(
        meta.version,
        Some(shoal_core::ObjectVersion::Generation(GENERATION))
    );

    let st = state.lock().unwrap();
    assert_eq!(st.object.as_deref(), Some([a, b].concat().as_slice()));
    assert_eq!(st.log[0], "POST /bk/dir%2Fa%20b?uploads");
    assert_eq!(
        st.hashes[&1],
        format!("crc32c={}", crc32c_to_base64(ca)),
        "each part carries its CRC32C"
    );
    assert_eq!(
        all_text(&st.complete_body, "PartNumber"),
        ["1", "2"],
        "{}",
        st.complete_body
    );
    assert!(
        !st.complete_body.contains("Checksum"),
        "{}",
        st.complete_body
    );
    assert_eq!(
        st.log.last().unwrap(),
        &format!("GET /storage/v1/b/bk/o/dir%2Fa%20b?generation={GENERATION}"),
        "the assembled object's checksum is read back, pinned to its generation"
    );
}

#[tokio::test]
async fn a_wrong_assembled_checksum_fails_and_removes_that_generation() {
    let state = Shared::default();
    state.lock().unwrap().lie_about_crc = true;
    let s = store(serve(state.clone()).await);
    let up = s
        .multipart_start("bk", "dir/a b", &PutOptions::default())
        .await
        .unwrap();
    let a = data(3, 1000);
    let ca = crc32c::crc32c(&a);
    let p = s.multipart_put(&up, 1, a, ca).await.unwrap();
    let e = s.multipart_complete(&up, &[p], Some(ca)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("gs://bk/dir/a b"), "{e}");
    let st = state.lock().unwrap();
    assert!(st.object.is_none(), "the bad object was deleted");
    assert_eq!(
        st.log.last().unwrap(),
        &format!("DELETE /storage/v1/b/bk/o/dir%2Fa%20b?ifGenerationMatch={GENERATION}")
    );
}

#[tokio::test]
async fn a_part_the_server_finds_damaged_is_an_integrity_error_and_abort_frees_the_upload() {
    let state = Shared::default();
    let s = store(serve(state.clone()).await);
    let up = s
        .multipart_start("bk", "dir/a b", &PutOptions::default())
        .await
        .unwrap();
    let a = data(4, 2000);
    let wrong = crc32c::crc32c(&a) ^ 0xff;
    let e = s.multipart_put(&up, 1, a, wrong).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert!(e.to_string().contains("BadDigest"), "{e}");
    s.multipart_abort(&up).await.unwrap();
    assert_eq!(
        state.lock().unwrap().log.last().unwrap(),
        &format!("DELETE /bk/dir%2Fa%20b?uploadId={UPLOAD_ID}")
    );
}

#[tokio::test]
async fn compose_when_asked_or_when_the_write_is_conditional() {
    let state = Shared::default();
    let s = store(serve(state.clone()).await);
    for opts in [
        PutOptions {
            assemble: Assemble::Compose,
            ..Default::default()
        },
        PutOptions {
            if_not_exists: true,
            ..Default::default()
        },
    ] {
        let up = s.multipart_start("bk", "dir/a b", &opts).await.unwrap();
        assert!(!up.upload_id.starts_with("xml:"), "{}", up.upload_id);
    }
    // Composite uploads start without a request; nothing reached the server.
    assert!(state.lock().unwrap().log.is_empty());
    // An explicit XML upload cannot honour a precondition, and says so.
    let e = s
        .multipart_start(
            "bk",
            "dir/a b",
            &PutOptions {
                assemble: Assemble::Native,
                if_not_exists: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}
