//! URLs to the objects a reader reads ([`crate::read::Source`]), for
//! `cat`, `bench read` and Python's `shoal.read`: one function, so that a
//! glob, a missing object or a local file means the same in each.

use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use shoal_core::{Location, Op, Projection, Result, Store};
use shoal_list::ListOptions;

use crate::read::Source;

/// The objects `locs` name, in order: local files as they are, URLs
/// through [`shoal_list::expand`] (a glob in key order when `sorted`).
/// Globs and stores are checked now, so a bad one fails the call; a glob
/// matching nothing is an error in the stream, in its place.
pub fn read_sources(
    locs: Vec<Location>,
    store_of: &dyn Fn(&Location) -> Result<Arc<dyn Store>>,
    sorted: bool,
) -> Result<BoxStream<'static, Result<Source>>> {
    let mut parts: Vec<BoxStream<'static, Result<Source>>> = Vec::new();
    for loc in locs {
        if loc.is_local() {
            let path = loc.key.clone();
            parts.push(futures::stream::once(async move { Source::file(path) }).boxed());
            continue;
        }
        shoal_list::check(&loc)?;
        let store = store_of(&loc)?;
        let opts = ListOptions {
            projection: Projection::Full,
            sorted,
            ..ListOptions::default()
        };
        let base = loc.clone();
        let objects = shoal_list::expand(store.clone(), &loc, &opts)
            .map(move |m| {
                m.map(|meta| Source::object(store.clone(), base.with_key(meta.key.clone()), meta))
            })
            .boxed();
        parts.push(if shoal_list::has_wildcard(&loc.key) {
            no_match_is_an_error(objects, loc)
        } else {
            objects
        });
    }
    Ok(futures::stream::iter(parts).flatten().boxed())
}

/// Passes `s` through, then, if it yielded nothing, the error that `loc`
/// matched no objects.
fn no_match_is_an_error(
    s: BoxStream<'static, Result<Source>>,
    loc: Location,
) -> BoxStream<'static, Result<Source>> {
    let any = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = any.clone();
    s.inspect(move |_| seen.store(true, std::sync::atomic::Ordering::Relaxed))
        .map(Some)
        .chain(futures::stream::once(async move {
            if any.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            let e = shoal_list::no_match(Op::Read, &loc).with_hint(
                "no objects match the pattern; check the bucket, the prefix and the glob",
            );
            Some(Err(e))
        }))
        .filter_map(|x| async move { x })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_core::BucketStore;
    use shoal_core::memory::MemoryStore;
    use shoal_core::{ErrorKind, PutOptions};

    /// In the order named: a local file as it is, an object, a glob's
    /// matches in key order, and a glob matching nothing as an error in
    /// its place (the message `cat` and Python both show).
    #[tokio::test]
    async fn urls_become_sources_in_order() {
        let mem = Arc::new(MemoryStore::new());
        mem.create_bucket("b").await.unwrap();
        for k in ["x/2.txt", "x/1.txt", "y"] {
            let data = bytes::Bytes::from_static(b"data");
            mem.put("b", k, data, &PutOptions::default()).await.unwrap();
        }
        let store: Arc<dyn Store> = mem;
        let file = tempfile::NamedTempFile::new().unwrap();
        let path = file.path().display().to_string();
        let locs = [path.as_str(), "gs://b/y", "gs://b/x/*.txt", "gs://b/none*"]
            .map(|u| Location::parse(u).unwrap())
            .to_vec();
        let got: Vec<String> = read_sources(locs, &|_| Ok(store.clone()), true)
            .unwrap()
            .map(|s| match s {
                Ok(s) => s.url,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::NotFound);
                    e.to_string()
                }
            })
            .collect()
            .await;
        assert_eq!(
            got[..4],
            [
                path.as_str(),
                "gs://b/y",
                "gs://b/x/1.txt",
                "gs://b/x/2.txt"
            ]
        );
        assert!(
            got[4].contains("gs://b/none*")
                && got[4].contains("matched no objects")
                && got[4].contains("no objects match"),
            "{got:?}"
        );
        assert_eq!(got.len(), 5);
    }
}
