//! shoal's Python extension module, `shoal._shoal`.
//!
//! Thin on purpose: every function parses its arguments, runs one of the
//! Rust engines (shoal-transfer, shoal-list) on the process's one tokio
//! runtime with the GIL released, and turns the result into Python values.
//! The Python-shaped API (transfer_manager names, fsspec, Dask) is written
//! in Python on top of these primitives (python/shoal/), where its users
//! can read it.
//!
//! Each operation exists twice, like obstore's: `name(...)` blocks (with
//! the GIL released and Ctrl-C checked every 100 ms) and `name_async(...)`
//! returns an awaitable completed from the tokio runtime
//! (pyo3-async-runtimes), so asyncio code and fsspec's event loop never
//! wait on a thread.
//!
//! - [`session`]: configuration (environment + keyword overrides) → stores.
//! - [`objects`]: `ObjectInfo`, what a listing or stat returns;
//!   [`records`]: `Records`, a listing partition as columns (Dask).
//! - [`errors`]: shoal's error kinds → the `shoal.errors` hierarchy.
//! - [`list`], [`list_stream`], [`transfer`], [`cat`], [`read`],
//!   [`presign`]: the operations; [`ranges`] and [`sync`]: a listing and
//!   a sync split into key ranges for Dask; [`split`]: one object copied
//!   by several Dask tasks.

mod cat;
mod errors;
mod inventory;
mod list;
mod list_stream;
mod objects;
mod presign;
mod ranges;
mod read;
mod records;
mod runtime;
mod session;
mod split;
mod sync;
mod transfer;
mod update;
mod versions;

use pyo3::prelude::*;

#[pymodule]
fn _shoal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The runtime is built on first use, with the CLI's thread count.
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    let threads =
        shoal_transfer::runtime_threads().map_err(pyo3::exceptions::PyValueError::new_err)?;
    rt.worker_threads(threads).enable_all();
    pyo3_async_runtimes::tokio::init(rt);
    // The CLI's version; the commit as build.rs found it ("unknown" for a
    // build from an sdist).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("__commit__", env!("SHOAL_COMMIT"))?;
    m.add_class::<session::Session>()?;
    m.add_class::<objects::ObjectInfo>()?;
    m.add_class::<read::ReadStream>()?;
    m.add_class::<list_stream::ObjectStream>()?;
    m.add_class::<records::Records>()?;
    m.add_class::<records::RecordsIter>()?;
    m.add_function(pyo3::wrap_pyfunction!(list_stream::iter_objects, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(ranges::list_range, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(ranges::cut_range, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(sync::sync_range, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(sync::check_sync, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(sync::sync_deletes_held, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(sync::delete_extras, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(sync::check_copy, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(inventory::inventory_open, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(inventory::inventory_rows, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(split::split_copy_begin, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(split::task_bytes, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(split::join_pieces, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(split::split_copy_parts, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(split::split_copy_finish, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(split::split_copy_abort, m)?)?;
    list::register(m)?;
    transfer::register(m)?;
    cat::register(m)?;
    presign::register(m)?;
    read::register(m)?;
    versions::register(m)?;
    update::register(m)?;
    Ok(())
}
