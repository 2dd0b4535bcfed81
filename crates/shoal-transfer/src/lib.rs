//! Moving one object as fast as the pipe allows, and never leaving a wrong
//! file behind.
//!
//! Everything here is written against [`shoal_core::Store`], so the same
//! engine serves GCS, S3, local files and the in-memory test store:
//!
//! - [`download`]: a big object is cut into byte-range slices
//!   ([`plan::plan_slices`]), each fetched on its own connection and written
//!   with `pwrite` at its offset into a sparse temporary file beside the
//!   destination. The slices' checksums are combined and checked against
//!   the store's (`verify`) before the file is renamed into place.
//! - [`upload`]: a big file becomes a multipart upload (S3 multipart, GCS
//!   parallel composite or XML multipart) with parts read by `pread` and
//!   sent in parallel by the one multipart driver (`multipart`), aborted
//!   on failure so no parts are left behind.
//! - [`stream`]: bodies of unknown size (stdin, another store's object)
//!   are cut into parts as they arrive; memory is bounded by parts in
//!   flight.
//! - [`cloud_copy`]: one object from a store to another, or within one, where
//!   the server can copy it.
//!
//! The engines take a [`Run`]: the user's [`TransferOptions`], plain data
//! the front ends map their flags and keywords to, beside the budgets the
//! run's transfers share (request slots, rates, a progress counter; see
//! [`run`]). Progress is a shared byte counter the caller polls (the CLI
//! draws a bar from it), so the engines carry no UI code.
//!
//! Front ends reach all of this through [`ops`] and the crate root's
//! options only: the modules are private, so a plan cannot be made past
//! the checks [`ops`] runs, and the engine's public surface is one file.

#![warn(missing_docs, unreachable_pub)]

mod batch;
mod check;
mod cleanup;
mod cloud_copy;
mod copy;
mod decode;
mod delete;
mod download;
mod hash;
mod into_memory;
mod inventory;
mod metadata;
mod multipart;
pub mod ops;
mod partial;
mod plan;
pub mod pool;
mod rate;
mod read;
mod run;
mod safety;
mod same;
mod slice_write;
mod sources;
mod spill;
mod split_copy;
mod stream;
mod sync;
mod task_size;
mod tree;
mod update;
mod upload;
mod upload_journal;
mod uploads;
mod verify;
mod versions;

pub(crate) use run::Slot;
pub use run::{Budgets, MEMORY_UNIT, Run, SMALL_MEMORY, SmallBudget, WRITE_BUFFER_UNITS};
pub use verify::Verified;

/// What the user asked of a transfer: plain data, what CLI flags and
/// Python keywords map to. The budgets a run's transfers share are made
/// per run, beside these (see [`Run`]).
#[derive(Debug, Clone)]
pub struct TransferOptions {
    /// Parallel connections for one object. Default: 2 per vCPU (a request
    /// spends most of its life waiting on the network, so two per core keep
    /// the cores busy without thrashing them).
    pub workers: usize,
    /// Requests in flight, in a batch, for transfers that are one cheap
    /// request each: deletes, downloads of one stream (up to `min_slice`;
    /// each holds at most one write batch), uploads up to [`SMALL_UPLOAD`]
    /// (each holds its bytes). Default [`DEFAULT_SMALL_WORKERS`]: such
    /// requests are latency-bound, so a batch of small files needs dozens
    /// in flight, far more than the 2 per vCPU that bytes need.
    /// `--workers N` sets both limits.
    pub small_workers: usize,
    /// Force this many slices (1 = one plain stream).
    pub slices: Option<usize>,
    /// Smallest slice worth its own request (see [`plan::DEFAULT_MIN_SLICE`]).
    pub min_slice: u64,
    /// Multipart part size for uploads (see [`upload::DEFAULT_PART_SIZE`]).
    pub part_size: u64,
    /// Keep an interrupted sliced download's slices and pick them up on the
    /// next run (see [`partial`]). On by default.
    pub resume: bool,
    /// Never replace an existing destination (`--no-clobber`), decided
    /// atomically where the write lands, never by a look first: uploads
    /// and cloud-to-cloud copies carry the store's precondition
    /// (`PutOptions::if_not_exists`: GCS `ifGenerationMatch=0`, S3
    /// `If-None-Match: *`, on the single PUT or the multipart completion),
    /// local writes rename without replacing
    /// ([`shoal_core::workfile::persist_new`]). A destination that exists
    /// fails with [`shoal_core::ErrorKind::Precondition`], which a batch
    /// counts as skipped.
    pub no_clobber: bool,
    /// What every write stores beside its bytes (`--content-type`,
    /// `--cache-control`, `--metadata`...): a file's upload adds the type
    /// guessed from its name where none is set, a cloud-to-cloud copy the
    /// source's metadata where these leave it unset (see [`metadata`]).
    pub put: shoal_core::PutOptions,
    /// Copies within one store are made by the server
    /// ([`shoal_core::Store::copy`]), moving no bytes through the client.
    /// On by default; off (`--no-server-side`) streams them through.
    pub server_side: bool,
    /// `-P` / `--preserve-posix`: uploads record a file's mode, owner and
    /// group in the object's metadata, downloads give them back (the mode
    /// always, the owner and group where this process may)
    /// ([`shoal_core::posix`]). Off by default.
    pub preserve_posix: bool,
}

