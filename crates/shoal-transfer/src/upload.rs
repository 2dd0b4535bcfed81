//! Uploading one local file: one PUT when small, a parallel multipart
//! upload when big.
//!
//! Parts are read with `pread` at their offsets, so workers never share a
//! file cursor, and each part's CRC32C travels with it (the server rejects a
//! corrupted part). The whole object's CRC32C is combined from the parts'
//! and checked against what the store reports after assembly. On any
//! failure the upload is aborted, so no orphaned parts keep costing money.
//!
//! If the file changes while it is being read (size or mtime differ after
//! the last part), the upload is aborted: the object would be a mix of two
//! versions of the file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use shoal_core::checksum::crc32c_combine_all;
use shoal_core::{
    Error, ErrorKind, Location, MultipartUpload, Op, PartInfo, PutOptions, Result, Store,
};

use crate::{GcsUpload, Report, SMALL_UPLOAD, TransferOptions, Verified};

/// Default part size: 16 MiB. Parts in flight are held in memory, so
/// workers × part size bounds memory (8 workers: 128 MiB at most, usually
/// far less); 16 MiB parts are big enough that per-request cost is small
/// and small enough that a retried part wastes little. Raised automatically
/// so a file fits in the store's part limit.
pub const DEFAULT_PART_SIZE: u64 = 16 << 20;

/// The part size for `size` bytes on `store`: at least the store's minimum,
/// and large enough to fit in its maximum part count.
pub fn part_size_for(size: u64, wanted: u64, store: &dyn Store) -> u64 {
    let caps = store.capabilities();
    let min_for_count = size.div_ceil(u64::from(caps.max_parts.max(1)));
    wanted.max(caps.min_part_size).max(min_for_count).max(1)
}

fn file_stamp(md: &std::fs::Metadata) -> (u64, Option<std::time::SystemTime>) {
    (md.len(), md.modified().ok())
}

/// Uploads the file at `path` to `dst`.
pub async fn upload_file(
    store: Arc<dyn Store>,
    path: &Path,
    dst: &Location,
    opts: &TransferOptions,
) -> Result<Report> {
    upload_file_with(store, path, dst, &opts.put, opts).await
}

