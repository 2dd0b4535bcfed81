//! Many files: folder trees up and down, sync, run files, and the keys that
//! must never write outside the destination.

use std::path::Path;
use std::process::Command;

use crate::common::*;

fn make_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let files: Vec<(String, Vec<u8>)> = vec![
        ("a.txt".into(), b"alpha".to_vec()),
        ("empty".into(), vec![]),
        (
            "nested/deeper/deepest/x.bin".into(),
            (0..100_000u32).map(|i| (i % 251) as u8).collect(),
        ),
        ("nested/ünï cødé.txt".into(), "ü".repeat(100).into_bytes()),
        ("nested/sp ace".into(), b"space".to_vec()),
    ];
    for (rel, data) in &files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    files
}

fn assert_tree(root: &Path, files: &[(String, Vec<u8>)]) {
    for (rel, data) in files {
        assert_eq!(
            &std::fs::read(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}")),
            data,
            "{rel}"
        );
    }
    let mut count = 0;
    fn walk(p: &Path, n: &mut usize) {
        for e in std::fs::read_dir(p).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), n)
            } else {
                *n += 1
            }
        }
    }
    walk(root, &mut count);
    assert_eq!(count, files.len(), "exactly the tree, no temporaries");
}

fn tree_round_trip(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let files = make_tree(&dir.path().join("src"));
    let r = run(with_args(
        base().unwrap(),
        &[
            "cp",
            "-r",
            dir.path().join("src").to_str().unwrap(),
            &format!("{scheme}://{bucket}/up/"),
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("Copied: 5 files"), "{}", r.stderr);
    let out = dir.path().join("out");
    let r = run(with_args(
        base().unwrap(),
        &[
            "cp",
            "-r",
            &format!("{scheme}://{bucket}/up/src"),
            out.to_str().unwrap(),
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_tree(&out.join("src"), &files);

    // A glob source: only the matching level, names kept from the glob's folder.
    let r = run(with_args(
        base().unwrap(),
        &[
            "cp",
            &format!("{scheme}://{bucket}/up/src/nested/*"),
            dir.path().join("g").to_str().unwrap(),
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut got = files_in(&dir.path().join("g"));
    got.sort();
    assert_eq!(got, ["sp ace", "ünï cødé.txt"]);
}

#[test]
fn tree_round_trip_gcs() {
    tree_round_trip(gcs, "gs");
}

#[test]
fn tree_round_trip_s3() {
    tree_round_trip(s3, "s3");
}

#[test]
fn sync_twice_moves_nothing_and_delete_removes_extras() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("site");
    let files = make_tree(&src);
    let dst = format!("s3://{bucket}/www");
    let r = run(with_args(
        s3().unwrap(),
        &["sync", src.to_str().unwrap(), &dst],
    ));
    assert!(
        r.code == 0 && r.stderr.contains("Synced: 5 files"),
        "{}",
        r.stderr
    );
    let r = run(with_args(
        s3().unwrap(),
        &["sync", src.to_str().unwrap(), &dst],
    ));
    assert!(
        r.code == 0 && r.stderr.contains("Synced: 0 files"),
        "second sync moves nothing: {}",
        r.stderr
    );

    // A changed file and an extra object.
    std::fs::write(src.join("a.txt"), b"changed, longer").unwrap();
    let extra = dir.path().join("extra");
    std::fs::write(&extra, b"x").unwrap();
    assert_eq!(
        run(with_args(
            s3().unwrap(),
            &["cp", extra.to_str().unwrap(), &format!("{dst}/extra")]
        ))
        .code,
        0
    );
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--dry-run", "--delete", src.to_str().unwrap(), &dst],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("would copy") && r.stdout.contains("would delete"),
        "{}",
        r.stdout
    );
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--delete", src.to_str().unwrap(), &dst],
    ));
    assert!(
        r.stderr.contains("Synced: 1 file,") && r.stderr.contains("1 deleted"),
        "{}",
        r.stderr
    );

    // And back down, then again: nothing moves.
    let back = dir.path().join("back");
    let r = run(with_args(
        s3().unwrap(),
        &["sync", &dst, back.to_str().unwrap()],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut want = files.clone();
    want[0].1 = b"changed, longer".to_vec();
    assert_tree(&back, &want);
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--checksum", &dst, back.to_str().unwrap()],
    ));
    assert!(
        r.stderr.contains("Synced: 0 files"),
        "checksum sync agrees: {}",
        r.stderr
    );
}

#[test]
fn traversal_keys_never_land_outside_the_destination() {
    // fake-gcs-server stores any name, like real GCS; MinIO refuses dot segments.
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"payload").unwrap();
    let evil = [
        "t/../escaped",
        "t/a/../../escaped2",
        "t//abs",
        "t/back\\..\\slash",
        "t/ctl\u{1}x",
        "t/./dot",
    ];
    // A folder marker: the CLI reads a trailing `/` as "into this folder",
    // so it is made with one raw JSON-API upload.
    raw_gcs_upload(&bucket, "t/dir/", b"");
    for key in evil.iter().chain(["t/ok", "t/sub/ok2"].iter()) {
        let r = run(with_args(
            gcs().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("gs://{bucket}/{key}")],
        ));
        assert_eq!(r.code, 0, "{key}: {}", r.stderr);
    }
    let out = dir.path().join("jail").join("out");
    std::fs::create_dir_all(&out).unwrap();
    let r = run(with_args(
        gcs().unwrap(),
        &[
            "-v",
            "cp",
            "-r",
            &format!("gs://{bucket}/t"),
            out.to_str().unwrap(),
        ],
    ));
    assert_eq!(r.code, 1, "refused keys make the batch fail: {}", r.stderr);
    assert!(
        r.stderr.contains("Copied: 2 files"),
        "the safe ones still copy: {}",
        r.stderr
    );
    // The folder marker is skipped as expected: counted, named with -v.
    assert!(r.stderr.contains("1 skipped"), "{}", r.stderr);
    assert!(r.stderr.contains("folder marker"), "{}", r.stderr);
    for key in &evil {
        // Shown escaped: a backslash doubled, a control as \xNN.
        let shown = format!(
            "gs://{bucket}/{}",
            key.replace('\\', "\\\\").replace('\u{1}', "\\x01")
        );
        assert!(
            r.stderr.contains(&shown),
            "{key:?} reported as {shown}: {}",
            r.stderr
        );
    }
    assert!(
        !r.stderr.contains('\u{1}'),
        "no raw control characters on stderr"
    );
    // Nothing anywhere but out/t/ok and out/t/sub/ok2.
    assert_eq!(files_in(&dir.path().join("jail")), ["out"]);
    assert_eq!(files_in(&out), ["t"]);
    assert_eq!(files_in(&out.join("t")), ["ok", "sub"]);
    assert_eq!(files_in(dir.path()), ["f", "jail"]);
}

#[test]
fn traversal_keys_are_refused_by_sync_glob_copies_and_run_files() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"payload").unwrap();
    // `v/x/..` and `v/ctl\u{1}` have unsafe base names: what `run` and a
    // single `cp` into a folder name the local file after.
    let evil = ["v/../escaped", "v/a/../../escaped2", "v/x/..", "v/ctl\u{1}"];
    for key in evil.iter().chain(["v/ok"].iter()) {
        let r = run(with_args(
            gcs().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("gs://{bucket}/{key}")],
        ));
        assert_eq!(r.code, 0, "{key}: {}", r.stderr);
    }
    let jail = dir.path().join("jail");
    let outs = ["sync", "glob", "run"].map(|n| jail.join(n).join("out"));
    for o in &outs {
        std::fs::create_dir_all(o).unwrap();
    }
    let sync = run(with_args(
        gcs().unwrap(),
        &[
            "sync",
            &format!("gs://{bucket}/v"),
            outs[0].to_str().unwrap(),
        ],
    ));
    let glob = run(with_args(
        gcs().unwrap(),
        &[
            "cp",
            &format!("gs://{bucket}/v/**"),
            outs[1].to_str().unwrap(),
        ],
    ));
    for (what, r) in [("sync", &sync), ("glob cp", &glob)] {
        assert_eq!(
            r.code, 1,
            "{what}: refused keys fail the batch: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&format!("gs://{bucket}/v/../escaped")),
            "{what}: the refused key is named: {}",
            r.stderr
        );
    }
    assert_eq!(files_in(&outs[0]), ["ok"], "{}", sync.stderr);
    assert_eq!(files_in(&outs[1]), ["ok"], "{}", glob.stderr);

    // A run file: a line whose source name is no safe file name refuses
    // the whole plan (nothing runs), like any other malformed line.
    for key in ["v/x/..", "v/ctl\u{1}"] {
        let plan = dir.path().join("plan");
        std::fs::write(
            &plan,
            format!(
                "cp gs://{bucket}/v/ok {out}/\ncp 'gs://{bucket}/{key}' {out}/\n",
                out = outs[2].display()
            ),
        )
        .unwrap();
        let r = run(with_args(gcs().unwrap(), &["run", plan.to_str().unwrap()]));
        r.assert_one_line_error(2, &[":2:", "not copied"]);
        assert!(files_in(&outs[2]).is_empty(), "{key:?}: nothing ran");
    }
    // Nothing anywhere but the one safe file in each folder.
    for (name, o) in ["sync", "glob", "run"].iter().zip(&outs) {
        assert_eq!(files_in(&jail.join(name)), ["out"], "{name}");
        let _ = o;
    }
    assert_eq!(files_in(dir.path()), ["f", "jail", "plan"]);
}

