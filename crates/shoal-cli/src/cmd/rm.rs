//! `shoal rm`: delete objects or globs; `-r` deletes everything below a
//! prefix (or below each level a glob matches).
//! Deletions run in parallel (bounded by `--workers`); each failure is
//! reported with its URL and the rest still proceed.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_core::{Error, ErrorKind, Location, Op, Seen};

use shoal_transfer::ops::Target;

use crate::args::RmArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: RmArgs) -> CmdResult {
    let locs = a
        .urls
        .iter()
        .map(|u| super::parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    if a.matching.any() {
        return delete_matching(ctx, &a, locs).await;
    }
    if let Some(v) = &a.version_id {
        return delete_version(ctx, &a, &locs, v).await;
    }
    let filter = a.filters.filter_for_delete()?;
    if filter.is_some() && !a.recursive && !a.urls.iter().any(|u| shoal_list::has_wildcard(u)) {
        return Err(Failure::Usage(
            "rm --include/--exclude: for rm -r and globs; objects named one by one are deleted as named".into(),
        ));
    }
    let mut failed = 0usize;
    let mut deleted_total = 0u64;
    // Objects named one by one (on the command line, so few) are deleted
    // together at the end, concurrently.
    let mut singles = Vec::new();
    for loc in locs {
        let (deleted, f) = if loc.is_local() {
            remove_local(ctx, &loc.key, a.dry_run)
        } else if !a.recursive && !a.all_versions && !shoal_list::has_wildcard(&loc.key) {
            if shoal_list::names_bucket(&loc) {
                return Err(Failure::Usage(format!(
                    "rm {loc}: needs an object; use -r to delete everything in the bucket"
                )));
            }
            singles.push(loc);
            continue;
        } else {
            delete_listed(ctx, &a, &loc, &filter).await?
        };
        failed += f;
        deleted_total += deleted;
    }
    let (deleted, f) = delete_named(ctx, &a, singles).await;
    failed += f;
    deleted_total += deleted;
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"summary": {"verb": "rm", "dry_run": a.dry_run, "deleted": deleted_total, "failed": failed}})
        );
    }
    if failed > 0 {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// A local file: removed (or named, with `--dry-run`); returns (deleted,
/// failed), a failure reported.
fn remove_local(ctx: &Context, path: &str, dry_run: bool) -> (u64, usize) {
    if dry_run {
        removed(ctx, path, true);
        return (1, 0);
    }
    if let Err(e) = std::fs::remove_file(path) {
        let e = Error::io(Op::Delete, path, e);
        failed_json(ctx, &e);
        eprintln!("shoal: {e}");
        return (0, 1);
    }
    removed(ctx, path, false);
    (1, 0)
}

/// Everything a glob or `-r` URL names that the rules admit, deleted as
/// it is listed: memory holds a page and the deletions in flight, whatever
/// the key count. A URL that names nothing is a failure.
async fn delete_listed(
    ctx: &Context,
    a: &RmArgs,
    loc: &Location,
    filter: &Option<Arc<shoal_list::Filter>>,
) -> Result<(u64, usize), Failure> {
    let targets = targets(ctx, loc, a.recursive, a.all_versions)?;
    // A dry run counts what the rules keep from deletion.
    let tally = filter
        .as_ref()
        .filter(|_| a.dry_run)
        .map(|f| Arc::new(f.tally()));
    let targets = match filter {
        None => targets,
        Some(f) => {
            let (f, root) = (f.clone(), shoal_list::filter::listing_root(&loc.key));
            let tally = tally.clone();
            targets
                .filter(move |t| {
                    let keep = t.as_ref().map_or(true, |t| {
                        let name = shoal_list::filter::name_below(&root, &t.loc.key);
                        match &tally {
                            Some(t) => f.admits_counted(name, t),
                            None => f.admits(name),
                        }
                    });
                    futures::future::ready(keep)
                })
                .boxed()
        }
    };
    let (deleted, failed) = delete_all(ctx, a.dry_run, targets, &[loc]).await;
    if let Some(t) = &tally {
        crate::cmd::batch::say_kept(ctx, "rm", t, &format!("below {loc}, not deleted"));
    }
    if deleted > 0 || failed > 0 {
        return Ok((deleted, failed));
    }
    let what = if shoal_list::has_wildcard(&loc.key) {
        "no objects match"
    } else {
        "matched no objects"
    };
    let e = Error::new(ErrorKind::NotFound, Op::Delete, loc.to_string(), what);
    eprintln!("shoal: {e}");
    Ok((0, 1))
}

/// `rm -r` of everything below `loc` (a whole bucket when its key is
/// empty), for `rb --force`: deleted as listed; returns (deleted, failed),
/// each failure already reported on stderr.
pub(crate) async fn delete_below(
    ctx: &Context,
    loc: &Location,
    dry_run: bool,
) -> Result<(u64, usize), Failure> {
    let targets = targets(ctx, loc, true, false)?;
    Ok(delete_all(ctx, dry_run, targets, &[loc]).await)
}

/// Every version and delete marker below `loc` (`rb --force` after the
/// current objects went: what a versioned bucket still holds), each
/// deleted by its own version; returns (deleted, failed).
pub(crate) async fn delete_versions_below(
    ctx: &Context,
    loc: &Location,
) -> Result<(u64, usize), Failure> {
    let targets = targets(ctx, loc, true, true)?;
    Ok(delete_all(ctx, false, targets, &[loc]).await)
}

/// `rm --version-id V URL`: that one stored version (or S3 delete
/// marker) deleted for good; no other version is touched.
async fn delete_version(ctx: &Context, a: &RmArgs, locs: &[Location], v: &str) -> CmdResult {
    let [loc] = locs else {
        return Err(Failure::Usage("rm --version-id: for one object".into()));
    };
    if a.recursive {
        return Err(Failure::Usage(
            "rm --version-id: for one object, not rm -r (rm -a deletes every version)".into(),
        ));
    }
    super::version_of("rm", loc, v)?;
    let shown = format!("{loc}#{v}");
    if a.dry_run {
        removed(ctx, &shown, true);
        return Ok(());
    }
    let store = ctx.store(loc)?;
    match shoal_transfer::ops::versions::delete(store.as_ref(), loc, v).await {
        Ok(()) => {
            removed(ctx, &shown, false);
            Ok(())
        }
        Err(e) => {
            let e = e.with_url(loc.to_string());
            failed_json(ctx, &e);
            Err(e.into())
        }
    }
}

/// The objects a glob (with `recursive`, and everything below each level
/// it matches) or a prefix (`-r`: the object and what lies below `key/`,
/// not `key-b`) names, as they are listed, a page at a time while the
/// previous page's keys are being deleted.
///
/// With `versions`, every version and S3 delete marker of those keys
/// (the literal key too, without -r), each a target of its own exact
/// version: nothing current is deleted in its place.
fn targets(
    ctx: &Context,
    loc: &Location,
    recursive: bool,
    versions: bool,
) -> Result<BoxStream<'static, shoal_core::Result<Target>>, Failure> {
    let store = ctx.store(loc)?;
    shoal_list::check(loc)?;
    // One listing stream, not the parallel lister: what it lists is being
    // deleted under it. Each split of the key range is a fresh listing on
    // the server (a new walk of the prefix on MinIO, where a continued
    // listing resumes its walk), and those walks contend with the deletes
    // for the server's disks: `rm -r` of 100,000 keys on MinIO took 8.6 s
    // listed in one stream against 22 to 49 s with 2 to 16 listing
    // connections (bench/results/RM.md). The deletes are the floor, and a
    // single stream of 1,000-key pages keeps 1,000-key batches coming.
    let opts = shoal_list::ListOptions {
        recursive,
        workers: 1,
        versions,
        // With the generation (a GCS name-only listing has none), so each
        // delete is pinned to the version listed.
        projection: shoal_core::Projection::NameSizeTime,
        ..Default::default()
    };
    let base = loc.clone();
    Ok(shoal_list::expand(store, loc, &opts)
        .map(move |m| {
            let m = m?;
            Ok(Target {
                loc: base.with_key(m.key),
                version: m.version,
                exact: versions,
            })
        })
        .boxed())
}

