//! Uploads that resume (issue #55): a killed `cp` of a big file, run again,
//! goes on from the parts the store already holds.
//!
//! A multipart upload's parts stay on the server until the upload is
//! completed or aborted, so what a later run needs is the upload id. It is
//! written down here when the upload starts, one small file per upload
//! under `uploads/` in the state folder (`$SHOAL_STATE_DIR`, else
//! `$XDG_STATE_HOME/shoal`, else `~/.local/state/shoal`), named by a digest
//! of the source file's path and the destination URL, and holding:
//!
//! - the source as it was (size, modification time, inode, device),
//! - the part size and a digest of the options the upload was started with
//!   (metadata, storage class, keys: they are fixed at its start),
//! - the upload id.
//!
//! A later upload of the same file to the same URL finds the entry and
//! trusts nothing in it without checking:
//!
//! - the file must be the one the entry describes, and the part size and
//!   options the same; otherwise the old upload is aborted and a new one
//!   started ("a changed source starts over");
//! - the store lists the parts it holds (ListParts); an upload it no
//!   longer has (completed, aborted, expired) is started over;
//! - each listed part is read back from the file and kept only if its
//!   size and CRC32C (or, where the store keeps no CRC32C, its MD5 ETag)
//!   are those of the file's bytes at that offset; any other part is sent
//!   again. So nothing is ever completed from parts of two versions of a
//!   file, whatever the journal or the listing says.
//!
//! While an entry exists the upload is not aborted when the run ends
//! early (Ctrl-C, a lost connection): that is what keeps it resumable.
//! It is aborted, and the entry removed, when the upload cannot be
//! completed as it is (the file changed, a checksum did not match, the
//! destination's precondition failed). `shoal uploads` lists the uploads
//! in progress in a bucket and, with `--abort`, aborts those older than a
//! given age. `--no-resume` neither reads nor writes entries.
//!
//! Where the journal cannot be written the upload runs as before: aborted
//! on any failure.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use shoal_core::checksum::{hex, md5_digest};
use shoal_core::{Location, PutOptions};

/// The source file as an upload saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Source {
    size: u64,
    mtime_ns: i128,
    inode: u64,
    device: u64,
}

impl Source {
    pub(crate) fn of(md: &std::fs::Metadata) -> Source {
        Source {
            size: md.len(),
            mtime_ns: i128::from(md.mtime()) * 1_000_000_000 + i128::from(md.mtime_nsec()),
            inode: md.ino(),
            device: md.dev(),
        }
    }
}

/// One upload in progress, as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The file's path, as given (for people reading the folder).
    path: String,
    /// The destination URL.
    destination: String,
    source: Source,
    part_size: u64,
    /// Digest of the upload's options (see [`options_digest`]).
    options: String,
    pub(crate) upload_id: String,
}

impl Entry {
    /// Whether an upload written down as `self` may go on for `now`:
    /// the same file, unchanged, cut in the same parts, with the same
    /// options.
    pub(crate) fn fits(&self, now: &Entry) -> bool {
        self.destination == now.destination
            && self.source == now.source
            && self.part_size == now.part_size
            && self.options == now.options
    }
}

/// The journal entry of one (file, destination) pair.
pub(crate) struct Journal {
    file: PathBuf,
    /// What this run would write down (with an empty upload id).
    pub(crate) now: Entry,
}

fn state_dir() -> Option<PathBuf> {
    Some(shoal_core::state::dir()?.join("uploads"))
}

/// A digest of what an upload fixes at its start. `Debug` of the options
/// names keys only by their digests (`CustomerKey`'s `Debug`).
fn options_digest(put: &PutOptions) -> String {
    hex(&md5_digest(format!("{put:?}").as_bytes()))
}

impl Journal {
    /// The entry for uploading `path` (whose metadata is `md`) to `dst` in
    /// parts of `part_size` with `put`; None where there is no state
    /// folder.
    pub(crate) fn for_upload(
        path: &Path,
        md: &std::fs::Metadata,
        dst: &Location,
        part_size: u64,
        put: &PutOptions,
    ) -> Option<Journal> {
        Some(Self::in_dir(state_dir()?, path, md, dst, part_size, put))
    }

    fn in_dir(
        dir: PathBuf,
        path: &Path,
        md: &std::fs::Metadata,
        dst: &Location,
        part_size: u64,
        put: &PutOptions,
    ) -> Journal {
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let destination = dst.to_string();
        let mut h = Md5::new();
        h.update(abs.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(destination.as_bytes());
        Journal {
            file: dir.join(hex(&h.finalize())),
            now: Entry {
                path: abs.display().to_string(),
                destination,
                source: Source::of(md),
                part_size,
                options: options_digest(put),
                upload_id: String::new(),
            },
        }
    }

    /// The entry an earlier run left, if any (an unreadable one is none).
    pub(crate) fn read(&self) -> Option<Entry> {
        serde_json::from_slice(&std::fs::read(&self.file).ok()?).ok()
    }

    /// Writes down upload `upload_id` for this pair; false when it could
    /// not be written (the upload is then not resumable).
    pub(crate) fn write(&self, upload_id: &str) -> bool {
        let entry = Entry {
            upload_id: upload_id.to_owned(),
            ..self.now.clone()
        };
        let Some(dir) = self.file.parent() else {
            return false;
        };
        let Ok(text) = serde_json::to_vec(&entry) else {
            return false;
        };
        // Whole under a temporary name, then renamed: a reader never sees
        // half an entry.
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            self.file.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let ok = std::fs::create_dir_all(dir).is_ok()
            && std::fs::write(&tmp, text).is_ok()
            && std::fs::rename(&tmp, &self.file).is_ok();
        if !ok {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!("upload journal not written in {}", dir.display());
        }
        ok
    }

    /// Removes the entry (the upload completed, or was aborted).
    pub(crate) fn remove(&self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_fits_only_the_same_file_parts_and_options() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"abc").unwrap();
        let md = std::fs::metadata(&f).unwrap();
        let dst = Location::parse("s3://b/k").unwrap();
        let put = PutOptions::default();
        let at = |md: &std::fs::Metadata, part: u64, put: &PutOptions| {
            Journal::in_dir(dir.path().join("uploads"), &f, md, &dst, part, put)
        };
        let j = at(&md, 5, &put);
        assert!(j.read().is_none());
        assert!(j.write("U1"));
        let e = j.read().unwrap();
        assert_eq!(e.upload_id, "U1");
        assert!(e.fits(&j.now));
        // Another part size, other options, another file state: no.
        let j2 = at(&md, 6, &put);
        assert!(!e.fits(&j2.now));
        let other = PutOptions {
            content_type: Some("text/plain".into()),
            ..PutOptions::default()
        };
        assert!(!e.fits(&at(&md, 5, &other).now));
        std::fs::write(&f, b"abcd").unwrap();
        let md2 = std::fs::metadata(&f).unwrap();
        assert!(!e.fits(&at(&md2, 5, &put).now));
        j.remove();
        assert!(j.read().is_none());
    }
}
