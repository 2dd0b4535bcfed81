//! `--gcs-upload`: parallel composite and resumable uploads to
//! fake-gcs-server, from files, stdin and another store, each read back
//! and compared byte for byte.

use std::io::Write;
use std::process::Stdio;

use crate::common::*;

fn data(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn read_back(url: &str, dir: &std::path::Path) -> Vec<u8> {
    let out = dir.join(unique("back"));
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", url, out.to_str().unwrap()],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::read(out).unwrap()
}

#[test]
fn every_gcs_upload_method_round_trips() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Not a multiple of any chunk or part size; several 1 MiB parts.
    let body = data(5 * (1 << 20) + 12_345);
    let src = dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    for method in ["auto", "compose", "resumable"] {
        let url = format!("gs://{bucket}/file-{method}");
        let r = run(with_args(
            gcs().unwrap(),
            &[
                "cp",
                "--gcs-upload",
                method,
                "--part-size",
                "1MiB",
                src.to_str().unwrap(),
                &url,
            ],
        ));
        assert_eq!(r.code, 0, "{method}: {}", r.stderr);
        assert!(r.stderr.contains("crc32c verified"), "{}", r.stderr);
        assert!(read_back(&url, dir.path()) == body, "{method}");

        let url = format!("gs://{bucket}/stdin-{method}");
        let mut c = with_args(
            gcs().unwrap(),
            &[
                "cp",
                "--gcs-upload",
                method,
                "--part-size",
                "1MiB",
                "-",
                &url,
            ],
        );
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child.stdin.take().unwrap().write_all(&body).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{method}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(read_back(&url, dir.path()) == body, "stdin {method}");
    }
    // Nothing temporary stays behind (composite parts are deleted).
    let r = run(with_args(
        gcs().unwrap(),
        &["ls", "-r", &format!("gs://{bucket}/")],
    ));
    assert_eq!(r.stdout.lines().count(), 6, "{}", r.stdout);
}

#[test]
fn s3_to_gcs_copies_are_whole() {
    let (Some(_), Some(_)) = (
        shoal_testkit_server("SHOAL_TEST_GCS"),
        shoal_testkit_server("SHOAL_TEST_S3"),
    ) else {
        return;
    };
    let (Some(gb), Some(sb)) = (make_bucket(gcs, "gs"), make_bucket(s3, "s3")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // S3 bodies arrive in chunks of arbitrary size: what the upload reads
    // ahead of its first part must not be lost.
    let body = data(3 * (1 << 20) + 777);
    let src = dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let s3_url = format!("s3://{sb}/obj");
    assert_eq!(
        run(with_args(
            s3().unwrap(),
            &["cp", src.to_str().unwrap(), &s3_url]
        ))
        .code,
        0
    );
    for method in ["auto", "compose", "resumable"] {
        let gs_url = format!("gs://{gb}/from-s3-{method}");
        // One command needs both stores' settings.
        let mut c = s3().unwrap();
        c.env(
            "STORAGE_EMULATOR_HOST",
            shoal_testkit_server("SHOAL_TEST_GCS").unwrap(),
        );
        let r = run(with_args(
            c,
            &[
                "cp",
                "--gcs-upload",
                method,
                "--part-size",
                "1MiB",
                &s3_url,
                &gs_url,
            ],
        ));
        assert_eq!(r.code, 0, "{method}: {}", r.stderr);
        assert!(read_back(&gs_url, dir.path()) == body, "{method}");
    }
}

#[test]
fn xml_multipart_where_the_server_lacks_it_is_one_clear_line() {
    // fake-gcs-server has no XML API multipart upload (real GCS does; it is
    // `auto`'s choice there): asking for it must fail plainly, not hang or
    // leave anything behind.
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, data(3 << 20)).unwrap();
    let url = format!("gs://{bucket}/xml");
    let r = run(with_args(
        gcs().unwrap(),
        &[
            "cp",
            "--gcs-upload",
            "xml",
            "--part-size",
            "1MiB",
            src.to_str().unwrap(),
            &url,
        ],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains(&url), "{}", r.stderr);
    assert!(r.stderr.contains("--gcs-upload compose"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let r = run(with_args(
        gcs().unwrap(),
        &["ls", "-r", &format!("gs://{bucket}/")],
    ));
    assert_eq!(r.stdout.trim(), "", "{}", r.stdout);
}
