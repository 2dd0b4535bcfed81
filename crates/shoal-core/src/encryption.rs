//! Encryption keys sent with every request that reads or writes an
//! object's bytes (issue #54): S3 server-side encryption (`--sse`,
//! `--sse-kms-key-id`) and customer keys (SSE-C, `--sse-c-key-file`).
//!
//! One value, [`S3Encryption`], is given to the store when it is built, so
//! every request path (single PUT, multipart create and each part, GET and
//! its ranged slices, HEAD, server-side copies) picks the keys up in one
//! place: the S3 client adds the headers a request of its kind takes.
//!
//! Keys are [`CustomerKey`]s: their `Debug` shows the key's MD5 (what S3
//! itself names a key by), never the key.

use std::fmt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use md5::{Digest, Md5};

use crate::{Error, Op, PresignMethod, Result};

/// A 256-bit customer-supplied key. Its bytes never leave through `Debug`
/// or `Display`; only the headers built from it carry them.
#[derive(Clone, PartialEq, Eq)]
pub struct CustomerKey([u8; 32]);

impl CustomerKey {
    /// From its 32 bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        CustomerKey(bytes)
    }

    /// From a slice: 32 raw bytes, or (as files written with `base64`
    /// often are) base64 of 32 bytes; anything else is refused without
    /// showing the content.
    pub fn from_slice(what: &str, data: &[u8]) -> Result<Self> {
        if let Ok(raw) = <[u8; 32]>::try_from(data) {
            return Ok(CustomerKey(raw));
        }
        let text = std::str::from_utf8(data).unwrap_or("").trim();
        if let Ok(decoded) = STANDARD.decode(text)
            && let Ok(raw) = <[u8; 32]>::try_from(decoded.as_slice())
        {
            return Ok(CustomerKey(raw));
        }
        Err(Error::invalid(
            Op::Read,
            what,
            format!(
                "an encryption key must be 32 bytes (AES-256), raw or in base64; this one is {} bytes and not base64 of 32",
                data.len()
            ),
        ))
    }

    /// Reads a key file (see [`CustomerKey::from_slice`]).
    pub fn from_file(path: &Path) -> Result<Self> {
        let what = path.display().to_string();
        let data = std::fs::read(path).map_err(|e| {
            Error::invalid(Op::Read, &what, format!("cannot read the key file: {e}"))
        })?;
        Self::from_slice(&what, &data)
    }

    /// The key's bytes, for a digest a store names keys by (GCS: SHA256).
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key in base64, as headers carry it.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Base64 of the key's MD5: how S3 names an SSE-C key
    /// (`x-amz-server-side-encryption-customer-key-MD5`).
    pub fn md5_base64(&self) -> String {
        STANDARD.encode(Md5::digest(self.0))
    }

    /// Base64 of the key's SHA256: how GCS names a CSEK
    /// (`customerEncryption.keySha256`, `x-goog-encryption-key-sha256`).
    pub fn sha256_base64(&self) -> String {
        use aws_lc_rs::digest::{SHA256, digest};
        STANDARD.encode(digest(&SHA256, &self.0).as_ref())
    }
}

impl fmt::Debug for CustomerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CustomerKey(<redacted>, md5={})", self.md5_base64())
    }
}

