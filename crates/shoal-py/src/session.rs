//! A `Session`: configuration (environment + keyword overrides) and the
//! stores built from it, shared by every call that names it.
//!
//! The Python package keeps one per distinct set of keywords, so
//! connection pools are reused across calls. A session pickles as its
//! keywords (Dask ships it to workers, which build their own stores).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use shoal_config::{Addressing, Overrides, Stores};
use shoal_core::retry::RetryPolicy;
use shoal_transfer::TransferOptions;

use crate::errors::IntoPyResult;

/// Stores and defaults for a group of calls.
#[pyclass(frozen, module = "shoal._shoal")]
pub(crate) struct Session {
    pub(crate) stores: Arc<Stores>,
    pub(crate) workers: usize,
    /// `workers=` as given to the session (None: the defaults).
    explicit_workers: Option<usize>,
    kwargs: Py<PyDict>,
}

impl Session {
    /// The transfer settings of one call: `workers` requests in flight
    /// (the session's default when None) and, if given, the slice/part
    /// size. The call makes its run's budgets (`shoal_transfer::Run`).
    pub(crate) fn transfer_options(
        &self,
        workers: Option<usize>,
        chunk_size: Option<u64>,
    ) -> TransferOptions {
        let mut o = TransferOptions {
            workers: workers.unwrap_or(self.workers).max(1),
            ..TransferOptions::default()
        };
        // A count the caller chose bounds every request, as --workers does.
        if let Some(w) = workers.or(self.explicit_workers) {
            o.small_workers = w.max(1);
        }
        if let Some(c) = chunk_size {
            o.min_slice = c.max(1);
            o.part_size = c.max(1);
        }
        o
    }

    pub(crate) fn retry(&self) -> RetryPolicy {
        self.stores.retry()
    }
}

/// The keywords of `Session(...)`, as Python gave them.
struct Keywords<'a> {
    endpoint_url: Option<String>,
    gcs_endpoint_url: Option<String>,
    s3_endpoint_url: Option<String>,
    no_sign_request: bool,
    region: Option<String>,
    profile: Option<String>,
    key: Option<String>,
    secret: Option<String>,
    s3_addressing: &'a str,
    workers: Option<usize>,
    attempts: Option<u32>,
    read_timeout: Option<f64>,
    connect_timeout: Option<f64>,
    proxy: Option<String>,
    ca_bundle: Option<std::path::PathBuf>,
    billing_project: Option<String>,
    request_payer: bool,
    encryption: EncryptionKeywords,
}

/// `sse=`, `sse_kms_key_id=`, `sse_c_key=`, `sse_c_copy_source_key=`: the
/// CLI's `--sse`, `--sse-kms-key-id`, `--sse-c-key-file` and
/// `--sse-c-copy-source-key-file`, keys as bytes (32 raw, or their base64).
#[derive(Default)]
struct EncryptionKeywords {
    sse: Option<String>,
    sse_kms_key_id: Option<String>,
    sse_c_key: Option<Vec<u8>>,
    sse_c_copy_source_key: Option<Vec<u8>>,
    encryption_key: Option<String>,
    decryption_keys: Option<Vec<String>>,
}

impl EncryptionKeywords {
    fn to_dict(&self, kwargs: &Bound<'_, PyDict>) -> PyResult<()> {
        for (k, v) in [
            ("sse", &self.sse),
            ("sse_kms_key_id", &self.sse_kms_key_id),
            ("encryption_key", &self.encryption_key),
        ] {
            if let Some(v) = v {
                kwargs.set_item(k, v)?;
            }
        }
        for (k, v) in [
            ("sse_c_key", &self.sse_c_key),
            ("sse_c_copy_source_key", &self.sse_c_copy_source_key),
        ] {
            if let Some(v) = v {
                kwargs.set_item(k, pyo3::types::PyBytes::new(kwargs.py(), v))?;
            }
        }
        if let Some(v) = &self.decryption_keys {
            kwargs.set_item("decryption_keys", v.clone())?;
        }
        Ok(())
    }

    fn gcs(&self) -> PyResult<shoal_core::encryption::GcsEncryption> {
        let key = self
            .encryption_key
            .as_deref()
            .map(shoal_core::encryption::GcsKey::parse)
            .transpose()
            .map_err(|e| {
                pyo3::exceptions::PyValueError::new_err(
                    e.message().replace("--encryption-key", "encryption_key="),
                )
            })?;
        let decryption_keys = match &self.decryption_keys {
            Some(keys) => {
                shoal_core::encryption::GcsEncryption::parse_decryption_keys(&keys.join(","))
                    .map_err(|e| {
                        pyo3::exceptions::PyValueError::new_err(
                            e.message().replace("--decryption-keys", "decryption_keys="),
                        )
                    })?
            }
            None => Vec::new(),
        };
        Ok(shoal_core::encryption::GcsEncryption {
            key,
            decryption_keys,
        })
    }

