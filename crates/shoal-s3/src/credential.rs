//! Finding credentials, lazily.
//!
//! Nothing is resolved when the store is built: a `shoal ls` of a public
//! bucket with `--no-sign-request`, or a command that fails on its arguments,
//! should not pay for (or hang on) a credential chain. On the first request
//! the sources are tried in this order and the result is cached:
//!
//! 1. explicit keys in [`S3Config`] (tests, library users);
//! 2. `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`,
//!    read directly: the common case costs two `getenv`s, not a chain;
//! 3. with the `aws-config` feature, the AWS default chain (profiles, SSO,
//!    credential_process, web identity, ECS, IMDS).
//!
//! Chain credentials that expire (SSO, assumed roles, IMDS) are refreshed
//! a few minutes before their expiry, by one task while the others keep
//! using the still-valid ones. A failure to find any credentials is cached
//! too: retrying a chain that found nothing on every one of a thousand
//! parallel requests only makes the error slower.

use aws_credential_types::Credentials;
use shoal_core::{Error, ErrorKind, Op, Result};
use tokio::sync::OnceCell;

use crate::config::{S3Config, redacted};

/// What the first request resolved.
enum Resolved {
    /// Unsigned requests.
    Anonymous,
    /// Credentials that do not expire (or that we cannot refresh).
    Static(Credentials),
    /// The AWS chain, able to refresh.
    #[cfg(feature = "aws-config")]
    Chain(chain::Refreshing),
}

/// A cached failure: kind and message, re-created per request with that
/// request's operation and URL.
type Failure = (ErrorKind, String);

pub(crate) struct CredentialSource {
    explicit: Option<Credentials>,
    anonymous: bool,
    #[cfg_attr(not(feature = "aws-config"), allow(dead_code))]
    profile: Option<String>,
    #[cfg_attr(not(feature = "aws-config"), allow(dead_code))]
    region: String,
    cell: OnceCell<std::result::Result<Resolved, Failure>>,
}

const NO_CREDENTIALS_HINT: &str = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, choose a profile with AWS_PROFILE, or use --no-sign-request for public data";

impl CredentialSource {
    pub(crate) fn new(cfg: &S3Config) -> Result<Self> {
        let explicit = match (&cfg.access_key, &cfg.secret_key) {
            (Some(ak), Some(sk)) => Some(Credentials::new(
                ak,
                sk,
                cfg.session_token.clone(),
                None,
                "shoal-config",
            )),
            (None, None) => None,
            _ => {
                return Err(Error::invalid(
                    Op::Credentials,
                    "s3://",
                    "an access key and a secret key must be given together",
                ));
            }
        };
        Ok(CredentialSource {
            explicit,
            anonymous: cfg.anonymous,
            profile: cfg.profile.clone(),
            region: cfg.region.clone(),
            cell: OnceCell::new(),
        })
    }

    /// Credentials for one request (None: send it unsigned). `op` and `url`
    /// only label a failure.
    pub(crate) async fn get(&self, op: Op, url: &str) -> Result<Option<Credentials>> {
        let resolved = self.cell.get_or_init(|| self.resolve()).await;
        match resolved {
            Ok(Resolved::Anonymous) => Ok(None),
            Ok(Resolved::Static(c)) => Ok(Some(c.clone())),
            #[cfg(feature = "aws-config")]
            Ok(Resolved::Chain(r)) => r.get().await.map(Some).map_err(|(kind, msg)| {
                Error::new(kind, op, url, msg).with_hint(NO_CREDENTIALS_HINT)
            }),
            Err((kind, msg)) => Err(Error::new(*kind, op, url, msg).with_hint(NO_CREDENTIALS_HINT)),
        }
    }

    async fn resolve(&self) -> std::result::Result<Resolved, Failure> {
        if self.anonymous {
            return Ok(Resolved::Anonymous);
        }
        if let Some(c) = &self.explicit {
            return Ok(Resolved::Static(c.clone()));
        }
        if let Some(c) = from_env() {
            tracing::debug!("using AWS credentials from the environment");
            return Ok(Resolved::Static(c));
        }
        #[cfg(feature = "aws-config")]
        {
            chain::Refreshing::start(self.profile.as_deref(), &self.region)
                .await
                .map(Resolved::Chain)
        }
        #[cfg(not(feature = "aws-config"))]
        {
            Err((
                ErrorKind::Unauthenticated,
                "no AWS credentials found".to_owned(),
            ))
        }
    }
}

fn from_env() -> Option<Credentials> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let ak = var("AWS_ACCESS_KEY_ID")?;
    let sk = var("AWS_SECRET_ACCESS_KEY")?;
    Some(Credentials::new(
        ak,
        sk,
        var("AWS_SESSION_TOKEN"),
        None,
        "environment",
    ))
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.cell.get() {
            None => "unresolved",
            Some(Ok(Resolved::Anonymous)) => "anonymous",
            Some(Ok(Resolved::Static(_))) => "static",
            #[cfg(feature = "aws-config")]
            Some(Ok(Resolved::Chain(_))) => "aws chain",
            Some(Err(_)) => "none found",
        };
        f.debug_struct("CredentialSource")
            .field(
                "explicit",
                &redacted(&self.explicit.as_ref().map(|_| String::new())),
            )
            .field("anonymous", &self.anonymous)
            .field("profile", &self.profile)
            .field("state", &state)
            .finish()
    }
}