#[test]
fn one_failing_file_does_not_stop_the_batch() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"data").unwrap();
    // `c/a` and `c/a/b` cannot both be local: a file and a folder named `a`.
    for key in ["c/a", "c/a/b", "c/z1", "c/z2", "c/z3"] {
        assert_eq!(
            run(with_args(
                gcs().unwrap(),
                &["cp", f.to_str().unwrap(), &format!("gs://{bucket}/{key}")]
            ))
            .code,
            0
        );
    }
    let out = dir.path().join("out");
    let r = run(with_args(
        gcs().unwrap(),
        &[
            "--workers",
            "1",
            "cp",
            "-r",
            &format!("gs://{bucket}/c"),
            out.to_str().unwrap(),
        ],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("Copied: 4 files") && r.stderr.contains("1 FAILED"),
        "{}",
        r.stderr
    );
    for z in ["z1", "z2", "z3"] {
        assert_eq!(std::fs::read(out.join("c").join(z)).unwrap(), b"data");
    }
}

#[test]
fn run_file_executes_lines_concurrently_and_refuses_bad_plans() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut plan = String::from("# upload, then later remove one\n");
    for i in 0..20 {
        let p = dir.path().join(format!("in {i}"));
        std::fs::write(&p, format!("file {i}")).unwrap();
        plan.push_str(&format!("cp '{}' gs://{bucket}/r/\n", p.display()));
    }
    let plan_path = dir.path().join("plan");
    std::fs::write(&plan_path, &plan).unwrap();
    let r = run(with_args(
        gcs().unwrap(),
        &["run", plan_path.to_str().unwrap()],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("Ran: 20 files"), "{}", r.stderr);
    let ls = run(with_args(
        gcs().unwrap(),
        &["ls", &format!("gs://{bucket}/r/")],
    ));
    assert_eq!(ls.stdout.lines().count(), 20, "{}", ls.stdout);

    std::fs::write(&plan_path, format!("rm 'gs://{bucket}/r/in 0'\nmv a b\n")).unwrap();
    let r = run(with_args(
        gcs().unwrap(),
        &["run", plan_path.to_str().unwrap()],
    ));
    r.assert_one_line_error(2, &[":2:", "expected `cp SRC DST` or `rm URL`"]);
    let ls = run(with_args(
        gcs().unwrap(),
        &["ls", &format!("gs://{bucket}/r/")],
    ));
    assert_eq!(ls.stdout.lines().count(), 20, "a bad plan runs nothing");
}

