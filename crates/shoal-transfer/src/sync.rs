//! `sync`'s plan: a merge of two listings in key order.
//!
//! Both sides arrive sorted by their names relative to the sync's roots
//! (S3 and GCS list in UTF-8 byte order; the parallel lister keeps that
//! order in its `sorted` mode; a local walk is made to yield the same
//! order, see [`crate::tree`]). Walking both at once like a merge-join
//! decides every name as soon as both sides have passed it: a name only
//! the source has is copied, one both have is compared, one only the
//! destination has is an extra (deleted with `--delete`). So copies and
//! deletes start while the listings go on, and the plan holds a bounded
//! number of entries (the comparisons in flight, [`COMPARE_AT_ONCE`],
//! plus one peeked entry per side), whatever the number of keys. Rejected:
//! a map of the destination listing, which holds every destination key
//! (hundreds of MB at a million keys) and copies nothing before both
//! listings are complete.
//!
//! Extras are deleted after both listings have ended, each in order and
//! without an error, never while they go on (rclone's default,
//! `--delete-after`, for the same reason): a merge proves a name extra only
//! if the listings are complete and ordered up to it, and a listing that
//! fails or breaks its order later takes that proof back. Extras wait in
//! memory up to [`SPILL_AT`], then in an unnamed temporary file (the
//! kernel removes it whatever happens to the process), so memory stays
//! bounded. Knowing every extra before the first delete also lets
//! `max_delete` refuse a run that would delete more, deleting nothing, and
//! `--delete` from a source that lists nothing at all is refused unless
//! asked for (a typo in a prefix must not empty a destination). Each
//! side's order is checked as it arrives; a name out of order ends the
//! plan.
//!
//! [`sync_range`] is the same plan over one key range of the source and
//! the destination's matching range, for a sync split across processes
//! (`shoal.dask.sync`): the names map one to one between the two prefixes
//! and keep their order, so the ranges that tile the source tile the
//! destination too, and every name is decided by exactly one range.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::stream::{BoxStream, StreamExt};
use shoal_core::{
    Error, ErrorKind, ListRequest, Location, ObjectMeta, Op, Projection, Result, Seen, Skip, Store,
    StoreFor,
};

use crate::batch::{Action, Planned};
use crate::rate::Rates;
use crate::safety::deletes::{DeleteLimits, Held, deletes_held};
use crate::same::same_bytes;
use crate::spill::{self, Spill, Tape};
use crate::tree::{Entry, Listed, place, sync_root};

/// How `sync` decides that a file differs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compare {
    /// Size, then modification time: copy when the source is newer. After
    /// a copy the destination is always newer (written later), so a second
    /// sync moves nothing. Cheap: no bytes are read. The default.
    #[default]
    SizeAndTime,
    /// Size, then the strongest checksum both sides can give (the
    /// stores' own; computed for local files; see [`crate::same`]), else
    /// as `SizeAndTime`. Exact, costs a read of local files.
    Checksum,
    /// Size alone (`--size-only`): copy only when the sizes differ. For
    /// destinations whose times say nothing (a store that sets its own on
    /// every write, files restored with new times).
    SizeOnly,
}

/// What a sync does besides copying what differs. The default compares
/// sizes and times and deletes nothing.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// How files are compared.
    pub compare: Compare,
    /// Delete destination entries the source does not have.
    pub delete: bool,
    /// The limits on the deletes (`--max-delete`, deleting when the source
    /// lists nothing), as [`crate::safety`] applies them.
    pub limits: DeleteLimits,
    /// Never replace a destination newer than its source, whatever the
    /// sizes (`--update`); otherwise `compare` decides.
    pub update: bool,
    /// Never replace a destination that exists (`--no-clobber`): a name
    /// the destination lists is reported as skipped, and copies of the
    /// others carry the store's precondition (see
    /// [`crate::TransferOptions::no_clobber`]) for one made meanwhile.
    pub no_clobber: bool,
    /// The source's listing did not come from the store just now (a kept
    /// listing file, an inventory report): it is a hint, never alone a
    /// reason to delete. With `delete`, each extra's absence from this
    /// live source (the sync's source folder, as given to the plan) is
    /// confirmed before it is deleted, with fresh pages of its listing
    /// around the extras (one page answers for up to 1,000 of them); extras the live source
    /// holds are kept, and counted in one line.
    pub confirm_extras: Option<Location>,
}

impl SyncOptions {
    /// What a listing of either side must carry for the comparison asked:
    /// checksums only for [`Compare::Checksum`].
    pub fn projection(&self) -> Projection {
        if self.compare == Compare::Checksum {
            Projection::Full
        } else {
            Projection::NameSizeTime
        }
    }
}

/// Counts of what the plan holds, for tests (and a debug log line).
#[derive(Debug, Default)]
pub struct PlanStats {
    /// Listing entries taken from either side and not yet decided.
    pub held: AtomicUsize,
    /// The most there ever were at once.
    pub peak_held: AtomicUsize,
}

impl PlanStats {
    fn take(&self, n: usize) {
        let now = self.held.fetch_add(n, Ordering::Relaxed) + n;
        self.peak_held.fetch_max(now, Ordering::Relaxed);
    }
    fn done(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Checksum comparisons of `sync --checksum` in flight: each may be a
/// HEAD (S3 listings carry no checksum) or a file read (1 MiB buffer), so
/// one at a time would cost a round trip per file; 32 hide the round trip
/// and bound what the plan holds.
pub const COMPARE_AT_ONCE: usize = 32;

/// The actions that make `dst` hold what `src` holds: copies of what is
/// missing or differs, made while both listings are still arriving, then
/// with `delete` removals of extras (see the module docs). Problems come
/// as `Err` items: a source entry that could not be listed (the plan goes
/// on, deleting nothing), an error that ends the plan (the destination
/// listing failed, a listing out of order). What is not done comes as a
/// skip: a source's link or special file (not asked: nothing is deleted
/// then), a destination `--no-clobber` keeps, extras kept and why.
pub(crate) fn sync_plan(
    src: BoxStream<'static, Listed>,
    dst_entries: BoxStream<'static, Listed>,
    dst: Location,
    opts: SyncOptions,
    store_for: StoreFor,
    rates: Rates,
    stats: Option<Arc<PlanStats>>,
) -> BoxStream<'static, Planned> {
    let stats = stats.unwrap_or_default();
    let merge = Merge {
        src: Side::new(src),
        dst: Side::new(dst_entries),
        dst_root: dst.clone(),
        opts: opts.clone(),
        extras: Extras::default(),
        deleting: None,
        source_incomplete: false,
        unasked_skips: 0,
        stopped: false,
        stats: stats.clone(),
        extras_inline: false,
        confirm: match &opts.confirm_extras {
            Some(root) => match store_for(root) {
                Ok(store) => Some(Confirm::new(store, root.with_key(sync_root(root)))),
                Err(e) => return futures::stream::iter([Err(e)]).boxed(),
            },
            None => None,
        },
    };
    futures::stream::unfold(merge, |mut m| async move {
        let step = m.next().await?;
        Some((step, m))
    })
    .map(move |step| {
        let (store_for, rates) = (store_for.clone(), rates.clone());
        let (dst, opts) = (dst.clone(), opts.clone());
        async move { decide(step, &dst, &opts, &store_for, &rates).await }
    })
    .buffered(COMPARE_AT_ONCE)
    .filter_map(move |(decided, entries)| {
        stats.done(entries);
        futures::future::ready(decided)
    })
    .boxed()
}

/// One name of two merged listings ([`merge_listings`]).
// Pairs dominate, as in the plan's steps.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Matched {
    /// Both sides have it: the source's entry, then the destination's.
    Both(Entry, Entry),
    /// Only the source has it.
    SourceOnly(Entry),
    /// Only the destination has it.
    DestinationOnly(Entry),
}

