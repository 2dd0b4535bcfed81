//! The CLI's S3 paths against both S3 implementations: MinIO
//! (`SHOAL_TEST_S3`) and moto's server (`SHOAL_TEST_MOTO`). Where the two
//! differ, shoal follows what AWS documents; each difference is written
//! down in docs/s3-servers.md with the test here that shows it.

use std::process::Command;

use crate::common::*;
use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script, When};

const MIB: usize = 1 << 20;

/// Both servers, by name, each with its endpoint.
type Server = (&'static str, fn() -> Option<Command>, String);

fn servers() -> Vec<Server> {
    let mut out = Vec::new();
    if let Some(ep) = shoal_testkit_server("SHOAL_TEST_S3") {
        out.push(("minio", s3 as fn() -> Option<Command>, ep));
    }
    if let Some(ep) = shoal_testkit_server("SHOAL_TEST_MOTO") {
        out.push(("moto", moto as fn() -> Option<Command>, ep));
    }
    out
}

fn ok(c: Command, args: &[&str]) -> Run {
    let r = run(with_args(c, args));
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    r
}

/// Item 7 of issue 37 and moto's untyped checksums: a multipart object
/// with a composite CRC32C. moto answers its HEAD with the composite value
/// bare (no `-N`, no checksum type) and GetObjectAttributes with another
/// document and no part list. The download once failed for good (the
/// composite taken for the object's CRC, or the unreadable answer an
/// error); now it is checked as far as the server can say, and completes.
#[test]
fn moto_composite_multipart_downloads() {
    let Some(store) = shoal_testkit::moto_store() else {
        return;
    };
    let bucket = make_bucket(moto, "s3").unwrap();
    let body = pattern(12 * MIB + 123, 37);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let opts = shoal_core::PutOptions {
            assemble: shoal_core::Assemble::Composite,
            ..Default::default()
        };
        let mp = store.multipart().expect("S3 has multipart uploads");
        let up = mp.multipart_start(&bucket, "mp", &opts).await.unwrap();
        let mut done = Vec::new();
        for (i, chunk) in body.chunks(5 * MIB).enumerate() {
            let crc = shoal_core::checksum::PartKind::Crc32c.checksum(chunk);
            let chunk = bytes::Bytes::copy_from_slice(chunk);
            done.push(
                mp.multipart_put(&up, i as u32 + 1, chunk, crc)
                    .await
                    .unwrap(),
            );
        }
        mp.multipart_complete(&up, &done, None).await.unwrap();
        let head = store.head(&bucket, "mp").await.unwrap();
        assert_eq!(
            (head.checksums.crc32c(), head.checksums.other_crc()),
            (None, None),
            "{head:?}"
        );
        assert_eq!(
            head.checksums.composite().map(|c| c.parts),
            Some(3),
            "{head:?}"
        );
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mp");
    let r = ok(
        moto().unwrap(),
        &["cp", &format!("s3://{bucket}/mp"), out.to_str().unwrap()],
    );
    assert!(std::fs::read(&out).unwrap() == body, "bytes differ");
    assert!(r.stderr.contains("size only verified"), "{}", r.stderr);
}

/// Item 10: an upload says "crc32c verified" only because the answer
/// echoed the CRC32C sent (MinIO always; moto because shoal names the
/// algorithm as the SDKs do, without which moto keeps nothing), and the
/// object then keeps it: a HEAD gives it back.
#[test]
fn upload_says_what_was_verified() {
    for (name, base, _) in servers() {
        let bucket = make_bucket(base, "s3").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        let body = pattern(100_000, 3);
        std::fs::write(&f, &body).unwrap();
        let url = format!("s3://{bucket}/f");
        let r = ok(base().unwrap(), &["cp", f.to_str().unwrap(), &url]);
        assert!(r.stderr.contains("crc32c verified"), "{name}: {}", r.stderr);
        let r = ok(base().unwrap(), &["stat", "--json", &url]);
        let want =
            shoal_core::checksum::crc32c_to_base64(shoal_core::checksum::crc32c_append(0, &body));
        assert!(r.stdout.contains(&want), "{name}: {}", r.stdout);
    }
}

/// Item 8: a copy made of UploadPartCopy parts asks for the source's
/// checksum kind (so on AWS it is checked by CRC32C like a single
/// CopyObject), and its summary counts the requests made. MinIO refuses
/// part copies into an upload that declared a checksum ("checksum
/// missing"): the copy is made again without, and says it was checked by
/// size, every request counted.
#[test]
fn multipart_copy_is_verified() {
    let Some(base) = servers().into_iter().find(|s| s.0 == "minio").map(|s| s.1) else {
        return;
    };
    let bucket = make_bucket(base, "s3").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, pattern(12 * MIB, 8)).unwrap();
    let src = format!("s3://{bucket}/src");
    ok(base().unwrap(), &["cp", f.to_str().unwrap(), &src]);
    let dst = format!("s3://{bucket}/dst");
    let r = ok(base().unwrap(), &["cp", "--part-size", "5MiB", &src, &dst]);
    // How many part copies went out before the refusal was seen depends
    // on scheduling; at least start, one part, abort, then all 5.
    let n: usize = r
        .stderr
        .split(" parallel requests, size only verified")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(n >= 8, "{}", r.stderr);
}

