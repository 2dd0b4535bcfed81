//! Plans whose source and destination overlap are refused before anything
//! is written or deleted: a sync into its own subfolder nests deeper on
//! every run, and `sync --delete` from a subfolder of its destination
//! deleted its own source.

use crate::common::*;

fn tree(dir: &std::path::Path) {
    for f in ["a", "sub/b", "sub/c2", "sub/sub/d"] {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, f.as_bytes()).unwrap();
    }
}

#[test]
fn overlapping_local_folders_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let before = {
        let mut v = files_below(&src);
        v.sort();
        v
    };
    let s = src.to_str().unwrap().to_owned();
    let sub = src.join("sub").to_str().unwrap().to_owned();
    let dotted = format!("{s}/sub/../sub/.");
    std::os::unix::fs::symlink(&src, dir.path().join("link")).unwrap();
    let link_sub = dir.path().join("link/sub").to_str().unwrap().to_owned();
    for args in [
        vec!["sync", "--delete", &s, &sub],
        vec!["sync", "--delete", &sub, &s],
        vec!["sync", &s, &s],
        vec!["sync", "--delete", &dotted, &s],
        vec!["sync", "--delete", &link_sub, &s],
        vec!["cp", "-r", &s, &sub],
        vec!["cp", "-r", &sub, &s],
    ] {
        let r = run(with_args(shoal(), &args));
        r.assert_one_line_error(2, &["nothing was done"]);
        let mut now = files_below(&src);
        now.sort();
        assert_eq!(now, before, "{args:?} changed the source");
    }
    // Next to each other is fine.
    let r = run(with_args(
        shoal(),
        &["sync", &s, dir.path().join("src2").to_str().unwrap()],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

fn overlapping_prefixes(base: fn() -> Option<std::process::Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    tree(&dir.path().join("t"));
    let b = |k: &str| format!("{scheme}://{bucket}/{k}");
    let r = run(with_args(
        base().unwrap(),
        &["sync", dir.path().join("t").to_str().unwrap(), &b("p/q")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ls = || run(with_args(base().unwrap(), &["ls", "-r", &b("")])).stdout;
    let before = ls();
    for args in [
        vec!["sync".to_owned(), "--delete".into(), b("p/q"), b("p")],
        vec!["sync".into(), b("p"), b("p/q")],
        vec!["sync".into(), "--delete".into(), b(""), b("p")],
        vec!["cp".into(), "-r".into(), b("p"), b("")],
        vec!["cp".into(), "-r".into(), b("p"), b("p/q/")],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run(with_args(base().unwrap(), &args));
        r.assert_one_line_error(2, &["nothing was done"]);
        assert_eq!(ls(), before, "{args:?} changed the bucket");
    }
    // `p` and `pq` are different folders.
    let r = run(with_args(base().unwrap(), &["sync", &b("p"), &b("pq")]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("Synced: 4 files"), "{}", r.stderr);
}

#[test]
fn overlapping_prefixes_are_refused_gcs() {
    overlapping_prefixes(gcs, "gs");
}

#[test]
fn overlapping_prefixes_are_refused_s3() {
    overlapping_prefixes(s3, "s3");
}

/// `sync --delete` from a source that lists nothing deletes nothing (a
/// typo in a prefix), unless asked for; `--max-delete` refuses a run that
/// would delete more, deleting nothing; `--dry-run` names every deletion.
#[test]
fn delete_guards() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("keep");
    tree(&keep);
    let k = keep.to_str().unwrap();
    let files = || {
        let mut v = files_below(&keep);
        v.sort();
        v
    };
    let before = files();
    let nothing = format!("s3://{bucket}/no-such-prefix");
    let r = run(with_args(s3().unwrap(), &["sync", "--delete", &nothing, k]));
    r.assert_one_line_error(1, &["4 extras not deleted", "the source lists nothing"]);
    assert_eq!(files(), before);
    // --dry-run names each deletion it would make.
    let r = run(with_args(
        s3().unwrap(),
        &[
            "sync",
            "--delete",
            "--dry-run",
            "--delete-when-source-empty",
            &nothing,
            k,
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout
            .lines()
            .filter(|l| l.starts_with("would delete "))
            .count(),
        4,
        "{}",
        r.stdout
    );
    assert_eq!(files(), before);
    // More than --max-delete: nothing deleted.
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a"), b"a").unwrap();
    let r = run(with_args(
        s3().unwrap(),
        &[
            "sync",
            "--delete",
            "--max-delete",
            "2",
            src.to_str().unwrap(),
            k,
        ],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("3 extras not deleted: more than --max-delete 2"),
        "{}",
        r.stderr
    );
    assert_eq!(files().len(), before.len());
    let r = run(with_args(
        s3().unwrap(),
        &[
            "sync",
            "--delete",
            "--max-delete",
            "3",
            src.to_str().unwrap(),
            k,
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(files(), [keep.join("a").display().to_string()]);
    // Asked for: the empty source empties it.
    let r = run(with_args(
        s3().unwrap(),
        &[
            "sync",
            "--delete",
            "--delete-when-source-empty",
            &nothing,
            k,
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(files().is_empty());
}

/// A glob copied or moved into a folder it can match would write over (a
/// move: delete) what it is still reading: `mv 'p/*' p/` copied every
/// object onto itself, then deleted it. Refused before anything runs, on
/// every variant (server-side or streamed, with metadata, multipart); a
/// glob that cannot match the destination still runs.
fn globs_into_what_they_read(base: fn() -> Option<std::process::Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    tree(&dir.path().join("p"));
    let b = |k: &str| format!("{scheme}://{bucket}/{k}");
    let src = dir.path().join("p");
    for to in ["p", "q"] {
        let r = run(with_args(
            base().unwrap(),
            &["sync", src.to_str().unwrap(), &b(to)],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let ls = || run(with_args(base().unwrap(), &["ls", "-r", &b("")])).stdout;
    let before = ls();
    assert_eq!(before.lines().count(), 8, "{before}");
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for args in [
        s(&["mv", &b("p/*"), &b("p/")]),
        s(&["mv", &b("p/*"), &b("p")]),
        s(&["mv", "--no-server-side", &b("p/*"), &b("p/")]),
        s(&["mv", "--content-type", "text/x", &b("p/*"), &b("p/")]),
        s(&["mv", "--part-size", "5MiB", &b("p/*"), &b("p/")]),
        s(&["mv", "-r", &b("q/**"), &b("q/")]),
        s(&["mv", &b("*"), &b("")]),
        s(&["mv", "-r", &b("p*"), &b("p/")]),
        s(&["cp", &b("p/**"), &b("p/sub/")]),
        s(&["mv", &b("p/**"), &b("p/sub/")]),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run(with_args(base().unwrap(), &args));
        r.assert_one_line_error(2, &["can match objects in", "nothing was done"]);
        assert_eq!(ls(), before, "{args:?} changed the bucket");
    }
    // A one-level glob cannot match below its level: this runs.
    let r = run(with_args(
        base().unwrap(),
        &["cp", &b("p/*"), &b("p/sub/sub/x/")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(ls().contains(&b("p/sub/sub/x/a")));
}

#[test]
fn globs_into_what_they_read_are_refused_gcs() {
    globs_into_what_they_read(gcs, "gs");
}

#[test]
fn globs_into_what_they_read_are_refused_s3() {
    globs_into_what_they_read(s3, "s3");
}

/// `sync --delete` deletes nothing after a copy of the same run failed
/// (here a key longer than the store takes), as rsync and rclone hold
/// deletes back after an error: the failed copy may be the renamed file
/// whose old name is the extra. `--ignore-errors` deletes anyway.
#[test]
fn sync_deletes_nothing_after_a_failed_copy() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let long: std::path::PathBuf = (0..6).map(|i| format!("{i}{}", "x".repeat(199))).collect();
    std::fs::create_dir_all(src.join(&long)).unwrap();
    std::fs::write(src.join(&long).join("renamed"), b"moved here").unwrap();
    std::fs::write(src.join("ok"), b"fine").unwrap();
    let b = |k: &str| format!("s3://{bucket}/{k}");
    let r = run(with_args(
        s3().unwrap(),
        &["cp", src.join("ok").to_str().unwrap(), &b("d/old-name")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ls = || run(with_args(s3().unwrap(), &["ls", "-r", &b("d/")])).stdout;
    let s = src.to_str().unwrap();
    let r = run(with_args(s3().unwrap(), &["sync", "--delete", s, &b("d")]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("1 extra not deleted: 1 transfer failed in this run"),
        "{}",
        r.stderr
    );
    assert!(ls().contains(&b("d/old-name")), "{}", ls());
    assert!(ls().contains(&b("d/ok")), "{}", ls());
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--delete", "--ignore-errors", s, &b("d")],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(!ls().contains(&b("d/old-name")), "{}", ls());
}
