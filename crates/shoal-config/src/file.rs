//! The config file of named stores: `$SHOAL_CONFIG`, else
//! `$XDG_CONFIG_HOME/shoal/config.toml`, else `~/.config/shoal/config.toml`.
//!
//! ```toml
//! [stores.minio]
//! type = "s3"
//! endpoint_url = "http://127.0.0.1:9000"
//! access_key_id = "minioadmin"
//! secret_access_key = "minioadmin"
//! ```
//!
//! Each `[stores.NAME]` makes `NAME://bucket/key` a URL in every verb and
//! in Python (`shoal://NAME/bucket/key` for fsspec). The names are declared
//! to shoal-core's URL parser ([`shoal_core::url::declare_store`]) when the
//! file is loaded: a name not in the file is no URL scheme, so `notes:x`
//! stays a local path. A store's settings are its own: the global flags for
//! `gs://` and `s3://` (`--endpoint-url`, `--region`, `--profile`…) do not
//! change a named store, while the process-wide ones (timeouts, proxy,
//! `--ca-bundle`, retries) apply to every store. A secret in the file is
//! never printed: `Debug` hides it and errors name the file, line and key,
//! never a value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use shoal_core::{Error, Op, Result, Scheme, StoreName};

/// The kind of a named store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreType {
    /// An S3-compatible store.
    S3,
    /// Google Cloud Storage (or an emulator of its JSON API).
    #[serde(alias = "gcs")]
    Gs,
}

/// S3 URL style in the file (`addressing = "path"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FileAddressing {
    /// Path style for custom endpoints, virtual host for AWS.
    #[default]
    Auto,
    /// `https://endpoint/bucket/key`.
    Path,
    /// `https://bucket.endpoint/key`.
    Virtual,
}

/// A value that is never shown (`Debug` prints `<redacted>`).
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One `[stores.NAME]` section: the settings of the flags of the same
/// names, for this store only.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// `"s3"` or `"gs"`.
    #[serde(rename = "type")]
    pub kind: StoreType,
    /// The endpoint (default: AWS or Google).
    pub endpoint_url: Option<String>,
    /// S3 signing region.
    pub region: Option<String>,
    /// S3 URL style.
    #[serde(default)]
    pub addressing: FileAddressing,
    /// AWS profile to take credentials from.
    pub profile: Option<String>,
    /// S3 access key id.
    pub access_key_id: Option<Secret>,
    /// S3 secret access key.
    pub secret_access_key: Option<Secret>,
    /// S3 session token (temporary credentials).
    pub session_token: Option<Secret>,
    /// GCS credentials JSON file (service-account key or authorized_user).
    pub credentials_file: Option<PathBuf>,
    /// GCS project owning new buckets and listed by `ls NAME://`.
    pub project: Option<String>,
    /// Requests without credentials (public data, emulators).
    #[serde(default)]
    pub no_sign_request: bool,
    /// A PEM file of CA certificates trusted for this store.
    pub ca_bundle: Option<PathBuf>,
    /// One proxy for this store's requests.
    pub proxy: Option<String>,
    /// Connect to this store directly, ignoring the proxy variables.
    #[serde(default)]
    pub no_proxy: bool,
    /// GCS requester pays: the project billed.
    pub billing_project: Option<String>,
    /// S3 requester pays (`true`, or `"requester"` as the flag takes).
    #[serde(default, deserialize_with = "request_payer")]
    pub request_payer: bool,
}

fn request_payer<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Payer {
        Flag(bool),
        Who(String),
    }
    match Payer::deserialize(d)? {
        Payer::Flag(b) => Ok(b),
        Payer::Who(w) if w == "requester" => Ok(true),
        Payer::Who(_) => Err(serde::de::Error::custom(
            "request_payer is true, false or \"requester\"",
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    stores: BTreeMap<toml::Spanned<String>, toml::Spanned<StoreSettings>>,
}

/// The loaded config file: its path and its named stores.
#[derive(Debug, Clone, Default)]
pub struct StoreFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// The stores, by name.
    pub stores: Vec<(StoreName, StoreSettings)>,
}

impl StoreFile {
    /// The config file's path: `$SHOAL_CONFIG` (must exist), else the XDG
    /// place (may be absent). None when no home is known.
    pub fn default_path() -> Option<(PathBuf, bool)> {
        let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
        if let Some(p) = var("SHOAL_CONFIG") {
            return Some((PathBuf::from(p), true));
        }
        let base = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some((base.join("shoal").join("config.toml"), false))
    }

    /// Loads the config file (see [`StoreFile::default_path`]) and declares
    /// its store names; an absent default file is no stores.
    pub fn load() -> Result<StoreFile> {
        match Self::default_path() {
            Some((path, required)) => {
                if !required && !path.exists() {
                    return Ok(StoreFile::default());
                }
                Self::load_from(&path)
            }
            None => Ok(StoreFile::default()),
        }
    }

    /// Loads `path` and declares its store names.
    pub fn load_from(path: &Path) -> Result<StoreFile> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid(
                Op::Read,
                path.display().to_string(),
                format!("cannot read the config file: {e}"),
            )
            .with_hint("set SHOAL_CONFIG to a readable TOML file, or unset it")
        })?;
        Self::parse(path, &text)
    }

    /// Parses `text`, the contents of `path`, and declares its names.
    pub fn parse(path: &Path, text: &str) -> Result<StoreFile> {
        let bad = |span: Option<std::ops::Range<usize>>, msg: &str| {
            let at = span.map_or(String::new(), |s| {
                format!(" line {}", line_of(text, s.start))
            });
            Error::invalid(
                Op::Parse,
                format!("config file {}{at}", path.display()),
                shoal_core::error::one_line(msg.trim(), 200),
            )
            .with_hint("see README: Named stores")
        };
        // `message()` only: the error's Display quotes the line, which may
        // hold a secret.
        let doc: Document = toml::from_str(text).map_err(|e| bad(e.span(), e.message()))?;
        let mut stores = Vec::new();
        for (name, settings) in doc.stores {
            let span = name.span();
            let name = name.into_inner();
            let kind = match settings.get_ref().kind {
                StoreType::S3 => Scheme::S3,
                StoreType::Gs => Scheme::Gs,
            };
            let settings = settings.into_inner();
            check(&settings)
                .map_err(|m| bad(Some(span.clone()), &format!("store {name:?}: {m}")))?;
            let declared = shoal_core::url::declare_store(&name, kind)
                .map_err(|m| bad(Some(span.clone()), &m))?;
            stores.push((declared, settings));
        }
        Ok(StoreFile {
            path: path.to_owned(),
            stores,
        })
    }
}

