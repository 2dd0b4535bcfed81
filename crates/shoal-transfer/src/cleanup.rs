//! Work that must happen on every way out of a transfer, even when the
//! future doing it is dropped (Ctrl-C, SIGTERM, a Python caller's
//! KeyboardInterrupt, an asyncio cancel).
//!
//! A dropped future cannot await anything, so what needs a request (a
//! multipart upload to abort, which on GCS also deletes its temporary
//! composite parts) is spawned from its guard's `Drop` onto the runtime
//! and registered ([`shoal_core::cleanup`], where a store registers the
//! aborts of its own server-side copies too); the CLI waits for all of it
//! ([`finish`]) before it exits. Local working files need no request: their guards remove them
//! in `Drop` itself.

use std::sync::Mutex;

use shoal_core::{Lack, MultipartUpload, Store};
use std::sync::Arc;

pub(crate) use shoal_core::cleanup::spawn;

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
    let parts = shoal_core::need(
        store.multipart(),
        Lack::Multipart,
        &upload.bucket,
        &upload.key,
    );
    let aborted = match parts {
        Ok(m) => m.multipart_abort(upload).await,
        Err(e) => Err(e),
    };
    if let Err(e) = aborted {
        tracing::warn!(error = %e, upload_id = %upload.upload_id, "could not abort the multipart upload; its parts may remain");
    }
}