/// [`upload_file`] storing what `put` asks for (`Content-Type`, guessed
/// from the file's name when not given, the other metadata, and
/// `if_not_exists`, a precondition of the final request: the single PUT,
/// or the multipart upload's completion, so an object created meanwhile
/// is never replaced). Checksums and the assembly come from the upload
/// itself.
pub async fn upload_file_with(
    store: Arc<dyn Store>,
    path: &Path,
    dst: &Location,
    put: &PutOptions,
    opts: &TransferOptions,
) -> Result<Report> {
    let path_s = path.display().to_string();
    let put = &PutOptions {
        crc32c: None,
        md5: None,
        other_crc: None,
        if_not_exists: put.if_not_exists || opts.no_clobber,
        ..crate::metadata::typed(put, &path_s).into_owned()
    };
    let file = File::open(path).map_err(|e| Error::io(Op::Read, &path_s, e))?;
    let md = file
        .metadata()
        .map_err(|e| Error::io(Op::Read, &path_s, e))?;
    if md.is_dir() {
        return Err(Error::invalid(Op::Read, &path_s, "is a folder")
            .with_hint("use cp -r to copy a folder"));
    }
    // A FIFO, a device, process substitution (`<(cmd)`), or a file whose
    // size says nothing (/proc and /sys files report 0 and hold text): read
    // to its end as a stream, like `cp -`, and checked against what was
    // read. Trusting `stat` stored such files as "verified" empty objects.
    // A truly empty file takes the same path, at the cost of one read.
    if !md.is_file() || md.len() == 0 {
        let reader = tokio::fs::File::from_std(file);
        let body = crate::stream::reader_stream(reader, &path_s);
        return crate::stream::upload_stream(store, body, dst, put, opts).await;
    }
    let size = md.len();
    let stamp = file_stamp(&md);
    let file = Arc::new(file);
    let part = part_size_for(size, opts.part_size, store.as_ref());
    let url = dst.to_string();

    if size <= part || size <= store.capabilities().min_part_size {
        // The slot is taken before the file is read: a batch has many more
        // files in progress than slots, and a waiting file holds no buffer
        // (read first, 136 files of 8 MiB in progress held 1.1 GB). Up to
        // SMALL_UPLOAD it is one cheap request: a small-request slot.
        let _slot = opts
            .for_transfer((size <= SMALL_UPLOAD).then_some(size))
            .permit()
            .await;
        let data = read_at(&file, 0, size as usize, &path_s).await?;
        let crc = shoal_core::checksum::crc32c_append(0, &data);
        check_unchanged(&file, stamp, &path_s)?;
        let put_opts = PutOptions {
            crc32c: Some(crc),
            ..put.clone()
        };
        opts.rates.bytes(size).await;
        let meta = (store.put(&dst.bucket, &dst.key, data.clone(), &put_opts))
            .await
            .map_err(|e| e.with_url(&url))?;
        opts.add_progress(size);
        let verified = check_result(meta.crc32c, crc, &url)?;
        return Ok(Report {
            resumed: 0,
            bytes: size,
            pieces: 1,
            verified,
            crc32c: crc,
        });
    }

    if store.supports_put_stream() && opts.gcs_upload == GcsUpload::Resumable {
        let reader = tokio::fs::File::from_std(
            file.try_clone()
                .map_err(|e| Error::io(Op::Read, &path_s, e))?,
        );
        let body = crate::stream::reader_stream(reader, &path_s);
        let report = crate::stream::put_stream(&store, body, dst, put, opts).await?;
        check_unchanged(&file, stamp, &path_s)?;
        return Ok(report);
    }
    let start_opts = PutOptions {
        assemble: opts.gcs_upload.assemble(),
        ..put.clone()
    };
    opts.rates.request().await;
    let upload = (store.multipart_start(&dst.bucket, &dst.key, &start_opts))
        .await
        .map_err(|e| e.with_url(&url))?;
    // Dropped (Ctrl-C, a cancelled task) before it completes: aborted.
    let guard = crate::cleanup::AbortUpload::new(&store, &upload);
    let result = upload_parts(&store, &upload, &file, size, part, opts, &path_s, &url).await;
    let result = match result {
        Ok(parts) => match check_unchanged(&file, stamp, &path_s) {
            Ok(()) => Ok(parts),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    let parts = match result {
        Ok(p) => p,
        Err(e) => {
            guard.disarm();
            abort_quietly(&store, &upload).await;
            return Err(e);
        }
    };
    let crc = crc32c_combine_all(parts.iter().map(|p| (p.crc32c, p.size)));
    opts.rates.request().await;
    let completed = (store.multipart_complete(&upload, &parts, Some(crc))).await;
    guard.disarm();
    let meta = match completed {
        Ok(m) => m,
        Err(e) => {
            abort_quietly(&store, &upload).await;
            return Err(e.with_url(&url));
        }
    };
    let verified = check_result(meta.crc32c, crc, &url)?;
    Ok(Report {
        resumed: 0,
        bytes: size,
        pieces: parts.len(),
        verified,
        crc32c: crc,
    })
}

/// Aborts an upload, logging (not failing) if that too fails.
pub(crate) async fn abort_quietly(store: &Arc<dyn Store>, upload: &MultipartUpload) {
    if let Err(e) = (store.multipart_abort(upload)).await {
        tracing::warn!(error = %e, upload_id = %upload.upload_id, "could not abort the multipart upload; its parts may remain");
    }
}

/// Compares the store's CRC32C of the new object with ours.
pub(crate) fn check_result(stored: Option<u32>, ours: u32, url: &str) -> Result<Verified> {
    match stored {
        Some(s) if s != ours => Err(Error::new(
            ErrorKind::Integrity,
            Op::Upload,
            url,
            format!("the store computed CRC32C {s:08x} but the data sent has {ours:08x}"),
        )),
        Some(_) => Ok(Verified::Crc32c),
        None => Ok(Verified::SizeOnly),
    }
}

fn check_unchanged(
    file: &File,
    stamp: (u64, Option<std::time::SystemTime>),
    path: &str,
) -> Result<()> {
    let md = file.metadata().map_err(|e| Error::io(Op::Read, path, e))?;
    if file_stamp(&md) != stamp {
        return Err(Error::new(
            ErrorKind::Changed,
            Op::Upload,
            path,
            "the file changed while it was being uploaded",
        )
        .with_hint("upload it again once it is no longer being written"));
    }
    Ok(())
}

/// Part buffers handed back after their request, so a long upload reuses
/// `workers` buffers instead of allocating one per part (the allocator
/// otherwise keeps freed 16 MiB blocks in per-thread arenas: 190 MiB peak
/// RSS for a 10 GiB upload, 77 MiB with reuse).
#[derive(Default)]
struct Buffers(std::sync::Mutex<Vec<Vec<u8>>>);

impl Buffers {
    fn take(&self, len: usize) -> Vec<u8> {
        let mut v = (self.0.lock().unwrap_or_else(|p| p.into_inner()))
            .pop()
            .unwrap_or_default();
        // Bytes past `len` are already initialised; only growth writes zeros.
        if v.len() >= len {
            v.truncate(len);
        } else {
            v.resize(len, 0);
        }
        v
    }

    /// Takes `data` back if no request holds a reference to it any more.
    fn give(&self, data: Bytes) {
        if let Ok(m) = data.try_into_mut() {
            (self.0.lock().unwrap_or_else(|p| p.into_inner())).push(Vec::from(m));
        }
    }
}

async fn read_at(file: &Arc<File>, offset: u64, len: usize, path: &str) -> Result<Bytes> {
    read_into(file, offset, vec![0u8; len], path).await
}

async fn read_into(file: &Arc<File>, offset: u64, buf: Vec<u8>, path: &str) -> Result<Bytes> {
    let file = file.clone();
    let mut buf = buf;
    let len = buf.len() as u64;
    let read = crate::file_io(len, move || {
        file.read_exact_at(&mut buf, offset).map(|()| buf)
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Io, Op::Read, path, e.to_string()))?;
    let buf = read.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::new(
                ErrorKind::Changed,
                Op::Read,
                path,
                "the file shrank while it was being read",
            )
        } else {
            Error::io(Op::Read, path, e)
        }
    })?;
    Ok(Bytes::from(buf))
}

