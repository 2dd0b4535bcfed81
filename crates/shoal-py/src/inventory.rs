//! Inventory reports for Python and Dask (`shoal_transfer::ops::inventory`):
//! the client checks a report whole once, each task reads one data file.
//! A report named by URL (where the stores write them) is copied into a
//! private temporary folder first (`inventory::fetch`): all of it by the
//! client, to check it; only its own data file by each task.
//!
//! The check hands back one `inventory::Part` a data file (as JSON): the
//! file's size and MD5 as checked and, in a bucket, the version read. A
//! task reads its file from that alone (no manifest fetched again),
//! pinned to that version, and refuses a file whose size or MD5 is not
//! the checked one: a report refreshed between `inventory_bag()` and
//! `compute()` raises instead of yielding another report's rows.

use std::path::Path;

use pyo3::prelude::*;
use shoal_core::{Location, Op};
use shoal_transfer::Run;
use shoal_transfer::ops::inventory::{Part, Report, fetch};

use crate::errors::IntoPyResult;
use crate::list::object;
use crate::records::Records;
use crate::runtime::block_on;
use crate::session::Session;

/// The manifest or data file named by URL, if it is one.
fn remote(name: &str) -> PyResult<Option<Location>> {
    let remote = Location::parse(name).is_ok_and(|l| !l.is_local());
    remote.then(|| object(Op::Read, name).py()).transpose()
}

/// The session a read from a bucket needs.
fn needs_session<'a>(
    session: Option<PyRef<'a, Session>>,
    loc: &Location,
) -> PyResult<PyRef<'a, Session>> {
    session.ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "{loc}: reading a report from a bucket needs a session"
        ))
    })
}

/// Checks the report at `manifest` (a local path or a bucket URL) against
/// its files (as `sync --source-listing` does) and returns `(url of the
/// bucket, taken at, one part a data file)`, each part the JSON that
/// [`inventory_rows`] reads; InvalidInputError when it does not match,
/// or when it declares a prefix that does not hold `prefix`.
#[pyfunction]
#[pyo3(signature = (manifest, *, prefix="", session=None))]
pub(crate) fn inventory_open(
    py: Python<'_>,
    manifest: &str,
    prefix: &str,
    session: Option<PyRef<'_, Session>>,
) -> PyResult<(String, String, Vec<String>)> {
    let opened = |r: &Report, part: &dyn Fn(usize) -> shoal_core::Result<Part>| {
        let url = format!("{}{}", r.scheme.prefix(), r.bucket);
        let side = Location::parse(&format!("{url}/{prefix}")).py()?;
        r.check_side(&side, prefix).py()?;
        let parts = (0..r.files.len())
            .map(|i| part(i).map(|p| p.to_json()).py())
            .collect::<PyResult<Vec<String>>>()?;
        Ok((url, r.made_at.clone(), parts))
    };
    if let Some(loc) = remote(manifest)? {
        let s = needs_session(session, &loc)?;
        let store = s.stores.store(&loc).py()?;
        let run = Run::new(s.transfer_options(None, None));
        let policy = s.retry();
        let f = block_on(py, async move {
            fetch::fetch(store, &loc, &run, &policy).await.py()
        })?;
        return opened(&f.report, &|i| f.part(i));
    }
    let r = py
        .detach(|| shoal_transfer::ops::inventory::open(Path::new(manifest)))
        .py()?;
    opened(&r, &|i| r.part(i))
}

/// The rows of one data file of a report checked by [`inventory_open`]
/// (`part`, as it returned it) whose keys start with `prefix`, as the
/// [`Records`] a Dask partition holds (URLs under `bucket_url`). The file
/// is read pinned to the version the check read, and refused unless its
/// size and MD5 are the checked ones.
#[pyfunction]
#[pyo3(signature = (part, bucket_url, *, prefix="", session=None))]
pub(crate) fn inventory_rows(
    py: Python<'_>,
    part: &str,
    bucket_url: &str,
    prefix: &str,
    session: Option<PyRef<'_, Session>>,
) -> PyResult<Records> {
    let part = Part::from_json(part).py()?;
    let copy = match remote(&part.file)? {
        Some(loc) => {
            let s = needs_session(session, &loc)?;
            let store = s.stores.store(&loc).py()?;
            let run = Run::new(s.transfer_options(None, None));
            let policy = s.retry();
            let p = &part;
            Some(block_on(py, async move {
                fetch::fetch_part(store, p, &loc, &run, &policy).await.py()
            })?)
        }
        None => None,
    };
    py.detach(|| {
        let path = copy
            .as_ref()
            .map_or(Path::new(&part.file), |c| c.path.as_path());
        let mut out = Records::new(format!("{}/", bucket_url.trim_end_matches('/')));
        for row in part.rows(path)? {
            let row = row?;
            if row.key.starts_with(prefix) {
                out.push(&row.key, row.size, row.updated_ns);
            }
        }
        out.shrink();
        Ok(out)
    })
    .py()
}