    fn s3(&self) -> PyResult<shoal_core::encryption::S3Encryption> {
        use shoal_core::encryption::{CustomerKey, Sse};
        let err =
            |e: shoal_core::Error| pyo3::exceptions::PyValueError::new_err(e.message().to_owned());
        let key = |name: &str, v: &Option<Vec<u8>>| {
            v.as_deref()
                .map(|b| CustomerKey::from_slice(name, b))
                .transpose()
                .map_err(err)
        };
        let sse = match &self.sse {
            Some(s) => Some(Sse::parse(s, self.sse_kms_key_id.clone()).map_err(err)?),
            None if self.sse_kms_key_id.is_some() => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "sse_kms_key_id= goes with sse='aws:kms'",
                ));
            }
            None => None,
        };
        Ok(shoal_core::encryption::S3Encryption {
            sse,
            customer_key: key("sse_c_key=", &self.sse_c_key)?,
            copy_source_key: key("sse_c_copy_source_key=", &self.sse_c_copy_source_key)?,
        })
    }
}

impl Keywords<'_> {
    /// The keywords that were given, as a dict: what the session pickles
    /// as and shows in its repr.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let kwargs = PyDict::new(py);
        for (k, v) in [
            ("endpoint_url", &self.endpoint_url),
            ("gcs_endpoint_url", &self.gcs_endpoint_url),
            ("s3_endpoint_url", &self.s3_endpoint_url),
            ("region", &self.region),
            ("profile", &self.profile),
            ("key", &self.key),
            ("secret", &self.secret),
            ("proxy", &self.proxy),
            ("billing_project", &self.billing_project),
        ] {
            if let Some(v) = v {
                kwargs.set_item(k, v)?;
            }
        }
        kwargs.set_item("no_sign_request", self.no_sign_request)?;
        kwargs.set_item("s3_addressing", self.s3_addressing)?;
        if let Some(w) = self.workers {
            kwargs.set_item("workers", w)?;
        }
        if let Some(a) = self.attempts {
            kwargs.set_item("attempts", a)?;
        }
        for (k, v) in [
            ("read_timeout", self.read_timeout),
            ("connect_timeout", self.connect_timeout),
        ] {
            if let Some(v) = v {
                kwargs.set_item(k, v)?;
            }
        }
        if let Some(c) = &self.ca_bundle {
            kwargs.set_item("ca_bundle", c)?;
        }
        if self.request_payer {
            kwargs.set_item("request_payer", true)?;
        }
        self.encryption.to_dict(&kwargs)?;
        Ok(kwargs)
    }

    /// Refuses keywords no store could use (the first wrong one, in this
    /// order); answers the S3 addressing asked for.
    fn check(&self) -> PyResult<Addressing> {
        check_billing_project(self.billing_project.as_deref())?;
        let addressing = parse_addressing(self.s3_addressing)?;
        if self.key.is_some() != self.secret.is_some() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "key and secret go together: give both or neither",
            ));
        }
        Ok(addressing)
    }

    /// The keywords as overrides of the environment's configuration.
    fn into_overrides(self, addressing: Addressing) -> PyResult<Overrides> {
        Ok(Overrides {
            endpoint_url: self.endpoint_url,
            gcs_endpoint_url: self.gcs_endpoint_url,
            s3_endpoint_url: self.s3_endpoint_url,
            no_sign_request: self.no_sign_request,
            region: self.region,
            profile: self.profile,
            addressing,
            s3_access_key: self.key,
            s3_secret_key: self.secret,
            proxy: self.proxy.map(|p| shoal_config::Sourced::new("proxy=", p)),
            no_proxy: false,
            ca_bundle: self
                .ca_bundle
                .map(|c| shoal_config::Sourced::new("ca_bundle=", c)),
            // Requester pays: GCS bills `billing_project` (else
            // CLOUDSDK_BILLING_QUOTA_PROJECT), S3 sends the payer header.
            billing_project: self.billing_project,
            request_payer: self.request_payer,
            s3_encryption: self.encryption.s3()?,
            gcs_encryption: self.encryption.gcs()?,
            gcs_upload: shoal_core::UploadMethod::Auto,
        })
    }
}

/// `billing_project=` is sent in every request's query (`userProject`), so
/// it must be a printable word.
fn check_billing_project(p: Option<&str>) -> PyResult<()> {
    if let Some(p) = p
        && (p.is_empty() || !p.chars().all(|c| c.is_ascii_graphic()))
    {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "billing_project={p:?} is not a project id (printable, no spaces)"
        )));
    }
    Ok(())
}

/// `read_timeout=` and `connect_timeout=`: seconds, as the CLI's
/// `--read-timeout` and `--connect-timeout` take them (1 to 3600; a
/// fraction is allowed here).
fn seconds(name: &str, v: Option<f64>) -> PyResult<Option<std::time::Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => {
            Ok(Some(std::time::Duration::from_secs_f64(s)))
        }
        Some(s) => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{name}={s} is not a number of seconds between 0 and 3600"
        ))),
    }
}

