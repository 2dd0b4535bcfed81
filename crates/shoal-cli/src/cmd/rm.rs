//! `shoal rm`: delete objects or globs; `-r` deletes everything below a
//! prefix (or below each level a glob matches).
//! Deletions run in parallel (bounded by `--workers`); each failure is
//! reported with its URL and the rest still proceed.

use futures::StreamExt;
use shoal_core::paginate::pages;
use shoal_core::{Error, ErrorKind, ListRequest, Location, Op, Projection};

use crate::args::RmArgs;
use crate::config::Context;
use crate::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: RmArgs) -> CmdResult {
    let locs = a
        .urls
        .iter()
        .map(|u| super::parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    let mut targets: Vec<Location> = Vec::new();
    let mut failed = 0usize;
    for loc in locs {
        if loc.is_local() {
            if let Err(e) = std::fs::remove_file(&loc.key) {
                eprintln!("shoal: {}", Error::io(Op::Delete, &loc.key, e));
                failed += 1;
            } else if !ctx.quiet {
                eprintln!("Removed {}", loc.key);
            }
            continue;
        }
        if shoal_list::has_wildcard(&loc.key) {
            // A glob: every matching object (with -r, everything below
            // each matching level too).
            shoal_list::check(&loc)?;
            let store = ctx.store(&loc)?;
            let opts = shoal_list::ListOptions {
                recursive: a.recursive,
                ..Default::default()
            };
            let mut objects = std::pin::pin!(shoal_list::expand(store, &loc, &opts));
            let before = targets.len();
            while let Some(m) = objects.next().await {
                targets.push(loc.with_key(m?.key));
            }
            if targets.len() == before {
                let e = Error::new(
                    ErrorKind::NotFound,
                    Op::Delete,
                    loc.to_string(),
                    "no objects match",
                );
                eprintln!("shoal: {e}");
                failed += 1;
            }
            continue;
        }
        if !a.recursive {
            if loc.key.is_empty() {
                return Err(Failure::Usage(format!(
                    "rm {loc}: needs an object; use -r to delete everything in the bucket"
                )));
            }
            targets.push(loc);
            continue;
        }
        let store = ctx.store(&loc)?;
        let req = ListRequest {
            prefix: loc.key.clone(),
            projection: Projection::NameOnly,
            ..Default::default()
        };
        let dir = if loc.is_prefix_like() {
            loc.key.clone()
        } else {
            format!("{}/", loc.key)
        };
        let mut stream = Box::pin(pages(store, loc.bucket.clone(), req));
        let before = targets.len();
        while let Some(page) = stream.next().await {
            let page = page.map_err(|e| e.with_url(loc.to_string()))?;
            for o in page.objects {
                if o.key == loc.key || o.key.starts_with(&dir) {
                    targets.push(loc.with_key(o.key));
                }
            }
        }
        if targets.len() == before {
            eprintln!("shoal: delete {loc}: matched no objects");
            failed += 1;
        }
    }
    let results = futures::stream::iter(targets)
        .map(|loc| async move {
            let store = ctx.store(&loc)?;
            (store.delete(&loc.bucket, &loc.key))
                .await
                .map_err(|e| e.with_url(loc.to_string()))?;
            Ok::<_, Error>(loc)
        })
        .buffer_unordered(ctx.transfer.small_workers.max(1));
    let mut results = Box::pin(results);
    while let Some(r) = results.next().await {
        match r {
            Ok(loc) if !ctx.quiet => eprintln!("Removed {loc}"),
            Ok(_) => {}
            Err(e) => {
                eprintln!("shoal: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}
