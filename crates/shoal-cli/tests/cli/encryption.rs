//! Encryption keys on every verb (issue #54) against MinIO over TLS with a
//! KMS key (`scripts/servers.sh start s3tls`): SSE-S3, SSE-KMS and
//! customer keys (SSE-C) on single and multipart uploads, whole and sliced
//! downloads, stat, cat, sync and server-side copies; what the server
//! stored is checked by signed curl requests of our own.

use std::process::Command;

use crate::common::*;

const KEY_A: [u8; 32] = *b"0123456789abcdef0123456789ABCDEF";
const KEY_B: [u8; 32] = *b"ffffffffffffffffeeeeeeeeeeeeeeee";

/// `shoal` aimed at the TLS MinIO, or None when it is not running.
fn s3tls() -> Option<Command> {
    let ep = shoal_testkit_server("SHOAL_TEST_S3_TLS")?;
    let ca =
        std::env::var("SHOAL_TEST_CA_BUNDLE").expect("SHOAL_TEST_CA_BUNDLE with SHOAL_TEST_S3_TLS");
    let mut c = s3()?;
    c.env("AWS_ENDPOINT_URL", ep).env("AWS_CA_BUNDLE", ca);
    Some(c)
}

/// The headers of a signed HEAD (curl), with extra headers; None if the
/// server refused it.
fn head(key: &str, extra: &[String]) -> Option<String> {
    let ep = std::env::var("SHOAL_TEST_S3_TLS").unwrap();
    let ca = std::env::var("SHOAL_TEST_CA_BUNDLE").unwrap();
    let mut c = Command::new("curl");
    c.args([
        "-sS",
        "--fail",
        "-I",
        "--cacert",
        &ca,
        "--aws-sigv4",
        "aws:amz:us-east-1:s3",
    ])
    .args(["--user", "minioadmin:minioadmin"]);
    for h in extra {
        c.args(["-H", h]);
    }
    let out = c.arg(format!("{ep}/{key}")).output().expect("curl");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_lowercase())
}

fn sse_c_headers(key: &[u8; 32]) -> Vec<String> {
    let k = shoal_core::encryption::CustomerKey::new(*key);
    vec![
        "x-amz-server-side-encryption-customer-algorithm: AES256".into(),
        format!(
            "x-amz-server-side-encryption-customer-key: {}",
            k.to_base64()
        ),
        format!(
            "x-amz-server-side-encryption-customer-key-md5: {}",
            k.md5_base64()
        ),
    ]
}