/// The two listings merged by name as a sync merges them (the same order
/// checks, the same handling of a failed or unordered listing), each
/// name given as it is decided, for `check`: nothing is copied or
/// deleted, and nothing is held but the entries being compared. A
/// listing's problems come as `Err` items, its skips as skips.
pub(crate) fn merge_listings(
    src: BoxStream<'static, Listed>,
    dst_entries: BoxStream<'static, Listed>,
    dst: Location,
) -> BoxStream<'static, Result<Seen<Matched>>> {
    let merge = Merge {
        src: Side::new(src),
        dst: Side::new(dst_entries),
        dst_root: dst,
        opts: SyncOptions {
            compare: Compare::SizeOnly,
            delete: false,
            limits: DeleteLimits::default(),
            update: false,
            no_clobber: false,
            confirm_extras: None,
        },
        extras: Extras::default(),
        deleting: None,
        source_incomplete: false,
        unasked_skips: 0,
        stopped: false,
        stats: Arc::default(),
        confirm: None,
        extras_inline: true,
    };
    futures::stream::unfold(merge, |mut m| async move {
        let step = m.next().await?;
        let matched = match step {
            Step::Pair(s, Some(d)) => Ok(Seen::Item(Matched::Both(s, d))),
            Step::Pair(s, None) => Ok(Seen::Item(Matched::SourceOnly(s))),
            Step::Extra(d) => Ok(Seen::Item(Matched::DestinationOnly(d))),
            Step::Problem(e) => Err(e),
            Step::Skipped(s) => Ok(Seen::Skipped(s)),
            // No deletes without `delete`.
            Step::Delete(l, _) => Err(Error::invalid(Op::List, l.to_string(), "unexpected delete")),
        };
        // Entries are not held for a decision here.
        m.stats.held.store(0, Ordering::Relaxed);
        Some((matched, m))
    })
    .boxed()
}

/// One key range of a sync's source: the keys `k` with `start <= k` and,
/// when there is an `end`, `k < end` (whole keys, starting with the
/// source's prefix, as a ranged listing splits them).
#[derive(Debug, Clone, Default)]
pub struct KeyRange {
    /// First key of the range (inclusive); the prefix itself for the first.
    pub start: String,
    /// Where the range ends (exclusive); None: the prefix's end.
    pub end: Option<String>,
}

/// [`sync_plan`] for one [`KeyRange`] of `src` (a bucket prefix, taken as
/// a folder as `shoal sync` takes it): the source range and the
/// destination's same range (the same names below `dst`) are listed page
/// by page, in key order, and merged. Extras come as deletes at the end,
/// as the plan makes them; a caller splitting a sync holds them until
/// every range has ended (see the module docs). A range whose bounds do
/// not lie below `src` is refused.
pub(crate) fn sync_range(
    src: &Location,
    dst: &Location,
    range: &KeyRange,
    opts: SyncOptions,
    store_for: StoreFor,
    rates: Rates,
) -> Result<BoxStream<'static, Planned>> {
    let (src_root, dst_root) = (sync_root(src), sync_root(dst));
    // A bound's name below the source; the prefix itself (or less) is the
    // range's very start.
    let rel = |k: &str| -> Result<String> {
        if k <= src_root.as_str() {
            return Ok(String::new());
        }
        k.strip_prefix(src_root.as_str())
            .map(str::to_owned)
            .ok_or_else(|| {
                Error::invalid(
                    Op::List,
                    src.to_string(),
                    format!(
                        "sync range bound {k:?} does not lie below the source's prefix {src_root:?}"
                    ),
                )
            })
    };
    let start = rel(&range.start)?;
    let end = range.end.as_deref().map(rel).transpose()?;
    let projection = opts.projection();
    let side = |l: &Location, root: &str| -> Result<BoxStream<'static, Listed>> {
        let at = |r: &str| format!("{root}{r}");
        Ok(range_entries(
            store_for(l)?,
            &l.with_key(root.to_owned()),
            (!start.is_empty()).then(|| at(&start)),
            end.as_deref().map(at),
            projection,
        ))
    };
    Ok(sync_plan(
        side(src, &src_root)?,
        side(dst, &dst_root)?,
        dst.with_key(dst_root.clone()),
        opts,
        store_for,
        rates,
        None,
    ))
}

/// Everything below `prefix` (a bucket prefix) whose key lies in
/// `[start, end)`, in key order, one page at a time, as entries named
/// relative to the prefix. Sequential: a split sync's parallelism is its
/// ranges. A page that fails ends the listing with that error.
pub(crate) fn range_entries(
    store: Arc<dyn Store>,
    prefix: &Location,
    start: Option<String>,
    end: Option<String>,
    projection: Projection,
) -> BoxStream<'static, Listed> {
    let req = ListRequest {
        prefix: prefix.key.clone(),
        start_offset: start,
        end_offset: end.clone(),
        projection,
        ..Default::default()
    };
    let base = prefix.clone();
    futures::stream::unfold(Some(req), move |req| {
        let (store, base, end) = (store.clone(), base.clone(), end.clone());
        async move {
            let mut req = req?;
            let page = match store.list_page(&base.bucket, &req).await {
                Ok(p) => p,
                Err(e) => return Some((vec![Err(e.with_url(base.to_string()))], None)),
            };
            let mut out = Vec::with_capacity(page.objects.len());
            let mut past_end = false;
            for meta in page.objects {
                // Stores without an end offset (S3) stop on the client.
                if end.as_deref().is_some_and(|e| meta.key.as_str() >= e) {
                    past_end = true;
                    break;
                }
                let rel = meta
                    .key
                    .strip_prefix(base.key.as_str())
                    .unwrap_or(&meta.key);
                out.push(Ok(Seen::Item(Entry {
                    src: base.with_key(meta.key.clone()),
                    rel: rel.to_owned(),
                    meta,
                })));
            }
            let next = match page.next_page_token {
                Some(t) if !past_end => {
                    req.page_token = Some(t);
                    Some(req)
                }
                _ => None,
            };
            Some((out, next))
        }
    })
    .flat_map(futures::stream::iter)
    .boxed()
}

/// One name of the merge.
// Pairs dominate a plan, so boxing them would only add an allocation per
// name.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// The source has it; the destination maybe.
    Pair(Entry, Option<Entry>),
    /// Only the destination has it, and it is to be deleted (at the
    /// version its listing saw).
    Delete(Location, Option<shoal_core::ObjectVersion>),
    /// Reported, the plan goes on (or ends, as the merge decided).
    Problem(Error),
    /// Not done, and said; the plan goes on.
    Skipped(Skip),
    /// Only the destination has it (a merge for `check`, which names
    /// extras as they come rather than deleting them at the end).
    Extra(Entry),
}

