//! Moving bytes: one big object (sliced download, multipart upload), many
//! files under one budget, and Python `bytes` to an object (the other way
//! is [`crate::cat`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;

use bytes::Bytes;
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use shoal_core::{Error, Location, Op, PutOptions, Scheme, Seen};
use shoal_transfer::Run;
use shoal_transfer::ops::Pairs;
use shoal_transfer::ops::upload::upload_file_with;

use crate::errors::{IntoPyResult, exception, to_py};
use crate::list::object;
use crate::runtime::{blocking_and_async, within};
use crate::session::Session;

/// Where a copy of the one object or file `src` lands when `dst` is a
/// folder: a cloud URL ending in `/` or naming only a bucket, a local path
/// ending in `/` or an existing folder. As with `shoal cp`, the copy goes
/// inside it under the source's name (through `tree::destination`, the one
/// key → path rule); otherwise `dst` is the destination itself. A source
/// naming a bucket or a folder is refused: it is not one object.
pub(crate) fn single_destination(
    op: Op,
    src: &Location,
    dst: Location,
) -> shoal_core::Result<Location> {
    let src_url = src.to_string();
    let name = src.basename();
    if name.is_empty() || (!src.is_local() && src.is_prefix_like()) {
        return Err(Error::invalid(
            op,
            &src_url,
            "names a bucket or a folder, not an object",
        )
        .with_hint("to copy everything below it use shoal.dask.copy, or fsspec's copy/get with recursive=True"));
    }
    let folder = if dst.is_local() {
        dst.key.ends_with('/') || std::path::Path::new(&dst.key).is_dir()
    } else {
        dst.is_prefix_like()
    };
    if !folder {
        return Ok(dst);
    }
    shoal_transfer::ops::destination(&dst, name, &src_url)
}

/// A local path as a location (never parsed as a URL: a file may be named
/// `a://b`).
fn local(path: &std::path::Path) -> Location {
    Location {
        scheme: Scheme::File,
        bucket: String::new(),
        key: path.to_string_lossy().into_owned(),
        local_root: None,
        store: None,
    }
}

/// What an upload stores besides the bytes (put, upload, copy_many): the
/// keywords of the CLI's `--content-type`, `--cache-control`,
/// `--content-disposition`, `--metadata` and `--storage-class`, checked by
/// the same rules (`shoal_transfer::ops::metadata`). A type left unset is
/// guessed from the name by the engine, as the CLI does.
#[derive(Debug, Default)]
pub(crate) struct Stored {
    pub(crate) content_type: Option<String>,
    pub(crate) content_encoding: Option<String>,
    pub(crate) cache_control: Option<String>,
    pub(crate) content_disposition: Option<String>,
    pub(crate) metadata: Option<BTreeMap<String, String>>,
    pub(crate) storage_class: Option<String>,
}

impl Stored {
    /// The write's `PutOptions` for `dst`; a value a store would refuse
    /// (or a header could not carry) is an InvalidInputError (a
    /// ValueError) naming it.
    pub(crate) fn put_options(
        self,
        op: Op,
        dst: &Location,
        if_not_exists: bool,
    ) -> shoal_core::Result<PutOptions> {
        use shoal_transfer::ops::metadata::{
            check_storage_class, header_value, metadata_entry, storage_class,
        };
        let url = dst.to_string();
        let bad = |what: &str, why: String| Error::invalid(op, &url, format!("{what}: {why}"));
        for (what, v) in [
            ("content_type", &self.content_type),
            ("content_encoding", &self.content_encoding),
            ("cache_control", &self.cache_control),
            ("content_disposition", &self.content_disposition),
        ] {
            if let Some(v) = v {
                header_value(v).map_err(|e| bad(what, e))?;
            }
        }
        let metadata = self.metadata.unwrap_or_default();
        for (k, v) in &metadata {
            metadata_entry(k, v).map_err(|e| bad("metadata", e))?;
        }
        let storage_class = match self.storage_class {
            Some(c) => {
                let c = storage_class(&c).map_err(|e| bad("storage_class", e))?;
                check_storage_class(&c, dst.scheme).map_err(|e| bad("storage_class", e))?;
                Some(c)
            }
            None => None,
        };
        Ok(PutOptions {
            content_type: self.content_type,
            content_encoding: self.content_encoding,
            cache_control: self.cache_control,
            content_disposition: self.content_disposition,
            metadata,
            storage_class,
            if_not_exists,
            ..PutOptions::default()
        })
    }
}

