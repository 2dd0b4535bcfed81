//! Reports kept in a bucket, where the stores write them.
//!
//! A report is read from local files (its data files are read more than
//! once: checked whole, then sorted or cut into partitions), so a report
//! named by URL is first copied into a folder of its own: a new temporary
//! folder (private to this user, named at random, removed when the
//! [`Fetched`] is dropped), each data file downloaded into it by the
//! engine's downloader (checksums verified, each file renamed into place
//! only once whole). The manifest is read once, into memory, and the
//! report opened from it as a local one is, with every check that implies.
//!
//! Where the data files are: S3 Inventory's `files[].key` are keys in the
//! manifest's own bucket (the report's destination bucket); a GCS
//! report's shard names sit beside its manifest. Each is saved under its
//! last path component, and looked up only there (never in a folder above
//! the temporary one): the manifest is the store's text, so a name that
//! is empty, `.`, `..`, or given to two files is refused rather than
//! resolved.
//!
//! The check records the version (generation or ETag) of each data file
//! it downloaded. A Dask task reading one file later ([`fetch_part`])
//! downloads it pinned to that version, then checks its size and MD5
//! against the check's ([`super::Part::rows`]), and needs no manifest: a
//! report folder refreshed between the check and the task is refused,
//! not read as the report that was checked.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use shoal_core::retry::RetryPolicy;
use shoal_core::{Error, ErrorKind, Location, ObjectMeta, ObjectVersion, Op, Result, Store};

use super::{Part, Report, bad, open_value};
use crate::Run;

/// Data files downloaded at once (each by slices of its own when big).
const AT_ONCE: usize = 4;

/// A report copied down from a bucket (module doc).
#[derive(Debug)]
pub struct Fetched {
    /// The report, opened from the copy.
    pub report: Report,
    /// Each data file's URL, in the manifest's order.
    pub urls: Vec<Location>,
    /// The version of each data file that was downloaded and checked.
    pub versions: Vec<Option<ObjectVersion>>,
    /// Removed, with the copy, when this is dropped.
    _dir: tempfile::TempDir,
}

/// The name a data file is saved as: the last component of `key`.
fn local_name(key: &str) -> Option<&str> {
    let name = key.rsplit('/').next()?;
    (!name.is_empty() && name != "." && name != ".." && !name.contains('\\')).then_some(name)
}

/// The data files the manifest `v` (read from `manifest`) names, as URLs.
pub fn data_urls(manifest: &Location, v: &serde_json::Value) -> Result<Vec<Location>> {
    let at = manifest.to_string();
    let named = |field: &str| {
        bad(
            &at,
            format!("the manifest's \"{field}\" is not a list of names"),
        )
    };
    if v.get("fileSchema").is_some() || v.get("sourceBucket").is_some() {
        let files = v
            .get("files")
            .and_then(|f| f.as_array())
            .ok_or_else(|| named("files"))?;
        files
            .iter()
            .map(|f| {
                let key = f
                    .get("key")
                    .and_then(|k| k.as_str())
                    .ok_or_else(|| named("files"))?;
                Ok(manifest.with_key(key.to_owned()))
            })
            .collect()
    } else if let Some(names) = v.get("report_shards_file_names") {
        let names = names
            .as_array()
            .ok_or_else(|| named("report_shards_file_names"))?;
        let folder = match manifest.key.rfind('/') {
            Some(i) => &manifest.key[..=i],
            None => "",
        };
        names
            .iter()
            .map(|n| {
                let n = n
                    .as_str()
                    .ok_or_else(|| named("report_shards_file_names"))?;
                // A bare name sits beside the manifest; one with a path is
                // the shard's object name.
                let key = if n.contains('/') {
                    n.to_owned()
                } else {
                    format!("{folder}{n}")
                };
                Ok(manifest.with_key(key))
            })
            .collect()
    } else {
        Err(bad(
            &at,
            "neither an S3 Inventory manifest (sourceBucket, fileSchema, files) nor a GCS inventory report manifest (report_shards_file_names)",
        ))
    }
}

/// Copies the report whose manifest is at `manifest` into a new temporary
/// folder and opens it, checked whole against its manifest as
/// [`super::open`] checks a local one.
pub async fn fetch(
    store: Arc<dyn Store>,
    manifest: &Location,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Fetched> {
    let at = manifest.to_string();
    let text = crate::into_memory::read_into_memory(
        store.clone(),
        manifest,
        None,
        None,
        None,
        run,
        *policy,
    )
    .await?
    .bytes;
    let v: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| bad(&at, format!("not an inventory manifest (JSON): {e}")))?;
    let urls = data_urls(manifest, &v)?;
    let mut seen = HashSet::new();
    for u in &urls {
        let name = local_name(&u.key).ok_or_else(|| {
            bad(
                &at,
                format!(
                    "names a data file {:?} that cannot be saved under its own name",
                    u.key
                ),
            )
        })?;
        if !seen.insert(name) {
            return Err(bad(
                &at,
                format!("names two data files called {name}: refused"),
            ));
        }
    }
    let dir = temp_dir()?;
    let mut copies = futures::stream::iter(urls.iter().cloned().enumerate())
        .map(|(i, u)| {
            let store = store.clone();
            let dest = dir.path().join(local_name(&u.key).expect("checked above"));
            async move {
                let got = crate::download::download_to_file(store, &u, &dest, run, policy)
                    .await
                    .map_err(|e| match e.kind() {
                        // Said of the manifest, which is what the user gave.
                        ErrorKind::NotFound => bad(
                            &manifest.to_string(),
                            format!(
                                "names {u}, which is not there (is the report still being written?)"
                            ),
                        ),
                        _ => e.with_url(u.to_string()),
                    })?;
                Ok::<_, Error>((i, got.source_version))
            }
        })
        .buffer_unordered(AT_ONCE);
    let mut versions = vec![None; urls.len()];
    while let Some(r) = copies.next().await {
        let (i, version) = r?;
        versions[i] = version;
    }
    drop(copies);
    let find = |d: &Path, key: &str| -> Option<PathBuf> {
        let p = d.join(local_name(key)?);
        p.is_file().then_some(p)
    };
    let report = open_value(&v, dir.path(), &at, &find)?;
    Ok(Fetched {
        report,
        urls,
        versions,
        _dir: dir,
    })
}