async fn decide(
    step: Step,
    dst: &Location,
    opts: &SyncOptions,
    store_for: &StoreFor,
    rates: &Rates,
) -> (Option<Planned>, usize) {
    match step {
        Step::Problem(e) => (Some(Err(e)), 0),
        Step::Skipped(s) => (Some(Ok(Seen::Skipped(s))), 0),
        Step::Delete(l, version) => (Some(Ok(Seen::Item(Action::Delete { dst: l, version }))), 0),
        // Only a merge for `check` makes these.
        Step::Extra(_) => (None, 0),
        Step::Pair(mut e, theirs) => {
            let held = 1 + usize::from(theirs.is_some());
            let by_time =
                async |e: &mut Entry, t: &Entry| source_newer(e, t, store_for, rates).await;
            let differs = match &theirs {
                None => Ok(true),
                // --update: a newer destination stays, whatever the sizes.
                Some(t) if opts.update && dst_newer(&e.meta, &t.meta) => Ok(false),
                Some(t) if t.meta.size != e.meta.size => Ok(true),
                Some(t) => match opts.compare {
                    Compare::SizeOnly => Ok(false),
                    Compare::SizeAndTime => by_time(&mut e, t).await,
                    Compare::Checksum => match same_bytes(&e, t, store_for, rates).await {
                        Ok(Some(same)) => Ok(!same),
                        // No checksum in common: as without --checksum.
                        Ok(None) => by_time(&mut e, t).await,
                        Err(err) => Err(err),
                    },
                },
            };
            let differs = match differs {
                Ok(d) => d,
                Err(err) => return (Some(Err(err)), held),
            };
            if !differs {
                return (None, held);
            }
            if opts.no_clobber
                && let Some(t) = &theirs
            {
                let why = "exists; not replaced (--no-clobber)";
                let skip = Skip::asked(Op::Copy, t.src.to_string(), why);
                return (Some(Ok(Seen::Skipped(skip))), held);
            }
            let action = place(dst, &e.rel, &e.src.to_string()).map(|to| {
                to.map(|to| Action::Copy {
                    src: e.src,
                    meta: Some(e.meta),
                    dst: to,
                })
            });
            (Some(action), held)
        }
    }
}

/// The size-and-time rule's second half: is the source newer? An
/// object's time is the file time recorded at its upload, else its own
/// ([`ObjectMeta::file_time`]), so a file sent up and brought back (or
/// the other way) is the same age on both sides and is not copied again.
fn newer(src: &ObjectMeta, dst: &ObjectMeta) -> bool {
    match (src.file_time(), dst.file_time()) {
        (Some(a), Some(b)) => shoal_core::file_time::later(a, b),
        _ => true,
    }
}

/// [`newer`], with the recorded times a listing could not carry (S3
/// listings carry no metadata) asked of the store by a HEAD, only when
/// the listing's times say to copy: a recorded time is never later than
/// the upload that wrote it, so it can only turn that copy into none.
/// Where the listing's times say the destination is as new, no request
/// is made, as before. A source whose HEAD told its time is copied with
/// it, so the download keeps it.
async fn source_newer(
    src: &mut Entry,
    dst: &Entry,
    store_for: &StoreFor,
    rates: &Rates,
) -> Result<bool> {
    if !newer(&src.meta, &dst.meta) {
        return Ok(false);
    }
    let learnt_src = learn_recorded(src, store_for, rates).await?;
    let learnt_dst = learn_recorded(dst, store_for, rates).await?;
    if learnt_src.is_none() && learnt_dst.is_none() {
        return Ok(true);
    }
    let newer = newer(
        learnt_src.as_ref().unwrap_or(&src.meta),
        learnt_dst.as_ref().unwrap_or(&dst.meta),
    );
    if let Some(m) = learnt_src {
        src.meta = m;
    }
    Ok(newer)
}

/// The entry's listing with the file time its object records, from a
/// HEAD; None for a local file or a listing that carried it already, or
/// when the object is no longer the version listed (its listing stands).
async fn learn_recorded(
    e: &Entry,
    store_for: &StoreFor,
    rates: &Rates,
) -> Result<Option<ObjectMeta>> {
    if e.src.is_local() || e.meta.knows_recorded_time() {
        return Ok(None);
    }
    let store = store_for(&e.src)?;
    rates.request().await;
    let head = (store.head(&e.src.bucket, &e.src.key))
        .await
        .map_err(|err| err.with_url(e.src.to_string()).with_op(Op::Stat))?;
    if e.meta.version.is_some() && head.version != e.meta.version {
        return Ok(None);
    }
    Ok(Some(ObjectMeta {
        recorded: shoal_core::file_time::Recorded::of(&head.metadata),
        ..e.meta.clone()
    }))
}

/// The extra `key` of the destination `root` as the location to delete:
/// a local one (a path the walk found below the root) remembers where the
/// root ends, so the delete never follows a link below it
/// ([`shoal_core::local_path::check_folders`]).
fn local_below(root: &Location, key: String) -> Location {
    let mut l = root.with_key(key);
    if root.is_local() {
        let base = crate::tree::normal_local(root.key.trim_end_matches('/'))
            .display()
            .to_string();
        let base = base.trim_end_matches('/');
        if l.key.strip_prefix(base).is_some_and(|r| r.starts_with('/')) {
            l.local_root = Some(base.len());
        }
    }
    l
}

/// `--update`'s rule: is the destination known to be newer?
fn dst_newer(src: &ObjectMeta, dst: &ObjectMeta) -> bool {
    matches!((src.file_time(), dst.file_time()), (Some(a), Some(b)) if shoal_core::file_time::later(b, a))
}

/// One listing, peeked one entry ahead, its order checked.
struct Side {
    entries: BoxStream<'static, Listed>,
    peeked: Option<Entry>,
    last: Option<String>,
    done: bool,
    seen: u64,
}

impl Side {
    fn new(entries: BoxStream<'static, Listed>) -> Self {
        Side {
            entries,
            peeked: None,
            last: None,
            done: false,
            seen: 0,
        }
    }

    /// Fills `peeked` unless the listing ended.
    async fn fill(&mut self, stats: &PlanStats) -> Fill {
        if self.peeked.is_some() || self.done {
            return Fill::Ok;
        }
        match self.entries.next().await {
            None => self.done = true,
            // The listing may go on after it: a local walk reports an
            // unreadable file and continues.
            Some(Err(e)) => return Fill::Failed(e),
            Some(Ok(Seen::Skipped(s))) => return Fill::Skipped(s),
            Some(Ok(Seen::Item(e))) => {
                if let Some(last) = &self.last
                    && e.rel.as_str() <= last.as_str()
                {
                    return Fill::OutOfOrder(Error::invalid(
                        Op::List,
                        e.src.to_string(),
                        format!(
                            "listed after {last:?}, out of key order: sync stops here and deletes nothing more (a store must list in UTF-8 byte order)"
                        ),
                    ));
                }
                self.last = Some(e.rel.clone());
                self.seen += 1;
                stats.take(1);
                self.peeked = Some(e);
            }
        }
        Fill::Ok
    }
}

enum Fill {
    Ok,
    /// An entry the listing could not give.
    Failed(Error),
    /// An entry the listing (a local walk) did not give, and why.
    Skipped(Skip),
    /// The listing broke its order: nothing it says can be merged.
    OutOfOrder(Error),
}

