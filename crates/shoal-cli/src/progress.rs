//! Progress for one transfer: a bar on a terminal, nothing otherwise, and a
//! final line with size, time and effective bandwidth.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::output::human_bytes;

/// A running transfer's display.
pub(crate) struct Progress {
    counter: Arc<AtomicU64>,
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
    started: Instant,
}

impl Progress {
    /// Starts showing progress toward `total` bytes (if known) on stderr.
    pub(crate) fn start(total: Option<u64>, quiet: bool) -> Self {
        let counter = Arc::new(AtomicU64::new(0));
        let show = Self::shown(quiet);
        let (bar, ticker) = if show {
            let bar = match total {
                Some(t) => ProgressBar::new(t),
                None => ProgressBar::new_spinner(),
            };
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let (b, c) = (bar.clone(), counter.clone());
            let ticker = tokio::spawn(async move {
                loop {
                    b.set_position(c.load(Ordering::Relaxed));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
            (Some(bar), Some(ticker))
        } else {
            (None, None)
        };
        Progress {
            counter,
            bar,
            ticker,
            started: Instant::now(),
        }
    }

    /// Whether a bar is drawn: stderr is a terminal and `-q` was not given.
    pub(crate) fn shown(quiet: bool) -> bool {
        !quiet && std::io::stderr().is_terminal()
    }

    /// The counter the engines add to.
    pub(crate) fn counter(&self) -> Arc<AtomicU64> {
        self.counter.clone()
    }

    /// Stops the bar; returns the elapsed time.
    pub(crate) fn finish(self) -> Duration {
        if let Some(t) = &self.ticker {
            t.abort();
        }
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        self.started.elapsed()
    }
}

/// "256.00 MiB in 0.42 s, effective bandwidth 609.52 MiB/s"; a copy that
/// took under 0.1 s is timed in ms and its rate given in the unit that
/// shows it ("3 B in 2 ms, effective bandwidth 1.46 KiB/s"), not as zeros.
pub(crate) fn summary(bytes: u64, elapsed: Duration) -> String {
    format!(
        "{} in {}, effective bandwidth {}/s",
        human_bytes(bytes),
        duration(elapsed),
        rate(bytes, elapsed)
    )
}

/// "2 ms" below a tenth of a second (never "0 ms"), "1.25 s" above: a
/// tiny copy's time reads as a time, not as "0.00 s".
pub(crate) fn duration(elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if secs < 0.1 {
        format!("{:.0} ms", (secs * 1e3).max(1.0))
    } else {
        format!("{secs:.2} s")
    }
}

/// Bytes per second in the unit that fits ("1.46 KiB", "512.00 MiB"),
/// over at least a microsecond.
pub(crate) fn rate(bytes: u64, elapsed: Duration) -> String {
    human_bytes((bytes as f64 / elapsed.as_secs_f64().max(1e-6)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_units_follow_the_size_of_the_copy() {
        assert_eq!(
            summary(256 << 20, Duration::from_millis(500)),
            "256.00 MiB in 0.50 s, effective bandwidth 512.00 MiB/s"
        );
        assert_eq!(
            summary(3, Duration::from_millis(2)),
            "3 B in 2 ms, effective bandwidth 1.46 KiB/s"
        );
        assert_eq!(
            summary(0, Duration::ZERO),
            "0 B in 1 ms, effective bandwidth 0 B/s"
        );
    }
}
