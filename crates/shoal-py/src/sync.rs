//! One key range of a sync split across Dask workers (`shoal.dask.sync`).
//!
//! Python decides only where the ranges lie (a listing split across the
//! workers, see [`crate::ranges`]); each range is synced here by the
//! engine `shoal sync` runs: [`shoal_transfer::ops::sync_range`] lists
//! the source range and the destination's same range page by page and
//! merges them with the CLI's comparison rules, and the batch engine runs
//! the copies. Extras are not deleted here: a range cannot know whether
//! another range's copies failed, and deletes are held back after any
//! failure (rsync's and rclone's rule), so they are counted and, when the
//! caller will delete, handed back for the second phase once every range
//! has ended. Rejected: the merge and the comparison written again in
//! Python, which drifted from the engine's (no `--checksum`, times
//! compared as floats).

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use shoal_core::{Error, Location, ObjectVersion, Op};
use shoal_transfer::Run;
use shoal_transfer::ops::{
    Action, BatchCounters, Compare, DeleteLimits, Held, KeyRange, Mode, Sync, SyncOptions,
    TreeCopy, Walk, deletes_held,
};

use crate::errors::IntoPyResult;
use crate::list::cloud;
use crate::runtime::block_on;
use crate::session::Session;

/// A sync's two URLs as locations: bucket prefixes, not globs, that do not
/// lie inside one another (the engine's guard, which makes the [`Sync`],
/// as `shoal sync` makes it).
fn prefixes(src: &str, dst: &str, opts: SyncOptions) -> PyResult<(Sync, Location, Location)> {
    let (a, b) = (cloud(src)?, cloud(dst)?);
    for (url, l) in [(src, &a), (dst, &b)] {
        if shoal_list::has_wildcard(&l.key) {
            return Err(crate::errors::to_py(Error::invalid(
                Op::Copy,
                format!("sync {url}"),
                "takes bucket prefixes, not globs",
            )));
        }
    }
    let sync = Sync::new("sync", &a, &b, opts).py()?;
    Ok((sync, a, b))
}

/// An extra as handed to Python: its URL and the version its listing saw
/// (a GCS generation or an S3 ETag, as text), which its delete names.
type Extra = (String, Option<String>);

/// Whether a sync split across workers may delete its `extras` (the
/// engine's rule, [`shoal_transfer::ops::deletes_held`]): None, or why
/// not as `(reason, n)`: `("source_empty", 0)`, `("failures", failed)`
/// or `("max_delete", max)`, which `shoal.dask.sync` words.
#[pyfunction]
#[pyo3(signature = (*, extras, source_listed, failed, max_delete=None, delete_when_source_empty=false, ignore_errors=false))]
pub(crate) fn sync_deletes_held(
    extras: u64,
    source_listed: u64,
    failed: u64,
    max_delete: Option<u64>,
    delete_when_source_empty: bool,
    ignore_errors: bool,
) -> Option<(&'static str, u64)> {
    let limits = DeleteLimits {
        max_delete,
        delete_when_source_empty,
    };
    deletes_held(&limits, extras, source_listed, failed, ignore_errors).map(|h| match h {
        Held::SourceEmpty => ("source_empty", 0),
        Held::Failures(n) => ("failures", n),
        Held::MoreThan(n) => ("max_delete", n),
    })
}

/// Deletes the extras `sync_range` handed back, each pinned to the version
/// its listing saw (the engine's `delete::delete_all`, batched where the
/// store can): an extra written again since it was listed is kept.
/// Returns `(deleted, kept, failures)`, failures a line each.
#[pyfunction]
#[pyo3(signature = (session, extras, *, workers=None))]
pub(crate) fn delete_extras(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    extras: Vec<Extra>,
    workers: Option<usize>,
) -> PyResult<(u64, u64, Vec<String>)> {
    let mut targets = Vec::with_capacity(extras.len());
    for (url, version) in extras {
        let loc = cloud(&url)?;
        let version = match version {
            Some(v) => Some(
                loc.scheme
                    .parse_version(&v)
                    .map_err(|e| crate::errors::to_py(Error::invalid(Op::Delete, &url, e)))?,
            ),
            None => None,
        };
        targets.push(shoal_transfer::ops::Target {
            loc,
            version,
            exact: false,
        });
    }
    let locs: Vec<&Location> = targets.iter().map(|t| &t.loc).collect();
    let store_for = session.stores.store_for(&locs).py()?;
    let targets = targets.into_iter().map(Ok);
    let slots = workers.unwrap_or(session.workers).max(1);
    block_on(py, async move {
        let mut out = (0u64, 0u64, Vec::new());
        let mut done = shoal_transfer::ops::delete_all(
            futures::stream::iter(targets).boxed(),
            store_for,
            slots,
            true,
            Arc::new(|_: &Error| {}),
        );
        while let Some(r) = done.next().await {
            match r {
                Ok(shoal_core::Seen::Item(_)) => out.0 += 1,
                Ok(shoal_core::Seen::Skipped(_)) => out.1 += 1,
                Err(e) => out.2.push(e.to_string()),
            }
        }
        Ok(out)
    })
}

