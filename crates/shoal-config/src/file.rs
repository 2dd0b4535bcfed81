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
//! `--ca-bundle`, retries) apply to every store. Encryption is a store's
//! setting too (`sse`, `sse_kms_key_id`, `sse_c_key_file`,
//! `sse_c_copy_source_key_file` for S3; `encryption_key`,
//! `decryption_keys` for GCS), given to the store once when it is built;
//! an encryption flag given for the run (`--sse-c-key-file`…, or the
//! Python session's keyword) replaces the file's setting of that name, so
//! a key typed for a run is never dropped because its URL names a store.
//! A secret in the file is never printed: `Debug` hides it and errors name
//! the file, line and key, never a value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use shoal_core::encryption::{CustomerKey, GcsEncryption, GcsKey, S3Encryption, Sse};
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
    /// S3: encryption at rest for new objects, `"AES256"` or `"aws:kms"`.
    pub sse: Option<String>,
    /// S3: the KMS key id or ARN for `sse = "aws:kms"`.
    pub sse_kms_key_id: Option<String>,
    /// S3: customer-provided key (SSE-C) of every object written and read:
    /// a file of 32 raw bytes or their base64, read when the store is
    /// first used.
    pub sse_c_key_file: Option<PathBuf>,
    /// S3: the SSE-C key of a server-side copy's source, when it differs.
    pub sse_c_copy_source_key_file: Option<PathBuf>,
    /// GCS: a customer-supplied key (base64 of 32 bytes) or a Cloud KMS
    /// key name for every object written and read.
    pub encryption_key: Option<Secret>,
    /// GCS: more customer-supplied keys objects to read may be under: a
    /// list, or one comma-separated string as the flag takes them.
    #[serde(default, deserialize_with = "key_list")]
    pub decryption_keys: Option<Secret>,
}

/// `decryption_keys`: a list of keys or one comma-separated string, kept
/// as the flag's comma-separated form.
fn key_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Secret>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Keys {
        One(String),
        List(Vec<String>),
    }
    match Keys::deserialize(d) {
        Ok(Keys::One(s)) => Ok(Some(Secret(s))),
        Ok(Keys::List(l)) => Ok(Some(Secret(l.join(",")))),
        // serde's own message for an untagged miss would not say which
        // forms are taken; never the value either way.
        Err(_) => Err(serde::de::Error::custom(
            "decryption_keys is a list of base64 keys or one comma-separated string",
        )),
    }
}

impl StoreSettings {
    /// The S3 encryption settings of this store; `from` (the file and
    /// section) names where a key file that cannot be read was set.
    pub fn s3_encryption(&self, from: &str) -> Result<S3Encryption> {
        let sse = self
            .sse
            .as_deref()
            .map(|v| Sse::parse(v, self.sse_kms_key_id.clone()))
            .transpose()?;
        let key = |name: &str, path: &Option<PathBuf>| {
            path.as_deref()
                .map(|p| {
                    CustomerKey::from_file(p).map_err(|e| {
                        Error::invalid(
                            Op::Read,
                            format!("{from} {name}"),
                            format!("{}: {}", p.display(), e.message()),
                        )
                    })
                })
                .transpose()
        };
        Ok(S3Encryption {
            sse,
            customer_key: key("sse_c_key_file", &self.sse_c_key_file)?,
            copy_source_key: key(
                "sse_c_copy_source_key_file",
                &self.sse_c_copy_source_key_file,
            )?,
        })
    }

