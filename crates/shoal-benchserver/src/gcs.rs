//! The GCS JSON API paths the benchmarks use.
//!
//! `GET /storage/v1/b/B/o/O` (metadata, or bytes with `alt=media`; also
//! under `/download/`), `POST /upload/storage/v1/b/B/o?uploadType=media|
//! multipart|resumable` (+ the resumable session's `PUT`s), compose, delete,
//! listings (of `list-N` buckets' keys, see `list`; others are empty), and
//! enough bucket calls for clients that look before they leap.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};

use crate::http::{
    Resp, consume, consume_after, crc_b64, decode, empty, full, header, query, small_body,
};
use crate::state::State;
use crate::stored::{Stored, fold};

fn json(status: StatusCode, v: serde_json::Value) -> Resp {
    full(status, "application/json; charset=UTF-8", v.to_string())
}

fn error(status: StatusCode, msg: &str) -> Resp {
    json(
        status,
        serde_json::json!({"error": {"code": status.as_u16(), "message": msg}}),
    )
}

fn object_json(host: &str, bucket: &str, name: &str, s: Stored) -> serde_json::Value {
    let enc =
        percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string();
    serde_json::json!({
        "kind": "storage#object",
        "id": format!("{bucket}/{name}/1"),
        "selfLink": format!("http://{host}/storage/v1/b/{bucket}/o/{enc}"),
        "mediaLink": format!("http://{host}/download/storage/v1/b/{bucket}/o/{enc}?generation=1&alt=media"),
        "name": name,
        "bucket": bucket,
        "generation": "1",
        "metageneration": "1",
        "contentType": "application/octet-stream",
        "storageClass": "STANDARD",
        "size": s.size.to_string(),
        "crc32c": crc_b64(s.crc),
        "etag": "CAE=",
        "timeCreated": "2024-01-01T00:00:00.000Z",
        "updated": "2024-01-01T00:00:00.000Z",
    })
}

pub async fn handle(state: &Arc<State>, req: Request<Incoming>) -> Resp {
    let host = header(&req, "host").unwrap_or("127.0.0.1").to_owned();
    let path = req.uri().path().to_owned();
    let q = query(&req);
    let (upload, rest) = if let Some(r) = path.strip_prefix("/upload/storage/v1/b") {
        (true, r)
    } else if let Some(r) = path.strip_prefix("/download/storage/v1/b") {
        (false, r)
    } else {
        (false, path.strip_prefix("/storage/v1/b").unwrap_or(""))
    };
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let (bucket_enc, obj) = match rest.split_once('/') {
        Some((b, o)) => (b, Some(o)),
        None => (rest, None),
    };
    let bucket = decode(bucket_enc);
    let method = req.method().clone();

    if upload {
        return upload_call(state, req, &host, &bucket, &q).await;
    }
    match (method, obj) {
        (Method::POST, None) if bucket.is_empty() => {
            let b = small_body(req.into_body()).await.unwrap_or_default();
            let name = serde_json::from_slice::<serde_json::Value>(&b)
                .ok()
                .and_then(|v| v["name"].as_str().map(str::to_owned))
                .unwrap_or_default();
            json(
                StatusCode::OK,
                serde_json::json!({"kind": "storage#bucket", "name": name, "id": name}),
            )
        }
        (Method::GET, None) => json(
            StatusCode::OK,
            serde_json::json!({"kind": "storage#bucket", "name": bucket, "id": bucket, "location": "US"}),
        ),
        // A listing: of a `list-N` bucket's keys, else of nothing.
        (Method::GET, Some("o")) => {
            let keys = state.lists.get(&bucket).unwrap_or_default();
            match crate::list::gcs(&keys, &bucket, &q) {
                Some(body) => full(StatusCode::OK, "application/json; charset=UTF-8", body),
                None => error(StatusCode::BAD_REQUEST, "Invalid pageToken"),
            }
        }
        (m, Some(o)) if o.starts_with("o/") => {
            let o = &o[2..];
            if let Some(dest) = o.strip_suffix("/compose") {
                if m != Method::POST {
                    return error(StatusCode::METHOD_NOT_ALLOWED, "compose is POST");
                }
                return compose(state, req, &host, &bucket, &decode(dest)).await;
            }
            let name = decode(o);
            match m {
                Method::GET => get_object(state, &req, &host, &bucket, &name, &q),
                Method::DELETE => {
                    state.delete(&bucket, &name);
                    empty(StatusCode::NO_CONTENT)
                }
                _ => error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "not supported by shoal-benchserver",
                ),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "not supported by shoal-benchserver"),
    }
}

