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
//! the object). Where the listing had no checksum (S3's never has), the
//! first slice asks for the whole object, whose headers carry it (and, for
//! a composite one, asks where the parts end), and the object's other
//! slices wait for that before hashing: which CRC to compute and where to
//! cut it must be known from their first byte. The wait costs a slice one
//! round trip at most, and only on objects of several slices.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, Read};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_core::checksum::{CrcKind, OtherCrc, PartPiece, Running};
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{
    BoxByteStream, ByteRange, Error, ErrorKind, Location, ObjectMeta, Op, Result, Store,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::composite::PartCheck;
use crate::decode::{self, Codec, Decompress, MAGIC_LEN, MAX_FEED};
use crate::download::{Received, check_received};

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

/// Bytes for the caller, holding their share of the memory budget until
/// dropped.
#[derive(Debug)]
pub struct Chunk {
    data: Bytes,
    _hold: Option<OwnedSemaphorePermit>,
    /// Where a decoded block goes back when the caller is done with it.
    pool: Option<Arc<BlockPool>>,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.put(std::mem::take(&mut self.data));
        }
    }
}

/// Decoded blocks for reuse. A fresh 1 MiB block is fresh pages: the
/// kernel faults and zeroes each of them, and for a dataset that is 256
/// faults per MiB written, a fifth of the CPU of `cat -d`. Blocks come
/// back when the caller drops a [`Chunk`] and holds no other reference to
/// its bytes (hand the chunk itself to a writer thread, not a clone of its
/// bytes, and the block returns after the write).
#[derive(Debug, Default)]
struct BlockPool {
    kept: Mutex<Vec<bytes::BytesMut>>,
    /// Blocks handed out and not yet dropped: decoded bytes in memory.
    out: AtomicUsize,
}

impl BlockPool {
    /// Blocks kept: what a few decoders and a writer's queue have out.
    const KEEP: usize = 32;

    fn take(&self) -> bytes::BytesMut {
        self.out.fetch_add(1, Ordering::Relaxed);
        let mut b = self
            .kept
            .lock()
            .unwrap()
            .pop()
            .unwrap_or_else(|| bytes::BytesMut::with_capacity(BLOCK));
        // Zeroes a block on its first use only: kept blocks are BLOCK long.
        b.resize(BLOCK, 0);
        b
    }

    /// Returns a block handed out by take() (given back or dropped).
    fn put(&self, data: Bytes) {
        self.out.fetch_sub(1, Ordering::Relaxed);
        let Ok(mut b) = data.try_into_mut() else {
            return;
        };
        if b.capacity() != BLOCK {
            return;
        }
        // An object's last block comes back short; zeroing its tail again
        // at the next take() was 2% of `cat -d`'s CPU.
        // SAFETY: this is a block take() made: the same allocation from
        // its start (the capacity says so: a block is never advanced or
        // grown), whose BLOCK bytes take() initialised, and bytes once
        // initialised stay so; truncating only moved `len` back.
        unsafe { b.set_len(BLOCK) };
        let mut kept = self.kept.lock().unwrap();
        if kept.len() < Self::KEEP {
            kept.push(b);
        }
    }
}

impl Chunk {
    /// The bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }
}

impl Chunk {
    /// Bytes that are not a pooled block, with their budget share if any.
    fn held(data: Bytes, hold: Option<OwnedSemaphorePermit>) -> Self {
        Chunk {
            data,
            _hold: hold,
            pool: None,
        }
    }
}

/// Bytes of the caller's own (a separator, say) to go out with chunks.
impl From<Bytes> for Chunk {
    fn from(data: Bytes) -> Self {
        Chunk::held(data, None)
    }
}

