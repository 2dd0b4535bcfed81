//! `shoal ls` / `shoal du` with globs, end to end on fake-gcs-server and MinIO.

use crate::common::*;
use std::process::Command;

const KEYS: &[&str] = &[
    "folder/ABC1.zip",
    "folder/ABC2.zip",
    "folder/ABC/deep.zip",
    "folder/ABD.zip",
    "folder/x/y.txt",
    "logs/2024/01/a.gz",
    "logs/2024/02/b.gz",
    "logs/c.gz",
    "top.txt",
    "é/ü.txt",
];

fn setup(base: fn() -> Option<Command>, scheme: &str) -> Option<String> {
    let bucket = make_bucket(base, scheme)?;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    std::fs::write(&src, b"12345").unwrap();
    for k in KEYS {
        let url = format!("{scheme}://{bucket}/{k}");
        let r = run(with_args(
            base().unwrap(),
            &["cp", "-q", src.to_str().unwrap(), &url],
        ));
        assert_eq!(r.code, 0, "put {k}: {}", r.stderr);
    }
    Some(bucket)
}

fn lines(base: fn() -> Option<Command>, args: &[&str]) -> Vec<String> {
    let r = run(with_args(base().unwrap(), args));
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    let mut v: Vec<String> = r.stdout.lines().map(str::to_owned).collect();
    v.sort();
    v
}

