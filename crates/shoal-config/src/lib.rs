//! From environment and overrides to ready-to-use stores.
//!
//! Shared by the CLI (flags) and the Python package (keyword arguments), so
//! `shoal cp` and `shoal.download_many_to_path` find the same endpoints and
//! credentials. Environment variables are read here and in the backends'
//! `from_env` only, once per store. Stores are built on first use:
//! `ls gs://…` never builds an S3 client, and no credential is looked up
//! until a request needs one (cold start is part of the product).

#![warn(missing_docs, unreachable_pub)]

mod file;
mod named;

pub use file::{Secret, StoreFile, StoreSettings, StoreType};

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use shoal_core::StoreFor;
use shoal_core::retry::RetryPolicy;
use shoal_core::{Location, Result, Scheme, Store};
use shoal_http::http::HttpConfig;
use shoal_http::network::ProxyConfig;
pub use shoal_http::network::Sourced;
use shoal_local::LocalStore;

pub use shoal_s3::Addressing;

/// What the caller overrides on top of the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Endpoint for every cloud scheme (`--endpoint-url`).
    pub endpoint_url: Option<String>,
    /// Endpoint for `gs://` only; wins over `endpoint_url`.
    pub gcs_endpoint_url: Option<String>,
    /// Endpoint for `s3://` only; wins over `endpoint_url`.
    pub s3_endpoint_url: Option<String>,
    /// Unsigned requests (public buckets).
    pub no_sign_request: bool,
    /// S3 signing region.
    pub region: Option<String>,
    /// AWS profile.
    pub profile: Option<String>,
    /// S3 URL style.
    pub addressing: Addressing,
    /// Explicit S3 access key id (the Python package's `key=`).
    pub s3_access_key: Option<String>,
    /// Explicit S3 secret access key.
    pub s3_secret_key: Option<String>,
    /// One proxy for every request (`--proxy`), instead of the proxy
    /// variables; `NO_PROXY` still applies.
    pub proxy: Option<Sourced<String>>,
    /// Ignore the proxy variables: connect to every server directly.
    pub no_proxy: bool,
    /// A PEM file of CA certificates trusted on top of the platform's
    /// roots (`--ca-bundle`).
    pub ca_bundle: Option<Sourced<PathBuf>>,
    /// GCS requester pays: the project billed (`userProject`); wins over
    /// `CLOUDSDK_BILLING_QUOTA_PROJECT`.
    pub billing_project: Option<String>,
    /// S3 requester pays: send `x-amz-request-payer: requester`.
    pub request_payer: bool,
    /// S3 server-side encryption and customer keys (`--sse`,
    /// `--sse-c-key-file`...), sent with every object request.
    pub s3_encryption: shoal_core::encryption::S3Encryption,
    /// GCS customer-supplied or Cloud KMS key (`--encryption-key`).
    pub gcs_encryption: shoal_core::encryption::GcsEncryption,
    /// How GCS takes uploads (`--gcs-upload`).
    pub gcs_upload: shoal_core::UploadMethod,
}

/// The stores of one process (CLI run, Python session), built lazily per
/// scheme and shared by every operation.
#[derive(Debug)]
pub struct Stores {
    overrides: Overrides,
    http: HttpConfig,
    /// `AWS_CA_BUNDLE`: trusted by the S3 store only, as the AWS CLI does.
    s3_ca_file: Option<Sourced<PathBuf>>,
    retry: RetryPolicy,
    gcs: OnceLock<Arc<dyn Store>>,
    s3: OnceLock<Arc<dyn Store>>,
    local: OnceLock<Arc<dyn Store>>,
    /// The stores named in the config file, each built on first use.
    named: Vec<named::Named>,
}

