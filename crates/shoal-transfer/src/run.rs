//! What one run of the engines shares: the user's settings, read only,
//! and the budgets its transfers draw on.
//!
//! The two used to be one struct, so a front end mapping `--part-size`
//! also saw semaphores it had to leave alone, and every engine that made a
//! budget of its own cloned settings with it. They change for different
//! reasons: settings are what a flag or a Python keyword says (plain data,
//! compared and defaulted), budgets are made once per run (a command, a
//! batch, one Python call) and shared by every clone of it, so a batch of
//! many files stays within one set of request slots, one byte and request
//! rate and one progress counter however many transfers it starts.
//!
//! A lone transfer ([`Run::new`]) has unlimited budgets: its requests are
//! bounded by its own slices and parts. [`crate::batch::share_budgets`]
//! gives a batch its shared ones; a front end adds the command's rates and
//! a progress counter.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use shoal_core::sent::{self, Sent};

use crate::{TransferOptions, rate};

/// Granule of a [`SmallBudget`]'s memory.
pub const MEMORY_UNIT: u64 = 64 << 10;
/// Units a cheap request of 1 MiB or more (or of unknown size) holds,
/// 1 MiB: a download's write batch and the receive buffers its chunks keep
/// alive, an upload's whole buffer ([`crate::SMALL_UPLOAD`]).
pub const WRITE_BUFFER_UNITS: u32 = ((1 << 20) / MEMORY_UNIT) as u32;
/// Buffers the cheap requests of a batch hold together at most: 64 MiB,
/// 64 requests that each hold 1 MiB.
pub const SMALL_MEMORY: u64 = 64 << 20;

/// One run: the user's settings and the run's budgets, what the engines
/// take. Cheap to clone; clones share the settings and the budgets.
#[derive(Debug, Clone)]
pub struct Run {
    /// What the user asked.
    pub opts: Arc<TransferOptions>,
    /// What this run's transfers draw on.
    pub budgets: Budgets,
}

impl Run {
    /// A run of `opts` with unlimited budgets and no progress counter.
    pub fn new(opts: TransferOptions) -> Self {
        Run {
            opts: Arc::new(opts),
            budgets: Budgets::default(),
        }
    }

    /// This run, counting the bytes it moves into `counter`.
    pub fn with_progress(mut self, counter: Arc<AtomicU64>) -> Self {
        self.budgets.progress = Some(counter);
        self
    }

    /// This run, paced by `rates` (the command's, shared with its reads).
    pub fn with_rates(mut self, rates: rate::Rates) -> Self {
        self.budgets.rates = rates;
        self
    }

    /// This run for one transfer: when it is one cheap request (`small`
    /// gives at most how many bytes it holds; None: not cheap), its
    /// requests draw on the batch's small budget; otherwise it is used as
    /// it is, uncloned.
    pub(crate) fn for_transfer(&self, small: Option<u64>) -> std::borrow::Cow<'_, Run> {
        match (&self.budgets.small, small) {
            (Some(b), Some(bytes)) => std::borrow::Cow::Owned(Run {
                budgets: Budgets {
                    small: Some(SmallBudget {
                        share: bytes
                            .div_ceil(MEMORY_UNIT)
                            .clamp(1, WRITE_BUFFER_UNITS as u64)
                            as u32,
                        ..b.clone()
                    }),
                    ..self.budgets.clone()
                },
                opts: self.opts.clone(),
            }),
            _ => std::borrow::Cow::Borrowed(self),
        }
    }
}

/// The budgets of one run, made once and shared by its clones: none set
/// means unlimited.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    /// The slots and buffer memory cheap requests share
    /// ([`crate::batch::share_budgets`] makes it; see [`SmallBudget`]).
    pub small: Option<SmallBudget>,
    /// Cloud-to-cloud copies in progress in a batch, beyond the small ones
    /// (`batch::share_budgets` makes it, 2 × workers): each reads a part of
    /// its source into memory before it can wait for an upload slot.
    pub stream_copies: Option<Arc<tokio::sync::Semaphore>>,
    /// Requests in flight across every transfer sharing this limiter. A
    /// batch of many files shares one, so big files' slices and small
    /// files' single requests draw from the same budget (`--workers`),
    /// instead of files × slices requests. Only requests hold permits,
    /// never whole files, so a file waiting for its slices cannot starve
    /// them.
    pub limiter: Option<Arc<tokio::sync::Semaphore>>,
    /// Bytes moved so far, for progress displays.
    pub progress: Option<Arc<AtomicU64>>,
    /// Byte and request rates for the whole command (see [`rate`]);
    /// unlimited by default.
    pub rates: rate::Rates,
}

impl Budgets {
    /// Waits for a request slot (a cheap request's from the batch's small
    /// budget, after its share of the budget's memory; any other's from
    /// `limiter` when one is shared), then for the request rate.
    pub(crate) async fn permit(&self) -> Slot {
        let (memory, request) = match &self.small {
            Some(b) if b.share > 0 => (
                b.memory.clone().acquire_many_owned(b.share).await.ok(),
                b.slots.clone().acquire_owned().await.ok(),
            ),
            _ => match &self.limiter {
                Some(l) => (None, l.clone().acquire_owned().await.ok()),
                None => (None, None),
            },
        };
        self.rates.request().await;
        Slot {
            _request: request,
            _memory: memory,
        }
    }

    pub(crate) fn add_progress(&self, n: u64) {
        if let Some(p) = &self.progress {
            p.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Runs `upload`, which sends one body of `len` bytes, counting the
    /// body in the progress total as the connection takes it (see
    /// [`shoal_core::sent`]), and all of it once `upload` succeeds; a
    /// failed one takes back what it counted, so an attempt made again
    /// counts from the start.
    pub(crate) async fn sending<T>(
        &self,
        len: u64,
        upload: impl Future<Output = shoal_core::Result<T>>,
    ) -> shoal_core::Result<T> {
        let Some(total) = &self.progress else {
            return upload.await;
        };
        let sent = Sent::new(total.clone());
        let result = sent::counting(sent.clone(), upload).await;
        match &result {
            Ok(_) => sent.done(len),
            Err(_) => sent.undo(),
        }
        result
    }
}

/// What a batch's cheap requests share: `small_workers` request slots and
/// [`SMALL_MEMORY`] of buffers, in [`MEMORY_UNIT`]s. A request takes units
/// by what it may hold: a 16 KiB file one, so all the slots fill; a file of
/// 1 MiB and more (or of unknown size) [`WRITE_BUFFER_UNITS`], so at most
/// 64 of those are in flight however many slots there are.
#[derive(Debug, Clone)]
pub struct SmallBudget {
    slots: Arc<tokio::sync::Semaphore>,
    memory: Arc<tokio::sync::Semaphore>,
    /// Units one request made with these budgets takes: 0 in the batch's
    /// own (its requests are not all cheap), set by `Run::for_transfer`
    /// on one cheap transfer's copy.
    share: u32,
}

impl SmallBudget {
    /// `slots` requests at once, within [`SMALL_MEMORY`].
    pub fn new(slots: usize) -> Self {
        SmallBudget {
            slots: Arc::new(tokio::sync::Semaphore::new(slots.max(1))),
            memory: Arc::new(tokio::sync::Semaphore::new(
                (SMALL_MEMORY / MEMORY_UNIT) as usize,
            )),
            share: 0,
        }
    }
}

/// A request's place in the limits it is under, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    _request: Option<tokio::sync::OwnedSemaphorePermit>,
    _memory: Option<tokio::sync::OwnedSemaphorePermit>,
}