/// Extras kept in memory before they go to a temporary file: 10,000 keys
/// are about a megabyte.
pub(crate) const SPILL_AT: usize = 10_000;

/// Extras waiting for the listings to end: in memory, then in an unnamed
/// temporary file ([`crate::spill::Tape`]): the destination's key, the
/// name below the roots, and the version the destination's listing saw
/// (`g:GENERATION`, `e:ETAG`).
#[derive(Default)]
struct Extras {
    mem: Vec<Extra>,
    file: Option<Tape<Extra>>,
    count: u64,
}

/// An extra's destination key, its name below the sync's roots, and its
/// version as [`version_text`] writes it.
type Extra = (String, String, Option<String>);

/// A version as an extra keeps it.
fn version_text(v: &shoal_core::ObjectVersion) -> String {
    match v {
        shoal_core::ObjectVersion::Generation(g) => format!("g:{g}"),
        shoal_core::ObjectVersion::ETag(e) => format!("e:{e}"),
        shoal_core::ObjectVersion::VersionId(v) => format!("v:{v}"),
    }
}

/// [`version_text`] read back.
fn version_from(t: &str) -> Option<shoal_core::ObjectVersion> {
    match t.split_once(':')? {
        ("g", g) => g.parse().ok().map(shoal_core::ObjectVersion::Generation),
        ("e", e) => Some(shoal_core::ObjectVersion::ETag(e.to_owned())),
        ("v", v) => Some(shoal_core::ObjectVersion::VersionId(v.to_owned())),
        _ => None,
    }
}

impl Extras {
    fn push(&mut self, key: String, rel: String, version: Option<String>) -> Result<()> {
        self.count += 1;
        let key = (key, rel, version);
        if self.file.is_none() && self.mem.len() < SPILL_AT {
            self.mem.push(key);
            return Ok(());
        }
        let spill_err = |e| Error::io(Op::Write, "a temporary file of sync's extras", e);
        let f = match &mut self.file {
            Some(f) => f,
            none => none.insert(Tape::new().map_err(spill_err)?),
        };
        for k in self.mem.drain(..).chain(std::iter::once(key)) {
            f.push(&k).map_err(spill_err)?;
        }
        Ok(())
    }

    /// Every extra pushed, in order.
    fn drain(self) -> Result<Box<dyn Iterator<Item = Result<Extra>> + Send>> {
        let Some(f) = self.file else {
            return Ok(Box::new(self.mem.into_iter().map(Ok)));
        };
        let spill_err = |e| Error::io(Op::Read, "a temporary file of sync's extras", e);
        Ok(Box::new(
            f.replay()
                .map_err(spill_err)?
                .map(move |x| x.map_err(spill_err)),
        ))
    }
}

/// An extra spilled.
impl Spill for Extra {
    fn put(&self, out: &mut Vec<u8>) {
        spill::put_str(out, &self.0);
        spill::put_str(out, &self.1);
        spill::put_opt(out, self.2.as_deref(), spill::put_str);
    }

    fn get(f: &mut spill::Fields<'_>) -> std::io::Result<Self> {
        Ok((f.str()?, f.str()?, f.opt(spill::Fields::str)?))
    }
}

struct Merge {
    src: Side,
    dst: Side,
    dst_root: Location,
    opts: SyncOptions,
    extras: Extras,
    /// Deletes being handed out, once both listings have ended.
    deleting: Option<Box<dyn Iterator<Item = Result<Extra>> + Send>>,
    source_incomplete: bool,
    /// Source entries not copied that nobody asked to skip (a link without
    /// -L, a FIFO): what the user meant them to be is unknown, so nothing
    /// is deleted, as rsync does after an I/O error.
    unasked_skips: u64,
    /// Nothing more comes (after an error that ends the plan, or the end).
    stopped: bool,
    stats: Arc<PlanStats>,
    /// Extras checked against the live source before their deletes.
    confirm: Option<Confirm>,
    /// Extras are named as the merge meets them ([`merge_listings`]).
    extras_inline: bool,
}

impl Merge {
    /// The next step, or None when the plan is complete.
    async fn next(&mut self) -> Option<Step> {
        if self.deleting.is_some() {
            return self.next_delete().await;
        }
        loop {
            if self.stopped {
                return None;
            }
            match self.src.fill(&self.stats).await {
                Fill::Ok => {}
                // Skipped as expected or asked: the source is complete.
                Fill::Skipped(s) if s.is_asked() => return Some(Step::Skipped(s)),
                Fill::Skipped(s) => {
                    self.unasked_skips += 1;
                    return Some(Step::Skipped(s));
                }
                // The source is incomplete: nothing will be deleted, and
                // the error says so itself (one line, not a second one
                // when the listings end).
                Fill::Failed(e) => {
                    let first = !self.source_incomplete;
                    self.source_incomplete = true;
                    if self.opts.delete && first {
                        return Some(Step::Problem(e.with_hint(
                            "nothing deleted: sync --delete deletes nothing after the source's listing failed",
                        )));
                    }
                    return Some(Step::Problem(e));
                }
                Fill::OutOfOrder(e) => return Some(self.stop(e)),
            }
            match self.dst.fill(&self.stats).await {
                Fill::Ok => {}
                // A destination that does not exist yet is simply empty.
                Fill::Failed(e) if e.kind() == ErrorKind::NotFound && self.dst_root.is_local() => {
                    self.dst.done = true;
                }
                // A destination's skips (links, special files) are nobody's
                // business: neither copied from nor deleted.
                Fill::Skipped(_) => continue,
                // What the destination holds past here is unknown: going
                // on would be guessing.
                Fill::Failed(e) | Fill::OutOfOrder(e) => return Some(self.stop(e)),
            }
            let take_src = match (&self.src.peeked, &self.dst.peeked) {
                (None, None) => return self.finish().await,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(s), Some(d)) => s.rel <= d.rel,
            };
            if take_src {
                let s = self.src.peeked.take().expect("peeked");
                let theirs = self.dst.peeked.take_if(|d| d.rel == s.rel);
                return Some(Step::Pair(s, theirs));
            }
            // Only the destination has it.
            let extra = self.dst.peeked.take().expect("peeked");
            self.stats.done(1);
            if self.extras_inline {
                return Some(Step::Extra(extra));
            }
            if self.opts.delete
                && let Err(e) = self.extras.push(
                    extra.src.key,
                    extra.rel,
                    extra.meta.version.as_ref().map(version_text),
                )
            {
                return Some(self.stop(e));
            }
        }
    }

    /// Ends the plan with `e`; extras found so far are not deleted.
    fn stop(&mut self, e: Error) -> Step {
        self.stopped = true;
        if self.opts.delete && self.extras.count > 0 {
            tracing::info!(
                extras = self.extras.count,
                "sync --delete: nothing deleted after an error"
            );
        }
        Step::Problem(e)
    }

    /// Both listings have ended: the extras are deleted now, or not at all.
    async fn finish(&mut self) -> Option<Step> {
        self.stopped = true;
        let n = self.extras.count;
        // Failures of copies are held by the batch (`Mode::hold_deletes`),
        // those of listings and skips below.
        let held = deletes_held(&self.opts.limits, n, self.src.seen, 0, false);
        if self.opts.delete
            && held == Some(Held::SourceEmpty)
            && !self.source_incomplete
            && self.unasked_skips == 0
        {
            // Even with nothing to delete: a source that lists nothing is
            // most likely a mistyped URL, and the next run would delete.
            return Some(Step::Problem(Error::invalid(
                Op::Delete,
                self.dst_root.to_string(),
                format!(
                    "sync --delete: {n} extra{} not deleted: the source lists nothing, so this would delete everything here (check the source URL, or pass --delete-when-source-empty if that is what you want)",
                    if n == 1 { "" } else { "s" }
                ),
            )));
        }
        if n == 0 {
            return None;
        }
        let refuse = |why: String| {
            Some(Step::Problem(Error::invalid(
                Op::Delete,
                self.dst_root.to_string(),
                format!(
                    "sync --delete: {n} extra{} not deleted: {why}",
                    if n == 1 { "" } else { "s" }
                ),
            )))
        };
        if self.source_incomplete {
            // Said with the source's first error.
            tracing::info!(
                extras = n,
                "sync --delete: nothing deleted, the source is incomplete"
            );
            return None;
        }
        if self.unasked_skips > 0 {
            let k = self.unasked_skips;
            return refuse(format!(
                "{k} source entr{} skipped (named above; -L follows links, --skip-symlinks skips them as asked)",
                if k == 1 { "y was" } else { "ies were" }
            ));
        }
        if let Some(Held::MoreThan(max)) = held {
            return refuse(format!("more than --max-delete {max}; nothing was deleted"));
        }
        match std::mem::take(&mut self.extras).drain() {
            Ok(d) => {
                self.deleting = Some(d);
                self.next_delete().await
            }
            Err(e) => Some(Step::Problem(e)),
        }
    }

    /// The next extra to delete: with [`Confirm`], only one the live
    /// source does not hold; after the last, the count of those kept.
    async fn next_delete(&mut self) -> Option<Step> {
        loop {
            let d = self.deleting.as_mut()?;
            let Some(next) = d.next() else {
                self.deleting = None;
                return self
                    .confirm
                    .take()
                    .and_then(|c| c.kept_line(&self.dst_root));
            };
            let (key, rel, version) = match next {
                Ok(x) => x,
                Err(e) => {
                    self.deleting = None;
                    return Some(Step::Problem(e));
                }
            };
            if let Some(c) = self.confirm.as_mut() {
                match c.holds(&rel).await {
                    Ok(true) => continue,
                    Ok(false) => {}
                    // Nothing more is deleted on the word of a listing
                    // that could not be confirmed.
                    Err(e) => {
                        self.deleting = None;
                        return Some(Step::Problem(e.with_hint(format!(
                            "the source's live listing failed while confirming extras: nothing more was deleted ({} kept so far as the source holds them)",
                            c.kept
                        ))));
                    }
                }
            }
            let version = version.as_deref().and_then(version_from);
            return Some(Step::Delete(local_below(&self.dst_root, key), version));
        }
    }
}