fn globs(base: fn() -> Option<Command>, scheme: &str) {
    let Some(b) = setup(base, scheme) else { return };
    let u = |k: &str| format!("{scheme}://{b}/{k}");
    // One level: matching objects only, never deeper.
    assert_eq!(
        lines(base, &["ls", &u("folder/ABC*.zip")]),
        [u("folder/ABC1.zip"), u("folder/ABC2.zip")]
    );
    // Matching levels show as prefixes.
    assert_eq!(
        lines(base, &["ls", &u("folder/AB*")]),
        [
            u("folder/ABC/"),
            u("folder/ABC1.zip"),
            u("folder/ABC2.zip"),
            u("folder/ABD.zip")
        ]
    );
    // -r: and everything below matching levels.
    assert_eq!(
        lines(base, &["ls", "-r", &u("folder/ABC*")]),
        [
            u("folder/ABC/deep.zip"),
            u("folder/ABC1.zip"),
            u("folder/ABC2.zip")
        ]
    );
    // ** crosses levels; ? and classes stay within one.
    assert_eq!(
        lines(base, &["ls", &u("logs/**.gz")]),
        [
            u("logs/2024/01/a.gz"),
            u("logs/2024/02/b.gz"),
            u("logs/c.gz")
        ]
    );
    assert_eq!(
        lines(base, &["ls", &u("logs/**/0[2-9]/*")]),
        [u("logs/2024/02/b.gz")]
    );
    assert_eq!(lines(base, &["ls", &u("?/*.txt")]), [u("é/ü.txt")]);
    assert_eq!(
        lines(base, &["ls", &u("**.txt")]),
        [u("folder/x/y.txt"), u("top.txt"), u("é/ü.txt")]
    );
    // -l adds a total.
    let l = lines(base, &["ls", "-l", &u("folder/ABC*.zip")]);
    assert!(
        l.iter()
            .any(|x| x.starts_with("TOTAL: 2 objects, 10 bytes")),
        "{l:?}"
    );
    // A recursive listing, sorted, in parallel mode: the whole bucket.
    let r = run(with_args(
        base().unwrap(),
        &["ls", "-r", "--sorted", "--parallel", "4", &u("")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let got: Vec<&str> = r.stdout.lines().collect();
    let mut want: Vec<String> = KEYS.iter().map(|k| u(k)).collect();
    want.sort();
    assert_eq!(got, want);

    // Nothing matches: exit 1, one line.
    let r = run(with_args(base().unwrap(), &["ls", &u("nope*")]));
    r.assert_one_line_error(1, &["matched no objects", &u("nope*")]);

    // du.
    let r = run(with_args(base().unwrap(), &["du", "-s", &u("")]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let want_total = format!("{}  {}", KEYS.len() * 5, KEYS.len());
    // A header, then the total.
    let mut out = r.stdout.lines();
    let head: Vec<&str> = out.next().unwrap().split_whitespace().collect();
    assert_eq!(head, ["BYTES", "OBJECTS", "SIZE", "URL"], "{}", r.stdout);
    assert!(
        out.next().unwrap().split_whitespace().collect::<Vec<_>>()[..2]
            == [(KEYS.len() * 5).to_string(), KEYS.len().to_string()],
        "{} vs {want_total}",
        r.stdout
    );
    assert_eq!(r.stdout.lines().count(), 2);
    // -h: one human size column; an empty prefix is 0, not an error.
    let r = run(with_args(base().unwrap(), &["du", "-sh", &u("")]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .lines()
            .next()
            .unwrap()
            .trim_start()
            .starts_with("SIZE"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(" B "), "{}", r.stdout);
    let r = run(with_args(
        base().unwrap(),
        &["du", "-s", &u("empty-prefix/")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout.lines().nth(1).unwrap().split_whitespace().next(),
        Some("0"),
        "{}",
        r.stdout
    );
    // ls -lh: sizes in units.
    let r = run(with_args(base().unwrap(), &["ls", "-lh", "-r", &u("")]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .lines()
            .next()
            .unwrap()
            .trim_start()
            .starts_with("5 B"),
        "{}",
        r.stdout
    );
    let d = lines(base, &["du", "--count", "--group-by", "suffix", &u("**")]);
    assert!(d.iter().any(|l| l.trim() == "3  .gz"), "{d:?}");
    assert!(d.iter().any(|l| l.trim() == "4  .zip"), "{d:?}");
    let d = lines(base, &["du", &u("folder/")]);
    assert!(d.iter().any(|l| l.ends_with(&u("folder/ABC/"))), "{d:?}");
    assert!(d.iter().any(|l| l.contains("TOTAL")), "{d:?}");
    let r = run(with_args(base().unwrap(), &["du", &u("nope*")]));
    r.assert_one_line_error(1, &["matched no objects"]);
}

#[test]
fn globs_on_gcs() {
    globs(gcs, "gs");
}

#[test]
fn globs_on_s3() {
    globs(s3, "s3");
}

/// Bad globs are usage errors naming the URL, before any request.
#[test]
fn invalid_globs_are_usage_errors() {
    for args in [
        &["ls", "gs://b/a[bc"][..],
        &["du", "s3://b/x/[z-a]"],
        &["du", "--group-by", "size", "gs://b/"],
    ] {
        let mut c = shoal();
        c.env("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9");
        let r = run(with_args(c, args));
        r.assert_one_line_error(2, &[]);
        if args[0] == "ls" {
            assert!(r.stderr.contains("gs://b/a[bc") && r.stderr.contains("never closed"));
        }
    }
}

/// One level of a folder of several pages (2,600 objects and 60
/// subfolders, with names that sort beside them: `d7`, `d7!`, `d70`),
/// listed in parallel: the same lines as one sequential listing, each
/// once, and in key order with `--sorted`; a glob over it too.
fn one_level_of_a_big_folder(base: fn() -> Option<Command>, scheme: &str) {
    let Some(b) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dir");
    for i in 0..2_600 {
        let name = match i % 13 {
            0 => format!("d{}", i % 60),
            1 => format!("d{}!", i % 60),
            2 => format!("d{}0", i % 60),
            _ => format!("f{i:05}.json"),
        };
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join(name), b"x").unwrap();
    }
    for d in 0..60 {
        let sub = root.join(format!("d{d}"));
        let sub = if sub.is_file() {
            root.join(format!("d{d}x"))
        } else {
            sub
        };
        std::fs::create_dir_all(&sub).unwrap();
        for j in 0..3 {
            std::fs::write(sub.join(format!("k{j}")), b"y").unwrap();
        }
    }
    let up = run(with_args(
        base().unwrap(),
        &[
            "cp",
            "-r",
            "-q",
            root.to_str().unwrap(),
            &format!("{scheme}://{b}/"),
        ],
    ));
    assert_eq!(up.code, 0, "{}", up.stderr);
    let u = format!("{scheme}://{b}/dir/");
    let one = lines(base, &["ls", "--parallel", "1", &u]);
    assert!(one.len() > 2_000, "{}", one.len());
    assert_eq!(one.iter().filter(|l| l.ends_with('/')).count(), 60);
    let many = run(with_args(base().unwrap(), &["ls", "--parallel", "16", &u]));
    assert_eq!(many.code, 0, "{}", many.stderr);
    let mut got: Vec<String> = many.stdout.lines().map(str::to_owned).collect();
    got.sort();
    assert_eq!(got, one, "each entry once");
    let sorted = run(with_args(base().unwrap(), &["ls", "--sorted", &u]));
    let sorted: Vec<String> = sorted.stdout.lines().map(str::to_owned).collect();
    assert_eq!(sorted, one, "in key order");
    let glob = lines(base, &["ls", &format!("{u}d*")]);
    let want: Vec<String> = one
        .iter()
        .filter(|l| l[u.len()..].starts_with('d'))
        .cloned()
        .collect();
    assert_eq!(glob, want);
}

#[test]
fn one_level_of_a_big_folder_on_gcs() {
    one_level_of_a_big_folder(gcs, "gs");
}

#[test]
fn one_level_of_a_big_folder_on_s3() {
    one_level_of_a_big_folder(s3, "s3");
}
