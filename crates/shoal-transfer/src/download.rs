//! Downloading one object: sliced, parallel, `pwrite` into place, verified.
//!
//! Why a temporary file sized up front and `pwrite`: each slice writes
//! straight to its final offset (`slice_write.rs`), so nothing is merged
//! afterwards and no slice is held in memory. The file is named `.NAME.shoal-tmp-…` beside the destination, so
//! the final `rename` is atomic and a crash leaves a hidden temporary, never
//! a wrong file under the real name.
//!
//! Every slice is pinned to the generation (GCS) or ETag (S3) seen by the
//! first request (a listing, a HEAD, or the GET of the first slice), so an
//! object replaced mid-download fails instead of being stitched from two
//! versions. Each slice stream resumes from its last byte after a broken
//! connection ([`shoal_core::resume`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use shoal_core::checksum::Running;
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{ByteRange, Error, ErrorKind, Location, ObjectMeta, Op, Result, Store};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::partial::Partial;
use crate::plan::plan_slices;
use crate::verify::{Expected, Received};
use crate::{Report, Run};

/// Checks, before any byte is fetched, that `dest` can be a file: its
/// nearest existing ancestor is a folder. Folders missing below it are
/// made when the file is written (as gcloud, aws and s5cmd do, and as
/// `cp -r` does); a file where a folder must be is refused.
pub fn check_destination(dest: &Path) -> Result<()> {
    let mut at = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    loop {
        match std::fs::metadata(&at) {
            Ok(md) if md.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(Error::invalid(
                    Op::Write,
                    at.display().to_string(),
                    "is a file, not a folder: the destination cannot be below it",
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match at.parent() {
                Some(p) if !p.as_os_str().is_empty() => at = p.to_path_buf(),
                _ => return Ok(()),
            },
            Err(e) => return Err(Error::io(Op::Write, dest.display().to_string(), e)),
        }
    }
}

/// Downloads `src` into the file `dest`, replacing it only once verified.
///
/// The first request is a GET of the whole object, not a HEAD: its headers
/// say all a HEAD would (size, generation or ETag, checksums), and its body
/// is the whole object when that is one slice, or the first slice of a
/// bigger one (cut there; the other slices are ranged GETs pinned to the
/// version it saw). A batch of small files named without sizes costs one
/// request each instead of two. Only when an earlier run left slices to
/// resume does a HEAD come first, so no finished slice is fetched again.
pub async fn download_to_file(
    store: Arc<dyn Store>,
    src: &Location,
    dest: &Path,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    check_destination(dest)?;
    let url = src.to_string();
    if run.opts.resume && crate::partial::pending(dest) {
        run.budgets.rates.request().await;
        let meta = (store.head(&src.bucket, &src.key))
            .await
            .map_err(|e| e.with_url(&url).with_op(Op::Download))?;
        return download_known(store, src, &meta, dest, run, policy).await;
    }
    // Until the size is known this is one cheap request; if it turns out
    // to be the first slice of many, it keeps that slot rather than wait,
    // with its connection open, for another.
    let slot = run.for_transfer(Some(u64::MAX)).budgets.permit().await;
    let (meta, first) = First::open(&store, src, None, slot).await?;
    download_planned(store, src, &meta, dest, run, policy, Some(first)).await
}

/// An open GET of the whole object, from byte 0, and the request slot it
/// holds: the first slice's body.
struct First {
    body: shoal_core::BoxByteStream,
    slot: crate::Slot,
}

impl First {
    /// GETs the whole object (pinned to `version` when given); its headers
    /// carry what a HEAD would, checksums included.
    async fn open(
        store: &Arc<dyn Store>,
        src: &Location,
        version: Option<&shoal_core::ObjectVersion>,
        slot: crate::Slot,
    ) -> Result<(ObjectMeta, First)> {
        let opened = (store.get(&src.bucket, &src.key, ByteRange::from(0), version))
            .await
            .map_err(|e| e.with_url(src.to_string()).with_op(Op::Download))?;
        let first = First {
            body: opened.body,
            slot,
        };
        Ok((opened.meta, first))
    }
}

/// Like [`download_to_file`] when the object's metadata is already known
/// (from a listing), saving a HEAD.
///
/// An S3 listing has no checksum, only the ETag (an MD5 for single-part
/// objects, which would cost a second pass over the file). So when the
/// listing gave no CRC, the first slice is read by a GET of the whole
/// object, whose headers carry the stored CRC32C, CRC32 or CRC64NVME: the
/// same one request, now verifiable as the bytes arrive (for an object of
/// several slices its connection is closed after the first slice).
pub async fn download_known(
    store: Arc<dyn Store>,
    src: &Location,
    meta: &ObjectMeta,
    dest: &Path,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    if crate::verify::knows_crc(meta)
        || meta.size == 0
        || (run.opts.resume && crate::partial::pending(dest))
    {
        return download_planned(store, src, meta, dest, run, policy, None).await;
    }
    let slot = run.budgets.permit().await;
    let (got, first) = First::open(&store, src, meta.version.as_ref(), slot).await?;
    if got.size != meta.size {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Download,
            src.to_string(),
            format!(
                "the object has {} bytes, its listing said {}; nothing was written",
                got.size, meta.size
            ),
        )
        .with_hint("the object changed while being copied; run the command again"));
    }
    let meta = ObjectMeta {
        checksums: meta.checksums.with_crcs_from(&got.checksums),
        // An S3 listing has no metadata; the GET's headers do.
        recorded: match (meta.knows_recorded_time(), got.recorded_time()) {
            (false, Some(t)) => shoal_core::file_time::Recorded::At(t),
            _ => meta.recorded,
        },
        ..meta.clone()
    };
    download_planned(store, src, &meta, dest, run, policy, Some(first)).await
}

