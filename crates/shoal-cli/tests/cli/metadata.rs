//! What an upload stores beside its bytes, on every write path, checked
//! on what the server kept: `shoal stat --json` (a HEAD / object GET) and,
//! for one case per server, the server's own API read with curl.
//!
//! Before this, every upload was `application/octet-stream` with nothing
//! else: a synced site was served as downloads.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use serde_json::Value;

/// `shoal stat --json URL`, which must succeed.
fn stat(base: fn() -> Option<Command>, url: &str) -> Value {
    let r = run(with_args(base().unwrap(), &["stat", "--json", url]));
    assert_eq!(r.code, 0, "stat {url}: {}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

fn ok(base: fn() -> Option<Command>, args: &[&str]) {
    let r = run(with_args(base().unwrap(), args));
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
}

/// The flags every write path below is given, and what they must leave.
const FLAGS: &[&str] = &[
    "--cache-control",
    "public, max-age=60",
    "--content-disposition",
    "attachment; filename=\"r.bin\"",
    "--metadata",
    "owner=web-team",
    "--metadata",
    "build=42",
];

fn assert_flags_kept(m: &Value, content_type: &str) {
    assert_eq!(m["content_type"], content_type, "{m}");
    assert_eq!(m["cache_control"], "public, max-age=60", "{m}");
    assert_eq!(
        m["content_disposition"], "attachment; filename=\"r.bin\"",
        "{m}"
    );
    assert_eq!(m["metadata"]["owner"], "web-team", "{m}");
    assert_eq!(m["metadata"]["build"], "42", "{m}");
}

fn write(dir: &Path, name: &str, data: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, data).unwrap();
    p.display().to_string()
}

/// Types guessed from file names, with no flag given.
fn guessed_types(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, want) in [
        ("index.html", "text/html"),
        ("a.css", "text/css"),
        ("x.unknownext", "application/octet-stream"),
    ] {
        let f = write(dir.path(), name, b"<p>hi</p>");
        let url = format!("{scheme}://{bucket}/{name}");
        ok(base, &["cp", &f, &url]);
        assert_eq!(stat(base, &url)["content_type"], want, "{url}");
    }
    // A type given wins over the guess.
    let f = dir.path().join("index.html").display().to_string();
    let url = format!("{scheme}://{bucket}/plain.html");
    ok(base, &["cp", "--content-type", "text/plain", &f, &url]);
    assert_eq!(stat(base, &url)["content_type"], "text/plain");
}

#[test]
fn types_are_guessed_from_file_names_gcs() {
    guessed_types(gcs, "gs");
}

#[test]
fn types_are_guessed_from_file_names_s3() {
    guessed_types(s3, "s3");
}

/// One PUT, a multipart upload (parts forced by --part-size) and stdin,
/// each with every flag.
fn write_paths(base: fn() -> Option<Command>, scheme: &str, extra: &[&str], class: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let small = write(dir.path(), "small.html", b"<p>small</p>");
    // Above the 5 MiB part size: two parts.
    let big = write(dir.path(), "big.css", &pattern(6 << 20, 7));
    let flags: Vec<&str> = FLAGS
        .iter()
        .copied()
        .chain(["--storage-class", class])
        .chain(extra.iter().copied())
        .collect();
    for (src, key, want) in [
        (&small, "one.html", "text/html"),
        (&big, "multi.css", "text/css"),
    ] {
        let url = format!("{scheme}://{bucket}/{key}");
        let mut args = vec!["cp", "--part-size", "5MiB"];
        args.extend(&flags);
        args.extend([src.as_str(), url.as_str()]);
        ok(base, &args);
        let m = stat(base, &url);
        assert_flags_kept(&m, want);
        assert_eq!(m["storage_class"], class, "{m}");
        // Really assembled from parts: an S3 multipart ETag (`-2`). (A
        // composed object on fake-gcs-server cannot be told apart: it
        // computes an MD5 for it, which GCS does not.)
        if key == "multi.css" && scheme == "s3" {
            assert!(m["etag"].as_str().unwrap().ends_with("-2\""), "{m}");
        }
    }
    // stdin: typed from the key.
    let url = format!("{scheme}://{bucket}/from-stdin.html");
    let mut c = base().unwrap();
    c.args(["cp"]).args(&flags).args(["-", &url]);
    c.stdin(std::fs::File::open(&small).unwrap());
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_flags_kept(&stat(base, &url), "text/html");
}

