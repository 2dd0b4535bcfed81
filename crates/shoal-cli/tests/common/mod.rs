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
