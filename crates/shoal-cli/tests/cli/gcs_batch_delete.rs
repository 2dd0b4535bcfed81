//! GCS batch deletes (shoal-gcs `batch`): `rm -r` of many objects goes out
//! as JSON API batch requests of 100 deletes, each key reported on its
//! own; a server without the batch endpoint (Google's storage-testbench)
//! gets single deletes after one refusal, said once.

use crate::common::*;
use shoal_testkit::faultproxy::{FaultProxy, Script};

/// Names that must survive the batch's framing: percent signs, pluses,
/// spaces, `?`, `#`, unicode, a trailing slash's neighbour.
fn awkward(i: usize) -> String {
    let shapes = ["plain", "100%", "a+b", "sp ace", "q?x#y", "é/ü", "dir/x"];
    format!("{}-{i:04}", shapes[i % shapes.len()])
}

#[test]
fn rm_r_sends_batches_of_100_and_reports_every_key() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for i in 0..250 {
        let p = dir.path().join(awkward(i));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"x").unwrap();
    }
    let url = format!("gs://{bucket}/p/");
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", "-r", &format!("{}/", dir.path().display()), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ep = shoal_testkit_server("SHOAL_TEST_GCS").unwrap();
    let proxy = FaultProxy::start(&ep, Script::new());
    let mut c = gcs().unwrap();
    c.env("STORAGE_EMULATOR_HOST", proxy.url());
    let r = run(with_args(c, &["rm", "-r", "--json", &url]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("refused"), "{}", r.stderr);
    let deleted: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains("\"delete\""))
        .collect();
    assert_eq!(deleted.len(), 250, "{}", r.stdout);
    // One listing page and three batches (100, 100, 50): not 250 DELETEs.
    let requests = proxy.requests();
    assert!(requests <= 6, "{requests} requests");
    let r = run(with_args(gcs().unwrap(), &["ls", "-r", &url]));
    assert!(
        r.stdout.trim().is_empty() && r.stderr.contains("matched no objects"),
        "left: {} {}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn a_server_without_batches_gets_single_deletes_after_one_refusal() {
    let Some(tb) = std::env::var("SHOAL_TEST_GCS_TESTBENCH").ok() else {
        eprintln!("skipped: no storage-testbench (SHOAL_TEST_GCS_TESTBENCH)");
        return;
    };
    let shoal_tb = || {
        let mut c = shoal();
        c.env("STORAGE_EMULATOR_HOST", &tb)
            .env("GOOGLE_CLOUD_PROJECT", "test");
        c
    };
    let bucket = unique("tb");
    let r = run(with_args(shoal_tb(), &["mb", &format!("gs://{bucket}")]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let dir = tempfile::tempdir().unwrap();
    for i in 0..7 {
        std::fs::write(dir.path().join(awkward(i).replace('/', "_")), b"x").unwrap();
    }
    let url = format!("gs://{bucket}/p/");
    let r = run(with_args(
        shoal_tb(),
        &["cp", "-r", &format!("{}/", dir.path().display()), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(with_args(shoal_tb(), &["rm", "-r", "--json", &url]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("batch delete refused").count(),
        1,
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stdout
            .lines()
            .filter(|l| l.contains("\"delete\""))
            .count(),
        7,
        "{}",
        r.stdout
    );
}

/// Behind a gateway that serves the API below a path of its own
/// (`http://host/gcs/`), a batch's inner requests still name the API's
/// own paths (the gateway forwards the body untouched), and every object
/// is really deleted; a 404 that is not the API's "no such object" is
/// never counted as a delete. Read back with curl.
#[test]
fn batches_behind_a_gateway_path_delete_for_real() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("f{i}")), b"x").unwrap();
    }
    let url = format!("gs://{bucket}/gw/");
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", "-r", &format!("{}/", dir.path().display()), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ep = shoal_testkit_server("SHOAL_TEST_GCS").unwrap();
    let proxy = FaultProxy::start(&ep, Script::new().below("/gcs"));
    let mut c = gcs().unwrap();
    c.env("STORAGE_EMULATOR_HOST", format!("{}/gcs", proxy.url()));
    let r = run(with_args(c, &["rm", "-r", &url]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr.matches("Removed").count(), 5, "{}", r.stderr);
    let out = std::process::Command::new("curl")
        .args(["-fsS", &format!("{ep}/storage/v1/b/{bucket}/o?prefix=gw/")])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["items"].as_array().is_none_or(|a| a.is_empty()),
        "objects left: {v}"
    );
}
