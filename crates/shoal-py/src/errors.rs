//! shoal's errors as Python exceptions.
//!
//! The classes live in Python (`python/shoal/errors.py`) because they need
//! multiple inheritance: `NotFoundError` is both a `shoal.ShoalError` and a
//! `FileNotFoundError`, so code written for local files (and fsspec, and
//! pandas) catches it unchanged. The message is shoal's one line: the
//! operation, the URL, what the server said, and what to try.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use shoal_core::{Error, ErrorKind};

static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The class in `shoal.errors` and the `kind` attribute for a kind.
fn names(kind: ErrorKind) -> (&'static str, &'static str) {
    match kind {
        ErrorKind::NotFound => ("NotFoundError", "not_found"),
        ErrorKind::PermissionDenied => ("PermissionDeniedError", "permission_denied"),
        ErrorKind::Unauthenticated => ("UnauthenticatedError", "unauthenticated"),
        ErrorKind::Precondition => ("PreconditionError", "precondition"),
        ErrorKind::InvalidInput => ("InvalidInputError", "invalid_input"),
        ErrorKind::Unsupported => ("UnsupportedError", "unsupported"),
        ErrorKind::Connect => ("ConnectError", "connect"),
        ErrorKind::Timeout => ("RequestTimeoutError", "timeout"),
        ErrorKind::ServerBusy => ("ServerBusyError", "server_busy"),
        ErrorKind::Protocol => ("ProtocolError", "protocol"),
        ErrorKind::Integrity => ("IntegrityError", "integrity"),
        ErrorKind::Changed => ("ChangedError", "changed"),
        ErrorKind::Io => ("LocalIOError", "io"),
        ErrorKind::Rejected => ("RejectedError", "rejected"),
        ErrorKind::Cancelled => ("CancelledError", "cancelled"),
        _ => ("ShoalError", "other"),
    }
}

/// The exception instance for `e` (attributes `kind`, `url`, `status`).
pub(crate) fn exception(py: Python<'_>, e: &Error) -> PyResult<Py<PyAny>> {
    let module = MODULE.get_or_try_init(py, || py.import("shoal.errors").map(Bound::unbind))?;
    let (class, kind) = names(e.kind());
    let inst = module.bind(py).getattr(class)?.call1((e.to_string(),))?;
    inst.setattr("kind", kind)?;
    inst.setattr("url", e.url())?;
    inst.setattr("status", e.status())?;
    Ok(inst.unbind())
}

/// `e` as a raisable `PyErr` (takes the GIL briefly when called from the
/// runtime's threads).
pub(crate) fn to_py(e: Error) -> PyErr {
    Python::attach(|py| match exception(py, &e) {
        Ok(inst) => PyErr::from_value(inst.into_bound(py)),
        Err(import_failed) => import_failed,
    })
}

/// `?` for shoal results inside Python-facing code.
pub(crate) trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for shoal_core::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