/// Checks a write's keywords for `url` as the write will (an
/// InvalidInputError naming the bad value), writing nothing: fsspec's
/// `open(..., "wb")` refuses them when the file is opened, not when it is
/// closed with everything written.
#[pyfunction]
#[pyo3(signature = (url, *, content_type=None, content_encoding=None, cache_control=None, content_disposition=None, metadata=None, storage_class=None))]
pub(crate) fn check_write(
    url: &str,
    content_type: Option<String>,
    content_encoding: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    storage_class: Option<String>,
) -> PyResult<()> {
    let loc = object(Op::Upload, url).py()?;
    let stored = Stored {
        content_type,
        content_encoding,
        cache_control,
        content_disposition,
        metadata,
        storage_class,
    };
    stored.put_options(Op::Upload, &loc, false).py().map(drop)
}

/// The type a write stores for an object named `name` when none is given
/// (`index.html` → `text/html`, else `application/octet-stream`).
#[pyfunction]
pub(crate) fn guess_type(name: &str) -> String {
    shoal_transfer::ops::metadata::guess(name)
}

/// What a finished transfer did.
#[pyclass(frozen, get_all, module = "shoal._shoal")]
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// Bytes moved.
    bytes: u64,
    /// Parallel requests used (slices or parts).
    pieces: usize,
    /// How the result was checked: `crc32c`, `md5` or `size only`.
    verified: String,
    /// CRC32C of the bytes, 8 hex digits.
    crc32c: String,
}

impl From<shoal_transfer::Report> for Report {
    fn from(r: shoal_transfer::Report) -> Self {
        Report {
            bytes: r.bytes,
            pieces: r.pieces,
            verified: r.verified.to_string(),
            crc32c: format!("{:08x}", r.crc32c),
        }
    }
}

#[pymethods]
impl Report {
    fn __repr__(&self) -> String {
        format!(
            "Report(bytes={}, pieces={}, verified={:?})",
            self.bytes, self.pieces, self.verified
        )
    }
}

#[allow(clippy::too_many_arguments)] // the Python signature
fn download_impl(
    s: &Session,
    url: String,
    filename: PathBuf,
    workers: Option<usize>,
    chunk_size: Option<u64>,
    slices: Option<usize>,
    deadline: Option<f64>,
) -> impl Future<Output = PyResult<Report>> + use<> {
    let stores = s.stores.clone();
    let mut opts = s.transfer_options(workers, chunk_size);
    opts.slices = slices;
    let run = Run::new(opts);
    let policy = s.retry();
    within(deadline, async move {
        let loc = object(Op::Download, &url).py()?;
        let dst = single_destination(Op::Download, &loc, local(&filename)).py()?;
        let filename = PathBuf::from(dst.key);
        let store = stores.store(&loc).py()?;
        let r =
            shoal_transfer::ops::download::download_to_file(store, &loc, &filename, &run, &policy)
                .await
                .py()?;
        Ok(r.into())
    })
}

blocking_and_async! {
    /// Downloads one object to a file: parallel ranged GETs of `chunk_size`
    /// or more (default 32 MiB) written in place, CRC32C-verified, renamed
    /// into place only when complete. A `filename` ending in `/` or naming
    /// a folder gets the object's name inside it. Past `deadline` seconds
    /// the download is cancelled and `TimeoutError` raised.
    #[pyo3(signature = (session, url, filename, *, workers=None, chunk_size=None, slices=None, deadline=None))]
    fn download / download_async(url: String, filename: PathBuf, workers: Option<usize>, chunk_size: Option<u64>, slices: Option<usize>, deadline: Option<f64>) -> Report = download_impl;
}

