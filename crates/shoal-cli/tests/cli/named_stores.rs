//! Named stores (issue #55): a config file of `[stores.NAME]` sections,
//! each `NAME://bucket/key` in every verb. Two S3 endpoints (MinIO and
//! moto) and a GCS one (fake-gcs-server) side by side in one run; the
//! settings come from the file alone (no AWS or GCS variables are set).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// moto takes any credentials: these are only ever in the config file, so
/// any output holding them printed a secret.
const MOTO_KEY: &str = "AKIDNAMEDSTORE0042";
const MOTO_SECRET: &str = "named-store-secret-Zq9xW";

struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
}

impl Setup {
    fn new() -> Option<Setup> {
        let minio = shoal_testkit_server("SHOAL_TEST_S3")?;
        let moto = shoal_testkit_server("SHOAL_TEST_MOTO")?;
        let gcs = shoal_testkit_server("SHOAL_TEST_GCS")?;
        let key = std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into());
        let secret = std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| SECRET.into());
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "# two S3 endpoints and a GCS one\n\
                 [stores.minio]\ntype = \"s3\"\nendpoint_url = \"{minio}\"\n\
                 access_key_id = \"{key}\"\nsecret_access_key = \"{secret}\"\n\
                 addressing = \"path\"\n\n\
                 [stores.moto]\ntype = \"s3\"\nendpoint_url = \"{moto}\"\nregion = \"us-east-1\"\n\
                 access_key_id = \"{MOTO_KEY}\"\nsecret_access_key = \"{MOTO_SECRET}\"\n\n\
                 [stores.fake-gcs]\ntype = \"gs\"\nendpoint_url = \"{gcs}\"\nno_sign_request = true\n"
            ),
        )
        .unwrap();
        Some(Setup { _dir: dir, config })
    }

    fn cmd(&self) -> Command {
        let mut c = shoal();
        c.env("SHOAL_CONFIG", &self.config);
        c
    }

    fn ok(&self, args: &[&str]) -> Run {
        let r = run(with_args(self.cmd(), args));
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r
    }

    fn bucket(&self, store: &str) -> String {
        let b = unique("named");
        self.ok(&["mb", &format!("{store}://{b}")]);
        format!("{store}://{b}")
    }
}

fn cat(s: &Setup, url: &str) -> Vec<u8> {
    s.ok(&["cat", url]).stdout_bytes
}

