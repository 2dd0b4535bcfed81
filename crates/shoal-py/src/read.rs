//! Reading objects as a stream of bytes, in order, over URLs and globs.
//!
//! A task on the runtime expands each URL (globs in key order), fetches up
//! to [`PREFETCH`] objects ahead (small objects whole, big ones as one
//! resuming stream each, so memory stays bounded), checks each object's
//! CRC32C, and hands chunks of about [`CHUNK`] bytes to a bounded channel.
//! Python pulls from the channel with the GIL released.
//!
//! Decompression (gzip, zstd by name or `Content-Encoding`) is not done
//! here yet; see python/shoal/_read.py.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shoal_config::Stores;
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{BoxByteStream, ByteRange, Error, ErrorKind, Location, ObjectMeta, Op, Projection};
use shoal_list::ListOptions;
use tokio::sync::{Mutex, mpsc};

use crate::errors::to_py;
use crate::runtime::{awaitable, block_on};
use crate::session::Session;

/// Objects fetched ahead of the one being read: enough to hide a request's
/// latency behind the reading of small objects.
const PREFETCH: usize = 8;
/// Objects up to this size are fetched whole (at most PREFETCH of them are
/// held); bigger ones are streamed.
const WHOLE: u64 = 8 << 20;
/// Bytes per item handed to Python: few enough items that the per-item
/// cost (a GIL round trip) does not matter, small enough to keep memory low.
const CHUNK: usize = 1 << 20;
/// Items buffered between the task and Python.
const CHANNEL: usize = 8;

enum Item {
    Bytes(Bytes),
    /// The end of one object.
    End,
}

type Rx = Arc<Mutex<mpsc::Receiver<shoal_core::Result<Item>>>>;

/// An iterator (and async iterator) of `bytes` over objects, in order.
#[pyclass(module = "shoal._shoal")]
pub(crate) struct ReadStream {
    rx: Rx,
    boundaries: bool,
    task: tokio::task::AbortHandle,
}

impl Drop for ReadStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn next_item(rx: Rx, boundaries: bool) -> PyResult<Option<Bytes>> {
    let mut rx = rx.lock().await;
    loop {
        match rx.recv().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(to_py(e)),
            Some(Ok(Item::Bytes(b))) => return Ok(Some(b)),
            Some(Ok(Item::End)) if boundaries => return Ok(Some(Bytes::new())),
            Some(Ok(Item::End)) => continue,
        }
    }
}

#[pymethods]
impl ReadStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        let item = block_on(py, next_item(self.rx.clone(), self.boundaries))?;
        Ok(item.map(|b| PyBytes::new(py, &b).unbind()))
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (rx, boundaries) = (self.rx.clone(), self.boundaries);
        awaitable(py, async move {
            match next_item(rx, boundaries).await? {
                Some(b) => Ok(Python::attach(|py| PyBytes::new(py, &b).unbind())),
                None => Err(pyo3::exceptions::PyStopAsyncIteration::new_err(())),
            }
        })
    }

    /// Stops fetching (also done when the stream is dropped).
    fn close(&self) {
        self.task.abort();
    }
}

/// One object to hand over: fetched whole, or a stream still to read.
enum Source {
    Whole(Bytes),
    Stream(BoxByteStream, ObjectMeta, String),
}

fn integrity(url: &str, want: u32, got: u32) -> Error {
    Error::new(
        ErrorKind::Integrity,
        Op::Read,
        url,
        format!("CRC32C mismatch: store {want:08x}, received {got:08x}"),
    )
}

async fn fetch(
    stores: Arc<Stores>,
    loc: Location,
    meta: ObjectMeta,
    policy: RetryPolicy,
) -> shoal_core::Result<Source> {
    let url = loc.with_key(meta.key.clone()).to_string();
    let store = stores.store(&loc)?;
    let mut body = resuming_stream(
        store,
        &loc.bucket,
        &meta.key,
        &url,
        ByteRange::new(0, meta.size),
        meta.version.clone(),
        None,
        policy,
    );
    if meta.size > WHOLE {
        return Ok(Source::Stream(body, meta, url));
    }
    let mut buf = BytesMut::with_capacity(meta.size as usize);
    while let Some(chunk) = body.next().await {
        buf.extend_from_slice(&chunk?);
    }
    if let Some(want) = meta.crc32c {
        let got = crc32c::crc32c(&buf);
        if got != want {
            return Err(integrity(&url, want, got));
        }
    }
    Ok(Source::Whole(buf.freeze()))
}

type Tx = mpsc::Sender<shoal_core::Result<Item>>;

/// Sends everything `urls` names; false when Python stopped listening.
async fn produce(stores: Arc<Stores>, urls: Vec<String>, policy: RetryPolicy, tx: &Tx) -> shoal_core::Result<bool> {
    for url in urls {
        let loc = Location::parse(&url)?;
        if loc.is_local() {
            return Err(Error::invalid(Op::Read, &url, "is a local path; read takes gs:// or s3:// URLs"));
        }
        let store = stores.store(&loc)?;
        let opts = ListOptions {
            projection: Projection::Full,
            sorted: true,
            ..ListOptions::default()
        };
        let metas: Vec<ObjectMeta> = shoal_list::expand(store, &loc, &opts)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<shoal_core::Result<_>>()?;
        if metas.is_empty() {
            return Err(shoal_list::no_match(Op::Read, &loc));
        }
        let mut sources = futures::stream::iter(metas)
            .map(|m| fetch(stores.clone(), loc.clone(), m, policy))
            .buffered(PREFETCH);
        while let Some(src) = sources.next().await {
            match src? {
                Source::Whole(b) => {
                    if !b.is_empty() && tx.send(Ok(Item::Bytes(b))).await.is_err() {
                        return Ok(false);
                    }
                }
                Source::Stream(mut body, meta, url) => {
                    let mut crc = 0u32;
                    let mut buf = BytesMut::with_capacity(CHUNK);
                    while let Some(chunk) = body.next().await {
                        let chunk = chunk?;
                        crc = crc32c::crc32c_append(crc, &chunk);
                        buf.extend_from_slice(&chunk);
                        if buf.len() >= CHUNK
                            && tx.send(Ok(Item::Bytes(buf.split().freeze()))).await.is_err()
                        {
                            return Ok(false);
                        }
                    }
                    if let Some(want) = meta.crc32c
                        && want != crc
                    {
                        return Err(integrity(&url, want, crc));
                    }
                    if !buf.is_empty() && tx.send(Ok(Item::Bytes(buf.freeze()))).await.is_err() {
                        return Ok(false);
                    }
                }
            }
            if tx.send(Ok(Item::End)).await.is_err() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Streams the bytes of every object `urls` name (globs in key order),
/// object after object. With `boundaries`, an empty `bytes` marks the end
/// of each object.
#[pyfunction]
#[pyo3(signature = (session, urls, boundaries=false))]
pub(crate) fn read(session: PyRef<'_, Session>, urls: Vec<String>, boundaries: bool) -> ReadStream {
    let (tx, rx) = mpsc::channel(CHANNEL);
    let stores = session.stores.clone();
    let policy = session.retry();
    let rt = pyo3_async_runtimes::tokio::get_runtime();
    let task = rt.spawn(async move {
        if let Err(e) = produce(stores, urls, policy, &tx).await {
            let _ = tx.send(Err(e)).await;
        }
    });
    ReadStream {
        rx: Arc::new(Mutex::new(rx)),
        boundaries,
        task: task.abort_handle(),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(read, m)?)
}
