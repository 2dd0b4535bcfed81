//! The one place an object key becomes a local path.
//!
//! Object keys may contain anything; a file system path may not. A download
//! must never write outside its destination folder, whatever the key says.
//! The rule (documented for users in docs/keys.md):
//!
//! - A key is split on `/`; each segment becomes one path component.
//! - Refused: empty keys, absolute keys (`/x`), empty segments (`a//b`),
//!   `.` and `..` segments, NUL and other control characters, `\` (a path
//!   separator on Windows, and a classic traversal trick), segments longer
//!   than 255 bytes (the usual file-name limit).
//! - A key ending in `/` is a "folder marker", not a file: refused as a file
//!   name; callers that copy trees skip it and report it.
//!
//! Refusing is chosen over mapping (`..` → `%2E%2E`): a mapped name
//! silently differs from the key, and two keys could map to one file.
//!
//! Clean names are not enough: `dst/sub` may be a symbolic link to
//! `/elsewhere`, and a key `sub/file` would then be written there. So a
//! path made from a key remembers where the user's folder ends
//! ([`crate::Location::local_root`]), and every local write into it (a
//! download, a local copy, its folders, its working file, the rename, a
//! `sync --delete`) first passes [`make_folders`] or [`check_folders`]:
//! below that folder each component is looked at with `lstat`, a missing
//! folder is made with `mkdir` (which never follows a link), and a link
//! is refused. The folder the user named may itself be a link: they
//! chose it. What remains is a window between the look and the write (a
//! folder swapped for a link in those microseconds); the rename that ends
//! a download cannot be sent elsewhere by it, since it renames only the
//! working file this process made and still holds (`workfile::persist`
//! checks the name's device and inode first).

use std::path::{Component, Path, PathBuf};

/// Why a key cannot become a local path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsafeKey {
    /// The key is empty.
    Empty,
    /// Starts with `/`.
    Absolute,
    /// Ends with `/` (a folder marker).
    FolderMarker,
    /// Has an empty segment (`a//b`).
    EmptySegment,
    /// Has a `.` or `..` segment.
    DotSegment,
    /// Has a NUL, another control character or `\`.
    BadCharacter(char),
    /// A segment longer than 255 bytes.
    SegmentTooLong,
}

impl std::fmt::Display for UnsafeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnsafeKey::Empty => f.write_str("the key is empty"),
            UnsafeKey::Absolute => f.write_str("the key starts with '/' (an absolute path)"),
            UnsafeKey::FolderMarker => {
                f.write_str("the key ends with '/' (a folder marker, not a file)")
            }
            UnsafeKey::EmptySegment => f.write_str("the key has an empty segment ('//')"),
            UnsafeKey::DotSegment => f.write_str("the key has a '.' or '..' segment"),
            UnsafeKey::BadCharacter(c) => write!(f, "the key contains {c:?}"),
            UnsafeKey::SegmentTooLong => f.write_str("a key segment is longer than 255 bytes"),
        }
    }
}

/// Turns a key (or the part of a key below a copied prefix) into a relative
/// path with only normal components, or says why it cannot.
pub fn key_to_relative_path(key: &str) -> Result<PathBuf, UnsafeKey> {
    if key.is_empty() {
        return Err(UnsafeKey::Empty);
    }
    if key.starts_with('/') {
        return Err(UnsafeKey::Absolute);
    }
    if key.ends_with('/') {
        return Err(UnsafeKey::FolderMarker);
    }
    if let Some(c) = key.chars().find(|c| c.is_control() || *c == '\\') {
        return Err(UnsafeKey::BadCharacter(c));
    }
    let mut path = PathBuf::new();
    for seg in key.split('/') {
        match seg {
            "" => return Err(UnsafeKey::EmptySegment),
            "." | ".." => return Err(UnsafeKey::DotSegment),
            s if s.len() > 255 => return Err(UnsafeKey::SegmentTooLong),
            s => path.push(s),
        }
    }
    // Belt and braces: whatever the rules above missed, only plain names pass.
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(UnsafeKey::DotSegment);
    }
    Ok(path)
}

/// Joins a safe relative key path under `root`.
pub fn join_under(root: &Path, key: &str) -> Result<PathBuf, UnsafeKey> {
    Ok(root.join(key_to_relative_path(key)?))
}

/// Why a local write was refused: `path` is a symbolic link below the
/// folder the user named.
fn link_refused(path: &Path) -> crate::Error {
    crate::Error::new(
        crate::ErrorKind::InvalidInput,
        crate::Op::Write,
        path.display().to_string(),
        "is a symbolic link; not followed for a write",
    )
}

/// The folders of a local write's destination `dest` that are not the
/// user's: those below `local_root` bytes of it (see
/// [`crate::Location::local_root`]), without the last component (the
/// file, which a rename replaces and never follows).
fn below_root(dest: &str, local_root: Option<usize>) -> Option<(PathBuf, Vec<PathBuf>)> {
    let n = local_root?;
    let root = PathBuf::from(dest.get(..n)?);
    let rel = Path::new(dest).strip_prefix(&root).ok()?;
    let mut comps: Vec<_> = rel.components().collect();
    comps.pop();
    let mut at = root.clone();
    let folders = comps
        .into_iter()
        .map(|c| {
            at.push(c);
            at.clone()
        })
        .collect();
    Some((root, folders))
}

/// A name longer than 255 bytes in `dest` (file systems refuse it, and
/// better before a run than as "File name too long" in its middle).
fn check_name_lengths(dest: &Path) -> crate::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    match dest
        .components()
        .find(|c| c.as_os_str().as_bytes().len() > 255)
    {
        None => Ok(()),
        Some(c) => Err(crate::Error::new(
            crate::ErrorKind::InvalidInput,
            crate::Op::Write,
            dest.display().to_string(),
            format!(
                "a file name of {} bytes; file systems allow 255",
                c.as_os_str().as_bytes().len()
            ),
        )),
    }
}

