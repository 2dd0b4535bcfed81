//! Uploads that resume (issue #55) on MinIO (S3 multipart uploads) and on
//! fake-gcs-server and storage-testbench (GCS composite uploads, whose
//! parts are objects under `.shoal-tmp/composite/`): an upload killed with
//! SIGKILL part-way (slowed by a toxiproxy bandwidth toxic on the way up)
//! goes on, run again, from the parts the server holds, each checked
//! against the file; a changed file starts over and aborts the old upload;
//! `--no-resume` starts over; `shoal uploads` lists and aborts what is left.
//! What the server holds is read with boto3 (from the moto venv) on MinIO
//! and with the JSON API (curl) on the GCS servers.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::resume::{slow_proxy_on, toxi};

const PART: usize = 5 << 20;
const SIZE: usize = 6 * PART + 1234;

/// Where an upload goes: each server's own kind of multipart upload.
#[derive(Debug, Clone, Copy, PartialEq)]
enum On {
    MinIO,
    FakeGcs,
    Testbench,
}

impl On {
    /// The server's address, or None (skipped) when it is not running.
    fn endpoint(self) -> Option<String> {
        match self {
            On::MinIO => shoal_testkit_server("SHOAL_TEST_S3"),
            On::FakeGcs => shoal_testkit_server("SHOAL_TEST_GCS"),
            On::Testbench => shoal_testkit_server("SHOAL_TEST_GCS_TESTBENCH"),
        }
    }

    fn scheme(self) -> &'static str {
        match self {
            On::MinIO => "s3",
            On::FakeGcs | On::Testbench => "gs",
        }
    }

    /// `shoal` aimed at `endpoint` (the server, or a proxy before it).
    fn shoal_at(self, endpoint: &str, state: &Path) -> Command {
        let mut c = match self {
            On::MinIO => s3().unwrap(),
            On::FakeGcs | On::Testbench => {
                let mut c = shoal();
                c.env("GOOGLE_CLOUD_PROJECT", "test");
                c
            }
        };
        match self {
            On::MinIO => c.env("AWS_ENDPOINT_URL", endpoint),
            On::FakeGcs | On::Testbench => c.env("STORAGE_EMULATOR_HOST", endpoint),
        };
        c.env("SHOAL_STATE_DIR", state);
        c
    }

    fn shoal(self, state: &Path) -> Command {
        self.shoal_at(&self.endpoint().unwrap(), state)
    }

    fn bucket(self) -> Option<String> {
        let ep = self.endpoint()?;
        let bucket = unique("cli");
        let r = run(with_args(
            self.shoal_at(&ep, Path::new("/nonexistent")),
            &["mb", &format!("{}://{bucket}", self.scheme())],
        ));
        assert_eq!(r.code, 0, "mb: {}", r.stderr);
        Some(bucket)
    }

    /// Requests that send a part (the ones a test holds back).
    fn part_requests(self) -> shoal_testkit::faultproxy::When {
        use shoal_testkit::faultproxy::When;
        match self {
            On::MinIO => When::method("PUT"),
            // A part is an object upload; its name travels in the body.
            On::FakeGcs | On::Testbench => When::method("POST").contains("uploadType=multipart"),
        }
    }

    /// Uploads in progress below `bucket` (on S3, of keys starting with
    /// `prefix`) and the parts they hold, as the server has them.
    fn stored_below(self, bucket: &str, prefix: &str) -> (usize, usize) {
        match self {
            On::MinIO => stored_parts(bucket, prefix),
            On::FakeGcs | On::Testbench => gcs_composite_parts(&self.endpoint().unwrap(), bucket),
        }
    }

    fn stored(self, bucket: &str) -> (usize, usize) {
        self.stored_below(bucket, "")
    }
}

/// Composite uploads (ids) and their parts under `.shoal-tmp/composite/`
/// of GCS bucket `bucket`, read with the JSON API.
fn gcs_composite_parts(endpoint: &str, bucket: &str) -> (usize, usize) {
    let names = gcs_names(endpoint, bucket, ".shoal-tmp/composite/");
    let ids: std::collections::BTreeSet<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix(".shoal-tmp/composite/")?.split('/').next())
        .collect();
    (ids.len(), names.len())
}

