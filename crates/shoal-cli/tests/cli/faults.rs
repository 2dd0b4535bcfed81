//! Network faults from toxiproxy between shoal and the real servers:
//! downloads survive connections cut mid-stream, resuming from the last
//! byte, latency, bandwidth limits, sliced packets and connections that go
//! silent, and come out byte-identical. (Per-request HTTP faults are in
//! http_faults.rs, through the test kit's proxy.)

use std::io::{Read, Write};

use crate::common::*;

/// One HTTP request to toxiproxy's API; returns the body.
fn toxi(method: &str, path: &str, body: &str) -> String {
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

/// A proxy in front of `upstream` with the given toxics; returns its URL.
fn proxy(upstream: &str, toxics: &[&str]) -> (String, String) {
    let name = unique("p");
    let up = upstream.trim_start_matches("http://");
    let body = toxi(
        "POST",
        "/proxies",
        &format!(r#"{{"name":"{name}","listen":"127.0.0.1:0","upstream":"{up}","enabled":true}}"#),
    );
    let v: serde_json::Value =
        serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    let listen = v["listen"].as_str().unwrap().to_owned();
    for t in toxics {
        toxi("POST", &format!("/proxies/{name}/toxics"), t);
    }
    (name, format!("http://{listen}"))
}

fn data(n: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn downloads_resume_through_cut_and_reset_connections() {
    let (Some(gcs_ep), Some(_)) = (
        shoal_testkit_server("SHOAL_TEST_GCS"),
        shoal_testkit_server("SHOAL_TEST_TOXIPROXY"),
    ) else {
        return;
    };
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let body = data(6 << 20);
    std::fs::write(&src, &body).unwrap();
    let url = format!("gs://{bucket}/fault.bin");
    assert_eq!(
        run(with_args(
            gcs().unwrap(),
            &["cp", src.to_str().unwrap(), &url]
        ))
        .code,
        0
    );

    // Every connection is cut after ~1 MiB of response: a 6 MiB object
    // needs at least 6 connections, each resuming where the last stopped.
    let limit = r#"{"name":"cut","type":"limit_data","stream":"downstream","attributes":{"bytes":1048576}}"#;
    let (name, ep) = proxy(&gcs_ep, &[limit]);
    for slices in ["1", "3"] {
        let out = dir.path().join(format!("out-{slices}"));
        let mut c = shoal();
        c.env("STORAGE_EMULATOR_HOST", &ep).args([
            "--attempts",
            "6",
            "cp",
            "--slices",
            slices,
            &url,
            out.to_str().unwrap(),
        ]);
        let r = run(c);
        assert_eq!(r.code, 0, "slices {slices}: {}", r.stderr);
        assert!(
            std::fs::read(&out).unwrap() == body,
            "byte-identical after resumes (slices {slices})"
        );
        assert!(r.stderr.contains("crc32c verified"), "{}", r.stderr);
    }
    toxi("DELETE", &format!("/proxies/{name}"), "");

    // Connections reset after a short while: same outcome.
    let reset = r#"{"name":"reset","type":"reset_peer","stream":"downstream","toxicity":0.5,"attributes":{"timeout":20}}"#;
    let (name, ep) = proxy(&gcs_ep, &[reset]);
    let out = dir.path().join("out-reset");
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", &ep).args([
        "--attempts",
        "10",
        "cp",
        &url,
        out.to_str().unwrap(),
    ]);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(std::fs::read(&out).unwrap() == body);
    toxi("DELETE", &format!("/proxies/{name}"), "");
}

#[test]
fn a_dead_endpoint_fails_cleanly_with_nothing_written() {
    let (Some(gcs_ep), Some(_)) = (
        shoal_testkit_server("SHOAL_TEST_GCS"),
        shoal_testkit_server("SHOAL_TEST_TOXIPROXY"),
    ) else {
        return;
    };
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, data(2 << 20)).unwrap();
    let url = format!("gs://{bucket}/dead.bin");
    assert_eq!(
        run(with_args(
            gcs().unwrap(),
            &["cp", src.to_str().unwrap(), &url]
        ))
        .code,
        0
    );
    // Every connection dies after 100 bytes, inside the response headers:
    // no byte of the object can arrive.
    let limit =
        r#"{"name":"cut","type":"limit_data","stream":"downstream","attributes":{"bytes":100}}"#;
    let (name, ep) = proxy(&gcs_ep, &[limit]);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", &ep).args([
        "--attempts",
        "3",
        "cp",
        &url,
        out_dir.join("x").to_str().unwrap(),
    ]);
    let r = run(c);
    toxi("DELETE", &format!("/proxies/{name}"), "");
    r.assert_one_line_error(1, &[&url]);
    assert!(
        files_in(&out_dir).is_empty(),
        "no partial file, no temporary"
    );
}

