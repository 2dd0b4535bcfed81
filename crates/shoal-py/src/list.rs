//! Listing, stat, du, bucket creation and deletes.
//!
//! Python composes `ls`, `glob`, `find` and fsspec's directory semantics
//! from three primitives: `list_prefix` (one raw prefix, one level with a
//! delimiter or everything with the parallel lister), `expand` (every
//! object a URL or glob names, shoal-list's own) and `entries` (what `ls`
//! shows for a glob).

use std::future::Future;

use futures::StreamExt;
use pyo3::prelude::*;
use shoal_core::paginate::pages;
use shoal_core::{Error, ListRequest, Location, Op, Projection, Scheme};
use shoal_list::du::{Du, GroupBy};
use shoal_list::parallel::Page;
use shoal_list::{Entry, KeyGlob, ListOptions};

use crate::errors::{IntoPyResult, exception, to_py};
use crate::objects::ObjectInfo;
use crate::runtime::blocking_and_async;
use crate::session::Session;

/// A cloud URL, or an error naming it.
pub(crate) fn cloud(url: &str) -> PyResult<Location> {
    let loc = Location::parse(url).py()?;
    if loc.is_local() {
        return Err(to_py(Error::invalid(
            Op::List,
            url,
            "is a local path; this call takes gs:// or s3:// URLs",
        )));
    }
    Ok(loc)
}

/// A cloud URL that names an object: `gs://b` and `s3://b/` name a bucket,
/// and a call meant for an object must not act on the bucket itself
/// (`shoal_list::object`, the CLI's rule too).
pub(crate) fn object(op: Op, url: &str) -> shoal_core::Result<Location> {
    let loc = Location::parse(url)?;
    if loc.is_local() {
        return Err(Error::invalid(
            op,
            url,
            "is a local path; this call takes gs:// or s3:// URLs",
        ));
    }
    shoal_list::object(op, &loc)?;
    Ok(loc)
}

pub(crate) fn projection(detail: &str) -> PyResult<Projection> {
    match detail {
        "name" => Ok(Projection::NameOnly),
        "size" => Ok(Projection::NameSizeTime),
        "full" => Ok(Projection::Full),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "detail must be 'name', 'size' or 'full', not {other:?}"
        ))),
    }
}

type Listing = (Vec<ObjectInfo>, Vec<String>);

fn stat_impl(s: &Session, url: String) -> impl Future<Output = PyResult<ObjectInfo>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = object(Op::Stat, &url).py()?;
        let store = stores.store(&loc).py()?;
        let m = store
            .head(&loc.bucket, &loc.key)
            .await
            .map_err(|e| to_py(e.with_url(&url).with_op(Op::Stat)))?;
        Ok(ObjectInfo::new(&loc, m))
    }
}

blocking_and_async! {
    /// Metadata of one object.
    fn stat / stat_async(url: String) -> ObjectInfo = stat_impl;
}

fn list_prefix_impl(
    s: &Session,
    url: String,
    delimiter: bool,
    detail: String,
    limit: Option<u32>,
) -> impl Future<Output = PyResult<Listing>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = cloud(&url)?;
        let store = stores.store(&loc).py()?;
        let req = ListRequest {
            prefix: loc.key.clone(),
            delimiter: delimiter.then(|| "/".to_owned()),
            projection: projection(&detail)?,
            max_results: limit,
            ..Default::default()
        };
        let mut objects = Vec::new();
        let mut prefixes = Vec::new();
        let mut p = if limit.is_some() {
            // A probe (does anything exist here?): one page is the answer.
            pages(store, loc.bucket.clone(), req)
                .take(1)
                .map(|p| p.map(Page::from))
                .boxed()
        } else {
            // One level too: a flat folder of many pages is listed in
            // parallel (shoal_list::level), in key order.
            let opts = ListOptions {
                sorted: true,
                ..ListOptions::default()
            };
            shoal_list::level(store, loc.bucket.clone(), req, &opts)
        };
        while let Some(page) = p.next().await {
            let page = page.map_err(|e| to_py(e.with_url(&url)))?;
            objects.extend(page.objects.into_iter().map(|m| ObjectInfo::new(&loc, m)));
            prefixes.extend(
                page.prefixes
                    .into_iter()
                    .map(|p| loc.with_key(p).to_string()),
            );
        }
        Ok((objects, prefixes))
    }
}

