//! The `shoal` binary end to end against fake-gcs-server and MinIO.

use crate::common::*;
use std::process::Command;

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

fn round_trip(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // 40 MiB: above two default slices would be 64 MiB, so force slices too.
    for (name, size, extra) in [
        ("empty", 0usize, vec![]),
        ("one", 1, vec![]),
        (
            "big.bin",
            40 << 20,
            vec!["--slices", "5", "--part-size", "8MiB"],
        ),
    ] {
        let src = dir.path().join(name);
        std::fs::write(&src, pattern(size)).unwrap();
        let url = format!("{scheme}://{bucket}/dir/{name}");
        let mut up = vec!["cp", src.to_str().unwrap(), url.as_str()];
        up.extend(extra.iter().copied());
        let r = run(with_args(base().unwrap(), &up));
        assert_eq!(r.code, 0, "upload {name}: {}", r.stderr);
        assert!(
            r.stderr.contains("effective bandwidth"),
            "summary line: {}",
            r.stderr
        );
        let back = dir.path().join(format!("{name}.back"));
        let mut down = vec!["cp", url.as_str(), back.to_str().unwrap()];
        down.extend(extra.iter().copied());
        let r = run(with_args(base().unwrap(), &down));
        assert_eq!(r.code, 0, "download {name}: {}", r.stderr);
        assert_eq!(
            std::fs::read(&back).unwrap(),
            pattern(size),
            "{name} round trip"
        );
        assert!(r.stderr.contains("verified"), "{}", r.stderr);
    }
    // Only the files we made: no temporaries left.
    assert_eq!(
        files_in(dir.path()),
        [
            "big.bin",
            "big.bin.back",
            "empty",
            "empty.back",
            "one",
            "one.back"
        ]
    );

    let ls = run(with_args(
        base().unwrap(),
        &["ls", &format!("{scheme}://{bucket}/dir/")],
    ));
    assert_eq!(ls.code, 0, "{}", ls.stderr);
    let want: Vec<String> = ["big.bin", "empty", "one"]
        .iter()
        .map(|n| format!("{scheme}://{bucket}/dir/{n}"))
        .collect();
    assert_eq!(ls.stdout.lines().collect::<Vec<_>>(), want);

    let ls = run(with_args(
        base().unwrap(),
        &["ls", &format!("{scheme}://{bucket}")],
    ));
    assert_eq!(ls.stdout.trim(), format!("{scheme}://{bucket}/dir/"));

    let ls = run(with_args(
        base().unwrap(),
        &["ls", "-l", &format!("{scheme}://{bucket}/dir")],
    ));
    assert!(
        ls.stdout.contains(&format!("{}", 40 << 20)),
        "{}",
        ls.stdout
    );
    assert!(ls.stdout.contains("TOTAL: 3 objects"), "{}", ls.stdout);

    let json = run(with_args(
        base().unwrap(),
        &["ls", "-r", "--json", &format!("{scheme}://{bucket}/")],
    ));
    let first: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["name"], "dir/big.bin");
    assert_eq!(first["size"], 40 << 20);
    // GCS listings carry checksums; S3's ListObjectsV2 does not.
    if scheme == "gs" {
        assert!(first.get("crc32c").is_some(), "{first}");
    }

    let cat = run(with_args(
        base().unwrap(),
        &[
            "cat",
            &format!("{scheme}://{bucket}/dir/one"),
            &format!("{scheme}://{bucket}/dir/one"),
        ],
    ));
    assert_eq!(cat.stdout_bytes, [0u8, 0u8]);

    let stat = run(with_args(
        base().unwrap(),
        &[
            "stat",
            "--json",
            &format!("{scheme}://{bucket}/dir/big.bin"),
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&stat.stdout).unwrap();
    assert_eq!(v["size"], 40 << 20);

    let rm = run(with_args(
        base().unwrap(),
        &["rm", "-r", &format!("{scheme}://{bucket}/dir/")],
    ));
    assert_eq!(rm.code, 0, "{}", rm.stderr);
    let ls = run(with_args(
        base().unwrap(),
        &["ls", &format!("{scheme}://{bucket}/dir/")],
    ));
    assert_eq!(ls.code, 1, "empty prefix matches nothing");
}

#[test]
fn gcs_round_trip_ls_cat_stat_rm() {
    round_trip(gcs, "gs");
}

#[test]
fn s3_round_trip_ls_cat_stat_rm() {
    round_trip(s3, "s3");
}

#[test]
fn stdin_to_cloud_to_stdout_and_cloud_to_cloud() {
    let (Some(gb), Some(sb)) = (make_bucket(gcs, "gs"), make_bucket(s3, "s3")) else {
        return;
    };
    let body = pattern(3 << 20);
    let mut c = gcs().unwrap();
    c.args(["cp", "-", &format!("gs://{gb}/piped")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // gs → s3 needs both endpoints: the scheme-specific flags.
    let mut c = shoal();
    c.env(
        "STORAGE_EMULATOR_HOST",
        std::env::var("SHOAL_TEST_GCS").unwrap(),
    )
    .env("AWS_ACCESS_KEY_ID", "minioadmin")
    .env("AWS_SECRET_ACCESS_KEY", SECRET)
    .args([
        "--s3-endpoint-url",
        &std::env::var("SHOAL_TEST_S3").unwrap(),
        "cp",
        &format!("gs://{gb}/piped"),
        &format!("s3://{sb}/copied"),
    ]);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = run(with_args(
        s3().unwrap(),
        &["cp", &format!("s3://{sb}/copied"), "-"],
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout_bytes.len(), body.len());
    assert!(out.stdout_bytes == body, "bytes differ");
}

#[test]
fn keys_with_odd_characters_round_trip_through_the_cli() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    std::fs::write(&src, b"odd").unwrap();
    for key in ["a//b", "sp ace/ü", "100%25", "x+y?z#w"] {
        let url = format!("gs://{bucket}/{key}");
        let r = run(with_args(
            gcs().unwrap(),
            &["cp", src.to_str().unwrap(), &url],
        ));
        assert_eq!(r.code, 0, "{key}: {}", r.stderr);
        let r = run(with_args(gcs().unwrap(), &["cat", &url]));
        assert_eq!(r.stdout, "odd", "{key}");
    }
    let ls = run(with_args(
        gcs().unwrap(),
        &["ls", "-r", &format!("gs://{bucket}/")],
    ));
    let mut got: Vec<&str> = ls.stdout.lines().collect();
    got.sort();
    let mut want: Vec<String> = ["a//b", "sp ace/ü", "100%25", "x+y?z#w"]
        .iter()
        .map(|k| format!("gs://{bucket}/{k}"))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

/// Completion scripts and the man page come from the flags themselves:
/// every verb, and flags added later, are in them.
#[test]
fn completions_and_man_page_are_generated_from_the_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let r = run(with_args(shoal(), &["completions", shell]));
        assert_eq!(r.code, 0, "{shell}: {}", r.stderr);
        for word in ["sync", "follow-symlinks", "no-clobber"] {
            assert!(r.stdout.contains(word), "{shell} completes {word}");
        }
    }
    let r = run(with_args(shoal(), &["man"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(".TH shoal 1"),
        "{}",
        &r.stdout[..200.min(r.stdout.len())]
    );
    assert!(r.stdout.contains("sync"));
    run(with_args(shoal(), &["completions", "tcsh"])).assert_one_line_error(2, &["tcsh"]);
}

/// `shoal --version` names the commit the binary was built from (build.rs),
/// so a bug report says which code ran; here that is the checkout's HEAD.
#[test]
fn version_names_the_commit_it_was_built_from() {
    let r = run(with_args(shoal(), &["--version"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let want = format!("shoal {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(r.stdout.starts_with(&want), "{}", r.stdout);
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Ok(h) = head
        && h.status.success()
        && std::env::var_os("SHOAL_BUILD_COMMIT").is_none()
    {
        let head = String::from_utf8_lossy(&h.stdout).trim().to_owned();
        assert_eq!(r.stdout, format!("{want}{head})\n"));
    }
}

/// `--json` on the verbs that change things: one object per line on
/// stdout, each action as it finishes, then a summary object; nothing
/// else on stdout.
#[test]
fn json_output_is_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a"), b"alpha").unwrap();
    std::fs::write(src.join("sub/b"), b"beta").unwrap();
    let p = |x: &std::path::Path| x.to_str().unwrap().to_owned();
    let lines = |r: &Run| -> Vec<serde_json::Value> {
        r.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect()
    };

    let out = dir.path().join("out");
    let r = run(with_args(
        shoal(),
        &["cp", "-r", "--json", &p(&src), &p(&out)],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = lines(&r);
    let copies: Vec<_> = v.iter().filter(|o| o["action"] == "copy").collect();
    assert_eq!(copies.len(), 2, "{v:?}");
    assert!(copies.iter().all(|c| c["bytes"].as_u64().unwrap() > 0));
    let last = v.last().unwrap();
    assert_eq!(last["summary"]["verb"], "cp");
    assert_eq!(last["summary"]["copied"], 2);
    assert_eq!(last["summary"]["bytes"], 9);

    let r = run(with_args(
        shoal(),
        &[
            "sync",
            "-n",
            "--json",
            "--delete",
            &p(&src),
            &p(&out.join("src")),
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = lines(&r);
    assert_eq!(v.len(), 1, "nothing to do, just the summary: {v:?}");
    assert_eq!(v[0]["summary"]["to_copy"], 0);

    let r = run(with_args(
        shoal(),
        &["rm", "--json", &p(&out.join("src/a"))],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = lines(&r);
    assert_eq!(v[0]["action"], "delete");
    assert_eq!(v[1]["summary"]["deleted"], 1);

    let r = run(with_args(
        shoal(),
        &["cp", "--json", &p(&src.join("a")), &p(&out.join("one"))],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = lines(&r);
    assert_eq!(
        (v.len(), &v[0]["action"], &v[0]["bytes"]),
        (1, &"copy".into(), &5.into())
    );

    run(with_args(
        shoal(),
        &["cp", "--json", &p(&src.join("a")), "-"],
    ))
    .assert_one_line_error(2, &["--json", "stdout"]);
}