fn get_object(
    state: &State,
    req: &Request<Incoming>,
    host: &str,
    bucket: &str,
    name: &str,
    q: &std::collections::HashMap<String, String>,
) -> Resp {
    let Some(s) = state.lookup(bucket, name) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("No such object: {bucket}/{name}"),
        );
    };
    if q.get("alt").map(String::as_str) != Some("media") {
        return json(StatusCode::OK, object_json(host, bucket, name, s));
    }
    if state.uploaded(bucket, name) {
        return error(
            StatusCode::NOT_FOUND,
            "uploads are discarded: only size-N objects can be read",
        );
    }
    let headers = [
        ("x-goog-hash", format!("crc32c={}", crc_b64(s.crc))),
        ("x-goog-generation", "1".to_owned()),
        ("x-goog-metageneration", "1".to_owned()),
        ("x-goog-stored-content-length", s.size.to_string()),
        ("x-goog-stored-content-encoding", "identity".to_owned()),
        ("x-goog-storage-class", "STANDARD".to_owned()),
    ];
    crate::http::pattern_response(header(req, "range"), s.size, &headers, false)
}

async fn compose(
    state: &State,
    req: Request<Incoming>,
    host: &str,
    bucket: &str,
    dest: &str,
) -> Resp {
    let Some(b) = small_body(req.into_body()).await else {
        return error(StatusCode::BAD_REQUEST, "unreadable body");
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&b) else {
        return error(StatusCode::BAD_REQUEST, "compose body is not JSON");
    };
    let mut parts = Vec::new();
    for src in v["sourceObjects"].as_array().into_iter().flatten() {
        let name = src["name"].as_str().unwrap_or_default();
        match state.lookup(bucket, name) {
            Some(s) => parts.push(s),
            None => {
                return error(
                    StatusCode::NOT_FOUND,
                    &format!("No such object: {bucket}/{name}"),
                );
            }
        }
    }
    let s = fold(parts.into_iter());
    state.put(bucket, dest, s);
    json(StatusCode::OK, object_json(host, bucket, dest, s))
}

async fn upload_call(
    state: &State,
    req: Request<Incoming>,
    host: &str,
    bucket: &str,
    q: &std::collections::HashMap<String, String>,
) -> Resp {
    let kind = q.get("uploadType").map(String::as_str).unwrap_or("");
    if let Some(id) = q.get("upload_id") {
        return resumable_put(state, req, host, id).await;
    }
    match kind {
        "media" => {
            let name = q.get("name").cloned().unwrap_or_default();
            match consume(req.into_body()).await {
                Ok(s) => {
                    state.put(bucket, &name, s);
                    json(StatusCode::OK, object_json(host, bucket, &name, s))
                }
                Err(_) => error(StatusCode::BAD_REQUEST, "body read failed"),
            }
        }
        "multipart" => {
            let ct = header(&req, "content-type").unwrap_or("").to_owned();
            let Some(boundary) = ct
                .split(';')
                .find_map(|p| p.trim().strip_prefix("boundary="))
            else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "multipart upload without a boundary",
                );
            };
            let boundary = boundary.trim_matches('"').to_owned();
            match consume_related(req.into_body(), &boundary).await {
                Some((meta, s)) => {
                    let name = q
                        .get("name")
                        .cloned()
                        .or_else(|| meta["name"].as_str().map(str::to_owned));
                    let name = name.unwrap_or_default();
                    if let Some(want) = meta["crc32c"].as_str()
                        && want != crc_b64(s.crc)
                    {
                        return error(
                            StatusCode::BAD_REQUEST,
                            "Provided CRC32C does not match the data",
                        );
                    }
                    state.put(bucket, &name, s);
                    json(StatusCode::OK, object_json(host, bucket, &name, s))
                }
                None => error(StatusCode::BAD_REQUEST, "malformed multipart/related body"),
            }
        }
        "resumable" => {
            let b = small_body(req.into_body()).await.unwrap_or_default();
            let meta: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
            let name = q
                .get("name")
                .cloned()
                .or_else(|| meta["name"].as_str().map(str::to_owned));
            let id = state.rs_create(bucket, &name.unwrap_or_default());
            let b_enc =
                percent_encoding::utf8_percent_encode(bucket, percent_encoding::NON_ALPHANUMERIC);
            let loc = format!(
                "http://{host}/upload/storage/v1/b/{b_enc}/o?uploadType=resumable&upload_id={id}"
            );
            let mut r = empty(StatusCode::OK);
            r.headers_mut().insert("location", loc.parse().unwrap());
            r
        }
        _ => error(
            StatusCode::BAD_REQUEST,
            "uploadType must be media, multipart or resumable",
        ),
    }
}

