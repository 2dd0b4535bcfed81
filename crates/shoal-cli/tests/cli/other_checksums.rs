//! S3 objects whose only checksum is a CRC32 (what boto3 and the AWS CLI
//! send by default) or a CRC64NVME (what AWS computes for every new
//! object), on the real MinIO: every way of reading them checks that
//! checksum, and a byte flipped on the wire (the test kit's fault proxy) is
//! refused with an error that names it, leaving nothing behind.

use crate::common::*;
use shoal_core::checksum::CrcKind;
use shoal_testkit::faultproxy::When;

fn minio() -> Option<String> {
    shoal_testkit_server("SHOAL_TEST_S3")
}

const KINDS: [(CrcKind, &str); 2] = [(CrcKind::Crc32, "crc32"), (CrcKind::Crc64Nvme, "crc64nvme")];

#[test]
fn crc32_and_crc64nvme_objects_are_verified_every_way_they_are_read() {
    if minio().is_none() {
        return;
    }
    let bucket = make_bucket(s3, "s3").unwrap();
    for (kind, name) in KINDS {
        let body = pattern(3 << 20, kind as u64 + 5);
        let key = format!("{name}/obj.bin");
        put_with(&bucket, &key, &body, kind);
        let url = format!("s3://{bucket}/{key}");

        let r = run(with_args(s3().unwrap(), &["stat", &url]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stdout.contains(&format!("{}:", kind.name())),
            "stat shows the {name}: {}",
            r.stdout
        );

        let folder = format!("s3://{bucket}/{name}/");
        let copy = format!("s3://{bucket}/copies/{name}.bin");
        let verified = format!("{name} verified");
        read_every_way(&url, &folder, &copy, &body, "64KiB", &verified);
        // Named (a HEAD gives the checksum), read as 3 slices of 1 MiB
        // whose CRCs are combined.
        let r = run(with_args(
            s3().unwrap(),
            &["cat", "--read-ahead", "4MiB", &url],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout_bytes == body);
    }
}

/// GETs of object bytes (not listings).
fn data_get() -> When {
    When::method("GET").lacks("list-type")
}

#[test]
fn a_flipped_byte_fails_the_crc32_or_crc64nvme_check() {
    let Some(upstream) = minio() else {
        return;
    };
    let bucket = make_bucket(s3, "s3").unwrap();
    for (kind, name) in KINDS {
        // 3 MiB: `cat --read-ahead 4MiB` reads it as 3 slices of 1 MiB.
        let body = pattern(3 << 20, kind as u64 + 9);
        put_with(&bucket, &format!("{name}/flip.bin"), &body, kind);
        let url = format!("s3://{bucket}/{name}/flip.bin");
        let folder = format!("s3://{bucket}/{name}/");
        let want = format!("{} mismatch", kind.name());
        let glob = format!("{folder}**");
        let cases = reads_to_flip(&url, &folder, &glob, "64KiB");
        flips_fail(&upstream, &data_get(), cases, &want, &url);
    }
}
