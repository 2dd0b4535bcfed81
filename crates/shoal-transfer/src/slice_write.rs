//! Writing one slice of a download into its place in the working file.
//!
//! The chunks a connection hands over are written as they came, gathered
//! into one `pwritev` per [`WRITE_BATCH`]: no staging copy and no fresh
//! buffer per write. The write runs on the task's own thread, right after
//! the chunks were received and checksummed, while their bytes are still in
//! that core's cache: copying them into the page cache then costs little
//! more than the receive did. Handed to the blocking pool, the same write
//! ran on another core that had to fetch every byte from memory again, and
//! woke a thread and the task per write; bigger batches likewise let the
//! first chunks fall out of the cache before they were written. Every
//! [`WRITEBACK`] bytes the slice asks the kernel to start writing its pages
//! to the disk (on the blocking pool: that call may wait for the device's
//! queue), so a durable download's final `fdatasync` finds little left to
//! do.

use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use shoal_core::checksum::Running;
use shoal_core::{Error, ErrorKind, Op, Result};

use crate::TransferOptions;

/// Bytes gathered before one `pwritev`: about one receive's worth, so the
/// batch is still in the cache when it is written (see the module doc);
/// smaller receives (slow links, TLS records) are gathered so syscalls stay
/// few. A batch's single-stream downloads hold at most this plus one chunk
/// each, within the [`crate::WRITE_BUFFER_UNITS`] the batch's budget counts
/// for them.
const WRITE_BATCH: usize = 256 << 10;

/// Chunks in one `pwritev` at most (Linux's IOV_MAX is 1024).
const MAX_IOV: usize = 512;

/// Written bytes of a slice handed to the disk at a time (early
/// writeback, see [`write_slice`]).
const WRITEBACK: u64 = 8 << 20;

/// Streams one slice to its place in the file, as the module doc says.
/// Returns `sums` fed with the slice's bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write_slice(
    mut stream: shoal_core::BoxByteStream,
    file: Arc<File>,
    start: u64,
    end: u64,
    dest: &str,
    url: &str,
    opts: &TransferOptions,
    mut sums: Running,
) -> Result<Running> {
    let mut pos = start;
    // Written, and not yet handed to the disk, from here to `pos`.
    let mut dirty = start;
    let mut batch: Vec<Bytes> = Vec::new();
    let mut batched = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if chunk.is_empty() {
            continue;
        }
        opts.rates.bytes(chunk.len() as u64).await;
        sums.update(&chunk);
        opts.add_progress(chunk.len() as u64);
        batched += chunk.len();
        batch.push(chunk);
        if batched >= WRITE_BATCH || batch.len() >= MAX_IOV {
            let len = batched as u64;
            let flush = (pos + len - dirty >= WRITEBACK).then_some(dirty);
            pos = pwrite(&file, std::mem::take(&mut batch), pos, flush, dest).await?;
            if flush.is_some() {
                dirty = pos;
            }
            batched = 0;
        }
    }
    if !batch.is_empty() {
        pos = pwrite(&file, batch, pos, None, dest).await?;
    }
    if pos != end {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Download,
            url,
            format!(
                "slice {start}-{end} received {} bytes, expected {}",
                pos - start,
                end - start
            ),
        ));
    }
    Ok(sums)
}

/// Writes `chunks` one after another at `pos`, in place on this thread
/// (the module doc says why); with `writeback_from`, then starts writing
/// `writeback_from..` (up to the end of these chunks) back to the disk.
async fn pwrite(
    file: &Arc<File>,
    chunks: Vec<Bytes>,
    pos: u64,
    writeback_from: Option<u64>,
    dest: &str,
) -> Result<u64> {
    let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
    pwritev_all(file, &chunks, pos).map_err(|e| Error::io(Op::Write, dest, e))?;
    drop(chunks);
    if let Some(from) = writeback_from {
        let file = file.clone();
        tokio::task::spawn_blocking(move || start_writeback(&file, from, pos + len))
            .await
            .map_err(|e| Error::new(ErrorKind::Io, Op::Write, dest, e.to_string()))?;
    }
    Ok(pos + len)
}

/// Early writeback: asks the kernel to start writing `from..to` to the
/// disk now, without waiting for it. A download is made durable
/// (`fdatasync`) before its rename; left to the kernel's own schedule,
/// most of its pages are still dirty then, and the sync costs the time to
/// write them all after the last byte arrived. Started as each few MiB
/// land, the disk works while the network does, and the final sync finds
/// little left: a durable download takes about max(network, disk) rather
/// than their sum. Advisory: a file system that cannot (tmpfs, some FUSE)
/// just says no, and the final `fdatasync` still reports real errors.
fn start_writeback(file: &File, from: u64, to: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if to > from {
            // SAFETY: a plain syscall on a file descriptor we own; it reads
            // no memory of ours.
            unsafe {
                libc::sync_file_range(
                    file.as_raw_fd(),
                    from as libc::off64_t,
                    (to - from) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, from, to);
}

/// `pwritev` until every byte of `chunks` is written (short writes and
/// EINTR continue where they stopped).
fn pwritev_all(file: &File, mut chunks: &[Bytes], mut pos: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // Bytes of chunks[0] already written.
    let mut skip = 0usize;
    while let Some(first) = chunks.first() {
        let iov: Vec<libc::iovec> = chunks
            .iter()
            .take(MAX_IOV)
            .enumerate()
            .map(|(i, c)| {
                let s = if i == 0 { &first[skip..] } else { &c[..] };
                libc::iovec {
                    iov_base: s.as_ptr() as *mut libc::c_void,
                    iov_len: s.len(),
                }
            })
            .collect();
        let offset = libc::off_t::try_from(pos)
            .map_err(|_| std::io::Error::other("file offset past the largest off_t"))?;
        // SAFETY: every iovec points into a `Bytes` that `chunks` keeps alive
        // for the call, with its exact length; the fd is open for writing.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                offset,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let mut n = n as usize;
        pos += n as u64;
        while n > 0 {
            let left = chunks[0].len() - skip;
            if n >= left {
                n -= left;
                chunks = &chunks[1..];
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More chunks than one `pwritev` takes, of uneven sizes, at an offset
    /// into a file that already holds other bytes: every byte lands at its
    /// place and nothing around it changes.
    #[test]
    fn pwritev_all_writes_every_chunk_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0xAAu8; 64]).unwrap();
        let chunks: Vec<Bytes> = (0..(MAX_IOV * 2 + 7))
            .map(|i| Bytes::from(vec![(i % 251) as u8; 1 + i % 13]))
            .collect();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        pwritev_all(&file, &chunks, 10).unwrap();
        let want: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[..10], &[0xAA; 10]);
        assert_eq!(&got[10..10 + want.len()], &want[..]);
        assert_eq!(got.len(), (10 + want.len()).max(64));
        if got.len() > 10 + want.len() {
            assert!(got[10 + want.len()..].iter().all(|&b| b == 0xAA));
        }
    }
}
