//! Bucket-level operations beside `create_bucket`: ListBuckets and
//! DeleteBucket.
//!
//! ListBuckets is a request to the endpoint itself (`GET /`), so it is
//! always path style, whatever the addressing. AWS answers every bucket in
//! one response unless asked to paginate; a `ContinuationToken` in the
//! answer is followed anyway, so a server that pages is read to the end.

use quick_xml::Reader;
use quick_xml::events::Event;
use reqwest::Method;
use shoal_core::{BucketInfo, Error, ErrorKind, Op, Result};

use crate::client::{Client, Request, rebuild};
use crate::endpoint::check_bucket;

/// Pages of buckets followed at most: a server that keeps answering a
/// token (a loop) must not keep us forever. AWS's own limit is 10,000
/// buckets per account, one page without pagination.
const MAX_BUCKET_PAGES: usize = 1000;

impl Client {
    pub(crate) async fn list_buckets(&self) -> Result<Vec<BucketInfo>> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_BUCKET_PAGES {
            let mut r = Request::new(Method::GET, Op::ListBuckets, "", None);
            if let Some(t) = &token {
                r = r.query("continuation-token", t.as_str());
            }
            let (buckets, next) = self
                .send_parse(&r, |_, body| {
                    parse_list_buckets(body)
                        .map_err(|m| Error::new(ErrorKind::Protocol, Op::ListBuckets, "s3://", m))
                })
                .await?;
            all.extend(buckets);
            match next {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(all),
            }
        }
        Err(Error::new(
            ErrorKind::Protocol,
            Op::ListBuckets,
            "s3://",
            format!(
                "the server kept answering a continuation token after {MAX_BUCKET_PAGES} pages"
            ),
        ))
    }

    pub(crate) async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        check_bucket(Op::DeleteBucket, bucket)?;
        let r = Request::new(Method::DELETE, Op::DeleteBucket, bucket, None);
        match self.send(&r).await {
            Ok(_) => Ok(()),
            // 409 BucketNotEmpty: the same kind every store uses for
            // "still holds objects".
            Err(e) if e.status() == Some(409) => {
                let msg = e.message().to_owned();
                Err(rebuild(
                    &Error::new(ErrorKind::Precondition, Op::DeleteBucket, &r.target, "")
                        .with_status(409),
                    Op::DeleteBucket,
                    &r.target,
                    msg,
                    Some("remove its objects first, or use rb --force".into()),
                ))
            }
            Err(e) => Err(e),
        }
    }
}

/// Reads a `ListAllMyBucketsResult`: the buckets and the continuation
/// token, if any.
pub(crate) fn parse_list_buckets(
    xml: &[u8],
) -> std::result::Result<(Vec<BucketInfo>, Option<String>), String> {
    let mut reader = Reader::from_reader(xml);
    let mut path: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let mut token = None;
    let mut current: Option<BucketInfo> = None;
    let mut saw_root = false;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?;
        match ev {
            Event::Start(e) => {
                let local = e.local_name();
                let name: &str = local.as_ref();
                let name = name.to_owned();
                if path.is_empty() {
                    if name != "ListAllMyBucketsResult" {
                        return Err(format!("expected ListAllMyBucketsResult, got <{name}>"));
                    }
                    saw_root = true;
                }
                if name == "Bucket" && path.len() == 2 {
                    current = Some(BucketInfo {
                        name: String::new(),
                        created: None,
                    });
                }
                path.push(name);
            }
            Event::End(_) => {
                if path.pop().as_deref() == Some("Bucket")
                    && path.len() == 2
                    && let Some(b) = current.take()
                {
                    out.push(b);
                }
            }
            Event::Text(t) => push_text(&path, &mut current, &mut token, &t.xml10_content()),
            Event::CData(t) => push_text(&path, &mut current, &mut token, &t.xml10_content()),
            Event::GeneralRef(r) => {
                // `&amp;` and friends arrive apart from the text around them.
                let mut s = String::new();
                shoal_core::xml::push_ref(&mut s, &r)?;
                push_text(&path, &mut current, &mut token, &s);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !saw_root {
        return Err("expected ListAllMyBucketsResult, got no XML".into());
    }
    Ok((out, token))
}

/// Adds text to the field the reader is inside, if it is one we keep.
fn push_text(
    path: &[String],
    current: &mut Option<BucketInfo>,
    token: &mut Option<String>,
    text: &str,
) {
    match (path.len(), path.last().map(String::as_str), current) {
        (4, Some("Name"), Some(b)) => b.name.push_str(text),
        (4, Some("CreationDate"), Some(b)) => {
            b.created.get_or_insert_with(String::new).push_str(text)
        }
        (2, Some("ContinuationToken"), _) => token.get_or_insert_with(String::new).push_str(text),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_buckets_and_token() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>x</ID><DisplayName>minio</DisplayName></Owner><Buckets><Bucket><Name>a-b</Name><CreationDate>2026-01-02T03:04:05.000Z</CreationDate></Bucket><Bucket><Name>c</Name></Bucket></Buckets><ContinuationToken>tok</ContinuationToken></ListAllMyBucketsResult>"#;
        let (b, t) = parse_list_buckets(xml).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].name, "a-b");
        assert_eq!(b[0].created.as_deref(), Some("2026-01-02T03:04:05.000Z"));
        assert_eq!(b[1].name, "c");
        assert_eq!(b[1].created, None);
        assert_eq!(t.as_deref(), Some("tok"));
        let (b, t) = parse_list_buckets(
            b"<ListAllMyBucketsResult><Buckets></Buckets></ListAllMyBucketsResult>",
        )
        .unwrap();
        assert!(b.is_empty() && t.is_none());
        assert!(parse_list_buckets(b"<Error><Code>AccessDenied</Code></Error>").is_err());
        assert!(parse_list_buckets(b"").is_err());
    }
}