blocking_and_async! {
    /// Objects whose key starts with the URL's key, taken literally: one
    /// level (objects and `/`-prefixes) with `delimiter`, else everything,
    /// listed in parallel once there is more than a page. With `limit`,
    /// one page of at most that many entries (a cheap existence probe).
    #[pyo3(signature = (session, url, *, delimiter=true, detail="full".to_owned(), limit=None))]
    fn list_prefix / list_prefix_async(url: String, delimiter: bool, detail: String, limit: Option<u32>) -> Listing = list_prefix_impl;
}

fn expand_impl(
    s: &Session,
    url: String,
    recursive: bool,
    detail: String,
) -> impl Future<Output = PyResult<Vec<ObjectInfo>>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = cloud(&url)?;
        let store = stores.store(&loc).py()?;
        let opts = ListOptions {
            recursive,
            projection: projection(&detail)?,
            sorted: true,
            ..ListOptions::default()
        };
        let mut out = Vec::new();
        let mut objects = std::pin::pin!(shoal_list::expand(store, &loc, &opts));
        while let Some(m) = objects.next().await {
            out.push(ObjectInfo::new(&loc, m.py()?));
        }
        Ok(out)
    }
}

blocking_and_async! {
    /// Every object a URL or glob names (gcloud glob semantics), in key
    /// order; with `recursive`, everything below each match too. A literal
    /// URL is one HEAD (NotFoundError when missing); a glob matching
    /// nothing is an empty list.
    #[pyo3(signature = (session, url, *, recursive=false, detail="full".to_owned()))]
    fn expand / expand_async(url: String, recursive: bool, detail: String) -> Vec<ObjectInfo> = expand_impl;
}

fn entries_impl(
    s: &Session,
    url: String,
) -> impl Future<Output = PyResult<Option<Listing>>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = cloud(&url)?;
        let store = stores.store(&loc).py()?;
        let opts = ListOptions {
            projection: Projection::Full,
            ..ListOptions::default()
        };
        let Some(mut entries) = shoal_list::entries(store, &loc, &opts).py()? else {
            return Ok(None);
        };
        let (mut objects, mut prefixes) = (Vec::new(), Vec::new());
        while let Some(e) = entries.next().await {
            match e.py()? {
                Entry::Object(m) => objects.push(ObjectInfo::new(&loc, m)),
                Entry::Prefix(p) => prefixes.push(loc.with_key(p).to_string()),
            }
        }
        Ok(Some((objects, prefixes)))
    }
}

blocking_and_async! {
    /// What `shoal ls` shows for a glob: matching objects and matching
    /// levels (as `/`-ending URLs). None for a URL without wildcards.
    fn entries / entries_async(url: String) -> Option<Listing> = entries_impl;
}

/// Groups `(label, bytes, objects)` and the total `(bytes, objects)`.
type DuResult = (Vec<(String, u64, u64)>, (u64, u64));

fn du_impl(
    s: &Session,
    url: String,
    group_by: Option<String>,
) -> impl Future<Output = PyResult<DuResult>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = cloud(&url)?;
        let group_by = match group_by.as_deref() {
            None => GroupBy::None,
            Some(g) => g.parse::<GroupBy>().map_err(|e| {
                pyo3::exceptions::PyValueError::new_err(format!("group_by={g:?}: {e}"))
            })?,
        };
        let store = stores.store(&loc).py()?;
        let base = KeyGlob::parse(&url, &loc.key)
            .py()?
            .map_or_else(|| loc.key.clone(), |g| g.literal_prefix().to_owned());
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let mut du = Du::new(group_by, &base, now_ns);
        let opts = ListOptions {
            recursive: true,
            projection: group_by.projection(),
            ..ListOptions::default()
        };
        let mut objects = std::pin::pin!(shoal_list::expand(store, &loc, &opts));
        while let Some(m) = objects.next().await {
            du.add(&m.py()?);
        }
        let groups = du
            .groups()
            .into_iter()
            .map(|(label, t)| {
                let label = match group_by {
                    GroupBy::Prefix(_) => loc.with_key(label).to_string(),
                    _ => label,
                };
                (label, t.bytes, t.objects)
            })
            .collect();
        let t = du.total();
        Ok((groups, (t.bytes, t.objects)))
    }
}

blocking_and_async! {
    /// Sizes and counts below a URL or glob, optionally grouped
    /// (`prefix:N`, `suffix`, `age`, `storage-class`).
    #[pyo3(signature = (session, url, *, group_by=None))]
    fn du / du_async(url: String, group_by: Option<String>) -> DuResult = du_impl;
}

