//! Many deletes, batched where the store can (`rm -r`, `rb --force`,
//! `sync --delete`), each pinned to the version its listing saw.
//!
//! One request per key made a big `rm -r` round-trip bound: 100,000 keys
//! were 100,000 DELETEs. Keys are gathered as they arrive (what the
//! listing has ready, up to the store's batch size: S3 DeleteObjects
//! takes 1,000) and sent as one [`Store::delete_many`] per bucket, up to
//! `slots` requests in flight; a store without a batch call
//! (`Capabilities::delete_batch` of 1) gets single deletes at that concurrency, as
//! before. A batch the store refuses as a whole falls back to single
//! deletes for its keys, said once on stderr by the caller's `on_fallback`.
//! Each key still has its own outcome, so failures are reported by URL.
//!
//! A target names the version the listing that planned its delete saw
//! ([`Target::version`]), and the delete carries it (GCS
//! `ifGenerationMatch`, S3's conditional delete), so an object written
//! again after the listing is kept: that key's outcome is a skip saying
//! so, not a failure. Servers that ignore a delete's precondition
//! (fake-gcs-server, MinIO) delete it anyway.
//!
//! A batch whose answer is lost (a reset, a 5xx after it was sent) is
//! never sent again as it was: the stores send it once
//! ([`shoal_core::retry::RetryPolicy::run_unless_applied`]), and each of
//! its keys is read before anything more is sent (`after_unknown`):
//! gone is done, the version the listing saw is deleted at it, and
//! another version (stored by another writer after the batch deleted
//! ours) is kept and said, exit 0.
//!
//! A target marked [`Target::exact`] names one stored version (`rm
//! --all-versions`): its delete removes that version or delete marker for
//! good (GCS `generation=`, S3's `VersionId`), whatever is current, and
//! touches no other version.
//!
//! Deletes that carry a version (a move's, `rm --if-…`) are not made
//! here: they stay single requests with their precondition
//! (`safety::deletes::delete_at`), and so do objects named one by one
//! ([`delete_current`]).

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_core::{
    DeleteKey, Error, ErrorKind, Location, ObjectVersion, Result, Seen, Skip, Store, StoreFor,
};

/// One object to delete, and the version its delete was planned against
/// (None: whatever is there).
#[derive(Debug, Clone)]
pub struct Target {
    /// The object.
    pub loc: Location,
    /// The version the listing saw.
    pub version: Option<ObjectVersion>,
    /// `version` names one stored version to delete for good, current or
    /// not ([`shoal_core::VersionStore::delete_version`]), not the current object pinned to
    /// it: `rm --all-versions`, one target per version and delete marker.
    pub exact: bool,
}

impl From<Location> for Target {
    fn from(loc: Location) -> Target {
        Target {
            loc,
            version: None,
            exact: false,
        }
    }
}

/// The most keys gathered before a batch is sent (S3's limit).
const GATHER: usize = 1000;

