//! Small XML helpers over quick-xml's event reader, for the short documents
//! the S3-style XML dialects answer outside of listings (errors, multipart
//! results): S3 itself and GCS's XML API, whose multipart upload is the same
//! protocol.
//!
//! Serde would do, but the workspace builds quick-xml without it and these
//! documents are a root with a few text children: a loop is shorter than
//! the derive attributes. Parsing never panics; anything unexpected comes
//! back as a message for an `ErrorKind::Protocol` error.

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesRef, Event};
use quick_xml::reader::Reader;

/// Appends the text an entity or character reference stands for.
pub fn push_ref(out: &mut String, r: &BytesRef<'_>) -> Result<(), String> {
    match r.resolve_char_ref() {
        Ok(Some(c)) => out.push(c),
        Ok(None) => match resolve_predefined_entity(r) {
            Some(s) => out.push_str(s),
            None => return Err(format!("unknown XML entity &{};", &**r)),
        },
        Err(e) => return Err(format!("bad XML character reference: {e}")),
    }
    Ok(())
}

/// A small document: the root's local name and the text of some of its
/// direct children (first occurrence each, in the order of `fields`).
#[derive(Debug)]
pub struct Simple {
    /// The root element's local name.
    pub root: String,
    /// The text of each requested child, `None` where it is absent.
    pub values: Vec<Option<String>>,
}

/// Reads a small document. Fails on malformed or truncated XML or no root.
pub fn read_simple(xml: &[u8], fields: &[&str]) -> Result<Simple, String> {
    let mut reader = Reader::from_reader(xml);
    let mut depth = 0usize;
    let mut root: Option<String> = None;
    let mut closed = false;
    let mut values: Vec<Option<String>> = vec![None; fields.len()];
    let mut capture: Option<usize> = None;
    let mut text = String::new();
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?;
        match ev {
            Event::Start(e) => {
                depth += 1;
                let name = e.local_name();
                let name: &str = name.as_ref();
                if depth == 1 {
                    if closed {
                        return Err("more than one XML root element".into());
                    }
                    root = Some(name.to_owned());
                } else if depth == 2 {
                    capture = fields.iter().position(|f| *f == name);
                    text.clear();
                }
            }
            Event::Empty(e) => {
                if depth == 0 {
                    let name = e.local_name();
                    root = Some(AsRef::<str>::as_ref(&name).to_owned());
                    closed = true;
                } else if depth == 1 {
                    let name = e.local_name();
                    let name: &str = name.as_ref();
                    if let Some(i) = fields.iter().position(|f| *f == name) {
                        values[i].get_or_insert_with(String::new);
                    }
                }
            }
            Event::End(_) => {
                if depth == 2
                    && let Some(i) = capture.take()
                    && values[i].is_none()
                {
                    values[i] = Some(std::mem::take(&mut text));
                }
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    closed = true;
                }
            }
            Event::Text(t) if capture.is_some() && depth == 2 => text.push_str(&t.xml10_content()),
            Event::CData(t) if capture.is_some() && depth == 2 => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if capture.is_some() && depth == 2 => push_ref(&mut text, &r)?,
            Event::Eof => break,
            _ => {}
        }
    }
    match root {
        None => Err("no XML element in the response".into()),
        Some(_) if !closed => Err("XML response is truncated".into()),
        Some(root) => Ok(Simple { root, values }),
    }
}

/// A listing-like document: the root's direct text children (`top`), and
/// each `record` child's own direct text children, in order.
#[derive(Debug, Default)]
pub struct Records {
    /// The root element's local name.
    pub root: String,
    /// `(name, text)` of the root's direct children that hold text.
    pub top: Vec<(String, String)>,
    /// Each record: `(name, text)` of its direct children.
    pub items: Vec<Vec<(String, String)>>,
}

