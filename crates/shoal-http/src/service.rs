//! The one seam every request is sent through: [`HttpService`], a request
//! in, a response (or why none came) out.
//!
//! Why a seam: there are two ways to send, our own connection pool
//! ([`crate::transport`]) and reqwest's client, which alone speaks TLS to
//! an `https://` proxy. Before, [`Http`](crate::Http) held both and chose
//! at every send; now it holds one `Arc<dyn HttpService>`, chosen once
//! where the client is built ([`HttpConfig::build`](crate::HttpConfig::build)),
//! and every proxy kind goes through the same method. A test can put a
//! service of its own behind a client ([`Http::new`](crate::Http::new))
//! and see the requests a backend sends, with no server.
//!
//! The shape is object_store's `HttpService`: one async method, built
//! requests in (reqwest's types, so the backends' request building and
//! response reading do not change), no knowledge of which operation or
//! store asked. What the failure meant to the user (the operation, the
//! URL, the hint) is added above the seam, in one place
//! ([`HttpError::into_error`]), so every service's failures read the same.

use std::fmt;

use async_trait::async_trait;
use shoal_core::error::{Error, ErrorKind, Op};

/// Sends requests: our connection pool, reqwest's own client (through an
/// `https://` proxy), or a test double.
#[async_trait]
pub trait HttpService: Send + Sync + fmt::Debug + 'static {
    /// Sends `req` and returns the response once its head came; any HTTP
    /// status is `Ok`. An `Err` is a request that got no answer: no
    /// connection, a connection that broke, or none in time.
    async fn call(&self, req: reqwest::Request) -> Result<reqwest::Response, HttpError>;
}

/// reqwest's own client: connections, proxies and TLS all its own. Used
/// through an `https://` proxy, which our pool does not speak.
#[async_trait]
impl HttpService for reqwest::Client {
    async fn call(&self, req: reqwest::Request) -> Result<reqwest::Response, HttpError> {
        self.execute(req).await.map_err(HttpError::from)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no answer, as the service that sent it judged it:
/// what kind of failure, and whether the request never left (no
/// connection was made: safe to send again whatever it was).
///
/// It reads as the error it wraps (its message and its sources), so the
/// words a user sees are the transport's own.
#[derive(Debug)]
pub struct HttpError {
    kind: ErrorKind,
    unsent: bool,
    source: BoxError,
}

impl HttpError {
    /// A failure of `kind` ([`ErrorKind::Connect`], [`ErrorKind::Timeout`],
    /// [`ErrorKind::Protocol`] or [`ErrorKind::InvalidInput`] for a request
    /// that cannot be sent); `unsent` when the request never reached a
    /// connection.
    pub fn new(kind: ErrorKind, unsent: bool, source: impl Into<BoxError>) -> Self {
        HttpError {
            kind,
            unsent,
            source: source.into(),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether the request never left.
    pub fn unsent(&self) -> bool {
        self.unsent
    }

    /// The error a user is shown for `op` on `url`: the same words, hints
    /// and retry verdict whichever service failed.
    pub fn into_error(self, op: Op, url: &str) -> Error {
        let (kind, unsent) = (self.kind, self.unsent);
        crate::http::transport_failure(op, url, kind, unsent, self)
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

impl From<reqwest::Error> for HttpError {
    fn from(err: reqwest::Error) -> Self {
        let (kind, unsent) = crate::http::judge_reqwest(&err);
        HttpError::new(kind, unsent, err.without_url())
    }
}

#[cfg(test)]
mod tests;
