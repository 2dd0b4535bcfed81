//! Multipart uploads in progress in a bucket (`shoal uploads`): listed,
//! and aborted when older than an age. Parts of an upload that will never
//! be completed cost storage until it is aborted; uploads a killed run left
//! are resumed by running it again ([`crate::upload_journal`]), and the
//! ones no one will resume are aborted here.
//!
//! An abort is justified by the store's state only: the uploads aborted
//! are those the store lists now, each by its upload id, and only those
//! started at least `older_than` ago (an upload another process is
//! sending right now is young; with no start time it is left alone unless
//! `older_than` is zero).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shoal_core::{Error, Lack, Location, MultipartUpload, PendingUpload, Result, Store, need};

/// The uploads in progress below `loc` (a bucket, or a key prefix).
pub async fn list(store: &Arc<dyn Store>, loc: &Location) -> Result<Vec<PendingUpload>> {
    let listed = match need(store.multipart(), Lack::ListUploads, &loc.bucket, &loc.key) {
        Ok(m) => m.multipart_uploads(&loc.bucket, &loc.key).await,
        Err(e) => Err(e),
    };
    listed.map_err(|e| e.with_url(loc.to_string()))
}

/// What [`abort`] did.
#[derive(Debug, Default)]
pub struct Aborted {
    /// Uploads aborted.
    pub aborted: Vec<PendingUpload>,
    /// Uploads left: younger than the age given (or of unknown age).
    pub young: Vec<PendingUpload>,
    /// Uploads whose abort failed, with why.
    pub failed: Vec<(PendingUpload, Error)>,
}

/// Aborts the uploads below `loc` the store lists now that were started at
/// least `older_than` ago.
pub async fn abort(
    store: &Arc<dyn Store>,
    loc: &Location,
    older_than: Duration,
) -> Result<Aborted> {
    let listed = list(store, loc).await?;
    let now = SystemTime::now();
    let mut out = Aborted::default();
    for u in listed {
        if !crate::safety::deletes::abort_justified(&u, older_than, now) {
            out.young.push(u);
            continue;
        }
        let upload = MultipartUpload {
            bucket: loc.bucket.clone(),
            key: u.key.clone(),
            upload_id: u.upload_id.clone(),
        };
        let aborted = match need(
            store.multipart(),
            Lack::Multipart,
            &upload.bucket,
            &upload.key,
        ) {
            Ok(m) => m.multipart_abort(&upload).await,
            Err(e) => Err(e),
        };
        match aborted {
            Ok(()) => out.aborted.push(u),
            Err(e) => out.failed.push((u, e)),
        }
    }
    Ok(out)
}
