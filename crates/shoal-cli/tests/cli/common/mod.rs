//! Running the `shoal` binary against the test servers.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

pub const SECRET: &str = "minioadmin";

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stdout_bytes: Vec<u8>,
    pub stderr: String,
}

impl Run {
    /// The one-line error shoal promises: a single stderr line, no panic.
    pub fn assert_one_line_error(&self, code: i32, needles: &[&str]) {
        assert_eq!(self.code, code, "exit code; stderr: {}", self.stderr);
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "exactly one line on stderr, got: {:?}",
            self.stderr
        );
        assert!(lines[0].starts_with("shoal: "), "prefixed: {}", lines[0]);
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "stderr should mention {n:?}: {}",
                self.stderr
            );
        }
        for bad in [
            "panicked",
            "stack backtrace",
            "RUST_BACKTRACE",
            "internal error",
        ] {
            assert!(!self.stderr.contains(bad), "no panic: {}", self.stderr);
        }
    }
}

/// A command with a clean environment: only what the test gives it, so no
/// developer credentials or endpoints leak in and nothing leaves loopback.
pub fn shoal() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shoal"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/shoal-test")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/shoal-test")
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .env("GCE_METADATA_IP", "127.0.0.1:9")
        .env(
            "GOOGLE_APPLICATION_CREDENTIALS",
            "/nonexistent/shoal-test.json",
        )
        .env("CLOUDSDK_CONFIG", "/nonexistent/shoal-test")
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null());
    c
}

pub fn run(mut c: Command) -> Run {
    let out: Output = c.output().expect("run shoal");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stdout_bytes: out.stdout.clone(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `shoal` aimed at fake-gcs-server, or None when the server is not there.
pub fn gcs() -> Option<Command> {
    let ep = shoal_testkit_server("SHOAL_TEST_GCS")?;
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", ep);
    Some(c)
}

/// `shoal` aimed at moto (any credentials), or None when it is not there.
pub fn moto() -> Option<Command> {
    let ep = shoal_testkit_server("SHOAL_TEST_MOTO")?;
    let mut c = shoal();
    c.env("AWS_ENDPOINT_URL", ep)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1");
    Some(c)
}

/// `shoal` aimed at MinIO with valid credentials.
pub fn s3() -> Option<Command> {
    let ep = shoal_testkit_server("SHOAL_TEST_S3")?;
    let mut c = shoal();
    c.env("AWS_ENDPOINT_URL", ep)
        .env(
            "AWS_ACCESS_KEY_ID",
            std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into()),
        )
        .env(
            "AWS_SECRET_ACCESS_KEY",
            std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| SECRET.into()),
        )
        .env("AWS_REGION", "us-east-1");
    Some(c)
}

pub fn shoal_testkit_server(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            if std::env::var("SHOAL_REQUIRE_SERVERS").is_ok_and(|v| v == "1") {
                panic!("{var} not set but SHOAL_REQUIRE_SERVERS=1");
            }
            eprintln!("skipped: {var} not set");
            None
        }
    }
}

pub fn with_args(mut c: Command, args: &[&str]) -> Command {
    c.args(args);
    c
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}

/// Makes a bucket through the CLI itself.
pub fn make_bucket(base: fn() -> Option<Command>, scheme: &str) -> Option<String> {
    let bucket = unique("cli");
    let r = run(with_args(base()?, &["mb", &format!("{scheme}://{bucket}")]));
    assert_eq!(r.code, 0, "mb: {}", r.stderr);
    Some(bucket)
}

pub fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `n` pseudo-random bytes (xorshift from `seed`): incompressible, and
/// different for different seeds.
pub fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Every file below `dir`, hidden ones included.
pub fn files_below(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(files_below(&e.path()));
        } else {
            out.push(e.path().display().to_string());
        }
    }
    out
}