/// Page size of a confirming listing: one request confirms every extra
/// that falls between its first and last key, so a million extras in a
/// few ranges cost a few requests, not a million HEADs.
const CONFIRM_PAGE: u32 = 1000;

/// Confirms extras against the live source (see
/// [`SyncOptions::confirm_extras`]). Extras come in key order, so each
/// fresh page of the source's listing, started at the first extra it has
/// not covered, answers for every extra up to its last key (up to the
/// end, for the last page): a name in that span is held by the source
/// exactly when the page lists it.
struct Confirm {
    store: Arc<dyn Store>,
    root: Location,
    /// The span the last page answers for: from, to (None: to the end),
    /// and the names it lists.
    window: Option<(String, Option<String>, std::collections::HashSet<String>)>,
    kept: u64,
    /// Pages listed, for tests.
    pages: u64,
}

impl Confirm {
    /// Confirms against the folder `root` (its key a prefix ending in `/`,
    /// or empty) of `store`.
    fn new(store: Arc<dyn Store>, root: Location) -> Confirm {
        Confirm {
            store,
            root,
            window: None,
            kept: 0,
            pages: 0,
        }
    }

    /// Whether the live source holds `rel` (a name below the root); a
    /// name it holds is counted as kept.
    async fn holds(&mut self, rel: &str) -> Result<bool> {
        let covered = |w: &(String, Option<String>, _)| {
            w.0.as_str() <= rel && w.1.as_deref().is_none_or(|to| rel <= to)
        };
        if !self.window.as_ref().is_some_and(covered) {
            self.window = Some(self.page_from(rel).await?);
        }
        let (.., names) = self.window.as_ref().expect("listed");
        let held = names.contains(rel);
        self.kept += u64::from(held);
        Ok(held)
    }

    async fn page_from(
        &mut self,
        rel: &str,
    ) -> Result<(String, Option<String>, std::collections::HashSet<String>)> {
        let mut req = ListRequest {
            prefix: self.root.key.clone(),
            start_offset: Some(format!("{}{rel}", self.root.key)),
            max_results: Some(CONFIRM_PAGE),
            projection: Projection::NameSizeTime,
            ..Default::default()
        };
        loop {
            self.pages += 1;
            let page = self
                .store
                .list_page(&self.root.bucket, &req)
                .await
                .map_err(|e| e.with_url(self.root.to_string()))?;
            let names: std::collections::HashSet<String> = page
                .objects
                .iter()
                .filter_map(|m| m.key.strip_prefix(self.root.key.as_str()))
                .map(str::to_owned)
                .collect();
            let to = match (&page.next_page_token, page.objects.last()) {
                (None, _) => None,
                (Some(_), Some(last)) => Some(
                    last.key
                        .strip_prefix(self.root.key.as_str())
                        .unwrap_or(&last.key)
                        .to_owned(),
                ),
                // An empty page that goes on says nothing yet.
                (Some(t), None) => {
                    req.page_token = Some(t.clone());
                    continue;
                }
            };
            return Ok((rel.to_owned(), to, names));
        }
    }

    /// The one line saying how many extras were kept, if any.
    fn kept_line(&self, dst_root: &Location) -> Option<Step> {
        (self.kept > 0).then(|| {
            let n = self.kept;
            Step::Skipped(Skip::asked(
                Op::Delete,
                dst_root.to_string(),
                format!(
                    "sync --delete: kept {n} extra{s} that the source's listing did not list but {root} holds now: the listing is older than the source, or filtered",
                    s = if n == 1 { "" } else { "s" },
                    root = self.root
                ),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_core::BucketStore;
    use shoal_core::Scheme;

    fn entry(scheme: &str, root: &str, rel: &str, size: u64, t: i128) -> Entry {
        let src = Location::parse(&format!("{scheme}://b/{root}{rel}")).unwrap();
        Entry {
            meta: ObjectMeta {
                key: src.key.clone(),
                size,
                updated_ns: Some(t),
                // As a GCS listing: the metadata was there, with no time.
                recorded: shoal_core::file_time::Recorded::Absent,
                ..Default::default()
            },
            src,
            rel: rel.to_string(),
        }
    }

    fn listing(entries: Vec<Result<Entry>>) -> BoxStream<'static, Listed> {
        futures::stream::iter(entries)
            .map(|e| e.map(Seen::Item))
            .boxed()
    }

    /// A delete of a local extra never goes through a link below the
    /// destination the user named (one swapped in after the walk): it is
    /// refused, naming the link, and the file it points to stays.
    #[tokio::test]
    async fn local_deletes_never_follow_a_link_below_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let (dst, elsewhere) = (dir.path().join("dst"), dir.path().join("elsewhere"));
        std::fs::create_dir_all(dst.join("real")).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("victim"), b"theirs").unwrap();
        std::fs::write(dst.join("real/extra"), b"x").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dst.join("sub")).unwrap();
        let root = Location::parse(dst.to_str().unwrap()).unwrap();
        let run = crate::Run::new(crate::TransferOptions::default());
        let policy = shoal_core::retry::RetryPolicy::default();
        let delete = |rel: &str| crate::batch::Action::Delete {
            version: None,
            dst: local_below(&root, format!("{}/{rel}", dst.display())),
        };
        let e = crate::batch::execute(&delete("sub/victim"), &no_store(), &run, &policy)
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("/dst/sub: is a symbolic link; not followed for a write"),
            "{e}"
        );
        assert_eq!(std::fs::read(elsewhere.join("victim")).unwrap(), b"theirs");
        crate::batch::execute(&delete("real/extra"), &no_store(), &run, &policy)
            .await
            .unwrap();
        assert!(!dst.join("real/extra").exists());
    }

