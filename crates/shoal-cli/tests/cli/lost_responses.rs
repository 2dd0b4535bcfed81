//! Lost responses and failed parts on GCS (fake-gcs-server behind the test
//! kit's fault proxy): the server did the work, the answer never arrived
//! (`Fault::LoseResponse`: forwarded, then the connection reset; or a 503
//! sent after the server answered). shoal must look before it retries
//! (`shoal_core::retry::safe`), so completed work never exits 1: an upload
//! or compose with a "must not exist" precondition meeting its own object,
//! an `rm` meeting its own delete, an `mb` meeting its own bucket. And a
//! composite upload whose part fails for good leaves no temporary object.
//!
//! A delete whose answer was lost while another writer stored the key
//! again (`Fault::LoseResponseThen`) never deletes that newer object, on
//! GCS and on S3 (MinIO); `rm` says so and exits 0, and `mv` says the move
//! completed. The objects are read back with curl, not with shoal.

use std::process::Command;

use crate::common::*;
use shoal_testkit::faultproxy::{Fault, FaultProxy, OtherWrite, Rule, Script, When};

fn via(proxy: &FaultProxy) -> Command {
    let mut c = gcs().unwrap();
    c.env("STORAGE_EMULATOR_HOST", proxy.url());
    c
}

fn upstream() -> Option<String> {
    shoal_testkit_server("SHOAL_TEST_GCS")
}

/// Names under `prefix` in `bucket`, read from the server directly.
fn read_back(url: &str) -> Vec<u8> {
    let r = run(with_args(gcs().unwrap(), &["cat", url]));
    assert_eq!(r.code, 0, "cat {url}: {}", r.stderr);
    r.stdout_bytes
}

fn one(proxy_rule: Rule) -> (FaultProxy, String) {
    let ep = upstream().unwrap();
    (FaultProxy::start(&ep, Script::new().rule(proxy_rule)), ep)
}

#[test]
fn a_create_whose_answer_was_lost_succeeds() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(10_000, 3);
    let src = dir.path().join("f");
    std::fs::write(&src, &body).unwrap();
    for (name, fault) in [
        ("lost", Fault::LoseResponse),
        ("503-after", Fault::StatusAfter(503)),
    ] {
        let (proxy, _) = one(Rule::new(
            When::method("POST").contains("uploadType=multipart"),
            fault,
        ));
        let url = format!("gs://{bucket}/{name}");
        let r = run(with_args(
            via(&proxy),
            &[
                "cp",
                "--if-generation-match",
                "0",
                src.to_str().unwrap(),
                &url,
            ],
        ));
        assert!(!proxy.injected().is_empty(), "{name}: no fault injected");
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert_eq!(read_back(&url), body, "{name}");
    }
}

#[test]
fn a_compose_whose_answer_was_lost_succeeds_and_leaves_nothing() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(3 * (1 << 20) + 5, 4);
    let src = dir.path().join("f");
    std::fs::write(&src, &body).unwrap();
    let (proxy, ep) = one(Rule::new(
        When::method("POST").contains("/compose"),
        Fault::LoseResponse,
    ));
    let url = format!("gs://{bucket}/composed");
    let r = run(with_args(
        via(&proxy),
        &[
            "cp",
            "--gcs-upload",
            "compose",
            "--part-size",
            "1MiB",
            "--no-clobber",
            src.to_str().unwrap(),
            &url,
        ],
    ));
    assert!(!proxy.injected().is_empty(), "no fault injected");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(read_back(&url), body);
    assert_eq!(gcs_names(&ep, &bucket, ".shoal-tmp/"), Vec::<String>::new());
}

#[test]
fn rm_whose_answer_was_lost_succeeds() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    std::fs::write(&src, b"x").unwrap();
    let url = format!("gs://{bucket}/gone");
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", src.to_str().unwrap(), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (proxy, ep) = one(Rule::new(When::method("DELETE"), Fault::LoseResponse));
    let r = run(with_args(via(&proxy), &["rm", &url]));
    assert!(!proxy.injected().is_empty(), "no fault injected");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(gcs_names(&ep, &bucket, "gone"), Vec::<String>::new());
    // Without a lost answer, a missing object is still an error.
    let r = run(with_args(gcs().unwrap(), &["rm", &url]));
    assert_eq!(r.code, 1, "{}", r.stderr);
}

