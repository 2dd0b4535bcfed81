//! Inventory reports for Python and Dask (`shoal_transfer::inventory`):
//! the client checks a report whole once, each task reads one data file.
//! A report named by URL (where the stores write them) is copied into a
//! private temporary folder first (`inventory::fetch`): all of it by the
//! client, to check it; only its own data file by each task.

use std::path::Path;

use pyo3::prelude::*;
use shoal_core::{Location, Op};
use shoal_transfer::Run;
use shoal_transfer::inventory::{Report, fetch};

use crate::errors::IntoPyResult;
use crate::list::object;
use crate::records::Records;
use crate::runtime::block_on;
use crate::session::Session;

/// The manifest named by URL, if it is one.
fn remote(manifest: &str) -> PyResult<Option<Location>> {
    let remote = Location::parse(manifest).is_ok_and(|l| !l.is_local());
    remote.then(|| object(Op::Read, manifest).py()).transpose()
}

/// A report copied down from `loc` (all of it, or only file `only`).
fn fetched(
    py: Python<'_>,
    session: Option<PyRef<'_, Session>>,
    loc: Location,
    only: Option<usize>,
) -> PyResult<fetch::Fetched> {
    let s = session.ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "{loc}: reading a report from a bucket needs a session"
        ))
    })?;
    let store = s.stores.store(&loc).py()?;
    let run = Run::new(s.transfer_options(None, None));
    let policy = s.retry();
    block_on(py, async move {
        fetch::fetch(store, &loc, only, &run, &policy).await.py()
    })
}

/// Checks the report at `manifest` (a local path or a bucket URL) against
/// its files (as `sync --source-listing` does) and returns `(url of the
/// bucket, taken at, number of data files)`; InvalidInputError when it
/// does not match.
#[pyfunction]
#[pyo3(signature = (manifest, session=None))]
pub(crate) fn inventory_open(
    py: Python<'_>,
    manifest: &str,
    session: Option<PyRef<'_, Session>>,
) -> PyResult<(String, String, usize)> {
    let opened = |r: &Report| {
        (
            format!("{}{}", r.scheme.prefix(), r.bucket),
            r.made_at.clone(),
            r.files.len(),
        )
    };
    if let Some(loc) = remote(manifest)? {
        return Ok(opened(&fetched(py, session, loc, None)?.report));
    }
    let r = py
        .detach(|| shoal_transfer::inventory::open(Path::new(manifest)))
        .py()?;
    Ok(opened(&r))
}

/// The rows of data file `index` of a report already checked by
/// [`inventory_open`], whose keys start with `prefix`, as the
/// [`Records`] a Dask partition holds (URLs under `bucket_url`, as
/// [`inventory_open`] returned it).
#[pyfunction]
#[pyo3(signature = (manifest, index, bucket_url, prefix="", session=None))]
pub(crate) fn inventory_rows(
    py: Python<'_>,
    manifest: &str,
    index: usize,
    bucket_url: &str,
    prefix: &str,
    session: Option<PyRef<'_, Session>>,
) -> PyResult<Records> {
    let copy = match remote(manifest)? {
        Some(loc) => Some(fetched(py, session, loc, Some(index))?),
        None => None,
    };
    py.detach(|| {
        let local;
        let r = match &copy {
            Some(f) => &f.report,
            None => {
                local = shoal_transfer::inventory::open_checked_elsewhere(Path::new(manifest))?;
                &local
            }
        };
        let mut out = Records::new(format!("{}/", bucket_url.trim_end_matches('/')));
        for row in r.rows_of(index)? {
            let row = row?;
            if row.key.starts_with(prefix) {
                out.push(&row.key, row.size, row.updated_ns);
            }
        }
        Ok(out)
    })
    .py()
}
