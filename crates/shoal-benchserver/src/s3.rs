//! The S3 paths the benchmarks use (path-style, signatures not checked):
//! `HEAD`/`GET /B/K` with Range, `PUT /B/K`, multipart create / part /
//! complete / abort, `DELETE`, bucket calls that answer "fine", and
//! listings (of `list-N` buckets' keys; any other bucket is empty).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};

use crate::http::{
    Resp, consume, crc_b64, decode, empty, full, header, query, small_body, xml_escape,
};
use crate::state::{State, Stored};

fn xml(status: StatusCode, body: String) -> Resp {
    full(
        status,
        "application/xml",
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}"),
    )
}

fn error(status: StatusCode, code: &str, msg: &str) -> Resp {
    xml(
        status,
        format!(
            "<Error><Code>{code}</Code><Message>{}</Message></Error>",
            xml_escape(msg)
        ),
    )
}

fn etag(s: Stored) -> String {
    format!("\"{:08x}{:016x}\"", s.crc, s.size)
}

fn with_checksum(mut r: Resp, s: Stored) -> Resp {
    let h = r.headers_mut();
    h.insert("etag", etag(s).parse().unwrap());
    h.insert("x-amz-checksum-crc32c", crc_b64(s.crc).parse().unwrap());
    r
}

pub async fn handle(state: &Arc<State>, req: Request<Incoming>) -> Resp {
    let path = req.uri().path().trim_start_matches('/').to_owned();
    let (bucket, key) = match path.split_once('/') {
        Some((b, k)) => (decode(b), decode(k)),
        None => (decode(&path), String::new()),
    };
    let q = query(&req);
    let method = req.method().clone();
    if key.is_empty() {
        return match method {
            // A listing: of a `list-N` bucket's keys, else of nothing.
            Method::GET => {
                let keys = state.lists.get(&bucket).unwrap_or_default();
                match crate::list::s3(&keys, &bucket, &q) {
                    Some(body) => full(StatusCode::OK, "application/xml", body),
                    None => error(
                        StatusCode::BAD_REQUEST,
                        "InvalidArgument",
                        "The continuation token provided is incorrect",
                    ),
                }
            }
            Method::HEAD | Method::PUT => empty(StatusCode::OK),
            _ => error(
                StatusCode::NOT_IMPLEMENTED,
                "NotImplemented",
                "not supported by shoal-benchserver",
            ),
        };
    }
    match method {
        Method::HEAD | Method::GET => {
            let Some(s) = state.lookup(&bucket, &key) else {
                return error(
                    StatusCode::NOT_FOUND,
                    "NoSuchKey",
                    "The specified key does not exist.",
                );
            };
            let head = method == Method::HEAD;
            if !head && state.uploaded(&bucket, &key) {
                return error(
                    StatusCode::NOT_FOUND,
                    "NoSuchKey",
                    "uploads are discarded: only size-N keys can be read",
                );
            }
            let range = header(&req, "range");
            let mut headers = vec![("etag", etag(s))];
            // As S3: a checksum only on whole-object answers, when asked.
            if range.is_none()
                && header(&req, "x-amz-checksum-mode")
                    .is_some_and(|m| m.eq_ignore_ascii_case("enabled"))
            {
                headers.push(("x-amz-checksum-crc32c", crc_b64(s.crc)));
                headers.push(("x-amz-checksum-type", "FULL_OBJECT".to_owned()));
            }
            crate::http::pattern_response(if head { None } else { range }, s.size, &headers, head)
        }
        Method::PUT => {
            if header(&req, "x-amz-copy-source").is_some() {
                return error(
                    StatusCode::NOT_IMPLEMENTED,
                    "NotImplemented",
                    "copy is not supported by shoal-benchserver",
                );
            }
            if header(&req, "content-encoding").is_some_and(|e| e.contains("aws-chunked")) {
                return error(
                    StatusCode::NOT_IMPLEMENTED,
                    "NotImplemented",
                    "aws-chunked bodies are not supported by shoal-benchserver",
                );
            }
            let want = header(&req, "x-amz-checksum-crc32c").map(str::to_owned);
            let part = match (q.get("partNumber"), q.get("uploadId")) {
                (Some(n), Some(id)) => Some((n.parse::<u32>().unwrap_or(0), id.clone())),
                _ => None,
            };
            let s = match consume(req.into_body()).await {
                Ok(s) => s,
                Err(_) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "IncompleteBody",
                        "body read failed",
                    );
                }
            };
            if want.is_some_and(|w| w != crc_b64(s.crc)) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadDigest",
                    "The CRC32C you specified did not match the calculated checksum.",
                );
            }
            match part {
                Some((n, id)) => {
                    if !state.mp_part(&id, n, s) {
                        return error(
                            StatusCode::NOT_FOUND,
                            "NoSuchUpload",
                            "The specified upload does not exist.",
                        );
                    }
                }
                None => state.put(&bucket, &key, s),
            }
            with_checksum(empty(StatusCode::OK), s)
        }
        Method::POST if q.contains_key("uploads") => {
            let id = state.mp_create(&bucket, &key);
            xml(
                StatusCode::OK,
                format!(
                    "<InitiateMultipartUploadResult><Bucket>{}</Bucket><Key>{}</Key><UploadId>{id}</UploadId></InitiateMultipartUploadResult>",
                    xml_escape(&bucket),
                    xml_escape(&key)
                ),
            )
        }
        Method::POST if q.contains_key("uploadId") => {
            let _ = small_body(req.into_body()).await;
            let Some((b, k, s)) = state.mp_complete(&q["uploadId"]) else {
                return error(
                    StatusCode::NOT_FOUND,
                    "NoSuchUpload",
                    "The specified upload does not exist.",
                );
            };
            xml(
                StatusCode::OK,
                format!(
                    "<CompleteMultipartUploadResult><Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag>\
                     <ChecksumCRC32C>{}</ChecksumCRC32C><ChecksumType>FULL_OBJECT</ChecksumType></CompleteMultipartUploadResult>",
                    xml_escape(&b),
                    xml_escape(&k),
                    xml_escape(&etag(s)),
                    crc_b64(s.crc)
                ),
            )
        }
        Method::DELETE => {
            if let Some(id) = q.get("uploadId") {
                if !state.mp_abort(id) {
                    return error(
                        StatusCode::NOT_FOUND,
                        "NoSuchUpload",
                        "The specified upload does not exist.",
                    );
                }
            } else {
                state.delete(&bucket, &key);
            }
            empty(StatusCode::NO_CONTENT)
        }
        _ => error(
            StatusCode::NOT_IMPLEMENTED,
            "NotImplemented",
            "not supported by shoal-benchserver",
        ),
    }
}
