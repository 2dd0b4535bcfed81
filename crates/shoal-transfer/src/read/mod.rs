//! Reading a dataset: many objects, one stream of (decoded) bytes, fast.
//!
//! `shoal cat` and `shoal bench read` hand a [`Reader`] the objects a list
//! of URLs and globs names, as the listing streams them in. The reader
//! hands back [`Object`]s, each a stream of [`Chunk`]s, in listing order
//! (or, unordered, as they finish). Behind that:
//!
//! - **Prefetch.** While the caller writes one object, the next ones are
//!   already downloading on other connections (`requests` at once: dozens,
//!   because a dataset of small objects is bound by round trips, not by
//!   bytes) and decoding on other cores. An object bigger than a slice is read as
//!   several ranges in parallel and fed to its decoder in order, so one
//!   big object goes as fast as many small ones.
//! - **A memory budget.** `read_ahead` bounds what is held and not yet
//!   written. Fetched bytes hold a share of a byte semaphore from before
//!   the request is sent until the decoder (or the writer) is done with
//!   them. Decoded bytes hold a per-object share, so an object ahead of
//!   the writer decodes at most that far and then waits. Half the budget
//!   each when decoding.
//! - **Decoding off the async workers.** Decompression is CPU-bound, so a
//!   decoded object gets a blocking thread ([`decode`](crate::decode))
//!   that pulls its compressed chunks through channels and pushes 1 MiB
//!   blocks out. Only `workers` objects decode at once, taking turns in
//!   listing order: more threads than cores add no speed, and each holds a
//!   decoder window and its decoded share (with 64 decoding at once, a
//!   dataset of 2 MiB zstd objects held 470 MiB against a 256 MiB
//!   budget). Objects read as stored skip the thread: chunks go from the
//!   socket to the caller as they are.
//!
//! Why this cannot deadlock: requests are sent, budget taken and decoding
//! turns given in listing order, and the writer drains the lowest object
//! first. Whatever the lowest object still needs was either already
//! granted or can only be waiting on budget or a turn held by objects
//! *below* it, which are gone. The unordered mode takes an object early
//! only once it is completely decoded (it then needs nothing more),
//! otherwise it drains the lowest one as the ordered mode does. Objects in
//! flight are capped (twice the request slots) so per-object buffers stay
//! bounded however small objects are.
//!
//! Every slice is pinned to the object's generation/ETag and resumes from
//! its last byte after a broken connection, like downloads. The CRCs of
//! the fetched bytes, combined over slices, are checked against the
//! store's checksum at the end of each object (bytes already written
//! cannot be taken back, so a mismatch is an error after the fact, naming
//! the object). An object whose only checksum is an MD5 is hashed in
//! order as its bytes are handed on (by its decoder thread, or by
//! [`Object::next`] for bytes read as stored): MD5 cannot be combined
//! from slices, and the order is there anyway. Where the listing had no checksum (S3's never has), the
//! first slice asks for the whole object, whose headers carry it (and, for
//! a composite one, asks where the parts end), and the object's other
//! slices wait for that before hashing: which CRC to compute and where to
//! cut it must be known from their first byte. The wait costs a slice one
//! round trip at most, and only on objects of several slices.
//!
//! The files, by concern: this one holds the options, the sources and the
//! [`Reader`] and [`Object`] the caller sees; `dispatch` sends the
//! requests and hands out decoding turns, `fetch` reads one slice,
//! `produce` is an object's decoder thread, `shared` what those share
//! about one object, `chunk` the blocks handed to the writer.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, Read};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{
    BoxByteStream, ByteRange, Error, ErrorKind, Location, ObjectMeta, Op, Result, Store,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::decode::{self, Codec, Decompress, MAGIC_LEN, MAX_FEED};
use crate::verify::{Expected, Md5InOrder, Received};

mod chunk;
mod dispatch;
mod fetch;
mod produce;
mod shared;

pub use chunk::Chunk;
use chunk::*;
use dispatch::*;
use fetch::*;
use produce::*;
use shared::*;

/// Decoded bytes per block handed to the writer: big enough that channel
/// and syscall costs vanish, small enough that a block is never a memory
/// concern (objects in flight × 2 blocks at least).
pub const BLOCK: usize = 1 << 20;

/// Default read-ahead budget (`--read-ahead`): room for 16 slices of 16 MiB
/// with 8 workers, far below any machine's memory.
pub const DEFAULT_READ_AHEAD: u64 = 256 << 20;

/// Largest slice: a slice is a request, and past 32 MiB more parallel
/// requests beat longer ones (see [`crate::plan`]).
const MAX_SLICE: u64 = 32 << 20;
/// Smallest slice: below 1 MiB the per-request cost shows.
const MIN_SLICE: u64 = 1 << 20;
/// Local files are read in pieces of this size.
const FILE_PIECE: usize = 1 << 20;

