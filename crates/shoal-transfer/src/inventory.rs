//! Inventory reports read as a bucket's listing.
//!
//! Listing a bucket of billions of keys takes days; the stores write the
//! same facts for free once a day or week: S3 Inventory (a
//! `manifest.json` naming CSV files, gzipped, keys URL-encoded) and GCS
//! Storage Insights inventory reports (a manifest naming CSV shards with
//! a header row). `sync --source-listing MANIFEST` / `--dest-listing
//! MANIFEST` and Dask read such a report as that side's listing.
//!
//! A report is trusted only whole, as an `ls` listing file is: the
//! manifest must match its files before anything runs — every file
//! named is there with the size and MD5 the S3 manifest gives, the
//! GCS manifest's shard count and record count match what the shards
//! hold, the report is of the side's bucket, every row is readable, and
//! no key is listed twice. A report cut short, or a file of another
//! day's report put beside the manifest, would make objects look absent
//! (and `sync --delete` delete them), so it is refused (exit 2) instead.
//!
//! The stores do not promise key order within or across files, and
//! sync's merge needs it, so rows are sorted externally
//! ([`crate::spill`]): runs of [`RUN_LEN`] rows sorted in memory and
//! written to unnamed temporary files (binary, zstd-compressed), then
//! merged. Memory stays bounded by the run length whatever the report's
//! size.
//!
//! Both stores also write Parquet. A Parquet file names its own columns
//! (S3's in snake case, `last_modified_date` a timestamp, keys not
//! URL-encoded; GCS's as in its CSV), so columns are found by name with
//! case and underscores ignored, and each value is turned into the text
//! its CSV column would hold, so one row reader checks both. The parquet
//! crate's row API reads them without Arrow. ORC reports are refused with
//! a line saying which format to configure.
//!
//! The manifest's counts are checked whatever JSON type they come in:
//! proto3's JSON writes an int64 as a string (`"records_processed": "5"`),
//! so a count is a number or a string of digits, and a count that is
//! missing or neither is refused: a check skipped because a field did
//! not parse is how a shard missing rows was once trusted. The bucket
//! column of every row must be the report's bucket, and a prefix the
//! report declares (a GCS report's storage filters) must hold the side
//! it is used for.
//!
//! A report read later, by a Dask task, is read as it was checked: the
//! client's check yields one [`Part`] per data file (its size and MD5 as
//! checked, and, for a report in a bucket, its generation or ETag), and
//! the task reads that file pinned to that version and checks its size
//! and MD5 again before any row is used, so a report folder refreshed in
//! between is refused rather than read as the old one.
//!
//! A report is a snapshot: objects written after it are not in it. Used
//! as the source of `sync --delete`, an object added to the source and
//! copied since would look like an extra; the CLI says the report's age
//! beside its snapshot time ([`Report::age`]).

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shoal_core::checksum::{Checksums, crc32c_from_base64, md5_from_base64, md5_from_hex};
use shoal_core::{Error, Location, ObjectMeta, ObjectVersion, Op, Result, Scheme};

use crate::spill::{self, Sorter, Spill};
use crate::tree::Entry;

pub mod fetch;

/// Rows sorted in memory at once; a report with more is sorted through
/// temporary files of this many rows each.
pub(crate) const RUN_LEN: usize = 200_000;

/// The data files' format.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum Format {
    Csv,
    Parquet,
}

/// Which store wrote the report, and how its rows name their columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Layout {
    /// S3 Inventory: no header; the manifest's `fileSchema` names the
    /// columns, keys are URL-encoded.
    S3 { columns: Vec<String> },
    /// GCS Storage Insights: the first row of each shard names the columns.
    Gcs,
}

/// A report whose manifest was read and checked against its files.
#[derive(Debug, Clone)]
pub struct Report {
    /// The store and bucket the report lists.
    pub scheme: Scheme,
    /// The bucket the report lists.
    pub bucket: String,
    /// When the store took the snapshot, as the manifest says it.
    pub made_at: String,
    /// The same instant in nanoseconds since the epoch, when the manifest
    /// gives one that parses.
    pub made_at_ns: Option<i128>,
    /// The key prefix the report declares it is limited to, if any.
    pub prefix: Option<String>,
    /// The data files, in the manifest's order.
    pub files: Vec<PathBuf>,
    /// Each data file's size and MD5 as the check read them, in the
    /// order of `files`.
    checked: Vec<Sum>,
    layout: Layout,
    format: Format,
    manifest: String,
}

/// A data file's size and MD5, as the check read them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sum {
    size: u64,
    md5: [u8; 16],
}

/// One data file of a checked report, as a task reads it later (a Dask
/// partition): what the check saw of it, so that the task reads those
/// bytes or refuses. It travels as JSON (serde), so the task needs
/// neither the manifest nor the other files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    /// The manifest (path or URL), named in errors.
    pub manifest: String,
    /// The file: a local path, or the URL of the object in the bucket the
    /// report was read from.
    pub file: String,
    /// Its size in bytes, as checked.
    pub size: u64,
    /// Its MD5, as checked (32 hex digits).
    pub md5: String,
    /// The GCS generation of the object the check read.
    pub generation: Option<i64>,
    /// The S3 ETag of the object the check read.
    pub etag: Option<String>,
    bucket: String,
    layout: Layout,
    format: Format,
}

impl Part {
    /// The version of the file's object the check read: what a task's
    /// download is pinned to.
    pub fn version(&self) -> Option<ObjectVersion> {
        match (self.generation, &self.etag) {
            (Some(g), _) => Some(ObjectVersion::Generation(g)),
            (None, Some(e)) => Some(ObjectVersion::ETag(e.clone())),
            _ => None,
        }
    }

    /// The part as the JSON a task is handed.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a Part is plain data")
    }

    /// The part [`Part::to_json`] wrote.
    pub fn from_json(text: &str) -> Result<Part> {
        serde_json::from_str(text).map_err(|e| {
            bad(
                "inventory part",
                format!("not a part of a checked inventory report: {e}"),
            )
        })
    }

    /// Records the version of the object the check read.
    pub fn pin(&mut self, url: &Location, version: Option<&ObjectVersion>) {
        self.file = url.to_string();
        match version {
            Some(ObjectVersion::Generation(g)) => self.generation = Some(*g),
            Some(ObjectVersion::ETag(e)) => self.etag = Some(e.clone()),
            Some(ObjectVersion::VersionId(_)) | None => {}
        }
    }

    /// The file's rows read from `path` (the file itself, or a copy
    /// fetched pinned to its version), once its size and MD5 are found
    /// to be those the check read. A file that changed since (the report
    /// folder refreshed) is refused, never read as the checked one.
    pub fn rows(&self, path: &Path) -> Result<Box<dyn Iterator<Item = Result<Row>>>> {
        use std::io::Seek;
        let mut f = std::fs::File::open(path).map_err(|e| io(path, e))?;
        let got = check_open(&self.manifest, path, &mut f, None, None)?;
        if got.size != self.size || hex(got.md5) != self.md5 {
            return Err(bad(
                &self.manifest,
                format!(
                    "{} is not the file checked when the report was opened ({} bytes, MD5 {}; checked: {} bytes, MD5 {}): the report changed since; refused (open the report again)",
                    self.file,
                    got.size,
                    hex(got.md5),
                    self.size,
                    self.md5
                ),
            ));
        }
        f.rewind().map_err(|e| io(path, e))?;
        // A report of this one file, to read its rows (the scheme and
        // time are not used for that).
        let one = Report {
            scheme: Scheme::Gs,
            bucket: self.bucket.clone(),
            made_at: String::new(),
            made_at_ns: None,
            prefix: None,
            files: vec![path.to_owned()],
            checked: Vec::new(),
            layout: self.layout.clone(),
            format: self.format,
            manifest: self.manifest.clone(),
        };
        one.read_rows(f, path)
    }
}

/// Whether `path` looks like an inventory manifest (not an `ls` listing):
/// its name ends in `manifest.json`.
pub fn is_manifest(path: &str) -> bool {
    path.ends_with("manifest.json")
}

fn bad(at: &str, why: impl AsRef<str>) -> Error {
    Error::invalid(Op::Read, at, why)
}

