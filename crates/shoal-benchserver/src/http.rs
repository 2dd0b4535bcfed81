//! The HTTP pieces both protocols share: ranges, queries, bodies, and
//! the pattern response.

use std::collections::HashMap;
use std::convert::Infallible;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use crate::pattern::PatternBody;
use crate::stored::Stored;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;
pub type Resp = Response<Body>;

pub fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Resp {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).boxed_unsync())
        .unwrap()
}

pub fn empty(status: StatusCode) -> Resp {
    full(status, "text/plain", Bytes::new())
}

pub fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The query string as a map (values decoded; `+` is a space only in forms,
/// and no client here sends forms, so it is kept).
pub fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

pub fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

pub fn crc_b64(c: u32) -> String {
    base64::engine::general_purpose::STANDARD.encode(c.to_be_bytes())
}

/// `[start, end)` of a `Range` header over an object of `size`; `Err` when
/// unsatisfiable; `Ok(None)` when absent or not a single byte range.
pub fn parse_range(h: Option<&str>, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = h.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| ())?;
        if n == 0 {
            return Err(());
        }
        return Ok(Some((size.saturating_sub(n), size)));
    }
    let start: u64 = a.parse().map_err(|_| ())?;
    if start >= size {
        return Err(());
    }
    let end = if b.is_empty() {
        size
    } else {
        (b.parse::<u64>().map_err(|_| ())? + 1).min(size)
    };
    if end <= start {
        return Err(());
    }
    Ok(Some((start, end)))
}

/// The bytes of a generated object, whole or ranged. `headers` are added to
/// both the 200 and the 206 answer.
pub fn pattern_response(
    range: Option<&str>,
    size: u64,
    headers: &[(&str, String)],
    head_only: bool,
) -> Resp {
    let (status, start, end) = match parse_range(range, size) {
        Err(()) => {
            return Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header("content-range", format!("bytes */{size}"))
                .body(Full::new(Bytes::new()).boxed_unsync())
                .unwrap();
        }
        Ok(None) => (StatusCode::OK, 0, size),
        Ok(Some((a, b))) => (StatusCode::PARTIAL_CONTENT, a, b),
    };
    let mut r = Response::builder()
        .status(status)
        .header("content-type", "application/octet-stream")
        .header("content-length", end - start)
        .header("accept-ranges", "bytes")
        .header("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT");
    if status == StatusCode::PARTIAL_CONTENT {
        r = r.header(
            "content-range",
            format!("bytes {}-{}/{size}", start, end - 1),
        );
    }
    for (k, v) in headers {
        r = r.header(*k, v.as_str());
    }
    let body = if head_only {
        PatternBody::new(0, 0)
    } else {
        PatternBody::new(start, end)
    };
    r.body(body.boxed_unsync()).unwrap()
}

/// Reads a request body to its end, answering its size and CRC32C.
pub async fn consume(body: Incoming) -> Result<Stored, hyper::Error> {
    consume_after(body, Stored { size: 0, crc: 0 }).await
}

/// Reads a request body to its end, continuing `s` (an object's first bytes).
pub async fn consume_after(body: Incoming, s: Stored) -> Result<Stored, hyper::Error> {
    let mut body = body;
    let mut s = s;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            s.crc = crc32c::crc32c_append(s.crc, &data);
            s.size += data.len() as u64;
        }
    }
    Ok(s)
}

/// Reads a small request body whole (JSON, XML), up to 16 MiB.
pub async fn small_body(body: Incoming) -> Option<Bytes> {
    let b = http_body_util::Limited::new(body, 16 << 20)
        .collect()
        .await
        .ok()?;
    Some(b.to_bytes())
}

pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
