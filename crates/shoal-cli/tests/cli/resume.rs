//! An interrupted sliced download (`kill -9` in the middle) leaves its
//! finished slices behind; rerunning the same command fetches only the
//! rest, and the result is byte-identical. Slowed down by a toxiproxy
//! bandwidth toxic in front of the real servers so the kill lands mid-way.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

pub(crate) fn toxi(method: &str, path: &str, body: &str) -> String {
    let ep = shoal_testkit_server("SHOAL_TEST_TOXIPROXY").expect("toxiproxy");
    let host = ep.trim_start_matches("http://").to_owned();
    let mut s = std::net::TcpStream::connect(&host).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    assert!(
        head.starts_with("HTTP/1.1 2"),
        "toxiproxy {method} {path}: {head}"
    );
    body.to_owned()
}

/// A toxiproxy proxy to `upstream` where every connection gets `kib_s` KiB/s
/// on the way down.
fn slow_proxy(upstream: &str, kib_s: u32) -> (String, String) {
    slow_proxy_on(upstream, kib_s, "downstream")
}

/// [`slow_proxy`] on `stream` (`"upstream"`: what the client sends).
pub(crate) fn slow_proxy_on(upstream: &str, kib_s: u32, stream: &str) -> (String, String) {
    let name = unique("slow");
    let up = upstream.trim_start_matches("http://");
    let body = toxi(
        "POST",
        "/proxies",
        &format!(r#"{{"name":"{name}","listen":"127.0.0.1:0","upstream":"{up}","enabled":true}}"#),
    );
    let v: serde_json::Value = serde_json::from_str(body.trim()).unwrap();
    let listen = v["listen"].as_str().unwrap().to_owned();
    toxi(
        "POST",
        &format!("/proxies/{name}/toxics"),
        &format!(
            r#"{{"name":"bw","type":"bandwidth","stream":"{stream}","attributes":{{"rate":{kib_s}}}}}"#
        ),
    );
    (name, format!("http://{listen}"))
}

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Finished slices recorded in the state file beside `dest`.
fn recorded(dest: &Path) -> usize {
    let state = dest.with_file_name(format!(
        ".{}.shoal-partial.json",
        dest.file_name().unwrap().to_string_lossy()
    ));
    std::fs::read_to_string(state)
        .map(|s| s.lines().skip(1).count())
        .unwrap_or(0)
}

/// Uploads 24 MB, starts a 24-slice download through a slow proxy, kills
/// it with SIGKILL once a few slices are recorded, then reruns directly.
#[derive(PartialEq)]
enum Then {
    /// Rerun the same command: only the missing slices move.
    Rerun,
    /// Replace the object first: the rerun must start over.
    Replace,
    /// Rerun with `--no-resume`: everything moves again.
    NoResume,
}

fn kill_then(base: fn() -> Option<std::process::Command>, scheme: &str, env: &str, then: Then) {
    let (Some(upstream), Some(_)) = (
        shoal_testkit_server(match scheme {
            "gs" => "SHOAL_TEST_GCS",
            _ => "SHOAL_TEST_S3",
        }),
        shoal_testkit_server("SHOAL_TEST_TOXIPROXY"),
    ) else {
        return;
    };
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let body = data(24_000_000, 7);
    std::fs::write(&src, &body).unwrap();
    let url = format!("{scheme}://{bucket}/big.bin");
    let up = run(with_args(
        base().unwrap(),
        &["cp", src.to_str().unwrap(), &url],
    ));
    assert_eq!(up.code, 0, "{}", up.stderr);

    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let dest = out.join("big.bin");
    let (name, slow) = slow_proxy(&upstream, 1000);
    let args = [
        "--workers",
        "4",
        "cp",
        "--slices",
        "24",
        &url,
        dest.to_str().unwrap(),
    ];
    let mut c = with_args(base().unwrap(), &args);
    c.env(env, &slow)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let t0 = Instant::now();
    while recorded(&dest) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no slice finished");
        assert!(
            child.try_wait().unwrap().is_none(),
            "download ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no cleanup runs
    child.wait().unwrap();
    toxi("DELETE", &format!("/proxies/{name}"), "");
    let done_before = recorded(&dest);
    assert!(
        done_before < 24,
        "killed mid-way ({done_before} of 24 slices)"
    );
    assert!(!dest.exists(), "nothing under the final name after a kill");
    assert_eq!(
        files_in(&out).len(),
        2,
        "data and state kept: {:?}",
        files_in(&out)
    );

    let mut want = body;
    if then == Then::Replace {
        want = data(24_000_000, 8);
        std::fs::write(&src, &want).unwrap();
        let up = run(with_args(
            base().unwrap(),
            &["cp", src.to_str().unwrap(), &url],
        ));
        assert_eq!(up.code, 0, "{}", up.stderr);
    }
    let mut rerun = args.to_vec();
    if then == Then::NoResume {
        rerun.insert(3, "--no-resume");
    }
    // Rerun without the slow proxy.
    let r = run(with_args(base().unwrap(), &rerun));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(std::fs::read(&dest).unwrap() == want, "byte-identical");
    let fetched: usize = r
        .stderr
        .split(" parallel requests")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("request count in {:?}", r.stderr));
    if then == Then::Rerun {
        assert!(r.stderr.contains("resumed:"), "{}", r.stderr);
        assert!(
            fetched <= 24 - done_before,
            "fetched {fetched} slices, {done_before} were already there"
        );
    } else {
        assert!(!r.stderr.contains("resumed:"), "{}", r.stderr);
        assert_eq!(fetched, 24, "started over");
    }
    assert_eq!(
        files_in(&out),
        vec!["big.bin".to_owned()],
        "state cleaned up"
    );
}

#[test]
fn a_killed_gcs_download_resumes_with_only_the_missing_slices() {
    kill_then(gcs, "gs", "STORAGE_EMULATOR_HOST", Then::Rerun);
}

#[test]
fn a_killed_s3_download_resumes_with_only_the_missing_slices() {
    kill_then(s3, "s3", "AWS_ENDPOINT_URL", Then::Rerun);
}

#[test]
fn an_object_replaced_after_the_kill_is_fetched_from_zero() {
    kill_then(gcs, "gs", "STORAGE_EMULATOR_HOST", Then::Replace);
}

#[test]
fn no_resume_fetches_everything_again() {
    kill_then(s3, "s3", "AWS_ENDPOINT_URL", Then::NoResume);
}
