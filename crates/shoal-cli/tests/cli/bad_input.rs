//! Every bad input gets one line on stderr that names the problem, a
//! non-zero exit (2 for usage, 1 for failures), no panic, nothing written.
//! Each case runs the real binary; server cases use the real test servers.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

use crate::common::*;

fn args(c: Option<Command>, a: &[&str]) -> Option<Run> {
    Some(run(with_args(c?, a)))
}

#[test]
fn unknown_scheme() {
    run(with_args(shoal(), &["ls", "ftp://bucket/key"]))
        .assert_one_line_error(2, &["unknown scheme 'ftp://'", "ftp://bucket/key"]);
}

/// Typos of a verb or a flag keep clap's "did you mean", on the one line.
#[test]
fn typos_say_what_was_meant() {
    run(with_args(shoal(), &["cpy", "a", "b"]))
        .assert_one_line_error(2, &["'cpy'", "a similar subcommand exists: 'cp'"]);
    run(with_args(shoal(), &["sync", "--delte", "a", "b"]))
        .assert_one_line_error(2, &["'--delte'", "a similar argument exists: '--delete'"]);
    run(with_args(shoal(), &["sync", "--dryrun", "a", "b"]))
        .assert_one_line_error(2, &["a similar argument exists: '--dry-run'"]);
}

/// A URL typed with one slash, or none, is not taken for a local path.
#[test]
fn a_url_missing_a_slash_says_what_was_meant() {
    run(with_args(shoal(), &["cp", "gs:/b/k", "."]))
        .assert_one_line_error(2, &["did you mean gs://b/k?"]);
    run(with_args(shoal(), &["ls", "s3:b"])).assert_one_line_error(2, &["did you mean s3://b?"]);
}

#[test]
fn empty_bucket_name() {
    run(with_args(shoal(), &["cp", "gs:///key", "/tmp/x"]))
        .assert_one_line_error(2, &["empty bucket name"]);
    // (`ls s3://` lists buckets; a key with no bucket is still refused.)
    run(with_args(shoal(), &["ls", "s3:///k"])).assert_one_line_error(2, &["empty bucket name"]);
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
fn bad_metadata_flags() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["--metadata", "novalue"], &["novalue", "KEY=VALUE"]),
        (&["--metadata", "=v"], &["metadata key"]),
        (&["--metadata", "a b=v"], &["metadata key 'a b'"]),
        (
            &["--metadata", "k=line\nbreak"],
            &["metadata k", "printable ASCII"],
        ),
        (
            &["--metadata", "k=1", "--metadata", "k=2"],
            &["--metadata k", "twice"],
        ),
        (
            &["--content-type", "text/html\r\nx-evil: 1"],
            &["--content-type", "printable ASCII"],
        ),
        (&["--cache-control", ""], &["--cache-control", "empty"]),
        (
            &["--content-disposition", "caf\u{e9}"],
            &["--content-disposition"],
        ),
        (
            &["--storage-class", "FROZEN"],
            &["unknown storage class 'FROZEN'"],
        ),
        (
            &["--storage-class", "NEARLINE"],
            &["not a s3:// storage class"],
        ),
    ];
    for (flags, needles) in cases {
        for verb in ["cp", "sync"] {
            let mut a = vec![verb];
            a.extend(*flags);
            a.extend(["/tmp", "s3://b/k"]);
            run(with_args(shoal(), &a)).assert_one_line_error(2, needles);
        }
    }
    // A class of the other store is refused for gs:// too.
    run(with_args(
        shoal(),
        &["cp", "--storage-class", "standard_ia", "/tmp/x", "gs://b/k"],
    ))
    .assert_one_line_error(2, &["not a gs:// storage class"]);
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

/// Each store's bucket-name rules, checked before any request.
#[test]
fn bucket_names_follow_their_stores_rules() {
    for (url, needle) in [
        ("s3://a_b", "no '_'"),
        ("s3://Abc", "no uppercase"),
        ("s3://xn--abc", "xn--"),
        ("s3://192.168.5.4", "IP address"),
        ("gs://Abc", "lowercase"),
        ("gs://googlebucket", "goog"),
        ("gs://ab", "3 to 63"),
    ] {
        run(with_args(shoal(), &["mb", url]))
            .assert_one_line_error(2, &["not a valid bucket name", needle]);
    }
}