#[test]
fn every_s3_write_path_stores_the_flags() {
    // MinIO keeps REDUCED_REDUNDANCY (and says so on HEAD); STANDARD is
    // what it answers with no header at all.
    write_paths(s3, "s3", &[], "REDUCED_REDUNDANCY");
}

#[test]
fn gcs_compose_stores_the_flags_on_the_composed_object() {
    write_paths(gcs, "gs", &["--gcs-upload", "compose"], "NEARLINE");
}

#[test]
fn gcs_resumable_stores_the_flags() {
    write_paths(gcs, "gs", &["--gcs-upload", "resumable"], "COLDLINE");
}

// `--gcs-upload xml` cannot be run here: fake-gcs-server has no XML API
// multipart upload (TEST-SERVERS.md); the initiate request's headers are
// pinned by shoal-gcs's `the_initiate_request_carries_what_the_object_stores`.

/// `cp -r` and `sync` of a small site: each file typed by its name, the
/// flags on every one.
fn trees(base: fn() -> Option<Command>, scheme: &str) {
    let Some(bucket) = make_bucket(base, scheme) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    write(&site, "index.html", b"<html></html>");
    write(&site, "css/a.css", b"p{}");
    write(&site, "blob.unknownext", b"?");
    let want = [
        ("index.html", "text/html"),
        ("css/a.css", "text/css"),
        ("blob.unknownext", "application/octet-stream"),
    ];
    let site_s = site.display().to_string();
    let mut args = vec!["cp", "-r"];
    args.extend(FLAGS);
    let up = format!("{scheme}://{bucket}/up/");
    args.extend([site_s.as_str(), up.as_str()]);
    ok(base, &args);
    for (key, t) in want {
        assert_flags_kept(&stat(base, &format!("{up}site/{key}")), t);
    }
    let mut args = vec!["sync"];
    args.extend(FLAGS);
    let www = format!("{scheme}://{bucket}/www");
    args.extend([site_s.as_str(), www.as_str()]);
    ok(base, &args);
    for (key, t) in want {
        assert_flags_kept(&stat(base, &format!("{www}/{key}")), t);
    }
}

#[test]
fn cp_r_and_sync_store_types_and_flags_gcs() {
    trees(gcs, "gs");
}

#[test]
fn cp_r_and_sync_store_types_and_flags_s3() {
    trees(s3, "s3");
}

/// `shoal` aimed at both servers: MinIO for s3://, fake-gcs-server for gs://.
fn both() -> Option<Command> {
    let mut c = s3()?;
    c.env(
        "STORAGE_EMULATOR_HOST",
        shoal_testkit_server("SHOAL_TEST_GCS")?,
    );
    Some(c)
}

