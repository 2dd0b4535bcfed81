//! Parsing what users type: `gs://bucket/key`, `s3://bucket/key`,
//! `file:///path` and plain local paths.
//!
//! The key is everything after the first `/` that follows the bucket, byte
//! for byte: no percent-decoding, no collapsing of `//`, no trimming of a
//! trailing `/`. Object stores allow all of those and users rely on them.

use std::fmt;

use crate::error::{Error, Op, Result};
use crate::meta::ObjectVersion;

/// Where an object lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Google Cloud Storage (`gs://`).
    Gs,
    /// S3 or an S3-compatible store (`s3://`).
    S3,
    /// The local file system (a path or `file://`).
    File,
}

impl Scheme {
    /// The URL prefix, `gs://`, `s3://` or empty for local paths.
    pub fn prefix(self) -> &'static str {
        match self {
            Scheme::Gs => "gs://",
            Scheme::S3 => "s3://",
            Scheme::File => "",
        }
    }

    /// The version a user names as text (a listing's `version`, Python's
    /// `version=`), as this scheme's stores pin one: a GCS generation is a
    /// number, anything else an ETag, taken as given (quotes included).
    /// The error says why the text is no GCS generation.
    pub fn parse_version(self, v: &str) -> std::result::Result<ObjectVersion, String> {
        match self {
            Scheme::Gs => v
                .parse()
                .map(ObjectVersion::Generation)
                .map_err(|_| format!("version {v:?} is not a GCS generation (a number)")),
            Scheme::S3 | Scheme::File => Ok(ObjectVersion::ETag(v.to_owned())),
        }
    }

    /// The stored version a user names with `--version-id` (or Python's
    /// `version_id=`): a GCS generation (a number, as
    /// [`Scheme::parse_version`] reads it), an S3 version id (any
    /// non-empty text, taken as given). Local files have no versions.
    pub fn parse_version_id(self, v: &str) -> std::result::Result<ObjectVersion, String> {
        match self {
            Scheme::Gs => self.parse_version(v),
            Scheme::S3 if !v.is_empty() => Ok(ObjectVersion::VersionId(v.to_owned())),
            Scheme::S3 => Err("an empty S3 version id".to_owned()),
            Scheme::File => Err("local files have no versions".to_owned()),
        }
    }
}

/// A store the user named in their config file (`[stores.NAME]`), whose
/// URLs are `NAME://bucket/key`. Names are declared once per process
/// ([`declare_store`]) and kept for its life, so the value is `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreName(&'static str);

impl StoreName {
    /// The name as written in the config file.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for StoreName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The named stores declared in this process: name and the kind of store.
static NAMED: std::sync::RwLock<Vec<(StoreName, Scheme)>> = std::sync::RwLock::new(Vec::new());

/// Why `name` cannot name a store, if it cannot: a URL scheme must start
/// with a lowercase letter and hold only lowercase letters, digits, `-`,
/// `_` and `.`, and the built-in schemes (and their aliases) are taken.
pub fn check_store_name(name: &str) -> std::result::Result<(), String> {
    let ok_start = name.starts_with(|c: char| c.is_ascii_lowercase());
    let ok_rest = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
    if !ok_start || !ok_rest || name.len() > 63 {
        return Err(format!(
            "store name {name:?} is not usable as a URL scheme (lowercase letters, digits, \
             '-', '_' and '.', starting with a letter, at most 63)"
        ));
    }
    if matches!(name, "gs" | "gcs" | "s3" | "s3a" | "file" | "shoal") {
        return Err(format!("store name {name:?} is taken by shoal's own URLs"));
    }
    Ok(())
}

/// Declares a named store of kind `scheme` (`Gs` or `S3`): from now on
/// `NAME://bucket/key` parses to a [`Location`] naming it. Declaring the
/// same name again keeps one entry (the kind of the last declaration).
pub fn declare_store(name: &str, scheme: Scheme) -> std::result::Result<StoreName, String> {
    check_store_name(name)?;
    if scheme == Scheme::File {
        return Err(format!("store {name:?}: a named store is gs or s3"));
    }
    let mut named = NAMED.write().unwrap_or_else(|e| e.into_inner());
    if let Some(entry) = named.iter_mut().find(|(n, _)| n.0 == name) {
        entry.1 = scheme;
        return Ok(entry.0);
    }
    let n = StoreName(Box::leak(name.to_owned().into_boxed_str()));
    named.push((n, scheme));
    Ok(n)
}

/// The declared store called `name` and its kind.
pub fn named_store(name: &str) -> Option<(StoreName, Scheme)> {
    let named = NAMED.read().unwrap_or_else(|e| e.into_inner());
    named.iter().find(|(n, _)| n.0 == name).copied()
}

/// A parsed URL: scheme, bucket and key. For local paths `bucket` is empty
/// and `key` is the path as given.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// Which kind of store.
    pub scheme: Scheme,
    /// Bucket name (empty for local paths).
    pub bucket: String,
    /// Object key or prefix, verbatim (for local paths, the path).
    pub key: String,
    /// For a local path placed under a folder by a key
    /// (`tree::destination`): how many bytes of `key` name that folder,
    /// the one the user chose. What follows came from a key, and a write
    /// there never follows a link ([`crate::local_path::make_folders`]).
    /// None when the user named the whole path.
    pub local_root: Option<usize>,
    /// The named store (`NAME://`) serving this location, when not the
    /// scheme's default one. `scheme` is then that store's kind.
    pub store: Option<StoreName>,
}

