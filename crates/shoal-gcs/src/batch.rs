//! Batch deletes: up to 100 `objects.delete` calls in one JSON API batch
//! request (`POST /batch/storage/v1`, a `multipart/mixed` body of HTTP
//! requests, answered by a `multipart/mixed` body of HTTP responses).
//!
//! `rm -r`, `rb --force` and `sync --delete` of many objects were one
//! round trip per key; Google's batch endpoint takes 100 calls a request
//! (S3's DeleteObjects, in shoal-s3, 1,000). Each inner call keeps its own
//! status, so failures are still reported by key: 2xx, and a 404 whose
//! message is the API's "no such object" (already gone), are deleted; a
//! 404 without it (a gateway that did not route the call) is that key's
//! error, never a delete; a key whose call got a retryable status (429, 5xx)
//! is deleted again on its own through the single delete's safe retry;
//! anything else is that key's error. A server without the endpoint
//! (Google's storage-testbench answers 404) refuses the batch as a whole:
//! the caller falls back to single deletes, and this client remembers it
//! and stops offering batches ([`Client::batch_refused`]).
//!
//! A batch whose answer is lost, or that got a 5xx after it was sent, is
//! not sent again (fake-gcs-server ignores the inner calls'
//! preconditions, so a second batch could delete an object another
//! writer stored meanwhile): the error goes to the caller, which reads
//! each key before deleting anything more (shoal-transfer `delete`).
//!
//! A key pinned to the generation its delete was planned against carries
//! it as the inner call's `ifGenerationMatch` (a 412 for that key: it was
//! written again since, and stays). The multipart framing is parsed
//! with `httparse` (part headers and the inner status lines) and `mime`
//! (the answer's boundary); nothing else of HTTP is re-implemented.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use shoal_core::{DeleteKey, Error, ErrorKind, ObjectVersion, Op, Result};
use shoal_http::http::status_kind;

use crate::client::{Client, encode, gs_url, json_error_message};

/// Calls per batch request (Google's maximum).
pub(crate) const BATCH: usize = 100;

