//! S3 multipart objects whose only checksum is COMPOSITE (`xxxx-N`, the
//! CRC of the parts' CRCs: what boto3 and the AWS CLI leave on every
//! multipart upload), on the real MinIO: every way of reading them checks
//! it part by part, wherever the slices fall, and a byte flipped on the
//! wire (the test kit's fault proxy) is refused with an error that names
//! the object and the checksum, leaving nothing behind.

use crate::common::*;
use shoal_testkit::faultproxy::When;

fn minio() -> Option<String> {
    shoal_testkit_server("SHOAL_TEST_S3")
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
    let mut cases = reads_to_flip(&url, &folder, &glob, "1536KiB");
    cases.push(("cp to stdout", vec!["cp", &url, "-"], false));
    // Object bytes only: listings and the part list have a query.
    let when = When::method("GET").lacks("?");
    flips_fail(&upstream, &when, cases, "CRC32C mismatch", &url);
}
