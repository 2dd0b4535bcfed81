//! When a delete may run: the rules every plan that deletes goes through.
//!
//! - **Held as a whole** ([`deletes_held`]): `sync --delete` (on one
//!   machine or split across Dask workers) deletes its extras only when
//!   the source listed something (an empty source is most likely a
//!   mistyped URL), nothing failed (a failed copy may be the only other
//!   home of what a delete would remove: rsync and rclone hold deletes back
//!   the same way), and no more than `max_delete` would go. A batch holding
//!   its deletes ([`crate::batch::Mode::hold_deletes`]) asks
//!   [`batch_holds_deletes`] and words the refusal with
//!   [`held_deletes_error`].
//! - **Pinned to a version** ([`delete_at`], [`delete_moved`]): an object is
//!   deleted only at the version the plan read, read back first (some
//!   servers ignore a delete's precondition) and then deleted with the
//!   precondition (GCS `ifGenerationMatch`, S3 `If-Match`); a local file
//!   only while it is the same file, unchanged since the copy began
//!   ([`LocalStamp`]). A version written meanwhile is kept.

use std::sync::Arc;

use shoal_core::{Error, ErrorKind, Location, Op, Result};

use shoal_core::StoreFor;

use crate::plural;

/// The limits a user sets on a sync's deletes (`--max-delete`,
/// `--delete-when-source-empty`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteLimits {
    /// The most extras a run may delete; more deletes none.
    pub max_delete: Option<u64>,
    /// Delete the extras even when the source lists nothing.
    pub delete_when_source_empty: bool,
}

/// Why a sync's extras are held back instead of deleted: the rules that
/// `shoal sync --delete` applies when its listings end, and that a sync
/// split across Dask workers applies once every range has ended
/// ([`deletes_held`]). Each front end words them with its own names for
/// the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The source listed nothing: most likely a mistyped URL, and the
    /// delete would empty the destination (held even with no extra).
    SourceEmpty,
    /// This many copies or listing pages failed: rsync and rclone hold
    /// deletes back after an error.
    Failures(u64),
    /// More extras than the most a run may delete.
    MoreThan(u64),
}

/// Whether `extras` names only the destination holds may be deleted after
/// a sync whose source listed `source_listed` entries and in which
/// `failed` copies or listing pages failed (`ignore_errors`: delete
/// anyway). `None`: delete them.
pub fn deletes_held(
    limits: &DeleteLimits,
    extras: u64,
    source_listed: u64,
    failed: u64,
    ignore_errors: bool,
) -> Option<Held> {
    if source_listed == 0 && !limits.delete_when_source_empty {
        return Some(Held::SourceEmpty);
    }
    if extras == 0 {
        return None;
    }
    if failed > 0 && !ignore_errors {
        return Some(Held::Failures(failed));
    }
    match limits.max_delete {
        Some(max) if extras > max => Some(Held::MoreThan(max)),
        _ => None,
    }
}

/// What a local source was when a move started reading it: a move deletes
/// it only if it is still that file, unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl LocalStamp {
    /// The stamp of a local `src` (None for an object).
    pub fn of(src: &Location) -> Result<Option<LocalStamp>> {
        use std::os::unix::fs::MetadataExt;
        if !src.is_local() {
            return Ok(None);
        }
        let m =
            std::fs::symlink_metadata(&src.key).map_err(|e| Error::io(Op::Read, &src.key, e))?;
        Ok(Some(LocalStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        }))
    }
}

/// A move's last step, once its copy is in place and verified: deletes the
/// source only if it is still what was copied. An object is deleted at
/// the version the copy read (`copied`): read back first, since some
/// servers ignore a delete's precondition, then deleted with it (GCS
/// `ifGenerationMatch`, S3 `If-Match`), so a version written meanwhile is
/// kept, never deleted uncopied. A local file is deleted only while it is
/// the same file (device, inode) with the size and time it had when the
/// copy began. A source already gone is done. Refusals are
/// [`ErrorKind::Changed`], naming both versions.
pub async fn delete_moved(
    src: &Location,
    copied: Option<&shoal_core::ObjectVersion>,
    stamp: Option<LocalStamp>,
    store_for: &StoreFor,
) -> Result<()> {
    let kept = |now: String| {
        Error::new(
            ErrorKind::Changed,
            Op::Delete,
            src.to_string(),
            format!("changed since it was copied ({now}); the source was kept"),
        )
        .with_hint("the destination holds the version that was copied; move the source again to move the new one")
    };
    if src.is_local() {
        let now = LocalStamp::of(src);
        return match now {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
            Ok(now) if now != stamp => {
                Err(kept("it is another file now, or was written to".into()))
            }
            Ok(_) => remove_local(&src.key),
        };
    }
    let store = store_for(src)?;
    let Some(version) = copied else {
        return delete_object(&store, src).await;
    };
    match delete_at(&store, src, version).await {
        Err(e) if e.kind() == ErrorKind::Precondition => Err(kept(e.message().to_string())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(shoal_core::Deleted::Gone) => Ok(()),
        // The version that was copied is gone: the move is complete. What
        // the key holds now is another writer's, and stays.
        Ok(shoal_core::Deleted::Replaced(now)) => {
            tracing::warn!(
                "{src}: moved; the source key now holds {}, stored by another writer after the move's delete; kept",
                now.map_or("a newer object".into(), |v| format!("a newer object ({v})"))
            );
            Ok(())
        }
    }
}

/// Removes a local file; one already gone is done (see [`execute`]).
pub(crate) fn remove_local(path: &str) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(Op::Delete, path, e)),
        _ => Ok(()),
    }
}

