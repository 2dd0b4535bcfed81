//! Object versions from Python: `stat`, `cat`, `copy` and `rm` with
//! `version_id=`, and `ls(versions=True)`. The rules (what a version id
//! is, a restore pinned to what it replaces, a delete of that version
//! only) are the engine's ([`shoal_transfer::ops::versions`]); this module
//! parses the arguments and hands back Python values.

use std::future::Future;

use futures::StreamExt;
use pyo3::prelude::*;
use shoal_core::paginate::pages;
use shoal_core::{ListRequest, Op, Projection};
use shoal_list::ListOptions;
use shoal_transfer::Run;
use shoal_transfer::ops::versions;

use crate::errors::{IntoPyResult, to_py};
use crate::list::{cloud, object};
use crate::objects::ObjectInfo;
use crate::runtime::blocking_and_async;
use crate::session::Session;
use crate::transfer::single_destination;

fn stat_version_impl(
    s: &Session,
    url: String,
    version_id: String,
) -> impl Future<Output = PyResult<ObjectInfo>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = object(Op::Stat, &url).py()?;
        let store = stores.store(&loc).py()?;
        let m = versions::head(store.as_ref(), &loc, &version_id)
            .await
            .py()?;
        Ok(ObjectInfo::new(&loc, m))
    }
}

blocking_and_async! {
    /// The metadata of one stored version (a GCS generation, an S3
    /// version id), current or not.
    fn stat_version / stat_version_async(url: String, version_id: String) -> ObjectInfo = stat_version_impl;
}

fn copy_version_impl(
    s: &Session,
    src: String,
    dst: String,
    version_id: String,
    workers: Option<usize>,
) -> impl Future<Output = PyResult<u64>> + use<> {
    let stores = s.stores.clone();
    let run = Run::new(s.transfer_options(workers, None));
    let policy = s.retry();
    async move {
        let src = object(Op::Copy, &src).py()?;
        let dst = shoal_core::Location::parse(&dst).py()?;
        let dst = single_destination(Op::Copy, &src, dst).py()?;
        let store_for = stores.store_for(&[&src, &dst]).py()?;
        let meta = versions::head(store_for(&src).py()?.as_ref(), &src, &version_id)
            .await
            .py()?;
        let r = versions::copy(&src, &meta, &dst, &store_for, &run, &policy, false)
            .await
            .py()?;
        Ok(r.bytes)
    }
}

blocking_and_async! {
    /// Copies one stored version to a file or an object; over its own key,
    /// a restore, pinned to what the key holds now (a newer write meanwhile
    /// is kept: PreconditionError). Returns bytes copied.
    #[pyo3(signature = (session, src, dst, version_id, *, workers=None))]
    fn copy_version / copy_version_async(src: String, dst: String, version_id: String, workers: Option<usize>) -> u64 = copy_version_impl;
}

fn delete_version_impl(
    s: &Session,
    url: String,
    version_id: String,
) -> impl Future<Output = PyResult<()>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = object(Op::Delete, &url).py()?;
        let store = stores.store(&loc).py()?;
        versions::delete(store.as_ref(), &loc, &version_id)
            .await
            .py()
    }
}

blocking_and_async! {
    /// Deletes one stored version (or S3 delete marker) for good.
    fn delete_version / delete_version_async(url: String, version_id: String) -> () = delete_version_impl;
}

fn restore_impl(
    s: &Session,
    url: String,
    version_id: String,
    allow_overwrite: bool,
) -> impl Future<Output = PyResult<bool>> + use<> {
    let stores = s.stores.clone();
    let run = Run::new(s.transfer_options(None, None));
    let policy = s.retry();
    async move {
        let loc = object(Op::Copy, &url).py()?;
        let store_for = stores.store_for(&[&loc]).py()?;
        let done = versions::restore(
            &loc,
            &version_id,
            &store_for,
            &run,
            &policy,
            allow_overwrite,
        )
        .await
        .py()?;
        Ok(done == versions::Restored::SoftDeleted)
    }
}

