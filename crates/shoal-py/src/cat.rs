//! `shoal.cat`: one object's bytes, or a range of them, as one Python
//! `bytes`.
//!
//! Read as a download to a file is, in parallel slices, each filling its
//! own part of one buffer, so one object's bytes are read once and copied
//! once. A range known without the object's size (fsspec's block reads)
//! is asked for at once, its answer standing in for the HEAD. Its own
//! module because it shares nothing with the file transfers but the slice
//! plan.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shoal_core::resume::resuming_stream;
use shoal_core::{ByteRange, Error, ErrorKind, Location, ObjectVersion, Op, Scheme};
use shoal_transfer::TransferOptions;
use shoal_transfer::plan::plan_slices;

use crate::errors::{IntoPyResult, to_py};
use crate::list::object;
use crate::runtime::blocking_and_async;
use crate::session::Session;

/// Resolves Python-style `[start, end)` (None = edge, negative = from the
/// end) against `size`.
fn resolve(start: Option<i64>, end: Option<i64>, size: u64) -> (u64, u64) {
    let at = |v: i64| {
        if v < 0 {
            size.saturating_sub(v.unsigned_abs())
        } else {
            (v as u64).min(size)
        }
    };
    let s = start.map_or(0, at);
    let e = end.map_or(size, at);
    (s, e.max(s))
}

/// `[start, end)` when both are known without the object's size (set, not
/// counted from the end) and hold at least one byte.
fn known_range(start: Option<i64>, end: Option<i64>) -> Option<(u64, u64)> {
    match (start, end) {
        (Some(a), Some(b)) if a >= 0 && b > a => Some((a as u64, b as u64)),
        _ => None,
    }
}

/// The object's metadata by HEAD, refused if it is no longer `pinned`.
async fn head_pinned(
    store: &Arc<dyn shoal_core::Store>,
    loc: &Location,
    url: &str,
    pinned: Option<&ObjectVersion>,
) -> PyResult<shoal_core::ObjectMeta> {
    let meta = store
        .head(&loc.bucket, &loc.key)
        .await
        .map_err(|e| to_py(e.with_url(url).with_op(Op::Download)))?;
    if let Some(want) = pinned
        && meta.version.as_ref() != Some(want)
    {
        let now = meta
            .version
            .map_or("no version".to_owned(), |v| v.to_string());
        return Err(to_py(
            Error::new(
                ErrorKind::Changed,
                Op::Download,
                url,
                format!("the object was replaced since it was opened ({want}, now {now})"),
            )
            .with_hint("open it again to read the new version"),
        ));
    }
    Ok(meta)
}

/// Reads `range` of the object into `buf` (its length), resuming after
/// broken connections, pinned to `version`; `first` is an already-open
/// body for exactly that range.
#[allow(clippy::too_many_arguments)]
async fn fill_slice(
    store: Arc<dyn shoal_core::Store>,
    loc: &Location,
    url: &str,
    range: ByteRange,
    version: Option<ObjectVersion>,
    first: Option<shoal_core::BoxByteStream>,
    policy: shoal_core::retry::RetryPolicy,
    buf: &mut [u8],
) -> shoal_core::Result<()> {
    let mut body = resuming_stream(
        store,
        &loc.bucket,
        &loc.key,
        url,
        range,
        version,
        first,
        policy,
    );
    let mut at = 0usize;
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        let n = chunk.len().min(buf.len() - at);
        buf[at..at + n].copy_from_slice(&chunk[..n]);
        at += chunk.len();
    }
    if at != buf.len() {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Download,
            "",
            format!("expected {} bytes, received {at}", buf.len()),
        ));
    }
    Ok(())
}

/// `cat`: the bytes of one object's range, read as a download to a file
/// would be, in parallel slices, each filling its own part of one buffer.
fn cat_impl(
    s: &Session,
    url: String,
    start: Option<i64>,
    end: Option<i64>,
    version: Option<String>,
) -> impl Future<Output = PyResult<Py<PyBytes>>> + use<> {
    let stores = s.stores.clone();
    let opts = s.transfer_options(None, None);
    let policy = s.retry();
    async move {
        let loc = object(Op::Download, &url).py()?;
        let pinned = version.map(|v| parse_version(&loc, &url, &v)).transpose()?;
        let store = stores.store(&loc).py()?;
        // A range known without the size (fsspec's block reads, `cat_file`
        // with start and end) is asked for at once: the first slice's
        // answer gives the size and version a HEAD would have, so a small
        // read is one request, not two.
        let first = match known_range(start, end) {
            Some((a, b)) => {
                let slice = slices_of(&opts, a, b)[0];
                get_first_slice(&store, &loc, &url, slice, pinned.as_ref()).await?
            }
            None => None,
        };
        let meta = match &first {
            Some((_, r)) => r.meta.clone(),
            None => head_pinned(&store, &loc, &url, pinned.as_ref()).await?,
        };
        let (a, b) = resolve(start, end, meta.size);
        let slices = match &first {
            // The first slice as asked for (cut at the object's end), then
            // the rest of the range.
            Some((s0, r)) => {
                let s1 = r.range.end.unwrap_or(meta.size).min(b);
                first_then_rest(&opts, *s0, s1, b)
            }
            None => slices_of(&opts, a, b),
        };
        let first_body = first.map(|(_, r)| r.body);
        let buf = read_slices(
            store,
            &loc,
            &url,
            &slices,
            (b - a) as usize,
            meta.version.clone(),
            first_body,
            policy,
        )
        .await?;
        if (a, b) == (0, meta.size) {
            check_whole_crc(&url, &buf, meta.crc32c)?;
        }
        Ok(Python::attach(|py| PyBytes::new(py, &buf).unbind()))
    }
}