/// Sends a read with each of `keys` in turn (a store's `read_keys`),
/// starting from the one `last` says worked last, until one is taken;
/// records it in `last`. An error `is_refusal` does not call a key refusal
/// ends the turn; when every key is refused, the last refusal is returned.
/// Both stores' reads go through it: an object takes exactly the key it was
/// written with, and a bucket under one key should cost one refusal per
/// run, not one per object. Callers give at least one key.
pub async fn read_with_keys<'k, T, Fut>(
    keys: &[Option<&'k CustomerKey>],
    last: &std::sync::atomic::AtomicUsize,
    is_refusal: impl Fn(&Error) -> bool,
    mut send: impl FnMut(Option<&'k CustomerKey>) -> Fut,
) -> Result<T>
where
    Fut: std::future::Future<Output = Result<T>>,
{
    use std::sync::atomic::Ordering;
    let n = keys.len();
    let first = last.load(Ordering::Relaxed) % n.max(1);
    let mut refused = None;
    for i in (0..n).map(|j| (first + j) % n) {
        match send(keys[i]).await {
            Ok(v) => {
                last.store(i, Ordering::Relaxed);
                return Ok(v);
            }
            Err(e) if is_refusal(&e) => refused = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(refused.expect("read_with_keys is given at least one key"))
}

/// S3 server-side encryption at rest (`x-amz-server-side-encryption`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sse {
    /// `AES256`: keys managed by the server (SSE-S3).
    Aes256,
    /// `aws:kms`, with the key id or ARN (None: the account's default key).
    Kms(Option<String>),
}

impl Sse {
    /// From the value users type (`--sse AES256|aws:kms`) and an optional
    /// KMS key id.
    pub fn parse(value: &str, kms_key_id: Option<String>) -> Result<Self> {
        match value {
            "AES256" if kms_key_id.is_none() => Ok(Sse::Aes256),
            "aws:kms" => Ok(Sse::Kms(kms_key_id)),
            "AES256" => Err(Error::invalid(
                Op::Upload,
                "--sse-kms-key-id",
                "a KMS key id goes with --sse aws:kms, not AES256",
            )),
            other => Err(Error::invalid(
                Op::Upload,
                "--sse",
                format!("{other:?} is not a server-side encryption: use AES256 or aws:kms"),
            )),
        }
    }
}

/// What an S3 request of one kind takes from [`S3Encryption`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum S3RequestKind {
    /// PutObject, CreateMultipartUpload, CopyObject's destination: SSE
    /// and the customer key.
    Create,
    /// UploadPart, UploadPartCopy, GetObject, HeadObject: the customer
    /// key only.
    Access,
}

/// The keys an S3 store sends (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Encryption {
    /// Encryption at rest for new objects.
    pub sse: Option<Sse>,
    /// SSE-C: the customer key objects are written and read with.
    pub customer_key: Option<CustomerKey>,
    /// SSE-C key of a server-side copy's source (None: `customer_key`,
    /// when the source was written with the same key).
    pub copy_source_key: Option<CustomerKey>,
}

const SSE_C: &str = "x-amz-server-side-encryption-customer";
const COPY_SSE_C: &str = "x-amz-copy-source-server-side-encryption-customer";

fn customer_headers(prefix: &str, key: &CustomerKey, out: &mut Vec<(String, String)>) {
    out.push((format!("{prefix}-algorithm"), "AES256".into()));
    out.push((format!("{prefix}-key"), key.to_base64()));
    out.push((format!("{prefix}-key-md5"), key.md5_base64()));
}

impl S3Encryption {
    /// Whether nothing is configured.
    pub fn is_empty(&self) -> bool {
        self.sse.is_none() && self.customer_key.is_none() && self.copy_source_key.is_none()
    }