    fn no_store() -> StoreFor {
        Arc::new(|l: &Location| {
            Err(Error::invalid(
                Op::List,
                l.to_string(),
                "no store in this test",
            ))
        })
    }

    fn opts(delete: bool) -> SyncOptions {
        SyncOptions {
            compare: Compare::SizeAndTime,
            delete,
            limits: DeleteLimits::default(),
            update: false,
            no_clobber: false,
            confirm_extras: None,
        }
    }

    /// The plan as lines: `copy REL`, `delete REL`, `error …`.
    async fn plan(src: Vec<Result<Entry>>, dst: Vec<Result<Entry>>, o: SyncOptions) -> Vec<String> {
        let to = Location::parse("s3://b/dst/").unwrap();
        sync_plan(
            listing(src),
            listing(dst),
            to,
            o,
            no_store(),
            Rates::default(),
            None,
        )
        .map(|a| match a {
            Ok(Seen::Item(Action::Copy { dst, .. })) => format!("copy {}", dst.key),
            Ok(Seen::Item(Action::Delete { dst, .. })) => format!("delete {}", dst.key),
            Ok(Seen::Skipped(s)) => format!("skip {s}"),
            Err(e) => format!("error {e}"),
        })
        .collect()
        .await
    }

    /// A source listing that is not the store's word (a report filtered
    /// to a prefix, or older than the source): the extras it makes are
    /// confirmed against the live source first. Those the source holds
    /// are kept and counted in one line, the others deleted; one page of
    /// the live listing answers for up to 1,000 extras.
    #[tokio::test]
    async fn extras_of_a_kept_listing_are_confirmed_against_the_live_source() {
        use shoal_core::memory::MemoryStore;
        let store = Arc::new(MemoryStore::new());
        store.create_bucket("b").await.unwrap();
        let mut live: Vec<String> = (0..2500).map(|i| format!("b/{i:04}")).collect();
        live.extend(["a/1".into(), "c".into()]);
        for rel in &live {
            let opts = shoal_core::PutOptions::default();
            store
                .put(
                    "b",
                    &format!("src/{rel}"),
                    bytes::Bytes::from_static(b"x"),
                    &opts,
                )
                .await
                .unwrap();
        }
        let for_store: Arc<dyn Store> = store.clone();
        let store_for: StoreFor = Arc::new(move |_| Ok(for_store.clone()));
        // The report lists only `c`; the destination has everything, and
        // `d`, which the source does not have.
        let mut dst_names: Vec<&str> = live.iter().map(String::as_str).collect();
        dst_names.push("d");
        dst_names.sort();
        let src = Location::parse("s3://b/src/").unwrap();
        let run = |confirm: Option<Location>| {
            let store_for = store_for.clone();
            let dst_entries = ok(names("s3", "dst/", &dst_names, 1, 9));
            async move {
                let o = SyncOptions {
                    confirm_extras: confirm,
                    ..opts(true)
                };
                sync_plan(
                    listing(ok(names("s3", "src/", &["c"], 1, 5))),
                    listing(dst_entries),
                    Location::parse("s3://b/dst/").unwrap(),
                    o,
                    store_for,
                    Rates::default(),
                    None,
                )
                .map(|a| match a {
                    Ok(Seen::Item(Action::Delete { dst, .. })) => format!("delete {}", dst.key),
                    Ok(Seen::Item(Action::Copy { dst, .. })) => format!("copy {}", dst.key),
                    Ok(Seen::Skipped(s)) => format!("skip {s}"),
                    Err(e) => format!("error {e}"),
                })
                .collect::<Vec<_>>()
                .await
            }
        };
        // Trusted as it is, it would delete the copies of 2,501 live objects.
        assert_eq!(run(None).await.len(), 2502);
        let before = store.list_pages();
        let got = run(Some(src)).await;
        assert_eq!(got.len(), 2, "{:?}", &got[..got.len().min(5)]);
        assert_eq!(got[0], "delete dst/d");
        assert!(
            got[1].contains("kept 2501 extras that the source's listing did not list"),
            "{}",
            got[1]
        );
        let pages = store.list_pages() - before;
        assert!((3..=4).contains(&pages), "{pages} pages for 2,502 extras");
    }

    fn names(scheme: &str, root: &str, rels: &[&str], size: u64, t: i128) -> Vec<Entry> {
        rels.iter()
            .map(|r| entry(scheme, root, r, size, t))
            .collect()
    }

    fn ok(v: Vec<Entry>) -> Vec<Result<Entry>> {
        v.into_iter().map(Ok).collect()
    }

    /// Names that sort close together: `-` and `.` before `/`, a name and
    /// the same name as a folder, upper before lower case, multi-byte
    /// UTF-8 after ASCII.
    #[tokio::test]
    async fn awkward_orders_pair_up_exactly() {
        let mut both = vec![
            "A",
            "a",
            "a-b",
            "a.txt",
            "a/",
            "a/b",
            "a0",
            "b",
            "é",
            "é/x",
            "\u{10FFFF}",
        ];
        both.sort();
        let src = names("gs", "src/", &both, 10, 5);
        // The destination has every name, newer: nothing to do.
        let dst = names("s3", "dst/", &both, 10, 9);
        assert_eq!(
            plan(ok(src.clone()), ok(dst), opts(true)).await,
            Vec::<String>::new()
        );
        // Every other name missing from the destination, plus extras in
        // the gaps: copies and deletes exactly.
        let kept: Vec<&str> = both.iter().step_by(2).copied().collect();
        let mut dst_names: Vec<&str> = kept.clone();
        dst_names.extend(["a-a", "a/a", "a/c", "zz"]);
        dst_names.sort();
        let got = plan(
            ok(src),
            ok(names("s3", "dst/", &dst_names, 10, 9)),
            opts(true),
        )
        .await;
        let mut want: Vec<String> = both
            .iter()
            .skip(1)
            .step_by(2)
            .map(|r| format!("copy dst/{r}"))
            .collect();
        want.extend(["a-a", "a/a", "a/c", "zz"].map(|r| format!("delete dst/{r}")));
        let mut sorted_got = got.clone();
        sorted_got.sort();
        want.sort();
        assert_eq!(sorted_got, want);
    }

