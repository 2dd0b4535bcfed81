//! `shoal sync SRC DST`: make DST hold what SRC holds.
//!
//! SRC's contents map onto DST (`sync ./site gs://b/www` puts `site/a` at
//! `gs://b/www/a`). Default comparison is size, then modification time
//! (copy when the source is newer): a second sync moves nothing because
//! every copy is newer than its source. `--checksum` compares the
//! strongest checksum both sides can give (CRC32C, CRC32/CRC64NVME, a
//! composite one, MD5; computed for local files), else size and time.

use futures::StreamExt;
use shoal_core::Projection;
use shoal_transfer::batch::{Action, Compare, sync_actions};
use shoal_transfer::tree::{enumerate, sync_root};

use crate::args::SyncArgs;
use crate::config::Context;
use crate::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: SyncArgs) -> CmdResult {
    let src = super::parse(&a.src)?;
    let dst = super::parse(&a.dst)?;
    for l in [&src, &dst] {
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
    let store_for = ctx.store_for(&[&src, &dst])?;
    let projection = if a.checksum {
        Projection::Full
    } else {
        Projection::NameSizeTime
    };
    let side = |l: &shoal_core::Location| -> Result<_, Failure> {
        let store = if l.is_local() {
            None
        } else {
            Some(store_for(l)?)
        };
        let root = if l.is_local() {
            format!("{}/", l.key.trim_end_matches('/'))
        } else {
            sync_root(l)
        };
        let mut loc = l.clone();
        if !loc.is_local() {
            loc.key = root.clone();
        }
        Ok(enumerate(
            &loc,
            store,
            &root,
            projection,
            ctx.transfer.workers,
            true,
        ))
    };
    let dst_entries = if dst.is_local() && !std::path::Path::new(&dst.key).exists() {
        futures::stream::empty().boxed()
    } else {
        side(&dst)?
    };
    let compare = if a.checksum {
        Compare::Checksum
    } else {
        Compare::SizeAndTime
    };
    let (actions, problems) = sync_actions(
        side(&src)?,
        dst_entries,
        dst.clone(),
        compare,
        a.delete,
        store_for.clone(),
        ctx.transfer.rates.clone(),
    )
    .await?;
    for p in &problems {
        eprintln!("shoal: {p}");
    }
    if a.dry_run {
        for act in &actions {
            println!("would {act}");
        }
        if !ctx.quiet {
            let copies = actions
                .iter()
                .filter(|a| matches!(a, Action::Copy { .. }))
                .count();
            eprintln!(
                "sync (dry run): {copies} to copy, {} to delete",
                actions.len() - copies
            );
        }
        return if problems.is_empty() {
            Ok(())
        } else {
            Err(Failure::Reported)
        };
    }
    if actions.is_empty() && !problems.is_empty() {
        // Nothing to do but report: no "Synced: 0 files" after an error.
        return Err(Failure::Reported);
    }
    let stream = futures::stream::iter(actions.into_iter().map(Ok)).boxed();
    let r = crate::cmd::batch::run_and_report(
        ctx,
        stream,
        store_for,
        ctx.transfer.clone(),
        "Synced",
        "",
    )
    .await;
    if !problems.is_empty() {
        return Err(Failure::Reported);
    }
    r
}
