//! `shoal sync SRC DST`: make DST hold what SRC holds.
//!
//! SRC's contents map onto DST (`sync ./site gs://b/www` puts `site/a` at
//! `gs://b/www/a`). Default comparison is size, then modification time
//! (copy when the source is newer): a second sync moves nothing because
//! every copy is newer than its source. `--checksum` compares the
//! strongest checksum both sides can give (CRC32C, CRC32/CRC64NVME, a
//! composite one, MD5; computed for local files), else size and time;
//! `--size-only` compares sizes alone; `--update` keeps any destination
//! newer than its source whatever the comparison says. `--include` /
//! `--exclude` filter both listings by the same relative names
//! (docs/filters.md), so an excluded destination file, or anything below
//! an excluded folder (`logs/`), is neither compared nor deleted.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_core::{Location, Projection, StoreFor};
use shoal_transfer::ops::{Compare, Listing, Sync, SyncOptions, Walk, sync_root};

use crate::args::SyncArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: SyncArgs) -> CmdResult {
    let src = super::parse(&a.src)?;
    let dst = super::parse(&a.dst)?;
    let sync = check(&a, &src, &dst)?;
    let filter = if a.delete {
        a.filters.filter_for_delete()?
    } else {
        a.filters.filter()?
    };
    let mut transfer = ctx.transfer.clone();
    transfer.put =
        (a.metadata.put(&dst)).map_err(|m| Failure::Usage(format!("sync {dst}: {m}")))?;
    let store_for = ctx.store_for(&[&src, &dst])?;
    // A dry run of --delete counts what the rules keep out of the
    // destination's listing (so out of the deletions).
    let tally = match &filter {
        Some(f) if a.dry_run && a.delete => Some(Arc::new(f.tally())),
        _ => None,
    };
    // Reports kept in a bucket are copied down and checked before the run.
    let mut src_report = None;
    let mut dst_report = None;
    for (listing, report) in [
        (&a.source_listing, &mut src_report),
        (&a.dest_listing, &mut dst_report),
    ] {
        if let Some(url) = listing.as_deref().filter(|l| is_cloud_url(l)) {
            *report = Some(crate::listing_file::fetch_inventory(ctx, url).await?);
        }
    }
    let sides = Sides {
        store_for: &store_for,
        filter: &filter,
        quiet: ctx.quiet,
        projection: sync.projection(),
    };
    // Both sides in key order: the plan is a merge of the two listings
    // (or of listings kept in files). The destination's own links and
    // special files are neither copied nor deleted.
    let dst_walk = Walk {
        destination: true,
        ..Default::default()
    };
    let dst_entries = if dst.is_local() && !std::path::Path::new(&dst.key).exists() {
        futures::stream::empty().boxed()
    } else {
        sides.side(&dst, &a.dest_listing, dst_report, dst_walk, tally.clone())?
    };
    let plan = sync.plan(
        sides.side(&src, &a.source_listing, src_report, a.links.walk(), None)?,
        dst_entries,
        store_for.clone(),
        ctx.rates.clone(),
        None,
    );
    if a.dry_run {
        let done = crate::cmd::batch::dry_run(ctx, plan, "sync").await;
        if let Some(t) = &tally {
            crate::cmd::batch::say_kept(
                ctx,
                "sync",
                t,
                "in the destination, not compared or deleted",
            );
        }
        return done;
    }
    transfer.no_clobber = a.no_clobber;
    transfer.preserve_posix = a.preserve_posix;
    // Deletes wait for every copy, and go only if none failed.
    let mode = shoal_transfer::ops::Mode {
        moving: false,
        hold_deletes: !a.ignore_errors,
    };
    crate::cmd::batch::run_and_report(ctx, plan, store_for, transfer, "Synced", "", mode).await
}

