//! Every conformance case against every backend: in-memory, local files,
//! fake-gcs-server (`SHOAL_TEST_GCS`), MinIO (`SHOAL_TEST_S3`) and moto's
//! S3 server (`SHOAL_TEST_MOTO`).

use std::sync::Arc;

use shoal_core::local::LocalStore;
use shoal_core::memory::MemoryStore;
use shoal_testkit::{Quirks, Target, conformance, gcs_store, moto_store, s3_store, target};

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
    Some(target(gcs_store()?, Quirks::default(), None).await)
}

async fn s3() -> Option<Target> {
    // MinIO refuses `a//b` and `.` segments (XMinioInvalidObjectName); real
    // S3 accepts them. Parts but the last must be 5 MiB. S3's DELETE of a
    // missing key answers 204.
    let quirks = Quirks {
        no_empty_or_dot_segments: true,
        min_part_size: 5 << 20,
        idempotent_delete: true,
        ..Quirks::default()
    };
    Some(target(s3_store()?, quirks, None).await)
}

async fn moto() -> Option<Target> {
    // moto keeps a checksum only when the SDK's header names it (shoal
    // sends it), and checks none. Keys with `.` segments are refused by
    // shoal's S3 client itself (URL parsing would rewrite them), on every
    // S3 server.
    let quirks = Quirks {
        no_empty_or_dot_segments: true,
        min_part_size: 5 << 20,
        idempotent_delete: true,
        unchecked_checksums: true,
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
);

#[allow(unused_imports)]
use conformance as _;
