//! Building the stores named in the config file: one store per name, so
//! two S3 endpoints (or two GCS projects) live side by side in one process.
//! A copy between two of them streams: a server-side copy needs one store
//! (`shoal_transfer::ops::cloud_copy::same_store`).

use std::sync::{Arc, OnceLock};

use shoal_core::encryption::{GcsEncryption, S3Encryption};
use shoal_core::{Error, Location, Op, Result, Store, StoreName};

use crate::file::{FileAddressing, StoreFile, StoreSettings, StoreType};
use crate::{Overrides, Sourced, Stores, get_or_try_init, is_plain_http};

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

/// The headers a presigned `method` request to store `name` must carry:
/// its own keys, as [`build`] gives them to it.
pub(crate) fn presign_headers(
    stores: &Stores,
    name: StoreName,
    method: shoal_core::PresignMethod,
) -> Result<Vec<(String, String)>> {
    let Some(n) = stores.named.iter().find(|n| n.name == name) else {
        return Ok(Vec::new());
    };
    let s = &n.settings;
    Ok(match s.kind {
        StoreType::S3 => {
            s3_encryption(s.s3_encryption(&n.from)?, &stores.overrides).presign_headers(method)
        }
        StoreType::Gs => {
            gcs_encryption(s.gcs_encryption()?, &stores.overrides).presign_headers(method)
        }
    })
}

fn build(stores: &Stores, n: &Named) -> Result<Arc<dyn Store>> {
    let s = &n.settings;
    let mut http = stores.http.clone();
    if s.no_proxy {
        http.proxy = Default::default();
    } else if let Some(p) = &s.proxy {
        http.proxy = shoal_http::network::ProxyConfig::from_env().with_proxy_for_all(&n.from, p);
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
            cfg.encryption = s3_encryption(s.s3_encryption(&n.from)?, &stores.overrides);
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
            cfg.encryption = gcs_encryption(s.gcs_encryption()?, &stores.overrides);
            cfg.upload = stores.overrides.gcs_upload;
            cfg.http = http;
            cfg.retry = stores.retry;
            Ok(Arc::new(shoal_gcs::GcsStore::new(cfg)?))
        }
    }
}

/// The file's S3 encryption settings, each replaced by the one given on
/// the command line (or to the Python session) when given: a key typed
/// for this run is never silently dropped because the store is named.
fn s3_encryption(mut file: S3Encryption, o: &Overrides) -> S3Encryption {
    let given = &o.s3_encryption;
    if given.sse.is_some() {
        file.sse = given.sse.clone();
    }
    if given.customer_key.is_some() {
        file.customer_key = given.customer_key.clone();
    }
    if given.copy_source_key.is_some() {
        file.copy_source_key = given.copy_source_key.clone();
    }
    file
}

/// Like [`s3_encryption`], for GCS keys.
fn gcs_encryption(mut file: GcsEncryption, o: &Overrides) -> GcsEncryption {
    let given = &o.gcs_encryption;
    if given.key.is_some() {
        file.key = given.key.clone();
    }
    if !given.decryption_keys.is_empty() {
        file.decryption_keys = given.decryption_keys.clone();
    }
    file
}