fn io(at: &Path, e: std::io::Error) -> Error {
    Error::io(Op::Read, at.display().to_string(), e)
}

/// Reads the manifest at `path` and checks it against its files (sizes
/// and MD5s, shard and record counts, the rows' bucket); the rows are
/// read again by [`entries`], or one file at a time through [`Part`].
pub fn open(path: &Path) -> Result<Report> {
    open_with(path, &path.display().to_string(), &find_file)
}

/// Where a manifest's data file named `key` is, below the folder `dir`.
type Find<'a> = &'a dyn Fn(&Path, &str) -> Option<PathBuf>;

/// Opens the manifest at `path`, named `at` in errors (its URL when it
/// was fetched from a bucket).
fn open_with(path: &Path, at: &str, find: Find) -> Result<Report> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(at, format!("not an inventory manifest (JSON): {e}")))?;
    open_value(&v, path.parent().unwrap_or(Path::new(".")), at, find)
}

/// The report whose manifest `v` (already parsed) has its data files
/// below `dir`, checked against them.
fn open_value(v: &serde_json::Value, dir: &Path, at: &str, find: Find) -> Result<Report> {
    if v.get("fileSchema").is_some() || v.get("sourceBucket").is_some() {
        open_s3(at, dir, v, find)
    } else if v.get("report_shards_file_names").is_some() {
        open_gcs(at, dir, v, find)
    } else {
        Err(bad(
            at,
            "neither an S3 Inventory manifest (sourceBucket, fileSchema, files) nor a GCS inventory report manifest (report_shards_file_names)",
        ))
    }
}

/// The count `field` of the manifest object `v`: a JSON number, or a
/// string of digits (proto3's JSON writes an int64 so). Missing or
/// anything else is refused: a count that cannot be read cannot be
/// checked, and an unchecked count is how a cut report gets trusted.
fn count(v: &serde_json::Value, field: &str, at: &str) -> Result<u64> {
    let refused = |what: String| {
        bad(
            at,
            format!("{what}: refused (a report is trusted only when its counts can be checked)"),
        )
    };
    match v.get(field) {
        None | Some(serde_json::Value::Null) => {
            Err(refused(format!("the manifest has no \"{field}\"")))
        }
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| refused(format!("the manifest's \"{field}\" is {n}, not a count"))),
        Some(serde_json::Value::String(t))
            if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) =>
        {
            t.parse::<u64>()
                .map_err(|_| refused(format!("the manifest's \"{field}\" is {t:?}, not a count")))
        }
        Some(other) => Err(refused(format!(
            "the manifest's \"{field}\" is {other}, not a count"
        ))),
    }
}

/// An RFC 3339 time in nanoseconds since the epoch.
fn rfc3339_ns(t: &str) -> Option<i128> {
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

fn text<'a>(v: &'a serde_json::Value, k: &str, at: &str) -> Result<&'a str> {
    v.get(k)
        .and_then(|x| x.as_str())
        .ok_or_else(|| bad(at, format!("the manifest has no \"{k}\"")))
}

fn file_format(at: &str, format: &str) -> Result<Format> {
    if format.eq_ignore_ascii_case("csv") {
        return Ok(Format::Csv);
    }
    if format.eq_ignore_ascii_case("parquet") {
        return Ok(Format::Parquet);
    }
    Err(bad(
        at,
        format!(
            "the report is {format}; shoal reads CSV and Parquet inventory reports (set the report's format to one of them)"
        ),
    ))
}

fn open_s3(at: &str, dir: &Path, v: &serde_json::Value, find: Find) -> Result<Report> {
    let bucket = text(v, "sourceBucket", at)?.to_owned();
    let format = file_format(at, text(v, "fileFormat", at)?)?;
    let schema = text(v, "fileSchema", at)?;
    // A CSV report's fileSchema names its columns in order; a Parquet
    // report's is the files' own schema (`message s3.inventory {...}`),
    // which each file carries too.
    let columns: Vec<String> = match format {
        Format::Csv => schema.split(',').map(|c| c.trim().to_owned()).collect(),
        Format::Parquet => Vec::new(),
    };
    for need in ["Key", "Size"] {
        let named = match format {
            Format::Csv => columns.iter().any(|c| c == need),
            Format::Parquet => schema
                .split([' ', ';', '{', '}', '\n', '\t'])
                .any(|w| same_column(w, need)),
        };
        if !named {
            return Err(bad(
                at,
                format!("the report's fileSchema has no {need} column"),
            ));
        }
    }
    let made_at_ns = v
        .get("creationTimestamp")
        .and_then(|t| t.as_str())
        .and_then(|ms| ms.parse::<i128>().ok())
        .map(|ms| ms * 1_000_000);
    let made_at = match v.get("creationTimestamp").and_then(|t| t.as_str()) {
        Some(ms) => made_at_ns
            .and_then(|ns| time::OffsetDateTime::from_unix_timestamp_nanos(ns).ok())
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| ms.to_owned()),
        None => "an unknown time".into(),
    };
    let listed = v
        .get("files")
        .and_then(|f| f.as_array())
        .ok_or_else(|| bad(at, "the manifest has no \"files\""))?;
    let mut files = Vec::with_capacity(listed.len());
    let mut checked = Vec::with_capacity(listed.len());
    for f in listed {
        let key = text(f, "key", at)?;
        let size = count(f, "size", at).map_err(|e| bad(at, format!("{key}: {}", e.message())))?;
        let md5 = match f.get("MD5checksum") {
            Some(serde_json::Value::String(m)) => md5_from_hex(m),
            _ => None,
        }
        .ok_or_else(|| {
            bad(
                at,
                format!("{key}: the manifest gives no MD5checksum of 32 hex digits: refused (a file that cannot be checked is not trusted)"),
            )
        })?;
        let path = find(dir, key).ok_or_else(|| {
            bad(
                at,
                format!("{key}, which the manifest names, is not beside it (copy the report's folder whole)"),
            )
        })?;
        checked.push(check_file(at, &path, Some(size), Some(md5))?);
        files.push(path);
    }
    Ok(Report {
        scheme: Scheme::S3,
        bucket,
        made_at,
        made_at_ns,
        // An S3 manifest does not say whether its configuration filters
        // by prefix; the live source is the defence there.
        prefix: None,
        files,
        checked,
        layout: Layout::S3 { columns },
        format,
        manifest: at.to_owned(),
    })
}

fn open_gcs(at: &str, dir: &Path, v: &serde_json::Value, find: Find) -> Result<Report> {
    let names = v["report_shards_file_names"]
        .as_array()
        .ok_or_else(|| bad(at, "\"report_shards_file_names\" is not a list"))?;
    let shards = count(v, "shard_count", at)?;
    if shards != names.len() as u64 {
        return Err(bad(
            at,
            format!(
                "the manifest counts {shards} shards but names {}",
                names.len()
            ),
        ));
    }
    let records = count(v, "records_processed", at)?;
    let config = v.get("report_config");
    let format = config
        .and_then(|c| c.get("parquet_options"))
        .map_or(Format::Csv, |_| Format::Parquet);
    let filters = config.and_then(|c| c.pointer("/object_metadata_report_options/storage_filters"));
    let bucket = filters
        .and_then(|f| f.get("bucket"))
        .and_then(|b| b.as_str())
        .filter(|b| !b.is_empty())
        .map(str::to_owned);
    let prefix = declared_prefix(filters, at)?;
    let mut files = Vec::with_capacity(names.len());
    for n in names {
        let name = n
            .as_str()
            .ok_or_else(|| bad(at, "a shard name is not text"))?;
        let path = find(dir, name).ok_or_else(|| {
            bad(
                at,
                format!("shard {name}, which the manifest names, is not beside it"),
            )
        })?;
        files.push(path);
    }
    let made_at = v
        .get("snapshot_time")
        .and_then(|t| t.as_str())
        .unwrap_or("an unknown time")
        .to_owned();
    let mut r = Report {
        scheme: Scheme::Gs,
        bucket: bucket.clone().unwrap_or_default(),
        made_at_ns: rfc3339_ns(&made_at),
        made_at,
        prefix,
        files,
        checked: Vec::new(),
        layout: Layout::Gcs,
        format,
        manifest: at.to_owned(),
    };
    // The manifest gives no shard's size or checksum: each shard's are
    // taken here, with the record count, and the bucket when the manifest
    // does not say it (every row must then name the same one).
    let mut rows = 0u64;
    let mut seen = bucket;
    for path in &r.files {
        r.checked.push(check_file(at, path, None, None)?);
        for row in r.file_rows(path)? {
            let row = row?;
            match (&seen, &row.bucket) {
                (None, Some(b)) => seen = Some(b.clone()),
                (Some(s), Some(b)) if s != b => {
                    return Err(bad(
                        at,
                        format!(
                            "{} holds a row of bucket {b} in a report of {s}: refused (shards of two reports?)",
                            path.display()
                        ),
                    ));
                }
                _ => {}
            }
            rows += 1;
        }
    }
    if records != rows {
        return Err(bad(
            at,
            format!(
                "the manifest counts {records} records but its shards hold {rows} (cut short, or another report's shard?)"
            ),
        ));
    }
    r.bucket = seen.ok_or_else(|| bad(at, "neither the manifest nor the rows name the bucket"))?;
    Ok(r)
}

