//! Requests that must still be sent when the future that would have sent
//! them is dropped (Ctrl-C, SIGTERM, a Python caller's KeyboardInterrupt,
//! an asyncio cancel): a multipart upload to abort, by a transfer
//! (`shoal_transfer::ops::cleanup`) or by a store's own server-side copy.
//!
//! A dropped future cannot await anything, so its guard's `Drop` spawns
//! the request onto the runtime with [`spawn`], which remembers it; the
//! CLI waits for all of it ([`finish`]) before it exits.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

static PENDING: Mutex<Vec<tokio::task::JoinHandle<()>>> = Mutex::new(Vec::new());

/// Runs `fut` on the current runtime and remembers it for [`finish`].
/// Outside a runtime there is nothing to run it on: it is dropped.
pub fn spawn(fut: impl Future<Output = ()> + Send + 'static) {
    if let Ok(h) = tokio::runtime::Handle::try_current() {
        let task = h.spawn(fut);
        let mut pending = PENDING.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|t| !t.is_finished());
        pending.push(task);
    }
}

/// Waits, at most `limit`, for the cleanups spawned so far; returns how
/// many did not finish in time.
pub async fn finish(limit: Duration) -> usize {
    let tasks: Vec<_> = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|p| p.into_inner()));
    let n = tasks.len();
    match tokio::time::timeout(limit, futures::future::join_all(tasks)).await {
        Ok(_) => 0,
        Err(_) => n,
    }
}
