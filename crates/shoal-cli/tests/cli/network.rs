//! Proxies and private CAs, end to end with the real binary and real
//! servers: a small HTTP proxy written here (CONNECT tunnels and plain
//! forwarding, counting what it relays), and a second MinIO serving TLS
//! with a certificate from a CA made for the test.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

const PROXY_PASSWORD: &str = "pr0xy-s3cret";
/// base64("alice:pr0xy-s3cret")
const PROXY_BASIC: &str = "Basic YWxpY2U6cHIweHktczNjcmV0";

/// What the proxy saw of each connection: its first line and its
/// `Proxy-Authorization` header.
type Seen = Mutex<Vec<(String, Option<String>)>>;

/// An HTTP proxy on a free loopback port: `CONNECT host:port` opens a
/// tunnel, an absolute-form request (`GET http://host:port/…`) is forwarded
/// as is. Every connection it relays is counted, with its first line and
/// `Proxy-Authorization` header.
struct Proxy {
    url: String,
    /// `Proxy-Authorization` required (else 407), if set.
    wants: Arc<Mutex<Option<String>>>,
    relayed: Arc<AtomicUsize>,
    seen: Arc<Seen>,
}

impl Proxy {
    fn start() -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
        let relayed = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let wants = Arc::new(Mutex::new(None));
        let (r, s, w) = (relayed.clone(), seen.clone(), wants.clone());
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let (r, s, w) = (r.clone(), s.clone(), w.clone());
                std::thread::spawn(move || relay(c, &r, &s, &w));
            }
        });
        Proxy {
            url,
            wants,
            relayed,
            seen,
        }
    }

    /// From now on, answer 407 to requests without these credentials.
    fn require(&self, basic: &str) {
        *self.wants.lock().unwrap() = Some(basic.to_owned());
    }

    fn relayed(&self) -> usize {
        self.relayed.load(Ordering::SeqCst)
    }

    fn first_lines(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|x| x.0.clone())
            .collect()
    }

    fn auths(&self) -> Vec<Option<String>> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|x| x.1.clone())
            .collect()
    }

    /// The proxy URL with `alice:pr0xy-s3cret@` in it.
    fn url_with_credentials(&self) -> String {
        self.url
            .replace("http://", &format!("http://alice:{PROXY_PASSWORD}@"))
    }
}

fn relay(mut client: TcpStream, relayed: &AtomicUsize, seen: &Seen, wants: &Mutex<Option<String>>) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let first = text.lines().next().unwrap_or("").to_owned();
    let auth = text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("proxy-authorization")
            .then(|| v.trim().to_owned())
    });
    let mut parts = first.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let refused = wants
        .lock()
        .unwrap()
        .as_ref()
        .is_some_and(|w| auth.as_deref() != Some(w.as_str()));
    seen.lock().unwrap().push((first.clone(), auth));
    if refused {
        let _ = client.write_all(
            b"HTTP/1.1 407 Proxy Authentication Required\r\n\
              proxy-authenticate: Basic realm=\"test\"\r\ncontent-length: 0\r\n\r\n",
        );
        return;
    }
    let upstream_addr = if method == "CONNECT" {
        target.to_owned()
    } else {
        let rest = target.strip_prefix("http://").unwrap_or(target);
        rest.split('/').next().unwrap_or("").to_owned()
    };
    let Ok(mut upstream) = TcpStream::connect(&upstream_addr) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    relayed.fetch_add(1, Ordering::SeqCst);
    if method == "CONNECT" {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .unwrap();
    } else {
        upstream.write_all(&head).unwrap();
    }
    let (mut c2, mut u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut u2, &mut c2);
        let _ = c2.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut client, &mut upstream);
    let _ = upstream.shutdown(Shutdown::Write);
    let _ = t.join();
}

fn small_file(dir: &Path) -> PathBuf {
    let f = dir.join("hello.txt");
    std::fs::write(&f, b"hello through the network\n").unwrap();
    f
}

