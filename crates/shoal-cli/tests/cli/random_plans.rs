//! Random plans: small random trees copied (`cp -r`), moved (`mv -r`) and
//! synced (`sync`, `sync --delete`) between local folders,
//! fake-gcs-server and MinIO, each plan run, run again, and interrupted
//! once (SIGINT at a random moment, then run to completion). After every
//! copy or sync the source is unchanged; after an interrupted move every
//! source file is whole in one place or the other, never lost; after an
//! interruption every destination file is whole (old or new, never a
//! mix); after a completed run the destination equals the source byte
//! for byte, with nothing of shoal's own left beside it. Plans that must
//! be refused (source and destination overlapping, `--delete` from an
//! empty source, a glob of the source moved into itself or a folder of
//! it) are refused with nothing written or deleted. So are a `run` file
//! whose lines clash (one deletes or writes what another reads, or two
//! write one place, `./` spelled) and `sync --delete --source-listing`
//! of a listing cut short (at a line or mid-line), or of an inventory
//! report (local or by URL) a data file of which lacks a row. A listing
//! or report that lists only some of the source (older than it, or
//! filtered to a prefix) is a hint: the destination files it omits that
//! the live source still holds are kept, never deleted. `sync --delete
//! --exclude` keeps what the rule leaves out (a name, a folder or a
//! wildcard at any depth, as this test reads docs/filters.md). One local
//! destination in four holds a link to a folder outside it: nothing is
//! ever written there.
//!
//! Trees are built to be awkward: nested names, prefixes of one another
//! (`a`, `a-b`, `a/b`, `ab`: `-` sorts before `/`), unicode, spaces, empty
//! files, and (in buckets) keys that look like shoal's working files.
//! Sources are written and destinations read with the stores directly,
//! not with the binary under test.
//!
//! Two more random tests share the trees and the seed. Lost deletes
//! (`random_lost_deletes_keep_what_another_writer_stored_again`): `rm`,
//! `rm -r`, `mv -r` and `sync --delete` on fake-gcs-server and MinIO
//! behind the test kit's fault proxy, one key's delete (alone or in a
//! batch) carried out, the key stored again by another writer, the answer
//! lost; the newer object survives with its bytes, the verb exits 0 and
//! says it kept it, and nothing else is deleted. Versioned buckets
//! (`random_plans_on_versioned_buckets_keep_every_old_version`): MinIO
//! with versioning on (versions and delete markers) and fake-gcs-server
//! with `versioning.enabled` (noncurrent generations, no markers), each
//! holding history made beforehand: `sync`, `sync --delete`, `mv -r` and
//! `rm -r` leave every earlier version and marker as it was, and `rm -r
//! --all-versions` removes exactly those below its prefix. Both servers
//! ignore a delete's precondition (`ifGenerationMatch`, `If-Match`, a
//! DeleteObjects key's `ETag`), so these tests see what the client's own
//! reads guard, not the server's.
//!
//! `SHOAL_PLAN_SEED` picks the plans (default 26, so the suite is the same
//! every run); `SHOAL_PLANS` sets how many (the suite runs 60; 3,000 from
//! ten other seeds passed before this shipped); the two tests above run 8
//! and 10 cases per 60 plans.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal_core::{ByteRange, ListRequest, PutOptions, Store};
use shoal_testkit::faultproxy::{Fault, FaultProxy, OtherWrite, Rule, Script, When};

type Tree = BTreeMap<String, Vec<u8>>;

/// Where a tree lives: a local folder, or a prefix in a bucket.
#[derive(Clone, Debug)]
enum Side {
    Local(PathBuf),
    Cloud {
        scheme: &'static str,
        bucket: String,
        prefix: String,
    },
}

struct Env {
    rt: tokio::runtime::Runtime,
    gs: Arc<dyn Store>,
    s3: Arc<dyn Store>,
    gs_bucket: String,
    s3_bucket: String,
    local: tempfile::TempDir,
}

impl Env {
    fn store(&self, scheme: &str) -> &Arc<dyn Store> {
        if scheme == "gs" { &self.gs } else { &self.s3 }
    }

    fn side(&self, kind: usize, path: &str) -> Side {
        match kind {
            0 => Side::Local(self.local.path().join(path)),
            1 => Side::Cloud {
                scheme: "gs",
                bucket: self.gs_bucket.clone(),
                prefix: path.into(),
            },
            _ => Side::Cloud {
                scheme: "s3",
                bucket: self.s3_bucket.clone(),
                prefix: path.into(),
            },
        }
    }

    fn url(&self, side: &Side) -> String {
        match side {
            Side::Local(p) => p.to_str().unwrap().into(),
            Side::Cloud {
                scheme,
                bucket,
                prefix,
            } => format!("{scheme}://{bucket}/{prefix}"),
        }
    }

    /// Every file below the side, by path relative to it.
    fn read(&self, side: &Side) -> Tree {
        match side {
            Side::Local(root) => {
                let mut t = Tree::new();
                if root.exists() {
                    walk(root, root, &mut t);
                }
                t
            }
            Side::Cloud {
                scheme,
                bucket,
                prefix,
            } => self.rt.block_on(async {
                // After an interrupt, requests the killed process had sent
                // (a DELETE, an overwrite) may still be carried out by the
                // server: an object listed then gone means the server was
                // not done, so the tree is read again once it is.
                for _ in 0..50 {
                    if let Some(t) = self.read_cloud(scheme, bucket, prefix).await {
                        return t;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                panic!("{scheme}://{bucket}/{prefix}: objects listed kept vanishing");
            }),
        }
    }

    /// The tree below `prefix`, or None if a listed object was gone when
    /// read.
    async fn read_cloud(&self, scheme: &str, bucket: &str, prefix: &str) -> Option<Tree> {
        let store = self.store(scheme).clone();
        let req = ListRequest {
            prefix: format!("{prefix}/"),
            ..Default::default()
        };
        let mut pages = Box::pin(shoal_core::paginate::pages(
            store.clone(),
            bucket.to_owned(),
            req,
        ));
        let mut t = Tree::new();
        while let Some(page) = pages.next().await {
            for o in page.unwrap().objects {
                let r = match store.get(bucket, &o.key, ByteRange::from(0), None).await {
                    Ok(r) => r,
                    Err(e) if e.kind() == shoal_core::ErrorKind::NotFound => return None,
                    Err(e) => panic!("{e}"),
                };
                let mut body = Vec::new();
                let mut s = r.body;
                while let Some(b) = s.next().await {
                    body.extend_from_slice(&b.unwrap());
                }
                t.insert(o.key[prefix.len() + 1..].to_string(), body);
            }
        }
        Some(t)
    }

    fn write(&self, side: &Side, tree: &Tree) {
        match side {
            Side::Local(root) => {
                std::fs::create_dir_all(root).unwrap();
                for (k, v) in tree {
                    let p = root.join(k);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(p, v).unwrap();
                }
            }
            Side::Cloud {
                scheme,
                bucket,
                prefix,
            } => self.rt.block_on(async {
                let store = self.store(scheme);
                for (k, v) in tree {
                    store
                        .put(
                            bucket,
                            &format!("{prefix}/{k}"),
                            bytes::Bytes::from(v.clone()),
                            &PutOptions::default(),
                        )
                        .await
                        .unwrap();
                }
            }),
        }
    }
}

fn walk(root: &Path, dir: &Path, t: &mut Tree) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let kind = e.file_type().unwrap();
        if kind.is_symlink() {
            // A link a plan put in the destination: what it points at is
            // checked apart (never written through).
            continue;
        }
        if kind.is_dir() {
            walk(root, &p, t);
        } else {
            let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
            t.insert(rel, std::fs::read(&p).unwrap());
        }
    }
}