#[allow(clippy::too_many_arguments)]
async fn upload_parts(
    store: &Arc<dyn Store>,
    upload: &MultipartUpload,
    file: &Arc<File>,
    size: u64,
    part: u64,
    opts: &TransferOptions,
    path_s: &str,
    url: &str,
) -> Result<Vec<PartInfo>> {
    let count = size.div_ceil(part);
    let sem = Arc::new(tokio::sync::Semaphore::new(opts.workers.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let mut parts = Vec::with_capacity(count as usize);
    let buffers = Arc::new(Buffers::default());
    for i in 0..count {
        let permit = sem
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closed");
        // Fail fast: gather what finished while we waited for a permit.
        while let Some(done) = tasks.try_join_next() {
            parts.push(joined(done, url).inspect_err(|_| tasks.abort_all())?);
        }
        let (store, upload, file, opts) =
            (store.clone(), upload.clone(), file.clone(), opts.clone());
        let (path_s, url) = (path_s.to_owned(), url.to_owned());
        let offset = i * part;
        let len = part.min(size - offset) as usize;
        let buffers = buffers.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let _slot = opts.permit().await;
            // Charged before the part is read: a waiting part holds no buffer.
            opts.rates.bytes(len as u64).await;
            let data = read_into(&file, offset, buffers.take(len), &path_s).await?;
            let crc = shoal_core::checksum::crc32c_append(0, &data);
            let number = (i + 1) as u32;
            let info = (store.multipart_put(&upload, number, data.clone(), crc))
                .await
                .map_err(|e| e.with_url(&url))?;
            buffers.give(data);
            opts.add_progress(len as u64);
            Ok::<_, Error>(info)
        });
    }
    while let Some(done) = tasks.join_next().await {
        parts.push(joined(done, url).inspect_err(|_| tasks.abort_all())?);
    }
    parts.sort_by_key(|p| p.part_number);
    Ok(parts)
}

/// Unwraps a finished task: its own error, or a panic/cancel as an error.
pub(crate) fn joined<T>(
    done: std::result::Result<Result<T>, tokio::task::JoinError>,
    url: &str,
) -> Result<T> {
    match done {
        Ok(r) => r,
        Err(e) => Err(Error::new(
            ErrorKind::Io,
            Op::Upload,
            url,
            format!("worker failed: {e}"),
        )),
    }
}