impl Client {
    /// Deletes `keys` (at most [`BATCH`]) of `bucket` in one batch request;
    /// one result per key, in order. The outer error: the batch as a whole
    /// was refused or its answer could not be read.
    pub(crate) async fn delete_many(
        &self,
        bucket: &str,
        keys: &[DeleteKey],
    ) -> Result<Vec<Result<()>>> {
        let target = format!("gs://{bucket}");
        if self.batch_refused.load(Ordering::Relaxed) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Delete,
                &target,
                "this server refused batch requests earlier",
            ));
        }
        let boundary = format!("shoal-{:032x}", rand::random::<u128>());
        let body = Bytes::from(self.batch_body(bucket, keys, &boundary));
        let url = format!("{}/batch/storage/v1", self.base);
        let content_type = format!("multipart/mixed; boundary={boundary}");
        // Never sent again once the server may have acted on it
        // (fake-gcs-server ignores the inner calls' `ifGenerationMatch`):
        // the caller looks at each key first (shoal-transfer `delete`).
        let answer = self
            .retry
            .run_unless_applied(&target, || {
                let req = self
                    .http
                    .post(&url)
                    .header("content-type", &content_type)
                    .body(body.clone());
                self.attempt(Op::Delete, &target, req)
            })
            .await;
        let resp = match answer {
            Ok(r) => r,
            Err(e) if matches!(e.status(), Some(400 | 404 | 405 | 501)) => {
                // A server without batches (storage-testbench: 501) did
                // none of it: the keys go one by one.
                self.batch_refused.store(true, Ordering::Relaxed);
                return Err(e.unsent());
            }
            Err(e) => return Err(e),
        };
        let their_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| shoal_http::http::error_from_reqwest(Op::Delete, &target, e))?;
        let statuses = parse_batch_answer(&their_type, &bytes, keys.len()).map_err(|m| {
            Error::new(
                ErrorKind::Protocol,
                Op::Delete,
                &target,
                format!("expected a multipart batch answer: {m}"),
            )
        })?;
        let mut out = Vec::with_capacity(keys.len());
        for (k, answer) in keys.iter().zip(statuses) {
            let key = &k.key;
            let url = gs_url(bucket, key);
            out.push(match answer {
                Some((200..=299, _)) => Ok(()),
                // Gone only when the API says the object does not exist: a
                // 404 from anything else (a gateway that did not route the
                // call) deleted nothing.
                Some((404, message)) if says_no_such_object(&message) => Ok(()),
                Some((status, message)) if status_kind(status).is_retryable() => {
                    // Deleted again alone, through the single delete's safe
                    // retry; gone by then is done.
                    tracing::debug!(%url, status, %message, "batched delete to be sent again alone");
                    let again = match (k.exact, generation(k)) {
                        (true, Some(g)) => self.delete_generation(bucket, key, g).await,
                        (_, g) => self.delete_if(bucket, key, g).await.map(|_| ()),
                    };
                    match again {
                        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                        r => r,
                    }
                }
                Some((404, message)) => Err(Error::new(
                    ErrorKind::Protocol,
                    Op::Delete,
                    &url,
                    format!(
                        "HTTP 404 in a batch, without the API's \"No such object\"{}; not deleted",
                        if message.is_empty() { String::new() } else { format!(" ({message})") }
                    ),
                )
                .with_status(404)
                .with_hint("the call may not have reached the Storage API: check --endpoint-url")),
                Some((status, message)) => Err(Error::new(
                    status_kind(status),
                    Op::Delete,
                    &url,
                    if message.is_empty() {
                        format!("HTTP {status} (in a batch)")
                    } else {
                        message
                    },
                )
                .with_status(status)),
                None => Err(Error::new(
                    ErrorKind::Protocol,
                    Op::Delete,
                    &url,
                    "the batch answer has no result for this delete",
                )),
            });
        }
        Ok(out)
    }

    /// The `multipart/mixed` body: one `DELETE` per key, its `Content-ID`
    /// the key's index.
    fn batch_body(&self, bucket: &str, keys: &[DeleteKey], boundary: &str) -> String {
        // The inner requests' paths are the API's own, whatever path the
        // endpoint has: a gateway serving the API below a path of its own
        // (`https://host/gcs/`) forwards the batch, and the API reads its
        // inner request lines as it reads any request to `/storage/v1`.
        let mut body = String::new();
        for (i, k) in keys.iter().enumerate() {
            let query: Vec<String> = [
                generation(k).map(|g| match k.exact {
                    true => format!("generation={g}"),
                    false => format!("ifGenerationMatch={g}"),
                }),
                self.user_project
                    .as_deref()
                    .map(|p| format!("userProject={}", encode(p))),
            ]
            .into_iter()
            .flatten()
            .collect();
            let project = if query.is_empty() {
                String::new()
            } else {
                format!("?{}", query.join("&"))
            };
            body.push_str(&format!(
                "--{boundary}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: <shoal+{i}>\r\n\r\n\
                 DELETE /storage/v1/b/{}/o/{}{project} HTTP/1.1\r\nContent-Length: 0\r\n\r\n\r\n",
                encode(bucket),
                encode(&k.key)
            ));
        }
        body.push_str(&format!("--{boundary}--\r\n"));
        body
    }
}

/// The generation a batched delete is pinned to (an ETag means nothing
/// to GCS: unpinned).
fn generation(k: &DeleteKey) -> Option<i64> {
    match k.version {
        Some(ObjectVersion::Generation(g)) => Some(g),
        _ => None,
    }
}

/// Whether a 404's message is the API's "the object does not exist"
/// (Google's `No such object: b/k`; fake-gcs-server's `Not Found`, its
/// JSON error for a missing object), not a 404 of something that never
/// reached the API (`404 page not found` from a gateway, HTML).
fn says_no_such_object(message: &str) -> bool {
    let m = message.trim().to_ascii_lowercase();
    m.starts_with("no such object") || m == "not found"
}