/// A copy between clouds keeps the source's type, cache control,
/// disposition and metadata; a flag overrides its own field only.
#[test]
fn cloud_to_cloud_copies_keep_the_source_metadata() {
    let (Some(gb), Some(sb)) = (make_bucket(gcs, "gs"), make_bucket(s3, "s3")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "page.html", b"<p>page</p>");
    let src = format!("gs://{gb}/page.html");
    let mut args = vec!["cp"];
    args.extend(FLAGS);
    args.extend([f.as_str(), src.as_str()]);
    ok(gcs, &args);

    // Named without a .html: the type is the source's, not a guess.
    let to_s3 = format!("s3://{sb}/copied");
    ok(both, &["cp", &src, &to_s3]);
    assert_flags_kept(&stat(s3, &to_s3), "text/html");
    let back = format!("gs://{gb}/back-again");
    ok(both, &["cp", &to_s3, &back]);
    assert_flags_kept(&stat(gcs, &back), "text/html");
    // Within one store, and a tree.
    let same = format!("gs://{gb}/tree/same");
    ok(gcs, &["cp", &src, &same]);
    assert_flags_kept(&stat(gcs, &same), "text/html");
    let tree = format!("s3://{sb}/tree/");
    ok(both, &["cp", "-r", &format!("gs://{gb}/tree/"), &tree]);
    assert_flags_kept(&stat(s3, &format!("{tree}tree/same")), "text/html");

    // A flag overrides its field; metadata keys are added to the source's.
    let over = format!("s3://{sb}/over");
    ok(
        both,
        &[
            "cp",
            "--content-type",
            "text/plain",
            "--metadata",
            "build=43",
            "--metadata",
            "extra=1",
            &src,
            &over,
        ],
    );
    let m = stat(s3, &over);
    assert_eq!(m["content_type"], "text/plain");
    assert_eq!(m["cache_control"], "public, max-age=60");
    assert_eq!(m["metadata"]["owner"], "web-team");
    assert_eq!(m["metadata"]["build"], "43");
    assert_eq!(m["metadata"]["extra"], "1");
}

/// `stat` in text shows all of it.
#[test]
fn stat_shows_every_field() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "a.css", b"p{}");
    let url = format!("s3://{bucket}/a.css");
    let mut args = vec!["cp"];
    args.extend(FLAGS);
    args.extend([f.as_str(), url.as_str()]);
    ok(s3, &args);
    let r = run(with_args(s3().unwrap(), &["stat", &url]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    for line in [
        "Content-Type:     text/css",
        "Cache-Control:    public, max-age=60",
        "Content-Disposition: attachment; filename=\"r.bin\"",
        "Storage class:    STANDARD",
        "Metadata:",
        "build: 42",
        "owner: web-team",
    ] {
        assert!(r.stdout.contains(line), "{line:?} in {}", r.stdout);
    }
}

/// What each server itself says it stored, not shoal's reading of it.
#[test]
fn the_servers_own_apis_show_what_was_stored() {
    let (Some(gb), Some(sb)) = (make_bucket(gcs, "gs"), make_bucket(s3, "s3")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "index.html", b"<p>x</p>");
    for url in [
        format!("gs://{gb}/index.html"),
        format!("s3://{sb}/index.html"),
    ] {
        let base = if url.starts_with("gs") { gcs } else { s3 };
        let mut args = vec!["cp"];
        args.extend(FLAGS);
        args.extend([f.as_str(), url.as_str()]);
        ok(base, &args);
    }
    // GCS: the JSON API's object resource.
    let ep = std::env::var("SHOAL_TEST_GCS").unwrap();
    let out = Command::new("curl")
        .args([
            "-sS",
            "--fail",
            &format!("{ep}/storage/v1/b/{gb}/o/index.html"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["contentType"], "text/html", "{o}");
    assert_eq!(o["cacheControl"], "public, max-age=60", "{o}");
    assert_eq!(
        o["contentDisposition"], "attachment; filename=\"r.bin\"",
        "{o}"
    );
    assert_eq!(o["metadata"]["owner"], "web-team", "{o}");
    // S3: MinIO's own HEAD answer, signed by curl.
    let ep = std::env::var("SHOAL_TEST_S3").unwrap();
    let key = std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into());
    let secret = std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| SECRET.into());
    let out = Command::new("curl")
        .args([
            "-sS",
            "--fail",
            "-I",
            "--aws-sigv4",
            "aws:amz:us-east-1:s3",
            "--user",
            &format!("{key}:{secret}"),
            &format!("{ep}/{sb}/index.html"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    for h in [
        "content-type: text/html",
        "cache-control: public, max-age=60",
        "content-disposition: attachment; filename=\"r.bin\"",
        "x-amz-meta-owner: web-team",
        "x-amz-meta-build: 42",
    ] {
        assert!(head.contains(h), "{h:?} in {head}");
    }
}
