//! From flags and environment to ready-to-use stores and engine options.
//!
//! Store construction lives in `shoal-config` (shared with the Python
//! package); this module only turns the parsed flags into its overrides.

use std::sync::Arc;

use shoal_config::{Overrides, Stores};
use shoal_core::retry::RetryPolicy;
use shoal_core::{Location, Result, Store};
use shoal_transfer::ops::rate::Rates;
use shoal_transfer::{Run, TransferOptions};

use crate::args::{Addressing, Global, LimitFlags};

/// Everything a command needs.
pub(crate) struct Context {
    pub(crate) quiet: bool,
    /// `-v` given: batches name every item they skip.
    pub(crate) verbose: bool,
    /// `--json` given to a verb that changes things: one JSON object per
    /// action and a summary object on stdout.
    pub(crate) json: bool,
    pub(crate) retry: RetryPolicy,
    /// The user's transfer settings, before a command's own flags.
    pub(crate) transfer: TransferOptions,
    /// `--rate-limit` and `--max-requests-per-sec`: the command's limits,
    /// made once and shared by its transfers and its reads.
    pub(crate) rates: Rates,
    stores: Stores,
}

impl Context {
    pub(crate) fn new(
        g: &Global,
        limits: Option<&LimitFlags>,
        json: bool,
        gcs_upload: shoal_core::UploadMethod,
    ) -> Self {
        let mut transfer = TransferOptions::default();
        let mut rates = Rates::default();
        if let Some(w) = g.workers {
            transfer.workers = w;
            transfer.small_workers = w;
        }
        if let Some(l) = limits {
            rates = Rates::new(l.rate_limit, l.max_requests_per_sec);
            transfer.server_side = !l.no_server_side;
        }
        let retry = RetryPolicy {
            max_attempts: g.attempts,
            ..RetryPolicy::default()
        };
        let overrides = Overrides {
            endpoint_url: g.endpoint_url.clone(),
            gcs_endpoint_url: g.gcs_endpoint_url.clone(),
            s3_endpoint_url: g.s3_endpoint_url.clone(),
            no_sign_request: g.no_sign_request,
            region: g.region.clone(),
            profile: g.profile.clone(),
            addressing: match g.s3_addressing {
                Addressing::Auto => shoal_config::Addressing::Auto,
                Addressing::Path => shoal_config::Addressing::Path,
                Addressing::Virtual => shoal_config::Addressing::VirtualHost,
            },
            proxy: g
                .proxy
                .as_ref()
                .map(|p| shoal_config::Sourced::new("--proxy", p.clone())),
            no_proxy: g.no_proxy,
            ca_bundle: g
                .ca_bundle
                .as_ref()
                .map(|f| shoal_config::Sourced::new("--ca-bundle", f.clone())),
            billing_project: g.billing_project.clone(),
            request_payer: g.request_payer.is_some(),
            s3_encryption: g.encryption.s3(),
            gcs_encryption: g.encryption.gcs(),
            gcs_upload,
            ..Overrides::default()
        };
        // Connections kept for every request a batch may have in flight.
        let in_flight = transfer.workers + transfer.small_workers;
        Context {
            quiet: g.quiet,
            verbose: g.verbose > 0,
            json,
            retry,
            stores: {
                let mut stores = Stores::new(overrides, in_flight, retry);
                if let Some(secs) = g.read_timeout {
                    stores = stores.with_read_timeout(std::time::Duration::from_secs(secs));
                }
                if let Some(secs) = g.connect_timeout {
                    stores = stores.with_connect_timeout(std::time::Duration::from_secs(secs));
                }
                stores
            },
            transfer,
            rates,
        }
    }

    /// The stores of the config file, as `NAME://bucket/key`.
    pub(crate) fn with_store_file(mut self, file: shoal_config::StoreFile) -> Self {
        self.stores = self.stores.with_store_file(file);
        self
    }

    /// The store serving `loc`'s scheme, built on first use.
    pub(crate) fn store(&self, loc: &Location) -> Result<Arc<dyn Store>> {
        self.stores.store(loc)
    }

    /// See [`Stores::presign_headers`].
    pub(crate) fn presign_headers(
        &self,
        loc: &Location,
        method: shoal_core::PresignMethod,
    ) -> Result<Vec<(String, String)>> {
        self.stores.presign_headers(loc, method)
    }

    /// See [`Stores::store_for`].
    pub(crate) fn store_for(&self, locs: &[&Location]) -> Result<shoal_core::StoreFor> {
        self.stores.store_for(locs)
    }

    /// A run of `opts` within the command's rates.
    pub(crate) fn run(&self, opts: TransferOptions) -> Run {
        Run::new(opts).with_rates(self.rates.clone())
    }
}