/// The URL `input` (no `://`) was meant to be, when it starts with a
/// store's scheme and a colon: `gs:/b/k` and `gs:b/k` mean `gs://b/k`
/// (a slip of the keyboard, not a local file a user names so).
fn url_meant(input: &str) -> Option<String> {
    let (scheme, rest) = input.split_once(':')?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "gs" | "gcs" | "s3" | "s3a") && named_store(&scheme).is_none() {
        return None;
    }
    let rest = rest.trim_start_matches('/');
    let shown = match scheme.as_str() {
        "gcs" => "gs",
        "s3a" => "s3",
        s => s,
    };
    Some(format!("{shown}://{rest}"))
}

impl Location {
    /// Parses a URL or local path. Errors name the input and the problem.
    pub fn parse(input: &str) -> Result<Location> {
        if input.is_empty() {
            return Err(Error::invalid(Op::Parse, "''", "empty URL or path"));
        }
        if input.contains('\0') {
            return Err(Error::invalid(
                Op::Parse,
                input.replace('\0', "\\0"),
                "contains a NUL byte",
            ));
        }
        let Some((scheme, rest)) = input.split_once("://") else {
            if let Some(meant) = url_meant(input) {
                return Err(Error::invalid(
                    Op::Parse,
                    input,
                    format!("not a URL (one or no slash after the scheme): did you mean {meant}?"),
                )
                .with_hint("a local file of that name: write ./ before it"));
            }
            return Ok(Location {
                scheme: Scheme::File,
                bucket: String::new(),
                key: input.to_owned(),
                local_root: None,
                store: None,
            });
        };
        let mut store = None;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "gs" => Scheme::Gs,
            "s3" => Scheme::S3,
            "file" => {
                // file:///abs/path or file://localhost/abs/path
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(Error::invalid(
                        Op::Parse,
                        input,
                        "file:// URLs must be absolute (file:///path/to/file)",
                    ));
                }
                return Ok(Location {
                    scheme: Scheme::File,
                    bucket: String::new(),
                    key: path.to_owned(),
                    local_root: None,
                    store: None,
                });
            }
            other if named_store(other).is_some() => {
                let (name, kind) = named_store(other).expect("checked above");
                store = Some(name);
                kind
            }
            other => {
                return Err(Error::invalid(
                    Op::Parse,
                    input,
                    format!("unknown scheme '{other}://'"),
                )
                .with_hint(
                    "use gs://, s3://, file://, a local path, or a store named in the config file",
                ));
            }
        };
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        validate_bucket(input, bucket)?;
        Ok(Location {
            scheme,
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            local_root: None,
            store,
        })
    }

    /// A location in the same bucket with another key.
    pub fn with_key(&self, key: impl Into<String>) -> Location {
        Location {
            scheme: self.scheme,
            bucket: self.bucket.clone(),
            key: key.into(),
            local_root: None,
            store: self.store,
        }
    }

    /// The URL prefix of this location's store: `NAME://` for a named
    /// store, else the scheme's (`gs://`, `s3://`, empty for paths).
    pub fn prefix(&self) -> std::borrow::Cow<'static, str> {
        match self.store {
            Some(n) => format!("{n}://").into(),
            None => self.scheme.prefix().into(),
        }
    }

    /// Whether `other` is served by the same store as this (same scheme,
    /// same named store or both the scheme's default).
    pub fn same_store(&self, other: &Location) -> bool {
        self.scheme == other.scheme && self.store == other.store
    }

    /// Whether this is a local path.
    pub fn is_local(&self) -> bool {
        self.scheme == Scheme::File
    }

    /// Whether the key names a "directory" (empty or ends with `/`).
    pub fn is_prefix_like(&self) -> bool {
        self.key.is_empty() || self.key.ends_with('/')
    }

    /// The last path segment of the key (for naming a copy's destination).
    pub fn basename(&self) -> &str {
        let k = self.key.trim_end_matches('/');
        k.rsplit('/').next().unwrap_or(k)
    }
}