fn list_buckets_impl(
    s: &Session,
    scheme: String,
) -> impl Future<Output = PyResult<Vec<(String, Option<String>)>>> + use<> {
    let stores = s.stores.clone();
    async move {
        let (scheme, store) = match scheme.as_str() {
            "gs" | "gcs" => (Scheme::Gs, None),
            "s3" => (Scheme::S3, None),
            other => match shoal_core::url::named_store(other) {
                Some((name, kind)) => (kind, Some(name)),
                None => {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "buckets are listed for 'gs', 's3' or a store named in the config file, not {other:?}"
                    )));
                }
            },
        };
        let loc = Location {
            scheme,
            bucket: String::new(),
            key: String::new(),
            local_root: None,
            store,
        };
        let store = stores.store(&loc).py()?;
        let buckets = shoal_core::need(store.buckets(), shoal_core::Lack::ListBuckets, "", "")
            .py()?
            .list_buckets()
            .await
            .py()?;
        Ok(buckets.into_iter().map(|b| (b.name, b.created)).collect())
    }
}

blocking_and_async! {
    /// The buckets the credentials see on one store (`"gs"`: in the
    /// configured project), as `(name, created)`; what `shoal ls gs://`
    /// lists.
    fn list_buckets / list_buckets_async(scheme: String) -> Vec<(String, Option<String>)> = list_buckets_impl;
}

fn make_bucket_impl(s: &Session, url: String) -> impl Future<Output = PyResult<()>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = cloud(&url)?;
        let store = stores.store(&loc).py()?;
        let buckets = shoal_core::need(
            store.buckets(),
            shoal_core::Lack::CreateBucket,
            &loc.bucket,
            "",
        );
        let made = match buckets {
            Ok(b) => b.create_bucket(&loc.bucket).await,
            Err(e) => Err(e),
        };
        made.map_err(|e| to_py(e.with_url(&url)))
    }
}

blocking_and_async! {
    /// Creates the bucket a URL names.
    fn make_bucket / make_bucket_async(url: String) -> () = make_bucket_impl;
}

fn delete_many_impl(
    s: &Session,
    urls: Vec<String>,
    workers: Option<usize>,
) -> impl Future<Output = PyResult<Vec<Option<Py<PyAny>>>>> + use<> {
    let stores = s.stores.clone();
    let workers = workers.unwrap_or(s.workers).max(1);
    async move {
        let results: Vec<shoal_core::Result<()>> = futures::stream::iter(urls)
            .map(|url| {
                let stores = stores.clone();
                async move {
                    let loc = Location::parse(&url)?;
                    if loc.is_local() {
                        return tokio::fs::remove_file(&loc.key)
                            .await
                            .map_err(|e| Error::io(Op::Delete, &url, e));
                    }
                    let loc = object(Op::Delete, &url)?;
                    let store = stores.store(&loc)?;
                    // The engine's one rule for a named object: read, then
                    // delete at that version, so a lost answer never
                    // deletes what another writer stored meanwhile.
                    shoal_transfer::ops::delete_current(&store, &loc)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.with_url(&url))
                }
            })
            .buffered(workers)
            .collect()
            .await;
        errors_by_item(results)
    }
}

/// Per-item outcomes: None for success, the exception object for failures.
pub(crate) fn errors_by_item<T>(
    results: Vec<shoal_core::Result<T>>,
) -> PyResult<Vec<Option<Py<PyAny>>>> {
    Python::attach(|py| {
        results
            .into_iter()
            .map(|r| r.err().map(|e| exception(py, &e)).transpose())
            .collect()
    })
}

blocking_and_async! {
    /// Deletes objects (or local files), `workers` at a time. One entry per
    /// URL: None, or the exception that deleting it raised.
    #[pyo3(signature = (session, urls, *, workers=None))]
    fn delete_many / delete_many_async(urls: Vec<String>, workers: Option<usize>) -> Vec<Option<Py<PyAny>>> = delete_many_impl;
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use pyo3::wrap_pyfunction;
    for f in [
        wrap_pyfunction!(stat, m)?,
        wrap_pyfunction!(stat_async, m)?,
        wrap_pyfunction!(list_prefix, m)?,
        wrap_pyfunction!(list_prefix_async, m)?,
        wrap_pyfunction!(expand, m)?,
        wrap_pyfunction!(expand_async, m)?,
        wrap_pyfunction!(entries, m)?,
        wrap_pyfunction!(entries_async, m)?,
        wrap_pyfunction!(du, m)?,
        wrap_pyfunction!(du_async, m)?,
        wrap_pyfunction!(list_buckets, m)?,
        wrap_pyfunction!(list_buckets_async, m)?,
        wrap_pyfunction!(make_bucket, m)?,
        wrap_pyfunction!(make_bucket_async, m)?,
        wrap_pyfunction!(delete_many, m)?,
        wrap_pyfunction!(delete_many_async, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