    /// The GCS encryption settings of this store (checked when the file
    /// was read).
    pub fn gcs_encryption(&self) -> Result<GcsEncryption> {
        Ok(GcsEncryption {
            key: self
                .encryption_key
                .as_ref()
                .map(|k| GcsKey::parse(&k.0))
                .transpose()?,
            decryption_keys: match &self.decryption_keys {
                Some(k) => GcsEncryption::parse_decryption_keys(&k.0)?,
                None => Vec::new(),
            },
        })
    }
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
        ("sse", s.sse.is_some()),
        ("sse_kms_key_id", s.sse_kms_key_id.is_some()),
        ("sse_c_key_file", s.sse_c_key_file.is_some()),
        (
            "sse_c_copy_source_key_file",
            s.sse_c_copy_source_key_file.is_some(),
        ),
    ];
    let gs_only = [
        ("credentials_file", s.credentials_file.is_some()),
        ("project", s.project.is_some()),
        ("billing_project", s.billing_project.is_some()),
        ("encryption_key", s.encryption_key.is_some()),
        ("decryption_keys", s.decryption_keys.is_some()),
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
    // Keys and algorithms are checked now, so a typo is the file's error
    // (with its line) rather than the first request's; the messages name
    // the setting, never a key. Key files are read when the store is used.
    match s.sse.as_deref() {
        None | Some("AES256") | Some("aws:kms") => {}
        Some(_) => return Err("sse is \"AES256\" or \"aws:kms\"".into()),
    }
    if s.sse_kms_key_id.is_some() && s.sse.as_deref() != Some("aws:kms") {
        return Err("sse_kms_key_id goes with sse = \"aws:kms\"".into());
    }
    if let Some(k) = &s.encryption_key {
        GcsKey::parse(&k.0).map_err(|e| format!("encryption_key: {}", e.message()))?;
    }
    if let Some(k) = &s.decryption_keys {
        GcsEncryption::parse_decryption_keys(&k.0)
            .map_err(|e| format!("decryption_keys: {}", e.message()))?;
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

    /// 32 bytes of base64 (a CSEK).
    const KEY: &str = "aGVsbG8taGVsbG8taGVsbG8taGVsbG8taGVsbG8tMTI=";

    #[test]
    fn encryption_settings_are_checked_with_the_file_and_never_shown() {
        let f = parse(&format!(
            "[stores.enc-g]\ntype = \"gs\"\nencryption_key = \"{KEY}\"\n\
             decryption_keys = [\"{KEY}\"]\n\
             [stores.enc-s]\ntype = \"s3\"\nsse = \"aws:kms\"\nsse_kms_key_id = \"alias/k\"\n"
        ))
        .unwrap();
        assert!(!format!("{f:?}").contains(KEY));
        let (_, g) = &f.stores[0];
        let enc = g.gcs_encryption().unwrap();
        assert!(matches!(enc.key, Some(GcsKey::Customer(_))));
        assert_eq!(enc.decryption_keys.len(), 1);
        let (_, s3) = &f.stores[1];
        let enc = s3.s3_encryption("here").unwrap();
        assert_eq!(enc.sse, Some(Sse::Kms(Some("alias/k".into()))));
        assert!(enc.customer_key.is_none());

        let e =
            parse("[stores.e1]\ntype = \"gs\"\nencryption_key = \"not-a-key-7\"\n").unwrap_err();
        let m = e.to_string();
        assert!(m.contains("line 1") && m.contains("encryption_key"), "{m}");
        assert!(!m.contains("not-a-key-7"), "{m}");
        let e = parse("[stores.e2]\ntype = \"s3\"\nsse = \"AES128\"\n").unwrap_err();
        assert!(e.to_string().contains("sse is"), "{e}");
        let e = parse("[stores.e3]\ntype = \"s3\"\nsse = \"AES256\"\nsse_kms_key_id = \"k\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("goes with"), "{e}");
        let e = parse(&format!(
            "[stores.e4]\ntype = \"s3\"\nencryption_key = \"{KEY}\"\n"
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("encryption_key is not a setting of a s3 store"),
            "{e}"
        );
        assert!(!e.to_string().contains(KEY), "{e}");
        let e = parse("[stores.e5]\ntype = \"gs\"\ndecryption_keys = 7\n").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");

        // A key file is read when the store is built; its error names the
        // setting and the file.
        let f = parse("[stores.e6]\ntype = \"s3\"\nsse_c_key_file = \"/no/such/key\"\n").unwrap();
        let e = f.stores[0]
            .1
            .s3_encryption("/etc/x.toml [stores.e6]")
            .unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("[stores.e6] sse_c_key_file") && m.contains("/no/such/key"),
            "{m}"
        );
    }
}
