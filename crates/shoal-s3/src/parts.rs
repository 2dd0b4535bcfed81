//! The parts of a multipart object (GetObjectAttributes), for checking a
//! COMPOSITE checksum.
//!
//! A composite checksum (`xxxx-N`, what boto3 and the AWS CLI leave on
//! every multipart upload) is the CRC of the parts' CRCs, so a download can
//! check it only knowing where each part ends. `HEAD ?partNumber=n` tells
//! one part per request; GetObjectAttributes tells up to 1,000 per request,
//! with each part's own CRC (so a mismatch can name the part). Its answer
//! carries the ETag too, which pins the list to the version being read.
//!
//! Servers without it (older S3-compatibles) answer 400, 405 or 501, and
//! on AWS it takes its own permission (`s3:GetObjectAttributes`), which a
//! policy granting only `s3:GetObject` lacks (403): all of these mean
//! "cannot say", and the caller checks what it can without the parts
//! rather than fail a download the user may make. So does an answer that
//! is not GetObjectAttributes' (moto's, another document with no part
//! list): it says nothing about the parts.

use quick_xml::events::Event;
use quick_xml::reader::Reader;
use reqwest::Method;
use shoal_core::checksum::crc32c_from_base64;
use shoal_core::xml::push_ref;
use shoal_core::{Error, ErrorKind, ObjectVersion, Op, Result, StoredPart};

use crate::client::{Client, Request};
use crate::endpoint::check_bucket;
use crate::object::protocol;

/// Parts asked for per request (S3's maximum).
const PAGE: u32 = 1000;

/// One answer of GetObjectAttributes with `ETag,ObjectParts`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PartsPage {
    /// The ETag, without quotes.
    pub(crate) etag: Option<String>,
    /// How many parts the object has.
    pub(crate) total: Option<u32>,
    /// This page's parts: number, size, CRC (CRC32C or CRC32, the
    /// object's one algorithm).
    pub(crate) parts: Vec<(u32, StoredPart)>,
    /// More pages follow, from this marker.
    pub(crate) next: Option<u32>,
}

