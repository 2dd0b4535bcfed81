//! Pacing a whole command: a byte rate (`--rate-limit`) and a request rate
//! (`--max-requests-per-sec`), shared by every transfer of the same
//! [`Run`](crate::Run) and every read of the same
//! [`ReadOptions`](crate::read::ReadOptions).
//!
//! Where they are drawn: the request rate where a request slot is taken
//! (`Budgets::permit`: every slice, part, single PUT/GET and
//! delete) and before the few requests that take no slot (HEADs, multipart
//! start and complete); bytes where they cross the network, chunk by chunk
//! as a download receives them or a streamed upload sends them, so a 1 GiB
//! slice is paced smoothly. An upload part or small file is one buffer
//! handed to the store, so it is charged as a whole just before it is sent.
//! A cloud-to-cloud copy is charged once, on its upload side (its read is
//! held back by the upload it feeds). Retries inside a store and resumed
//! streams are not counted as new requests.
//!
//! Each limit is a token bucket written as GCRA (a "theoretical arrival
//! time"): one `Instant` up to which everything charged so far is paid for.
//! A charge moves it forward by `n / rate` and sleeps until it is at most
//! [`BURST`] (or one unit, if longer) ahead of now. That is one lock and one addition per charge, no
//! refill task and no polling; waiters sleep on tokio's timer, so tests run
//! it on paused time. A charge reserves its share before sleeping, so
//! concurrent chargers queue in order instead of racing for refills. A task
//! cancelled while it sleeps has still paid: the command goes slightly
//! slower than asked, never faster.
//!
//! Unset limits are `None`: nothing is locked or awaited.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use shoal_core::BoxByteStream;
use tokio::time::Instant;

/// How far ahead of its rate a bucket may run after idling: a tenth of a
/// second's worth. Enough that connections delivering chunks at once do
/// not wait on each other's rounding (a timer wakes up to a millisecond
/// late); short enough that the rate over any transfer of two seconds or
/// more is within 10% of the rate asked for. What is charged is paid for
/// before it moves, so a transfer of `n` bytes at `r` takes `n / r - BURST`
/// at least: a burst of a whole second made a 2.6 s upload at 20 MiB/s
/// measure 32.7 MiB/s, a 2 s `cp -r` at 30 MiB/s 59.6.
pub(crate) const BURST: Duration = Duration::from_millis(100);

/// One rate: `per_sec` units (bytes or requests) per second.
#[derive(Debug)]
pub struct TokenBucket {
    per_sec: u64,
    /// How far ahead it may run: [`BURST`], or one unit where that is
    /// longer (at 2 requests/s, one request goes at once).
    burst: Duration,
    /// Everything charged so far is paid for at this time (None: never
    /// charged).
    paid_until: Mutex<Option<Instant>>,
}

impl TokenBucket {
    /// A bucket of `per_sec` units per second (at least 1), full.
    pub fn new(per_sec: u64) -> Self {
        let per_sec = per_sec.max(1);
        TokenBucket {
            per_sec,
            burst: BURST.max(Duration::from_nanos(1_000_000_000u64.div_ceil(per_sec))),
            paid_until: Mutex::new(None),
        }
    }

    /// Units per second.
    pub fn per_sec(&self) -> u64 {
        self.per_sec
    }

    /// Charges `n` units, sleeping until the rate allows them.
    pub async fn take(&self, n: u64) {
        if n == 0 {
            return;
        }
        let cost = Duration::from_nanos(
            (u128::from(n) * 1_000_000_000)
                .div_ceil(u128::from(self.per_sec))
                .min(u128::from(u64::MAX)) as u64,
        );
        let now = Instant::now();
        let ready_at = {
            let mut paid = self.paid_until.lock().unwrap_or_else(|p| p.into_inner());
            // Time spent idle refills the bucket, up to its burst (below).
            let from = paid.map_or(now, |p| p.max(now));
            let until = from + cost;
            *paid = Some(until);
            until.checked_sub(self.burst)
        };
        if let Some(t) = ready_at
            && t > now
        {
            tokio::time::sleep_until(t).await;
        }
    }
}

/// The limits of one command; cheap to clone (shared buckets).
#[derive(Debug, Clone, Default)]
pub struct Rates {
    /// Bytes per second across every transfer of the command.
    pub bytes: Option<Arc<TokenBucket>>,
    /// Requests started per second across every worker.
    pub requests: Option<Arc<TokenBucket>>,
}

