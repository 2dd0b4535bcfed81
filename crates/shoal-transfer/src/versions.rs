//! One stored version of an object, named as its store names it (a GCS
//! generation, an S3 version id): read, copied (a restore when copied
//! over its own key) and deleted, for `--version-id` in the CLI and
//! `version_id=` in Python alike.
//!
//! The rules live here so every front end keeps them:
//! - a version id is read by [`Scheme::parse_version_id`] and names one
//!   object, never a bucket, a prefix or a glob;
//! - a restore never replaces a newer version than the one it saw: unless
//!   the caller chose a precondition, the write is pinned to what the
//!   destination held just before it (GCS `ifGenerationMatch`, S3
//!   `If-Match`; nothing there: it must not exist), and a write landing
//!   between the two wins ([`ErrorKind::Precondition`], saying so);
//! - a delete by version deletes that version and nothing else.
//!
//! [`Scheme::parse_version_id`]: shoal_core::Scheme::parse_version_id

use std::sync::Arc;

use shoal_core::retry::RetryPolicy;
use shoal_core::{
    Error, ErrorKind, Lack, Location, ObjectMeta, ObjectVersion, Op, Result, Store, StoreFor, need,
};

use crate::{Report, Run};

/// The stored version `v` names on `loc`: one object (not a bucket, a
/// prefix or a glob), `v` a GCS generation or an S3 version id.
pub fn parse(op: Op, loc: &Location, v: &str) -> Result<ObjectVersion> {
    let url = loc.to_string();
    if shoal_list::names_bucket(loc) || loc.key.ends_with('/') || shoal_list::has_wildcard(&loc.key)
    {
        return Err(Error::invalid(
            op,
            &url,
            "a version id names a version of one object, and this is not one object",
        ));
    }
    (loc.scheme.parse_version_id(v)).map_err(|m| Error::invalid(op, &url, m))
}

/// The metadata of the version `v` of `loc`, which reads and copies of it
/// then ask for (current or not).
pub async fn head(store: &dyn Store, loc: &Location, v: &str) -> Result<ObjectMeta> {
    let version = parse(Op::Stat, loc, v)?;
    let head = match need(store.versions(), Lack::HeadVersion, &loc.bucket, &loc.key) {
        Ok(s) => s.head_version(&loc.bucket, &loc.key, &version).await,
        Err(e) => Err(e),
    };
    head.map_err(|e| e.with_url(loc.to_string()))
}

/// Copies the version `meta` (from [`head`]) of `src` to `dst`: a file or
/// an object; over a cloud object, a restore. Unless `caller_pinned` (the
/// caller's run already carries a precondition), the write is pinned to
/// what `dst` holds now, so a version written meanwhile is kept and the
/// copy fails with [`ErrorKind::Precondition`].
pub async fn copy(
    src: &Location,
    meta: &ObjectMeta,
    dst: &Location,
    store_for: &StoreFor,
    run: &Run,
    policy: &RetryPolicy,
    caller_pinned: bool,
) -> Result<Report> {
    let run = if !dst.is_local() && !caller_pinned {
        let store = store_for(dst)?;
        match store.head(&dst.bucket, &dst.key).await {
            Ok(now) => with_put(run, |put| put.if_match = now.version),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                with_put(run, |put| put.if_not_exists = true)
            }
            Err(e) => return Err(e.with_url(dst.to_string())),
        }
    } else {
        run.clone()
    };
    let copied = crate::copy::copy_one(src, Some(meta), dst, store_for, &run, policy).await;
    copied.map_err(|e| match e.kind() {
        ErrorKind::Precondition if !caller_pinned => Error::new(
            ErrorKind::Precondition,
            Op::Copy,
            dst.to_string(),
            "not copied: the destination was written since it was read (a newer version is kept); copy again to restore over that one",
        ),
        _ => e,
    })
}

/// `run` with its writes' preconditions changed by `pin`.
fn with_put(run: &Run, pin: impl FnOnce(&mut shoal_core::PutOptions)) -> Run {
    let mut opts = (*run.opts).clone();
    pin(&mut opts.put);
    Run {
        opts: Arc::new(opts),
        budgets: run.budgets.clone(),
    }
}

/// Deletes the version `v` of `loc` (an S3 delete marker too) for good;
/// no other version is touched.
pub async fn delete(store: &dyn Store, loc: &Location, v: &str) -> Result<()> {
    let version = parse(Op::Delete, loc, v)?;
    let deleted = match need(store.versions(), Lack::DeleteVersion, &loc.bucket, &loc.key) {
        Ok(s) => s.delete_version(&loc.bucket, &loc.key, &version).await,
        Err(e) => Err(e),
    };
    deleted.map_err(|e| e.with_url(loc.to_string()))
}

/// What [`restore`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// A soft-deleted generation brought back by the store itself (GCS
    /// `objects.restore`), as the new live generation.
    SoftDeleted,
    /// A stored version copied onto its own key (checked against the
    /// version's checksum): so many bytes.
    Copied(u64),
}

/// Makes the version `v` of `loc` the key's live object again: a stored
/// version a read reaches (a noncurrent one, on S3 or GCS) by [`copy`]
/// onto its own key; a GCS generation no read reaches (soft-deleted)
/// through the store's restore.
///
/// Unless `allow_overwrite`, only while the key has no live object (GCS
/// `ifGenerationMatch=0`, else a write that must not find one); with it,
/// a live object is replaced, the copy pinned to the one seen. Either way
/// a refused restore is [`ErrorKind::Precondition`] saying which.
pub async fn restore(
    loc: &Location,
    v: &str,
    store_for: &StoreFor,
    run: &Run,
    policy: &RetryPolicy,
    allow_overwrite: bool,
) -> Result<Restored> {
    let url = loc.to_string();
    let version = parse(Op::Copy, loc, v)?;
    let store = store_for(loc)?;
    let live = || {
        Error::new(
            ErrorKind::Precondition,
            Op::Copy,
            &url,
            "not restored: the key has a live object (--allow-overwrite replaces it)",
        )
    };
    // A stored version readable as it is (noncurrent on a versioned
    // bucket) is copied; on GCS, a generation no read reaches may be
    // soft-deleted, which the store itself restores.
    let versions = need(store.versions(), Lack::HeadVersion, &loc.bucket, &loc.key)
        .map_err(|e| e.with_url(&url))?;
    let meta = match (versions.head_version(&loc.bucket, &loc.key, &version)).await {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let ObjectVersion::Generation(g) = version else {
                return Err(e.with_url(&url));
            };
            let restored =
                versions.restore_soft_deleted(&loc.bucket, &loc.key, g, !allow_overwrite);
            return match restored.await {
                Ok(_) => Ok(Restored::SoftDeleted),
                Err(e) if e.kind() == ErrorKind::Precondition => Err(live()),
                Err(e) => Err(e.with_url(&url)),
            };
        }
        Err(e) => return Err(e.with_url(&url)),
    };
    let run = if allow_overwrite {
        run.clone()
    } else {
        with_put(run, |put| {
            put.if_not_exists = true;
            put.if_match = None;
        })
    };
    match copy(loc, &meta, loc, store_for, &run, policy, !allow_overwrite).await {
        Ok(r) => Ok(Restored::Copied(r.bytes)),
        Err(e) if e.kind() == ErrorKind::Precondition && !allow_overwrite => Err(live()),
        Err(e) => Err(e),
    }
}