fn validate_bucket(input: &str, bucket: &str) -> Result<()> {
    if bucket.is_empty() {
        return Err(Error::invalid(Op::Parse, input, "empty bucket name")
            .with_hint("write gs://BUCKET/KEY or s3://BUCKET/KEY"));
    }
    if let Some(c) = bucket
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "?#\\".contains(*c))
    {
        return Err(Error::invalid(
            Op::Parse,
            input,
            format!("bucket name {bucket:?} contains {c:?}, which no store allows"),
        ));
    }
    if bucket.len() > 222 {
        return Err(Error::invalid(
            Op::Parse,
            input,
            "bucket name longer than 222 characters",
        ));
    }
    Ok(())
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scheme {
            Scheme::File => f.write_str(&self.key),
            _ => write!(f, "{}{}/{}", self.prefix(), self.bucket, self.key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn a_url_with_a_slash_too_few_is_an_error_not_a_file() {
        for (bad, meant) in [
            ("gs:/b/k", "gs://b/k"),
            ("s3:b", "s3://b"),
            ("gs:b/x.csv", "gs://b/x.csv"),
            ("S3:/b", "s3://b"),
            ("gcs:/b/k", "gs://b/k"),
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad}");
            assert!(
                e.to_string().contains(&format!("did you mean {meant}?")),
                "{e}"
            );
        }
        assert!(Location::parse("./gs:b").unwrap().is_local());
        assert!(Location::parse("notes:today").unwrap().is_local());
    }

    #[test]
    fn versions_parse_as_each_store_pins_them() {
        assert_eq!(
            Scheme::Gs.parse_version("17"),
            Ok(ObjectVersion::Generation(17))
        );
        assert_eq!(
            Scheme::Gs.parse_version("\"abc\"").unwrap_err(),
            "version \"\\\"abc\\\"\" is not a GCS generation (a number)"
        );
        assert_eq!(
            Scheme::S3.parse_version_id("3/L4kqtJl"),
            Ok(ObjectVersion::VersionId("3/L4kqtJl".into()))
        );
        assert_eq!(
            Scheme::Gs.parse_version_id("17"),
            Ok(ObjectVersion::Generation(17))
        );
        assert!(Scheme::File.parse_version_id("1").is_err());
        assert!(Scheme::S3.parse_version_id("").is_err());
        // An ETag is kept as given, quotes and all.
        assert_eq!(
            Scheme::S3.parse_version("\"abc\""),
            Ok(ObjectVersion::ETag("\"abc\"".into()))
        );
    }

    #[test]
    fn keys_survive_verbatim() {
        for key in [
            "a//b",
            "dir/",
            "sp ace",
            "ünï/cødé",
            "100%25",
            "../x",
            "a/./b",
            "?q#f",
            "",
        ] {
            let url = format!("gs://bkt/{key}");
            let loc = Location::parse(&url).unwrap();
            assert_eq!(loc.scheme, Scheme::Gs);
            assert_eq!(loc.bucket, "bkt");
            assert_eq!(loc.key, key);
            assert_eq!(loc.to_string(), url);
        }
    }

    #[test]
    fn bucket_only() {
        let loc = Location::parse("s3://bkt").unwrap();
        assert_eq!((loc.bucket.as_str(), loc.key.as_str()), ("bkt", ""));
        assert_eq!(loc.to_string(), "s3://bkt/");
    }

    #[test]
    fn local_paths() {
        assert_eq!(Location::parse("./x/y").unwrap().key, "./x/y");
        assert_eq!(Location::parse("file:///tmp/a").unwrap().key, "/tmp/a");
        assert_eq!(
            Location::parse("file://localhost/tmp/a").unwrap().key,
            "/tmp/a"
        );
        assert!(Location::parse("file://rel/a").is_err());
        assert!(Location::parse("with:colon").unwrap().is_local());
    }

    #[test]
    fn bad_inputs_name_the_problem() {
        let e = Location::parse("ftp://b/k").unwrap_err();
        assert!(e.to_string().contains("unknown scheme 'ftp://'"), "{e}");
        let e = Location::parse("gs:///k").unwrap_err();
        assert!(e.to_string().contains("empty bucket name"), "{e}");
        let e = Location::parse("s3://").unwrap_err();
        assert!(e.to_string().contains("empty bucket name"), "{e}");
        let e = Location::parse("gs://b b/k").unwrap_err();
        assert!(e.to_string().contains("contains ' '"), "{e}");
        assert!(Location::parse("").is_err());
        assert!(Location::parse("gs://b/\0").is_err());
    }

    #[test]
    fn named_stores_parse_only_once_declared() {
        assert!(Location::parse("minio-a://b/k").is_err());
        assert!(Location::parse("minio-a:b").unwrap().is_local());
        let n = declare_store("minio-a", Scheme::S3).unwrap();
        let loc = Location::parse("minio-a://b/k").unwrap();
        assert_eq!(loc.scheme, Scheme::S3);
        assert_eq!(loc.store, Some(n));
        assert_eq!(loc.to_string(), "minio-a://b/k");
        assert_eq!(loc.with_key("x").to_string(), "minio-a://b/x");
        assert!(!loc.same_store(&Location::parse("s3://b/k").unwrap()));
        let e = Location::parse("minio-a:/b/k").unwrap_err();
        assert!(e.to_string().contains("did you mean minio-a://b/k?"), "{e}");
        for taken in ["gs", "s3", "file", "gcs"] {
            assert!(declare_store(taken, Scheme::S3).is_err(), "{taken}");
        }
        assert!(declare_store("Bad Name", Scheme::S3).is_err());
        assert!(declare_store("x", Scheme::File).is_err());
    }

    #[test]
    fn basename() {
        assert_eq!(
            Location::parse("gs://b/x/y.bin").unwrap().basename(),
            "y.bin"
        );
        assert_eq!(Location::parse("gs://b/x/dir/").unwrap().basename(), "dir");
    }
}