/// `cp` up, `ls`, `cat` back: every kind of request the CLI makes often.
fn round_trip(base: impl Fn() -> Command, url: &str, file: &Path) {
    let r = run(with_args(base(), &["cp", file.to_str().unwrap(), url]));
    assert_eq!(r.code, 0, "cp: {}", r.stderr);
    let r = run(with_args(base(), &["ls", url]));
    assert_eq!(r.code, 0, "ls: {}", r.stderr);
    assert!(r.stdout.contains("hello.txt"), "{}", r.stdout);
    let r = run(with_args(base(), &["cat", url]));
    assert_eq!(r.code, 0, "cat: {}", r.stderr);
    assert_eq!(r.stdout, "hello through the network\n");
}

#[test]
fn http_proxy_variables_route_s3_and_gcs_requests_through_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let file = small_file(dir.path());
    for (base, scheme, var) in [
        (s3 as fn() -> Option<Command>, "s3", "HTTP_PROXY"),
        (gcs, "gs", "http_proxy"),
    ] {
        let Some(bucket) = make_bucket(base, scheme) else {
            return;
        };
        let url = format!("{scheme}://{bucket}/hello.txt");
        let proxy = Proxy::start();
        round_trip(
            || {
                let mut c = base().unwrap();
                c.env(var, &proxy.url);
                c
            },
            &url,
            &file,
        );
        assert!(proxy.relayed() > 0, "{scheme}: nothing went through {var}");
        assert!(
            proxy
                .first_lines()
                .iter()
                .all(|l| l.contains(" http://127.0.0.1:")),
            "absolute-form requests: {:?}",
            proxy.first_lines()
        );

        // NO_PROXY names the server: the proxy sees nothing.
        let bypassed = Proxy::start();
        round_trip(
            || {
                let mut c = base().unwrap();
                c.env(var, &bypassed.url)
                    .env("NO_PROXY", "localhost,127.0.0.1");
                c
            },
            &url,
            &file,
        );
        assert_eq!(
            bypassed.relayed(),
            0,
            "{scheme}: NO_PROXY=127.0.0.1 ignored"
        );
    }
}

#[test]
fn all_proxy_and_the_proxy_flags() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = small_file(dir.path());
    let url = format!("s3://{bucket}/hello.txt");

    let proxy = Proxy::start();
    round_trip(
        || {
            let mut c = s3().unwrap();
            c.env("ALL_PROXY", &proxy.url);
            c
        },
        &url,
        &file,
    );
    assert!(proxy.relayed() > 0, "ALL_PROXY ignored");

    let flagged = Proxy::start();
    round_trip(
        || with_args(s3().unwrap(), &["--proxy", &flagged.url]),
        &url,
        &file,
    );
    assert!(flagged.relayed() > 0, "--proxy ignored");

    // --no-proxy: a proxy that refuses every connection is never asked.
    round_trip(
        || {
            let mut c = with_args(s3().unwrap(), &["--no-proxy"]);
            c.env("HTTP_PROXY", "http://127.0.0.1:1")
                .env("ALL_PROXY", "http://127.0.0.1:1");
            c
        },
        &url,
        &file,
    );

    // NO_PROXY in curl's other forms: a CIDR, `*`, lower case, a list with
    // spaces; --proxy still honours it.
    for (var, value) in [
        ("NO_PROXY", "10.0.0.0/8, 127.0.0.0/8"),
        ("no_proxy", "*"),
        ("NO_PROXY", ".example.com,127.0.0.1"),
    ] {
        round_trip(
            || {
                let mut c = s3().unwrap();
                c.env("ALL_PROXY", "http://127.0.0.1:1").env(var, value);
                c
            },
            &url,
            &file,
        );
        round_trip(
            || {
                let mut c = with_args(s3().unwrap(), &["--proxy", "http://127.0.0.1:1"]);
                c.env(var, value);
                c
            },
            &url,
            &file,
        );
    }
    // And a NO_PROXY that does not name the server leaves it proxied.
    let mut c = with_args(s3().unwrap(), &["--attempts", "1", "ls", &url]);
    c.env("ALL_PROXY", "http://127.0.0.1:1")
        .env("NO_PROXY", "127.0.0.2,.example.com,10.0.0.0/8");
    run(c).assert_one_line_error(1, &["could not connect"]);
}

