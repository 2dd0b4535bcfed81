//! Authentication: anonymous, or Application Default Credentials.
//!
//! ADC is Google's search order (GOOGLE_APPLICATION_CREDENTIALS, the gcloud
//! file, then the metadata server on Google Cloud), implemented by Google's
//! `google-cloud-auth`, which also caches tokens and refreshes them before
//! they expire. We do not reimplement any of it; this module only decides
//! *when* to ask and how to explain a failure.
//!
//! - Lazily, on the first request, then cached: constructing a store must
//!   not touch files or the network (a `--no-sign-request` run, or a CLI
//!   that only parses flags, never pays for a credential search).
//! - When no ADC file exists, ADC falls back to the metadata server. Off
//!   Google Cloud that server does not exist, and the failure really means
//!   "you have no credentials": we say so, without retrying, with a hint.
//!   Once a token has been obtained, a later failure is a refresh problem,
//!   and a transient one is retried like any 5xx.
//! - Tokens never reach a message, a log line or a `Debug` output; header
//!   values are marked sensitive so HTTP-level logging skips them too.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use google_cloud_auth::credentials::{Builder, CacheableResource, Credentials};
use google_cloud_auth::errors::CredentialsError;
use http::{Extensions, HeaderMap};
use shoal_core::{Error, ErrorKind, Op, Result};
use tokio::sync::OnceCell;

const NO_CREDENTIALS_HINT: &str = "run `gcloud auth application-default login`, set \
     GOOGLE_APPLICATION_CREDENTIALS to a key file, or use --no-sign-request for public data";

/// Where authorization headers come from.
pub(crate) enum Auth {
    /// No `Authorization` header at all.
    Anonymous,
    /// Application Default Credentials, looked up on first use.
    Adc(Adc),
}

pub(crate) struct Adc {
    /// A credentials file named in the config instead of ADC's search.
    file: Option<PathBuf>,
    creds: OnceCell<Credentials>,
    /// A token was obtained at least once: later failures are refreshes.
    ever_ok: AtomicBool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Deliberately nothing about the credentials themselves.
        f.write_str(match self {
            Auth::Anonymous => "anonymous",
            Auth::Adc(_) => "application-default",
        })
    }
}

impl Auth {
    pub(crate) fn new(anonymous: bool, file: Option<PathBuf>) -> Self {
        if anonymous {
            Auth::Anonymous
        } else {
            Auth::Adc(Adc {
                file,
                creds: OnceCell::new(),
                ever_ok: AtomicBool::new(false),
            })
        }
    }

    /// Headers to add to one request (none when anonymous). `url` is the
    /// user-facing URL the failing operation is about.
    pub(crate) async fn headers(&self, op: Op, url: &str) -> Result<Option<HeaderMap>> {
        let adc = match self {
            Auth::Anonymous => return Ok(None),
            Auth::Adc(adc) => adc,
        };
        let creds = adc
            .creds
            .get_or_try_init(|| async {
                if let Some(path) = &adc.file {
                    return from_file(path).map_err(|msg| {
                        Error::new(ErrorKind::Unauthenticated, op, url, msg)
                            .with_hint("check the store's credentials_file in the config file")
                    });
                }
                Builder::default().build().map_err(|e| {
                    let what = if adc_file().is_none() {
                        "no Google credentials found"
                    } else {
                        "could not load Google credentials"
                    };
                    Error::new(ErrorKind::Unauthenticated, op, url, format!("{what}: {e}"))
                        .with_hint(NO_CREDENTIALS_HINT)
                        .with_source(e)
                })
            })
            .await?;
        match creds.headers(Extensions::new()).await {
            Ok(CacheableResource::New { data, .. }) => {
                adc.ever_ok.store(true, Ordering::Relaxed);
                let mut data = data;
                for v in data.values_mut() {
                    v.set_sensitive(true);
                }
                Ok(Some(data))
            }
            // Only returned when the caller passes an entity tag; we never do.
            Ok(CacheableResource::NotModified) => Err(Error::new(
                ErrorKind::Protocol,
                op,
                url,
                "the credential library returned no headers",
            )),
            Err(e) => Err(token_error(
                op,
                url,
                &e,
                adc.ever_ok.load(Ordering::Relaxed),
            )),
        }
    }
}