impl Records {
    /// The text of the root's first child named `name`.
    pub fn top(&self, name: &str) -> Option<&str> {
        self.top
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The text of a record's first field named `name`.
pub fn field<'a>(item: &'a [(String, String)], name: &str) -> Option<&'a str> {
    item.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Reads a document of repeated `record` elements under the root (S3
/// ListParts' `<Part>`, ListMultipartUploads' `<Upload>`). Elements nested
/// deeper than a record's children are skipped. Fails on malformed or
/// truncated XML.
pub fn read_records(xml: &[u8], record: &str) -> Result<Records, String> {
    let mut reader = Reader::from_reader(xml);
    let mut out = Records::default();
    let mut path: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut closed = false;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?;
        match ev {
            Event::Start(e) => {
                let name = AsRef::<str>::as_ref(&e.local_name()).to_owned();
                if path.is_empty() {
                    if closed {
                        return Err("more than one XML root element".into());
                    }
                    out.root = name.clone();
                } else if path.len() == 1 && name == record {
                    out.items.push(Vec::new());
                }
                path.push(name);
                text.clear();
            }
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                let in_record = path.len() == 2 && path[1] == record;
                if path.len() == 1 && name != record {
                    out.top.push((name, std::mem::take(&mut text)));
                } else if in_record && let Some(item) = out.items.last_mut() {
                    item.push((name, std::mem::take(&mut text)));
                }
                text.clear();
                if path.is_empty() {
                    closed = true;
                }
            }
            Event::Empty(e) if path.is_empty() => {
                out.root = AsRef::<str>::as_ref(&e.local_name()).to_owned();
                closed = true;
            }
            Event::Text(t) => text.push_str(&t.xml10_content()),
            Event::CData(t) => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => push_ref(&mut text, &r)?,
            Event::Eof => break,
            _ => {}
        }
    }
    if out.root.is_empty() {
        return Err("no XML element in the response".into());
    }
    if !closed {
        return Err("XML response is truncated".into());
    }
    Ok(out)
}

/// The parts of one ListPartsResult page (S3's, and GCS's XML API, whose
/// parts carry no CRC32C), and the marker of the next page when the page
/// says there is one.
pub fn list_parts_page(body: &[u8]) -> Result<(Vec<crate::ListedPart>, Option<String>), String> {
    let doc = read_records(body, "Part")?;
    if doc.root != "ListPartsResult" {
        return Err(format!("got <{}>", doc.root));
    }
    let mut parts = Vec::with_capacity(doc.items.len());
    for item in &doc.items {
        let number = field(item, "PartNumber").and_then(|n| n.trim().parse().ok());
        let size = field(item, "Size").and_then(|n| n.trim().parse().ok());
        let (Some(part_number), Some(size)) = (number, size) else {
            return Err("a <Part> without a PartNumber or Size".into());
        };
        parts.push(crate::ListedPart {
            part_number,
            etag: field(item, "ETag").unwrap_or_default().to_owned(),
            size,
            crc32c: field(item, "ChecksumCRC32C").and_then(crate::checksum::crc32c_from_base64),
        });
    }
    let next = (doc.top("IsTruncated") == Some("true"))
        .then(|| doc.top("NextPartNumberMarker").map(str::to_owned))
        .flatten();
    Ok((parts, next))
}

/// The uploads of one ListMultipartUploadsResult page (S3's, and GCS's
/// XML API), and the key and upload-id markers of the next page when the
/// page says there is one.
#[allow(clippy::type_complexity)] // a page and its two markers
pub fn list_uploads_page(
    body: &[u8],
) -> Result<(Vec<crate::PendingUpload>, Option<(String, String)>), String> {
    let doc = read_records(body, "Upload")?;
    if doc.root != "ListMultipartUploadsResult" {
        return Err(format!("got <{}>", doc.root));
    }
    let mut uploads = Vec::with_capacity(doc.items.len());
    for item in &doc.items {
        let (Some(key), Some(id)) = (field(item, "Key"), field(item, "UploadId")) else {
            return Err("an <Upload> without a Key or UploadId".into());
        };
        uploads.push(crate::PendingUpload {
            key: key.to_owned(),
            upload_id: id.to_owned(),
            initiated_ns: field(item, "Initiated")
                .and_then(crate::file_time::parse)
                .map(|t| t.ns),
        });
    }
    let next = match (doc.top("NextKeyMarker"), doc.top("NextUploadIdMarker")) {
        (Some(k), Some(u)) if doc.top("IsTruncated") == Some("true") && !k.is_empty() => {
            Some((k.to_owned(), u.to_owned()))
        }
        _ => None,
    };
    Ok((uploads, next))
}