/// Name segments chosen to collide: prefixes of each other, `-` (sorts
/// before `/`), unicode, spaces, hidden names; in buckets also names that
/// look like shoal's own working files.
const SEGMENTS: &[&str] = &["a", "a-b", "ab", "b", "é", "sp ace", ".hid", "a.txt", "Z"];
const WORKING_LOOKALIKES: &[&str] = &[
    ".a.shoal-partial",
    ".a.shoal-partial.json",
    ".b.shoal-tmp-1-1",
];

/// A random tree that a local folder can hold (no name is both a file
/// and a folder), with 0..=max_files files.
fn random_tree(rng: &mut StdRng, max_files: usize, lookalikes: bool) -> Tree {
    let mut t = Tree::new();
    let n = rng.random_range(0..=max_files);
    let mut tries = 0;
    while t.len() < n && tries < 200 {
        tries += 1;
        let depth = rng.random_range(1..=3);
        let mut parts: Vec<&str> = (0..depth)
            .map(|_| SEGMENTS[rng.random_range(0..SEGMENTS.len())])
            .collect();
        if lookalikes && rng.random_bool(0.3) {
            *parts.last_mut().unwrap() =
                WORKING_LOOKALIKES[rng.random_range(0..WORKING_LOOKALIKES.len())];
        }
        let path = parts.join("/");
        let clash = t.keys().any(|k| {
            k == &path || k.starts_with(&format!("{path}/")) || path.starts_with(&format!("{k}/"))
        });
        if clash {
            continue;
        }
        let size = match rng.random_range(0..10) {
            0 => 0,
            1 => rng.random_range(100_000..400_000),
            _ => rng.random_range(1..4000),
        };
        t.insert(path, pattern(size, rng.random()));
    }
    t
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Verb {
    CpR,
    Sync,
    SyncDelete,
    /// `mv -r SRC DST`: what `cp -r` makes, and the source emptied.
    MvR,
    /// A glob of the source moved into the source itself or one of its
    /// folders (`mv 'SRC/*' SRC/`, `mv 'SRC/**' SRC/a/`): refused.
    MvGlobInto,
    /// `sync --delete --exclude PAT`: the source's files PAT leaves in,
    /// and the destination's files PAT matches kept as they were.
    SyncDeleteExclude(Exclude),
    /// `sync --delete --source-listing F`, F the source's `ls -r --json`,
    /// cut short one time in three (then refused: nothing changes).
    SyncDeleteListing {
        cut: Cut,
    },
    /// A `run` file of `cp` lines, one per source file; one plan in three
    /// adds a line that clashes with another (then refused).
    RunFile {
        clash: Clash,
    },
    /// `sync --delete --source-listing REPORT`, REPORT an inventory report
    /// of the source this test writes as its store does (S3 Inventory on
    /// MinIO, Storage Insights on fake-gcs-server) in two data files, kept
    /// in a local folder or in the source's bucket (named by URL); one
    /// time in three a data file lacks a row its manifest counts (then
    /// refused: nothing changes).
    SyncDeleteReport {
        cut: ReportCut,
        in_bucket: bool,
    },
}

/// Whether an inventory report matches its manifest.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ReportCut {
    Whole,
    /// The first data file written without its last row; the manifest
    /// gives the whole file's size and MD5 (S3) or the record count (GCS).
    RowDropped,
    /// A whole report of only some of the source ([`omitted`] left out):
    /// older than the source, or filtered to a prefix.
    Stale,
}

/// The source files a stale listing or report leaves out: every third.
fn omitted(tree: &Tree) -> Vec<String> {
    tree.keys().skip(1).step_by(3).cloned().collect()
}

/// Whether a plan's listing or report leaves out [`omitted`] files.
fn stale(verb: Verb) -> bool {
    matches!(
        verb,
        Verb::SyncDeleteListing { cut: Cut::Stale }
            | Verb::SyncDeleteReport {
                cut: ReportCut::Stale,
                ..
            }
    )
}

/// The `--exclude` pattern of a [`Verb::SyncDeleteExclude`] plan, by
/// shape (docs/filters.md): a file name at any depth (`x`), a folder name
/// at any depth (`x/`), or a last level by wildcard (`*.txt`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Exclude {
    Name(&'static str),
    Folder(&'static str),
    Suffix(&'static str),
}

impl Exclude {
    fn pattern(self) -> String {
        match self {
            Exclude::Name(s) => s.to_string(),
            Exclude::Folder(s) => format!("{s}/"),
            Exclude::Suffix(s) => format!("*{s}"),
        }
    }

    /// Whether the rule leaves out `key`: this test's own reading of
    /// docs/filters.md, not the binary's.
    fn matches(self, key: &str) -> bool {
        let segs: Vec<&str> = key.split('/').collect();
        let (last, folders) = segs.split_last().unwrap();
        match self {
            Exclude::Name(s) => *last == s,
            Exclude::Folder(s) => folders.contains(&s),
            Exclude::Suffix(s) => last.ends_with(s),
        }
    }
}

/// How a listing file is cut.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cut {
    Whole,
    AtLine,
    MidLine,
    /// Whole, but of only some of the source ([`omitted`] left out).
    Stale,
}

/// What a `run` file adds to its `cp` lines.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Clash {
    None,
    /// `rm` of a file another line reads.
    DeleteRead,
    /// `cp` of a file another line writes (a chain).
    Chain,
    /// A second line writing one destination, spelled with `./`.
    Alias,
}

const VERBS: [Verb; 9] = [
    Verb::CpR,
    Verb::Sync,
    Verb::SyncDelete,
    Verb::MvR,
    Verb::MvGlobInto,
    Verb::SyncDeleteExclude(Exclude::Name("a")),
    Verb::SyncDeleteListing { cut: Cut::Whole },
    Verb::RunFile { clash: Clash::None },
    Verb::SyncDeleteReport {
        cut: ReportCut::Whole,
        in_bucket: false,
    },
];

/// `verb` with its random details drawn.
fn draw(verb: Verb, rng: &mut StdRng) -> Verb {
    match verb {
        Verb::SyncDeleteExclude(_) => {
            let seg = SEGMENTS[rng.random_range(0..SEGMENTS.len())];
            Verb::SyncDeleteExclude(match rng.random_range(0..3) {
                0 => Exclude::Name(seg),
                1 => Exclude::Folder(seg),
                _ => Exclude::Suffix([".txt", "b", ".shoal-partial"][rng.random_range(0..3)]),
            })
        }
        Verb::SyncDeleteListing { .. } => Verb::SyncDeleteListing {
            cut: [
                Cut::Whole,
                Cut::Whole,
                Cut::AtLine,
                Cut::MidLine,
                Cut::Stale,
            ][rng.random_range(0..5)],
        },
        Verb::SyncDeleteReport { .. } => Verb::SyncDeleteReport {
            cut: [
                ReportCut::Whole,
                ReportCut::Whole,
                ReportCut::RowDropped,
                ReportCut::Stale,
            ][rng.random_range(0..4)],
            in_bucket: rng.random_bool(0.5),
        },
        Verb::RunFile { .. } => Verb::RunFile {
            clash: match rng.random_range(0..6) {
                0 => Clash::DeleteRead,
                1 => Clash::Chain,
                2 => Clash::Alias,
                _ => Clash::None,
            },
        },
        v => v,
    }
}