#[allow(clippy::too_many_arguments)] // the Python signature
fn upload_impl(
    s: &Session,
    filename: PathBuf,
    url: String,
    workers: Option<usize>,
    chunk_size: Option<u64>,
    content_type: Option<String>,
    if_not_exists: bool,
    deadline: Option<f64>,
    content_encoding: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    storage_class: Option<String>,
) -> impl Future<Output = PyResult<Report>> + use<> {
    let stores = s.stores.clone();
    let run = Run::new(s.transfer_options(workers, chunk_size));
    let stored = Stored {
        content_type,
        content_encoding,
        cache_control,
        content_disposition,
        metadata,
        storage_class,
    };
    within(deadline, async move {
        let src = local(&filename);
        let loc = Location::parse(&url).py()?;
        if loc.is_local() {
            return Err(to_py(Error::invalid(
                Op::Upload,
                &url,
                "is a local path; this call takes gs:// or s3:// URLs",
            )));
        }
        let loc = single_destination(Op::Upload, &src, loc).py()?;
        let put = stored.put_options(Op::Upload, &loc, if_not_exists).py()?;
        let store = stores.store(&loc).py()?;
        let r = upload_file_with(store, &filename, &loc, &put, &run)
            .await
            .py()?;
        Ok(r.into())
    })
}

blocking_and_async! {
    /// Uploads one file: one PUT, or a multipart upload (S3) / parallel
    /// composite upload (GCS) in parts of `chunk_size` (default 16 MiB).
    /// A `url` ending in `/` (or naming a bucket) gets the file's name
    /// inside it. `content_type` (default: guessed from the file's name),
    /// `content_encoding`, `cache_control`, `content_disposition`,
    /// `metadata` (str → str) and `storage_class` are stored with it; with `if_not_exists`, a
    /// PreconditionError if the object exists (checked by the server when
    /// the object is written, never replaced). Past `deadline` seconds the
    /// upload is cancelled (and aborted) and `TimeoutError` raised.
    #[pyo3(signature = (session, filename, url, *, workers=None, chunk_size=None, content_type=None, if_not_exists=false, deadline=None, content_encoding=None, cache_control=None, content_disposition=None, metadata=None, storage_class=None))]
    fn upload / upload_async(filename: PathBuf, url: String, workers: Option<usize>, chunk_size: Option<u64>, content_type: Option<String>, if_not_exists: bool, deadline: Option<f64>, content_encoding: Option<String>, cache_control: Option<String>, content_disposition: Option<String>, metadata: Option<BTreeMap<String, String>>, storage_class: Option<String>) -> Report = upload_impl;
}

/// Per pair: bytes copied (int) or the exception copying it raised.
type PerItem = Vec<Py<PyAny>>;

#[allow(clippy::too_many_arguments)] // the Python signature
fn copy_many_impl(
    s: &Session,
    pairs: Vec<(String, String)>,
    workers: Option<usize>,
    chunk_size: Option<u64>,
    content_type: Option<String>,
    if_not_exists: bool,
    deadline: Option<f64>,
    local_root: Option<PathBuf>,
) -> impl Future<Output = PyResult<PerItem>> + use<> {
    pairs_impl(
        s,
        pairs,
        workers,
        chunk_size,
        content_type,
        if_not_exists,
        deadline,
        local_root,
        false,
    )
}

fn move_many_impl(
    s: &Session,
    pairs: Vec<(String, String)>,
    workers: Option<usize>,
    chunk_size: Option<u64>,
    deadline: Option<f64>,
    local_root: Option<PathBuf>,
) -> impl Future<Output = PyResult<PerItem>> + use<> {
    pairs_impl(
        s, pairs, workers, chunk_size, None, false, deadline, local_root, true,
    )
}

