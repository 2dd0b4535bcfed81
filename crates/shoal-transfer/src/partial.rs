//! What an interrupted sliced download leaves behind, so a rerun fetches
//! only the slices that are missing.
//!
//! Why a state file beside the data: a Ctrl-C, a `kill -9` or a lost network
//! on a 30 GiB download should cost the slices in flight, not the whole
//! object. The sparse data file keeps the slices already written; the
//! state file (`.NAME.shoal-partial.json`) says which ones, for which
//! object version. Its first line names the object (URL, size,
//! generation/ETag, slice plan) and the data file; every finished slice
//! appends one line with its CRC32C. Appends are single small writes, so a
//! crash leaves at worst a torn last line, which is ignored.
//!
//! The data file is a working file (`.NAME.shoal-partial-<32 hex>`, see
//! [`shoal_core::workfile`]): created exclusively under a name no key can
//! take, and locked (`flock`) while a download writes it, so neither a
//! key that looks like it nor a second process ever writes into it; a
//! second process that finds it locked downloads into a file of its own.
//! The state file's name has to be found again, so it is predictable, and
//! a key may well be named like it: nothing in it is trusted. A rerun
//! resumes only when URL, size, version and plan match, the data file it
//! names has the working-file shape, and that file is the very one the
//! header recorded (device and inode, which no bucket can know); it
//! re-reads every recorded slice and checks its CRC32C before counting it
//! as done. A state file that is not provably shoal's (a user's file of
//! that name) is never replaced or removed: that download just keeps no
//! state. The whole-object check at the end is the same as for a fresh
//! download.
//!
//! Only downloads of more than one slice keep state: a small object is
//! cheaper to fetch again than to account for.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use shoal_core::workfile;
use shoal_core::{Error, ObjectVersion, Op, Result};

/// The first line of the state file: which download this is, and where.
#[derive(Serialize, Deserialize, PartialEq, Eq, Debug, Clone)]
struct Header {
    shoal_partial: u32,
    url: String,
    size: u64,
    version: Option<String>,
    slices: Vec<(u64, u64)>,
    /// The data file's name (in the destination's folder), device and inode.
    data: String,
    dev: u64,
    ino: u64,
}

/// The state file format this code writes (1 named no data file).
const FORMAT: u32 = 2;

impl Header {
    fn same_download(&self, other: &Header) -> bool {
        (
            self.shoal_partial,
            &self.url,
            self.size,
            &self.version,
            &self.slices,
        ) == (
            other.shoal_partial,
            &other.url,
            other.size,
            &other.version,
            &other.slices,
        )
    }
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
    /// The data file (a second descriptor), to remove it only while the
    /// name is still this download's.
    data: File,
    /// The state file, when this download keeps one (and the open file,
    /// to remove it only while it is still ours).
    journal: Option<(PathBuf, Mutex<File>)>,
    /// CRC32C of each slice already on disk (checked), by slice index.
    pub(crate) done: Vec<Option<u32>>,
}

/// Removes what an interrupted download into `dest` left, once `dest` is
/// complete by other means (a rerun with a different slice plan, or one
/// slice): a finished download leaves no hidden files behind. Only files
/// provably an earlier download's, and not in use, are removed.
pub(crate) fn remove_stale(dest: &Path) {
    if let Some(Stale { data, journal, .. }) = stale(dest) {
        workfile::remove_if_same(&data.0, &data.1);
        workfile::remove_if_same(&state_path(dest), &journal);
    }
}

/// Whether an earlier run left a resumable download into `dest`.
pub(crate) fn pending(dest: &Path) -> bool {
    state_path(dest).exists()
}

/// The state file's name beside `dest`.
pub(crate) fn state_path(dest: &Path) -> PathBuf {
    // A long name is cut as the data file's is, the same in every run.
    let name = workfile::short_name(dest);
    dest.with_file_name(format!(".{name}.shoal-partial.json"))
}

fn version_string(v: Option<&ObjectVersion>) -> Option<String> {
    v.map(|v| v.to_string())
}

