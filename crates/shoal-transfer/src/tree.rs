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
//! Both sides are streamed: a local folder is walked ([`shoal_core::walk`])
//! on a blocking thread into a bounded channel, a bucket is listed page by page (in parallel for
//! big listings, by shoal-list), so a million files never sit in memory.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use shoal_core::local_path::key_to_relative_path;
use shoal_core::walk::Depth;
use shoal_core::{
    Error, ErrorKind, Location, ObjectMeta, Op, Projection, Result, Seen, Skip, Store,
};
use shoal_list::{Filter, KeyGlob, ListOptions};

use crate::batch::Action;

pub use shoal_core::walk::Symlinks;

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

/// One step of a listing or a walk: an entry, a skip in its place (a
/// link not followed, shoal's working file), or an error (a folder that
/// cannot be read, a listing page that failed).
pub type Listed = Result<Seen<Entry>>;

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
pub(crate) fn normal_local(key: &str) -> PathBuf {
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

/// How a local folder is walked.
#[derive(Debug, Clone, Copy, Default)]
pub struct Walk {
    /// What to do with symbolic links.
    pub symlinks: Symlinks,
    /// The walk lists a destination (sync's other side): its links and
    /// special files are left out without a word. They are neither
    /// copied from nor deleted, and shoal writes only regular files.
    pub destination: bool,
}

/// Every file or object `src` names (with `recursive`, everything below
/// it), with names relative to `root`. `store` is None for local sources,
/// which are always walked whole, in key order, as `walk` says. With
/// `sorted`, a bucket's entries come in key order too (what `sync`'s merge
/// needs; the parallel lister then holds back a bounded number of later
/// pages).
///
/// What a walk does not copy comes as a [`Skip`], in its place in key
/// order, so a summary can count and name it (see [`shoal_core::walk`]).
/// A bucket's listing skips nothing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enumerate(
    src: &Location,
    store: Option<Arc<dyn Store>>,
    root: &str,
    projection: Projection,
    list_workers: usize,
    recursive: bool,
    sorted: bool,
    walk: Walk,
) -> BoxStream<'static, Listed> {
    match store {
        None => walk_local(src, root, walk),
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
                    r.map(|meta| {
                        Seen::Item(Entry {
                            src: base.with_key(meta.key.clone()),
                            rel: meta
                                .key
                                .strip_prefix(root.as_str())
                                .unwrap_or(&meta.key)
                                .to_owned(),
                            meta,
                        })
                    })
                })
                .boxed()
        }
    }
}

/// Keeps the entries `filter` admits (`--include` / `--exclude`, see
/// [`shoal_list::filter`]), judged by their name below the command's root:
/// an entry's `rel` without `lead` (`cp -r DIR` names entries `DIR/...`;
/// its rules see what is below `DIR/`). A skip from a local walk is judged
/// by its path below `local_root` (the `root` the walk was given), so a
/// link or FIFO that is excluded is neither reported nor counted: it was
/// not asked for. Everything else passes (failures are never filtered
/// away). Entry by entry, as they stream past: nothing is held.
///
/// With `tally`, counts each entry a rule leaves out (for a dry run's
/// "kept by" lines: one counter per rule, nothing held).
pub(crate) fn filter_entries(
    entries: BoxStream<'static, Listed>,
    filter: Option<Arc<Filter>>,
    lead: &str,
    local_root: Option<&str>,
    tally: Option<Arc<shoal_list::filter::Tally>>,
) -> BoxStream<'static, Listed> {
    let Some(filter) = filter else {
        return entries;
    };
    let lead = lead.to_owned();
    let local_root = local_root.map(|r| {
        let mut r = normal_local(r.trim_end_matches('/')).display().to_string();
        if !r.ends_with('/') {
            r.push('/');
        }
        r
    });
    entries
        .filter(move |item| {
            let name = |rel: &str| {
                let name = rel.strip_prefix(lead.as_str()).unwrap_or(rel);
                filter.admits(name)
            };
            let keep = match item {
                Ok(Seen::Item(e)) => match &tally {
                    Some(t) => {
                        let rel = e.rel.strip_prefix(lead.as_str()).unwrap_or(&e.rel);
                        filter.admits_counted(rel, t)
                    }
                    None => name(&e.rel),
                },
                Ok(Seen::Skipped(s)) => match &local_root {
                    Some(root) => s.url().strip_prefix(root.as_str()).is_none_or(name),
                    None => true,
                },
                Err(_) => true,
            };
            futures::future::ready(keep)
        })
        .boxed()
}

fn walk_local(src: &Location, root: &str, walk: Walk) -> BoxStream<'static, Listed> {
    let path = normal_local(src.key.trim_end_matches('/'));
    let root = normal_local(root.trim_end_matches('/'));
    let (tx, rx) = tokio::sync::mpsc::channel::<Listed>(CHANNEL);
    tokio::task::spawn_blocking(move || {
        shoal_core::walk::walk(&path, &root, walk.symlinks, Depth::All, &mut |found| {
            // A destination's skips are nobody's business.
            if walk.destination && matches!(found, Ok(Seen::Skipped(_))) {
                return true;
            }
            let entry = found.map(|f| f.map(|f| local_entry(&f.path, f.rel, &f.meta)));
            tx.blocking_send(entry).is_ok()
        });
    });
    tokio_stream(rx)
}

