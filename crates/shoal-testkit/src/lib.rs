//! shoal's test kit: finding the local test servers, the conformance
//! suite every backend must pass, and a fault-injecting HTTP proxy
//! ([`faultproxy`]) to put between a client and a real server, and
//! Parquet files as the stores write inventory reports ([`parquet`]), and
//! a store around another for the engine's unit tests ([`wrap`]: request
//! spy, latency on tokio's clock, injected faults).
//!
//! The servers are started by `scripts/servers.sh` (never by a test), which
//! exports `SHOAL_TEST_GCS` and `SHOAL_TEST_S3`. When one is missing the
//! tests for that backend print a skip line; with `SHOAL_REQUIRE_SERVERS=1`
//! (set by the test script and CI) a missing server is a failure instead,
//! so a green CI run cannot hide skipped backends.
//!
//! Tests assert what the code decided (requests sent, splits made, bytes
//! in flight, peaks) on tokio's paused clock or with seeded randomness,
//! never wall time or how the OS happened to schedule threads; a CLI test
//! that must act mid-transfer waits for an event the server or the fault
//! proxy saw, not a sleep. `scripts/flakes.sh` runs the suite repeatedly
//! and lists any test that failed once.
//!
//! Faults are injected between the real client and a real server, never
//! into a mock store: a client's failure handling is only as good as what
//! it does with the bytes a broken network or server actually sends.

pub mod conformance;
pub mod faultproxy;
pub mod parquet;
pub mod wrap;

use std::sync::Arc;

use shoal_core::Store;

/// What a backend's server cannot do, written next to the skip it causes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quirks {
    /// Refuses keys with empty or dot segments (`a//b`, `x/./y`): MinIO.
    pub no_empty_or_dot_segments: bool,
    /// Keys ending in `/` cannot be stored (local files).
    pub no_trailing_slash_keys: bool,
    /// The store does not keep CRC32C for objects.
    pub no_stored_crc32c: bool,
    /// Deleting a missing object succeeds (S3's DELETE is idempotent: 204).
    pub idempotent_delete: bool,
    /// Parts of a multipart upload must be at least this big (but the last).
    pub min_part_size: usize,
    /// A wrong checksum sent with a PUT is stored, not refused: moto.
    pub unchecked_checksums: bool,
    /// A delete carrying a version the object no longer has deletes it
    /// anyway (the precondition is ignored): fake-gcs-server, MinIO, moto.
    /// The engines read the version first for that reason.
    pub ignores_delete_preconditions: bool,
    /// No key to sign URLs with here (an anonymous GCS client).
    pub no_presign_key: bool,
    /// A presigned URL with a wrong signature is served anyway.
    pub unchecked_signatures: bool,
    /// A copy pinned to a source version (`x-amz-copy-source-if-match`)
    /// copies whatever the source now is: moto.
    pub ignores_copy_source_pin: bool,
    /// A wrong checksum is refused with 412, not 400 (so it reads as a
    /// failed precondition): the storage-testbench.
    pub checksum_mismatch_is_412: bool,
    /// Deleting a non-empty bucket is refused with 400, not 409: the
    /// storage-testbench.
    pub non_empty_bucket_is_400: bool,
}

/// A store and a fresh bucket to test in.
pub struct Target {
    /// The backend under test.
    pub store: Arc<dyn Store>,
    /// A bucket created for this test alone.
    pub bucket: String,
    /// Known server gaps.
    pub quirks: Quirks,
    /// Keeps a local store's folder alive.
    pub _dir: Option<tempfile::TempDir>,
}

/// A unique bucket name (lowercase, valid everywhere).
pub fn unique_bucket(prefix: &str) -> String {
    format!("{prefix}-{:016x}", rand::random::<u64>())
}

/// The server address from `var`, or None (skip) / panic (required).
pub fn server(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            if std::env::var("SHOAL_REQUIRE_SERVERS").is_ok_and(|v| v == "1") {
                panic!(
                    "{var} is not set but SHOAL_REQUIRE_SERVERS=1: start the servers with scripts/servers.sh"
                );
            }
            eprintln!("skipped: {var} not set (start servers with scripts/servers.sh start)");
            None
        }
    }
}

/// A GCS store on the fake-gcs-server named by `SHOAL_TEST_GCS`.
pub fn gcs_store() -> Option<Arc<dyn Store>> {
    Some(gcs_store_at(server("SHOAL_TEST_GCS")?))
}

/// An anonymous GCS store on the JSON API server at `endpoint`
/// (fake-gcs-server, Google's storage-testbench).
pub fn gcs_store_at(endpoint: String) -> Arc<dyn Store> {
    let cfg = shoal_gcs::GcsConfig {
        endpoint: Some(endpoint),
        anonymous: true,
        // The emulators take any project; bucket listing needs one.
        project: Some("shoal-test".into()),
        ..shoal_gcs::GcsConfig::from_env()
    };
    Arc::new(shoal_gcs::GcsStore::new(cfg).expect("gcs store"))
}

/// An S3 store on the MinIO named by `SHOAL_TEST_S3`.
pub fn s3_store() -> Option<Arc<dyn Store>> {
    let ep = server("SHOAL_TEST_S3")?;
    let cfg = shoal_s3::S3Config {
        endpoint: Some(ep),
        region: "us-east-1".into(),
        addressing: shoal_s3::Addressing::Path,
        anonymous: false,
        access_key: Some(
            std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into()),
        ),
        secret_key: Some(
            std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| "minioadmin".into()),
        ),
        session_token: None,
        ..shoal_s3::S3Config::from_env()
    };
    Some(Arc::new(shoal_s3::S3Store::new(cfg).expect("s3 store")))
}

/// moto's S3 server (`SHOAL_TEST_MOTO`), the second S3 implementation
/// (docs/s3-servers.md); it takes any credentials.
pub fn moto_store() -> Option<Arc<dyn Store>> {
    let ep = server("SHOAL_TEST_MOTO")?;
    let cfg = shoal_s3::S3Config {
        endpoint: Some(ep),
        region: "us-east-1".into(),
        addressing: shoal_s3::Addressing::Path,
        anonymous: false,
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        session_token: None,
        ..shoal_s3::S3Config::from_env()
    };
    Some(Arc::new(shoal_s3::S3Store::new(cfg).expect("s3 store")))
}

/// Creates a fresh bucket on `store`.
pub async fn target(
    store: Arc<dyn Store>,
    quirks: Quirks,
    dir: Option<tempfile::TempDir>,
) -> Target {
    let bucket = unique_bucket("conf");
    (store.buckets().expect("every store here has buckets"))
        .create_bucket(&bucket)
        .await
        .unwrap_or_else(|e| panic!("create bucket: {e}"));
    Target {
        store,
        bucket,
        quirks,
        _dir: dir,
    }
}
