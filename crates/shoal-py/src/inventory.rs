//! Inventory reports for Python and Dask (`shoal_transfer::inventory`):
//! the client checks a report whole once, each task reads one data file.

use std::path::Path;

use pyo3::prelude::*;

use crate::errors::IntoPyResult;

/// Checks the report at `manifest` against its files (as `sync
/// --source-listing` does) and returns `(url of the bucket, taken at,
/// number of data files)`; InvalidInputError when it does not match.
#[pyfunction]
pub(crate) fn inventory_open(py: Python<'_>, manifest: &str) -> PyResult<(String, String, usize)> {
    let r = py
        .detach(|| shoal_transfer::inventory::open(Path::new(manifest)))
        .py()?;
    Ok((
        format!("{}{}", r.scheme.prefix(), r.bucket),
        r.made_at,
        r.files.len(),
    ))
}

/// The rows of data file `index` of a report already checked by
/// [`inventory_open`], whose keys start with `prefix`: a list of
/// `(key, size, updated seconds or None)`.
#[pyfunction]
#[pyo3(signature = (manifest, index, prefix=""))]
pub(crate) fn inventory_rows(
    py: Python<'_>,
    manifest: &str,
    index: usize,
    prefix: &str,
) -> PyResult<Vec<(String, u64, Option<f64>)>> {
    py.detach(|| {
        let r = shoal_transfer::inventory::open_checked_elsewhere(Path::new(manifest))?;
        let mut out = Vec::new();
        for row in r.rows_of(index)? {
            let row = row?;
            if row.key.starts_with(prefix) {
                out.push((row.key, row.size, row.updated_ns.map(|n| n as f64 / 1e9)));
            }
        }
        Ok(out)
    })
    .py()
}
