//! One object copied by several Dask tasks
//! ([`shoal_transfer::ops::split_copy`]): the engine decides whether and how
//! to split, what a part is and when the upload may complete; Python
//! (python/shoal/dask.py) only places the part tasks and calls `finish`
//! or `abort`.
//!
//! A split copy travels between processes as a plain tuple (picklable,
//! nothing held open): `(src, version, size, crc32c, dst_bucket, dst_key,
//! upload_id, tasks)`, `version` as `("g", "123")` or `("e", "etag")`,
//! `tasks` a list of lists of `(part, start, end)`.

use pyo3::prelude::*;
use shoal_core::{MultipartUpload, ObjectVersion, Op, PartInfo, PutOptions};
use shoal_transfer::ops::split_copy::{self, PartRange, Started};
use shoal_transfer::ops::task_size;

use crate::errors::{IntoPyResult, to_py};
use crate::list::object;
use crate::runtime::block_on;
use crate::session::Session;

type Version = Option<(String, String)>;
type Task = Vec<(u32, u64, u64)>;
/// The tuple a split copy travels as (module doc).
type Wire = (String, Version, u64, u32, String, String, String, Vec<Task>);
/// A written part: `(part, etag, crc32c, size)`.
type Part = (u32, String, u32, u64);

fn to_wire(s: &Started) -> Wire {
    let version = s.version.as_ref().map(|v| match v {
        ObjectVersion::Generation(g) => ("g".to_owned(), g.to_string()),
        ObjectVersion::ETag(e) => ("e".to_owned(), e.clone()),
        ObjectVersion::VersionId(v) => ("v".to_owned(), v.clone()),
    });
    let tasks = s
        .tasks
        .iter()
        .map(|t| t.iter().map(|p| (p.number, p.start, p.end)).collect())
        .collect();
    (
        s.src.to_string(),
        version,
        s.size,
        s.crc32c,
        s.upload.bucket.clone(),
        s.upload.key.clone(),
        s.upload.upload_id.clone(),
        tasks,
    )
}

fn from_wire(w: Wire, dst_url: &str) -> PyResult<Started> {
    let (src, version, size, crc32c, bucket, key, upload_id, tasks) = w;
    let version = match version {
        None => None,
        Some((k, v)) if k == "g" => Some(ObjectVersion::Generation(v.parse().map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("generation {v:?} is not a number"))
        })?)),
        Some((k, v)) if k == "v" => Some(ObjectVersion::VersionId(v)),
        Some((_, v)) => Some(ObjectVersion::ETag(v)),
    };
    let dst = object(Op::Copy, dst_url).py()?;
    if dst.bucket != bucket || dst.key != key {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{dst_url} is not the destination of this split copy"
        )));
    }
    Ok(Started {
        src: object(Op::Copy, &src).py()?,
        dst,
        version,
        size,
        crc32c,
        upload: MultipartUpload {
            bucket,
            key,
            upload_id,
        },
        tasks: tasks
            .into_iter()
            .map(|t| {
                t.into_iter()
                    .map(|(number, start, end)| PartRange { number, start, end })
                    .collect()
            })
            .collect(),
    })
}

/// Decides whether `src` is copied to `dst` by several tasks: returns
/// `(wire, None)` with the upload started and the parts grouped into
/// tasks of at most `bytes_per_task` bytes, or `(None, why)` when it is
/// copied whole (it fits one task, or has no CRC32C to check parts
/// against). Parts are `part_size` bytes, by default the engine's for
/// that task size (`shoal_transfer::ops::task_size::part_size`).
#[pyfunction]
#[pyo3(signature = (session, src, dst, *, bytes_per_task, part_size=None))]
pub(crate) fn split_copy_begin(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    src: String,
    dst: String,
    bytes_per_task: u64,
    part_size: Option<u64>,
) -> PyResult<(Option<Wire>, Option<String>)> {
    let part_size = part_size.unwrap_or_else(|| task_size::part_size(bytes_per_task));
    let (s, d) = (object(Op::Copy, &src).py()?, object(Op::Copy, &dst).py()?);
    let (ss, ds) = (
        session.stores.store(&s).py()?,
        session.stores.store(&d).py()?,
    );
    block_on(py, async move {
        let r = split_copy::begin(
            &ss,
            &s,
            &ds,
            &d,
            part_size,
            bytes_per_task,
            &PutOptions::default(),
        )
        .await
        .map_err(to_py)?;
        Ok(match r {
            Ok(started) => (Some(to_wire(&started)), None),
            Err(why) => (None, Some(why)),
        })
    })
}

