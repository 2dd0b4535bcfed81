//! What a plan refuses before it writes or deletes anything.
//!
//! A copy or sync whose destination lies inside its source reads its own
//! output (`sync gs://b/p gs://b/p/q` nests one level deeper on every
//! run), and one whose source lies inside its destination deletes its own
//! source with `--delete` (`sync --delete src src/sub`). Both are refused,
//! by comparing the two trees as folders: local paths after resolving `.`,
//! `..` and symbolic links (of the part that exists), bucket prefixes
//! level by level (`p` and `pq` do not overlap, `p` and `p/q` do).
//!
//! A glob source is a set of keys rather than a folder: `cp 'gs://b/p/*'
//! gs://b/p/` would copy every object onto itself (and `mv` then delete
//! it), and `cp 'gs://b/p/**' gs://b/p/sub/` writes `p/sub/a` from `p/a`
//! before it reads the old `p/sub/a`. Those are refused by asking the
//! glob itself whether it can match a key in the destination folder
//! ([`shoal_list::KeyGlob::may_match_under`]), so `cp 'gs://b/data/*.csv'
//! gs://b/data/archive/`, which cannot, still runs.

use std::path::{Component, Path, PathBuf};

use shoal_core::{Error, Location, Op, Result};

/// The folder `loc` stands for, as a key prefix ending in `/` (or empty
/// for a whole bucket); for local paths, the resolved absolute path.
pub(super) fn folder(loc: &Location) -> String {
    if loc.is_local() {
        let mut s = resolve(Path::new(&loc.key)).display().to_string();
        if !s.ends_with('/') {
            s.push('/');
        }
        return s;
    }
    if loc.key.is_empty() || loc.key.ends_with('/') {
        loc.key.clone()
    } else {
        format!("{}/", loc.key)
    }
}

