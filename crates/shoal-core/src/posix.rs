//! A file's POSIX mode, owner and group, kept in an object's custom
//! metadata (`-P` / `--preserve-posix`), in the keys other tools read, as
//! [`crate::file_time`] keeps its time:
//!
//! - [`Form::Gcloud`] (GCS): `goog-reserved-posix-mode` (the permission
//!   bits in octal, `644`), `goog-reserved-posix-uid`,
//!   `goog-reserved-posix-gid` (decimal), as `gcloud storage cp -P`.
//! - [`Form::Rclone`] (S3): `mode` (the whole `st_mode` in octal,
//!   `0100644`), `uid`, `gid` (decimal), rclone's metadata keys.
//!
//! Setuid, setgid and sticky bits are never given back from an object
//! (as rclone since GHSA-945v-v9p3-v5xw): whoever wrote the object would
//! choose them for files on this machine.
//!
//! A download reads either form, whichever store it came from.

use std::collections::BTreeMap;

pub use crate::file_time::Form;

const GCS_MODE: &str = "goog-reserved-posix-mode";
const GCS_UID: &str = "goog-reserved-posix-uid";
const GCS_GID: &str = "goog-reserved-posix-gid";
const RCLONE_MODE: &str = "mode";
const RCLONE_UID: &str = "uid";
const RCLONE_GID: &str = "gid";

/// A file's mode (`st_mode`), owner and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posix {
    /// `st_mode`; only the permission bits (`0o777`) are given back.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// The metadata entries that record `p` in `form`.
pub fn record(form: Form, p: Posix) -> [(&'static str, String); 3] {
    match form {
        Form::Gcloud => [
            (GCS_MODE, format!("{:o}", p.mode & 0o7777)),
            (GCS_UID, p.uid.to_string()),
            (GCS_GID, p.gid.to_string()),
        ],
        Form::Rclone => [
            (RCLONE_MODE, format!("0{:o}", p.mode)),
            (RCLONE_UID, p.uid.to_string()),
            (RCLONE_GID, p.gid.to_string()),
        ],
    }
}

/// What `metadata` recorded, in either form, each part on its own (an
/// entry that does not parse is absent): (permission bits `0o777`, uid,
/// gid).
pub fn from_metadata(
    metadata: &BTreeMap<String, String>,
) -> (Option<u32>, Option<u32>, Option<u32>) {
    let get = |a: &str, b: &str| metadata.get(a).or_else(|| metadata.get(b));
    let mode = get(GCS_MODE, RCLONE_MODE)
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .map(|m| m & 0o777);
    let id = |a, b| get(a, b).and_then(|v| v.trim().parse::<u32>().ok());
    (mode, id(GCS_UID, RCLONE_UID), id(GCS_GID, RCLONE_GID))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_round_trip() {
        let p = Posix {
            mode: 0o100640,
            uid: 1000,
            gid: 50,
        };
        for form in [Form::Gcloud, Form::Rclone] {
            let m: BTreeMap<String, String> = record(form, p)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            assert_eq!(from_metadata(&m), (Some(0o640), Some(1000), Some(50)));
        }
        let [(k, v), ..] = record(Form::Gcloud, p);
        assert_eq!((k, v.as_str()), ("goog-reserved-posix-mode", "640"));
        let [(k, v), ..] = record(Form::Rclone, p);
        assert_eq!((k, v.as_str()), ("mode", "0100640"));
    }

    #[test]
    fn bad_entries_are_absent() {
        let mut m = BTreeMap::new();
        m.insert("mode".to_owned(), "rw-r--r--".to_owned());
        m.insert("uid".to_owned(), "-1".to_owned());
        assert_eq!(from_metadata(&m), (None, None, None));
        // A setuid bit recorded is not given back.
        m.insert("mode".to_owned(), "04755".to_owned());
        assert_eq!(from_metadata(&m).0, Some(0o755));
    }
}
