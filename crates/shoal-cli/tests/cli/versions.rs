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
        gcs_bucket_with(
            &host,
            &format!(r#"{{"name":"{bucket}","versioning":{{"enabled":true}}}}"#),
        );
    } else {
        ok(with_args(
            base().unwrap(),
            &["-q", "mb", &format!("s3://{bucket}")],
        ));
        s3_versioning_on(&bucket);
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

/// `shoal restore` of a version that is not soft-deleted (S3 and GCS
/// noncurrent versions): copied onto its key, but only into a key with no
/// live object unless `--allow-overwrite` (then pinned to the one seen).
fn restore_of_a_version(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = versioned_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{scheme}://{bucket}/r.txt");
    put(base, dir.path(), &url, b"first");
    put(base, dir.path(), &url, b"second!");
    let old = versions(base, &[&url])
        .into_iter()
        .find(|l| l.size == 5)
        .unwrap();
    let r = run(with_args(
        base().unwrap(),
        &["restore", "--version-id", &old.version, &url],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("has a live object"), "{}", r.stderr);
    assert_eq!(cat(base, &[&url]), b"second!");
    ok(with_args(
        base().unwrap(),
        &[
            "restore",
            "--allow-overwrite",
            "--version-id",
            &old.version,
            &url,
        ],
    ));
    assert_eq!(cat(base, &[&url]), b"first");
    // Gone (a delete marker on S3, a noncurrent generation on GCS): a
    // plain restore fills the key again.
    ok(with_args(base().unwrap(), &["rm", &url]));
    let r = ok(with_args(
        base().unwrap(),
        &["restore", "--version-id", &old.version, &url],
    ));
    assert!(r.stderr.contains("bytes copied"), "{}", r.stderr);
    assert_eq!(cat(base, &[&url]), b"first");
    // Every version is still there: a restore adds one, deletes none.
    assert_eq!(
        versions(base, &[&url])
            .iter()
            .filter(|l| l.version == old.version)
            .count(),
        1
    );
}

#[test]
fn restore_of_a_version_s3() {
    restore_of_a_version(s3, "s3");
}

#[test]
fn restore_of_a_version_gcs() {
    restore_of_a_version(gcs, "gs");
}

/// GCS soft delete on Google's storage-testbench (fake-gcs-server has
/// none): a deleted object of a bucket with a soft-delete policy is
/// listed by `ls --soft-deleted` as `url#GENERATION`, and `restore`
/// brings it back, refusing to replace a live object without
/// `--allow-overwrite`. fake-gcs-server ignores `softDeleted`: its
/// listing of live objects is dropped, never shown as deleted ones.
#[test]
fn soft_deleted_objects_are_listed_and_restored() {
    if let Some(bucket) = make_bucket(gcs, "gs") {
        let dir = tempfile::tempdir().unwrap();
        put(gcs, dir.path(), &format!("gs://{bucket}/live"), b"x");
        let r = ok(with_args(
            gcs().unwrap(),
            &["ls", "--soft-deleted", &format!("gs://{bucket}/")],
        ));
        assert_eq!(r.stdout.trim(), "", "{}", r.stdout);
    }
    let Some(tb) = std::env::var("SHOAL_TEST_GCS_TESTBENCH").ok() else {
        eprintln!("skipped: no storage-testbench (SHOAL_TEST_GCS_TESTBENCH)");
        return;
    };
    let shoal_tb = || -> Option<Command> {
        let mut c = shoal();
        c.env(
            "STORAGE_EMULATOR_HOST",
            std::env::var("SHOAL_TEST_GCS_TESTBENCH").ok()?,
        )
        .env("GOOGLE_CLOUD_PROJECT", "test");
        Some(c)
    };
    let bucket = unique("soft");
    gcs_bucket_with(
        &tb,
        &format!(
            r#"{{"name":"{bucket}","softDeletePolicy":{{"retentionDurationSeconds":"604800"}}}}"#
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let url = format!("gs://{bucket}/d/k.txt");
    put(shoal_tb, dir.path(), &url, b"kept for a week");
    put(
        shoal_tb,
        dir.path(),
        &format!("gs://{bucket}/d/k.txt2"),
        b"other",
    );
    ok(with_args(shoal_tb().unwrap(), &["rm", &url]));
    let r = ok(with_args(
        shoal_tb().unwrap(),
        &[
            "ls",
            "--soft-deleted",
            "--json",
            &format!("gs://{bucket}/d/"),
        ],
    ));
    let listed: Vec<serde_json::Value> = (r.stdout.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v.get("listing_end").is_none())
        .collect();
    assert_eq!(listed.len(), 1, "{}", r.stdout);
    assert_eq!(listed[0]["soft_deleted"], true, "{}", r.stdout);
    let g = listed[0]["generation"].as_str().unwrap().to_owned();
    // A name lists that name only (not k.txt2, which is live anyway).
    let r = ok(with_args(
        shoal_tb().unwrap(),
        &["ls", "--soft-deleted", &url],
    ));
    assert_eq!(r.stdout.trim(), format!("{url}#{g}"));
    // A second generation deleted, then something live at the key: kept
    // unless asked. (The testbench spoils a generation whose restore was
    // refused by its precondition, so the refusal uses the second one.)
    put(shoal_tb, dir.path(), &url, b"second");
    ok(with_args(shoal_tb().unwrap(), &["rm", &url]));
    let r = ok(with_args(
        shoal_tb().unwrap(),
        &["ls", "--soft-deleted", "--json", &url],
    ));
    let second = (r.stdout.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            v.get("generation")
                .and_then(|g| g.as_str())
                .map(str::to_owned)
        })
        .find(|x| *x != g)
        .unwrap_or_else(|| panic!("{}", r.stdout));
    put(shoal_tb, dir.path(), &url, b"newer");
    let r = run(with_args(
        shoal_tb().unwrap(),
        &["restore", &format!("{url}#{second}")],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("has a live object"), "{}", r.stderr);
    assert_eq!(cat(shoal_tb, &[&url]), b"newer");
    ok(with_args(shoal_tb().unwrap(), &["rm", &url]));
    let r = ok(with_args(
        shoal_tb().unwrap(),
        &["restore", "--version-id", &g, &url],
    ));
    assert!(r.stderr.contains("soft-deleted generation"), "{}", r.stderr);
    assert_eq!(cat(shoal_tb, &[&url]), b"kept for a week");
    // S3 has no soft delete: a usage error naming what it has.
    let r = run(with_args(shoal(), &["ls", "--soft-deleted", "s3://b/"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
}