/// What `sync` refuses before it starts: globs, a source that is not a
/// folder, a file as the destination, overlapping trees (the engine's
/// check, which makes the [`Sync`]), a listing file for a local folder.
fn check(a: &SyncArgs, src: &Location, dst: &Location) -> Result<Sync, Failure> {
    for l in [src, dst] {
        if !l.is_local() && shoal_list::has_wildcard(&l.key) {
            return Err(Failure::Usage(format!(
                "sync {l}: takes folders or prefixes, not globs"
            )));
        }
    }
    if src.is_local() && !std::path::Path::new(&src.key).is_dir() {
        return Err(Failure::Usage(format!(
            "sync {}: the source must be a folder",
            src.key
        )));
    }
    if dst.is_local() && std::path::Path::new(&dst.key).is_file() {
        return Err(Failure::Usage(format!(
            "sync {}: the destination is a file, not a folder",
            dst.key
        )));
    }
    let sync = Sync::new("sync", src, dst, sync_options(a, src))
        .map_err(|e| Failure::Usage(e.to_string()))?;
    for (l, listing) in [(src, &a.source_listing), (dst, &a.dest_listing)] {
        if l.is_local() && listing.is_some() {
            return Err(Failure::Usage(format!(
                "sync {}: a listing file stands for a bucket's listing; local folders are walked",
                l.key
            )));
        }
    }
    Ok(sync)
}

/// Whether a listing names an object in a bucket (`s3://…`, `gs://…`)
/// rather than a local file.
fn is_cloud_url(listing: &str) -> bool {
    Location::parse(listing).is_ok_and(|l| !l.is_local())
}

fn sync_options(a: &SyncArgs, src: &Location) -> SyncOptions {
    let compare = if a.checksum {
        Compare::Checksum
    } else if a.size_only {
        Compare::SizeOnly
    } else {
        Compare::SizeAndTime
    };
    SyncOptions {
        compare,
        delete: a.delete,
        limits: shoal_transfer::ops::DeleteLimits {
            max_delete: a.max_delete,
            delete_when_source_empty: a.delete_when_source_empty,
        },
        update: a.update,
        no_clobber: a.no_clobber,
        // A kept listing or a report is a hint: extras are confirmed
        // against the live source before they are deleted.
        confirm_extras: a.source_listing.as_ref().map(|_| src.clone()),
    }
}

/// How either side of a sync is listed: by the same rules, so an excluded
/// name is neither copied nor, on the destination, deleted.
pub(crate) struct Sides<'a> {
    pub(crate) store_for: &'a StoreFor,
    pub(crate) filter: &'a Option<Arc<shoal_list::Filter>>,
    pub(crate) projection: Projection,
    pub(crate) quiet: bool,
}

impl Sides<'_> {
    /// One side's entries in key order, relative to the sync's root: a
    /// listing file, a report fetched from a bucket, a local walk, or a
    /// bucket's sorted listing.
    pub(crate) fn side(
        &self,
        l: &Location,
        listing_file: &Option<String>,
        fetched: Option<shoal_transfer::ops::inventory::fetch::Fetched>,
        walk: Walk,
        tally: Option<Arc<shoal_list::filter::Tally>>,
    ) -> Result<BoxStream<'static, shoal_transfer::ops::Listed>, Failure> {
        let root = if l.is_local() {
            format!("{}/", l.key.trim_end_matches('/'))
        } else {
            sync_root(l)
        };
        let listing = Listing {
            root: root.clone(),
            projection: self.projection,
            recursive: true,
            sorted: true,
            walk,
            filter: self.filter.clone(),
            lead: String::new(),
            tally,
        };
        if let Some(file) = listing_file {
            let used = crate::listing_file::Use {
                side: l,
                root: &root,
                quiet: self.quiet,
            };
            let entries = match fetched {
                Some(f) => crate::listing_file::read_report(f.report.clone(), file, f, &used)?,
                None => crate::listing_file::read(file, &used)?,
            };
            return Ok(listing.filtered(entries, l.is_local()));
        }
        let mut loc = l.clone();
        if !loc.is_local() {
            loc.key = root;
        }
        Ok(listing.entries(&loc, self.store_for)?)
    }
}