/// `[from, to)` cut into slices as for a download to a file.
fn slices_of(opts: &TransferOptions, from: u64, to: u64) -> Vec<(u64, u64)> {
    plan_slices(to - from, opts.workers, opts.min_slice, None)
        .into_iter()
        .map(|(s0, s1)| (from + s0, from + s1))
        .collect()
}

/// `[s0, s1)` (the slice already asked for), then `[s1, b)` cut into
/// slices.
fn first_then_rest(opts: &TransferOptions, s0: u64, s1: u64, b: u64) -> Vec<(u64, u64)> {
    let mut v = vec![(s0, s1)];
    if s1 < b {
        v.extend(slices_of(opts, s1, b));
    }
    v
}

/// Asks for `slice` before the object's size is known; its answer also
/// gives the metadata. `None` when the range starts past the end (416):
/// the HEAD way then answers it with no bytes.
async fn get_first_slice(
    store: &Arc<dyn shoal_core::Store>,
    loc: &Location,
    url: &str,
    (s0, s1): (u64, u64),
    pinned: Option<&ObjectVersion>,
) -> PyResult<Option<(u64, shoal_core::GetResponse)>> {
    match store
        .get(&loc.bucket, &loc.key, ByteRange::new(s0, s1), pinned)
        .await
    {
        Ok(r) => Ok(Some((s0, r))),
        Err(e) if e.status() == Some(416) => Ok(None),
        Err(e) => Err(to_py(e.with_url(url).with_op(Op::Download))),
    }
}

/// Reads `slices` (together `len` bytes, in order) in parallel into one
/// buffer, each slice into its own part; `first_body` is the first
/// slice's already-open body.
#[allow(clippy::too_many_arguments)]
async fn read_slices(
    store: Arc<dyn shoal_core::Store>,
    loc: &Location,
    url: &str,
    slices: &[(u64, u64)],
    len: usize,
    version: Option<ObjectVersion>,
    mut first_body: Option<shoal_core::BoxByteStream>,
    policy: shoal_core::retry::RetryPolicy,
) -> PyResult<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut rest: &mut [u8] = &mut buf;
    let mut parts = Vec::with_capacity(slices.len());
    for &(s0, s1) in slices {
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut((s1 - s0) as usize);
        rest = tail;
        parts.push(fill_slice(
            store.clone(),
            loc,
            url,
            ByteRange::new(s0, s1),
            version.clone(),
            first_body.take(),
            policy,
            mine,
        ));
    }
    for r in futures::future::join_all(parts).await {
        r.map_err(|e| to_py(e.with_url(url)))?;
    }
    Ok(buf)
}

/// A whole object's bytes against the CRC32C its store gave, if any.
fn check_whole_crc(url: &str, buf: &[u8], want: Option<u32>) -> PyResult<()> {
    if let Some(want) = want {
        let got = crc32c::crc32c(buf);
        if got != want {
            return Err(to_py(Error::new(
                ErrorKind::Integrity,
                Op::Download,
                url,
                format!("CRC32C mismatch: store {want:08x}, received {got:08x}"),
            )));
        }
    }
    Ok(())
}

/// An `ObjectInfo.version` string back as the store's token.
fn parse_version(loc: &Location, url: &str, v: &str) -> PyResult<ObjectVersion> {
    match loc.scheme {
        Scheme::Gs => v.parse().map(ObjectVersion::Generation).map_err(|_| {
            to_py(Error::invalid(
                Op::Download,
                url,
                format!("version {v:?} is not a GCS generation (a number)"),
            ))
        }),
        _ => Ok(ObjectVersion::ETag(v.to_owned())),
    }
}

blocking_and_async! {
    /// The object's bytes `[start, end)` (None = edge, negative = from the
    /// end), read with parallel ranged GETs; whole objects are CRC32C-checked.
    /// With `version` (an `ObjectInfo.version`: GCS generation, S3 ETag),
    /// only that version is read: a ChangedError if the object was
    /// replaced since.
    #[pyo3(signature = (session, url, start=None, end=None, version=None))]
    fn cat / cat_async(url: String, start: Option<i64>, end: Option<i64>, version: Option<String>) -> Py<PyBytes> = cat_impl;
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(cat, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(cat_async, m)?)?;
    Ok(())
}
