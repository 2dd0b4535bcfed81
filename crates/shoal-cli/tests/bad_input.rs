//! Every bad input gets one line on stderr that names the problem, a
//! non-zero exit (2 for usage, 1 for failures), no panic, nothing written.
//! Each case runs the real binary; server cases use the real test servers.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

use common::*;

fn args(c: Option<Command>, a: &[&str]) -> Option<Run> {
    Some(run(with_args(c?, a)))
}

#[test]
fn unknown_scheme() {
    run(with_args(shoal(), &["ls", "ftp://bucket/key"]))
        .assert_one_line_error(2, &["unknown scheme 'ftp://'", "ftp://bucket/key"]);
}

#[test]
fn empty_bucket_name() {
    run(with_args(shoal(), &["cp", "gs:///key", "/tmp/x"]))
        .assert_one_line_error(2, &["empty bucket name"]);
    run(with_args(shoal(), &["ls", "s3://"])).assert_one_line_error(2, &["empty bucket name"]);
}

#[test]
fn unknown_flag_and_bad_values() {
    run(with_args(shoal(), &["ls", "--frobnicate", "gs://b"]))
        .assert_one_line_error(2, &["--frobnicate"]);
    run(with_args(shoal(), &["--workers", "0", "ls", "gs://b"]))
        .assert_one_line_error(2, &["out of range"]);
    run(with_args(shoal(), &["--workers", "-3", "ls", "gs://b"])).assert_one_line_error(2, &["-3"]);
    run(with_args(
        shoal(),
        &["--workers", "99999999999999999999999", "ls", "gs://b"],
    ))
    .assert_one_line_error(2, &["not a whole number"]);
    run(with_args(
        shoal(),
        &["cp", "--slice-size", "12XB", "a", "gs://b/k"],
    ))
    .assert_one_line_error(2, &["unknown size unit"]);
    run(with_args(
        shoal(),
        &["cp", "--part-size", "-1", "a", "gs://b/k"],
    ))
    .assert_one_line_error(2, &["-1"]);
    run(with_args(
        shoal(),
        &["cp", "--slices", "0", "a", "gs://b/k"],
    ))
    .assert_one_line_error(2, &["0"]);
    run(with_args(shoal(), &["--attempts", "1000", "ls", "gs://b"]))
        .assert_one_line_error(2, &["1000"]);
    run(with_args(shoal(), &["cp", "only-one-arg"])).assert_one_line_error(2, &["<DST>"]);
    run(with_args(shoal(), &["frobnicate"])).assert_one_line_error(2, &["frobnicate"]);
}

#[test]
fn verbs_that_need_an_object_say_so() {
    run(with_args(shoal(), &["stat", "gs://bucket"]))
        .assert_one_line_error(2, &["needs an object"]);
    run(with_args(shoal(), &["rm", "s3://bucket"])).assert_one_line_error(2, &["needs an object"]);
    run(with_args(shoal(), &["mb", "gs://bucket/key"])).assert_one_line_error(2, &["has no key"]);
    run(with_args(shoal(), &["mb", "./local"])).assert_one_line_error(2, &["needs gs://BUCKET"]);
    run(with_args(shoal(), &["cp", "-", "-"])).assert_one_line_error(2, &["stdin to stdout"]);
}

#[test]
fn bucket_that_does_not_exist() {
    let Some(r) = args(gcs(), &["ls", "gs://no-such-bucket-shoal/"]) else {
        return;
    };
    r.assert_one_line_error(1, &["list gs://no-such-bucket-shoal/", "404"]);
    let Some(r) = args(s3(), &["ls", "s3://no-such-bucket-shoal/x/"]) else {
        return;
    };
    r.assert_one_line_error(1, &["s3://no-such-bucket-shoal/", "404", "NoSuchBucket"]);
}

#[test]
fn object_that_does_not_exist_writes_nothing() {
    for (base, scheme) in [(gcs as fn() -> Option<Command>, "gs"), (s3, "s3")] {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let url = format!("{scheme}://{bucket}/missing/object");
        args(base(), &["stat", &url])
            .unwrap()
            .assert_one_line_error(1, &["stat", &url, "404"]);
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        args(base(), &["cp", &url, dest.to_str().unwrap()])
            .unwrap()
            .assert_one_line_error(1, &["download", &url, "404"]);
        assert!(files_in(dir.path()).is_empty(), "nothing written");
        args(base(), &["cat", &url])
            .unwrap()
            .assert_one_line_error(1, &[&url, "404"]);
    }
}

#[test]
fn local_source_that_does_not_exist() {
    run(with_args(
        shoal(),
        &["cp", "/nonexistent/shoal/src", "s3://b/k"],
    ))
    .assert_one_line_error(1, &["/nonexistent/shoal/src", "no such file or directory"]);
}

#[test]
fn local_source_that_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("secret");
    std::fs::write(&src, b"x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // root reads anything: drop to nobody so the permission check is real.
    let mut c = if unsafe_is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_shoal"),
        ]);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_EC2_METADATA_DISABLED", "true");
        c
    } else {
        shoal()
    };
    c.args(["cp", src.to_str().unwrap(), "s3://b/k"]);
    run(c).assert_one_line_error(1, &["secret", "permission denied"]);
}

