//! One object or file from anywhere to anywhere: the one place a pair of
//! locations is routed to its engine (upload, download, cloud-to-cloud
//! copy, local copy). `cp` calls it for one object, the batch for each of
//! many, so both send a pair the same way.
//!
//! Destinations are named already (the callers' naming rules differ):
//! this only moves the bytes, every local write through a working file
//! renamed into place ([`shoal_core::workfile`]), its folders made by
//! [`shoal_core::local_path::make_folders`], which never follows a link
//! below the folder the user named. A local copy onto the very file it
//! reads (a hard link, a bind mount: another name, one device and inode)
//! is refused: replacing it and then deleting the source (`mv`) would
//! lose the file.

use std::path::Path;

use shoal_core::retry::RetryPolicy;
use shoal_core::{Error, ErrorKind, Location, ObjectMeta, Op, Result, StoreFor};

use crate::cloud_copy::{copy_object, copy_version};
use crate::download::{download_known, download_to_file};
use crate::upload::upload_file;
use crate::{Report, Run, SMALL_UPLOAD};

/// Copies `src` to `dst`. `meta` is what a listing said of the source
/// (None: the first request learns it). In a batch, `run` carries the
/// shared budgets and a copy takes its slot by what it costs (see
/// [`crate::batch`]); alone, they are unlimited.
pub async fn copy_one(
    src: &Location,
    meta: Option<&ObjectMeta>,
    dst: &Location,
    store_for: &StoreFor,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    match (src.is_local(), dst.is_local()) {
        // The upload takes a small-request slot itself once its size is
        // known (callers naming files give none).
        (true, false) => upload_file(store_for(dst)?, Path::new(&src.key), dst, run).await,
        (false, true) => download(src, meta, dst, store_for, run, policy).await,
        (false, false) => {
            let small = meta.map(|m| m.size).filter(|&n| n <= SMALL_UPLOAD);
            let _copying = match (&run.budgets.stream_copies, small) {
                (Some(s), None) => s.clone().acquire_owned().await.ok(),
                _ => None,
            };
            let run = run.for_transfer(small);
            let (from, to) = (store_for(src)?, store_for(dst)?);
            match meta.filter(|m| m.version_state.is_some()) {
                // One stored version, chosen: that version is copied.
                Some(m) => copy_version(from, src, m, to, dst, &run, policy).await,
                None => copy_object(from, src, to, dst, &run, policy).await,
            }
        }
        (true, true) => {
            shoal_core::local_path::make_folders(&dst.key, dst.local_root)?;
            let bytes = copy_local(&src.key, &dst.key, run.opts.no_clobber).await?;
            Ok(Report::size_only(bytes))
        }
    }
}

async fn download(
    src: &Location,
    meta: Option<&ObjectMeta>,
    dst: &Location,
    store_for: &StoreFor,
    run: &Run,
    policy: &RetryPolicy,
) -> Result<Report> {
    let store = store_for(src)?;
    let path = Path::new(&dst.key);
    // In place, not on the blocking pool: when the folders exist (every
    // file of a folder but the first) this is a stat or a few, cheaper
    // than the hand-off.
    shoal_core::local_path::make_folders(&dst.key, dst.local_root)?;
    match meta {
        Some(meta) => {
            // One stream (no slices) holds at most one write batch.
            let one_stream =
                meta.size <= run.opts.min_slice && run.opts.slices.is_none_or(|s| s <= 1);
            let run = run.for_transfer(one_stream.then_some(meta.size));
            download_known(store, src, meta, path, &run, policy).await
        }
        // Named without a size: the first GET tells it.
        None => download_to_file(store, src, path, run, policy).await,
    }
}

/// Copies the local file `from` to `to` on the blocking pool, through a
/// working file ([`shoal_core::workfile::copy_file_with`]); returns the
/// bytes copied.
pub(crate) async fn copy_local(from: &str, to: &str, no_clobber: bool) -> Result<u64> {
    let (from, to) = (from.to_owned(), to.to_owned());
    let shown = to.clone();
    tokio::task::spawn_blocking(move || {
        refuse_same_file(&from, &to)?;
        shoal_core::workfile::copy_file_with(Path::new(&from), Path::new(&to), no_clobber)
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Io, Op::Copy, shown, e.to_string()))?
}

/// `to` is the very file `from` is (same device and inode, whatever the
/// names say: a hard link, a bind mount): refused, naming both.
pub(crate) fn refuse_same_file(from: &str, to: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(a), Ok(b)) = (std::fs::metadata(from), std::fs::symlink_metadata(to))
        && (a.dev(), a.ino()) == (b.dev(), b.ino())
    {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            Op::Copy,
            to,
            format!("is the same file as {from} (same device and inode); not copied"),
        ));
    }
    Ok(())
}