#[test]
fn mb_whose_answer_was_lost_succeeds() {
    if upstream().is_none() {
        return;
    }
    let (proxy, _) = one(Rule::new(
        When::method("POST").contains("/storage/v1/b"),
        Fault::LoseResponse,
    ));
    let bucket = unique("lost-mb");
    let r = run(with_args(via(&proxy), &["mb", &format!("gs://{bucket}")]));
    assert!(!proxy.injected().is_empty(), "no fault injected");
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The bucket is there, and a second mb is refused as before.
    let r = run(with_args(
        gcs().unwrap(),
        &["mb", &format!("gs://{bucket}")],
    ));
    assert_ne!(r.code, 0, "{}", r.stderr);
}

/// A part refused for good (400) while other parts are in flight: the
/// upload fails and, with `--no-resume`, no `.shoal-tmp/composite/` object
/// is left, including parts the server stored after the failure was known.
/// (By default the upload is kept for the same command to resume, as
/// tests/cli/upload_resume.rs checks.)
#[test]
fn a_composite_upload_whose_part_fails_leaves_nothing() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(6 * (1 << 20), 5);
    let src = dir.path().join("f");
    std::fs::write(&src, &body).unwrap();
    for code in [400, 401] {
        let (proxy, ep) = one(Rule::new(
            When::method("POST").contains("uploadType=multipart"),
            Fault::Status {
                code,
                retry_after: None,
            },
        )
        .nth(2));
        let url = format!("gs://{bucket}/failed-{code}");
        let r = run(with_args(
            via(&proxy),
            &[
                "cp",
                "--no-resume",
                "--gcs-upload",
                "compose",
                "--part-size",
                "1MiB",
                src.to_str().unwrap(),
                &url,
            ],
        ));
        assert!(!proxy.injected().is_empty(), "{code}: no fault injected");
        assert_eq!(r.code, 1, "{code}: {}", r.stderr);
        assert_eq!(
            gcs_names(&ep, &bucket, ".shoal-tmp/"),
            Vec::<String>::new(),
            "{code}"
        );
    }
}

/// Another writer's upload of `key` with `body`, straight to
/// fake-gcs-server (which takes unsigned uploads).
fn gcs_other_write(bucket: &str, key: &str, body: &[u8]) -> OtherWrite {
    OtherWrite {
        method: "POST".into(),
        target: format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={key}"),
        body: body.to_vec(),
    }
}

/// An object's bytes, read with curl from fake-gcs-server.
fn gcs_bytes(ep: &str, bucket: &str, key: &str) -> Option<Vec<u8>> {
    let out = Command::new("curl")
        .args([
            "-fsS",
            &format!("{ep}/storage/v1/b/{bucket}/o/{key}?alt=media"),
        ])
        .output()
        .unwrap();
    out.status.success().then_some(out.stdout)
}