/// Slices `meta.size`, fetches the slices not already on disk (the first
/// from `first` when given) and renames the verified file into place.
async fn download_planned(
    store: Arc<dyn Store>,
    src: &Location,
    meta: &ObjectMeta,
    dest: &Path,
    run: &Run,
    policy: &RetryPolicy,
    first: Option<First>,
) -> Result<Report> {
    let url = src.to_string();
    let dest_s = dest.display().to_string();
    let expected = Expected::learn(&store, src, meta, Op::Download, &run.budgets.rates).await?;
    let slices = plan_slices(
        meta.size,
        run.opts.workers,
        run.opts.min_slice,
        run.opts.slices,
    );
    let work = Working::open(dest, &url, meta, &slices, run.opts.resume).await?;
    // More slices than workers (`--slices 64 --workers 8`): at most
    // `workers` requests at once, unless a batch already shares a limiter.
    let mut run = run.clone();
    if run.budgets.limiter.is_none() && slices.len() > run.opts.workers {
        run.budgets.limiter = Some(Arc::new(tokio::sync::Semaphore::new(
            run.opts.workers.max(1),
        )));
    }
    let job_posix = run.opts.preserve_posix;
    let job = SliceJob {
        store,
        src: src.clone(),
        url: url.clone(),
        dest: dest_s.clone(),
        version: meta.version.clone(),
        policy: *policy,
        run: run.clone(),
        file: Arc::new(crate::slice_write::SliceFile::new(work.file.clone())),
        partial: work.partial.clone(),
    };
    let resumed = work.partial.as_ref().map_or(0, |p| p.reused(&slices).1);
    let fetched = fetch_slices(&job, &expected, &slices, first).await;
    drop(job);
    let (got, fetched) = match fetched {
        Ok(r) => r,
        Err(e) => return Err(work.failed(e)),
    };
    let file = Arc::try_unwrap(work.file)
        .map_err(|_| Error::new(ErrorKind::Io, Op::Write, &dest_s, "file still shared"))?;
    // Waiting for the disk is blocking work (small files stay inline, see
    // `file_io`).
    let file = crate::file_io(meta.size, move || file.sync_data().map(|()| file))
        .await
        .map_err(|e| Error::new(ErrorKind::Io, Op::Write, &dest_s, e.to_string()))?
        .map_err(|e| Error::io(Op::Write, &dest_s, e))?;
    let got = Received::combine(&got);
    let crc = got.crc32c;
    let tail = "; nothing was written";
    let checked = expected.check_file(got, &work.tmp, &url, Op::Download, tail);
    let verified = match checked.await {
        Ok(v) => v,
        Err(e) => return Err(failed(e, work.partial)),
    };
    keep_time(&file, meta, &dest_s);
    if job_posix {
        crate::metadata::give_posix(&file, meta, &dest_s);
    }
    persist(
        work.tmp,
        file,
        work.guard,
        work.partial,
        dest,
        run.opts.no_clobber,
    )?;
    Ok(Report {
        resumed,
        bytes: meta.size,
        pieces: fetched,
        verified,
        crc32c: crc,
        source_version: meta.version.clone(),
    })
}

/// Gives the downloaded file, before it takes its name, the time the
/// object recorded for it at upload, else the object's own update time
/// ([`shoal_core::file_time`]), so a sync back finds it unchanged. A file
/// system that refuses times keeps the bytes, said in the log.
fn keep_time(file: &File, meta: &ObjectMeta, dest: &str) {
    let ns = meta.recorded_time().map(|t| t.ns).or(meta.updated_ns);
    let Some(t) = ns.and_then(crate::metadata::ns_system_time) else {
        return;
    };
    if let Err(e) = file.set_modified(t) {
        tracing::warn!(file = dest, error = %e, "the object's time could not be given to the file");
    }
}

