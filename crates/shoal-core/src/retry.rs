//! Retrying a request: exponential backoff with full jitter, for the kinds
//! of failure that a second try can fix (429, 5xx, 408, resets, timeouts).
//!
//! Defaults: first wait 100 ms, doubling to at most 10 s, 8 attempts (about
//! 30 s of waiting in the worst case: longer than a typical load spike,
//! shorter than a user's patience). A server's `Retry-After` replaces the
//! computed wait when it is longer, capped at one minute.
//!
//! Who retries: the backends, around each HTTP request they send, and no
//! one above them. Engines and commands call store methods once; wrapping
//! them again would multiply attempts (8 × 8 = 64) and hide real outages.
//! A download stream that breaks halfway is the one thing a backend cannot
//! retry, because only the reader knows how much it consumed: that is
//! resumed from its last byte by [`crate::resume`], not restarted.
//!
//! Writes and deletes are the exception to "the same request again": when
//! their outcome is unknown they are retried through [`safe`], which looks
//! at the object before sending anything again.

pub mod safe;

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::error::{Error, Result};

/// How persistent to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 disables retries).
    pub max_attempts: u32,
    /// First wait.
    pub initial_delay: Duration,
    /// Longest wait.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        }
    }

    fn builder(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.initial_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_attempts.saturating_sub(1) as usize)
            .with_jitter()
    }

    /// The wait before retry number `retry` (1 for the first) after
    /// `error`: the schedule's wait, or the server's `Retry-After` when
    /// that is longer (capped at [`RETRY_AFTER_CAP`]). Every retry loop
    /// waits by it: [`RetryPolicy::run`], [`safe`]'s writes and deletes,
    /// a download stream resumed from its last byte.
    pub fn wait_before(&self, retry: u32, error: &Error) -> Duration {
        longer_if_asked(self.delay(retry), error)
    }

    /// The schedule's wait before retry number `retry` (1 for the first),
    /// whatever the error: [`RetryPolicy::wait_before`] without a server's
    /// word.
    pub fn delay(&self, retry: u32) -> Duration {
        use backon::BackoffBuilder;
        self.builder()
            .with_max_times(retry.max(1) as usize)
            .build()
            .nth(retry.max(1) as usize - 1)
            .unwrap_or(self.max_delay)
    }

    /// Runs `f` until it succeeds, fails with a non-retryable error, or the
    /// attempts run out. The last error is returned as it was.
    pub async fn run<T, F, Fut>(&self, what: &str, f: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.run_when(what, f, Error::is_retryable).await
    }

    /// Like [`RetryPolicy::run`], but an attempt the server may have
    /// carried out ([`Error::may_have_been_applied`]: a lost answer, a 5xx
    /// after the request was sent) is not sent again: its error is
    /// returned at once, for the caller to look at the store before
    /// anything more is sent. For requests that [`safe`] cannot wrap
    /// (a batch of deletes, each key with its own outcome).
    pub async fn run_unless_applied<T, F, Fut>(&self, what: &str, f: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.run_when(what, f, |e| e.is_retryable() && !e.may_have_been_applied())
            .await
    }

    async fn run_when<T, F, Fut>(&self, what: &str, f: F, again: fn(&Error) -> bool) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        f.retry(self.builder())
            .sleep(tokio::time::sleep)
            .when(again)
            .adjust(|e: &Error, dur: Option<Duration>| dur.map(|d| longer_if_asked(d, e)))
            .notify(|e: &Error, dur: Duration| {
                tracing::debug!(what, error = %e, wait_ms = dur.as_millis() as u64, "retrying");
            })
            .await
    }
}

/// The longest a server's `Retry-After` may make one wait: a server asking
/// for an hour would otherwise hang the command without a word.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// `wait`, or the server's `Retry-After` on `error` when that is longer
/// (capped at [`RETRY_AFTER_CAP`]).
fn longer_if_asked(wait: Duration, error: &Error) -> Duration {
    match error.retry_after() {
        Some(asked) => wait.max(asked.min(RETRY_AFTER_CAP)),
        None => wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorKind, Op};
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn a_servers_retry_after_lengthens_the_wait_up_to_the_cap() {
        let p = RetryPolicy::default();
        let busy = || Error::new(ErrorKind::ServerBusy, Op::Stat, "u", "503");
        // Without a word from the server: the schedule's wait (the first
        // step plus at most one more of jitter).
        assert!(p.wait_before(1, &busy()) <= 2 * p.initial_delay);
        let asked = busy().with_retry_after(Duration::from_secs(5));
        assert_eq!(p.wait_before(1, &asked), Duration::from_secs(5));
        let hour = busy().with_retry_after(Duration::from_secs(3600));
        assert_eq!(p.wait_before(1, &hour), RETRY_AFTER_CAP);
        // A shorter ask does not shorten the schedule's wait.
        let short = busy().with_retry_after(Duration::ZERO);
        assert!(p.wait_before(8, &short) >= p.initial_delay);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_retryable_then_succeeds() {
        let n = AtomicU32::new(0);
        let r = RetryPolicy::default()
            .run("t", || async {
                if n.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(Error::new(ErrorKind::ServerBusy, Op::Stat, "u", "503"))
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(n.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn unless_applied_sends_again_only_what_never_took_effect() {
        let n = AtomicU32::new(0);
        let r = RetryPolicy::default()
            .run_unless_applied("t", || async {
                match n.fetch_add(1, Ordering::SeqCst) {
                    // Never reached the server, then refused before any work.
                    0 => Err(Error::new(ErrorKind::Connect, Op::Delete, "u", "refused").unsent()),
                    1 => {
                        Err(Error::new(ErrorKind::ServerBusy, Op::Delete, "u", "429")
                            .with_status(429))
                    }
                    // Sent, its answer lost: not sent again.
                    _ => Err::<(), _>(Error::new(ErrorKind::Connect, Op::Delete, "u", "reset")),
                }
            })
            .await;
        assert_eq!(r.unwrap_err().message(), "reset");
        assert_eq!(n.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn delays_grow_within_the_policy() {
        let p = RetryPolicy::default();
        for retry in 1..=12 {
            let d = p.delay(retry);
            // Jitter adds up to one more step; the cap holds before it.
            assert!(d >= p.initial_delay, "retry {retry}: {d:?}");
            assert!(d <= 2 * p.max_delay, "retry {retry}: {d:?}");
        }
        let fast = RetryPolicy {
            initial_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            ..Default::default()
        };
        assert!(fast.delay(10) <= Duration::from_millis(8));
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_not_found() {
        let n = AtomicU32::new(0);
        let r: Result<()> = RetryPolicy::default()
            .run("t", || async {
                n.fetch_add(1, Ordering::SeqCst);
                Err(Error::new(ErrorKind::NotFound, Op::Stat, "u", "404"))
            })
            .await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts() {
        let n = AtomicU32::new(0);
        let p = RetryPolicy {
            max_attempts: 3,
            ..Default::default()
        };
        let r: Result<()> = p
            .run("t", || async {
                n.fetch_add(1, Ordering::SeqCst);
                Err(Error::new(ErrorKind::Connect, Op::Stat, "u", "refused"))
            })
            .await;
        assert!(r.is_err());
        assert_eq!(n.load(Ordering::SeqCst), 3);
    }
}