/// The key prefix a GCS report's `storage_filters` limit it to. A filter
/// other than the bucket and a prefix is refused: shoal could not tell
/// which objects such a report leaves out, and an object left out looks
/// deleted.
fn declared_prefix(filters: Option<&serde_json::Value>, at: &str) -> Result<Option<String>> {
    let Some(filters) = filters.and_then(|f| f.as_object()) else {
        return Ok(None);
    };
    let mut prefix = None;
    for (k, val) in filters {
        if k == "bucket" || val.is_null() || val.as_str() == Some("") {
            continue;
        }
        match val.as_str() {
            Some(p) if k.to_ascii_lowercase().contains("prefix") => prefix = Some(p.to_owned()),
            _ => {
                return Err(bad(
                    at,
                    format!(
                        "the report is filtered by storage_filters.{k} = {val}, which shoal cannot check: refused (use a report of the whole bucket, or of a prefix)"
                    ),
                ));
            }
        }
    }
    Ok(prefix)
}

/// The file a manifest names by `key` (an object name in the report's
/// bucket): looked for below the manifest's folder and its parents, by
/// the key's trailing path components, longest first, so a report copied
/// down whole (from any level of its prefix) is found.
fn find_file(dir: &Path, key: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = key.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == ".." || *p == ".") {
        return None;
    }
    let mut base = Some(dir);
    for _ in 0..6 {
        let b = base?;
        for i in 0..parts.len() {
            let p = b.join(parts[i..].join("/"));
            if p.is_file() {
                return Some(p);
            }
        }
        base = b.parent();
    }
    None
}

/// Reads `path` whole and checks its size and MD5 against what the
/// manifest gives; returns both as read.
fn check_file(at: &str, path: &Path, size: Option<u64>, md5: Option<[u8; 16]>) -> Result<Sum> {
    let mut f = std::fs::File::open(path).map_err(|e| io(path, e))?;
    check_open(at, path, &mut f, size, md5)
}

/// [`check_file`] of a file already open (read from where it is, left at
/// its end).
fn check_open(
    at: &str,
    path: &Path,
    f: &mut std::fs::File,
    size: Option<u64>,
    md5: Option<[u8; 16]>,
) -> Result<Sum> {
    use md5::Digest;
    let mut hash = md5::Md5::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = f.read(&mut buf).map_err(|e| io(path, e))?;
        if k == 0 {
            break;
        }
        hash.update(&buf[..k]);
        n += k as u64;
    }
    let got = <[u8; 16]>::from(hash.finalize());
    let shown = path.display();
    if let Some(s) = size
        && s != n
    {
        return Err(bad(
            at,
            format!(
                "{shown} has {n} bytes but the manifest says {s}: refused (cut short, or another report's file?)"
            ),
        ));
    }
    if let Some(m) = md5
        && m != got
    {
        return Err(bad(
            at,
            format!("{shown}'s MD5 is not the manifest's: refused (another report's file?)"),
        ));
    }
    Ok(Sum { size: n, md5: got })
}

/// One object as a report lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Row {
    /// The object's name (decoded).
    pub key: String,
    /// Bytes.
    pub size: u64,
    /// Last modified, in nanoseconds since the epoch.
    pub updated_ns: Option<i128>,
    /// S3 ETag (unquoted).
    pub etag: Option<String>,
    /// GCS generation.
    pub generation: Option<i64>,
    /// Base64 CRC32C (GCS).
    pub crc32c: Option<String>,
    /// MD5 as 32 hex digits.
    pub md5: Option<String>,
    /// Storage class.
    pub storage_class: Option<String>,
    #[serde(skip)]
    bucket: Option<String>,
}

impl Report {
    /// Every current object's row, in the files' order (not sorted).
    pub fn rows(&self) -> impl Iterator<Item = Result<Row>> + '_ {
        self.files.iter().flat_map(move |f| {
            let it: Box<dyn Iterator<Item = Result<Row>>> = match self.file_rows(f) {
                Ok(it) => it,
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            it
        })
    }

    /// Data file `i` as the check saw it, for a task to read later (one
    /// Dask partition): see [`Part`].
    pub fn part(&self, i: usize) -> Result<Part> {
        let (path, sum) = self.files.get(i).zip(self.checked.get(i)).ok_or_else(|| {
            bad(
                &self.manifest,
                format!("the report has no checked file {i}"),
            )
        })?;
        Ok(Part {
            manifest: self.manifest.clone(),
            file: path.display().to_string(),
            size: sum.size,
            md5: hex(sum.md5),
            generation: None,
            etag: None,
            bucket: self.bucket.clone(),
            layout: self.layout.clone(),
            format: self.format,
        })
    }

    /// How long before `now_ns` (nanoseconds since the epoch) the store
    /// took the snapshot, in words ("3 days old"), or None when the
    /// manifest gives no time that parses.
    pub fn age(&self, now_ns: i128) -> Option<String> {
        let ns = self.made_at_ns?;
        let plural = |n: i128, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
        let words = |d: i128| {
            let mins = d / 60_000_000_000;
            if mins < 120 {
                plural(mins, "minute")
            } else if mins < 48 * 60 {
                plural(mins / 60, "hour")
            } else {
                plural(mins / (24 * 60), "day")
            }
        };
        Some(if now_ns >= ns {
            format!("{} old", words(now_ns - ns))
        } else {
            format!(
                "dated {} in the future (is this machine's clock right?)",
                words(ns - now_ns)
            )
        })
    }

    /// Whether the report can stand for `side`'s listing (names relative
    /// to `root`): it is of the side's store and bucket, and a prefix it
    /// declares holds all of `root`. Said before anything runs.
    pub fn check_side(&self, side: &Location, root: &str) -> Result<()> {
        let of = format!("{}{}", self.scheme.prefix(), self.bucket);
        if side.scheme != self.scheme || side.bucket != self.bucket {
            return Err(bad(
                &self.manifest,
                format!("the report lists {of}, not {side}"),
            ));
        }
        if let Some(p) = &self.prefix
            && !root.starts_with(p.as_str())
        {
            return Err(bad(
                &self.manifest,
                format!(
                    "the report lists only the keys of {of} starting {p:?}, not all of {side} (objects outside it would look absent)"
                ),
            ));
        }
        Ok(())
    }

    fn file_rows(&self, path: &Path) -> Result<Box<dyn Iterator<Item = Result<Row>>>> {
        let f = std::fs::File::open(path).map_err(|e| io(path, e))?;
        self.read_rows(f, path)
    }

    /// The rows of the open data file `f` (at `path`); a row naming
    /// another bucket than the report's is an error at its line.
    fn read_rows(
        &self,
        f: std::fs::File,
        path: &Path,
    ) -> Result<Box<dyn Iterator<Item = Result<Row>>>> {
        let rows = match self.format {
            Format::Csv => self.csv_rows(f, path),
            Format::Parquet => self.parquet_rows(f, path),
        }?;
        if self.bucket.is_empty() {
            return Ok(rows);
        }
        let (bucket, file) = (self.bucket.clone(), path.display().to_string());
        Ok(Box::new(rows.enumerate().map(move |(i, row)| {
            let row = row?;
            match &row.bucket {
                Some(b) if *b != bucket => Err(bad(
                    &file,
                    format!(
                        "row {} is of bucket {b}, in a report of {bucket}: refused (another report's file?)",
                        i + 1
                    ),
                )),
                _ => Ok(row),
            }
        })))
    }

