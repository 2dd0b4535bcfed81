//! Listing, written once for every backend: URL globs, the narrowest
//! request a server can be sent for them, a work-stealing parallel lister
//! for huge buckets, and the grouping behind `shoal du`.
//!
//! - [`glob`]: `gcloud storage` glob semantics on keys, the literal prefix,
//!   whether a delimiter is safe, the GCS `matchGlob` to send.
//! - [`plan`]: URL → one [`ListRequest`] + the client-side re-check.
//! - [`parallel`]: ranges `[start, end)` that split themselves when a worker
//!   is idle; [`split`] finds where to cut.
//! - [`du`]: totals and groups.
//! - [`filter`]: `--include` / `--exclude` rules on relative names.
//!
//! Entry points: [`expand`] (every object a URL or glob names: what `cp`,
//! `rm`, `cat` and `du` act on) and [`entries`] (what `ls` shows for a
//! glob: objects and matching levels).
//!
//! Requests are sent once: the backends retry what can be retried (see
//! `shoal_core::retry`), so nothing here wraps them again.
//!
//! Every result is re-checked on the client: servers may ignore
//! `matchGlob`, `fields` and `endOffset` (fake-gcs-server ignores the first
//! two, S3 has none of them), and shoal's answer must not depend on which.

#![warn(missing_docs, unreachable_pub)]

pub mod du;
pub mod filter;
pub mod glob;
pub mod parallel;
pub mod plan;
pub mod split;

use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt};
use shoal_core::paginate::pages;
use shoal_core::{Error, ErrorKind, Location, ObjectMeta, Op, Result, Store};

pub use filter::{Filter, Rule};
pub use glob::{KeyGlob, has_wildcard};
pub use parallel::{ListStats, ParallelOptions};
pub use plan::{ListOptions, Plan};

/// One line of a listing: an object, or a common prefix (a "directory").
// Objects dominate a listing, so boxing them would add an allocation per
// key to spare the rarer prefixes some bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// An object.
    Object(ObjectMeta),
    /// A common prefix, ending in `/`.
    Prefix(String),
}

/// Checks a URL's glob without listing: a usage error names the URL and
/// the problem (e.g. an unclosed `[`).
pub fn check(loc: &Location) -> Result<()> {
    if loc.is_local() {
        return Ok(());
    }
    KeyGlob::parse(&loc.to_string(), &loc.key).map(|_| ())
}

/// Whether `loc` names only a bucket: an empty key (`gs://b`, `s3://b/`)
/// or a key that is only `/` (`s3://b//`, which path-style requests and
/// some servers read as the bucket). A call meant for one object must not
/// act on it: a PUT to it is an object with an empty name on GCS, a
/// DELETE of it deletes the bucket on S3, a GET of it answers the
/// bucket's listing. The one rule for the CLI's verbs, run files and
/// Python.
pub fn names_bucket(loc: &Location) -> bool {
    !loc.is_local() && (loc.key.is_empty() || loc.key == "/")
}

/// Refuses a `loc` that [names only a bucket](names_bucket) where one
/// object is meant; `op` is what was asked.
pub fn object(op: Op, loc: &Location) -> Result<()> {
    if names_bucket(loc) {
        return Err(Error::invalid(
            op,
            loc.to_string(),
            format!(
                "names a bucket, not an object (write {}{}/KEY)",
                loc.prefix(),
                loc.bucket
            ),
        ));
    }
    Ok(())
}

/// Every object `loc` names: a literal URL is that object (a HEAD), or
/// with `recursive` the object and everything below `key/` (or below the
/// prefix, for `dir/` and bucket URLs); a glob is every matching object,
/// and with `recursive` everything below each matching level too.
///
/// Nothing matching is an empty stream (literal non-recursive: a NotFound
/// error); the caller words "matched no objects". Errors carry `loc`'s URL.
pub fn expand(
    store: Arc<dyn Store>,
    loc: &Location,
    opts: &ListOptions,
) -> impl futures::Stream<Item = Result<ObjectMeta>> + Send + 'static {
    let url = loc.to_string();
    let plan = match Plan::objects(loc, opts, &store.capabilities()) {
        Ok(p) => p,
        Err(e) => return stream::once(async { Err(e) }).boxed(),
    };
    let Some(plan) = plan else {
        let (bucket, key) = (loc.bucket.clone(), loc.key.clone());
        if names_bucket(loc) {
            let e = Error::invalid(
                Op::List,
                url,
                "names a bucket, not an object (use -r for everything in it)",
            );
            return stream::once(async { Err(e) }).boxed();
        }
        return stream::once(async move {
            store.head(&bucket, &key).await.map_err(|e| e.with_url(url))
        })
        .boxed();
    };
    objects_of(store, loc.bucket.clone(), plan, opts, url)
}