/// Takes the exclusive lock on `file` without waiting: false when another
/// process holds it.
fn try_lock(file: &File) -> bool {
    // SAFETY: flock on a valid open descriptor; no memory is involved.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// An earlier download's state, provably shoal's: a parseable header whose
/// data file has the working-file shape for `dest`, is the file the header
/// recorded, and is not locked by a running download (this process holds
/// the lock from here on).
struct Stale {
    header: Header,
    /// The state file's lines after the header (finished slices).
    lines: Vec<String>,
    data: (PathBuf, File),
    journal: File,
}

fn stale(dest: &Path) -> Option<Stale> {
    let state = state_path(dest);
    // Neither the journal nor the data file is opened through a link: a
    // key named like them could point anywhere.
    let journal = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&state)
        .ok()?;
    // Small: a header and a line per slice.
    let mut lines = BufReader::new(&journal).lines();
    let header: Header = serde_json::from_str(&lines.next()?.ok()?).ok()?;
    let lines: Vec<String> = lines.map_while(|l| l.ok()).collect();
    let name = workfile::short_name(dest);
    let ours = header.data.starts_with(&format!(".{name}.shoal-partial-"))
        && workfile::is_working_file(&header.data)
        && !header.data.contains('/');
    if !ours {
        return None;
    }
    let data_path = dest.with_file_name(&header.data);
    let data = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&data_path)
        .ok()?;
    let md = data.metadata().ok()?;
    if (md.dev(), md.ino()) != (header.dev, header.ino) || !md.is_file() || !try_lock(&data) {
        return None;
    }
    Some(Stale {
        header,
        lines,
        data: (data_path, data),
        journal,
    })
}

impl Partial {
    /// Opens the partial download of `url` into `dest`: the one left by an
    /// earlier run when it matches, or a fresh one. Returns the open data
    /// file (sized to `size`, locked) too.
    pub(crate) fn open(
        dest: &Path,
        url: &str,
        size: u64,
        version: Option<&ObjectVersion>,
        slices: &[(u64, u64)],
        resume: bool,
    ) -> Result<(Partial, File)> {
        let dest_s = dest.display().to_string();
        let io = |e: std::io::Error| Error::io(Op::Write, &dest_s, e);
        let mut want = Header {
            shoal_partial: FORMAT,
            url: url.to_owned(),
            size,
            version: version_string(version),
            slices: slices.to_vec(),
            data: String::new(),
            dev: 0,
            ino: 0,
        };
        let state_path = state_path(dest);
        let earlier = stale(dest);
        if let Some(old) = &earlier
            && resume
            && old.header.same_download(&want)
            && let Some(done) = check_slices(&old.data.1, &want, &old.lines)
        {
            let journal = OpenOptions::new()
                .append(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&state_path)
                .map_err(io)?;
            let old = earlier.expect("matched above");
            if !workfile::is_same_file(&state_path, &old.journal) {
                // Replaced between the two opens: not ours to append to.
                return Self::fresh(dest, want, None);
            }
            let p = Partial {
                data_path: old.data.0,
                data: old.data.1.try_clone().map_err(io)?,
                journal: Some((state_path, Mutex::new(journal))),
                done,
            };
            return Ok((p, old.data.1));
        }
        // Starting over. An earlier download's files are replaced; a file
        // merely named like the state file is left alone (no state kept).
        let replace = match &earlier {
            Some(old) => {
                workfile::remove_if_same(&old.data.0, &old.data.1);
                true
            }
            None => !state_path.exists(),
        };
        want.shoal_partial = FORMAT;
        Self::fresh(dest, want, replace.then_some(state_path))
    }