#[test]
fn preconditions_refuse_what_they_cannot_mean() {
    let rows: &[(&[&str], &[&str])] = &[
        (
            &["cp", "f", "gs://b/k", "--if-match", "abc"],
            &["--if-match", "generation"],
        ),
        (
            &["cp", "f", "s3://b/k", "--if-generation-match", "3"],
            &["--if-generation-match", "ETag"],
        ),
        (
            &["cp", "gs://b/k", "local", "--if-generation-match", "3"],
            &["local path"],
        ),
        (
            &["cp", "-r", "dir", "gs://b/p/", "--if-generation-match", "3"],
            &["one object"],
        ),
        (
            &[
                "cp",
                "gs://b/*.txt",
                "gs://b/p/",
                "--if-generation-match",
                "3",
            ],
            &["one object"],
        ),
        (
            &["cp", "f", "gs://b/k", "--if-generation-match=-2"],
            &["0 or more"],
        ),
        (
            &["cp", "f", "gs://b/k", "--if-generation-match", "soon"],
            &["--if-generation-match"],
        ),
        (
            &[
                "cp",
                "f",
                "gs://b/k",
                "--if-generation-match",
                "0",
                "--no-clobber",
            ],
            &["choose one"],
        ),
        (&["cp", "f", "-", "--if-generation-match", "1"], &["stdout"]),
        (&["cp", "f", "s3://b/k", "--if-match", ""], &["empty"]),
        (
            &[
                "cp",
                "f",
                "s3://b/k",
                "--if-match",
                "a",
                "--if-generation-match",
                "1",
            ],
            &["cannot be used with"],
        ),
        (
            &["cp", "f", "gs://b/dir/", "--if-generation-match", "1"],
            &["not one object"],
        ),
        (
            &["mv", "f", "s3://b/k", "--if-generation-match", "1"],
            &["mv --if-generation-match"],
        ),
        (
            &["rm", "s3://b/a", "s3://b/b", "--if-match", "x"],
            &["one object at a time"],
        ),
        (
            &["rm", "-r", "s3://b/p/", "--if-match", "x"],
            &["one object"],
        ),
        (
            &["rm", "gs://b/k", "--if-match", "x"],
            &["--if-generation-match"],
        ),
        (&["rm", "./local", "--if-match", "x"], &["local path"]),
    ];
    for (args, words) in rows {
        run(with_args(shoal(), args)).assert_one_line_error(2, words);
    }
}