fn objects_of(
    store: Arc<dyn Store>,
    bucket: String,
    plan: Plan,
    opts: &ListOptions,
    url: String,
) -> BoxStream<'static, Result<ObjectMeta>> {
    let plan = Arc::new(plan);
    let pages = level(store, bucket, plan.request.clone(), opts).map(|p| p.map(|p| p.objects));
    pages
        .flat_map(move |page| {
            let plan = plan.clone();
            let url = url.clone();
            let items: Vec<Result<ObjectMeta>> = match page {
                Ok(objs) => objs
                    .into_iter()
                    .filter(|o| plan.keep_object(&o.key))
                    .map(Ok)
                    .collect(),
                Err(e) => vec![Err(e.with_url(url))],
            };
            stream::iter(items)
        })
        .boxed()
}

/// What `ls` shows for a glob URL: matching objects and, listing one level,
/// the common prefixes of matching levels, in key order when the listing is
/// sequential. `Ok(None)` for a literal URL (ls lists those itself).
pub fn entries(
    store: Arc<dyn Store>,
    loc: &Location,
    opts: &ListOptions,
) -> Result<Option<BoxStream<'static, Result<Entry>>>> {
    let url = loc.to_string();
    let Some(plan) = Plan::entries(loc, opts, &store.capabilities())? else {
        return Ok(None);
    };
    let plan = Arc::new(plan);
    let s = level(store, loc.bucket.clone(), plan.request.clone(), opts).flat_map(move |page| {
        let items: Vec<Result<Entry>> = match page {
            Ok(page) => merge_page(page.objects, page.prefixes)
                .into_iter()
                .filter(|e| match e {
                    Entry::Object(o) => plan.keep_object(&o.key),
                    Entry::Prefix(p) => plan.keep_prefix(p),
                })
                .map(Ok)
                .collect(),
            Err(e) => vec![Err(e.with_url(url.clone()))],
        };
        stream::iter(items)
    });
    Ok(Some(s.boxed()))
}

/// The pages of `req`: its objects and, with a delimiter, its common
/// prefixes, listed in parallel once the first page shows there is more
/// ([`parallel::list_pages`]: each page in key order, the pages in no
/// particular order unless `opts.sorted`), or in one sequential stream
/// for versions and soft-deleted objects (a store's version markers do
/// not split into key ranges).
///
/// One level of a flat folder was one page a round trip: `ls` of a
/// 900,000-object folder behind 10 ms each way took 21.3 s where `ls -r`
/// of it took 1.85 s.
pub fn level(
    store: Arc<dyn Store>,
    bucket: String,
    req: shoal_core::ListRequest,
    opts: &ListOptions,
) -> BoxStream<'static, Result<parallel::Page>> {
    if req.versions || req.soft_deleted {
        return pages(store, bucket, req)
            .map(|p| p.map(parallel::Page::from))
            .boxed();
    }
    let popts = ParallelOptions {
        workers: opts.workers.max(1),
        sorted: opts.sorted,
        stats: None,
        budget: None,
    };
    parallel::list_pages(store, bucket, req, popts).boxed()
}

/// Objects and prefixes of one page, interleaved in key order.
fn merge_page(objects: Vec<ObjectMeta>, prefixes: Vec<String>) -> Vec<Entry> {
    let mut out = Vec::with_capacity(objects.len() + prefixes.len());
    let mut o = objects.into_iter().peekable();
    let mut p = prefixes.into_iter().peekable();
    loop {
        let take_obj = match (o.peek(), p.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => a.key.as_str() < b.as_str(),
        };
        if take_obj {
            out.push(Entry::Object(o.next().expect("peeked")));
        } else {
            out.push(Entry::Prefix(p.next().expect("peeked")));
        }
    }
    out
}

/// The error a command reports when a URL matched nothing.
pub fn no_match(op: Op, loc: &Location) -> Error {
    Error::new(
        ErrorKind::NotFound,
        op,
        loc.to_string(),
        "matched no objects",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_urls_are_not_objects() {
        for url in ["gs://b", "gs://b/", "s3://b/", "s3://b//"] {
            let loc = Location::parse(url).unwrap();
            assert!(names_bucket(&loc), "{url}");
            let e = object(Op::Delete, &loc).unwrap_err();
            assert!(
                e.to_string().contains("names a bucket, not an object"),
                "{e}"
            );
        }
        for url in ["gs://b/k", "s3://b/dir/", "s3://b///", "/", "."] {
            let loc = Location::parse(url).unwrap();
            assert!(!names_bucket(&loc), "{url}");
            assert!(object(Op::Delete, &loc).is_ok(), "{url}");
        }
    }
}