/// The file a download writes into: a sparse temporary one, or for
/// several slices the resumable data file of [`Partial`].
struct Working {
    file: Arc<File>,
    tmp: PathBuf,
    guard: TempGuard,
    partial: Option<Arc<Partial>>,
}

impl Working {
    async fn open(
        dest: &Path,
        url: &str,
        meta: &ObjectMeta,
        slices: &[(u64, u64)],
        resume: bool,
    ) -> Result<Working> {
        let dest_s = dest.display().to_string();
        if slices.len() == 1 {
            let (tmp, file) = shoal_core::workfile::create_beside(dest, "shoal-tmp")
                .map_err(|e| Error::io(Op::Write, &dest_s, e))?;
            let guard = TempGuard(Some((
                tmp.clone(),
                file.try_clone()
                    .map_err(|e| Error::io(Op::Write, &dest_s, e))?,
            )));
            shoal_core::workfile::preallocate(&file, meta.size)
                .map_err(|e| Error::io(Op::Write, &dest_s, e))?;
            let (file, partial) = (Arc::new(file), None);
            return Ok(Working {
                file,
                tmp,
                guard,
                partial,
            });
        }
        // More than one slice: keep what an interruption leaves, for the
        // next run. Off the async threads: a resume re-reads and checks
        // every slice an earlier run recorded, gigabytes maybe.
        let (dest_o, url_o, version, plan) = (
            dest.to_path_buf(),
            url.to_owned(),
            meta.version.clone(),
            slices.to_vec(),
        );
        let size = meta.size;
        let (p, file) = tokio::task::spawn_blocking(move || {
            Partial::open(&dest_o, &url_o, size, version.as_ref(), &plan, resume)
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Io, Op::Write, &dest_s, e.to_string()))??;
        Ok(Working {
            file: Arc::new(file),
            tmp: p.data_path.clone(),
            guard: TempGuard(None),
            partial: Some(Arc::new(p)),
        })
    }

    /// `e` after what this download kept for a rerun was dealt with.
    fn failed(self, e: Error) -> Error {
        drop(self.file);
        failed(e, self.partial)
    }
}

/// `e`, after the slices kept for a rerun were dropped when they are no
/// use to one (a checksum failed, none finished) or named in its hint.
fn failed(e: Error, partial: Option<Arc<Partial>>) -> Error {
    let Some(p) = partial.and_then(|p| Arc::try_unwrap(p).ok()) else {
        return e;
    };
    if e.kind() == ErrorKind::Integrity {
        p.discard();
        return e;
    }
    // Nothing to resume from: no slices kept, or no state file to find
    // them by (a file not ours had its name).
    if p.done.iter().all(Option::is_none) || !p.keeps_state() {
        p.discard();
        return e;
    }
    e.with_hint(format!(
        "finished slices are kept in {}; run the same command again to fetch only the rest",
        p.data_path.display()
    ))
}

/// Renames the verified working file into place: the file this download
/// wrote and verified, or nothing.
fn persist(
    tmp: PathBuf,
    file: File,
    guard: TempGuard,
    partial: Option<Arc<Partial>>,
    dest: &Path,
    no_clobber: bool,
) -> Result<()> {
    let persisted = if no_clobber {
        shoal_core::workfile::persist_new(&tmp, &file, dest)
    } else {
        shoal_core::workfile::persist(&tmp, &file, dest)
    };
    if let Err(e) = persisted {
        let e = shoal_core::workfile::persist_error(Op::Download, &dest.display().to_string(), e);
        // Refused because the destination exists: the bytes are not for
        // a rerun either.
        if e.kind() == ErrorKind::Precondition
            && let Some(p) = partial.and_then(|p| Arc::try_unwrap(p).ok())
        {
            p.discard();
        }
        return Err(e);
    }
    drop(file);
    guard.disarm();
    match partial {
        Some(p) => {
            if let Ok(p) = Arc::try_unwrap(p) {
                p.finish();
            }
        }
        None => crate::partial::remove_stale(dest),
    }
    Ok(())
}

/// What every slice task of one download shares.
#[derive(Clone)]
struct SliceJob {
    store: Arc<dyn Store>,
    src: Location,
    url: String,
    dest: String,
    version: Option<shoal_core::ObjectVersion>,
    policy: RetryPolicy,
    run: Run,
    file: Arc<crate::slice_write::SliceFile>,
    partial: Option<Arc<Partial>>,
}

