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
