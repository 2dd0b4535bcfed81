//! The "daily use" verbs against the real test servers: `presign` (the
//! URL fetched with plain curl, no credentials), `ls gs://` / `ls s3://`
//! (buckets), `rb` (empty, refused when not, `--force`), and requester
//! pays (`--billing-project`, `--request-payer`), checked on the wire by
//! a recorder the CLI is pointed at.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::common::*;

fn ok(c: Command) -> Run {
    let r = run(c);
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    r
}

fn put(base: fn() -> Option<Command>, url: &str, data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, data).unwrap();
    ok(with_args(
        base().unwrap(),
        &["-q", "cp", f.to_str().unwrap(), url],
    ));
}

/// `curl` with no credentials of any kind: (status, body).
fn curl(args: &[&str], url: &str) -> (u16, Vec<u8>) {
    let out = Command::new("curl")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(["-sS", "--path-as-is", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pos = out.stdout.iter().rposition(|&b| b == b'\n').unwrap();
    let code = std::str::from_utf8(&out.stdout[pos + 1..])
        .unwrap()
        .parse()
        .unwrap();
    (code, out.stdout[..pos].to_vec())
}

fn presign(base: Command, extra: &[&str], url: &str) -> String {
    let mut a = vec!["presign"];
    a.extend(extra);
    a.push(url);
    let r = ok(with_args(base, &a));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one URL: {:?}", r.stdout);
    lines[0].to_owned()
}

#[test]
fn presigned_s3_url_works_without_credentials_and_only_as_signed() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let data = pattern(10_000, 7);
    let url = format!("s3://{bucket}/dir/a b+c.bin");
    put(s3, &url, &data);
    let signed = presign(s3().unwrap(), &["--expires", "10m"], &url);
    assert!(signed.contains("X-Amz-Expires=600"), "{signed}");
    let (code, body) = curl(&[], &signed);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(body, data);
    // `signurl` is the same verb.
    let (code, _) = curl(&[], &presign(s3().unwrap(), &[], &url));
    assert_eq!(code, 200);

    // Tampered: another key, another expiry, a changed signature.
    let other = signed.replacen("/dir/a%20b%2Bc.bin", "/dir/other", 1);
    assert_ne!(other, signed);
    let longer = signed.replacen("X-Amz-Expires=600", "X-Amz-Expires=6000", 1);
    let sig_at = signed.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let mut flipped = signed.clone();
    let c = if &signed[sig_at..sig_at + 1] == "0" {
        "1"
    } else {
        "0"
    };
    flipped.replace_range(sig_at..sig_at + 1, c);
    for bad in [other, longer, flipped] {
        let (code, body) = curl(&[], &bad);
        assert_eq!(code, 403, "{bad}: {}", String::from_utf8_lossy(&body));
    }

    // --method PUT: a plain upload through the URL, read back by shoal.
    let up = format!("s3://{bucket}/uploaded");
    let signed_put = presign(s3().unwrap(), &["--method", "PUT"], &up);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("up");
    std::fs::write(&f, b"through a presigned PUT").unwrap();
    let (code, _) = curl(&["-T", f.to_str().unwrap()], &signed_put);
    assert_eq!(code, 200);
    let r = ok(with_args(s3().unwrap(), &["cat", &up]));
    assert_eq!(r.stdout, "through a presigned PUT");
    // A GET URL does not allow a PUT.
    let (code, _) = curl(&["-T", f.to_str().unwrap()], &signed);
    assert_eq!(code, 403);

    // --header: the holder must send the header as signed; --query-param
    // rides in the URL; --method HEAD and DELETE.
    let typed = presign(
        s3().unwrap(),
        &["--method", "PUT", "--header", "Content-Type: text/csv"],
        &up,
    );
    assert!(
        typed.contains("X-Amz-SignedHeaders=content-type%3Bhost"),
        "{typed}"
    );
    let (code, _) = curl(&["-T", f.to_str().unwrap()], &typed);
    // MinIO answers AccessDenied with status 400 here.
    assert!(
        matches!(code, 400 | 403),
        "without the signed header: {code}"
    );
    let (code, _) = curl(
        &["-T", f.to_str().unwrap(), "-H", "content-type: text/csv"],
        &typed,
    );
    assert_eq!(code, 200);
    let typed_get = presign(
        s3().unwrap(),
        &["--query-param", "response-content-type=application/x-shoal"],
        &up,
    );
    let (code, got) = curl(&["-D", "-"], &typed_get);
    assert_eq!(code, 200);
    let got = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(got.contains("content-type: application/x-shoal"), "{got}");
    let head = presign(s3().unwrap(), &["--method", "head"], &up);
    let (code, _) = curl(&["-I"], &head);
    assert_eq!(code, 200);
    let del = presign(s3().unwrap(), &["--method", "DELETE"], &up);
    let (code, _) = curl(&["-X", "DELETE"], &del);
    assert_eq!(code, 204);
    let r = run(with_args(s3().unwrap(), &["stat", &up]));
    assert_ne!(r.code, 0, "deleted through the URL");
}

/// A service-account key made for this test (openssl), as a JSON key file.
pub(crate) fn service_account_file(dir: &std::path::Path) -> std::path::PathBuf {
    let pem = dir.join("key.pem");
    let out = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&pem)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = serde_json::json!({
        "type": "service_account",
        "project_id": "shoal-test",
        "private_key_id": "test",
        "private_key": std::fs::read_to_string(&pem).unwrap(),
        "client_email": "signer@shoal-test.iam.gserviceaccount.com",
    });
    let path = dir.join("sa.json");
    std::fs::write(&path, json.to_string()).unwrap();
    path
}

