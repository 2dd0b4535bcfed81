//! Bytes of a request body counted as the connection takes them, so a
//! progress display moves through a big part instead of jumping by a
//! whole part (16 MiB and more) when its answer comes.
//!
//! A transfer runs the future that sends one body inside [`counting`].
//! The connection pool (shoal-http's transport), when it builds that
//! request in the same task, takes the counter with [`current`] and hands
//! the body to hyper in slices of [`SLICE`] bytes (cut from the same
//! buffer: no copy), noting each slice as it is taken. hyper takes the next slice once the connection has room for
//! it, so the count follows the bytes on the wire within a slice plus
//! the socket's buffer.
//!
//! A retried request sends the same bytes again: the counter keeps the
//! highest offset reached and adds only what goes past it, so a byte is
//! never counted twice and a total never exceeds the body. The caller
//! ends with [`Sent::done`] once the body was stored, which adds what the
//! slices did not note (all of it on paths that do not slice, such as a
//! request through an `https://` proxy), or [`Sent::undo`] when it failed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bodies at least this long are counted in slices of this size; shorter
/// ones are counted whole by [`Sent::done`].
pub const SLICE: usize = 256 * 1024;

tokio::task_local! {
    static SENT: Sent;
}

/// Where one body's sent bytes are added: a run's progress total.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The furthest offset of the body noted so far.
    high: Arc<AtomicU64>,
    total: Arc<AtomicU64>,
}

impl Sent {
    /// A counter for one body, adding to `total`.
    pub fn new(total: Arc<AtomicU64>) -> Sent {
        Sent {
            high: Arc::new(AtomicU64::new(0)),
            total,
        }
    }

    /// Notes that the body was taken up to `offset` (the sender, as the
    /// connection takes each slice).
    pub fn reached(&self, offset: u64) {
        let before = self.high.fetch_max(offset, Ordering::Relaxed);
        if offset > before {
            self.total.fetch_add(offset - before, Ordering::Relaxed);
        }
    }

    /// Counts the body of `len` bytes as sent in full.
    pub fn done(&self, len: u64) {
        self.reached(len);
    }

    /// Takes back what was counted (the body was not stored).
    pub fn undo(&self) {
        let counted = self.high.swap(0, Ordering::Relaxed);
        self.total.fetch_sub(counted, Ordering::Relaxed);
    }
}

/// Runs `fut`, counting the request bodies it sends into `sent`.
pub async fn counting<F: Future>(sent: Sent, fut: F) -> F::Output {
    SENT.scope(sent, fut).await
}

/// The counter of the task building a request, if it counts: what a
/// sender that slices bodies notes them into.
pub fn current() -> Option<Sent> {
    SENT.try_with(Sent::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resent_body_is_counted_once() {
        let total = Arc::new(AtomicU64::new(0));
        let sent = Sent::new(total.clone());
        sent.reached(100);
        sent.reached(300);
        // The retry starts again from 0.
        sent.reached(100);
        sent.reached(200);
        assert_eq!(total.load(Ordering::Relaxed), 300);
        sent.reached(400);
        sent.done(500);
        assert_eq!(total.load(Ordering::Relaxed), 500);
        sent.done(500);
        assert_eq!(total.load(Ordering::Relaxed), 500);
        let failed = Sent::new(total.clone());
        failed.reached(200);
        assert_eq!(total.load(Ordering::Relaxed), 700);
        failed.undo();
        assert_eq!(total.load(Ordering::Relaxed), 500);
    }

    #[tokio::test]
    async fn the_counter_is_seen_only_inside_its_scope() {
        assert!(current().is_none());
        let total = Arc::new(AtomicU64::new(0));
        let seen = counting(Sent::new(total), async { current().is_some() }).await;
        assert!(seen);
        assert!(current().is_none());
    }
}
