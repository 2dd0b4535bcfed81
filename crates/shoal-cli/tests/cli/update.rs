//! `shoal update`: metadata changed on the server, the bytes untouched,
//! pinned to the version seen; `cp --content-encoding`, canned ACLs and
//! `-P`. Checked with `shoal stat --json` on fake-gcs-server and MinIO,
//! ACLs read back from moto and fake-gcs-server.

use std::process::Command;

use crate::common::*;
use serde_json::Value;

fn stat(base: fn() -> Option<Command>, url: &str) -> Value {
    let r = run(with_args(base().unwrap(), &["stat", "--json", url]));
    assert_eq!(r.code, 0, "stat {url}: {}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

fn ok(base: fn() -> Option<Command>, args: &[&str]) -> Run {
    let r = run(with_args(base().unwrap(), args));
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    r
}

/// An object `name` of `bucket` holding `data`, with metadata to keep
/// and to remove.
fn put(base: fn() -> Option<Command>, url: &str, data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, data).unwrap();
    ok(
        base,
        &[
            "cp",
            "--cache-control",
            "no-cache",
            "--metadata",
            "keep=1",
            "--metadata",
            "old=x",
            f.to_str().unwrap(),
            url,
        ],
    );
}

fn changes_metadata_not_bytes(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let url = format!("{scheme}://{bucket}/a.txt");
    let data = "0123456789".repeat(100);
    put(base, &url, data.as_bytes());
    let before = stat(base, &url);
    let r = ok(
        base,
        &[
            "update",
            "--content-type",
            "text/csv",
            "--content-disposition",
            "inline",
            "--metadata",
            "new=2",
            "--remove-metadata",
            "old",
            &url,
        ],
    );
    assert!(r.stderr.contains("Updated"), "{}", r.stderr);
    let after = stat(base, &url);
    assert_eq!(after["content_type"], "text/csv", "{after}");
    assert_eq!(after["content_disposition"], "inline", "{after}");
    assert_eq!(after["cache_control"], "no-cache", "kept: {after}");
    assert_eq!(after["metadata"]["keep"], "1", "{after}");
    assert_eq!(after["metadata"]["new"], "2", "{after}");
    assert!(after["metadata"].get("old").is_none(), "{after}");
    assert_eq!(after["size"], before["size"]);
    // Asked again: nothing to do, nothing sent.
    let r = ok(base, &["update", "--content-type", "text/csv", &url]);
    assert!(r.stderr.contains("Unchanged"), "{}", r.stderr);
    // The bytes are still the object's.
    let r = run(with_args(base().unwrap(), &["cat", &url]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, data);
}

#[test]
fn update_changes_metadata_not_bytes_gcs() {
    changes_metadata_not_bytes(gcs, "gs");
}

#[test]
fn update_changes_metadata_not_bytes_s3() {
    changes_metadata_not_bytes(s3, "s3");
}

fn prefixes_globs_dry_run(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    for name in ["p/a.txt", "p/b.txt", "p/c.bin", "q.txt"] {
        put(base, &format!("{scheme}://{bucket}/{name}"), b"abc");
    }
    let p = format!("{scheme}://{bucket}/p/");
    // A dry run names what would change and changes nothing.
    let r = ok(
        base,
        &["update", "-n", "-r", "--cache-control", "max-age=1", &p],
    );
    assert_eq!(r.stdout.matches("would update").count(), 3, "{}", r.stdout);
    let a = format!("{scheme}://{bucket}/p/a.txt");
    assert_eq!(stat(base, &a)["cache_control"], "no-cache");
    // A glob.
    let glob = format!("{scheme}://{bucket}/p/*.txt");
    let r = ok(
        base,
        &["update", "--json", "--cache-control", "max-age=1", &glob],
    );
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert_eq!(lines[2]["summary"]["updated"], 2, "{}", r.stdout);
    assert_eq!(stat(base, &a)["cache_control"], "max-age=1");
    let c = format!("{scheme}://{bucket}/p/c.bin");
    assert_eq!(stat(base, &c)["cache_control"], "no-cache");
    // -r: what is left.
    ok(base, &["update", "-r", "--cache-control", "max-age=1", &p]);
    assert_eq!(stat(base, &c)["cache_control"], "max-age=1");
    let q = format!("{scheme}://{bucket}/q.txt");
    assert_eq!(stat(base, &q)["cache_control"], "no-cache");
    // A glob that matches nothing: one line, exit 1.
    let none = format!("{scheme}://{bucket}/p/*.zip");
    run(with_args(
        base().unwrap(),
        &["update", "--cache-control", "x", &none],
    ))
    .assert_one_line_error(1, &["no objects match"]);
}

#[test]
fn update_prefixes_globs_dry_run_gcs() {
    prefixes_globs_dry_run(gcs, "gs");
}

#[test]
fn update_prefixes_globs_dry_run_s3() {
    prefixes_globs_dry_run(s3, "s3");
}

/// The object is replaced between the version seen and the update: the
/// newer object is left as it is, reported in one line, exit 1.
fn second_writer(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let url = format!("{scheme}://{bucket}/raced.txt");
    put(base, &url, b"first");
    let seen = stat(base, &url);
    put(base, &url, b"second writer");
    let (flag, version) = match scheme {
        "gs" => (
            "--if-generation-match",
            seen["generation"].as_str().unwrap().to_owned(),
        ),
        _ => ("--if-match", seen["etag"].as_str().unwrap().to_owned()),
    };
    let r = run(with_args(
        base().unwrap(),
        &["update", flag, &version, "--content-type", "text/csv", &url],
    ));
    r.assert_one_line_error(1, &["changed since it was read", "left as it is"]);
    let now = stat(base, &url);
    assert_eq!(now["size"], 13);
    assert_ne!(now["content_type"], "text/csv", "{now}");
    // At the version it is at, the update goes through.
    let current = match scheme {
        "gs" => now["generation"].as_str().unwrap().to_owned(),
        _ => now["etag"].as_str().unwrap().to_owned(),
    };
    ok(
        base,
        &["update", flag, &current, "--content-type", "text/csv", &url],
    );
    assert_eq!(stat(base, &url)["content_type"], "text/csv");
}

#[test]
fn update_leaves_a_second_writers_object_gcs() {
    second_writer(gcs, "gs");
}

#[test]
fn update_leaves_a_second_writers_object_s3() {
    second_writer(s3, "s3");
}

/// A new storage class rewrites the object; fake-gcs-server ignores a
/// rewrite's `ifGenerationMatch`, so there the update is refused (one
/// line, exit 1) rather than made unpinned, and the object is unchanged.
#[test]
fn update_storage_class_needs_a_pinned_rewrite_gcs() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let url = format!("gs://{bucket}/cold.txt");
    put(gcs, &url, b"cold");
    let before = stat(gcs, &url);
    run(with_args(
        gcs().unwrap(),
        &["update", "--storage-class", "nearline", &url],
    ))
    .assert_one_line_error(1, &["ifGenerationMatch"]);
    let after = stat(gcs, &url);
    assert_eq!(after["generation"], before["generation"]);
    assert_eq!(after["storage_class"], before["storage_class"]);
}

fn content_encoding(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, b"plain").unwrap();
    let url = format!("{scheme}://{bucket}/enc.txt");
    // Not `identity`: shoal reads a GCS object's `identity` as no
    // encoding at all.
    ok(
        base,
        &[
            "cp",
            "--content-encoding",
            "deflate",
            f.to_str().unwrap(),
            &url,
        ],
    );
    let before = stat(base, &url);
    assert_eq!(before["content_encoding"], "deflate", "{before}");
    ok(base, &["update", "--content-encoding", "br", &url]);
    let after = stat(base, &url);
    assert_eq!(after["content_encoding"], "br", "{after}");
    assert_eq!(
        after["content_type"], before["content_type"],
        "kept: {after}"
    );
    assert_eq!(after["size"], 5);
}