/// Item 9: `rm -r` of 1,001 keys is two DeleteObjects requests (1,000
/// keys, then 1), not 1,001 DELETEs, on both servers; every key is gone
/// and reported. Keys XML must escape go through the document intact.
#[test]
fn rm_r_is_batched() {
    for (name, base, ep) in servers() {
        let bucket = make_bucket(base, "s3").unwrap();
        let dir = tempfile::tempdir().unwrap();
        for i in 0..1001 {
            std::fs::write(dir.path().join(format!("k&<{i:04}> x")), b"x").unwrap();
        }
        let url = format!("s3://{bucket}/p/");
        ok(
            base().unwrap(),
            &["cp", "-r", &format!("{}/", dir.path().display()), &url],
        );
        let r = ok(base().unwrap(), &["ls", "-r", &url]);
        assert_eq!(r.stdout.lines().count(), 1001, "{name}: {}", r.stdout);

        let proxy = FaultProxy::start(&ep, Script::new());
        let mut c = base().unwrap();
        c.env("AWS_ENDPOINT_URL", proxy.url());
        let r = ok(c, &["rm", "-r", "--json", &url]);
        let deleted = r
            .stdout
            .lines()
            .filter(|l| l.contains("\"delete\""))
            .count();
        assert_eq!(deleted, 1001, "{name}: {}", r.stdout);
        // The listing (two pages at most) and two DeleteObjects.
        let requests = proxy.requests();
        assert!(requests <= 6, "{name}: {requests} requests");
        let r = run(with_args(base().unwrap(), &["ls", "-r", &url]));
        assert!(
            r.stdout.trim().is_empty() && r.stderr.contains("matched no objects"),
            "{name}: left {} {}",
            r.stdout,
            r.stderr
        );
    }
}

/// Issue 37's lost responses on S3, on both servers: a `--no-clobber` PUT
/// (`If-None-Match: *`), an `rm --if-match` and an `mb` whose answers were
/// lost (the connection reset after the server answered, or a 503 sent in
/// its place) each exit 0 with the work done. A blind retry met 412 (our
/// own object reported "exists; not replaced"), 404 (moto: our own delete)
/// or 409 (BucketAlreadyOwnedByYou).
#[test]
fn writes_deletes_and_buckets_whose_answer_was_lost_succeed() {
    for (name, base, ep) in servers() {
        let via = |proxy: &FaultProxy| {
            let mut c = base().unwrap();
            c.env("AWS_ENDPOINT_URL", proxy.url());
            c
        };
        let bucket = make_bucket(base, "s3").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let body = pattern(20_000, 5);
        let src = dir.path().join("f");
        std::fs::write(&src, &body).unwrap();
        for (what, fault) in [
            ("lost", Fault::LoseResponse),
            ("503-after", Fault::StatusAfter(503)),
        ] {
            let url = format!("s3://{bucket}/{what}");
            let rule = Rule::new(When::method("PUT").contains(what), fault.clone());
            let proxy = FaultProxy::start(&ep, Script::new().rule(rule));
            let r = ok(
                via(&proxy),
                &["cp", "--no-clobber", src.to_str().unwrap(), &url],
            );
            assert!(!proxy.injected().is_empty(), "{name} put {what}: no fault");
            assert!(
                !r.stderr.contains("not replaced"),
                "{name} put {what}: {}",
                r.stderr
            );
            assert_eq!(ok(base().unwrap(), &["cat", &url]).stdout_bytes, body);

            let stat = ok(base().unwrap(), &["stat", "--json", &url]);
            let v: serde_json::Value = serde_json::from_str(stat.stdout.trim()).unwrap();
            let etag = v["etag"].as_str().unwrap().trim_matches('"').to_owned();
            let rule = Rule::new(When::method("DELETE").contains(what), fault);
            let proxy = FaultProxy::start(&ep, Script::new().rule(rule));
            ok(via(&proxy), &["rm", "--if-match", &etag, &url]);
            assert!(!proxy.injected().is_empty(), "{name} rm {what}: no fault");
            let gone = run(with_args(base().unwrap(), &["stat", &url]));
            assert_ne!(gone.code, 0, "{name} rm {what}: still there");
        }
        let new = unique("lost-mb");
        let rule = Rule::new(When::method("PUT").contains(&new), Fault::LoseResponse);
        let proxy = FaultProxy::start(&ep, Script::new().rule(rule));
        ok(via(&proxy), &["mb", &format!("s3://{new}")]);
        assert!(!proxy.injected().is_empty(), "{name} mb: no fault");
    }
}