/// Copies task `task` of a split copy's parts (runs on a worker), up to
/// `workers` parts at once; returns the parts written.
#[pyfunction]
#[pyo3(signature = (session, wire, dst, task, *, workers=4))]
pub(crate) fn split_copy_parts(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    wire: Wire,
    dst: String,
    task: usize,
    workers: usize,
) -> PyResult<Vec<Part>> {
    let s = from_wire(wire, &dst)?;
    let (ss, ds) = (
        session.stores.store(&s.src).py()?,
        session.stores.store(&s.dst).py()?,
    );
    let parts = s.tasks.get(task).cloned().ok_or_else(|| {
        pyo3::exceptions::PyIndexError::new_err(format!("no task {task} in this split copy"))
    })?;
    block_on(py, async move {
        let written = split_copy::copy_parts(
            &ss,
            &s.src,
            s.version.as_ref(),
            &ds,
            &s.upload,
            &parts,
            workers,
        )
        .await
        .map_err(to_py)?;
        Ok(written
            .into_iter()
            .map(|p| (p.part_number, p.etag, p.crc32c, p.size))
            .collect())
    })
}

/// Completes a split copy from every task's parts (checked against the
/// plan and the source's CRC32C), or aborts it; returns the bytes copied.
#[pyfunction]
#[pyo3(signature = (session, wire, *, dst, parts))]
pub(crate) fn split_copy_finish(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    wire: Wire,
    dst: String,
    parts: Vec<Part>,
) -> PyResult<u64> {
    let s = from_wire(wire, &dst)?;
    let ds = session.stores.store(&s.dst).py()?;
    let parts = parts
        .into_iter()
        .map(|(part_number, etag, crc32c, size)| PartInfo {
            part_number,
            etag,
            crc32c,
            size,
        })
        .collect();
    block_on(py, async move {
        let meta = split_copy::finish(&ds, &s, parts).await.map_err(to_py)?;
        Ok(meta.size)
    })
}

/// Aborts a split copy: the upload ends and its parts are deleted.
#[pyfunction]
#[pyo3(signature = (session, wire, *, dst))]
pub(crate) fn split_copy_abort(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    wire: Wire,
    dst: String,
) -> PyResult<()> {
    let s = from_wire(wire, &dst)?;
    let ds = session.stores.store(&s.dst).py()?;
    block_on(py, async move {
        split_copy::abort(&ds, &s.upload)
            .await
            .map_err(|e| to_py(e.with_url(&dst)))
    })
}

/// Bytes one copy or sync task holds when the caller does not say: the
/// plan's `total` over the cluster's task `slots`, between a floor and a
/// ceiling (`shoal_transfer::ops::task_size::task_bytes`).
#[pyfunction]
#[pyo3(signature = (total, *, slots))]
pub(crate) fn task_bytes(total: u64, slots: usize) -> u64 {
    task_size::task_bytes(total, slots)
}

/// Which of a range's consecutive pieces `(bytes, keys)` start a task
/// when neighbours are joined within `max_bytes` and `max_keys`
/// (`shoal_transfer::ops::task_size::join`).
#[pyfunction]
#[pyo3(signature = (pieces, *, max_bytes, max_keys))]
pub(crate) fn join_pieces(pieces: Vec<(u64, u64)>, max_bytes: u64, max_keys: u64) -> Vec<usize> {
    task_size::join(&pieces, max_bytes, max_keys)
}