/// `Code: Message` from an S3 or GCS XML `<Error>` body, for error messages.
pub fn error_code_message(body: &str) -> Option<String> {
    let doc = read_simple(body.as_bytes(), &["Code", "Message"]).ok()?;
    if doc.root != "Error" {
        return None;
    }
    let mut it = doc.values.into_iter();
    let code = it.next().flatten().filter(|s| !s.trim().is_empty());
    let msg = it.next().flatten().filter(|s| !s.trim().is_empty());
    match (code, msg) {
        (Some(c), Some(m)) => Some(format!("{}: {}", c.trim(), m.trim())),
        (Some(c), None) => Some(c.trim().to_owned()),
        (None, Some(m)) => Some(m.trim().to_owned()),
        (None, None) => None,
    }
}

/// What an S3-style error code means, for an `<Error>` that came with a
/// success status (a CompleteMultipartUpload answers `200 OK` before it is
/// done, and may fail after).
pub fn error_code_kind(code: &str) -> crate::ErrorKind {
    use crate::ErrorKind;
    match code {
        "InternalError" | "ServiceUnavailable" | "SlowDown" => ErrorKind::ServerBusy,
        "NoSuchUpload" | "NoSuchKey" | "NoSuchBucket" => ErrorKind::NotFound,
        "BadDigest" | "InvalidDigest" => ErrorKind::Integrity,
        "AccessDenied" => ErrorKind::PermissionDenied,
        _ => ErrorKind::Rejected,
    }
}

/// The CompleteMultipartUpload document for `parts`, in the order given.
/// With `crc32c`, each part carries its `ChecksumCRC32C` (S3 checks them
/// against what it stored); GCS's XML API takes number and ETag only.
pub fn complete_multipart_body(parts: &[&crate::PartInfo], crc32c: bool) -> String {
    complete_multipart_body_as(parts, crc32c.then_some("CRC32C"))
}