fn unsafe_is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

#[test]
fn local_source_that_is_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    run(with_args(
        shoal(),
        &["cp", dir.path().to_str().unwrap(), "gs://b/k"],
    ))
    .assert_one_line_error(2, &["is a folder"]);
}

#[test]
fn destination_folder_that_does_not_exist() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let src = tempfile::NamedTempFile::new().unwrap();
    let url = format!("gs://{bucket}/k");
    assert_eq!(
        args(gcs(), &["cp", src.path().to_str().unwrap(), &url])
            .unwrap()
            .code,
        0
    );
    args(gcs(), &["cp", &url, "/nonexistent/shoal/dir/x"])
        .unwrap()
        .assert_one_line_error(1, &["/nonexistent/shoal/dir", "does not exist"]);
}

#[test]
fn key_that_cannot_be_a_local_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let dest = format!("{}/", dir.path().display());
    run(with_args(shoal(), &["cp", "gs://bucket/a/..", &dest]))
        .assert_one_line_error(1, &["'.' or '..' segment"]);
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn no_s3_credentials() {
    let Some(ep) = shoal_testkit_server("SHOAL_TEST_S3") else {
        return;
    };
    run(with_args(
        shoal(),
        &["--s3-endpoint-url", &ep, "ls", "s3://bucket/"],
    ))
    .assert_one_line_error(
        1,
        &[
            "s3://bucket/",
            "no AWS credentials found",
            "AWS_ACCESS_KEY_ID",
        ],
    );
}

#[test]
fn no_gcs_credentials() {
    let Some(ep) = shoal_testkit_server("SHOAL_TEST_GCS") else {
        return;
    };
    // An explicit endpoint without STORAGE_EMULATOR_HOST means "use ADC", which finds nothing.
    run(with_args(
        shoal(),
        &["--gcs-endpoint-url", &ep, "stat", "gs://bucket/key"],
    ))
    .assert_one_line_error(
        1,
        &[
            "gs://bucket/key",
            "Google credentials",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ],
    );
}

#[test]
fn wrong_s3_credentials_are_named_and_never_printed() {
    let Some(ep) = shoal_testkit_server("SHOAL_TEST_S3") else {
        return;
    };
    let secret = "Wr0ngSecretValue-DoNotPrint";
    let mut c = shoal();
    c.env("AWS_ACCESS_KEY_ID", "minioadmin")
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .args(["-vvv", "--s3-endpoint-url", &ep, "ls", "s3://bucket/"]);
    let r = run(c);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("403") && r.stderr.contains("SignatureDoesNotMatch"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains(secret) && !r.stdout.contains(secret),
        "secret leaked"
    );
    assert!(
        !r.stderr.contains("Signature="),
        "signature leaked: {}",
        r.stderr
    );
    let last = r.stderr.lines().last().unwrap();
    assert!(last.starts_with("shoal: list s3://bucket/"), "{last}");
}

#[test]
fn endpoint_that_refuses_connections() {
    // Port 9 (discard) has no listener on loopback here.
    let r = run(with_args(
        shoal(),
        &[
            "--attempts",
            "2",
            "--endpoint-url",
            "http://127.0.0.1:9",
            "--no-sign-request",
            "stat",
            "gs://b/k",
        ],
    ));
    r.assert_one_line_error(1, &["stat gs://b/k", "could not connect", "--endpoint-url"]);
    let mut c = shoal();
    c.env("AWS_ACCESS_KEY_ID", "k")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .args([
            "--attempts",
            "2",
            "--endpoint-url",
            "http://127.0.0.1:9",
            "ls",
            "s3://b/",
        ]);
    run(c).assert_one_line_error(1, &["s3://b/", "could not connect"]);
}

/// A server on loopback that answers every connection with `reply`.
fn garbage_server(reply: &'static [u8]) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().take(20) {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(reply);
        }
    });
    format!("http://{addr}")
}

#[test]
fn server_answering_garbage() {
    let ep = garbage_server(b"this is not http at all\r\n\r\n");
    run(with_args(
        shoal(),
        &[
            "--attempts",
            "2",
            "--endpoint-url",
            &ep,
            "--no-sign-request",
            "ls",
            "gs://b/",
        ],
    ))
    .assert_one_line_error(1, &["list gs://b/"]);
    let ep = garbage_server(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 15\r\nConnection: close\r\n\r\n<html>hi</html>");
    run(with_args(
        shoal(),
        &["--endpoint-url", &ep, "--no-sign-request", "ls", "gs://b/"],
    ))
    .assert_one_line_error(1, &["list gs://b/", "unexpected"]);
    run(with_args(
        shoal(),
        &["--endpoint-url", &ep, "--no-sign-request", "ls", "s3://b/"],
    ))
    .assert_one_line_error(1, &["s3://b/"]);
    run(with_args(
        shoal(),
        &[
            "--endpoint-url",
            &ep,
            "--no-sign-request",
            "stat",
            "s3://b/k",
        ],
    ))
    .assert_one_line_error(1, &["s3://b/k"]);
}