/// Reads the S3 object `url`, alone in `folder`, every way shoal can:
/// `cp` with 1 and 4 slices of `slice_size`, `cp -r` of the folder (from
/// a listing, which has no checksum), `cp` to stdout, `cat` over a glob of
/// the folder, and `cp` to the object `copy`. Each gives `body`, and each
/// checked one says `verified` (e.g. "crc32 verified").
pub fn read_every_way(
    url: &str,
    folder: &str,
    copy: &str,
    body: &[u8],
    slice_size: &str,
    verified: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    for slices in ["1", "4"] {
        let out = dir.path().join(format!("one-{slices}.bin"));
        let out_s = out.to_str().unwrap();
        let args = [
            "cp",
            "--slices",
            slices,
            "--slice-size",
            slice_size,
            url,
            out_s,
        ];
        let r = run(with_args(s3().unwrap(), &args));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(std::fs::read(&out).unwrap(), body, "{url} {slices} slices");
        let what = format!("{url} {slices} slices");
        assert!(r.stderr.contains(verified), "{what}: {}", r.stderr);
    }
    let tree = dir.path().join("tree");
    let r = run(with_args(
        s3().unwrap(),
        &["cp", "-r", folder, tree.to_str().unwrap()],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let got = files_below(&tree);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(std::fs::read(&got[0]).unwrap(), body, "{url} cp -r");
    let r = run(with_args(s3().unwrap(), &["cp", url, "-"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout_bytes == body);
    assert!(r.stderr.contains(verified), "{}", r.stderr);
    // Listed (no checksum in an S3 listing), in one request and in
    // slices of 1 MiB (4 MiB of read-ahead) whose first learns it.
    let glob = format!("{folder}**");
    for read_ahead in ["256MiB", "4MiB"] {
        let r = run(with_args(
            s3().unwrap(),
            &["cat", "--read-ahead", read_ahead, &glob],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout_bytes == body, "{glob} read ahead {read_ahead}");
    }
    let r = run(with_args(s3().unwrap(), &["cp", url, copy]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(verified), "{}", r.stderr);
}

/// One command to run through a byte-flipping proxy: a label, its
/// arguments (`OUT` stands for an empty folder), and whether it writes
/// files there.
pub type FlipCase<'a> = (&'a str, Vec<&'a str>, bool);

/// The ways of reading `url`, the one object in `folder` (listed by
/// `glob`), that a flipped byte must fail: `cp` in one request and in
/// slices of `slice_size`, `cp -r`, and `cat` named and listed, each in
/// one request and in slices of 1 MiB (4 MiB of read-ahead; the first
/// slice learns the checksum, and a composite one's part list, for all).
/// Listed, the first GET of the object brings its checksum.
pub fn reads_to_flip<'a>(
    url: &'a str,
    folder: &'a str,
    glob: &'a str,
    slice_size: &'a str,
) -> Vec<FlipCase<'a>> {
    vec![
        ("cp", vec!["cp", url, "OUT/x.bin"], true),
        (
            "cp sliced",
            vec![
                "cp",
                "--slices",
                "4",
                "--slice-size",
                slice_size,
                url,
                "OUT/x.bin",
            ],
            true,
        ),
        ("cp -r", vec!["cp", "-r", folder, "OUT/"], true),
        ("cat", vec!["cat", url], false),
        (
            "cat sliced",
            vec!["cat", "--read-ahead", "4MiB", url],
            false,
        ),
        ("cat glob", vec!["cat", glob], false),
        (
            "cat glob sliced",
            vec!["cat", "--read-ahead", "4MiB", glob],
            false,
        ),
    ]
}

/// Runs each case against MinIO (`upstream`) through a fault proxy that
/// flips byte 1000 of the first response `when` matches. Each must fail
/// with `want` in its error, name `url`, not panic, and leave nothing in
/// its output folder.
pub fn flips_fail(
    upstream: &str,
    when: &shoal_testkit::faultproxy::When,
    cases: Vec<FlipCase<'_>>,
    want: &str,
    url: &str,
) {
    use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script};
    for (what, args, writes) in cases {
        let rule = Rule::new(when.clone(), Fault::FlipByte(1000));
        let proxy = FaultProxy::start(upstream, Script::new().rule(rule));
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("OUT", out.to_str().unwrap()))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut c = s3().unwrap();
        c.env("AWS_ENDPOINT_URL", proxy.url());
        let r = run(with_args(c, &args));
        assert!(!proxy.injected().is_empty(), "{what}: no fault injected");
        assert_ne!(r.code, 0, "{what}: must fail");
        assert!(r.stderr.contains(want), "{what}: {}", r.stderr);
        assert!(
            r.stderr.contains(url),
            "{what} names the object: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{what}: {}", r.stderr);
        if writes {
            let left = files_below(&out);
            assert!(left.is_empty(), "{what}: nothing written, found {left:?}");
        }
    }
}

/// Uploads `data` to `s3://bucket/key` with only a `kind` checksum (one PUT).
pub fn put_with(bucket: &str, key: &str, data: &[u8], kind: shoal_core::checksum::CrcKind) {
    let store = shoal_testkit::s3_store().expect("MinIO");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = shoal_core::PutOptions {
        other_crc: Some(kind.checksum(data)),
        ..Default::default()
    };
    let meta = rt
        .block_on(store.put(bucket, key, bytes::Bytes::copy_from_slice(data), &opts))
        .unwrap_or_else(|e| panic!("put {key}: {e}"));
    assert_eq!(meta.checksums.crc32c(), None);
    // The server stored it: a HEAD gives it back.
    let head = rt.block_on(store.head(bucket, key)).unwrap();
    assert_eq!(
        head.checksums.other_crc(),
        Some(kind.checksum(data)),
        "{key}"
    );
    assert_eq!(head.checksums.crc32c(), None, "{key}");
}

/// MinIO's smallest part but the last.
pub const PART: usize = 5 << 20;

/// Uploads `data` to `s3://bucket/key` in parts of `part` bytes, leaving
/// the object a composite CRC32C only; checks that HEAD says so.
pub fn put_composite(bucket: &str, key: &str, data: &[u8], part: usize) -> u32 {
    let store = shoal_testkit::s3_store().expect("MinIO");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = shoal_core::PutOptions {
        assemble: shoal_core::Assemble::Composite,
        ..Default::default()
    };
    let parts = data.chunks(part).count() as u32;
    rt.block_on(async {
        let mp = store.multipart().expect("S3 has multipart uploads");
        let up = mp.multipart_start(bucket, key, &opts).await.unwrap();
        let mut done = Vec::new();
        for (i, chunk) in data.chunks(part).enumerate() {
            let crc = shoal_core::checksum::PartKind::Crc32c.checksum(chunk);
            let p =
                (mp.multipart_put(&up, i as u32 + 1, bytes::Bytes::copy_from_slice(chunk), crc))
                    .await
                    .unwrap_or_else(|e| panic!("part {i} of {key}: {e}"));
            done.push(p);
        }
        mp.multipart_complete(&up, &done, None).await.unwrap();
        let head = store.head(bucket, key).await.unwrap();
        assert_eq!(
            (
                head.checksums.crc32c(),
                head.checksums.other_crc(),
                head.checksums.md5()
            ),
            (None, None, None),
            "{key}"
        );
        let c = head
            .checksums
            .composite()
            .unwrap_or_else(|| panic!("{key}: no composite checksum"));
        assert_eq!(
            (c.kind, c.parts),
            (shoal_core::checksum::PartKind::Crc32c, parts),
            "{key}"
        );
    });
    parts
}

/// An S3 request signed by curl (`--aws-sigv4`), for what the CLI has no
/// verb for (listing and aborting multipart uploads).
pub fn curl_s3(ep: &str, method: &str, path: &str) -> String {
    let key = std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into());
    let secret = std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| SECRET.into());
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--fail",
            "-X",
            method,
            "--aws-sigv4",
            "aws:amz:us-east-1:s3",
            "--user",
            &format!("{key}:{secret}"),
            &format!("{ep}{path}"),
        ])
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "{method} {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Multipart uploads still open in `bucket` (ListMultipartUploads).
pub fn open_s3_uploads(ep: &str, bucket: &str) -> Vec<(String, String)> {
    let body = curl_s3(ep, "GET", &format!("/{bucket}?uploads="));
    body.split("<Upload>")
        .skip(1)
        .map(|u| {
            let tag = |t: &str| {
                u.split(&format!("<{t}>"))
                    .nth(1)
                    .and_then(|r| r.split(&format!("</{t}>")).next())
                    .unwrap_or("")
                    .to_owned()
            };
            (tag("Key"), tag("UploadId"))
        })
        .collect()
}