/// One request's worth of deletes.
enum Job {
    /// A target that failed before any request (listing, store lookup).
    Failed(Error),
    /// One key, deleted alone.
    One(Arc<dyn Store>, Target),
    /// Keys of one bucket of one store, deleted in one request.
    Many(Arc<dyn Store>, Vec<Target>),
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
    targets: BoxStream<'static, Result<Target>>,
    store_for: StoreFor,
    slots: usize,
    gone_is_done: bool,
    on_fallback: OnFallback,
) -> BoxStream<'static, Result<Seen<Location>>> {
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
fn jobs(chunk: Vec<Result<Target>>, store_for: &StoreFor) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut groups: Vec<(Arc<dyn Store>, Vec<Target>)> = Vec::new();
    for t in chunk {
        let t = match t {
            Ok(t) => t,
            Err(e) => {
                jobs.push(Job::Failed(e));
                continue;
            }
        };
        let store = match store_for(&t.loc) {
            Ok(s) => s,
            Err(e) => {
                jobs.push(Job::Failed(e.with_url(t.loc.to_string())));
                continue;
            }
        };
        if store.capabilities().delete_batch <= 1 {
            jobs.push(Job::One(store, t));
            continue;
        }
        let at = groups
            .iter()
            .position(|(s, l)| same(s, &store) && l[0].loc.bucket == t.loc.bucket);
        match at {
            Some(i) => groups[i].1.push(t),
            None => groups.push((store, vec![t])),
        }
    }
    for (store, locs) in groups {
        let n = store.capabilities().delete_batch;
        let mut locs = locs.into_iter().peekable();
        while locs.peek().is_some() {
            let part: Vec<Target> = locs.by_ref().take(n).collect();
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
) -> Vec<Result<Seen<Location>>> {
    match job {
        Job::Failed(e) => vec![Err(e)],
        Job::One(store, loc) => vec![one(&store, loc, gone_is_done).await],
        Job::Many(store, locs) => {
            let keys: Vec<DeleteKey> = locs
                .iter()
                .map(|t| DeleteKey {
                    key: t.loc.key.clone(),
                    version: t.version.clone(),
                    exact: t.exact,
                })
                .collect();
            match store.delete_many(&locs[0].loc.bucket, &keys).await {
                Ok(results) if results.len() == locs.len() => locs
                    .into_iter()
                    .zip(results)
                    .map(|(t, r)| outcome(t, r.map(|()| shoal_core::Deleted::Gone)))
                    .collect(),
                // Sent, its answer lost: each key is looked at before
                // anything is sent again.
                Err(e) if e.may_have_been_applied() => {
                    tracing::debug!(error = %e, "a batch delete's outcome is unknown; each key is looked at");
                    futures::stream::iter(locs)
                        .map(|t| after_unknown(&store, t, gone_is_done))
                        .buffer_unordered(slots.max(1))
                        .collect()
                        .await
                }
                refused => {
                    let e = match refused {
                        Err(e) => e,
                        Ok(r) => Error::new(
                            ErrorKind::Protocol,
                            shoal_core::Op::Delete,
                            locs[0].loc.to_string(),
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

/// Deletes the object `loc` names, pinned to the version it holds now
/// (`rm URL`): one metadata read, then a delete carrying that version, so
/// a lost answer never deletes an object another writer stored meanwhile
/// ([`shoal_core::Deleted::Replaced`]). A key that holds nothing is
/// `NotFound`, on every store (S3 answers a delete of nothing with 204):
/// with objects below it as a folder, the error says how many and points
/// at `rm -r`.
pub async fn delete_current(store: &Arc<dyn Store>, loc: &Location) -> Result<shoal_core::Deleted> {
    let meta = match store.head(&loc.bucket, &loc.key).await {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(not_found(store, loc).await),
        Err(e) => return Err(e.with_url(loc.to_string())),
    };
    let r = match &meta.version {
        Some(v) => match store.delete_if(&loc.bucket, &loc.key, v).await {
            Err(e) if e.kind() == ErrorKind::Unsupported => None,
            r => Some(r),
        },
        None => None,
    };
    match r {
        Some(r) => r,
        None => store
            .delete(&loc.bucket, &loc.key)
            .await
            .map(|()| shoal_core::Deleted::Gone),
    }
    .map_err(|e| e.with_url(loc.to_string()))
}

/// "No such object", or, where keys lie below `loc` as below a folder,
/// how many (up to a page) and `rm -r`.
async fn not_found(store: &Arc<dyn Store>, loc: &Location) -> Error {
    let below = format!("{}/", loc.key.trim_end_matches('/'));
    let req = shoal_core::ListRequest {
        prefix: below,
        max_results: Some(1000),
        ..Default::default()
    };
    let page = store.list_page(&loc.bucket, &req).await;
    let e = Error::new(
        ErrorKind::NotFound,
        shoal_core::Op::Delete,
        loc.to_string(),
        "no such object",
    );
    match page {
        Ok(p) if !p.objects.is_empty() => {
            let n = p.objects.len();
            let more = if p.next_page_token.is_some() {
                " or more"
            } else {
                ""
            };
            let s = if n == 1 && more.is_empty() { "" } else { "s" };
            let url = loc.to_string();
            let url = url.trim_end_matches('/');
            Error::new(
                ErrorKind::NotFound,
                shoal_core::Op::Delete,
                loc.to_string(),
                format!("no such object; it is a prefix of {n}{more} object{s}"),
            )
            .with_hint(format!("rm -r {url}/ deletes everything below it"))
        }
        _ => e.with_hint("rm -f ignores objects that do not exist"),
    }
}

async fn one(store: &Arc<dyn Store>, t: Target, gone_is_done: bool) -> Result<Seen<Location>> {
    let r = match &t.version {
        Some(v) if t.exact => match store.versions() {
            Some(s) => (s.delete_version(&t.loc.bucket, &t.loc.key, v).await)
                .map(|()| shoal_core::Deleted::Gone),
            None => Err(shoal_core::Lack::DeleteVersion.error(&t.loc.bucket, &t.loc.key)),
        },
        Some(v) => match store.delete_if(&t.loc.bucket, &t.loc.key, v).await {
            Err(e) if e.kind() == ErrorKind::Unsupported => store
                .delete(&t.loc.bucket, &t.loc.key)
                .await
                .map(|()| shoal_core::Deleted::Gone),
            r => r,
        },
        None => store
            .delete(&t.loc.bucket, &t.loc.key)
            .await
            .map(|()| shoal_core::Deleted::Gone),
    };
    match r {
        Err(e) if gone_is_done && e.kind() == ErrorKind::NotFound => Ok(Seen::Item(t.loc)),
        r => outcome(t, r),
    }
}

/// One key of a batch whose outcome is unknown (its answer lost, a 5xx
/// after it was sent): read first, since the batch may have deleted it
/// and another writer may have stored the key again since, and servers
/// that ignore a delete's precondition (fake-gcs-server, MinIO) would
/// delete that object if the delete were simply sent again. Gone: done.
/// Still at the version the listing saw: deleted at it. Another version:
/// the planned one is gone (ours, or someone's) and the newer object is
/// kept and said ([`shoal_core::Deleted::Replaced`]), as a single
/// delete's lost answer is (`shoal_core::retry::safe::delete`). A key
/// planned against no version that holds an object is not deleted: whose
/// it is cannot be told. A stored version named exactly (`rm -a`) is
/// deleted again: no other version can take its place.
async fn after_unknown(
    store: &Arc<dyn Store>,
    t: Target,
    gone_is_done: bool,
) -> Result<Seen<Location>> {
    if t.exact {
        return one(store, t, gone_is_done).await;
    }
    let now = match store.head(&t.loc.bucket, &t.loc.key).await {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Seen::Item(t.loc)),
        Err(e) => return Err(e.with_url(t.loc.to_string())),
    };
    match &t.version {
        Some(v) if now.version.as_ref() == Some(v) => one(store, t, gone_is_done).await,
        Some(_) => outcome(t, Ok(shoal_core::Deleted::Replaced(now.version))),
        None => Err(Error::new(
            ErrorKind::Precondition,
            shoal_core::Op::Delete,
            t.loc.to_string(),
            "the batch delete's answer was lost and the key holds an object; it was not deleted again, since it may be one another writer stored meanwhile",
        )
        .with_hint("look at the object; delete it again if it should go")),
    }
}

/// A key's outcome: a pinned key written again since its listing is a
/// skip that says so (it stays); one stored again after a lost answer is
/// deleted as planned, and said.
fn outcome(t: Target, r: Result<shoal_core::Deleted>) -> Result<Seen<Location>> {
    match r {
        Ok(shoal_core::Deleted::Gone) => Ok(Seen::Item(t.loc)),
        Ok(shoal_core::Deleted::Replaced(now)) => {
            tracing::warn!(
                "{}: deleted; the key now holds {}, stored by another writer meanwhile, kept",
                t.loc,
                now.map_or("a newer object".into(), |v| format!("a newer object ({v})"))
            );
            Ok(Seen::Item(t.loc))
        }
        Err(e) if e.kind() == ErrorKind::Precondition && t.version.is_some() => {
            Ok(Seen::Skipped(Skip::asked(
                shoal_core::Op::Delete,
                t.loc.to_string(),
                format!(
                    "not deleted: written again since it was listed (at {}); kept",
                    t.version.as_ref().expect("pinned")
                ),
            )))
        }
        Err(e) => Err(e.with_url(t.loc.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use shoal_core::BucketStore;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use shoal_core::memory::MemoryStore;
    use shoal_core::{ByteRange, PutOptions};
    use shoal_testkit::wrap::{Fault, Method, Wrapped};

    use super::*;

    #[tokio::test]
    async fn a_lost_batch_is_not_sent_again_and_keeps_a_newer_object() {
        let inner = Arc::new(MemoryStore::new());
        inner.create_bucket("b").await.unwrap();
        let mut targets = Vec::new();
        for k in ["a", "victim", "spared", "z"] {
            let m = inner
                .put(
                    "b",
                    k,
                    Bytes::from(k.as_bytes().to_vec()),
                    &PutOptions::default(),
                )
                .await
                .unwrap();
            targets.push(Ok(Target {
                loc: Location::parse(&format!("gs://b/{k}")).unwrap(),
                version: m.version,
                exact: false,
            }));
        }
        // Batch deletes whose every batch is carried out (all but
        // `spared`), after which another writer stores `victim` again, and
        // whose answer is then lost: a reset after the request was sent.
        let store = Arc::new(
            Wrapped::new(inner.clone())
                .batch_size(100)
                .batch_leaves(&["spared"])
                .fault(Method::DeleteMany, Fault::LoseAnswer(ErrorKind::Connect))
                .after(Method::DeleteMany, |s| {
                    Box::pin(async move {
                        let theirs = Bytes::from_static(b"theirs");
                        s.put("b", "victim", theirs, &PutOptions::default())
                            .await
                            .unwrap();
                    })
                }),
        );
        let s: Arc<dyn Store> = store.clone();
        let store_for: StoreFor = Arc::new(move |_| Ok(s.clone()));
        let fell_back = Arc::new(AtomicUsize::new(0));
        let f = fell_back.clone();
        let out: Vec<Result<Seen<Location>>> = delete_all(
            futures::stream::iter(targets).boxed(),
            store_for,
            4,
            true,
            Arc::new(move |_| {
                f.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .collect()
        .await;
        // Every key done: three gone, the victim kept as the writer left it.
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
        assert_eq!(store.count(Method::DeleteMany), 1, "sent once");
        assert_eq!(fell_back.load(Ordering::SeqCst), 0, "not a refusal");
        for k in ["a", "spared", "z"] {
            assert_eq!(
                inner.head("b", k).await.unwrap_err().kind(),
                ErrorKind::NotFound,
                "{k}"
            );
        }
        let mut r = inner
            .get("b", "victim", ByteRange::from(0), None)
            .await
            .unwrap();
        let mut body = Vec::new();
        while let Some(c) = r.body.next().await {
            body.extend_from_slice(&c.unwrap());
        }
        assert_eq!(body, b"theirs");
    }
}
