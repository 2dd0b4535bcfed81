//! Inventory reports as listings (`shoal_transfer::ops::inventory`): `sync
//! --source-listing MANIFEST` plans from an S3 Inventory or GCS Storage
//! Insights report written in the documented formats (CSV, S3's gzipped
//! with URL-encoded keys and a manifest naming several files with their
//! MD5s; GCS's with a header row and a record count), against MinIO and
//! fake-gcs-server. A manifest that does not match its files is refused
//! before anything is copied. A report is also read where the stores
//! write it, by URL, and in Parquet.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::common::*;

/// Writes an S3 Inventory report of `rows` ((key, size)) of `bucket` in
/// `files` data files (rows dealt round-robin, so no file is in key
/// order): returns the manifest's path.
fn s3_report(dir: &Path, bucket: &str, rows: &[(String, u64)], files: usize) -> PathBuf {
    let data = dir.join(format!("inv/{bucket}/cfg/data"));
    std::fs::create_dir_all(&data).unwrap();
    let mut listed = Vec::new();
    for f in 0..files {
        let mut csv = String::new();
        for (k, size) in rows.iter().rev().skip(f).step_by(files) {
            csv.push_str(&format!(
                "\"{bucket}\",\"{}\",\"{size}\",\"2026-11-19T10:00:00.000Z\",\"STANDARD\"\n",
                form_encode(k)
            ));
        }
        let p = data.join(format!("part-{f}.csv.gz"));
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(csv.as_bytes()).unwrap();
        let bytes = w.finish().unwrap();
        std::fs::write(&p, &bytes).unwrap();
        listed.push(serde_json::json!({
            "key": format!("inv/{bucket}/cfg/data/part-{f}.csv.gz"),
            "size": bytes.len(),
            "MD5checksum": md5_hex(&bytes),
        }));
    }
    let mdir = dir.join(format!("inv/{bucket}/cfg/2026-11-20T00-00Z"));
    std::fs::create_dir_all(&mdir).unwrap();
    let m = mdir.join("manifest.json");
    let manifest = serde_json::json!({
        "sourceBucket": bucket,
        "destinationBucket": "arn:aws:s3:::inv",
        "version": "2016-11-30",
        "creationTimestamp": "1795000000000",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate, StorageClass",
        "files": listed,
    });
    std::fs::write(&m, manifest.to_string()).unwrap();
    m
}

fn names(base: fn() -> Option<std::process::Command>, url: &str) -> Vec<String> {
    let r = run(with_args(base().unwrap(), &["ls", "-r", url]));
    let mut v: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| l.find("://").map(|i| l[i - 2..].to_owned()))
        .collect();
    v.sort();
    v
}

/// `keys` under the prefix URL `dst`, sorted (as [`names`] lists them).
fn urls_under(dst: &str, keys: &[&str]) -> Vec<String> {
    let mut w: Vec<String> = keys.iter().map(|k| format!("{dst}{k}")).collect();
    w.sort();
    w
}

