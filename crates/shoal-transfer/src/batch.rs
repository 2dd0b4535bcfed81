//! Running many transfers as one batch: `cp -r`, `sync`, `run`.
//!
//! One scheduler for all of them. Actions arrive as a stream (from a
//! lister, a sync plan or a run file) and are executed with at most twice
//! as many files in progress as there are request slots. Two limiters
//! hold those slots, by what a request costs:
//!
//! - transfers that are one cheap request (a delete, a download of one
//!   stream, an upload of at most 1 MiB) take a slot of `small_workers`
//!   (default 128): they are bound by round trips, not by bytes, so many
//!   must be in flight at once to keep the pipe full. They also take a
//!   share of 64 MiB by what they may hold (a 16 KiB file 64 KiB, a file
//!   of 1 MiB or more, or of unknown size, 1 MiB), so tiny files fill every
//!   slot while bigger ones stop at 64 and memory stays bounded;
//! - everything else (a big file's slices or parts, a mid-size file's one
//!   PUT of its whole buffer) takes a slot of `workers` (2 per vCPU), the
//!   same budget a single big object has, so memory stays bounded.
//!
//! Every request takes its slot before it reads a byte into memory, and
//! cloud-to-cloud copies that buffer parts are at most `2 × workers` at a
//! time, so the many files in progress hold nothing while they wait. A big
//! file in the batch is sliced by the same engine as a single big object.
//! Twice as many files as slots are in progress so that local I/O and
//! checksums of the next files overlap the network wait of the current
//! ones. Each copy is routed by [`crate::copy::copy_one`], as `cp` of one
//! object is.
//!
//! A failing file is recorded with its URL and the batch goes on; the
//! caller prints the failures at the end and exits 1. Failures of one
//! cause (every file of a tree refused by one read-only folder, or by
//! missing credentials) are also gathered as one [`Cause`] with a count and
//! the first few files, so a front end can say it once instead of once
//! per file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::stream::{BoxStream, StreamExt};
use shoal_core::error::escape_controls;
use shoal_core::retry::RetryPolicy;
use shoal_core::{Error, ErrorKind, Location, ObjectMeta, Op, Result, Seen, Skip};

use crate::copy::copy_one;
use crate::plural;
use crate::safety;
use crate::safety::deletes::{LocalStamp, delete_at, delete_moved, delete_object, remove_local};
use crate::{Run, SmallBudget};

pub use shoal_core::StoreFor;

/// One step of a batch.
#[derive(Debug, Clone)]
// Copy dominates a batch, so boxing its metadata would only add an
// allocation per file.
#[allow(clippy::large_enum_variant)]
pub enum Action {
    /// Copy `src` (whose metadata is known) to `dst`.
    Copy {
        /// Source.
        src: Location,
        /// What a listing said about the source; None: ask the store (a
        /// HEAD, made inside the concurrent batch, not before it).
        meta: Option<ObjectMeta>,
        /// Destination.
        dst: Location,
    },
    /// Delete `dst` (sync --delete).
    Delete {
        /// What to delete.
        dst: Location,
        /// The version the listing that planned the delete saw: the
        /// delete carries it, so an object written since is kept (None:
        /// whatever is there; local files have none).
        version: Option<shoal_core::ObjectVersion>,
    },
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Copy { src, dst, .. } => write!(
                f,
                "copy {} → {}",
                escape_controls(&src.to_string()),
                escape_controls(&dst.to_string())
            ),
            Action::Delete { dst, .. } => {
                write!(f, "delete {}", escape_controls(&dst.to_string()))
            }
        }
    }
}

