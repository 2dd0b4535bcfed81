//! Round trips between files and the stores, on fake-gcs-server and
//! MinIO: an upload records the file's time where gcloud (GCS) and rclone
//! (S3) keep it, a download gives the file that time (else the object's
//! own), and `sync` up then down, or down then up, plans no copy.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::*;

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

/// "hello": its CRC32C and MD5 as gcloud prints them, and in hex.
const HELLO_CRC: (&str, &str) = ("mnG7TA==", "9a71bb4c");
const HELLO_MD5: (&str, &str) = (
    "XUFAKrxLKna5cZ2REBfFkg==",
    "5d41402abc4b2a76b9719d911017c592",
);

fn hash_json(base: fn() -> Option<Command>, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["hash", "--json"];
    all.extend_from_slice(args);
    let r = ok(with_args(base().unwrap(), &all));
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `hash` of a file and of the objects made from it gives the same sums,
/// base64 or hex; an object that keeps no MD5 (a multipart upload) says
/// so, and `--compute` reads it for one.
fn hash_files_and_objects(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("hello");
    std::fs::write(&f, b"hello").unwrap();
    let f_s = f.to_str().unwrap();
    let url = format!("{scheme}://{bucket}/h/hello");
    ok(with_args(base().unwrap(), &["-q", "cp", f_s, &url]));
    for (hex, i) in [(false, 0), (true, 1)] {
        let mut args = vec![f_s, url.as_str()];
        if hex {
            args.insert(0, "--hex");
        }
        let got = hash_json(base, &args);
        assert_eq!(got.len(), 2, "{got:?}");
        for (v, computed) in got.iter().zip([true, false]) {
            assert_eq!(v["crc32c"], [HELLO_CRC.0, HELLO_CRC.1][i], "{v}");
            assert_eq!(v["md5"], [HELLO_MD5.0, HELLO_MD5.1][i], "{v}");
            assert_eq!(v["size"], 5);
            assert_eq!(v["computed"], computed);
        }
    }
    let r = ok(with_args(base().unwrap(), &["hash", &url]));
    assert!(
        r.stdout.contains(HELLO_CRC.0) && r.stdout.contains(HELLO_MD5.0),
        "{}",
        r.stdout
    );

    // Uploaded in parts: S3 keeps no MD5 of the whole, and says so.
    let big = dir.path().join("big");
    let data = pattern(11 << 20, 7);
    std::fs::write(&big, &data).unwrap();
    let big_url = format!("{scheme}://{bucket}/h/big");
    ok(with_args(
        base().unwrap(),
        &[
            "-q",
            "cp",
            "--part-size",
            "5MiB",
            big.to_str().unwrap(),
            &big_url,
        ],
    ));
    let local = &hash_json(base, &[big.to_str().unwrap()])[0];
    let kept = &hash_json(base, &[&big_url])[0];
    assert_eq!(kept["crc32c"], local["crc32c"]);
    if scheme == "s3" {
        assert!(kept["md5"].is_null(), "{kept}");
        let r = ok(with_args(base().unwrap(), &["hash", &big_url]));
        assert!(r.stdout.contains("none kept by the store"), "{}", r.stdout);
    }
    let computed = &hash_json(base, &["--compute", &big_url])[0];
    assert_eq!(computed["md5"], local["md5"]);
    assert_eq!(computed["crc32c"], local["crc32c"]);
    assert_eq!(computed["computed"], true);

    // Missing things: one line each, exit 1, the others still hashed.
    let gone = format!("{scheme}://{bucket}/h/gone");
    let r = run(with_args(base().unwrap(), &["hash", &gone, f_s]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(&gone), "{}", r.stderr);
    assert!(r.stdout.contains(HELLO_MD5.0), "{}", r.stdout);
}

#[test]
fn hash_gcs() {
    hash_files_and_objects(gcs, "gs");
}

#[test]
fn hash_s3() {
    hash_files_and_objects(s3, "s3");
}

fn check_run(base: fn() -> Option<Command>, args: &[&str]) -> Run {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    run(with_args(base().unwrap(), &all))
}

/// `check` of a folder against its copy in a bucket, and of the copies in
/// two stores against each other: 0 when they match; a changed file
/// (same size), a file on one side only, filtered names.
fn check_trees(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (n, b) in [("a", &b"alpha"[..]), ("b", b"bravo"), ("sub/c", b"charlie")] {
        std::fs::write(src.join(n), b).unwrap();
    }
    let src_s = src.to_str().unwrap();
    let url = format!("{scheme}://{bucket}/t/");
    ok(with_args(base().unwrap(), &["-q", "sync", src_s, &url]));
    let r = check_run(base, &[src_s, &url]);
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("3 same, 0 differ"), "{}", r.stderr);
    let r = check_run(base, &[&url, src_s]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Same size, other bytes; one only here, one only there.
    std::fs::write(src.join("b"), b"BRAVO").unwrap();
    std::fs::write(src.join("d"), b"delta").unwrap();
    let mut c = with_args(base().unwrap(), &["-q", "cp", "-", &format!("{url}sub/e")]);
    c.stdin(std::fs::File::open(src.join("a")).unwrap());
    ok(c);
    let r = check_run(base, &[src_s, &url]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines.contains(&"differs: b (content (checksums differ))"),
        "{lines:?}"
    );
    assert!(
        lines.contains(&format!("missing from {url}: d").as_str()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&format!("missing from {src_s}/: sub/e").as_str())
            || lines
                .iter()
                .any(|l| l.ends_with(": sub/e") && l.starts_with("missing from ")),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 3, "{lines:?}");
    // --size-only: b is the same size.
    let r = check_run(base, &["--size-only", "--json", src_s, &url]);
    assert_eq!(r.code, 1);
    let last: serde_json::Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["summary"]["differ"], 0, "{last}");
    assert_eq!(last["summary"]["same"], 3, "{last}");
    assert_eq!(last["summary"]["missing_from_dst"], 1, "{last}");
    assert_eq!(last["summary"]["missing_from_src"], 1, "{last}");
    // Filters: only what is left in.
    let r = check_run(
        base,
        &[
            "--exclude",
            "b",
            "--exclude",
            "d",
            "--exclude",
            "sub/e",
            src_s,
            &url,
        ],
    );
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);

    // A bad side: one line, usage.
    let r = check_run(base, &[src.join("a").to_str().unwrap(), &url]);
    r.assert_one_line_error(2, &["not a folder"]);
}