    #[tokio::test]
    async fn differs_by_size_or_an_older_destination() {
        let src = vec![
            Ok(entry("gs", "", "same", 3, 5)),
            Ok(entry("gs", "", "size", 4, 5)),
            Ok(entry("gs", "", "time", 3, 5)),
        ];
        let dst = vec![
            Ok(entry("s3", "dst/", "same", 3, 9)),
            Ok(entry("s3", "dst/", "size", 3, 9)),
            Ok(entry("s3", "dst/", "time", 3, 1)),
        ];
        assert_eq!(
            plan(src, dst, opts(false)).await,
            ["copy dst/size", "copy dst/time"]
        );
    }

    /// A recorded file time stands for the object's own: an object
    /// uploaded long after its file was written is as old as the file
    /// (kept to the second by gcloud's form), and one that records
    /// nothing keeps its own time.
    #[tokio::test]
    async fn recorded_times_stand_for_the_objects() {
        use shoal_core::file_time::{FileTime, Recorded};
        const S: i128 = 1_000_000_000;
        let at = |mut e: Entry, secs: i128, whole_seconds: bool| {
            e.meta.recorded = Recorded::At(FileTime {
                ns: secs * S,
                whole_seconds,
            });
            e
        };
        let src = vec![
            Ok(at(entry("gs", "", "a", 3, 900 * S), 100, true)),
            Ok(entry("gs", "", "b", 3, 900 * S)),
            Ok(at(entry("gs", "", "c", 3, 900 * S), 300, false)),
        ];
        // Local files (their time is their own); `a`'s was written at
        // 100.4 s: the same second.
        let file = |rel: &str, t: i128| {
            let mut e = entry("gs", "dst/", rel, 3, t);
            e.src = Location::parse(&format!("/dst/{rel}")).unwrap();
            e.meta.recorded = Recorded::Unknown;
            e
        };
        let dst = vec![
            Ok(file("a", 100 * S + 4 * S / 10)),
            Ok(file("b", 100 * S)),
            Ok(file("c", 200 * S)),
        ];
        assert_eq!(
            plan(src, dst, opts(false)).await,
            ["copy dst/b", "copy dst/c"]
        );
    }

    /// `--size-only` copies what differs in size, whatever the times;
    /// `--update` never replaces a newer destination, whatever the sizes.
    #[tokio::test]
    async fn size_only_and_update() {
        let src = || {
            vec![
                Ok(entry("gs", "", "new", 3, 5)),
                Ok(entry("gs", "", "newer-bigger", 4, 5)),
                Ok(entry("gs", "", "newer-same", 3, 5)),
                Ok(entry("gs", "", "older-bigger", 4, 5)),
                Ok(entry("gs", "", "older-same", 3, 5)),
            ]
        };
        // "older"/"newer": the destination's age against the source's.
        let dst = || {
            vec![
                Ok(entry("s3", "dst/", "newer-bigger", 3, 9)),
                Ok(entry("s3", "dst/", "newer-same", 3, 9)),
                Ok(entry("s3", "dst/", "older-bigger", 3, 1)),
                Ok(entry("s3", "dst/", "older-same", 3, 1)),
            ]
        };
        let size_only = SyncOptions {
            compare: Compare::SizeOnly,
            ..opts(false)
        };
        assert_eq!(
            plan(src(), dst(), size_only).await,
            [
                "copy dst/new",
                "copy dst/newer-bigger",
                "copy dst/older-bigger"
            ]
        );
        let update = SyncOptions {
            update: true,
            ..opts(false)
        };
        assert_eq!(
            plan(src(), dst(), update).await,
            [
                "copy dst/new",
                "copy dst/older-bigger",
                "copy dst/older-same"
            ]
        );
        let both = SyncOptions {
            compare: Compare::SizeOnly,
            update: true,
            ..opts(false)
        };
        assert_eq!(
            plan(src(), dst(), both).await,
            ["copy dst/new", "copy dst/older-bigger"]
        );
    }