#[cfg(feature = "aws-config")]
mod chain {
    use std::time::{Duration, SystemTime};

    use aws_config::default_provider::credentials::DefaultCredentialsChain;
    use aws_credential_types::Credentials;
    use aws_credential_types::provider::ProvideCredentials;
    use aws_credential_types::provider::error::CredentialsError;
    use shoal_core::ErrorKind;
    use tokio::sync::{Mutex, RwLock};

    use super::Failure;

    /// Refresh this long before expiry: longer than one slow request, so a
    /// request signed now does not arrive with expired credentials.
    const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
    /// Upper bound on one pass through the chain. SSO and
    /// credential_process can legitimately take seconds; a hung provider
    /// must not hang the tool.
    const CHAIN_TIMEOUT: Duration = Duration::from_secs(30);
    /// IMDS is only reachable on EC2, where it answers in milliseconds;
    /// elsewhere a connect to 169.254.169.254 just hangs, so give up quickly
    /// and only once. (`AWS_EC2_METADATA_DISABLED=true` skips it entirely.)
    const IMDS_TIMEOUT: Duration = Duration::from_secs(1);

    pub(super) struct Refreshing {
        chain: DefaultCredentialsChain,
        current: RwLock<Credentials>,
        refreshing: Mutex<()>,
    }

    impl Refreshing {
        pub(super) async fn start(profile: Option<&str>, region: &str) -> Result<Self, Failure> {
            let imds = aws_config::imds::Client::builder()
                .connect_timeout(IMDS_TIMEOUT)
                .read_timeout(IMDS_TIMEOUT)
                .max_attempts(1)
                .build();
            let mut b = DefaultCredentialsChain::builder()
                .region(aws_config::Region::new(region.to_owned()))
                .imds_client(imds);
            if let Some(p) = profile {
                b = b.profile_name(p);
            }
            let chain = b.build().await;
            let creds = provide(&chain).await?;
            Ok(Refreshing {
                chain,
                current: RwLock::new(creds),
                refreshing: Mutex::new(()),
            })
        }

        pub(super) async fn get(&self) -> Result<Credentials, Failure> {
            let now = SystemTime::now();
            let cur = self.current.read().await.clone();
            if !needs_refresh(&cur, now) {
                return Ok(cur);
            }
            // One refresher; the others wait here and then see its result.
            let _guard = self.refreshing.lock().await;
            let cur = self.current.read().await.clone();
            if !needs_refresh(&cur, now) {
                return Ok(cur);
            }
            match provide(&self.chain).await {
                Ok(new) => {
                    *self.current.write().await = new.clone();
                    Ok(new)
                }
                // Still valid for a while: keep going, try again next time.
                Err((_, msg)) if cur.expiry().is_some_and(|e| e > now) => {
                    tracing::warn!(error = %msg, "refreshing AWS credentials failed; using the current ones until they expire");
                    Ok(cur)
                }
                Err(f) => Err(f),
            }
        }
    }

    fn needs_refresh(c: &Credentials, now: SystemTime) -> bool {
        c.expiry().is_some_and(|e| e <= now + REFRESH_MARGIN)
    }

    async fn provide(chain: &DefaultCredentialsChain) -> Result<Credentials, Failure> {
        match tokio::time::timeout(CHAIN_TIMEOUT, chain.provide_credentials()).await {
            Err(_) => Err((
                ErrorKind::Unauthenticated,
                format!(
                    "no AWS credentials found: the credential chain did not answer within {CHAIN_TIMEOUT:?}"
                ),
            )),
            Ok(Ok(c)) => Ok(c),
            Ok(Err(CredentialsError::CredentialsNotLoaded(_))) => Err((
                ErrorKind::Unauthenticated,
                "no AWS credentials found".to_owned(),
            )),
            // Provider errors name files and profiles, not secrets.
            Ok(Err(e)) => Err((
                ErrorKind::Unauthenticated,
                format!(
                    "no AWS credentials found: {}",
                    shoal_core::error::chain_message(&e)
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn explicit_and_anonymous() {
        let cfg = S3Config {
            access_key: Some("AK".into()),
            secret_key: Some("SK".into()),
            ..Default::default()
        };
        let src = CredentialSource::new(&cfg).unwrap();
        let c = src.get(Op::Stat, "s3://b/k").await.unwrap().unwrap();
        assert_eq!(c.access_key_id(), "AK");
        assert!(!format!("{src:?}").contains("SK"));

        let cfg = S3Config {
            anonymous: true,
            ..cfg
        };
        let src = CredentialSource::new(&cfg).unwrap();
        assert!(src.get(Op::Stat, "s3://b/k").await.unwrap().is_none());

        let half = S3Config {
            access_key: Some("AK".into()),
            ..Default::default()
        };
        assert!(CredentialSource::new(&half).is_err());
    }
}