impl Fetched {
    /// Data file `i` as the check read it, named by its URL and pinned to
    /// the version that was read: what a task fetches with [`fetch_part`].
    pub fn part(&self, i: usize) -> Result<Part> {
        let mut p = self.report.part(i)?;
        p.pin(&self.urls[i], self.versions[i].as_ref());
        Ok(p)
    }
}

fn temp_dir() -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("shoal-inventory-")
        .tempdir()
        .map_err(|e| Error::io(Op::Read, std::env::temp_dir().display().to_string(), e))
}

/// One data file of a report in a bucket, copied down for a task.
#[derive(Debug)]
pub struct FetchedPart {
    /// The copy, to read with [`Part::rows`].
    pub path: PathBuf,
    /// Removed, with the copy, when this is dropped.
    _dir: tempfile::TempDir,
}

/// Copies the data file of `part` (at `url`, the part's file) into a new
/// temporary folder, pinned to the version the check read where the
/// store has one. A file gone or replaced since is refused, naming the
/// manifest; [`Part::rows`] then checks the copy's size and MD5.
pub async fn fetch_part(
    store: Arc<dyn Store>,
    part: &Part,
    url: &Location,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<FetchedPart> {
    let name = local_name(&url.key).ok_or_else(|| {
        bad(
            &part.manifest,
            format!("{url} cannot be saved under its own name"),
        )
    })?;
    let dir = temp_dir()?;
    let path = dir.path().join(name);
    let version = part.version();
    let meta = ObjectMeta {
        key: url.key.clone(),
        size: part.size,
        version: version.clone(),
        ..Default::default()
    };
    crate::download::download_known(store, url, &meta, &path, run, policy)
        .await
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound
            | ErrorKind::Precondition
            | ErrorKind::Changed
            | ErrorKind::Integrity => {
                let checked = version.map_or_else(String::new, |v| format!(" at {v}"));
                bad(
                    &part.manifest,
                    format!(
                        "{url}, checked{checked} when the report was opened, is gone or was replaced since ({}): refused (open the report again)",
                        e.message()
                    ),
                )
            }
            _ => e.with_url(url.to_string()),
        })?;
    Ok(FetchedPart { path, _dir: dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(url: &str) -> Location {
        Location::parse(url).unwrap()
    }

    /// The data files' URLs the manifest `v` at `manifest` names.
    fn urls(manifest: &str, v: serde_json::Value) -> Vec<String> {
        let m = loc(manifest);
        data_urls(&m, &v)
            .unwrap()
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn data_files_are_found_where_each_store_writes_them() {
        let v = serde_json::json!({"sourceBucket": "src", "fileSchema": "Bucket, Key, Size",
            "files": [{"key": "src/cfg/data/a.csv.gz"}, {"key": "src/cfg/data/b.csv.gz"}]});
        assert_eq!(
            urls("s3://inv/src/cfg/2026-11-27T00-00Z/manifest.json", v),
            [
                "s3://inv/src/cfg/data/a.csv.gz",
                "s3://inv/src/cfg/data/b.csv.gz"
            ]
        );
        let v =
            serde_json::json!({"report_shards_file_names": ["cfg_2026_0.csv", "other/x_1.csv"]});
        assert_eq!(
            urls("gs://dest/reports/cfg_2026_manifest.json", v),
            [
                "gs://dest/reports/cfg_2026_0.csv",
                "gs://dest/other/x_1.csv"
            ]
        );
        let m = loc("gs://dest/reports/cfg_2026_manifest.json");
        assert!(data_urls(&m, &serde_json::json!({"files": []})).is_err());
        assert!(data_urls(&m, &serde_json::json!({"report_shards_file_names": [1]})).is_err());
    }

    #[test]
    fn a_data_file_is_saved_only_under_a_plain_name() {
        assert_eq!(local_name("a/b/c.csv.gz"), Some("c.csv.gz"));
        for bad in ["a/", "a/..", "..", ".", "", "a/b\\..\\c"] {
            assert_eq!(local_name(bad), None, "{bad:?}");
        }
    }
}
