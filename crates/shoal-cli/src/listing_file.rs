//! A listing kept in a file, read back in place of listing a bucket.
//!
//! Listing a bucket of hundreds of millions of keys takes hours on any
//! tool; a nightly sync whose destination only this sync writes need not
//! list it again. `shoal ls -r --json --sorted URL > FILE` writes one JSON
//! object per object in key order (name, size, time to the nanosecond,
//! checksums, generation/ETag), then a closing record, and `sync
//! --source-listing FILE` or `--dest-listing FILE` reads it as that side's
//! listing: the same entries, streamed line by line, so memory stays
//! bounded.
//!
//! A listing is trusted only whole: it must end with `ls`'s closing record
//! (`{"listing_end": {...}}`, written only when the listing ended without
//! an error), of a recursive, sorted, unfiltered listing of the side's own
//! URL, counting exactly the lines before it. A file cut short (an `ls`
//! killed, a full disk) lacks it, and trusting it would make every object
//! past the cut look absent from the source, so `sync --delete` would
//! delete them. A regular file's last line is read before the run, so
//! such a file is refused before anything is copied or deleted (exit 2);
//! a pipe can only be judged at its end, where a missing or wrong closing
//! record is an error of the listing, and the sync engine deletes extras
//! only after both listings ended without one (exit 1, nothing deleted).
//!
//! Every line must also name an object under the side's URL (same store,
//! bucket and prefix), and sync's merge checks the order; a line that
//! breaks either is an error at its line number.

use std::io::{BufRead, Read, Seek, SeekFrom};

use futures::stream::{BoxStream, StreamExt};
use shoal_core::checksum::{Checksums, CrcKind, OtherCrc};
use shoal_core::{Error, Location, ObjectMeta, ObjectVersion, Op, Result, Seen};
use shoal_transfer::ops::{Entry, Listed, sync_root};

use crate::failure::Failure;

/// How a listing file is used.
pub(crate) struct Use<'a> {
    /// The side it stands for.
    pub(crate) side: &'a Location,
    /// Names are relative to this (`sync_root(side)`).
    pub(crate) root: &'a str,
    /// `--quiet`: no line saying the listing was trusted.
    pub(crate) quiet: bool,
}

/// What a closing record says, once checked against the side.
#[derive(Debug)]
struct Closing {
    count: u64,
    url: String,
    made_at: String,
}

/// Entries of `u.side` (names relative to `u.root`) from the listing `path`.
pub(crate) fn read(
    path: &str,
    u: &Use,
) -> std::result::Result<BoxStream<'static, Listed>, Failure> {
    if shoal_transfer::ops::inventory::is_manifest(path) {
        return read_inventory(path, u);
    }
    let mut file =
        std::fs::File::open(path).map_err(|e| Failure::from(Error::io(Op::Read, path, e)))?;
    // A regular file is judged by its last line before anything runs.
    let checked = match last_line(&mut file) {
        Some(Ok(line)) => {
            let end = closing_of(&line)
                .ok_or_else(|| no_closing(path, "refused, nothing copied or deleted"))
                .and_then(|c| {
                    c.and_then(|v| check_closing(&v, u.side, u.root))
                        .map_err(|why| Failure::Usage(format!("sync: {path}: {why}")))
                })?;
            trusted(path, &end, u.quiet);
            true
        }
        Some(Err(e)) => return Err(Error::io(Op::Read, path, e).into()),
        None => false,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Entry>>(1024);
    let (path, side, root) = (path.to_owned(), u.side.clone(), u.root.to_owned());
    let quiet = u.quiet;
    tokio::task::spawn_blocking(move || {
        let mut lines = std::io::BufReader::new(file).lines().enumerate().peekable();
        let (mut count, mut ended) = (0u64, false);
        while let Some((n, line)) = lines.next() {
            let at = format!("{path}:{}", n + 1);
            let item = match line {
                Err(e) => Err(Error::io(Op::Read, &at, e)),
                Ok(l) if l.trim().is_empty() => continue,
                Ok(_) if ended => Err(Error::invalid(
                    Op::Read,
                    &at,
                    "a line after the listing's closing record: refused",
                )),
                Ok(l) => match closing_of(&l) {
                    Some(c) => {
                        ended = true;
                        match c.and_then(|v| check_closing(&v, &side, &root)) {
                            Ok(c) if c.count != count => Err(Error::invalid(
                                Op::Read,
                                &at,
                                format!(
                                    "the closing record counts {} lines but {count} came before it (cut or edited?)",
                                    c.count
                                ),
                            )),
                            Ok(c) => {
                                if !checked {
                                    trusted(&path, &c, quiet);
                                }
                                continue;
                            }
                            Err(why) => Err(Error::invalid(Op::Read, &at, why)),
                        }
                    }
                    None => {
                        count += 1;
                        match entry(&l, &side, &root) {
                            Ok(Some(e)) => Ok(e),
                            Ok(None) => continue,
                            // A broken last line is a listing cut mid-line.
                            Err(_) if lines.peek().is_none() => Err(Error::invalid(
                                Op::Read,
                                &path,
                                "the listing has no closing record (cut short? its last line is incomplete)",
                            )),
                            Err(why) => Err(Error::invalid(Op::Read, &at, why)),
                        }
                    }
                },
            };
            let stop = item.is_err();
            if tx.blocking_send(item).is_err() || stop {
                return;
            }
        }
        if !ended {
            let _ = tx.blocking_send(Err(Error::invalid(
                Op::Read,
                &path,
                "the listing has no closing record (cut short?)",
            )));
        }
    });
    Ok(futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .map(|r| r.map(Seen::Item))
        .boxed())
}