fn tokio_stream<T: Send + 'static>(rx: tokio::sync::mpsc::Receiver<T>) -> BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) }).boxed()
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
            local_root: None,
            store: None,
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

/// `cp -r`: every entry becomes a copy to its place under `dst`; entries
/// that cannot be placed become errors of the batch (unsafe keys:
/// reported, the rest continues) or skips (folder markers, see [`place`]).
pub(crate) fn copy_actions(
    entries: BoxStream<'static, Listed>,
    dst: Location,
) -> BoxStream<'static, crate::batch::Planned> {
    entries
        .map(move |e| {
            let e = match e? {
                Seen::Item(e) => e,
                Seen::Skipped(s) => return Ok(Seen::Skipped(s)),
            };
            Ok(
                place(&dst, &e.rel, &e.src.to_string())?.map(|to| Action::Copy {
                    src: e.src,
                    meta: Some(e.meta),
                    dst: to,
                }),
            )
        })
        .boxed()
}

/// Where `rel` goes under `dst` (a folder: local path or cloud prefix).
/// Local destinations refuse unsafe names (an error); a folder marker
/// (`dir/`) has no file to become there, and is skipped as a tree copy
/// means it to be. A local destination remembers where `dst` ends
/// ([`Location::local_root`]), so its writes never follow a link below it.
pub fn place(dst: &Location, rel: &str, src_url: &str) -> Result<Seen<Location>> {
    if dst.is_local() {
        let rel_path = match key_to_relative_path(rel) {
            Ok(p) => p,
            Err(why) if rel.ends_with('/') => {
                return Ok(Seen::Skipped(Skip::asked(
                    Op::Download,
                    src_url,
                    format!("not copied: {why}"),
                )));
            }
            Err(why) => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    Op::Download,
                    src_url,
                    format!("not copied: {why}"),
                ));
            }
        };
        let path = Path::new(&dst.key).join(rel_path);
        // What follows the user's folder came from a key: no write there
        // follows a link (`local_path::make_folders`).
        return Ok(Seen::Item(Location {
            key: path.display().to_string(),
            local_root: Some(dst.key.len()),
            ..dst.clone()
        }));
    }
    let sep = if dst.key.is_empty() || dst.key.ends_with('/') {
        ""
    } else {
        "/"
    };
    Ok(Seen::Item(dst.with_key(format!("{}{sep}{rel}", dst.key))))
}

/// [`place`] for one named object, where a folder marker cannot be
/// skipped quietly: it is refused as the invalid input it is.
pub fn destination(dst: &Location, rel: &str, src_url: &str) -> Result<Location> {
    match place(dst, rel, src_url)? {
        Seen::Item(to) => Ok(to),
        Seen::Skipped(s) => Err(Error::invalid(s.op(), s.url(), s.why())),
    }
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
        // Placing a tree's entries: a folder marker is a skip (asked: what
        // a tree copy means), an unsafe name an error.
        assert!(matches!(place(&d, "dir/", "u").unwrap(), Seen::Skipped(s) if s.is_asked()));
        assert!(place(&d, "../x", "u").is_err());
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

    /// Rules judge the name below `cp -r DIR`'s own level, and a local
    /// skip (a link) that the rules exclude is neither reported nor
    /// counted; failures always pass.
    #[tokio::test]
    async fn filters_judge_names_below_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("data");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        for f in ["a.txt", "b.tmp", "sub/c.txt"] {
            std::fs::write(src.join(f), b"x").unwrap();
        }
        std::os::unix::fs::symlink("a.txt", src.join("link.tmp")).unwrap();
        std::os::unix::fs::symlink("a.txt", src.join("link.txt")).unwrap();
        let root = format!("{}/", dir.path().display());
        let loc = Location::parse(src.to_str().unwrap()).unwrap();
        let filter = Filter::new(&[shoal_list::Rule::Exclude("**.tmp".into())])
            .unwrap()
            .map(Arc::new);
        let walked = enumerate(
            &loc,
            None,
            &root,
            Projection::NameSizeTime,
            1,
            true,
            false,
            Walk::default(),
        );
        let got: Vec<String> = filter_entries(walked, filter, "data/", Some(&root), None)
            .map(|e| match e {
                Ok(Seen::Item(e)) => e.rel,
                Ok(Seen::Skipped(s)) => format!("skip {}", s.url().rsplit('/').next().unwrap()),
                Err(e) => format!("ERR {e}"),
            })
            .collect()
            .await;
        assert_eq!(got, ["data/a.txt", "skip link.txt", "data/sub/c.txt"]);
        let failed = futures::stream::iter(vec![Err(Error::invalid(Op::List, "u", "x"))]).boxed();
        let only = Filter::new(&[shoal_list::Rule::Include("nothing".into())])
            .unwrap()
            .map(Arc::new);
        assert_eq!(
            filter_entries(failed, only, "", None, None).count().await,
            1
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
        let got: Vec<String> = enumerate(
            &src,
            None,
            &root,
            Projection::NameSizeTime,
            1,
            true,
            true,
            Walk::default(),
        )
        .map(|e| e.unwrap().item().unwrap().rel)
        .collect()
        .await;
        let mut want = got.clone();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(got.len(), files.len());
    }
}