impl Stores {
    /// Stores for `workers` requests in flight (the connection pool keeps
    /// twice that, at least 32, idle connections per host).
    pub fn new(overrides: Overrides, workers: usize, retry: RetryPolicy) -> Self {
        let mut http = HttpConfig {
            pool_max_idle_per_host: workers.max(16) * 2,
            ..HttpConfig::default()
        };
        if !overrides.no_proxy {
            http.proxy = ProxyConfig::from_env();
            if let Some(p) = &overrides.proxy {
                http.proxy = http.proxy.with_proxy_for_all(&p.from, &p.value);
            }
        }
        let file_var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(|v| Sourced::new(name, PathBuf::from(v)))
        };
        http.system_ca_file = file_var("SSL_CERT_FILE");
        http.ca_files.extend(overrides.ca_bundle.clone());
        Stores {
            s3_ca_file: file_var("AWS_CA_BUNDLE"),
            overrides,
            http,
            retry,
            gcs: OnceLock::new(),
            s3: OnceLock::new(),
            local: OnceLock::new(),
            named: Vec::new(),
        }
    }

    /// The stores of a config file ([`StoreFile::load`]), as
    /// `NAME://bucket/key`.
    pub fn with_store_file(mut self, file: StoreFile) -> Self {
        self.named = named::Named::all(file);
        self
    }

    /// Longest silence on a connection (no byte of a request taken by the
    /// server, none of its answer) before the request is dropped and
    /// retried (default 60 s); stores built later use it.
    pub fn with_read_timeout(mut self, t: std::time::Duration) -> Self {
        self.http.read_timeout = t;
        self
    }

    /// Longest time to make a connection (TCP, a proxy's `CONNECT` and
    /// TLS together) before the attempt fails and is retried (default
    /// 10 s); stores built later use it.
    pub fn with_connect_timeout(mut self, t: std::time::Duration) -> Self {
        self.http.connect_timeout = t;
        self
    }

    /// The retry policy the stores were built with.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }
    /// The headers a presigned `method` request to `loc`'s store must
    /// be sent with: the encryption keys it was given, signed into the URL
    /// by its `presign` (shown to the user, the key itself masked).
    pub fn presign_headers(
        &self,
        loc: &Location,
        method: shoal_core::PresignMethod,
    ) -> Result<Vec<(String, String)>> {
        if let Some(name) = loc.store {
            return named::presign_headers(self, name, method);
        }
        Ok(match loc.scheme {
            Scheme::S3 => self.overrides.s3_encryption.presign_headers(method),
            Scheme::Gs => self.overrides.gcs_encryption.presign_headers(method),
            Scheme::File => Vec::new(),
        })
    }

    /// The store serving `loc`'s scheme, built on first use.
    pub fn store(&self, loc: &Location) -> Result<Arc<dyn Store>> {
        if let Some(name) = loc.store {
            return named::store(self, name, loc);
        }
        match loc.scheme {
            Scheme::Gs => get_or_try_init(&self.gcs, || self.build_gcs()),
            Scheme::S3 => get_or_try_init(&self.s3, || self.build_s3()),
            Scheme::File => Ok(self
                .local
                .get_or_init(|| Arc::new(LocalStore::new("/")))
                .clone()),
        }
    }

    /// A store lookup for batch engines: the stores for `locs`' schemes are
    /// built now (so a credential problem stops the batch before it starts)
    /// and shared by every action.
    pub fn store_for(&self, locs: &[&Location]) -> Result<StoreFor> {
        let mut stores: Vec<(&Location, Arc<dyn Store>)> = Vec::new();
        for l in locs {
            if !stores.iter().any(|(s, _)| s.same_store(l)) {
                stores.push((l, self.store(l)?));
            }
        }
        /// Which store: its scheme and, for a named one, its name.
        type Key = (Scheme, Option<shoal_core::StoreName>);
        let stores: Vec<(Key, Arc<dyn Store>)> = stores
            .into_iter()
            .map(|(l, s)| ((l.scheme, l.store), s))
            .collect();
        Ok(Arc::new(move |loc: &Location| {
            stores
                .iter()
                .find(|(s, _)| *s == (loc.scheme, loc.store))
                .map(|(_, st)| st.clone())
                .ok_or_else(|| {
                    shoal_core::Error::invalid(
                        shoal_core::Op::Copy,
                        loc.to_string(),
                        "no store for this scheme in this batch",
                    )
                })
        }))
    }

    fn build_gcs(&self) -> Result<Arc<dyn Store>> {
        let o = &self.overrides;
        let mut cfg = shoal_gcs::GcsConfig::from_env();
        if let Some(ep) = o.gcs_endpoint_url.as_ref().or(o.endpoint_url.as_ref()) {
            cfg.endpoint = Some(ep.clone());
        }
        if o.no_sign_request {
            cfg.anonymous = true;
        }
        if o.billing_project.is_some() {
            cfg.user_project = o.billing_project.clone();
        }
        cfg.encryption = o.gcs_encryption.clone();
        cfg.upload = o.gcs_upload;
        cfg.http = self.http.clone();
        cfg.http.plain_http = is_plain_http(cfg.endpoint.as_deref());
        cfg.retry = self.retry;
        Ok(Arc::new(shoal_gcs::GcsStore::new(cfg)?))
    }

    fn build_s3(&self) -> Result<Arc<dyn Store>> {
        let o = &self.overrides;
        let mut cfg = shoal_s3::S3Config::from_env();
        if let Some(ep) = o.s3_endpoint_url.as_ref().or(o.endpoint_url.as_ref()) {
            cfg.endpoint = Some(ep.clone());
        }
        if let Some(r) = &o.region {
            cfg.region = r.clone();
        }
        if let Some(p) = &o.profile {
            cfg.profile = Some(p.clone());
        }
        if o.s3_access_key.is_some() {
            cfg.access_key = o.s3_access_key.clone();
            cfg.secret_key = o.s3_secret_key.clone();
        }
        cfg.anonymous = o.no_sign_request;
        cfg.addressing = o.addressing;
        cfg.request_payer = o.request_payer;
        cfg.encryption = o.s3_encryption.clone();
        cfg.http = self.http.clone();
        cfg.http.ca_files.extend(self.s3_ca_file.clone());
        cfg.http.plain_http = is_plain_http(cfg.endpoint.as_deref());
        cfg.retry = self.retry;
        Ok(Arc::new(shoal_s3::S3Store::new(cfg)?))
    }
}

/// Whether every request goes to a plain-http endpoint (no TLS to set up).
fn is_plain_http(endpoint: Option<&str>) -> bool {
    endpoint.is_some_and(|e| {
        e.get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
    })
}

fn get_or_try_init(
    cell: &OnceLock<Arc<dyn Store>>,
    f: impl FnOnce() -> Result<Arc<dyn Store>>,
) -> Result<Arc<dyn Store>> {
    if let Some(s) = cell.get() {
        return Ok(s.clone());
    }
    let s = f()?;
    Ok(cell.get_or_init(|| s).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_recognised_by_scheme_only() {
        assert!(is_plain_http(Some("http://127.0.0.1:9000")));
        assert!(is_plain_http(Some("HTTP://host")));
        assert!(!is_plain_http(Some("https://host")));
        assert!(!is_plain_http(None));
    }

    #[test]
    fn local_store_needs_no_configuration() {
        let s = Stores::new(Overrides::default(), 4, RetryPolicy::default());
        let loc = Location::parse("/tmp/x").unwrap();
        assert_eq!(s.store(&loc).unwrap().scheme(), Scheme::File);
    }
}