#[test]
fn presigned_gcs_url_has_the_v4_shape_and_fake_gcs_serves_it() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key = service_account_file(dir.path());
    let data = pattern(5_000, 3);
    let url = format!("gs://{bucket}/dir/obj.bin");
    put(gcs, &url, &data);
    let mut c = gcs().unwrap();
    c.env("GOOGLE_APPLICATION_CREDENTIALS", &key);
    let signed = presign(c, &["--expires", "2h"], &url);
    let ep = std::env::var("SHOAL_TEST_GCS").unwrap();
    assert!(
        signed.starts_with(&format!(
            "{ep}/{bucket}/dir/obj.bin?X-Goog-Algorithm=GOOG4-RSA-SHA256&"
        )),
        "{signed}"
    );
    for p in [
        "&X-Goog-Credential=signer%40shoal-test.iam.gserviceaccount.com%2F",
        "%2Fauto%2Fstorage%2Fgoog4_request&",
        "&X-Goog-Expires=7200&X-Goog-SignedHeaders=host&X-Goog-Signature=",
    ] {
        assert!(signed.contains(p), "{p} in {signed}");
    }
    let sig = signed.rsplit("X-Goog-Signature=").next().unwrap();
    assert_eq!(sig.len(), 512, "a 2048-bit RSA signature in hex");
    assert!(!signed.contains("PRIVATE"), "no key in the URL");
    // fake-gcs-server checks no signature, but serves the signed URL's path.
    let (code, body) = curl(&[], &signed);
    assert_eq!(code, 200);
    assert_eq!(body, data);

    // A user's login holds no key to sign with: one line saying what is needed.
    let user = dir.path().join("user.json");
    std::fs::write(
        &user,
        r#"{"type":"authorized_user","client_id":"x","client_secret":"y","refresh_token":"z"}"#,
    )
    .unwrap();
    let mut c = gcs().unwrap();
    c.env("GOOGLE_APPLICATION_CREDENTIALS", &user);
    let r = run(with_args(c, &["presign", &url]));
    r.assert_one_line_error(1, &["authorized_user", "service-account key"]);
    assert!(!r.stderr.contains("refresh_token") && !r.stderr.contains("\"z\""));
}

fn with_project(c: Command) -> Command {
    let mut c = c;
    c.env("GOOGLE_CLOUD_PROJECT", "shoal-test");
    c
}

#[test]
fn ls_of_a_provider_lists_its_buckets() {
    for (base, scheme) in [(gcs as fn() -> Option<Command>, "gs"), (s3, "s3")] {
        let (Some(a), Some(b)) = (make_bucket(base, scheme), make_bucket(base, scheme)) else {
            return;
        };
        let root = format!("{scheme}://");
        let r = ok(with_args(with_project(base().unwrap()), &["ls", &root]));
        for name in [&a, &b] {
            let want = format!("{scheme}://{name}");
            assert!(
                r.stdout.lines().any(|l| l == want),
                "{want} in {}",
                r.stdout
            );
        }
        let r = ok(with_args(
            with_project(base().unwrap()),
            &["ls", "--json", &root],
        ));
        let rows: Vec<serde_json::Value> = r
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let row = rows
            .iter()
            .find(|v| v["bucket"] == a.as_str())
            .expect("listed");
        assert_eq!(row["url"], format!("{scheme}://{a}"));
        assert!(row["created"].is_string(), "{row}");
        ok(with_args(
            with_project(base().unwrap()),
            &["ls", "-l", &root],
        ));
    }
}

