//! Lost responses and failed parts on GCS (fake-gcs-server behind the test
//! kit's fault proxy): the server did the work, the answer never arrived
//! (`Fault::LoseResponse`: forwarded, then the connection reset; or a 503
//! sent after the server answered). shoal must look before it retries
//! (`shoal_core::retry::safe`), so completed work never exits 1: an upload
//! or compose with a "must not exist" precondition meeting its own object,
//! an `rm` meeting its own delete, an `mb` meeting its own bucket. And a
//! composite upload whose part fails for good leaves no temporary object.

mod common;

use std::process::Command;

use common::*;
use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script, When};

fn via(proxy: &FaultProxy) -> Command {
    let mut c = gcs().unwrap();
    c.env("STORAGE_EMULATOR_HOST", proxy.url());
    c
}

fn upstream() -> Option<String> {
    shoal_testkit_server("SHOAL_TEST_GCS")
}

/// Names under `prefix` in `bucket`, read from the server directly.
fn names(ep: &str, bucket: &str, prefix: &str) -> Vec<String> {
    let out = Command::new("curl")
        .args([
            "-fsS",
            &format!("{ep}/storage/v1/b/{bucket}/o?prefix={prefix}"),
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| o["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn read_back(url: &str) -> Vec<u8> {
    let r = run(with_args(gcs().unwrap(), &["cat", url]));
    assert_eq!(r.code, 0, "cat {url}: {}", r.stderr);
    r.stdout_bytes
}

fn one(proxy_rule: Rule) -> (FaultProxy, String) {
    let ep = upstream().unwrap();
    (FaultProxy::start(&ep, Script::new().rule(proxy_rule)), ep)
}

#[test]
fn a_create_whose_answer_was_lost_succeeds() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(10_000, 3);
    let src = dir.path().join("f");
    std::fs::write(&src, &body).unwrap();
    for (name, fault) in [
        ("lost", Fault::LoseResponse),
        ("503-after", Fault::StatusAfter(503)),
    ] {
        let (proxy, _) = one(Rule::new(
            When::method("POST").contains("uploadType=multipart"),
            fault,
        ));
        let url = format!("gs://{bucket}/{name}");
        let r = run(with_args(
            via(&proxy),
            &[
                "cp",
                "--if-generation-match",
                "0",
                src.to_str().unwrap(),
                &url,
            ],
        ));
        assert!(!proxy.injected().is_empty(), "{name}: no fault injected");
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert_eq!(read_back(&url), body, "{name}");
    }
}

#[test]
fn a_compose_whose_answer_was_lost_succeeds_and_leaves_nothing() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(3 * (1 << 20) + 5, 4);
    let src = dir.path().join("f");
    std::fs::write(&src, &body).unwrap();
    let (proxy, ep) = one(Rule::new(
        When::method("POST").contains("/compose"),
        Fault::LoseResponse,
    ));
    let url = format!("gs://{bucket}/composed");
    let r = run(with_args(
        via(&proxy),
        &[
            "cp",
            "--gcs-upload",
            "compose",
            "--part-size",
            "1MiB",
            "--no-clobber",
            src.to_str().unwrap(),
            &url,
        ],
    ));
    assert!(!proxy.injected().is_empty(), "no fault injected");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(read_back(&url), body);
    assert_eq!(names(&ep, &bucket, ".shoal-tmp/"), Vec::<String>::new());
}

#[test]
fn rm_whose_answer_was_lost_succeeds() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    std::fs::write(&src, b"x").unwrap();
    let url = format!("gs://{bucket}/gone");
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", src.to_str().unwrap(), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (proxy, ep) = one(Rule::new(When::method("DELETE"), Fault::LoseResponse));
    let r = run(with_args(via(&proxy), &["rm", &url]));
    assert!(!proxy.injected().is_empty(), "no fault injected");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(names(&ep, &bucket, "gone"), Vec::<String>::new());
    // Without a lost answer, a missing object is still an error.
    let r = run(with_args(gcs().unwrap(), &["rm", &url]));
    assert_eq!(r.code, 1, "{}", r.stderr);
}

#[test]
fn mb_whose_answer_was_lost_succeeds() {
    if upstream().is_none() {
        return;
    }
    let (proxy, _) = one(Rule::new(
        When::method("POST").contains("/storage/v1/b"),
        Fault::LoseResponse,
    ));
    let bucket = unique("lost-mb");
    let r = run(with_args(via(&proxy), &["mb", &format!("gs://{bucket}")]));
    assert!(!proxy.injected().is_empty(), "no fault injected");
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The bucket is there, and a second mb is refused as before.
    let r = run(with_args(
        gcs().unwrap(),
        &["mb", &format!("gs://{bucket}")],
    ));
    assert_ne!(r.code, 0, "{}", r.stderr);
}

/// A part refused for good (400) while other parts are in flight: the
/// upload fails and no `.shoal-tmp/composite/` object is left, including
/// parts the server stored after the failure was known.
#[test]
fn a_composite_upload_whose_part_fails_leaves_nothing() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(6 * (1 << 20), 5);
    let src = dir.path().join("f");
    std::fs::write(&src, &body).unwrap();
    for code in [400, 401] {
        let (proxy, ep) = one(Rule::new(
            When::method("POST").contains("uploadType=multipart"),
            Fault::Status {
                code,
                retry_after: None,
            },
        )
        .nth(2));
        let url = format!("gs://{bucket}/failed-{code}");
        let r = run(with_args(
            via(&proxy),
            &[
                "cp",
                "--gcs-upload",
                "compose",
                "--part-size",
                "1MiB",
                src.to_str().unwrap(),
                &url,
            ],
        ));
        assert!(!proxy.injected().is_empty(), "{code}: no fault injected");
        assert_eq!(r.code, 1, "{code}: {}", r.stderr);
        assert_eq!(
            names(&ep, &bucket, ".shoal-tmp/"),
            Vec::<String>::new(),
            "{code}"
        );
    }
}
