//! One key range of a sync split across Dask workers (`shoal.dask.sync`).
//!
//! Python decides only where the ranges lie (a listing split across the
//! workers, see [`crate::ranges`]); each range is synced here by the
//! engine `shoal sync` runs: [`shoal_transfer::sync::sync_range`] lists
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
use shoal_core::{Error, Location, Op};
use shoal_transfer::Run;
use shoal_transfer::batch::{Action, BatchCounters};
use shoal_transfer::sync::{Compare, KeyRange, SyncOptions, sync_range as plan_range};

use crate::errors::IntoPyResult;
use crate::list::cloud;
use crate::runtime::block_on;
use crate::session::Session;

/// A sync's two URLs as locations: bucket prefixes, not globs, that do not
/// lie inside one another (the engine's guard, as `shoal sync` applies it).
fn prefixes(src: &str, dst: &str) -> PyResult<(Location, Location)> {
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
    shoal_transfer::guard::refuse_overlap("sync", &a, &b).py()?;
    Ok((a, b))
}

/// Refuses a sync from `src` to `dst` before anything runs: local paths,
/// globs, one prefix inside the other (InvalidInputError, a ValueError).
#[pyfunction]
pub(crate) fn check_sync(src: &str, dst: &str) -> PyResult<()> {
    prefixes(src, dst).map(drop)
}

/// Refuses copying what `src` names (a folder's contents, a prefix or a
/// glob) into the folder `dst` when the copy could write what it reads
/// (`shoal_transfer::guard::refuse_tree_overlap`, the check `cp -r`
/// makes): one prefix inside the other, or a glob that can match keys
/// below `dst` (InvalidInputError, a ValueError).
#[pyfunction]
pub(crate) fn check_copy(src: &str, dst: &str) -> PyResult<()> {
    let a = Location::parse(src).py()?;
    let b = Location::parse(dst).py()?;
    shoal_transfer::guard::refuse_tree_overlap("copy", &a, &b, true).py()
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
#[pyo3(signature = (session, src, dst, start, stop=None, *, delete=false, checksum=false, size_only=false, update=false, no_clobber=false, workers=None, chunk_size=None))]
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
    let (src, dst) = prefixes(&src, &dst)?;
    let opts = SyncOptions {
        compare: compare(checksum, size_only)?,
        // Always: the plan then names the extras (they are held, not
        // deleted, below). The source-empty and max_delete guards apply
        // to the whole sync, on the client.
        delete: true,
        max_delete: None,
        delete_when_source_empty: true,
        update,
        no_clobber,
        // Live listings, both sides.
        confirm_extras: None,
    };
    let mut transfer = session.transfer_options(workers, chunk_size);
    transfer.no_clobber = no_clobber;
    let run = Run::new(transfer);
    let policy = session.retry();
    let store_for = session.stores.store_for(&[&src, &dst]).py()?;
    let range = KeyRange { start, end: stop };
    let plan = plan_range(
        &src,
        &dst,
        &range,
        opts,
        store_for.clone(),
        run.budgets.rates.clone(),
    )
    .py()?;
    let held = Arc::new(Mutex::new((0u64, Vec::<String>::new())));
    let keep = held.clone();
    // The plan's deletes are held back (see the module docs); copies and
    // problems go on to the batch.
    // Not `batch::Mode::hold_deletes`: that barrier is one process's, and
    // here every range's copies on every worker must end before any
    // delete, so the deletes leave the task and `shoal.dask.sync` runs
    // them once all tasks reported no failure.
    let copies = plan
        .filter_map(move |a| {
            let out = match a {
                Ok(Action::Delete { dst, .. }) => {
                    let mut h = keep.lock().expect("extras lock");
                    h.0 += 1;
                    if delete {
                        h.1.push(dst.to_string());
                    }
                    None
                }
                other => Some(other),
            };
            futures::future::ready(out)
        })
        .boxed();
    let report = block_on(py, async move {
        Ok(shoal_transfer::batch::run(
            copies,
            store_for,
            run,
            policy,
            Arc::new(BatchCounters::default()),
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
