//! `shoal.iter_objects`: a listing as an iterator, for buckets too big to
//! hold as a list.
//!
//! `ls`/`glob` return lists because that is what their callers (fsspec,
//! transfer_manager) expect; a list of a hundred million `ObjectInfo` does
//! not fit in memory. This streams the same listing (`shoal_list::expand`,
//! the parallel lister, in key order) page by page: a task on the runtime
//! sends pages through a small bounded channel and Python takes one page
//! per step with the GIL released, so memory holds the lister's bounded
//! buffers and [`CHANNEL`] pages, whatever the key count. One page per
//! step, not one object: a GIL round trip per object would cost more than
//! the object.

use std::sync::Arc;

use futures::StreamExt;
use pyo3::prelude::*;
use shoal_core::{Op, Result};
use shoal_list::ListOptions;
use tokio::sync::{Mutex, mpsc};

use crate::errors::{IntoPyResult, to_py};
use crate::list::{cloud, projection};
use crate::objects::ObjectInfo;
use crate::runtime::{awaitable, block_on};
use crate::session::Session;

/// Pages waiting for Python: enough to keep the lister ahead of it.
const CHANNEL: usize = 4;

/// Objects handed over at once (a listing page is at most 1,000).
const PAGE: usize = 1000;

type Rx = Arc<Mutex<mpsc::Receiver<Result<Vec<ObjectInfo>>>>>;

/// An iterator (and async iterator) of lists of `ObjectInfo`, in key order.
#[pyclass(module = "shoal._shoal")]
pub(crate) struct ObjectStream {
    rx: Rx,
    task: tokio::task::AbortHandle,
}

impl Drop for ObjectStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn next_page(rx: Rx) -> PyResult<Option<Vec<ObjectInfo>>> {
    match rx.lock().await.recv().await {
        None => Ok(None),
        Some(Err(e)) => Err(to_py(e)),
        Some(Ok(page)) => Ok(Some(page)),
    }
}

#[pymethods]
impl ObjectStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Vec<ObjectInfo>>> {
        block_on(py, next_page(self.rx.clone()))
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let next = next_page(self.rx.clone());
        awaitable(py, async move {
            match next.await? {
                Some(page) => Ok(page),
                None => Err(pyo3::exceptions::PyStopAsyncIteration::new_err(())),
            }
        })
    }

    /// Stops listing (also done when the iterator is dropped).
    fn close(&self) {
        self.task.abort();
    }
}

/// Every object a URL or glob names (what `expand` returns), in key
/// order, as an iterator of pages. A glob matching nothing raises
/// `NotFoundError` at the end of its (empty) listing, as fsspec expects.
#[pyfunction]
#[pyo3(signature = (session, url, *, recursive=false, detail="full".to_owned()))]
pub(crate) fn iter_objects(
    session: PyRef<'_, Session>,
    url: String,
    recursive: bool,
    detail: String,
) -> PyResult<ObjectStream> {
    let loc = cloud(&url)?;
    shoal_list::check(&loc).py()?;
    let store = session.stores.store(&loc).py()?;
    let opts = ListOptions {
        recursive,
        projection: projection(&detail)?,
        sorted: true,
        ..ListOptions::default()
    };
    let (tx, rx) = mpsc::channel(CHANNEL);
    let rt = pyo3_async_runtimes::tokio::get_runtime();
    let task = rt.spawn(async move {
        let objects = shoal_list::expand(store, &loc, &opts);
        let mut pages = std::pin::pin!(objects.ready_chunks(PAGE));
        let mut any = false;
        while let Some(chunk) = pages.next().await {
            let mut page = Vec::with_capacity(chunk.len());
            let mut failed = None;
            for m in chunk {
                match m {
                    Ok(m) => page.push(ObjectInfo::new(&loc, m)),
                    Err(e) => {
                        failed = Some(e.with_url(loc.to_string()));
                        break;
                    }
                }
            }
            any |= !page.is_empty();
            if !page.is_empty() && tx.send(Ok(page)).await.is_err() {
                return;
            }
            if let Some(e) = failed {
                let _ = tx.send(Err(e)).await;
                return;
            }
        }
        if !any && shoal_list::has_wildcard(&loc.key) {
            let _ = tx.send(Err(shoal_list::no_match(Op::List, &loc))).await;
        }
    });
    Ok(ObjectStream {
        rx: Arc::new(Mutex::new(rx)),
        task: task.abort_handle(),
    })
}