fn bucket_listed(base: fn() -> Option<Command>, scheme: &str, bucket: &str) -> bool {
    let r = ok(with_args(
        with_project(base().unwrap()),
        &["ls", &format!("{scheme}://")],
    ));
    r.stdout
        .lines()
        .any(|l| l == format!("{scheme}://{bucket}"))
}

#[test]
fn rb_removes_empty_buckets_refuses_full_ones_and_force_empties_first() {
    for (base, scheme) in [(gcs as fn() -> Option<Command>, "gs"), (s3, "s3")] {
        // Empty: removed.
        let Some(empty) = make_bucket(base, scheme) else {
            return;
        };
        assert!(bucket_listed(base, scheme, &empty));
        ok(with_args(
            base().unwrap(),
            &["rb", &format!("{scheme}://{empty}")],
        ));
        assert!(!bucket_listed(base, scheme, &empty));

        // Not empty: refused with the count seen, objects and bucket kept.
        let full = make_bucket(base, scheme).unwrap();
        for k in ["a", "b/c", "b/d"] {
            put(base, &format!("{scheme}://{full}/{k}"), k.as_bytes());
        }
        let r = run(with_args(
            base().unwrap(),
            &["rb", &format!("{scheme}://{full}")],
        ));
        r.assert_one_line_error(1, &["not empty", "3 objects", "--force"]);
        assert!(bucket_listed(base, scheme, &full));
        let r = ok(with_args(
            base().unwrap(),
            &["cat", &format!("{scheme}://{full}/b/c")],
        ));
        assert_eq!(r.stdout, "b/c");
        // A prefix is never taken for the bucket.
        let r = run(with_args(
            base().unwrap(),
            &["rb", "--force", &format!("{scheme}://{full}/b")],
        ));
        r.assert_one_line_error(2, &["named exactly"]);
        ok(with_args(
            base().unwrap(),
            &["cat", &format!("{scheme}://{full}/b/c")],
        ));

        // --force: the objects, then the bucket.
        let r = ok(with_args(
            base().unwrap(),
            &["rb", "--force", &format!("{scheme}://{full}")],
        ));
        assert!(
            r.stderr.contains(&format!("Removed {scheme}://{full}/b/d")),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains(&format!("Removed bucket {scheme}://{full}")),
            "{}",
            r.stderr
        );
        assert!(!bucket_listed(base, scheme, &full));
    }
}

/// A one-connection-at-a-time HTTP recorder: keeps each request's head and
/// answers 404 (it is not a store). Returns its base URL and the heads.
fn recorder() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf).into_owned());
            let _ = conn.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    (format!("http://{addr}"), heads)
}

#[test]
fn requester_pays_is_sent_on_every_request() {
    // S3: the header, signed, on each request.
    let (ep, heads) = recorder();
    let mut c = shoal();
    c.env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "secret");
    let r = run(with_args(
        c,
        &[
            "--attempts",
            "1",
            "--endpoint-url",
            &ep,
            "--request-payer",
            "stat",
            "s3://b/k",
        ],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let mut c = shoal();
    c.env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "secret");
    run(with_args(
        c,
        &[
            "--attempts",
            "1",
            "--endpoint-url",
            &ep,
            "--request-payer=requester",
            "ls",
            "s3://b/p/",
        ],
    ));
    let seen = heads.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for h in &seen {
        let lower = h.to_ascii_lowercase();
        assert!(
            lower.contains("\r\nx-amz-request-payer: requester\r\n"),
            "{h}"
        );
        assert!(lower.contains(";x-amz-request-payer"), "signed: {h}");
    }
    // Without the flag, nothing is sent.
    heads.lock().unwrap().clear();
    let mut c = shoal();
    c.env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "secret");
    run(with_args(
        c,
        &["--attempts", "1", "--endpoint-url", &ep, "stat", "s3://b/k"],
    ));
    let seen = heads.lock().unwrap().clone();
    assert!(
        !seen[0].to_ascii_lowercase().contains("request-payer"),
        "{}",
        seen[0]
    );

    // GCS: userProject on each request, from the flag or gcloud's variable.
    let (ep, heads) = recorder();
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", &ep);
    run(with_args(
        c,
        &[
            "--attempts",
            "1",
            "--billing-project",
            "payer-1",
            "stat",
            "gs://b/k",
        ],
    ));
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", &ep)
        .env("CLOUDSDK_BILLING_QUOTA_PROJECT", "payer-2");
    run(with_args(c, &["--attempts", "1", "ls", "gs://b/p/"]));
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", &ep)
        .env("CLOUDSDK_BILLING_QUOTA_PROJECT", "payer-2");
    run(with_args(
        c,
        &[
            "--attempts",
            "1",
            "--billing-project",
            "payer-3",
            "stat",
            "gs://b/k",
        ],
    ));
    let mut c = shoal();
    c.env("STORAGE_EMULATOR_HOST", &ep);
    run(with_args(c, &["--attempts", "1", "stat", "gs://b/k"]));
    let lines: Vec<String> = heads
        .lock()
        .unwrap()
        .iter()
        .map(|h| h.lines().next().unwrap_or("").to_owned())
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[0].contains("userProject=payer-1"), "{}", lines[0]);
    assert!(lines[1].contains("userProject=payer-2"), "{}", lines[1]);
    assert!(
        lines[2].contains("userProject=payer-3") && !lines[2].contains("payer-2"),
        "{}",
        lines[2]
    );
    assert!(!lines[3].contains("userProject"), "{}", lines[3]);
}

