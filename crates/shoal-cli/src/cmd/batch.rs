//! Shared by `cp -r`, `sync` and `run`: progress for a batch and its
//! closing report (summary line, then every failure with its URL).

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use indicatif::{ProgressBar, ProgressStyle};
use shoal_core::Result;
use shoal_transfer::batch::{Action, BatchCounters, BatchReport, StoreFor};

use crate::config::Context;
use crate::output::human_bytes;
use crate::{CmdResult, Failure};

/// Runs `actions`, drawing progress on a terminal, and reports the outcome.
pub(crate) async fn run_and_report(
    ctx: &Context,
    actions: BoxStream<'static, Result<Action>>,
    store_for: StoreFor,
    mut opts: shoal_transfer::TransferOptions,
    verb: &str,
    what: &str,
) -> CmdResult {
    let counters = Arc::new(BatchCounters::default());
    let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    opts.progress = Some(bytes.clone());
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
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                let moved = by.load(Ordering::Relaxed);
                b.set_message(format!(
                    "{} files done, {} failed, {} ({:.1} MiB/s)",
                    c.done.load(Ordering::Relaxed),
                    c.failed.load(Ordering::Relaxed),
                    human_bytes(moved),
                    moved as f64 / secs / (1 << 20) as f64
                ));
                b.tick();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        (bar, task)
    });
    let report = shoal_transfer::batch::run(actions, store_for, opts, ctx.retry, counters).await;
    if let Some((bar, task)) = ticker {
        task.abort();
        bar.finish_and_clear();
    }
    if what_matched_nothing(&report) && !what.is_empty() {
        return Err(Failure::Failed(format!("{what}: matched no objects")));
    }
    finish(ctx, &report, started.elapsed(), verb)
}

fn what_matched_nothing(r: &BatchReport) -> bool {
    r.copied == 0 && r.deleted == 0 && r.failures.is_empty() && r.skipped.is_empty()
}

/// Prints the summary and the failures; exit 1 if anything failed.
pub(crate) fn finish(ctx: &Context, r: &BatchReport, elapsed: Duration, verb: &str) -> CmdResult {
    for s in &r.skipped {
        eprintln!("shoal: skipped: {s}");
    }
    for f in &r.failures {
        eprintln!("shoal: {f}");
    }
    if !ctx.quiet {
        let secs = elapsed.as_secs_f64().max(1e-6);
        let mut line = format!(
            "{verb}: {} files, {} in {:.2} s ({:.2} MiB/s, {:.0} files/s)",
            r.copied,
            human_bytes(r.bytes),
            secs,
            r.bytes as f64 / secs / (1 << 20) as f64,
            r.copied as f64 / secs
        );
        if r.deleted > 0 {
            line.push_str(&format!(", {} deleted", r.deleted));
        }
        if !r.skipped.is_empty() {
            line.push_str(&format!(", {} skipped", r.skipped.len()));
        }
        if !r.failures.is_empty() {
            line.push_str(&format!(", {} FAILED", r.failures.len()));
        }
        eprintln!("{line}");
    }
    if r.failures.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}