/// `copy_many` and `move_many`: the pairs are checked as one plan first
/// (the engine's [`Pairs`]: no pair reads, writes or deletes what another
/// writes or deletes), then each runs as the CLI's batch runs it.
/// Local destinations under `local_root` get their folders made and
/// checked without following a link inside it, as `cp -r` does.
#[allow(clippy::too_many_arguments)] // the Python signatures
fn pairs_impl(
    s: &Session,
    pairs: Vec<(String, String)>,
    workers: Option<usize>,
    chunk_size: Option<u64>,
    content_type: Option<String>,
    if_not_exists: bool,
    deadline: Option<f64>,
    local_root: Option<PathBuf>,
    moving: bool,
) -> impl Future<Output = PyResult<PerItem>> + use<> {
    let stores = s.stores.clone();
    let run = Run::new(s.transfer_options(workers, chunk_size));
    let policy = s.retry();
    let put = (content_type.is_some() || if_not_exists).then(|| PutOptions {
        content_type,
        if_not_exists,
        ..PutOptions::default()
    });
    within(deadline, async move {
        // Parse everything first: the stores for the schemes present are
        // built once (a credential problem fails the call, not each item).
        let mut parsed = parse_pairs(&pairs);
        if let Some(root) = &local_root {
            under_root(&mut parsed, root).py()?;
        }
        let pairs = Pairs::check(parsed, moving).py()?;
        let locs: Vec<&Location> = pairs.remote().collect();
        let store_for = stores.store_for(&locs).py()?;
        let results = pairs.run(store_for, run, policy, put).await;
        Python::attach(|py| {
            results
                .into_iter()
                .map(|r| match r {
                    Ok(Seen::Item(n)) => Ok(n.into_pyobject(py)?.into_any().unbind()),
                    // Not copied, and no failure: nothing to raise.
                    Ok(Seen::Skipped(_)) => Ok(py.None()),
                    Err(e) => exception(py, &e),
                })
                .collect()
        })
    })
}

/// Marks the local destinations below `root` so their folders are made
/// and checked from `root` down without following a link
/// (`Location::local_root`); a local destination outside it is refused.
fn under_root(
    parsed: &mut [shoal_core::Result<(Location, Location)>],
    root: &std::path::Path,
) -> shoal_core::Result<()> {
    let root = root.to_string_lossy().trim_end_matches('/').to_owned();
    for (_, dst) in parsed.iter_mut().flatten() {
        if !dst.is_local() {
            continue;
        }
        let inside = dst.key.len() > root.len()
            && dst.key.starts_with(&root)
            && dst.key.as_bytes()[root.len()] == b'/';
        if !inside {
            return Err(Error::invalid(
                Op::Copy,
                dst.key.clone(),
                format!("not below the destination folder {root}; nothing was copied"),
            ));
        }
        dst.local_root = Some(root.len());
    }
    Ok(())
}

/// Each `(source, destination)` pair as locations: a remote source must
/// name one object; a destination folder or bucket gets the source's name.
fn parse_pairs(pairs: &[(String, String)]) -> Vec<shoal_core::Result<(Location, Location)>> {
    pairs
        .iter()
        .map(|(a, b)| {
            let src = Location::parse(a)?;
            if !src.is_local() {
                object(Op::Copy, a)?;
            }
            let dst = single_destination(Op::Copy, &src, Location::parse(b)?)?;
            Ok((src, dst))
        })
        .collect()
}

blocking_and_async! {
    /// Copies `(source, destination)` pairs (any mix of local paths, gs://
    /// and s3:// URLs), with at most `workers` requests in flight across
    /// all of them; big files are sliced within the same budget. A
    /// destination ending in `/` (or naming a bucket, or an existing local
    /// folder) gets the source's name inside it. One entry per pair, in
    /// order: bytes copied, or the exception (never raised). For uploads
    /// of local files, `content_type` is stored and `if_not_exists` makes
    /// an existing object a PreconditionError (checked by the server as
    /// the object is written). Past `deadline` seconds, everything still
    /// running is cancelled and `TimeoutError` raised.
    /// The pairs are one plan: if one pair reads, writes or deletes what
    /// another writes, `ValueError` naming both is raised and nothing is
    /// copied. Local destinations below `local_root` get their folders
    /// made without following a link inside it.
    #[pyo3(signature = (session, pairs, *, workers=None, chunk_size=None, content_type=None, if_not_exists=false, deadline=None, local_root=None))]
    fn copy_many / copy_many_async(pairs: Vec<(String, String)>, workers: Option<usize>, chunk_size: Option<u64>, content_type: Option<String>, if_not_exists: bool, deadline: Option<f64>, local_root: Option<PathBuf>) -> PerItem = copy_many_impl;
}

blocking_and_async! {
    /// Moves `(source, destination)` pairs as `copy_many` copies them,
    /// each source deleted only once its copy is in place and verified,
    /// and only at the version that was copied (a version written
    /// meanwhile is kept: `ChangedError` for that pair). One plan: a pair
    /// that reads or writes what another moves away raises `ValueError`
    /// and nothing is moved. One entry per pair: bytes moved, or the
    /// exception (never raised).
    #[pyo3(signature = (session, pairs, *, workers=None, chunk_size=None, deadline=None, local_root=None))]
    fn move_many / move_many_async(pairs: Vec<(String, String)>, workers: Option<usize>, chunk_size: Option<u64>, deadline: Option<f64>, local_root: Option<PathBuf>) -> PerItem = move_many_impl;
}

