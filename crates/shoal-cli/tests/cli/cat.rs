//! `shoal cat` and `shoal bench read` against fake-gcs-server and MinIO:
//! byte-identical output against what was compressed, in order, with
//! errors that name the object.

use std::io::Write;
use std::path::Path;

use crate::common::*;

fn text(n: usize, seed: u64) -> Vec<u8> {
    let words = [
        "shoal", "bucket", "object", "range", "slice", "zstd", "gzip",
    ];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % 7) as usize].as_bytes());
        out.push(if x.is_multiple_of(9) { b'\n' } else { b' ' });
    }
    out.truncate(n);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

/// A dataset in key order: (name, stored bytes, content).
fn dataset() -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let a = text(200_000, 1);
    let b = text(1_500_000, 2);
    let mut bz = zstd(&b[..700_000]);
    bz.extend(zstd(&b[700_000..])); // two frames
    let d = text(400_000, 4);
    let mut dg = gzip(&d[..1000]);
    dg.extend(gzip(&d[1000..])); // two members
    let e = text(300_000, 5);
    vec![
        ("a.txt", a.clone(), a),
        ("b.zst", bz, b),
        ("c.gz", Vec::new(), Vec::new()), // empty
        ("d.gz", dg, d),
        ("e.data", zstd(&e), e), // found by magic, not name
    ]
}

fn write_dir(dir: &Path, files: &[(&str, Vec<u8>, Vec<u8>)]) {
    for (name, stored, _) in files {
        std::fs::write(dir.join(name), stored).unwrap();
    }
}

fn upload(base: fn() -> Option<Command>, dir: &Path, dest: &str) {
    for name in files_in(dir) {
        let src = dir.join(&name);
        let r = run(with_args(
            base().unwrap(),
            &["cp", "-q", src.to_str().unwrap(), &format!("{dest}{name}")],
        ));
        assert_eq!(r.code, 0, "cp: {}", r.stderr);
    }
}

use std::process::Command;

type Base = fn() -> Option<Command>;

/// The servers that are up, with their scheme.
fn both() -> Vec<(Base, &'static str)> {
    let mut v: Vec<(Base, &'static str)> = Vec::new();
    if shoal_testkit_server("SHOAL_TEST_GCS").is_some() {
        v.push((gcs, "gs"));
    }
    if shoal_testkit_server("SHOAL_TEST_S3").is_some() {
        v.push((s3, "s3"));
    }
    v
}

#[test]
fn cat_output_is_byte_identical_for_zstd_gzip_plain_and_mixed_sets() {
    let files = dataset();
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &files);
    let decoded: Vec<u8> = files.iter().flat_map(|f| f.2.clone()).collect();
    let stored: Vec<u8> = files.iter().flat_map(|f| f.1.clone()).collect();
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        upload(base, dir.path(), &format!("{scheme}://{bucket}/ds/"));
        let glob = format!("{scheme}://{bucket}/ds/**");
        for ordered in [&[][..], &["--read-ahead", "4MiB"][..]] {
            let mut args = vec!["cat", "-d", &glob];
            args.extend_from_slice(ordered);
            let r = run(with_args(base().unwrap(), &args));
            assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
            assert!(
                r.stdout_bytes == decoded,
                "{scheme} {args:?}: decoded output differs"
            );
        }
        // Without -d (nothing has a Content-Encoding) and with
        // --no-decompress: the stored bytes.
        for flag in ["--no-decompress", "-q"] {
            let r = run(with_args(base().unwrap(), &["cat", flag, &glob]));
            assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
            assert!(
                r.stdout_bytes == stored,
                "{scheme} {flag}: stored bytes differ"
            );
        }
        // Each format alone, named one by one, in the order given.
        let urls: Vec<String> = ["e.data", "d.gz", "b.zst", "c.gz"]
            .iter()
            .map(|k| format!("{scheme}://{bucket}/ds/{k}"))
            .collect();
        let mut args = vec!["cat", "-d"];
        args.extend(urls.iter().map(String::as_str));
        let r = run(with_args(base().unwrap(), &args));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        let want: Vec<u8> = [4usize, 3, 1, 2]
            .iter()
            .flat_map(|&i| files[i].2.clone())
            .collect();
        assert!(
            r.stdout_bytes == want,
            "{scheme}: order of arguments not kept"
        );
    }
}

