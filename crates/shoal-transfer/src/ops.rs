//! The engine's command API: what the CLI, the Python package, its fsspec
//! filesystem and its Dask functions call to copy trees, sync, move, run
//! lists of pairs and delete.
//!
//! Why one API: each front end used to assemble a plan from the engine's
//! parts (list, filter, place, check overlap, run), and each new surface
//! (run files, Python's lists of pairs, Dask's split syncs) had to
//! remember which checks go where. Here a plan that could write what it
//! reads cannot be made at all: [`Sync::new`], [`TreeCopy::plan`] and
//! [`Pairs::check`] run the [`crate::safety`] checks before they hand back
//! anything that runs, and the modules that make plans (`batch`, `tree`,
//! `sync`, `delete`, `copy`, `safety`) are private to this crate. What a
//! front end keeps is translation: its flags or keywords to these specs,
//! the outcomes to its lines, exit codes or exceptions.
//!
//! The vocabulary the front ends need to read a plan's outcomes (an
//! [`Action`], a skip or a failure per item, a [`BatchReport`]) is
//! re-exported here, and so are the engine functions that keep a promise
//! on their own (a move's deletion pinned to what was copied, a delete
//! pinned to a version).

use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use shoal_core::retry::RetryPolicy;
use shoal_core::{Error, ErrorKind, Location, Op, Projection, PutOptions, Result, Seen};
use shoal_list::Filter;

use crate::Run;
use crate::rate::Rates;

/// Runs a plan: copies and deletes with the batch's budgets, as the
/// [`Mode`] says (moves, deletes held until every copy ended well). Every
/// command that runs many actions runs them here.
pub use crate::batch::run_plan as run;
pub use crate::batch::{
    Action, BatchCounters, BatchReport, Cause, Mode, OnOutcome, Outcome, Planned, Snapshot,
    StoreFor,
};
pub use crate::copy::copy_one;
pub use crate::delete::{OnFallback, Target, delete_all, delete_current};
pub use crate::safety::conflicts::{Conflict, Conflicts, How, Places, RUN_LEN, Touch};
pub use crate::safety::deletes::{
    DeleteLimits, Held, LocalStamp, delete_at, delete_moved, deletes_held,
};
pub use crate::safety::overlap::resolve;
pub use crate::sync::{COMPARE_AT_ONCE, Compare, KeyRange, PlanStats, SyncOptions};
pub use crate::tree::{Entry, Listed, Symlinks, Walk, copy_root, destination, place, sync_root};

/// A sync from `src` to `dst` (folders or bucket prefixes) that has been
/// checked: the two do not overlap, so its copies never write what it
/// lists and its deletes never remove what it reads. Made before any
/// listing starts, so a refused sync sends nothing.
#[derive(Debug, Clone)]
pub struct Sync {
    src: Location,
    dst: Location,
    opts: SyncOptions,
}

impl Sync {
    /// Checks a sync (see [`crate::safety::overlap`]): `verb` names it in
    /// the refusal.
    pub fn new(verb: &str, src: &Location, dst: &Location, opts: SyncOptions) -> Result<Sync> {
        crate::safety::overlap::refuse_overlap(verb, src, dst)?;
        Ok(Sync {
            src: src.clone(),
            dst: dst.clone(),
            opts,
        })
    }

    /// What the source's listing needs to carry for the comparison asked.
    pub fn projection(&self) -> Projection {
        self.opts.projection()
    }

    /// The plan from both sides' entries in key order (a live listing, a
    /// local walk, a kept listing or an inventory report; a listing that
    /// is not live must come with [`SyncOptions::confirm_extras`], so an
    /// extra is confirmed against the live source before it is deleted).
    pub fn plan(
        self,
        src_entries: BoxStream<'static, Listed>,
        dst_entries: BoxStream<'static, Listed>,
        store_for: StoreFor,
        rates: Rates,
        stats: Option<Arc<PlanStats>>,
    ) -> BoxStream<'static, Planned> {
        crate::sync::sync_plan(
            src_entries,
            dst_entries,
            self.dst,
            self.opts,
            store_for,
            rates,
            stats,
        )
    }

    /// The plan for one key range of the source, both sides listed live
    /// page by page (a sync split across Dask workers).
    pub fn range(
        self,
        range: &KeyRange,
        store_for: StoreFor,
        rates: Rates,
    ) -> Result<BoxStream<'static, Planned>> {
        crate::sync::sync_range(&self.src, &self.dst, range, self.opts, store_for, rates)
    }
}

