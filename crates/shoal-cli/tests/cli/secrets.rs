//! Credentials never reach output or logs, at any verbosity: `-v -v -v`
//! and `SHOAL_LOG=trace` (which turns on every library's tracing, hyper
//! and the AWS signer included). stdout and stderr are searched for the S3
//! secret key, session token, SigV4 signatures and `Authorization`
//! headers, and for a GCS bearer token, refresh token and client secret
//! (an authorized-user credential whose token endpoint is a loopback
//! server of this test, so nothing leaves the machine).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::*;

const S3_SECRET: &str = "S3cr3tKeyValue-DoNotPrint-41b7";
const S3_TOKEN: &str = "SessionTokenValue-DoNotPrint-9c2e";
const GCS_TOKEN: &str = "ya29.AccessTokenValue-DoNotPrint-77f1";
const GCS_REFRESH: &str = "1//RefreshTokenValue-DoNotPrint-0a3d";
const GCS_CLIENT_SECRET: &str = "ClientSecretValue-DoNotPrint-5e6b";

fn verbosities() -> Vec<(&'static str, Vec<&'static str>, Option<&'static str>)> {
    vec![
        ("-v -v -v", vec!["-v", "-v", "-v"], None),
        ("SHOAL_LOG=trace", vec![], Some("trace")),
    ]
}

fn assert_clean(what: &str, r: &Run, secrets: &[&str]) {
    let all = format!("{}\n{}", r.stdout, r.stderr);
    for s in secrets {
        assert!(!all.contains(s), "{what}: {s:?} leaked:\n{all}");
    }
    let low = all.to_lowercase();
    // The signer logs its canonical request at trace, with the session
    // token redacted; the header values that carry secrets never appear.
    for marker in ["signature=", "authorization: ", "bearer "] {
        assert!(!low.contains(marker), "{what}: {marker:?} leaked:\n{all}");
    }
}

#[test]
fn s3_secret_token_and_signatures_never_printed() {
    let Some(ep) = shoal_testkit_server("SHOAL_TEST_S3") else {
        return;
    };
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, b"hello").unwrap();
    let url = format!("s3://{bucket}/k");
    for (name, flags, log) in verbosities() {
        // Right credentials (signed requests that succeed) and wrong ones
        // (a secret and a session token the server rejects).
        for (creds, key, secret, token) in [
            ("valid", "minioadmin", SECRET, None),
            ("wrong", "minioadmin", S3_SECRET, Some(S3_TOKEN)),
        ] {
            for verb in [
                vec!["cp", src.to_str().unwrap(), &url],
                vec!["ls", "-r", &format!("s3://{bucket}/")],
                vec!["stat", &url],
                vec!["cp", &url, dir.path().join("out").to_str().unwrap()],
            ] {
                let mut c = shoal();
                c.env("AWS_ENDPOINT_URL", &ep)
                    .env("AWS_REGION", "us-east-1")
                    .env("AWS_ACCESS_KEY_ID", key)
                    .env("AWS_SECRET_ACCESS_KEY", secret)
                    .args(&flags)
                    .args(["--attempts", "1"])
                    .args(&verb);
                if let Some(t) = token {
                    c.env("AWS_SESSION_TOKEN", t);
                }
                if let Some(l) = log {
                    c.env("SHOAL_LOG", l);
                }
                let r = run(c);
                let what = format!("{name} {creds} {}", verb[0]);
                if creds == "valid" {
                    assert_eq!(r.code, 0, "{what}: {}", r.stderr);
                    assert!(!r.stderr.is_empty(), "{what}: the logs were on");
                } else {
                    assert_eq!(r.code, 1, "{what}: {}", r.stderr);
                }
                let mut secrets = vec![S3_SECRET, S3_TOKEN];
                if creds == "valid" {
                    // "minioadmin" is both the key id and the secret here:
                    // only the wrong-credentials runs can check the secret
                    // itself; signatures and headers are checked in both.
                    secrets.clear();
                }
                assert_clean(&what, &r, &secrets);
            }
        }
    }
}

/// A loopback OAuth token endpoint: every POST gets `GCS_TOKEN`.
fn token_server() -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let mut buf = vec![0u8; 16 << 10];
            let _ = s.read(&mut buf);
            let body = format!(
                r#"{{"access_token":"{GCS_TOKEN}","expires_in":3600,"token_type":"Bearer","scope":"https://www.googleapis.com/auth/cloud-platform"}}"#
            );
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (format!("http://{addr}/token"), hits)
}

