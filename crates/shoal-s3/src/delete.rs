//! Batch delete: DeleteObjects, up to 1,000 keys a request.
//!
//! `rm -r`, `rb --force` and `sync --delete` delete many objects; one
//! request per key made them round-trip bound (s5cmd
//! and the AWS CLI batch). The request is sent in quiet mode, so the
//! answer lists only the keys that failed, each with S3's code and
//! message, and every other key is deleted (S3 reports a key that was
//! already gone as deleted too). S3 requires the body's Content-MD5 (or
//! a checksum header): it is sent.
//!
//! A key pinned to the ETag its listing saw carries it in the object's
//! `ETag` element, AWS's conditional delete: a key written again since is
//! that key's `PreconditionFailed`, and stays. MinIO (the 2026-02
//! release) and moto 5.2 accept the element and ignore it (probed: a wrong
//! one still deletes, as their single DELETE ignores `If-Match`), so on
//! them the pin guards nothing; deletes that must hold there (a move's
//! `delete_moved`, `rm --if-…`) read the object back first and stay
//! single requests. A key XML 1.0 cannot carry (control characters)
//! cannot be named in the document; it is deleted alone.

use bytes::Bytes;
use quick_xml::events::Event;
use quick_xml::reader::Reader;
use reqwest::Method;
use shoal_core::checksum::{md5_digest, md5_to_base64};
use shoal_core::xml::{error_code_kind, push_ref};
use shoal_core::{DeleteKey, Error, ErrorKind, ObjectVersion, Op, Result};

use crate::client::{Client, Request, read_body};
use crate::endpoint::check_bucket;
use crate::object::protocol;

/// Keys per DeleteObjects request (S3's maximum).
pub(crate) const BATCH: usize = 1000;

impl Client {
    /// Deletes `keys` (at most [`BATCH`]) in one DeleteObjects request;
    /// one result per key, in order.
    pub(crate) async fn delete_many(
        &self,
        bucket: &str,
        keys: &[DeleteKey],
    ) -> Result<Vec<Result<()>>> {
        check_bucket(Op::Delete, bucket)?;
        let (named, alone): (Vec<usize>, Vec<usize>) =
            (0..keys.len()).partition(|&i| xml_safe(&keys[i].key));
        let mut out: Vec<Result<()>> = keys.iter().map(|_| Ok(())).collect();
        for i in alone {
            let r = match (etag(&keys[i]), version_id(&keys[i])) {
                (_, Some(v)) => self.delete_version(bucket, &keys[i].key, v).await,
                (Some(e), None) => self.delete_if(bucket, &keys[i].key, e).await.map(|_| ()),
                (None, None) => self.delete(bucket, &keys[i].key).await,
            };
            out[i] = match r {
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                r => r,
            };
        }
        if named.is_empty() {
            return Ok(out);
        }
        let body = delete_body(
            named
                .iter()
                .map(|&i| (keys[i].key.as_str(), etag(&keys[i]), version_id(&keys[i]))),
        );
        let req = Request::new(Method::POST, Op::Delete, bucket, None)
            .query("delete", "")
            .header("content-type", "application/xml")
            .header("content-md5", md5_to_base64(&md5_digest(body.as_bytes())))
            .body(Bytes::from(body));
        let target = req.target.clone();
        // Never sent again once the server may have acted on it: MinIO
        // ignores the keys' ETags, so a second DeleteObjects after a lost
        // answer would delete what another writer stored meanwhile. The
        // caller looks at each key first (shoal-transfer `delete`).
        let what = format!("{} {}", req.op, req.target);
        let failed = self
            .retry
            .run_unless_applied(&what, || async {
                let resp = self.send_once(&req).await?;
                let body = read_body(resp, req.op, &req.target).await?;
                parse_delete_result(&body).map_err(|m| {
                    protocol(Op::Delete, &target, format!("expected DeleteResult: {m}"))
                })
            })
            .await
            // A server without DeleteObjects did none of it.
            .map_err(|e| {
                if e.status() == Some(501) {
                    e.unsent()
                } else {
                    e
                }
            })?;
        for f in failed {
            // Matched by key; a key named twice gets the failure twice.
            for &i in named.iter().filter(|&&i| keys[i].key == f.key) {
                if f.code == "NoSuchKey" {
                    continue;
                }
                let kind = match f.code.as_str() {
                    "PreconditionFailed" => ErrorKind::Precondition,
                    c => error_code_kind(c),
                };
                out[i] = Err(Error::new(
                    kind,
                    Op::Delete,
                    format!("s3://{bucket}/{}", f.key),
                    format!("DeleteObjects: {}: {}", f.code, f.message),
                ));
            }
        }
        Ok(out)
    }
}

/// Whether XML 1.0 can carry `key` (no control characters other than tab,
/// newline and carriage return, which a parser would normalise anyway:
/// those are sent alone too).
fn xml_safe(key: &str) -> bool {
    !key.is_empty()
        && !key
            .chars()
            .any(|c| c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}')
}

/// The ETag a delete is pinned to (a generation means nothing to S3:
/// unpinned).
fn etag(k: &DeleteKey) -> Option<&str> {
    match &k.version {
        Some(ObjectVersion::ETag(e)) if !k.exact => Some(e),
        _ => None,
    }
}

