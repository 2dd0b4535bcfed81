//! Copies within one store are made by the server (S3 CopyObject or
//! UploadPartCopy, GCS rewrite), proven by a proxy that counts every byte
//! crossing the client's side; and `mv`, which deletes a source only once
//! its copy is in place.

use std::process::Command;
use std::time::Duration;

use crate::common::*;
use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script, When};

fn base(scheme: &str) -> fn() -> Option<Command> {
    if scheme == "gs" { gcs } else { s3 }
}

fn servers() -> bool {
    shoal_testkit_server("SHOAL_TEST_GCS").is_some()
        && shoal_testkit_server("SHOAL_TEST_S3").is_some()
}

fn upstream(scheme: &str) -> String {
    shoal_testkit_server(if scheme == "gs" {
        "SHOAL_TEST_GCS"
    } else {
        "SHOAL_TEST_S3"
    })
    .unwrap()
}

fn via(proxy: &FaultProxy, scheme: &str) -> Command {
    let mut c = base(scheme)().unwrap();
    c.env("STORAGE_EMULATOR_HOST", proxy.url())
        .env("AWS_ENDPOINT_URL", proxy.url());
    c
}

fn ok(c: Command, args: &[&str]) -> Run {
    let r = run(with_args(c, args));
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    r
}

/// Uploads `body` to `url` directly (not through any proxy).
fn put(url: &str, body: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, body).unwrap();
    let scheme = &url[..2];
    ok(base(scheme)().unwrap(), &["cp", f.to_str().unwrap(), url]);
}

/// The object's bytes, read directly; None when it does not exist.
fn get(url: &str) -> Option<Vec<u8>> {
    let r = run(with_args(base(&url[..2])().unwrap(), &["cat", url]));
    (r.code == 0).then_some(r.stdout_bytes)
}

const MIB: usize = 1 << 20;

/// The regression this pins: cloud-to-cloud copies within one endpoint
/// used to stream every byte down and up again through the client.
#[test]
fn same_store_copies_move_no_bytes_through_the_client() {
    if !servers() {
        return;
    }
    for scheme in ["gs", "s3"] {
        let bucket = make_bucket(base(scheme), scheme).unwrap();
        let other = make_bucket(base(scheme), scheme).unwrap();
        let body = pattern(8 * MIB, 7);
        let src = format!("{scheme}://{bucket}/src/big.bin");
        put(&src, &body);

        let proxy = FaultProxy::start(&upstream(scheme), Script::new());
        let dst = format!("{scheme}://{other}/copied.bin");
        let r = ok(via(&proxy, scheme), &["cp", &src, &dst]);
        assert!(r.stderr.contains("verified"), "{scheme}: {}", r.stderr);
        let moved = proxy.client_bytes();
        assert!(
            moved < 64 * 1024,
            "{scheme}: a server-side copy moved {moved} bytes through the client"
        );
        assert!(get(&dst).unwrap() == body, "{scheme}: copy differs");

        // The same copy streamed: every byte down, then up.
        let proxy = FaultProxy::start(&upstream(scheme), Script::new());
        let dst2 = format!("{scheme}://{other}/streamed.bin");
        ok(
            via(&proxy, scheme),
            &["cp", "--no-server-side", &src, &dst2],
        );
        let moved = proxy.client_bytes();
        assert!(
            moved >= 2 * body.len() as u64,
            "{scheme}: --no-server-side moved only {moved} bytes"
        );
        assert!(
            get(&dst2).unwrap() == body,
            "{scheme}: streamed copy differs"
        );

        // cp -r and sync go server-side too.
        let proxy = FaultProxy::start(&upstream(scheme), Script::new());
        let tree = format!("{scheme}://{other}/tree/");
        ok(
            via(&proxy, scheme),
            &["cp", "-r", &format!("{scheme}://{bucket}/src"), &tree],
        );
        let synced = format!("{scheme}://{other}/synced/");
        ok(
            via(&proxy, scheme),
            &["sync", &format!("{scheme}://{bucket}/src/"), &synced],
        );
        let moved = proxy.client_bytes();
        assert!(moved < 128 * 1024, "{scheme}: cp -r + sync moved {moved}");
        assert!(get(&format!("{tree}src/big.bin")).unwrap() == body);
        assert!(get(&format!("{synced}big.bin")).unwrap() == body);
    }
}

