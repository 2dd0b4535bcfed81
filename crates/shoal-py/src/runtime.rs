//! The process's one tokio runtime, and running futures on it from Python.
//!
//! One runtime per process (pyo3-async-runtimes' lazily built
//! multi-threaded one): blocking calls and `_async` calls share its
//! threads and the stores' connection pools. Dask and multiprocessing
//! start workers with `spawn`, so a runtime never crosses a `fork`.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;

/// How often a blocking call looks for Ctrl-C (Python only sees signals
/// when it runs; with the GIL released for minutes, it would not).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Runs `fut` to completion with the GIL released. A pending
/// `KeyboardInterrupt` drops the future (cancelling its requests) and is
/// raised.
pub(crate) fn block_on<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = PyResult<T>> + Send,
    T: Send,
{
    let rt = pyo3_async_runtimes::tokio::get_runtime();
    py.detach(|| {
        rt.block_on(async {
            let mut fut = std::pin::pin!(fut);
            loop {
                tokio::select! {
                    v = &mut fut => return v,
                    () = tokio::time::sleep(SIGNAL_CHECK) => {
                        Python::attach(|py| py.check_signals())?;
                    }
                }
            }
        })
    })
}

/// `fut` as an awaitable for the running asyncio loop.
pub(crate) fn awaitable<'py, T, F>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    pyo3_async_runtimes::tokio::future_into_py(py, fut)
}

/// Defines a blocking `name` and an awaitable `name_async` from one
/// function `imp(&Session, args…) -> impl Future<Output = PyResult<T>>`,
/// so the two forms cannot drift apart.
macro_rules! blocking_and_async {
    ($(#[$meta:meta])* fn $name:ident / $aname:ident ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty = $imp:path;) => {
        #[pyo3::pyfunction]
        $(#[$meta])*
        pub(crate) fn $name(
            py: pyo3::Python<'_>,
            session: pyo3::PyRef<'_, crate::session::Session>,
            $($arg: $ty),*
        ) -> pyo3::PyResult<$ret> {
            let fut = $imp(&session, $($arg),*);
            crate::runtime::block_on(py, fut)
        }

        #[pyo3::pyfunction]
        $(#[$meta])*
        pub(crate) fn $aname<'py>(
            py: pyo3::Python<'py>,
            session: pyo3::PyRef<'_, crate::session::Session>,
            $($arg: $ty),*
        ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
            let fut = $imp(&session, $($arg),*);
            crate::runtime::awaitable(py, fut)
        }
    };
}
pub(crate) use blocking_and_async;
