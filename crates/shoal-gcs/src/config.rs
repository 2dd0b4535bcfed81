//! Where to connect and how to authenticate, read from the environment in
//! one place.
//!
//! The emulator convention is Google's own: client libraries in every
//! language switch to an emulator when `STORAGE_EMULATOR_HOST` is set, and
//! emulators take no credentials, so the same variable also turns signing
//! off. Nothing else in this crate reads the environment, except
//! `google-cloud-auth`, which owns the ADC search.

use shoal_core::retry::RetryPolicy;
use shoal_http::http::HttpConfig;

/// The public endpoint of the JSON API.
pub(crate) const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";

/// How a [`crate::GcsStore`] connects.
#[derive(Debug, Clone, Default)]
pub struct GcsConfig {
    /// Base URL, e.g. `http://127.0.0.1:4443`; `None` is the public
    /// `https://storage.googleapis.com`.
    pub endpoint: Option<String>,
    /// Send no `Authorization` header at all (public data, emulators).
    pub anonymous: bool,
    /// Project that owns new buckets (`create_bucket`) and whose buckets
    /// `list_buckets` lists.
    pub project: Option<String>,
    /// Project billed for requests to requester-pays buckets: sent as
    /// `userProject` on every request (`--billing-project`).
    pub user_project: Option<String>,
    /// `--encryption-key`: CSEK or CMEK for every object request.
    pub encryption: shoal_core::encryption::GcsEncryption,
    /// HTTP client settings.
    pub http: HttpConfig,
    /// Retry policy for every request.
    pub retry: RetryPolicy,
    /// Whether the server has the XML API's multipart upload, which
    /// multipart uploads then use unless told to compose. `None`: yes on
    /// Google's own endpoints (`*.googleapis.com`), no elsewhere: no
    /// emulator has it.
    pub xml_multipart: Option<bool>,
    /// Whether the server enforces `ifGenerationMatch` on a rewrite, so a
    /// copy with a destination precondition (`--no-clobber`,
    /// `--if-generation-match`, a move's) can stay server-side. `None`:
    /// yes on Google's own endpoints, no elsewhere (fake-gcs-server ignores
    /// it); `SHOAL_GCS_REWRITE_PRECONDITIONS=1` declares a server that
    /// does (Google's storage-testbench).
    pub rewrite_preconditions: Option<bool>,
    /// How uploads are made (`--gcs-upload`), which the engine asks for
    /// through [`shoal_core::Capabilities::upload_method`].
    pub upload: shoal_core::UploadMethod,
    /// A credentials JSON file (service-account key or a user's
    /// `authorized_user` file) used instead of Application Default
    /// Credentials' search; read on the first request that needs it.
    pub credentials_file: Option<std::path::PathBuf>,
}

impl GcsConfig {
    /// Reads `STORAGE_EMULATOR_HOST` (endpoint, and anonymous access), the
    /// project from `GOOGLE_CLOUD_PROJECT` or `CLOUDSDK_CORE_PROJECT`, and
    /// the billing project from `CLOUDSDK_BILLING_QUOTA_PROJECT` (what
    /// `gcloud storage --billing-project` sets).
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`GcsConfig::from_env`] over any variable source, so it can be tested
    /// without touching the process environment.
    pub(crate) fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let non_empty = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let mut cfg = GcsConfig::default();
        if let Some(host) = non_empty("STORAGE_EMULATOR_HOST") {
            let host = host.trim().trim_end_matches('/');
            // Google's libraries accept both `host:port` and a full URL;
            // emulators speak plain HTTP, so that is the scheme to add.
            cfg.endpoint = Some(if host.contains("://") {
                host.to_owned()
            } else {
                format!("http://{host}")
            });
            cfg.anonymous = true;
        }
        cfg.project =
            non_empty("GOOGLE_CLOUD_PROJECT").or_else(|| non_empty("CLOUDSDK_CORE_PROJECT"));
        cfg.user_project = non_empty("CLOUDSDK_BILLING_QUOTA_PROJECT");
        cfg.rewrite_preconditions = non_empty("SHOAL_GCS_REWRITE_PRECONDITIONS")
            .map(|v| matches!(v.trim(), "1" | "true" | "yes"));
        cfg
    }

    /// Whether a rewrite's destination precondition is enforced.
    pub(crate) fn has_rewrite_preconditions(&self) -> bool {
        self.rewrite_preconditions
            .unwrap_or_else(|| self.is_google())
    }

    /// Whether multipart uploads go through the XML API by default.
    pub(crate) fn has_xml_multipart(&self) -> bool {
        self.xml_multipart.unwrap_or_else(|| self.is_google())
    }

    /// Whether the endpoint is Google's own (`*.googleapis.com`, or none).
    fn is_google(&self) -> bool {
        match &self.endpoint {
            None => true,
            Some(e) => {
                let host = e.split_once("://").map_or(e.as_str(), |(_, h)| h);
                let host = host.split(['/', ':']).next().unwrap_or("");
                host.to_ascii_lowercase().ends_with(".googleapis.com")
            }
        }
    }

    /// The base URL without a trailing `/`.
    pub(crate) fn base_url(&self) -> String {
        self.endpoint
            .as_deref()
            .unwrap_or(DEFAULT_ENDPOINT)
            .trim_end_matches('/')
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> GcsConfig {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        GcsConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn emulator_host_with_and_without_scheme() {
        let c = cfg(&[("STORAGE_EMULATOR_HOST", "http://127.0.0.1:4443/")]);
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:4443"));
        assert!(c.anonymous);
        let c = cfg(&[("STORAGE_EMULATOR_HOST", "localhost:9023")]);
        assert_eq!(c.endpoint.as_deref(), Some("http://localhost:9023"));
        assert!(c.anonymous);
    }

    #[test]
    fn no_emulator_means_public_endpoint_and_credentials() {
        let c = cfg(&[
            ("STORAGE_EMULATOR_HOST", ""),
            ("CLOUDSDK_CORE_PROJECT", "p2"),
        ]);
        assert_eq!(c.endpoint, None);
        assert!(!c.anonymous);
        assert_eq!(c.base_url(), DEFAULT_ENDPOINT);
        assert_eq!(c.project.as_deref(), Some("p2"));
        let c = cfg(&[
            ("GOOGLE_CLOUD_PROJECT", "p1"),
            ("CLOUDSDK_CORE_PROJECT", "p2"),
        ]);
        assert_eq!(c.project.as_deref(), Some("p1"));
        assert_eq!(c.user_project, None);
        let c = cfg(&[("CLOUDSDK_BILLING_QUOTA_PROJECT", "payer")]);
        assert_eq!(c.user_project.as_deref(), Some("payer"));
    }

    #[test]
    fn xml_multipart_only_where_google_serves_it() {
        let with = |endpoint: Option<&str>| GcsConfig {
            endpoint: endpoint.map(str::to_owned),
            ..Default::default()
        };
        assert!(with(None).has_xml_multipart());
        assert!(with(Some("https://storage.googleapis.com/")).has_xml_multipart());
        assert!(with(Some("https://storage-abc.p.googleapis.com")).has_xml_multipart());
        assert!(!with(Some("http://127.0.0.1:4443")).has_xml_multipart());
        assert!(!with(Some("http://googleapis.com.evil:80")).has_xml_multipart());
        let forced = GcsConfig {
            xml_multipart: Some(true),
            ..with(Some("http://127.0.0.1:9"))
        };
        assert!(forced.has_xml_multipart());
    }
}
