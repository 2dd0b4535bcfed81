//! ListObjectsV2: one request per page, parsed with quick-xml's raw event
//! reader rather than serde: listing is where a `du` of ten million keys
//! spends its CPU, and the event reader allocates only the fields kept.
//!
//! Keys are requested with `encoding-type=url`: XML 1.0 cannot carry most
//! control characters, so without it a key like `a\x01b` would make the
//! page unparseable. They are decoded only when the answer says
//! `<EncodingType>url</EncodingType>` (servers that ignore the parameter
//! send them raw). S3 encodes a space as `+` and a plus as `%2B`.
//!
//! Offsets: shoal's `start_offset` is inclusive (GCS semantics) and S3's
//! `start-after` is exclusive. We send as `start-after` a key just below the
//! offset (the offset with its last character replaced by its predecessor
//! followed by U+10FFFF, the largest code point; or the offset minus a
//! trailing NUL) and drop anything still below the offset on the client.
//! Only keys that begin with that odd string can fall into the gap, so the
//! extra bytes are nil in practice, and the client filter makes the result
//! exact either way. S3 has no end offset: keys and prefixes at or past
//! `end_offset` are dropped here and paging stops once the server has gone
//! past it. Object metadata from a listing carries no MD5 (an ETag is an MD5
//! only for some encryption modes, which a listing does not say) and no
//! CRC32C (ListObjectsV2 does not return checksum values).

use quick_xml::events::Event;
use quick_xml::reader::Reader;
use reqwest::Method;
use shoal_core::{
    Error, ErrorKind, ListPage, ListRequest, ObjectMeta, ObjectVersion, Op, Result, VersionState,
};

use crate::client::{Client, Request};
use shoal_core::xml::push_ref;

/// S3's largest page: it silently caps `max-keys` at 1000.
pub(crate) const MAX_LIST_PAGE: u32 = 1000;

impl Client {
    pub(crate) async fn list_page(&self, bucket: &str, req: &ListRequest) -> Result<ListPage> {
        crate::endpoint::check_bucket(Op::List, bucket)?;
        let max = req
            .max_results
            .unwrap_or(MAX_LIST_PAGE)
            .clamp(1, MAX_LIST_PAGE);
        let mut r = Request::new(Method::GET, Op::List, bucket, None);
        r = match req.versions {
            true => r.query("versions", ""),
            false => r.query("list-type", "2"),
        };
        r = r
            .query("encoding-type", "url")
            .query("max-keys", max.to_string());
        r.target = format!("s3://{bucket}/{}", req.prefix);
        if !req.prefix.is_empty() {
            r = r.query("prefix", req.prefix.as_str());
        }
        if let Some(d) = req.delimiter.as_deref().filter(|d| !d.is_empty()) {
            r = r.query("delimiter", d);
        }
        match (&req.page_token, req.versions) {
            (Some(t), false) => r = r.query("continuation-token", t.as_str()),
            // ListObjectVersions goes on from a key and a version id.
            (Some(t), true) => {
                let (version, key) = t.split_once('\n').unwrap_or(("", t));
                r = r.query("key-marker", key);
                if !version.is_empty() {
                    r = r.query("version-id-marker", version);
                }
            }
            (None, versions) => {
                if let Some(after) = req.start_offset.as_deref().and_then(start_after_for) {
                    let name = if versions {
                        "key-marker"
                    } else {
                        "start-after"
                    };
                    r = r.query(name, after);
                }
            }
        }
        let target = r.target.clone();
        let mut page = self
            .send_parse(&r, |_, body| {
                parse_list_objects_v2(body).map_err(|e| e.with_url(target.clone()))
            })
            .await?;
        apply_offsets(
            &mut page,
            req.start_offset.as_deref(),
            req.end_offset.as_deref(),
        );
        Ok(page)
    }
}

/// An exclusive `start-after` at or just below the inclusive `offset`, or
/// None when the offset is empty (no lower bound).
pub(crate) fn start_after_for(offset: &str) -> Option<String> {
    let mut chars = offset.chars();
    let last = chars.next_back()?;
    let head = chars.as_str();
    if last == '\0' {
        // Nothing sorts between "x" and "x\0".
        return Some(head.to_owned());
    }
    let prev = match last as u32 - 1 {
        0xDFFF => '\u{D7FF}', // skip the surrogate block
        n => char::from_u32(n)?,
    };
    Some(format!("{head}{prev}\u{10FFFF}"))
}