/// Live counters a progress display reads.
#[derive(Debug, Default)]
pub struct BatchCounters {
    /// Actions finished (successfully or not).
    pub done: AtomicU64,
    /// Actions that failed.
    pub failed: AtomicU64,
    /// Bytes copied by finished actions.
    pub bytes: AtomicU64,
    /// Items the plan has given so far (actions, and the skips and
    /// failures it made itself): what `done` counts toward.
    pub planned: AtomicU64,
    /// Bytes of the copies planned so far whose size the plan knew (a
    /// listing's); see `sizeless`.
    pub planned_bytes: AtomicU64,
    /// Copies planned without a size (a run file's, a HEAD to come).
    pub sizeless: AtomicU64,
    /// The plan has ended: `planned` and `planned_bytes` are the totals
    /// (until then, what was listed so far).
    pub listed: std::sync::atomic::AtomicBool,
    /// Told of every action's outcome as it finishes (`--json` prints a
    /// line for each): the action and the bytes it moved, or the error
    /// or skip, with the action that ended so (None for an item the plan
    /// itself made, such as a listing that failed or a link it skipped).
    pub on_outcome: Option<OnOutcome>,
}

/// One item of a plan: an action, a skip the plan made in its place (a
/// link not followed, a folder marker, a destination `--no-clobber`
/// keeps), or an error (a listing that failed, a key that cannot be a
/// file name).
pub type Planned = Result<Seen<Action>>;

/// What became of one action: the action and the bytes it moved, a skip
/// (an outcome, not a failure: see [`shoal_core::skip`]), or the error that
/// ended it.
pub type Outcome = Result<Seen<(Action, u64)>>;

/// See [`BatchCounters::on_outcome`].
#[derive(Clone)]
#[allow(clippy::type_complexity)]
pub struct OnOutcome(pub Arc<dyn Fn(&Outcome, Option<&Action>) + Send + Sync>);

impl std::fmt::Debug for OnOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnOutcome")
    }
}

/// The counters of a batch at one moment, for a display.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Items finished.
    pub done: u64,
    /// Items failed.
    pub failed: u64,
    /// Items the plan gave so far.
    pub planned: u64,
    /// Bytes of the copies planned so far.
    pub planned_bytes: u64,
    /// Every copy planned so far had its size.
    pub sized: bool,
    /// The plan has ended: `planned` and `planned_bytes` are totals.
    pub listed: bool,
}

impl Snapshot {
    /// The total of files and of bytes, once both are known: the plan has
    /// ended and every copy in it had a size.
    pub fn totals(&self) -> Option<(u64, u64)> {
        (self.listed && self.sized).then_some((self.planned, self.planned_bytes))
    }

    /// Time left at the rate so far: `moved` bytes in `elapsed`, toward
    /// the planned total (None until the totals are known and something
    /// has moved).
    pub fn eta(&self, moved: u64, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        let (_, total) = self.totals()?;
        if moved == 0 || elapsed.is_zero() {
            return None;
        }
        let left = total.saturating_sub(moved);
        Some(elapsed.mul_f64(left as f64 / moved as f64))
    }
}

/// What a batch did.
#[derive(Debug, Default)]
pub struct BatchReport {
    /// Files copied.
    pub copied: u64,
    /// Objects or files deleted.
    pub deleted: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Actions that failed.
    pub failed: u64,
    /// The first [`LISTED_FAILURES`] failed actions, a line each with the
    /// URL and the reason (the rest are counted only: a run over a billion
    /// keys that all fail must not hold a billion lines).
    pub failures: Vec<String>,
    /// Items not copied, as expected or asked or not ([`Skip::is_asked`]);
    /// callers that name them do so as they pass.
    pub skipped: u64,
    /// Of `skipped`, those nobody asked to skip: the batch did not do all
    /// it was asked.
    pub skipped_unasked: u64,
    /// The failures by cause, in the order each cause first failed: the
    /// same operation, message and hint for many files is one entry (see
    /// [`Cause`]). A source a move kept (`--no-clobber`) is among them.
    /// At most [`LISTED_FAILURES`] causes; failures of causes past that
    /// are counted in `causes_left_off`.
    pub causes: Vec<Cause>,
    /// Failures whose cause was past the first [`LISTED_FAILURES`].
    pub causes_left_off: u64,
    /// Where each cause of `causes` is, by its key.
    cause_index: std::collections::HashMap<(String, String, Option<String>), usize>,
}

