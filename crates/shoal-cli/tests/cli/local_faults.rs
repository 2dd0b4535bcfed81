//! Local faults: a disk that fills up mid-download (a 4 MiB tmpfs; needs
//! root and mount permission, otherwise skipped with the reason printed),
//! a read-only destination, and a file that changes while it is uploaded.
//! Each fails with one line naming the problem and leaves nothing behind.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use shoal_testkit::faultproxy::{Fault, FaultProxy, Rule, Script, When};

fn upload(scheme: &str, base: fn() -> Option<Command>, bucket: &str, body: &[u8]) -> String {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), body).unwrap();
    let url = format!("{scheme}://{bucket}/{}", unique("obj"));
    let r = run(with_args(
        base().unwrap(),
        &["cp", f.path().to_str().unwrap(), &url],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    url
}

#[test]
fn disk_full_during_a_download() {
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let url = upload("gs", gcs, &bucket, &pattern(6 << 20, 9));
    let mnt = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=4m",
            "tmpfs",
            mnt.path().to_str().unwrap(),
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: cannot mount a 4 MiB tmpfs here (needs root and mount permission)");
        return;
    }
    let out = mnt.path().join("big.bin");
    let r = run(with_args(
        gcs().unwrap(),
        &["cp", &url, out.to_str().unwrap()],
    ));
    let left = files_in(mnt.path());
    let _ = Command::new("umount").arg(mnt.path()).status();
    r.assert_one_line_error(1, &[out.to_str().unwrap()]);
    assert!(
        r.stderr.to_lowercase().contains("no space left"),
        "names the problem: {}",
        r.stderr
    );
    assert!(left.is_empty(), "nothing left on the full disk: {left:?}");
}

#[test]
fn read_only_destination() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let url = upload("s3", s3, &bucket, b"hello");
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    // root writes anywhere: run as nobody so the permission check is real.
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    let make = || {
        let c = s3().unwrap();
        let mut n = if root {
            let mut n = Command::new("setpriv");
            n.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                env!("CARGO_BIN_EXE_shoal"),
            ]);
            n
        } else {
            Command::new(env!("CARGO_BIN_EXE_shoal"))
        };
        n.env_clear().stdin(Stdio::null());
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                n.env(k, v);
            }
        }
        n
    };
    for args in [
        vec!["cp", url.as_str(), dir.path().to_str().unwrap()],
        vec![
            "cp",
            "-r",
            &format!("s3://{bucket}/"),
            dir.path().to_str().unwrap(),
        ],
    ] {
        let mut cmd = make();
        cmd.args(&args);
        let r = run(cmd);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.to_lowercase().contains("permission denied"),
            "{args:?}: names the problem: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn a_file_that_changes_while_it_is_uploaded() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let ep = shoal_testkit_server("SHOAL_TEST_S3").unwrap();
    // Every request waits 300 ms: the file is changed while parts are in flight.
    let proxy = FaultProxy::start(
        &ep,
        Script::new().rule(
            Rule::new(When::any(), Fault::DelayHeaders(Duration::from_millis(300)))
                .times(usize::MAX),
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("growing");
    std::fs::write(&src, pattern(12 << 20, 3)).unwrap();
    let url = format!("s3://{bucket}/growing");
    let mut c = s3().unwrap();
    c.env("AWS_ENDPOINT_URL", proxy.url())
        .args(["cp", "--part-size", "5MiB", src.to_str().unwrap(), &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    // Changed once the upload has begun (its first request is held at the
    // proxy, so no part has been read yet), however slowly shoal started:
    // a fixed sleep here changed the file before a loaded machine had even
    // looked at it, and the upload then rightly succeeded.
    let mut waited = 0;
    while proxy.requests() == 0 {
        assert!(waited < 6000, "the upload never reached the server");
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&src).unwrap();
        f.write_all(b"appended while uploading").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stdout_bytes: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    r.assert_one_line_error(
        1,
        &[src.to_str().unwrap(), "changed while it was being uploaded"],
    );
    let st = run(with_args(s3().unwrap(), &["stat", &url]));
    assert_eq!(st.code, 1, "no object: {}", st.stdout);
}