/// One side of a sync or the source of a tree copy, listed: a local
/// folder walked whole, or a bucket prefix listed (in key order with
/// `sorted`, as a sync's merge needs), named relative to `root`, and
/// filtered by `filter` (names judged without `lead`). `tally` counts
/// what each rule left out.
#[derive(Clone, Default)]
pub struct Listing {
    /// The prefix entries are named below.
    pub root: String,
    /// What each entry carries (checksums cost a listing more).
    pub projection: Projection,
    /// Everything below, not one level.
    pub recursive: bool,
    /// Key order (a bucket's parallel listing holds later pages back).
    pub sorted: bool,
    /// How a local folder is walked.
    pub walk: Walk,
    /// `--include` / `--exclude`.
    pub filter: Option<Arc<Filter>>,
    /// The part of each name the rules do not see (`cp -r DIR`: `DIR/`).
    pub lead: String,
    /// Counts each entry a rule leaves out (a dry run's "kept by" lines).
    pub tally: Option<Arc<shoal_list::filter::Tally>>,
}

impl Listing {
    /// The entries of `loc` (its store from `store_for` unless local).
    pub fn entries(
        &self,
        loc: &Location,
        store_for: &StoreFor,
    ) -> Result<BoxStream<'static, Listed>> {
        let store = if loc.is_local() {
            None
        } else {
            Some(store_for(loc)?)
        };
        let entries = crate::tree::enumerate(
            loc,
            store,
            &self.root,
            self.projection,
            shoal_list::parallel::DEFAULT_WORKERS,
            self.recursive,
            self.sorted,
            self.walk,
        );
        Ok(self.filtered(entries, loc.is_local()))
    }

    /// Entries from elsewhere (a listing file, an inventory report) under
    /// the same rules as a live listing's.
    pub fn filtered(
        &self,
        entries: BoxStream<'static, Listed>,
        local: bool,
    ) -> BoxStream<'static, Listed> {
        crate::tree::filter_entries(
            entries,
            self.filter.clone(),
            &self.lead,
            local.then_some(self.root.as_str()),
            self.tally.clone(),
        )
    }
}

/// `cp -r`, `mv -r`, a glob, a run file's glob line, Dask's tree copy:
/// what `src` names copied below the folder `dst`.
#[derive(Clone)]
pub struct TreeCopy {
    /// Names the command in a refusal (`cp -r`, `mv -r`, `copy`).
    pub verb: String,
    /// A folder, prefix or glob.
    pub src: Location,
    /// The folder the tree is copied into.
    pub dst: Location,
    /// The level the tree nests under (`cp -r DIR`: DIR's name), or None
    /// when its contents land in `dst` (`.`, a prefix ending in `/`, a
    /// glob).
    pub name: Option<String>,
    /// Everything below, not one level.
    pub recursive: bool,
    /// How a local source is walked.
    pub walk: Walk,
    /// `--include` / `--exclude`, judged below the tree's own level.
    pub filter: Option<Arc<Filter>>,
}

impl TreeCopy {
    /// Refuses a tree that would land where it is read from (see
    /// [`crate::safety::overlap::refuse_tree_overlap`]), before anything
    /// is listed.
    pub fn check(&self) -> Result<()> {
        let lands = match &self.name {
            Some(name) => crate::tree::destination(&self.dst, name, &self.src.to_string())
                .unwrap_or_else(|_| self.dst.clone()),
            None => self.dst.clone(),
        };
        crate::safety::overlap::refuse_tree_overlap(&self.verb, &self.src, &lands, self.recursive)
    }