    fn csv_rows(
        &self,
        f: std::fs::File,
        path: &Path,
    ) -> Result<Box<dyn Iterator<Item = Result<Row>>>> {
        let name = path.display().to_string();
        let input: Box<dyn Read> = if name.ends_with(".gz") {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(f)))
        } else {
            Box::new(BufReader::new(f))
        };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(self.layout == Layout::Gcs)
            .flexible(false)
            .from_reader(input);
        let columns: Vec<String> = match &self.layout {
            Layout::S3 { columns } => columns.clone(),
            Layout::Gcs => reader
                .headers()
                .map_err(|e| bad(&name, format!("the shard's header row: {e}")))?
                .iter()
                .map(str::to_owned)
                .collect(),
        };
        let s3 = matches!(self.layout, Layout::S3 { .. });
        // S3 writes CSV keys URL-encoded.
        let c = Cols::find(&columns, s3, s3, &name)?;
        let records = reader.into_records().enumerate();
        Ok(Box::new(records.filter_map(move |(i, rec)| {
            // Line numbers count the header row of a GCS shard.
            let at = format!("{name}:{}", i + 1 + usize::from(!s3));
            let rec = match rec {
                Ok(r) => r,
                Err(e) => return Some(Err(bad(&at, format!("not a row of the report: {e}")))),
            };
            c.row(&rec).map_err(|why| bad(&at, why)).transpose()
        })))
    }

    fn parquet_rows(
        &self,
        f: std::fs::File,
        path: &Path,
    ) -> Result<Box<dyn Iterator<Item = Result<Row>>>> {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let name = path.display().to_string();
        let reader = SerializedFileReader::new(f)
            .map_err(|e| bad(&name, format!("not a readable Parquet file: {e}")))?;
        let columns: Vec<String> = reader
            .metadata()
            .file_metadata()
            .schema()
            .get_fields()
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        let s3 = matches!(self.layout, Layout::S3 { .. });
        // Parquet keys are written as they are (no URL encoding).
        let c = Cols::find(&columns, s3, false, &name)?;
        let rows = reader.into_iter().enumerate();
        Ok(Box::new(rows.filter_map(move |(i, row)| {
            let at = format!("{name}: row {}", i + 1);
            let row = match row {
                Ok(r) => r,
                Err(e) => return Some(Err(bad(&at, format!("not a row of the report: {e}")))),
            };
            let fields = ParquetFields(
                row.get_column_iter()
                    .map(|(_, v)| parquet_text(v))
                    .collect(),
            );
            c.row(&fields).map_err(|why| bad(&at, why)).transpose()
        })))
    }
}

/// Whether a file's column `name` is the column `want` (`LastModifiedDate`
/// is `last_modified_date`, `ETag` is `e_tag`).
fn same_column(name: &str, want: &str) -> bool {
    let norm = |s: &str| {
        s.chars()
            .filter(|c| *c != '_')
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    norm(name) == norm(want)
}

/// A Parquet value as the text its CSV column holds: timestamps as
/// RFC 3339, nulls as empty.
fn parquet_text(v: &parquet::record::Field) -> String {
    use parquet::record::Field;
    let rfc3339 = |ns: i128| {
        time::OffsetDateTime::from_unix_timestamp_nanos(ns)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| ns.to_string())
    };
    match v {
        Field::Null => String::new(),
        Field::Str(s) => s.clone(),
        Field::Bytes(b) => String::from_utf8_lossy(b.data()).into_owned(),
        Field::TimestampMillis(ms) => rfc3339(i128::from(*ms) * 1_000_000),
        Field::TimestampMicros(us) => rfc3339(i128::from(*us) * 1_000),
        other => other.to_string(),
    }
}

/// The cells of one row, as [`Cols::row`] reads them.
trait Fields {
    fn field(&self, i: usize) -> Option<&str>;
}

impl Fields for csv::StringRecord {
    fn field(&self, i: usize) -> Option<&str> {
        self.get(i)
    }
}

struct ParquetFields(Vec<String>);

impl Fields for ParquetFields {
    fn field(&self, i: usize) -> Option<&str> {
        self.0.get(i).map(String::as_str)
    }
}

/// Column positions of one file.
struct Cols {
    /// Keys are URL-encoded (S3's CSV).
    url_encoded: bool,
    bucket: Option<usize>,
    key: usize,
    size: usize,
    updated: Option<usize>,
    etag: Option<usize>,
    generation: Option<usize>,
    crc32c: Option<usize>,
    md5: Option<usize>,
    class: Option<usize>,
    latest: Option<usize>,
    delete_marker: Option<usize>,
}

impl Cols {
    /// The columns of a file whose header (or schema) is `columns`.
    fn find(columns: &[String], s3: bool, url_encoded: bool, name: &str) -> Result<Cols> {
        let col = |n: &str| columns.iter().position(|c| same_column(c, n));
        Ok(Cols {
            url_encoded,
            bucket: col("Bucket"),
            key: if s3 { col("Key") } else { col("name") }
                .ok_or_else(|| bad(name, "no object name column"))?,
            size: col("Size").ok_or_else(|| bad(name, "no size column"))?,
            updated: if s3 {
                col("LastModifiedDate")
            } else {
                col("updated")
            },
            etag: if s3 { col("ETag") } else { None },
            generation: col("generation"),
            crc32c: if s3 { None } else { col("crc32c") },
            md5: if s3 { None } else { col("md5Hash") },
            class: if s3 {
                col("StorageClass")
            } else {
                col("storageClass")
            },
            latest: col("IsLatest"),
            delete_marker: col("IsDeleteMarker"),
        })
    }

    /// The row of a current object; None for an older version or a delete
    /// marker (versioned S3 reports list those too).
    fn row(&self, rec: &impl Fields) -> std::result::Result<Option<Row>, String> {
        let get = |i: Option<usize>| i.and_then(|i| rec.field(i)).filter(|s| !s.is_empty());
        if get(self.delete_marker) == Some("true") || get(self.latest) == Some("false") {
            return Ok(None);
        }
        let raw = rec.field(self.key).ok_or("no object name")?;
        let key = if self.url_encoded {
            // URL-encoded as an HTML form does (a space is '+').
            let plus = raw.replace('+', " ");
            percent_encoding::percent_decode_str(&plus)
                .decode_utf8()
                .map_err(|_| format!("the key {raw:?} does not decode to UTF-8"))?
                .into_owned()
        } else {
            raw.to_owned()
        };
        if key.is_empty() {
            return Err("an empty object name".into());
        }
        let size = get(Some(self.size))
            .ok_or("no size")?
            .parse::<u64>()
            .map_err(|_| "the size is not a number")?;
        let updated_ns = match get(self.updated) {
            // A Parquet `last_modified_date` written as plain int64:
            // milliseconds since the epoch.
            Some(t) if t.bytes().all(|b| b.is_ascii_digit()) => Some(
                t.parse::<i128>()
                    .map_err(|_| format!("the time {t:?} is not a number of milliseconds"))?
                    * 1_000_000,
            ),
            Some(t) => Some(
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .map_err(|e| format!("the time {t:?}: {e}"))?
                    .unix_timestamp_nanos(),
            ),
            None => None,
        };
        let generation = get(self.generation)
            .map(|g| {
                g.parse::<i64>()
                    .map_err(|_| "the generation is not a number")
            })
            .transpose()?;
        let md5 = match get(self.md5) {
            Some(b) => Some(
                md5_from_base64(b)
                    .map(hex)
                    .ok_or("md5Hash is not a base64 MD5")?,
            ),
            None => None,
        };
        let crc32c = get(self.crc32c).map(str::to_owned);
        if let Some(c) = &crc32c
            && crc32c_from_base64(c).is_none()
        {
            return Err("crc32c is not a base64 CRC32C".into());
        }
        Ok(Some(Row {
            key,
            size,
            updated_ns,
            etag: get(self.etag).map(|e| e.trim_matches('"').to_owned()),
            generation,
            crc32c,
            md5,
            storage_class: get(self.class).map(str::to_owned),
            bucket: get(self.bucket).map(str::to_owned),
        }))
    }
}