/// Makes the folders a local write into `dest` needs (a `key` of a
/// local [`crate::Location`] and its `local_root`): the user's folder as
/// `mkdir -p` would, and below it one folder at a time, never through a
/// link: a link there is refused, naming it ("… is a symbolic link; not
/// followed for a write"). Every local write made from a key passes here
/// first (see the module docs). A name longer than 255 bytes is refused
/// too.
pub fn make_folders(dest: &str, local_root: Option<usize>) -> crate::Result<()> {
    let io = |e| crate::Error::io(crate::Op::Write, dest, e);
    check_name_lengths(Path::new(dest))?;
    let Some((root, folders)) = below_root(dest, local_root) else {
        return match Path::new(dest).parent() {
            Some(p) if !p.as_os_str().is_empty() => std::fs::create_dir_all(p).map_err(io),
            _ => Ok(()),
        };
    };
    if !root.as_os_str().is_empty() {
        std::fs::create_dir_all(&root).map_err(io)?;
    }
    for folder in folders {
        // Twice at most: a folder made by another writer between the look
        // and the mkdir is looked at again.
        for _ in 0..2 {
            match std::fs::symlink_metadata(&folder) {
                Ok(md) if md.file_type().is_symlink() => return Err(link_refused(&folder)),
                Ok(md) if md.is_dir() => break,
                Ok(_) => {
                    return Err(crate::Error::io(
                        crate::Op::Write,
                        folder.display().to_string(),
                        std::io::Error::from(std::io::ErrorKind::NotADirectory),
                    ));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match std::fs::create_dir(&folder) {
                        Ok(()) => break,
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(io(e)),
                    }
                }
                Err(e) => return Err(io(e)),
            }
        }
    }
    Ok(())
}

/// [`make_folders`]'s check without making anything, for a delete: no
/// folder below the user's in `dest` is a link. A missing one is fine
/// (there is nothing to delete through it).
pub fn check_folders(dest: &str, local_root: Option<usize>) -> crate::Result<()> {
    let Some((_, folders)) = below_root(dest, local_root) else {
        return Ok(());
    };
    for folder in folders {
        match std::fs::symlink_metadata(&folder) {
            Ok(md) if md.file_type().is_symlink() => return Err(link_refused(&folder)),
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Turns a relative local path back into a key (`/`-separated).
pub fn relative_path_to_key(rel: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?.to_owned()),
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_set_is_refused() {
        let cases: &[(&str, UnsafeKey)] = &[
            ("", UnsafeKey::Empty),
            ("../x", UnsafeKey::DotSegment),
            ("a/../../b", UnsafeKey::DotSegment),
            ("a/./b", UnsafeKey::DotSegment),
            ("..", UnsafeKey::DotSegment),
            (".", UnsafeKey::DotSegment),
            ("/etc/passwd", UnsafeKey::Absolute),
            ("a\\..\\b", UnsafeKey::BadCharacter('\\')),
            ("a\0b", UnsafeKey::BadCharacter('\0')),
            ("a\nb", UnsafeKey::BadCharacter('\n')),
            ("a//b", UnsafeKey::EmptySegment),
            ("dir/", UnsafeKey::FolderMarker),
        ];
        for (key, want) in cases {
            assert_eq!(key_to_relative_path(key).unwrap_err(), *want, "key {key:?}");
        }
        assert_eq!(
            key_to_relative_path(&"x".repeat(256)).unwrap_err(),
            UnsafeKey::SegmentTooLong
        );
    }

    /// Below the user's folder no link is followed, by a write or a
    /// delete; the user's folder itself may be one.
    #[test]
    fn writes_never_follow_a_link_below_the_users_folder() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        // The user's folder is a link: followed, as they chose it.
        let dst = dir.path().join("dst");
        std::os::unix::fs::symlink(&real, &dst).unwrap();
        let root = dst.display().to_string();
        let under = |rel: &str| format!("{root}/{rel}");
        make_folders(&under("a/b/file"), Some(root.len())).unwrap();
        assert!(real.join("a/b").is_dir());
        std::os::unix::fs::symlink(&elsewhere, real.join("sub")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, real.join("a/deep")).unwrap();
        for rel in ["sub/file", "sub/x/file", "a/deep/file"] {
            let e = make_folders(&under(rel), Some(root.len())).unwrap_err();
            assert!(
                e.to_string()
                    .ends_with("is a symbolic link; not followed for a write"),
                "{e}"
            );
            assert!(check_folders(&under(rel), Some(root.len())).is_err());
        }
        let e = make_folders(&under("sub/file"), Some(root.len())).unwrap_err();
        assert!(e.to_string().contains(&format!("{root}/sub:")), "{e}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        // The last component is the file, replaced by a rename, not followed.
        make_folders(&under("sub"), Some(root.len())).unwrap();
        check_folders(&under("a/missing/file"), Some(root.len())).unwrap();
        // A path the user named whole: their links are theirs.
        make_folders(&under("sub/file"), None).unwrap();
        let long = under(&"x".repeat(256));
        assert!(make_folders(&long, Some(root.len())).is_err());
    }

    #[test]
    fn ordinary_keys_pass() {
        for key in [
            "a",
            "a/b/c.txt",
            "ünï cødé/ø",
            "..a/b..",
            "a.b/.hidden",
            "100%",
        ] {
            let p = key_to_relative_path(key).unwrap();
            assert_eq!(relative_path_to_key(&p).unwrap(), key);
        }
    }
}
