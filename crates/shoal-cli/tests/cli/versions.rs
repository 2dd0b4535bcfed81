//! Object versions against the real servers, on buckets with versioning
//! on (MinIO: `PUT ?versioning`; fake-gcs-server: a bucket created with
//! `versioning.enabled`, which keeps every replaced or deleted generation
//! with its `timeDeleted`): `ls -a` lists every version and S3 delete
//! marker, `--version-id` reads, copies (restores) and deletes one,
//! `rm -a` deletes them all, `rb --force` empties a versioned bucket, and
//! nothing but `--all-versions` touches a noncurrent version or marker
//! (plain rm, sync --delete and mv leave them).

use std::process::Command;

use crate::common::*;

fn ok(c: Command) -> Run {
    let r = run(c);
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    r
}

/// A new bucket with versioning on.
fn versioned_bucket(base: fn() -> Option<Command>, scheme: &str) -> Option<String> {
    base()?;
    let bucket = unique("ver");
    if scheme == "gs" {
        let host = std::env::var("STORAGE_EMULATOR_HOST").ok()?;
        let body = format!(r#"{{"name":"{bucket}","versioning":{{"enabled":true}}}}"#);
        let out = Command::new("curl")
            .args(["-sS", "--fail", "-X", "POST"])
            .arg(format!("{host}/storage/v1/b?project=test"))
            .args(["-H", "content-type: application/json", "--data", &body])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        ok(with_args(
            base().unwrap(),
            &["-q", "mb", &format!("s3://{bucket}")],
        ));
        let ep = std::env::var("SHOAL_TEST_S3").ok()?;
        let key = std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into());
        let secret = std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| "minioadmin".into());
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
    Some(bucket)
}

/// One line of `ls -a --json`: (version, is_latest, delete_marker, size).
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    version: String,
    latest: bool,
    marker: bool,
    size: u64,
}

/// `ls -a --json ARGS`: every version listed, in the order printed; an
/// empty listing (exit 1, matched nothing) is empty.
fn versions(base: fn() -> Option<Command>, args: &[&str]) -> Vec<Listed> {
    let mut all = vec!["ls", "-a", "--json"];
    all.extend_from_slice(args);
    let r = run(with_args(base().unwrap(), &all));
    if r.code == 1 && r.stderr.contains("matched no objects") {
        return Vec::new();
    }
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut out = Vec::new();
    for line in r.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v.get("listing_end").is_some() || v.get("prefix").is_some() {
            continue;
        }
        let version = v
            .get("generation")
            .or(v.get("version_id"))
            .and_then(|g| g.as_str())
            .unwrap_or_else(|| panic!("no version in {line}"))
            .to_owned();
        out.push(Listed {
            version,
            latest: v["is_latest"].as_bool().unwrap_or_else(|| panic!("{line}")),
            marker: v.get("delete_marker").and_then(|m| m.as_bool()) == Some(true),
            size: v["size"].as_u64().unwrap(),
        });
    }
    out
}

fn put(base: fn() -> Option<Command>, dir: &std::path::Path, url: &str, data: &[u8]) {
    let p = dir.join("body");
    std::fs::write(&p, data).unwrap();
    ok(with_args(
        base().unwrap(),
        &["-q", "cp", p.to_str().unwrap(), url],
    ));
}

fn cat(base: fn() -> Option<Command>, args: &[&str]) -> Vec<u8> {
    let mut all = vec!["cat"];
    all.extend_from_slice(args);
    ok(with_args(base().unwrap(), &all)).stdout_bytes
}

