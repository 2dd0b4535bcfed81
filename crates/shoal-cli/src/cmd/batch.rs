//! Shared by `cp -r`, `mv -r`, `sync` and `run`: progress for a batch and its
//! closing report: the failures, one line per cause (the engine gathers
//! files that failed alike, so a read-only folder is one line, not one per
//! file), then the summary line, always, even when every file failed.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use shoal_core::{Seen, Skip};
use shoal_transfer::ops::{
    Action, BatchCounters, BatchReport, OnOutcome, Outcome, Planned, StoreFor,
};

use crate::config::Context;
use crate::failure::{CmdResult, Failure};
use crate::output::human_bytes;
use crate::progress;

/// Runs `actions`, drawing progress on a terminal, and reports the outcome.
pub(crate) async fn run_and_report(
    ctx: &Context,
    actions: BoxStream<'static, Planned>,
    store_for: StoreFor,
    opts: shoal_transfer::TransferOptions,
    verb: &str,
    what: &str,
    mode: shoal_transfer::ops::Mode,
) -> CmdResult {
    let counters = Arc::new(BatchCounters {
        on_outcome: ctx
            .json
            .then(|| OnOutcome(Arc::new(|r, a| println!("{}", outcome_json(r, a))))),
        ..BatchCounters::default()
    });
    let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let run = ctx.run(opts).with_progress(bytes.clone());
    let started = Instant::now();
    let ticker = (!ctx.quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let (b, c, by) = (bar.clone(), counters.clone(), bytes.clone());
        let task = tokio::spawn(async move {
            loop {
                let moved = by.load(Ordering::Relaxed);
                b.set_message(ticker_line(&c.snapshot(), moved, started.elapsed()));
                b.tick();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        (bar, task)
    });
    let actions = name_skips(ctx, actions);
    let report = shoal_transfer::ops::run(actions, store_for, run, ctx.retry, counters, mode).await;
    if let Some((bar, task)) = ticker {
        task.abort();
        bar.finish_and_clear();
    }
    if what_matched_nothing(&report) && !what.is_empty() {
        return Err(Failure::Failed(format!("{what}: matched no objects")));
    }
    finish(ctx, &report, started.elapsed(), verb)
}

/// What the ticker of a batch says: done of the total once the plan has
/// ended (`12/340 files, 1.20 MiB/40.00 MiB (2.00 MiB/s), eta 18 s`), done
/// of what is listed so far until then, and failures when there are some.
fn ticker_line(now: &shoal_transfer::ops::Snapshot, moved: u64, elapsed: Duration) -> String {
    let rate = progress::rate(moved, elapsed);
    let mut line = match now.totals() {
        Some((files, bytes)) => {
            let mut l = format!(
                "{}/{files} files, {}/{} ({rate}/s)",
                now.done,
                human_bytes(moved.min(bytes)),
                human_bytes(bytes)
            );
            if let Some(eta) = now.eta(moved, elapsed) {
                l.push_str(&format!(", eta {}", progress::eta(eta)));
            }
            l
        }
        None => format!(
            "{} of {} files listed so far, {} ({rate}/s)",
            now.done,
            now.planned,
            human_bytes(moved)
        ),
    };
    if now.failed > 0 {
        line.push_str(&format!(", {} failed", now.failed));
    }
    line
}

/// One action's outcome as a `--json` line: what was copied or deleted,
/// or what was skipped or failed, with the URL and the reason; a failure
/// names the source and destination of the action that failed (`failed`),
/// or the URL the error is about where there was none (a listing).
pub(crate) fn outcome_json(r: &Outcome, failed: Option<&Action>) -> serde_json::Value {
    match r {
        Ok(Seen::Item((Action::Copy { src, dst, .. }, bytes))) => serde_json::json!({
            "action": "copy", "source": src.to_string(), "destination": dst.to_string(), "bytes": bytes,
        }),
        Ok(Seen::Item((Action::Delete { dst, .. }, _))) => {
            serde_json::json!({"action": "delete", "url": dst.to_string()})
        }
        Ok(Seen::Skipped(s)) => serde_json::json!({
            "action": "skip", "asked": s.is_asked(), "reason": s.to_string(),
        }),
        Err(e) => {
            let mut v = serde_json::json!({"action": "fail", "error": e.to_string()});
            match failed {
                Some(Action::Copy { src, dst, .. }) => {
                    v["source"] = src.to_string().into();
                    v["destination"] = dst.to_string().into();
                }
                Some(Action::Delete { dst, .. }) => v["url"] = dst.to_string().into(),
                None => v["url"] = e.url().into(),
            }
            v
        }
    }
}

/// Names each skipped item as it passes: those nobody asked to skip
/// always (they make the exit status 1, so they are said like failures),
/// deletes the plan did not make always (extras the live source still
/// holds: [`said_always`]), the expected ones (folder markers,
/// `--skip-symlinks`) with `-v`.
pub(crate) fn name_skips(
    ctx: &Context,
    actions: BoxStream<'static, Planned>,
) -> BoxStream<'static, Planned> {
    let verbose = ctx.verbose;
    actions
        .inspect(move |a| {
            if let Ok(Seen::Skipped(s)) = a
                && (!s.is_asked() || said_always(s) || verbose)
            {
                eprintln!("shoal: skipped: {s}");
            }
        })
        .boxed()
}

/// A skip said at any verbosity: a delete the plan chose not to make.
fn said_always(s: &Skip) -> bool {
    s.is_asked() && s.op() == shoal_core::Op::Delete
}

/// `sync -n` and `cp -r -n`: prints each action the plan makes as it makes it (`would copy …`,
/// `would delete …`), and each problem, then the counts.
pub(crate) async fn dry_run(
    ctx: &Context,
    mut plan: BoxStream<'static, Planned>,
    verb: &str,
) -> CmdResult {
    let (mut copies, mut deletes, mut problems) = (0u64, 0u64, 0u64);
    while let Some(item) = plan.next().await {
        match item {
            Ok(Seen::Item(act)) => {
                match act {
                    Action::Copy { .. } => copies += 1,
                    Action::Delete { .. } => deletes += 1,
                }
                if ctx.json {
                    let mut v = outcome_json(&Ok(Seen::Item((act, 0))), None);
                    v["dry_run"] = true.into();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("bytes");
                    }
                    println!("{v}");
                } else {
                    println!("would {act}");
                }
            }
            // Skipped as asked: named with -v, not a problem.
            Ok(Seen::Skipped(s)) if s.is_asked() => {
                if ctx.verbose || said_always(&s) {
                    eprintln!("shoal: skipped: {s}");
                }
            }
            Ok(Seen::Skipped(s)) => {
                problems += 1;
                eprintln!("shoal: skipped: {s}");
            }
            Err(e) => {
                problems += 1;
                eprintln!("shoal: {e}");
            }
        }
    }
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"summary": {"verb": verb, "dry_run": true, "to_copy": copies, "to_delete": deletes, "problems": problems}})
        );
    } else if !ctx.quiet {
        eprintln!("{verb} (dry run): {copies} to copy, {deletes} to delete");
    }
    if problems == 0 {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

/// After a dry run of a deletion (`sync --delete -n`, `rm -r -n`), what
/// each filter rule kept from it: `kept by --exclude 'logs/': 4 ...` on
/// stderr, or with `--json` one object per rule on stdout.
pub(crate) fn say_kept(ctx: &Context, verb: &str, tally: &shoal_list::filter::Tally, what: &str) {
    for (rule, n) in tally.kept() {
        if ctx.json {
            println!(
                "{}",
                serde_json::json!({"kept": {"verb": verb, "rule": rule, "count": n, "dry_run": true}})
            );
        } else if !ctx.quiet {
            eprintln!("kept by {rule}: {n} {what}");
        }
    }
}

fn what_matched_nothing(r: &BatchReport) -> bool {
    r.copied == 0 && r.deleted == 0 && r.failed == 0 && r.skipped == 0
}

/// "Copied: 302 files, 3.10 MiB in 0.16 s (19.38 MiB/s, 1885 files/s)";
/// rates only when something was copied ("Synced: 0 files in 4 ms" for a
/// sync with nothing to do), then what was deleted, skipped or failed.
fn summary_line(verb: &str, r: &BatchReport, elapsed: Duration) -> String {
    let n = r.copied;
    let mut line = format!("{verb}: {n} file{}", if n == 1 { "" } else { "s" });
    if n > 0 {
        line.push_str(&format!(
            ", {} in {} ({}/s, {:.0} files/s)",
            human_bytes(r.bytes),
            progress::duration(elapsed),
            progress::rate(r.bytes, elapsed),
            n as f64 / elapsed.as_secs_f64().max(1e-6)
        ));
    } else {
        line.push_str(&format!(" in {}", progress::duration(elapsed)));
    }
    if r.deleted > 0 {
        line.push_str(&format!(", {} deleted", r.deleted));
    }
    if r.skipped > 0 {
        line.push_str(&format!(", {} skipped", r.skipped));
        if r.skipped_unasked > 0 && r.skipped_unasked < r.skipped {
            line.push_str(&format!(" ({} not as asked)", r.skipped_unasked));
        } else if r.skipped_unasked == 0 {
            line.push_str(" (-v names them)");
        }
    }
    if r.failed > 0 {
        line.push_str(&format!(", {} FAILED", r.failed));
    }
    line
}

/// A run whose one failure is all that happened (a plan refused, the one
/// file of a batch of one): its line is the whole story, as for any bad
/// input; a summary under it would only repeat it.
fn alone(r: &BatchReport) -> bool {
    r.failed == 1
        && r.copied == 0
        && r.deleted == 0
        && r.skipped == 0
        && r.skipped_unasked == 0
        && r.causes.len() == 1
}

/// Prints the failures, a line per cause, and the summary, always (`Copied:
/// 0 files in 3 ms, 30 FAILED` when every file failed: a script or a
/// reader looking for the count finds it; a lone failure is its one line,
/// see [`alone`]); exit 1 if anything failed or
/// was skipped without being asked to.
pub(crate) fn finish(ctx: &Context, r: &BatchReport, elapsed: Duration, verb: &str) -> CmdResult {
    for c in &r.causes {
        eprintln!("shoal: {}", c.line());
    }
    if r.causes_left_off > 0 {
        eprintln!("shoal: ... and {} more failures", r.causes_left_off);
    }
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"summary": {
                "verb": match verb { "Copied" => "cp", "Synced" => "sync", "Ran" => "run", v => v },
                "copied": r.copied, "bytes": r.bytes,
                "deleted": r.deleted, "skipped": r.skipped, "skipped_unasked": r.skipped_unasked,
                "failed": r.failed, "seconds": elapsed.as_secs_f64(),
            }})
        );
    } else if !ctx.quiet && !alone(r) {
        eprintln!("{}", summary_line(verb, r, elapsed));
    }
    if r.failed == 0 && r.skipped_unasked == 0 {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(copied: u64, bytes: u64, deleted: u64, failed: usize) -> BatchReport {
        let mut r = BatchReport::default();
        (r.copied, r.deleted, r.bytes) = (copied, deleted, bytes);
        r.failed = failed as u64;
        r.failures = vec!["x".into(); failed];
        r
    }

    #[test]
    fn the_ticker_gives_totals_and_an_eta_once_the_listing_is_known() {
        use shoal_transfer::ops::Snapshot;
        let listing = Snapshot {
            done: 12,
            failed: 0,
            planned: 40,
            planned_bytes: 40 << 20,
            sized: true,
            listed: false,
        };
        let two = Duration::from_secs(2);
        assert_eq!(
            ticker_line(&listing, 4 << 20, two),
            "12 of 40 files listed so far, 4.00 MiB (2.00 MiB/s)"
        );
        let known = Snapshot {
            listed: true,
            failed: 3,
            ..listing
        };
        assert_eq!(
            ticker_line(&known, 4 << 20, two),
            "12/40 files, 4.00 MiB/40.00 MiB (2.00 MiB/s), eta 18 s, 3 failed"
        );
        assert_eq!(
            ticker_line(&known, 0, two),
            "12/40 files, 0 B/40.00 MiB (0 B/s), 3 failed"
        );
    }

    #[test]
    fn summary_gives_rates_only_when_something_was_copied() {
        assert_eq!(
            summary_line(
                "Copied",
                &report(302, 3 << 20, 0, 0),
                Duration::from_millis(250)
            ),
            "Copied: 302 files, 3.00 MiB in 0.25 s (12.00 MiB/s, 1208 files/s)"
        );
        assert_eq!(
            summary_line("Synced", &report(0, 0, 0, 0), Duration::from_micros(300)),
            "Synced: 0 files in 1 ms"
        );
        assert_eq!(
            summary_line("Synced", &report(1, 3, 2, 1), Duration::from_millis(20)),
            "Synced: 1 file, 3 B in 20 ms (150 B/s, 50 files/s), 2 deleted, 1 FAILED"
        );
    }
}
