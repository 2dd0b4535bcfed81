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
///
/// Signals are also looked at before starting: a stream consumed from C
/// (`b"".join(shoal.read(...))`, `list(...)`) runs no Python bytecode
/// between items, so Python never handles Ctrl-C itself, and an item that
/// is already waiting completes before the first periodic check. Without
/// this, a read went on draining what was fetched ahead (16 s for a big
/// object) after Ctrl-C.
pub(crate) fn block_on<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = PyResult<T>> + Send,
    T: Send,
{
    py.check_signals()?;
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

/// `fut`, given at most `deadline` seconds (google-cloud-storage's
/// transfer_manager `deadline`): past it the future is dropped, which
/// cancels its requests, aborts its multipart uploads and removes its
/// working files (`shoal_transfer::ops::cleanup`), and `TimeoutError` is raised.
pub(crate) async fn within<T>(
    deadline: Option<f64>,
    fut: impl Future<Output = PyResult<T>>,
) -> PyResult<T> {
    let Some(secs) = deadline else {
        return fut.await;
    };
    let limit = Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "deadline must be a positive number of seconds, not {secs}"
            ))
        })?;
    tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
        Err(pyo3::exceptions::PyTimeoutError::new_err(format!(
            "deadline of {secs} s passed: the transfers still running were cancelled \
             (their multipart uploads aborted, their working files removed)"
        )))
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
        // Python signatures: as many keywords as the call has.
        #[allow(clippy::too_many_arguments)]
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

        #[allow(clippy::too_many_arguments)]
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
