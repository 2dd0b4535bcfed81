//! Listing one key range, for a listing split across Dask workers.
//!
//! The parallel lister (shoal-list) splits a listing over tasks of one
//! process; past one machine the same idea runs as Dask tasks: each task
//! lists `[start, end)` under a prefix, up to a number of keys, and says
//! where it stopped; the client cuts what remains of a busy range where
//! the keys seen say it is dense ([`shoal_list::split::cut`], the cut the
//! parallel lister uses) and hands the halves to other tasks
//! (python/shoal/dask.py). The keys stay on the workers; the client sees
//! a few strings per task. Inside a task the range is listed by the same
//! parallel lister as `shoal ls -r` (its connections bounded per task), so
//! one worker lists as fast as one shoal process; a
//! [`shoal_list::parallel::KeyBudget`] stops it at a key below which
//! everything was listed, so pieces tile the prefix exactly.

use std::collections::BTreeSet;

use futures::StreamExt;
use pyo3::prelude::*;
use shoal_core::{ListRequest, ObjectMeta};
use shoal_list::parallel::{
    Ahead, DEFAULT_WORKERS, KeyBudget, ParallelOptions, ahead_of, list_objects, look_at_stop,
};

use crate::errors::{IntoPyResult, to_py};
use crate::list::{cloud, projection};
use crate::objects::ObjectInfo;
use crate::records::Records;
use crate::runtime::block_on;
use crate::session::Session;

/// The objects of `url`'s bucket whose keys start with `url`'s key and lie
/// in `[start, end)` (`end` None: to the end), in key order, until about
/// `max_keys`; and the key to go on from (None: the range is done).
/// Listed by shoal-list's parallel lister with up to `connections`
/// requests at once (the CLI's adaptive splitter, on this range), stopped
/// by a [`KeyBudget`]: everything below the returned key was listed,
/// nothing at or past it, so the next piece starts exactly there.
///
/// With `records`, the objects come as the [`Records`] a Dask partition
/// holds (columns, no Python object a key): building a dict a key cost a
/// worker more CPU than listing the key.
///
/// Third, when the listing stopped short: a look at what lies past the
/// stop, one page listed from it while the ranges below it finish
/// ([`Ahead`]), so the client cuts the rest by the spacing of the keys
/// that come next instead of the keys it already has. Cut by the latter,
/// the first split of shoal-benchserver's `list-1000000` (a task ending
/// in `misc/日本語/`, with `warehouse/` after it) put every key in one
/// half, and one task listed alone for a sixth of the wall.
#[pyfunction]
#[pyo3(signature = (session, url, *, start, end=None, max_keys=100_000, detail="size".to_owned(), connections=None, records=false))]
#[allow(clippy::too_many_arguments)] // the Python signature
pub(crate) fn list_range(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    url: String,
    start: String,
    end: Option<String>,
    max_keys: usize,
    detail: String,
    connections: Option<usize>,
    records: bool,
) -> PyResult<(Py<PyAny>, Option<String>, Option<Ahead>)> {
    let loc = cloud(&url)?;
    let store = session.stores.store(&loc).py()?;
    let peek_store = store.clone();
    let req = ListRequest {
        prefix: loc.key.clone(),
        start_offset: (start.as_str() > loc.key.as_str()).then(|| start.clone()),
        end_offset: end.clone(),
        projection: projection(&detail)?,
        ..Default::default()
    };
    // The look lists names only, from wherever the listing stops.
    let peek_base = ListRequest {
        projection: projection("name")?,
        ..req.clone()
    };
    let budget = KeyBudget::new(max_keys);
    let opts = ParallelOptions {
        workers: connections.unwrap_or(DEFAULT_WORKERS).max(1),
        sorted: true,
        stats: None,
        budget: Some(budget.clone()),
    };
    let bucket = loc.bucket.clone();
    let peek_bucket = loc.bucket.clone();
    let stop = budget.clone();
    // Kept as columns page by page (the pages come in key order): held as
    // `ObjectMeta`s until the end, a task's keys took about 750 bytes each
    // at its peak, against about 125 as columns (a task of 375,000 keys:
    // 271 MiB over the process's start).
    let mut kept = records.then(|| Records::new(loc.with_key(String::new()).to_string()));
    let (pages, kept, ahead) = block_on(py, async move {
        let mut out: Vec<Vec<ObjectMeta>> = Vec::new();
        let mut peek = None;
        let mut pages = std::pin::pin!(list_objects(store, bucket, req, opts));
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| to_py(e.with_url(&url)))?;
            match kept.as_mut() {
                Some(r) => {
                    for m in page {
                        r.push(&m.key, m.size, m.updated_ns);
                    }
                }
                None => out.push(page),
            }
            if peek.is_none()
                && let Some(cut) = stop.rest()
            {
                let (store, bucket) = (peek_store.clone(), peek_bucket.clone());
                let r = ListRequest {
                    start_offset: Some(cut.clone()),
                    ..peek_base.clone()
                };
                let look = tokio::spawn(async move { store.list_page(&bucket, &r).await });
                peek = Some((cut, look));
            }
        }
        // A failed look only leaves the client's cut as it was.
        let ahead = match peek {
            Some((from, p)) => p
                .await
                .ok()
                .and_then(Result::ok)
                .map(|p| (from, ahead_of(p, end.as_deref()))),
            None => None,
        };
        Ok((out, kept, ahead))
    })?;
    let listed: Py<PyAny> = match kept {
        Some(mut r) => {
            r.shrink();
            r.into_pyobject(py)?.into_any().unbind()
        }
        None => {
            let metas = pages.into_iter().flatten();
            let objs: Vec<ObjectInfo> = metas.map(|m| ObjectInfo::new(&loc, m)).collect();
            objs.into_pyobject(py)?.into_any().unbind()
        }
    };
    let rest = budget.rest();
    let ahead = look_at_stop(rest.as_deref(), ahead);
    Ok((listed, rest, ahead))
}

/// Where to cut `[lo, hi)` (keys under `prefix`) in two, given the
/// characters seen so far and the first key of the last batch (see
/// `shoal_list::split::cut`); None when it cannot be cut. With `counter`,
/// a page numbered by a decimal counter is extrapolated in decimal first
/// (`shoal_list::split::counter_ahead`).
#[pyfunction]
#[pyo3(signature = (lo, hi, *, prefix, alphabet, page_first=None, pages=shoal_list::split::PAGES_AHEAD, counter=false))]
pub(crate) fn cut_range(
    lo: &str,
    hi: Option<&str>,
    prefix: &str,
    alphabet: &str,
    page_first: Option<&str>,
    pages: u32,
    counter: bool,
) -> Option<String> {
    let alphabet: BTreeSet<char> = alphabet.chars().collect();
    if counter {
        shoal_list::split::cut_pages(lo, hi, prefix, &alphabet, page_first, pages)
    } else {
        shoal_list::split::cut_ahead(lo, hi, prefix, &alphabet, page_first, pages)
    }
}