/// `rm --if-generation-match N URL` / `rm --if-match ETAG URL`: one
/// object, deleted only if it is still at that version. The delete carries
/// the precondition (GCS `ifGenerationMatch`, S3 `If-Match`), which makes
/// it atomic where the server honours it; fake-gcs-server and MinIO ignore
/// it on a delete, so the version is also read first and a mismatch
/// refused before any delete is sent.
async fn delete_matching(ctx: &Context, a: &RmArgs, locs: Vec<Location>) -> CmdResult {
    let flag = a.matching.flag();
    let [loc] = locs.as_slice() else {
        return Err(Failure::Usage(format!(
            "rm {flag}: for one object at a time"
        )));
    };
    if a.recursive || shoal_list::has_wildcard(&loc.key) {
        return Err(Failure::Usage(format!(
            "rm {flag}: for one object, not rm -r or a glob"
        )));
    }
    let Some(version) = a.matching.version("rm", loc).map_err(Failure::Usage)? else {
        return Ok(());
    };
    if a.dry_run {
        removed(ctx, &loc.to_string(), true);
        return Ok(());
    }
    let store = ctx.store(loc)?;
    match shoal_transfer::ops::delete_at(&store, loc, &version).await {
        Ok(d) => {
            removed(ctx, &loc.to_string(), false);
            replaced(loc, &d);
            Ok(())
        }
        Err(e) => {
            let e = e.with_url(loc.to_string());
            failed_json(ctx, &e);
            Err(e.into())
        }
    }
}