#[test]
fn check_gcs() {
    check_trees(gcs, "gs");
}

#[test]
fn check_s3() {
    check_trees(s3, "s3");
}

/// The same tree in both stores: compared object to object.
#[test]
fn check_between_stores() {
    let (Some(gb), Some(sb)) = (make_bucket(gcs, "gs"), make_bucket(s3, "s3")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (n, b) in [("a", &b"alpha"[..]), ("b", b"bravo")] {
        std::fs::write(dir.path().join(n), b).unwrap();
    }
    let d = dir.path().to_str().unwrap();
    let (g, s) = (format!("gs://{gb}/x/"), format!("s3://{sb}/x/"));
    ok(with_args(gcs().unwrap(), &["-q", "sync", d, &g]));
    ok(with_args(s3().unwrap(), &["-q", "sync", d, &s]));
    let both = || {
        let mut c = s3().unwrap();
        c.env(
            "STORAGE_EMULATOR_HOST",
            std::env::var("SHOAL_TEST_GCS").unwrap(),
        );
        c
    };
    let r = run(with_args(both(), &["check", &g, &s]));
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    std::fs::write(dir.path().join("b"), b"BRAVO").unwrap();
    ok(with_args(
        s3().unwrap(),
        &["-q", "cp", &format!("{d}/b"), &format!("{s}b")],
    ));
    let r = run(with_args(both(), &["check", &g, &s]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "differs: b (content (checksums differ))");
}