#[test]
fn presign_rb_and_mv_speak_json() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let (a, b) = (
        format!("s3://{bucket}/a.txt"),
        format!("s3://{bucket}/b.txt"),
    );
    put(s3, &a, b"abc");
    let r = ok(with_args(
        s3().unwrap(),
        &["presign", "--json", "--expires", "10m", &a],
    ));
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["method"], "GET", "{v}");
    assert_eq!(v["expires_in_seconds"], 600, "{v}");
    assert_eq!(v["object"], a.as_str(), "{v}");
    assert_eq!(
        curl(&[], v["url"].as_str().unwrap()),
        (200, b"abc".to_vec())
    );

    let r = ok(with_args(s3().unwrap(), &["mv", "--json", &a, &b]));
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["action"], "move", "{v}");
    assert_eq!(v["destination"], b.as_str(), "{v}");

    let r = ok(with_args(
        s3().unwrap(),
        &["rb", "--force", "--json", &format!("s3://{bucket}")],
    ));
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|v| v["action"] == "delete" && v["url"] == b.as_str()),
        "{lines:?}"
    );
    assert_eq!(
        lines.last().unwrap()["action"],
        "remove bucket",
        "{lines:?}"
    );
}

/// `n` small local files `f00.csv`... in `dir`.
fn small_files(dir: &std::path::Path, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        std::fs::write(dir.join(format!("f{i:02}.csv")), format!("{i}\n")).unwrap();
    }
}