/// Above the part size an S3 copy is UploadPartCopy parts, still on the
/// server, completed into one object.
#[test]
fn an_s3_copy_above_the_part_size_is_made_of_part_copies() {
    if !servers() {
        return;
    }
    let bucket = make_bucket(s3, "s3").unwrap();
    let body = pattern(12 * MIB, 3);
    let src = format!("s3://{bucket}/big.bin");
    put(&src, &body);
    // A harmless "fault" on part 3, so the proxy's log shows it was sent.
    let proxy = FaultProxy::start(
        &upstream("s3"),
        Script::new().rule(Rule::new(
            When::method("PUT").contains("partNumber=3"),
            Fault::Throttle(1 << 30),
        )),
    );
    let dst = format!("s3://{bucket}/parts.bin");
    ok(
        via(&proxy, "s3"),
        &["cp", "--part-size", "5MiB", &src, &dst],
    );
    assert_eq!(proxy.injected().len(), 1, "part 3 was copied");
    let moved = proxy.client_bytes();
    assert!(moved < 64 * 1024, "a part copy moved {moved} bytes");
    assert!(get(&dst).unwrap() == body);
    let stat = ok(s3().unwrap(), &["stat", &dst]).stdout;
    assert!(stat.contains("-3\""), "three parts: {stat}");
    assert!(open_s3_uploads(&upstream("s3"), &bucket).is_empty());
}

/// A source replaced while the server copies it: the copy fails, and no
/// destination and no open upload is left. S3 refuses the pinned ETag;
/// fake-gcs-server ignores `ifSourceGenerationMatch`, so there the check
/// of the copy's size and CRC32C against the source's catches it and the
/// wrong copy is removed.
#[test]
fn a_source_replaced_mid_copy_fails_and_leaves_nothing() {
    if !servers() {
        return;
    }
    for (scheme, when) in [
        ("s3", When::method("PUT").contains("partNumber=2")),
        ("gs", When::method("POST").contains("rewriteTo")),
    ] {
        let bucket = make_bucket(base(scheme), scheme).unwrap();
        let src = format!("{scheme}://{bucket}/src.bin");
        put(&src, &pattern(12 * MIB, 1));
        // The window in which the source is replaced: the request waits
        // here until the test has done it (the test waits for the proxy
        // to see the request, not for a time).
        let proxy = FaultProxy::start(
            &upstream(scheme),
            Script::new().rule(Rule::new(when, Fault::DelayHeaders(Duration::from_secs(5)))),
        );
        let dst = format!("{scheme}://{bucket}/dst.bin");
        let mut child = with_args(
            via(&proxy, scheme),
            &["cp", "--workers", "1", "--part-size", "5MiB", &src, &dst],
        );
        child.stderr(std::process::Stdio::piped());
        let child = child.spawn().unwrap();
        while proxy.injected().is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
        put(&src, &pattern(3 * MIB, 2));
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{scheme}: {stderr}");
        assert!(stderr.contains("source"), "{scheme}: {stderr}");
        assert!(get(&dst).is_none(), "{scheme}: nothing half-made left");
        if scheme == "s3" {
            assert!(open_s3_uploads(&upstream("s3"), &bucket).is_empty());
        }
    }
}

#[test]
fn mv_one_object_in_every_direction() {
    if !servers() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(300_000, 9);
    let local = dir.path().join("a.bin");
    std::fs::write(&local, &body).unwrap();
    let s3b = make_bucket(s3, "s3").unwrap();
    let s3b2 = make_bucket(s3, "s3").unwrap();
    let gsb = make_bucket(gcs, "gs").unwrap();

    // local → cloud
    let up = format!("s3://{s3b}/a.bin");
    let r = ok(s3().unwrap(), &["mv", local.to_str().unwrap(), &up]);
    assert!(r.stderr.contains("Moved"), "{}", r.stderr);
    assert!(!local.exists());
    assert!(get(&up).unwrap() == body);
    // cloud → cloud (another bucket, server-side)
    let across = format!("s3://{s3b2}/b.bin");
    ok(s3().unwrap(), &["mv", &up, &across]);
    assert!(get(&up).is_none());
    assert!(get(&across).unwrap() == body);
    // cloud → local
    let back = dir.path().join("back.bin");
    ok(s3().unwrap(), &["mv", &across, back.to_str().unwrap()]);
    assert!(get(&across).is_none());
    assert!(std::fs::read(&back).unwrap() == body);
    // and on GCS, within the store and to a folder destination
    let g = format!("gs://{gsb}/g.bin");
    ok(gcs().unwrap(), &["mv", back.to_str().unwrap(), &g]);
    let g2 = format!("gs://{gsb}/moved/");
    ok(gcs().unwrap(), &["mv", &g, &g2]);
    assert!(get(&g).is_none());
    assert!(get(&format!("{g2}g.bin")).unwrap() == body);
    assert!(!back.exists());
}

