//! From flags and environment to ready-to-use stores and engine options.
//!
//! Environment variables are read here and in the backends' `from_env`
//! only, once. Stores are built on first use: `shoal ls gs://…` never
//! builds an S3 client, and no credential is looked up until a request
//! needs one (cold start is part of the product).

use std::sync::{Arc, OnceLock};

use shoal_core::http::HttpConfig;
use shoal_core::local::LocalStore;
use shoal_core::retry::RetryPolicy;
use shoal_core::{Location, Result, Scheme, Store};
use shoal_transfer::TransferOptions;

use crate::args::{Addressing, Global};

/// Everything a command needs.
pub(crate) struct Context {
    pub(crate) quiet: bool,
    pub(crate) retry: RetryPolicy,
    pub(crate) transfer: TransferOptions,
    http: HttpConfig,
    endpoint_url: Option<String>,
    gcs_endpoint_url: Option<String>,
    s3_endpoint_url: Option<String>,
    no_sign_request: bool,
    region: Option<String>,
    profile: Option<String>,
    addressing: Addressing,
    gcs: OnceLock<Arc<dyn Store>>,
    s3: OnceLock<Arc<dyn Store>>,
    local: OnceLock<Arc<dyn Store>>,
}

impl Context {
    pub(crate) fn new(g: &Global) -> Self {
        let mut transfer = TransferOptions::default();
        if let Some(w) = g.workers {
            transfer.workers = w;
        }
        let http = HttpConfig {
            pool_max_idle_per_host: transfer.workers.max(16) * 2,
            ..HttpConfig::default()
        };
        Context {
            quiet: g.quiet,
            retry: RetryPolicy {
                max_attempts: g.attempts,
                ..RetryPolicy::default()
            },
            transfer,
            http,
            endpoint_url: g.endpoint_url.clone(),
            gcs_endpoint_url: g.gcs_endpoint_url.clone(),
            s3_endpoint_url: g.s3_endpoint_url.clone(),
            no_sign_request: g.no_sign_request,
            region: g.region.clone(),
            profile: g.profile.clone(),
            addressing: g.s3_addressing,
            gcs: OnceLock::new(),
            s3: OnceLock::new(),
            local: OnceLock::new(),
        }
    }

    /// The store serving `loc`'s scheme, built on first use.
    pub(crate) fn store(&self, loc: &Location) -> Result<Arc<dyn Store>> {
        match loc.scheme {
            Scheme::Gs => get_or_try_init(&self.gcs, || self.build_gcs()),
            Scheme::S3 => get_or_try_init(&self.s3, || self.build_s3()),
            Scheme::File => Ok(self
                .local
                .get_or_init(|| Arc::new(LocalStore::new("/")))
                .clone()),
        }
    }

    fn build_gcs(&self) -> Result<Arc<dyn Store>> {
        let mut cfg = shoal_gcs::GcsConfig::from_env();
        if let Some(ep) = self
            .gcs_endpoint_url
            .as_ref()
            .or(self.endpoint_url.as_ref())
        {
            cfg.endpoint = Some(ep.clone());
        }
        if self.no_sign_request {
            cfg.anonymous = true;
        }
        cfg.http = self.http.clone();
        cfg.http.plain_http = is_plain_http(cfg.endpoint.as_deref());
        cfg.retry = self.retry;
        Ok(Arc::new(shoal_gcs::GcsStore::new(cfg)?))
    }

    fn build_s3(&self) -> Result<Arc<dyn Store>> {
        let mut cfg = shoal_s3::S3Config::from_env();
        if let Some(ep) = self.s3_endpoint_url.as_ref().or(self.endpoint_url.as_ref()) {
            cfg.endpoint = Some(ep.clone());
        }
        if let Some(r) = &self.region {
            cfg.region = r.clone();
        }
        if let Some(p) = &self.profile {
            cfg.profile = Some(p.clone());
        }
        cfg.anonymous = self.no_sign_request;
        cfg.addressing = match self.addressing {
            Addressing::Auto => shoal_s3::Addressing::Auto,
            Addressing::Path => shoal_s3::Addressing::Path,
            Addressing::Virtual => shoal_s3::Addressing::VirtualHost,
        };
        cfg.http = self.http.clone();
        cfg.http.plain_http = is_plain_http(cfg.endpoint.as_deref());
        cfg.retry = self.retry;
        Ok(Arc::new(shoal_s3::S3Store::new(cfg)?))
    }
}

impl Context {
    /// A store lookup for batch engines: the stores for `locs`' schemes are
    /// built now (so a credential problem stops the batch before it starts)
    /// and shared by every action.
    pub(crate) fn store_for(&self, locs: &[&Location]) -> Result<shoal_transfer::batch::StoreFor> {
        let mut stores: Vec<(Scheme, Arc<dyn Store>)> = Vec::new();
        for l in locs {
            if !stores.iter().any(|(s, _)| *s == l.scheme) {
                stores.push((l.scheme, self.store(l)?));
            }
        }
        Ok(Arc::new(move |loc: &Location| {
            stores
                .iter()
                .find(|(s, _)| *s == loc.scheme)
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