#[test]
fn sync_plans_from_an_s3_inventory_report() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let keys = ["a", "b c", "b+c", "d/é", "d/100%", "z"];
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let body = pattern(100 + i, i as u64);
        let f = dir.path().join(format!("f{i}"));
        std::fs::write(&f, &body).unwrap();
        let r = run(with_args(
            s3().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("s3://{bucket}/p/{k}")],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        rows.push((format!("p/{k}"), body.len() as u64));
    }
    // An object outside the synced prefix, listed in the report too.
    rows.push(("q/other".into(), 1));
    let m = s3_report(dir.path(), &bucket, &rows, 3);
    let src = format!("s3://{bucket}/p/");
    let dst = format!("s3://{bucket}/copy/");
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--source-listing", m.to_str().unwrap(), &src, &dst],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("trusting inventory report"),
        "{}",
        r.stderr
    );
    assert_eq!(names(s3, &dst), urls_under(&dst, &keys));

    // One data file replaced by another day's (same rows but one): refused
    // before anything runs, exit 2, nothing copied.
    let dst2 = format!("s3://{bucket}/copy2/");
    let data = m
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("data/part-1.csv.gz");
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    w.write_all(
        format!("\"{bucket}\",\"p/a\",\"100\",\"2026-11-19T10:00:00.000Z\",\"STANDARD\"\n")
            .as_bytes(),
    )
    .unwrap();
    std::fs::write(&data, w.finish().unwrap()).unwrap();
    let r = run(with_args(
        s3().unwrap(),
        &["sync", "--source-listing", m.to_str().unwrap(), &src, &dst2],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("manifest"), "{}", r.stderr);
    assert!(names(s3, &dst2).is_empty());

    // A report of another bucket: refused.
    let m2 = s3_report(&dir.path().join("other"), "not-this-bucket", &rows, 1);
    let r = run(with_args(
        s3().unwrap(),
        &[
            "sync",
            "--source-listing",
            m2.to_str().unwrap(),
            &src,
            &dst2,
        ],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not-this-bucket"), "{}", r.stderr);
}

#[test]
fn sync_plans_from_a_gcs_inventory_report() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let keys = ["x,y", "quote\"d", "n/é"];
    let mut csv = String::from("bucket,name,size,updated,storageClass\n");
    for (i, k) in keys.iter().enumerate().rev() {
        let body = pattern(50 + i, i as u64);
        let f = dir.path().join(format!("f{i}"));
        std::fs::write(&f, &body).unwrap();
        let r = run(with_args(
            gcs().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("gs://{bucket}/d/{k}")],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        csv.push_str(&format!(
            "{bucket},\"d/{}\",{},2026-11-19T10:00:00Z,STANDARD\n",
            k.replace('"', "\"\""),
            body.len()
        ));
    }
    std::fs::write(dir.path().join("cfg_0.csv"), &csv).unwrap();
    let m = dir.path().join("cfg_manifest.json");
    let manifest = serde_json::json!({
        "report_config": {"csv_options": {"header_required": true}},
        "records_processed": keys.len(),
        "snapshot_time": "2026-11-20T00:00:00Z",
        "shard_count": 1,
        "report_shards_file_names": ["cfg_0.csv"],
    });
    std::fs::write(&m, manifest.to_string()).unwrap();
    let out = dir.path().join("out");
    let r = run(with_args(
        gcs().unwrap(),
        &[
            "sync",
            "--source-listing",
            m.to_str().unwrap(),
            &format!("gs://{bucket}/d/"),
            out.to_str().unwrap(),
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            std::fs::read(out.join(k)).unwrap(),
            pattern(50 + i, i as u64),
            "{k}"
        );
    }
    // A record count the shards do not hold: refused.
    let cut = manifest
        .to_string()
        .replace("\"records_processed\":3", "\"records_processed\":4");
    assert_ne!(cut, manifest.to_string());
    std::fs::write(&m, cut).unwrap();
    let r = run(with_args(
        gcs().unwrap(),
        &[
            "sync",
            "--source-listing",
            m.to_str().unwrap(),
            &format!("gs://{bucket}/d/"),
            dir.path().join("out2").to_str().unwrap(),
        ],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("counts 4 records"), "{}", r.stderr);
}

/// S3 Inventory's Parquet schema (the columns this test writes), as its
/// manifest's fileSchema gives it.
const S3_PARQUET_SCHEMA: &str = "message s3.inventory { required binary bucket (STRING); required binary key (STRING); optional boolean is_latest; optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); }";

#[test]
fn sync_plans_from_a_parquet_report_kept_in_its_bucket() {
    use shoal_testkit::parquet::{Cell, write};
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let cli = |args: &[&str]| run(with_args(s3().unwrap(), args));
    let keys = ["a", "b c", "b+c%2B", "d/é"];
    let dir = tempfile::tempdir().unwrap();
    let mut rows: Vec<(String, i64)> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let f = dir.path().join(format!("f{i}"));
        std::fs::write(&f, pattern(70 + i, i as u64)).unwrap();
        let r = cli(&["cp", f.to_str().unwrap(), &format!("s3://{bucket}/p/{k}")]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        rows.push((format!("p/{k}"), 70 + i as i64));
    }
    // Two Parquet files (keys as they are: S3 encodes only its CSV), the
    // manifest beside them in the report's bucket, as S3 writes it.
    let report = |rows: &[(String, i64)], name: &str| -> serde_json::Value {
        let cells: Vec<Vec<Cell>> = rows
            .iter()
            .map(|(k, n)| {
                let (bucket, key) = (bucket.as_str(), k.as_str());
                vec![
                    Cell::Text(bucket),
                    Cell::Text(key),
                    Cell::Bool(true),
                    Cell::Int(*n),
                    Cell::Int(1_795_000_000_123),
                ]
            })
            .collect();
        let p = dir.path().join(name);
        write(&p, S3_PARQUET_SCHEMA, &cells);
        let key = format!("inv/{bucket}/cfg/data/{name}");
        let r = cli(&["cp", p.to_str().unwrap(), &format!("s3://{bucket}/{key}")]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let bytes = std::fs::read(&p).unwrap();
        serde_json::json!({"key": key, "size": bytes.len(), "MD5checksum": md5_hex(&bytes)})
    };
    let files = vec![
        report(&rows[..2], "one.parquet"),
        report(&rows[2..], "two.parquet"),
    ];
    let manifest = |files: &[serde_json::Value]| {
        let m = dir.path().join("manifest.json");
        let text = serde_json::json!({
            "sourceBucket": bucket, "destinationBucket": format!("arn:aws:s3:::{bucket}"),
            "creationTimestamp": "1795000000000", "fileFormat": "Parquet",
            "fileSchema": S3_PARQUET_SCHEMA, "files": files,
        });
        std::fs::write(&m, text.to_string()).unwrap();
        let url = format!("s3://{bucket}/inv/{bucket}/cfg/2026-11-20T00-00Z/manifest.json");
        let r = cli(&["cp", m.to_str().unwrap(), &url]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        url
    };
    let m = manifest(&files);
    let src = format!("s3://{bucket}/p/");
    let r = cli(&[
        "sync",
        "--source-listing",
        &m,
        &src,
        &format!("s3://{bucket}/copy/"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("trusting inventory report {m}")),
        "{}",
        r.stderr
    );
    let dst = format!("s3://{bucket}/copy/");
    assert_eq!(names(s3, &dst), urls_under(&dst, &keys));

    // A data file replaced in the bucket by another day's: refused before
    // anything runs (exit 2), nothing copied; the error names the URL.
    report(&rows[2..3], "two.parquet");
    let dst2 = format!("s3://{bucket}/copy2/");
    let r = cli(&["sync", "--source-listing", &m, &src, &dst2]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("manifest") && r.stderr.contains(&m),
        "{}",
        r.stderr
    );
    // A manifest naming a file the bucket does not hold, or a name that
    // would leave the copy's folder: refused, nothing copied, the error
    // naming the manifest the user gave.
    let missing = format!("names s3://{bucket}/inv/none.parquet, which is not there");
    for (key, why) in [
        ("inv/none.parquet", missing.as_str()),
        ("inv/..", "cannot be saved"),
    ] {
        let mut bad = files[0].clone();
        bad["key"] = key.into();
        let m = manifest(&[bad]);
        let r = cli(&["sync", "--source-listing", &m, &src, &dst2]);
        assert_ne!(r.code, 0, "{}", r.stderr);
        assert!(r.stderr.contains(why), "{why}: {}", r.stderr);
        assert!(r.stderr.contains(&m), "{}", r.stderr);
    }
    assert!(names(s3, &dst2).is_empty());
    // A listing in a bucket that is not a report's manifest.
    let r = cli(&[
        "sync",
        "--source-listing",
        &format!("s3://{bucket}/p/a"),
        &src,
        &dst2,
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("manifest.json"), "{}", r.stderr);
}

/// Issue 52: a GCS manifest whose counts are strings (as proto3's JSON
/// writes int64) was trusted unchecked, and `sync --delete` from a shard
/// missing 2 of its 5 rows deleted 2 objects the source still held. Now
/// string counts are checked as numbers are, a missing count and a row of
/// another bucket are refused (exit 2, one line naming the manifest,
/// nothing deleted), and the report's age is said beside its time.
#[test]
fn gcs_report_counts_are_checked_whatever_their_json_type() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let keys = ["a", "b", "c", "d", "e"];
    let mut csv = String::from("bucket,name,size\n");
    for (i, k) in keys.iter().enumerate() {
        let body = pattern(30 + i, i as u64);
        let f = dir.path().join(format!("f{i}"));
        std::fs::write(&f, &body).unwrap();
        let r = run(with_args(
            gcs().unwrap(),
            &["cp", f.to_str().unwrap(), &format!("gs://{bucket}/d/{k}")],
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        std::fs::write(out.join(k), &body).unwrap();
        // The shard misses d and e.
        if i < 3 {
            csv.push_str(&format!("{bucket},d/{k},{}\n", body.len()));
        }
    }
    std::fs::write(dir.path().join("cfg_0.csv"), &csv).unwrap();
    let m = dir.path().join("cfg_manifest.json");
    let sync = |manifest: serde_json::Value| {
        std::fs::write(&m, manifest.to_string()).unwrap();
        run(with_args(
            gcs().unwrap(),
            &[
                "sync",
                "--delete",
                "--source-listing",
                m.to_str().unwrap(),
                &format!("gs://{bucket}/d/"),
                out.to_str().unwrap(),
            ],
        ))
    };
    let kept = || {
        let mut v: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let base = |records: serde_json::Value, shards: serde_json::Value| {
        serde_json::json!({
            "records_processed": records,
            "shard_count": shards,
            "snapshot_time": "2026-11-20T00:00:00Z",
            "report_shards_file_names": ["cfg_0.csv"],
        })
    };
    for (manifest, why) in [
        (
            base("5".into(), "1".into()),
            "counts 5 records but its shards hold 3",
        ),
        (
            serde_json::json!({"shard_count": 1, "report_shards_file_names": ["cfg_0.csv"]}),
            "the manifest has no \"records_processed\"",
        ),
        (
            base("five".into(), 1.into()),
            "\"records_processed\" is \"five\", not a count",
        ),
        (base(5.into(), "one".into()), "\"shard_count\""),
    ] {
        let r = sync(manifest.clone());
        assert_eq!(r.code, 2, "{manifest}: {}", r.stderr);
        assert!(r.stderr.contains(why), "{manifest}: {}", r.stderr);
        assert!(r.stderr.contains("cfg_manifest.json"), "{}", r.stderr);
        assert_eq!(kept(), keys, "{manifest}: nothing deleted");
    }
    // A manifest naming another bucket than its rows.
    let mut other = base("3".into(), "1".into());
    other["report_config"] = serde_json::json!({"object_metadata_report_options":
        {"storage_filters": {"bucket": "not-this-bucket"}}});
    let r = sync(other);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not-this-bucket"), "{}", r.stderr);
    assert_eq!(kept(), keys);
    // Counts as strings that match: trusted, its age said beside its time.
    std::fs::write(
        dir.path().join("cfg_0.csv"),
        format!("{csv}{bucket},d/d,{}\n{bucket},d/e,{}\n", 33, 34),
    )
    .unwrap();
    let r = sync(base("5".into(), "1".into()));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("taken at 2026-11-20T00:00:00Z (")
            && (r.stderr.contains(" old, 1 files)") || r.stderr.contains("in the future")),
        "{}",
        r.stderr
    );
    assert_eq!(kept(), keys);
}