/// An inventory report (`shoal_transfer::ops::inventory`) as the side's
/// listing: the manifest is checked against its files before the run
/// (a mismatch is refused, exit 2), the rows streamed in key order.
fn read_inventory(path: &str, u: &Use) -> std::result::Result<BoxStream<'static, Listed>, Failure> {
    let report = shoal_transfer::ops::inventory::open(std::path::Path::new(path))
        .map_err(|e| Failure::Usage(format!("sync: {e} (nothing copied or deleted)")))?;
    read_report(report, path, (), u)
}

/// A report kept in a bucket (`--source-listing s3://…/manifest.json`),
/// copied into a private temporary folder and checked whole before the
/// run, then read as [`read_inventory`] reads a local one. The copy is
/// removed once the listing has been read.
pub(crate) async fn fetch_inventory(
    ctx: &crate::config::Context,
    url: &str,
) -> std::result::Result<shoal_transfer::ops::inventory::fetch::Fetched, Failure> {
    let loc = Location::parse(url).map_err(|e| Failure::Usage(format!("sync: {e}")))?;
    if !shoal_transfer::ops::inventory::is_manifest(&loc.key) {
        return Err(Failure::Usage(format!(
            "sync: {url}: a listing in a bucket must be an inventory report's …manifest.json; copy an `ls` listing file down and name the local file"
        )));
    }
    let store = ctx.store(&loc).map_err(Failure::from)?;
    let run = ctx.run(ctx.transfer.clone());
    shoal_transfer::ops::inventory::fetch::fetch(store, &loc, &run, &ctx.retry)
        .await
        .map_err(|e| match e.kind() {
            // A report that does not match its manifest: refused, as a
            // local one is. A store that failed: an error of the run.
            shoal_core::ErrorKind::InvalidInput => {
                Failure::Usage(format!("sync: {e} (nothing copied or deleted)"))
            }
            _ => Failure::from(e),
        })
}

