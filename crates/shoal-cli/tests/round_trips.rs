//! Round trips between files and the stores, on fake-gcs-server and
//! MinIO: an upload records the file's time where gcloud (GCS) and rclone
//! (S3) keep it, a download gives the file that time (else the object's
//! own), and `sync` up then down, or down then up, plans no copy.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;

/// 2020-01-01T00:00:00Z, as `touch -d 2020-01-01` (in UTC) sets it.
const Y2020: u64 = 1_577_836_800;

fn ok(c: Command) -> Run {
    let r = run(c);
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    r
}

fn set_mtime(p: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

/// The planned copies of `sync -n ARGS...`, from its summary line.
fn planned_copies(base: fn() -> Option<Command>, args: &[&str]) -> u64 {
    let mut all = vec!["sync", "-n"];
    all.extend_from_slice(args);
    let r = ok(with_args(base().unwrap(), &all));
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("(dry run):"))
        .unwrap_or_else(|| panic!("no summary: {}", r.stderr));
    let n = line.split("(dry run): ").nth(1).unwrap();
    n.split(' ').next().unwrap().parse().unwrap()
}

/// `stat`'s custom metadata of `url`.
fn metadata_of(base: fn() -> Option<Command>, url: &str) -> Vec<(String, String)> {
    let r = ok(with_args(base().unwrap(), &["stat", url]));
    let mut out = Vec::new();
    let mut inside = false;
    for l in r.stdout.lines() {
        if l.trim() == "Metadata:" {
            inside = true;
        } else if inside && let Some((k, v)) = l.trim().split_once(": ") {
            out.push((k.to_owned(), v.to_owned()));
        }
    }
    out
}

/// The scenario: three files dated 2020 go up, come back into
/// another folder with their dates, and neither direction copies again;
/// a file changed since is still copied.
fn times_kept(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let old = UNIX_EPOCH + Duration::from_secs(Y2020);
    // One with a fraction of a second: GCS keeps whole seconds.
    let fraction = old + Duration::from_millis(700);
    for (name, body, t) in [
        ("a", &b"alpha"[..], old),
        ("b", b"bravo", old),
        ("sub/c", b"charlie", fraction),
    ] {
        std::fs::write(src.join(name), body).unwrap();
        set_mtime(&src.join(name), t);
    }
    let url = format!("{scheme}://{bucket}/d/");
    let (src_s, back) = (src.to_str().unwrap(), dir.path().join("back"));
    let back_s = back.to_str().unwrap();

    ok(with_args(base().unwrap(), &["-q", "sync", src_s, &url]));
    let meta = metadata_of(base, &format!("{url}a"));
    let want = match scheme {
        "gs" => ("goog-reserved-file-mtime", Y2020.to_string()),
        _ => ("mtime", format!("{Y2020}.000000000")),
    };
    assert!(
        meta.contains(&(want.0.to_owned(), want.1.clone())),
        "{meta:?}"
    );

    // Up then down: the folder already holds what the bucket does.
    assert_eq!(planned_copies(base, &[&url, src_s]), 0);

    ok(with_args(base().unwrap(), &["-q", "sync", &url, back_s]));
    assert_eq!(mtime(&back.join("a")), old);
    assert_eq!(mtime(&back.join("b")), old);
    let c = match scheme {
        "gs" => old,
        _ => fraction,
    };
    assert_eq!(mtime(&back.join("sub/c")), c);
    assert_eq!(std::fs::read(back.join("sub/c")).unwrap(), b"charlie");

    // Down then up: nothing to send back.
    assert_eq!(planned_copies(base, &[back_s, &url]), 0);
    assert_eq!(planned_copies(base, &[src_s, &url]), 0);

    // A file changed since (same size, today's time) still goes up, and
    // an object replaced since still comes down.
    std::fs::write(back.join("b"), b"BRAVO").unwrap();
    assert_eq!(planned_copies(base, &[back_s, &url]), 1);
    ok(with_args(base().unwrap(), &["-q", "sync", back_s, &url]));
    assert_eq!(planned_copies(base, &[&url, src_s]), 1);
    assert_eq!(planned_copies(base, &[&url, back_s]), 0);

    // One object, named: `cp` keeps the time too.
    let one = dir.path().join("one");
    ok(with_args(
        base().unwrap(),
        &["-q", "cp", &format!("{url}a"), one.to_str().unwrap()],
    ));
    assert_eq!(mtime(&one), old);
}

#[test]
fn times_kept_gcs() {
    times_kept(gcs, "gs");
}

#[test]
fn times_kept_s3() {
    times_kept(s3, "s3");
}

/// What other tools recorded is read (gcloud's whole seconds on GCS,
/// rclone's decimals and RFC 3339 on S3), and an object that records no
/// time gives the file its own update time, so a sync back is a no-op.
fn times_of_other_tools(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    let old = UNIX_EPOCH + Duration::from_secs(Y2020);
    let cases: &[(&str, &str, SystemTime)] = match scheme {
        "gs" => &[("goog-reserved-file-mtime", "1577836800", old)],
        _ => &[
            ("mtime", "1577836800.25", old + Duration::from_millis(250)),
            (
                "mtime",
                "2020-01-01T00:00:00.5Z",
                old + Duration::from_millis(500),
            ),
        ],
    };
    for (i, (k, v, want)) in cases.iter().enumerate() {
        let url = format!("{scheme}://{bucket}/tools/{i}");
        // From stdin: no file time of its own, only the one given.
        let mut c = with_args(
            base().unwrap(),
            &["-q", "cp", "--metadata", &format!("{k}={v}"), "-", &url],
        );
        c.stdin(std::fs::File::open(&f).unwrap());
        ok(c);
        let out = dir.path().join(format!("got-{i}"));
        ok(with_args(
            base().unwrap(),
            &["-q", "cp", &url, out.to_str().unwrap()],
        ));
        assert_eq!(mtime(&out), *want, "{k}={v}");
    }
    // No recorded time: the object's own.
    let url = format!("{scheme}://{bucket}/plain/");
    let mut c = with_args(base().unwrap(), &["-q", "cp", "-", &format!("{url}p")]);
    c.stdin(std::fs::File::open(&f).unwrap());
    ok(c);
    assert!(metadata_of(base, &format!("{url}p")).is_empty());
    let down = dir.path().join("down");
    ok(with_args(
        base().unwrap(),
        &["-q", "sync", &url, down.to_str().unwrap()],
    ));
    assert!(mtime(&down.join("p")) < SystemTime::now() + Duration::from_secs(3600));
    assert_eq!(planned_copies(base, &[down.to_str().unwrap(), &url]), 0);
    assert_eq!(planned_copies(base, &[&url, down.to_str().unwrap()]), 0);
}

#[test]
fn times_of_other_tools_gcs() {
    times_of_other_tools(gcs, "gs");
}

#[test]
fn times_of_other_tools_s3() {
    times_of_other_tools(s3, "s3");
}