blocking_and_async! {
    /// Makes one stored version the live object again (a GCS soft-deleted
    /// generation, or any version copied onto its key); a live object is
    /// replaced only with `allow_overwrite`. True when it was soft-deleted.
    #[pyo3(signature = (session, url, version_id, *, allow_overwrite=false))]
    fn restore / restore_async(url: String, version_id: String, allow_overwrite: bool) -> bool = restore_impl;
}

type Listing = (Vec<ObjectInfo>, Vec<String>);

fn list_versions_impl(
    s: &Session,
    url: String,
    recursive: bool,
    soft_deleted: bool,
    start: Option<String>,
    end: Option<String>,
) -> impl Future<Output = PyResult<Listing>> + use<> {
    let stores = s.stores.clone();
    // `[start, end)`: one key range of a listing split over Dask tasks
    // (python/shoal/dask.py), every version of the keys in it, below the
    // prefix: one sequential listing (the stores page versions by key
    // marker, so a range holds each key's versions whole).
    let range = start.is_some() || end.is_some();
    async move {
        let loc = cloud(&url)?;
        let store = stores.store(&loc).py()?;
        let (mut objects, mut prefixes) = (Vec::new(), Vec::new());
        if !soft_deleted
            && !range
            && (recursive || !loc.is_prefix_like() || shoal_list::has_wildcard(&loc.key))
        {
            // Every version below, of one key, or of what a glob names.
            let opts = ListOptions {
                recursive,
                projection: Projection::Full,
                workers: 1,
                versions: true,
                ..ListOptions::default()
            };
            let mut listed = std::pin::pin!(shoal_list::expand(store, &loc, &opts));
            while let Some(m) = listed.next().await {
                objects.push(ObjectInfo::new(
                    &loc,
                    m.map_err(|e| to_py(e.with_url(&url)))?,
                ));
            }
        } else {
            // One level (every version of its objects, and its prefixes),
            // or soft-deleted generations: one sequential listing, where
            // a name lists its prefix, kept to the name.
            let req = ListRequest {
                prefix: loc.key.clone(),
                delimiter: (!recursive && !range && loc.is_prefix_like()).then(|| "/".to_owned()),
                start_offset: start.filter(|s| s.as_str() > loc.key.as_str()),
                end_offset: end,
                projection: Projection::Full,
                versions: !soft_deleted,
                soft_deleted,
                ..Default::default()
            };
            let mut p = std::pin::pin!(pages(store, loc.bucket.clone(), req));
            while let Some(page) = p.next().await {
                let page = page.map_err(|e| to_py(e.with_url(&url)))?;
                objects.extend(
                    (page.objects.into_iter())
                        .filter(|m| loc.is_prefix_like() || m.key == loc.key)
                        .map(|m| ObjectInfo::new(&loc, m)),
                );
                prefixes.extend(
                    page.prefixes
                        .into_iter()
                        .map(|p| loc.with_key(p).to_string()),
                );
            }
        }
        Ok((objects, prefixes))
    }
}

blocking_and_async! {
    /// Every stored version (noncurrent ones and S3 delete markers
    /// included) of a key, one level of a prefix (with its `/`-prefixes),
    /// a glob's matches, or with `recursive` everything below.
    /// With `soft_deleted`, GCS soft-deleted generations only. `start` and
    /// `end`: only keys in `[start, end)` below the prefix (a Dask task's
    /// range).
    #[pyo3(signature = (session, url, *, recursive=false, soft_deleted=false, start=None, end=None))]
    fn list_versions / list_versions_async(url: String, recursive: bool, soft_deleted: bool, start: Option<String>, end: Option<String>) -> Listing = list_versions_impl;
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use pyo3::wrap_pyfunction;
    for f in [
        wrap_pyfunction!(stat_version, m)?,
        wrap_pyfunction!(stat_version_async, m)?,
        wrap_pyfunction!(copy_version, m)?,
        wrap_pyfunction!(copy_version_async, m)?,
        wrap_pyfunction!(delete_version, m)?,
        wrap_pyfunction!(delete_version_async, m)?,
        wrap_pyfunction!(list_versions, m)?,
        wrap_pyfunction!(restore, m)?,
        wrap_pyfunction!(restore_async, m)?,
        wrap_pyfunction!(list_versions_async, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