/// Failures of one cause: the operation, what went wrong and what to try
/// are the same, only the files differ (a read-only folder, credentials
/// refused, a bucket that is not there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The first failure of this cause, as one line with its URL.
    pub first: String,
    /// How many failed of it.
    pub count: u64,
    /// The first [`NAMED_PER_CAUSE`] of them: each failed action's source
    /// (or the error's URL where no action is known).
    pub named: Vec<String>,
}

impl Cause {
    /// One line for the cause: its one failure as it is, or
    /// `30 files failed: write /ro/a: permission denied (s3://b/a, s3://b/b,
    /// s3://b/c and 27 more)`.
    pub fn line(&self) -> String {
        if self.count == 1 {
            return self.first.clone();
        }
        let mut names = self.named.join(", ");
        let more = self.count.saturating_sub(self.named.len() as u64);
        if more > 0 {
            names.push_str(&format!(" and {more} more"));
        }
        format!(
            "{} failed: {} ({names})",
            plural(self.count, "file"),
            self.first
        )
    }
}

/// How many failure lines a [`BatchReport`] keeps.
pub(crate) const LISTED_FAILURES: usize = 10_000;

/// How many files a [`Cause`] names.
pub(crate) const NAMED_PER_CAUSE: usize = 3;

/// Gives `run` the budgets a batch shares (see the module docs), where the
/// caller has not set them, and returns how many actions to keep in
/// progress: one per request slot, big and small. The batch functions
/// below call it; a caller running its own loop of [`execute`] calls it
/// once before.
pub(crate) fn share_budgets(run: &mut Run) -> usize {
    if run.budgets.limiter.is_none() {
        run.budgets.limiter = Some(Arc::new(tokio::sync::Semaphore::new(
            run.opts.workers.max(1),
        )));
    }
    if run.budgets.stream_copies.is_none() {
        run.budgets.stream_copies = Some(Arc::new(tokio::sync::Semaphore::new(
            2 * run.opts.workers.max(1),
        )));
    }
    if run.budgets.small.is_none() {
        run.budgets.small = Some(SmallBudget::new(run.opts.small_workers));
    }
    run.opts.workers.max(1) + run.opts.small_workers.max(1)
}

/// How a batch treats its actions beyond running them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mode {
    /// Each copy is a move ([`execute_move`]).
    pub moving: bool,
    /// Deletes wait until every action before them has ended, and run
    /// only if none failed (`sync --delete`): a copy that failed may be
    /// the only other home of what a delete would remove (a renamed file
    /// whose new name did not arrive). rsync and rclone hold deletes back
    /// after an error the same way. Their count is reported as a failure.
    pub hold_deletes: bool,
}

/// Executes `actions` (see the module docs for the concurrency rules) as
/// [`Mode`] says: `mode.moving`, each copy is a move (`mv -r`): it deletes
/// its source once the destination is in place and verified
/// ([`execute_move`]), and a `--no-clobber` refusal keeps the source and is
/// not what was asked (the object was not moved), so it makes the exit
/// status 1.
pub async fn run_plan(
    actions: BoxStream<'static, Planned>,
    store_for: StoreFor,
    run: Run,
    policy: RetryPolicy,
    counters: Arc<BatchCounters>,
    mode: Mode,
) -> BatchReport {
    run_with(actions, store_for, run, policy, counters, mode).await
}

