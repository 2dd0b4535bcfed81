//! `shoal check SRC DST`: whether two trees hold the same files. Both
//! sides are listed as `sync` lists them (the same roots, filters and
//! order, `cmd::sync::Sides`) and compared by the engine
//! (`shoal_transfer::ops::check`); this prints each difference as it is found
//! (with `--json`, every name), then the counts. Exit 0 when the trees
//! match, 1 when they do not or a side could not be read whole.

use futures::StreamExt;
use shoal_core::Projection;
use shoal_transfer::ops::Walk;
use shoal_transfer::ops::check::{Verdict, check_trees};

use crate::args::CheckArgs;
use crate::cmd::sync::Sides;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: CheckArgs) -> CmdResult {
    let src = super::parse(&a.src)?;
    let dst = super::parse(&a.dst)?;
    for l in [&src, &dst] {
        if !l.is_local() && shoal_list::has_wildcard(&l.key) {
            return Err(Failure::Usage(format!(
                "check {l}: takes folders or prefixes, not globs"
            )));
        }
        if l.is_local() && !std::path::Path::new(&l.key).is_dir() {
            return Err(Failure::Usage(format!(
                "check {}: not a folder (check compares two folders or prefixes; `shoal hash` gives one file's sums)",
                l.key
            )));
        }
    }
    let filter = a.filters.filter()?;
    let store_for = ctx.store_for(&[&src, &dst])?;
    let sides = Sides {
        store_for: &store_for,
        filter: &filter,
        quiet: ctx.quiet,
        projection: if a.size_only {
            Projection::NameSizeTime
        } else {
            Projection::Full
        },
    };
    // Neither side is written: both are walked as a destination is, links
    // and special files left out.
    let walk = Walk {
        destination: true,
        ..Default::default()
    };
    let mut verdicts = check_trees(
        sides.side(&src, &None, None, walk, None)?,
        sides.side(&dst, &None, None, walk, None)?,
        dst.clone(),
        a.size_only,
        store_for.clone(),
        ctx.rates.clone(),
        shoal_transfer::ops::COMPARE_AT_ONCE,
    );
    let (mut same, mut differ, mut missing_dst, mut missing_src, mut problems) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    while let Some(v) = verdicts.next().await {
        let v = match v {
            Ok(shoal_core::Seen::Item(v)) => v,
            Ok(shoal_core::Seen::Skipped(s)) if s.is_asked() => {
                if ctx.verbose {
                    eprintln!("shoal: skipped: {s}");
                }
                continue;
            }
            Ok(shoal_core::Seen::Skipped(s)) => {
                problems += 1;
                eprintln!("shoal: {s}");
                continue;
            }
            Err(e) => {
                problems += 1;
                eprintln!("shoal: {e}");
                continue;
            }
        };
        let (status, why) = match &v {
            Verdict::Same(_) => {
                same += 1;
                ("same", None)
            }
            Verdict::Differs(_, why) => {
                differ += 1;
                ("differs", Some(why.as_str()))
            }
            Verdict::MissingFromDestination(_) => {
                missing_dst += 1;
                ("missing_from_dst", None)
            }
            Verdict::MissingFromSource(_) => {
                missing_src += 1;
                ("missing_from_src", None)
            }
        };
        if a.json {
            println!(
                "{}",
                serde_json::json!({"name": v.name(), "status": status, "why": why})
            );
            continue;
        }
        match &v {
            Verdict::Same(_) => {}
            Verdict::Differs(n, why) => println!("differs: {n} ({why})"),
            Verdict::MissingFromDestination(n) => println!("missing from {dst}: {n}"),
            Verdict::MissingFromSource(n) => println!("missing from {src}: {n}"),
        }
    }
    let matched = differ == 0 && missing_dst == 0 && missing_src == 0 && problems == 0;
    if a.json {
        println!(
            "{}",
            serde_json::json!({"summary": {"verb": "check", "same": same, "differ": differ,
                "missing_from_dst": missing_dst, "missing_from_src": missing_src,
                "problems": problems, "match": matched}})
        );
    } else if !ctx.quiet {
        eprintln!(
            "check: {same} same, {differ} differ, {missing_dst} missing from {dst}, {missing_src} missing from {src}{}",
            if problems > 0 {
                format!(", {problems} not compared (above)")
            } else {
                String::new()
            }
        );
    }
    if matched {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}
