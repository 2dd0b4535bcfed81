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
            // The ETA is ours, from the average rate since the start:
            // indicatif's follows the last steps, and an upload counts a
            // whole part at a time (`eta 0s` just after one lands).
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let (b, c) = (bar.clone(), counter.clone());
            let started = Instant::now();
            let ticker = tokio::spawn(async move {
                loop {
                    let pos = c.load(Ordering::Relaxed);
                    b.set_position(pos);
                    if let Some(t) = total {
                        b.set_message(match time_left(pos, t, started.elapsed()) {
                            Some(d) => format!("eta {}", eta(d)),
                            None => String::new(),
                        });
                    }
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

/// Time left to move `total` bytes at the average rate of the `done` in
/// `elapsed` (None before anything moved).
pub(crate) fn time_left(done: u64, total: u64, elapsed: Duration) -> Option<Duration> {
    if done == 0 || elapsed.is_zero() {
        return None;
    }
    Some(elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64))
}

/// A time left, to the second: "18 s", "2m 05s", "1h 03m".
pub(crate) fn eta(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
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
    fn time_left_is_the_rest_at_the_average_rate() {
        let ten = Duration::from_secs(10);
        assert_eq!(time_left(0, 100, ten), None);
        assert_eq!(time_left(25, 100, ten), Some(Duration::from_secs(30)));
        assert_eq!(time_left(100, 100, ten), Some(Duration::ZERO));
        assert_eq!(eta(Duration::from_millis(17_600)), "18 s");
        assert_eq!(eta(Duration::from_secs(125)), "2m 05s");
        assert_eq!(eta(Duration::from_secs(3780)), "1h 03m");
    }

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