#[test]
fn presign_rb_and_bucket_listing_refuse_bad_input() {
    for bad in ["0", "0s", "-1h", "8d", "604801", "soon", "1.5h", ""] {
        run(with_args(
            shoal(),
            &["presign", "--expires", bad, "s3://b/k"],
        ))
        .assert_one_line_error(2, &["--expires"]);
    }
    run(with_args(
        shoal(),
        &["presign", "--method", "PATCH", "s3://b/k"],
    ))
    .assert_one_line_error(2, &["--method"]);
    for (flag, bad) in [
        ("--header", "no-separator"),
        ("--header", "bad name=v"),
        ("--query-param", "=v"),
    ] {
        run(with_args(shoal(), &["presign", flag, bad, "s3://b/k"]))
            .assert_one_line_error(2, &[flag]);
    }
    run(with_args(shoal(), &["presign", "gs://bucket"]))
        .assert_one_line_error(2, &["needs an object"]);
    run(with_args(shoal(), &["signurl", "./local"]))
        .assert_one_line_error(2, &["needs gs://BUCKET/KEY"]);
    run(with_args(shoal(), &["presign", "s3://b/logs/*.gz"])).assert_one_line_error(2, &["glob"]);
    run(with_args(shoal(), &["presign"])).assert_one_line_error(2, &["<URL>"]);
    // Signing needs a key; none is a one-line error naming what to set.
    run(with_args(shoal(), &["presign", "gs://b/k"]))
        .assert_one_line_error(1, &["presign gs://b/k", "GOOGLE_APPLICATION_CREDENTIALS"]);
    run(with_args(
        shoal(),
        &["presign", "--no-sign-request", "s3://b/k"],
    ))
    .assert_one_line_error(1, &["presign s3://b/k", "needs credentials"]);

    run(with_args(shoal(), &["rb", "gs://bucket/prefix"]))
        .assert_one_line_error(2, &["named exactly", "gs://bucket", "rm -r"]);
    run(with_args(shoal(), &["rb", "s3://bucket/*"])).assert_one_line_error(2, &["named exactly"]);
    run(with_args(shoal(), &["rb", "./local"])).assert_one_line_error(2, &["needs gs://BUCKET"]);
    run(with_args(shoal(), &["rb"])).assert_one_line_error(2, &["<URL>"]);

    run(with_args(shoal(), &["ls", "-r", "s3://"])).assert_one_line_error(2, &["ls of buckets"]);
    run(with_args(shoal(), &["--request-payer=me", "ls", "s3://b"]))
        .assert_one_line_error(2, &["--request-payer"]);
    run(with_args(
        shoal(),
        &["--billing-project", "", "ls", "gs://b"],
    ))
    .assert_one_line_error(2, &["--billing-project"]);
    run(with_args(
        shoal(),
        &["--billing-project", "a b", "ls", "gs://b"],
    ))
    .assert_one_line_error(2, &["not a project id"]);
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
    // A tree copied into it fails once, up front, not once per file.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        std::fs::write(dir.path().join(format!("f{i}")), b"x").unwrap();
    }
    let src = dir.path().to_str().unwrap();
    for (base, url) in [
        (
            gcs as fn() -> Option<Command>,
            "gs://no-such-bucket-shoal/up/",
        ),
        (s3, "s3://no-such-bucket-shoal/up/"),
        (s3, "s3://ab/up/"),
    ] {
        let Some(r) = args(base(), &["cp", "-r", src, url]) else {
            return;
        };
        r.assert_one_line_error(1, &["cp -r", "cannot be written", "nothing was copied"]);
    }
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
fn destination_folders_are_made_and_a_file_in_the_way_refused() {
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
    // Missing folders are made, as gcloud, aws and s5cmd make them.
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("new/deep/x.csv");
    let r = args(gcs(), &["cp", &url, deep.to_str().unwrap()]).unwrap();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(deep.is_file());
    // A file where a folder must be is refused, nothing written.
    let under = src.path().join("sub/x");
    args(gcs(), &["cp", &url, under.to_str().unwrap()])
        .unwrap()
        .assert_one_line_error(2, &["sub/x", "not a"]);
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
fn rejected_gcs_refresh_token_is_named_and_never_printed() {
    let Some(ep) = shoal_testkit_server("SHOAL_TEST_GCS") else {
        return;
    };
    // A token endpoint that answers as Google's does for a revoked or
    // expired refresh token (the authorized-user credential of ADC).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let token_uri = format!("http://{}/token", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let _ = sock.read(&mut buf);
            let body = r#"{"error":"invalid_grant","error_description":"Token has been expired or revoked."}"#;
            let _ = write!(
                sock,
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let adc = dir.path().join("adc.json");
    let refresh = "1//RefreshTokenDoNotPrint";
    std::fs::write(
        &adc,
        format!(
            r#"{{"type":"authorized_user","client_id":"c","client_secret":"s3cr3tDoNotPrint","refresh_token":"{refresh}","token_uri":"{token_uri}"}}"#
        ),
    )
    .unwrap();
    let mut c = shoal();
    c.env("GOOGLE_APPLICATION_CREDENTIALS", &adc).args([
        "-vvv",
        "--attempts",
        "1",
        "--gcs-endpoint-url",
        &ep,
        "ls",
        "gs://bucket/",
    ]);
    let r = run(c);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("shoal: list gs://bucket/"), "{last}");
    assert!(
        last.contains("access token") && last.contains("invalid_grant"),
        "names the refusal: {last}"
    );
    for secret in [refresh, "s3cr3tDoNotPrint"] {
        assert!(
            !r.stderr.contains(secret) && !r.stdout.contains(secret),
            "{secret} leaked"
        );
    }
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

#[test]
fn endpoint_host_that_does_not_exist_is_not_retried() {
    // `.invalid` never resolves (RFC 2606): a wrong endpoint, which no
    // retry fixes; the error comes at once, not after the retry schedule.
    for (scheme, url) in [("gs", "gs://b/k"), ("s3", "s3://b/k")] {
        let mut c = shoal();
        c.env("AWS_ACCESS_KEY_ID", "k")
            .env("AWS_SECRET_ACCESS_KEY", "s")
            .args(["-vv", "--endpoint-url", "http://no-such-host.invalid:9000"])
            .args(["--no-sign-request", "stat", url]);
        let r = run(c);
        assert_eq!(r.code, 1, "{scheme}: {}", r.stderr);
        let last = r.stderr.lines().last().unwrap_or_default();
        assert!(
            last.contains(url) && last.contains("could not connect"),
            "{last}"
        );
        if last.contains("Temporary failure") {
            continue; // no resolver to ask here: that one is retried
        }
        assert!(!r.stderr.contains("retrying"), "{scheme}: {}", r.stderr);
    }
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

/// One bad input: what to run, and what the single line must name.
struct Case {
    name: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    /// Needs this test server (`SHOAL_TEST_GCS`, `SHOAL_TEST_S3`).
    server: Option<&'static str>,
    code: i32,
    needles: Vec<String>,
}

fn case(name: &'static str, args: &[&str], code: i32, needles: &[&str]) -> Case {
    Case {
        name,
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        server: None,
        code,
        needles: needles.iter().map(|s| s.to_string()).collect(),
    }
}

impl Case {
    fn env(mut self, k: &'static str, v: &str) -> Self {
        self.env.push((k, v.to_owned()));
        self
    }
    fn on(mut self, server: &'static str) -> Self {
        self.server = Some(server);
        self
    }
}

/// The table: malformed URLs, invalid globs, unknown flags and values,
/// huge and negative numbers, keys that cannot be local names, missing,
/// wrong and expired credentials, buckets and objects that do not exist,
/// unreachable endpoints, across every verb. `{S3}`/`{GCS}` in an argument
/// or variable become the test server's address, `{DIR}` the case's own
/// empty working folder (which must still be empty afterwards).
fn table() -> Vec<Case> {
    let s3_env = |c: Case| {
        c.on("SHOAL_TEST_S3")
            .env("AWS_ENDPOINT_URL", "{S3}")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "minioadmin")
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
    };
    let gcs_env = |c: Case| c.on("SHOAL_TEST_GCS").env("STORAGE_EMULATOR_HOST", "{GCS}");
    vec![
        // URLs.
        case(
            "unknown scheme",
            &["ls", "ftp://bucket/key"],
            2,
            &["unknown scheme 'ftp://'"],
        ),
        case(
            "empty gs bucket",
            &["cp", "gs:///key", "{DIR}/x"],
            2,
            &["empty bucket name"],
        ),
        case(
            "empty s3 bucket",
            &["ls", "s3:///key"],
            2,
            &["empty bucket name"],
        ),
        case(
            "stat of a bucket",
            &["stat", "gs://bucket"],
            2,
            &["needs an object"],
        ),
        case(
            "rm of a bucket",
            &["rm", "s3://bucket"],
            2,
            &["needs an object"],
        ),
        case(
            "mb with a key",
            &["mb", "gs://bucket/key"],
            2,
            &["has no key"],
        ),
        case(
            "mb of a local path",
            &["mb", "./local"],
            2,
            &["needs gs://BUCKET"],
        ),
        case(
            "stdin to stdout",
            &["cp", "-", "-"],
            2,
            &["stdin to stdout"],
        ),
        case(
            "tree to stdout",
            &["cp", "-r", "gs://b/", "-"],
            2,
            &["not a tree"],
        ),
        // Filters, --no-clobber, sync's comparisons.
        case(
            "invalid glob in --include",
            &["ls", "-r", "--include", "a[", "gs://b/"],
            2,
            &["--include \"a[\"", "never closed"],
        ),
        case(
            "invalid glob in sync --exclude",
            &["sync", "--exclude", "[z-a]", "{DIR}", "gs://b/x"],
            2,
            &["--exclude \"[z-a]\"", "invalid character range"],
        ),
        case(
            "invalid glob in du --exclude",
            &["du", "--exclude", "x/[a/b]", "gs://b/"],
            2,
            &["--exclude", "cannot match '/'"],
        ),
        case(
            "empty --include",
            &["rm", "-r", "--include", "", "gs://b/p/"],
            2,
            &["--include \"\"", "empty pattern"],
        ),
        case(
            "--size-only with --checksum",
            &["sync", "--size-only", "--checksum", "{DIR}", "gs://b/x"],
            2,
            &["--size-only", "--checksum"],
        ),
        case(
            "cp -n of one file",
            &["cp", "-n", "gs://b/k", "{DIR}/k"],
            2,
            &["--dry-run", "--no-clobber"],
        ),
        case(
            "filters on one file",
            &["cp", "--exclude", "*.tmp", "gs://b/k", "{DIR}/k"],
            2,
            &["--include/--exclude", "cp -r"],
        ),
        case(
            "ls filters without -r",
            &["ls", "--include", "*.txt", "gs://b/"],
            2,
            &["ls -r"],
        ),
        case(
            "rm filters on named objects",
            &["rm", "--exclude", "*.txt", "gs://b/k"],
            2,
            &["rm -r"],
        ),
        case(
            "sync --size-only with -c",
            &["sync", "-u", "-c", "--size-only", "{DIR}", "gs://b/x"],
            2,
            &["--size-only"],
        ),
        case(
            "endpoint without host",
            &[
                "--no-sign-request",
                "--endpoint-url",
                "http://",
                "ls",
                "s3://bucket/",
            ],
            2,
            &["empty host"],
        ),
        case(
            "endpoint bad IPv6",
            &[
                "--no-sign-request",
                "--endpoint-url",
                "http://[::1",
                "stat",
                "s3://bucket/k",
            ],
            2,
            &["invalid IPv6"],
        ),
        case(
            "endpoint not a URL",
            &[
                "--attempts",
                "1",
                "--no-sign-request",
                "--endpoint-url",
                "not-a-url",
                "ls",
                "gs://bucket/",
            ],
            1,
            &["gs://bucket/", "--endpoint-url"],
        ),
        case(
            "endpoint refusing",
            &[
                "--attempts",
                "1",
                "--no-sign-request",
                "--endpoint-url",
                "http://127.0.0.1:9",
                "stat",
                "gs://b/k",
            ],
            1,
            &["could not connect"],
        ),
        case(
            "invalid s3 bucket name",
            &["ls", "s3://Bad_Bucket!/"],
            2,
            &["invalid bucket name"],
        ),
        // Globs.
        case(
            "glob class never closed",
            &["ls", "gs://b/a[b"],
            2,
            &["never closed"],
        ),
        case(
            "glob empty class",
            &["ls", "gs://b/a[]"],
            2,
            &["never closed"],
        ),
        case("glob reversed range", &["rm", "gs://b/a[z-a]"], 2, &["z-a"]),
        // Flags and values.
        case(
            "unknown flag",
            &["ls", "--frobnicate", "gs://b"],
            2,
            &["--frobnicate"],
        ),
        case("unknown verb", &["frobnicate"], 2, &["frobnicate"]),
        case(
            "missing destination",
            &["cp", "only-one-arg"],
            2,
            &["<DST>"],
        ),
        case(
            "missing sync destination",
            &["sync", "gs://b/x"],
            2,
            &["<DST>"],
        ),
        case("cat without URLs", &["cat"], 2, &["<URLS>"]),
        case("extra argument", &["stat", "gs://b/x", "y"], 2, &["'y'"]),
        case(
            "workers zero",
            &["--workers", "0", "ls", "gs://b"],
            2,
            &["out of range"],
        ),
        case(
            "workers negative",
            &["--workers", "-3", "ls", "gs://b"],
            2,
            &["-3"],
        ),
        case(
            "workers huge",
            &["--workers", "99999999999999999999999", "ls", "gs://b"],
            2,
            &["not a whole number"],
        ),
        case(
            "workers not a number",
            &["--workers", "1e3", "du", "gs://b"],
            2,
            &["1e3"],
        ),
        case(
            "slice size unit",
            &["cp", "--slice-size", "12XB", "a", "gs://b/k"],
            2,
            &["unknown size unit"],
        ),
        case(
            "slice size zero",
            &["cp", "--slice-size", "0", "a", "gs://b/k"],
            2,
            &["out of range"],
        ),
        case(
            "part size negative",
            &["cp", "--part-size", "-1", "a", "gs://b/k"],
            2,
            &["-1"],
        ),
        case(
            "part size huge",
            &[
                "cp",
                "--part-size",
                "99999999999999999999TiB",
                "a",
                "gs://b/k",
            ],
            2,
            &["out of range"],
        ),
        case(
            "slices zero",
            &["cp", "--slices", "0", "a", "gs://b/k"],
            2,
            &["0"],
        ),
        case(
            "slices huge",
            &["cp", "--slices", "10001", "a", "gs://b/k"],
            2,
            &["10001"],
        ),
        case(
            "rate limit zero",
            &["cp", "--rate-limit", "0", "a", "gs://b/k"],
            2,
            &["--rate-limit", "out of range"],
        ),
        case(
            "rate limit negative",
            &["sync", "--rate-limit", "-5MiB", "a", "gs://b/k"],
            2,
            &["--rate-limit", "-5MiB"],
        ),
        case(
            "rate limit garbage",
            &["run", "--rate-limit", "fast", "cmds.txt"],
            2,
            &["--rate-limit", "'fast' is not a size"],
        ),
        case(
            "rate limit unit",
            &["cat", "--rate-limit", "10XB/s", "gs://b/k"],
            2,
            &["unknown size unit"],
        ),
        case(
            "rate limit huge",
            &["cp", "--rate-limit", "2TiB", "a", "gs://b/k"],
            2,
            &["out of range"],
        ),
        case(
            "requests per second zero",
            &["cp", "--max-requests-per-sec", "0", "a", "gs://b/k"],
            2,
            &["--max-requests-per-sec", "out of range"],
        ),
        case(
            "requests per second negative",
            &["sync", "--max-requests-per-sec", "-1", "a", "gs://b/k"],
            2,
            &["--max-requests-per-sec", "-1"],
        ),
        case(
            "requests per second fraction",
            &["bench", "read", "--max-requests-per-sec", "0.5", "gs://b/k"],
            2,
            &["not a whole number"],
        ),
        case(
            "requests per second huge",
            &[
                "run",
                "--max-requests-per-sec",
                "99999999999999999999999",
                "f",
            ],
            2,
            &["not a whole number"],
        ),
        case(
            "rate limit on a verb that moves nothing",
            &["ls", "--rate-limit", "1MiB", "gs://b"],
            2,
            &["--rate-limit"],
        ),
        case(
            "attempts huge",
            &["--attempts", "1000", "ls", "gs://b"],
            2,
            &["1000"],
        ),
        case(
            "attempts negative",
            &["--attempts", "-1", "ls", "gs://b"],
            2,
            &["-1"],
        ),
        case(
            "read timeout zero",
            &["--read-timeout", "0", "ls", "gs://b"],
            2,
            &["--read-timeout"],
        ),
        case(
            "read timeout huge",
            &["--read-timeout", "99999999999", "ls", "gs://b"],
            2,
            &["99999999999"],
        ),
        case(
            "connect timeout zero",
            &["--connect-timeout", "0", "ls", "gs://b"],
            2,
            &["--connect-timeout"],
        ),
        case(
            "addressing value",
            &["--s3-addressing", "sideways", "ls", "s3://b"],
            2,
            &["sideways"],
        ),
        case(
            "du grouping",
            &["du", "--group-by", "nonsense", "gs://b/"],
            2,
            &["nonsense"],
        ),
        case(
            "du negative depth",
            &["du", "--group-by", "prefix:-1", "gs://b/"],
            2,
            &["prefix:-1"],
        ),
        case(
            "ls parallel zero",
            &["ls", "--parallel", "0", "gs://b/"],
            2,
            &["--parallel"],
        ),
        // Keys that cannot be local names (docs/keys.md).
        case(
            "key with ..",
            &["cp", "gs://bucket/a/..", "{DIR}/"],
            1,
            &["'.' or '..' segment"],
        ),
        case(
            "key with newline",
            &["cp", "gs://bucket/a\nb", "{DIR}/"],
            1,
            &["'\\n'"],
        ),
        case(
            "key with tab",
            &["cp", "gs://bucket/a\tb", "{DIR}/"],
            1,
            &["'\\t'"],
        ),
        case(
            "key with backslash",
            &["cp", "gs://bucket/a\\..\\b", "{DIR}/"],
            1,
            &["'\\\\'"],
        ),
        // Local sources.
        case(
            "local source missing",
            &["cp", "/nonexistent/shoal/src", "s3://b/k"],
            1,
            &["no such file or directory"],
        ),
        case(
            "local source is a folder",
            &["cp", "{DIR}", "gs://b/k"],
            2,
            &["is a folder"],
        ),
        case(
            "sync --max-delete not a number",
            &[
                "sync",
                "--delete",
                "--max-delete",
                "lots",
                "{DIR}",
                "gs://b/k",
            ],
            2,
            &["--max-delete", "lots"],
        ),
        case(
            "sync --max-delete without --delete",
            &["sync", "--max-delete", "3", "{DIR}", "gs://b/k"],
            2,
            &["--delete"],
        ),
        case(
            "sync into its own folder",
            &["sync", "{DIR}", "{DIR}/sub"],
            2,
            &["inside the source", "nothing was done"],
        ),
        case(
            "sync into a file",
            &["sync", "{DIR}", "{DIR}/../bad-adc.json"],
            2,
            &["is a file, not a folder"],
        ),
        gcs_env(case(
            "bench read of a missing bucket",
            &["bench", "read", "gs://no-such-bucket-shoal/k"],
            1,
            &["404", "`shoal ls gs://no-such-bucket-shoal/`"],
        )),
        gcs_env(case(
            "ls of a missing bucket",
            &["ls", "gs://no-such-bucket-shoal/p/"],
            1,
            &["404", "the bucket does not exist"],
        )),
        s3_env(case(
            "upload into a missing bucket",
            &["cp", "{DIR}/../bad-adc.json", "s3://no-such-bucket-shoal/k"],
            1,
            &["NoSuchBucket", "the bucket does not exist"],
        )),
        case(
            "run file writing one destination twice",
            &["run", "{DIR}/../two-writers.txt"],
            2,
            &[
                "two-writers.txt:3",
                "out is written here and by line 1",
                "nothing was run",
            ],
        ),
        case(
            "run file deleting a bucket",
            &["run", "{DIR}/../rm-bucket.txt"],
            2,
            &[
                "rm-bucket.txt:2: s3://bucket/ names a bucket, not an object",
                "nothing was run",
            ],
        ),
        case(
            "run file deleting what another line reads",
            &["run", "{DIR}/../read-deleted.txt"],
            2,
            &[
                "read-deleted.txt:2: gs://b/p/x is read here and deleted by line 1 (as part of gs://b/p/*)",
                "nothing was run",
            ],
        ),
        case(
            "SHOAL_THREADS too many",
            &["ls", "gs://b/"],
            2,
            &["SHOAL_THREADS=\"100000\"", "1 to 1024"],
        )
        .env("SHOAL_THREADS", "100000"),
        case(
            "SHOAL_THREADS not a number",
            &["ls", "gs://b/"],
            2,
            &["SHOAL_THREADS=\"abc\"", "1 to 1024"],
        )
        .env("SHOAL_THREADS", "abc"),
        case(
            "SHOAL_THREADS zero",
            &["ls", "gs://b/"],
            2,
            &["SHOAL_THREADS=\"0\""],
        )
        .env("SHOAL_THREADS", "0"),
        case(
            "SHOAL_LOG malformed",
            &["ls", "gs://b/"],
            2,
            &["SHOAL_LOG=", "tracing filter"],
        )
        .env("SHOAL_LOG", "shoal=["),
        case(
            "stat of a bucket with a trailing slash",
            &["stat", "gs://bkt/"],
            2,
            &["needs an object", "write gs://bkt/KEY"],
        ),
        case(
            "cat of a prefix",
            &["cat", "gs://bkt/logs/"],
            2,
            &["names a folder", "gs://bkt/logs/**"],
        ),
        case(
            "bench read of a prefix",
            &["bench", "read", "s3://bkt/logs/"],
            2,
            &["names a folder", "s3://bkt/logs/**"],
        ),
        case(
            "mb with an invalid bucket name",
            &["mb", "gs://Bad@Name"],
            2,
            &["not a valid bucket name"],
        ),
        case(
            "sync source missing",
            &["sync", "/nonexistent/shoal/src", "gs://b/x"],
            2,
            &["must be a folder"],
        ),
        case(
            "run plan missing",
            &["run", "/nonexistent/shoal/plan"],
            1,
            &["no such file"],
        ),
        // Servers: what does not exist, credentials.
        gcs_env(case(
            "gs bucket missing",
            &["ls", "gs://no-such-bucket-shoal/"],
            1,
            &["404"],
        )),
        s3_env(case(
            "s3 bucket missing",
            &["ls", "s3://no-such-bucket-shoal/x/"],
            1,
            &["NoSuchBucket"],
        )),
        gcs_env(case(
            "gs object missing (stat)",
            &["stat", "gs://no-such-bucket-shoal/k"],
            1,
            &["404"],
        )),
        s3_env(case(
            "s3 object missing (cp)",
            &["cp", "s3://no-such-bucket-shoal/k", "{DIR}/out"],
            1,
            &["404"],
        )),
        gcs_env(case(
            "gs object missing (cat)",
            &["cat", "gs://no-such-bucket-shoal/k"],
            1,
            &["404"],
        )),
        s3_env(case(
            "s3 sync from missing bucket",
            &["sync", "s3://no-such-bucket-shoal/p/", "{DIR}"],
            1,
            &["NoSuchBucket"],
        )),
        case(
            "no s3 credentials",
            &["--s3-endpoint-url", "{S3}", "ls", "s3://bucket/"],
            1,
            &["no AWS credentials found"],
        )
        .on("SHOAL_TEST_S3"),
        s3_env(case(
            "wrong s3 secret",
            &["ls", "s3://bucket/"],
            1,
            &["SignatureDoesNotMatch"],
        ))
        .env("AWS_SECRET_ACCESS_KEY", "wrong-secret"),
        s3_env(case(
            "s3 permission denied (anonymous request to a private bucket)",
            &["--no-sign-request", "ls", "s3://some-private-bucket/"],
            1,
            &["403", "AccessDenied"],
        )),
        s3_env(case(
            "expired s3 session token",
            &["ls", "s3://some-bucket/"],
            1,
            &["403"],
        ))
        .env("AWS_SESSION_TOKEN", "expired-token"),
        case(
            "no gcs credentials",
            &["--gcs-endpoint-url", "{GCS}", "stat", "gs://bucket/key"],
            1,
            &["Google credentials"],
        )
        .on("SHOAL_TEST_GCS"),
        case(
            "gcs credentials file missing",
            &["--gcs-endpoint-url", "{GCS}", "ls", "gs://bucket/"],
            1,
            &[
                "could not load Google credentials",
                "/nonexistent/shoal.json",
            ],
        )
        .on("SHOAL_TEST_GCS")
        .env("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/shoal.json"),
        case(
            "gcs credentials file malformed",
            &["--gcs-endpoint-url", "{GCS}", "ls", "gs://bucket/"],
            1,
            &["could not load Google credentials", "parse"],
        )
        .on("SHOAL_TEST_GCS")
        .env("GOOGLE_APPLICATION_CREDENTIALS", "{DIR}/../bad-adc.json"),
        case(
            "gcs token endpoint down",
            &[
                "--attempts",
                "1",
                "--gcs-endpoint-url",
                "{GCS}",
                "ls",
                "gs://bucket/",
            ],
            1,
            &["access token"],
        )
        .on("SHOAL_TEST_GCS")
        .env("GOOGLE_APPLICATION_CREDENTIALS", "{DIR}/../dead-adc.json"),
        // Proxies and CA files: named where they were given, exit 2, before
        // any request (the endpoints below are never asked).
        case(
            "ca bundle flag names a missing file",
            &[
                "--ca-bundle",
                "{DIR}/../no-such-ca.pem",
                "ls",
                "s3://bucket/",
            ],
            2,
            &["cannot read CA file", "--ca-bundle", "no-such-ca.pem"],
        )
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        case(
            "ca bundle is a folder",
            &["--ca-bundle", "{DIR}", "ls", "gs://bucket/"],
            2,
            &["cannot read CA file", "--ca-bundle", "{DIR}"],
        )
        .env("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9"),
        case(
            "SSL_CERT_FILE holds no certificate",
            &["ls", "gs://bucket/"],
            2,
            &["no PEM certificate", "SSL_CERT_FILE", "bad-adc.json"],
        )
        .env("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
        .env("SSL_CERT_FILE", "{DIR}/../bad-adc.json"),
        case(
            "AWS_CA_BUNDLE holds no certificate",
            &["ls", "s3://bucket/"],
            2,
            &["no PEM certificate", "AWS_CA_BUNDLE", "bad-adc.json"],
        )
        .env("AWS_ENDPOINT_URL", "https://127.0.0.1:9")
        .env("AWS_CA_BUNDLE", "{DIR}/../bad-adc.json"),
        case(
            "proxy variable with a bad port",
            &["ls", "s3://bucket/"],
            2,
            &["not a usable proxy URL", "HTTPS_PROXY", "proxy.corp"],
        )
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://proxy.corp:99999"),
        case(
            "proxy flag with an unsupported scheme, password hidden",
            &[
                "--proxy",
                "ftp://alice:hunter2@proxy.corp",
                "ls",
                "gs://bucket/",
            ],
            2,
            &[
                "unsupported proxy scheme 'ftp://'",
                "--proxy",
                "***@proxy.corp",
            ],
        )
        .env("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9"),
        case(
            "proxy flag without a host",
            &["--proxy", "http://:3128", "ls", "s3://bucket/"],
            2,
            &["not a usable proxy URL", "no host"],
        )
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ]
}

#[test]
fn bad_input_table() {
    let cases = table();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failed = Vec::new();
    for c in cases {
        let ep = match c.server {
            Some(var) => match shoal_testkit_server(var) {
                Some(ep) => Some(ep),
                None => continue,
            },
            None => None,
        };
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("work");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(root.path().join("bad-adc.json"), "{nope").unwrap();
        std::fs::write(
            root.path().join("two-writers.txt"),
            format!(
                "cp gs://b/x {0}/out\n# a comment\ncp gs://b/y {0}/out\n",
                dir.display()
            ),
        )
        .unwrap();
        std::fs::write(
            root.path().join("rm-bucket.txt"),
            "rm gs://b/x\nrm s3://bucket/\n",
        )
        .unwrap();
        std::fs::write(
            root.path().join("read-deleted.txt"),
            format!("rm 'gs://b/p/*'\ncp gs://b/p/x {}/x\n", dir.display()),
        )
        .unwrap();
        std::fs::write(
            root.path().join("dead-adc.json"),
            r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r","token_uri":"http://127.0.0.1:9/token"}"#,
        )
        .unwrap();
        let fill = |s: &str| {
            let s = s.replace("{DIR}", dir.to_str().unwrap());
            match &ep {
                Some(ep) => s.replace("{S3}", ep).replace("{GCS}", ep),
                None => s,
            }
        };
        let mut cmd = shoal();
        cmd.current_dir(&dir);
        for (k, v) in &c.env {
            cmd.env(k, fill(v));
        }
        cmd.args(c.args.iter().map(|a| fill(a)));
        let r = run(cmd);
        let needles: Vec<String> = c.needles.iter().map(|n| fill(n)).collect();
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.assert_one_line_error(c.code, &needles);
            assert!(r.stdout.is_empty(), "nothing on stdout: {}", r.stdout);
            assert!(
                files_in(&dir).is_empty(),
                "nothing written: {:?}",
                files_in(&dir)
            );
        }));
        if let Err(e) = outcome {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", c.name));
        }
    }
    assert!(
        failed.is_empty(),
        "{} case(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// A proxy URL that cannot be used is echoed back so the user can see which
/// one, but never with its password.
#[test]
fn bad_proxy_url_is_named_without_its_password() {
    for (var, url) in [
        ("HTTPS_PROXY", "ftp://alice:hunter2@proxy.corp:21"),
        ("HTTP_PROXY", "http://alice:hunter2@proxy.corp:99999"),
        ("ALL_PROXY", "socks5://alice:hunter2@proxy.corp"),
    ] {
        let mut c = with_args(shoal(), &["ls", "s3://bucket/"]);
        c.env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
            .env(var, url);
        let r = run(c);
        r.assert_one_line_error(2, &[var, "proxy.corp"]);
        assert!(!r.stderr.contains("hunter2"), "{}", r.stderr);
    }
}

/// A sync whose source cannot be listed must not take the empty listing
/// for "the source has nothing": with --delete that emptied the
/// destination.
#[test]
fn sync_delete_from_an_unlistable_source_deletes_nothing() {
    for (base, scheme) in [(gcs as fn() -> Option<Command>, "gs"), (s3, "s3")] {
        let Some(c) = base() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), b"precious").unwrap();
        let src = format!("{scheme}://no-such-bucket-shoal/p/");
        let r = run(with_args(
            c,
            &["sync", "--delete", &src, dir.path().to_str().unwrap()],
        ));
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains("nothing deleted"), "{}", r.stderr);
        assert_eq!(
            files_in(dir.path()),
            ["keep.txt"],
            "{scheme}: nothing deleted"
        );
    }
}