impl std::ops::Deref for Chunk {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

type Piece = Result<(Bytes, Option<OwnedSemaphorePermit>)>;

/// What an object's fetch tasks, its decoder and its reader share.
struct Shared {
    index: usize,
    url: String,
    meta: ObjectMeta,
    /// `Content-Encoding`: from the listing, else from the first response.
    encoding: OnceLock<Option<String>>,
    crcs: Mutex<Vec<Option<(u32, u64)>>>,
    /// The store's checksums (CRC32C, other CRC) from the first response,
    /// when the listing had none (an S3 listing never has).
    stored: OnceLock<(Option<u32>, Option<OtherCrc>)>,
    /// Each slice's other CRC, when the store has only that.
    others: Mutex<Vec<Option<u64>>>,
    /// For an object whose only checksum is composite: the check, learnt
    /// by the first slice, and each slice's part pieces.
    parts: OnceLock<PartCheck>,
    pieces: Mutex<Vec<Option<Vec<PartPiece>>>>,
    /// True once the first slice has learnt what `stored` and `parts` can
    /// hold (or gave up). The other slices of the object wait for it
    /// before they hash a byte: which CRC to compute and where the parts
    /// end must be known from the start.
    learnt: tokio::sync::watch::Sender<bool>,
    slices_left: AtomicUsize,
    cancelled: AtomicBool,
    ready: UnboundedSender<usize>,
    /// The decoding turn (see [`run_decoders`]), returned when the reader
    /// drops the object.
    turn: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Shared {
    /// The store's CRC32C and other CRC: from the listing, else from the
    /// first response.
    fn stored(&self) -> (Option<u32>, Option<OtherCrc>) {
        match self.stored.get() {
            Some(&s) => s,
            None => (self.meta.crc32c, self.meta.other_crc),
        }
    }

    /// The other CRC to compute while fetching, for a store that has only
    /// that (combined over slices like CRC32C).
    fn other_kind(&self) -> Option<CrcKind> {
        match self.stored() {
            (None, Some(other)) => Some(other.kind()),
            _ => None,
        }
    }

    /// Compares the fetched bytes' checksums, combined over slices, with
    /// the strongest the store has (see [`check_received`]).
    fn check_crc(&self) -> Result<()> {
        let crcs = self.crcs.lock().unwrap();
        if crcs.iter().any(Option::is_none) {
            return Ok(()); // a slice failed and said so
        }
        let crcs: Vec<(u32, u64)> = crcs.iter().flatten().copied().collect();
        let got = Received::of_slices(
            &crcs,
            self.other_kind(),
            &self.others.lock().unwrap(),
            &self.pieces.lock().unwrap(),
        );
        let (want, other) = self.stored();
        check_received(want, other, self.parts.get(), &got, Op::Read, &self.url, "").map(drop)
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
            Body::Direct { slices, checked } => loop {
                let Some(rx) = slices.front_mut() else {
                    if std::mem::replace(checked, true) {
                        return None;
                    }
                    return self.shared.check_crc().err().map(Err);
                };
                match rx.recv().await {
                    Some(Ok((data, hold))) => return Some(Ok(Chunk::held(data, hold))),
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

async fn dispatch(
    mut sources: BoxStream<'static, Result<Source>>,
    opts: ReadOptions,
    policy: RetryPolicy,
    pool: Arc<BlockPool>,
    objects: UnboundedSender<Result<Object>>,
    ready: UnboundedSender<usize>,
) {
    let budget_total = opts.fetch_budget();
    let budget = Arc::new(Semaphore::new(budget_total as usize));
    let slots = Arc::new(Semaphore::new(opts.requests.max(1)));
    let in_flight = Arc::new(Semaphore::new(opts.in_flight()));
    let (decode_jobs, jobs) = unbounded_channel();
    tokio::spawn(run_decoders(jobs, opts.decoders()));
    let slice = opts.slice();
    let mut index = 0;
    while let Some(src) = sources.next().await {
        let i = index;
        index += 1;
        let src = match src {
            Ok(s) => s,
            Err(e) => {
                if objects.send(Err(e)).is_err() {
                    return;
                }
                continue;
            }
        };
        let Ok(flight) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let ranges = plan(&src.meta, slice);
        // A listing or HEAD without a CRC (S3's listings never have one):
        // the first slice asks for the whole object, whose headers carry
        // what the store has.
        let learns = matches!(src.origin, Origin::Store { .. })
            && src.meta.crc32c.is_none()
            && src.meta.other_crc.is_none();
        let shared = Arc::new(Shared {
            index: i,
            url: src.url.clone(),
            meta: src.meta.clone(),
            encoding: OnceLock::new(),
            crcs: Mutex::new(vec![None; ranges.len()]),
            stored: OnceLock::new(),
            others: Mutex::new(vec![None; ranges.len()]),
            parts: OnceLock::new(),
            pieces: Mutex::new(vec![None; ranges.len()]),
            learnt: tokio::sync::watch::Sender::new(!learns),
            slices_left: AtomicUsize::new(ranges.len()),
            cancelled: AtomicBool::new(false),
            ready: ready.clone(),
            turn: Mutex::new(None),
        });
        if src.meta.content_encoding.is_some() {
            let _ = shared.encoding.set(src.meta.content_encoding.clone());
        }
        let (txs, rxs): (Vec<_>, VecDeque<_>) = ranges.iter().map(|_| unbounded_channel()).unzip();
        let body = if opts.decompress == Decompress::Off {
            if ranges.is_empty() {
                let _ = ready.send(i);
            }
            Body::Direct {
                slices: rxs,
                checked: false,
            }
        } else {
            let (out_tx, out_rx) = unbounded_channel();
            let input = SliceReader {
                slices: rxs,
                cur: None,
                pos: 0,
                consumed: 0,
                error: None,
            };
            let shared = shared.clone();
            let mode = opts.decompress;
            let cap = opts.decoded_cap();
            let pool = pool.clone();
            let handle = tokio::runtime::Handle::current();
            let job_shared = shared.clone();
            let job: Box<dyn FnOnce() + Send> = Box::new(move || {
                let r = produce(input, &shared, mode, cap, &pool, &out_tx, &handle);
                if let Err(e) = r {
                    let _ = out_tx.send(Err(e));
                }
                drop(out_tx);
                let _ = shared.ready.send(shared.index);
            });
            if decode_jobs.send((job_shared, job)).is_err() {
                return;
            }
            Body::Decoded(out_rx)
        };
        let object = Object {
            index: i,
            url: src.url.clone(),
            peeked: None,
            body,
            shared: shared.clone(),
            _in_flight: flight,
        };
        if objects.send(Ok(object)).is_err() {
            return;
        }
        for (n, (range, tx)) in ranges.into_iter().zip(txs).enumerate() {
            let want = (range.1 - range.0).min(budget_total) as u32;
            let Ok(reservation) = budget.clone().acquire_many_owned(want).await else {
                return;
            };
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let fetch = Fetch {
                origin: src.origin.clone(),
                shared: shared.clone(),
                slice: n,
                range,
                policy,
                budget: budget.clone(),
                budget_total,
                fetched: opts.fetched.clone(),
                rates: opts.rates.clone(),
                direct: opts.decompress == Decompress::Off,
            };
            tokio::spawn(async move {
                fetch.run(tx, reservation).await;
                drop(slot);
            });
        }
    }
}

/// An object's decoding, run on a blocking thread.
type DecodeJob = (Arc<Shared>, Box<dyn FnOnce() + Send>);

/// Starts decoding jobs, `n` at a time, in the order they come (listing
/// order). A turn lasts until the reader drops the object, not just until
/// it is decoded: a decoded object waiting to be written holds up to its
/// decoded share, and only so is the total bounded (objects smaller than
/// their share would otherwise decode ahead without limit). The lowest
/// object the writer waits for always has its turn, since every object
/// holding one is above it and got it later.
async fn run_decoders(mut jobs: UnboundedReceiver<DecodeJob>, n: usize) {
    let turns = Arc::new(Semaphore::new(n));
    while let Some((shared, job)) = jobs.recv().await {
        let Ok(turn) = turns.clone().acquire_owned().await else {
            return;
        };
        *shared.turn.lock().unwrap() = Some(turn);
        if shared.cancelled.load(Ordering::SeqCst) {
            // Dropped while waiting: Object::drop found no turn to return.
            shared.turn.lock().unwrap().take();
        }
        tokio::task::spawn_blocking(job);
    }
}

/// The ranges an object is read in. Objects stored with a content encoding
/// are read in one request: GCS may ignore ranges on them.
fn plan(meta: &ObjectMeta, slice: u64) -> Vec<(u64, u64)> {
    let size = meta.size;
    if size == 0 {
        return Vec::new();
    }
    let encoded = meta
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != "identity");
    if encoded || size <= slice + slice / 2 {
        return vec![(0, size)];
    }
    let n = size.div_ceil(slice);
    let each = size.div_ceil(n);
    (0..n)
        .map(|i| (i * each, ((i + 1) * each).min(size)))
        .filter(|(a, b)| a < b)
        .collect()
}

struct Fetch {
    origin: Origin,
    shared: Arc<Shared>,
    slice: usize,
    range: (u64, u64),
    policy: RetryPolicy,
    budget: Arc<Semaphore>,
    budget_total: u64,
    fetched: Option<Arc<AtomicU64>>,
    rates: crate::rate::Rates,
    direct: bool,
}

impl Fetch {
    async fn run(self, tx: UnboundedSender<Piece>, reservation: OwnedSemaphorePermit) {
        match self.pump(&tx, reservation).await {
            Ok(Some((crc, n))) => self.shared.crcs.lock().unwrap()[self.slice] = Some((crc, n)),
            Ok(None) => {}
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
        if self.slice == 0 {
            // Failed or cancelled before learning: the others need not wait.
            self.shared.learnt.send_replace(true);
        }
        drop(tx);
        let last = self.shared.slices_left.fetch_sub(1, Ordering::AcqRel) == 1;
        if last && self.direct {
            let _ = self.shared.ready.send(self.shared.index);
        }
    }

    /// Sends the slice's bytes; returns its CRC32C and length, or None
    /// when the reader went away.
    async fn pump(
        &self,
        tx: &UnboundedSender<Piece>,
        reservation: OwnedSemaphorePermit,
    ) -> Result<Option<(u32, u64)>> {
        let (start, end) = self.range;
        let mut stream = self.open().await?;
        if matches!(self.origin, Origin::Store { .. }) {
            stream = self.rates.pace(stream);
        }
        // The first slice's request was sent before this one's (requests
        // go in order) and waits on nothing of this slice's: no deadlock.
        if self.slice > 0 {
            let _ = (self.shared.learnt.subscribe().wait_for(|&done| done)).await;
        }
        let mut reservation = Some(reservation);
        let mut n = 0u64;
        let parts = self.shared.parts.get().map(|c| c.sums(start));
        let mut sums = Running::new(self.shared.other_kind()).with_parts(parts);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if self.shared.cancelled.load(Ordering::Relaxed) {
                return Ok(None);
            }
            sums.update(&chunk);
            n += chunk.len() as u64;
            if let Some(f) = &self.fetched {
                f.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            let hold = self.hold(&mut reservation, chunk.len()).await;
            if tx.send(Ok((chunk, hold))).is_err() {
                return Ok(None);
            }
        }
        if n != end - start {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Read,
                &self.shared.url,
                format!(
                    "bytes {start}-{end}: received {n} bytes, expected {}",
                    end - start
                ),
            ));
        }
        if let Some(got) = sums.other() {
            self.shared.others.lock().unwrap()[self.slice] = Some(got.value());
        }
        self.shared.pieces.lock().unwrap()[self.slice] = sums.take_parts();
        Ok(Some((sums.crc32c, n)))
    }

    /// The budget share for `n` bytes: from the reservation made before the
    /// request, or (past it, for slices bigger than the budget) newly taken.
    async fn hold(
        &self,
        reservation: &mut Option<OwnedSemaphorePermit>,
        n: usize,
    ) -> Option<OwnedSemaphorePermit> {
        if let Some(r) = reservation {
            if r.num_permits() > n {
                return r.split(n);
            }
            let mut have = reservation.take()?;
            let more = n - have.num_permits();
            if more > 0 {
                let more = (more as u64).min(self.budget_total) as u32;
                if let Ok(p) = self.budget.clone().acquire_many_owned(more).await {
                    have.merge(p);
                }
            }
            return Some(have);
        }
        let want = (n as u64).min(self.budget_total) as u32;
        self.budget.clone().acquire_many_owned(want).await.ok()
    }

    async fn open(&self) -> Result<BoxByteStream> {
        let (start, end) = self.range;
        let url = &self.shared.url;
        match &self.origin {
            Origin::Store { store, loc } => {
                let version = self.shared.meta.version.clone();
                let range = ByteRange::new(start, end);
                // A whole object asked for as such (no Range header): S3
                // sends its stored checksum only then, and a listing has
                // none. For an object of several slices the body is cut
                // after the first (its connection is closed, as downloads
                // do), and the others wait for what it learns.
                let meta = &self.shared.meta;
                let learn = start == 0 && !*self.shared.learnt.borrow();
                let asked = if learn { ByteRange::from(0) } else { range };
                self.rates.request().await;
                let mut first = (store.get(&loc.bucket, &loc.key, asked, version.as_ref()))
                    .await
                    .map_err(|e| e.with_url(url).with_op(Op::Read))?;
                if learn && first.meta.size == meta.size {
                    let _ = self
                        .shared
                        .stored
                        .set((first.meta.crc32c, first.meta.other_crc));
                    if let Some(check) =
                        PartCheck::learn(store, loc, &first.meta, Op::Read, &self.rates).await?
                    {
                        let _ = self.shared.parts.set(check);
                    }
                }
                if learn {
                    if end < meta.size {
                        first.body = crate::download::take_bytes(first.body, end - start);
                    }
                    self.shared.learnt.send_replace(true);
                }
                if self.slice == 0 {
                    let _ = self
                        .shared
                        .encoding
                        .set(first.meta.content_encoding.clone());
                }
                Ok(resuming_stream(
                    store.clone(),
                    &loc.bucket,
                    &loc.key,
                    url,
                    range,
                    version,
                    Some(first.body),
                    self.policy,
                ))
            }
            Origin::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| Error::io(Op::Read, url, e))?;
                Ok(file_stream(Arc::new(file), start, end, url.clone()))
            }
        }
    }
}

/// `[start, end)` of a local file in pieces read on the blocking pool.
fn file_stream(file: Arc<std::fs::File>, start: u64, end: u64, url: String) -> BoxByteStream {
    futures::stream::unfold(start, move |pos| {
        let (file, url) = (file.clone(), url.clone());
        async move {
            if pos >= end {
                return None;
            }
            let len = ((end - pos) as usize).min(FILE_PIECE);
            let read = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; len];
                let n = file.read_at(&mut buf, pos)?;
                buf.truncate(n);
                Ok::<_, io::Error>(buf)
            })
            .await;
            let r = match read {
                Ok(Ok(buf)) if buf.is_empty() => Err(Error::new(
                    ErrorKind::Integrity,
                    Op::Read,
                    &url,
                    format!("file ended at byte {pos} of {end} (truncated while read?)"),
                )),
                Ok(Ok(buf)) => Ok(Bytes::from(buf)),
                Ok(Err(e)) => Err(Error::io(Op::Read, &url, e)),
                Err(e) => Err(Error::new(ErrorKind::Io, Op::Read, &url, e.to_string())),
            };
            let next = match &r {
                Ok(b) => pos + b.len() as u64,
                Err(_) => end,
            };
            Some((r, next))
        }
    })
    .boxed()
}

