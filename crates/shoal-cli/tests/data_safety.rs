//! Working files nobody else can write into: objects named like shoal's
//! own working files, and a second process writing the same destination,
//! never mix their bytes into a download.

mod common;

use std::process::Stdio;

use common::*;

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