/// Knobs of a [`Reader`].
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Sizes slices: the budget is cut so that each of this many workers
    /// (2 per vCPU by default) has two slices of a big object in hand.
    pub workers: usize,
    /// Requests in flight (default [`crate::DEFAULT_SMALL_WORKERS`]; the
    /// CLI's `--workers` sets it): a dataset of small objects costs a
    /// round trip each, so only many at once fill the pipe. The byte
    /// budget, not this, bounds memory.
    pub requests: usize,
    /// Bytes held and not yet written, fetched and decoded together.
    pub read_ahead: u64,
    /// What to decompress.
    pub decompress: Decompress,
    /// Objects in listing order (true) or whole objects as they finish.
    pub ordered: bool,
    /// Bytes per ranged request (default: from the budget and workers,
    /// 1–32 MiB).
    pub slice_size: Option<u64>,
    /// Counts bytes as they are fetched (compressed), for progress and
    /// `bench read`.
    pub fetched: Option<Arc<AtomicU64>>,
    /// Byte and request rates (see [`crate::rate`]): bytes fetched from a
    /// store are charged as they arrive; local files are not limited.
    pub rates: crate::rate::Rates,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            workers: crate::TransferOptions::default().workers,
            requests: crate::DEFAULT_SMALL_WORKERS,
            read_ahead: DEFAULT_READ_AHEAD,
            decompress: Decompress::default(),
            ordered: true,
            slice_size: None,
            fetched: None,
            rates: crate::rate::Rates::default(),
        }
    }
}

impl ReadOptions {
    /// Bytes of the budget for fetched (compressed) bytes.
    fn fetch_budget(&self) -> u64 {
        let b = if self.decompress == Decompress::Off {
            self.read_ahead
        } else {
            self.read_ahead / 2
        };
        b.clamp(MIN_SLICE, u32::MAX as u64)
    }

    /// Objects in flight: enough that every request slot has an object to
    /// fetch and the next ones are lined up. An object waiting for its
    /// turn to decode costs only its fetched bytes, which the fetch budget
    /// bounds.
    fn in_flight(&self) -> usize {
        (2 * self.requests).max(4 * self.workers).max(4)
    }

    /// Objects decoding at once, each on a blocking thread with its
    /// decoder's window and up to [`Self::decoded_cap`] decoded bytes:
    /// decoding is CPU work, so `workers` (2 per vCPU) keep the cores busy
    /// and more would only hold memory.
    fn decoders(&self) -> usize {
        self.workers.max(1)
    }

    /// Decoded bytes one object may hold before its thread waits.
    fn decoded_cap(&self) -> usize {
        let share = (self.read_ahead / 2) / self.decoders() as u64;
        (share as usize).clamp(2 * BLOCK, u32::MAX as usize)
    }

    fn slice(&self) -> u64 {
        self.slice_size.unwrap_or_else(|| {
            (self.fetch_budget() / (2 * self.workers.max(1) as u64)).clamp(MIN_SLICE, MAX_SLICE)
        })
    }
}

/// Where an object's bytes come from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A store object.
    Store {
        /// The store serving `loc`.
        store: Arc<dyn Store>,
        /// The object.
        loc: Location,
    },
    /// A local file.
    File(PathBuf),
}

/// One object to read: where from, and what a listing or HEAD said.
#[derive(Debug, Clone)]
pub struct Source {
    /// Shown in errors.
    pub url: String,
    /// Where the bytes are.
    pub origin: Origin,
    /// Size, version, checksum, content encoding.
    pub meta: ObjectMeta,
}

impl Source {
    /// A store object with its metadata.
    pub fn object(store: Arc<dyn Store>, loc: Location, meta: ObjectMeta) -> Self {
        Source {
            url: loc.to_string(),
            origin: Origin::Store { store, loc },
            meta,
        }
    }

    /// A local file (its metadata is read now).
    pub fn file(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        let url = path.display().to_string();
        let md = std::fs::metadata(&path).map_err(|e| Error::io(Op::Read, &url, e))?;
        if md.is_dir() {
            return Err(Error::invalid(Op::Read, url, "is a folder, not a file"));
        }
        Ok(Source {
            meta: ObjectMeta {
                key: url.clone(),
                size: md.len(),
                ..ObjectMeta::default()
            },
            url,
            origin: Origin::File(path),
        })
    }
}

/// One object's output, in order.
pub struct Object {
    /// Position in the listing (0-based).
    pub index: usize,
    /// The object's URL.
    pub url: String,
    peeked: Option<Option<Result<Chunk>>>,
    body: Body,
    shared: Arc<Shared>,
    _in_flight: OwnedSemaphorePermit,
}

enum Body {
    /// Stored bytes straight from the slices.
    Direct {
        slices: VecDeque<UnboundedReceiver<Piece>>,
        checked: bool,
        md5: Md5InOrder,
    },
    /// Blocks from the object's decoding thread.
    Decoded(UnboundedReceiver<Result<Chunk>>),
}

