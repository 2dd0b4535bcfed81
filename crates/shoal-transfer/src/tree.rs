//! Many files: what a folder or a glob names, and where each one goes.
//!
//! Naming follows `cp -r` and gsutil: `cp -r SRC DST` puts SRC's last
//! path level under DST (`cp -r gs://b/data out/` writes `out/data/...`);
//! a glob source keeps what follows its literal folder
//! (`gs://b/x/*.zip` → `DST/a.zip`); `sync SRC DST` maps SRC's *contents*
//! onto DST. In every case an item's relative name is a `/`-separated key
//! suffix, and the one place it becomes a local path is
//! [`shoal_core::local_path`], which refuses anything that could escape
//! the destination (see docs/keys.md). Refused keys and folder markers
//! (`dir/`) are reported, not copied.
//!
//! Both sides are streamed: a local folder is walked on a blocking thread
//! into a bounded channel, a bucket is listed page by page (in parallel for
//! big listings, by shoal-list), so a million files never sit in memory.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use shoal_core::local_path::{key_to_relative_path, relative_path_to_key};
use shoal_core::{Error, ErrorKind, Location, ObjectMeta, Op, Projection, Result, Store};
use shoal_list::{KeyGlob, ListOptions};

/// One thing to copy: where from, its relative name, what we know of it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Source location (for local files, `key` is the path).
    pub src: Location,
    /// Name relative to the copy's root, `/`-separated.
    pub rel: String,
    /// Size, time and (for clouds) checksums; for local files, from stat.
    pub meta: ObjectMeta,
}

/// Entries buffered between the lister and the transfers: enough to keep
/// every worker fed, small enough to be nothing in memory.
const CHANNEL: usize = 1024;

/// The part of a key that `cp -r` strips: everything up to the source's
/// last level (`data/sub` → `data/`), or a glob's literal folder.
pub fn copy_root(src: &Location) -> Result<String> {
    if !src.is_local()
        && let Some(g) = KeyGlob::parse(&src.to_string(), &src.key)?
    {
        let lit = g.literal_prefix();
        return Ok(lit[..lit.rfind('/').map_or(0, |i| i + 1)].to_owned());
    }
    if src.is_local() {
        // `cp -r . DST` copies the folder's contents, as cp(1) does (`.`
        // and `..` have no name of their own to nest under); other paths
        // nest under their last level once `.` and `..` are taken out.
        let path = normal_local(&src.key);
        let last = Path::new(src.key.trim_end_matches('/'))
            .components()
            .next_back();
        let root = if matches!(last, Some(Component::CurDir | Component::ParentDir)) {
            path.as_path()
        } else {
            path.parent().unwrap_or(&path)
        };
        let mut r = root.display().to_string();
        if !r.ends_with('/') {
            r.push('/');
        }
        return Ok(r);
    }
    let k = src.key.trim_end_matches('/');
    Ok(k[..k.rfind('/').map_or(0, |i| i + 1)].to_owned())
}

/// A local path made absolute, with `.` and `..` taken out lexically (the
/// way a shell user reads `./a/../b`), so names relative to it carry none.
pub fn normal_local(key: &str) -> PathBuf {
    let p = Path::new(key);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The key prefix that `sync` strips: the source itself, as a folder.
pub fn sync_root(src: &Location) -> String {
    if src.key.is_empty() || src.key.ends_with('/') {
        src.key.clone()
    } else {
        format!("{}/", src.key)
    }
}

/// Every file or object `src` names (with `recursive`, everything below
/// it), with names relative to `root`. `store` is None for local sources,
/// which are always walked whole, in key order. With `sorted`, a bucket's
/// entries come in key order too (what `sync`'s merge needs; the parallel
/// lister then holds back a bounded number of later pages).
pub fn enumerate(
    src: &Location,
    store: Option<Arc<dyn Store>>,
    root: &str,
    projection: Projection,
    list_workers: usize,
    recursive: bool,
    sorted: bool,
) -> BoxStream<'static, Result<Entry>> {
    match store {
        None => walk_local(src, root),
        Some(store) => {
            let opts = ListOptions {
                recursive,
                projection,
                workers: list_workers.max(1),
                sorted,
                ..Default::default()
            };
            let root = root.to_owned();
            let base = src.clone();
            shoal_list::expand(store, src, &opts)
                .map(move |r| {
                    r.map(|meta| Entry {
                        src: base.with_key(meta.key.clone()),
                        rel: meta
                            .key
                            .strip_prefix(root.as_str())
                            .unwrap_or(&meta.key)
                            .to_owned(),
                        meta,
                    })
                })
                .boxed()
        }
    }
}

fn walk_local(src: &Location, root: &str) -> BoxStream<'static, Result<Entry>> {
    let path = normal_local(src.key.trim_end_matches('/'));
    let root = normal_local(root.trim_end_matches('/'));
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Entry>>(CHANNEL);
    tokio::task::spawn_blocking(move || {
        let send = |e: Result<Entry>| tx.blocking_send(e).is_ok();
        match std::fs::metadata(&path) {
            Ok(md) if md.is_file() => {
                let rel = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                send(Ok(local_entry(&path, rel, &md)));
            }
            Ok(_) => {
                walk_dir(&path, &root, &send);
            }
            Err(e) => {
                send(Err(Error::io(Op::List, path.display().to_string(), e)));
            }
        }
    });
    tokio_stream(rx)
}

fn tokio_stream<T: Send + 'static>(rx: tokio::sync::mpsc::Receiver<T>) -> BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) }).boxed()
}