/// cp, sync, mv and ls between MinIO, moto and fake-gcs-server, each
/// named, in one process's config; what arrives is byte for byte what
/// left, and nothing asks for the scheme's default stores.
#[test]
fn cp_sync_mv_ls_between_named_stores() {
    let Some(s) = Setup::new() else {
        return;
    };
    let (minio, moto, gcs) = (s.bucket("minio"), s.bucket("moto"), s.bucket("fake-gcs"));
    let dir = tempfile::tempdir().unwrap();
    let small = pattern(70_000, 1);
    let big = pattern(21 << 20, 2); // multipart on the way up
    std::fs::write(dir.path().join("small.bin"), &small).unwrap();
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    let local = dir.path().display().to_string();

    for f in ["small.bin", "big.bin"] {
        s.ok(&["cp", &format!("{local}/{f}"), &format!("{minio}/in/{f}")]);
    }
    assert_eq!(cat(&s, &format!("{minio}/in/big.bin")), big);

    // S3 to another S3 endpoint: streamed through this process.
    s.ok(&[
        "cp",
        &format!("{minio}/in/big.bin"),
        &format!("{moto}/big.bin"),
    ]);
    assert_eq!(cat(&s, &format!("{moto}/big.bin")), big);

    // S3 to GCS, and sync of a prefix across endpoints.
    s.ok(&[
        "cp",
        &format!("{moto}/big.bin"),
        &format!("{gcs}/from-moto.bin"),
    ]);
    assert_eq!(cat(&s, &format!("{gcs}/from-moto.bin")), big);
    s.ok(&["sync", &format!("{minio}/in/"), &format!("{moto}/mirror/")]);
    assert_eq!(cat(&s, &format!("{moto}/mirror/small.bin")), small);
    s.ok(&["sync", &format!("{minio}/in/"), &format!("{moto}/mirror/")]);

    // Within one store (server-side), then across: the source goes once
    // its copy is verified.
    s.ok(&[
        "cp",
        &format!("{minio}/in/small.bin"),
        &format!("{minio}/same.bin"),
    ]);
    s.ok(&[
        "mv",
        &format!("{moto}/mirror/small.bin"),
        &format!("{minio}/moved.bin"),
    ]);
    assert_eq!(cat(&s, &format!("{minio}/moved.bin")), small);
    let gone = run(with_args(
        s.cmd(),
        &["stat", &format!("{moto}/mirror/small.bin")],
    ));
    assert_ne!(gone.code, 0, "moved away: {}", gone.stdout);

    // Listings show the store's own URLs.
    let ls = s.ok(&["ls", "-r", &format!("{minio}/")]);
    for want in ["in/big.bin", "in/small.bin", "same.bin", "moved.bin"] {
        assert!(
            ls.stdout.contains(&format!("{minio}/{want}")),
            "{}",
            ls.stdout
        );
    }
    let ls = s.ok(&["ls", &format!("{gcs}/")]);
    assert!(
        ls.stdout.contains(&format!("{gcs}/from-moto.bin")),
        "{}",
        ls.stdout
    );
    let buckets = s.ok(&["ls", "moto://"]);
    assert!(buckets.stdout.contains(&moto), "{}", buckets.stdout);

    // Download back from a named store.
    let back = dir.path().join("back.bin");
    s.ok(&[
        "cp",
        &format!("{gcs}/from-moto.bin"),
        &back.display().to_string(),
    ]);
    assert_eq!(std::fs::read(&back).unwrap(), big);
}

/// `-vv` logs every request of a run that signs with the file's keys:
/// neither the key id nor the secret is ever printed.
#[test]
fn secrets_in_the_file_are_never_printed() {
    let Some(s) = Setup::new() else {
        return;
    };
    let moto = s.bucket("moto");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.bin");
    std::fs::write(&f, pattern(9 << 20, 3)).unwrap();
    for args in [
        vec!["-vv", "cp", f.to_str().unwrap(), &format!("{moto}/f.bin")],
        vec!["-vv", "ls", "-l", &format!("{moto}/")],
        vec!["-vv", "stat", &format!("{moto}/nothing-here")],
        vec!["-vv", "cat", &format!("{moto}/f.bin")],
    ] {
        let r = run(with_args(s.cmd(), &args));
        for secret in [MOTO_SECRET, MOTO_KEY] {
            assert!(!r.stderr.contains(secret), "{args:?} printed {secret}");
            if args[1] != "cat" {
                assert!(!r.stdout.contains(secret), "{args:?} printed {secret}");
            }
        }
    }
}

fn config_error(path: &Path, text: &str, args: &[&str]) -> Run {
    std::fs::write(path, text).unwrap();
    let mut c = shoal();
    c.env("SHOAL_CONFIG", path);
    run(with_args(c, args))
}