    /// The headers (lowercase names) a request of `kind` carries; `copy`:
    /// it copies from a source object (`x-amz-copy-source`).
    pub fn headers(&self, kind: S3RequestKind, copy: bool) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if kind == S3RequestKind::Create {
            match &self.sse {
                Some(Sse::Aes256) => {
                    out.push(("x-amz-server-side-encryption".into(), "AES256".into()))
                }
                Some(Sse::Kms(id)) => {
                    out.push(("x-amz-server-side-encryption".into(), "aws:kms".into()));
                    if let Some(id) = id {
                        out.push((
                            "x-amz-server-side-encryption-aws-kms-key-id".into(),
                            id.clone(),
                        ));
                    }
                }
                None => {}
            }
        }
        if let Some(k) = &self.customer_key {
            customer_headers(SSE_C, k, &mut out);
        }
        if copy && let Some(k) = self.copy_source_key.as_ref().or(self.customer_key.as_ref()) {
            customer_headers(COPY_SSE_C, k, &mut out);
        }
        out
    }

    /// The keys a read (GET, HEAD) of an object may need, in the order to
    /// try them: the customer key, the copy source's key (a copy's source
    /// is read, by HEAD, before it is copied), then none (an object under
    /// no customer key refuses one). Empty when no customer key is given.
    pub fn read_keys(&self) -> Vec<Option<&CustomerKey>> {
        let mut out: Vec<Option<&CustomerKey>> = Vec::new();
        for k in [&self.customer_key, &self.copy_source_key]
            .into_iter()
            .flatten()
        {
            if !out.contains(&Some(k)) {
                out.push(Some(k));
            }
        }
        if !out.is_empty() {
            out.push(None);
        }
        out
    }

    /// [`S3Encryption::headers`] with `customer` in place of the customer
    /// key (a read's candidate from [`S3Encryption::read_keys`]).
    pub fn headers_with(
        &self,
        kind: S3RequestKind,
        copy: bool,
        customer: Option<&CustomerKey>,
    ) -> Vec<(String, String)> {
        S3Encryption {
            customer_key: customer.cloned(),
            copy_source_key: self.copy_source_key.clone().or(self.customer_key.clone()),
            sse: self.sse.clone(),
        }
        .headers(kind, copy)
    }

    /// The headers a presigned request of `method` must be sent with (a
    /// GET or HEAD: the customer key; a PUT: SSE and the customer key),
    /// signed into the URL, so its holder reads or writes under the keys
    /// this store was given, as a request of ours would.
    pub fn presign_headers(&self, method: PresignMethod) -> Vec<(String, String)> {
        match method {
            PresignMethod::Get | PresignMethod::Head => self.headers(S3RequestKind::Access, false),
            PresignMethod::Put => self.headers(S3RequestKind::Create, false),
            PresignMethod::Delete | PresignMethod::Post => Vec::new(),
        }
    }

    /// Whether a header (lowercase name) carries key material, so must not
    /// be shown.
    pub fn is_secret_header(name: &str) -> bool {
        name.ends_with("-customer-key") || name.ends_with("-encryption-key")
    }
}

/// A GCS key for new objects and reads (`--encryption-key`, as gcloud
/// takes it): a customer-supplied key (CSEK, base64 of 32 bytes) or a
/// Cloud KMS key name (CMEK, `projects/P/locations/L/keyRings/R/cryptoKeys/K`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcsKey {
    /// CSEK: sent with every request that touches the object's bytes.
    Customer(CustomerKey),
    /// CMEK: named on inserts, composes and rewrites (`kmsKeyName`).
    Kms(String),
}

impl GcsKey {
    /// From `--encryption-key`'s value; the value is never echoed.
    pub fn parse(value: &str) -> Result<Self> {
        let v = value.trim();
        if v.starts_with("projects/") && v.contains("/cryptoKeys/") {
            return Ok(GcsKey::Kms(v.to_owned()));
        }
        match STANDARD
            .decode(v)
            .ok()
            .and_then(|d| <[u8; 32]>::try_from(d.as_slice()).ok())
        {
            Some(raw) => Ok(GcsKey::Customer(CustomerKey(raw))),
            None => Err(Error::invalid(
                Op::Read,
                "--encryption-key",
                "an encryption key is base64 of 32 bytes (CSEK) or a Cloud KMS key name projects/.../cryptoKeys/... (CMEK)",
            )),
        }
    }
}

/// The keys a GCS store sends (see [`GcsKey`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcsEncryption {
    /// The key for new objects (and, a CSEK, for reads too).
    pub key: Option<GcsKey>,
    /// More customer keys objects may be under (`--decryption-keys`), as
    /// gcloud takes them: reads only, never used to write.
    pub decryption_keys: Vec<CustomerKey>,
}

impl GcsEncryption {
    /// The keys a read of an object's bytes may need, in the order to try
    /// them: `--encryption-key` (a CSEK), each `--decryption-keys`, then no
    /// key (an object under none, or under Cloud KMS, refuses a CSEK).
    /// Empty when no customer key is given: reads send none.
    pub fn read_keys(&self) -> Vec<Option<&CustomerKey>> {
        let mut out: Vec<Option<&CustomerKey>> = Vec::new();
        if let Some(GcsKey::Customer(k)) = &self.key {
            out.push(Some(k));
        }
        for k in &self.decryption_keys {
            if !out.contains(&Some(k)) {
                out.push(Some(k));
            }
        }
        if !out.is_empty() {
            out.push(None);
        }
        out
    }

