//! `shoal.read`: the (decoded) bytes of many objects as one Python
//! iterator, through the engine `shoal cat` uses.
//!
//! The work is [`shoal_transfer::ops::read::Reader`]'s: objects requested ahead
//! with up to 128 requests in flight (`workers=` sets it) within a `read_ahead` byte budget, big objects
//! as parallel ranges, decoding on blocking threads, each object checked
//! against the store's checksum as `shoal cat` checks it (CRC32C, CRC32 /
//! CRC64NVME, composite part by part, MD5, else the length), in listing order unless `ordered` is off. Decompression follows
//! `cat`: `Content-Encoding: gzip` always (the object's content is the
//! decoded bytes), zstd/gzip by magic bytes then extension when asked
//! (`cat -d`), nothing at all when told not to (`cat --no-decompress`).
//!
//! This module adds only the hand-over to Python. A task on the runtime
//! drains the reader object by object and sends batches of its chunks
//! through a small bounded channel; Python pulls a batch with the GIL
//! released (Ctrl-C checked, see [`crate::runtime`]) and gets it as one
//! `bytes`. Why this shape:
//!
//! - A task, not the reader driven from `__next__`: the channel's `recv`
//!   can be cancelled (Ctrl-C, an asyncio timeout) without losing
//!   anything, which the unordered reader's `next_object` cannot promise.
//! - Batches: chunks straight from a socket can be a few KiB, and a GIL
//!   round trip per chunk would cost more than the copy. What is already
//!   there (up to [`BATCH`]) is joined; nothing waits to fill a batch.
//! - Chunks keep their budget permits until Python has copied them, so
//!   memory stays within `read_ahead` plus [`CHANNEL`] batches, however big
//!   the dataset.
//!
//! Like a Python file, the first error (a missing object, a checksum
//! mismatch, a corrupt frame naming the object and compressed offset)
//! is raised and ends the iteration; `cat` reports it and goes on instead.
//! Lines are cut in Python (python/shoal/_api.py) from the object
//! boundaries marked here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use futures::stream::BoxStream;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shoal_config::Stores;
use shoal_core::{Error, ErrorKind, Location, Result};
use shoal_transfer::ops::decode::Decompress;
use shoal_transfer::ops::read::{Chunk, DEFAULT_READ_AHEAD, ReadOptions, Reader, Source};
use shoal_transfer::ops::sources::read_sources;
use tokio::sync::{Mutex, mpsc};

use crate::errors::{IntoPyResult, to_py};
use crate::runtime::{awaitable, block_on};
use crate::session::Session;

/// Most bytes joined into one `bytes` for Python: big enough that the
/// per-item cost (a GIL round trip, a Python object) vanishes, small
/// enough that the copy never shows (the decoder's blocks are this size).
const BATCH: usize = shoal_transfer::ops::read::BLOCK;
/// Batches waiting for Python: enough to keep the task one step ahead;
/// the read-ahead itself happens in the reader, within its budget.
const CHANNEL: usize = 4;

enum Item {
    /// Chunks of one object, in order, none empty.
    Data(Vec<Chunk>),
    /// The end of one object.
    End,
}

type Rx = Arc<Mutex<mpsc::Receiver<Result<Item>>>>;

/// An iterator (and async iterator) of `bytes` over objects.
#[pyclass(module = "shoal._shoal")]
pub(crate) struct ReadStream {
    rx: Rx,
    boundaries: bool,
    closed: Arc<AtomicBool>,
    task: tokio::task::AbortHandle,
}

impl Drop for ReadStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The next batch (empty: the end of an object, with `boundaries`).
async fn next_item(
    rx: Rx,
    boundaries: bool,
    closed: Arc<AtomicBool>,
) -> PyResult<Option<Vec<Chunk>>> {
    let mut rx = rx.lock().await;
    loop {
        if closed.load(Ordering::Relaxed) {
            return Ok(None);
        }
        match rx.recv().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(to_py(e)),
            Some(Ok(Item::Data(b))) => return Ok(Some(b)),
            Some(Ok(Item::End)) if boundaries => return Ok(Some(Vec::new())),
            Some(Ok(Item::End)) => continue,
        }
    }
}

/// One `bytes` holding the batch; the chunks' budget is released after.
fn to_bytes(py: Python<'_>, batch: Vec<Chunk>) -> PyResult<Py<PyBytes>> {
    let len = batch.iter().map(|c| c.len()).sum();
    let b = PyBytes::new_with(py, len, |buf| {
        let mut at = 0;
        for c in &batch {
            buf[at..at + c.len()].copy_from_slice(&c[..]);
            at += c.len();
        }
        Ok(())
    })?;
    Ok(b.unbind())
}