/// `path` made absolute, with `.`, `..` and symbolic links resolved one
/// level at a time (as `realpath` does), the part that does not exist yet
/// taken as written. Also what `shoal run` compares local paths by.
pub fn resolve(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::Normal(name) => {
                out.push(name);
                if let Ok(real) = std::fs::canonicalize(&out) {
                    out = real;
                }
            }
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Refuses `src` → `dst` when one folder lies inside the other (or they
/// are the same): `verb` names the command in the error.
pub(crate) fn refuse_overlap(verb: &str, src: &Location, dst: &Location) -> Result<()> {
    if !src.same_store(dst) || src.bucket != dst.bucket {
        return Ok(());
    }
    let (a, b) = (folder(src), folder(dst));
    let why = if a == b {
        "source and destination are the same place"
    } else if b.starts_with(&a) {
        "the destination lies inside the source: it would copy its own copies"
    } else if a.starts_with(&b) {
        "the source lies inside the destination: the destination's extras would include the source itself"
    } else {
        return Ok(());
    };
    Err(Error::invalid(
        Op::Copy,
        format!("{verb} {src} {dst}"),
        format!("{why}; nothing was done (choose a destination outside the source)"),
    ))
}

/// Refuses a copy or move of the tree or glob `src` whose objects land
/// below the folder `lands`, when what it writes can be what it reads:
/// a glob asks itself ([`refuse_glob_overlap`]), a folder or prefix is
/// compared as a folder ([`refuse_overlap`]). The one check every front
/// end makes before copying many objects (the CLI's `cp -r`/`mv -r`,
/// Python's and Dask's `copy`).
pub(crate) fn refuse_tree_overlap(
    verb: &str,
    src: &Location,
    lands: &Location,
    recursive: bool,
) -> Result<()> {
    if !src.is_local() && shoal_list::has_wildcard(&src.key) {
        refuse_glob_overlap(verb, src, lands, recursive)
    } else {
        refuse_overlap(verb, src, lands)
    }
}

/// Refuses a copy or move of the glob `src` into the folder `dst` when the
/// glob (with `recursive`, or what lies below a matching level) can match
/// a key inside that folder: the plan would write or delete what it is
/// still reading. Sources without a wildcard go to [`refuse_overlap`].
pub(crate) fn refuse_glob_overlap(
    verb: &str,
    src: &Location,
    dst: &Location,
    recursive: bool,
) -> Result<()> {
    if src.is_local() || !src.same_store(dst) || src.bucket != dst.bucket {
        return Ok(());
    }
    let Some(glob) = shoal_list::KeyGlob::parse(&src.to_string(), &src.key)? else {
        return Ok(());
    };
    let under = folder(dst);
    if !glob.may_match_under(&under, recursive) {
        return Ok(());
    }
    let place = format!("{}{}/{under}", dst.prefix(), dst.bucket);
    Err(Error::invalid(
        Op::Copy,
        format!("{verb} {src} {dst}"),
        format!(
            "the glob can match objects in {place}, where it writes: it would write over (or {}) what it is still reading; nothing was done (choose a destination the glob cannot match)",
            if verb.starts_with("mv") {
                "delete"
            } else {
                "copy again"
            }
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Location {
        Location::parse(s).unwrap()
    }

    #[test]
    fn overlapping_prefixes_and_folders() {
        for (a, b) in [
            ("gs://b/p", "gs://b/p/q"),
            ("gs://b/p/q", "gs://b/p"),
            ("gs://b/p/", "gs://b/p"),
            ("s3://b", "s3://b/x"),
            ("s3://b/", "s3://b"),
            ("/tmp/shoal-guard-src", "/tmp/shoal-guard-src/sub"),
            ("/tmp/shoal-guard-src/sub/..", "/tmp/shoal-guard-src/x"),
            ("/tmp/shoal-guard-src/./sub", "/tmp/shoal-guard-src"),
        ] {
            assert!(refuse_overlap("sync", &l(a), &l(b)).is_err(), "{a} {b}");
        }
        for (a, b) in [
            ("gs://b/p", "gs://b/pq"),
            ("gs://b/p-x", "gs://b/p/x"),
            ("gs://b/p", "s3://b/p/q"),
            ("gs://b/p", "gs://c/p/q"),
            ("/tmp/shoal-guard-src", "/tmp/shoal-guard-src2"),
        ] {
            assert!(refuse_overlap("sync", &l(a), &l(b)).is_ok(), "{a} {b}");
        }
    }

    #[test]
    fn globs_into_what_they_read() {
        for (verb, a, b, recursive) in [
            ("mv", "gs://b/p/*", "gs://b/p/", false),
            ("mv", "gs://b/p/*", "gs://b/p", false),
            ("mv -r", "s3://b/q/**", "s3://b/q/", true),
            ("mv", "gs://b/*", "gs://b/", false),
            ("mv", "gs://b/*", "gs://b", false),
            ("cp", "gs://b/p/**", "gs://b/p/sub/", false),
            ("cp -r", "gs://b/d*", "gs://b/d1/", true),
        ] {
            let e = refuse_glob_overlap(verb, &l(a), &l(b), recursive).unwrap_err();
            assert!(
                e.to_string().contains("can match objects in"),
                "{a} {b}: {e}"
            );
        }
        for (a, b, recursive) in [
            ("gs://b/data/*.csv", "gs://b/data/archive/", false),
            ("gs://b/p/*", "gs://b/q/", true),
            ("gs://b/p/*", "gs://c/p/", true),
            ("gs://b/p/*", "s3://b/p/", true),
            ("gs://b/p/*", "/tmp/p/", true),
            ("gs://b/p/x", "gs://b/p/", true),
        ] {
            assert!(
                refuse_glob_overlap("mv", &l(a), &l(b), recursive).is_ok(),
                "{a} {b}"
            );
        }
    }

    /// A symbolic link to the source is the source.
    #[test]
    fn links_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::os::unix::fs::symlink(&src, dir.path().join("link")).unwrap();
        let s = l(src.to_str().unwrap());
        let via_link = l(dir.path().join("link/inner").to_str().unwrap());
        let e = refuse_overlap("sync", &s, &via_link).unwrap_err();
        assert!(e.to_string().contains("inside the source"), "{e}");
        let other = l(dir.path().join("other").to_str().unwrap());
        assert!(refuse_overlap("sync", &s, &other).is_ok());
    }
}
