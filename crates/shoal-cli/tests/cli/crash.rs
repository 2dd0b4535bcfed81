//! Crash safety: `kill -9` at random points (seeded, printed) of a
//! download, an upload and a sync, slowed down by the fault proxy so the
//! kill lands mid-transfer. After each kill: nothing partial under a final
//! name (local file or object), and a rerun completes byte-identical and
//! leaves no temporary behind. Multipart leftovers a kill cannot clean
//! (S3 uploads in progress, GCS composite parts under `.shoal-tmp/`) are
//! listed, reported and removed by the test, as a user would.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script, When};

fn slow(upstream: &str) -> FaultProxy {
    FaultProxy::start(
        upstream,
        Script::new()
            .rule(Rule::new(When::method("GET"), Fault::Throttle(16 << 20)).times(usize::MAX))
            .rule(
                Rule::new(When::any(), Fault::DelayHeaders(Duration::from_millis(60)))
                    .times(usize::MAX),
            ),
    )
}

/// Starts `c`, SIGKILLs it after `after` (if still running).
fn kill_after(mut c: Command, after: Duration) {
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

fn temporaries(dir: &std::path::Path) -> Vec<String> {
    files_in(dir)
        .into_iter()
        .filter(|n| n.contains(".shoal-tmp") || n.contains(".shoal-part"))
        .collect()
}

#[test]
fn kill_9_during_download_upload_and_sync() {
    let (Some(gcs_ep), Some(s3_ep)) = (
        shoal_testkit_server("SHOAL_TEST_GCS"),
        shoal_testkit_server("SHOAL_TEST_S3"),
    ) else {
        return;
    };
    let seed = std::env::var("SHOAL_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("crash seed {seed} (replay: SHOAL_CRASH_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let work = tempfile::tempdir().unwrap();
    let big = pattern(12 << 20, seed);
    let big_path = work.path().join("big");
    std::fs::write(&big_path, &big).unwrap();
    let tree = work.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let mut tree_files = Vec::new();
    for i in 0..12 {
        let body = pattern(150 << 10, seed ^ i);
        std::fs::write(tree.join(format!("f{i:02}")), &body).unwrap();
        tree_files.push((format!("f{i:02}"), body));
    }

    for (scheme, ep, base) in [
        ("gs", &gcs_ep, gcs as fn() -> Option<Command>),
        ("s3", &s3_ep, s3),
    ] {
        let bucket = make_bucket(base, scheme).unwrap();
        let url = format!("{scheme}://{bucket}/big.bin");
        let r = run(with_args(
            base().unwrap(),
            &[
                "cp",
                "--part-size",
                "5MiB",
                big_path.to_str().unwrap(),
                &url,
            ],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let proxy = slow(ep);
        let via = || {
            let mut c = base().unwrap();
            c.env("STORAGE_EMULATOR_HOST", proxy.url())
                .env("AWS_ENDPOINT_URL", proxy.url());
            c
        };

        // Download.
        for round in 0..3 {
            let at = Duration::from_millis(rng.random_range(50..900));
            let dir = work.path().join(format!("dl-{scheme}-{round}"));
            std::fs::create_dir(&dir).unwrap();
            let out = dir.join("big.bin");
            kill_after(
                with_args(
                    via(),
                    &["cp", "--slice-size", "2MiB", &url, out.to_str().unwrap()],
                ),
                at,
            );
            let what = format!("seed {seed} {scheme} download killed at {at:?}");
            if out.exists() {
                assert!(
                    std::fs::read(&out).unwrap() == big,
                    "{what}: partial file under the final name"
                );
            }
            let r = run(with_args(
                base().unwrap(),
                &["cp", &url, out.to_str().unwrap()],
            ));
            assert_eq!(r.code, 0, "{what}: rerun: {}", r.stderr);
            assert!(std::fs::read(&out).unwrap() == big, "{what}: rerun bytes");
            assert_eq!(
                temporaries(&dir),
                Vec::<String>::new(),
                "{what}: temporaries after the rerun"
            );
        }

        // Upload (multipart on S3, composite on GCS).
        for round in 0..3 {
            let at = Duration::from_millis(rng.random_range(50..900));
            let dst = format!("{scheme}://{bucket}/up-{round}.bin");
            kill_after(
                with_args(
                    via(),
                    &[
                        "cp",
                        "--part-size",
                        "5MiB",
                        big_path.to_str().unwrap(),
                        &dst,
                    ],
                ),
                at,
            );
            let what = format!("seed {seed} {scheme} upload killed at {at:?}");
            let st = run(with_args(base().unwrap(), &["stat", &dst]));
            if st.code == 0 {
                let back = run(with_args(base().unwrap(), &["cat", &dst]));
                assert!(
                    back.stdout_bytes == big,
                    "{what}: a partial object under the final name"
                );
            }
            let r = run(with_args(
                base().unwrap(),
                &[
                    "cp",
                    "--part-size",
                    "5MiB",
                    big_path.to_str().unwrap(),
                    &dst,
                ],
            ));
            assert_eq!(r.code, 0, "{what}: rerun: {}", r.stderr);
            let back = run(with_args(base().unwrap(), &["cat", &dst]));
            assert!(back.stdout_bytes == big, "{what}: rerun bytes");
        }

        // Sync of a folder.
        let at = Duration::from_millis(rng.random_range(100..1200));
        let dst = format!("{scheme}://{bucket}/tree/");
        kill_after(
            with_args(via(), &["sync", tree.to_str().unwrap(), &dst]),
            at,
        );
        let what = format!("seed {seed} {scheme} sync killed at {at:?}");
        let listed = run(with_args(base().unwrap(), &["ls", "-r", &dst]));
        for line in listed.stdout.lines() {
            let name = line.rsplit('/').next().unwrap();
            let want = &tree_files.iter().find(|(n, _)| n == name).unwrap().1;
            let got = run(with_args(base().unwrap(), &["cat", line]));
            assert!(got.stdout_bytes == *want, "{what}: partial object {line}");
        }
        let r = run(with_args(
            base().unwrap(),
            &["sync", tree.to_str().unwrap(), &dst],
        ));
        assert_eq!(r.code, 0, "{what}: rerun: {}", r.stderr);
        let listed = run(with_args(base().unwrap(), &["ls", "-r", &dst]));
        assert_eq!(listed.stdout.lines().count(), tree_files.len(), "{what}");

        // What a kill leaves and only a cleanup can remove: reported here.
        if scheme == "s3" {
            let open = open_s3_uploads(&s3_ep, &bucket);
            eprintln!(
                "{scheme}: {} multipart upload(s) left by kills: {open:?}",
                open.len()
            );
            for (key, id) in &open {
                abort_s3_upload(&s3_ep, &bucket, key, id);
            }
            assert!(open_s3_uploads(&s3_ep, &bucket).is_empty(), "aborted");
        } else {
            let tmp = format!("gs://{bucket}/.shoal-tmp/");
            let left = run(with_args(base().unwrap(), &["ls", "-r", &tmp]));
            let n = left.stdout.lines().count();
            eprintln!("{scheme}: {n} composite part(s) left by kills under {tmp}");
            if n > 0 {
                let r = run(with_args(base().unwrap(), &["rm", "-r", &tmp]));
                assert_eq!(r.code, 0, "{}", r.stderr);
            }
        }
        assert_eq!(temporaries(work.path()), Vec::<String>::new());
    }
}