/// One `PUT` to a resumable session: `Content-Range: bytes a-b/total|*` or
/// `bytes */total|*` (a status query). Chunks must arrive in order.
async fn resumable_put(state: &State, req: Request<Incoming>, host: &str, id: &str) -> Resp {
    let Some((bucket, name, so_far)) = state.rs_get(id) else {
        return error(StatusCode::NOT_FOUND, "no such upload session");
    };
    let cr = header(&req, "content-range").unwrap_or("").to_owned();
    // Go's client (rclone, gcsfuse) asks for "resume incomplete" as a 200
    // with an override header: its HTTP stack reads a bare 308 as a redirect.
    let no_308 = header(&req, "x-guploader-no-308").is_some_and(|v| v.eq_ignore_ascii_case("yes"));
    let spec = cr.trim().strip_prefix("bytes ").unwrap_or("*/*");
    let (range, total) = spec.split_once('/').unwrap_or(("*", "*"));
    let total: Option<u64> = total.parse().ok();
    if range != "*" {
        let start: u64 = range
            .split('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(u64::MAX);
        if start != so_far.size {
            return error(
                StatusCode::BAD_REQUEST,
                "chunks must arrive in order, without overlap",
            );
        }
    }
    let s = match consume_after(req.into_body(), so_far).await {
        Ok(s) => s,
        Err(_) => return error(StatusCode::BAD_REQUEST, "body read failed"),
    };
    state.rs_set(id, s);
    if total == Some(s.size) {
        state.rs_finish(id);
        return json(StatusCode::OK, object_json(host, &bucket, &name, s));
    }
    let mut r = if no_308 {
        let mut r = empty(StatusCode::OK);
        r.headers_mut()
            .insert("x-http-status-code-override", "308".parse().unwrap());
        r
    } else {
        empty(StatusCode::PERMANENT_REDIRECT)
    };
    if s.size > 0 {
        r.headers_mut()
            .insert("range", format!("bytes=0-{}", s.size - 1).parse().unwrap());
    }
    r
}

/// Where the body after a part's header block starts (after its blank line).
fn header_end(buf: &[u8]) -> Option<usize> {
    let crlf = find(buf, b"\r\n\r\n").map(|i| i + 4);
    let lf = find(buf, b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A `multipart/related` upload: the metadata part, and the size and
/// CRC32C of the media part, streamed (never held in memory).
async fn consume_related(
    mut body: Incoming,
    boundary: &str,
) -> Option<(serde_json::Value, Stored)> {
    let delim = format!("--{boundary}").into_bytes();
    // Line breaks may be CRLF (as RFC 2046 says) or bare LF (Python's email
    // package, which gcloud uses): accept both.
    let close = format!("\n--{boundary}").into_bytes();
    // Held back at the end of the media, long enough for the closing delimiter.
    let keep = close.len() + 8;
    let mut head = Vec::new();
    let mut s = Stored { size: 0, crc: 0 };
    let mut hold: Vec<u8> = Vec::new();
    let mut meta = None;
    let add = |s: &mut Stored, b: &[u8]| {
        s.crc = crc32c::crc32c_append(s.crc, b);
        s.size += b.len() as u64;
    };
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.ok()?.into_data() else {
            continue;
        };
        let mut data: Bytes = data;
        if meta.is_none() {
            head.extend_from_slice(&data);
            // --b\r\nheaders\r\n\r\nJSON\r\n--b\r\nheaders\r\n\r\nMEDIA
            let first = find(&head, &delim)?;
            let Some(second) =
                find(&head[first + delim.len()..], &delim).map(|i| i + first + delim.len())
            else {
                continue;
            };
            let Some(media) = header_end(&head[second..]).map(|i| i + second) else {
                continue;
            };
            let json_start = header_end(&head[first..second])? + first;
            let mut json_end = second.checked_sub(1)?;
            if head[json_end - 1] == b'\r' {
                json_end -= 1;
            }
            meta = Some(serde_json::from_slice(&head[json_start..json_end]).unwrap_or_default());
            data = Bytes::copy_from_slice(&head[media..]);
            head = Vec::new();
        }
        if data.len() >= keep {
            add(&mut s, &hold);
            add(&mut s, &data[..data.len() - keep]);
            hold.clear();
            hold.extend_from_slice(&data[data.len() - keep..]);
        } else {
            hold.extend_from_slice(&data);
            if hold.len() > keep {
                let cut = hold.len() - keep;
                add(&mut s, &hold[..cut]);
                hold.drain(..cut);
            }
        }
    }
    let meta = meta?;
    let mut end = hold
        .windows(close.len())
        .rposition(|w| w == close.as_slice())?;
    if end > 0 && hold[end - 1] == b'\r' {
        end -= 1;
    }
    add(&mut s, &hold[..end]);
    Some((meta, s))
}
