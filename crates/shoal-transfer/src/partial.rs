//! What an interrupted sliced download leaves behind, so a rerun fetches
//! only the slices that are missing.
//!
//! Why a state file beside the data: a Ctrl-C, a `kill -9` or a lost network
//! on a 30 GiB download should cost the slices in flight, not the whole
//! object. The sparse data file (`.NAME.shoal-partial`) keeps the slices
//! already written; the state file (`.NAME.shoal-partial.json`) says which
//! ones, for which object version. Its first line names the object (URL,
//! size, generation/ETag, slice plan); every finished slice appends one line
//! with its CRC32C. Appends are single small writes, so a crash leaves at
//! worst a torn last line, which is ignored.
//!
//! Nothing in the state file is trusted blindly: a rerun resumes only when
//! URL, size, version and plan match, and it re-reads every recorded slice
//! from disk and checks its CRC32C before counting it as done (a slice lost
//! in a power cut, or a file edited in between, is fetched again). The
//! whole-object check at the end is the same as for a fresh download.
//!
//! Only downloads of more than one slice keep state: a small object is
//! cheaper to fetch again than to account for.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use shoal_core::{Error, ObjectVersion, Op, Result};

/// The first line of the state file: which download this is.
#[derive(Serialize, Deserialize, PartialEq, Eq, Debug)]
struct Header {
    shoal_partial: u32,
    url: String,
    size: u64,
    version: Option<String>,
    slices: Vec<(u64, u64)>,
}

/// One finished slice.
#[derive(Serialize, Deserialize)]
struct Done {
    slice: usize,
    crc32c: u32,
}

/// An open resumable download: the sparse data file and its journal.
pub(crate) struct Partial {
    pub(crate) data_path: PathBuf,
    state_path: PathBuf,
    journal: Mutex<File>,
    /// CRC32C of each slice already on disk (checked), by slice index.
    pub(crate) done: Vec<Option<u32>>,
}

/// The data file's name beside `dest`.
pub fn data_path(dest: &Path) -> PathBuf {
    sibling(dest, ".shoal-partial")
}

/// Removes what an interrupted download into `dest` left, once `dest` is
/// complete by other means (a rerun with a different slice plan, or one
/// slice): a finished download leaves no hidden files behind.
pub(crate) fn remove_stale(dest: &Path) {
    let _ = std::fs::remove_file(data_path(dest));
    let _ = std::fs::remove_file(state_path(dest));
}

/// Whether an earlier run left a resumable download into `dest`.
pub(crate) fn pending(dest: &Path) -> bool {
    state_path(dest).exists()
}

fn state_path(dest: &Path) -> PathBuf {
    sibling(dest, ".shoal-partial.json")
}

fn sibling(dest: &Path, suffix: &str) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dest.with_file_name(format!(".{name}{suffix}"))
}

fn version_string(v: Option<&ObjectVersion>) -> Option<String> {
    v.map(|v| v.to_string())
}

impl Partial {
    /// Opens the partial download of `url` into `dest`: the one left by an
    /// earlier run when it matches, or a fresh one. Returns the open data
    /// file (sized to `size`) too.
    pub(crate) fn open(
        dest: &Path,
        url: &str,
        size: u64,
        version: Option<&ObjectVersion>,
        slices: &[(u64, u64)],
        resume: bool,
    ) -> Result<(Partial, File)> {
        let header = Header {
            shoal_partial: 1,
            url: url.to_owned(),
            size,
            version: version_string(version),
            slices: slices.to_vec(),
        };
        let data_path = data_path(dest);
        let state_path = state_path(dest);
        let dest_s = dest.display().to_string();
        if resume && let Some((file, done)) = reopen(&data_path, &state_path, &header) {
            let journal = OpenOptions::new()
                .append(true)
                .open(&state_path)
                .map_err(|e| Error::io(Op::Write, &dest_s, e))?;
            let p = Partial {
                data_path,
                state_path,
                journal: Mutex::new(journal),
                done,
            };
            return Ok((p, file));
        }
        let file = File::create(&data_path).map_err(|e| Error::io(Op::Write, &dest_s, e))?;
        file.set_len(size)
            .map_err(|e| Error::io(Op::Write, &dest_s, e))?;
        let mut journal =
            File::create(&state_path).map_err(|e| Error::io(Op::Write, &dest_s, e))?;
        let mut line = serde_json::to_vec(&header).expect("plain data serialises");
        line.push(b'\n');
        journal
            .write_all(&line)
            .map_err(|e| Error::io(Op::Write, &dest_s, e))?;
        let p = Partial {
            data_path,
            state_path,
            journal: Mutex::new(journal),
            done: vec![None; slices.len()],
        };
        Ok((p, file))
    }

    /// Records that slice `i` is on disk with this CRC32C.
    pub(crate) fn record(&self, i: usize, crc32c: u32) {
        let mut line = serde_json::to_vec(&Done { slice: i, crc32c }).expect("plain data");
        line.push(b'\n');
        let mut f = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        // A journal that cannot be written costs only the resume, not the
        // download.
        if let Err(e) = f.write_all(&line) {
            tracing::debug!(error = %e, "could not record a finished slice");
        }
    }