/// Slow and choppy networks (latency, a bandwidth limit, tiny TCP slices)
/// and a network that swallows every byte (toxiproxy's `timeout` toxic
/// with no timeout: only the read timeout can end such a request).
#[test]
fn slow_choppy_and_silent_networks() {
    let (Some(gcs_ep), Some(s3_ep), Some(_)) = (
        shoal_testkit_server("SHOAL_TEST_GCS"),
        shoal_testkit_server("SHOAL_TEST_S3"),
        shoal_testkit_server("SHOAL_TEST_TOXIPROXY"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = data(1 << 20);
    let src = dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    for (scheme, ep, base) in [
        ("gs", &gcs_ep, gcs as fn() -> Option<std::process::Command>),
        ("s3", &s3_ep, s3),
    ] {
        let bucket = make_bucket(base, scheme).unwrap();
        let url = format!("{scheme}://{bucket}/net.bin");
        let r = run(with_args(
            base().unwrap(),
            &["cp", src.to_str().unwrap(), &url],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let latency = r#"{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":150,"jitter":50}}"#;
        let bandwidth =
            r#"{"name":"bw","type":"bandwidth","stream":"downstream","attributes":{"rate":4096}}"#;
        let slicer = r#"{"name":"sl","type":"slicer","stream":"downstream","attributes":{"average_size":64,"size_variation":48,"delay":10}}"#;
        let up_latency =
            r#"{"name":"ulat","type":"latency","stream":"upstream","attributes":{"latency":300}}"#;
        for (name, toxics) in [
            ("latency", vec![latency]),
            ("bandwidth 4 MB/s", vec![bandwidth]),
            ("slicer", vec![slicer]),
            ("slow start + latency", vec![up_latency, latency]),
        ] {
            let (pname, pep) = proxy(ep, &toxics);
            let out = dir.path().join(format!("{scheme}-{}", unique("o")));
            let mut c = base().unwrap();
            c.env("STORAGE_EMULATOR_HOST", &pep)
                .env("AWS_ENDPOINT_URL", &pep)
                .args([
                    "cp",
                    "--slices",
                    "2",
                    "--slice-size",
                    "256KiB",
                    &url,
                    out.to_str().unwrap(),
                ]);
            let r = run(c);
            toxi("DELETE", &format!("/proxies/{pname}"), "");
            assert_eq!(r.code, 0, "{scheme} {name}: {}", r.stderr);
            assert!(std::fs::read(&out).unwrap() == body, "{scheme} {name}");
        }

        // Every byte swallowed until the toxic is removed 2.5 s later: the
        // requests in flight then can never complete (their bytes are
        // gone), so only a read timeout and a retry finish the copy.
        let silent = r#"{"name":"silent","type":"timeout","stream":"downstream","attributes":{"timeout":0}}"#;
        let (pname, pep) = proxy(ep, &[silent]);
        let out = dir.path().join(format!("{scheme}-silent"));
        let mut c = base().unwrap();
        c.env("STORAGE_EMULATOR_HOST", &pep)
            .env("AWS_ENDPOINT_URL", &pep)
            .args(["--read-timeout", "1", "cp", &url, out.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2500));
        toxi("DELETE", &format!("/proxies/{pname}/toxics/silent"), "");
        // A watchdog, not a timing assertion: a hung client fails the test.
        let mut status = None;
        for _ in 0..600 {
            if let Some(s) = child.try_wait().unwrap() {
                status = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        toxi("DELETE", &format!("/proxies/{pname}"), "");
        let Some(status) = status else {
            let _ = child.kill();
            panic!("{scheme}: shoal hung on a silent network (read timeout did not fire)");
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(status.success(), "{scheme} silent: {err}");
        assert!(std::fs::read(&out).unwrap() == body, "{scheme} silent");
    }
}