/// Client-side offsets: drop what the server returned below `start` (the
/// gap of [`start_after_for`]) or at/after `end`, and stop paging past `end`.
pub(crate) fn apply_offsets(page: &mut ListPage, start: Option<&str>, end: Option<&str>) {
    if let Some(start) = start.filter(|s| !s.is_empty()) {
        page.objects.retain(|o| o.key.as_str() >= start);
        // A prefix can still hold keys >= start if it is >= start or start
        // lies inside it.
        page.prefixes
            .retain(|p| p.as_str() >= start || start.starts_with(p.as_str()));
    }
    if let Some(end) = end {
        let last = page
            .objects
            .last()
            .map(|o| o.key.as_str())
            .max(page.prefixes.last().map(String::as_str));
        if last.is_some_and(|l| l >= end) {
            page.next_page_token = None;
        }
        page.objects.retain(|o| o.key.as_str() < end);
        page.prefixes.retain(|p| p.as_str() < end);
    }
}

/// Which text we are collecting.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum Field {
    #[default]
    None,
    Key,
    Size,
    LastModified,
    ETag,
    StorageClass,
    Prefix,
    IsTruncated,
    NextToken,
    EncodingType,
    VersionId,
    IsLatest,
    NextVersionIdMarker,
}

fn protocol(msg: impl AsRef<str>) -> Error {
    Error::new(
        ErrorKind::Protocol,
        Op::List,
        "",
        format!("expected a ListObjectsV2 XML result: {}", msg.as_ref()),
    )
}

/// Parses one ListObjectsV2 response body, or a ListObjectVersions one
/// (`ListVersionsResult`: each `Version` and `DeleteMarker` an object
/// whose `version` is its version id, with its [`VersionState`]; the page
/// token the next key and version-id markers, `VERSION\nKEY`). Never
/// panics; anything that is not a complete result is an
/// `ErrorKind::Protocol` error.
pub fn parse_list_objects_v2(xml: &[u8]) -> Result<ListPage> {
    let mut reader = Reader::from_reader(xml);
    let mut st = V2::default();
    loop {
        let ev = reader.read_event().map_err(|e| {
            protocol(format!(
                "malformed XML at byte {}: {e}",
                reader.buffer_position()
            ))
        })?;
        match ev {
            Event::Start(e) => {
                let name = e.local_name();
                st.start(name.as_ref())?;
            }
            Event::Empty(e) => {
                let name = e.local_name();
                st.empty(name.as_ref())?;
            }
            Event::Text(t) if st.field != Field::None => st.text.push_str(&t.xml10_content()),
            Event::CData(t) if st.field != Field::None => st.text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if st.field != Field::None => {
                push_ref(&mut st.text, &r).map_err(protocol)?
            }
            Event::End(_) => st.end()?,
            Event::Eof => break,
            _ => {}
        }
    }
    st.finish()
}

/// Where a ListObjectsV2 parse is: the element depth, which depth-2
/// element it is inside, the field whose text it gathers, and what it has
/// gathered.
#[derive(Default)]
struct V2 {
    page: ListPage,
    depth: usize,
    done: bool,
    in_contents: bool,
    in_prefixes: bool,
    field: Field,
    text: String,
    obj: ObjectMeta,
    truncated: bool,
    token: Option<String>,
    url_encoded: bool,
    /// A ListVersionsResult.
    versions: bool,
    next_version: Option<String>,
}

impl V2 {
    fn start(&mut self, name: &str) -> Result<()> {
        if self.done {
            return Err(protocol("content after the root element"));
        }
        self.depth += 1;
        match self.depth {
            1 if name == "ListVersionsResult" => self.versions = true,
            1 if name != "ListBucketResult" => {
                return Err(protocol(format!("got <{}>", name)));
            }
            2 => match name {
                "Contents" => {
                    self.in_contents = true;
                    self.obj = ObjectMeta::default();
                }
                "Version" | "DeleteMarker" if self.versions => {
                    self.in_contents = true;
                    self.obj = ObjectMeta {
                        version_state: Some(VersionState {
                            is_latest: Some(false),
                            delete_marker: name == "DeleteMarker",
                            soft_deleted: false,
                        }),
                        ..Default::default()
                    };
                }
                "NextKeyMarker" if self.versions => self.field = Field::NextToken,
                "NextVersionIdMarker" => self.field = Field::NextVersionIdMarker,
                "CommonPrefixes" => self.in_prefixes = true,
                "IsTruncated" => self.field = Field::IsTruncated,
                "NextContinuationToken" => self.field = Field::NextToken,
                "EncodingType" => self.field = Field::EncodingType,
                _ => {}
            },
            3 if self.in_contents => {
                self.field = match name {
                    "Key" => Field::Key,
                    "Size" => Field::Size,
                    "LastModified" => Field::LastModified,
                    "ETag" => Field::ETag,
                    "StorageClass" => Field::StorageClass,
                    "VersionId" => Field::VersionId,
                    "IsLatest" => Field::IsLatest,
                    _ => Field::None,
                }
            }
            3 if self.in_prefixes && name == "Prefix" => self.field = Field::Prefix,
            _ => {}
        }
        self.text.clear();
        Ok(())
    }