#[test]
fn a_lost_delete_answer_never_deletes_a_key_stored_again_gcs() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    std::fs::write(&src, b"ours").unwrap();
    for verb in ["rm", "mv"] {
        let key = format!("again-{verb}");
        let url = format!("gs://{bucket}/{key}");
        let r = run(with_args(
            gcs().unwrap(),
            &["cp", src.to_str().unwrap(), &url],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let (proxy, ep) = one(Rule::new(
            When::method("DELETE"),
            Fault::LoseResponseThen(gcs_other_write(&bucket, &key, b"theirs")),
        ));
        let moved = format!("gs://{bucket}/moved-{verb}");
        let args: Vec<&str> = match verb {
            "rm" => vec!["rm", &url],
            _ => vec!["mv", &url, &moved],
        };
        let r = run(with_args(via(&proxy), &args));
        assert!(!proxy.injected().is_empty(), "{verb}: no fault injected");
        assert_eq!(r.code, 0, "{verb}: {}", r.stderr);
        assert!(
            r.stderr.contains("now holds a newer object") && r.stderr.contains("kept"),
            "{verb}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("move the source again"), "{}", r.stderr);
        assert_eq!(
            gcs_bytes(&ep, &bucket, &key).as_deref(),
            Some(&b"theirs"[..]),
            "{verb}: the other writer's object must stay"
        );
        if verb == "mv" {
            assert_eq!(
                gcs_bytes(&ep, &bucket, &format!("moved-{verb}")).as_deref(),
                Some(&b"ours"[..])
            );
        }
    }
}

#[test]
fn a_lost_delete_answer_never_deletes_a_key_stored_again_s3() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let ep = shoal_testkit_server("SHOAL_TEST_S3").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    std::fs::write(&src, b"ours").unwrap();
    for verb in ["rm", "mv"] {
        let key = format!("again-{verb}");
        let url = format!("s3://{bucket}/{key}");
        let r = run(with_args(
            s3().unwrap(),
            &["cp", src.to_str().unwrap(), &url],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        // The other writer holds a presigned PUT: no signing in the proxy.
        let r = run(with_args(
            s3().unwrap(),
            &["presign", "--method", "PUT", "--expires", "1h", &url],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let signed = r.stdout.trim().to_owned();
        let target = signed
            .strip_prefix(ep.trim_end_matches('/'))
            .unwrap_or_else(|| panic!("{signed} is not below {ep}"))
            .to_owned();
        let proxy = FaultProxy::start(
            &ep,
            Script::new().rule(Rule::new(
                When::method("DELETE"),
                Fault::LoseResponseThen(OtherWrite {
                    method: "PUT".into(),
                    target,
                    body: b"theirs".to_vec(),
                }),
            )),
        );
        let moved = format!("s3://{bucket}/moved-{verb}");
        let args: Vec<&str> = match verb {
            "rm" => vec!["rm", &url],
            _ => vec!["mv", &url, &moved],
        };
        let mut c = with_args(s3().unwrap(), &args);
        c.env("AWS_ENDPOINT_URL", proxy.url());
        let r = run(c);
        assert!(!proxy.injected().is_empty(), "{verb}: no fault injected");
        assert_eq!(r.code, 0, "{verb}: {}", r.stderr);
        assert!(
            r.stderr.contains("now holds a newer object") && r.stderr.contains("kept"),
            "{verb}: {}",
            r.stderr
        );
        assert_eq!(
            curl_s3(&ep, "GET", &format!("/{bucket}/{key}")),
            "theirs",
            "{verb}"
        );
        if verb == "mv" {
            assert_eq!(
                curl_s3(&ep, "GET", &format!("/{bucket}/moved-{verb}")),
                "ours"
            );
        }
    }
}

/// `cp --no-clobber` whose answer was lost meets its own object: done,
/// exit 0, not "skipped: the destination exists" (nothing else wrote it).
#[test]
fn a_no_clobber_copy_whose_answer_was_lost_is_not_a_skip() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    std::fs::write(&src, pattern(5_000, 9)).unwrap();
    let big = dir.path().join("big");
    std::fs::write(&big, pattern(12 << 20, 10)).unwrap();
    for (scheme, base, var, file, when) in [
        (
            "gs",
            gcs as fn() -> Option<Command>,
            "SHOAL_TEST_GCS",
            &src,
            When::method("POST"),
        ),
        ("s3", s3, "SHOAL_TEST_S3", &src, When::method("PUT")),
        // The last request of a multipart upload: compose, or
        // CompleteMultipartUpload.
        (
            "gs",
            gcs,
            "SHOAL_TEST_GCS",
            &big,
            When::method("POST").contains("/compose"),
        ),
        (
            "s3",
            s3,
            "SHOAL_TEST_S3",
            &big,
            When::method("POST").contains("uploadId="),
        ),
    ] {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let ep = shoal_testkit_server(var).unwrap();
        let proxy = FaultProxy::start(
            &ep,
            Script::new().rule(Rule::new(when, Fault::LoseResponse)),
        );
        let url = format!(
            "{scheme}://{bucket}/nc-{}",
            file.file_name().unwrap().to_str().unwrap()
        );
        let mut c = with_args(
            base().unwrap(),
            &[
                "cp",
                "--no-clobber",
                "--part-size",
                "5MiB",
                "--gcs-upload",
                "compose",
                file.to_str().unwrap(),
                &url,
            ],
        );
        c.env(
            if scheme == "gs" {
                "STORAGE_EMULATOR_HOST"
            } else {
                "AWS_ENDPOINT_URL"
            },
            proxy.url(),
        );
        let r = run(c);
        assert!(!proxy.injected().is_empty(), "{scheme}: no fault injected");
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        assert!(
            !r.stderr.to_lowercase().contains("skipped"),
            "{scheme}: {}",
            r.stderr
        );
    }
}
