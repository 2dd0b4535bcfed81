//! What a walk of a local folder does not copy is said: symbolic links,
//! FIFOs, link loops and shoal's own working files are counted in the
//! summary and named (always when nobody asked to skip them, with `-v`
//! otherwise); a skip nobody asked for exits 1 and stops `sync --delete`
//! from deleting. `-L` follows links, `--skip-symlinks` skips them as
//! asked. Local-to-local runs need no server; the cloud rows do.

use std::os::unix::fs::symlink;
use std::path::Path;

use crate::common::*;

fn local(args: &[&str]) -> Run {
    run(with_args(shoal(), args))
}

/// a.txt, sub/b.txt, la -> a.txt, ld -> sub.
fn tree_with_links(root: &Path) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("a.txt"), b"alpha").unwrap();
    std::fs::write(root.join("sub/b.txt"), b"beta").unwrap();
    symlink("a.txt", root.join("la")).unwrap();
    symlink("sub", root.join("ld")).unwrap();
}

fn mkfifo(path: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Every file below `dir`, relative to it, sorted.
fn rel_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = files_below(dir)
        .into_iter()
        .map(|f| {
            f.strip_prefix(&format!("{}/", dir.display()))
                .unwrap()
                .to_owned()
        })
        .collect();
    v.sort();
    v
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn links_are_reported_and_fail_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree_with_links(&src);
    let out = dir.path().join("out");
    let r = local(&["cp", "-r", p(&src), p(&out)]);
    assert_eq!(r.code, 1, "a skip nobody asked for: {}", r.stderr);
    for name in ["src/la", "src/ld"] {
        assert!(
            r.stderr.lines().any(|l| l.starts_with("shoal: skipped:")
                && l.contains(name)
                && l.contains("symbolic link")),
            "{name} named: {}",
            r.stderr
        );
    }
    assert!(r.stderr.contains("Copied: 2 files"), "{}", r.stderr);
    assert!(r.stderr.contains("2 skipped"), "{}", r.stderr);
    assert_eq!(rel_files(&out), ["src/a.txt", "src/sub/b.txt"]);
}

#[test]
fn skip_symlinks_counts_quietly_and_v_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree_with_links(&src);
    let out = dir.path().join("out");
    let r = local(&["cp", "-r", "--skip-symlinks", p(&src), p(&out)]);
    assert_eq!(r.code, 0, "asked: {}", r.stderr);
    assert!(
        !r.stderr.contains("skipped:"),
        "not named without -v: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains("2 skipped (-v names them)"),
        "counted: {}",
        r.stderr
    );
    assert_eq!(rel_files(&out), ["src/a.txt", "src/sub/b.txt"]);

    let out2 = dir.path().join("out2");
    let r = local(&["-v", "cp", "-r", "--no-follow-symlinks", p(&src), p(&out2)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let named = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("shoal: skipped:"))
        .count();
    assert_eq!(named, 2, "-v names each: {}", r.stderr);
}

#[test]
fn follow_symlinks_copies_what_links_point_to() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree_with_links(&src);
    let out = dir.path().join("out");
    let r = local(&["cp", "-r", "-L", p(&src), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        rel_files(&out),
        ["src/a.txt", "src/la", "src/ld/b.txt", "src/sub/b.txt"]
    );
    assert_eq!(std::fs::read(out.join("src/la")).unwrap(), b"alpha");
    assert!(!out.join("src/la").is_symlink(), "a file, not a link");
    assert_eq!(std::fs::read(out.join("src/ld/b.txt")).unwrap(), b"beta");
}

