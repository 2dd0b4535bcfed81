//! Building the stores named in the config file: one store per name, so
//! two S3 endpoints (or two GCS projects) live side by side in one process.
//! A copy between two of them streams: a server-side copy needs one store
//! (`shoal_transfer::cloud_copy::same_store`).

use std::sync::{Arc, OnceLock};

use shoal_core::{Error, Location, Op, Result, Store, StoreName};

use crate::file::{FileAddressing, StoreFile, StoreSettings, StoreType};
use crate::{Sourced, Stores, get_or_try_init, is_plain_http};

/// One named store: its settings and, once built, the store.
#[derive(Debug)]
pub(crate) struct Named {
    name: StoreName,
    settings: StoreSettings,
    /// Where the settings came from (for `Sourced` settings' messages).
    from: String,
    built: OnceLock<Arc<dyn Store>>,
}

impl Named {
    pub(crate) fn all(file: StoreFile) -> Vec<Named> {
        let from = file.path.display().to_string();
        file.stores
            .into_iter()
            .map(|(name, settings)| Named {
                name,
                settings,
                from: format!("{from} [stores.{name}]"),
                built: OnceLock::new(),
            })
            .collect()
    }
}

/// The store `name`, built on first use.
pub(crate) fn store(stores: &Stores, name: StoreName, loc: &Location) -> Result<Arc<dyn Store>> {
    let Some(n) = stores.named.iter().find(|n| n.name == name) else {
        return Err(Error::invalid(
            Op::Parse,
            loc.to_string(),
            format!("no store named {name:?} in this session's config file"),
        ));
    };
    get_or_try_init(&n.built, || build(stores, n))
}

fn build(stores: &Stores, n: &Named) -> Result<Arc<dyn Store>> {
    let s = &n.settings;
    let mut http = stores.http.clone();
    if s.no_proxy {
        http.proxy = Default::default();
    } else if let Some(p) = &s.proxy {
        http.proxy = shoal_core::network::ProxyConfig::from_env().with_proxy_for_all(&n.from, p);
    }
    if let Some(ca) = &s.ca_bundle {
        http.ca_files.push(Sourced::new(n.from.clone(), ca.clone()));
    }
    http.plain_http = is_plain_http(s.endpoint_url.as_deref());
    match s.kind {
        StoreType::S3 => {
            let mut cfg = shoal_s3::S3Config::from_env();
            cfg.endpoint = s.endpoint_url.clone();
            if let Some(r) = &s.region {
                cfg.region = r.clone();
            }
            if let Some(p) = &s.profile {
                cfg.profile = Some(p.clone());
            }
            if let (Some(k), Some(sk)) = (&s.access_key_id, &s.secret_access_key) {
                cfg.access_key = Some(k.0.clone());
                cfg.secret_key = Some(sk.0.clone());
                cfg.session_token = s.session_token.as_ref().map(|t| t.0.clone());
            }
            cfg.anonymous = s.no_sign_request;
            cfg.addressing = match s.addressing {
                FileAddressing::Auto => shoal_s3::Addressing::Auto,
                FileAddressing::Path => shoal_s3::Addressing::Path,
                FileAddressing::Virtual => shoal_s3::Addressing::VirtualHost,
            };
            cfg.request_payer = s.request_payer;
            cfg.http = http;
            cfg.http.ca_files.extend(stores.s3_ca_file.clone());
            cfg.retry = stores.retry;
            Ok(Arc::new(shoal_s3::S3Store::new(cfg)?))
        }
        StoreType::Gs => {
            let mut cfg = shoal_gcs::GcsConfig::from_env();
            cfg.endpoint = s.endpoint_url.clone();
            cfg.anonymous = s.no_sign_request;
            cfg.credentials_file = s.credentials_file.clone();
            if s.project.is_some() {
                cfg.project = s.project.clone();
            }
            if s.billing_project.is_some() {
                cfg.user_project = s.billing_project.clone();
            }
            cfg.upload = stores.overrides.gcs_upload;
            cfg.http = http;
            cfg.retry = stores.retry;
            Ok(Arc::new(shoal_gcs::GcsStore::new(cfg)?))
        }
    }
}
