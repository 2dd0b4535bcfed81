//! The one walk of a local folder: what `cp -r`, `sync`, `ls` and the
//! local store read of a folder tree.
//!
//! One walk, so that every command agrees on what a folder holds:
//!
//! - Files come depth-first in the order a bucket lists the same keys
//!   (UTF-8 byte order of the whole relative name), which `sync`'s merge
//!   relies on: a folder sorts as its name plus `/`, so `a-b` and `a.txt`
//!   come before the files in `a/` (`-` and `.` sort before `/`), and `a0`
//!   after them.
//! - What is not copied is said, in its place in that order, as a
//!   [`Skip`] (not an error): asked (shoal's own working files, links
//!   under [`Symlinks::Skip`]) or not (links under [`Symlinks::Report`],
//!   FIFOs, sockets, devices, link loops), so a summary can count and
//!   name it. A FIFO is never opened: a reader of
//!   one nobody writes to would wait forever.
//! - Followed links (`-L`) cannot loop: the folders the walk is inside are
//!   known by device and inode, and a link back into one is reported.
//! - A folder or file that cannot be read is an error in its place and
//!   the walk goes on; the caller decides whether that ends its work.
//!
//! The walk runs on the caller's thread (it is blocking file-system work)
//! and hands each item to a callback, which can stop it.

use std::path::{Path, PathBuf};

use crate::error::{Error, Op, Result};
use crate::local_path::relative_path_to_key;
use crate::skip::{Seen, Skip};

/// What a walk does with symbolic links.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Symlinks {
    /// Not followed, and each one reported as a skip nobody asked for
    /// (a batch exits non-zero; `sync --delete` deletes nothing).
    #[default]
    Report,
    /// Not followed, counted as asked (`--skip-symlinks`).
    Skip,
    /// Followed (`-L`): a link to a file is read as that file, a link to
    /// a folder is walked, except a link back into a folder the walk is
    /// already inside (a loop), which is reported.
    Follow,
}

/// How deep a walk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Everything below the top folder; folders themselves are not items.
    All,
    /// The top folder's own entries; a folder below it is an item
    /// ([`Found::is_dir`]), not entered (`ls` without `-r`).
    One,
}

/// One file (or, walking one level, one folder) the walk found.
#[derive(Debug)]
pub struct Found {
    /// Its path: the top path given, joined with the names below it.
    pub path: PathBuf,
    /// Its name relative to the walk's root, `/`-separated (a key). A top
    /// path that is a file is named by its file name.
    pub rel: String,
    /// What `stat` says of it (of the file a followed link points to).
    pub meta: std::fs::Metadata,
    /// A folder (only when walking one level).
    pub is_dir: bool,
}

/// Walks `top` (a folder, or a file, which is the one item) and hands
/// each item to `each`, in key order (see the module docs); names are
/// relative to `root`, which `top` lies below. `top` itself is followed
/// if it is a link: it was named. Stops early when `each` returns false;
/// returns false then.
pub fn walk(
    top: &Path,
    root: &Path,
    symlinks: Symlinks,
    depth: Depth,
    each: &mut dyn FnMut(Result<Seen<Found>>) -> bool,
) -> bool {
    match std::fs::metadata(top) {
        Ok(md) if md.is_file() => {
            let rel = top
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            each(Ok(Seen::Item(Found {
                path: top.to_path_buf(),
                rel,
                meta: md,
                is_dir: false,
            })))
        }
        Ok(md) => {
            let mut inside = vec![dev_ino(&md)];
            Walker {
                root,
                symlinks,
                depth,
                each,
            }
            .dir(top, &mut inside)
        }
        Err(e) => each(Err(Error::io(Op::List, top.display().to_string(), e))),
    }
}

fn dev_ino(md: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (md.dev(), md.ino())
}

/// What one folder entry is, with symbolic links resolved as the walk says.
enum Kind {
    Dir(std::fs::Metadata),
    File(std::fs::Metadata),
    /// Not read: whether asked, and why.
    Skip(bool, &'static str),
    Failed(std::io::Error),
}

struct Walker<'a, 'f> {
    root: &'a Path,
    symlinks: Symlinks,
    depth: Depth,
    each: &'a mut (dyn FnMut(Result<Seen<Found>>) -> bool + 'f),
}

impl Walker<'_, '_> {
    fn classify(&self, path: &Path, ft: std::fs::FileType) -> Kind {
        let md = if ft.is_symlink() {
            match self.symlinks {
                Symlinks::Report => {
                    return Kind::Skip(
                        false,
                        "a symbolic link, not followed (-L/--follow-symlinks copies what it points to; --skip-symlinks skips links without an error)",
                    );
                }
                Symlinks::Skip => {
                    return Kind::Skip(true, "a symbolic link (--skip-symlinks)");
                }
                Symlinks::Follow => std::fs::metadata(path),
            }
        } else {
            std::fs::symlink_metadata(path)
        };
        match md {
            Ok(md) if md.is_dir() => Kind::Dir(md),
            Ok(md) if md.is_file() => Kind::File(md),
            Ok(md) => Kind::Skip(false, special_file(&md)),
            Err(e) => Kind::Failed(e),
        }
    }

