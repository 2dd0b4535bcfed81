//! `--if-generation-match` (GCS) and `--if-match` (S3) on writes and
//! deletes of one object, against the real servers: the version the user
//! read is replaced or deleted, a stale one is refused and the object
//! left as it was. Uploads carry the precondition on the request that
//! makes the object (single PUT, multipart completion, compose, rewrite);
//! both servers honour it there. On a delete they ignore it, so `rm`
//! also reads the version first (see rm.rs); the stale-delete rows hold
//! that.

use std::process::Command;

use crate::common::*;

fn ok(c: Command) -> Run {
    let r = run(c);
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    r
}

/// The version `stat` shows: (flag, value).
fn version(base: fn() -> Option<Command>, url: &str) -> (&'static str, String) {
    let r = ok(with_args(base().unwrap(), &["stat", url]));
    for line in r.stdout.lines() {
        let line = line.trim();
        if let Some(g) = line.strip_prefix("Generation:") {
            return ("--if-generation-match", g.trim().to_owned());
        }
        if let Some(e) = line.strip_prefix("ETag:") {
            return ("--if-match", e.trim().to_owned());
        }
    }
    panic!("no version in stat {url}: {}", r.stdout)
}

fn cat(base: fn() -> Option<Command>, url: &str) -> Vec<u8> {
    ok(with_args(base().unwrap(), &["cat", url])).stdout_bytes
}

fn file(dir: &std::path::Path, name: &str, data: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p.to_str().unwrap().to_owned()
}

/// A stale version as the flag takes it.
fn stale(flag: &str) -> &'static str {
    if flag == "--if-match" {
        "\"0123456789abcdef0123456789abcdef\""
    } else {
        "12345"
    }
}

fn writes_replace_only_the_version_read(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{scheme}://{bucket}/obj.txt");
    let (one, two, three) = (
        file(dir.path(), "one", b"one"),
        file(dir.path(), "two", b"two"),
        file(dir.path(), "three", b"three"),
    );
    ok(with_args(base().unwrap(), &["-q", "cp", &one, &url]));
    let (flag, v1) = version(base, &url);

    // A stale version: refused, the object untouched.
    let r = run(with_args(
        base().unwrap(),
        &["cp", &two, &url, flag, stale(flag)],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("precondition"), "{}", r.stderr);
    assert_eq!(cat(base, &url), b"one");

    // The version read: replaced.
    ok(with_args(
        base().unwrap(),
        &["-q", "cp", &two, &url, flag, &v1],
    ));
    assert_eq!(cat(base, &url), b"two");

    // The same version again is stale now (a second writer that read
    // the first version loses).
    let r = run(with_args(base().unwrap(), &["cp", &three, &url, flag, &v1]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(cat(base, &url), b"two");

    // A copy made by the server (S3: UploadPartCopy parts whose
    // completion carries If-Match), into the object: stale refused,
    // current replaced.
    let src = format!("{scheme}://{bucket}/src.txt");
    ok(with_args(base().unwrap(), &["-q", "cp", &three, &src]));
    let (_, v3) = version(base, &url);
    let r = run(with_args(
        base().unwrap(),
        &["cp", &src, &url, flag, stale(flag)],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(cat(base, &url), b"two");
    ok(with_args(
        base().unwrap(),
        &["-q", "cp", &src, &url, flag, &v3],
    ));
    assert_eq!(cat(base, &url), b"three");

    // Multipart-sized: S3's completion carries If-Match. (GCS's compose
    // carries ifGenerationMatch, which fake-gcs-server ignores on compose,
    // so that row is S3's only.)
    if scheme != "s3" {
        return;
    }
    let big: Vec<u8> = (0..(12u32 << 20)).map(|i| (i % 251) as u8).collect();
    let bigf = file(dir.path(), "big", &big);
    let (_, v2) = version(base, &url);
    let r = run(with_args(
        base().unwrap(),
        &["cp", "--part-size", "5MiB", &bigf, &url, flag, stale(flag)],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(cat(base, &url), b"three");
    ok(with_args(
        base().unwrap(),
        &["-q", "cp", "--part-size", "5MiB", &bigf, &url, flag, &v2],
    ));
    assert!(cat(base, &url) == big);
}

fn deletes_remove_only_the_version_read(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{scheme}://{bucket}/obj.txt");
    let one = file(dir.path(), "one", b"one");
    ok(with_args(base().unwrap(), &["-q", "cp", &one, &url]));
    let (flag, v) = version(base, &url);
    let r = run(with_args(base().unwrap(), &["rm", &url, flag, stale(flag)]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("not deleted"), "{}", r.stderr);
    assert_eq!(cat(base, &url), b"one");
    ok(with_args(base().unwrap(), &["rm", &url, flag, &v]));
    let r = run(with_args(base().unwrap(), &["stat", &url]));
    assert_ne!(r.code, 0, "deleted object still there: {}", r.stdout);
}

#[test]
fn s3_if_match_on_writes() {
    writes_replace_only_the_version_read(s3, "s3");
}

#[test]
fn gcs_if_generation_match_on_writes() {
    writes_replace_only_the_version_read(gcs, "gs");
}

#[test]
fn s3_if_match_on_deletes() {
    deletes_remove_only_the_version_read(s3, "s3");
}

#[test]
fn gcs_if_generation_match_on_deletes() {
    deletes_remove_only_the_version_read(gcs, "gs");
}