#[test]
fn one_big_object_is_read_in_slices_and_written_in_order() {
    let big = text(24 << 20, 7);
    let z = zstd(&big);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), &big).unwrap();
    std::fs::write(dir.path().join("big.zst"), &z).unwrap();
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        upload(base, dir.path(), &format!("{scheme}://{bucket}/"));
        // 4 MiB of read-ahead: 1 MiB slices, many more than fit at once.
        let r = run(with_args(
            base().unwrap(),
            &[
                "cat",
                "--read-ahead",
                "4MiB",
                &format!("{scheme}://{bucket}/big.txt"),
            ],
        ));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        assert!(r.stdout_bytes == big, "{scheme}: plain big object differs");
        let r = run(with_args(
            base().unwrap(),
            &[
                "cat",
                "-d",
                "--read-ahead",
                "4MiB",
                &format!("{scheme}://{bucket}/big.zst"),
            ],
        ));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        assert!(r.stdout_bytes == big, "{scheme}: zstd big object differs");
    }
}

#[test]
fn corrupt_zstd_frame_names_the_object_and_the_offset() {
    let good = text(600_000, 8);
    let mut bad = zstd(&good);
    let at = bad.len() / 2;
    for b in &mut bad[at..at + 32] {
        *b ^= 0xa5;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.zst"), &bad).unwrap();
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        upload(base, dir.path(), &format!("{scheme}://{bucket}/"));
        let url = format!("{scheme}://{bucket}/bad.zst");
        let r = run(with_args(base().unwrap(), &["cat", "-d", &url]));
        r.assert_one_line_error(
            1,
            &[
                &format!("read {url}"),
                "zstd data corrupt at compressed offset",
            ],
        );
    }
}

#[test]
fn globs_matching_nothing_are_one_line_errors_for_cat_and_rm() {
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        let url = format!("{scheme}://{bucket}/nothing/*.zst");
        run(with_args(base().unwrap(), &["cat", &url]))
            .assert_one_line_error(1, &[&url, "no objects match"]);
        run(with_args(base().unwrap(), &["rm", &url]))
            .assert_one_line_error(1, &[&url, "no objects match"]);
    }
}

#[test]
fn rm_deletes_what_a_glob_matches_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a.zst", "b.zst", "c.txt"] {
        std::fs::write(dir.path().join(name), name).unwrap();
    }
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        upload(base, dir.path(), &format!("{scheme}://{bucket}/d/"));
        let r = run(with_args(
            base().unwrap(),
            &["rm", &format!("{scheme}://{bucket}/d/*.zst")],
        ));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        let ls = run(with_args(
            base().unwrap(),
            &["ls", "-r", &format!("{scheme}://{bucket}/")],
        ));
        assert_eq!(ls.stdout.trim(), format!("{scheme}://{bucket}/d/c.txt"));
    }
}

/// Objects of distinct lines: object i is `i` repeated, one per line, and
/// the last line has no newline.
fn numbered(dir: &Path, n: usize, lines: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let body = vec![format!("obj{i:03}"); lines].join("\n");
            std::fs::write(dir.join(format!("o{i:03}.zst")), zstd(body.as_bytes())).unwrap();
            body
        })
        .collect()
}

#[test]
fn unordered_writes_whole_objects_and_lines_end_each_one() {
    let dir = tempfile::tempdir().unwrap();
    let bodies = numbered(dir.path(), 12, 20_000);
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        upload(base, dir.path(), &format!("{scheme}://{bucket}/"));
        let glob = format!("{scheme}://{bucket}/*.zst");
        let r = run(with_args(
            base().unwrap(),
            &["cat", "-d", "--unordered", "--lines", &glob],
        ));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        // Runs of equal lines: each must be one whole object.
        let mut runs: Vec<(String, usize)> = Vec::new();
        for l in r.stdout.lines() {
            match runs.last_mut() {
                Some((k, n)) if k == l => *n += 1,
                _ => runs.push((l.to_owned(), 1)),
            }
        }
        assert_eq!(runs.len(), bodies.len(), "{scheme}: objects interleaved");
        assert!(runs.iter().all(|(_, n)| *n == 20_000), "{scheme}");
        assert!(r.stdout.ends_with('\n'));
        // Ordered: listing order exactly.
        let r = run(with_args(base().unwrap(), &["cat", "-d", "--lines", &glob]));
        let want: String = bodies.iter().map(|b| format!("{b}\n")).collect();
        assert!(r.stdout == want, "{scheme}: ordered output differs");
    }
}