#[test]
fn proxy_credentials_are_sent_to_the_proxy_and_never_printed() {
    let Some(bucket) = make_bucket(s3, "s3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = small_file(dir.path());
    let url = format!("s3://{bucket}/hello.txt");
    let proxy = Proxy::start();
    let with_creds = proxy.url_with_credentials();
    round_trip(
        || {
            let mut c = with_args(s3().unwrap(), &["-vv"]);
            c.env("HTTP_PROXY", &with_creds);
            c
        },
        &url,
        &file,
    );
    assert!(proxy.relayed() > 0);
    assert!(
        proxy
            .auths()
            .iter()
            .all(|a| a.as_deref() == Some(PROXY_BASIC)),
        "Proxy-Authorization: {:?}",
        proxy.auths()
    );

    // A proxy that wants credentials and gets none, or wrong ones: one
    // line that says so and how to give them.
    proxy.require(PROXY_BASIC);
    let wrong = proxy.url.replace("http://", "http://alice:not-it@");
    for url_of_proxy in [&proxy.url, &wrong] {
        let mut c = with_args(s3().unwrap(), &["ls", &url]);
        c.env("HTTP_PROXY", url_of_proxy);
        run(c).assert_one_line_error(1, &["407", "http://user:password@host:port"]);
    }

    // A proxy that cannot be reached: the error names the problem, not the
    // password (nor does any debug log line).
    for args in [
        vec!["--attempts", "1", "-vv", "ls", url.as_str()],
        vec!["--attempts", "1", "ls", url.as_str()],
    ] {
        let mut c = with_args(s3().unwrap(), &args);
        c.env(
            "HTTP_PROXY",
            format!("http://alice:{PROXY_PASSWORD}@127.0.0.1:1"),
        );
        let r = run(c);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(!r.stderr.contains(PROXY_PASSWORD), "{}", r.stderr);
        assert!(!r.stdout.contains(PROXY_PASSWORD), "{}", r.stdout);
        if !args.contains(&"-vv") {
            r.assert_one_line_error(1, &["could not connect"]);
        }
    }
}

// ---- TLS with a private CA ----

/// A MinIO of the test's own, serving TLS with a certificate for 127.0.0.1
/// signed by a CA made in `dir`; killed (by its PID) when dropped.
struct TlsMinio {
    child: Child,
    endpoint: String,
    ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for TlsMinio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TlsMinio {
    fn start() -> Option<TlsMinio> {
        let cache = std::env::var("SHOAL_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/shoal"));
        let minio = cache.join("bin/minio");
        let have_openssl = Command::new("openssl")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !minio.exists() || !have_openssl {
            if std::env::var("SHOAL_REQUIRE_SERVERS").is_ok_and(|v| v == "1") {
                panic!(
                    "{} or openssl missing but SHOAL_REQUIRE_SERVERS=1",
                    minio.display()
                );
            }
            eprintln!("skipped: no minio binary or no openssl");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let certs = d.join("certs");
        std::fs::create_dir(&certs).unwrap();
        std::fs::write(
            d.join("ext.cnf"),
            "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        openssl(
            d,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=shoal test CA",
            ],
        );
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "certs/private.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        );
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "certs/public.crt",
                "-days",
                "2",
                "-extfile",
                "ext.cnf",
            ],
        );
        let port = free_port();
        let child = Command::new(&minio)
            .args(["server", "--quiet", "--certs-dir"])
            .arg(&certs)
            .args(["--address", &format!("127.0.0.1:{port}")])
            .args(["--console-address", &format!("127.0.0.1:{}", free_port())])
            .arg(d.join("data"))
            .env("MINIO_ROOT_USER", "minioadmin")
            .env("MINIO_ROOT_PASSWORD", SECRET)
            .env("HOME", d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start minio");
        let m = TlsMinio {
            child,
            endpoint: format!("https://127.0.0.1:{port}"),
            ca: d.join("ca.crt"),
            _dir: dir,
        };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "TLS MinIO did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(m)
    }

    /// `shoal` aimed at this MinIO, trusting nothing but the system roots.
    fn shoal(&self) -> Command {
        let mut c = shoal();
        c.env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "minioadmin")
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_REGION", "us-east-1");
        c
    }
}