/// Each call's (status, server message) from a batch answer, by the index
/// its `Content-ID` names (`<response-shoal+N>`); None where the answer
/// has no part for a call.
pub(crate) fn parse_batch_answer(
    content_type: &str,
    body: &[u8],
    n: usize,
) -> std::result::Result<Vec<Option<(u16, String)>>, String> {
    let mime: mime::Mime = content_type
        .parse()
        .map_err(|_| format!("content type {content_type:?}"))?;
    let boundary = mime
        .get_param("boundary")
        .ok_or_else(|| format!("no boundary in {content_type:?}"))?
        .to_string();
    let delimiter = format!("--{boundary}");
    let mut out = vec![None; n];
    for part in split(body, delimiter.as_bytes()).skip(1) {
        if part.starts_with(b"--") {
            break;
        }
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let (used, headers) = match httparse::parse_headers(part, &mut headers) {
            Ok(httparse::Status::Complete(h)) => h,
            _ => return Err("a part's headers cannot be read".into()),
        };
        let id = headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-id"))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .unwrap_or("");
        let Some(i) = id
            .trim_matches(|c| c == '<' || c == '>')
            .rsplit_once('+')
            .and_then(|(_, n)| n.parse::<usize>().ok())
            .filter(|&i| i < n)
        else {
            return Err(format!("a part with Content-ID {id:?}"));
        };
        let inner = &part[used..];
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut hs);
        let body_at = match resp.parse(inner) {
            Ok(httparse::Status::Complete(at)) => at,
            _ => return Err(format!("part {i}'s response cannot be read")),
        };
        let status = resp.code.ok_or_else(|| format!("part {i} has no status"))?;
        let text = String::from_utf8_lossy(&inner[body_at..]);
        let message = json_error_message(text.trim()).unwrap_or_default();
        out[i] = Some((status, message));
    }
    Ok(out)
}

/// `body` cut at each `delimiter` (what precedes the first one included).
fn split<'a>(body: &'a [u8], delimiter: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = Some(body);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.windows(delimiter.len()).position(|w| w == delimiter) {
            Some(at) => {
                rest = Some(&r[at + delimiter.len()..]);
                Some(&r[..at])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_apis_not_found_counts_as_gone() {
        assert!(says_no_such_object("No such object: b/k"));
        // fake-gcs-server's JSON error for a missing object.
        assert!(says_no_such_object("Not Found"));
        // A body that is no JSON API error reads as no message at all.
        assert!(!says_no_such_object(""));
        assert!(!says_no_such_object("The specified bucket does not exist."));
    }

    #[test]
    fn answers_are_matched_by_content_id_not_order() {
        let body = "--b1\r\nContent-Type: application/http\r\nContent-ID: <response-shoal+1>\r\n\r\n\
            HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\r\n{\"error\":{\"code\":404,\"message\":\"No such object: b/k1\"}}\r\n\
            --b1\r\nContent-Type: application/http\r\nContent-ID: <response-shoal+0>\r\n\r\n\
            HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n\r\n\
            --b1\r\nContent-Type: application/http\r\nContent-ID: <response-shoal+3>\r\n\r\n\
            HTTP/1.1 403 Forbidden\r\n\r\n{\"error\":{\"code\":403,\"message\":\"denied\"}}\r\n\
            --b1--\r\n";
        let got = parse_batch_answer("multipart/mixed; boundary=b1", body.as_bytes(), 4).unwrap();
        assert_eq!(got[0], Some((204, String::new())));
        assert_eq!(got[1], Some((404, "No such object: b/k1".into())));
        assert_eq!(got[2], None);
        assert_eq!(got[3], Some((403, "denied".into())));
    }

    #[test]
    fn unreadable_answers_are_errors_not_panics() {
        for (ct, body) in [
            ("text/plain", "x"),
            ("multipart/mixed", "--b\r\n"),
            (
                "multipart/mixed; boundary=b",
                "--b\r\nContent-ID: <response-shoal+9>\r\n\r\nHTTP/1.1 204 OK\r\n\r\n--b--",
            ),
            (
                "multipart/mixed; boundary=b",
                "--b\r\nContent-ID: <response-shoal+0>\r\n\r\nnot http\r\n\r\n--b--",
            ),
            ("multipart/mixed; boundary=b", "--b\r\nno headers end"),
        ] {
            assert!(
                parse_batch_answer(ct, body.as_bytes(), 2).is_err(),
                "{ct} {body}"
            );
        }
        // No parts at all: every call unanswered, not an error here.
        assert_eq!(
            parse_batch_answer("multipart/mixed; boundary=b", b"--b--\r\n", 2).unwrap(),
            vec![None, None]
        );
    }
}