/// The decoding thread of one object: picks the codec from its first bytes
/// and pushes decoded blocks (or, for plain bytes, the fetched chunks as
/// they are) to the reader.
fn produce(
    mut input: SliceReader,
    shared: &Shared,
    mode: Decompress,
    cap: usize,
    pool: &Arc<BlockPool>,
    out: &UnboundedSender<Result<Chunk>>,
    handle: &tokio::runtime::Handle,
) -> Result<()> {
    let url = shared.url.as_str();
    let head = input
        .peek(MAGIC_LEN)
        .map_err(|e| input.fetch_error(url, e))?;
    let encoding = shared.encoding.get().cloned().flatten();
    let codec = decode::choose(mode, encoding.as_deref(), &head, &shared.meta.key);
    if codec == Codec::Plain {
        while let Some((data, hold)) = input.next_piece().map_err(|e| input.fetch_error(url, e))? {
            if out.send(Ok(Chunk::held(data, hold))).is_err() {
                return Ok(());
            }
        }
        return shared.check_crc();
    }
    let cap_sem = Arc::new(Semaphore::new(cap));
    let mut dec = DecodeState {
        input: &mut input,
        codec,
    };
    let pump = |reader: &mut dyn Read| -> io::Result<()> {
        loop {
            if shared.cancelled.load(Ordering::Relaxed) {
                return Ok(());
            }
            let mut buf = pool.take();
            let mut filled = 0;
            let mut failed = None;
            while filled < BLOCK {
                match reader.read(&mut buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            buf.truncate(filled);
            // From here on, dropping the chunk gives the block back.
            let mut chunk = Chunk {
                data: buf.freeze(),
                _hold: None,
                pool: Some(pool.clone()),
            };
            if let Some(e) = failed {
                return Err(e);
            }
            if filled == 0 {
                return Ok(());
            }
            let Ok(hold) = handle.block_on(cap_sem.clone().acquire_many_owned(filled as u32))
            else {
                return Ok(());
            };
            chunk._hold = Some(hold);
            if out.send(Ok(chunk)).is_err() {
                return Ok(());
            }
        }
    };
    match decode::with_decoder(codec, &mut dec, pump) {
        Err(e) => return Err(decode::decode_error(codec, url, 0, &e)),
        Ok(Err(e)) => return Err(dec.error(url, &e)),
        Ok(Ok(())) => {}
    }
    if shared.cancelled.load(Ordering::Relaxed) {
        return Ok(());
    }
    shared.check_crc()
}

/// The decoder's input, with what is needed to word its errors.
struct DecodeState<'a> {
    input: &'a mut SliceReader,
    codec: Codec,
}

impl DecodeState<'_> {
    fn error(&mut self, url: &str, e: &io::Error) -> Error {
        if let Some(fetch) = self.input.error.take() {
            return fetch;
        }
        decode::decode_error(self.codec, url, self.input.consumed, e)
    }
}

