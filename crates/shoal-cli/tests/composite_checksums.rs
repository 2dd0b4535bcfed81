//! S3 multipart objects whose only checksum is COMPOSITE (`xxxx-N`, the
//! CRC of the parts' CRCs: what boto3 and the AWS CLI leave on every
//! multipart upload), on the real MinIO: every way of reading them checks
//! it part by part, wherever the slices fall, and a byte flipped on the
//! wire (the test kit's fault proxy) is refused with an error that names
//! the object and the checksum, leaving nothing behind.

mod common;

use bytes::Bytes;
use common::*;
use shoal_core::checksum::PartKind;
use shoal_core::{Assemble, PutOptions};
use shoal_testkit::faultproxy::When;

fn minio() -> Option<String> {
    shoal_testkit_server("SHOAL_TEST_S3")
}

/// MinIO's smallest part but the last.
const PART: usize = 5 << 20;

/// Uploads `data` to `s3://bucket/key` in parts of `part` bytes, leaving
/// the object a composite CRC32C only; checks that HEAD says so.
fn put_composite(bucket: &str, key: &str, data: &[u8], part: usize) -> u32 {
    let store = shoal_testkit::s3_store().expect("MinIO");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = PutOptions {
        assemble: Assemble::Composite,
        ..Default::default()
    };
    let parts = data.chunks(part).count() as u32;
    rt.block_on(async {
        let up = store.multipart_start(bucket, key, &opts).await.unwrap();
        let mut done = Vec::new();
        for (i, chunk) in data.chunks(part).enumerate() {
            let crc = PartKind::Crc32c.checksum(chunk);
            let p = (store.multipart_put(&up, i as u32 + 1, Bytes::copy_from_slice(chunk), crc))
                .await
                .unwrap_or_else(|e| panic!("part {i} of {key}: {e}"));
            done.push(p);
        }
        store.multipart_complete(&up, &done, None).await.unwrap();
        let head = store.head(bucket, key).await.unwrap();
        assert_eq!(
            (head.crc32c, head.other_crc, head.md5),
            (None, None, None),
            "{key}"
        );
        let c = head
            .composite
            .unwrap_or_else(|| panic!("{key}: no composite checksum"));
        assert_eq!((c.kind, c.parts), (PartKind::Crc32c, parts), "{key}");
    });
    parts
}

const VERIFIED: &str = "crc32c per part verified";

#[test]
fn composite_objects_are_verified_every_way_they_are_read() {
    if minio().is_none() {
        return;
    }
    let bucket = make_bucket(s3, "s3").unwrap();
    // One part of 300 KiB (no part list needed), and two parts of 5 MiB
    // and 700 KiB.
    for (name, size) in [("one", 300 << 10), ("two", PART + (700 << 10))] {
        let body = pattern(size, size as u64);
        let key = format!("{name}/obj.bin");
        put_composite(&bucket, &key, &body, PART);
        let url = format!("s3://{bucket}/{key}");

        let r = run(with_args(s3().unwrap(), &["stat", &url]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("composite"), "{}", r.stdout);

        // Slices of 1.5 MiB straddle the part boundary.
        let folder = format!("s3://{bucket}/{name}/");
        let copy = format!("s3://{bucket}/copies/{name}.bin");
        read_every_way(&url, &folder, &copy, &body, "1536KiB", VERIFIED);
    }
}

#[test]
fn a_flipped_byte_fails_the_composite_check() {
    let Some(upstream) = minio() else {
        return;
    };
    let bucket = make_bucket(s3, "s3").unwrap();
    let body = pattern(PART + (300 << 10), 41);
    put_composite(&bucket, "two/flip.bin", &body, PART);
    let url = format!("s3://{bucket}/two/flip.bin");
    let folder = format!("s3://{bucket}/two/");
    let glob = format!("{folder}**");
    let cases: Vec<FlipCase> = vec![
        ("cp", vec!["cp", &url, "OUT/x.bin"], true),
        (
            "cp sliced",
            vec![
                "cp",
                "--slices",
                "4",
                "--slice-size",
                "1536KiB",
                &url,
                "OUT/x.bin",
            ],
            true,
        ),
        ("cp -r", vec!["cp", "-r", &folder, "OUT/"], true),
        ("cp to stdout", vec!["cp", &url, "-"], false),
        ("cat", vec!["cat", &url], false),
        // 4 MiB of read-ahead: slices of 1 MiB, the first of which learns
        // the part list for all.
        (
            "cat sliced",
            vec!["cat", "--read-ahead", "4MiB", &url],
            false,
        ),
        // Listed: the first GET of the object brings its checksum.
        ("cat glob", vec!["cat", &glob], false),
        (
            "cat glob sliced",
            vec!["cat", "--read-ahead", "4MiB", &glob],
            false,
        ),
    ];
    // Object bytes only: listings and the part list have a query.
    let when = When::method("GET").lacks("?");
    flips_fail(&upstream, &when, cases, "CRC32C mismatch", &url);
}