    /// `<Key/>` or `<Prefix/>`: an empty string.
    fn empty(&mut self, name: &str) -> Result<()> {
        if self.depth == 0 {
            return Err(protocol(format!("got an empty <{name}/>")));
        }
        match (self.depth, name) {
            (2, "Key") if self.in_contents => self.obj.key.clear(),
            (2, "Prefix") if self.in_prefixes => self.page.prefixes.push(String::new()),
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self) -> Result<()> {
        let text = &mut self.text;
        match (self.depth, self.field) {
            (3, Field::Key) => self.obj.key = std::mem::take(text),
            (3, Field::Size) => {
                self.obj.size = text
                    .trim()
                    .parse()
                    .map_err(|_| protocol(format!("bad <Size> {:?}", one(text))))?
            }
            (3, Field::LastModified) => {
                self.obj.updated_ns = Some(
                    parse_rfc3339(text.trim())
                        .ok_or_else(|| protocol(format!("bad <LastModified> {:?}", one(text))))?,
                )
            }
            (3, Field::ETag) if !self.versions => {
                self.obj.version = Some(ObjectVersion::ETag(std::mem::take(text)))
            }
            (3, Field::VersionId) => {
                self.obj.version = Some(ObjectVersion::VersionId(std::mem::take(text)))
            }
            (3, Field::IsLatest) => {
                if let Some(s) = &mut self.obj.version_state {
                    s.is_latest = Some(text.trim() == "true");
                }
            }
            (2, Field::NextVersionIdMarker) => self.next_version = Some(std::mem::take(text)),
            (3, Field::StorageClass) => self.obj.storage_class = Some(std::mem::take(text)),
            (3, Field::Prefix) => self.page.prefixes.push(std::mem::take(text)),
            (2, Field::IsTruncated) => {
                self.truncated = match text.trim() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(protocol(format!("bad <IsTruncated> {:?}", one(other))));
                    }
                }
            }
            (2, Field::NextToken) => self.token = Some(std::mem::take(text)),
            (2, Field::EncodingType) => self.url_encoded = text.trim() == "url",
            (2, _) if self.in_contents => {
                self.in_contents = false;
                self.page.objects.push(std::mem::take(&mut self.obj));
            }
            (2, _) if self.in_prefixes => self.in_prefixes = false,
            _ => {}
        }
        if self.depth <= 3 {
            self.field = Field::None;
        }
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            self.done = true;
        }
        Ok(())
    }

    /// The page, once the whole document was read: keys decoded if the
    /// server URL-encoded them, and a next-page token only where one is
    /// needed and present.
    fn finish(mut self) -> Result<ListPage> {
        if !self.done {
            return Err(protocol(if self.depth == 0 {
                "no XML element in the response".to_owned()
            } else {
                "the response is truncated".to_owned()
            }));
        }
        if self.url_encoded {
            if let Some(t) = self.token.as_mut().filter(|_| self.versions) {
                *t = url_decode(t)?;
            }
            for o in &mut self.page.objects {
                o.key = url_decode(&o.key)?;
            }
            for p in &mut self.page.prefixes {
                *p = url_decode(p)?;
            }
        }
        self.page.next_page_token = match (self.truncated, self.token) {
            (false, _) => None,
            (true, Some(t)) if !t.is_empty() && self.versions => {
                Some(format!("{}\n{t}", self.next_version.unwrap_or_default()))
            }
            (true, Some(t)) if !t.is_empty() => Some(t),
            // Following a truncated page without a token would loop forever.
            (true, _) => {
                return Err(protocol(
                    "IsTruncated is true but there is no NextContinuationToken",
                ));
            }
        };
        Ok(self.page)
    }
}