/// `s3_addressing=`: one of three words.
fn parse_addressing(s3_addressing: &str) -> PyResult<Addressing> {
    match s3_addressing {
        "auto" => Ok(Addressing::Auto),
        "path" => Ok(Addressing::Path),
        "virtual" => Ok(Addressing::VirtualHost),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "s3_addressing must be 'auto', 'path' or 'virtual', not {other:?}"
        ))),
    }
}

/// `read_timeout=` and `connect_timeout=` (None: the stores' defaults).
struct Timeouts {
    read: Option<std::time::Duration>,
    connect: Option<std::time::Duration>,
}

impl Session {
    /// A session with `workers` requests in flight per call by default and
    /// `attempts` per request, over `overrides`; the stores' connection
    /// pools sized for both the big-transfer and the small-request workers.
    fn build(
        workers: Option<usize>,
        attempts: Option<u32>,
        timeouts: Timeouts,
        overrides: Overrides,
        kwargs: Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        let explicit_workers = workers.map(|w| w.max(1));
        let workers = workers
            .unwrap_or_else(|| TransferOptions::default().workers)
            .max(1);
        let mut retry = RetryPolicy::default();
        if let Some(a) = attempts {
            retry.max_attempts = a.max(1);
        }
        let mut stores = Stores::new(
            overrides,
            workers + explicit_workers.unwrap_or(shoal_transfer::DEFAULT_SMALL_WORKERS),
            retry,
        );
        if let Some(t) = timeouts.read {
            stores = stores.with_read_timeout(t);
        }
        if let Some(t) = timeouts.connect {
            stores = stores.with_connect_timeout(t);
        }
        // The named stores of the config file (`NAME://bucket/key`), read
        // again by every session so a changed file is seen.
        stores = stores.with_store_file(shoal_config::StoreFile::load().py()?);
        Ok(Session {
            stores: Arc::new(stores),
            workers,
            explicit_workers,
            kwargs: kwargs.unbind(),
        })
    }
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (
        *, endpoint_url=None, gcs_endpoint_url=None, s3_endpoint_url=None,
        no_sign_request=false, region=None, profile=None, key=None, secret=None,
        s3_addressing="auto", workers=None, attempts=None, read_timeout=None,
        connect_timeout=None, proxy=None, ca_bundle=None, billing_project=None,
        request_payer=false, sse=None, sse_kms_key_id=None, sse_c_key=None,
        sse_c_copy_source_key=None, encryption_key=None, decryption_keys=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        endpoint_url: Option<String>,
        gcs_endpoint_url: Option<String>,
        s3_endpoint_url: Option<String>,
        no_sign_request: bool,
        region: Option<String>,
        profile: Option<String>,
        key: Option<String>,
        secret: Option<String>,
        s3_addressing: &str,
        workers: Option<usize>,
        attempts: Option<u32>,
        read_timeout: Option<f64>,
        connect_timeout: Option<f64>,
        proxy: Option<String>,
        ca_bundle: Option<std::path::PathBuf>,
        billing_project: Option<String>,
        request_payer: bool,
        sse: Option<String>,
        sse_kms_key_id: Option<String>,
        sse_c_key: Option<Vec<u8>>,
        sse_c_copy_source_key: Option<Vec<u8>>,
        encryption_key: Option<String>,
        decryption_keys: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let kw = Keywords {
            endpoint_url,
            gcs_endpoint_url,
            s3_endpoint_url,
            no_sign_request,
            region,
            profile,
            key,
            secret,
            s3_addressing,
            workers,
            attempts,
            read_timeout,
            connect_timeout,
            proxy,
            ca_bundle,
            billing_project,
            request_payer,
            encryption: EncryptionKeywords {
                sse,
                sse_kms_key_id,
                sse_c_key,
                sse_c_copy_source_key,
                encryption_key,
                decryption_keys,
            },
        };
        let kwargs = kw.to_dict(py)?;
        let addressing = kw.check()?;
        let timeouts = Timeouts {
            read: seconds("read_timeout", kw.read_timeout)?,
            connect: seconds("connect_timeout", kw.connect_timeout)?,
        };
        Session::build(
            kw.workers,
            kw.attempts,
            timeouts,
            kw.into_overrides(addressing)?,
            kwargs,
        )
    }

    /// Requests in flight per call unless the call says otherwise.
    #[getter]
    fn workers(&self) -> usize {
        self.workers
    }

    /// The keywords this session was made with.
    #[getter]
    fn kwargs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.kwargs.bind(py).copy()
    }

    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        let rebuild = py.import("shoal._session")?.getattr("_rebuild")?;
        Ok((rebuild, (self.kwargs.bind(py).copy()?,)))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let kw = self.kwargs.bind(py).copy()?;
        for k in [
            "secret",
            "sse_c_key",
            "sse_c_copy_source_key",
            "encryption_key",
            "decryption_keys",
        ] {
            if kw.contains(k)? {
                kw.set_item(k, "***")?;
            }
        }
        if let Some(p) = kw.get_item("proxy")? {
            // A proxy URL may carry a password.
            kw.set_item(
                "proxy",
                shoal_http::network::redact_proxy(&p.extract::<String>()?),
            )?;
        }
        Ok(format!("Session({})", kw.repr()?))
    }
}
