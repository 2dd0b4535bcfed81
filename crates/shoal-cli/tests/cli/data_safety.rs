//! Working files nobody else can write into: objects named like shoal's
//! own working files, and a second process writing the same destination,
//! never mix their bytes into a download.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// A bucket holding `big.bin` and other objects named like its working
/// files (the old predictable names and the state file's): each local
/// file is its own object, byte for byte, on every run.
fn lookalike_keys(base: fn() -> Option<std::process::Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut objects = Vec::new();
    for (i, key) in [
        "big.bin",
        ".big.bin.shoal-partial",
        ".big.bin.shoal-partial.json",
        ".big.bin.shoal-tmp-1-1",
        ".big.bin.shoal-partial-0123456789abcdef0123456789abcdef",
    ]
    .into_iter()
    .enumerate()
    {
        let body = pattern(3 << 20, 40 + i as u64);
        let f = dir.path().join(format!("src{i}"));
        std::fs::write(&f, &body).unwrap();
        let r = run(with_args(
            base().unwrap(),
            &[
                "cp",
                f.to_str().unwrap(),
                &format!("{scheme}://{bucket}/d/{key}"),
            ],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        objects.push((key, body));
    }
    for round in 0..3 {
        let out = dir.path().join(format!("out{round}"));
        let r = run(with_args(
            base().unwrap(),
            &[
                "cp",
                "-r",
                "--slices",
                "4",
                &format!("{scheme}://{bucket}/d"),
                out.to_str().unwrap(),
            ],
        ));
        assert_eq!(r.code, 0, "{scheme} round {round}: {}", r.stderr);
        for (key, body) in &objects {
            let got = std::fs::read(out.join("d").join(key)).unwrap();
            assert!(
                got == *body,
                "{scheme} round {round}: {key} is not its object"
            );
        }
        let names = files_in(&out.join("d"));
        assert_eq!(
            names.len(),
            objects.len(),
            "{scheme}: nothing else left behind: {names:?}"
        );
    }
}

#[test]
fn objects_named_like_working_files_are_copied_like_any_other_gcs() {
    lookalike_keys(gcs, "gs");
}

#[test]
fn objects_named_like_working_files_are_copied_like_any_other_s3() {
    lookalike_keys(s3, "s3");
}

/// Two processes downloading different objects to one path at once: the
/// file ends as one of them, whole, never a mix.
#[test]
fn two_writers_to_one_destination_leave_one_whole_object() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bodies: Vec<Vec<u8>> = (0..2).map(|i| pattern(8 << 20, 90 + i)).collect();
    for (i, b) in bodies.iter().enumerate() {
        let f = dir.path().join(format!("src{i}"));
        std::fs::write(&f, b).unwrap();
        let r = run(with_args(
            s3().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("s3://{bucket}/o{i}")],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let out = dir.path().join("out");
    for round in 0..3 {
        let children: Vec<_> = (0..2)
            .map(|i| {
                with_args(
                    s3().unwrap(),
                    &[
                        "cp",
                        "--slices",
                        "8",
                        &format!("s3://{bucket}/o{i}"),
                        out.to_str().unwrap(),
                    ],
                )
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let got = std::fs::read(&out).unwrap();
        assert!(
            got == bodies[0] || got == bodies[1],
            "round {round}: a mix of both objects"
        );
        assert_eq!(
            files_in(dir.path()).len(),
            3,
            "nothing left behind: {:?}",
            files_in(dir.path())
        );
    }
}

/// Files whose size `stat` does not tell (a FIFO, a /proc file, process
/// substitution) are read to their end like `cp -`, and the object holds
/// what was read; an empty file is still an empty object.
fn special_sources(base: fn() -> Option<std::process::Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = |k: &str| format!("{scheme}://{bucket}/{k}");
    let cat = |k: &str| run(with_args(base().unwrap(), &["cat", &url(k)])).stdout_bytes;
    // /proc/self/status differs per process: compare with a line every
    // process shares instead.
    let r = run(with_args(
        base().unwrap(),
        &["cp", "/proc/version", &url("version")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(cat("version"), std::fs::read("/proc/version").unwrap());
    // A FIFO with a writer.
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let body = pattern(3 << 20, 7);
    let writer = {
        let (fifo, body) = (fifo.clone(), body.clone());
        std::thread::spawn(move || std::fs::write(fifo, body).unwrap())
    };
    let r = run(with_args(
        base().unwrap(),
        &["cp", fifo.to_str().unwrap(), &url("fifo")],
    ));
    writer.join().unwrap();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(cat("fifo") == body, "the FIFO's bytes");
    // Process substitution, as a shell user types it.
    let mut c = base().unwrap();
    let exe = c.get_program().to_owned();
    let envs: Vec<_> = c
        .get_envs()
        .map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned())))
        .collect();
    let mut sh = Command::new("bash");
    sh.env_clear();
    for (k, v) in envs {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    sh.arg("-c")
        .arg(format!("\"$0\" cp <(printf 'hi there') {}", url("subst")))
        .arg(exe);
    c = sh;
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(cat("subst"), b"hi there");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let r = run(with_args(
        base().unwrap(),
        &["cp", empty.to_str().unwrap(), &url("empty")],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(cat("empty").is_empty());
}

#[test]
fn special_files_upload_what_they_hold_gcs() {
    special_sources(gcs, "gs");
}

#[test]
fn special_files_upload_what_they_hold_s3() {
    special_sources(s3, "s3");
}

/// Output into a pipe nobody reads (`2>&1 | true`, `| head -1`) neither
/// aborts nor stops a transfer: every file is copied, exit 0.
#[test]
fn a_closed_output_pipe_does_not_abort_a_transfer() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..50 {
        std::fs::write(tree.join(format!("f{i:02}")), format!("{i}")).unwrap();
    }
    for (what, args) in [
        (
            "cp -r -v",
            vec![
                "-v",
                "cp",
                "-r",
                tree.to_str().unwrap(),
                &format!("s3://{bucket}/a/"),
            ],
        ),
        (
            "sync --dry-run",
            vec![
                "sync",
                "--dry-run",
                tree.to_str().unwrap(),
                &format!("s3://{bucket}/b"),
            ],
        ),
        (
            "sync",
            vec!["sync", tree.to_str().unwrap(), &format!("s3://{bucket}/c")],
        ),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status = with_args(s3().unwrap(), &args)
            .stdout(writer.try_clone().unwrap())
            .stderr(writer)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0), "{what}: {status}");
    }
    for p in ["a/tree/", "c/"] {
        let n = run(with_args(
            s3().unwrap(),
            &["ls", "-r", &format!("s3://{bucket}/{p}")],
        ))
        .stdout
        .lines()
        .count();
        assert_eq!(n, 50, "{p}");
    }
}

/// Keys holding `\r` and `ESC [2J` are shown escaped (`\r`, `\x1b`) by
/// ls, cp's summary and sync's dry run: a bucket cannot clear the screen or
/// forge a line; `ls --json` stays plain JSON of the real key.
fn control_keys(base: fn() -> Option<std::process::Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    let key = "c/a\rFORGED\u{1b}[2J";
    let url = format!("{scheme}://{bucket}/{key}");
    let raw = |s: &str| s.contains('\r') || s.contains('\u{1b}');
    let r = run(with_args(
        base().unwrap(),
        &["cp", f.to_str().unwrap(), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !raw(&r.stderr) && r.stderr.contains("a\\rFORGED\\x1b[2J"),
        "{:?}",
        r.stderr
    );
    let r = run(with_args(
        base().unwrap(),
        &["ls", "-r", &format!("{scheme}://{bucket}/c/")],
    ));
    assert!(
        !raw(&r.stdout) && r.stdout.contains("a\\rFORGED\\x1b[2J"),
        "{:?}",
        r.stdout
    );
    let r = run(with_args(
        base().unwrap(),
        &["ls", "-r", "--json", &format!("{scheme}://{bucket}/c/")],
    ));
    let v: serde_json::Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(v["name"], key);
    let r = run(with_args(
        base().unwrap(),
        &[
            "sync",
            "--dry-run",
            &format!("{scheme}://{bucket}/c"),
            &format!("{scheme}://{bucket}/d"),
        ],
    ));
    assert!(
        !raw(&r.stdout) && r.stdout.contains("\\x1b[2J"),
        "{:?}",
        r.stdout
    );
}

#[test]
fn keys_with_control_characters_are_shown_escaped_gcs() {
    control_keys(gcs, "gs");
}

#[test]
fn keys_with_control_characters_are_shown_escaped_s3() {
    control_keys(s3, "s3");
}

/// Ctrl-C during a multipart upload: the upload is aborted (no pending
/// S3 upload, no GCS composite part left), the destination keeps what it
/// had, and the exit code is 130. Parts are held at a fault proxy so the
/// signal always lands mid-upload; the test waits for a part request to
/// reach the proxy, not for a time. With `resume` (the default), the
/// upload is kept and written down instead, and the message says so
/// (tests/cli/upload_resume.rs resumes such uploads); on GCS the same
/// command then resumes it, and leaves no composite part behind.
fn interrupted_upload(scheme: &str, resume: bool) {
    use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script, When};
    let base = if scheme == "gs" { gcs } else { s3 };
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let upstream = shoal_testkit_server(if scheme == "gs" {
        "SHOAL_TEST_GCS"
    } else {
        "SHOAL_TEST_S3"
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old");
    std::fs::write(&old, b"the old object").unwrap();
    let url = format!("{scheme}://{bucket}/big");
    assert_eq!(
        run(with_args(
            base().unwrap(),
            &["cp", old.to_str().unwrap(), &url]
        ))
        .code,
        0
    );
    let big = dir.path().join("big");
    std::fs::write(&big, pattern(24 << 20, 5)).unwrap();
    let proxy = FaultProxy::start(
        &upstream,
        Script::new().rule(
            Rule::new(
                When::method(if scheme == "gs" { "POST" } else { "PUT" }),
                // Held well inside the 30 s the CLI waits for cleanups
                // after Ctrl-C: a part the proxy forwarded after the
                // process had given up would be stored after its abort
                // (that case is said as "could not be aborted in time").
                Fault::DelayHeaders(Duration::from_secs(8)),
            )
            .times(usize::MAX),
        ),
    );
    let mut c = base().unwrap();
    c.env(
        if scheme == "gs" {
            "STORAGE_EMULATOR_HOST"
        } else {
            "AWS_ENDPOINT_URL"
        },
        proxy.url(),
    );
    let mut args = vec!["cp", "--part-size", "5MiB"];
    if scheme == "gs" {
        args.extend(["--gcs-upload", "compose"]);
    }
    if !resume {
        args.push("--no-resume");
    }
    args.extend([big.to_str().unwrap(), url.as_str()]);
    let state = dir.path().join("state");
    c.env("SHOAL_STATE_DIR", &state);
    let child = with_args(c, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The start of the upload has passed and parts are being held.
    let mut waited = 0;
    while proxy.injected().len() < 2 {
        assert!(waited < 6000, "the upload never sent its parts");
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        err.contains("cleaned up"),
        "every cleanup finished in time: {err}"
    );
    let got = run(with_args(base().unwrap(), &["cat", &url]));
    assert_eq!(
        got.stdout_bytes, b"the old object",
        "the destination keeps its old content"
    );
    if scheme == "s3" && resume {
        let ep = shoal_testkit_server("SHOAL_TEST_S3").unwrap();
        assert_eq!(
            open_s3_uploads(&ep, &bucket).len(),
            1,
            "the multipart upload is kept to resume"
        );
        assert!(err.contains("kept to resume"), "{err}");
        assert_eq!(
            files_in(&state.join("uploads")).len(),
            1,
            "and written down"
        );
    } else if scheme == "s3" {
        let ep = shoal_testkit_server("SHOAL_TEST_S3").unwrap();
        assert!(
            open_s3_uploads(&ep, &bucket).is_empty(),
            "the multipart upload was aborted"
        );
    } else if resume {
        assert!(err.contains("kept to resume"), "{err}");
        assert_eq!(
            files_in(&state.join("uploads")).len(),
            1,
            "the composite upload is written down"
        );
        // The held parts go nowhere once the proxy is gone.
        drop(proxy);
        let mut c = base().unwrap();
        c.env("SHOAL_STATE_DIR", &state);
        let args = ["cp", "--part-size", "5MiB", "--gcs-upload", "compose"];
        let r = run(with_args(
            c,
            &[&args[..], &[big.to_str().unwrap(), &url]].concat(),
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let got = run(with_args(base().unwrap(), &["cat", &url]));
        assert!(got.stdout_bytes == pattern(24 << 20, 5), "resumed, whole");
        let left = run(with_args(
            base().unwrap(),
            &["ls", "-r", &format!("gs://{bucket}/.shoal-tmp/")],
        ));
        assert_eq!(left.stdout.trim(), "", "no composite part left");
        assert!(files_in(&state.join("uploads")).is_empty());
    } else {
        let left = run(with_args(
            base().unwrap(),
            &["ls", "-r", &format!("gs://{bucket}/.shoal-tmp/")],
        ));
        assert!(
            left.stdout.trim().is_empty(),
            "composite parts left: {}",
            left.stdout
        );
    }
}

#[test]
fn ctrl_c_aborts_an_upload_s3() {
    interrupted_upload("s3", false);
}

#[test]
fn ctrl_c_keeps_a_resumable_upload_s3() {
    interrupted_upload("s3", true);
}

#[test]
fn ctrl_c_aborts_an_upload_gcs_compose() {
    interrupted_upload("gs", false);
}

#[test]
fn ctrl_c_keeps_a_resumable_upload_gcs_compose() {
    interrupted_upload("gs", true);
}

/// A composite upload killed outright (SIGKILL: no cleanup can run)
/// leaves its parts in the bucket; the next composite upload to that
/// bucket from this machine finds, in its journal, the upload whose
/// process is gone and deletes its parts. Parts are stored and their
/// answers held at a fault proxy, so the kill lands with parts stored.
/// (The journal is per endpoint: both uploads go through the proxy.)
/// With `resumable` (the default: no `--no-resume`) the killed upload is
/// kept for the same command to resume instead, and the later upload of
/// another file leaves its parts alone.
fn a_later_upload_and_the_parts_a_killed_one_left(resumable: bool) {
    use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script, When};
    let base = gcs;
    let Some(bucket) = make_bucket(base, "gs") else {
        return;
    };
    let upstream = shoal_testkit_server("SHOAL_TEST_GCS").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let big = dir.path().join("big");
    std::fs::write(&big, pattern(12 << 20, 9)).unwrap();
    let proxy = FaultProxy::start(
        &upstream,
        Script::new().rule(
            Rule::new(
                When::method("POST"),
                Fault::StallBody {
                    after: 0,
                    pause: Duration::from_secs(600),
                },
            )
            // The three parts of the upload that is killed; the later
            // upload goes through the same endpoint, untouched.
            .times(3),
        ),
    );
    let compose = |c: Command, src: &std::path::Path, key: &str| {
        let mut c = c;
        c.env("SHOAL_STATE_DIR", &state);
        with_args(
            c,
            &[
                "cp",
                "--part-size",
                "5MiB",
                "--gcs-upload",
                "compose",
                src.to_str().unwrap(),
                &format!("gs://{bucket}/{key}"),
            ],
        )
    };
    let mut c = base().unwrap();
    c.env("STORAGE_EMULATOR_HOST", proxy.url());
    let mut killed = compose(c, &big, "killed");
    if !resumable {
        killed.arg("--no-resume");
    }
    let mut child = killed
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let temporaries = format!("gs://{bucket}/.shoal-tmp/");
    let left = || run(with_args(base().unwrap(), &["ls", "-r", &temporaries])).stdout;
    let mut waited = 0;
    while left().lines().count() < 3 {
        assert!(waited < 600, "the upload never stored its parts");
        std::thread::sleep(Duration::from_millis(100));
        waited += 1;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        left().lines().count(),
        3,
        "the killed upload left its parts"
    );
    let small = dir.path().join("small");
    std::fs::write(&small, pattern(11 << 20, 3)).unwrap();
    let mut c = base().unwrap();
    c.env("STORAGE_EMULATOR_HOST", proxy.url());
    let r = run(compose(c, &small, "later"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    if resumable {
        assert_eq!(left().lines().count(), 3, "kept for resuming");
        let r = run(with_args(
            base().unwrap(),
            &["uploads", "--json", &format!("gs://{bucket}")],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("\"key\":\"killed\""), "{}", r.stdout);
        return;
    }
    assert_eq!(left().trim(), "", "the killed upload's parts were removed");
    assert_eq!(
        std::fs::read_dir(state.join("composite")).unwrap().count(),
        0,
        "no journal entry stays"
    );
}

#[test]
fn a_later_upload_removes_the_parts_a_killed_one_left() {
    a_later_upload_and_the_parts_a_killed_one_left(false);
}

#[test]
fn a_later_upload_leaves_a_killed_upload_kept_for_resuming() {
    a_later_upload_and_the_parts_a_killed_one_left(true);
}

/// `mv` of a file onto another name of the same file (a hard link here)
/// is refused before anything is written or deleted: the copy would
/// replace the destination and deleting the source would then lose the
/// file. `mv -r` of a folder whose files are already in the destination
/// as hard links refuses each such file and deletes no source.
#[test]
fn mv_onto_another_name_of_the_same_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::write(&a, b"precious").unwrap();
    std::fs::hard_link(&a, &b).unwrap();
    run(with_args(
        shoal(),
        &["mv", a.to_str().unwrap(), b.to_str().unwrap()],
    ))
    .assert_one_line_error(2, &["same object"]);
    assert_eq!(std::fs::read(&a).unwrap(), b"precious");
    assert_eq!(std::fs::read(&b).unwrap(), b"precious");

    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"kept").unwrap();
    std::fs::write(src.join("g"), b"moved").unwrap();
    let dst = dir.path().join("dst");
    std::fs::create_dir_all(dst.join("tree")).unwrap();
    std::fs::hard_link(src.join("f"), dst.join("tree/f")).unwrap();
    let r = run(with_args(
        shoal(),
        &["mv", "-r", src.to_str().unwrap(), dst.to_str().unwrap()],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("is the same file as") && r.stderr.contains("/tree/f"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(src.join("f")).unwrap(), b"kept");
    assert_eq!(std::fs::read(dst.join("tree/f")).unwrap(), b"kept");
    assert_eq!(std::fs::read(dst.join("tree/g")).unwrap(), b"moved");
    assert!(!src.join("g").exists(), "the other file moved");
}

/// The same through a bind mount (one folder under two names), where the
/// file has one name per mount: only where mounting is permitted.
#[test]
fn mv_through_a_bind_mount_onto_itself_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (m1, m2) = (dir.path().join("m1"), dir.path().join("m2"));
    std::fs::create_dir(&m1).unwrap();
    std::fs::create_dir(&m2).unwrap();
    std::fs::write(m1.join("f"), b"precious").unwrap();
    let mounted = Command::new("mount")
        .args(["--bind", m1.to_str().unwrap(), m2.to_str().unwrap()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        return eprintln!("skipped: mount --bind is not permitted here");
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(m2.clone());
    let (from, to) = (m1.join("f"), m2.join("f"));
    run(with_args(
        shoal(),
        &["mv", from.to_str().unwrap(), to.to_str().unwrap()],
    ))
    .assert_one_line_error(2, &["same object"]);
    assert_eq!(std::fs::read(&from).unwrap(), b"precious");
}
