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
//!
//! A multipart upload to a store that keeps parts across runs (S3) is
//! written down to be resumed ([`crate::upload_journal`]): run again, the
//! same command goes on from the parts already stored, each checked
//! against the file first.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use shoal_core::{
    Error, ErrorKind, Lack, Location, Op, PutOptions, Result, Store, UploadMethod, need,
};

use crate::multipart::Multipart;
use crate::stream::{put_one, put_stream, reader_stream, upload_forced, upload_stream};
use crate::{Report, Run, SMALL_UPLOAD};

/// Default part size: 16 MiB. Parts in flight are held in memory, so
/// workers × part size bounds memory (8 workers: 128 MiB at most, usually
/// far less); 16 MiB parts are big enough that per-request cost is small
/// and small enough that a retried part wastes little. Raised automatically
/// so a file fits in the store's part limit.
pub(crate) const DEFAULT_PART_SIZE: u64 = 16 << 20;

/// The part size for `size` bytes on `store`: at least the store's minimum,
/// and large enough to fit in its maximum part count.
pub(crate) fn part_size_for(size: u64, wanted: u64, store: &dyn Store) -> u64 {
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
    run: &Run,
) -> Result<Report> {
    upload_file_with(store, path, dst, &run.opts.put, run).await
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
    run: &Run,
) -> Result<Report> {
    let path_s = path.display().to_string();
    let file = File::open(path).map_err(|e| Error::io(Op::Read, &path_s, e))?;
    let md = file
        .metadata()
        .map_err(|e| Error::io(Op::Read, &path_s, e))?;
    let mut put = PutOptions {
        crc32c: None,
        md5: None,
        other_crc: None,
        if_not_exists: put.if_not_exists || run.opts.no_clobber,
        ..crate::metadata::typed(put, &path_s).into_owned()
    };
    crate::metadata::record_file_time(&mut put, dst.scheme, &md);
    if run.opts.preserve_posix {
        crate::metadata::record_posix(&mut put, dst.scheme, &md);
    }
    let put = &put;
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
        let body = reader_stream(reader, &path_s);
        return upload_stream(store, body, dst, put, run).await;
    }
    let size = md.len();
    let stamp = file_stamp(&md);
    let file = Arc::new(file);
    let part = part_size_for(size, run.opts.part_size, store.as_ref());

    if (size <= part || size <= store.capabilities().min_part_size)
        && !upload_forced(store.as_ref())
    {
        // The slot is taken before the file is read: a batch has many more
        // files in progress than slots, and a waiting file then holds no
        // buffer. Up to SMALL_UPLOAD it is one cheap request: a
        // small-request slot.
        let _slot = run
            .for_transfer((size <= SMALL_UPLOAD).then_some(size))
            .budgets
            .permit()
            .await;
        let data = read_at(&file, 0, size as usize, &path_s).await?;
        check_unchanged(&file, stamp, &path_s)?;
        return put_one(&store, dst, data, put, run).await;
    }

    let caps = store.capabilities();
    if caps.put_stream && caps.upload_method == UploadMethod::Session {
        let reader = tokio::fs::File::from_std(
            file.try_clone()
                .map_err(|e| Error::io(Op::Read, &path_s, e))?,
        );
        let body = reader_stream(reader, &path_s);
        let report = put_stream(&store, body, dst, put, run).await?;
        check_unchanged(&file, stamp, &path_s)?;
        return Ok(report);
    }
    let journal = (run.opts.resume && caps.resumes_uploads)
        .then(|| crate::upload_journal::Journal::for_upload(path, &md, dst, part, put))
        .flatten();
    let mut upload = match journal {
        Some(j) => start_or_resume(&store, dst, put, run, j, &file, size, part, &path_s).await?,
        None => Multipart::start(&store, dst, put, run).await?,
    };
    let fed = feed(&mut upload, &file, size, part, &path_s).await;
    upload
        .finish(fed, || check_unchanged(&file, stamp, &path_s))
        .await
}