#[test]
fn mv_r_of_a_glob_moves_what_it_matches() {
    if !servers() {
        return;
    }
    let bucket = make_bucket(gcs, "gs").unwrap();
    for k in ["logs/a.gz", "logs/b.gz", "logs/c.txt"] {
        put(&format!("gs://{bucket}/{k}"), k.as_bytes());
    }
    let dir = tempfile::tempdir().unwrap();
    let r = ok(
        gcs().unwrap(),
        &[
            "mv",
            &format!("gs://{bucket}/logs/*.gz"),
            dir.path().to_str().unwrap(),
        ],
    );
    assert!(r.stderr.contains("Moved: 2 files"), "{}", r.stderr);
    assert_eq!(files_in(dir.path()), ["a.gz", "b.gz"]);
    assert!(get(&format!("gs://{bucket}/logs/a.gz")).is_none());
    assert!(get(&format!("gs://{bucket}/logs/c.txt")).is_some());
}

/// A move that fails half way leaves every object in exactly one place:
/// moved (destination written, source deleted) or not (source kept).
#[test]
fn mv_r_failing_half_way_leaves_every_object_in_one_place() {
    if !servers() {
        return;
    }
    // A destination refused by --no-clobber (s3 → s3, server-side).
    let bucket = make_bucket(s3, "s3").unwrap();
    for k in ["a", "b", "c"] {
        put(&format!("s3://{bucket}/src/{k}"), k.as_bytes());
    }
    // `mv -r PREFIX/ DST/` lands at DST/<its last level>, as cp -r does.
    put(&format!("s3://{bucket}/dst/src/b"), b"already here");
    let r = run(with_args(
        s3().unwrap(),
        &[
            "mv",
            "-r",
            "--no-clobber",
            &format!("s3://{bucket}/src/"),
            &format!("s3://{bucket}/dst/"),
        ],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("Moved: 2 files") && r.stderr.contains("1 skipped"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("the source was kept"), "{}", r.stderr);
    for k in ["a", "c"] {
        assert!(
            get(&format!("s3://{bucket}/src/{k}")).is_none(),
            "{k} moved"
        );
        assert_eq!(
            get(&format!("s3://{bucket}/dst/src/{k}")).unwrap(),
            k.as_bytes()
        );
    }
    assert_eq!(get(&format!("s3://{bucket}/src/b")).unwrap(), b"b");
    assert_eq!(
        get(&format!("s3://{bucket}/dst/src/b")).unwrap(),
        b"already here"
    );

    // An unwritable local folder (cloud → local).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("t/locked")).unwrap();
    let bucket = make_bucket(gcs, "gs").unwrap();
    for k in ["ok1", "locked/x", "ok2"] {
        put(&format!("gs://{bucket}/t/{k}"), k.as_bytes());
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(out.join("t/locked"), std::fs::Permissions::from_mode(0o500)).unwrap();
    let writable = std::fs::write(out.join("t/locked/probe"), b"x").is_ok();
    if writable {
        // Root ignores the mode: the case cannot be made here.
        return;
    }
    let r = run(with_args(
        gcs().unwrap(),
        &[
            "mv",
            "-r",
            &format!("gs://{bucket}/t/"),
            &format!("{}/", out.to_str().unwrap()),
        ],
    ));
    std::fs::set_permissions(out.join("t/locked"), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("Moved: 2 files") && r.stderr.contains("1 FAILED"));
    assert_eq!(
        get(&format!("gs://{bucket}/t/locked/x")).unwrap(),
        b"locked/x"
    );
    assert!(!out.join("t/locked/x").exists());
    for k in ["ok1", "ok2"] {
        assert!(get(&format!("gs://{bucket}/t/{k}")).is_none());
        assert_eq!(std::fs::read(out.join("t").join(k)).unwrap(), k.as_bytes());
    }
}
