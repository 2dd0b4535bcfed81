//! A client with a service of the test's own behind it: what reaches the
//! seam, and what a failure there reads as. No server.

use std::sync::{Arc, Mutex};

use http::Method;

use super::*;
use crate::network::ProxyConfig;
use crate::{Http, HttpConfig};

/// Records each request it is given; answers `200 hi`, or fails as
/// `fail` says.
#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<(Method, String, Option<String>)>>,
    fail: Option<(ErrorKind, bool)>,
}

#[async_trait]
impl HttpService for Recorder {
    async fn call(&self, req: reqwest::Request) -> Result<reqwest::Response, HttpError> {
        let mark = req
            .headers()
            .get("x-mark")
            .map(|v| v.to_str().unwrap().to_owned());
        self.seen
            .lock()
            .unwrap()
            .push((req.method().clone(), req.url().to_string(), mark));
        if let Some((kind, unsent)) = self.fail {
            let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "tcp connect error");
            return Err(HttpError::new(kind, unsent, io));
        }
        Ok(http::Response::new("hi").into())
    }
}

#[tokio::test]
async fn a_client_sends_through_the_service_it_was_given() {
    let recorder = Arc::new(Recorder::default());
    let http = Http::new(reqwest::Client::new(), recorder.clone());
    let url = "http://store.test/b/k";
    let resp = http
        .send(Op::Download, url, http.get(url).header("x-mark", "1"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "hi");
    let seen = recorder.seen.lock().unwrap().clone();
    assert_eq!(seen, [(Method::GET, url.to_owned(), Some("1".to_owned()))]);
}

#[tokio::test]
async fn a_service_failure_reads_as_the_transports_own() {
    let recorder = Arc::new(Recorder {
        fail: Some((ErrorKind::Timeout, true)),
        ..Recorder::default()
    });
    let http = Http::new(reqwest::Client::new(), recorder);
    let url = "http://store.test/b/k";
    let e = http
        .send(Op::Download, url, http.get(url))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    let shown = e.to_string();
    assert!(shown.contains("timed out: tcp connect error"), "{shown}");
    // Nothing was sent: the connection took too long, and the hint says so.
    assert!(shown.contains("--connect-timeout"), "{shown}");
}

/// The pool sends everything but what goes through an `https://` proxy,
/// which only reqwest's client speaks: chosen once, when the client is
/// built.
#[test]
fn the_pool_sends_unless_an_https_proxy_is_set() {
    let direct = HttpConfig {
        plain_http: true,
        ..HttpConfig::default()
    }
    .build()
    .unwrap();
    assert!(format!("{direct:?}").contains("Pooled"), "{direct:?}");
    let http_proxy = HttpConfig {
        plain_http: true,
        proxy: ProxyConfig::default().with_proxy_for_all("--proxy", "http://127.0.0.1:9"),
        ..HttpConfig::default()
    }
    .build()
    .unwrap();
    assert!(
        format!("{http_proxy:?}").contains("Pooled"),
        "{http_proxy:?}"
    );
    let https_proxy = HttpConfig {
        plain_http: true,
        proxy: ProxyConfig::default().with_proxy_for_all("--proxy", "https://127.0.0.1:9"),
        ..HttpConfig::default()
    }
    .build()
    .unwrap();
    assert!(
        !format!("{https_proxy:?}").contains("Pooled"),
        "{https_proxy:?}"
    );
}