/// Goes on with the upload `journal` names if it fits this one (the same
/// file, unchanged, in the same parts, with the same options) and the
/// store still has it, keeping the stored parts whose bytes are the
/// file's; otherwise aborts it (when the file changed) and starts anew,
/// written down in `journal`.
#[allow(clippy::too_many_arguments)] // one upload's whole context
async fn start_or_resume(
    store: &Arc<dyn Store>,
    dst: &Location,
    put: &PutOptions,
    run: &Run,
    journal: crate::upload_journal::Journal,
    file: &Arc<File>,
    size: u64,
    part: u64,
    path: &str,
) -> Result<Multipart> {
    if let Some(old) = journal.read() {
        if old.fits(&journal.now) {
            run.budgets.rates.request().await;
            let resumed = match need(
                store.multipart(),
                Lack::ResumeUploads,
                &dst.bucket,
                &dst.key,
            ) {
                Ok(m) => (m.multipart_resume(&dst.bucket, &dst.key, &old.upload_id, put)).await,
                Err(e) => Err(e),
            };
            match resumed {
                Ok((upload, listed)) => {
                    let kept = check_parts(listed, file, size, part, path).await?;
                    return Ok(Multipart::resumed(store, dst, upload, run, journal, kept));
                }
                // Completed, aborted or expired since: start over.
                Err(e) if e.kind() == shoal_core::ErrorKind::NotFound => {}
                Err(e) => return Err(e.with_url(dst.to_string())),
            }
        } else {
            // Another version of the file (or other parts or options): its
            // parts can never be completed into this one.
            let old_upload = shoal_core::MultipartUpload {
                bucket: dst.bucket.clone(),
                key: dst.key.clone(),
                upload_id: old.upload_id.clone(),
            };
            crate::cleanup::abort_quietly(store, &old_upload).await;
        }
        journal.remove();
    }
    let mut upload = Multipart::start(store, dst, put, run).await?;
    upload.keep_in(journal);
    Ok(upload)
}

/// The stored parts `listed` whose bytes are the file's at their offsets
/// (same size, and the same CRC32C, or MD5 ETag where the store keeps no
/// CRC32C), as parts to complete with; the others are sent again.
async fn check_parts(
    listed: Vec<shoal_core::ListedPart>,
    file: &Arc<File>,
    size: u64,
    part: u64,
    path: &str,
) -> Result<Vec<shoal_core::PartInfo>> {
    let parts = size.div_ceil(part);
    let mut kept = Vec::new();
    for p in listed {
        let n = u64::from(p.part_number);
        if n == 0 || n > parts {
            continue;
        }
        let offset = (n - 1) * part;
        let len = part.min(size - offset);
        if p.size != len {
            continue;
        }
        let data = read_at(file, offset, len as usize, path).await?;
        let crc = shoal_core::checksum::crc32c_append(0, &data);
        let same = match p.crc32c {
            Some(theirs) => theirs == crc,
            None => {
                use shoal_core::checksum::{hex, md5_digest};
                p.etag.trim_matches('"') == hex(&md5_digest(&data))
            }
        };
        if same {
            kept.push(shoal_core::PartInfo {
                part_number: p.part_number,
                etag: p.etag,
                crc32c: crc,
                size: len,
            });
        }
    }
    Ok(kept)
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
/// otherwise keeps freed part-sized blocks in per-thread arenas, and a
/// long upload's peak memory grows well past what is in flight).
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

/// Sends the file's parts of `part` bytes, each read by `pread` into a
/// reused buffer once its request may go.
async fn feed(
    upload: &mut Multipart,
    file: &Arc<File>,
    size: u64,
    part: u64,
    path: &str,
) -> Result<()> {
    let buffers = Arc::new(Buffers::default());
    for i in 0..size.div_ceil(part) {
        if upload.has((i + 1) as u32) {
            continue;
        }
        let offset = i * part;
        let len = part.min(size - offset);
        let (file, path, pool) = (file.clone(), path.to_owned(), buffers.clone());
        // The buffer is taken only once the part may go.
        let read = async move { read_into(&file, offset, pool.take(len as usize), &path).await };
        let pool = buffers.clone();
        let give = move |data| pool.give(data);
        (upload.send((i + 1) as u32, len, read, give)).await?;
    }
    Ok(())
}