#[pymethods]
impl ReadStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        let next = next_item(self.rx.clone(), self.boundaries, self.closed.clone());
        match block_on(py, next)? {
            Some(batch) => to_bytes(py, batch).map(Some),
            None => Ok(None),
        }
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let next = next_item(self.rx.clone(), self.boundaries, self.closed.clone());
        awaitable(py, async move {
            match next.await? {
                Some(batch) => Python::attach(|py| to_bytes(py, batch)),
                None => Err(pyo3::exceptions::PyStopAsyncIteration::new_err(())),
            }
        })
    }

    /// Stops reading and lets go of what was read ahead (also done when
    /// the stream is dropped); the iteration ends.
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.task.abort();
        if let Ok(mut rx) = self.rx.try_lock() {
            rx.close();
            while rx.try_recv().is_ok() {}
        }
    }
}

/// The objects `urls` name, in order, as the reader wants them
/// ([`read_sources`], globs in key order). URLs, globs and stores are
/// checked now, so a bad one raises at the call.
fn sources(stores: &Stores, urls: &[String]) -> Result<BoxStream<'static, Result<Source>>> {
    let locs = urls
        .iter()
        .map(|u| Location::parse(u))
        .collect::<Result<Vec<_>>>()?;
    read_sources(locs, &|l| stores.store(l), true)
}

/// Rewords the engine's hint for a damaged compressed object in this
/// API's terms (the engine speaks the CLI's flags).
fn for_python(e: Error) -> Error {
    if e.kind() == ErrorKind::Integrity && e.message().contains("at compressed offset") {
        return e.with_hint("the stored object is damaged; decompress=False reads it as stored");
    }
    e
}

/// Drains `reader` into `tx`: each object's chunks in batches, then an
/// end marker; the first error last.
async fn pump(mut reader: Reader, tx: mpsc::Sender<Result<Item>>) {
    let fail = |e: Error| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(Err(for_python(e))).await;
        }
    };
    while let Some(o) = reader.next_object().await {
        let mut o = match o {
            Ok(o) => o,
            Err(e) => return fail(e).await,
        };
        while let Some(c) = o.next().await {
            let c = match c {
                Ok(c) => c,
                Err(e) => return fail(e).await,
            };
            let mut n = c.len();
            let mut batch = vec![c];
            let mut failed = None;
            // Join what is already there; never wait to fill a batch.
            while n < BATCH {
                match o.next().now_or_never() {
                    Some(Some(Ok(c))) => {
                        n += c.len();
                        batch.push(c);
                    }
                    Some(Some(Err(e))) => {
                        failed = Some(e);
                        break;
                    }
                    Some(None) | None => break,
                }
            }
            batch.retain(|c| !c.is_empty());
            if !batch.is_empty() && tx.send(Ok(Item::Data(batch))).await.is_err() {
                return;
            }
            if let Some(e) = failed {
                return fail(e).await;
            }
        }
        if tx.send(Ok(Item::End)).await.is_err() {
            return;
        }
    }
}

/// Streams the bytes of every object `urls` name (globs in key order),
/// read ahead in parallel by shoal's reader and decompressed like `shoal
/// cat`: `decompress` None decodes only `Content-Encoding: gzip` objects,
/// True also zstd/gzip by magic bytes or extension, False nothing. With
/// `boundaries`, an empty `bytes` marks the end of each object. `ordered`
/// False yields whole objects as they finish. `read_ahead` bounds the
/// bytes held (default 256 MiB).
#[pyfunction]
#[pyo3(signature = (session, urls, *, boundaries=false, decompress=None, ordered=true, read_ahead=None))]
pub(crate) fn read(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    urls: Vec<String>,
    boundaries: bool,
    decompress: Option<bool>,
    ordered: bool,
    read_ahead: Option<u64>,
) -> PyResult<ReadStream> {
    if read_ahead == Some(0) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "read_ahead must be at least 1 byte",
        ));
    }
    let stores = session.stores.clone();
    let sources = py.detach(|| sources(&stores, &urls)).py()?;
    let opts = ReadOptions {
        workers: session.workers,
        requests: session.transfer_options(None, None).small_workers,
        read_ahead: read_ahead.unwrap_or(DEFAULT_READ_AHEAD),
        decompress: match decompress {
            None => Decompress::ContentEncoding,
            Some(true) => Decompress::Detect,
            Some(false) => Decompress::Off,
        },
        ordered,
        ..ReadOptions::default()
    };
    let policy = session.retry();
    let (tx, rx) = mpsc::channel(CHANNEL);
    let rt = pyo3_async_runtimes::tokio::get_runtime();
    let task = rt.spawn(async move { pump(Reader::start(sources, opts, policy), tx).await });
    Ok(ReadStream {
        rx: Arc::new(Mutex::new(rx)),
        boundaries,
        closed: Arc::new(AtomicBool::new(false)),
        task: task.abort_handle(),
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(read, m)?)
}