    /// A new data file, and a new state file at `state_path` if given.
    fn fresh(
        dest: &Path,
        mut header: Header,
        state_path: Option<PathBuf>,
    ) -> Result<(Partial, File)> {
        let dest_s = dest.display().to_string();
        let io = |e: std::io::Error| Error::io(Op::Write, &dest_s, e);
        let (data_path, file) = workfile::create_beside(dest, "shoal-partial").map_err(io)?;
        let cleanup = |e: Error| {
            workfile::remove_if_same(&data_path, &file);
            e
        };
        try_lock(&file);
        workfile::preallocate(&file, header.size)
            .map_err(io)
            .map_err(cleanup)?;
        let md = file.metadata().map_err(io).map_err(cleanup)?;
        header.data = data_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        (header.dev, header.ino) = (md.dev(), md.ino());
        let journal = match state_path {
            None => None,
            Some(state_path) => {
                // Written whole under a working name, then renamed over the
                // old state: a reader never sees a half-written header.
                let (tmp, mut j) = workfile::create_beside(dest, "shoal-tmp")
                    .map_err(io)
                    .map_err(cleanup)?;
                let mut line = serde_json::to_vec(&header).expect("plain data serialises");
                line.push(b'\n');
                let written = j
                    .write_all(&line)
                    .and_then(|()| workfile::persist(&tmp, &j, &state_path));
                match written {
                    Ok(()) => Some((state_path, Mutex::new(j))),
                    Err(e) => {
                        workfile::remove_if_same(&tmp, &j);
                        tracing::debug!(error = %e, "no resume state for this download");
                        None
                    }
                }
            }
        };
        let p = Partial {
            data: file.try_clone().map_err(io).map_err(cleanup)?,
            data_path,
            journal,
            done: vec![None; header.slices.len()],
        };
        Ok((p, file))
    }

    /// Records that slice `i` is on disk with this CRC32C.
    pub(crate) fn record(&self, i: usize, crc32c: u32) {
        let Some((_, journal)) = &self.journal else {
            return;
        };
        let mut line = serde_json::to_vec(&Done { slice: i, crc32c }).expect("plain data");
        line.push(b'\n');
        let mut f = journal.lock().unwrap_or_else(|p| p.into_inner());
        // A journal that cannot be written costs only the resume, not the
        // download.
        if let Err(e) = f.write_all(&line) {
            tracing::debug!(error = %e, "could not record a finished slice");
        }
    }