/// `mv` refuses what it cannot do safely before it copies or deletes
/// anything: a prefix without -r, a folder without -r, an object onto
/// itself, stdin or stdout, a tree moved into itself.
#[test]
fn mv_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, b"x").unwrap();
    let (fs, ds) = (f.to_str().unwrap(), dir.path().to_str().unwrap());
    run(with_args(shoal(), &["mv", "gs://b/prefix/", "/tmp/x"]))
        .assert_one_line_error(2, &["gs://b/prefix/", "mv -r"]);
    run(with_args(shoal(), &["mv", ds, "gs://b/k"]))
        .assert_one_line_error(2, &["is a folder", "mv -r"]);
    run(with_args(shoal(), &["mv", "gs://b/k", "gs://b/k"]))
        .assert_one_line_error(2, &["same object"]);
    run(with_args(shoal(), &["mv", "s3://b/d/k", "s3://b/d/"]))
        .assert_one_line_error(2, &["same object"]);
    run(with_args(shoal(), &["mv", fs, ds])).assert_one_line_error(2, &["same object"]);
    run(with_args(shoal(), &["mv", "-", "gs://b/k"])).assert_one_line_error(2, &["stdin"]);
    run(with_args(shoal(), &["mv", "gs://b/k", "-"])).assert_one_line_error(2, &["stdout"]);
    run(with_args(
        shoal(),
        &["mv", "-r", "gs://b/a", "gs://b/a/sub/"],
    ))
    .assert_one_line_error(2, &["mv -r"]);
    assert!(f.exists(), "nothing deleted");
}

