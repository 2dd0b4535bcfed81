//! Google's retry conformance (../shared/conformance/gcs/retry_tests.json)
//! against Google's storage-testbench, for every JSON API method shoal
//! issues. Each scenario's faults are registered with the testbench
//! (`POST /retry_test`); the test kit's fault proxy adds the
//! `x-retry-test-id` header to every request of the `shoal` run, which the
//! testbench then fails as told. The outcome is checked against what the
//! file expects, and the faults must all have been consumed.
//!
//! One deliberate difference: scenario 3 expects a write without a
//! precondition to fail after one 503 or reset, since a blind retry could
//! replace another writer's object. shoal never retries blindly either,
//! but it reads the object first and retries *with* the precondition that
//! read gives (shoal_core::retry::safe), so it succeeds. docs/gcs-retries.md
//! has the table this test prints.
//!
//! Skips with one line when the testbench is not running
//! (`SHOAL_TEST_GCS_TESTBENCH`, set by scripts/test.sh when ../shared has
//! it).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::*;
use shoal_testkit::faultproxy::{FaultProxy, Script};

fn testbench() -> Option<String> {
    match std::env::var("SHOAL_TEST_GCS_TESTBENCH") {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            eprintln!(
                "skipped: SHOAL_TEST_GCS_TESTBENCH not set (no ../shared/tools/storage-testbench)"
            );
            None
        }
    }
}

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl").arg("-sS").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

fn make_bucket(tb: &str) -> String {
    let b = unique("tb");
    curl(&[
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
        "-d",
        &format!(r#"{{"name":"{b}"}}"#),
        &format!("{tb}/storage/v1/b?project=test"),
    ]);
    b
}

/// Stores `body` at `bucket/name`; returns its generation.
fn put(tb: &str, bucket: &str, name: &str, body: &[u8]) -> i64 {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("b");
    std::fs::write(&f, body).unwrap();
    let r = json(&curl(&[
        "-X",
        "POST",
        // Without a type curl sends a form, which the testbench stores empty.
        "-H",
        "content-type: application/octet-stream",
        "--data-binary",
        &format!("@{}", f.display()),
        &format!("{tb}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}"),
    ]));
    r["generation"].as_str().unwrap().parse().unwrap()
}

fn retry_test(tb: &str, method: &str, faults: &[&str]) -> String {
    let body = serde_json::json!({"instructions": {method: faults}, "transport": "HTTP"});
    let r = json(&curl(&[
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
        "-d",
        &body.to_string(),
        &format!("{tb}/retry_test"),
    ]));
    r["id"].as_str().unwrap().to_owned()
}

fn consumed(tb: &str, id: &str) -> bool {
    json(&curl(&[&format!("{tb}/retry_test/{id}")]))["completed"] == true
}

/// One method as shoal issues it: what to set up, then the command.
struct Case<'a> {
    method: &'a str,
    /// With a precondition (scenarios 2, 7) or without.
    precondition: bool,
}

