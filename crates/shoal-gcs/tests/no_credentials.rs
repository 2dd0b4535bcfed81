//! Without any Google credentials, the first request fails fast with
//! `Unauthenticated` and an actionable hint, and constructing the store
//! does not fail at all (credentials are looked up lazily).
//!
//! Its own test binary because it changes the process environment: ADC is
//! pointed at an empty HOME, and the metadata server at a closed loopback
//! port, so nothing leaves the machine.

use std::time::Duration;

use shoal_core::{ErrorKind, Store};
use shoal_gcs::{GcsConfig, GcsStore};

#[tokio::test]
async fn missing_credentials_are_reported_not_retried() {
    let home = std::env::temp_dir().join(format!("shoal-gcs-nocreds-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    // SAFETY: this binary has one test and sets the variables before any
    // other thread of ours reads the environment.
    unsafe {
        std::env::set_var("HOME", &home);
        std::env::remove_var("GOOGLE_APPLICATION_CREDENTIALS");
        std::env::set_var("GCE_METADATA_HOST", "127.0.0.1:9");
    }
    let cfg = GcsConfig {
        // Never reached: the credential lookup fails first.
        endpoint: Some("http://127.0.0.1:9".into()),
        anonymous: false,
        ..Default::default()
    };
    let store = GcsStore::new(cfg).expect("new() must not look up credentials");
    // A watchdog for a hang, not a measurement: that the error is not
    // retried is asserted on the error itself.
    let e = tokio::time::timeout(Duration::from_secs(120), store.head("bucket", "some/key"))
        .await
        .expect("the credential lookup hung")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthenticated, "{e}");
    assert!(!e.is_retryable(), "{e}");
    let s = e.to_string();
    assert!(
        s.starts_with("stat gs://bucket/some/key: no Google credentials found"),
        "{s}"
    );
    assert!(s.contains("gcloud auth application-default login"), "{s}");
    assert!(s.contains("--no-sign-request"), "{s}");
    assert!(!s.contains('\n'));
    eprintln!("{s}");
    let _ = std::fs::remove_dir_all(&home);
}