fn hex(b: [u8; 16]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Row {
    fn meta(&self) -> ObjectMeta {
        let md5 = self
            .md5
            .as_deref()
            .and_then(md5_from_hex)
            // A single-part S3 object's ETag is its MD5.
            .or_else(|| self.etag.as_deref().and_then(md5_from_hex));
        ObjectMeta {
            key: self.key.clone(),
            size: self.size,
            updated_ns: self.updated_ns,
            checksums: Checksums::default()
                .with_crc32c(self.crc32c.as_deref().and_then(crc32c_from_base64))
                .with_md5(md5),
            version: match (self.generation, &self.etag) {
                (Some(g), _) => Some(ObjectVersion::Generation(g)),
                (None, Some(e)) => Some(ObjectVersion::ETag(e.clone())),
                _ => None,
            },
            storage_class: self.storage_class.clone(),
            ..Default::default()
        }
    }
}

/// The report's objects under `side` (names relative to `root`), sorted by
/// key, as sync's listings are. Rows are checked as they are read: a row
/// of another bucket, an unreadable row or a key listed twice is an error
/// naming the file and line. Memory: [`RUN_LEN`] rows.
pub fn entries(
    report: &Report,
    side: &Location,
    root: &str,
) -> Result<impl Iterator<Item = Result<Entry>> + use<>> {
    entries_with(report, side, root, RUN_LEN)
}

fn entries_with(
    report: &Report,
    side: &Location,
    root: &str,
    run_len: usize,
) -> Result<impl Iterator<Item = Result<Entry>> + use<>> {
    report.check_side(side, root)?;
    let temp = format!("a temporary file sorting {}", report.manifest);
    let mut sorter = Sorter::new(run_len);
    // Each row's bucket is checked as it is read (`Report::read_rows`).
    for row in report.rows() {
        let row = row?;
        if !row.key.starts_with(root) {
            continue;
        }
        sorter
            .push(ByKey(row))
            .map_err(|e| Error::io(Op::Write, &temp, e))?;
    }
    let sorted = sorter.sorted().map_err(|e| Error::io(Op::Read, &temp, e))?;
    let side = side.clone();
    let root = root.to_owned();
    let manifest = report.manifest.clone();
    let mut last: Option<String> = None;
    Ok(sorted.map(move |row| {
        let ByKey(row) = row.map_err(|e| Error::io(Op::Read, &temp, e))?;
        if last.as_deref() == Some(row.key.as_str()) {
            return Err(bad(
                &manifest,
                format!("{} is listed twice: refused", row.key),
            ));
        }
        last = Some(row.key.clone());
        let src = Location {
            key: row.key.clone(),
            ..side.clone()
        };
        Ok(Entry {
            rel: row.key[root.len()..].to_owned(),
            meta: row.meta(),
            src,
        })
    }))
}

/// A row as the sort orders it: by key alone (a key listed twice is
/// refused as the merge meets it).
struct ByKey(Row);

impl Ord for ByKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.key.cmp(&o.0.key)
    }
}

impl PartialOrd for ByKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl PartialEq for ByKey {
    fn eq(&self, o: &Self) -> bool {
        self.0.key == o.0.key
    }
}

impl Eq for ByKey {}

/// A row spilled: every field but the bucket, which was checked as the
/// row was read and is not used after.
impl Spill for ByKey {
    fn put(&self, out: &mut Vec<u8>) {
        let r = &self.0;
        spill::put_str(out, &r.key);
        spill::put_u64(out, r.size);
        spill::put_opt(out, r.updated_ns, spill::put_i128);
        spill::put_opt(out, r.etag.as_deref(), spill::put_str);
        spill::put_opt(out, r.generation, |o, g| spill::put_i128(o, g.into()));
        spill::put_opt(out, r.crc32c.as_deref(), spill::put_str);
        spill::put_opt(out, r.md5.as_deref(), spill::put_str);
        spill::put_opt(out, r.storage_class.as_deref(), spill::put_str);
    }