impl Read for &mut DecodeState<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl BufRead for &mut DecodeState<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.input.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.input.consume(n)
    }
}

/// An object's compressed bytes as a `BufRead`: its slices' channels, one
/// after the other, read on the decoding thread. Counts what the decoder
/// consumed (for error offsets) and releases each chunk's budget share
/// once consumed.
struct SliceReader {
    slices: VecDeque<UnboundedReceiver<Piece>>,
    cur: Option<(Bytes, Option<OwnedSemaphorePermit>)>,
    pos: usize,
    consumed: u64,
    error: Option<Error>,
}

impl SliceReader {
    /// The next chunk from the channels.
    fn recv_piece(&mut self) -> io::Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>> {
        loop {
            let Some(rx) = self.slices.front_mut() else {
                return Ok(None);
            };
            match rx.blocking_recv() {
                Some(Ok(p)) if p.0.is_empty() => {}
                Some(Ok(p)) => return Ok(Some(p)),
                Some(Err(e)) => {
                    self.slices.clear();
                    let msg = e.to_string();
                    self.error = Some(e);
                    return Err(io::Error::other(msg));
                }
                None => {
                    self.slices.pop_front();
                }
            }
        }
    }

    /// The next chunk whole, for bytes passed through (the unread rest of
    /// the current one first).
    fn next_piece(&mut self) -> io::Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>> {
        if let Some((data, hold)) = self.cur.take() {
            let pos = std::mem::take(&mut self.pos);
            if pos < data.len() {
                self.consumed += (data.len() - pos) as u64;
                return Ok(Some((data.slice(pos..), hold)));
            }
        }
        let p = self.recv_piece()?;
        if let Some((d, _)) = &p {
            self.consumed += d.len() as u64;
        }
        Ok(p)
    }