    /// The headers a presigned request of `method` must be sent with: a
    /// CSEK on a GET, HEAD or PUT (a signed URL carries no key itself, so
    /// its holder sends the key, and the signature binds which). A Cloud
    /// KMS key needs nothing: the bucket's or the object's key is used.
    pub fn presign_headers(&self, method: PresignMethod) -> Vec<(String, String)> {
        let Some(GcsKey::Customer(k)) = &self.key else {
            return Vec::new();
        };
        match method {
            PresignMethod::Get | PresignMethod::Head | PresignMethod::Put => vec![
                ("x-goog-encryption-algorithm".into(), "AES256".into()),
                ("x-goog-encryption-key".into(), k.to_base64()),
                ("x-goog-encryption-key-sha256".into(), k.sha256_base64()),
            ],
            PresignMethod::Delete | PresignMethod::Post => Vec::new(),
        }
    }

    /// `--decryption-keys`' value: comma-separated base64 keys of 32
    /// bytes; none is ever echoed.
    pub fn parse_decryption_keys(value: &str) -> Result<Vec<CustomerKey>> {
        value
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .enumerate()
            .map(|(i, v)| match GcsKey::parse(v) {
                Ok(GcsKey::Customer(k)) => Ok(k),
                _ => Err(Error::invalid(
                    Op::Read,
                    "--decryption-keys",
                    format!(
                        "key {} of the list is not base64 of 32 bytes (a customer-supplied key)",
                        i + 1
                    ),
                )),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_raw_or_base64_and_never_shown() {
        let raw = [7u8; 32];
        let a = CustomerKey::from_slice("k", &raw).unwrap();
        let b =
            CustomerKey::from_slice("k", format!("{}\n", STANDARD.encode(raw)).as_bytes()).unwrap();
        assert_eq!(a, b);
        let shown = format!(
            "{a:?} {:?}",
            S3Encryption {
                customer_key: Some(a.clone()),
                ..Default::default()
            }
        );
        assert!(!shown.contains(&a.to_base64()), "{shown}");
        let err = CustomerKey::from_slice("k", b"short secret").unwrap_err();
        assert!(!err.to_string().contains("short secret"), "{err}");
    }

    #[test]
    fn headers_by_request_kind() {
        let key = CustomerKey::new([1; 32]);
        let e = S3Encryption {
            sse: Some(Sse::Kms(Some("k1".into()))),
            customer_key: Some(key.clone()),
            copy_source_key: None,
        };
        let names = |v: Vec<(String, String)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        let create = names(e.headers(S3RequestKind::Create, false));
        assert!(create.contains(&"x-amz-server-side-encryption-aws-kms-key-id".to_string()));
        let access = names(e.headers(S3RequestKind::Access, true));
        assert!(!access.iter().any(|n| n == "x-amz-server-side-encryption"));
        assert!(
            access
                .iter()
                .any(|n| n == "x-amz-copy-source-server-side-encryption-customer-key")
        );
        assert!(Sse::parse("AES256", Some("x".into())).is_err());
        assert!(Sse::parse("aes", None).is_err());
    }

    #[test]
    fn gcs_keys() {
        let k = GcsKey::parse(&STANDARD.encode([3u8; 32])).unwrap();
        assert_eq!(k, GcsKey::Customer(CustomerKey::new([3; 32])));
        let name = "projects/p/locations/l/keyRings/r/cryptoKeys/k";
        assert_eq!(GcsKey::parse(name).unwrap(), GcsKey::Kms(name.into()));
        let err = GcsKey::parse("c2VjcmV0").unwrap_err().to_string();
        assert!(!err.contains("c2VjcmV0"), "{err}");
        let a = CustomerKey::new([1; 32]);
        let b = CustomerKey::new([2; 32]);
        let list = format!("{}, {}", b.to_base64(), a.to_base64());
        let e = GcsEncryption {
            key: Some(GcsKey::Customer(a.clone())),
            decryption_keys: GcsEncryption::parse_decryption_keys(&list).unwrap(),
        };
        assert_eq!(e.read_keys(), vec![Some(&a), Some(&b), None]);
        assert!(GcsEncryption::default().read_keys().is_empty());
        let err = GcsEncryption::parse_decryption_keys(&format!("{},c2VjcmV0", a.to_base64()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("key 2") && !err.contains("c2VjcmV0"), "{err}");
    }
}