/// The version id of one stored version a key's delete names (an exact
/// delete, `rm --all-versions`): that version goes, whatever is current.
fn version_id(k: &DeleteKey) -> Option<&str> {
    match &k.version {
        Some(ObjectVersion::VersionId(v)) if k.exact => Some(v),
        _ => None,
    }
}

/// The quiet DeleteObjects document naming `keys`, each with the ETag it
/// must still have (S3's conditional delete; MinIO ignores it) or the
/// version id of the one stored version to delete.
pub(crate) fn delete_body<'k>(
    keys: impl Iterator<Item = (&'k str, Option<&'k str>, Option<&'k str>)>,
) -> String {
    let mut s = String::from(
        "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>",
    );
    for (k, etag, version_id) in keys {
        s.push_str("<Object><Key>");
        s.push_str(&quick_xml::escape::escape(k));
        s.push_str("</Key>");
        if let Some(v) = version_id {
            s.push_str("<VersionId>");
            s.push_str(&quick_xml::escape::escape(v));
            s.push_str("</VersionId>");
        }
        if let Some(e) = etag {
            s.push_str("<ETag>");
            s.push_str(&quick_xml::escape::escape(crate::object::quoted_etag(e)));
            s.push_str("</ETag>");
        }
        s.push_str("</Object>");
    }
    s.push_str("</Delete>");
    s
}

/// One key DeleteObjects could not delete.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Failed {
    pub(crate) key: String,
    pub(crate) code: String,
    pub(crate) message: String,
}

/// The `<Error>` entries of a DeleteResult (`<Deleted>` ones, sent
/// outside quiet mode, are passed over). A whole-request `<Error>` root
/// under 200 is an error.
pub(crate) fn parse_delete_result(xml: &[u8]) -> std::result::Result<Vec<Failed>, String> {
    let mut reader = Reader::from_reader(xml);
    let mut path: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut failed = Vec::new();
    let mut current: Option<Failed> = None;
    let mut root_seen = false;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?;
        match ev {
            Event::Start(e) => {
                let name = String::from(e.local_name().as_ref() as &str);
                if path.is_empty() {
                    if root_seen || name != "DeleteResult" {
                        return Err(format!("got <{name}>"));
                    }
                    root_seen = true;
                }
                if path.len() == 1 && name == "Error" {
                    current = Some(Failed::default());
                }
                path.push(name);
                text.clear();
            }
            Event::Empty(e) => {
                let name = String::from(e.local_name().as_ref() as &str);
                if path.is_empty() {
                    if name != "DeleteResult" {
                        return Err(format!("got <{name}/>"));
                    }
                    root_seen = true;
                }
            }
            Event::Text(t) => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => push_ref(&mut text, &r)?,
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                match (path.len(), name.as_str()) {
                    (1, "Error") => {
                        let f = current.take().ok_or("an error without its fields")?;
                        if f.key.is_empty() {
                            return Err("an <Error> without a <Key>".into());
                        }
                        failed.push(f);
                    }
                    (2, field) => {
                        if let Some(f) = &mut current {
                            match field {
                                // Keys are kept as sent: not trimmed.
                                "Key" => f.key = text.clone(),
                                "Code" => f.code = text.trim().to_owned(),
                                "Message" => f.message = text.trim().to_owned(),
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !root_seen || !path.is_empty() {
        return Err("truncated document".into());
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_escapes_keys() {
        let b = delete_body(
            [
                ("a&b", None, None),
                ("<c>", Some("\"e1\""), None),
                ("v", None, Some("3&L")),
            ]
            .into_iter(),
        );
        assert!(
            b.contains("<Key>v</Key><VersionId>3&amp;L</VersionId></Object>"),
            "{b}"
        );
        assert!(b.contains("<Key>a&amp;b</Key></Object>"), "{b}");
        assert!(b.contains("<ETag>&quot;e1&quot;</ETag>"), "{b}");
        assert!(b.contains("<Key>&lt;c&gt;</Key>"), "{b}");
        assert!(b.contains("<Quiet>true</Quiet>"));
        assert!(!xml_safe("a\u{1}b"));
        assert!(!xml_safe("a\nb"));
        assert!(xml_safe("a b/ü"));
    }

    /// What S3 documents (and MinIO answers): errors by key, deleted keys
    /// passed over, and an empty quiet answer.
    #[test]
    fn per_key_failures_are_read() {
        let doc = br#"<?xml version="1.0" encoding="UTF-8"?>
<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Deleted><Key>ok</Key></Deleted><Error><Key> sp&amp;ace </Key><Code>AccessDenied</Code><Message>Access Denied.</Message></Error></DeleteResult>"#;
        let f = parse_delete_result(doc).unwrap();
        assert_eq!(
            f,
            [Failed {
                key: " sp&ace ".into(),
                code: "AccessDenied".into(),
                message: "Access Denied.".into()
            }]
        );
        assert_eq!(parse_delete_result(b"<DeleteResult/>").unwrap(), []);
        assert_eq!(
            parse_delete_result(br#"<DeleteResult xmlns="x"></DeleteResult>"#).unwrap(),
            []
        );
        for bad in [
            &b"<Error><Code>InternalError</Code></Error>"[..],
            b"<DeleteResult><Error><Code>X</Code></Error></DeleteResult>",
            b"<DeleteResult><Error>",
        ] {
            assert!(
                parse_delete_result(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