/// The same, each part's CRC (`PartInfo::crc32c`, whatever its kind)
/// written as `Checksum<KIND>` (`CRC32C`, `CRC32`) when a kind is given.
pub fn complete_multipart_body_as(parts: &[&crate::PartInfo], kind: Option<&str>) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(100 + parts.len() * 150);
    s.push_str("<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for p in parts {
        // Writing to a String cannot fail.
        let _ = write!(
            s,
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag>",
            p.part_number,
            quick_xml::escape::escape(p.etag.as_str()),
        );
        if let Some(kind) = kind {
            let _ = write!(
                s,
                "<Checksum{kind}>{}</Checksum{kind}>",
                crate::checksum::crc32c_to_base64(p.crc32c)
            );
        }
        s.push_str("</Part>");
    }
    s.push_str("</CompleteMultipartUpload>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parts_pages_and_their_marker() {
        let page = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>b</Bucket><Key>k</Key><UploadId>U</UploadId>
  <PartNumberMarker>0</PartNumberMarker><NextPartNumberMarker>2</NextPartNumberMarker>
  <MaxParts>2</MaxParts><IsTruncated>true</IsTruncated>
  <Part><PartNumber>1</PartNumber><LastModified>2026-11-29T00:00:00.000Z</LastModified>
    <ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag><Size>5242880</Size></Part>
  <Part><PartNumber>2</PartNumber><ETag>"92eb5ffee6ae2fec3ad71c777531578f"</ETag><Size>7</Size></Part>
</ListPartsResult>"#;
        let (parts, next) = list_parts_page(page).unwrap();
        assert_eq!(next.as_deref(), Some("2"));
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].part_number, parts[0].size, parts[0].crc32c),
            (1, 5_242_880, None)
        );
        assert_eq!(parts[1].etag, "\"92eb5ffee6ae2fec3ad71c777531578f\"");
        let last = br#"<ListPartsResult><IsTruncated>false</IsTruncated><NextPartNumberMarker>9</NextPartNumberMarker></ListPartsResult>"#;
        assert_eq!(list_parts_page(last).unwrap(), (Vec::new(), None));
        assert!(list_parts_page(b"<Error><Code>NoSuchUpload</Code></Error>").is_err());
        assert!(
            list_parts_page(b"<ListPartsResult><Part><Size>1</Size></Part></ListPartsResult>")
                .is_err()
        );
    }

    #[test]
    fn list_uploads_pages_and_their_markers() {
        let page = br#"<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>
  <NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>U2</NextUploadIdMarker>
  <Upload><Key>k1</Key><UploadId>U1</UploadId><Initiated>2026-11-29T00:00:00.000Z</Initiated></Upload>
  <Upload><Key>k2</Key><UploadId>U2</UploadId></Upload>
</ListMultipartUploadsResult>"#;
        let (uploads, next) = list_uploads_page(page).unwrap();
        assert_eq!(next, Some(("k2".into(), "U2".into())));
        assert_eq!(
            (uploads[0].key.as_str(), uploads[0].upload_id.as_str()),
            ("k1", "U1")
        );
        assert_eq!(uploads[0].initiated_ns, Some(1_795_910_400_000_000_000));
        assert!(uploads[1].initiated_ns.is_none());
        let last = br#"<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><NextKeyMarker>k</NextKeyMarker><NextUploadIdMarker>u</NextUploadIdMarker></ListMultipartUploadsResult>"#;
        assert_eq!(list_uploads_page(last).unwrap(), (Vec::new(), None));
        assert!(list_uploads_page(b"<ListMultipartUploadsResult><Upload><Key>k</Key></Upload></ListMultipartUploadsResult>").is_err());
    }

    #[test]
    fn complete_document_escapes_etags() {
        let p = crate::PartInfo {
            part_number: 1,
            etag: "\"abc\"".into(),
            crc32c: 0xE306_9283,
            size: 5,
        };
        let s = complete_multipart_body(&[&p], true);
        assert!(s.contains("<ETag>&quot;abc&quot;</ETag>"), "{s}");
        assert!(s.contains("<ChecksumCRC32C>4waSgw==</ChecksumCRC32C>"));
        let s = complete_multipart_body(&[&p], false);
        assert!(
            s.contains("<Part><PartNumber>1</PartNumber><ETag>&quot;abc&quot;</ETag></Part>"),
            "{s}"
        );
        assert!(!s.contains("Checksum"));
    }

    #[test]
    fn error_bodies() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>a &amp; b</Key><RequestId>1</RequestId></Error>"#;
        assert_eq!(
            error_code_message(body).as_deref(),
            Some("NoSuchKey: The specified key does not exist.")
        );
        assert_eq!(error_code_message("<html><body>502</body></html>"), None);
        assert_eq!(error_code_message("<Error><Code>X</Code>"), None);
        assert_eq!(error_code_message("not xml at all"), None);
        assert_eq!(error_code_message(""), None);
    }

    #[test]
    fn simple_documents() {
        let d = read_simple(
            b"<R xmlns=\"x\"><A>1 &lt; 2 &#x41;</A><B/><A>ignored</A><C><A>deep</A></C></R>",
            &["A", "B", "Z"],
        )
        .unwrap();
        assert_eq!(d.root, "R");
        assert_eq!(
            d.values,
            vec![Some("1 < 2 A".into()), Some(String::new()), None]
        );
        assert!(read_simple(b"<R><A>1</A>", &["A"]).is_err());
        assert!(read_simple(b"<R><A>1</B></R>", &["A"]).is_err());
        assert!(read_simple(b"\xff\xfe<", &["A"]).is_err());
        assert!(read_simple(b"<R>&bogus;</R>", &[]).is_ok()); // not captured: ignored
        assert!(read_simple(b"<R><A>&bogus;</A></R>", &["A"]).is_err());
    }

    #[test]
    fn records_of_a_list_parts_answer() {
        let doc = br#"<?xml version="1.0"?><ListPartsResult xmlns="x"><Bucket>b</Bucket><IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker><Owner><ID>o</ID></Owner><Part><PartNumber>1</PartNumber><ETag>&quot;e1&quot;</ETag><Size>5</Size><ChecksumCRC32C>AAAAAQ==</ChecksumCRC32C></Part><Part><PartNumber>2</PartNumber><ETag>"e2"</ETag><Size>6</Size></Part></ListPartsResult>"#;
        let r = read_records(doc, "Part").unwrap();
        assert_eq!(r.root, "ListPartsResult");
        assert_eq!(r.top("IsTruncated"), Some("true"));
        assert_eq!(r.top("NextPartNumberMarker"), Some("2"));
        assert_eq!(r.items.len(), 2);
        assert_eq!(field(&r.items[0], "ETag"), Some("\"e1\""));
        assert_eq!(field(&r.items[0], "ChecksumCRC32C"), Some("AAAAAQ=="));
        assert_eq!(field(&r.items[1], "ChecksumCRC32C"), None);
        assert!(read_records(b"<A><Part>", "Part").is_err());
    }
}
