//! shoal-list against real servers: fake-gcs-server (ignores matchGlob and
//! fields, honours endOffset) and MinIO (no end offset: emulated). The
//! same keys and globs on both; every answer is compared with the set
//! computed on the client. Kept to a few hundred keys (fake-gcs-server
//! inserts slow down past ~1k objects); scale lives in the unit tests.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures::StreamExt;
use shoal_core::{Location, Projection, PutOptions, Scheme, Store};
use shoal_list::parallel::{ListStats, ParallelOptions, list_objects};
use shoal_list::{KeyGlob, ListOptions};
use shoal_testkit::{gcs_store, s3_store, unique_bucket};

fn keys() -> Vec<String> {
    let mut k: Vec<String> = (0..540).map(|i| format!("hot/{i:04}.dat")).collect();
    k.extend((0..20).map(|i| format!("a/{i}.txt")));
    k.extend((0..10).map(|i| format!("z/deep/er/{i}.txt")));
    k.extend((0..10).map(|i| format!("é/{i}-ü.txt")));
    k.extend((0..10).map(|i| format!("中文/{i}.zip")));
    k.extend((0..5).map(|i| format!("🦀/{i}")));
    k.push("top.txt".into());
    k
}

async fn fill(store: &Arc<dyn Store>, bucket: &str, keys: &[String]) {
    let buckets = store.buckets().expect("every store here has buckets");
    buckets.create_bucket(bucket).await.expect("create bucket");
    futures::stream::iter(keys.iter().cloned())
        .map(|k| {
            let store = store.clone();
            let bucket = bucket.to_owned();
            async move {
                store
                    .put(&bucket, &k, Bytes::from(k.clone()), &PutOptions::default())
                    .await
                    .unwrap_or_else(|e| panic!("put {k}: {e}"))
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
}

async fn expand_set(
    store: &Arc<dyn Store>,
    scheme: Scheme,
    bucket: &str,
    key: &str,
    recursive: bool,
) -> Vec<String> {
    let loc = Location {
        scheme,
        bucket: bucket.into(),
        key: key.into(),
        local_root: None,
        store: None,
    };
    let opts = ListOptions {
        recursive,
        workers: 6,
        page_size: Some(17),
        ..Default::default()
    };
    let mut s = Box::pin(shoal_list::expand(store.clone(), &loc, &opts));
    let mut out = Vec::new();
    while let Some(m) = s.next().await {
        out.push(m.unwrap_or_else(|e| panic!("{key}: {e}")).key);
    }
    out
}

async fn check_backend(store: Arc<dyn Store>, scheme: Scheme) {
    let bucket = unique_bucket("list");
    let keys = keys();
    fill(&store, &bucket, &keys).await;

    // Parallel listing of everything: exact set, no duplicates, split work.
    let stats = Arc::new(ListStats::default());
    let req = shoal_core::ListRequest {
        max_results: Some(10),
        projection: Projection::NameOnly,
        ..Default::default()
    };
    let opts = ParallelOptions {
        workers: 8,
        sorted: false,
        stats: Some(stats.clone()),
        budget: None,
    };
    let mut s = Box::pin(list_objects(store.clone(), bucket.clone(), req, opts));
    let mut got = Vec::new();
    while let Some(p) = s.next().await {
        got.extend(p.expect("page").into_iter().map(|o| o.key));
    }
    let set: BTreeSet<&String> = got.iter().collect();
    assert_eq!(set.len(), got.len(), "no key twice");
    assert_eq!(set, keys.iter().collect::<BTreeSet<_>>(), "every key once");
    assert!(stats.splits.load(Ordering::Relaxed) > 0, "work was split");

    // Globs: the server's answer (narrowed how it may) equals the client's.
    for (pat, recursive) in [
        ("hot/00*.dat", false),
        ("hot/*", false),
        ("**.txt", false),
        ("*/*.txt", false),
        ("[aé]/*", false),
        ("中文/?.zip", false),
        ("z/**/*.txt", false),
        ("z*", true),
        ("*", false),
        ("🦀/*", false),
    ] {
        let g = KeyGlob::parse("test", pat).unwrap().unwrap();
        let mut want: Vec<String> = keys
            .iter()
            .filter(|k| {
                if recursive {
                    g.matches_or_below(k)
                } else {
                    g.matches(k)
                }
            })
            .cloned()
            .collect();
        want.sort();
        let mut got = expand_set(&store, scheme, &bucket, pat, recursive).await;
        got.sort();
        assert_eq!(got, want, "{pat} (recursive: {recursive})");
        assert!(!got.is_empty() || pat == "*", "{pat} matched something");
    }
    // A literal prefix, recursively; and a literal name.
    let got = expand_set(&store, scheme, &bucket, "z", true).await;
    assert_eq!(got.len(), 10);
    let got = expand_set(&store, scheme, &bucket, "top.txt", false).await;
    assert_eq!(got, ["top.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_gcs_server() {
    let Some(store) = gcs_store() else { return };
    check_backend(store, Scheme::Gs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minio() {
    let Some(store) = s3_store() else { return };
    check_backend(store, Scheme::S3).await;
}
