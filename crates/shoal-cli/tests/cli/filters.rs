//! Daily use on the real servers (MinIO and fake-gcs-server):
//! `--include` / `--exclude` on `cp -r`, `sync`, `rm -r`, `ls -r` and `du`
//! (rules in order, first match wins, includes alone leave the rest out,
//! an excluded destination file survives `sync --delete`); `--no-clobber`
//! never replacing what exists (atomically: two writers race and exactly
//! one wins); `sync --size-only` and `--update`.

use std::path::Path;
use std::process::Stdio;

use crate::common::*;

type Base = fn() -> Option<std::process::Command>;

const SERVERS: [(Base, &str); 2] = [(gcs as Base, "gs"), (s3 as Base, "s3")];

/// `shoal` for local paths only.
fn local() -> Option<std::process::Command> {
    Some(shoal())
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn ok(base: Base, args: &[&str]) -> Run {
    let r = run(with_args(base().unwrap(), args));
    assert_eq!(r.code, 0, "shoal {args:?}: {}", r.stderr);
    r
}

/// Keys below `url` (a prefix ending in `/`), relative to it, sorted.
fn keys(base: Base, url: &str) -> Vec<String> {
    let r = run(with_args(base().unwrap(), &["ls", "-r", url]));
    if r.code != 0 && r.stderr.contains("matched no objects") {
        return Vec::new();
    }
    assert_eq!(r.code, 0, "ls -r {url}: {}", r.stderr);
    let mut v: Vec<String> = r
        .stdout
        .lines()
        .map(|l| l.strip_prefix(url).unwrap_or(l).to_owned())
        .collect();
    v.sort();
    v
}

fn cat(base: Base, url: &str) -> Vec<u8> {
    let r = run(with_args(base().unwrap(), &["cat", url]));
    assert_eq!(r.code, 0, "cat {url}: {}", r.stderr);
    r.stdout_bytes
}

fn put(base: Base, dir: &Path, url: &str, body: &[u8]) {
    let f = dir.join(".put");
    std::fs::write(&f, body).unwrap();
    ok(base, &["cp", p(&f), url]);
    std::fs::remove_file(f).unwrap();
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

/// Awkward names: spaces, unicode, `[`, `a-b` beside the folder `a/`.
fn awkward_tree(root: &Path) {
    for f in [
        "a.txt",
        "a.tmp",
        "a-b",
        "a/b.txt",
        "d/e/c.tmp",
        "d/x.txt",
        "with space.txt",
        "é.txt",
        "[x].txt",
    ] {
        let path = root.join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, f.as_bytes()).unwrap();
    }
}

#[test]
fn cp_r_filters_both_ways() {
    for (base, scheme) in SERVERS {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        awkward_tree(&src);
        // Local → cloud: names are below `src/`; `**` crosses levels.
        let up = format!("{scheme}://{bucket}/up/");
        let r = ok(base, &["cp", "-r", "--exclude", "**.tmp", p(&src), &up]);
        assert!(r.stderr.contains("Copied: 7 files"), "{}", r.stderr);
        assert_eq!(
            keys(base, &up),
            [
                "src/[x].txt",
                "src/a-b",
                "src/a.txt",
                "src/a/b.txt",
                "src/d/x.txt",
                "src/with space.txt",
                "src/é.txt",
            ]
        );
        // Cloud → local: includes alone leave the rest out; a pattern
        // without `/` names the last level at any depth (`*.txt` is
        // `a/b.txt` too), one with a `/` is anchored (`d/**`).
        let out = dir.path().join("out");
        ok(
            base,
            &[
                "cp",
                "-r",
                "--include",
                "*.txt",
                "--include",
                "d/**",
                &format!("{up}src"),
                p(&out),
            ],
        );
        assert_eq!(
            rel_files(&out),
            [
                "src/[x].txt",
                "src/a.txt",
                "src/a/b.txt",
                "src/d/x.txt",
                "src/with space.txt",
                "src/é.txt",
            ]
        );
        // A glob source: names below its literal folder; first match wins
        // (`a/b.txt` is excluded before `a*` could include it).
        let out2 = dir.path().join("out2");
        ok(
            base,
            &[
                "cp",
                "--exclude",
                "a/**",
                "--include",
                "a*",
                &format!("{up}src/**"),
                &format!("{}/", p(&out2)),
            ],
        );
        assert_eq!(rel_files(&out2), ["a-b", "a.txt"]);
        // -n: what would be copied, nothing copied.
        let out3 = dir.path().join("out3");
        let r = ok(
            base,
            &[
                "cp",
                "-r",
                "-n",
                "--include",
                "*.txt",
                &format!("{up}src"),
                p(&out3),
            ],
        );
        assert_eq!(r.stdout.lines().count(), 6, "{}", r.stdout);
        assert!(
            r.stdout.lines().all(|l| l.starts_with("would copy ")),
            "{}",
            r.stdout
        );
        assert!(!out3.exists());
    }
}

/// `sync --delete --exclude`: excluded source files are not copied, and
/// excluded destination files are neither compared, replaced nor deleted.
/// A rule rsync and rclone read at any depth but shoal anchors
/// (`logs/**`) is refused beside a delete, naming both spellings, with
/// nothing changed.
#[test]
fn sync_filters_keep_excluded_destination_files() {
    for (base, scheme) in SERVERS {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("logs")).unwrap();
        std::fs::write(src.join("keep.txt"), b"new keep").unwrap();
        std::fs::write(src.join("skip.log"), b"source log").unwrap();
        std::fs::write(src.join("logs/x.txt"), b"logs x").unwrap();
        let dst = format!("{scheme}://{bucket}/www/");
        put(base, dir.path(), &format!("{dst}keep.txt"), b"old");
        put(base, dir.path(), &format!("{dst}extra.txt"), b"extra");
        put(base, dir.path(), &format!("{dst}extra.log"), b"extra log");
        put(base, dir.path(), &format!("{dst}skip.log"), b"dest log");
        put(base, dir.path(), &format!("{dst}logs/old.txt"), b"old");
        let r = ok(
            base,
            &[
                "sync",
                "--delete",
                "--exclude",
                "*.log",
                "--exclude",
                "/logs/**",
                p(&src),
                &dst,
            ],
        );
        assert!(r.stderr.contains("1 deleted"), "{}", r.stderr);
        assert_eq!(
            keys(base, &dst),
            ["extra.log", "keep.txt", "logs/old.txt", "skip.log"]
        );
        assert_eq!(cat(base, &format!("{dst}keep.txt")), b"new keep");
        assert_eq!(cat(base, &format!("{dst}skip.log")), b"dest log");
        for verb in [&["sync", "--delete"][..], &["rm", "-r"][..]] {
            let mut args: Vec<&str> = verb.to_vec();
            args.extend(["--exclude", "logs/**"]);
            if verb[0] == "sync" {
                args.push(p(&src));
            }
            args.push(&dst);
            let r = run(with_args(base().unwrap(), &args));
            r.assert_one_line_error(2, &["'/logs/**'", "'**/logs/**'", "rsync"]);
            assert_eq!(
                keys(base, &dst),
                ["extra.log", "keep.txt", "logs/old.txt", "skip.log"]
            );
        }
    }
}