async fn run_with(
    actions: BoxStream<'static, Planned>,
    store_for: StoreFor,
    mut run: Run,
    policy: RetryPolicy,
    counters: Arc<BatchCounters>,
    mode: Mode,
) -> BatchReport {
    let slots = share_budgets(&mut run);
    let mut actions = counted(actions, counters.clone()).peekable();
    let mut report = BatchReport::default();
    // Phase one: everything before the first delete (all of it unless
    // deletes are held).
    let before_deletes = futures::stream::poll_fn(|cx| {
        let mut next = std::pin::Pin::new(&mut actions);
        match std::task::ready!(next.as_mut().poll_peek(cx)) {
            Some(Ok(Seen::Item(Action::Delete { .. }))) if mode.hold_deletes => {
                std::task::Poll::Ready(None)
            }
            Some(_) => futures::Stream::poll_next(next, cx),
            None => std::task::Poll::Ready(None),
        }
    })
    .boxed();
    let phase = (&store_for, &run, policy, &counters, slots, mode.moving);
    run_phase(before_deletes, phase, &mut report).await;
    if !mode.hold_deletes {
        return report;
    }
    if safety::deletes::batch_holds_deletes(report.failed, report.skipped_unasked) {
        let mut held = 0u64;
        while let Some(a) = actions.next().await {
            match a {
                Ok(Seen::Item(Action::Delete { .. })) => held += 1,
                Ok(Seen::Item(other)) => report.add(
                    Err(Error::invalid(
                        Op::Copy,
                        other.to_string(),
                        "planned after the deletes; not run",
                    )),
                    false,
                ),
                Ok(Seen::Skipped(s)) => report.add(Ok(Seen::Skipped(s)), false),
                Err(e) => report.add(Err(e), false),
            }
        }
        if held > 0 {
            let e =
                safety::deletes::held_deletes_error(held, report.failed, report.skipped_unasked);
            report.add(Err(e), false);
        }
        return report;
    }
    // The held deletes (what `sync` plans last): batched where the store
    // can (`delete.rs`).
    let cloud_delete = matches!(
        std::pin::Pin::new(&mut actions).peek().await,
        Some(Ok(Seen::Item(Action::Delete { dst, .. }))) if !dst.is_local()
    );
    if cloud_delete && !mode.moving {
        run_deletes(actions.boxed(), &store_for, slots, &counters, &mut report).await;
        return report;
    }
    let phase = (&store_for, &run, policy, &counters, slots, mode.moving);
    run_phase(actions.boxed(), phase, &mut report).await;
    report
}

/// `actions` counted into `counters` as the plan gives them, and
/// `listed` set when it ends (see [`BatchCounters::planned`]).
fn counted(
    actions: BoxStream<'static, Planned>,
    counters: Arc<BatchCounters>,
) -> BoxStream<'static, Planned> {
    let end = counters.clone();
    actions
        .inspect(move |a| counters.plan(a))
        .chain(futures::stream::poll_fn(move |_| {
            end.listed.store(true, Ordering::Relaxed);
            std::task::Poll::Ready(None)
        }))
        .boxed()
}

/// Runs a batch's remaining actions, all deletes of objects, through
/// [`crate::delete::delete_all`]: batched where the store can, a key
/// already gone counted as deleted. Anything else planned after them is
/// not run.
async fn run_deletes(
    actions: BoxStream<'_, Planned>,
    store_for: &StoreFor,
    slots: usize,
    counters: &Arc<BatchCounters>,
    report: &mut BatchReport,
) {
    let (mut others, mut skips) = (Vec::new(), Vec::new());
    let (tx, rx) = futures::channel::mpsc::channel::<Result<crate::delete::Target>>(1024);
    let said = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let on_fallback: crate::delete::OnFallback = Arc::new(move |e| {
        if !said.swap(true, Ordering::Relaxed) {
            tracing::warn!("batch delete refused ({e}); deleting one by one");
        }
    });
    let mut outcomes =
        crate::delete::delete_all(rx.boxed(), store_for.clone(), slots, true, on_fallback);
    let feed = async move {
        let mut tx = tx;
        let mut actions = actions;
        while let Some(a) = actions.next().await {
            let item = match a {
                Ok(Seen::Item(Action::Delete { dst, version })) if !dst.is_local() => {
                    Ok(crate::delete::Target {
                        loc: dst,
                        version,
                        exact: false,
                    })
                }
                Ok(Seen::Item(other)) => {
                    others.push(other);
                    continue;
                }
                // Said once the deletes are done (a plan's skips among its
                // deletes are a line or two: `sync`'s kept extras).
                Ok(Seen::Skipped(s)) => {
                    skips.push(s);
                    continue;
                }
                Err(e) => Err(e),
            };
            if futures::SinkExt::send(&mut tx, item).await.is_err() {
                break;
            }
        }
        (others, skips)
    };
    let on_outcome = counters.on_outcome.clone();
    let drain = async {
        while let Some(r) = outcomes.next().await {
            let r: Outcome = r.map(|s| s.map(|dst| (Action::Delete { dst, version: None }, 0)));
            counters.count(&r);
            if let Some(f) = &on_outcome {
                (f.0)(&r, None);
            }
            report.add(r, false);
        }
    };
    let ((others, skips), ()) = futures::join!(feed, drain);
    for s in skips {
        report.add(Ok(Seen::Skipped(s)), false);
    }
    for other in others {
        report.add(
            Err(Error::invalid(
                Op::Copy,
                other.to_string(),
                "planned after the deletes; not run",
            )),
            false,
        );
    }
}