/// Credentials from a JSON file the user named: a service-account key or
/// an `authorized_user` file. The error names the file, never its contents.
fn from_file(path: &std::path::Path) -> std::result::Result<Credentials, String> {
    use google_cloud_auth::credentials::{service_account, user_account};
    let json = read_key_file(path)?;
    let kind = json.get("type").and_then(|t| t.as_str()).unwrap_or("");
    let built = match kind {
        "service_account" => service_account::Builder::new(json).build(),
        "authorized_user" => user_account::Builder::new(json).build(),
        other => {
            return Err(format!(
                "the credentials file {} holds type '{other}', not service_account or authorized_user",
                path.display()
            ));
        }
    };
    built.map_err(|e| format!("the credentials file {}: {e}", path.display()))
}

fn token_error(op: Op, url: &str, e: &CredentialsError, ever_ok: bool) -> Error {
    // The library's own message can be long (it explains ADC); keep one
    // line of it. What the token endpoint answered (`invalid_grant: Token
    // has been expired or revoked`) is further down the source chain: that
    // is the part a user can act on. Neither holds the token or the
    // refresh token (the request body is never part of an error).
    let mut all = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let m = s.to_string();
        if !all.contains(&m) {
            all.push_str(": ");
            all.push_str(&m);
        }
        source = s.source();
    }
    let said = shoal_core::error::one_line(&all, 400);
    if !ever_ok && adc_file().is_none() {
        // The library's text here is about its retry state, not the cause;
        // keep it for debugging only.
        tracing::debug!(error = %said, "metadata server token request failed");
        return Error::new(
            ErrorKind::Unauthenticated,
            op,
            url,
            "no Google credentials found: no application-default credentials file, \
             and no metadata server (not running on Google Cloud?)",
        )
        .with_hint(NO_CREDENTIALS_HINT);
    }
    let kind = if e.is_transient() {
        ErrorKind::ServerBusy
    } else {
        ErrorKind::Unauthenticated
    };
    let mut err = Error::new(
        kind,
        op,
        url,
        format!("could not get a Google access token: {said}"),
    );
    if kind == ErrorKind::Unauthenticated {
        err = err.with_hint(NO_CREDENTIALS_HINT);
    }
    err
}

/// The ADC file google-cloud-auth would read, if one exists (the same
/// search as the library's: the variable, else the gcloud well-known file).
fn adc_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS") {
        return Some(PathBuf::from(p));
    }
    #[cfg(windows)]
    let root = std::env::var_os("APPDATA").map(|r| PathBuf::from(r).join("gcloud"));
    #[cfg(not(windows))]
    let root = std::env::var_os("HOME").map(|r| PathBuf::from(r).join(".config/gcloud"));
    let p = root?.join("application_default_credentials.json");
    p.is_file().then_some(p)
}

const NEEDS_KEY_HINT: &str = "signed URLs need a service-account key: set \
     GOOGLE_APPLICATION_CREDENTIALS to its JSON key file (with private_key and client_email)";

/// A signer from the service-account key in the ADC file, for signed URLs.
/// Other credential kinds (a user's login, the metadata server) hold no
/// key to sign with: that is one line saying what is needed. The file's
/// contents never reach a message.
pub(crate) fn service_account_signer(url: &str) -> Result<google_cloud_auth::signer::Signer> {
    let fail = |msg: String| {
        Error::new(ErrorKind::Unauthenticated, Op::Presign, url, msg).with_hint(NEEDS_KEY_HINT)
    };
    let Some(path) = adc_file() else {
        return Err(fail("no service-account key found".into()));
    };
    let json = read_key_file(&path).map_err(fail)?;
    let kind = json.get("type").and_then(|t| t.as_str()).unwrap_or("");
    if kind != "service_account" {
        return Err(fail(format!(
            "{} holds credentials of type '{kind}', not a service-account key",
            path.display()
        )));
    }
    for field in ["private_key", "client_email"] {
        if json
            .get(field)
            .and_then(|v| v.as_str())
            .is_none_or(str::is_empty)
        {
            return Err(fail(format!("{} has no {field}", path.display())));
        }
    }
    google_cloud_auth::credentials::service_account::Builder::new(json)
        .build_signer()
        .map_err(|e| fail(format!("{}: {e}", path.display())))
}

/// The `project_id` of the ADC file, when it has one (service-account
/// keys do): the project whose buckets a listing shows by default.
pub(crate) fn key_file_project() -> Option<String> {
    let json = read_key_file(&adc_file()?).ok()?;
    json.get("project_id")?
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

fn read_key_file(path: &std::path::Path) -> std::result::Result<serde_json::Value, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the credentials file {}: {e}", path.display()))?;
    // serde_json's error names a line and column, never the text there.
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("the credentials file {} is not JSON: {e}", path.display()))
}