/// The lines of stdout as JSON objects.
fn json_lines(r: &Run) -> Vec<serde_json::Value> {
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A batch where every file fails for one reason says it once, with the
/// count and the first names, and still ends with its summary; `--json`
/// names each failure's source and destination.
#[test]
fn a_batch_that_fails_whole_says_the_cause_once_and_sums_up() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    small_files(&src, 30);
    let url = format!("s3://{bucket}/t/");
    ok(with_args(
        s3().unwrap(),
        &["-q", "cp", "-r", src.to_str().unwrap(), &url],
    ));

    // Upload with no credentials: 30 refusals, one cause.
    let mut c = s3().unwrap();
    c.env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY");
    let r = run(with_args(
        c,
        &[
            "cp",
            "-r",
            src.to_str().unwrap(),
            &format!("s3://{bucket}/u/"),
        ],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "one line for the cause, one summary: {:?}",
        r.stderr
    );
    assert!(
        lines[0].starts_with("shoal: 30 files failed: upload ")
            && lines[0].contains("no AWS credentials")
            && lines[0].contains("f00.csv, ")
            && lines[0].ends_with(" and 27 more)"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("Copied: 0 files") && lines[1].ends_with(", 30 FAILED"),
        "{}",
        lines[1]
    );

    // Download where the folder it needs is a file: one cause again.
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("t"), b"in the way").unwrap();
    let out_s = format!("{}/", out.display());
    let r = run(with_args(
        s3().unwrap(),
        &["cp", "-r", &format!("s3://{bucket}/t"), &out_s],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{:?}", r.stderr);
    assert!(lines[0].contains("30 files failed: ") && lines[0].contains("not a directory"));
    assert!(lines[1].ends_with("30 FAILED"), "{}", lines[1]);

    // The same with --json: a record per file naming both ends, then the
    // summary.
    let r = run(with_args(
        s3().unwrap(),
        &["cp", "-r", "--json", &format!("s3://{bucket}/t"), &out_s],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let v = json_lines(&r);
    assert_eq!(v.len(), 31, "{}", r.stdout);
    for f in &v[..30] {
        assert_eq!(f["action"], "fail", "{f}");
        let (s, d) = (
            f["source"].as_str().unwrap(),
            f["destination"].as_str().unwrap(),
        );
        let name = s.rsplit('/').next().unwrap();
        assert!(s.starts_with(&format!("s3://{bucket}/t/src/f")), "{f}");
        assert_eq!(d, format!("{}/t/src/{name}", out.display()), "{f}");
    }
    assert_eq!(v[30]["summary"]["failed"], 30);
    assert_eq!(v[30]["summary"]["copied"], 0);
    assert_eq!(std::fs::read(out.join("t")).unwrap(), b"in the way");
}

/// `cp --json` of one object that fails says so on stdout too: a `fail`
/// record and a summary, as a batch would.
#[test]
fn a_single_copy_that_fails_writes_json_too() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = format!("s3://{bucket}/missing.csv");
    let dst = format!("{}/", dir.path().display());
    let r = run(with_args(s3().unwrap(), &["cp", "--json", &src, &dst]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("missing.csv"), "{}", r.stderr);
    let v = json_lines(&r);
    assert_eq!(v.len(), 2, "{}", r.stdout);
    assert_eq!(v[0]["action"], "fail");
    assert_eq!(v[0]["source"], src.as_str());
    assert_eq!(v[0]["destination"], dst.as_str());
    assert!(v[0]["error"].as_str().unwrap().contains("404"), "{}", v[0]);
    assert_eq!(v[1]["summary"]["failed"], 1);
    assert_eq!(v[1]["summary"]["copied"], 0);
}

/// `cp a b s3://x/` and `mv a b s3://x/` as gcloud and cp(1) take them:
/// the last argument is the folder every source goes into; one source
/// that fails does not stop the others; a destination that is not a
/// folder is refused before anything is copied.
#[test]
fn several_sources_go_into_the_destination_folder() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    small_files(dir.path(), 3);
    let f = |i: usize| {
        dir.path()
            .join(format!("f{i:02}.csv"))
            .display()
            .to_string()
    };
    let into = format!("s3://{bucket}/x/");
    ok(with_args(s3().unwrap(), &["cp", &f(0), &f(1), &into]));
    let listed = ok(with_args(s3().unwrap(), &["ls", &into])).stdout;
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        [format!("{into}f00.csv"), format!("{into}f01.csv")]
    );

    // Not a folder: one line, exit 2, nothing copied.
    let r = run(with_args(
        s3().unwrap(),
        &["cp", &f(0), &f(2), &format!("s3://{bucket}/y")],
    ));
    r.assert_one_line_error(2, &["destination must be a folder", "y/"]);
    let r = run(with_args(shoal(), &["cp", &f(0), &f(2), &f(1)]));
    r.assert_one_line_error(2, &["destination must be a folder"]);
    let listed = ok(with_args(
        s3().unwrap(),
        &["ls", &format!("s3://{bucket}/")],
    ))
    .stdout;
    assert!(!listed.contains("/y"), "{listed}");

    // mv: what exists moves, what does not is said, exit 1.
    let missing = dir.path().join("nope.csv").display().to_string();
    let r = run(with_args(
        s3().unwrap(),
        &["mv", &f(2), &missing, &f(0), &into],
    ));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("nope.csv"), "{}", r.stderr);
    assert!(!std::path::Path::new(&f(2)).exists() && !std::path::Path::new(&f(0)).exists());
    let listed = ok(with_args(s3().unwrap(), &["ls", &into])).stdout;
    assert_eq!(listed.lines().count(), 3, "{listed}");

    // Back down into a local folder, and -r with a folder among them.
    let back = tempfile::tempdir().unwrap();
    let back_s = back.path().display().to_string();
    ok(with_args(
        s3().unwrap(),
        &[
            "cp",
            &format!("{into}f00.csv"),
            &format!("{into}f02.csv"),
            &back_s,
        ],
    ));
    assert_eq!(files_in(back.path()), ["f00.csv", "f02.csv"]);
    let sub = dir.path().join("sub");
    small_files(&sub, 2);
    ok(with_args(
        s3().unwrap(),
        &[
            "cp",
            "-r",
            sub.to_str().unwrap(),
            &f(1),
            &format!("s3://{bucket}/r/"),
        ],
    ));
    let listed = ok(with_args(
        s3().unwrap(),
        &["ls", "-r", &format!("s3://{bucket}/r/")],
    ))
    .stdout;
    assert_eq!(listed.lines().count(), 3, "{listed}");
}
