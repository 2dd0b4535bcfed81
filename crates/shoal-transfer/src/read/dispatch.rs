//! Sending the requests: objects in listing order, each cut into slices
//! (`plan`), request slots and read-ahead budget taken in that order
//! (which is what keeps the reader free of deadlock, see the module docs),
//! and the decoder threads' turns.
//!
//! [`dispatch`] is one loop over a hundred lines on purpose: the order of
//! its awaits (an object's in-flight place, then per slice its budget and
//! its request slot, in listing order) is what keeps the reader free of
//! deadlock, and it reads top to bottom in one place.

use super::*;

pub(super) async fn dispatch(
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
        let learns =
            matches!(src.origin, Origin::Store { .. }) && !crate::verify::knows_crc(&src.meta);
        let shared = Arc::new(Shared {
            index: i,
            url: src.url.clone(),
            meta: src.meta.clone(),
            encoding: OnceLock::new(),
            expected: OnceLock::new(),
            got: Mutex::new(vec![None; ranges.len()]),
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
                md5: Md5InOrder::default(),
            }
        } else {
            match decoded_body(rxs, &shared, &opts, &pool, &decode_jobs) {
                Some(body) => body,
                None => return,
            }
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

/// The body of an object decoded on a decoder thread: its job queued for
/// a turn (see [`run_decoders`]). None when the decoders are gone.
fn decoded_body(
    slices: VecDeque<UnboundedReceiver<Piece>>,
    shared: &Arc<Shared>,
    opts: &ReadOptions,
    pool: &Arc<BlockPool>,
    decode_jobs: &UnboundedSender<DecodeJob>,
) -> Option<Body> {
    let (out_tx, out_rx) = unbounded_channel();
    let input = SliceReader {
        slices,
        cur: None,
        pos: 0,
        consumed: 0,
        error: None,
        md5: Md5InOrder::default(),
        shared: shared.clone(),
    };
    let job_shared = shared.clone();
    let shared = shared.clone();
    let mode = opts.decompress;
    let cap = opts.decoded_cap();
    let pool = pool.clone();
    let handle = tokio::runtime::Handle::current();
    let job: Box<dyn FnOnce() + Send> = Box::new(move || {
        let r = produce(input, &shared, mode, cap, &pool, &out_tx, &handle);
        if let Err(e) = r {
            let _ = out_tx.send(Err(e));
        }
        drop(out_tx);
        let _ = shared.ready.send(shared.index);
    });
    decode_jobs.send((job_shared, job)).ok()?;
    Some(Body::Decoded(out_rx))
}

/// An object's decoding, run on a blocking thread.
pub(super) type DecodeJob = (Arc<Shared>, Box<dyn FnOnce() + Send>);

/// Starts decoding jobs, `n` at a time, in the order they come (listing
/// order). A turn lasts until the reader drops the object, not just until
/// it is decoded: a decoded object waiting to be written holds up to its
/// decoded share, and only so is the total bounded (objects smaller than
/// their share would otherwise decode ahead without limit). The lowest
/// object the writer waits for always has its turn, since every object
/// holding one is above it and got it later.
pub(super) async fn run_decoders(mut jobs: UnboundedReceiver<DecodeJob>, n: usize) {
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
pub(super) fn plan(meta: &ObjectMeta, slice: u64) -> Vec<(u64, u64)> {
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
