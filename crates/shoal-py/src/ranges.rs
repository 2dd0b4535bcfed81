//! Listing one key range, for a listing split across Dask workers.
//!
//! The parallel lister (shoal-list) splits a listing over tasks of one
//! process; past one machine the same idea runs as Dask tasks: each task
//! lists `[start, end)` under a prefix, up to a number of keys, and says
//! where it stopped; the client cuts what remains of a busy range where
//! the keys seen say it is dense ([`shoal_list::split::cut`], the cut the
//! parallel lister uses) and hands the halves to other tasks
//! (python/shoal/dask.py). The keys stay on the workers; the client sees
//! a few strings per task.

use std::collections::BTreeSet;

use pyo3::prelude::*;
use shoal_core::ListRequest;

use crate::errors::{IntoPyResult, to_py};
use crate::list::{cloud, projection};
use crate::objects::ObjectInfo;
use crate::runtime::block_on;
use crate::session::Session;

/// The objects of `url`'s bucket whose keys start with `url`'s key and lie
/// in `[start, end)` (`end` None: to the end), in key order, page by page
/// until at least `max_keys`; and the key to go on from (None: the range
/// is done).
#[pyfunction]
#[pyo3(signature = (session, url, start, end=None, max_keys=100_000, detail="size".to_owned()))]
pub(crate) fn list_range(
    py: Python<'_>,
    session: PyRef<'_, Session>,
    url: String,
    start: String,
    end: Option<String>,
    max_keys: usize,
    detail: String,
) -> PyResult<(Vec<ObjectInfo>, Option<String>)> {
    let loc = cloud(&url)?;
    let store = session.stores.store(&loc).py()?;
    let mut req = ListRequest {
        prefix: loc.key.clone(),
        start_offset: (start.as_str() > loc.key.as_str()).then(|| start.clone()),
        end_offset: end.clone(),
        projection: projection(&detail)?,
        ..Default::default()
    };
    block_on(py, async move {
        let mut out: Vec<ObjectInfo> = Vec::new();
        let mut last = None;
        loop {
            let page = store
                .list_page(&loc.bucket, &req)
                .await
                .map_err(|e| to_py(e.with_url(&url)))?;
            let mut past_end = false;
            for m in page.objects {
                if end.as_deref().is_some_and(|e| m.key.as_str() >= e) {
                    past_end = true;
                    break;
                }
                last = Some(m.key.clone());
                out.push(ObjectInfo::new(&loc, m));
            }
            let Some(token) = page.next_page_token.filter(|_| !past_end) else {
                return Ok((out, None));
            };
            if out.len() >= max_keys {
                // The next key sorts right after the last one (nothing
                // lies between "k" and "k\0").
                return Ok((out, last.map(|k| format!("{k}\0"))));
            }
            req.page_token = Some(token);
        }
    })
}

/// Where to cut `[lo, hi)` (keys under `prefix`) in two, given the
/// characters seen so far and the first key of the last batch (see
/// `shoal_list::split::cut`); None when it cannot be cut.
#[pyfunction]
#[pyo3(signature = (lo, hi, prefix, alphabet, page_first=None))]
pub(crate) fn cut_range(
    lo: &str,
    hi: Option<&str>,
    prefix: &str,
    alphabet: &str,
    page_first: Option<&str>,
) -> Option<String> {
    let alphabet: BTreeSet<char> = alphabet.chars().collect();
    shoal_list::split::cut(lo, hi, prefix, &alphabet, page_first)
}