fn one(s: &str) -> String {
    shoal_core::error::one_line(s, 40)
}

/// Decodes `encoding-type=url` text: `%XX` escapes and `+` for space.
fn url_decode(s: &str) -> Result<String> {
    if !s.contains(['%', '+']) {
        return Ok(s.to_owned());
    }
    let mut bytes = Vec::with_capacity(s.len());
    let raw = s.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => {
                bytes.push(b' ');
                i += 1;
            }
            b'%' => {
                let hex = raw
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| protocol(format!("bad %-escape in key {:?}", one(s))))?;
                bytes.push(hex);
                i += 3;
            }
            b => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(bytes)
        .map_err(|_| protocol(format!("key is not UTF-8 once decoded: {:?}", one(s))))
}

/// `2009-10-12T17:50:30.000Z` as Unix nanoseconds.
pub(crate) fn parse_rfc3339(s: &str) -> Option<i128> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p%2F</Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys><Delimiter>%2F</Delimiter><IsTruncated>true</IsTruncated><EncodingType>url</EncodingType>
  <Contents><Key>p%2Fa+b%2F%C3%BC%2F100%25%2Fx%2By</Key><LastModified>2024-01-02T03:04:05.678Z</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>1234</Size><Owner><ID>x</ID><DisplayName>y</DisplayName></Owner><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>p%2Fctl%01%0A</Key><LastModified>2024-01-02T03:04:05Z</LastModified><ETag>"abc-3"</ETag><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>p%2Fdir%2F</Prefix></CommonPrefixes><CommonPrefixes><Prefix>p%2Fz+z%2F</Prefix></CommonPrefixes>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken><StartAfter>p%2F</StartAfter>
