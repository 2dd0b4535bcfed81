//! `sync --checksum` against objects whose only checksum is not a CRC32C,
//! on the real MinIO: a CRC32 or CRC64NVME (what boto3, the AWS CLI and
//! AWS leave), a composite one (multipart uploads by those tools) and an
//! MD5 ETag alone (older tools). A second sync moves nothing, in either
//! direction, and a byte changed in a local file of the same size is seen
//! whichever checksum the object has.

use crate::common::*;
use shoal_core::checksum::CrcKind;

fn minio() -> Option<String> {
    shoal_testkit_server("SHOAL_TEST_S3")
}

/// Uploads `data` as a tool that sends no checksum would (curl's SigV4
/// PUT): MinIO keeps only its MD5 ETag.
fn put_plain(endpoint: &str, bucket: &str, key: &str, data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body");
    std::fs::write(&file, data).unwrap();
    let user = format!(
        "{}:{}",
        std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| SECRET.into()),
        std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| SECRET.into()),
    );
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "-f",
            "-o",
            "/dev/null",
            "--aws-sigv4",
            "aws:amz:us-east-1:s3",
        ])
        .args([
            "--user",
            &user,
            "-H",
            "x-amz-content-sha256: UNSIGNED-PAYLOAD",
        ])
        .arg("-T")
        .arg(&file)
        .arg(format!("{endpoint}/{bucket}/{key}"))
        .output()
        .expect("curl (it signs S3 requests since 7.75)");
    assert!(out.status.success(), "curl PUT {key}: {out:?}");
    let store = shoal_testkit::s3_store().expect("MinIO");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let head = rt.block_on(store.head(bucket, key)).unwrap();
    assert_eq!(
        head.checksums.md5(),
        Some(shoal_core::checksum::md5_digest(data)),
        "{key}"
    );
    assert_eq!(
        (
            head.checksums.crc32c(),
            head.checksums.other_crc(),
            head.checksums.composite()
        ),
        (None, None, None),
        "{key}"
    );
}

/// What `sync --dry-run SRC DST --checksum` would copy, as source names.
fn would_copy(src: &str, dst: &str) -> Vec<String> {
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--checksum", "--dry-run", src, dst],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut names: Vec<String> = (r.stdout.lines())
        .filter_map(|l| l.strip_prefix("would copy "))
        .map(|l| {
            let from = l.split(" → ").next().unwrap();
            from.rsplit('/').next().unwrap().to_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn sync_checksum_compares_whatever_checksum_the_object_has() {
    let Some(endpoint) = minio() else {
        return;
    };
    let bucket = make_bucket(s3, "s3").unwrap();
    let files = [
        ("a-crc32.bin", pattern(70_000, 1)),
        ("b-crc64nvme.bin", pattern(80_000, 2)),
        ("c-md5.bin", pattern(90_000, 3)),
        ("d-composite.bin", pattern(PART + 100_000, 4)),
    ];
    put_with(&bucket, "set/a-crc32.bin", &files[0].1, CrcKind::Crc32);
    put_with(
        &bucket,
        "set/b-crc64nvme.bin",
        &files[1].1,
        CrcKind::Crc64Nvme,
    );
    put_plain(&endpoint, &bucket, "set/c-md5.bin", &files[2].1);
    put_composite(&bucket, "set/d-composite.bin", &files[3].1, PART);
    let all: Vec<String> = files.iter().map(|(n, _)| n.to_string()).collect();
    let set = format!("s3://{bucket}/set/");

    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    let local_s = format!("{}/", local.display());
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--checksum", &set, &local_s],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    for (name, body) in &files {
        assert_eq!(&std::fs::read(local.join(name)).unwrap(), body, "{name}");
    }
    // Nothing differs, either way: each is compared by its own checksum.
    assert_eq!(would_copy(&set, &local_s), Vec::<String>::new());
    assert_eq!(would_copy(&local_s, &set), Vec::<String>::new());

    // One byte changed, same size: seen by every kind of checksum.
    for (name, body) in &files {
        let mut changed = body.clone();
        changed[body.len() / 2] ^= 0x55;
        std::fs::write(local.join(name), changed).unwrap();
    }
    assert_eq!(would_copy(&set, &local_s), all);
    assert_eq!(would_copy(&local_s, &set), all);

    // Store to store: copies are made with a CRC32C, the sources have none,
    // so no checksum is common and size and time decide: nothing again.
    let copies = format!("s3://{bucket}/copies/");
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--checksum", &set, &copies],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(would_copy(&set, &copies), Vec::<String>::new());
}
