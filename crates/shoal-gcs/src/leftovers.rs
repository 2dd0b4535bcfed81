//! Composite parts a killed run left behind, cleaned up by a later one.
//!
//! A composite upload's parts are objects of their own
//! (`.shoal-tmp/composite/<upload_id>/…`, see [`crate::compose`]). An
//! interrupted run deletes the parts it sent; a run that is killed (SIGKILL,
//! a machine that dies) cannot, and its parts stay in the bucket.
//!
//! Which leftovers may a later run delete? Not "whatever is under
//! `.shoal-tmp/composite/`": another process, on this machine or another,
//! may be uploading right now, and deleting its parts would fail its
//! upload. Only the uploads this machine started and whose process is
//! gone: every composite upload is written down in a journal here
//! (`$SHOAL_STATE_DIR`, else `$XDG_STATE_HOME/shoal`, else
//! `~/.local/state/shoal`; one small file per upload under `composite/`)
//! with the bucket, the endpoint, and the process that runs it (its pid
//! and start time, so a reused pid does not pass for it). The entry is
//! removed when the upload completes or is aborted. When a later upload
//! to the same bucket starts, entries whose process no longer runs name
//! uploads that will never finish: their parts are found by listing their
//! own prefix and deleted (names only those runs wrote, so
//! `safe::delete_own`), and the entry goes. An upload written down to be
//! resumed (`shoal_transfer`'s upload journal; the entry is then marked
//! `kept`) is not abandoned: the run that resumes it, or `shoal uploads
//! --abort`, ends it. A cleanup that fails keeps
//! its entry for the next run. Where the journal cannot be written or a
//! process cannot be checked (no `/proc`), nothing is cleaned: a leftover
//! costs storage, a wrong delete an upload.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One composite upload in progress, as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) endpoint: String,
    pub(crate) bucket: String,
    pub(crate) upload_id: String,
    pid: u32,
    /// The process's start time (`/proc/<pid>/stat`, clock ticks since
    /// boot): with the pid, names one process.
    started: u64,
    /// Written down to be resumed by a later run (the upload journal of
    /// `shoal_transfer`): not abandoned, whatever became of its process.
    #[serde(default)]
    kept: bool,
}

/// The journal's folder, if there is a place for it.
fn journal_dir() -> Option<PathBuf> {
    Some(shoal_core::state::dir()?.join("composite"))
}

/// The start time of process `pid`, if it runs (and `/proc` says so).
fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so
    // fields are counted after the last `)`; starttime is field 22.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Is the process that wrote `e` gone? `None` when it cannot be told.
fn gone(e: &Entry) -> Option<bool> {
    std::fs::metadata("/proc/self/stat").ok()?;
    Some(started(e.pid) != Some(e.started))
}

/// Writes down an upload this process starts (or resumes), `kept` when it
/// is to be resumed by a later run should this one end first. Quietly does
/// nothing where there is no journal: the upload itself does not depend on
/// it.
pub(crate) fn record(endpoint: &str, bucket: &str, upload_id: &str, kept: bool) {
    if let Some(dir) = journal_dir() {
        record_in(&dir, endpoint, bucket, upload_id, kept);
    }
}

fn record_in(dir: &std::path::Path, endpoint: &str, bucket: &str, upload_id: &str, kept: bool) {
    let Some(started) = started(std::process::id()) else {
        return;
    };
    let e = Entry {
        endpoint: endpoint.to_owned(),
        bucket: bucket.to_owned(),
        upload_id: upload_id.to_owned(),
        pid: std::process::id(),
        started,
        kept,
    };
    let Ok(text) = serde_json::to_vec(&e) else {
        return;
    };
    // Written whole under a temporary name, then renamed: a reader never
    // sees half an entry.
    let tmp = dir.join(format!(".{upload_id}.tmp"));
    let ok = std::fs::create_dir_all(dir).is_ok()
        && std::fs::write(&tmp, text).is_ok()
        && std::fs::rename(&tmp, dir.join(upload_id)).is_ok();
    if !ok {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!("composite upload journal not written in {}", dir.display());
    }
}

/// Removes the entry of an upload that completed or was aborted.
pub(crate) fn forget(upload_id: &str) {
    if let Some(dir) = journal_dir() {
        let _ = std::fs::remove_file(dir.join(upload_id));
    }
}

/// The uploads to `bucket` at `endpoint` whose process is gone.
pub(crate) fn dead(endpoint: &str, bucket: &str) -> Vec<Entry> {
    journal_dir().map_or_else(Vec::new, |dir| dead_in(&dir, endpoint, bucket))
}

fn dead_in(dir: &std::path::Path, endpoint: &str, bucket: &str) -> Vec<Entry> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.filter_map(|d| d.ok())
        .filter(|d| !d.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|d| serde_json::from_slice::<Entry>(&std::fs::read(d.path()).ok()?).ok())
        .filter(|e| {
            e.endpoint == endpoint
                && e.bucket == bucket
                && !e.kept
                && crate::compose::is_upload_id(&e.upload_id)
                && gone(e) == Some(true)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_changed_start_time_is_another() {
        let me = started(std::process::id()).expect("/proc on Linux");
        let e = |pid, started| Entry {
            endpoint: "http://h".into(),
            bucket: "b".into(),
            upload_id: "0".repeat(32),
            pid,
            started,
            kept: false,
        };
        assert_eq!(gone(&e(std::process::id(), me)), Some(false));
        // The same pid with another start time: the pid was reused.
        assert_eq!(gone(&e(std::process::id(), me + 1)), Some(true));
        // No such process (pids stop well below this).
        assert_eq!(gone(&e(u32::MAX - 1, me)), Some(true));
    }

    #[test]
    fn an_upload_kept_for_resuming_is_never_a_leftover() {
        let dir = std::env::temp_dir().join(format!("shoal-leftovers-{:x}", rand::random::<u64>()));
        let (kept, dropped) = ("a".repeat(32), "b".repeat(32));
        record_in(&dir, "http://h", "bk", &kept, true);
        record_in(&dir, "http://h", "bk", &dropped, false);
        // Both as a process that is gone would have left them.
        for id in [&kept, &dropped] {
            let path = dir.join(id);
            let mut e: Entry = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            e.pid = u32::MAX - 1;
            std::fs::write(&path, serde_json::to_vec(&e).unwrap()).unwrap();
        }
        let dead: Vec<String> = (dead_in(&dir, "http://h", "bk").into_iter())
            .map(|e| e.upload_id)
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(dead, vec![dropped]);
        // An entry written before `kept` existed reads as not kept.
        let old = r#"{"endpoint":"http://h","bucket":"bk","upload_id":"x","pid":1,"started":2}"#;
        assert!(!serde_json::from_str::<Entry>(old).unwrap().kept);
    }
}