/// `n thing`, `n things`.
/// What every phase of a batch shares: stores, options, retry policy,
/// counters, request slots, and whether copies are moves.
type Phase<'a> = (
    &'a StoreFor,
    &'a Run,
    RetryPolicy,
    &'a Arc<BatchCounters>,
    usize,
    bool,
);

/// Runs `actions` to their end, `slots * 2` at a time, into `report`.
async fn run_phase(
    actions: BoxStream<'_, Planned>,
    (store_for, run, policy, counters, slots, moving): Phase<'_>,
    report: &mut BatchReport,
) {
    let mut results = actions
        .map(|a| {
            let (store_for, run, counters) = (store_for.clone(), run.clone(), counters.clone());
            async move {
                let (outcome, failed) = match a {
                    Ok(Seen::Item(action)) => {
                        outcome_of(action, &store_for, &run, &policy, moving).await
                    }
                    Ok(Seen::Skipped(s)) => (Ok(Seen::Skipped(s)), None),
                    Err(e) => (Err(e), None),
                };
                counters.count(&outcome);
                (outcome, failed)
            }
        })
        .buffer_unordered(slots * 2);
    let on_outcome = counters.on_outcome.clone();
    while let Some((r, failed)) = results.next().await {
        if let Some(f) = &on_outcome {
            (f.0)(&r, failed.as_ref());
        }
        report.add_of(r, moving, failed.as_ref());
    }
}

/// One action executed (as a move's copy when `moving`), a `--no-clobber`
/// refusal turned into the skip it is; with the action again when it
/// did not succeed (a skip or a failure).
async fn outcome_of(
    action: Action,
    store_for: &StoreFor,
    run: &Run,
    policy: &RetryPolicy,
    moving: bool,
) -> (Outcome, Option<Action>) {
    let done = if moving {
        execute_move(&action, store_for, run, policy).await
    } else {
        execute(&action, store_for, run, policy).await
    };
    match done {
        Ok(Seen::Item(b)) => (Ok(Seen::Item((action, b))), None),
        Ok(Seen::Skipped(s)) => (Ok(Seen::Skipped(s)), Some(action)),
        Err(e) => {
            let r = match &action {
                Action::Copy { dst, .. } => clobber_refused(e, run, dst, moving),
                Action::Delete { .. } => Err(e),
            };
            (r.map(Seen::Skipped), Some(action))
        }
    }
}

