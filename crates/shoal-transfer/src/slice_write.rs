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
//! first chunks fall out of the cache before they were written.
//!
//! The slices of one download take turns at their file ([`SliceFile`]):
//! the kernel lets one write into a file at a time anyway, and a thread
//! that finds the file busy spins until it is free, burning the CPU the
//! write it waits for would need. A slice whose batch is due while
//! another slice writes keeps receiving instead, and writes the larger
//! batch at its next turn, waiting for one only at [`MAX_BATCH`]. Every
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

use crate::Run;

/// Bytes gathered before one `pwritev`: about one receive's worth, so the
/// batch is still in the cache when it is written (see the module doc);
/// smaller receives (slow links, TLS records) are gathered so syscalls stay
/// few.
const WRITE_BATCH: usize = 256 << 10;

/// Bytes a slice gathers at most while other slices hold the file's turn;
/// at this it waits for its turn. A batch's single-stream downloads hold at
/// most this plus one chunk each, the [`crate::WRITE_BUFFER_UNITS`] their
/// budget counts.
const MAX_BATCH: usize = 512 << 10;

/// Chunks in one `pwritev` at most (Linux's IOV_MAX is 1024).
const MAX_IOV: usize = 512;

/// Written bytes of a slice handed to the disk at a time (early
/// writeback, see [`write_slice`]).
const WRITEBACK: u64 = 8 << 20;

/// The working file of one download, and the turn its slices take at it
/// (see the module doc).
pub(crate) struct SliceFile {
    file: Arc<File>,
    turn: tokio::sync::Mutex<()>,
}

impl SliceFile {
    pub(crate) fn new(file: Arc<File>) -> Self {
        SliceFile {
            file,
            turn: tokio::sync::Mutex::new(()),
        }
    }
}

/// Streams one slice to its place in the file, as the module doc says.
/// Returns `sums` fed with the slice's bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write_slice(
    mut stream: shoal_core::BoxByteStream,
    file: &SliceFile,
    start: u64,
    end: u64,
    dest: &str,
    url: &str,
    run: &Run,
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
        run.budgets.rates.bytes(chunk.len() as u64).await;
        sums.update(&chunk);
        run.budgets.add_progress(chunk.len() as u64);
        batched += chunk.len();
        batch.push(chunk);
        if batched < WRITE_BATCH && batch.len() < MAX_IOV {
            continue;
        }
        let turn = if batched >= MAX_BATCH || batch.len() >= MAX_IOV {
            file.turn.lock().await
        } else {
            match file.turn.try_lock() {
                Ok(turn) => turn,
                // Another slice is writing: receive more meanwhile.
                Err(_) => continue,
            }
        };
        let len = batched as u64;
        pwritev_all(&file.file, &batch, pos).map_err(|e| Error::io(Op::Write, dest, e))?;
        drop(turn);
        batch.clear();
        batched = 0;
        pos += len;
        if pos - dirty >= WRITEBACK {
            start_writeback(&file.file, dirty, pos, dest).await?;
            dirty = pos;
        }
    }
    if !batch.is_empty() {
        let len: u64 = batch.iter().map(|c| c.len() as u64).sum();
        let turn = file.turn.lock().await;
        pwritev_all(&file.file, &batch, pos).map_err(|e| Error::io(Op::Write, dest, e))?;
        drop(turn);
        pos += len;
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

/// Starts writing `from..to` back to the disk ([`writeback`]), on the
/// blocking pool: the call may wait for the device's queue.
async fn start_writeback(file: &Arc<File>, from: u64, to: u64, dest: &str) -> Result<()> {
    let file = file.clone();
    tokio::task::spawn_blocking(move || writeback(&file, from, to))
        .await
        .map_err(|e| Error::new(ErrorKind::Io, Op::Write, dest, e.to_string()))
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
fn writeback(file: &File, from: u64, to: u64) {
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
    use crate::TransferOptions;

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

    /// While another slice holds the file's turn, a slice whose batch is
    /// due keeps receiving, writes nothing, and waits only at MAX_BATCH;
    /// given the turn, it writes every byte in place, CRC32C included.
    #[tokio::test]
    async fn a_slice_keeps_receiving_while_another_holds_the_turn() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        const CHUNK: usize = 100_000;
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = SliceFile::new(Arc::new(File::create(&path).unwrap()));
        let handed = Arc::new(AtomicUsize::new(0));
        let counter = handed.clone();
        let chunks: Vec<Result<Bytes>> = data
            .chunks(CHUNK)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let stream = futures::stream::iter(chunks)
            .inspect(move |_| {
                counter.fetch_add(1, Ordering::Relaxed);
            })
            .boxed();
        let run = Run::new(TransferOptions::default());
        let end = data.len() as u64;
        let held = file.turn.lock().await;
        let write = write_slice(
            stream,
            &file,
            0,
            end,
            "f",
            "mem://b/k",
            &run,
            Running::new(None),
        );
        tokio::pin!(write);
        assert!(futures::poll!(&mut write).is_pending());
        assert_eq!(
            handed.load(Ordering::Relaxed),
            MAX_BATCH.div_ceil(CHUNK),
            "received up to MAX_BATCH, not WRITE_BATCH, before waiting"
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "nothing written"
        );
        drop(held);
        let sums = write.await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert_eq!(sums.crc32c, crc32c::crc32c(&data));
    }
}