#[test]
fn gcs_bearer_token_and_refresh_token_never_printed() {
    let Some(ep) = shoal_testkit_server("SHOAL_TEST_GCS") else {
        return;
    };
    let Some(bucket) = make_bucket(gcs, "gs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let adc = dir.path().join("adc.json");
    let (token_uri, hits) = token_server();
    std::fs::write(
        &adc,
        format!(
            r#"{{"type":"authorized_user","client_id":"shoal-test.apps.googleusercontent.com","client_secret":"{GCS_CLIENT_SECRET}","refresh_token":"{GCS_REFRESH}","token_uri":"{}"}}"#,
            token_uri
        ),
    )
    .unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, b"hello").unwrap();
    let url = format!("gs://{bucket}/k");
    for (name, flags, log) in verbosities() {
        for verb in [
            vec!["cp", src.to_str().unwrap(), &url],
            vec!["ls", "-r", &format!("gs://{bucket}/")],
            vec!["stat", &url],
            vec!["cp", &url, dir.path().join("out").to_str().unwrap()],
            // A failing request (404) with the token attached.
            vec!["stat", &format!("gs://{bucket}/missing")],
        ] {
            // No STORAGE_EMULATOR_HOST: an explicit endpoint means "sign
            // with Application Default Credentials".
            let mut c: Command = shoal();
            c.env("GOOGLE_APPLICATION_CREDENTIALS", &adc)
                .args(&flags)
                .args(["--attempts", "1", "--gcs-endpoint-url", &ep])
                .args(&verb);
            if let Some(l) = log {
                c.env("SHOAL_LOG", l);
            }
            let r = run(c);
            let what = format!("{name} {}", verb.join(" "));
            if verb[1].ends_with("missing") {
                assert_eq!(r.code, 1, "{what}: {}", r.stderr);
            } else {
                assert_eq!(r.code, 0, "{what}: {}", r.stderr);
            }
            assert_clean(&what, &r, &[GCS_TOKEN, GCS_REFRESH, GCS_CLIENT_SECRET]);
        }
    }
    // The runs really were signed with the token (not anonymous).
    assert!(
        hits.load(Ordering::SeqCst) > 0,
        "the token endpoint was never asked"
    );
}

/// A password put in an endpoint URL (`http://user:PW@host`) is never
/// printed back, in the refusal or in any log line.
#[test]
fn passwords_in_endpoint_urls_never_printed() {
    const PW: &str = "EndpointPassword-DoNotPrint-3f9a";
    for (what, flags, log) in verbosities() {
        for (scheme, var) in [("s3", "AWS_ENDPOINT_URL"), ("gs", "STORAGE_EMULATOR_HOST")] {
            let mut c = shoal();
            c.env(var, format!("http://user:{PW}@127.0.0.1:9"))
                .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
                .env("AWS_SECRET_ACCESS_KEY", "x")
                .env("AWS_REGION", "us-east-1")
                .args(&flags)
                .args(["--attempts", "1", "ls", &format!("{scheme}://bucket/")]);
            if let Some(l) = log {
                c.env("SHOAL_LOG", l);
            }
            let r = run(c);
            assert_ne!(r.code, 0, "{what} {scheme}: {}", r.stderr);
            assert_clean(&format!("{what} {scheme}"), &r, &[PW]);
        }
    }
}

/// A proxy password holding `#`, `?`, `/`, `@` or `:` (which end or split
/// a URL's authority for a parser), or a proxy given without a scheme, is
/// never printed back: not in the refusal of an unusable proxy URL, not in
/// the error of a proxy that cannot be reached, not in any log line;
/// whether it came from a variable or from --proxy.
#[test]
fn proxy_passwords_never_printed_whatever_they_hold() {
    const PW: &str = "ProxyPassword-DoNotPrint-6c0e";
    let proxies = [
        format!("http://user:a#{PW}@127.0.0.1:9"),
        format!("http://user:a?{PW}@127.0.0.1:9"),
        format!("http://user:a/{PW}@127.0.0.1:9"),
        format!("http://user:a@{PW}@127.0.0.1:9"),
        format!("http://user:a:{PW}@127.0.0.1:9"),
        format!("user:{PW}@127.0.0.1:9"),
        format!("user:a#{PW}@127.0.0.1:9"),
        format!("user:a/{PW}@"),
    ];
    for (what, flags, log) in verbosities() {
        for proxy in &proxies {
            for by_flag in [false, true] {
                let mut c = shoal();
                c.env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
                    .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
                    .env("AWS_SECRET_ACCESS_KEY", "x")
                    .env("AWS_REGION", "us-east-1")
                    .args(&flags);
                if by_flag {
                    c.args(["--proxy", proxy]);
                } else {
                    c.env("ALL_PROXY", proxy);
                }
                c.args(["--attempts", "1", "ls", "s3://bucket/"]);
                if let Some(l) = log {
                    c.env("SHOAL_LOG", l);
                }
                let r = run(c);
                let how = if by_flag { "--proxy" } else { "ALL_PROXY" };
                assert_ne!(r.code, 0, "{what} {how} {proxy}: {}", r.stderr);
                assert_clean(&format!("{what} {how} {proxy}"), &r, &[PW]);
            }
        }
    }
}
