//! Keys/s of the parallel lister against sequential listing.
//!
//! `cargo run --release -p shoal-list --example listbench -- mem 1000000`
//!   in-memory store (client CPU per million keys: run under `time`).
//! `SHOAL_TEST_S3=http://127.0.0.1:PORT cargo run … -- s3 BUCKET [fill N]`
//!   MinIO (optionally behind a toxiproxy latency toxic).

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use shoal_core::memory::MemoryStore;
use shoal_core::{BucketStore, ListRequest, Projection, PutOptions, Store};
use shoal_list::parallel::{ListStats, ParallelOptions, list_objects};

fn key(i: usize) -> String {
    // Skewed: 90% under one prefix.
    if i.is_multiple_of(10) {
        format!("p{:02}/{i:09}", i % 97)
    } else {
        format!("hot/{i:09}")
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (store, bucket): (Arc<dyn Store>, String) = match args[0].as_str() {
        "mem" => {
            let n: usize = args[1].parse().unwrap();
            let s = MemoryStore::new();
            s.create_bucket("b").await.unwrap();
            for i in 0..n {
                s.put("b", &key(i), bytes::Bytes::new(), &PutOptions::default())
                    .await
                    .unwrap();
            }
            (Arc::new(s), "b".into())
        }
        _ => {
            let s = shoal_testkit::s3_store().expect("SHOAL_TEST_S3");
            let b = args[1].clone();
            if args.get(2).map(String::as_str) == Some("fill") {
                let n: usize = args[3].parse().unwrap();
                let _ = s.buckets().expect("S3 has buckets").create_bucket(&b).await;
                futures::stream::iter(0..n)
                    .map(|i| {
                        let s = s.clone();
                        let b = b.clone();
                        async move {
                            s.put(&b, &key(i), bytes::Bytes::new(), &PutOptions::default())
                                .await
                                .unwrap()
                        }
                    })
                    .buffer_unordered(32)
                    .count()
                    .await;
            }
            (s, b)
        }
    };
    for workers in [1usize, 4, 16, 32] {
        let stats = Arc::new(ListStats::default());
        let t = Instant::now();
        let req = ListRequest {
            projection: Projection::NameOnly,
            ..Default::default()
        };
        let opts = ParallelOptions {
            workers,
            sorted: false,
            stats: Some(stats.clone()),
            budget: None,
        };
        let mut s = Box::pin(list_objects(store.clone(), bucket.clone(), req, opts));
        let mut n = 0usize;
        while let Some(p) = s.next().await {
            n += p.unwrap().len();
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "workers {workers:>3}: {n} keys in {secs:.2} s = {:.0} keys/s, {} requests, {} splits",
            n as f64 / secs,
            stats.requests.load(std::sync::atomic::Ordering::Relaxed),
            stats.splits.load(std::sync::atomic::Ordering::Relaxed),
        );
    }
}