    /// Whether a state file records this download (a rerun can resume it).
    pub(crate) fn keeps_state(&self) -> bool {
        self.journal.is_some()
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
        if let Some((path, j)) = &self.journal {
            workfile::remove_if_same(path, &j.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// The data cannot be trusted (the object changed, a checksum failed):
    /// remove both files so no rerun builds on them.
    pub(crate) fn discard(self) {
        workfile::remove_if_same(&self.data_path, &self.data);
        self.finish();
    }
}

/// The slices recorded in the state file (`lines`) that still check out
/// in `file`.
fn check_slices(file: &File, want: &Header, lines: &[String]) -> Option<Vec<Option<u32>>> {
    if file.metadata().ok()?.len() != want.size {
        return None;
    }
    let mut done = vec![None; want.slices.len()];
    for line in lines {
        // A torn line (crash mid-append) is skipped; its slice is fetched
        // again.
        let Ok(d) = serde_json::from_str::<Done>(line) else {
            continue;
        };
        if let Some(&(s, e)) = want.slices.get(d.slice) {
            if crc_of(file, s, e).ok() == Some(d.crc32c) {
                done[d.slice] = Some(d.crc32c);
            } else {
                tracing::debug!(
                    slice = d.slice,
                    "recorded slice does not check out; fetching it again"
                );
            }
        }
    }
    Some(done)
}

/// CRC32C of bytes `[start, end)` of `file`, read in 4 MiB blocks.
fn crc_of(file: &File, start: u64, end: u64) -> std::io::Result<u32> {
    let mut buf = vec![0u8; (4usize << 20).min((end - start) as usize)];
    let mut crc = 0;
    let mut pos = start;
    while pos < end {
        let n = ((end - pos) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], pos)?;
        crc = shoal_core::checksum::crc32c_append(crc, &buf[..n]);
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
        let data = p.data_path.clone();
        drop((p, file));
        // Slice 2 is damaged on disk after it was recorded.
        let f = OpenOptions::new().write(true).open(&data).unwrap();
        f.write_all_at(b"X", 9).unwrap();

        let (p, _) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
        assert_eq!(p.done, vec![Some(crc32c::crc32c(b"abcd")), None, None]);
        assert_eq!(p.reused(&plan()), (1, 4));
    }

    /// A destination named by 250 bytes: its data file and journal have
    /// names that fit, and a rerun finds and resumes them.
    #[test]
    fn a_long_name_is_resumed_by_a_rerun() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("n".repeat(250));
        let url = format!("gs://b/{}", "n".repeat(250));
        let (p, file) = Partial::open(&dest, &url, 10, None, &plan(), true).unwrap();
        assert!(p.keeps_state());
        file.write_all_at(b"abcd", 0).unwrap();
        p.record(0, crc32c::crc32c(b"abcd"));
        let data = p.data_path.clone();
        drop((p, file));
        for path in [&data, &state_path(&dest)] {
            let name = path.file_name().unwrap().to_str().unwrap();
            assert!(
                name.len() <= 255 && workfile::is_working_file(name),
                "{name}"
            );
            assert!(path.exists());
        }
        assert!(pending(&dest));
        let (p, _) = Partial::open(&dest, &url, 10, None, &plan(), true).unwrap();
        assert_eq!(p.data_path, data);
        assert_eq!(p.reused(&plan()), (1, 4));
        p.finish();
        assert!(!pending(&dest));
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
            .as_ref()
            .unwrap()
            .1
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
        let data = p.data_path.clone();
        p.discard();
        assert!(!data.exists() && !state_path(&dest).exists());
    }

    /// A file that merely has the state file's name (a key downloaded
    /// there, a user's file) is neither trusted, replaced nor removed; the
    /// download just keeps no state.
    #[test]
    fn a_state_file_that_is_not_ours_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("obj");
        for theirs in [
            "a user's notes".to_string(),
            // Well formed, naming a data file that is not the recorded one.
            serde_json::json!({"shoal_partial": FORMAT, "url": "gs://b/obj", "size": 10,
                "version": null, "slices": plan(), "data": ".obj.shoal-partial-0123456789abcdef0123456789abcdef",
                "dev": 1, "ino": 2}).to_string(),
            // Naming a file outside the working-file shape.
            serde_json::json!({"shoal_partial": FORMAT, "url": "gs://b/obj", "size": 10,
                "version": null, "slices": plan(), "data": "../../elsewhere", "dev": 1, "ino": 2}).to_string(),
        ] {
            std::fs::write(dir.path().join(".obj.shoal-partial-0123456789abcdef0123456789abcdef"), b"0123456789").unwrap();
            std::fs::write(state_path(&dest), &theirs).unwrap();
            let (p, file) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
            assert_eq!(p.done, vec![None, None, None]);
            assert!(p.journal.is_none(), "no state kept");
            p.record(0, 1);
            p.discard();
            drop(file);
            assert_eq!(std::fs::read_to_string(state_path(&dest)).unwrap(), theirs);
            assert_eq!(
                std::fs::read(dir.path().join(".obj.shoal-partial-0123456789abcdef0123456789abcdef")).unwrap(),
                b"0123456789"
            );
        }
    }

    /// While one download holds its data file, a second of the same object
    /// gets a file of its own: two writers never share bytes.
    #[test]
    fn a_second_writer_gets_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("obj");
        let (p1, f1) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
        f1.write_all_at(b"abcd", 0).unwrap();
        p1.record(0, crc32c::crc32c(b"abcd"));
        let (p2, _f2) = Partial::open(&dest, "gs://b/obj", 10, None, &plan(), true).unwrap();
        assert_ne!(p1.data_path, p2.data_path);
        assert_eq!(
            p2.done,
            vec![None, None, None],
            "nothing of the first's is reused"
        );
        // The first's data file is still there, untouched.
        assert_eq!(std::fs::read(&p1.data_path).unwrap()[..4], *b"abcd");
    }
}