/// A bad file is one line naming the file and the line, exit 2, before
/// anything runs; its secrets stay out of the message.
#[test]
fn a_bad_config_file_is_one_line_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shoal.toml");
    let shown = path.display().to_string();
    let r = config_error(
        &path,
        "[stores.a]\ntype = \"s3\"\nsecret_acces_key = \"hush-hush-42\"\n",
        &["ls", "a://b/"],
    );
    r.assert_one_line_error(2, &[&shown, "line 3", "secret_acces_key"]);
    assert!(!r.stderr.contains("hush-hush-42"), "{}", r.stderr);

    let r = config_error(&path, "[stores.a]\ntype = s3\n", &["ls", "a://b/"]);
    r.assert_one_line_error(2, &[&shown, "line 2"]);
    let r = config_error(&path, "[stores.gs]\ntype = \"s3\"\n", &["ls", "gs://b/"]);
    r.assert_one_line_error(2, &[&shown, "line 1", "taken"]);
    let r = config_error(
        &path,
        "[stores.a]\ntype = \"gs\"\naccess_key_id = \"k\"\nsecret_access_key = \"hush-hush-42\"\n",
        &["ls", "a://b/"],
    );
    r.assert_one_line_error(2, &[&shown, "access_key_id is not a setting of a gs store"]);
    assert!(!r.stderr.contains("hush-hush-42"), "{}", r.stderr);

    // SHOAL_CONFIG names a file that must be there.
    let mut c = shoal();
    c.env("SHOAL_CONFIG", dir.path().join("absent.toml"));
    run(with_args(c, &["ls", "gs://b/"])).assert_one_line_error(2, &["absent.toml"]);
}

/// A name is a URL scheme only once the file declares it: otherwise it is
/// the usual unknown scheme, and `name:x` stays a local path; a declared
/// name's one-slash typo gets the "did you mean" gs:/ gets.
#[test]
fn only_declared_names_are_schemes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[stores.lake]\ntype = \"s3\"\nendpoint_url = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    let mut c = shoal();
    c.env("SHOAL_CONFIG", &path);
    run(with_args(c, &["ls", "pond://b/"])).assert_one_line_error(2, &["unknown scheme 'pond://'"]);
    let mut c = shoal();
    c.env("SHOAL_CONFIG", &path);
    run(with_args(c, &["ls", "lake:/b/k"])).assert_one_line_error(2, &["did you mean lake://b/k?"]);
    let mut c = shoal();
    c.env("SHOAL_CONFIG", dir.path().join("other.toml"));
    c.current_dir(dir.path());
    std::fs::write(dir.path().join("other.toml"), "").unwrap();
    std::fs::write(dir.path().join("lake:x"), b"local").unwrap();
    let r = run(with_args(c, &["cat", "lake:x"]));
    assert_eq!((r.code, r.stdout.as_str()), (0, "local"), "{}", r.stderr);
}

