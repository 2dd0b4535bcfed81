//! `shoal.cat`: one object's bytes, or a range of them, as one Python
//! `bytes`.
//!
//! The reading is [`shoal_transfer::ops::into_memory`]'s, the engine's read
//! into memory (parallel slices into one buffer, the first request sent
//! at once so a small read is one request): a whole object is verified
//! as `shoal cp` verifies a download (CRC32C, CRC32 / CRC64NVME, a
//! composite checksum part by part, MD5, else the length), and a mismatch
//! is raised as `shoal.IntegrityError`. A range of an object (fsspec's
//! block reads, `cat_file` with start or end) cannot be checked against a
//! whole-object checksum: it is pinned to the object's version, so an
//! open file never reads two versions, and checked by its length only.
//! This module only parses the arguments and hands the bytes to Python.
//!
//! `cat` fills the `bytes` object it returns ([`FreshBytes`]): the engine
//! writes into it, the GIL released, and nothing is copied after. A copy
//! into a new `bytes` (made under the GIL) took as long as receiving the
//! bytes from a local server (18 MiB: 10 ms against 9), held the GIL
//! meanwhile, and touched twice the memory.
//!
//! `cat_buffer` is `cat` for pyarrow's reads (a Python file's
//! `read_buffer`): the bytes land in memory this module keeps and reuses
//! ([`POOL`]), handed over as a `pyarrow.Buffer`, since a new `bytes` of
//! a row group is fresh pages, a page fault each.

use std::future::Future;
use std::ptr::NonNull;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyBytes;
use shoal_core::{Error, ErrorKind, Location, ObjectVersion, Op};
use shoal_transfer::Run;
use shoal_transfer::ops::into_memory::{Buffer, RangeRead, read_into, read_ranges};
use shoal_transfer::pool::{BufferPool, Pooled};

use crate::errors::{IntoPyResult, to_py};
use crate::list::object;
use crate::runtime::blocking_and_async;
use crate::session::Session;

/// `cat`: the bytes of one object's range, read and checked by the engine.
fn cat_impl(
    s: &Session,
    url: String,
    start: Option<i64>,
    end: Option<i64>,
    version: Option<String>,
    version_id: Option<String>,
) -> impl Future<Output = PyResult<Py<PyBytes>>> + use<> {
    let read = read_as(s, url, start, end, version, version_id, FreshBytes::new);
    async move { Ok(read.await?.done()) }
}

/// `cat_buffer`: as `cat`, the bytes in a `pyarrow.Buffer` over memory
/// of [`POOL`] (see [`Held`]).
fn cat_buffer_impl(
    s: &Session,
    url: String,
    start: Option<i64>,
    end: Option<i64>,
    version: Option<String>,
    version_id: Option<String>,
) -> impl Future<Output = PyResult<Py<PyAny>>> + use<> {
    let read = read_as(s, url, start, end, version, version_id, |n, _| {
        Ok(POOL.take(n))
    });
    async move {
        let b = read.await?;
        Python::attach(|py| Held::wrap(py, b))
    }
}

/// One read of `cat`'s rules into the buffer `alloc(len, url)` makes.
fn read_as<B: Buffer, A: FnOnce(usize, &str) -> shoal_core::Result<B> + Send + 'static>(
    s: &Session,
    url: String,
    start: Option<i64>,
    end: Option<i64>,
    version: Option<String>,
    version_id: Option<String>,
    alloc: A,
) -> impl Future<Output = PyResult<B>> + use<B, A> {
    let stores = s.stores.clone();
    let run = Run::new(s.transfer_options(None, None));
    let policy = s.retry();
    async move {
        let loc = object(Op::Download, &url).py()?;
        let pinned = match (version, version_id) {
            (Some(_), Some(_)) => {
                return Err(to_py(Error::invalid(
                    Op::Download,
                    &url,
                    "give version (a pin to what was listed) or version_id (a stored version), not both",
                )));
            }
            (_, Some(v)) => {
                Some(shoal_transfer::ops::versions::parse(Op::Download, &loc, &v).py()?)
            }
            (v, None) => v.map(|v| parse_version(&loc, &url, &v)).transpose()?,
        };
        let store = stores.store(&loc).py()?;
        let read = read_into(
            store,
            &loc,
            start,
            end,
            pinned.as_ref(),
            &run,
            policy,
            |n| alloc(n, &url),
        )
        .await
        .map_err(|e| to_py(e.with_url(&url)))?;
        Ok(read.bytes)
    }
}

/// A new Python `bytes` object of a given length, its contents still to
/// be written: the engine fills it without the GIL, then it is handed to
/// Python whole ([`FreshBytes::done`]). No Python code can see the object
/// before then (this is its only reference), and CPython never moves an
/// object, so writing its storage from another thread is what
/// `PyBytes_FromStringAndSize(NULL, n)` is for.
struct FreshBytes {
    obj: Py<PyBytes>,
    data: NonNull<u8>,
    len: usize,
}