    fn get(f: &mut spill::Fields<'_>) -> std::io::Result<Self> {
        Ok(ByKey(Row {
            key: f.str()?,
            size: f.u64()?,
            updated_ns: f.opt(spill::Fields::i128)?,
            etag: f.opt(spill::Fields::str)?,
            generation: f.opt(|f| {
                i64::try_from(f.i128()?)
                    .map_err(|_| std::io::Error::other("a generation out of range"))
            })?,
            crc32c: f.opt(spill::Fields::str)?,
            md5: f.opt(spill::Fields::str)?,
            storage_class: f.opt(spill::Fields::str)?,
            bucket: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(path: &Path, text: &str) {
        let f = std::fs::File::create(path).unwrap();
        let mut w = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        w.write_all(text.as_bytes()).unwrap();
        w.finish().unwrap();
    }

    fn md5_hex(path: &Path) -> String {
        hex(shoal_core::checksum::md5_digest(
            &std::fs::read(path).unwrap(),
        ))
    }

    /// An S3 report in the documented layout: the manifest in a dated
    /// folder, its data files under `data/`, keys URL-encoded.
    fn s3_report(dir: &Path, files: &[&str]) -> PathBuf {
        let schema = "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass";
        s3_report_of(dir, files.len(), "csv.gz", "CSV", schema, |p, i| {
            gz(p, files[i])
        })
    }

    /// An S3 report of `n` data files `f{i}.{ext}` (`write` makes each),
    /// the manifest naming each with its size and MD5.
    fn s3_report_of(
        dir: &Path,
        n: usize,
        ext: &str,
        format: &str,
        schema: &str,
        write: impl Fn(&Path, usize),
    ) -> PathBuf {
        let data = dir.join("inv/src-bucket/cfg/data");
        std::fs::create_dir_all(&data).unwrap();
        let mut listed = Vec::new();
        for i in 0..n {
            let p = data.join(format!("f{i}.{ext}"));
            write(&p, i);
            listed.push(serde_json::json!({
                "key": format!("inv/src-bucket/cfg/data/f{i}.{ext}"),
                "size": std::fs::metadata(&p).unwrap().len(),
                "MD5checksum": md5_hex(&p),
            }));
        }
        let mdir = dir.join("inv/src-bucket/cfg/2026-11-20T00-00Z");
        std::fs::create_dir_all(&mdir).unwrap();
        let m = mdir.join("manifest.json");
        std::fs::write(
            &m,
            serde_json::json!({
                "sourceBucket": "src-bucket",
                "destinationBucket": "arn:aws:s3:::inv",
                "version": "2016-11-30",
                "creationTimestamp": "1795000000000",
                "fileFormat": format,
                "fileSchema": schema,
                "files": listed,
            })
            .to_string(),
        )
        .unwrap();
        m
    }

    fn keys(r: &Report, side: &str, root: &str, run_len: usize) -> Result<Vec<String>> {
        let side = Location::parse(side).unwrap();
        entries_with(r, &side, root, run_len)?
            .map(|e| e.map(|e| e.rel))
            .collect()
    }

    #[test]
    fn s3_reports_are_read_whole_decoded_and_sorted() {
        let d = tempfile::tempdir().unwrap();
        let m = s3_report(
            d.path(),
            &[
                "\"src-bucket\",\"p/b+c%2Bd\",\"3\",\"2026-11-19T10:00:00.000Z\",\"0cc175b9c0f1b6a831c399e269772661\",\"STANDARD\"\n\
                 \"src-bucket\",\"p/%C3%A9\",\"1\",\"2026-11-19T10:00:00.000Z\",\"abc-2\",\"STANDARD\"\n",
                "\"src-bucket\",\"p/a\",\"5\",\"2026-11-19T10:00:00.000Z\",\"x\",\"GLACIER\"\n\
                 \"src-bucket\",\"q/outside\",\"5\",\"2026-11-19T10:00:00.000Z\",\"x\",\"STANDARD\"\n",
            ],
        );
        let r = open(&m).unwrap();
        assert_eq!(r.bucket, "src-bucket");
        assert_eq!(r.made_at, "2026-11-18T11:06:40Z");
        for run_len in [1, 2, 1000] {
            assert_eq!(
                keys(&r, "s3://src-bucket/p/", "p/", run_len).unwrap(),
                ["a", "b c+d", "é"],
                "runs of {run_len}"
            );
        }
        let side = Location::parse("s3://src-bucket/p/").unwrap();
        let e: Vec<Entry> = entries(&r, &side, "p/")
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(e[1].src.key, "p/b c+d");
        assert_eq!(e[1].meta.size, 3);
        assert_eq!(
            e[1].meta.checksums.md5(),
            md5_from_hex("0cc175b9c0f1b6a831c399e269772661")
        );
        assert_eq!(
            e[2].meta.checksums.md5(),
            None,
            "a multipart ETag is no MD5"
        );
        assert_eq!(e[0].meta.storage_class.as_deref(), Some("GLACIER"));
        // Another bucket's listing is refused.
        let other = Location::parse("s3://other/p/").unwrap();
        assert!(entries(&r, &other, "p/").is_err());
    }

    #[test]
    fn a_manifest_that_does_not_match_its_files_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let m = s3_report(d.path(), &["\"src-bucket\",\"a\",\"1\",\"\",\"\",\"\"\n"]);
        assert!(open(&m).is_ok());
        // A data file replaced by another of the same size.
        let f = d.path().join("inv/src-bucket/cfg/data/f0.csv.gz");
        let mut bytes = std::fs::read(&f).unwrap();
        let n = bytes.len();
        bytes[n - 5] ^= 1;
        std::fs::write(&f, &bytes).unwrap();
        let e = open(&m).unwrap_err().to_string();
        assert!(e.contains("MD5"), "{e}");
        // Cut short.
        std::fs::write(&f, &bytes[..n / 2]).unwrap();
        let e = open(&m).unwrap_err().to_string();
        assert!(e.contains("bytes but the manifest says"), "{e}");
        // Missing.
        std::fs::remove_file(&f).unwrap();
        let e = open(&m).unwrap_err().to_string();
        assert!(e.contains("is not beside it"), "{e}");
        // ORC.
        let text = std::fs::read_to_string(&m)
            .unwrap()
            .replace("\"CSV\"", "\"ORC\"");
        std::fs::write(&m, text).unwrap();
        let e = open(&m).unwrap_err().to_string();
        assert!(e.contains("reads CSV and Parquet"), "{e}");
    }

    #[test]
    fn duplicate_keys_and_bad_rows_are_errors_with_their_line() {
        let d = tempfile::tempdir().unwrap();
        let m = s3_report(
            d.path(),
            &[
                "\"src-bucket\",\"a\",\"1\",\"\",\"\",\"\"\n",
                "\"src-bucket\",\"a\",\"1\",\"\",\"\",\"\"\n",
            ],
        );
        let r = open(&m).unwrap();
        let e = keys(&r, "s3://src-bucket", "", 1).unwrap_err().to_string();
        assert!(e.contains("listed twice"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let m = s3_report(d.path(), &["\"src-bucket\",\"a\",\"one\",\"\",\"\",\"\"\n"]);
        let r = open(&m).unwrap();
        let e = keys(&r, "s3://src-bucket", "", 10).unwrap_err().to_string();
        assert!(e.contains("f0.csv.gz:1") && e.contains("size"), "{e}");
    }

    use shoal_testkit::parquet::{Cell, write as parquet_file};

    /// The Parquet schema S3 Inventory writes (the columns this test
    /// uses), as its manifest's fileSchema gives it.
    const S3_PARQUET_SCHEMA: &str = "message s3.inventory { required binary bucket (STRING); required binary key (STRING); optional binary version_id (STRING); optional boolean is_latest; optional boolean is_delete_marker; optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); optional binary e_tag (STRING); optional binary storage_class (STRING); }";

    /// An S3 Parquet report, one data file for each list of rows.
    fn s3_parquet_report(dir: &Path, files: &[Vec<Vec<Cell>>]) -> PathBuf {
        s3_report_of(
            dir,
            files.len(),
            "parquet",
            "Parquet",
            S3_PARQUET_SCHEMA,
            |p, i| parquet_file(p, S3_PARQUET_SCHEMA, &files[i]),
        )
    }

    fn s3_row(
        key: &'static str,
        latest: bool,
        marker: bool,
        size: i64,
        etag: &'static str,
    ) -> Vec<Cell<'static>> {
        vec![
            Cell::Text("src-bucket"),
            Cell::Text(key),
            Cell::Text("v1"),
            Cell::Bool(latest),
            Cell::Bool(marker),
            if marker { Cell::Null } else { Cell::Int(size) },
            Cell::Int(1_795_000_000_123),
            Cell::Text(etag),
            Cell::Text("STANDARD"),
        ]
    }

    #[test]
    fn s3_parquet_reports_are_read_as_their_csv_would_be() {
        let d = tempfile::tempdir().unwrap();
        let md5 = "0cc175b9c0f1b6a831c399e269772661";
        let m = s3_parquet_report(
            d.path(),
            &[
                vec![
                    // Parquet keys are not URL-encoded: '+' and '%' stay.
                    s3_row("p/b+c%2Bd", true, false, 3, md5),
                    s3_row("p/é", true, false, 1, "abc-2"),
                    s3_row("p/old", false, false, 9, md5),
                ],
                vec![
                    s3_row("p/a", true, false, 5, md5),
                    s3_row("p/gone", true, true, 0, ""),
                    s3_row("q/outside", true, false, 5, md5),
                ],
            ],
        );
        let r = open(&m).unwrap();
        assert_eq!(r.bucket, "src-bucket");
        for run_len in [1, 2, 1000] {
            assert_eq!(
                keys(&r, "s3://src-bucket/p/", "p/", run_len).unwrap(),
                ["a", "b+c%2Bd", "é"],
                "runs of {run_len}"
            );
        }
        let side = Location::parse("s3://src-bucket/p/").unwrap();
        let e: Vec<Entry> = entries(&r, &side, "p/")
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(e[1].meta.size, 3);
        assert_eq!(e[1].meta.checksums.md5(), md5_from_hex(md5));
        assert_eq!(e[1].meta.updated_ns, Some(1_795_000_000_123_000_000));
        assert_eq!(e[2].meta.checksums.md5(), None);
        // One data file swapped for another report's: refused whole.
        let other = d.path().join("other");
        let m2 = s3_parquet_report(&other, &[vec![s3_row("p/x", true, false, 1, md5)]]);
        assert!(open(&m2).is_ok());
        std::fs::copy(
            other.join("inv/src-bucket/cfg/data/f0.parquet"),
            d.path().join("inv/src-bucket/cfg/data/f1.parquet"),
        )
        .unwrap();
        let e = open(&m).unwrap_err().to_string();
        assert!(
            e.contains("bytes but the manifest says") || e.contains("MD5"),
            "{e}"
        );
        // A file that is not Parquet, its size and MD5 in the manifest
        // matching: an error naming the file, not a panic.
        let f0 = d.path().join("inv/src-bucket/cfg/data/f0.parquet");
        std::fs::write(&f0, b"not parquet at all").unwrap();
        let m3 = s3_parquet_report(&d.path().join("third"), &[vec![]]);
        let f = d.path().join("third/inv/src-bucket/cfg/data/f0.parquet");
        std::fs::write(&f, b"not parquet at all").unwrap();
        let text = std::fs::read_to_string(&m3).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["files"][0]["size"] = 18.into();
        v["files"][0]["MD5checksum"] = md5_hex(&f).into();
        std::fs::write(&m3, v.to_string()).unwrap();
        let r3 = open(&m3).unwrap();
        let e = keys(&r3, "s3://src-bucket/", "", 10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a readable Parquet file") && e.contains("f0.parquet"),
            "{e}"
        );
    }

    #[test]
    fn gcs_parquet_reports_are_counted_and_read() {
        let d = tempfile::tempdir().unwrap();
        let schema = "message inventory { optional binary bucket (STRING); optional binary name (STRING); optional int64 size; optional int64 updated (TIMESTAMP(MICROS,true)); optional int64 generation; optional binary crc32c (STRING); optional binary md5Hash (STRING); }";
        let row = |name: &'static str, size: i64, generation: i64| {
            vec![
                Cell::Text("gb"),
                Cell::Text(name),
                Cell::Int(size),
                Cell::Int(1_795_000_000_000_001),
                Cell::Int(generation),
                Cell::Text("AAAAAA=="),
                Cell::Null,
            ]
        };
        let names = [
            "cfg_2026-11-20T00:00_0.parquet",
            "cfg_2026-11-20T00:00_1.parquet",
        ];
        parquet_file(
            &d.path().join(names[0]),
            schema,
            &[row("d/x,y", 3, 17), row("d/b", 4, 19)],
        );
        parquet_file(&d.path().join(names[1]), schema, &[row("d/a", 2, 18)]);
        let manifest = |records: u64| {
            serde_json::json!({
                "report_config": {"parquet_options": {}},
                "records_processed": records,
                "snapshot_time": "2026-11-20T00:00:00Z",
                "shard_count": 2,
                "report_shards_file_names": names,
            })
            .to_string()
        };
        let m = d.path().join("cfg_2026-11-20T00:00_manifest.json");
        std::fs::write(&m, manifest(3)).unwrap();
        let r = open(&m).unwrap();
        assert_eq!((r.scheme, r.bucket.as_str()), (Scheme::Gs, "gb"));
        assert_eq!(keys(&r, "gs://gb/d/", "d/", 1).unwrap(), ["a", "b", "x,y"]);
        let side = Location::parse("gs://gb/d/").unwrap();
        let e: Vec<Entry> = entries(&r, &side, "d/")
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(e[0].meta.version, Some(ObjectVersion::Generation(18)));
        assert_eq!(e[0].meta.updated_ns, Some(1_795_000_000_000_001_000));
        assert_eq!(e[0].meta.checksums.crc32c(), crc32c_from_base64("AAAAAA=="));
        // A shard of another day's report beside the manifest: the count
        // no longer matches.
        std::fs::write(&m, manifest(4)).unwrap();
        let e = open(&m).unwrap_err().to_string();
        assert!(e.contains("counts 4 records but its shards hold 3"), "{e}");
    }

    fn gcs_report(dir: &Path, shards: &[&str], records: u64) -> PathBuf {
        let mut names = Vec::new();
        for (i, s) in shards.iter().enumerate() {
            let name = format!("cfg_2026-11-20T00:00_{i}.csv");
            std::fs::write(dir.join(&name), s).unwrap();
            names.push(name);
        }
        let m = dir.join("cfg_2026-11-20T00:00_manifest.json");
        std::fs::write(
            &m,
            serde_json::json!({
                "report_config": {"csv_options": {"header_required": true}},
                "records_processed": records,
                "snapshot_time": "2026-11-20T00:00:00Z",
                "shard_count": shards.len(),
                "report_shards_file_names": names,
            })
            .to_string(),
        )
        .unwrap();
        m
    }

    #[test]
    fn gcs_reports_are_counted_and_read_by_their_header() {
        let d = tempfile::tempdir().unwrap();
        let shards = [
            "bucket,name,size,updated,generation,crc32c,md5Hash\n\
             gb,\"d/x,y\",3,2026-11-19T10:00:00Z,17,AAAAAA==,1B2M2Y8AsgTpgAmY7PhCfg==\n",
            "bucket,name,size,updated,generation,crc32c,md5Hash\n\
             gb,d/a,2,2026-11-19T10:00:00Z,18,,\n",
        ];
        let m = gcs_report(d.path(), &shards, 2);
        let r = open(&m).unwrap();
        assert_eq!((r.scheme, r.bucket.as_str()), (Scheme::Gs, "gb"));
        assert_eq!(keys(&r, "gs://gb/d/", "d/", 1).unwrap(), ["a", "x,y"]);
        let side = Location::parse("gs://gb/d/").unwrap();
        let e: Vec<Entry> = entries(&r, &side, "d/")
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(e[1].meta.version, Some(ObjectVersion::Generation(17)));
        assert_eq!(e[1].meta.checksums.crc32c(), Some(0));
        // A record count that does not match (a shard cut or missing rows).
        let d = tempfile::tempdir().unwrap();
        let m = gcs_report(d.path(), &shards, 3);
        let e = open(&m).unwrap_err().to_string();
        assert!(e.contains("counts 3 records but its shards hold 2"), "{e}");
    }

    /// A row spilled to a sorted run comes back field for field (the
    /// bucket, checked as the row was read, is not kept), whichever fields
    /// the report had.
    #[test]
    fn a_spilled_row_comes_back_whole() {
        let full = Row {
            key: "p/é\n\"k\"".into(),
            size: u64::MAX,
            updated_ns: Some(-1_700_000_000_123_456_789),
            etag: Some("0123456789abcdef0123456789abcdef-2".into()),
            generation: Some(i64::MIN),
            crc32c: Some("AAAAAA==".into()),
            md5: Some("00ff".into()),
            storage_class: Some("STANDARD".into()),
            bucket: None,
        };
        let bare = Row {
            key: String::new(),
            size: 0,
            updated_ns: None,
            etag: None,
            generation: None,
            crc32c: None,
            md5: None,
            storage_class: None,
            bucket: None,
        };
        let mut sorter = Sorter::new(1);
        for r in [&full, &bare] {
            let mut r = r.clone();
            r.bucket = Some("src-bucket".into());
            sorter.push(ByKey(r)).unwrap();
        }
        let back: Vec<Row> = sorter.sorted().unwrap().map(|r| r.unwrap().0).collect();
        assert_eq!(back, [bare, full]);
    }
}

/// The manifest's counts, the rows' bucket, a declared prefix, the
/// report's age, and the parts a Dask task reads (issue 52).
#[cfg(test)]
mod whole {
    use super::*;

    const SHARDS: [&str; 2] = [
        "bucket,name,size\ngb,d/a,1\ngb,d/b,2\n",
        "bucket,name,size\ngb,d/c,3\n",
    ];

    /// A GCS report of [`SHARDS`] whose manifest is `v` with the shard
    /// names filled in.
    fn gcs(dir: &Path, mut v: serde_json::Value) -> PathBuf {
        let mut names = Vec::new();
        for (i, s) in SHARDS.iter().enumerate() {
            let name = format!("cfg_{i}.csv");
            std::fs::write(dir.join(&name), s).unwrap();
            names.push(name);
        }
        v["report_shards_file_names"] = names.into();
        let m = dir.join("cfg_manifest.json");
        std::fs::write(&m, v.to_string()).unwrap();
        m
    }

    fn refusal(m: &Path) -> String {
        open(m).unwrap_err().to_string()
    }

    /// proto3's JSON writes int64 counts as strings: they are checked as
    /// numbers are. Before, a string count skipped the check, and a shard
    /// missing rows was trusted (and `sync --delete` deleted live objects).
    #[test]
    fn gcs_counts_written_as_strings_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let m = gcs(
            d.path(),
            serde_json::json!({"records_processed": "3", "shard_count": "2"}),
        );
        assert_eq!(open(&m).unwrap().bucket, "gb");
        let m = gcs(
            d.path(),
            serde_json::json!({"records_processed": "5", "shard_count": "2"}),
        );
        let e = refusal(&m);
        assert!(e.contains("counts 5 records but its shards hold 3"), "{e}");
        assert!(e.contains("cfg_manifest.json"), "{e}");
        let m = gcs(
            d.path(),
            serde_json::json!({"records_processed": 3, "shard_count": "3"}),
        );
        assert!(refusal(&m).contains("counts 3 shards but names 2"));
    }

    /// A count that is missing or not a count is refused, naming the
    /// manifest and the field, rather than left unchecked.
    #[test]
    fn a_missing_or_unreadable_count_is_refused() {
        let d = tempfile::tempdir().unwrap();
        for (v, field) in [
            (serde_json::json!({"shard_count": 2}), "records_processed"),
            (serde_json::json!({"records_processed": 3}), "shard_count"),
            (
                serde_json::json!({"records_processed": null, "shard_count": 2}),
                "records_processed",
            ),
            (
                serde_json::json!({"records_processed": "3 ", "shard_count": 2}),
                "records_processed",
            ),
            (
                serde_json::json!({"records_processed": -3, "shard_count": 2}),
                "records_processed",
            ),
            (
                serde_json::json!({"records_processed": 3.5, "shard_count": 2}),
                "records_processed",
            ),
            (
                serde_json::json!({"records_processed": 3, "shard_count": ""}),
                "shard_count",
            ),
        ] {
            let m = gcs(d.path(), v.clone());
            let e = refusal(&m);
            assert!(
                e.contains(&format!("\"{field}\"")) && e.contains("refused"),
                "{v}: {e}"
            );
            assert!(e.contains("cfg_manifest.json"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    /// An S3 manifest's file sizes are counts too (a string of digits
    /// read as one), and a file without a size or MD5 cannot be checked.
    #[test]
    fn s3_file_sizes_and_md5s_must_be_there() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let body = b"\"src\",\"a\",\"1\"\n";
        std::fs::write(data.join("f0.csv"), body).unwrap();
        let md5 = hex(shoal_core::checksum::md5_digest(body));
        let m = d.path().join("manifest.json");
        let write = |file: serde_json::Value| {
            let v = serde_json::json!({"sourceBucket": "src", "fileFormat": "CSV",
                "fileSchema": "Bucket, Key, Size", "files": [file]});
            std::fs::write(&m, v.to_string()).unwrap();
        };
        write(
            serde_json::json!({"key": "data/f0.csv", "size": body.len().to_string(), "MD5checksum": md5}),
        );
        assert!(open(&m).is_ok());
        write(serde_json::json!({"key": "data/f0.csv", "MD5checksum": md5}));
        let e = refusal(&m);
        assert!(
            e.contains("data/f0.csv") && e.contains("no \"size\""),
            "{e}"
        );
        write(serde_json::json!({"key": "data/f0.csv", "size": body.len()}));
        let e = refusal(&m);
        assert!(e.contains("MD5checksum"), "{e}");
        write(serde_json::json!({"key": "data/f0.csv", "size": body.len(), "MD5checksum": "nope"}));
        assert!(refusal(&m).contains("MD5checksum"));
    }

    /// Every row names the report's bucket: the manifest's when it says
    /// one, else the first row's.
    #[test]
    fn a_row_of_another_bucket_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let filtered = |bucket: &str| {
            serde_json::json!({"records_processed": 3, "shard_count": 2,
                "report_config": {"object_metadata_report_options": {"storage_filters": {"bucket": bucket}}}})
        };
        assert!(open(&gcs(d.path(), filtered("gb"))).is_ok());
        let e = refusal(&gcs(d.path(), filtered("other")));
        assert!(e.contains("bucket gb") && e.contains("other"), "{e}");
        // Shards of two buckets, the manifest naming none.
        let m = gcs(
            d.path(),
            serde_json::json!({"records_processed": 3, "shard_count": 2}),
        );
        std::fs::write(d.path().join("cfg_1.csv"), "bucket,name,size\nxb,d/c,3\n").unwrap();
        let e = refusal(&m);
        assert!(e.contains("bucket xb") && e.contains("cfg_1.csv"), "{e}");
        // The report's bucket against the side's.
        std::fs::write(d.path().join("cfg_1.csv"), SHARDS[1]).unwrap();
        let r = open(&m).unwrap();
        let e = keys_of(&r, "gs://other/d/", "d/").unwrap_err().to_string();
        assert!(
            e.contains("the report lists gs://gb, not gs://other/d/"),
            "{e}"
        );
        // An S3 row of another bucket than the manifest's sourceBucket.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("f0.csv"),
            "\"src\",\"a\",\"1\"\n\"xb\",\"b\",\"1\"\n",
        )
        .unwrap();
        let bytes = std::fs::read(d.path().join("f0.csv")).unwrap();
        let m = d.path().join("manifest.json");
        std::fs::write(
            &m,
            serde_json::json!({"sourceBucket": "src", "fileFormat": "CSV",
            "fileSchema": "Bucket, Key, Size", "files": [{"key": "f0.csv", "size": bytes.len(),
            "MD5checksum": hex(shoal_core::checksum::md5_digest(&bytes))}]})
            .to_string(),
        )
        .unwrap();
        let r = open(&m).unwrap();
        let e = keys_of(&r, "s3://src/", "").unwrap_err().to_string();
        assert!(e.contains("row 2 is of bucket xb"), "{e}");
        let e = r
            .part(0)
            .unwrap()
            .rows(&r.files[0])
            .unwrap()
            .find_map(|r| r.err())
            .unwrap()
            .to_string();
        assert!(e.contains("row 2 is of bucket xb"), "{e}");
    }

    fn keys_of(r: &Report, side: &str, root: &str) -> Result<Vec<String>> {
        let side = Location::parse(side).unwrap();
        entries(r, &side, root)?.map(|e| e.map(|e| e.rel)).collect()
    }

    /// A report limited to a prefix stands only for sides inside it; a
    /// filter shoal cannot read is refused.
    #[test]
    fn a_declared_prefix_must_hold_the_side() {
        let d = tempfile::tempdir().unwrap();
        let with = |filters: serde_json::Value| {
            serde_json::json!({"records_processed": 3, "shard_count": 2,
                "report_config": {"object_metadata_report_options": {"storage_filters": filters}}})
        };
        let m = gcs(
            d.path(),
            with(serde_json::json!({"bucket": "gb", "object_name_prefix": "d/"})),
        );
        let r = open(&m).unwrap();
        assert_eq!(r.prefix.as_deref(), Some("d/"));
        assert_eq!(keys_of(&r, "gs://gb/d/", "d/").unwrap(), ["a", "b", "c"]);
        let e = keys_of(&r, "gs://gb/", "").unwrap_err().to_string();
        assert!(
            e.contains("only the keys of gs://gb starting \"d/\""),
            "{e}"
        );
        let m = gcs(
            d.path(),
            with(serde_json::json!({"bucket": "gb", "created_after": "2026-01-01"})),
        );
        let e = refusal(&m);
        assert!(e.contains("storage_filters.created_after"), "{e}");
    }

    #[test]
    fn the_age_is_said_in_words() {
        let d = tempfile::tempdir().unwrap();
        let m = gcs(
            d.path(),
            serde_json::json!({"records_processed": 3, "shard_count": 2, "snapshot_time": "2026-11-20T00:00:00Z"}),
        );
        let r = open(&m).unwrap();
        let at = r.made_at_ns.unwrap();
        let min = 60_000_000_000i128;
        assert_eq!(r.age(at + 5 * min).as_deref(), Some("5 minutes old"));
        assert_eq!(r.age(at + 60 * 5 * min).as_deref(), Some("5 hours old"));
        assert_eq!(
            r.age(at + 24 * 60 * 3 * min + 7).as_deref(),
            Some("3 days old")
        );
        assert!(r.age(at - 3 * min).unwrap().contains("in the future"));
        let m = gcs(
            d.path(),
            serde_json::json!({"records_processed": 3, "shard_count": 2}),
        );
        assert_eq!(open(&m).unwrap().age(at), None);
    }

    /// A Dask task reads its file from the part the check made: the
    /// same bytes, or a refusal. Before, the task opened the manifest
    /// again and read whatever the folder held by then.
    #[test]
    fn a_part_reads_only_the_file_that_was_checked() {
        let d = tempfile::tempdir().unwrap();
        let m = gcs(
            d.path(),
            serde_json::json!({"records_processed": 3, "shard_count": 2}),
        );
        let r = open(&m).unwrap();
        let parts: Vec<Part> = (0..2)
            .map(|i| Part::from_json(&r.part(i).unwrap().to_json()).unwrap())
            .collect();
        let read = |p: &Part| -> Result<Vec<String>> {
            p.rows(Path::new(&p.file))?
                .map(|r| r.map(|r| r.key))
                .collect()
        };
        assert_eq!(read(&parts[0]).unwrap(), ["d/a", "d/b"]);
        assert_eq!(read(&parts[1]).unwrap(), ["d/c"]);
        // The folder refreshed: the same names, another report's rows.
        std::fs::write(d.path().join("cfg_1.csv"), "bucket,name,size\ngb,d/x,9\n").unwrap();
        let e = read(&parts[1]).unwrap_err().to_string();
        assert!(
            e.contains("not the file checked") && e.contains("cfg_manifest.json"),
            "{e}"
        );
        assert_eq!(read(&parts[0]).unwrap(), ["d/a", "d/b"]);
        assert!(Part::from_json("{}").is_err());
    }
}