/// Refuses a sync from `src` to `dst` before anything runs: local paths,
/// globs, one prefix inside the other (InvalidInputError, a ValueError).
#[pyfunction]
pub(crate) fn check_sync(src: &str, dst: &str) -> PyResult<()> {
    prefixes(src, dst, SyncOptions::default()).map(drop)
}

/// Refuses copying what `src` names (a folder's contents, a prefix or a
/// glob) into the folder `dst` when the copy could write what it reads
/// (`shoal_transfer::ops::refuse_tree_overlap`, the check `cp -r`
/// makes): one prefix inside the other, or a glob that can match keys
/// below `dst` (InvalidInputError, a ValueError).
#[pyfunction]
pub(crate) fn check_copy(src: &str, dst: &str) -> PyResult<()> {
    let tree = TreeCopy {
        verb: "copy".to_owned(),
        src: Location::parse(src).py()?,
        dst: Location::parse(dst).py()?,
        name: None,
        recursive: true,
        walk: Walk::default(),
        filter: None,
    };
    tree.check().py()
}

/// The comparison the CLI's `--checksum` / `--size-only` flags choose.
fn compare(checksum: bool, size_only: bool) -> PyResult<Compare> {
    match (checksum, size_only) {
        (true, true) => Err(pyo3::exceptions::PyValueError::new_err(
            "sync: checksum and size_only exclude each other",
        )),
        (true, false) => Ok(Compare::Checksum),
        (false, true) => Ok(Compare::SizeOnly),
        (false, false) => Ok(Compare::SizeAndTime),
    }
}

/// Syncs the keys of `src` (a bucket prefix, as a folder) in
/// `[start, stop)` into the same names below `dst`: copies what differs
/// (size and time, or `checksum`, `size_only`, `update`, `no_clobber` as
/// `shoal sync`'s flags), deletes nothing. Returns a dict: `copied`,
/// `bytes`, `failed` (copies or listing pages that failed), `skipped`,
/// `failures` (a line each, naming the URL), `extras` (names only the
/// destination's range holds) and `extra_urls` (those names as URLs when
/// `delete`, else empty).
#[pyfunction]
#[pyo3(signature = (session, src, dst, *, start, stop=None, delete=false, checksum=false, size_only=false, update=false, no_clobber=false, workers=None, chunk_size=None))]
#[allow(clippy::too_many_arguments)] // the Python signature
pub(crate) fn sync_range<'py>(
    py: Python<'py>,
    session: PyRef<'_, Session>,
    src: String,
    dst: String,
    start: String,
    stop: Option<String>,
    delete: bool,
    checksum: bool,
    size_only: bool,
    update: bool,
    no_clobber: bool,
    workers: Option<usize>,
    chunk_size: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = SyncOptions {
        compare: compare(checksum, size_only)?,
        // Always: the plan then names the extras (they are held, not
        // deleted, below). The source-empty and max_delete guards apply
        // to the whole sync, on the client.
        delete: true,
        limits: shoal_transfer::ops::DeleteLimits {
            max_delete: None,
            delete_when_source_empty: true,
        },
        update,
        no_clobber,
        // Live listings, both sides.
        confirm_extras: None,
    };
    let (sync, src, dst) = prefixes(&src, &dst, opts)?;
    let mut transfer = session.transfer_options(workers, chunk_size);
    transfer.no_clobber = no_clobber;
    let run = Run::new(transfer);
    let policy = session.retry();
    let store_for = session.stores.store_for(&[&src, &dst]).py()?;
    let range = KeyRange { start, end: stop };
    let plan = sync
        .range(&range, store_for.clone(), run.budgets.rates.clone())
        .py()?;
    let held = Arc::new(Mutex::new((0u64, Vec::<Extra>::new())));
    let keep = held.clone();
    // The plan's deletes are held back (see the module docs); copies and
    // problems go on to the batch.
    // Not `ops::Mode::hold_deletes`: that barrier is one process's, and
    // here every range's copies on every worker must end before any
    // delete, so the deletes leave the task and `shoal.dask.sync` runs
    // them once all tasks reported no failure.
    let copies = plan
        .filter_map(move |a| {
            let out = match a {
                Ok(shoal_core::Seen::Item(Action::Delete { dst, version })) => {
                    let mut h = keep.lock().expect("extras lock");
                    h.0 += 1;
                    if delete {
                        // With the version listed: the delete is pinned to it.
                        h.1.push((dst.to_string(), version.as_ref().map(ObjectVersion::text)));
                    }
                    None
                }
                other => Some(other),
            };
            futures::future::ready(out)
        })
        .boxed();
    let report = block_on(py, async move {
        Ok(shoal_transfer::ops::run(
            copies,
            store_for,
            run,
            policy,
            Arc::new(BatchCounters::default()),
            Mode::default(),
        )
        .await)
    })?;
    let (extras, extra_urls) = std::mem::take(&mut *held.lock().expect("extras lock"));
    let d = PyDict::new(py);
    d.set_item("copied", report.copied)?;
    d.set_item("bytes", report.bytes)?;
    d.set_item("failed", report.failed + report.skipped_unasked)?;
    d.set_item("skipped", report.skipped)?;
    d.set_item("failures", report.failures)?;
    d.set_item("extras", extras)?;
    d.set_item("extra_urls", extra_urls)?;
    Ok(d)
}