/// The shapes users write protect nested names from `sync --delete` and
/// `rm -r`: `*.keep` at any depth, `logs/` every folder of that name and
/// all below it, `/top.bin` only at the top. Local and cloud
/// destinations alike.
#[test]
fn sync_delete_and_rm_r_keep_nested_excluded_names() {
    const KEPT: [&str; 5] = ["a/b/x.keep", "a/logs/deep/y", "logs/z", "top.bin", "x.keep"];
    const GONE: [&str; 3] = ["a/b/old.txt", "a/logs.txt", "sub/top.bin"];
    let rules = [
        "--exclude",
        "*.keep",
        "--exclude",
        "logs/",
        "--exclude",
        "/top.bin",
    ];
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("new.txt"), b"new").unwrap();
    let fill = |put_one: &mut dyn FnMut(&str)| {
        for n in KEPT.iter().chain(&GONE) {
            put_one(n);
        }
    };
    // Local destination.
    let dst = dir.path().join("dst");
    fill(&mut |n| {
        let f = dst.join(n);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, b"old").unwrap();
    });
    let base: Base = local;
    let mut args = vec!["sync", "--delete"];
    args.extend_from_slice(&rules);
    args.push(p(&src));
    args.push(p(&dst));
    let r = ok(base, &args);
    let mut want: Vec<String> = KEPT.iter().map(|s| s.to_string()).collect();
    want.push("new.txt".into());
    want.sort();
    assert_eq!(rel_files(&dst), want, "{}", r.stderr);
    for (base, scheme) in SERVERS {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let dst = format!("{scheme}://{bucket}/www/");
        fill(&mut |n| put(base, dir.path(), &format!("{dst}{n}"), b"old"));
        // A dry run says what each rule keeps from deletion.
        let kept_lines = |stderr: &str, tail: &str| {
            for line in [
                "kept by --exclude '*.keep': 2",
                "kept by --exclude 'logs/': 2",
                "kept by --exclude '/top.bin': 1",
            ] {
                assert!(stderr.contains(&format!("{line} {tail}")), "{stderr}");
            }
        };
        let mut args = vec!["sync", "--delete", "-n"];
        args.extend_from_slice(&rules);
        args.push(p(&src));
        args.push(&dst);
        let r = ok(base, &args);
        assert!(r.stderr.contains("1 to copy, 3 to delete"), "{}", r.stderr);
        kept_lines(&r.stderr, "in the destination");
        let mut args = vec!["sync", "--delete"];
        args.extend_from_slice(&rules);
        args.push(p(&src));
        args.push(&dst);
        ok(base, &args);
        assert_eq!(keys(base, &dst), want, "sync --delete on {scheme}");
        // rm -r: the same rules keep the same names.
        let mut args = vec!["rm", "-r", "-n"];
        args.extend_from_slice(&rules);
        args.push(&dst);
        let r = ok(base, &args);
        assert_eq!(r.stdout.matches("would remove").count(), 1, "{}", r.stdout);
        kept_lines(&r.stderr, &format!("below {dst}, not deleted"));
        let mut args = vec!["rm", "-r"];
        args.extend_from_slice(&rules);
        args.push(&dst);
        ok(base, &args);
        let kept: Vec<String> = KEPT.iter().map(|s| s.to_string()).collect();
        assert_eq!(keys(base, &dst), kept, "rm -r on {scheme}");
    }
}

