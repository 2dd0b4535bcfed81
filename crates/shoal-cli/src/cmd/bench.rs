//! `shoal bench read`: read (and decompress) a dataset, write nothing, and
//! say how fast and at what CPU cost: compressed and decompressed GB/s,
//! user+system CPU seconds, and MB/s of compressed input per CPU second
//! (how many cores a given network rate would keep busy).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use shoal_transfer::ops::decode::Decompress;
use shoal_transfer::ops::read::{ReadOptions, Reader};

use crate::args::{BenchArgs, BenchCommand, BenchReadArgs};
use crate::config::Context;
use crate::failure::{CmdResult, Failure};
use crate::output::human_bytes;
use crate::progress;

pub(crate) async fn run(ctx: &Context, a: BenchArgs) -> CmdResult {
    match a.what {
        BenchCommand::Read(r) => read(ctx, r).await,
    }
}

async fn read(ctx: &Context, a: BenchReadArgs) -> CmdResult {
    let fetched = Arc::new(AtomicU64::new(0));
    let opts = ReadOptions {
        workers: ctx.transfer.workers,
        requests: ctx.transfer.small_workers,
        rates: ctx.rates.clone(),
        read_ahead: a.read_ahead,
        decompress: if a.no_decompress {
            Decompress::Off
        } else {
            Decompress::Detect
        },
        // Nothing is written, so order buys nothing.
        ordered: false,
        fetched: Some(fetched.clone()),
        ..ReadOptions::default()
    };
    let sources = super::cat::sources(ctx, &a.urls, false)?;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let (objects, decoded, failed) = drain(Reader::start(sources, opts, ctx.retry)).await;
    if failed && objects == 0 {
        // Nothing was read: the errors above say it all, no rates of zero.
        return Err(Failure::Reported);
    }
    let elapsed = t0.elapsed();
    let (user, sys) = match (cpu0, cpu_seconds()) {
        (Some(a), Some(b)) => (Some(b.0 - a.0), Some(b.1 - a.1)),
        _ => (None, None),
    };
    let m = Measured {
        objects,
        compressed: fetched.load(Ordering::Relaxed),
        decoded,
        elapsed,
        user,
        sys,
    };
    if a.json {
        println!("{}", m.json(ctx.transfer.workers));
    } else {
        m.print();
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

/// Reads every object to its end, reporting failures as they come;
/// returns (objects, decoded bytes, whether any failed).
async fn drain(mut reader: Reader) -> (u64, u64, bool) {
    let (mut objects, mut decoded, mut failed) = (0u64, 0u64, false);
    while let Some(o) = reader.next_object().await {
        let mut o = match o {
            Ok(o) => o,
            Err(e) => {
                eprintln!("shoal: {e}");
                failed = true;
                continue;
            }
        };
        objects += 1;
        while let Some(c) = o.next().await {
            match c {
                Ok(c) => decoded += c.len() as u64,
                Err(e) => {
                    eprintln!("shoal: {e}");
                    failed = true;
                }
            }
        }
    }
    (objects, decoded, failed)
}

/// What a read measured.
struct Measured {
    objects: u64,
    compressed: u64,
    decoded: u64,
    elapsed: std::time::Duration,
    user: Option<f64>,
    sys: Option<f64>,
}

impl Measured {
    fn secs(&self) -> f64 {
        self.elapsed.as_secs_f64().max(1e-9)
    }

    /// MB of compressed input per CPU second; None when too little CPU
    /// was counted to say.
    fn per_core(&self) -> Option<f64> {
        let cpu = self.user.zip(self.sys).map(|(u, s)| u + s);
        cpu.filter(|c| *c > 0.0)
            .map(|c| self.compressed as f64 / c / 1e6)
    }

    fn json(&self, workers: usize) -> serde_json::Value {
        let secs = self.secs();
        serde_json::json!({
            "objects": self.objects,
            "compressed_bytes": self.compressed,
            "decompressed_bytes": self.decoded,
            "seconds": secs,
            "compressed_gb_s": self.compressed as f64 / secs / 1e9,
            "decompressed_gb_s": self.decoded as f64 / secs / 1e9,
            "cpu_user_s": self.user,
            "cpu_sys_s": self.sys,
            "compressed_mb_s_per_cpu_s": self.per_core(),
            "workers": workers,
            "cpus": shoal_transfer::cpus(),
        })
    }

    fn print(&self) {
        let objects = self.objects;
        println!(
            "read {objects} object{}: {} compressed, {} decompressed in {}",
            if objects == 1 { "" } else { "s" },
            human_bytes(self.compressed),
            human_bytes(self.decoded),
            progress::duration(self.elapsed)
        );
        println!("  {}", speeds(self.compressed, self.decoded, self.elapsed));
        match (self.user.zip(self.sys), self.per_core()) {
            (Some((u, s)), Some(per_core)) => println!(
                "  cpu {:.2} s (user {u:.2}, sys {s:.2}) on {} vCPUs; {per_core:.0} MB/s of compressed input per CPU second",
                u + s,
                shoal_transfer::cpus(),
            ),
            // The kernel counts CPU time in 10 ms ticks.
            (Some(_), None) => println!(
                "  cpu under 0.01 s on {} vCPUs: too little to give a rate per CPU second",
                shoal_transfer::cpus()
            ),
            (None, _) => {}
        }
    }
}

/// "1.234 GB/s compressed, 3.456 GB/s decompressed" (the seed's unit);
/// below 10 MB/s, where that reads as zeros, in the unit that fits.
fn speeds(compressed: u64, decoded: u64, elapsed: std::time::Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    if decoded.max(compressed) as f64 / secs >= 1e7 {
        format!(
            "{:.3} GB/s compressed, {:.3} GB/s decompressed",
            compressed as f64 / secs / 1e9,
            decoded as f64 / secs / 1e9
        )
    } else {
        format!(
            "{}/s compressed, {}/s decompressed",
            progress::rate(compressed, elapsed),
            progress::rate(decoded, elapsed)
        )
    }
}

/// (user, system) CPU seconds of this process, from /proc (Linux; the
/// kernel reports them in USER_HZ = 100 ticks per second).
fn cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line; `rest` starts at field 3.
    let user: f64 = f.get(11)?.parse().ok()?;
    let sys: f64 = f.get(12)?.parse().ok()?;
    Some((user / 100.0, sys / 100.0))
}

#[cfg(test)]
mod tests {
    use super::speeds;
    use std::time::Duration;

    #[test]
    fn speeds_read_as_numbers_for_datasets_big_and_tiny() {
        assert_eq!(
            speeds(1_000_000_000, 3_000_000_000, Duration::from_secs(2)),
            "0.500 GB/s compressed, 1.500 GB/s decompressed"
        );
        assert_eq!(
            speeds(10, 20, Duration::from_millis(2)),
            "4.88 KiB/s compressed, 9.77 KiB/s decompressed"
        );
    }
}