    /// The first `n` bytes (fewer if the object is shorter), joining
    /// chunks if the first is shorter, left unconsumed. Call before any
    /// read.
    fn peek(&mut self, n: usize) -> io::Result<Bytes> {
        let mut pieces = Vec::new();
        let mut total = 0;
        while total < n {
            match self.recv_piece()? {
                Some(p) => {
                    total += p.0.len();
                    pieces.push(p);
                }
                None => break,
            }
        }
        let cur = if pieces.len() <= 1 {
            pieces.pop()
        } else {
            let mut data = Vec::with_capacity(total);
            let mut hold: Option<OwnedSemaphorePermit> = None;
            for (d, h) in pieces {
                data.extend_from_slice(&d);
                match (&mut hold, h) {
                    (Some(a), Some(b)) => a.merge(b),
                    (a @ None, b) => *a = b,
                    _ => {}
                }
            }
            Some((Bytes::from(data), hold))
        };
        let peek = cur
            .as_ref()
            .map(|(d, _)| d.slice(..n.min(d.len())))
            .unwrap_or_default();
        self.cur = cur;
        self.pos = 0;
        Ok(peek)
    }

    fn fetch_error(&mut self, url: &str, e: io::Error) -> Error {
        self.error
            .take()
            .unwrap_or_else(|| Error::new(ErrorKind::Io, Op::Read, url, e.to_string()))
    }
}

impl Read for SliceReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let have = self.fill_buf()?;
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for SliceReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let exhausted = self.cur.as_ref().is_none_or(|(d, _)| self.pos >= d.len());
        if exhausted {
            self.cur = None;
            match self.recv_piece()? {
                Some(p) => {
                    self.cur = Some(p);
                    self.pos = 0;
                }
                None => return Ok(&[]),
            }
        }
        let (d, _) = self.cur.as_ref().expect("filled above");
        let end = d.len().min(self.pos + MAX_FEED);
        Ok(&d[self.pos..end])
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        self.consumed += n as u64;
        if self.cur.as_ref().is_some_and(|(d, _)| self.pos >= d.len()) {
            self.cur = None;
            self.pos = 0;
        }
    }
}

#[cfg(test)]
mod tests;
