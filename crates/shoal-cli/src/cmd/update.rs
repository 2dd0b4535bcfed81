//! `shoal update`: change objects' type, encoding, cache control,
//! disposition, custom metadata or storage class on the server. This
//! module only finds the objects and says what happened; the engine
//! ([`shoal_transfer::ops::update`]) merges the change with what each object
//! stores and writes it pinned to the version seen.

use futures::StreamExt;
use shoal_core::{Error, ErrorKind, Location, Op};
use shoal_transfer::ops::update::{Change, Outcome};

use crate::args::UpdateArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

/// What the run did, for the summary.
#[derive(Default)]
struct Tally {
    updated: u64,
    unchanged: u64,
    failed: usize,
}

pub(crate) async fn run(ctx: &Context, a: UpdateArgs) -> CmdResult {
    let mut work = Vec::new();
    for u in &a.urls {
        let loc = super::parse(u)?;
        if loc.is_local() {
            return Err(Failure::Usage(format!(
                "update {u}: a local path; update changes gs:// and s3:// objects"
            )));
        }
        let change = a
            .change(&loc)
            .map_err(|m| Failure::Usage(format!("update {loc}: {m}")))?;
        let listed = a.recursive || shoal_list::has_wildcard(&loc.key);
        if !listed && shoal_list::names_bucket(&loc) {
            return Err(Failure::Usage(format!(
                "update {loc}: needs an object; use -r to change everything in the bucket"
            )));
        }
        if a.matching.any() && (listed || a.urls.len() > 1) {
            return Err(Failure::Usage(format!(
                "update {}: for one object, not -r or a glob",
                a.matching.flag()
            )));
        }
        work.push((loc, change, listed));
    }
    let mut tally = Tally::default();
    for (loc, change, listed) in work {
        let t = update_url(ctx, &a, &loc, &change, listed).await?;
        tally.updated += t.updated;
        tally.unchanged += t.unchanged;
        tally.failed += t.failed;
    }
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"summary": {"verb": "update", "dry_run": a.dry_run,
                "updated": tally.updated, "unchanged": tally.unchanged, "failed": tally.failed}})
        );
    }
    if tally.failed > 0 {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// Every object `loc` names, changed: one object, or (listed) what a glob
/// or a `-r` prefix lists, each pinned to the version listed.
async fn update_url(
    ctx: &Context,
    a: &UpdateArgs,
    loc: &Location,
    change: &Change,
    listed: bool,
) -> Result<Tally, Failure> {
    let store = ctx.store(loc)?;
    let pinned = a.matching.version("update", loc).map_err(Failure::Usage)?;
    let targets = if listed {
        shoal_list::check(loc)?;
        // Each object's version too (GCS `fields` with the generation;
        // S3 lists ETags anyway): the update is held to the version
        // listed, and a name-only GCS listing carries none.
        let opts = shoal_list::ListOptions {
            recursive: a.recursive,
            workers: 1,
            projection: shoal_core::Projection::NameSizeTime,
            ..Default::default()
        };
        let base = loc.clone();
        shoal_list::expand(store.clone(), loc, &opts)
            .map(move |m| m.map(|m| (base.with_key(m.key.clone()), m.version)))
            .boxed()
    } else {
        futures::stream::iter([Ok((loc.clone(), pinned))]).boxed()
    };
    let workers = ctx.transfer.small_workers.max(1);
    let (part_size, copy_workers) = (ctx.transfer.part_size, ctx.transfer.workers);
    let mut results = targets
        .map(|t| {
            let store = store.clone();
            async move {
                let (obj, version) = t?;
                let v = version.as_ref();
                let dry = a.dry_run;
                shoal_transfer::ops::update::update_current(
                    store.as_ref(),
                    &obj,
                    v,
                    change,
                    dry,
                    part_size,
                    copy_workers,
                )
                .await
                .map(|o| (obj.clone(), o))
                .map_err(|e| e.with_url(obj.to_string()))
            }
        })
        .buffer_unordered(workers);
    let mut tally = Tally::default();
    while let Some(r) = results.next().await {
        match r {
            Ok((obj, o)) => say(ctx, &obj, &o, a.dry_run, &mut tally),
            Err(e) => {
                if ctx.json {
                    println!(
                        "{}",
                        serde_json::json!({"action": "fail", "error": e.to_string()})
                    );
                }
                eprintln!("shoal: {e}");
                tally.failed += 1;
            }
        }
    }
    if listed && tally.updated + tally.unchanged == 0 && tally.failed == 0 {
        let what = if shoal_list::has_wildcard(&loc.key) {
            "no objects match"
        } else {
            "matched no objects"
        };
        eprintln!(
            "shoal: {}",
            Error::new(ErrorKind::NotFound, Op::Update, loc.to_string(), what)
        );
        tally.failed += 1;
    }
    Ok(tally)
}

fn say(ctx: &Context, obj: &Location, o: &Outcome, dry_run: bool, tally: &mut Tally) {
    let url = obj.to_string();
    let shown = shoal_core::error::escape_controls(&url);
    match o {
        Outcome::Updated(_) => {
            tally.updated += 1;
            if ctx.json {
                println!(
                    "{}",
                    serde_json::json!({"action": "update", "url": url, "dry_run": dry_run})
                );
            } else if dry_run {
                println!("would update {shown}");
            } else if !ctx.quiet {
                eprintln!("Updated {shown}");
            }
        }
        Outcome::Unchanged => {
            tally.unchanged += 1;
            if ctx.json {
                println!(
                    "{}",
                    serde_json::json!({"action": "skip", "url": url, "reason": "unchanged"})
                );
            } else if !ctx.quiet {
                eprintln!("Unchanged {shown} (already as asked)");
            }
        }
    }
}