    /// The copies, as the source is listed: checked first ([`Self::check`]),
    /// so a plan that would read what it writes is never made.
    pub fn plan(&self, store_for: &StoreFor) -> Result<BoxStream<'static, Planned>> {
        self.check()?;
        let listing = Listing {
            root: crate::tree::copy_root(&self.src)?,
            projection: Projection::Full,
            recursive: self.recursive,
            sorted: false,
            walk: self.walk,
            filter: self.filter.clone(),
            lead: self
                .name
                .as_ref()
                .map_or_else(String::new, |n| format!("{n}/")),
            tally: None,
        };
        let entries = listing.entries(&self.src, store_for)?;
        Ok(crate::tree::copy_actions(entries, self.dst.clone()))
    }
}

/// Pairs of (source, destination), one object each, run as one plan
/// (Python's `copy_many` and `move_many`): checked together before any
/// runs, so no pair reads, writes or deletes what another writes or
/// deletes ([`crate::safety::conflicts::check_pairs`]).
#[derive(Debug)]
pub struct Pairs {
    pairs: Vec<Result<(Location, Location)>>,
    moving: bool,
}

impl Pairs {
    /// Checks the pairs that parsed as one plan; those that did not keep
    /// their error for their place in the answer.
    pub fn check(pairs: Vec<Result<(Location, Location)>>, moving: bool) -> Result<Pairs> {
        let checked: Vec<(Location, Location)> = pairs
            .iter()
            .filter_map(|p| p.as_ref().ok().cloned())
            .collect();
        crate::safety::conflicts::check_pairs(&checked, moving)?;
        Ok(Pairs { pairs, moving })
    }

    /// The locations on a store, for building the stores once.
    pub fn remote(&self) -> impl Iterator<Item = &Location> {
        self.pairs
            .iter()
            .filter_map(|p| p.as_ref().ok())
            .flat_map(|(a, b)| [a, b])
            .filter(|l| !l.is_local())
    }

    /// Runs every pair with the batch's budgets, as the batch runs a
    /// tree's copies (moves delete each source only once its copy is in
    /// place, at the version copied). `put`, when given, is what uploads
    /// of local files store, with their precondition; it applies to those
    /// only. One answer per pair, in order: bytes, a skip, or the error.
    pub async fn run(
        self,
        store_for: StoreFor,
        mut run: Run,
        policy: RetryPolicy,
        put: Option<PutOptions>,
    ) -> Vec<Result<Seen<u64>>> {
        let slots = crate::batch::share_budgets(&mut run);
        let moving = self.moving;
        let put = put.map(Arc::new);
        futures::stream::iter(self.pairs)
            .map(|p| {
                let (store_for, run, put, policy) =
                    (store_for.clone(), run.clone(), put.clone(), policy);
                async move {
                    let (src, dst) = p?;
                    let Some(put) = put else {
                        let action = Action::Copy {
                            src,
                            meta: None,
                            dst,
                        };
                        if moving {
                            return crate::batch::execute_move(&action, &store_for, &run, &policy)
                                .await;
                        }
                        return crate::batch::execute(&action, &store_for, &run, &policy).await;
                    };
                    if moving || !src.is_local() || dst.is_local() {
                        return Err(Error::new(
                            ErrorKind::Unsupported,
                            Op::Copy,
                            dst.to_string(),
                            "content_type and if_not_exists apply to uploads of local files only",
                        ));
                    }
                    let path = std::path::Path::new(&src.key);
                    let r =
                        crate::upload::upload_file_with(store_for(&dst)?, path, &dst, &put, &run)
                            .await?;
                    Ok(Seen::Item(r.bytes))
                }
            })
            .buffered(slots * 2)
            .collect()
            .await
    }
}

// The engine's other commands and the pieces front ends read data with,
// each under its own name: these modules are private, and what is listed
// here is all a front end may reach of them.