impl Object {
    /// The object's metadata (from the listing or HEAD).
    pub fn meta(&self) -> &ObjectMeta {
        &self.shared.meta
    }

    /// The next bytes; None at the end. After an error, the object ends.
    pub async fn next(&mut self) -> Option<Result<Chunk>> {
        if let Some(p) = self.peeked.take() {
            return p;
        }
        match &mut self.body {
            Body::Decoded(rx) => rx.recv().await,
            Body::Direct {
                slices,
                checked,
                md5,
            } => loop {
                let Some(rx) = slices.front_mut() else {
                    if std::mem::replace(checked, true) {
                        return None;
                    }
                    let md5 = std::mem::take(md5).finish(&self.shared.expected());
                    return self.shared.check_crc(md5).err().map(Err);
                };
                match rx.recv().await {
                    Some(Ok((data, hold))) => {
                        md5.update(|| self.shared.expected(), &data);
                        return Some(Ok(Chunk::held(data, hold)));
                    }
                    Some(Err(e)) => {
                        slices.clear();
                        *checked = true;
                        return Some(Err(e));
                    }
                    None => {
                        slices.pop_front();
                    }
                }
            },
        }
    }
}

impl Drop for Object {
    fn drop(&mut self) {
        self.shared.cancelled.store(true, Ordering::SeqCst);
        self.shared.turn.lock().unwrap().take();
    }
}

/// Objects in listing order (or as they finish), read ahead within a budget.
pub struct Reader {
    objects: UnboundedReceiver<Result<Object>>,
    objects_done: bool,
    ready: UnboundedReceiver<usize>,
    pending: BTreeMap<usize, Object>,
    errors: VecDeque<Error>,
    ordered: bool,
    dispatcher: tokio::task::JoinHandle<()>,
    pool: Arc<BlockPool>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.dispatcher.abort();
    }
}

impl Reader {
    /// Starts reading `sources` (a listing may still be producing them).
    /// Must be called within a Tokio runtime.
    pub fn start(
        sources: BoxStream<'static, Result<Source>>,
        opts: ReadOptions,
        policy: RetryPolicy,
    ) -> Reader {
        let (objects_tx, objects) = unbounded_channel();
        let (ready_tx, ready) = unbounded_channel();
        let ordered = opts.ordered;
        let pool = Arc::new(BlockPool::default());
        let dispatcher = tokio::spawn(dispatch(
            sources,
            opts,
            policy,
            pool.clone(),
            objects_tx,
            ready_tx,
        ));
        Reader {
            pool,
            objects,
            objects_done: false,
            ready,
            pending: BTreeMap::new(),
            errors: VecDeque::new(),
            ordered,
            dispatcher,
        }
    }

    /// Decoded bytes in memory now, at most: blocks handed out by the
    /// decoders and not yet dropped (1 MiB each).
    pub fn decoded_held(&self) -> u64 {
        self.pool.out.load(Ordering::Relaxed) as u64 * BLOCK as u64
    }

    /// The next object to drain, or a listing error; None when all are
    /// done. Drain each object before asking for the next (objects ahead
    /// wait for budget the current one frees).
    pub async fn next_object(&mut self) -> Option<Result<Object>> {
        if self.ordered {
            return self.objects.recv().await;
        }
        loop {
            self.drain();
            if let Some(e) = self.errors.pop_front() {
                return Some(Err(e));
            }
            if self.pending.is_empty() && self.objects_done {
                return None;
            }
            // The lowest object is always safe to drain; others only once
            // their producer has finished (they announce it on `ready`).
            let mut lowest = self.pending.pop_first().map(|(_, o)| o);
            tokio::select! {
                biased;
                Some(i) = self.ready.recv() => {
                    if let Some(o) = lowest.take() {
                        if o.index == i {
                            return Some(Ok(o));
                        }
                        self.pending.insert(o.index, o);
                    }
                    self.drain();
                    if let Some(o) = self.pending.remove(&i) {
                        return Some(Ok(o));
                    }
                }
                o = self.objects.recv(), if !self.objects_done => {
                    if let Some(l) = lowest.take() {
                        self.pending.insert(l.index, l);
                    }
                    match o {
                        Some(Ok(o)) => { self.pending.insert(o.index, o); }
                        Some(Err(e)) => self.errors.push_back(e),
                        None => self.objects_done = true,
                    }
                }
                first = async {
                    match lowest.as_mut() {
                        Some(o) => Some(o.next().await),
                        None => None,
                    }
                }, if lowest.is_some() => {
                    let mut o = lowest.take().expect("guarded");
                    o.peeked = first;
                    return Some(Ok(o));
                }
            }
        }
    }

    /// Moves objects the dispatcher has sent into `pending`.
    fn drain(&mut self) {
        while let Ok(o) = self.objects.try_recv() {
            match o {
                Ok(o) => {
                    self.pending.insert(o.index, o);
                }
                Err(e) => self.errors.push_back(e),
            }
        }
    }
}

#[cfg(test)]
mod tests;