/// Settings that do not fit the store's kind, or each other.
fn check(s: &StoreSettings) -> std::result::Result<(), String> {
    let s3_only = [
        ("region", s.region.is_some()),
        ("profile", s.profile.is_some()),
        ("access_key_id", s.access_key_id.is_some()),
        ("secret_access_key", s.secret_access_key.is_some()),
        ("session_token", s.session_token.is_some()),
        ("addressing", s.addressing != FileAddressing::Auto),
        ("request_payer", s.request_payer),
    ];
    let gs_only = [
        ("credentials_file", s.credentials_file.is_some()),
        ("project", s.project.is_some()),
        ("billing_project", s.billing_project.is_some()),
    ];
    let (wrong, kind) = match s.kind {
        StoreType::S3 => (&gs_only[..], "s3"),
        StoreType::Gs => (&s3_only[..], "gs"),
    };
    if let Some((key, _)) = wrong.iter().find(|(_, set)| *set) {
        return Err(format!("{key} is not a setting of a {kind} store"));
    }
    if s.access_key_id.is_some() != s.secret_access_key.is_some() {
        return Err("access_key_id and secret_access_key go together".into());
    }
    if s.proxy.is_some() && s.no_proxy {
        return Err("proxy and no_proxy contradict each other".into());
    }
    Ok(())
}

/// The 1-based line holding byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StoreFile> {
        StoreFile::parse(Path::new("/etc/x.toml"), text)
    }

    #[test]
    fn stores_parse_and_declare_their_names() {
        let f = parse(
            "[stores.cfg-a]\ntype = \"s3\"\nendpoint_url = \"http://127.0.0.1:1\"\n\
             access_key_id = \"AK\"\nsecret_access_key = \"hush-hush\"\naddressing = \"path\"\n\
             [stores.cfg-g]\ntype = \"gs\"\nno_sign_request = true\n",
        )
        .unwrap();
        assert_eq!(f.stores.len(), 2);
        let loc = shoal_core::Location::parse("cfg-a://b/k").unwrap();
        assert_eq!(loc.scheme, Scheme::S3);
        assert_eq!(loc.store.unwrap().as_str(), "cfg-a");
        assert_eq!(
            shoal_core::Location::parse("cfg-g://b/k").unwrap().scheme,
            Scheme::Gs
        );
        assert!(!format!("{f:?}").contains("hush-hush"));
    }

    #[test]
    fn bad_files_name_the_file_and_line_never_a_secret() {
        let e =
            parse("[stores.x1]\ntype = \"s3\"\nsecret_acess_key = \"hush-hush\"\n").unwrap_err();
        let m = e.to_string();
        assert!(m.contains("/etc/x.toml line 3"), "{m}");
        assert!(m.contains("secret_acess_key"), "{m}");
        assert!(!m.contains("hush-hush"), "{m}");
        assert!(!m.contains('\n'), "{m}");

        let e = parse("[stores.x2]\ntype = \"azure\"\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = parse("[stores.x3\n").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = parse("\n[stores.s3]\ntype = \"s3\"\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(e.to_string().contains("taken"), "{e}");
        let e = parse("[stores.x4]\ntype = \"gs\"\nregion = \"eu\"\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("region is not a setting of a gs store"),
            "{e}"
        );
        let e = parse("[stores.x5]\ntype = \"s3\"\naccess_key_id = \"a\"\n").unwrap_err();
        assert!(e.to_string().contains("go together"), "{e}");
    }
}