/// Parts the server holds for the uploads below `bucket`, by boto3.
pub(crate) fn stored_parts(bucket: &str, prefix: &str) -> (usize, usize) {
    const SCRIPT: &str = r#"
import sys, boto3
ep, bucket, prefix = sys.argv[1:4]
c = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                 aws_access_key_id="minioadmin", aws_secret_access_key="minioadmin")
ups = c.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
parts = sum(len(c.list_parts(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"]).get("Parts", [])) for u in ups)
print(len(ups), parts)
"#;
    let ep = std::env::var("SHOAL_TEST_S3").unwrap();
    let cache = std::env::var("SHOAL_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/shoal", std::env::var("HOME").unwrap()));
    let out = Command::new(format!("{cache}/venv-moto/bin/python"))
        .args(["-c", SCRIPT, &ep, bucket, prefix])
        .output()
        .expect("boto3 from the moto venv");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut n = text.split_whitespace().map(|x| x.parse::<usize>().unwrap());
    (n.next().unwrap(), n.next().unwrap())
}

#[derive(PartialEq, Clone, Copy)]
enum Then {
    /// The same command again: the stored parts are kept.
    Rerun,
    /// The file rewritten first: the old upload is aborted, all sent anew.
    Changed,
    /// The first part's bytes changed in place, the time set back: the
    /// journal fits, but that part's CRC32C does not, so it is sent again.
    Sneaky,
    /// `--no-resume`: all sent anew, the old upload left for `uploads`.
    NoResume,
}

struct Killed {
    dir: tempfile::TempDir,
    state: std::path::PathBuf,
    src: std::path::PathBuf,
    bucket: String,
    url: String,
    parts_before: usize,
}

/// Starts a 7-part upload through a slow proxy and kills it with SIGKILL
/// once the server holds two parts.
fn kill_mid_upload(on: On) -> Option<Killed> {
    let (Some(upstream), Some(_)) = (on.endpoint(), shoal_testkit_server("SHOAL_TEST_TOXIPROXY"))
    else {
        return None;
    };
    let bucket = on.bucket()?;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let src = dir.path().join("src");
    std::fs::write(&src, pattern(SIZE, 7)).unwrap();
    let url = format!("{}://{bucket}/big.bin", on.scheme());

    let (name, slow) = slow_proxy_on(&upstream, 3000, "upstream");
    let mut c = with_args(
        on.shoal_at(&slow, &state),
        &[
            "--workers",
            "2",
            "cp",
            "--part-size",
            "5MiB",
            src.to_str().unwrap(),
            &url,
        ],
    );
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let t0 = Instant::now();
    loop {
        if on.stored(&bucket).1 >= 2 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "no part stored");
        assert!(
            child.try_wait().unwrap().is_none(),
            "upload ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL: no cleanup runs
    child.wait().unwrap();
    toxi("DELETE", &format!("/proxies/{name}"), "");
    // Counted after the kill: a part may have landed since the last look.
    let parts_before = on.stored(&bucket).1;
    Some(Killed {
        dir,
        state,
        src,
        bucket,
        url,
        parts_before,
    })
}

fn upload_then(on: On, then: Then) {
    let Some(k) = kill_mid_upload(on) else {
        return;
    };
    assert!(
        k.parts_before < 7,
        "killed part-way ({} of 7 parts)",
        k.parts_before
    );
    let (uploads, _) = on.stored(&k.bucket);
    assert_eq!(uploads, 1, "the killed upload is left on the server");
    assert_eq!(
        files_in(&k.state.join("uploads")).len(),
        1,
        "and written down"
    );

    let mut want = std::fs::read(&k.src).unwrap();
    match then {
        Then::Changed => {
            want = pattern(SIZE, 8);
            std::fs::write(&k.src, &want).unwrap();
        }
        Then::Sneaky => {
            use std::os::unix::fs::FileExt;
            let before = std::fs::metadata(&k.src).unwrap().modified().unwrap();
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&k.src)
                .unwrap();
            f.write_all_at(b"changed in place", 100).unwrap();
            f.set_modified(before).unwrap();
            drop(f);
            want[100..116].copy_from_slice(b"changed in place");
        }
        Then::Rerun | Then::NoResume => {}
    }
    let mut args = vec!["cp", "--json", "--part-size", "5MiB"];
    if then == Then::NoResume {
        args.push("--no-resume");
    }
    args.extend([k.src.to_str().unwrap(), k.url.as_str()]);
    let r = run(with_args(on.shoal(&k.state), &args));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("\"resumed_bytes\""))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let resumed = v["resumed_bytes"].as_u64().unwrap() as usize;
    match then {
        Then::Rerun => assert!(
            resumed >= 2 * PART,
            "{resumed} bytes kept of {} parts stored",
            k.parts_before
        ),
        // Part 1 differs: every stored part but that one is kept.
        Then::Sneaky => assert!(
            resumed >= PART && resumed < k.parts_before * PART,
            "{resumed} bytes kept"
        ),
        Then::Changed | Then::NoResume => assert_eq!(resumed, 0, "started over"),
    }
    // The object is the file as it is now, byte for byte.
    let out = k.dir.path().join("back");
    let r = run(with_args(
        on.shoal(&k.state),
        &["cp", &k.url, out.to_str().unwrap()],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        std::fs::read(&out).unwrap() == want,
        "byte-identical to the file now"
    );

    let left = on.stored(&k.bucket).0;
    if then == Then::NoResume {
        // The old upload is still there: `uploads` lists it, a young one is
        // not aborted by default, `--older-than 0` aborts it.
        assert_eq!(left, 1);
        let r = run(with_args(
            on.shoal(&k.state),
            &[
                "uploads",
                "--json",
                &format!("{}://{}/", on.scheme(), k.bucket),
            ],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            r.stdout
                .lines()
                .filter(|l| l.contains("\"upload_id\""))
                .count(),
            1,
            "{}",
            r.stdout
        );
        assert!(r.stdout.contains("\"key\":\"big.bin\""), "{}", r.stdout);
        let r = run(with_args(
            on.shoal(&k.state),
            &[
                "uploads",
                "--abort",
                &format!("{}://{}", on.scheme(), k.bucket),
            ],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(on.stored(&k.bucket).0, 1, "younger than 1h: left");
        let r = run(with_args(
            on.shoal(&k.state),
            &[
                "uploads",
                "--abort",
                "--older-than",
                "0",
                &format!("{}://{}", on.scheme(), k.bucket),
            ],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stderr.contains("Aborted 1 upload"), "{}", r.stderr);
        assert_eq!(on.stored(&k.bucket).0, 0);
    } else {
        assert_eq!(left, 0, "the upload completed, or the old one was aborted");
        assert!(
            files_in(&k.state.join("uploads")).is_empty(),
            "journal entry removed"
        );
    }
}

#[test]
fn a_killed_upload_resumes_from_the_stored_parts() {
    upload_then(On::MinIO, Then::Rerun);
}

#[test]
fn a_changed_file_starts_over_and_aborts_the_old_upload() {
    upload_then(On::MinIO, Then::Changed);
}

#[test]
fn a_part_changed_in_place_is_sent_again() {
    upload_then(On::MinIO, Then::Sneaky);
}

#[test]
fn no_resume_starts_over_and_uploads_aborts_what_is_left() {
    upload_then(On::MinIO, Then::NoResume);
}

#[test]
fn a_killed_gcs_composite_upload_resumes_from_the_stored_parts() {
    upload_then(On::FakeGcs, Then::Rerun);
    upload_then(On::Testbench, Then::Rerun);
}

#[test]
fn a_changed_file_starts_a_gcs_composite_upload_over() {
    upload_then(On::FakeGcs, Then::Changed);
    upload_then(On::Testbench, Then::Sneaky);
}

#[test]
fn gcs_composite_uploads_kept_for_resuming_are_listed_and_aborted() {
    upload_then(On::FakeGcs, Then::NoResume);
    upload_then(On::Testbench, Then::NoResume);
}

#[test]
fn uploads_refuses_bad_input_in_one_line() {
    run(with_args(
        shoal(),
        &["uploads", "--abort", "--older-than", "soon", "s3://b"],
    ))
    .assert_one_line_error(2, &["soon"]);
    run(with_args(shoal(), &["uploads", "./local"])).assert_one_line_error(2, &["s3://"]);
}

/// What happens to the file (or the command) between the interrupted run
/// and the next one.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Between {
    Nothing,
    /// New bytes, same size.
    Rewritten,
    /// A few bytes changed in one part, the file's time set back: the
    /// journal entry still fits; only the parts' checksums tell.
    InPlace,
    /// Bytes appended.
    Grown,
    /// The next run asks for other metadata (`--content-type`).
    OtherOptions,
    /// The next run says `--no-resume`.
    NoResume,
    /// Both runs say `--no-clobber`, and another writer stores the key in
    /// between: the resumed upload must not replace it.
    OtherWriter,
}

/// Random interrupted uploads (seeded by `SHOAL_PLAN_SEED`, as the random
/// plans): a 4 to 7 part upload to MinIO, fake-gcs-server and
/// storage-testbench (composite uploads) whose parts past a random K are
/// held at a fault proxy, interrupted (SIGINT or SIGKILL) once K parts
/// are stored and the next is on its way, then one of [`Between`], then the
/// same command run again.
/// Whatever happened, the object is the file as it is at the end, byte
/// for byte; the parts kept are at least those the first run must have
/// finished when nothing changed, and none when the file, the part size's
/// file or the options changed; no upload is left on the server (after
/// `--no-resume`, `shoal uploads --abort` removes the old one) and no
/// journal entry is left behind. With `--no-clobber` and another writer's
/// object stored in between, the resumed upload is refused at its
/// completion (a skip) and that object stays as it is.
#[test]
fn random_interrupted_uploads_never_mix_two_files() {
    for on in [On::MinIO, On::FakeGcs, On::Testbench] {
        random_interrupted_uploads_on(on);
    }
}

fn random_interrupted_uploads_on(on: On) {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script};

    let Some(upstream) = on.endpoint() else {
        return;
    };
    let Some(bucket) = on.bucket() else {
        return;
    };
    let seed: u64 = std::env::var("SHOAL_PLAN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(26);
    let cases: usize = std::env::var("SHOAL_PLANS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .map_or(6, |n| (n / 10).max(1));
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5e5 ^ on as u64);
    let all = [
        Between::Nothing,
        Between::Rewritten,
        Between::InPlace,
        Between::Grown,
        Between::OtherOptions,
        Between::NoResume,
        Between::OtherWriter,
    ];
    for case in 0..cases {
        let mut between = all[(case + rng.random_range(0..all.len())) % all.len()];
        if between == Between::OtherWriter && on == On::FakeGcs {
            // fake-gcs-server ignores a compose's ifGenerationMatch=0
            // (TEST-SERVERS.md): storage-testbench runs this case.
            between = Between::Nothing;
        }
        let parts = rng.random_range(4..=7usize);
        let size = parts * PART - rng.random_range(0..PART / 2);
        let k = rng.random_range(1..parts);
        let kill = rng.random_bool(0.5);
        let label = format!(
            "{on:?} case {case}: {between:?}, {parts} parts, held after {k}, {}",
            if kill { "SIGKILL" } else { "SIGINT" }
        );

        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let src = dir.path().join("src");
        let mut want = pattern(size, seed + case as u64);
        std::fs::write(&src, &want).unwrap();
        let url = format!("{}://{bucket}/case-{case}", on.scheme());
        let proxy = FaultProxy::start(
            &upstream,
            Script::new().rule(
                Rule::new(
                    on.part_requests(),
                    Fault::DelayHeaders(Duration::from_secs(20)),
                )
                .nth(k + 1)
                .times(usize::MAX),
            ),
        );
        let clobber: &[&str] = if between == Between::OtherWriter {
            &["--no-clobber"]
        } else {
            &[]
        };
        let mut c = with_args(
            on.shoal_at(&proxy.url(), &state),
            &[
                &["--workers", "2", "cp", "--part-size", "5MiB"],
                clobber,
                &[src.to_str().unwrap(), &url],
            ]
            .concat(),
        );
        c.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = c.spawn().unwrap();
        let t0 = Instant::now();
        while proxy.injected().is_empty() {
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "{label}: part {} never sent",
                k + 1
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "{label}: ended before the interrupt"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Parts 1..=K are answered before the interrupt, so the only one
        // on its way is the one held (which the proxy, dropped, never
        // sends): what the server holds is known, not raced.
        while on.stored_below(&bucket, &format!("case-{case}")).1 < k {
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "{label}: parts before {} never stored",
                k + 1
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let sig = if kill { libc::SIGKILL } else { libc::SIGINT };
        unsafe {
            libc::kill(child.id() as i32, sig);
        }
        child.wait().unwrap();
        drop(proxy);

        let mut args = vec!["cp", "--json", "--part-size", "5MiB"];
        match between {
            Between::Nothing => {}
            Between::Rewritten => {
                want = pattern(size, seed + 1000 + case as u64);
                std::fs::write(&src, &want).unwrap();
            }
            Between::InPlace => {
                use std::os::unix::fs::FileExt;
                let at = rng.random_range(0..size - 8);
                let before = std::fs::metadata(&src).unwrap().modified().unwrap();
                let f = std::fs::OpenOptions::new().write(true).open(&src).unwrap();
                let new: Vec<u8> = want[at..at + 8].iter().map(|b| !b).collect();
                f.write_all_at(&new, at as u64).unwrap();
                f.set_modified(before).unwrap();
                want[at..at + 8].copy_from_slice(&new);
            }
            Between::Grown => {
                want.extend_from_slice(b"and then some");
                std::fs::write(&src, &want).unwrap();
            }
            Between::OtherOptions => args.extend(["--content-type", "text/x-other"]),
            Between::NoResume => args.push("--no-resume"),
            Between::OtherWriter => {
                args.push("--no-clobber");
                want = b"another writer's object".to_vec();
                let other = dir.path().join("other");
                std::fs::write(&other, &want).unwrap();
                let w = run(with_args(
                    on.shoal(&dir.path().join("other-state")),
                    &["cp", other.to_str().unwrap(), &url],
                ));
                assert_eq!(w.code, 0, "{label}: {}", w.stderr);
            }
        }
        args.extend([src.to_str().unwrap(), url.as_str()]);
        let r = run(with_args(on.shoal(&state), &args));
        if between == Between::OtherWriter {
            // Refused where the write lands (the completion's
            // precondition): counted as skipped, exit 0, as `--no-clobber`
            // does; the other object stays and nothing of the upload is
            // left (checked below).
            assert_eq!(r.code, 0, "{label}: {}", r.stderr);
            assert!(
                r.stdout.contains("\"action\":\"skip\""),
                "{label}: {}",
                r.stdout
            );
        } else {
            assert_eq!(r.code, 0, "{label}: {}", r.stderr);
            let line = r
                .stdout
                .lines()
                .find(|l| l.contains("\"resumed_bytes\""))
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let resumed = v["resumed_bytes"].as_u64().unwrap() as usize;
            let last = size - (parts - 1) * PART;
            let least = (k - 1) * PART + last.min(PART);
            match between {
                // K parts were stored before the interrupt (not always
                // 1..=K: two workers' requests reach the proxy in either
                // order, so the last, shorter part may be among them).
                Between::Nothing => assert!(resumed >= least, "{label}: kept {resumed}"),
                // One part changed, or two where the bytes straddle them.
                Between::InPlace => {
                    let least = least.saturating_sub(2 * PART);
                    assert!(resumed >= least, "{label}: kept {resumed}")
                }
                _ => assert_eq!(resumed, 0, "{label}: started over"),
            }
        }
        let back = dir.path().join("back");
        let r = run(with_args(
            on.shoal(&state),
            &["cp", &url, back.to_str().unwrap()],
        ));
        assert_eq!(r.code, 0, "{label}: {}", r.stderr);
        assert!(
            std::fs::read(&back).unwrap() == want,
            "{label}: the object is the file now"
        );
        if between == Between::NoResume {
            let r = run(with_args(
                on.shoal(&state),
                &[
                    "uploads",
                    "--abort",
                    "--older-than",
                    "0",
                    &format!("{}://{bucket}/case-{case}", on.scheme()),
                ],
            ));
            assert_eq!(r.code, 0, "{label}: {}", r.stderr);
            // The entry of the run that was not resumed names an upload
            // that is gone now; the next upload of the file starts over.
            std::fs::remove_dir_all(state.join("uploads")).ok();
        }
        assert_eq!(on.stored(&bucket).0, 0, "{label}: no upload left");
        let entries = std::fs::read_dir(state.join("uploads")).map_or(0, |d| d.count());
        assert_eq!(entries, 0, "{label}: no journal entry left");
    }
}