#[test]
fn tls_minio_with_a_private_ca_is_reached_with_each_way_of_naming_the_ca() {
    let Some(m) = TlsMinio::start() else {
        return;
    };
    let ca = m.ca.to_str().unwrap().to_owned();
    let bucket = unique("tls");
    let mut c = with_args(m.shoal(), &["mb", &format!("s3://{bucket}")]);
    c.env("AWS_CA_BUNDLE", &ca);
    let r = run(c);
    assert_eq!(r.code, 0, "mb over TLS: {}", r.stderr);

    // Without the CA: one line, a certificate error, what to do about it.
    let r = run(with_args(m.shoal(), &["ls", &format!("s3://{bucket}")]));
    r.assert_one_line_error(
        1,
        &[
            "certificate",
            "--ca-bundle",
            "SSL_CERT_FILE",
            "AWS_CA_BUNDLE",
        ],
    );

    let dir = tempfile::tempdir().unwrap();
    let file = small_file(dir.path());
    let url = format!("s3://{bucket}/hello.txt");
    type MakeCommand<'a> = Box<dyn Fn() -> Command + 'a>;
    let ways: [(&str, MakeCommand); 3] = [
        (
            "SSL_CERT_FILE",
            Box::new(|| {
                let mut c = m.shoal();
                c.env("SSL_CERT_FILE", &ca);
                c
            }),
        ),
        (
            "AWS_CA_BUNDLE",
            Box::new(|| {
                let mut c = m.shoal();
                c.env("AWS_CA_BUNDLE", &ca);
                c
            }),
        ),
        (
            "--ca-bundle",
            Box::new(|| with_args(m.shoal(), &["--ca-bundle", &ca])),
        ),
    ];
    for (how, base) in &ways {
        eprintln!("CA given with {how}");
        round_trip(base, &url, &file);
    }

    // Through a CONNECT tunnel, TLS end to end with the private CA.
    let proxy = Proxy::start();
    round_trip(
        || {
            let mut c = with_args(m.shoal(), &["--ca-bundle", &ca]);
            c.env("HTTPS_PROXY", &proxy.url);
            c
        },
        &url,
        &file,
    );
    assert!(proxy.relayed() > 0, "HTTPS_PROXY ignored");
    assert!(
        proxy
            .first_lines()
            .iter()
            .all(|l| l.starts_with("CONNECT 127.0.0.1:")),
        "{:?}",
        proxy.first_lines()
    );

    // CONNECT with credentials; without them, one line saying what to do.
    proxy.require(PROXY_BASIC);
    let with_creds = proxy.url_with_credentials();
    round_trip(
        || {
            let mut c = with_args(m.shoal(), &["--ca-bundle", &ca]);
            c.env("HTTPS_PROXY", &with_creds);
            c
        },
        &url,
        &file,
    );
    let mut c = with_args(m.shoal(), &["--ca-bundle", &ca, "ls", &url]);
    c.env("HTTPS_PROXY", &proxy.url);
    run(c).assert_one_line_error(
        1,
        &[
            "proxy authorization required",
            "http://user:password@host:port",
        ],
    );
}