// SAFETY: `data` points into `obj`'s storage, which only this value
// reaches until `done` gives the object away (see the type's doc).
unsafe impl Send for FreshBytes {}

impl FreshBytes {
    /// `len` zero bytes (allocated under the GIL, zeroed without it: for
    /// a big read this is where its pages are first touched, and the
    /// engine never sees uninitialized memory).
    fn new(len: usize, url: &str) -> shoal_core::Result<Self> {
        let fresh = Python::attach(|py| Self::uninit(py, len, url))?;
        // SAFETY: `len` writable bytes from `data` (see `uninit`).
        unsafe { std::ptr::write_bytes(fresh.data.as_ptr(), 0, len) };
        Ok(fresh)
    }

    fn uninit(py: Python<'_>, len: usize, url: &str) -> shoal_core::Result<Self> {
        let refuse = |why: String| {
            Error::new(
                ErrorKind::Io,
                Op::Download,
                url,
                format!("cannot hold {len} bytes in memory: {why}"),
            )
        };
        let n = isize::try_from(len).map_err(|_| refuse("too many for this machine".into()))?;
        // SAFETY: a NULL source asks CPython for uninitialized storage of
        // `n` bytes; the new reference is owned by `obj` at once.
        let obj = unsafe {
            let p = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), n);
            Bound::from_owned_ptr_or_err(py, p).map_err(|e| refuse(e.to_string()))?
        };
        // SAFETY: `obj` is a bytes object; its storage is `len` bytes
        // (plus CPython's trailing NUL) for as long as `obj` lives.
        let data = unsafe { pyo3::ffi::PyBytes_AsString(obj.as_ptr()) }.cast::<u8>();
        let data = NonNull::new(data).ok_or_else(|| refuse("no storage".into()))?;
        let obj = obj
            .cast_into::<PyBytes>()
            .map_err(|e| refuse(e.to_string()))?
            .unbind();
        Ok(FreshBytes { obj, data, len })
    }

    /// The filled object, now Python's.
    fn done(self) -> Py<PyBytes> {
        self.obj
    }
}

impl AsRef<[u8]> for FreshBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: see `new`; `len` bytes from `data` are the object's,
        // zeroed by `new`.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len) }
    }
}

impl AsMut<[u8]> for FreshBytes {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `as_ref`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) }
    }
}

/// The buffers pyarrow's reads land in (`cat_buffer`), reused.
///
/// Why: a parquet read asks for one range per row group (4.8 MB each in
/// bench/py_read_bench.py's files). As `bytes`, each is fresh memory from
/// the C allocator, mapped for the read and unmapped when freed, so every
/// page of it is a page fault: the 16 row groups a filter keeps took
/// 13,000-15,600 faults in the `read_table` call, against 910-950 for
/// pyarrow's own S3 filesystem, about 15 ms of CPU in a call of 130.
/// Taken from pyarrow's memory pool instead (`pyarrow.allocate_buffer`),
/// the filter's faults fell to 3,000, but reading all columns got slower:
/// its mimalloc backs them with huge pages, and the kernel's clearing of
/// those (`clear_page_erms`, half the samples of a slow run) took the
/// call's system time from 0.29 s to 0.42 s (12 rotated runs each).
/// Memory kept here is touched once, and pyarrow's pool is left to what
/// it decodes. The `read_table` call, 12 rotated fresh processes, S3
/// (MinIO): the filter 0.113 s here, 0.122 as `bytes`, pyarrow's S3
/// 0.120; all columns 0.340, 0.376 and 0.450.
static POOL: BufferPool = BufferPool::new(64 << 20, Duration::from_secs(5));

/// The owner of a buffer pyarrow reads: the base of the
/// `pyarrow.foreign_buffer` over its memory, so it lives as long as that
/// buffer (and its slices) do, and gives the memory back to [`POOL`] then.
#[pyclass(frozen, module = "shoal._shoal")]
struct Held {
    buf: Vec<u8>,
}

impl Held {
    /// The read's bytes as a `pyarrow.Buffer` over the pooled memory.
    fn wrap(py: Python<'_>, read: Pooled) -> PyResult<Py<PyAny>> {
        static FOREIGN: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let foreign = FOREIGN.get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("pyarrow")?.getattr("foreign_buffer")?.unbind())
        })?;
        let (buf, len) = read.into_parts();
        // The heap block does not move with the Vec, and `Held` never
        // changes or frees it while pyarrow's buffer holds it as its base.
        let address = buf.as_ptr() as usize;
        let held = Py::new(py, Held { buf })?;
        foreign.call1(py, (address, len, held))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        POOL.give(std::mem::take(&mut self.buf));
    }
}

