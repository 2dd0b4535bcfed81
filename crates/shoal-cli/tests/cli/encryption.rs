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

/// The headers of a HEAD made by boto3 (lowercase `name: value` lines),
/// with the SSE-C key given; None if the server refused it. Not curl:
/// curl 7.88 signs `...-customer-key-md5` before `...-customer-key` (it
/// sorts `name:value` strings), which MinIO rightly refuses. boto3 comes
/// with moto, in the venv `scripts/servers.sh` makes.
fn head(key: &str, sse_c: Option<&[u8; 32]>) -> Option<String> {
    const SCRIPT: &str = r#"
import sys, boto3, botocore
ep, ca, bucket, key, sse = sys.argv[1:6]
c = boto3.client("s3", endpoint_url=ep, verify=ca, region_name="us-east-1",
                 aws_access_key_id="minioadmin", aws_secret_access_key="minioadmin")
kw = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": bytes.fromhex(sse)} if sse else {}
try:
    r = c.head_object(Bucket=bucket, Key=key, **kw)
except botocore.exceptions.ClientError:
    sys.exit(3)
for k, v in r["ResponseMetadata"]["HTTPHeaders"].items():
    print(f"{k}: {v}")
"#;
    let ep = std::env::var("SHOAL_TEST_S3_TLS").unwrap();
    let ca = std::env::var("SHOAL_TEST_CA_BUNDLE").unwrap();
    let cache = std::env::var("SHOAL_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/shoal", std::env::var("HOME").unwrap()));
    let (bucket, key) = key.split_once('/').unwrap();
    let hex: String = sse_c
        .map(|k| k.iter().map(|b| format!("{b:02x}")).collect())
        .unwrap_or_default();
    let out = Command::new(format!("{cache}/venv-moto/bin/python"))
        .args(["-c", SCRIPT, &ep, &ca, bucket, key, &hex])
        .output()
        .expect("boto3 from the moto venv (scripts/servers.sh start moto)");
    match out.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&out.stdout).to_lowercase()),
        Some(3) => None,
        _ => panic!("boto3 HEAD: {}", String::from_utf8_lossy(&out.stderr)),
    }
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
            head(&format!("{bucket}/{name}"), None).is_none(),
            "{name} readable without a key"
        );
        let h = head(&format!("{bucket}/{name}"), Some(&KEY_A)).expect("HEAD with key A");
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
    assert!(head(&format!("{bucket}/copy"), Some(&KEY_A)).is_none());
    assert!(head(&format!("{bucket}/copy"), Some(&KEY_B)).is_some());
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
    assert!(head(&format!("{bucket}/synced/f"), Some(&KEY_A)).is_some());

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
            let h = head(&format!("{bucket}/{key}"), None).unwrap();
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
    assert!(!r.stderr.contains(&key_a));
    // A wrong key is not tried here: storage-testbench checks a key only
    // against the SHA256 header sent beside it, so any key reads any
    // object; shoal-gcs's tests/decryption_keys.rs covers it.
    let r = run(with_args(
        shoal(),
        &["--encryption-key", "c2VjcmV0", "ls", "gs://b/"],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(!r.stderr.contains("c2VjcmV0"), "{}", r.stderr);
}

/// `--decryption-keys`, as gcloud takes them: one tree holding objects
/// under key A, key B and no key is read whole, each object with its own
/// key; writes use `--encryption-key` only.
#[test]
fn gcs_decryption_keys_read_each_object_with_its_key() {
    let Some(bucket) = make_bucket(testbench, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key_a = shoal_core::encryption::CustomerKey::new(KEY_A).to_base64();
    let key_b = shoal_core::encryption::CustomerKey::new(KEY_B).to_base64();
    let put = |key: Option<&str>, name: &str, data: &[u8]| {
        let src = dir.path().join(format!("src-{name}"));
        std::fs::write(&src, data).unwrap();
        let mut c = testbench().unwrap();
        if let Some(k) = key {
            c.args(["--encryption-key", k]);
        }
        let r = run(with_args(
            c,
            &[
                "cp",
                src.to_str().unwrap(),
                &format!("gs://{bucket}/t/{name}"),
            ],
        ));
        assert_eq!(r.code, 0, "upload {name}: {}", r.stderr);
    };
    let (a, b, none) = (pattern(70_000, 5), pattern(50_000, 6), pattern(900, 7));
    put(Some(&key_a), "a", &a);
    put(Some(&key_b), "b", &b);
    put(None, "none", &none);
    for flags in [
        vec!["--encryption-key", &key_a, "--decryption-keys", &key_b],
        vec!["--decryption-keys", &format!("{key_b},{key_a}")],
    ] {
        let out = dir.path().join(format!("out-{}", flags.len()));
        let mut c = testbench().unwrap();
        c.args(&flags);
        let r = run(with_args(
            c,
            &[
                "cp",
                "-r",
                &format!("gs://{bucket}/t/"),
                out.to_str().unwrap(),
            ],
        ));
        assert_eq!(r.code, 0, "{flags:?}: {}", r.stderr);
        // cp -r of gs://b/t/ makes out/t/, as `cp -r dir out` does.
        let got = |n: &str| std::fs::read(out.join("t").join(n)).unwrap();
        assert!(got("a") == a, "{flags:?}: a");
        assert!(got("b") == b, "{flags:?}: b");
        assert!(got("none") == none, "{flags:?}: none");
    }
    // Without any key: one line saying what to give, never a key.
    let r = run(with_args(
        testbench().unwrap(),
        &["cat", &format!("gs://{bucket}/t/a")],
    ));
    r.assert_one_line_error(1, &["--decryption-keys"]);
    // A decryption key is never used to write: this upload is under none.
    put(None, "plain", b"p");
    let mut c = testbench().unwrap();
    c.args(["--decryption-keys", &key_a]);
    let src = dir.path().join("src-w");
    std::fs::write(&src, b"w").unwrap();
    let r = run(with_args(
        c,
        &["cp", src.to_str().unwrap(), &format!("gs://{bucket}/t/w")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!gcs_meta(&bucket, "t%2Fw").contains("customerEncryption"));
    // A bad list is a usage error that shows no key.
    let r = run(with_args(
        shoal(),
        &[
            "--decryption-keys",
            &format!("{key_a},c2VjcmV0"),
            "ls",
            "gs://b/",
        ],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        !r.stderr.contains("c2VjcmV0") && !r.stderr.contains(&key_a),
        "{}",
        r.stderr
    );
}

/// Sends `method` to a presigned `url` with python's urllib (from the
/// moto venv, trusting the test CA), with the SSE-C headers of `key` when
/// given; the body read, or None when the server refused.
fn fetch(url: &str, method: &str, key: Option<&[u8; 32]>, body: &str) -> Option<String> {
    const SCRIPT: &str = r#"
import sys, ssl, urllib.request, urllib.error, base64, hashlib
url, ca, method, key, body = sys.argv[1:6]
h = {}
if key:
    k = bytes.fromhex(key)
    h = {"x-amz-server-side-encryption-customer-algorithm": "AES256",
         "x-amz-server-side-encryption-customer-key": base64.b64encode(k).decode(),
         "x-amz-server-side-encryption-customer-key-MD5":
             base64.b64encode(hashlib.md5(k).digest()).decode()}
req = urllib.request.Request(url, data=body.encode() if method == "PUT" else None,
                             method=method, headers=h)
try:
    r = urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ca))
    sys.stdout.write(r.read().decode())
except urllib.error.HTTPError:
    sys.exit(3)
"#;
    let ca = std::env::var("SHOAL_TEST_CA_BUNDLE").unwrap();
    let cache = std::env::var("SHOAL_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/shoal", std::env::var("HOME").unwrap()));
    let hex: String = key
        .map(|k| k.iter().map(|b| format!("{b:02x}")).collect())
        .unwrap_or_default();
    let out = Command::new(format!("{cache}/venv-moto/bin/python"))
        .args(["-c", SCRIPT, url, &ca, method, &hex, body])
        .output()
        .expect("python from the moto venv");
    match out.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        Some(3) => None,
        _ => panic!("urllib {method}: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// `presign` under an SSE-C key signs the key's headers into the URL, so
/// its holder reads (GET) or writes (PUT) under that key, and only with
/// it; the headers to send are listed, the key itself masked.
#[test]
fn presigned_urls_carry_the_customer_key() {
    let Some(bucket) = make_bucket(s3tls, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ka = key_file(dir.path(), "a.key", &KEY_A);
    std::fs::write(dir.path().join("f"), "secret bytes").unwrap();
    let url = format!("s3://{bucket}/f");
    let with_key = |args: &[&str]| {
        let mut c = s3tls().unwrap();
        c.args(["--sse-c-key-file", &ka]).args(args);
        run(c)
    };
    let r = with_key(&["cp", dir.path().join("f").to_str().unwrap(), &url]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    let r = with_key(&["presign", &url]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let get = r.stdout.trim().to_owned();
    assert!(
        get.contains("x-amz-server-side-encryption-customer-key-md5"),
        "signed: {get}"
    );
    let a64 = base64_of(&KEY_A);
    assert!(
        r.stderr
            .contains("x-amz-server-side-encryption-customer-key-md5")
            && !r.stderr.contains(&a64)
            && !get.contains(&a64),
        "{}",
        r.stderr
    );
    assert_eq!(
        fetch(&get, "GET", Some(&KEY_A), "").as_deref(),
        Some("secret bytes")
    );
    assert_eq!(fetch(&get, "GET", None, ""), None, "read without the key");
    assert_eq!(
        fetch(&get, "GET", Some(&KEY_B), ""),
        None,
        "read with another key"
    );

    // A presigned PUT writes under the key: only the key reads it back.
    let r = with_key(&[
        "presign",
        "--json",
        "--method",
        "PUT",
        &format!("s3://{bucket}/up"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(
        v["headers"]["x-amz-server-side-encryption-customer-algorithm"],
        "AES256"
    );
    assert!(!r.stdout.contains(&a64), "{}", r.stdout);
    let put = v["url"].as_str().unwrap();
    assert_eq!(fetch(put, "PUT", None, "up"), None, "PUT without the key");
    assert!(fetch(put, "PUT", Some(&KEY_A), "uploaded").is_some());
    assert!(head(&format!("{bucket}/up"), None).is_none());
    let r = with_key(&["cat", &format!("s3://{bucket}/up")]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "uploaded"), "{}", r.stderr);
}

fn base64_of(k: &[u8; 32]) -> String {
    shoal_core::encryption::CustomerKey::new(*k).to_base64()
}

/// A GCS signed URL under a CSEK signs the `x-goog-encryption-*` headers
/// (fake-gcs-server checks neither signatures nor keys, so the shape is
/// what is checked), naming the key by its SHA256 only.
#[test]
fn gcs_signed_urls_sign_the_customer_key() {
    let Some(mut c) = gcs() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sa = crate::daily::service_account_file(dir.path());
    let key = base64_of(&KEY_A);
    c.env("GOOGLE_APPLICATION_CREDENTIALS", &sa).args([
        "--encryption-key",
        &key,
        "presign",
        "gs://b/k",
    ]);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(
            "X-Goog-SignedHeaders=host%3Bx-goog-encryption-algorithm%3Bx-goog-encryption-key%3Bx-goog-encryption-key-sha256&"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("x-goog-encryption-key-sha256: "),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains(&key) && !r.stderr.contains(&key));
}