/// `shoal check`: two trees compared entry by entry.
pub mod check {
    pub use crate::check::{Verdict, check_trees};
}

/// What a run leaves to finish or undo on the way out (Ctrl-C, drop).
pub mod cleanup {
    pub use crate::cleanup::kept;
    pub use shoal_core::cleanup::finish;
}

/// One object copied within or between stores.
pub mod cloud_copy {
    pub use crate::cloud_copy::{copy_object, same_store};
}

/// Decompressing what is read (`cat`, dataset reads).
pub mod decode {
    pub use crate::decode::Decompress;
}

/// One object down to a file or a writer, sliced and verified.
pub mod download {
    pub use crate::download::{
        check_destination, download_known, download_to_file, download_to_writer,
    };
}

/// `shoal hash`: checksums of files and objects.
pub mod hash {
    pub use crate::hash::{Sums, hash_all};
}

/// Byte ranges of an object read into memory.
pub mod into_memory {
    pub use crate::into_memory::{Buffer, RangeRead, read_into, read_ranges};
}

/// Inventory reports read as listings (a hint, never alone a reason to
/// delete: see [`SyncOptions::confirm_extras`]).
pub mod inventory {
    pub use crate::inventory::{Part, Report, entries, fetch, is_manifest, open};
}

/// What a write stores beside its bytes: the flags' values checked.
pub mod metadata {
    pub use crate::metadata::{
        acl, check_storage_class, guess, header_value, metadata_entry, storage_class,
    };
}

/// Byte and request rates a run shares.
pub mod rate {
    pub use crate::rate::Rates;
}

/// Streaming reads of many objects (`cat`, datasets, fsspec files).
pub mod read {
    pub use crate::read::{BLOCK, Chunk, DEFAULT_READ_AHEAD, ReadOptions, Reader, Source};
}

/// What `cat` reads: objects, globs, files and stdin as one list.
pub mod sources {
    pub use crate::sources::read_sources;
}

/// A big copy split into parts that run on many machines (Dask).
pub mod split_copy {
    pub use crate::split_copy::{PartRange, Started, abort, begin, copy_parts, finish};
}

/// Streams of unknown length, up or down.
pub mod stream {
    pub use crate::stream::{reader_stream, upload_stream};
}

/// How big a task or a part is, from the plan and the cluster.
pub mod task_size {
    pub use crate::task_size::{grain, join, part_size, task_bytes};
}

/// `shoal update`: what an object stores beside its bytes, changed in
/// place, pinned to the version read.
pub mod update {
    pub use crate::update::{Change, Outcome, update_current};
}

/// One file up, whole or in parts.
pub mod upload {
    pub use crate::upload::{upload_file, upload_file_with};
}

/// `shoal uploads`: multipart uploads in progress, listed and aborted.
pub mod uploads {
    pub use crate::uploads::{abort, list};
}

/// Object versions: read, copied, restored, deleted one by one.
pub mod versions {
    pub use crate::versions::{Restored, copy, delete, head, parse, restore};
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use shoal_core::memory::MemoryStore;
    use shoal_core::{BucketStore, Store};
    use shoal_testkit::wrap::Wrapped;

    use super::*;
    use crate::TransferOptions;

    fn at(url: &str) -> Location {
        Location::parse(url).unwrap()
    }

    /// A memory store holding `keys` in bucket `b`, wrapped to count the
    /// requests that reach it.
    async fn store(keys: &[&str]) -> (Arc<Wrapped>, StoreFor) {
        let inner = Arc::new(MemoryStore::new());
        inner.create_bucket("b").await.unwrap();
        for k in keys {
            let body = Bytes::from(k.as_bytes().to_vec());
            inner
                .put("b", k, body, &PutOptions::default())
                .await
                .unwrap();
        }
        let w = Arc::new(Wrapped::new(inner));
        let s: Arc<dyn Store> = w.clone();
        (w, Arc::new(move |_: &Location| Ok(s.clone())))
    }