/// Depth-first, in the order a bucket lists the same keys (UTF-8 byte
/// order of the whole relative name), which `sync`'s merge relies on: a
/// folder sorts as its name plus `/`, so `a-b` and `a.txt` come before
/// the files in `a/` (`-` and `.` sort before `/`), and `a0` after them.
/// Symbolic links are not followed: a link to `/` must not copy the machine.
fn walk_dir(dir: &Path, root: &Path, send: &dyn Fn(Result<Entry>) -> bool) -> bool {
    let mut entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| Some((e.file_type().ok()?, e)))
            .collect(),
        Err(e) => return send(Err(Error::io(Op::List, dir.display().to_string(), e))),
    };
    entries.sort_by_cached_key(|(ft, e)| key_order(&e.file_name(), ft.is_dir()));
    for (ft, e) in entries {
        let path = e.path();
        if ft.is_dir() {
            if !walk_dir(&path, root, send) {
                return false;
            }
        } else if ft.is_file() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            // shoal's own working files (an interrupted download's), by
            // their exact shape; a user's file named like one is copied.
            if shoal_core::workfile::is_working_file(&name) {
                continue;
            }
            let rel = path.strip_prefix(root).ok().and_then(relative_path_to_key);
            let item = match (rel, e.metadata()) {
                (Some(rel), Ok(md)) => Ok(local_entry(&path, rel, &md)),
                (None, _) => Err(Error::invalid(
                    Op::Read,
                    path.display().to_string(),
                    "file name is not UTF-8; skipped",
                )),
                (_, Err(err)) => Err(Error::io(Op::Read, path.display().to_string(), err)),
            };
            if !send(item) {
                return false;
            }
        }
    }
    true
}

/// Where a folder entry sorts among its siblings in key order: its name's
/// bytes, a folder's followed by `/`.
fn key_order(name: &std::ffi::OsStr, is_dir: bool) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut k = name.as_bytes().to_vec();
    if is_dir {
        k.push(b'/');
    }
    k
}

fn local_entry(path: &Path, rel: String, md: &std::fs::Metadata) -> Entry {
    let updated_ns = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128);
    let key = path.display().to_string();
    Entry {
        src: Location {
            scheme: shoal_core::Scheme::File,
            bucket: String::new(),
            key: key.clone(),
        },
        rel,
        meta: ObjectMeta {
            key,
            size: md.len(),
            updated_ns,
            ..Default::default()
        },
    }
}

/// Where `rel` goes under `dst` (a folder: local path or cloud prefix).
/// Local destinations refuse unsafe names; folder markers are refused too.
pub fn destination(dst: &Location, rel: &str, src_url: &str) -> Result<Location> {
    if dst.is_local() {
        let rel_path = key_to_relative_path(rel).map_err(|why| {
            let kind = if rel.ends_with('/') {
                ErrorKind::Unsupported
            } else {
                ErrorKind::InvalidInput
            };
            Error::new(kind, Op::Download, src_url, format!("not copied: {why}"))
        })?;
        let path = Path::new(&dst.key).join(rel_path);
        return Ok(Location {
            key: path.display().to_string(),
            ..dst.clone()
        });
    }
    let sep = if dst.key.is_empty() || dst.key.ends_with('/') {
        ""
    } else {
        "/"
    };
    Ok(dst.with_key(format!("{}{sep}{rel}", dst.key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> Location {
        Location::parse(s).unwrap()
    }

    #[test]
    fn roots() {
        assert_eq!(copy_root(&loc("gs://b/data")).unwrap(), "");
        assert_eq!(copy_root(&loc("gs://b/a/data/")).unwrap(), "a/");
        assert_eq!(copy_root(&loc("gs://b/x/*.zip")).unwrap(), "x/");
        assert_eq!(copy_root(&loc("gs://b/x/ab*/**")).unwrap(), "x/");
        assert_eq!(copy_root(&loc("/tmp/src")).unwrap(), "/tmp/");
        assert_eq!(sync_root(&loc("gs://b/data")), "data/");
        assert_eq!(sync_root(&loc("gs://b/")), "");
    }

    #[test]
    fn destinations_stay_inside() {
        let d = loc("/tmp/out");
        assert_eq!(
            destination(&d, "a/b.txt", "u").unwrap().key,
            "/tmp/out/a/b.txt"
        );
        for bad in [
            "../x",
            "a/../../b",
            "/abs",
            "a//b",
            "a\\b",
            "a/./b",
            "dir/",
            "n\0ul",
        ] {
            assert!(
                destination(&d, bad, "u").is_err(),
                "{bad:?} must be refused"
            );
        }
        assert_eq!(
            destination(&loc("gs://b/p"), "a/b", "u")
                .unwrap()
                .to_string(),
            "gs://b/p/a/b"
        );
        assert_eq!(
            destination(&loc("gs://b"), "a//b", "u")
                .unwrap()
                .to_string(),
            "gs://b/a//b"
        );
    }

    /// A local walk yields names in the order a bucket lists the same
    /// keys (UTF-8 bytes of the whole name), which sync's merge needs.
    #[tokio::test]
    async fn local_walks_come_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            "a",
            "a-b",
            "a.txt",
            "a0",
            "b/c",
            "b/c-d",
            "b/c/e",
            "b-/x",
            "b0",
            "B",
            "é",
            "é/x",
            "z/\u{10FFFF}",
            "z/\u{80}",
            "z/~",
        ];
        // "a" and "é" are files above; their folder twins get other names.
        for f in files {
            let f = match f {
                "b/c" => "b/c.x",
                "é/x" => "éé/x",
                f => f,
            };
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        }
        let root = format!("{}/", dir.path().display());
        let src = Location::parse(&root).unwrap();
        let got: Vec<String> =
            enumerate(&src, None, &root, Projection::NameSizeTime, 1, true, true)
                .map(|e| e.unwrap().rel)
                .collect()
                .await;
        let mut want = got.clone();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(got.len(), files.len());
    }
}