    /// One folder, its entries in key order; `inside` holds the folders
    /// (device, inode) the walk is in. Returns false once `each` said stop.
    fn dir(&mut self, dir: &Path, inside: &mut Vec<(u64, u64)>) -> bool {
        let mut entries: Vec<_> = match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let ft = e.file_type().ok()?;
                    let path = e.path();
                    Some((self.classify(&path, ft), e.file_name(), path))
                })
                .collect(),
            Err(e) => return (self.each)(Err(Error::io(Op::List, dir.display().to_string(), e))),
        };
        entries.sort_by_cached_key(|(kind, name, _)| key_order(name, matches!(kind, Kind::Dir(_))));
        for (kind, name, path) in entries {
            let item = match kind {
                Kind::Dir(md) if self.depth == Depth::One => self.found(path, md, true),
                Kind::Dir(md) => {
                    let id = dev_ino(&md);
                    if inside.contains(&id) {
                        Ok(Seen::Skipped(Skip::unasked(
                            Op::List,
                            path.display().to_string(),
                            "a symbolic link back into a folder above it (a loop), not followed",
                        )))
                    } else {
                        inside.push(id);
                        let go_on = self.dir(&path, inside);
                        inside.pop();
                        if !go_on {
                            return false;
                        }
                        continue;
                    }
                }
                // shoal's own working files (an interrupted or running
                // download's), by their exact shape: reading one would
                // publish half a file. A user's file named like one is
                // read.
                Kind::File(_) if crate::workfile::is_working_file(&name.to_string_lossy()) => {
                    Ok(Seen::Skipped(Skip::asked(
                        Op::Read,
                        path.display().to_string(),
                        "shoal's working file of a download in progress or interrupted",
                    )))
                }
                Kind::File(md) => self.found(path, md, false),
                Kind::Skip(true, why) => Ok(Seen::Skipped(Skip::asked(
                    Op::Read,
                    path.display().to_string(),
                    why,
                ))),
                Kind::Skip(false, why) => Ok(Seen::Skipped(Skip::unasked(
                    Op::Read,
                    path.display().to_string(),
                    why,
                ))),
                Kind::Failed(e) => Err(Error::io(Op::Read, path.display().to_string(), e)),
            };
            if !(self.each)(item) {
                return false;
            }
        }
        true
    }

    fn found(&self, path: PathBuf, meta: std::fs::Metadata, is_dir: bool) -> Result<Seen<Found>> {
        match path
            .strip_prefix(self.root)
            .ok()
            .and_then(relative_path_to_key)
        {
            Some(rel) => Ok(Seen::Item(Found {
                path,
                rel,
                meta,
                is_dir,
            })),
            None => Err(Error::invalid(
                Op::Read,
                path.display().to_string(),
                "file name is not UTF-8; skipped",
            )),
        }
    }
}

/// Why a file that is neither a regular file nor a folder is not read.
fn special_file(md: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = md.file_type();
    if t.is_fifo() {
        "a FIFO (named pipe), not a regular file (cp FILE URL reads one to its end)"
    } else if t.is_socket() {
        "a socket, not a regular file"
    } else if t.is_block_device() || t.is_char_device() {
        "a device, not a regular file (cp FILE URL reads one to its end)"
    } else {
        "not a regular file"
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn items(top: &Path, symlinks: Symlinks, depth: Depth) -> Vec<String> {
        let mut out = Vec::new();
        walk(top, top, symlinks, depth, &mut |r| {
            out.push(match r {
                Ok(Seen::Item(f)) if f.is_dir => format!("{}/", f.rel),
                Ok(Seen::Item(f)) => f.rel,
                Ok(Seen::Skipped(s)) => format!(
                    "{} {}",
                    if s.is_asked() { "skip" } else { "SKIP" },
                    s.url().rsplit('/').next().unwrap()
                ),
                Err(e) => format!("ERR {}", e.url().rsplit('/').next().unwrap()),
            });
            true
        });
        out
    }

    /// Key order, working files and links said in their place, loops
    /// caught when links are followed, one level shows folders.
    #[test]
    fn walks_in_key_order_and_says_what_it_skips() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        for f in ["a", "a-b", "a0", "d/x", "d/y"] {
            let p = top.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        }
        std::fs::write(
            top.join(".a.shoal-tmp-0123456789abcdef0123456789abcdef"),
            b"half",
        )
        .unwrap();
        std::os::unix::fs::symlink("..", top.join("d/up")).unwrap();
        let all = [
            "skip .a.shoal-tmp-0123456789abcdef0123456789abcdef",
            "a",
            "a-b",
            "a0",
            "SKIP up",
            "d/x",
            "d/y",
        ];
        assert_eq!(items(top, Symlinks::Report, Depth::All), all);
        // Followed, `up` is the folder the walk started in: a loop.
        assert_eq!(items(top, Symlinks::Follow, Depth::All), all);
        assert_eq!(
            items(top, Symlinks::Skip, Depth::One),
            [
                "skip .a.shoal-tmp-0123456789abcdef0123456789abcdef",
                "a",
                "a-b",
                "a0",
                "d/"
            ]
        );
        // A file named as the top is the one item, named by its name.
        assert_eq!(items(&top.join("d/x"), Symlinks::Report, Depth::All), ["x"]);
    }
}
