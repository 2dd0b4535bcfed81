//! Every conformance case against every backend: in-memory, local files,
//! fake-gcs-server (`SHOAL_TEST_GCS`), Google's storage-testbench
//! (`SHOAL_TEST_GCS_TESTBENCH`, skipped with one line where it is not
//! running), MinIO (`SHOAL_TEST_S3`) and moto's S3 server
//! (`SHOAL_TEST_MOTO`).

use std::sync::Arc;

use shoal_core::memory::MemoryStore;
use shoal_local::LocalStore;
use shoal_testkit::{
    Quirks, Target, conformance, gcs_store, gcs_store_at, moto_store, s3_store, target,
};

async fn memory() -> Option<Target> {
    Some(target(Arc::new(MemoryStore::new()), Quirks::default(), None).await)
}

async fn local() -> Option<Target> {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStore::new(dir.path()));
    let quirks = Quirks {
        no_trailing_slash_keys: true,
        no_empty_or_dot_segments: true,
        no_stored_crc32c: true,
        ..Quirks::default()
    };
    Some(target(store, quirks, Some(dir)).await)
}

async fn gcs() -> Option<Target> {
    // fake-gcs-server ignores `ifGenerationMatch` on a delete, and
    // `ifSourceGenerationMatch` on a rewrite (the engines compare a copy's
    // checksums with the source's as read); the store is anonymous, so it
    // has no key to sign URLs with.
    let quirks = Quirks {
        ignores_delete_preconditions: true,
        ignores_copy_source_pin: true,
        no_presign_key: true,
        ..Quirks::default()
    };
    Some(target(gcs_store()?, quirks, None).await)
}

async fn testbench() -> Option<Target> {
    // Google's storage-testbench, where ../shared has it (scripts/test.sh
    // starts it then).
    let Ok(ep) = std::env::var("SHOAL_TEST_GCS_TESTBENCH") else {
        eprintln!("skipped: no storage-testbench (SHOAL_TEST_GCS_TESTBENCH)");
        return None;
    };
    let store = gcs_store_at(ep);
    // It refuses a wrong checksum with 412 and a non-empty bucket's
    // deletion with 400 (Google answers 400 and 409), has no batch
    // endpoint (501), and keeps old generations readable.
    let quirks = Quirks {
        no_presign_key: true,
        checksum_mismatch_is_412: true,
        non_empty_bucket_is_400: true,
        ..Quirks::default()
    };
    Some(target(store, quirks, None).await)
}

async fn s3() -> Option<Target> {
    // MinIO refuses `a//b` and `.` segments (XMinioInvalidObjectName); real
    // S3 accepts them. Parts but the last must be 5 MiB. S3's DELETE of a
    // missing key answers 204. A DELETE with `If-Match` deletes whatever
    // version is there.
    let quirks = Quirks {
        no_empty_or_dot_segments: true,
        min_part_size: 5 << 20,
        idempotent_delete: true,
        ignores_delete_preconditions: true,
        ..Quirks::default()
    };
    Some(target(s3_store()?, quirks, None).await)
}

async fn moto() -> Option<Target> {
    // moto keeps a checksum only when the SDK's header names it (shoal
    // sends it), and checks none; nor signatures on presigned URLs, nor
    // `If-Match` on a DELETE, nor `x-amz-copy-source-if-match` on a copy. Keys with `.` segments are refused by
    // shoal's S3 client itself (URL parsing would rewrite them), on every
    // S3 server.
    let quirks = Quirks {
        no_empty_or_dot_segments: true,
        min_part_size: 5 << 20,
        idempotent_delete: true,
        unchecked_checksums: true,
        ignores_delete_preconditions: true,
        unchecked_signatures: true,
        ignores_copy_source_pin: true,
        ..Quirks::default()
    };
    Some(target(moto_store()?, quirks, None).await)
}

macro_rules! suite {
    ($backend:ident: $($case:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(t) = super::$backend().await else { return };
                    shoal_testkit::conformance::$case(&t).await;
                }
            )*
        }
    };
}

macro_rules! all_backends {
    ($($case:ident),* $(,)?) => {
        suite!(memory: $($case),*);
        suite!(local: $($case),*);
        suite!(gcs: $($case),*);
        suite!(testbench: $($case),*);
        suite!(s3: $($case),*);
        suite!(moto: $($case),*);
    };
}

all_backends!(
    put_head_get_round_trip,
    ranged_get,
    opaque_keys,
    list_prefix_delimiter,
    list_paging,
    list_offsets,
    not_found,
    wrong_checksum_refused,
    if_not_exists,
    version_pinning,
    multipart_round_trip,
    multipart_abort,
    delete,
    server_side_copy,
    copy_preconditions,
    conditional_delete,
    delete_many,
    streamed_put,
    presigned_get,
    list_order_awkward,
    buckets,
);

#[allow(unused_imports)]
use conformance as _;