/// Fetches the slices an earlier run did not leave (the first from
/// `first` when given), in parallel: what each slice gives, in order, and
/// how many were fetched.
async fn fetch_slices(
    job: &SliceJob,
    expected: &Expected,
    slices: &[(u64, u64)],
    mut first: Option<First>,
) -> Result<(Vec<Received>, usize)> {
    let mut got = vec![Received::default(); slices.len()];
    let mut tasks = tokio::task::JoinSet::new();
    for (i, &(start, end)) in slices.iter().enumerate() {
        if let Some(crc) = job.partial.as_ref().and_then(|p| p.done[i]) {
            got[i] = Received::crc32c(crc, end - start);
            job.run.budgets.add_progress(end - start);
            continue;
        }
        let opened = if i == 0 { first.take() } else { None };
        let sums = expected.running(start);
        tasks.spawn(fetch_slice(job.clone(), i, (start, end), opened, sums));
    }
    let fetched = tasks.len();
    while let Some(joined) = tasks.join_next().await {
        let e = match joined {
            Ok(Ok((i, received))) => {
                got[i] = received;
                continue;
            }
            Ok(Err(e)) => e,
            Err(join) => Error::new(
                ErrorKind::Io,
                Op::Download,
                &job.url,
                format!("slice task failed: {join}"),
            ),
        };
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        return Err(e);
    }
    Ok((got, fetched))
}

/// One slice: its request (or the first GET's body), written in place,
/// recorded for a resume.
async fn fetch_slice(
    job: SliceJob,
    i: usize,
    (start, end): (u64, u64),
    opened: Option<First>,
    sums: Running,
) -> Result<(usize, Received)> {
    let (_slot, body) = match opened {
        Some(f) => (f.slot, Some(take_bytes(f.body, end - start))),
        None => (job.run.budgets.permit().await, None),
    };
    let stream = resuming_stream(
        job.store,
        &job.src.bucket,
        &job.src.key,
        &job.url,
        ByteRange::new(start, end),
        job.version,
        body,
        job.policy,
    );
    let (file, dest, url, run) = (&job.file, &job.dest, &job.url, &job.run);
    let sums =
        crate::slice_write::write_slice(stream, file, start, end, dest, url, run, sums).await?;
    if let Some(p) = &job.partial {
        p.record(i, sums.crc32c);
    }
    Ok((i, Received::of(sums, end - start)))
}

/// The first `n` bytes of `body`. The rest is never read: the stream is
/// dropped there, which closes its connection (cheaper, for a big object,
/// than draining it).
pub(crate) fn take_bytes(body: shoal_core::BoxByteStream, n: u64) -> shoal_core::BoxByteStream {
    futures::stream::unfold((body, n), |(mut body, left)| async move {
        if left == 0 {
            return None;
        }
        match body.next().await? {
            Ok(mut chunk) => {
                if chunk.len() as u64 > left {
                    chunk.truncate(left as usize);
                }
                let left = left - chunk.len() as u64;
                Some((Ok(chunk), (body, left)))
            }
            Err(e) => Some((Err(e), (body, left))),
        }
    })
    .boxed()
}

/// Removes the temporary file unless disarmed (on success it was renamed).
/// Removes a working file on every way out but success (an error, a
/// cancelled task), if it is still the one this download made.
struct TempGuard(Option<(PathBuf, File)>);
impl TempGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}
impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some((p, f)) = self.0.take() {
            shoal_core::workfile::remove_if_same(&p, &f);
        }
    }
}

/// Streams an object to `out` in order (for `cat`), verifying the CRC32C at
/// the end when the store has one. Bytes already written cannot be taken
/// back, so a mismatch is reported as an error after the fact.
pub async fn download_to_writer<W: AsyncWrite + Unpin>(
    store: Arc<dyn Store>,
    src: &Location,
    out: &mut W,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    let url = src.to_string();
    // One GET: its headers give the size, version and checksum a HEAD would.
    let _slot = run.budgets.permit().await;
    let opened = (store.get(&src.bucket, &src.key, ByteRange::from(0), None))
        .await
        .map_err(|e| e.with_url(&url).with_op(Op::Download))?;
    let meta = opened.meta;
    let mut stream = resuming_stream(
        store.clone(),
        &src.bucket,
        &src.key,
        &url,
        ByteRange::new(0, meta.size),
        meta.version.clone(),
        Some(opened.body),
        *policy,
    );
    let expected = Expected::learn(&store, src, &meta, Op::Download, &run.budgets.rates).await?;
    let mut sums = expected.running(0);
    let mut n = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        run.budgets.rates.bytes(chunk.len() as u64).await;
        sums.update(&chunk);
        n += chunk.len() as u64;
        run.budgets.add_progress(chunk.len() as u64);
        out.write_all(&chunk)
            .await
            .map_err(|e| Error::io(Op::Write, "stdout", e))?;
    }
    out.flush()
        .await
        .map_err(|e| Error::io(Op::Write, "stdout", e))?;
    let got = Received::of(sums, n);
    let crc = got.crc32c;
    let verified = expected.check(&got, Op::Download, &url, "")?;
    Ok(Report {
        resumed: 0,
        bytes: n,
        pieces: 1,
        verified,
        crc32c: crc,
        source_version: meta.version.clone(),
    })
}