impl Rates {
    /// Limits from optional rates (None: unlimited).
    pub fn new(bytes_per_sec: Option<u64>, requests_per_sec: Option<u64>) -> Self {
        Rates {
            bytes: bytes_per_sec.map(|r| Arc::new(TokenBucket::new(r))),
            requests: requests_per_sec.map(|r| Arc::new(TokenBucket::new(r))),
        }
    }

    /// Waits until one more request may start.
    pub async fn request(&self) {
        if let Some(b) = &self.requests {
            b.take(1).await;
        }
    }

    /// Waits until `n` more bytes may move.
    pub async fn bytes(&self, n: u64) {
        if let Some(b) = &self.bytes {
            b.take(n).await;
        }
    }

    /// `body` with each chunk charged before it is passed on (unchanged
    /// when there is no byte limit).
    pub fn pace(&self, body: BoxByteStream) -> BoxByteStream {
        let Some(bucket) = self.bytes.clone() else {
            return body;
        };
        Box::pin(body.then(move |chunk| {
            let bucket = bucket.clone();
            async move {
                if let Ok(c) = &chunk {
                    bucket.take(c.len() as u64).await;
                }
                chunk
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_gives_a_tenth_of_a_second_then_paces() {
        let b = TokenBucket::new(1000);
        let t0 = Instant::now();
        b.take(100).await;
        assert_eq!(t0.elapsed(), Duration::ZERO, "the first 100 ms are a burst");
        for i in 1..=4u64 {
            b.take(250).await;
            assert_eq!(t0.elapsed(), Duration::from_millis(250 * i));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn idling_refills_at_most_the_burst() {
        let b = TokenBucket::new(1000);
        b.take(1000).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        let t0 = Instant::now();
        b.take(100).await;
        assert_eq!(t0.elapsed(), Duration::ZERO);
        b.take(500).await;
        assert_eq!(t0.elapsed(), Duration::from_millis(500), "no credit saved");
    }

    #[tokio::test(start_paused = true)]
    async fn a_charge_bigger_than_the_burst_waits_for_the_excess() {
        let b = TokenBucket::new(MIB);
        let t0 = Instant::now();
        b.take(16 * MIB).await;
        assert_eq!(t0.elapsed(), Duration::from_millis(15_900));
        b.take(MIB).await;
        assert_eq!(t0.elapsed(), Duration::from_millis(16_900));
    }

    /// What `--rate-limit` promises: over a transfer of two seconds or
    /// more, the measured rate is within 10% of the limit, whether bytes
    /// are charged in small chunks by several connections (a download's
    /// slices) or as whole parts (an upload's), from a full bucket.
    #[tokio::test(start_paused = true)]
    async fn two_seconds_of_transfer_are_within_ten_percent() {
        const RATE: u64 = 20 * MIB;
        for (tasks, chunk, per_task) in [
            (4u64, 64 << 10, 10 * MIB),
            (8, 16 << 10, 5 * MIB),
            (3, 8 * MIB, 2 * 8 * MIB),
            (1, 1 << 20, 45 * MIB),
        ] {
            let b = Arc::new(TokenBucket::new(RATE));
            let t0 = Instant::now();
            let all: Vec<_> = (0..tasks)
                .map(|_| {
                    let b = b.clone();
                    tokio::spawn(async move {
                        let mut left = per_task;
                        while left > 0 {
                            let n = left.min(chunk);
                            b.take(n).await;
                            left -= n;
                        }
                    })
                })
                .collect();
            for t in all {
                t.await.unwrap();
            }
            let bytes = tasks * per_task;
            let secs = t0.elapsed().as_secs_f64();
            assert!(secs >= 2.0 * 0.9, "{tasks} × {chunk}: {secs} s");
            let measured = bytes as f64 / secs;
            assert!(
                measured <= RATE as f64 * 1.1 && measured >= RATE as f64 * 0.9,
                "{tasks} tasks of {chunk}-byte charges: {:.2} MiB/s for 20",
                measured / MIB as f64
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_takers_share_one_rate() {
        let b = Arc::new(TokenBucket::new(10));
        let t0 = Instant::now();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let b = b.clone();
                tokio::spawn(async move {
                    for _ in 0..5 {
                        b.take(1).await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        // 40 requests at 10/s, the first one at once: the 40th at 3.9 s.
        assert_eq!(t0.elapsed(), Duration::from_millis(3900));
    }

    #[tokio::test(start_paused = true)]
    async fn unset_limits_never_wait() {
        let r = Rates::default();
        let t0 = Instant::now();
        for _ in 0..1000 {
            r.request().await;
            r.bytes(1 << 30).await;
        }
        assert_eq!(t0.elapsed(), Duration::ZERO);
    }
}
