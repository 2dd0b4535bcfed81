//! A listing kept in a file, read back in place of listing a bucket.
//!
//! Listing a bucket of hundreds of millions of keys takes hours on any
//! tool; a nightly sync whose destination only this sync writes need not
//! list it again. `shoal ls -r --json --sorted URL > FILE` writes one JSON
//! object per object in key order (name, size, time to the nanosecond,
//! checksums, generation/ETag), and `sync --source-listing FILE` or
//! `--dest-listing FILE` reads it as that side's listing: the same
//! entries, streamed line by line, so memory stays bounded.
//!
//! The file is checked as it is read: every line must name an object under
//! the side's URL (same store, bucket and prefix), and sync's merge checks
//! the order; a line that breaks either is an error at its line number,
//! and a source whose listing could not be read completely deletes
//! nothing.

use std::io::BufRead;

use futures::stream::{BoxStream, StreamExt};
use shoal_core::checksum::{CrcKind, OtherCrc};
use shoal_core::{Error, Location, ObjectMeta, ObjectVersion, Op, Result};
use shoal_transfer::tree::Entry;

use crate::Failure;

/// Entries of `side` (names relative to `root`) from the listing `path`.
pub(crate) fn read(
    path: &str,
    side: &Location,
    root: &str,
) -> std::result::Result<BoxStream<'static, Result<Entry>>, Failure> {
    let file =
        std::fs::File::open(path).map_err(|e| Failure::from(Error::io(Op::Read, path, e)))?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Entry>>(1024);
    let (path, side, root) = (path.to_owned(), side.clone(), root.to_owned());
    tokio::task::spawn_blocking(move || {
        for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
            let at = format!("{path}:{}", n + 1);
            let item = match line {
                Err(e) => Err(Error::io(Op::Read, &at, e)),
                Ok(l) if l.trim().is_empty() => continue,
                Ok(l) => match entry(&l, &side, &root) {
                    Ok(Some(e)) => Ok(e),
                    Ok(None) => continue,
                    Err(why) => Err(Error::invalid(Op::Read, &at, why)),
                },
            };
            let stop = item.is_err();
            if tx.blocking_send(item).is_err() || stop {
                return;
            }
        }
    });
    Ok(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed())
}

/// One line of `ls --json`: an object under `side` (None: a prefix line).
fn entry(line: &str, side: &Location, root: &str) -> std::result::Result<Option<Entry>, String> {
    let v: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| format!("not a line of `shoal ls -r --json`: {e}"))?;
    if v.get("prefix").and_then(|p| p.as_bool()) == Some(true) {
        return Ok(None);
    }
    let text = |k: &str| v.get(k).and_then(|x| x.as_str());
    let url = text("url").ok_or("no \"url\"")?;
    let loc = Location::parse(url).map_err(|e| e.to_string())?;
    if loc.scheme != side.scheme || loc.bucket != side.bucket || !loc.key.starts_with(root) {
        return Err(format!(
            "{url} is not under {side}: this listing is of another place"
        ));
    }
    let size = v
        .get("size")
        .and_then(|s| s.as_u64())
        .ok_or("no \"size\"")?;
    let updated_ns = match v.get("updated_ns").and_then(|t| t.as_i64()) {
        Some(ns) => Some(ns as i128),
        None => match text("updated") {
            Some(t) => Some(
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .map_err(|e| format!("\"updated\": {e}"))?
                    .unix_timestamp_nanos(),
            ),
            None => None,
        },
    };
    let crc = |k: &str, kind| -> std::result::Result<Option<OtherCrc>, String> {
        text(k)
            .map(|s| {
                OtherCrc::from_base64(kind, s).ok_or(format!("\"{k}\" is not a base64 checksum"))
            })
            .transpose()
    };
    let crc32c = text("crc32c")
        .map(|s| {
            shoal_core::checksum::crc32c_from_base64(s).ok_or("\"crc32c\" is not a base64 CRC32C")
        })
        .transpose()?;
    let md5 = text("md5")
        .map(|s| parse_md5(s).ok_or("\"md5\" is not 32 hex digits"))
        .transpose()?;
    let version = match (text("generation"), text("etag")) {
        (Some(g), _) => Some(ObjectVersion::Generation(
            g.parse().map_err(|_| "\"generation\" is not a number")?,
        )),
        (None, Some(e)) => Some(ObjectVersion::ETag(e.to_owned())),
        (None, None) => None,
    };
    let meta = ObjectMeta {
        key: loc.key.clone(),
        size,
        updated_ns,
        crc32c,
        md5,
        other_crc: crc("crc32", CrcKind::Crc32)?.or(crc("crc64nvme", CrcKind::Crc64Nvme)?),
        version,
        storage_class: text("storage_class").map(str::to_owned),
        ..Default::default()
    };
    Ok(Some(Entry {
        rel: loc.key[root.len()..].to_owned(),
        src: loc,
        meta,
    }))
}

fn parse_md5(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::meta_json;

    /// What `ls --json` writes for an object reads back as the same metadata.
    #[test]
    fn ls_json_lines_read_back() {
        let side = Location::parse("gs://b/data").unwrap();
        let m = ObjectMeta {
            key: "data/x y\n\u{e9}".into(),
            size: 42,
            updated_ns: Some(1_700_000_000_123_456_789),
            crc32c: Some(0xdead_beef),
            md5: Some([7; 16]),
            other_crc: Some(OtherCrc::Crc64Nvme(0x0123_4567_89ab_cdef)),
            version: Some(ObjectVersion::Generation(1_700_000_000_123_456)),
            storage_class: Some("COLDLINE".into()),
            ..Default::default()
        };
        let line = meta_json(&side.with_key(m.key.clone()).to_string(), &m).to_string();
        let e = entry(&line, &side, "data/").unwrap().unwrap();
        assert_eq!(e.rel, "x y\n\u{e9}");
        assert_eq!(e.meta, m);
        // A prefix line is skipped; another bucket, a broken line, refused.
        assert!(
            entry(r#"{"url":"gs://b/data/d/","prefix":true}"#, &side, "data/")
                .unwrap()
                .is_none()
        );
        for bad in [
            r#"{"url":"gs://other/data/x","size":1}"#,
            r#"{"url":"gs://b/elsewhere/x","size":1}"#,
            r#"{"url":"s3://b/data/x","size":1}"#,
            r#"{"url":"gs://b/data/x"}"#,
            r#"{"url":"gs://b/data/x","size":1,"md5":"zz"}"#,
            "not json",
        ] {
            assert!(entry(bad, &side, "data/").is_err(), "{bad}");
        }
    }
}
