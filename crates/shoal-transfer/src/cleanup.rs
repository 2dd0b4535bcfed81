//! Work that must happen on every way out of a transfer, even when the
//! future doing it is dropped (Ctrl-C, SIGTERM, a Python caller's
//! KeyboardInterrupt, an asyncio cancel).
//!
//! A dropped future cannot await anything, so what needs a request (a
//! multipart upload to abort, which on GCS also deletes its temporary
//! composite parts) is spawned from its guard's `Drop` onto the runtime
//! and registered here; the CLI waits for all of it ([`finish`]) before it
//! exits. Local working files need no request: their guards remove them
//! in `Drop` itself.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use shoal_core::{MultipartUpload, Store};
use std::sync::Arc;

static PENDING: Mutex<Vec<tokio::task::JoinHandle<()>>> = Mutex::new(Vec::new());

/// Uploads left on purpose when their transfer was cancelled: written
/// down to be resumed ([`crate::upload_journal`]), not aborted.
static KEPT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Notes that the upload to `url` was left to be resumed.
pub(crate) fn note_kept(url: &str) {
    KEPT.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(url.to_owned());
}

/// The uploads left to be resumed so far (their destinations' URLs), for
/// the front end to say after an interrupt.
pub fn kept() -> Vec<String> {
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

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

/// Aborts a multipart upload unless disarmed: made when the upload
/// starts, disarmed once it is completed or aborted in the normal way.
pub(crate) struct AbortUpload {
    armed: Option<(Arc<dyn Store>, MultipartUpload)>,
}

impl AbortUpload {
    pub(crate) fn new(store: &Arc<dyn Store>, upload: &MultipartUpload) -> Self {
        AbortUpload {
            armed: Some((store.clone(), upload.clone())),
        }
    }

    pub(crate) fn disarm(mut self) {
        self.armed = None;
    }
}

impl Drop for AbortUpload {
    fn drop(&mut self) {
        if let Some((store, upload)) = self.armed.take() {
            spawn(async move { abort_quietly(&store, &upload).await });
        }
    }
}

/// Aborts an upload, logging (not failing) if that too fails.
pub(crate) async fn abort_quietly(store: &Arc<dyn Store>, upload: &MultipartUpload) {
    if let Err(e) = (store.multipart_abort(upload)).await {
        tracing::warn!(error = %e, upload_id = %upload.upload_id, "could not abort the multipart upload; its parts may remain");
    }
}