/// The rows of an opened report as the side's entries; `keep` (a
/// fetched report's temporary copy) lives until they have been read.
pub(crate) fn read_report<K: Send + 'static>(
    report: shoal_transfer::ops::inventory::Report,
    shown: &str,
    keep: K,
    u: &Use,
) -> std::result::Result<BoxStream<'static, Listed>, Failure> {
    if let Err(e) = report.check_side(u.side, u.root) {
        return Err(Failure::Usage(format!(
            "sync: {shown}: {}: refused, nothing copied or deleted",
            e.message()
        )));
    }
    if !u.quiet {
        let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
        eprintln!("{}", trusting_report(&report, shown, now));
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Entry>>(1024);
    let (side, root) = (u.side.clone(), u.root.to_owned());
    tokio::task::spawn_blocking(move || {
        let _keep = keep;
        let entries = match shoal_transfer::ops::inventory::entries(&report, &side, &root) {
            Ok(e) => e,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        for item in entries {
            let stop = item.is_err();
            if tx.blocking_send(item).is_err() || stop {
                return;
            }
        }
    });
    Ok(futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .map(|r| r.map(Seen::Item))
        .boxed())
}

/// The line that says a report is used in place of listing a store: its
/// snapshot time and age (`now_ns`, nanoseconds since the epoch), which
/// say how much written since it may be missing.
fn trusting_report(
    report: &shoal_transfer::ops::inventory::Report,
    shown: &str,
    now_ns: i128,
) -> String {
    let age = report
        .age(now_ns)
        .unwrap_or_else(|| "of unknown age".to_owned());
    format!(
        "sync: trusting inventory report {shown} of {}{} taken at {} ({age}, {} files); objects written since are not in it",
        report.scheme.prefix(),
        report.bucket,
        report.made_at,
        report.files.len()
    )
}

fn no_closing(path: &str, what: &str) -> Failure {
    Failure::Usage(format!(
        "sync: {path}: the listing has no closing record (cut short?); {what} (write it again with `shoal ls -r --json --sorted URL > FILE`)"
    ))
}

/// The one line that says a listing is used in place of listing a store.
fn trusted(path: &str, c: &Closing, quiet: bool) {
    if !quiet {
        eprintln!(
            "sync: trusting listing {path} of {} made at {} ({} objects)",
            shoal_core::error::escape_controls(&c.url),
            c.made_at,
            c.count
        );
    }
}

/// The last non-empty line of a regular file (left rewound), or None for
/// what cannot seek (a pipe): that is judged at its end. A closing record
/// is short (a URL of at most a few KiB); a last line longer than
/// `TAIL` is not one, and is returned cut, to be refused as such.
fn last_line(file: &mut std::fs::File) -> Option<std::io::Result<String>> {
    const TAIL: u64 = 64 << 10;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let read = |file: &mut std::fs::File| -> std::io::Result<String> {
        let len = file.seek(SeekFrom::End(0))?;
        file.seek(SeekFrom::Start(len.saturating_sub(TAIL)))?;
        let mut buf = Vec::new();
        file.take(TAIL).read_to_end(&mut buf)?;
        file.rewind()?;
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end();
        Ok(text.rsplit('\n').next().unwrap_or("").to_owned())
    };
    Some(read(file))
}

/// `Some` if `line` is a closing record (an object whose one key is
/// `listing_end`), with its body or why it is not one that can be read.
fn closing_of(line: &str) -> Option<std::result::Result<serde_json::Value, String>> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let o = v.as_object()?;
    let body = o.get("listing_end")?;
    if o.len() != 1 || !body.is_object() {
        return Some(Err("a malformed closing record".into()));
    }
    Some(Ok(body.clone()))
}

