//! A file's modification time, kept in its object's metadata.
//!
//! A store sets an object's own time when it is written, so without more a
//! file sent up and brought back carries the time of the download, and
//! the next sync in either direction copies it again. The tools already
//! in use keep the file's time beside the object, each in its own form,
//! and shoal writes and reads the same ones so their objects and shoal's
//! round-trip through each other:
//!
//! - GCS: `goog-reserved-file-mtime`, whole seconds since the epoch, as
//!   gsutil and `gcloud storage` write it (the Node and Python clients
//!   read it too);
//! - S3: `mtime` user metadata (`x-amz-meta-mtime`), seconds with nine
//!   decimals, as rclone writes it (rclone shows it as RFC 3339, which is
//!   read as well, as is rclone's GCS form of the same key).
//!
//! Either key is read on either store (a copy between stores keeps the
//! source's). A value that does not parse is no time at all: the object's
//! own time is used, never a guess.

use std::collections::BTreeMap;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// gsutil's and gcloud's key.
pub const GCS_KEY: &str = "goog-reserved-file-mtime";
/// rclone's key.
pub const MTIME_KEY: &str = "mtime";

const NS: i128 = 1_000_000_000;

/// A file time read from an object's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileTime {
    /// Nanoseconds since the Unix epoch.
    pub ns: i128,
    /// Kept to the second only (gcloud's form): compared at that precision.
    pub whole_seconds: bool,
}

/// What an object's answer said about a recorded file time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recorded {
    /// The answer could not say: an S3 listing carries no metadata.
    #[default]
    Unknown,
    /// The answer carried the object's metadata, and no time in it.
    Absent,
    /// This time.
    At(FileTime),
}

impl Recorded {
    /// What `metadata` (an object's whole custom metadata) says.
    pub fn of(metadata: &BTreeMap<String, String>) -> Recorded {
        match from_metadata(metadata) {
            Some(t) => Recorded::At(t),
            None => Recorded::Absent,
        }
    }
}

/// The time the metadata records: gcloud's key first, then rclone's.
pub fn from_metadata(metadata: &BTreeMap<String, String>) -> Option<FileTime> {
    let get = |k: &str| {
        metadata
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.as_str())
    };
    get(GCS_KEY)
        .and_then(parse)
        .or_else(|| get(MTIME_KEY).and_then(parse))
}

/// One recorded value: whole seconds (`1577836800`), seconds with a
/// fraction (`1577836800.123456789`), or RFC 3339
/// (`2020-01-01T00:00:00.123456789Z`).
pub fn parse(v: &str) -> Option<FileTime> {
    let v = v.trim();
    if let Ok(s) = v.parse::<i64>() {
        return Some(FileTime {
            ns: i128::from(s) * NS,
            whole_seconds: true,
        });
    }
    if let Some((s, frac)) = v.split_once('.')
        && !frac.is_empty()
        && frac.len() <= 9
        && frac.bytes().all(|b| b.is_ascii_digit())
        && let Ok(secs) = s.parse::<i64>()
    {
        let mut f: i128 = frac.parse().ok()?;
        for _ in frac.len()..9 {
            f *= 10;
        }
        let whole = i128::from(secs) * NS;
        // "-1.5" is a second and a half before the epoch.
        let ns = if s.starts_with('-') {
            whole - f
        } else {
            whole + f
        };
        return Some(FileTime {
            ns,
            whole_seconds: false,
        });
    }
    let t = OffsetDateTime::parse(v, &Rfc3339).ok()?;
    Some(FileTime {
        ns: t.unix_timestamp_nanos(),
        whole_seconds: false,
    })
}

/// The form a store's objects record a file time in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `goog-reserved-file-mtime`, whole seconds, as gcloud writes it (GCS).
    Gcloud,
    /// `mtime`, decimal seconds, as rclone writes it (S3).
    Rclone,
}

/// The metadata entry that records the file time `ns` in `form`.
pub fn record(form: Form, ns: i128) -> (&'static str, String) {
    match form {
        Form::Gcloud => (GCS_KEY, ns.div_euclid(NS).to_string()),
        Form::Rclone => (
            MTIME_KEY,
            format!("{}.{:09}", ns.div_euclid(NS), ns.rem_euclid(NS)),
        ),
    }
}

/// Whether time `a` is later than `b`, at the coarser precision of the two
/// (a time kept to the second equals every instant of that second).
pub fn later(a: (i128, bool), b: (i128, bool)) -> bool {
    if a.1 || b.1 {
        a.0.div_euclid(NS) > b.0.div_euclid(NS)
    } else {
        a.0 > b.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads() {
        let t = |ns, whole_seconds| Some(FileTime { ns, whole_seconds });
        assert_eq!(parse("1577836800"), t(1_577_836_800 * NS, true));
        assert_eq!(
            parse("1577836800.000000001"),
            t(1_577_836_800 * NS + 1, false)
        );
        assert_eq!(parse("1577836800.5"), t(1_577_836_800 * NS + NS / 2, false));
        assert_eq!(parse("-1.5"), t(-NS - NS / 2, false));
        assert_eq!(
            parse("2020-01-01T00:00:00.25Z"),
            t(1_577_836_800 * NS + NS / 4, false)
        );
        assert_eq!(
            parse("2020-01-01T01:00:00+01:00"),
            t(1_577_836_800 * NS, false)
        );
        for bad in ["", "x", "1.", "1.1234567890", "1e9", "2020-01-01", "1.-5"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn written_as_each_tool_writes_and_read_back() {
        let ns = 1_577_836_800 * NS + 123_456_789;
        let (k, v) = record(Form::Gcloud, ns);
        assert_eq!((k, v.as_str()), (GCS_KEY, "1577836800"));
        let (k, v) = record(Form::Rclone, ns);
        assert_eq!((k, v.as_str()), (MTIME_KEY, "1577836800.123456789"));
        assert_eq!(parse(&v).unwrap().ns, ns);
        let (_, v) = record(Form::Rclone, -NS / 2);
        assert_eq!(v, "-1.500000000");
    }

    #[test]
    fn gcloud_key_first_and_any_case() {
        let mut m = BTreeMap::new();
        m.insert("MTime".to_owned(), "5.5".to_owned());
        assert_eq!(from_metadata(&m).unwrap().ns, 5 * NS + NS / 2);
        m.insert(GCS_KEY.to_owned(), "7".to_owned());
        assert_eq!(from_metadata(&m).unwrap().ns, 7 * NS);
        m.insert(GCS_KEY.to_owned(), "garbage".to_owned());
        assert_eq!(from_metadata(&m).unwrap().ns, 5 * NS + NS / 2);
        assert_eq!(Recorded::of(&BTreeMap::new()), Recorded::Absent);
    }

    #[test]
    fn seconds_compare_at_seconds() {
        let s = 1_577_836_800 * NS;
        assert!(!later((s + NS / 2, false), (s, true)));
        assert!(later((s + NS / 2, false), (s, false)));
        assert!(later((s + NS, false), (s, true)));
        assert!(!later((s, true), (s + 3, false)));
    }
}
