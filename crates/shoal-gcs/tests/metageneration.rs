//! An update of an object's metadata is pinned to the metadata it saw
//! (`ifMetagenerationMatch`), on storage-testbench, which keeps
//! metagenerations and checks the precondition (fake-gcs-server checks
//! neither on PATCH): a change another writer made meanwhile, bytes and
//! generation unchanged, makes the stale update fail and is kept.
//! Runs when `SHOAL_TEST_GCS_TESTBENCH` is set.

use std::collections::BTreeMap;

use bytes::Bytes;
use shoal_core::{BucketStore, ErrorKind, PutOptions, Store};
use shoal_gcs::{GcsConfig, GcsStore};

#[tokio::test]
async fn a_stale_update_does_not_overwrite_another_writers_change() {
    let Ok(endpoint) = std::env::var("SHOAL_TEST_GCS_TESTBENCH") else {
        eprintln!("skipping: no SHOAL_TEST_GCS_TESTBENCH");
        return;
    };
    let store = GcsStore::new(GcsConfig {
        endpoint: Some(endpoint),
        anonymous: true,
        ..Default::default()
    })
    .unwrap();
    let bucket = format!("mg-{}", std::process::id());
    store.create_bucket(&bucket).await.unwrap();
    let meta = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let opts = |pairs: &[(&str, &str)]| PutOptions {
        metadata: meta(pairs),
        content_type: Some("text/plain".into()),
        ..PutOptions::default()
    };
    store
        .put(
            &bucket,
            "k",
            Bytes::from_static(b"bytes"),
            &opts(&[("a", "1")]),
        )
        .await
        .unwrap();
    let seen = store.head(&bucket, "k").await.unwrap();
    assert!(
        seen.metageneration.is_some(),
        "a HEAD says the metageneration"
    );

    // Another writer changes the metadata: same bytes, same generation.
    let theirs = store
        .patch(&bucket, "k", &seen, &opts(&[("a", "1"), ("b", "theirs")]))
        .await
        .unwrap();
    assert_eq!(theirs.version, seen.version);
    assert_ne!(theirs.metageneration, seen.metageneration);

    // Ours, from what was seen before: refused, theirs kept.
    let e = store
        .patch(&bucket, "k", &seen, &opts(&[("c", "ours")]))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");
    let now = store.head(&bucket, "k").await.unwrap();
    assert_eq!(now.metadata, meta(&[("a", "1"), ("b", "theirs")]));

    // From what is there now: applied.
    let ours = store
        .patch(&bucket, "k", &now, &opts(&[("c", "ours")]))
        .await
        .unwrap();
    assert_eq!(ours.metadata, meta(&[("c", "ours")]));
}