/// Whether a plan of `verb` must be refused before it runs.
fn refused(verb: Verb) -> bool {
    matches!(
        verb,
        Verb::MvGlobInto
            | Verb::SyncDeleteListing {
                cut: Cut::AtLine | Cut::MidLine
            }
            | Verb::RunFile {
                clash: Clash::DeleteRead | Clash::Chain | Clash::Alias
            }
            | Verb::SyncDeleteReport {
                cut: ReportCut::RowDropped,
                ..
            }
    )
}

/// Whether `verb` deletes at the destination (so an empty source is
/// refused).
fn deletes(verb: Verb) -> bool {
    matches!(
        verb,
        Verb::SyncDelete
            | Verb::SyncDeleteExclude(_)
            | Verb::SyncDeleteListing { .. }
            | Verb::SyncDeleteReport { .. }
    )
}

/// A plan's files beside its trees: the listing or run file it reads.
fn plan_file(env: &Env, src: &Side) -> PathBuf {
    let name = env.url(src).replace(['/', ':'], "_");
    env.local.path().join(format!("{name}.plan"))
}

/// Writes what `verb` reads besides its trees (a listing file made by the
/// binary's `ls`, cut as the plan says; a run file).
fn write_plan_file(env: &Env, verb: Verb, src: &Side, dst: &Side, tree: &Tree) {
    let path = plan_file(env, src);
    let (s, d) = (env.url(src), env.url(dst));
    match verb {
        Verb::SyncDeleteListing { cut } => {
            let mut ls = with_servers(shoal());
            ls.args(["ls", "-r", "--sorted", "--json", &format!("{s}/")]);
            let r = run(ls);
            assert_eq!(r.code, 0, "ls of {s}: {}", r.stderr);
            let mut text = r.stdout.clone();
            let lines: Vec<&str> = text.lines().collect();
            match cut {
                Cut::Whole => {}
                Cut::Stale => {
                    let gone: Vec<String> =
                        omitted(tree).iter().map(|k| format!("{s}/{k}")).collect();
                    // A whole listing of fewer objects: its closing
                    // record counts what is left (a listing made earlier,
                    // or of a prefix).
                    let kept: Vec<serde_json::Value> = lines
                        .iter()
                        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                        .filter(|v| {
                            !v["url"]
                                .as_str()
                                .is_some_and(|u| gone.iter().any(|g| g == u))
                        })
                        .collect();
                    let n = kept
                        .iter()
                        .filter(|v| v.get("listing_end").is_none())
                        .count();
                    text = kept
                        .into_iter()
                        .map(|mut v| {
                            if let Some(end) = v.get_mut("listing_end") {
                                end["count"] = n.into();
                            }
                            format!("{v}\n")
                        })
                        .collect();
                }
                // Without the closing record at least.
                Cut::AtLine => {
                    let keep = lines.len().saturating_sub(1) / 2;
                    text = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
                }
                Cut::MidLine => {
                    let keep = lines.len().saturating_sub(1) / 2;
                    let mut t: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
                    let l = lines[keep];
                    t.push_str(&l[..l.len() / 2]);
                    text = t;
                }
            }
            std::fs::write(&path, text).unwrap();
        }
        Verb::RunFile { clash } => {
            let q = |s: String| shlex::try_quote(&s).unwrap().into_owned();
            let mut lines: Vec<String> = tree
                .keys()
                .map(|k| format!("cp {} {}", q(format!("{s}/{k}")), q(format!("{d}/{k}"))))
                .collect();
            let first = tree.keys().next().unwrap();
            match clash {
                Clash::None => {}
                Clash::DeleteRead => lines.push(format!("rm {}", q(format!("{s}/{first}")))),
                Clash::Chain => lines.push(format!(
                    "cp {} {}",
                    q(format!("{d}/{first}")),
                    q(format!("{d}/zz-chained"))
                )),
                Clash::Alias => {
                    // `./` spells the same local file; in a bucket it is
                    // another key, so there the clash is the same URL twice.
                    let (head, tail) = match first.rsplit_once('/') {
                        Some((h, t)) => (format!("{d}/{h}"), t.to_string()),
                        None => (d.clone(), first.clone()),
                    };
                    let to = if matches!(dst, Side::Local(_)) {
                        format!("{head}/./{tail}")
                    } else {
                        format!("{d}/{first}")
                    };
                    lines.push(format!("cp {} {}", q(format!("{s}/{first}")), q(to)));
                }
            }
            // The clashing line anywhere in the plan.
            let at = lines.len() - 1;
            if clash != Clash::None {
                let l = lines.remove(at);
                let to = (first.len() + tree.len()) % (lines.len() + 1);
                lines.insert(to, l);
            }
            std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        }
        Verb::SyncDeleteReport { cut, in_bucket } => {
            let listed: Tree;
            let tree = if cut == ReportCut::Stale {
                let gone = omitted(tree);
                listed = tree
                    .iter()
                    .filter(|(k, _)| !gone.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                &listed
            } else {
                tree
            };
            let at = write_report(env, src, tree, cut, in_bucket);
            std::fs::write(&path, at).unwrap();
        }
        _ => {}
    }
}

/// Writes an inventory report of the cloud side `src` holding `tree` (two
/// data files, keys dealt alternately, so neither is in key order after
/// the first), as its store writes one: in a folder beside the plan, or
/// in `src`'s bucket beside its prefix. Returns the manifest's path or
/// URL.
fn write_report(env: &Env, src: &Side, tree: &Tree, cut: ReportCut, in_bucket: bool) -> String {
    let Side::Cloud {
        scheme,
        bucket,
        prefix,
    } = src
    else {
        unreachable!("reports are of buckets")
    };
    let base = prefix.trim_end_matches("/src");
    let s3 = *scheme == "s3";
    let mut shards = [String::new(), String::new()];
    if !s3 {
        shards
            .iter_mut()
            .for_each(|t| t.push_str("bucket,name,size,updated\n"));
    }
    for (i, (k, v)) in tree.iter().rev().enumerate() {
        let key = format!("{prefix}/{k}");
        let row = if s3 {
            let key = form_encode(&key);
            format!(
                "\"{bucket}\",\"{key}\",\"{}\",\"2026-11-19T10:00:00.000Z\"\n",
                v.len()
            )
        } else {
            let key = key.replace('"', "\"\"");
            format!("{bucket},\"{key}\",{},2026-11-19T10:00:00Z\n", v.len())
        };
        shards[i % 2].push_str(&row);
    }
    let gz = |t: &str| {
        use std::io::Write;
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(t.as_bytes()).unwrap();
        w.finish().unwrap()
    };
    let whole: Vec<Vec<u8>> = shards
        .iter()
        .map(|t| if s3 { gz(t) } else { t.clone().into_bytes() })
        .collect();
    let mut stored = whole.clone();
    if cut == ReportCut::RowDropped {
        let t = &shards[0];
        let cut_at = t.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
        stored[0] = if s3 {
            gz(&t[..cut_at])
        } else {
            t.as_bytes()[..cut_at].to_vec()
        };
    }
    // The data files as the manifest names them, and the manifest.
    let (names, manifest_name, manifest): (Vec<String>, &str, serde_json::Value) = if s3 {
        let names: Vec<String> = (0..2)
            .map(|i| format!("{base}/inv/data/f{i}.csv.gz"))
            .collect();
        let files: Vec<serde_json::Value> = names
            .iter()
            .zip(&whole)
            .map(|(n, b)| serde_json::json!({"key": n, "size": b.len(), "MD5checksum": md5_hex(b)}))
            .collect();
        let m = serde_json::json!({"sourceBucket": bucket, "fileFormat": "CSV",
            "fileSchema": "Bucket, Key, Size, LastModifiedDate", "files": files,
            "creationTimestamp": "1795000000000"});
        (names, "manifest.json", m)
    } else {
        let names: Vec<String> = (0..2).map(|i| format!("cfg_{i}.csv")).collect();
        let m = serde_json::json!({"records_processed": tree.len(), "shard_count": 2,
            "snapshot_time": "2026-11-20T00:00:00Z", "report_shards_file_names": names});
        (names, "cfg_manifest.json", m)
    };
    let leaf = |n: &str| n.rsplit('/').next().unwrap().to_owned();
    if in_bucket {
        let store = env.store(scheme);
        let put = |key: String, body: Vec<u8>| {
            env.rt
                .block_on(store.put(
                    bucket,
                    &key,
                    bytes::Bytes::from(body),
                    &PutOptions::default(),
                ))
                .unwrap();
        };
        for (n, b) in names.iter().zip(stored) {
            put(
                if s3 {
                    n.clone()
                } else {
                    format!("{base}/inv/{n}")
                },
                b,
            );
        }
        put(
            format!("{base}/inv/{manifest_name}"),
            manifest.to_string().into_bytes(),
        );
        format!("{scheme}://{bucket}/{base}/inv/{manifest_name}")
    } else {
        let dir = env
            .local
            .path()
            .join(format!("{}.report", base.replace('/', "_")));
        std::fs::create_dir_all(&dir).unwrap();
        for (n, b) in names.iter().zip(stored) {
            std::fs::write(dir.join(leaf(n)), b).unwrap();
        }
        let m = dir.join(manifest_name);
        std::fs::write(&m, manifest.to_string()).unwrap();
        m.display().to_string()
    }
}

fn command(env: &Env, verb: Verb, src: &Side, dst: &Side) -> Command {
    let (s, d) = (env.url(src), env.url(dst));
    let (glob, into) = (format!("{s}/*"), format!("{s}/a/"));
    let (deep, own) = (format!("{s}/**"), format!("{s}/"));
    let file = plan_file(env, src).display().to_string();
    let report: String;
    let pattern = match verb {
        Verb::SyncDeleteExclude(e) => e.pattern(),
        _ => String::new(),
    };
    let args: Vec<&str> = match verb {
        Verb::SyncDeleteExclude(_) => vec!["sync", "--delete", "--exclude", &pattern, &s, &d],
        Verb::SyncDeleteListing { .. } => {
            vec!["sync", "--delete", "--source-listing", &file, &s, &d]
        }
        Verb::SyncDeleteReport { .. } => {
            report = std::fs::read_to_string(&file).unwrap();
            vec!["sync", "--delete", "--source-listing", &report, &s, &d]
        }
        Verb::RunFile { .. } => vec!["run", &file],
        Verb::CpR => vec!["cp", "-r", &s, &d],
        Verb::Sync => vec!["sync", &s, &d],
        Verb::SyncDelete => vec!["sync", "--delete", &s, &d],
        Verb::MvR => vec!["mv", "-r", &s, &d],
        // Which of the two: by the destination's name, so the plan picks.
        Verb::MvGlobInto if d.ends_with("dst") => vec!["mv", &glob, &own],
        Verb::MvGlobInto => vec!["mv", "-r", &deep, &into],
    };
    let mut c = with_servers(shoal());
    c.args(args);
    c
}

/// `c` pointed at the test servers.
fn with_servers(mut c: Command) -> Command {
    c.env(
        "STORAGE_EMULATOR_HOST",
        shoal_testkit_server("SHOAL_TEST_GCS").unwrap(),
    )
    .env(
        "AWS_ENDPOINT_URL",
        shoal_testkit_server("SHOAL_TEST_S3").unwrap(),
    )
    .env("AWS_ACCESS_KEY_ID", "minioadmin")
    .env("AWS_SECRET_ACCESS_KEY", SECRET)
    .env("AWS_REGION", "us-east-1");
    c
}

/// What the destination holds after a completed run.
fn expected(verb: Verb, src: &Tree, before: &Tree) -> Tree {
    if stale(verb) {
        // What the listing names is copied; what it omits and the live
        // source holds stays as it was; the rest is deleted.
        let gone = omitted(src);
        let mut t: Tree = before
            .iter()
            .filter(|(k, _)| gone.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        t.extend(
            src.iter()
                .filter(|(k, _)| !gone.contains(k))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        return t;
    }
    match verb {
        // `cp -r SRC DST` copies the folder itself: DST/src/...
        Verb::CpR | Verb::MvR => {
            let mut t = before.clone();
            t.extend(src.iter().map(|(k, v)| (format!("src/{k}"), v.clone())));
            t
        }
        Verb::Sync | Verb::RunFile { .. } => {
            let mut t = before.clone();
            t.extend(src.clone());
            t
        }
        Verb::SyncDelete | Verb::SyncDeleteListing { .. } | Verb::SyncDeleteReport { .. } => {
            src.clone()
        }
        Verb::SyncDeleteExclude(e) => {
            let mut t: Tree = before
                .iter()
                .filter(|(k, _)| e.matches(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            t.extend(
                src.iter()
                    .filter(|(k, _)| !e.matches(k))
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            t
        }
        Verb::MvGlobInto => before.clone(),
    }
}

/// After an interrupted move: every source file is somewhere, whole (at
/// its source, or at its destination), and what is left at the source
/// is the source's own.
fn assert_nothing_lost(label: &str, src: &Tree, left: &Tree, moved: &Tree) {
    for (k, v) in src {
        let here = left.get(k) == Some(v);
        let there = moved.get(&format!("src/{k}")) == Some(v);
        assert!(
            here || there,
            "{label}: {k:?} is in neither place after the interruption"
        );
    }
    for (k, v) in left {
        assert_eq!(
            src.get(k),
            Some(v),
            "{label}: {k:?} at the source is not the source's"
        );
    }
}

/// After an interrupted run: each destination file is what the completed
/// run would leave there, or what was there before, whole.
fn assert_whole(label: &str, got: &Tree, want: &Tree, before: &Tree) {
    for (k, v) in got {
        let ok = want.get(k) == Some(v) || before.get(k) == Some(v);
        assert!(
            ok,
            "{label}: after the interruption {k:?} ({} B) is neither the old nor the new file",
            v.len()
        );
    }
}

fn run_plan(env: &Env, rng: &mut StdRng, n: usize) -> String {
    let kinds = (rng.random_range(0..3), rng.random_range(0..3));
    let mut verb = draw(VERBS[rng.random_range(0..VERBS.len())], rng);
    // Globs are cloud URLs; a local source is expanded by the shell.
    if verb == Verb::MvGlobInto && kinds.0 == 0 {
        verb = Verb::MvR;
    }
    // A listing file stands for a bucket's listing (a folder is walked).
    if matches!(
        verb,
        Verb::SyncDeleteListing { .. } | Verb::SyncDeleteReport { .. }
    ) && kinds.0 == 0
    {
        verb = Verb::SyncDelete;
    }
    let base = format!("p{n}-{}", rng.random::<u32>());
    let src = env.side(kinds.0, &format!("{base}/src"));
    let lookalikes = kinds.0 != 0;
    let tree = random_tree(rng, 7, lookalikes);
    env.write(&src, &tree);

    // One plan in ten points the destination inside the source (or the
    // source inside the destination) on the same side: refused.
    // (A run file's lines name files one by one: copying src/k to
    // src/inner/k overlaps nothing.)
    let overlap =
        kinds.0 == kinds.1 && rng.random_bool(0.1) && !matches!(verb, Verb::RunFile { .. });
    let dst = if overlap {
        env.side(kinds.1, &format!("{base}/src/inner"))
    } else {
        env.side(kinds.1, &format!("{base}/dst"))
    };
    // What the destination held before: other files, and same names with
    // other sizes (a size+time sync then always sees them as different).
    let mut before = if overlap {
        Tree::new()
    } else {
        random_tree(rng, 3, kinds.1 != 0)
    };
    // A folder cannot hold a file `a` and a file `a/b`, nor can MinIO (a
    // GCS bucket can): keep such destinations free of those pairs, which
    // no run could resolve.
    if kinds.1 != 1 {
        let root = if matches!(verb, Verb::CpR | Verb::MvR) {
            "src/"
        } else {
            ""
        };
        before.retain(|b, _| {
            !tree.keys().any(|k| {
                let k = format!("{root}{k}");
                k.starts_with(&format!("{b}/")) || b.starts_with(&format!("{k}/"))
            })
        });
    }
    if !overlap && !matches!(verb, Verb::CpR | Verb::MvR) {
        for (k, v) in tree.iter().take(rng.random_range(0..2)) {
            let clash = before
                .keys()
                .any(|b| b.starts_with(&format!("{k}/")) || k.starts_with(&format!("{b}/")));
            if !clash {
                before.insert(k.clone(), pattern(v.len() + 7, rng.random()));
            }
        }
    }
    // A stale listing's omitted files are at the destination too, with
    // other bytes: they must survive `--delete`.
    if stale(verb) {
        for k in omitted(&tree) {
            let clash = before
                .keys()
                .any(|b| b.starts_with(&format!("{k}/")) || k.starts_with(&format!("{b}/")));
            if !clash {
                before.insert(k.clone(), pattern(tree[&k].len() + 3, rng.random()));
            }
        }
    }
    env.write(&dst, &before);
    // One local destination in four holds a link to a folder outside it,
    // named like a folder of the source: nothing may be written through it.
    let outside = env.local.path().join(format!("{base}-outside"));
    // (Not for a run file: its lines name each destination file
    // themselves, and a link on a path the user wrote is followed, as
    // `cp` follows one.)
    let linked =
        kinds.1 == 0 && !overlap && rng.random_bool(0.25) && !matches!(verb, Verb::RunFile { .. });
    if let (true, Side::Local(d)) = (linked, &dst) {
        let root = if matches!(verb, Verb::CpR | Verb::MvR) {
            "src/"
        } else {
            ""
        };
        let seg = SEGMENTS[rng.random_range(0..SEGMENTS.len())];
        let at = d.join(format!("{root}{seg}"));
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), b"outside").unwrap();
        if !at.exists() && at.symlink_metadata().is_err() {
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(&outside, &at).unwrap();
        }
    }
    if !tree.is_empty() {
        write_plan_file(env, verb, &src, &dst, &tree);
    }
    let label = format!(
        "plan {n} {verb:?} {} -> {} ({} files, {} before{})",
        env.url(&src),
        env.url(&dst),
        tree.len(),
        before.len(),
        if linked { ", a link inside" } else { "" }
    );
    let src_before = env.read(&src);
    let outside_unchanged = |when: &str| {
        if linked {
            let mut t = Tree::new();
            walk(&outside, &outside, &mut t);
            let want: Tree = [("keep".to_string(), b"outside".to_vec())].into();
            assert_eq!(t, want, "{label}: written through the link ({when})");
        }
    };

    // Refused: overlapping plans, `--delete` from an empty source, and a
    // glob moved into what it reads. Other plans from an empty source may
    // succeed doing nothing or fail ("matched no objects"); either way
    // nothing changes.
    if tree.is_empty()
        && matches!(
            verb,
            Verb::SyncDeleteListing { .. } | Verb::RunFile { .. } | Verb::SyncDeleteReport { .. }
        )
    {
        // No listing or run file was made: nothing to run.
        return label;
    }
    // A source whose every file the rule leaves out lists nothing for
    // `sync --delete`: refused like an empty one.
    let filtered_empty = match verb {
        Verb::SyncDeleteExclude(e) => tree.keys().all(|k| e.matches(k)),
        _ => false,
    };
    if overlap || tree.is_empty() || filtered_empty || refused(verb) {
        let r = run(command(env, verb, &src, &dst));
        if overlap || deletes(verb) || refused(verb) {
            assert_ne!(r.code, 0, "{label}: must be refused: {}", r.stderr);
        }
        if r.code != 0 {
            r.assert_one_line_error(r.code, &[]);
        }
        if refused(verb) && !overlap {
            assert_eq!(r.code, 2, "{label}: refused before it runs: {}", r.stderr);
        }
        assert_eq!(env.read(&src), src_before, "{label}: source changed");
        if !overlap {
            assert_eq!(env.read(&dst), before, "{label}: destination changed");
        }
        outside_unchanged("refused");
        return label;
    }

    let want = expected(verb, &tree, &before);
    // Interrupted once, at a random moment (maybe before it began, maybe
    // after it ended).
    let mut child = command(env, verb, &src, &dst)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(rng.random_range(0..250)));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let _ = child.wait();
    let mid = env.read(&dst);
    if verb == Verb::MvR {
        assert_nothing_lost(&label, &src_before, &env.read(&src), &mid);
    } else {
        assert_eq!(
            env.read(&src),
            src_before,
            "{label}: source changed (interrupted)"
        );
    }
    assert_whole(&label, &mid, &want, &before);
    outside_unchanged("interrupted");
    if linked {
        // To completion: whatever lies below the link fails (or the
        // link is replaced); nothing lands outside, the source stays.
        for round in ["first", "second"] {
            let r = run(command(env, verb, &src, &dst));
            assert!(
                r.code == 0 || r.code == 1,
                "{label} ({round}): {}",
                r.stderr
            );
            assert!(
                !r.stderr.contains("panicked"),
                "{label} ({round}): {}",
                r.stderr
            );
            outside_unchanged(round);
            if verb != Verb::MvR {
                assert_eq!(
                    env.read(&src),
                    src_before,
                    "{label} ({round}): source changed"
                );
            }
        }
        return label;
    }

    // Then to completion, twice (a move once: its source is gone).
    let rounds: &[&str] = if verb == Verb::MvR {
        &["first"]
    } else {
        &["first", "second"]
    };
    for round in rounds {
        // An interruption after the move ended left nothing to move (and
        // a move of nothing is an error): the destination is checked as is.
        let r = if verb == Verb::MvR && env.read(&src).is_empty() {
            Run {
                code: 0,
                stdout: String::new(),
                stdout_bytes: Vec::new(),
                stderr: String::new(),
            }
        } else {
            run(command(env, verb, &src, &dst))
        };
        assert_eq!(r.code, 0, "{label} ({round}): {}", r.stderr);
        let src_after = if verb == Verb::MvR {
            Tree::new()
        } else {
            src_before.clone()
        };
        assert_eq!(
            env.read(&src),
            src_after,
            "{label} ({round}): source changed"
        );
        let got = env.read(&dst);
        if got != want {
            let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
            let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
            let differ: Vec<_> = want
                .iter()
                .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
                .map(|(k, _)| k)
                .collect();
            panic!(
                "{label} ({round}): extra {extra:?}, missing {missing:?}, differ {differ:?}\nsource {:?}\nbefore {:?}\nstderr: {}",
                tree.keys().collect::<Vec<_>>(),
                before.keys().collect::<Vec<_>>(),
                r.stderr
            );
        }
    }
    label
}

#[test]
fn random_plans_keep_sources_and_make_exact_copies() {
    let Some(env) = new_env(false) else {
        return;
    };
    // A fixed seed by default, so every run of the suite checks the same
    // plans; SHOAL_PLAN_SEED (and SHOAL_PLANS) explore others.
    let (seed, plans) = seed_and_plans();
    eprintln!("random plans: seed {seed} (replay: SHOAL_PLAN_SEED={seed}), {plans} plans");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut by_verb = BTreeMap::<String, usize>::new();
    for n in 0..plans {
        let label = run_plan(&env, &mut rng, n);
        let verb = label.split_whitespace().nth(2).unwrap_or("");
        *by_verb
            .entry(verb.split(['(', '{']).next().unwrap().into())
            .or_default() += 1;
        if n % 100 == 0 {
            eprintln!("seed {seed}: {label} ok");
        }
    }
    eprintln!("random plans: seed {seed}, {plans} plans ok: {by_verb:?}");
}

/// The seed and plan count the environment asks for (see the module doc).
fn seed_and_plans() -> (u64, usize) {
    let seed = std::env::var("SHOAL_PLAN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(26);
    let plans: usize = std::env::var("SHOAL_PLANS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    (seed, plans)
}

/// An [`Env`] with a bucket on each store (versioning on both with
/// `versioned`).
fn new_env(versioned: bool) -> Option<Env> {
    shoal_testkit_server("SHOAL_TEST_GCS")?;
    shoal_testkit_server("SHOAL_TEST_S3")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gs = shoal_testkit::gcs_store().unwrap();
    let s3 = shoal_testkit::s3_store().unwrap();
    let gs_bucket = shoal_testkit::unique_bucket("plans");
    let s3_bucket = shoal_testkit::unique_bucket("plans");
    rt.block_on(async {
        if !versioned {
            gs.create_bucket(&gs_bucket).await.unwrap();
        }
        s3.create_bucket(&s3_bucket).await.unwrap();
    });
    if versioned {
        versioning_on(&gs_bucket, &s3_bucket);
    }
    Some(Env {
        rt,
        gs,
        s3,
        gs_bucket,
        s3_bucket,
        local: tempfile::tempdir().unwrap(),
    })
}

/// Versioning on: fake-gcs-server's bucket made with it
/// (`versioning.enabled`), MinIO's (made) by `PUT ?versioning`.
fn versioning_on(gs_bucket: &str, s3_bucket: &str) {
    let gcs = shoal_testkit_server("SHOAL_TEST_GCS").unwrap();
    gcs_bucket_with(
        &gcs,
        &format!(r#"{{"name":"{gs_bucket}","versioning":{{"enabled":true}}}}"#),
    );
    s3_versioning_on(s3_bucket);
}

/// Percent-encodes everything but unreserved characters (a query value).
fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Another writer's store of `key` with `body`, sent straight to the
/// server by the fault proxy: an unsigned upload to fake-gcs-server, a
/// PUT to a URL the S3 store presigned for MinIO.
fn other_write(env: &Env, scheme: &str, key: &str, body: &[u8]) -> OtherWrite {
    let target = if scheme == "gs" {
        format!(
            "/upload/storage/v1/b/{}/o?uploadType=media&name={}",
            env.gs_bucket,
            pct(key)
        )
    } else {
        let p = shoal_core::Presign::new(shoal_core::PresignMethod::Put, Duration::from_secs(3600));
        let url = env
            .rt
            .block_on(env.s3.presign(&env.s3_bucket, key, &p))
            .unwrap();
        let ep = shoal_testkit_server("SHOAL_TEST_S3").unwrap();
        url.strip_prefix(ep.trim_end_matches('/'))
            .unwrap_or_else(|| panic!("{url} is not below {ep}"))
            .to_owned()
    };
    OtherWrite {
        method: if scheme == "gs" { "POST" } else { "PUT" }.into(),
        target,
        body: body.to_vec(),
    }
}

/// What a delete whose answer is lost is run with.
#[derive(Clone, Copy, Debug)]
enum LostVerb {
    /// `rm URL` of the key itself: one DELETE.
    Rm,
    /// `rm -r PREFIX/`: a batch (DeleteObjects, a JSON API batch), or one
    /// DELETE when the prefix holds one key.
    RmR,
    /// `mv -r SRC DST`: one DELETE per moved key, after its copy.
    MvR,
    /// `sync --delete SRC DST`, the key an extra at DST.
    SyncDelete,
}

/// Deletes whose answer is lost while another writer stores the key again
/// (the fault proxy's `LoseResponseThen`: the server deletes, the writer
/// stores new bytes, then the client's connection is reset), on
/// fake-gcs-server and MinIO, under `rm`, `rm -r`, `mv -r` and `sync
/// --delete`, in random trees. Every verb exits 0 and says the key now
/// holds a newer object, kept; that object keeps the writer's bytes; the
/// rest is what the verb makes without a fault; keys beside the prefix
/// (`t-b/`, `tx`: they sort next to `t/`) are untouched. Each case's
/// delete of the key is the first DELETE naming it; a batch cannot be
/// told from its URL, so every batch of the run gets the fault (each
/// store again writes the key).
///
/// Both servers ignore a delete's precondition (`ifGenerationMatch`,
/// `If-Match`, a DeleteObjects key's `ETag`), so nothing but reading the
/// key before sending a delete again keeps the newer object: a batch is
/// never sent again once it may have been carried out (shoal-transfer
/// `delete`).
#[test]
fn random_lost_deletes_keep_what_another_writer_stored_again() {
    let Some(env) = new_env(false) else {
        return;
    };
    let (seed, plans) = seed_and_plans();
    let rounds = plans.div_ceil(60).max(1);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x10_57);
    eprintln!("lost deletes: seed {seed}, {rounds} round(s) of 8");
    let mut n = 0;
    for _ in 0..rounds {
        for scheme in ["gs", "s3"] {
            for verb in [
                LostVerb::Rm,
                LostVerb::RmR,
                LostVerb::MvR,
                LostVerb::SyncDelete,
            ] {
                n += 1;
                lost_delete_case(&env, &mut rng, n, scheme, verb);
            }
        }
    }
}

fn lost_delete_case(env: &Env, rng: &mut StdRng, n: usize, scheme: &'static str, verb: LostVerb) {
    let kind = if scheme == "gs" { 1 } else { 2 };
    let base = format!("lost{n}-{}", rng.random::<u32>());
    let store = env.store(scheme).clone();
    let bucket = if scheme == "gs" {
        env.gs_bucket.clone()
    } else {
        env.s3_bucket.clone()
    };
    // The key whose delete is lost: ASCII, named once, in a folder or not.
    let folder = ["", "a/", "a-b/", "ab/", "Z/"][rng.random_range(0..5)];
    let victim = format!("{folder}victim-{n}");
    let mut tree = random_tree(rng, 5, true);
    tree.retain(|k, _| !victim.starts_with(&format!("{k}/")));
    tree.insert(
        victim.clone(),
        pattern(rng.random_range(1..3000), rng.random()),
    );
    let t = env.side(kind, &format!("{base}/t"));
    let beside = [
        env.side(kind, &format!("{base}/t-b")),
        env.side(kind, &format!("{base}/tx")),
    ];
    let beside_tree: Tree = [("keep".to_string(), b"beside".to_vec())].into();
    for b in &beside {
        env.write(b, &beside_tree);
    }
    let dst = env.side(kind, &format!("{base}/d"));
    let (src_side, victim_side) = match verb {
        LostVerb::SyncDelete => {
            // The key is an extra at the destination; the source has the
            // rest of the tree.
            let mut src = tree.clone();
            src.remove(&victim);
            if src.is_empty() {
                src.insert("only".into(), b"only".to_vec());
            }
            let mut before: Tree = src
                .iter()
                .take(rng.random_range(0..=src.len()))
                .map(|(k, v)| (k.clone(), pattern(v.len() + 5, rng.random())))
                .collect();
            for (k, v) in random_tree(rng, 2, true) {
                let clash = src.keys().chain(std::iter::once(&victim)).any(|s| {
                    s == &k || s.starts_with(&format!("{k}/")) || k.starts_with(&format!("{s}/"))
                });
                if !clash {
                    before.insert(k, v);
                }
            }
            before.retain(|k, _| !victim.starts_with(&format!("{k}/")));
            before.insert(victim.clone(), tree[&victim].clone());
            env.write(&t, &src);
            env.write(&dst, &before);
            tree = src;
            (t.clone(), dst.clone())
        }
        _ => {
            env.write(&t, &tree);
            (t.clone(), t.clone())
        }
    };
    let Side::Cloud {
        prefix: vprefix, ..
    } = &victim_side
    else {
        unreachable!()
    };
    let victim_key = format!("{vprefix}/{victim}");
    let label = format!(
        "lost delete {n} {verb:?} on {scheme} ({} files, {victim_key})",
        tree.len()
    );
    let ep = shoal_testkit_server(if scheme == "gs" {
        "SHOAL_TEST_GCS"
    } else {
        "SHOAL_TEST_S3"
    })
    .unwrap();
    let theirs = format!("theirs {n}").into_bytes();
    let write = other_write(env, scheme, &victim_key, &theirs);
    let batch = if scheme == "gs" {
        When::method("POST").contains("/batch/storage/v1")
    } else {
        When::method("POST").contains("?delete")
    };
    let proxy = FaultProxy::start(
        &ep,
        Script::new()
            .rule(Rule::new(
                When::method("DELETE").contains(&format!("victim-{n}")),
                Fault::LoseResponseThen(write.clone()),
            ))
            .rule(Rule::new(batch, Fault::LoseResponseThen(write)).times(usize::MAX)),
    );
    let src_before = env.read(&src_side);
    let dst_before = env.read(&dst);
    let u = |s: &Side| env.url(s);
    let args: Vec<String> = match verb {
        LostVerb::Rm => vec!["rm".into(), format!("{}/{victim}", u(&t))],
        LostVerb::RmR => vec!["rm".into(), "-r".into(), format!("{}/", u(&t))],
        LostVerb::MvR => vec!["mv".into(), "-r".into(), u(&t), u(&dst)],
        LostVerb::SyncDelete => vec!["sync".into(), "--delete".into(), u(&t), u(&dst)],
    };
    let mut c = with_servers(shoal());
    c.args(&args).env(
        if scheme == "gs" {
            "STORAGE_EMULATOR_HOST"
        } else {
            "AWS_ENDPOINT_URL"
        },
        proxy.url(),
    );
    let r = run(c);
    assert!(!proxy.injected().is_empty(), "{label}: no fault injected");
    assert_eq!(r.code, 0, "{label}: {}", r.stderr);
    assert!(
        r.stderr.contains("now holds a newer object") && r.stderr.contains("kept"),
        "{label}: {}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("move the source again"),
        "{label}: {}",
        r.stderr
    );
    // The writer's object, read with the store directly.
    let got = env.rt.block_on(async {
        let r = store
            .get(&bucket, &victim_key, ByteRange::from(0), None)
            .await
            .unwrap_or_else(|e| panic!("{label}: the other writer's object is gone: {e}"));
        let mut body = Vec::new();
        let mut s = r.body;
        while let Some(b) = s.next().await {
            body.extend_from_slice(&b.unwrap());
        }
        body
    });
    assert_eq!(got, theirs, "{label}: the other writer's object changed");
    let only_theirs: Tree = [(victim.clone(), theirs.clone())].into();
    match verb {
        LostVerb::Rm => {
            let mut want = src_before.clone();
            want.insert(victim.clone(), theirs.clone());
            assert_eq!(env.read(&t), want, "{label}: other keys changed");
        }
        LostVerb::RmR => {
            assert_eq!(env.read(&t), only_theirs, "{label}: left behind");
        }
        LostVerb::MvR => {
            assert_eq!(env.read(&t), only_theirs, "{label}: left at the source");
            let want: Tree = src_before
                .iter()
                .map(|(k, v)| (format!("t/{k}"), v.clone()))
                .collect();
            assert_eq!(env.read(&dst), want, "{label}: not moved whole");
        }
        LostVerb::SyncDelete => {
            assert_eq!(env.read(&t), src_before, "{label}: source changed");
            let mut want = src_before.clone();
            want.insert(victim.clone(), theirs.clone());
            assert_eq!(
                env.read(&dst),
                want,
                "{label}: destination (before: {:?})",
                dst_before.keys().collect::<Vec<_>>()
            );
        }
    }
    for b in &beside {
        assert_eq!(
            env.read(b),
            beside_tree,
            "{label}: a key beside the prefix changed"
        );
    }
}

/// One stored entry of a versioned bucket: key, version (S3 version id,
/// GCS generation), and whether it is an S3 delete marker.
type Entry = (String, String, bool);

/// Every version and delete marker below `prefix`, with whether each is
/// current, listed with the store directly.
fn versions(env: &Env, scheme: &str, prefix: &str) -> BTreeMap<Entry, Option<bool>> {
    let bucket = if scheme == "gs" {
        &env.gs_bucket
    } else {
        &env.s3_bucket
    };
    env.rt.block_on(async {
        let req = ListRequest {
            prefix: prefix.to_owned(),
            versions: true,
            ..Default::default()
        };
        let mut pages = Box::pin(shoal_core::paginate::pages(
            env.store(scheme).clone(),
            bucket.clone(),
            req,
        ));
        let mut all = BTreeMap::new();
        while let Some(page) = pages.next().await {
            for o in page.unwrap().objects {
                let state = o.version_state.unwrap_or_default();
                let v = o.version.as_ref().map_or(String::new(), |v| v.to_string());
                all.insert((o.key, v, state.delete_marker), state.is_latest);
            }
        }
        all
    })
}

/// Gives some keys of `side` a history: an older version under the
/// current one, and keys written then deleted (noncurrent versions only;
/// on S3 a delete marker on top).
fn make_history(env: &Env, rng: &mut StdRng, side: &Side, tree: &Tree) {
    let Side::Cloud {
        scheme,
        bucket,
        prefix,
    } = side
    else {
        unreachable!()
    };
    let store = env.store(scheme).clone();
    env.rt.block_on(async {
        for (k, v) in tree {
            if rng.random_bool(0.5) {
                let key = format!("{prefix}/{k}");
                let old = bytes::Bytes::from(pattern(v.len() + 11, rng.random()));
                store
                    .put(bucket, &key, old, &PutOptions::default())
                    .await
                    .unwrap();
                let now = bytes::Bytes::from(v.clone());
                store
                    .put(bucket, &key, now, &PutOptions::default())
                    .await
                    .unwrap();
            }
        }
        for i in 0..rng.random_range(1..3) {
            let key = format!("{prefix}/ghost-{i}");
            let b = bytes::Bytes::from(pattern(rng.random_range(1..900), rng.random()));
            store
                .put(bucket, &key, b, &PutOptions::default())
                .await
                .unwrap();
            store.delete(bucket, &key).await.unwrap();
        }
    });
}

/// What a plan on a versioned bucket runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum VerVerb {
    Sync,
    SyncDelete,
    MvR,
    RmR,
    /// `rm -r --all-versions PREFIX/`.
    RmRAll,
}

/// Random plans on versioned buckets (MinIO with versioning on; a
/// fake-gcs-server bucket created with `versioning.enabled`, which keeps
/// replaced and deleted generations as noncurrent, with `timeDeleted`;
/// GCS has no delete markers). Source, destination and a neighbour
/// prefix (`src-b`, sorting next to `src`) hold noncurrent versions and,
/// on MinIO, delete markers, made beforehand. `sync`, `sync --delete`,
/// `mv -r` and `rm -r` never delete or change a version that was there
/// before (every entry of the full version list is still listed after,
/// each noncurrent one still noncurrent); what they add is only on keys
/// they write or delete (a new current version, a delete marker or a
/// generation made noncurrent), and the current objects are what the
/// verb makes on an unversioned bucket. `rm -r --all-versions` removes
/// every version and marker below its prefix and nothing outside it.
#[test]
fn random_plans_on_versioned_buckets_keep_every_old_version() {
    let Some(env) = new_env(true) else {
        return;
    };
    let (seed, plans) = seed_and_plans();
    let rounds = plans.div_ceil(60).max(1);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7e_75);
    eprintln!("versioned plans: seed {seed}, {rounds} round(s) of 10");
    let mut n = 0;
    for _ in 0..rounds {
        for kind in [1, 2] {
            for verb in [
                VerVerb::Sync,
                VerVerb::SyncDelete,
                VerVerb::MvR,
                VerVerb::RmR,
                VerVerb::RmRAll,
            ] {
                n += 1;
                versioned_plan(&env, &mut rng, n, kind, verb);
            }
        }
    }
}

fn versioned_plan(env: &Env, rng: &mut StdRng, n: usize, kind: usize, verb: VerVerb) {
    let scheme = if kind == 1 { "gs" } else { "s3" };
    let base = format!("v{n}-{}", rng.random::<u32>());
    let src = env.side(kind, &format!("{base}/src"));
    let dst = env.side(kind, &format!("{base}/dst"));
    let beside = env.side(kind, &format!("{base}/src-b"));
    let mut tree = random_tree(rng, 6, true);
    if tree.is_empty() {
        tree.insert("only".into(), b"only".to_vec());
    }
    // Destination files: others, and some of the source's names with other
    // bytes (no file that is a folder of another: MinIO cannot hold both).
    let mut before = random_tree(rng, 3, true);
    let root = if verb == VerVerb::MvR { "src/" } else { "" };
    before.retain(|b, _| {
        !tree.keys().any(|k| {
            let k = format!("{root}{k}");
            b.starts_with(&format!("{k}/")) || k.starts_with(&format!("{b}/"))
        })
    });
    if verb != VerVerb::MvR {
        for (k, v) in tree.iter().take(rng.random_range(0..3)) {
            let clash = before
                .keys()
                .any(|b| b.starts_with(&format!("{k}/")) || k.starts_with(&format!("{b}/")));
            if !clash {
                before.insert(k.clone(), pattern(v.len() + 7, rng.random()));
            }
        }
    }
    let beside_tree = random_tree(rng, 2, false);
    for (side, t) in [(&src, &tree), (&dst, &before), (&beside, &beside_tree)] {
        env.write(side, t);
        make_history(env, rng, side, t);
    }
    let label = format!(
        "versioned plan {n} {verb:?} on {scheme} ({} files, {} before)",
        tree.len(),
        before.len()
    );
    let all_before = versions(env, scheme, &format!("{base}/"));
    let u = |s: &Side| env.url(s);
    let args: Vec<String> = match verb {
        VerVerb::Sync => vec!["sync".into(), u(&src), u(&dst)],
        VerVerb::SyncDelete => vec!["sync".into(), "--delete".into(), u(&src), u(&dst)],
        VerVerb::MvR => vec!["mv".into(), "-r".into(), u(&src), u(&dst)],
        VerVerb::RmR => vec!["rm".into(), "-r".into(), format!("{}/", u(&src))],
        VerVerb::RmRAll => vec![
            "rm".into(),
            "-r".into(),
            "--all-versions".into(),
            format!("{}/", u(&src)),
        ],
    };
    let mut c = with_servers(shoal());
    c.args(&args);
    let r = run(c);
    assert_eq!(r.code, 0, "{label}: {}", r.stderr);
    let all_after = versions(env, scheme, &format!("{base}/"));
    let src_prefix = format!("{base}/src/");
    let dst_prefix = format!("{base}/dst/");

    if verb == VerVerb::RmRAll {
        let left: Vec<_> = all_after
            .keys()
            .filter(|e| e.0.starts_with(&src_prefix))
            .collect();
        assert!(left.is_empty(), "{label}: left below the prefix: {left:?}");
        let outside: BTreeMap<_, _> = all_before
            .iter()
            .filter(|(e, _)| !e.0.starts_with(&src_prefix))
            .map(|(e, l)| (e.clone(), *l))
            .collect();
        assert_eq!(
            all_after, outside,
            "{label}: a version outside the prefix changed"
        );
        return;
    }
    for (e, latest) in &all_before {
        let now = all_after.get(e);
        assert!(now.is_some(), "{label}: {e:?} was deleted");
        if *latest == Some(false) {
            assert_eq!(now, Some(&Some(false)), "{label}: {e:?} became current");
        }
    }
    // What the verb may add to: its destination's keys, and the keys it
    // deletes (a move's and `rm -r`'s source).
    let touched = |k: &str| match verb {
        VerVerb::Sync | VerVerb::SyncDelete => k.starts_with(&dst_prefix),
        VerVerb::MvR => k.starts_with(&dst_prefix) || k.starts_with(&src_prefix),
        VerVerb::RmR => k.starts_with(&src_prefix),
        VerVerb::RmRAll => unreachable!(),
    };
    for e in all_after.keys().filter(|e| !all_before.contains_key(*e)) {
        assert!(
            touched(&e.0),
            "{label}: {e:?} added outside what the verb writes or deletes"
        );
    }
    // The current objects: what the verb makes anywhere.
    let (want_src, want_dst) = match verb {
        VerVerb::Sync => {
            let mut d = before.clone();
            d.extend(tree.clone());
            (tree.clone(), d)
        }
        VerVerb::SyncDelete => (tree.clone(), tree.clone()),
        VerVerb::MvR => {
            let mut d = before.clone();
            d.extend(tree.iter().map(|(k, v)| (format!("src/{k}"), v.clone())));
            (Tree::new(), d)
        }
        VerVerb::RmR => (Tree::new(), before.clone()),
        VerVerb::RmRAll => unreachable!(),
    };
    assert_eq!(env.read(&src), want_src, "{label}: source");
    assert_eq!(env.read(&dst), want_dst, "{label}: destination");
    assert_eq!(env.read(&beside), beside_tree, "{label}: beside the source");
}