#[test]
fn loops_and_fifos_are_reported_not_followed_or_read() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree_with_links(&src);
    symlink("..", src.join("sub/up")).unwrap();
    mkfifo(&src.join("pipe"));
    let out = dir.path().join("out");
    // A FIFO nobody writes to would block a reader forever: the run ends
    // only because the walk does not open it.
    let r = local(&["cp", "-r", "-L", p(&src), p(&out)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("src/pipe") && r.stderr.contains("FIFO"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("sub/up") && r.stderr.contains("loop"),
        "{}",
        r.stderr
    );
    // ld -> sub holds the same loop link (ld/up -> ..), reported too.
    assert!(r.stderr.contains("ld/up"), "{}", r.stderr);
    assert!(r.stderr.contains("3 skipped"), "{}", r.stderr);
    assert!(out.join("src/ld/b.txt").is_file());
    assert!(!out.join("src/pipe").exists());
}

#[test]
fn working_files_are_counted_not_copied() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.txt"), b"alpha").unwrap();
    let working = ".a.txt.shoal-tmp-0123456789abcdef0123456789abcdef";
    std::fs::write(src.join(working), b"half").unwrap();
    // Named like one but not of its shape: a user's file, copied.
    std::fs::write(src.join(".a.txt.shoal-tmp-1"), b"mine").unwrap();
    let out = dir.path().join("out");
    let r = local(&["cp", "-r", p(&src), p(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("1 skipped (-v names them)"),
        "{}",
        r.stderr
    );
    assert_eq!(rel_files(&out), ["src/.a.txt.shoal-tmp-1", "src/a.txt"]);
    let r = local(&["-v", "cp", "-r", p(&src), p(&dir.path().join("out2"))]);
    assert!(
        r.stderr.contains(working) && r.stderr.contains("working file"),
        "{}",
        r.stderr
    );
}

/// A source entry skipped without being asked could be anything the user
/// meant to keep: `sync --delete` deletes nothing after one, as rsync
/// does after an I/O error. Asked (`--skip-symlinks`), the link is simply
/// not part of the source.
#[test]
fn sync_delete_deletes_nothing_after_an_unasked_skip() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.txt"), b"alpha").unwrap();
    symlink("a.txt", src.join("la")).unwrap();
    let dst = dir.path().join("dst");
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::write(dst.join("la"), b"copied by -L once").unwrap();
    std::fs::write(dst.join("old.txt"), b"old").unwrap();

    let r = local(&["sync", "--delete", p(&src), p(&dst)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("not deleted"), "{}", r.stderr);
    assert!(r.stderr.contains("skipped"), "{}", r.stderr);
    assert_eq!(files_in(&dst), ["a.txt", "la", "old.txt"]);

    let r = local(&["sync", "--delete", "--dry-run", p(&src), p(&dst)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(!r.stdout.contains("would delete"), "{}", r.stdout);

    let r = local(&["sync", "--delete", "--skip-symlinks", p(&src), p(&dst)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(files_in(&dst), ["a.txt"]);
}

/// The destination's own links and special files are not the sync's:
/// neither followed, nor deleted, nor a reason to stop.
#[test]
fn sync_leaves_a_destinations_links_and_fifos_alone() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.txt"), b"alpha").unwrap();
    let dst = dir.path().join("dst");
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::write(dst.join("extra.txt"), b"x").unwrap();
    symlink("/nonexistent", dst.join("dangling")).unwrap();
    mkfifo(&dst.join("pipe"));
    let r = local(&["sync", "--delete", p(&src), p(&dst)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("skipped"), "{}", r.stderr);
    assert_eq!(files_in(&dst), ["a.txt", "dangling", "pipe"]);
}

/// Uploads say the same: a tree with a link and a FIFO, to a bucket.
fn upload_tree(base: fn() -> Option<std::process::Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree_with_links(&src);
    mkfifo(&src.join("pipe"));
    let url = format!("{scheme}://{bucket}/t/");
    let r = run(with_args(base().unwrap(), &["cp", "-r", p(&src), &url]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("3 skipped"), "{}", r.stderr);
    let r = run(with_args(base().unwrap(), &["ls", "-r", &url]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let keys: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(keys.len(), 2, "{keys:?}");

    std::fs::remove_file(src.join("pipe")).unwrap();
    let url2 = format!("{scheme}://{bucket}/l/");
    let r = run(with_args(
        base().unwrap(),
        &["cp", "-r", "-L", p(&src), &url2],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(with_args(
        base().unwrap(),
        &["cat", &format!("{url2}src/la")],
    ));
    assert_eq!(r.stdout, "alpha");
    let r = run(with_args(
        base().unwrap(),
        &["cat", &format!("{url2}src/ld/b.txt")],
    ));
    assert_eq!(r.stdout, "beta");
}

#[test]
fn uploads_count_links_and_fifos_gcs() {
    upload_tree(gcs, "gs");
}

#[test]
fn uploads_count_links_and_fifos_s3() {
    upload_tree(s3, "s3");
}

/// `ls` of a local folder reads it as `cp -r` does: in key order, links
/// and FIFOs named on stderr but not listed (nor followed), shoal's
/// working files left out; one level shows folders as `name/`.
#[test]
fn ls_of_a_local_folder_lists_what_cp_reads() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree_with_links(&src);
    mkfifo(&src.join("pipe"));
    std::fs::write(
        src.join(".a.txt.shoal-tmp-0123456789abcdef0123456789abcdef"),
        b"half",
    )
    .unwrap();
    let top = format!("{}/", p(&src));
    let r = local(&["ls", "-r", p(&src)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        listed,
        [format!("{top}a.txt"), format!("{top}sub/b.txt")],
        "{}",
        r.stderr
    );
    for name in ["src/la", "src/ld", "src/pipe"] {
        assert!(
            r.stderr
                .lines()
                .any(|l| l.starts_with("shoal: skipped:") && l.contains(name)),
            "{name} named: {}",
            r.stderr
        );
    }
    assert!(!r.stderr.contains("shoal-tmp"), "{}", r.stderr);
    let r = local(&["ls", "--json", p(&src)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let urls: Vec<String> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| v["url"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(urls, [format!("{top}a.txt"), format!("{top}sub/")]);
    // Then the closing record of a listing that ended without an error.
    let last: serde_json::Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["listing_end"]["count"], 2, "{last}");
}