/// `cp --help` (and `cp -h`) shows cp's own options first, the flags
/// every verb takes apart under their own heading.
#[test]
fn verb_help_sets_its_own_options_apart_from_the_global_ones() {
    for flag in ["--help", "-h"] {
        let r = run(with_args(shoal(), &["cp", flag]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let (own, global) = r
            .stdout
            .split_once("Global options:")
            .unwrap_or_else(|| panic!("a Global options heading: {}", r.stdout));
        for f in ["--recursive", "--no-clobber", "--part-size"] {
            assert!(own.contains(f), "cp's own {f}: {own}");
        }
        for f in ["--endpoint-url", "--workers", "--quiet"] {
            assert!(!own.contains(f), "{f} is not cp's own: {own}");
        }
        for f in ["--endpoint-url", "--workers", "--quiet"] {
            assert!(global.contains(f), "{f} under Global options: {global}");
        }
    }
}

/// A file size limit (`ulimit -f`): the write fails with "file too
/// large", not a SIGXFSZ that kills shoal (exit 153) and leaves its
/// working files; exit 1 and no `.shoal-tmp-*` left, for one download and
/// for a tree.
#[test]
fn a_file_size_limit_fails_the_write_and_leaves_nothing() {
    use std::os::unix::process::CommandExt;
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..4 {
        std::fs::write(src.join(format!("big{i}.bin")), pattern(3 << 20, i)).unwrap();
    }
    let r = run(with_args(
        s3().unwrap(),
        &[
            "-q",
            "cp",
            "-r",
            src.to_str().unwrap(),
            &format!("s3://{bucket}/"),
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let limited = |args: &[&str]| {
        let mut c = with_args(s3().unwrap(), args);
        // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
        unsafe {
            c.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 256 << 10,
                    rlim_max: 256 << 10,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        run(c)
    };
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let one = format!("{}/one.bin", out.display());
    let r = limited(&["cp", &format!("s3://{bucket}/src/big0.bin"), &one]);
    r.assert_one_line_error(1, &["file too large", "one.bin"]);
    assert_eq!(files_below(&out), Vec::<String>::new());

    let r = limited(&[
        "cp",
        "-r",
        &format!("s3://{bucket}/src"),
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("file too large"), "{}", r.stderr);
    assert!(r.stderr.contains("4 FAILED"), "{}", r.stderr);
    let left: Vec<String> = files_below(&out)
        .into_iter()
        .filter(|f| !f.ends_with('/'))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "nothing left behind");
}