/// One media upload straight to fake-gcs-server's JSON API.
fn raw_gcs_upload(bucket: &str, name: &str, body: &[u8]) {
    use std::io::{Read, Write};
    let ep = std::env::var("SHOAL_TEST_GCS").unwrap();
    let host = ep.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    let enc: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let head = format!(
        "POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name={enc} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
}

/// `rm -r --dry-run` names every object below the prefix (and only those:
/// not `p-x` or `pp`), deletes nothing; then `rm -r` deletes exactly those.
#[test]
fn rm_dry_run_names_what_rm_deletes() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    for k in ["p/a", "p/b/c", "p-x", "pp", "q"] {
        let r = run(with_args(
            s3().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("s3://{bucket}/{k}")],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let ls = |b: &str| {
        let mut v: Vec<String> = run(with_args(
            s3().unwrap(),
            &["ls", "-r", &format!("s3://{b}/")],
        ))
        .stdout
        .lines()
        .map(str::to_owned)
        .collect();
        v.sort();
        v
    };
    let before = ls(&bucket);
    let r = run(with_args(
        s3().unwrap(),
        &["rm", "-r", "--dry-run", &format!("s3://{bucket}/p")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut named: Vec<&str> = r.stdout.lines().collect();
    named.sort();
    let want: Vec<String> = ["p/a", "p/b/c"]
        .iter()
        .map(|k| format!("would remove s3://{bucket}/{k}"))
        .collect();
    assert_eq!(named, want);
    assert_eq!(ls(&bucket), before, "a dry run deletes nothing");
    let r = run(with_args(
        s3().unwrap(),
        &["rm", "-r", &format!("s3://{bucket}/p")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        ls(&bucket),
        ["p-x", "pp", "q"].map(|k| format!("s3://{bucket}/{k}"))
    );
}

/// A listing kept in a file stands in for listing a side: `ls -r --json
/// --sorted` of both buckets, then syncs that read them decide exactly as
/// syncs that list; a listing of another place is refused at its line.
#[test]
fn sync_reads_listings_kept_in_files() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let files = make_tree(&src);
    let up = |args: &[&str]| {
        let r = run(with_args(s3().unwrap(), args));
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r
    };
    up(&["sync", src.to_str().unwrap(), &format!("s3://{bucket}/a")]);
    up(&["sync", src.to_str().unwrap(), &format!("s3://{bucket}/b")]);
    // One object changed in a, one extra in b.
    let one = dir.path().join("one");
    std::fs::write(&one, b"changed, and longer than before").unwrap();
    let changed = format!("s3://{bucket}/a/{}", files[0].0);
    up(&["cp", one.to_str().unwrap(), &changed]);
    up(&[
        "cp",
        one.to_str().unwrap(),
        &format!("s3://{bucket}/b/extra"),
    ]);
    let listing = |side: &str| {
        let path = dir.path().join(format!("{side}.jsonl"));
        let r = up(&[
            "ls",
            "-r",
            "--json",
            "--sorted",
            &format!("s3://{bucket}/{side}/"),
        ]);
        std::fs::write(&path, &r.stdout).unwrap();
        path
    };
    let (la, lb) = (listing("a"), listing("b"));
    let dry = |extra: &[&str]| {
        let mut args = vec!["sync", "--dry-run", "--delete"];
        args.extend_from_slice(extra);
        let a = format!("s3://{bucket}/a");
        let b = format!("s3://{bucket}/b");
        args.extend([a.as_str(), b.as_str()]);
        let mut lines: Vec<String> = up(&args).stdout.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    let live = dry(&[]);
    assert_eq!(live.len(), 2, "{live:?}");
    let (la, lb) = (la.to_str().unwrap(), lb.to_str().unwrap());
    assert_eq!(dry(&["--source-listing", la]), live);
    assert_eq!(dry(&["--dest-listing", lb]), live);
    assert_eq!(dry(&["--source-listing", la, "--dest-listing", lb]), live);
    // The listing of b given as a's: its closing record names b, refused
    // before anything runs.
    let r = run(with_args(
        s3().unwrap(),
        &[
            "sync",
            "--delete",
            "--source-listing",
            lb,
            &format!("s3://{bucket}/a"),
            &format!("s3://{bucket}/b"),
        ],
    ));
    r.assert_one_line_error(2, &["b.jsonl", &format!("not of s3://{bucket}/a")]);
    // Its object lines alone (a file that says nothing of its place) are
    // still refused at the first line naming another place.
    let lines = std::fs::read_to_string(lb).unwrap();
    let (objects, end) = lines.trim_end().rsplit_once('\n').unwrap();
    let a_end = end.replace(&format!("s3://{bucket}/b/"), &format!("s3://{bucket}/a/"));
    let forged = dir.path().join("forged.jsonl");
    std::fs::write(&forged, format!("{objects}\n{a_end}\n")).unwrap();
    let r = run(with_args(
        s3().unwrap(),
        &[
            "sync",
            "--delete",
            "--source-listing",
            forged.to_str().unwrap(),
            &format!("s3://{bucket}/a"),
            &format!("s3://{bucket}/b"),
        ],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("forged.jsonl:1") && r.stderr.contains("another place"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("nothing deleted"), "{}", r.stderr);
}

/// `shoal sync` with FILE as a listing, its stdin `stdin` (for
/// `--source-listing /dev/stdin`, a pipe judged only at its end).
fn sync_with_listing(flag: &str, file: &str, stdin: Option<&[u8]>, a: &str, b: &str) -> Run {
    use std::io::Write;
    let mut c = with_args(s3().unwrap(), &["sync", "--delete", flag, file, a, b]);
    let Some(data) = stdin else {
        return run(c);
    };
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    // Small enough for the pipe's buffer: written whole, then closed.
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stdout_bytes: out.stdout.clone(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A listing cut short (an `ls` killed, a full disk) lacks the closing
/// record: `sync --delete` trusting it would delete every destination
/// object past the cut although the source holds it. Cut at a line
/// boundary or mid-line, in a file (refused before the run, exit 2) or
/// through a pipe (found at its end, exit 1): nothing is deleted. Two
/// closing records, or lines after one, are refused too; a whole listing
/// is used and says so.
#[test]
fn a_listing_cut_short_deletes_nothing() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    make_tree(&src);
    let (a, b) = (format!("s3://{bucket}/a"), format!("s3://{bucket}/b"));
    let ok = |args: &[&str]| {
        let r = run(with_args(s3().unwrap(), args));
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r
    };
    ok(&["sync", src.to_str().unwrap(), &a]);
    ok(&["sync", src.to_str().unwrap(), &b]);
    let keys_of_b = || ok(&["ls", "-r", &b]).stdout;
    let before = keys_of_b();
    assert_eq!(before.lines().count(), 5, "{before}");
    let listing = ok(&["ls", "-r", "--json", "--sorted", &format!("{a}/")]).stdout;
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(
        lines.len(),
        6,
        "five objects and the closing record: {listing}"
    );
    assert!(lines[5].starts_with(r#"{"listing_end":"#), "{listing}");
    let head = |n: usize| {
        lines[..n]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    let cut_at_line = head(2);
    let cut_mid_line = format!("{}{}", head(2), &lines[2][..lines[2].len() / 2]);
    let twice = format!("{listing}{}\n", lines[5]);
    let after_end = format!("{listing}{}\n", lines[0]);
    let file = dir.path().join("a.jsonl");
    let f = file.to_str().unwrap();
    for (what, text, code, needle) in [
        (
            "cut at a line",
            &cut_at_line,
            2,
            "no closing record (cut short?)",
        ),
        (
            "cut mid-line",
            &cut_mid_line,
            2,
            "no closing record (cut short?)",
        ),
        (
            "a line after the end",
            &after_end,
            2,
            "no closing record (cut short?)",
        ),
        (
            "two closing records",
            &twice,
            1,
            "after the listing's closing record",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let r = sync_with_listing("--source-listing", f, None, &a, &b);
        assert_eq!(r.code, code, "{what}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{what}: {}", r.stderr);
        assert!(r.stderr.contains("a.jsonl"), "{what}: {}", r.stderr);
        assert_eq!(keys_of_b(), before, "{what}: nothing deleted");
        // As the destination's listing: refused the same way.
        // (a listing of `a` stands for no destination `b`: that refusal,
        // exit 2, may come first.)
        let r = sync_with_listing("--dest-listing", f, None, &a, &b);
        assert_ne!(r.code, 0, "{what}, dest: {}", r.stderr);
        assert_eq!(keys_of_b(), before, "{what}, dest: nothing deleted");
    }
    // Through a pipe the cut is found only at the end: the listing fails,
    // and the extras it seemed to show are not deleted.
    for (what, text) in [
        ("piped, cut at a line", &cut_at_line),
        ("piped, cut mid-line", &cut_mid_line),
    ] {
        let r = sync_with_listing(
            "--source-listing",
            "/dev/stdin",
            Some(text.as_bytes()),
            &a,
            &b,
        );
        assert_eq!(r.code, 1, "{what}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("/dev/stdin: the listing has no closing record (cut short?")
                && r.stderr.contains("nothing deleted"),
            "{what}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("trusting"), "{what}: {}", r.stderr);
        // One line says what was wrong and what it stopped.
        let said = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("shoal: "))
            .count();
        assert_eq!(said, 1, "{what}: {}", r.stderr);
        assert_eq!(keys_of_b(), before, "{what}: nothing deleted");
    }
    // The whole listing, in a file or a pipe: trusted, and said so.
    std::fs::write(&file, &listing).unwrap();
    let r = sync_with_listing("--source-listing", f, None, &a, &b);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let trusted = format!("sync: trusting listing {f} of {a}/ made at ");
    assert!(
        r.stderr.contains(&trusted) && r.stderr.contains("(5 objects)"),
        "{}",
        r.stderr
    );
    let r = sync_with_listing(
        "--source-listing",
        "/dev/stdin",
        Some(listing.as_bytes()),
        &a,
        &b,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("sync: trusting listing /dev/stdin"),
        "{}",
        r.stderr
    );
    // Not with --quiet.
    let r = run(with_args(
        s3().unwrap(),
        &["--quiet", "sync", "--delete", "--source-listing", f, &a, &b],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("trusting"), "{}", r.stderr);
    assert_eq!(keys_of_b(), before);
}

/// Roots given as `.`, `..`, `./a/../b` or absolute paths: `.` and `..`
/// copy the folder's contents (as cp(1) does), other paths nest under
/// their last level; no name carries a `./`.
#[test]
fn dot_and_dotdot_roots() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("top");
    for f in ["a", "sub/b"] {
        let p = top.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, f).unwrap();
    }
    let sub = top.join("sub");
    let abs = sub.to_str().unwrap().to_owned();
    let cases: [(&str, &std::path::Path, &str, &[&str]); 5] = [
        (".", &top, "dot/", &["dot/a", "dot/sub/b"]),
        ("..", &sub, "dotdot/", &["dotdot/a", "dotdot/sub/b"]),
        ("./sub/../sub", &top, "mixed/", &["mixed/sub/b"]),
        (&abs, &top, "abs/", &["abs/sub/b"]),
        ("./", &sub, "slash/", &["slash/b"]),
    ];
    for (src, cwd, dst, want) in cases {
        let mut c = with_args(
            s3().unwrap(),
            &["cp", "-r", src, &format!("s3://{bucket}/{dst}")],
        );
        c.current_dir(cwd);
        let r = run(c);
        assert_eq!(r.code, 0, "cp -r {src}: {}", r.stderr);
        let mut got: Vec<String> = run(with_args(
            s3().unwrap(),
            &["ls", "-r", &format!("s3://{bucket}/{dst}")],
        ))
        .stdout
        .lines()
        .map(|l| l.trim_start_matches(&format!("s3://{bucket}/")).to_owned())
        .collect();
        got.sort();
        assert_eq!(got, want, "cp -r {src}");
    }
    // And sync of `.`.
    let mut c = with_args(
        s3().unwrap(),
        &["sync", ".", &format!("s3://{bucket}/synced")],
    );
    c.current_dir(&top);
    assert_eq!(run(c).code, 0);
}

/// Every object below `url`, as `ls -r` shows it (names, sizes, times):
/// equal before and after means nothing was written or deleted.
fn listing(base: fn() -> Option<Command>, url: &str) -> String {
    let r = run(with_args(base().unwrap(), &["ls", "-r", "-l", url]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
}

/// Runs `plan` (a run file's text) and returns what happened.
fn run_plan(base: fn() -> Option<Command>, dir: &Path, plan: &str) -> Run {
    let p = dir.join("plan");
    std::fs::write(&p, plan).unwrap();
    run(with_args(base().unwrap(), &["run", p.to_str().unwrap()]))
}

/// Issue 36: plans that, run at once, deleted a bucket, saved its listing
/// as a file, lost objects or gave a result that depended on which line
/// ran first. Each is refused before anything runs: exit 2, one line
/// naming the line(s) and the URL, every object still there.
#[test]
fn run_files_that_would_lose_or_garble_data_are_refused() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let mut upload = String::new();
    for key in ["a", "b", "tmp/x", "tmp/y", "keep"] {
        let f = src.join(key.replace('/', "_"));
        std::fs::write(&f, key).unwrap();
        upload.push_str(&format!("cp '{}' s3://{bucket}/{key}\n", f.display()));
    }
    let r = run_plan(s3, dir.path(), &upload);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let before = listing(s3, &format!("s3://{bucket}/"));
    assert_eq!(
        before.lines().filter(|l| l.contains("s3://")).count(),
        5,
        "{before}"
    );
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let o = out.display();
    let b = &bucket;
    for (plan, needles) in [
        (
            format!("rm s3://{b}/keep\nrm s3://{b}/\n"),
            vec![
                ":2:",
                &format!("s3://{b}/ names a bucket, not an object; nothing was run"),
            ],
        ),
        (
            format!("cp s3://{b}/ {o}/listing.xml\n"),
            vec![":1:", "names a bucket, not an object"],
        ),
        (
            format!("cp s3://{b}/a s3://{b}/moved\nrm s3://{b}/a\n"),
            vec![
                &format!(":2: s3://{b}/a is deleted here and read by line 1"),
                "nothing was run",
            ],
        ),
        (
            format!("cp s3://{b}/a s3://{b}/b2\ncp s3://{b}/b2 s3://{b}/c\n"),
            vec![&format!(
                ":2: s3://{b}/b2 is read here and written by line 1"
            )],
        ),
        (
            format!("cp s3://{b}/a {o}/f\ncp s3://{b}/b {o}/./f\n"),
            vec![&format!(":2: {o}/f is written here and by line 1")],
        ),
        (
            format!("rm 's3://{b}/tmp/*'\ncp s3://{b}/tmp/x {o}/x\n"),
            vec![":2:", "is read here and deleted by line 1", "tmp/*"],
        ),
    ] {
        let needles: Vec<&str> = needles.iter().map(|n| n.as_ref()).collect();
        let r = run_plan(s3, dir.path(), &plan);
        r.assert_one_line_error(2, &needles);
        assert_eq!(listing(s3, &format!("s3://{bucket}/")), before, "{plan}");
        assert!(files_in(&out).is_empty(), "{plan}: {:?}", files_in(&out));
    }
}

/// `rm GLOB` and `cp GLOB DST` in a run file do what `shoal rm` and
/// `shoal cp` do with them: each match, counted; a glob matching nothing
/// is that line's failure.
#[test]
fn run_file_globs_expand_like_rm_and_cp() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut upload = String::new();
    for key in [
        "tmp/x",
        "tmp/y",
        "tmp/z/deep",
        "tmpfile",
        "keep/a.gz",
        "keep/b.gz",
        "keep/c.txt",
    ] {
        let f = dir.path().join(key.replace('/', "_"));
        std::fs::write(&f, key).unwrap();
        upload.push_str(&format!("cp '{}' s3://{bucket}/{key}\n", f.display()));
    }
    let r = run_plan(s3, dir.path(), &upload);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = dir.path().join("out");
    let plan = format!(
        "rm 's3://{bucket}/tmp/*'\ncp 's3://{bucket}/keep/*.gz' {}/\n",
        out.display()
    );
    let r = run_plan(s3, dir.path(), &plan);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("Ran: 2 files") && r.stderr.contains(", 2 deleted"),
        "{}",
        r.stderr
    );
    let left = listing(s3, &format!("s3://{bucket}/"));
    let mut names: Vec<&str> = left
        .lines()
        .filter(|l| l.contains("s3://"))
        .map(|l| l.rsplit(&format!("s3://{bucket}/")).next().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "keep/a.gz",
            "keep/b.gz",
            "keep/c.txt",
            "tmp/z/deep",
            "tmpfile"
        ],
        "{left}"
    );
    assert_eq!(std::fs::read(out.join("a.gz")).unwrap(), b"keep/a.gz");
    assert_eq!(std::fs::read(out.join("b.gz")).unwrap(), b"keep/b.gz");
    assert_eq!(files_in(&out).len(), 2, "{:?}", files_in(&out));

    let r = run_plan(
        s3,
        dir.path(),
        &format!("rm 's3://{bucket}/tmp/*'\nrm s3://{bucket}/tmpfile\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("s3://{bucket}/tmp/*: no objects match (run"))
            && r.stderr.contains(":1)")
            && r.stderr.contains("1 deleted, 1 FAILED"),
        "{}",
        r.stderr
    );
}

/// A link to a folder elsewhere, already inside a local destination, is
/// never followed by a write: `sync`, `cp -r` (down, and local to local)
/// refuse each file below it, naming the link, copy the rest and exit 1;
/// the folder the user named may itself be a link.
#[test]
fn links_inside_a_destination_are_never_followed() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"payload").unwrap();
    for key in ["p/ok", "p/sub/file", "p/sub/deeper/file2"] {
        let r = run(with_args(
            gcs().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("gs://{bucket}/{key}")],
        ));
        assert_eq!(r.code, 0, "{key}: {}", r.stderr);
    }
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    // sync into a folder the user named through a link of their own.
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&elsewhere, real.join("sub")).unwrap();
    let named = dir.path().join("named");
    std::os::unix::fs::symlink(&real, &named).unwrap();
    let sync = run(with_args(
        gcs().unwrap(),
        &["sync", &format!("gs://{bucket}/p"), named.to_str().unwrap()],
    ));
    // cp -r: DST/p/sub is the link.
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("p")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("p/sub")).unwrap();
    let cp = run(with_args(
        gcs().unwrap(),
        &[
            "cp",
            "-r",
            &format!("gs://{bucket}/p"),
            out.to_str().unwrap(),
        ],
    ));
    // cp -r of a local folder into a destination holding a link.
    let src = dir.path().join("tree");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("ok"), b"ok").unwrap();
    std::fs::write(src.join("sub/file"), b"local").unwrap();
    let local = dir.path().join("local");
    std::fs::create_dir_all(local.join("tree")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, local.join("tree/sub")).unwrap();
    let cp_local = run(with_args(
        shoal(),
        &["cp", "-r", src.to_str().unwrap(), local.to_str().unwrap()],
    ));
    for (what, r, link) in [
        ("sync", &sync, named.join("sub")),
        ("cp -r", &cp, out.join("p/sub")),
        ("cp -r local", &cp_local, local.join("tree/sub")),
    ] {
        assert_eq!(r.code, 1, "{what}: {}", r.stderr);
        let said = format!(
            "{}: is a symbolic link; not followed for a write",
            link.display()
        );
        assert!(r.stderr.contains(&said), "{what}: {said}: {}", r.stderr);
    }
    assert!(
        files_in(&elsewhere).is_empty(),
        "nothing written through a link"
    );
    assert_eq!(std::fs::read(real.join("ok")).unwrap(), b"payload");
    assert_eq!(std::fs::read(out.join("p/ok")).unwrap(), b"payload");
    assert_eq!(std::fs::read(local.join("tree/ok")).unwrap(), b"ok");
    assert_eq!(files_in(&real), ["ok", "sub"]);
}

/// A key whose name is 250 bytes downloads (its working names are cut to
/// fit), by `cp` and by `cp -r`; a destination name the user gives of
/// more than 255 bytes is one clear line, not an OS error mid-run.
#[test]
fn a_250_byte_name_downloads() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    let body = pattern(100_000, 7);
    std::fs::write(&f, &body).unwrap();
    let name = "n".repeat(250);
    let url = format!("gs://{bucket}/long/{name}");
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", f.to_str().unwrap(), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let one = dir.path().join("one");
    std::fs::create_dir(&one).unwrap();
    // Several slices: the resumable data file and journal are made too.
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", "--slices", "4", &url, &format!("{}/", one.display())],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(one.join(&name)).unwrap(), body);
    assert_eq!(files_in(&one), [name.as_str()], "no working file left");
    let tree = dir.path().join("tree");
    let r = run(with_args(
        gcs().unwrap(),
        &[
            "cp",
            "-r",
            &format!("gs://{bucket}/long"),
            tree.to_str().unwrap(),
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(tree.join("long").join(&name)).unwrap(), body);
    let too_long = one.join("x".repeat(300));
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", &url, too_long.to_str().unwrap()],
    ));
    r.assert_one_line_error(2, &["a file name of 300 bytes; file systems allow 255"]);
    assert_eq!(files_in(&one), [name.as_str()], "nothing written");
}