#[allow(clippy::too_many_arguments)] // the Python signature
fn put_impl(
    s: &Session,
    url: String,
    data: PyBackedBytes,
    content_type: Option<String>,
    if_not_exists: bool,
    content_encoding: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    storage_class: Option<String>,
) -> impl Future<Output = PyResult<u64>> + use<> {
    let stores = s.stores.clone();
    let run = Run::new(s.transfer_options(None, None));
    let stored = Stored {
        content_type,
        content_encoding,
        cache_control,
        content_disposition,
        metadata,
        storage_class,
    };
    async move {
        let loc = object(Op::Upload, &url).py()?;
        let put = stored.put_options(Op::Upload, &loc, if_not_exists).py()?;
        let store = stores.store(&loc).py()?;
        let len = data.len() as u64;
        let body = futures::stream::once(async move { Ok(Bytes::from_owner(data)) }).boxed();
        shoal_transfer::ops::stream::upload_stream(store, body, &loc, &put, &run)
            .await
            .py()?;
        Ok(len)
    }
}

blocking_and_async! {
    /// Writes `data` as the object (multipart, or one GCS resumable
    /// session, when it is big). With `if_not_exists`, a PreconditionError
    /// if the object exists. `content_encoding` is stored as the object's
    /// `Content-Encoding` (`"gzip"`: `data` is gzip and its content the
    /// decoded bytes); `content_type` (default: guessed from the key),
    /// `cache_control`, `content_disposition`, `metadata` and
    /// `storage_class` as `upload` stores them.
    #[pyo3(signature = (session, url, data, *, content_type=None, if_not_exists=false, content_encoding=None, cache_control=None, content_disposition=None, metadata=None, storage_class=None))]
    fn put / put_async(url: String, data: PyBackedBytes, content_type: Option<String>, if_not_exists: bool, content_encoding: Option<String>, cache_control: Option<String>, content_disposition: Option<String>, metadata: Option<BTreeMap<String, String>>, storage_class: Option<String>) -> u64 = put_impl;
}

/// Where the key-relative name `rel` of `src_url`, named by the caller,
/// lands under the folder `dst` (shoal's one key → path mapping): unsafe
/// names for local paths, and folder markers (`dir/`, no file to become),
/// are an InvalidInputError.
#[pyfunction]
#[pyo3(signature = (dst, *, rel, src_url))]
pub(crate) fn destination(dst: &str, rel: &str, src_url: &str) -> PyResult<String> {
    let dst = Location::parse(dst).py()?;
    Ok(shoal_transfer::ops::destination(&dst, rel, src_url)
        .py()?
        .to_string())
}

/// [`destination`] for an entry of a listed tree: None for a folder
/// marker, which a tree copy skips (an outcome, not an error).
#[pyfunction]
#[pyo3(signature = (dst, *, rel, src_url))]
pub(crate) fn place(dst: &str, rel: &str, src_url: &str) -> PyResult<Option<String>> {
    let dst = Location::parse(dst).py()?;
    let placed = shoal_transfer::ops::place(&dst, rel, src_url).py()?;
    Ok(placed.item().map(|l| l.to_string()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use pyo3::wrap_pyfunction;
    m.add_class::<Report>()?;
    for f in [
        wrap_pyfunction!(destination, m)?,
        wrap_pyfunction!(place, m)?,
        wrap_pyfunction!(guess_type, m)?,
        wrap_pyfunction!(check_write, m)?,
        wrap_pyfunction!(download, m)?,
        wrap_pyfunction!(download_async, m)?,
        wrap_pyfunction!(upload, m)?,
        wrap_pyfunction!(upload_async, m)?,
        wrap_pyfunction!(copy_many, m)?,
        wrap_pyfunction!(copy_many_async, m)?,
        wrap_pyfunction!(move_many, m)?,
        wrap_pyfunction!(move_many_async, m)?,
        wrap_pyfunction!(put, m)?,
        wrap_pyfunction!(put_async, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