    /// `--no-clobber`: what the destination lists is skipped, never
    /// copied over; what it lacks is copied.
    #[tokio::test]
    async fn no_clobber_skips_what_the_destination_has() {
        let src = vec![
            Ok(entry("gs", "", "a", 4, 5)),
            Ok(entry("gs", "", "b", 3, 5)),
        ];
        let dst = vec![Ok(entry("s3", "dst/", "a", 3, 1))];
        let o = SyncOptions {
            no_clobber: true,
            ..opts(false)
        };
        let got = plan(src, dst, o).await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[0].starts_with("skip ") && got[0].contains("--no-clobber"),
            "{got:?}"
        );
        assert_eq!(got[1], "copy dst/b");
    }

    #[tokio::test]
    async fn empty_sides() {
        let src = names("gs", "", &["a", "b"], 1, 1);
        assert_eq!(
            plan(ok(src), vec![], opts(true)).await,
            ["copy dst/a", "copy dst/b"]
        );
        // Nothing in the source: no deletion, one refusal.
        let dst = names("s3", "dst/", &["a", "b"], 1, 1);
        let got = plan(vec![], ok(dst.clone()), opts(true)).await;
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("2 extras not deleted: the source lists nothing"),
            "{got:?}"
        );
        // Unless asked for; and without --delete nothing at all.
        let o = SyncOptions {
            limits: DeleteLimits {
                delete_when_source_empty: true,
                ..DeleteLimits::default()
            },
            ..opts(true)
        };
        assert_eq!(
            plan(vec![], ok(dst.clone()), o).await,
            ["delete dst/a", "delete dst/b"]
        );
        assert!(plan(vec![], ok(dst), opts(false)).await.is_empty());
        // Refused even with nothing to delete yet: the URL is likely wrong.
        let got = plan(vec![], vec![], opts(true)).await;
        assert!(
            got.len() == 1 && got[0].contains("0 extras not deleted: the source lists nothing"),
            "{got:?}"
        );
    }

    /// A source listing that fails half way: copies go on, nothing is
    /// deleted (not even what was extra before the failure), and the
    /// error says so, in one line.
    #[tokio::test]
    async fn a_source_failing_half_way_stops_the_deletes() {
        let mut src = ok(names("gs", "", &["b", "d"], 1, 1));
        src.push(Err(Error::new(
            ErrorKind::ServerBusy,
            Op::List,
            "gs://b/",
            "503",
        )));
        let dst = ok(names("s3", "dst/", &["a", "b", "c", "e", "f"], 1, 9));
        let got = plan(src, dst, opts(true)).await;
        assert_eq!(got[0], "copy dst/d", "{got:?}");
        assert!(
            got[1].starts_with("error ") && got[1].contains("503"),
            "{got:?}"
        );
        assert!(got[1].contains("nothing deleted"), "{got:?}");
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[tokio::test]
    async fn max_delete_refuses_a_run_that_would_delete_more() {
        let src = ok(names("gs", "", &["m"], 1, 1));
        let dst = ok(names("s3", "dst/", &["a", "b", "c", "m", "x"], 1, 9));
        let o = SyncOptions {
            limits: DeleteLimits {
                max_delete: Some(2),
                ..DeleteLimits::default()
            },
            ..opts(true)
        };
        let got = plan(src, dst, o).await;
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("4 extras not deleted: more than --max-delete 2"),
            "{got:?}"
        );
        let o = SyncOptions {
            limits: DeleteLimits {
                max_delete: Some(4),
                ..DeleteLimits::default()
            },
            ..opts(true)
        };
        let dst = ok(names("s3", "dst/", &["a", "b", "c", "m", "x"], 1, 9));
        let got = plan(ok(names("gs", "", &["m"], 1, 1)), dst, o).await;
        assert_eq!(
            got,
            [
                "delete dst/a",
                "delete dst/b",
                "delete dst/c",
                "delete dst/x"
            ]
        );
    }

    /// A listing out of order would make the merge call a name extra that
    /// the source has later: it ends the plan instead.
    #[tokio::test]
    async fn out_of_order_listings_end_the_plan() {
        let src = ok(names("gs", "", &["b", "a"], 1, 1));
        let dst = ok(names("s3", "dst/", &["a", "c"], 1, 9));
        let got = plan(src, dst, opts(true)).await;
        assert!(got.iter().all(|l| !l.starts_with("delete")), "{got:?}");
        assert!(got.last().unwrap().contains("out of key order"), "{got:?}");
        let src = ok(names("gs", "", &["a", "c"], 1, 1));
        let dst = ok(names("s3", "dst/", &["b", "b"], 1, 9));
        let got = plan(src, dst, opts(true)).await;
        assert!(got.last().unwrap().contains("out of key order"), "{got:?}");
    }

    /// 300,000 keys on each side (a third differing, a third extra): the
    /// plan never holds more than the comparisons in flight, however
    /// many keys pass through it.
    #[tokio::test]
    async fn a_big_sync_holds_a_bounded_number_of_entries() {
        const N: usize = 300_000;
        let src = futures::stream::iter(0..N)
            .filter(|i| futures::future::ready(i % 3 != 2))
            .map(|i| Ok(Seen::Item(entry("gs", "", &format!("{i:08}"), 7, 5))))
            .boxed();
        let dst = futures::stream::iter(0..N)
            .filter(|i| futures::future::ready(i % 3 != 0))
            .map(|i| {
                Ok(Seen::Item(entry(
                    "s3",
                    "dst/",
                    &format!("{i:08}"),
                    if i % 3 == 1 { 7 } else { 8 },
                    9,
                )))
            })
            .boxed();
        let stats = Arc::new(PlanStats::default());
        let to = Location::parse("s3://b/dst/").unwrap();
        let mut p = sync_plan(
            src,
            dst,
            to,
            opts(true),
            no_store(),
            Rates::default(),
            Some(stats.clone()),
        );
        let (mut copies, mut deletes) = (0, 0);
        while let Some(a) = p.next().await {
            match a.unwrap().item().unwrap() {
                Action::Copy { .. } => copies += 1,
                Action::Delete { .. } => deletes += 1,
            }
        }
        assert_eq!((copies, deletes), (N / 3, N / 3));
        let peak = stats.peak_held.load(Ordering::Relaxed);
        assert!(
            peak <= 2 * COMPARE_AT_ONCE + 2,
            "held {peak} entries at once"
        );
        assert_eq!(stats.held.load(Ordering::Relaxed), 0);
        let _ = Scheme::Gs;
    }

    /// A range of the source meets the destination's same range only:
    /// names outside it are neither copied nor called extra, and a bound
    /// outside the source's prefix is refused.
    #[tokio::test]
    async fn a_range_decides_only_its_own_names() {
        use bytes::Bytes;
        use shoal_core::PutOptions;
        use shoal_core::memory::MemoryStore;
        let mem = Arc::new(MemoryStore::new());
        mem.create_bucket("b").await.unwrap();
        let put = |k: &'static str, v: &'static [u8]| {
            let mem = mem.clone();
            async move {
                mem.put("b", k, Bytes::from_static(v), &PutOptions::default())
                    .await
                    .unwrap()
            }
        };
        for k in ["src/a", "src/b", "src/c", "src/d", "src/e"] {
            put(k, b"one").await;
        }
        // Written after the source: newer, so equal sizes are the same.
        put("dst/b", b"one").await;
        put("dst/bb", b"extra").await;
        put("dst/c", b"other size").await;
        put("dst/e2", b"extra elsewhere").await;
        let store: Arc<dyn Store> = mem.clone();
        let store_for: StoreFor = Arc::new(move |_: &Location| Ok(store.clone()));
        let src = Location::parse("s3://b/src").unwrap();
        let dst = Location::parse("s3://b/dst/").unwrap();
        let run = |start: &str, end: Option<&str>| {
            let range = KeyRange {
                start: start.into(),
                end: end.map(Into::into),
            };
            let plan = sync_range(
                &src,
                &dst,
                &range,
                opts(true),
                store_for.clone(),
                Rates::default(),
            );
            async move {
                let mut got: Vec<String> = plan?
                    .map(|a| match a {
                        Ok(Seen::Item(Action::Copy { dst, .. })) => format!("copy {}", dst.key),
                        Ok(Seen::Item(Action::Delete { dst, .. })) => format!("delete {}", dst.key),
                        Ok(Seen::Skipped(s)) => format!("skip {s}"),
                        Err(e) => format!("error {e}"),
                    })
                    .collect()
                    .await;
                got.sort();
                Ok::<_, Error>(got)
            }
        };
        assert_eq!(
            run("src/b", Some("src/d")).await.unwrap(),
            ["copy dst/c", "delete dst/bb"]
        );
        assert_eq!(run("src/", Some("src/b")).await.unwrap(), ["copy dst/a"]);
        assert_eq!(
            run("src/d", None).await.unwrap(),
            ["copy dst/d", "copy dst/e", "delete dst/e2"]
        );
        let e = run("t/x", None).await.unwrap_err();
        assert!(e.to_string().contains("does not lie below"), "{e}");
    }

    /// Extras past the memory limit go through the temporary file and
    /// come back the same, in order, whatever the key holds.
    #[test]
    fn extras_spill_and_come_back_intact() {
        let mut x = Extras::default();
        let keys: Vec<String> = (0..SPILL_AT + 5)
            .map(|i| match i % 4 {
                0 => format!("line\nbreak {i}"),
                1 => format!("\"quoted\" {i}"),
                2 => format!("é/\u{10FFFF}/{i}"),
                _ => format!("plain {i}"),
            })
            .collect();
        let version = |i: usize| {
            let v = match i % 3 {
                0 => Some(shoal_core::ObjectVersion::Generation(i as i64)),
                1 => Some(shoal_core::ObjectVersion::ETag(format!("\"e:{i}\""))),
                _ => None,
            };
            v.as_ref().map(version_text)
        };
        for (i, k) in keys.iter().enumerate() {
            x.push(k.clone(), format!("rel {k}"), version(i)).unwrap();
        }
        assert!(x.file.is_some() && x.mem.is_empty());
        let back: Vec<Extra> = x.drain().unwrap().map(|k| k.unwrap()).collect();
        let want: Vec<Extra> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), format!("rel {k}"), version(i)))
            .collect();
        assert_eq!(back, want);
        assert_eq!(
            version_from(&version_text(&shoal_core::ObjectVersion::ETag(
                "\"a:b\"".into()
            ))),
            Some(shoal_core::ObjectVersion::ETag("\"a:b\"".into()))
        );
    }
}