/// A multipart upload whose CompleteMultipartUpload answer is lost (the
/// server assembled the object, the connection was cut): the retry finds
/// no upload (`NoSuchUpload`), and the object in place is accepted as ours
/// because its size and full-object CRC32C are the ones combined from the
/// parts. Exit 0, with `--no-clobber` too (`If-None-Match: *` on the
/// complete), and the object is the file.
#[test]
fn a_multipart_complete_whose_answer_was_lost_succeeds() {
    for (name, base, ep) in servers() {
        let bucket = make_bucket(base, "s3").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let body = pattern(12 << 20, 9);
        let src = dir.path().join("f");
        std::fs::write(&src, &body).unwrap();
        for (what, extra) in [("plain", None), ("noclobber", Some("--no-clobber"))] {
            let url = format!("s3://{bucket}/mp-{what}");
            let rule = Rule::new(
                When::method("POST").contains(&format!("mp-{what}?uploadId=")),
                Fault::LoseResponse,
            );
            let proxy = FaultProxy::start(&ep, Script::new().rule(rule));
            let mut c = base().unwrap();
            c.env("AWS_ENDPOINT_URL", proxy.url());
            let mut args = vec!["cp", "--part-size", "5MiB"];
            args.extend(extra);
            args.extend([src.to_str().unwrap(), url.as_str()]);
            let r = ok(c, &args);
            assert_eq!(
                proxy.injected().len(),
                1,
                "{name} {what}: the complete's answer was not lost: {}",
                r.stderr
            );
            assert_eq!(
                ok(base().unwrap(), &["cat", &url]).stdout_bytes,
                body,
                "{name} {what}"
            );
        }
    }
}

/// A server-side copy (one CopyObject) whose outcome is unknown is not
/// sent again blindly, since another writer may have stored the
/// destination meanwhile. Its answer lost after the copy was made: the
/// destination is read, holds the source's bytes, and that is done (no
/// second CopyObject). Answered 503 before the server copied, over an
/// existing destination: the copy is made again carrying the state found
/// as its precondition, which needs a copy made of parts (its completion
/// with `If-Match`); no second CopyObject either. Both exit 0 with the
/// source's bytes in place.
#[test]
fn a_copy_whose_outcome_is_unknown_is_not_sent_again_blindly() {
    let observe = || Fault::DelayHeaders(std::time::Duration::ZERO);
    for (name, base, ep) in servers() {
        let bucket = make_bucket(base, "s3").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let body = pattern(MIB + 17, 21);
        let f = dir.path().join("f");
        std::fs::write(&f, &body).unwrap();
        let old = dir.path().join("old");
        std::fs::write(&old, b"another writer's object").unwrap();
        let src = format!("s3://{bucket}/src");
        ok(base().unwrap(), &["cp", f.to_str().unwrap(), &src]);
        let lost = format!("s3://{bucket}/lost");
        let busy = format!("s3://{bucket}/busy");
        ok(base().unwrap(), &["cp", old.to_str().unwrap(), &busy]);
        let cases = [
            (
                &lost,
                "/lost",
                Fault::LoseResponse,
                // The probe's HEAD finds the copy and is the answer too.
                vec![("lost-response", 1), ("throttle", 1)],
            ),
            (
                &busy,
                "/busy",
                Fault::Status {
                    code: 503,
                    retry_after: None,
                },
                vec![("503", 1), ("delay-headers", 1), ("throttle", 2)],
            ),
        ];
        for (dst, path, fault, expected) in cases {
            let copy = When::method("PUT").contains(path).lacks("uploadId");
            let script = Script::new()
                .rule(Rule::new(copy.clone(), fault))
                // Any CopyObject sent again, and the start of a copy
                // made of parts, are counted.
                .rule(Rule::new(copy, observe()).times(100))
                .rule(Rule::new(
                    When::method("POST").contains(&format!("{path}?uploads")),
                    observe(),
                ))
                // HEADs of the destination, counted under a name of their
                // own (a throttle no HEAD's empty body feels).
                .rule(
                    Rule::new(
                        When::method("HEAD").contains(path),
                        Fault::Throttle(1 << 40),
                    )
                    .times(100),
                );
            let proxy = FaultProxy::start(&ep, script);
            let mut c = base().unwrap();
            c.env("AWS_ENDPOINT_URL", proxy.url());
            let r = ok(c, &["cp", &src, dst]);
            let tally = proxy.tally();
            let mut expected: Vec<(String, usize)> = expected
                .into_iter()
                .map(|(k, n)| (k.to_owned(), n))
                .collect();
            expected.sort();
            assert_eq!(tally, expected, "{name} {dst}: {}", r.stderr);
            assert_eq!(
                ok(base().unwrap(), &["cat", dst]).stdout_bytes,
                body,
                "{name} {dst}"
            );
        }
    }
}