/// `cp -r` between named stores and down to a folder lays the tree out
/// as everywhere else in shoal (and gcloud): the source folder's name is
/// kept under the destination, `cp -r A://b/t/ out` making `out/t/...`.
#[test]
fn cp_r_between_named_stores_keeps_the_folder_name() {
    let Some(s) = Setup::new() else {
        return;
    };
    let (minio, moto) = (s.bucket("minio"), s.bucket("moto"));
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    let (a, b) = (pattern(5_000, 5), pattern(6_000, 6));
    std::fs::write(tree.join("a.bin"), &a).unwrap();
    std::fs::write(tree.join("sub/b.bin"), &b).unwrap();
    s.ok(&["cp", "-r", tree.to_str().unwrap(), &format!("{minio}/")]);
    assert_eq!(cat(&s, &format!("{minio}/t/sub/b.bin")), b);

    s.ok(&["cp", "-r", &format!("{minio}/t/"), &format!("{moto}/copy/")]);
    assert_eq!(cat(&s, &format!("{moto}/copy/t/a.bin")), a);
    assert_eq!(cat(&s, &format!("{moto}/copy/t/sub/b.bin")), b);

    let out = dir.path().join("out");
    s.ok(&[
        "cp",
        "-r",
        &format!("{moto}/copy/t/"),
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(out.join("t/a.bin")).unwrap(), a);
    assert_eq!(std::fs::read(out.join("t/sub/b.bin")).unwrap(), b);
}

/// Encryption is a named store's setting: an SSE-C key file for the TLS
/// MinIO and a customer-supplied key for storage-testbench, each given to
/// its store only; a copy between them reads with one key and writes with
/// the other. Without the key (the default `s3://` store at the same
/// endpoint) the object is refused; a key given on the command line wins
/// over the file's.
#[test]
fn encryption_keys_in_a_named_store() {
    let Some(tls) = shoal_testkit_server("SHOAL_TEST_S3_TLS") else {
        return;
    };
    let Some(tb) = shoal_testkit_server("SHOAL_TEST_GCS_TESTBENCH") else {
        return;
    };
    let ca = std::env::var("SHOAL_TEST_CA_BUNDLE").expect("SHOAL_TEST_CA_BUNDLE with s3tls");
    let key = std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into());
    let secret = std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| SECRET.into());
    let dir = tempfile::tempdir().unwrap();
    let (key_a, key_b) = (dir.path().join("a.key"), dir.path().join("b.key"));
    std::fs::write(&key_a, b"0123456789abcdef0123456789ABCDEF").unwrap();
    std::fs::write(&key_b, b"ffffffffffffffffeeeeeeeeeeeeeeee").unwrap();
    let csek =
        shoal_core::encryption::CustomerKey::new(*b"gggggggggggggggghhhhhhhhhhhhhhhh").to_base64();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[stores.vault]\ntype = \"s3\"\nendpoint_url = \"{tls}\"\nregion = \"us-east-1\"\n\
             ca_bundle = \"{ca}\"\naccess_key_id = \"{key}\"\nsecret_access_key = \"{secret}\"\n\
             sse_c_key_file = \"{}\"\n\n\
             [stores.bench]\ntype = \"gs\"\nendpoint_url = \"{tb}\"\nproject = \"test\"\n\
             no_sign_request = true\nencryption_key = \"{csek}\"\n",
            key_a.display()
        ),
    )
    .unwrap();
    let s = Setup {
        _dir: tempfile::tempdir().unwrap(),
        config,
    };
    let (vault, bench) = (s.bucket("vault"), s.bucket("bench"));
    let data = pattern(7 << 20, 7); // multipart with 5 MiB parts
    let src = dir.path().join("f");
    std::fs::write(&src, &data).unwrap();
    s.ok(&[
        "cp",
        "--part-size",
        "5MiB",
        src.to_str().unwrap(),
        &format!("{vault}/f"),
    ]);
    assert_eq!(cat(&s, &format!("{vault}/f")), data);

    // The same object through the default s3:// store, which has no key.
    let plain = format!("s3://{}/f", vault.split_once("://").unwrap().1);
    let mut c = s.cmd();
    c.env("AWS_ENDPOINT_URL", &tls)
        .env("AWS_CA_BUNDLE", &ca)
        .env("AWS_ACCESS_KEY_ID", &key)
        .env("AWS_SECRET_ACCESS_KEY", &secret)
        .env("AWS_REGION", "us-east-1");
    let r = run(with_args(c, &["cat", &plain]));
    assert_ne!(r.code, 0, "read without the key");

    // S3 (key file) to GCS (CSEK): streamed, each side with its key.
    s.ok(&["cp", &format!("{vault}/f"), &format!("{bench}/g")]);
    assert_eq!(cat(&s, &format!("{bench}/g")), data);
    let name = bench.split_once("://").unwrap().1;
    let meta = Command::new("curl")
        .args(["-sS", &format!("{tb}/storage/v1/b/{name}/o/g")])
        .output()
        .expect("curl");
    let meta = String::from_utf8_lossy(&meta.stdout);
    assert!(meta.contains("customerEncryption"), "{meta}");

    // A key on the command line replaces the file's for this run.
    let b = key_b.to_str().unwrap();
    s.ok(&[
        "--sse-c-key-file",
        b,
        "cp",
        src.to_str().unwrap(),
        &format!("{vault}/under-b"),
    ]);
    let r = run(with_args(s.cmd(), &["cat", &format!("{vault}/under-b")]));
    assert_ne!(r.code, 0, "read under-b with the file's key");
    let r = s.ok(&["--sse-c-key-file", b, "cat", &format!("{vault}/under-b")]);
    assert!(r.stdout_bytes == data);
    for secret in [csek.as_str(), secret.as_str()] {
        assert!(!r.stderr.contains(secret));
    }
}