/// Aborts one open multipart upload.
pub fn abort_s3_upload(ep: &str, bucket: &str, key: &str, id: &str) {
    curl_s3(ep, "DELETE", &format!("/{bucket}/{key}?uploadId={id}"));
}

/// S3 Inventory's key encoding: an HTML form's (space is `+`).
pub fn form_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' | b'/' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub fn md5_hex(bytes: &[u8]) -> String {
    // The conformance of the report is checked by shoal; the test writes
    // the MD5 with the system's md5sum, as a report's maker would.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x");
    std::fs::write(&f, bytes).unwrap();
    let out = std::process::Command::new("md5sum")
        .arg(&f)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..32].to_owned()
}

/// Creates a GCS bucket through the JSON API at `endpoint` with the
/// resource `json` (its name and settings: versioning, a soft-delete
/// policy), which `shoal mb` does not set.
pub fn gcs_bucket_with(endpoint: &str, json: &str) {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "-X", "POST"])
        .arg(format!("{endpoint}/storage/v1/b?project=test"))
        .args(["-H", "content-type: application/json", "--data", json])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Turns versioning on for the MinIO bucket `bucket` (`PUT ?versioning`).
pub fn s3_versioning_on(bucket: &str) {
    let ep = shoal_testkit_server("SHOAL_TEST_S3").unwrap();
    let key = std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into());
    let secret = std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| SECRET.into());
    let out = Command::new("curl")
        .args(["-sS", "--fail", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3"])
        .args(["--user", &format!("{key}:{secret}")])
        .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"])
        .args(["--data", "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Status>Enabled</Status></VersioningConfiguration>"])
        .arg(format!("{ep}/{bucket}?versioning="))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The names of the objects below `prefix` in GCS bucket `bucket` at
/// `endpoint` (one page, up to 1,000), read with the JSON API (curl), not
/// with the binary under test.
pub fn gcs_names(endpoint: &str, bucket: &str, prefix: &str) -> Vec<String> {
    let out = Command::new("curl")
        .args(["-fsS"])
        .arg(format!(
            "{endpoint}/storage/v1/b/{bucket}/o?prefix={prefix}&maxResults=1000"
        ))
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