</ListBucketResult>"#;

    #[test]
    fn normal_page_with_url_encoded_keys() {
        let p = parse_list_objects_v2(PAGE.as_bytes()).unwrap();
        assert_eq!(p.objects.len(), 2);
        let a = &p.objects[0];
        assert_eq!(a.key, "p/a b/ü/100%/x+y");
        assert_eq!(a.size, 1234);
        assert_eq!(a.updated_ns, Some(1_704_164_645_678_000_000));
        assert_eq!(
            a.version,
            Some(ObjectVersion::ETag(
                "\"9b2cf535f27731c974343645a3985328\"".into()
            ))
        );
        assert_eq!(a.storage_class.as_deref(), Some("STANDARD"));
        assert_eq!((a.checksums.crc32c(), a.checksums.md5()), (None, None));
        assert_eq!(p.objects[1].key, "p/ctl\x01\n");
        assert_eq!(p.prefixes, vec!["p/dir/", "p/z z/"]);
        assert_eq!(
            p.next_page_token.as_deref(),
            Some("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        );
    }

    #[test]
    fn versions_and_delete_markers() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix><KeyMarker></KeyMarker><VersionIdMarker></VersionIdMarker><NextKeyMarker>k%2Bb</NextKeyMarker><NextVersionIdMarker>v3</NextVersionIdMarker><MaxKeys>3</MaxKeys><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>
<DeleteMarker><Key>a</Key><VersionId>v9</VersionId><IsLatest>true</IsLatest><LastModified>2024-01-02T03:04:05Z</LastModified></DeleteMarker>
<Version><Key>a</Key><VersionId>v1</VersionId><IsLatest>false</IsLatest><LastModified>2024-01-02T03:04:05Z</LastModified><ETag>"x"</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Version>
<Version><Key>k%2Bb</Key><VersionId>null</VersionId><IsLatest>true</IsLatest><LastModified>2024-01-02T03:04:05Z</LastModified><ETag>"y"</ETag><Size>5</Size></Version>
</ListVersionsResult>"#;
        let p = parse_list_objects_v2(xml.as_bytes()).unwrap();
        let got: Vec<_> = (p.objects.iter())
            .map(|o| {
                let s = o.version_state.unwrap();
                (
                    o.key.as_str(),
                    o.version.clone().unwrap(),
                    s.is_latest,
                    s.delete_marker,
                    o.size,
                )
            })
            .collect();
        let v = |s: &str| ObjectVersion::VersionId(s.into());
        assert_eq!(
            got,
            vec![
                ("a", v("v9"), Some(true), true, 0),
                ("a", v("v1"), Some(false), false, 3),
                ("k+b", v("null"), Some(true), false, 5),
            ]
        );
        assert_eq!(p.next_page_token.as_deref(), Some("v3\nk+b"));
    }

    #[test]
    fn raw_keys_when_the_server_does_not_encode() {
        let xml = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a+b%20 </Key><Size>1</Size></Contents></ListBucketResult>";
        let p = parse_list_objects_v2(xml.as_bytes()).unwrap();
        assert_eq!(p.objects[0].key, "a+b%20 ");
        assert_eq!(p.next_page_token, None);
    }

    #[test]
    fn empty_pages() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>"#;
        assert_eq!(
            parse_list_objects_v2(xml.as_bytes()).unwrap(),
            ListPage::default()
        );
        let xml = "<ListBucketResult><Prefix/><IsTruncated>false</IsTruncated></ListBucketResult>";
        assert_eq!(
            parse_list_objects_v2(xml.as_bytes()).unwrap(),
            ListPage::default()
        );
    }

    #[test]
    fn garbage_and_truncation_are_protocol_errors() {
        let cut = &PAGE.as_bytes()[..PAGE.len() / 2];
        let cases: Vec<&[u8]> = vec![
            b"",
            b"garbage",
            b"<html><body>Bad Gateway</body></html>",
            b"<Error><Code>InternalError</Code></Error>",
            cut,
            b"<ListBucketResult><Contents><Size>-1</Size></Contents></ListBucketResult>",
            b"<ListBucketResult><Contents><Size>99999999999999999999999</Size></Contents></ListBucketResult>",
            b"<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
            b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
            b"<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>%zz</Key></Contents></ListBucketResult>",
            b"<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>%FF</Key></Contents></ListBucketResult>",
            b"<ListBucketResult><Contents><Key>&nope;</Key></Contents></ListBucketResult>",
            b"<ListBucketResult></Wrong>",
            b"<ListBucketResult/>",
            b"\xff\xfe\x00<",
            b"<ListBucketResult></ListBucketResult><ListBucketResult>",
        ];
        for c in cases {
            let e = parse_list_objects_v2(c).unwrap_err();
            assert_eq!(
                e.kind(),
                ErrorKind::Protocol,
                "{:?}",
                String::from_utf8_lossy(c)
            );
            assert!(
                e.message().contains("expected a ListObjectsV2"),
                "{}",
                e.message()
            );
        }
    }

    #[test]
    fn every_prefix_of_a_page_is_handled() {
        // A poor man's fuzz: no cut point panics.
        for n in 0..PAGE.len() {
            if PAGE.is_char_boundary(n) {
                let _ = parse_list_objects_v2(&PAGE.as_bytes()[..n]);
            }
        }
    }

    #[test]
    fn start_after_is_just_below_the_offset() {
        assert_eq!(start_after_for(""), None);
        assert_eq!(start_after_for("abc").unwrap(), "abb\u{10FFFF}");
        assert_eq!(start_after_for("a\0").unwrap(), "a");
        assert_eq!(start_after_for("\u{E000}").unwrap(), "\u{D7FF}\u{10FFFF}");
        for off in ["abc", "a/b", "x\u{1}", "ü", "a\0"] {
            let after = start_after_for(off).unwrap();
            assert!(after.as_str() < off);
            // Ordinary keys between the two would be a real gap: none.
            for k in ["abb", "abbz", "a/a", "a/az", "x", "x\u{0}", "ü", "a"] {
                assert!(!(k > after.as_str() && k < off), "{k:?} in gap of {off:?}");
            }
        }
    }

    #[test]
    fn offsets_filter_and_stop_paging() {
        let meta = |k: &str| ObjectMeta {
            key: k.into(),
            ..Default::default()
        };
        let mut p = ListPage {
            objects: vec![meta("b"), meta("b/y"), meta("bb"), meta("c"), meta("d")],
            prefixes: vec!["a/".into(), "b/".into(), "bz/".into()],
            next_page_token: Some("t".into()),
        };
        apply_offsets(&mut p, Some("b/x"), Some("c"));
        let keys: Vec<_> = p.objects.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["b/y", "bb"]);
        assert_eq!(p.prefixes, vec!["b/", "bz/"]);
        assert_eq!(p.next_page_token, None);

        // Not past the end yet: keep paging.
        let mut p = ListPage {
            objects: vec![meta("a")],
            prefixes: vec![],
            next_page_token: Some("t".into()),
        };
        apply_offsets(&mut p, None, Some("c"));
        assert_eq!(p.next_page_token.as_deref(), Some("t"));
    }
}