fn versions_listed_read_restored_and_deleted(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = versioned_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{scheme}://{bucket}/k.txt");
    for body in [&b"one"[..], b"two!", b"three"] {
        put(base, dir.path(), &url, body);
    }
    let v = versions(base, &[&url]);
    assert_eq!(v.len(), 3, "{v:?}");
    assert_eq!(v.iter().filter(|l| l.latest).count(), 1, "{v:?}");
    let first = v.iter().find(|l| l.size == 3).unwrap().version.clone();
    let second = v.iter().find(|l| l.size == 4).unwrap().version.clone();

    // One version read by its id: stat, cat, cp to a file.
    let r = ok(with_args(
        base().unwrap(),
        &["stat", "--json", "--version-id", &first, &url],
    ));
    let s: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(s["size"], 3, "{}", r.stdout);
    assert_eq!(cat(base, &["--version-id", &first, &url]), b"one");
    assert_eq!(cat(base, &[&url]), b"three");
    let local = dir.path().join("old.txt");
    ok(with_args(
        base().unwrap(),
        &[
            "-q",
            "cp",
            "--version-id",
            &second,
            &url,
            local.to_str().unwrap(),
        ],
    ));
    assert_eq!(std::fs::read(&local).unwrap(), b"two!");
    // A version that does not exist: one line, exit 1.
    let missing = if scheme == "gs" {
        "12345"
    } else {
        "no-such-version"
    };
    let r = run(with_args(
        base().unwrap(),
        &["cat", "--version-id", missing, &url],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    if scheme == "gs" {
        let r = run(with_args(
            base().unwrap(),
            &["stat", "--version-id", "abc", &url],
        ));
        r.assert_one_line_error(2, &["not a GCS generation"]);
    }

    // Restore: the old version becomes the current one, a new version.
    ok(with_args(
        base().unwrap(),
        &["-q", "cp", "--version-id", &first, &url, &url],
    ));
    assert_eq!(cat(base, &[&url]), b"one");
    let v = versions(base, &[&url]);
    assert_eq!(v.len(), 4, "{v:?}");
    assert_eq!(v.iter().filter(|l| l.latest).count(), 1, "{v:?}");

    // A plain rm deletes the current object only: every older version
    // stays (S3 adds a delete marker, GCS keeps the generation).
    ok(with_args(base().unwrap(), &["-q", "rm", &url]));
    let v = versions(base, &[&url]);
    let markers = v.iter().filter(|l| l.marker).count();
    assert_eq!(v.len() - markers, 4, "{v:?}");
    assert_eq!(markers, usize::from(scheme == "s3"), "{v:?}");
    assert!(v.iter().all(|l| !l.latest || l.marker), "{v:?}");
    let r = run(with_args(base().unwrap(), &["cat", &url]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(cat(base, &["--version-id", &second, &url]), b"two!");

    // One version deleted by its id; the others stay.
    ok(with_args(
        base().unwrap(),
        &["-q", "rm", "--version-id", &second, &url],
    ));
    let after = versions(base, &[&url]);
    assert_eq!(after.len(), v.len() - 1, "{after:?}");
    assert!(after.iter().all(|l| l.version != second), "{after:?}");

    // -l shows a state column; plain lines name the version.
    let r = ok(with_args(base().unwrap(), &["ls", "-a", &url]));
    assert!(r.stdout.contains(&format!("{url}#{first}")), "{}", r.stdout);
    let r = ok(with_args(base().unwrap(), &["ls", "-a", "-l", &url]));
    assert!(r.stdout.contains("noncurrent"), "{}", r.stdout);

    // rm -a: every version and marker of the key, nothing else.
    let other = format!("{scheme}://{bucket}/k.txt.other");
    put(base, dir.path(), &other, b"x");
    ok(with_args(base().unwrap(), &["-q", "rm", "-a", &url]));
    assert_eq!(versions(base, &[&url]), Vec::new());
    assert_eq!(versions(base, &[&other]).len(), 1);
}

#[test]
fn s3_versions() {
    versions_listed_read_restored_and_deleted(s3, "s3");
}

#[test]
fn gcs_versions() {
    versions_listed_read_restored_and_deleted(gcs, "gs");
}

/// sync --delete, mv -r and rm -r delete current objects only; rm -r -a
/// then removes every version below the prefix; rb --force empties a
/// versioned bucket (versions and markers) and removes it.
fn only_all_versions_touches_old_versions(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = versioned_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = format!("{scheme}://{bucket}/d/");
    for key in ["a", "b", "c"] {
        for body in [&b"old"[..], b"new!"] {
            put(base, dir.path(), &format!("{root}{key}"), body);
        }
    }
    let count = |url: &str| {
        let v = versions(base, &["-r", url]);
        (
            v.iter().filter(|l| !l.marker).count(),
            v.iter().filter(|l| l.marker).count(),
        )
    };
    assert_eq!(count(&root), (6, 0));

    // sync --delete of a folder holding only `a`: b and c go, as current
    // objects; their versions stay.
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a"), b"new!").unwrap();
    ok(with_args(
        base().unwrap(),
        &[
            "-q",
            "sync",
            "--delete",
            "--size-only",
            src.to_str().unwrap(),
            &root,
        ],
    ));
    let markers = usize::from(scheme == "s3");
    assert_eq!(count(&root), (6, 2 * markers));

    // mv -r of what is current (a): its versions stay at the source.
    let moved = format!("{scheme}://{bucket}/moved/");
    ok(with_args(
        base().unwrap(),
        &["-q", "mv", "-r", &root, &moved],
    ));
    assert_eq!(count(&root), (6, 3 * markers));
    assert_eq!(cat(base, &[&format!("{moved}d/a")]), b"new!");

    // rm -r -a: every version and marker below the prefix.
    ok(with_args(base().unwrap(), &["-q", "rm", "-r", "-a", &root]));
    assert_eq!(count(&root), (0, 0));
    assert_eq!(count(&moved), (1, 0));

    // rb --force: current objects, then every version and marker.
    put(base, dir.path(), &format!("{moved}d/a"), b"again");
    ok(with_args(
        base().unwrap(),
        &["-q", "rm", &format!("{moved}d/a")],
    ));
    let bucket_url = format!("{scheme}://{bucket}");
    ok(with_args(
        base().unwrap(),
        &["-q", "rb", "--force", &bucket_url],
    ));
    let r = run(with_args(
        base().unwrap(),
        &["ls", &format!("{bucket_url}/")],
    ));
    assert_ne!(r.code, 0, "the bucket is still there: {}", r.stdout);
}

#[test]
fn s3_only_all_versions_touches_old_versions() {
    only_all_versions_touches_old_versions(s3, "s3");
}

#[test]
fn gcs_only_all_versions_touches_old_versions() {
    only_all_versions_touches_old_versions(gcs, "gs");
}