impl BatchCounters {
    /// Counts an item of the plan as it is given.
    fn plan(&self, item: &Planned) {
        self.planned.fetch_add(1, Ordering::Relaxed);
        match item {
            Ok(Seen::Item(Action::Copy { meta: Some(m), .. })) => {
                self.planned_bytes.fetch_add(m.size, Ordering::Relaxed);
            }
            Ok(Seen::Item(Action::Copy { meta: None, .. })) => {
                self.sizeless.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// What a display shows now: see [`Snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        let listed = self.listed.load(Ordering::Relaxed);
        Snapshot {
            done: self.done.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            planned: self.planned.load(Ordering::Relaxed),
            planned_bytes: self.planned_bytes.load(Ordering::Relaxed),
            sized: self.sizeless.load(Ordering::Relaxed) == 0,
            listed,
        }
    }

    /// Counts a finished action for the live display.
    fn count(&self, outcome: &Outcome) {
        self.done.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Ok(Seen::Item((_, b))) => {
                self.bytes.fetch_add(*b, Ordering::Relaxed);
            }
            Ok(Seen::Skipped(_)) => {}
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl BatchReport {
    /// Adds a finished action to the report.
    fn add(&mut self, outcome: Outcome, moving: bool) {
        self.add_of(outcome, moving, None);
    }

    /// Adds a finished action to the report, `failed` the action when it
    /// did not succeed (it names the file in its [`Cause`]).
    fn add_of(&mut self, outcome: Outcome, moving: bool, failed: Option<&Action>) {
        match outcome {
            Ok(Seen::Item((Action::Copy { .. }, bytes))) => {
                self.copied += 1;
                self.bytes += bytes;
            }
            Ok(Seen::Item((Action::Delete { .. }, _))) => self.deleted += 1,
            // Folder markers, links and the like: counted, not failures.
            Ok(Seen::Skipped(s)) => {
                self.skipped += 1;
                if !s.is_asked() {
                    self.skipped_unasked += 1;
                    // A source a move kept is named with the failures (a
                    // skip the listing made was named as it passed).
                    if moving {
                        if self.failures.len() < LISTED_FAILURES {
                            self.failures.push(s.to_string());
                        }
                        let key = (s.op().to_string(), s.why().to_owned(), None);
                        self.add_cause(key, s.to_string(), s.url(), failed);
                    }
                }
            }
            Err(e) => {
                self.failed += 1;
                if self.failures.len() < LISTED_FAILURES {
                    self.failures.push(e.to_string());
                }
                let key = (
                    e.op().to_string(),
                    e.message().to_owned(),
                    e.hint().map(str::to_owned),
                );
                self.add_cause(key, e.to_string(), e.url(), failed);
            }
        }
    }

    /// Counts a failure under its cause (see [`Cause`]): `key` is its
    /// operation, message and hint, `line` the whole line, `url` what it
    /// names where no action is known.
    fn add_cause(
        &mut self,
        key: (String, String, Option<String>),
        line: String,
        url: &str,
        failed: Option<&Action>,
    ) {
        let name = match failed {
            Some(Action::Copy { src, .. }) => src.to_string(),
            Some(Action::Delete { dst, .. }) => dst.to_string(),
            None => url.to_owned(),
        };
        let name = escape_controls(&name).into_owned();
        if let Some(&i) = self.cause_index.get(&key) {
            let c = &mut self.causes[i];
            c.count += 1;
            if c.named.len() < NAMED_PER_CAUSE {
                c.named.push(name);
            }
            return;
        }
        if self.causes.len() < LISTED_FAILURES {
            self.cause_index.insert(key, self.causes.len());
            self.causes.push(Cause {
                first: line,
                count: 1,
                named: vec![name],
            });
        } else {
            self.causes_left_off += 1;
        }
    }
}

/// Executes one action of a batch (what [`run`] does for each), for
/// callers that keep their own per-item results. `run.budgets.limiter` and
/// `run.budgets.small` are the budgets shared with the other actions in
/// flight (see the module docs); returns bytes copied, or the skip it
/// made (a pinned delete whose object was written again).
pub(crate) async fn execute(
    action: &Action,
    store_for: &StoreFor,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Seen<u64>> {
    match action {
        // Already gone is done: what a delete is for holds, as S3 answers
        // anyway (GCS says 404). Another process, or a request an
        // interrupted run had sent, may have deleted it since the listing.
        Action::Delete { dst, version } => {
            if dst.is_local() {
                // Never through a link below the destination the user named.
                shoal_core::local_path::check_folders(&dst.key, dst.local_root)?;
                remove_local(&dst.key)?;
            } else {
                let store = store_for(dst)?;
                let _slot = run.for_transfer(Some(0)).budgets.permit().await;
                match version {
                    // Pinned: read back, then deleted with it (a server
                    // may ignore the precondition); gone is done.
                    Some(v) => match delete_at(&store, dst, v).await {
                        Err(e) if e.kind() == ErrorKind::NotFound => {}
                        Err(e) if e.kind() == ErrorKind::Precondition => {
                            return Ok(Seen::Skipped(Skip::asked(
                                Op::Delete,
                                dst.to_string(),
                                format!(
                                    "not deleted: written again since it was listed ({}); kept",
                                    e.message()
                                ),
                            )));
                        }
                        r => {
                            r?;
                        }
                    },
                    None => delete_object(&store, dst).await?,
                }
            }
            Ok(Seen::Item(0))
        }
        Action::Copy { src, meta, dst } => {
            refuse_local_clobber(dst, run)?;
            let r = copy_one(src, meta.as_ref(), dst, store_for, run, policy).await?;
            Ok(Seen::Item(r.bytes))
        }
    }
}

/// `--no-clobber` into a local folder: a file already there is not
/// downloaded for nothing. Only a shortcut: the rename that ends the copy
/// is what refuses to replace (one made after this look is kept too).
fn refuse_local_clobber(dst: &Location, run: &Run) -> Result<()> {
    if run.opts.no_clobber && dst.is_local() && Path::new(&dst.key).symlink_metadata().is_ok() {
        return Err(Error::new(
            ErrorKind::Precondition,
            Op::Copy,
            &dst.key,
            "exists; not replaced (--no-clobber)",
        ));
    }
    Ok(())
}

/// Executes a copy as a move: the copy (verified like every copy), then,
/// only once it succeeded, the source's deletion ([`delete_moved`]: only
/// the version that was copied). A failed copy leaves the source where it
/// was; a failed deletion is an error saying the object is now in both
/// places.
pub(crate) async fn execute_move(
    action: &Action,
    store_for: &StoreFor,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Seen<u64>> {
    let Action::Copy { src, meta, dst } = action else {
        return execute(action, store_for, run, policy).await;
    };
    let stamp = LocalStamp::of(src)?;
    refuse_local_clobber(dst, run)?;
    let report = copy_one(src, meta.as_ref(), dst, store_for, run, policy).await?;
    let gone = {
        let _slot = run.for_transfer(Some(0)).budgets.permit().await;
        delete_moved(src, report.source_version.as_ref(), stamp, store_for).await
    };
    if let Err(e) = gone {
        if e.kind() == ErrorKind::Changed {
            return Err(e);
        }
        return Err(Error::new(
            e.kind(),
            Op::Delete,
            src.to_string(),
            format!(
                "copied to {dst}, but the source could not be deleted: {}",
                e.message()
            ),
        )
        .with_hint("the object is now in both places; delete the source with shoal rm"));
    }
    Ok(Seen::Item(report.bytes))
}

/// `--no-clobber`'s refusal (the store's precondition, or a local rename
/// that would replace) as the skip it is: the destination was there, as
/// asked. A move's is a skip nobody asked for: the source is kept, which
/// is not what a move was asked to do. Any other error stays one.
fn clobber_refused(e: Error, run: &Run, dst: &Location, moving: bool) -> Result<Skip> {
    if !(run.opts.no_clobber && e.kind() == ErrorKind::Precondition) {
        return Err(e);
    }
    Ok(if moving {
        Skip::unasked(
            Op::Copy,
            dst.to_string(),
            "exists; not replaced (--no-clobber), the source was kept",
        )
    } else {
        Skip::asked(
            Op::Copy,
            dst.to_string(),
            "exists; not replaced (--no-clobber)",
        )
    })
}

#[cfg(test)]
mod tests {
    use shoal_core::BucketStore;
    use std::time::Duration;

    use bytes::Bytes;
    use shoal_core::memory::MemoryStore;
    use shoal_core::{PutOptions, Store};

    use super::*;
    use crate::TransferOptions;

    /// The counters a display reads: what the plan gave so far, and the
    /// totals only once it has ended with a size for every copy; a
    /// failure of the plan itself counts as an item done.
    #[tokio::test]
    async fn the_counters_know_the_totals_once_the_plan_has_ended() {
        let s = Arc::new(MemoryStore::new());
        s.create_bucket("b").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut copies = Vec::new();
        for i in 0..3usize {
            let key = format!("f{i}");
            let body = Bytes::from(vec![b'x'; 100 * (i + 1)]);
            s.put("b", &key, body, &PutOptions::default())
                .await
                .unwrap();
            let meta = s.head("b", &key).await.unwrap();
            let dst = dir.path().join(&key);
            copies.push(Action::Copy {
                src: Location::parse(&format!("gs://b/{key}")).unwrap(),
                meta: Some(meta),
                dst: Location::parse(dst.to_str().unwrap()).unwrap(),
            });
        }
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let counters = Arc::new(BatchCounters::default());
        let store = s.clone();
        let store_for: StoreFor = Arc::new(move |_: &Location| Ok(store.clone() as Arc<dyn Store>));
        let batch = tokio::spawn(run_plan(
            rx.boxed(),
            store_for,
            Run::new(TransferOptions::default()),
            RetryPolicy::default(),
            counters.clone(),
            Mode::default(),
        ));
        let mut copies = copies.into_iter();
        for a in copies.by_ref().take(2) {
            tx.unbounded_send(Ok(Seen::Item(a))).unwrap();
        }
        while counters.done.load(Ordering::Relaxed) < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let now = counters.snapshot();
        assert_eq!((now.planned, now.planned_bytes), (2, 300));
        assert!(!now.listed && now.totals().is_none(), "{now:?}");
        assert_eq!(now.eta(300, Duration::from_secs(1)), None);

        tx.unbounded_send(Ok(Seen::Item(copies.next().unwrap())))
            .unwrap();
        tx.unbounded_send(Err(Error::invalid(Op::List, "gs://b/x", "refused")))
            .unwrap();
        // A skip is counted as one, never as a failure.
        tx.unbounded_send(Ok(Seen::Skipped(Skip::unasked(Op::Read, "/l", "a link"))))
            .unwrap();
        drop(tx);
        let report = batch.await.unwrap();
        assert_eq!((report.copied, report.failed), (3, 1));
        assert_eq!((report.skipped, report.skipped_unasked), (1, 1));
        assert_eq!(report.failures.len(), 1);
        let end = counters.snapshot();
        assert_eq!(end.totals(), Some((5, 600)));
        assert_eq!((end.done, end.failed), (5, 1));

        // A copy planned without a size: the byte total is not known.
        let counters = BatchCounters::default();
        counters.plan(&Ok(Seen::Item(Action::Copy {
            src: Location::parse("gs://b/f0").unwrap(),
            meta: None,
            dst: Location::parse("/tmp/x").unwrap(),
        })));
        counters.listed.store(true, Ordering::Relaxed);
        assert_eq!(counters.snapshot().totals(), None);
    }

    #[test]
    fn the_eta_is_what_is_left_at_the_rate_so_far() {
        let snap = Snapshot {
            done: 1,
            failed: 0,
            planned: 4,
            planned_bytes: 400,
            sized: true,
            listed: true,
        };
        let two = Duration::from_secs(2);
        assert_eq!(snap.eta(100, two), Some(Duration::from_secs(6)));
        assert_eq!(snap.eta(400, two), Some(Duration::ZERO));
        assert_eq!(snap.eta(0, two), None, "no rate yet");
        let listing = Snapshot {
            listed: false,
            ..snap
        };
        assert_eq!(listing.eta(100, two), None);
        let sizeless = Snapshot {
            sized: false,
            ..snap
        };
        assert_eq!(sizeless.eta(100, two), None);
    }
}