/// Whether a closing record vouches for a listing of `side`.
fn check_closing(
    v: &serde_json::Value,
    side: &Location,
    root: &str,
) -> std::result::Result<Closing, String> {
    let flag = |k: &str| v.get(k).and_then(|x| x.as_bool());
    let url = v.get("url").and_then(|x| x.as_str()).unwrap_or("");
    let count = v.get("count").and_then(|x| x.as_u64());
    let Some(count) = count else {
        return Err("the closing record has no count".into());
    };
    if flag("complete") != Some(true) {
        return Err("the closing record says the listing is incomplete".into());
    }
    if flag("recursive") != Some(true) || flag("sorted") != Some(true) {
        return Err(format!(
            "a listing of {url} not made with `ls -r --sorted`: sync needs every key below, in key order"
        ));
    }
    if flag("filtered") != Some(false) {
        return Err(format!(
            "a listing of {url} filtered by --include/--exclude: what it left out would look absent"
        ));
    }
    let same = Location::parse(url).ok().is_some_and(|l| {
        !l.is_local()
            && l.same_store(side)
            && l.bucket == side.bucket
            && !shoal_list::has_wildcard(&l.key)
            && sync_root(&l) == root
    });
    if !same {
        return Err(format!(
            "a listing of {}, not of {side}: refused",
            if url.is_empty() { "nothing named" } else { url }
        ));
    }
    Ok(Closing {
        count,
        url: url.to_owned(),
        made_at: v
            .get("made_at")
            .and_then(|x| x.as_str())
            .unwrap_or("an unknown time")
            .to_owned(),
    })
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
    if !loc.same_store(side) || loc.bucket != side.bucket || !loc.key.starts_with(root) {
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
        checksums: Checksums::default()
            .with_crc32c(crc32c)
            .with_md5(md5)
            .with_other_crc(
                crc("crc32", CrcKind::Crc32)?.or(crc("crc64nvme", CrcKind::Crc64Nvme)?),
            ),
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
            checksums: Checksums::default()
                .with_crc32c(0xdead_beef)
                .with_md5([7; 16])
                .with_other_crc(OtherCrc::Crc64Nvme(0x0123_4567_89ab_cdef)),
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

    fn end(url: &str, extra: &str) -> String {
        format!(
            r#"{{"listing_end":{{"count":1,"complete":true,"url":"{url}","recursive":true,"sorted":true,"filtered":false,"made_at":"2026-11-26T20:00:00Z"{extra}}}}}"#
        )
    }

    /// A closing record vouches only for a whole, sorted, unfiltered
    /// listing of the side's own URL; anything else is refused.
    #[test]
    fn closing_records_are_checked_against_the_side() {
        let side = Location::parse("gs://b/data").unwrap();
        let ok = |l: &str| {
            closing_of(l)
                .expect("a closing record")
                .and_then(|v| check_closing(&v, &side, "data/"))
        };
        for good in [end("gs://b/data/", ""), end("gs://b/data", "")] {
            let c = ok(&good).unwrap();
            assert_eq!((c.count, c.made_at.as_str()), (1, "2026-11-26T20:00:00Z"));
        }
        for bad in [
            end("gs://b/dat", ""),
            end("gs://b/data/sub/", ""),
            end("gs://other/data/", ""),
            end("s3://b/data/", ""),
            end("gs://b/data/*", ""),
            end("/tmp/data", ""),
            end("gs://b/data/", r#","sorted":false"#),
            end("gs://b/data/", r#","recursive":false"#),
            end("gs://b/data/", r#","filtered":true"#),
            end("gs://b/data/", r#","complete":false"#),
            r#"{"listing_end":{"url":"gs://b/data/","complete":true}}"#.into(),
            r#"{"listing_end":1}"#.into(),
            r#"{"listing_end":{},"url":"gs://b/data/x"}"#.into(),
        ] {
            assert!(ok(&bad).is_err(), "{bad}");
        }
        // Object and prefix lines are not closing records.
        assert!(closing_of(r#"{"url":"gs://b/data/x","size":1}"#).is_none());
        assert!(closing_of("not json").is_none());
    }

    /// The last line of a regular file is found whatever follows it, and
    /// the file is left rewound for the stream.
    #[test]
    fn the_last_line_of_a_file_is_read_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("l.jsonl");
        std::fs::write(&f, "one\ntwo\n\n").unwrap();
        let mut file = std::fs::File::open(&f).unwrap();
        assert_eq!(last_line(&mut file).unwrap().unwrap(), "two");
        let mut all = String::new();
        file.read_to_string(&mut all).unwrap();
        assert_eq!(all, "one\ntwo\n\n");
        // A pipe cannot be read ahead: judged at its end.
        let (r, _w) = std::io::pipe().unwrap();
        let mut p = std::fs::File::from(std::os::fd::OwnedFd::from(r));
        assert!(last_line(&mut p).is_none());
    }
}