/// Deletes an object; one already gone is done (see [`execute`]).
pub(crate) async fn delete_object(
    store: &Arc<dyn shoal_core::Store>,
    loc: &Location,
) -> Result<()> {
    match store.delete(&loc.bucket, &loc.key).await {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e.with_url(loc.to_string())),
        _ => Ok(()),
    }
}

/// Deletes the object at `loc` only if it is at `version`: read back first
/// (a server may ignore the precondition), then deleted with it. Another
/// version is [`ErrorKind::Precondition`] naming both; a store without
/// conditional deletes gets a plain delete after the read-back. A lost
/// answer never deletes a version stored meanwhile
/// ([`shoal_core::Deleted::Replaced`]).
pub async fn delete_at(
    store: &Arc<dyn shoal_core::Store>,
    loc: &Location,
    version: &shoal_core::ObjectVersion,
) -> Result<shoal_core::Deleted> {
    let now = store.head(&loc.bucket, &loc.key).await;
    match now {
        Ok(m) if m.version.as_ref() == Some(version) => {}
        Ok(m) => {
            return Err(Error::new(
                ErrorKind::Precondition,
                Op::Delete,
                loc.to_string(),
                format!(
                    "the object is at {}, not {version}; it was not deleted",
                    m.version
                        .map_or("an unknown version".into(), |v| v.to_string())
                ),
            ));
        }
        Err(e) => return Err(e.with_url(loc.to_string())),
    }
    match store.delete_if(&loc.bucket, &loc.key, version).await {
        Err(e) if e.kind() == ErrorKind::Unsupported => store
            .delete(&loc.bucket, &loc.key)
            .await
            .map(|()| shoal_core::Deleted::Gone),
        r => r,
    }
    .map_err(|e| e.with_url(loc.to_string()))
}

/// Whether a batch that holds its deletes until the copies end
/// ([`crate::batch::Mode::hold_deletes`]) must keep them: after `failed`
/// failed transfers or `skipped_unasked` items nobody asked to skip.
pub(crate) fn batch_holds_deletes(failed: u64, skipped_unasked: u64) -> bool {
    failed > 0 || skipped_unasked > 0
}

/// The failure a batch reports for the `held` deletes it kept
/// ([`batch_holds_deletes`]).
pub(crate) fn held_deletes_error(held: u64, failed: u64, skipped_unasked: u64) -> Error {
    let why = if failed > 0 {
        format!("{} failed in this run", plural(failed, "transfer"))
    } else {
        format!("{} not copied in this run", plural(skipped_unasked, "item"))
    };
    Error::invalid(
        Op::Delete,
        "sync --delete",
        format!(
            "{} not deleted: {why}, and a failed copy may be the only other home of what a delete would remove (--ignore-errors deletes anyway)",
            plural(held, "extra")
        ),
    )
}

/// Whether the upload `u`, listed by the store at `now`, may be aborted
/// by `shoal uploads --abort`: it was started at least `older_than` ago
/// (an upload another process is sending right now is young). One whose
/// start the store does not give is left alone, unless `older_than` is
/// zero. The caller aborts only what the store listed just now, each by
/// its upload id, never an upload a kept journal or an earlier listing
/// names.
pub(crate) fn abort_justified(
    u: &shoal_core::PendingUpload,
    older_than: std::time::Duration,
    now: std::time::SystemTime,
) -> bool {
    if older_than.is_zero() {
        return true;
    }
    let Some(started) = u.initiated_ns else {
        return false;
    };
    let now_ns = now
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    now_ns - started >= older_than.as_nanos() as i128
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_core::PendingUpload;
    use std::time::{Duration, SystemTime};

    #[test]
    fn age_decides_and_an_unknown_age_is_young() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let at = |secs: i128| PendingUpload {
            key: "k".into(),
            upload_id: "u".into(),
            initiated_ns: Some(secs * 1_000_000_000),
        };
        let hour = Duration::from_secs(3600);
        assert!(abort_justified(&at(10_000 - 3600), hour, now));
        assert!(!abort_justified(&at(10_000 - 3599), hour, now));
        let unknown = PendingUpload {
            initiated_ns: None,
            ..at(0)
        };
        assert!(!abort_justified(&unknown, hour, now));
        assert!(abort_justified(&unknown, Duration::ZERO, now));
    }
}