impl Client {
    pub(crate) async fn parts(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&ObjectVersion>,
    ) -> Result<Option<Vec<StoredPart>>> {
        check_bucket(Op::Stat, bucket)?;
        let want_etag = match version {
            Some(ObjectVersion::ETag(e)) => Some(e.trim_matches('"').to_owned()),
            _ => None,
        };
        let mut parts: Vec<StoredPart> = Vec::new();
        let mut marker = 0u32;
        loop {
            let mut req = Request::new(Method::GET, Op::Stat, bucket, Some(key));
            if let Some(ObjectVersion::VersionId(v)) = version {
                req = req.query("versionId", v.as_str());
            }
            let req = req
                .query("attributes", "")
                .header("x-amz-object-attributes", "ETag,ObjectParts")
                .header("x-amz-max-parts", PAGE.to_string())
                .header("x-amz-part-number-marker", marker.to_string());
            let target = req.target.clone();
            // An answer that does not read as GetObjectAttributes' (moto's
            // has another root element and no part list) says nothing
            // about the parts: "cannot say", as a refusal is.
            let page = match self
                .send_parse(&req, |_, body| Ok(parse_parts_page(body)))
                .await
            {
                Ok(Ok(p)) => p,
                Ok(Err(m)) => {
                    tracing::debug!(%target, answer = %m, "unreadable GetObjectAttributes answer");
                    return Ok(None);
                }
                Err(e) if unsupported(&e) => {
                    tracing::debug!(%target, error = %e, "no GetObjectAttributes here");
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            if let (Some(want), Some(got)) = (&want_etag, &page.etag)
                && want != got
            {
                return Err(Error::new(
                    ErrorKind::Changed,
                    Op::Stat,
                    &target,
                    format!("the object changed while being read (ETag {got}, was {want})"),
                )
                .with_hint("run the command again"));
            }
            let Some(total) = page.total else {
                // A single-part object, or one stored without part checksums.
                return Ok(None);
            };
            for (number, part) in page.parts {
                if number as usize != parts.len() + 1 {
                    return Err(protocol(
                        Op::Stat,
                        &target,
                        format!("part {number} listed after {} parts", parts.len()),
                    ));
                }
                parts.push(part);
            }
            match page.next {
                Some(next) if next > marker && (parts.len() as u32) < total => marker = next,
                _ => break,
            }
        }
        Ok(Some(parts))
    }
}

/// An answer that means the server has no GetObjectAttributes, or the
/// caller may not use it.
fn unsupported(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Unsupported | ErrorKind::PermissionDenied
    ) || matches!(e.status(), Some(400 | 403 | 405 | 501))
}

/// Reads one GetObjectAttributes answer. The root is
/// `GetObjectAttributesResponse` (MinIO spells it with a small g) and the
/// part count `TotalPartsCount` (MinIO: `PartsCount`).
pub(crate) fn parse_parts_page(xml: &[u8]) -> std::result::Result<PartsPage, String> {
    let mut reader = Reader::from_reader(xml);
    let mut path: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut page = PartsPage::default();
    let mut part: Option<(Option<u32>, StoredPart)> = None;
    let mut truncated = false;
    let mut next = None;
    let mut root_seen = false;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?;
        match ev {
            Event::Start(e) => {
                let name = String::from(e.local_name().as_ref() as &str);
                if path.is_empty() {
                    if root_seen || !name.eq_ignore_ascii_case("GetObjectAttributesResponse") {
                        return Err(format!("got <{name}>"));
                    }
                    root_seen = true;
                }
                if path.len() == 2 && name == "Part" {
                    part = Some((None, StoredPart { size: 0, crc: None }));
                }
                path.push(name);
                text.clear();
            }
            Event::Text(t) => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => push_ref(&mut text, &r)?,
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                let v = text.trim();
                let number = || v.parse::<u64>().map_err(|_| format!("<{name}> {v:?}"));
                match (path.len(), name.as_str()) {
                    (1, "ETag") => page.etag = Some(v.trim_matches('"').to_owned()),
                    (2, "TotalPartsCount" | "PartsCount") => page.total = Some(number()? as u32),
                    (2, "IsTruncated") => truncated = v == "true",
                    (2, "NextPartNumberMarker") => next = Some(number()? as u32),
                    (2, "Part") => {
                        let (n, p) = part.take().ok_or("a part without its fields")?;
                        page.parts.push((n.ok_or("a part without a number")?, p));
                    }
                    (3, field) => {
                        if let Some((n, p)) = &mut part {
                            match field {
                                "PartNumber" => *n = Some(number()? as u32),
                                "Size" => p.size = number()?,
                                "ChecksumCRC32C" | "ChecksumCRC32" => {
                                    p.crc = Some(
                                        crc32c_from_base64(v)
                                            .ok_or_else(|| format!("<{field}> {v:?}"))?,
                                    )
                                }
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
    if truncated {
        page.next = Some(next.ok_or("truncated without NextPartNumberMarker")?);
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MinIO's answers for a 4-part object boto3 uploaded, read two parts
    /// at a time.
    #[test]
    fn minio_pages_are_read() {
        let first = br#"<?xml version="1.0" encoding="UTF-8"?>
<getObjectAttributesResponse><ETag>8b7e906e1a4ad0cc448aa6c9e40831e2-4</ETag><ObjectParts><IsTruncated>true</IsTruncated><MaxParts>2</MaxParts><NextPartNumberMarker>2</NextPartNumberMarker><PartNumberMarker>0</PartNumberMarker><PartsCount>4</PartsCount><Part><PartNumber>1</PartNumber><Size>6291456</Size><ChecksumCRC32>WfVj7w==</ChecksumCRC32></Part><Part><PartNumber>2</PartNumber><Size>6291456</Size><ChecksumCRC32>5Sko2A==</ChecksumCRC32></Part></ObjectParts></getObjectAttributesResponse>"#;
        let p = parse_parts_page(first).unwrap();
        assert_eq!(
            p.etag.as_deref(),
            Some("8b7e906e1a4ad0cc448aa6c9e40831e2-4")
        );
        assert_eq!(p.total, Some(4));
        assert_eq!(p.next, Some(2));
        assert_eq!(
            p.parts,
            [
                (
                    1,
                    StoredPart {
                        size: 6291456,
                        crc: Some(0x59f5_63ef)
                    }
                ),
                (
                    2,
                    StoredPart {
                        size: 6291456,
                        crc: Some(0xe529_28d8)
                    }
                ),
            ]
        );
        let last = br#"<getObjectAttributesResponse><ETag>8b7e906e1a4ad0cc448aa6c9e40831e2-4</ETag><ObjectParts><IsTruncated>false</IsTruncated><MaxParts>2</MaxParts><NextPartNumberMarker>4</NextPartNumberMarker><PartNumberMarker>2</PartNumberMarker><PartsCount>4</PartsCount><Part><PartNumber>3</PartNumber><Size>6291456</Size><ChecksumCRC32>iZgY/g==</ChecksumCRC32></Part><Part><PartNumber>4</PartNumber><Size>1125632</Size><ChecksumCRC32>JyVxMA==</ChecksumCRC32></Part></ObjectParts></getObjectAttributesResponse>"#;
        let p = parse_parts_page(last).unwrap();
        assert_eq!(p.next, None);
        assert_eq!(p.parts.len(), 2);
        assert_eq!(
            p.parts[1],
            (
                4,
                StoredPart {
                    size: 1125632,
                    crc: Some(0x2725_7130)
                }
            )
        );
    }

    /// No GetObjectAttributes, or no permission for it: "cannot say"; a
    /// missing object or a server error is an error.
    #[test]
    fn which_refusals_mean_cannot_say() {
        let e = |status: u16| {
            Error::new(ErrorKind::Rejected, Op::Stat, "s3://b/k", "x").with_status(status)
        };
        for s in [400, 403, 405, 501] {
            assert!(unsupported(&e(s)), "{s}");
        }
        for s in [404, 500, 503] {
            assert!(!unsupported(&e(s)), "{s}");
        }
        let denied = Error::new(
            ErrorKind::PermissionDenied,
            Op::Stat,
            "s3://b/k",
            "AccessDenied",
        );
        assert!(unsupported(&denied));
    }

    /// moto's answer (5.2): another root element, no part list. It cannot
    /// be read as GetObjectAttributes', which `parts` takes for "cannot
    /// say" (an error here once aborted every such download).
    #[test]
    fn moto_answer_is_not_read() {
        let moto = br#"<?xml version="1.0" encoding="utf-8"?>
<GetObjectAttributesOutput xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ETag>38c23955630cf23c49fd5ef58b34e548-3</ETag></GetObjectAttributesOutput>"#;
        assert!(parse_parts_page(moto).is_err());
    }

    /// AWS's spelling, a single-part object (no ObjectParts), and bad input.
    #[test]
    fn aws_spelling_and_bad_answers() {
        let aws = br#"<GetObjectAttributesResponse xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ETag>"abc-2"</ETag><ObjectParts><TotalPartsCount>2</TotalPartsCount><IsTruncated>false</IsTruncated><Part><PartNumber>1</PartNumber><Size>5</Size><ChecksumCRC32C>4waSgw==</ChecksumCRC32C></Part><Part><PartNumber>2</PartNumber><Size>1</Size></Part></ObjectParts></GetObjectAttributesResponse>"#;
        let p = parse_parts_page(aws).unwrap();
        assert_eq!(p.etag.as_deref(), Some("abc-2"));
        assert_eq!(p.total, Some(2));
        assert_eq!(p.parts[0].1.crc, Some(0xE306_9283));
        assert_eq!(p.parts[1], (2, StoredPart { size: 1, crc: None }));
        let single =
            br#"<GetObjectAttributesResponse><ETag>abc</ETag></GetObjectAttributesResponse>"#;
        assert_eq!(parse_parts_page(single).unwrap().total, None);
        for bad in [
            &b"<ListBucketResult/>"[..],
            b"<GetObjectAttributesResponse><ETag>x",
            b"<GetObjectAttributesResponse><ObjectParts><PartsCount>x</PartsCount></ObjectParts></GetObjectAttributesResponse>",
            b"<GetObjectAttributesResponse><ObjectParts><IsTruncated>true</IsTruncated></ObjectParts></GetObjectAttributesResponse>",
            b"<GetObjectAttributesResponse><ObjectParts><Part><Size>1</Size></Part></ObjectParts></GetObjectAttributesResponse>",
        ] {
            assert!(parse_parts_page(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