/// Runs `shoal` for `case` with the testbench failing it by `faults`;
/// returns (exit code, faults all consumed, stderr).
fn run_case(tb: &str, case: &Case, faults: &[&str]) -> (i32, bool, String) {
    let bucket = make_bucket(tb);
    let dir = tempfile::tempdir().unwrap();
    let small = pattern(4096, 1);
    let src = dir.path().join("src");
    std::fs::write(&src, &small).unwrap();
    let src_s = src.to_str().unwrap().to_owned();
    let obj = format!("gs://{bucket}/obj");
    let generation = put(tb, &bucket, "obj", &small);
    let new = format!("gs://{bucket}/new");
    let pre: Vec<String> = if case.precondition {
        vec!["--if-generation-match".into(), "0".into()]
    } else {
        vec![]
    };
    let mut stdin: Option<Vec<u8>> = None;
    let args: Vec<String> = match case.method {
        "storage.objects.get" => {
            // Big enough for a broken stream after 256 KiB to matter.
            put(tb, &bucket, "big", &pattern(1 << 20, 2));
            let out = dir.path().join("out");
            vec![
                "cp".into(),
                format!("gs://{bucket}/big"),
                out.display().to_string(),
            ]
        }
        "storage.objects.list" => vec!["ls".into(), format!("gs://{bucket}/")],
        "storage.objects.insert"
            if case.precondition
                && faults
                    .iter()
                    .any(|f| f.contains("after") || f.contains("408")) =>
        {
            // Scenario 7: a resumable session, faults mid-stream.
            stdin = Some(pattern(20 << 20, 3));
            vec![
                "cp".into(),
                "--gcs-upload".into(),
                "resumable".into(),
                "--no-clobber".into(),
                "-".into(),
                new.clone(),
            ]
        }
        "storage.objects.insert" => [vec!["cp".into()], pre, vec![src_s, new]].concat(),
        "storage.objects.delete" => {
            let pre = if case.precondition {
                vec!["--if-generation-match".into(), generation.to_string()]
            } else {
                vec![]
            };
            [vec!["rm".into()], pre, vec![obj]].concat()
        }
        "storage.objects.compose" => {
            let f = dir.path().join("two-parts");
            std::fs::write(&f, pattern(2 << 20, 4)).unwrap();
            [
                vec![
                    "cp".into(),
                    "--gcs-upload".into(),
                    "compose".into(),
                    "--part-size".into(),
                    "1MiB".into(),
                ],
                pre,
                vec![f.display().to_string(), new],
            ]
            .concat()
        }
        "storage.objects.rewrite" => [vec!["cp".into()], pre, vec![obj, new]].concat(),
        "storage.buckets.insert" => vec!["mb".into(), format!("gs://{}", unique("tb"))],
        "storage.buckets.delete" => {
            let empty = make_bucket(tb);
            vec!["rb".into(), format!("gs://{empty}")]
        }
        "storage.buckets.list" => vec!["ls".into(), "gs://".into()],
        m => panic!("no command for {m}"),
    };
    let id = retry_test(tb, case.method, faults);
    let proxy = FaultProxy::start(tb, Script::new().header("x-retry-test-id", &id));
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", proxy.url())
        .env("GOOGLE_CLOUD_PROJECT", "test")
        // The testbench enforces rewrite preconditions (declared, not sniffed).
        .env("SHOAL_GCS_REWRITE_PRECONDITIONS", "1")
        .args(&args);
    let out = match stdin {
        Some(body) => {
            c.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = c.spawn().unwrap();
            child.stdin.take().unwrap().write_all(&body).unwrap();
            child.wait_with_output().unwrap()
        }
        None => c.output().unwrap(),
    };
    let code = out.status.code().unwrap_or(-1);
    (
        code,
        consumed(tb, &id),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_scenario_for_every_method_shoal_issues() {
    let Some(tb) = testbench() else { return };
    let Some(shared) = std::env::var("SHOAL_SHARED").ok() else {
        eprintln!("skipped: SHOAL_SHARED not set");
        return;
    };
    let file = format!("{shared}/conformance/gcs/retry_tests.json");
    let Ok(text) = std::fs::read_to_string(&file) else {
        eprintln!("skipped: no {file}");
        return;
    };
    let tests = json(&text);
    let issued = [
        "storage.objects.get",
        "storage.objects.list",
        "storage.objects.insert",
        "storage.objects.delete",
        "storage.objects.compose",
        "storage.objects.rewrite",
        "storage.buckets.insert",
        "storage.buckets.delete",
        "storage.buckets.list",
    ];
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    for t in tests["retryTests"].as_array().unwrap() {
        let sid = t["id"].as_i64().unwrap();
        let expect = t["expectSuccess"].as_bool().unwrap();
        let precondition = t["preconditionProvided"].as_bool().unwrap_or(false);
        for m in t["methods"].as_array().unwrap() {
            let method = m["name"].as_str().unwrap();
            if !issued.contains(&method) {
                continue;
            }
            for c in t["cases"].as_array().unwrap() {
                let faults: Vec<&str> = c["instructions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                let case = Case {
                    method,
                    precondition,
                };
                let (code, used, stderr) = run_case(&tb, &case, &faults);
                let ok = code == 0;
                // Scenario 3: shoal retries with the precondition a read
                // gave it, so it succeeds where a client that cannot look
                // must fail.
                let wanted = if sid == 3 { true } else { expect };
                let held = ok == wanted && (used || !ok);
                let line = format!(
                    "| {sid} | {method} | {} | {} | {} |",
                    faults.join(", "),
                    if ok { "success" } else { "failure" },
                    if held { "held" } else { "NOT held" }
                );
                println!("{line}");
                rows.push(line.clone());
                if !held || (ok && !used) {
                    failures.push(format!(
                        "{line} (faults consumed: {used}; exit {code}: {})",
                        stderr.trim()
                    ));
                }
                if !ok && code != 1 {
                    failures.push(format!(
                        "{line}: exit {code}, expected 1: {}",
                        stderr.trim()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}