/// Bytes waiting in the pool of `cat_buffer`'s buffers (tests).
#[pyfunction]
fn read_pool_idle_bytes() -> usize {
    POOL.idle_bytes()
}

/// `cat_ranges`: many ranges read at once by the engine
/// ([`read_ranges`]: concurrent, near ranges of one object joined), each
/// answered by its bytes or its exception, in the order asked.
fn cat_ranges_impl(
    s: &Session,
    urls: Vec<String>,
    starts: Vec<Option<i64>>,
    ends: Vec<Option<i64>>,
    versions: Option<Vec<Option<String>>>,
    hole: u64,
) -> impl Future<Output = PyResult<Vec<Py<PyAny>>>> + use<> {
    let stores = s.stores.clone();
    let run = Run::new(s.transfer_options(None, None));
    let policy = s.retry();
    async move {
        let n = urls.len();
        if starts.len() != n || ends.len() != n || versions.as_ref().is_some_and(|v| v.len() != n) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cat_ranges: {n} paths but {} starts and {} ends: give one of each per path",
                starts.len(),
                ends.len()
            )));
        }
        let mut versions = versions.unwrap_or_else(|| vec![None; n]).into_iter();
        let mut reads = Vec::with_capacity(n);
        for ((url, start), end) in urls.iter().zip(starts).zip(ends) {
            let loc = object(Op::Download, url).py()?;
            let pinned = match versions.next().flatten() {
                Some(v) => Some(parse_version(&loc, url, &v)?),
                None => None,
            };
            let store = stores.store(&loc).py()?;
            reads.push(RangeRead {
                store,
                loc,
                start,
                end,
                pinned,
            });
        }
        let got = read_ranges(reads, hole, &run, policy).await;
        Ok(Python::attach(|py| {
            got.into_iter()
                .zip(&urls)
                .map(|(r, url)| match r {
                    Ok(b) => PyBytes::new(py, &b).into_any().unbind(),
                    Err(e) => to_py(e.with_url(url)).into_value(py).into_any(),
                })
                .collect()
        }))
    }
}

/// An `ObjectInfo.version` string back as the store's token
/// ([`shoal_core::Scheme::parse_version`]), an error naming `url`.
fn parse_version(loc: &Location, url: &str, v: &str) -> PyResult<ObjectVersion> {
    (loc.scheme.parse_version(v)).map_err(|m| to_py(Error::invalid(Op::Download, url, m)))
}

blocking_and_async! {
    /// The object's bytes `[start, end)` (None = edge, negative = from the
    /// end), read with parallel ranged GETs; a whole object is checked
    /// against the store's checksum (CRC32C, CRC32, CRC64NVME, composite,
    /// MD5), a range by its length.
    /// With `version` (an `ObjectInfo.version`: GCS generation, S3 ETag),
    /// only that version is read: a ChangedError if the object was
    /// replaced since. With `version_id` (a GCS generation, an S3 version
    /// id), that stored version, current or not.
    #[pyo3(signature = (session, url, *, start=None, end=None, version=None, version_id=None))]
    fn cat / cat_async(url: String, start: Option<i64>, end: Option<i64>, version: Option<String>, version_id: Option<String>) -> Py<PyBytes> = cat_impl;
}

blocking_and_async! {
    /// As `cat`, the bytes in a `pyarrow.Buffer` (what pyarrow's reads
    /// through a Python file ask for with `read_buffer`) over memory shoal
    /// reuses, where each `bytes` of a big read is new memory. Needs
    /// pyarrow.
    #[pyo3(signature = (session, url, *, start=None, end=None, version=None, version_id=None))]
    fn cat_buffer / cat_buffer_async(url: String, start: Option<i64>, end: Option<i64>, version: Option<String>, version_id: Option<String>) -> Py<PyAny> = cat_buffer_impl;
}

blocking_and_async! {
    /// The bytes of many ranges `[start, end)` (the rules of `cat`), read
    /// at once, near ranges of one object joined when at most `hole` bytes
    /// apart; `versions` pins each to an `ObjectInfo.version`. A list in
    /// the order asked: each item the bytes, or the exception that range
    /// raised.
    #[pyo3(signature = (session, urls, starts, ends, *, versions=None, hole=0))]
    fn cat_ranges / cat_ranges_async(urls: Vec<String>, starts: Vec<Option<i64>>, ends: Vec<Option<i64>>, versions: Option<Vec<Option<String>>>, hole: u64) -> Vec<Py<PyAny>> = cat_ranges_impl;
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(cat, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(cat_async, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(cat_buffer, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(cat_buffer_async, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(read_pool_idle_bytes, m)?)?;
    m.add_class::<Held>()?;
    m.add_function(pyo3::wrap_pyfunction!(cat_ranges, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(cat_ranges_async, m)?)?;
    Ok(())
}
