//! Many deletes without preconditions, batched where the store can
//! (`rm -r`, `rb --force`, `sync --delete`).
//!
//! One request per key made a big `rm -r` round-trip bound: 100,000 keys
//! were 100,000 DELETEs. Keys are gathered as they arrive (what the
//! listing has ready, up to the store's batch size: S3 DeleteObjects
//! takes 1,000) and sent as one [`Store::delete_many`] per bucket, up to
//! `slots` requests in flight; a store without a batch call
//! (`delete_batch() == 1`) gets single deletes at that concurrency, as
//! before. A batch the store refuses as a whole falls back to single
//! deletes for its keys, said once on stderr by the caller's `on_fallback`.
//! Each key still has its own outcome, so failures are reported by URL.
//!
//! Deletes that carry a version (a move's, `rm --if-…`) are not made
//! here: they stay single requests with their precondition
//! (`batch::delete_at`).

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_core::{Error, ErrorKind, Location, Result, Store, StoreFor};

/// The most keys gathered before a batch is sent (S3's limit).
const GATHER: usize = 1000;

/// One request's worth of deletes.
enum Job {
    /// A target that failed before any request (listing, store lookup).
    Failed(Error),
    /// One key, deleted alone.
    One(Arc<dyn Store>, Location),
    /// Keys of one bucket of one store, deleted in one request.
    Many(Arc<dyn Store>, Vec<Location>),
}

/// Called once per batch the store refused as a whole, with its error.
pub type OnFallback = Arc<dyn Fn(&Error) + Send + Sync>;

/// Deletes every target (objects, not local files), `slots` requests at a
/// time; yields each target's outcome, in no particular order. A key
/// already gone counts as deleted when the store's batch call says so (S3
/// does); single deletes report what the store answered.
/// With `gone_is_done`, a single delete's NotFound counts as deleted too
/// (a batch's deletes: another process may have deleted it since the
/// listing); `rm` of a named object reports it.
pub fn delete_all(
    targets: BoxStream<'static, Result<Location>>,
    store_for: StoreFor,
    slots: usize,
    gone_is_done: bool,
    on_fallback: OnFallback,
) -> BoxStream<'static, Result<Location>> {
    targets
        .ready_chunks(GATHER)
        .flat_map(move |chunk| futures::stream::iter(jobs(chunk, &store_for)))
        .map(move |job| run(job, slots, gone_is_done, on_fallback.clone()))
        .buffer_unordered(slots.max(1))
        .flat_map(futures::stream::iter)
        .boxed()
}

/// Splits what the listing had ready into requests: by store and bucket,
/// up to each store's batch size.
fn jobs(chunk: Vec<Result<Location>>, store_for: &StoreFor) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut groups: Vec<(Arc<dyn Store>, Vec<Location>)> = Vec::new();
    for t in chunk {
        let loc = match t {
            Ok(l) => l,
            Err(e) => {
                jobs.push(Job::Failed(e));
                continue;
            }
        };
        let store = match store_for(&loc) {
            Ok(s) => s,
            Err(e) => {
                jobs.push(Job::Failed(e.with_url(loc.to_string())));
                continue;
            }
        };
        if store.delete_batch() <= 1 {
            jobs.push(Job::One(store, loc));
            continue;
        }
        let at = groups
            .iter()
            .position(|(s, l)| same(s, &store) && l[0].bucket == loc.bucket);
        match at {
            Some(i) => groups[i].1.push(loc),
            None => groups.push((store, vec![loc])),
        }
    }
    for (store, locs) in groups {
        let n = store.delete_batch();
        let mut locs = locs.into_iter().peekable();
        while locs.peek().is_some() {
            let part: Vec<Location> = locs.by_ref().take(n).collect();
            jobs.push(match part.len() {
                1 => Job::One(store.clone(), part.into_iter().next().expect("one")),
                _ => Job::Many(store.clone(), part),
            });
        }
    }
    jobs
}

fn same(a: &Arc<dyn Store>, b: &Arc<dyn Store>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// One job's outcomes.
async fn run(
    job: Job,
    slots: usize,
    gone_is_done: bool,
    on_fallback: OnFallback,
) -> Vec<Result<Location>> {
    match job {
        Job::Failed(e) => vec![Err(e)],
        Job::One(store, loc) => vec![one(&store, loc, gone_is_done).await],
        Job::Many(store, locs) => {
            let keys: Vec<String> = locs.iter().map(|l| l.key.clone()).collect();
            match store.delete_many(&locs[0].bucket, &keys).await {
                Ok(results) if results.len() == locs.len() => locs
                    .into_iter()
                    .zip(results)
                    .map(|(loc, r)| {
                        r.map(|()| loc.clone())
                            .map_err(|e| e.with_url(loc.to_string()))
                    })
                    .collect(),
                refused => {
                    let e = match refused {
                        Err(e) => e,
                        Ok(r) => Error::new(
                            ErrorKind::Protocol,
                            shoal_core::Op::Delete,
                            locs[0].to_string(),
                            format!("{} results for {} keys", r.len(), locs.len()),
                        ),
                    };
                    on_fallback(&e);
                    futures::stream::iter(locs)
                        .map(|loc| one(&store, loc, gone_is_done))
                        .buffer_unordered(slots.max(1))
                        .collect()
                        .await
                }
            }
        }
    }
}

async fn one(store: &Arc<dyn Store>, loc: Location, gone_is_done: bool) -> Result<Location> {
    match store.delete(&loc.bucket, &loc.key).await {
        Ok(()) => Ok(loc),
        Err(e) if gone_is_done && e.kind() == ErrorKind::NotFound => Ok(loc),
        Err(e) => Err(e.with_url(loc.to_string())),
    }
}