/// Objects named one by one: each deleted at the version it holds now
/// (`shoal_transfer::ops::delete_current`), concurrently; returns
/// (deleted, failed). One that does not exist is a failure, unless `-f`.
async fn delete_named(ctx: &Context, a: &RmArgs, locs: Vec<Location>) -> (u64, usize) {
    if locs.is_empty() {
        return (0, 0);
    }
    if a.dry_run {
        for l in &locs {
            removed(ctx, &l.to_string(), true);
        }
        return (locs.len() as u64, 0);
    }
    let named: Vec<&Location> = locs.iter().collect();
    let store_for = match ctx.store_for(&named) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoal: {e}");
            return (0, locs.len());
        }
    };
    let slots = ctx.transfer.small_workers.max(1);
    let mut results = futures::stream::iter(locs)
        .map(|loc| {
            let store_for = store_for.clone();
            async move {
                let r = match store_for(&loc) {
                    Ok(store) => shoal_transfer::ops::delete_current(&store, &loc).await,
                    Err(e) => Err(e),
                };
                (loc, r)
            }
        })
        .buffer_unordered(slots);
    let (mut deleted, mut failed) = (0, 0);
    while let Some((loc, r)) = results.next().await {
        match r {
            Ok(d) => {
                deleted += 1;
                removed(ctx, &loc.to_string(), false);
                replaced(&loc, &d);
            }
            Err(e) if a.force && e.kind() == ErrorKind::NotFound => {}
            Err(e) => {
                failed_json(ctx, &e);
                eprintln!("shoal: {e}");
                failed += 1;
            }
        }
    }
    (deleted, failed)
}

/// A delete whose answer was lost, after which another writer stored the
/// key again: said on stderr (the newer object stays).
fn replaced(loc: &Location, d: &shoal_core::Deleted) {
    if let shoal_core::Deleted::Replaced(now) = d {
        let now = now
            .as_ref()
            .map_or("a newer object".into(), |v| format!("a newer object ({v})"));
        eprintln!(
            "shoal: {}: deleted; the key now holds {now}, stored by another writer meanwhile, kept",
            shoal_core::error::escape_controls(&loc.to_string())
        );
    }
}

/// Deletes (or with `--dry-run` names) each target of the stores serving
/// `urls`; returns (deleted, failed). Deletes go out batched where the
/// store has a batch call (S3 DeleteObjects, 1,000 keys a request:
/// `shoal_transfer::ops::delete_all`), else one by one, `small_workers` requests
/// at a time. A listing error is a failure and ends that URL's deletions.
async fn delete_all(
    ctx: &Context,
    dry_run: bool,
    targets: BoxStream<'static, shoal_core::Result<Target>>,
    urls: &[&Location],
) -> (u64, usize) {
    let results = if dry_run {
        targets.map(|t| t.map(|t| Seen::Item(t.loc))).boxed()
    } else {
        match ctx.store_for(urls) {
            Ok(store_for) => {
                let said = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let on_fallback: shoal_transfer::ops::OnFallback = Arc::new(move |e| {
                    if !said.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        eprintln!("shoal: batch delete refused ({e}); deleting one by one");
                    }
                });
                let slots = ctx.transfer.small_workers.max(1);
                shoal_transfer::ops::delete_all(targets, store_for, slots, false, on_fallback)
            }
            Err(e) => futures::stream::iter([Err(e)]).boxed(),
        }
    };
    let mut results = std::pin::pin!(results);
    let (mut deleted, mut failed) = (0, 0);
    while let Some(r) = results.next().await {
        match r {
            Ok(Seen::Item(loc)) => {
                deleted += 1;
                removed(ctx, &loc.to_string(), dry_run);
            }
            // Written again since the listing: kept, and said.
            Ok(Seen::Skipped(s)) => eprintln!("shoal: skipped: {s}"),
            Err(e) => {
                failed_json(ctx, &e);
                eprintln!("shoal: {e}");
                failed += 1;
            }
        }
    }
    (deleted, failed)
}

/// Says that `what` was removed (or would be, with `--dry-run`): a line
/// on stderr, or with `--json` an object on stdout.
fn removed(ctx: &Context, what: &str, dry_run: bool) {
    let shown = shoal_core::error::escape_controls(what);
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"action": "delete", "url": what, "dry_run": dry_run})
        );
    } else if dry_run {
        println!("would remove {shown}");
    } else if !ctx.quiet {
        eprintln!("Removed {shown}");
    }
}

/// With `--json`, a failure's object on stdout too.
fn failed_json(ctx: &Context, e: &Error) {
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"action": "fail", "error": e.to_string()})
        );
    }
}