fn key_file(dir: &std::path::Path, name: &str, key: &[u8; 32]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, key).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn sse_c_on_every_verb() {
    let Some(bucket) = make_bucket(s3tls, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ka = key_file(dir.path(), "a.key", &KEY_A);
    let kb = key_file(dir.path(), "b.key", &KEY_B);
    let small = pattern(1000, 1);
    let big = pattern(12 << 20, 2);
    std::fs::write(dir.path().join("small"), &small).unwrap();
    std::fs::write(dir.path().join("big"), &big).unwrap();
    let with_key = |args: &[&str]| {
        let mut c = s3tls().unwrap();
        c.args(["--sse-c-key-file", &ka]).args(args);
        run(c)
    };
    // Single PUT, and multipart (create + every part) with 5 MiB parts.
    for (name, _) in [("small", &small), ("big", &big)] {
        let src = dir.path().join(name);
        let r = with_key(&[
            "cp",
            "--part-size",
            "5MiB",
            src.to_str().unwrap(),
            &format!("s3://{bucket}/{name}"),
        ]);
        assert_eq!(r.code, 0, "upload {name}: {}", r.stderr);
        // Stored under key A: a HEAD without it is refused, with it answers.
        assert!(
            head(&format!("{bucket}/{name}"), &[]).is_none(),
            "{name} readable without a key"
        );
        let h = head(&format!("{bucket}/{name}"), &sse_c_headers(&KEY_A)).expect("HEAD with key A");
        assert!(
            h.contains("x-amz-server-side-encryption-customer-algorithm: aes256"),
            "{h}"
        );
    }
    // Whole and sliced downloads, checked against what was written.
    for (name, data, slices) in [
        ("small", &small, "1"),
        ("big", &big, "1"),
        ("big", &big, "3"),
    ] {
        let out = dir.path().join(format!("out-{name}-{slices}"));
        let r = with_key(&[
            "cp",
            "--slices",
            slices,
            "--slice-size",
            "4MiB",
            &format!("s3://{bucket}/{name}"),
            out.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "download {name} in {slices}: {}", r.stderr);
        assert!(
            std::fs::read(&out).unwrap() == *data,
            "{name} in {slices} slices differs"
        );
    }
    let r = with_key(&["cat", &format!("s3://{bucket}/small")]);
    assert_eq!(r.code, 0, "cat: {}", r.stderr);
    assert!(r.stdout_bytes == small);
    let r = with_key(&["stat", &format!("s3://{bucket}/big")]);
    assert_eq!(r.code, 0, "stat: {}", r.stderr);
    // A server-side copy re-encrypted under key B, the source read with A.
    let mut c = s3tls().unwrap();
    c.args(["--sse-c-key-file", &kb, "--sse-c-copy-source-key-file", &ka])
        .args([
            "cp",
            &format!("s3://{bucket}/small"),
            &format!("s3://{bucket}/copy"),
        ]);
    let r = run(c);
    assert_eq!(r.code, 0, "copy: {}", r.stderr);
    assert!(head(&format!("{bucket}/copy"), &sse_c_headers(&KEY_A)).is_none());
    assert!(head(&format!("{bucket}/copy"), &sse_c_headers(&KEY_B)).is_some());
    // sync compares by HEAD: a second run finds everything in place.
    let up = dir.path().join("up");
    std::fs::create_dir(&up).unwrap();
    std::fs::write(up.join("f"), &small).unwrap();
    for _ in 0..2 {
        let r = with_key(&[
            "sync",
            up.to_str().unwrap(),
            &format!("s3://{bucket}/synced/"),
        ]);
        assert_eq!(r.code, 0, "sync: {}", r.stderr);
    }
    assert!(head(&format!("{bucket}/synced/f"), &sse_c_headers(&KEY_A)).is_some());

    // No key, or the wrong one: one line naming what to do, exit 1, and
    // the key never shown, even at -vv.
    let out = dir.path().join("nokey").to_str().unwrap().to_owned();
    let r = run(with_args(
        s3tls().unwrap(),
        &["cp", &format!("s3://{bucket}/small"), &out],
    ));
    r.assert_one_line_error(1, &["--sse-c-key-file"]);
    let mut c = s3tls().unwrap();
    c.args([
        "-vv",
        "--sse-c-key-file",
        &kb,
        "cat",
        &format!("s3://{bucket}/small"),
    ]);
    let r = run(c);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap_or("");
    assert!(
        last.contains("MD5") && last.contains("--sse-c-key-file"),
        "{last}"
    );
    for k in [KEY_A, KEY_B] {
        let shown = shoal_core::encryption::CustomerKey::new(k).to_base64();
        assert!(!r.stderr.contains(&shown) && !r.stderr.contains(std::str::from_utf8(&k).unwrap()));
    }
}

#[test]
fn sse_s3_and_kms_on_uploads() {
    let Some(bucket) = make_bucket(s3tls, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(11 << 20, 3);
    let src = dir.path().join("f");
    std::fs::write(&src, &data).unwrap();
    for (flags, want) in [
        (
            vec!["--sse", "AES256"],
            "x-amz-server-side-encryption: aes256",
        ),
        (
            vec!["--sse", "aws:kms"],
            "x-amz-server-side-encryption: aws:kms",
        ),
        (
            vec!["--sse", "aws:kms", "--sse-kms-key-id", "shoal-test-key"],
            "x-amz-server-side-encryption-aws-kms-key-id: arn:aws:kms:shoal-test-key",
        ),
    ] {
        for (name, part) in [("one", "64MiB"), ("parts", "5MiB")] {
            let key = format!("{}-{name}", flags.len());
            let mut c = s3tls().unwrap();
            c.args(&flags).args([
                "cp",
                "--part-size",
                part,
                src.to_str().unwrap(),
                &format!("s3://{bucket}/{key}"),
            ]);
            let r = run(c);
            assert_eq!(r.code, 0, "{flags:?} {name}: {}", r.stderr);
            let h = head(&format!("{bucket}/{key}"), &[]).unwrap();
            assert!(h.contains(want), "{flags:?} {name}: {h}");
            // Read back (no key needed) and checked end to end.
            let out = dir.path().join(format!("out-{key}"));
            let r = run(with_args(
                s3tls().unwrap(),
                &[
                    "cp",
                    "--slices",
                    "2",
                    "--slice-size",
                    "4MiB",
                    &format!("s3://{bucket}/{key}"),
                    out.to_str().unwrap(),
                ],
            ));
            assert_eq!(r.code, 0, "{flags:?} {name} download: {}", r.stderr);
            assert!(std::fs::read(&out).unwrap() == data);
        }
    }
}

#[test]
fn bad_key_files_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short.key");
    std::fs::write(&short, b"not a key").unwrap();
    let r = run(with_args(
        shoal(),
        &["--sse-c-key-file", short.to_str().unwrap(), "ls", "s3://b/"],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("32 bytes") && !r.stderr.contains("not a key"),
        "{}",
        r.stderr
    );
    let r = run(with_args(
        shoal(),
        &["--sse-c-key-file", "/nonexistent/k", "ls", "s3://b/"],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot read the key file"),
        "{}",
        r.stderr
    );
    let r = run(with_args(shoal(), &["--sse", "aes", "ls", "s3://b/"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
}

/// `shoal` aimed at storage-testbench (the GCS server that implements
/// CSEK; fake-gcs-server ignores the headers), or None without it.
fn testbench() -> Option<Command> {
    let Some(tb) = std::env::var("SHOAL_TEST_GCS_TESTBENCH")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        eprintln!("skipped: no storage-testbench (SHOAL_TEST_GCS_TESTBENCH)");
        return None;
    };
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", tb)
        .env("GOOGLE_CLOUD_PROJECT", "test");
    Some(c)
}

/// The object's metadata as the JSON API gives it (no key sent).
fn gcs_meta(bucket: &str, key: &str) -> String {
    let tb = std::env::var("SHOAL_TEST_GCS_TESTBENCH").unwrap();
    let out = Command::new("curl")
        .args(["-sS", &format!("{tb}/storage/v1/b/{bucket}/o/{key}")])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn gcs_csek_on_every_verb() {
    let Some(bucket) = make_bucket(testbench, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key_a = shoal_core::encryption::CustomerKey::new(KEY_A).to_base64();
    let key_b = shoal_core::encryption::CustomerKey::new(KEY_B).to_base64();
    let data = pattern(300_000, 4);
    let src = dir.path().join("f");
    std::fs::write(&src, &data).unwrap();
    let with = |key: &str, args: &[&str]| {
        let mut c = testbench().unwrap();
        c.args(["--encryption-key", key]).args(args);
        run(c)
    };
    let r = with(
        &key_a,
        &["cp", src.to_str().unwrap(), &format!("gs://{bucket}/f")],
    );
    assert_eq!(r.code, 0, "upload: {}", r.stderr);
    // Stored under key A, as the server's metadata names it (SHA256).
    let meta = gcs_meta(&bucket, "f");
    assert!(
        meta.contains("customerEncryption") && meta.contains("keySha256"),
        "{meta}"
    );
    for slices in ["1", "3"] {
        let out = dir.path().join(format!("out-{slices}"));
        let r = with(
            &key_a,
            &[
                "cp",
                "--slices",
                slices,
                "--slice-size",
                "64KiB",
                &format!("gs://{bucket}/f"),
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(r.code, 0, "download in {slices}: {}", r.stderr);
        assert!(
            std::fs::read(&out).unwrap() == data,
            "differs in {slices} slices"
        );
    }
    let r = with(&key_a, &["cat", &format!("gs://{bucket}/f")]);
    assert_eq!(r.code, 0, "cat: {}", r.stderr);
    assert!(r.stdout_bytes == data);
    let r = with(&key_a, &["stat", &format!("gs://{bucket}/f")]);
    assert_eq!(r.code, 0, "stat: {}", r.stderr);
    // No key, and the wrong one: one line saying what to give, exit 1,
    // the key never shown.
    let out = dir.path().join("nokey");
    let r = run(with_args(
        testbench().unwrap(),
        &["cp", &format!("gs://{bucket}/f"), out.to_str().unwrap()],
    ));
    r.assert_one_line_error(1, &["--encryption-key"]);
    let r = with(&key_b, &["cat", &format!("gs://{bucket}/f")]);
    r.assert_one_line_error(1, &["--encryption-key", "SHA256"]);
    assert!(!r.stderr.contains(&key_b) && !r.stderr.contains(&key_a));
    let r = run(with_args(
        shoal(),
        &["--encryption-key", "c2VjcmV0", "ls", "gs://b/"],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(!r.stderr.contains("c2VjcmV0"), "{}", r.stderr);
}