#[test]
fn rm_ls_and_du_filters() {
    for (base, scheme) in SERVERS {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let pre = format!("{scheme}://{bucket}/p/");
        for (k, n) in [
            ("a.txt", 1),
            ("b.log", 20),
            ("d/c.txt", 300),
            ("d/e.log", 4000),
        ] {
            put(base, dir.path(), &format!("{pre}{k}"), &vec![b'x'; n]);
        }
        // ls -r: the order of the rules decides.
        let ls = |rules: &[&str]| {
            let mut args = vec!["ls", "-r"];
            args.extend_from_slice(rules);
            args.push(&pre);
            let r = ok(base, &args);
            let mut v: Vec<String> = r
                .stdout
                .lines()
                .map(|l| l.strip_prefix(pre.as_str()).unwrap().to_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(ls(&["--exclude", "d/**", "--include", "**.txt"]), ["a.txt"]);
        assert_eq!(
            ls(&["--include", "**.txt", "--exclude", "d/**"]),
            ["a.txt", "d/c.txt"]
        );
        // No `/`: at any depth; a leading `/`: the top level only.
        assert_eq!(ls(&["--exclude", "*.log"]), ["a.txt", "d/c.txt"]);
        assert_eq!(
            ls(&["--exclude", "/*.log"]),
            ["a.txt", "d/c.txt", "d/e.log"]
        );
        assert_eq!(ls(&["--exclude", "d/"]), ["a.txt", "b.log"]);
        // du: totals of what the rules admit.
        let r = ok(base, &["du", "-s", "--json", "--include", "**.log", &pre]);
        let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
        assert_eq!(v["objects"], 2, "{}", r.stdout);
        assert_eq!(v["bytes"], 4020, "{}", r.stdout);
        // rm -r: only what is admitted is deleted (names below `p/`).
        let r = ok(
            base,
            &[
                "rm",
                "-r",
                "--exclude",
                "**.txt",
                &format!("{scheme}://{bucket}/p"),
            ],
        );
        assert_eq!(r.stderr.matches("Removed").count(), 2, "{}", r.stderr);
        assert_eq!(keys(base, &pre), ["a.txt", "d/c.txt"]);
        ok(base, &["rm", "-r", "-n", "--include", "d/*", &pre]);
        assert_eq!(keys(base, &pre), ["a.txt", "d/c.txt"], "-n deletes nothing");
        ok(base, &["rm", "-r", "--include", "d/*", &pre]);
        assert_eq!(keys(base, &pre), ["a.txt"]);
    }
}

/// `--no-clobber` copies what is missing and leaves what exists, cloud
/// objects and local files alike; what exists is counted as skipped.
#[test]
fn no_clobber_leaves_what_exists() {
    for (base, scheme) in SERVERS {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("old"), b"new bytes").unwrap();
        std::fs::write(src.join("new"), b"new file").unwrap();
        let up = format!("{scheme}://{bucket}/up/");
        put(base, dir.path(), &format!("{up}src/old"), b"kept");
        // cp -r local → cloud.
        let r = ok(base, &["cp", "-r", "--no-clobber", p(&src), &up]);
        assert!(r.stderr.contains("Copied: 1 file"), "{}", r.stderr);
        assert!(r.stderr.contains("1 skipped"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{up}src/old")), b"kept");
        assert_eq!(cat(base, &format!("{up}src/new")), b"new file");
        // Single cp: exit 0, said, nothing replaced.
        let r = ok(
            base,
            &[
                "cp",
                "--no-clobber",
                p(&src.join("old")),
                &format!("{up}src/old"),
            ],
        );
        assert!(r.stderr.contains("Skipped"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{up}src/old")), b"kept");
        // Cloud → cloud.
        let other = format!("{scheme}://{bucket}/other/");
        put(base, dir.path(), &format!("{other}old"), b"other kept");
        let r = ok(base, &["cp", "--no-clobber", &format!("{up}src/*"), &other]);
        assert!(r.stderr.contains("1 skipped"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{other}old")), b"other kept");
        assert_eq!(cat(base, &format!("{other}new")), b"new file");
        // cp -r cloud → local, and single downloads.
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("src")).unwrap();
        std::fs::write(out.join("src/old"), b"local kept").unwrap();
        let r = ok(
            base,
            &["cp", "-r", "--no-clobber", &format!("{up}src"), p(&out)],
        );
        assert!(r.stderr.contains("1 skipped"), "{}", r.stderr);
        assert_eq!(std::fs::read(out.join("src/old")).unwrap(), b"local kept");
        assert_eq!(std::fs::read(out.join("src/new")).unwrap(), b"new file");
        let r = ok(
            base,
            &[
                "cp",
                "--no-clobber",
                &format!("{up}src/new"),
                p(&out.join("src/old")),
            ],
        );
        assert!(r.stderr.contains("Skipped"), "{}", r.stderr);
        assert_eq!(std::fs::read(out.join("src/old")).unwrap(), b"local kept");
        assert_eq!(
            rel_files(&out),
            ["src/new", "src/old"],
            "no working file left"
        );
        // sync: only what the destination lacks.
        std::fs::write(src.join("third"), b"third").unwrap();
        let r = ok(
            base,
            &["sync", "--no-clobber", p(&src), &format!("{up}src")],
        );
        assert!(r.stderr.contains("Synced: 1 file"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{up}src/old")), b"kept");
        assert_eq!(cat(base, &format!("{up}src/third")), b"third");
        // run: every cp line.
        let plan = dir.path().join("plan.txt");
        std::fs::write(
            &plan,
            format!(
                "cp {} {up}src/old\ncp {} {up}src/fourth\n",
                p(&src.join("old")),
                p(&src.join("new"))
            ),
        )
        .unwrap();
        let r = ok(base, &["run", "--no-clobber", p(&plan)]);
        assert!(r.stderr.contains("1 skipped"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{up}src/old")), b"kept");
        assert_eq!(cat(base, &format!("{up}src/fourth")), b"new file");
    }
}

/// Two writers with `--no-clobber` to one destination: exactly one wins,
/// the other says the destination exists, and the object is the winner's
/// whole body; then two downloads into one local file, where the rename
/// refuses. On S3 the bodies are multipart-sized, so the precondition is
/// the one on the multipart completion (`If-None-Match: *`). On GCS they
/// are one PUT (`ifGenerationMatch=0`): fake-gcs-server ignores the
/// precondition on compose (a compose over an existing object answers
/// 200; real GCS answers 412), so a composite race cannot be held there.
#[test]
fn two_no_clobber_writers_one_wins() {
    for (base, scheme) in SERVERS {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let size = if scheme == "s3" { 11 << 20 } else { 1 << 20 };
        let bodies: Vec<Vec<u8>> = (0..2).map(|i| pattern(size, 70 + i)).collect();
        let srcs: Vec<String> = (0..2)
            .map(|i| {
                let f = dir.path().join(format!("src{i}"));
                std::fs::write(&f, &bodies[i]).unwrap();
                p(&f).to_owned()
            })
            .collect();
        let both = |args: &dyn Fn(usize) -> Vec<String>| -> Vec<(bool, String)> {
            let children: Vec<_> = (0..2)
                .map(|i| {
                    let mut c = base().unwrap();
                    c.args(args(i)).stdout(Stdio::null()).stderr(Stdio::piped());
                    c.spawn().unwrap()
                })
                .collect();
            children
                .into_iter()
                .map(|c| {
                    let o = c.wait_with_output().unwrap();
                    let err = String::from_utf8_lossy(&o.stderr).into_owned();
                    assert!(o.status.success(), "{err}");
                    (err.contains("Copied"), err)
                })
                .collect()
        };
        let winner = |outcome: &[(bool, String)]| -> usize {
            let won: Vec<usize> = (0..2).filter(|&i| outcome[i].0).collect();
            assert_eq!(won.len(), 1, "exactly one wins: {outcome:?}");
            let lost = 1 - won[0];
            assert!(outcome[lost].1.contains("exists"), "{outcome:?}");
            won[0]
        };
        for round in 0..2 {
            let url = format!("{scheme}://{bucket}/race{round}");
            let outcome = both(&|i| {
                ["cp", "--no-clobber", "--part-size", "5MiB", &srcs[i], &url]
                    .map(String::from)
                    .to_vec()
            });
            let w = winner(&outcome);
            assert!(
                cat(base, &url) == bodies[w],
                "round {round}: the winner's body"
            );
            // Downloads into one local file: the rename decides.
            let out = dir.path().join(format!("out{round}"));
            let peer = format!("{scheme}://{bucket}/peer{round}");
            ok(base, &["cp", &srcs[1 - w], &peer]);
            let sources = [url.clone(), peer];
            let outcome = both(&|i| {
                ["cp", "--no-clobber", "--slices", "4", &sources[i], p(&out)]
                    .map(String::from)
                    .to_vec()
            });
            let w2 = winner(&outcome);
            let want = if w2 == 0 { &bodies[w] } else { &bodies[1 - w] };
            assert!(
                std::fs::read(&out).unwrap() == *want,
                "round {round}: local winner"
            );
        }
        let mut left = files_in(dir.path());
        left.retain(|f| f.starts_with('.'));
        assert!(left.is_empty(), "working files left: {left:?}");
    }
}

/// Sets a local file's modification time (seconds since the epoch).
fn set_mtime(path: &Path, secs: i64) {
    let st = std::process::Command::new("touch")
        .args(["-m", "-d", &format!("@{secs}"), p(path)])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn sync_size_only_and_update() {
    for (base, scheme) in SERVERS {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        let dst = format!("{scheme}://{bucket}/s/");
        put(base, dir.path(), &format!("{dst}same-size"), b"aaaa");
        put(base, dir.path(), &format!("{dst}other-size"), b"aaaa");
        // Same size, source newer (in the future): the default copies it,
        // --size-only does not.
        std::fs::write(src.join("same-size"), b"bbbb").unwrap();
        set_mtime(&src.join("same-size"), 4_102_444_800);
        // Other size, source older than the destination: the default
        // copies it (sizes differ), --update does not.
        std::fs::write(src.join("other-size"), b"bbbbbb").unwrap();
        set_mtime(&src.join("other-size"), 946_684_800);
        let r = ok(base, &["sync", "--size-only", p(&src), &dst]);
        assert!(r.stderr.contains("Synced: 1 file"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{dst}same-size")), b"aaaa");
        assert_eq!(cat(base, &format!("{dst}other-size")), b"bbbbbb");
        // Back to the old bytes, then --update.
        put(base, dir.path(), &format!("{dst}other-size"), b"aaaa");
        let r = ok(base, &["sync", "--update", p(&src), &dst]);
        assert!(r.stderr.contains("Synced: 1 file"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{dst}same-size")), b"bbbb");
        assert_eq!(cat(base, &format!("{dst}other-size")), b"aaaa");
        // Without either, the size difference wins (same-size, now
        // older than its copy, stays).
        set_mtime(&src.join("same-size"), 946_684_800);
        let r = ok(base, &["sync", p(&src), &dst]);
        assert!(r.stderr.contains("Synced: 1 file"), "{}", r.stderr);
        assert_eq!(cat(base, &format!("{dst}other-size")), b"bbbbbb");
    }
}