#[test]
fn cp_and_update_content_encoding_gcs() {
    content_encoding(gcs, "gs");
}

#[test]
fn cp_and_update_content_encoding_s3() {
    content_encoding(s3, "s3");
}

#[test]
fn update_bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f").display().to_string();
    for (args, needle) in [
        (vec!["update", "gs://b/k"], "nothing to change"),
        (vec!["update", "--cache-control", "x", &f], "local path"),
        (
            vec!["update", "--storage-class", "frozen", "gs://b/k"],
            "unknown storage class",
        ),
        (
            vec![
                "update",
                "--metadata",
                "a=1",
                "--remove-metadata",
                "a",
                "gs://b/k",
            ],
            "both set and removed",
        ),
        (
            vec!["update", "--cache-control", "x", "gs://b"],
            "needs an object",
        ),
    ] {
        let r = run(with_args(shoal(), &args));
        r.assert_one_line_error(2, &[needle]);
    }
}

/// How many grants to AllUsers an S3 object's ACL holds (GetObjectAcl).
fn all_users_grants(ep: &str, bucket: &str, key: &str) -> usize {
    curl_s3(ep, "GET", &format!("/{bucket}/{key}?acl="))
        .matches("http://acs.amazonaws.com/groups/global/AllUsers")
        .count()
}

