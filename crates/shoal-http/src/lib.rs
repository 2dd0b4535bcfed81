//! How shoal's cloud backends talk HTTP: the client settings, proxies and
//! extra CA roots, the connection pool every store request travels on, and
//! the translation of HTTP failures into [`shoal_core::Error`]s a user can
//! act on.
//!
//! Why a crate of its own: this is about two thousand lines of sockets,
//! TLS and connection accounting (hyper, hyper-util, rustls, reqwest) that
//! only the backends need. Kept in shoal-core, it made every crate that
//! only speaks the vocabulary (keys, metadata, errors, retry, the local
//! store) build and depend on the whole HTTP stack, and it hid the one
//! question a reader of the backends has, "how does a request get sent?",
//! among the vocabulary. Here it depends on shoal-core (for its errors)
//! and the backends depend on it; shoal-core knows nothing of HTTP.
//!
//! Layout:
//! - [`http`]: [`HttpConfig`], the settings of a client, and the error
//!   translation both backends share (status kinds, hints, bodies cut
//!   short);
//! - [`network`]: proxies and extra CA files, read as curl and the AWS CLI
//!   read them;
//! - [`service`]: [`HttpService`], the one method every request is sent
//!   through, whoever sends it;
//! - [`transport`]: [`Http`], the client a store holds, and the connection
//!   pool, the service that sends nearly everything.
#![warn(missing_docs, unreachable_pub)]

pub mod http;
pub mod network;
pub mod service;
pub mod transport;

pub use http::HttpConfig;
pub use service::{HttpError, HttpService};
pub use transport::Http;