#[test]
fn exec_gives_each_copy_whole_lines_and_fails_when_a_copy_fails() {
    let dir = tempfile::tempdir().unwrap();
    numbered(dir.path(), 6, 30_000);
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        upload(base, dir.path(), &format!("{scheme}://{bucket}/"));
        let glob = format!("{scheme}://{bucket}/*.zst");
        // Every copy checks its own lines are whole and prints its count.
        let check = r#"awk '!/^obj[0-9][0-9][0-9]$/ { bad=1 } END { if (bad) exit 7; print NR }'"#;
        let r = run(with_args(
            base().unwrap(),
            &["cat", "-d", "--exec", check, "--jobs", "3", &glob],
        ));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        let total: usize = r
            .stdout
            .lines()
            .map(|l| l.trim().parse::<usize>().unwrap())
            .sum();
        assert_eq!(total, 6 * 30_000, "{scheme}: {}", r.stdout);
        assert_eq!(r.stdout.lines().count(), 3, "one count per copy");
        let r = run(with_args(
            base().unwrap(),
            &[
                "cat",
                "-d",
                "--exec",
                "cat >/dev/null; exit 3",
                "--jobs",
                "2",
                &glob,
            ],
        ));
        r.assert_one_line_error(1, &["--exec", "copies failed"]);
    }
}

#[test]
fn content_encoding_gzip_is_stored_compressed_and_decoded_on_the_client() {
    let body = text(300_000, 11);
    let gz = gzip(&body);
    let stores = [
        (
            "gs",
            shoal_testkit::gcs_store(),
            gcs as fn() -> Option<Command>,
        ),
        ("s3", shoal_testkit::s3_store(), s3),
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (scheme, store, base) in stores {
        let Some(store) = store else { continue };
        let bucket = make_bucket(base, scheme).unwrap();
        let opts = shoal_core::PutOptions {
            content_encoding: Some("gzip".into()),
            content_type: Some("text/plain".into()),
            ..Default::default()
        };
        rt.block_on(store.put(&bucket, "enc.txt", bytes::Bytes::from(gz.clone()), &opts))
            .unwrap();
        let url = format!("{scheme}://{bucket}/enc.txt");
        // Default: decoded (the object's content); -d likewise.
        for args in [&["cat", &url][..], &["cat", "-d", &url]] {
            let r = run(with_args(base().unwrap(), args));
            assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
            assert!(
                r.stdout_bytes == body,
                "{scheme} {args:?}: not the decoded content"
            );
        }
        let r = run(with_args(
            base().unwrap(),
            &["cat", "--no-decompress", &url],
        ));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        assert!(r.stdout_bytes == gz, "{scheme}: stored bytes differ");
    }
}

#[test]
fn bench_read_reports_both_rates_and_counts_every_byte() {
    let files = dataset();
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &files);
    let decoded: usize = files.iter().map(|f| f.2.len()).sum();
    let stored: usize = files.iter().map(|f| f.1.len()).sum();
    for (base, scheme) in both() {
        let bucket = make_bucket(base, scheme).unwrap();
        upload(base, dir.path(), &format!("{scheme}://{bucket}/"));
        let r = run(with_args(
            base().unwrap(),
            &[
                "bench",
                "read",
                "--json",
                &format!("{scheme}://{bucket}/**"),
            ],
        ));
        assert_eq!(r.code, 0, "{scheme}: {}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
        assert_eq!(v["objects"], files.len());
        assert_eq!(v["compressed_bytes"], stored);
        assert_eq!(v["decompressed_bytes"], decoded);
        assert!(v["cpu_user_s"].is_number(), "{v}");
        let r = run(with_args(
            base().unwrap(),
            &["bench", "read", &format!("{scheme}://{bucket}/**")],
        ));
        assert!(r.stdout.contains("GB/s decompressed"), "{}", r.stdout);
    }
}

#[test]
fn local_files_read_like_objects() {
    let files = dataset();
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &files);
    let paths: Vec<String> = files
        .iter()
        .map(|f| dir.path().join(f.0).display().to_string())
        .collect();
    let mut args = vec!["cat", "-d"];
    args.extend(paths.iter().map(String::as_str));
    let r = run(with_args(shoal(), &args));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let decoded: Vec<u8> = files.iter().flat_map(|f| f.2.clone()).collect();
    assert!(r.stdout_bytes == decoded);
}