/// Cheap requests in flight in a batch by default (see
/// [`TransferOptions::small_workers`]): dozens, as the best many-file tools
/// keep. 128 rather than 64, because at cloud round trips more in flight
/// still shortens a batch of small files, and [`SMALL_MEMORY`], not the
/// slot count, bounds the buffers.
pub const DEFAULT_SMALL_WORKERS: usize = 128;

/// An upload up to this size is one PUT of one buffer: a cheap request.
pub const SMALL_UPLOAD: u64 = 1 << 20;

/// File reads and writes up to this size run on the task's own thread:
/// copying a few pages to or from the page cache takes microseconds, less
/// than handing the call to the blocking pool and waking the task again
/// (in a batch of small downloads, that hand-off dominated the client's
/// CPU).
const INLINE_IO: u64 = 64 << 10;

/// Runs a positioned read or write of `len` bytes: in place when small, on
/// the blocking pool otherwise. The outer error is a blocking task that
/// could not finish (a panic, a runtime shutting down).
pub(crate) async fn file_io<T: Send + 'static>(
    len: u64,
    io: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<std::io::Result<T>, tokio::task::JoinError> {
    if len <= INLINE_IO {
        return Ok(io());
    }
    tokio::task::spawn_blocking(io).await
}

/// Threads for the async runtime: `SHOAL_THREADS` if set to a positive
/// number, else one per CPU (tokio's own default).
///
/// Why not fewer by default: the async threads receive every byte, and on
/// a real endpoint decrypt it (TLS) and checksum it too; a 2-vCPU machine
/// with one such thread would cap a big download near one core's rate.
/// Why the knob: on a machine shared with other busy processes, each extra
/// async thread is one more to park and wake per burst of small requests,
/// so fewer threads can help many small files there while they slow down
/// big ones (2 vCPUs beside MinIO, 1 thread instead of 2: 5,000 small
/// downloads 8% faster on 13% less client CPU, 200 x 8 MiB 9% slower).
///
/// A value that is not a whole number from 1 to [`MAX_THREADS`] is an
/// error naming it (`SHOAL_THREADS=100000` made the runtime abort).
pub fn runtime_threads() -> std::result::Result<usize, String> {
    threads_for(std::env::var("SHOAL_THREADS").ok().as_deref(), cpus())
}

/// The most async threads `SHOAL_THREADS` may ask for: each reserves a
/// stack, the kernel caps threads per process, and past a few per CPU
/// more only add parking and waking.
pub const MAX_THREADS: usize = 1024;

/// The CPUs this process may use (2 if that cannot be told): what the
/// default workers and threads are counted in.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn threads_for(setting: Option<&str>, cpus: usize) -> std::result::Result<usize, String> {
    let Some(v) = setting else {
        return Ok(cpus.max(1));
    };
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "SHOAL_THREADS={v:?}: must be a whole number from 1 to {MAX_THREADS} (async threads; unset it for one per CPU)"
        )),
    }
}

impl Default for TransferOptions {
    fn default() -> Self {
        TransferOptions {
            workers: cpus() * 2,
            small_workers: DEFAULT_SMALL_WORKERS,
            slices: None,
            min_slice: plan::DEFAULT_MIN_SLICE,
            part_size: upload::DEFAULT_PART_SIZE,
            resume: true,
            no_clobber: false,
            put: shoal_core::PutOptions::default(),
            server_side: true,
            preserve_posix: false,
        }
    }
}

/// What a finished transfer did.
#[derive(Debug, Clone)]
pub struct Report {
    /// Bytes moved.
    pub bytes: u64,
    /// Parallel requests used (slices or parts).
    pub pieces: usize,
    /// How the result was checked.
    pub verified: Verified,
    /// CRC32C of the bytes moved.
    pub crc32c: u32,
    /// Bytes an earlier, interrupted run had already fetched (not moved
    /// again).
    pub resumed: u64,
    /// The version of the source that was read, where the store has
    /// versions: what a move deletes, and nothing newer.
    pub source_version: Option<shoal_core::ObjectVersion>,
}

impl Report {
    /// One stream between local files or pipes, where no store keeps a
    /// checksum to check it against: only its length is known.
    pub fn size_only(bytes: u64) -> Report {
        Report {
            bytes,
            pieces: 1,
            verified: Verified::SizeOnly,
            crc32c: 0,
            resumed: 0,
            source_version: None,
        }
    }
}

/// `1 file`, `3 files`: a count with its noun, for the lines reports print.
pub(crate) fn plural(n: u64, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::threads_for;

    #[test]
    fn runtime_threads_are_one_per_cpu_unless_set() {
        assert_eq!(threads_for(None, 2), Ok(2));
        assert_eq!(threads_for(None, 0), Ok(1));
        assert_eq!(threads_for(Some(" 1 "), 2), Ok(1));
        assert_eq!(threads_for(Some("3"), 2), Ok(3));
        // Nonsense is an error naming the variable and the range.
        for bad in ["0", "many", "-1", "100000", ""] {
            let e = threads_for(Some(bad), 8).unwrap_err();
            assert!(
                e.contains("SHOAL_THREADS") && e.contains("1 to 1024"),
                "{e}"
            );
        }
    }
}