    fn tree(src: &str, dst: &str) -> TreeCopy {
        TreeCopy {
            verb: "cp -r".to_owned(),
            src: at(src),
            dst: at(dst),
            name: None,
            recursive: true,
            walk: Walk::default(),
            filter: None,
        }
    }

    /// A plan that would write what it reads is never made: no listing,
    /// no request, whichever front end asks.
    #[tokio::test]
    async fn a_refused_plan_sends_nothing() {
        let (w, store_for) = store(&["data/a", "data/sub/b"]).await;
        for (src, dst) in [
            ("gs://b/data/", "gs://b/data/sub/"),
            ("gs://b/data/sub/", "gs://b/data/"),
            ("gs://b/data/", "gs://b/data/"),
            ("gs://b/data/**", "gs://b/data/x/"),
        ] {
            let e = tree(src, dst).plan(&store_for).err().expect(src);
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{src} {dst}: {e}");
            let e = Sync::new("sync", &at(src), &at(dst), SyncOptions::default());
            if !src.contains('*') {
                assert_eq!(e.unwrap_err().kind(), ErrorKind::InvalidInput, "{src}");
            }
        }
        // A tree that nests under its own name lands at DST/<name>: that
        // is what must not overlap it.
        let named = TreeCopy {
            name: Some("data".to_owned()),
            ..tree("gs://b/data", "gs://b/")
        };
        assert!(named.plan(&store_for).is_err());
        // Pairs: the second reads what the first writes.
        let pairs = vec![
            Ok((at("gs://b/data/a"), at("gs://b/c"))),
            Ok((at("gs://b/c"), at("gs://b/d"))),
        ];
        let e = Pairs::check(pairs, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(w.calls().is_empty(), "{:?}", w.calls());
    }

    /// A tree whose destination lies beside it is listed and copied.
    #[tokio::test]
    async fn a_checked_tree_is_listed_and_copied() {
        let (w, store_for) = store(&["data/a", "data/sub/b", "other/c"]).await;
        let plan = tree("gs://b/data/", "gs://b/copy/")
            .plan(&store_for)
            .unwrap();
        let report = run(
            plan,
            store_for,
            Run::new(TransferOptions::default()),
            RetryPolicy::default(),
            Arc::new(BatchCounters::default()),
            Mode::default(),
        )
        .await;
        assert_eq!((report.copied, report.failed), (2, 0), "{report:?}");
        // `cp -r gs://b/data/ gs://b/copy/` nests the tree under its name.
        for k in ["copy/data/a", "copy/data/sub/b"] {
            w.head("b", k).await.unwrap();
        }
    }

    /// Each pair gets its answer in its place: bytes, or the error of a
    /// pair that did not parse; a move deletes what it copied.
    #[tokio::test]
    async fn pairs_answer_in_order_and_moves_delete_their_sources() {
        let (w, store_for) = store(&["x", "y"]).await;
        let bad = Error::invalid(Op::Copy, "nowhere", "not a URL");
        let pairs = vec![
            Ok((at("gs://b/x"), at("gs://b/x2"))),
            Err(bad),
            Ok((at("gs://b/y"), at("gs://b/y2"))),
        ];
        let checked = Pairs::check(pairs, true).unwrap();
        assert_eq!(checked.remote().count(), 4);
        let run_ = Run::new(TransferOptions::default());
        let out = checked
            .run(store_for, run_, RetryPolicy::default(), None)
            .await;
        assert!(matches!(out[0], Ok(Seen::Item(1))), "{:?}", out[0]);
        assert_eq!(out[1].as_ref().unwrap_err().kind(), ErrorKind::InvalidInput);
        assert!(matches!(out[2], Ok(Seen::Item(1))), "{:?}", out[2]);
        for (gone, there) in [("x", "x2"), ("y", "y2")] {
            assert_eq!(
                w.head("b", gone).await.unwrap_err().kind(),
                ErrorKind::NotFound
            );
            w.head("b", there).await.unwrap();
        }
    }
}