    /// Slices and bytes already present when this run started.
    pub(crate) fn reused(&self, slices: &[(u64, u64)]) -> (usize, u64) {
        let mut n = 0;
        let mut bytes = 0;
        for (d, (s, e)) in self.done.iter().zip(slices) {
            if d.is_some() {
                n += 1;
                bytes += e - s;
            }
        }
        (n, bytes)
    }

    /// The download is complete and in place: forget it.
    pub(crate) fn finish(self) {
        let _ = std::fs::remove_file(&self.state_path);
    }

    /// The data cannot be trusted (the object changed, a checksum failed):
    /// remove both files so no rerun builds on them.
    pub(crate) fn discard(self) {
        let _ = std::fs::remove_file(&self.data_path);
        let _ = std::fs::remove_file(&self.state_path);
    }
}

/// The earlier run's data file and the slices in it that still check out,
/// when the state file describes this very download.
fn reopen(data: &Path, state: &Path, want: &Header) -> Option<(File, Vec<Option<u32>>)> {
    let mut lines = BufReader::new(File::open(state).ok()?).lines();
    let header: Header = serde_json::from_str(&lines.next()?.ok()?).ok()?;
    if &header != want {
        tracing::debug!(state = %state.display(), "partial download is of another object or version; starting over");
        return None;
    }
    let file = OpenOptions::new().read(true).write(true).open(data).ok()?;
    if file.metadata().ok()?.len() != want.size {
        return None;
    }
    let mut done = vec![None; want.slices.len()];
    for line in lines {
        // A torn line (crash mid-append) is skipped; its slice is fetched
        // again.
        let Some(d) = line
            .ok()
            .and_then(|l| serde_json::from_str::<Done>(&l).ok())
        else {
            continue;
        };
        if let Some(&(s, e)) = want.slices.get(d.slice) {
            if crc_of(&file, s, e).ok() == Some(d.crc32c) {
                done[d.slice] = Some(d.crc32c);
            } else {
                tracing::debug!(
                    slice = d.slice,
                    "recorded slice does not check out; fetching it again"
                );
            }
        }
    }
    Some((file, done))
}

/// CRC32C of bytes `[start, end)` of `file`, read in 4 MiB blocks.
fn crc_of(file: &File, start: u64, end: u64) -> std::io::Result<u32> {
    let mut buf = vec![0u8; (4usize << 20).min((end - start) as usize)];
    let mut crc = 0;
    let mut pos = start;
    while pos < end {
        let n = ((end - pos) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], pos)?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        pos += n as u64;
    }
    Ok(crc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Vec<(u64, u64)> {
        vec![(0, 4), (4, 8), (8, 10)]
    }

    #[test]
    fn a_rerun_keeps_only_slices_that_check_out() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("obj");
        let (p, file) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
        file.write_all_at(b"abcd", 0).unwrap();
        p.record(0, crc32c::crc32c(b"abcd"));
        file.write_all_at(b"ij", 8).unwrap();
        p.record(2, crc32c::crc32c(b"ij"));
        drop((p, file));
        // Slice 2 is damaged on disk after it was recorded.
        let f = OpenOptions::new()
            .write(true)
            .open(data_path(&dest))
            .unwrap();
        f.write_all_at(b"X", 9).unwrap();

        let (p, _) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
        assert_eq!(p.done, vec![Some(crc32c::crc32c(b"abcd")), None, None]);
        assert_eq!(p.reused(&plan()), (1, 4));
    }

    #[test]
    fn another_version_size_or_plan_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("obj");
        let v1 = ObjectVersion::Generation(1);
        let (p, file) = Partial::open(&dest, "gs://b/obj", 10, Some(&v1), &plan(), true).unwrap();
        file.write_all_at(b"abcd", 0).unwrap();
        p.record(0, crc32c::crc32c(b"abcd"));
        drop((p, file));

        let v2 = ObjectVersion::Generation(2);
        let (p, _) = Partial::open(&dest, "gs://b/obj", 10, Some(&v2), &plan(), true).unwrap();
        assert_eq!(p.done, vec![None, None, None], "new generation");
        drop(p);
        let (p, _) = Partial::open(&dest, "gs://b/obj", 10, Some(&v2), &plan(), true).unwrap();
        assert_eq!(p.done, vec![None, None, None], "fresh journal for v2");
        drop(p);
        let (p, file) = Partial::open(&dest, "gs://b/obj", 10, Some(&v2), &plan(), true).unwrap();
        file.write_all_at(b"abcd", 0).unwrap();
        p.record(0, crc32c::crc32c(b"abcd"));
        drop((p, file));
        let other = vec![(0, 5), (5, 10)];
        let (p, _) = Partial::open(&dest, "gs://b/obj", 10, Some(&v2), &other, true).unwrap();
        assert_eq!(p.done, vec![None, None], "another plan");
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_no_resume_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("obj");
        let (p, file) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
        file.write_all_at(b"abcd", 0).unwrap();
        p.record(0, crc32c::crc32c(b"abcd"));
        p.journal
            .lock()
            .unwrap()
            .write_all(b"{\"slice\":1,\"cr")
            .unwrap();
        drop((p, file));
        let (p, _) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
        assert_eq!(p.done[0], Some(crc32c::crc32c(b"abcd")));
        assert_eq!(p.done[1], None);
        drop(p);
        let (p, _) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), false).unwrap();
        assert_eq!(p.done, vec![None, None, None]);
        p.discard();
        assert!(!data_path(&dest).exists() && !state_path(&dest).exists());
    }
}