/// A canned ACL on a single PUT, a multipart upload and an update, read
/// back with GetObjectAcl from moto, which keeps canned ACLs (MinIO keeps
/// none but the owner's, so there only the requests are accepted).
fn acl_s3(base: fn() -> Option<Command>, ep_var: &str, kept: bool) {
    let Some(bucket) = make_bucket(base, "s3") else {
        return;
    };
    let ep = std::env::var(ep_var).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.txt");
    std::fs::write(&small, b"small").unwrap();
    let big = dir.path().join("big.bin");
    std::fs::write(&big, pattern(6 << 20, 5)).unwrap();
    for (f, name) in [(&small, "small.txt"), (&big, "big.bin")] {
        let url = format!("s3://{bucket}/{name}");
        // A 5 MiB part size: the 6 MiB file goes up in two parts.
        ok(
            base,
            &[
                "cp",
                "--part-size",
                "5MiB",
                "--acl",
                "public-read",
                f.to_str().unwrap(),
                &url,
            ],
        );
        if kept {
            assert_eq!(all_users_grants(&ep, &bucket, name), 1, "{name}");
        }
        ok(base, &["update", "--acl", "private", &url]);
        if kept {
            assert_eq!(all_users_grants(&ep, &bucket, name), 0, "{name}");
        }
        let m = stat(base, &url);
        assert_eq!(m["size"], std::fs::metadata(f).unwrap().len(), "{m}");
    }
}

#[test]
fn acl_reaches_moto() {
    acl_s3(moto, "SHOAL_TEST_MOTO", true);
}

#[test]
fn acl_is_accepted_minio() {
    acl_s3(s3, "SHOAL_TEST_S3", false);
}

/// `--predefined-acl` on an upload on fake-gcs-server, which keeps it in
/// the object's `acl` field. fake-gcs-server 1.56 ignores `predefinedAcl`
/// on PATCH (the object keeps its ACL), so of the update only the rest is
/// checked: the object keeps its metadata and generation.
#[test]
fn predefined_acl_reaches_gcs() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let url = format!("gs://{bucket}/f.txt");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, b"acl").unwrap();
    ok(
        gcs,
        &[
            "cp",
            "--predefined-acl",
            "publicRead",
            "--metadata",
            "keep=1",
            f.to_str().unwrap(),
            &url,
        ],
    );
    let ep = std::env::var("SHOAL_TEST_GCS").unwrap();
    let resource = std::process::Command::new("curl")
        .args([
            "-sS",
            &format!("{ep}/storage/v1/b/{bucket}/o/f.txt?projection=full"),
        ])
        .output()
        .unwrap();
    let resource = String::from_utf8_lossy(&resource.stdout).into_owned();
    assert!(resource.contains("allUsers"), "{resource}");
    let before = stat(gcs, &url);
    ok(gcs, &["update", "--predefined-acl", "private", &url]);
    let after = stat(gcs, &url);
    assert_eq!(after["generation"], before["generation"], "{after}");
    assert_eq!(after["metadata"], before["metadata"], "{after}");
}

#[test]
fn acl_values_are_checked_client_side() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, b"x").unwrap();
    let f = f.to_str().unwrap();
    for (args, needles) in [
        (
            vec!["cp", "--acl", "world", f, "s3://b/k"],
            vec!["unknown ACL 'world'", "public-read"],
        ),
        (
            vec!["cp", "--predefined-acl", "public-read", f, "gs://b/k"],
            vec!["unknown ACL", "publicRead"],
        ),
        (
            vec!["cp", "--acl", "public-read", f, "gs://b/k"],
            vec!["gs:// objects take --predefined-acl"],
        ),
        (
            vec!["update", "--predefined-acl", "publicRead", "s3://b/k"],
            vec!["s3:// objects take --acl"],
        ),
    ] {
        run(with_args(shoal(), &args)).assert_one_line_error(2, &needles);
    }
}

/// `-P`: the mode, owner and group go up in each store's keys and the
/// mode comes back down; without -P a download keeps its own mode.
fn preserve_posix(base: fn() -> Option<Command>, scheme: &str, mode_key: &str, mode: &str) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.sh");
    std::fs::write(&f, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o750)).unwrap();
    let url = format!("{scheme}://{bucket}/f.sh");
    ok(base, &["cp", "-P", f.to_str().unwrap(), &url]);
    let m = stat(base, &url);
    let own = std::fs::metadata(&f).unwrap();
    assert_eq!(m["metadata"][mode_key], mode, "{m}");
    let uid_key = mode_key.replace("mode", "uid");
    assert_eq!(m["metadata"][&uid_key], own.uid().to_string(), "{m}");
    let back = dir.path().join("back.sh");
    ok(base, &["cp", "-P", &url, back.to_str().unwrap()]);
    let md = std::fs::metadata(&back).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o750);
    assert_eq!(md.uid(), own.uid());
    let plain = dir.path().join("plain.sh");
    ok(base, &["cp", &url, plain.to_str().unwrap()]);
    let md = std::fs::metadata(&plain).unwrap();
    assert_ne!(md.mode() & 0o7777, 0o750);
}

#[test]
fn preserve_posix_gcs() {
    preserve_posix(gcs, "gs", "goog-reserved-posix-mode", "750");
}

#[test]
fn preserve_posix_s3() {
    preserve_posix(s3, "s3", "mode", "0100750");
}
