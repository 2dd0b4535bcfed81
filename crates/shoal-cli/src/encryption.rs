//! Encryption flags every verb takes (issue #54), with the names AWS CLI
//! and gcloud users type; read at parse time, so a bad key file is a one-line
//! usage error before any request. Turned into the stores' settings in
//! `config.rs`.

use clap::Args;
use shoal_core::encryption::{CustomerKey, GcsEncryption, GcsKey, S3Encryption, Sse};

/// S3 server-side encryption and customer keys.
#[derive(Debug, Args)]
#[command(next_help_heading = "Encryption options")]
pub(crate) struct EncryptionFlags {
    /// S3: encrypt new objects at rest with AES256 (SSE-S3) or aws:kms
    /// (SSE-KMS).
    #[arg(long, global = true, value_name = "ALG", value_parser = ["AES256", "aws:kms"])]
    pub(crate) sse: Option<String>,
    /// S3: the KMS key id or ARN for --sse aws:kms (default: the account's
    /// AWS managed key).
    #[arg(long, global = true, value_name = "ID", requires = "sse")]
    pub(crate) sse_kms_key_id: Option<String>,
    /// S3: customer-provided key (SSE-C) for every object written and
    /// read: a file of 32 raw bytes (or their base64).
    #[arg(long, global = true, value_name = "FILE", value_parser = parse_key_file)]
    pub(crate) sse_c_key_file: Option<CustomerKey>,
    /// S3: the SSE-C key of a server-side copy's source, when it differs
    /// from --sse-c-key-file.
    #[arg(long, global = true, value_name = "FILE", value_parser = parse_key_file)]
    pub(crate) sse_c_copy_source_key_file: Option<CustomerKey>,
    /// GCS: the key of every object written and read, as gcloud takes it:
    /// a customer-supplied key (CSEK, base64 of 32 bytes) or a Cloud KMS
    /// key name projects/.../cryptoKeys/... (CMEK, for new objects).
    #[arg(long, global = true, value_name = "KEY", value_parser = parse_gcs_key, hide_possible_values = true)]
    pub(crate) encryption_key: Option<GcsKey>,
    /// GCS: more customer-supplied keys (base64, comma-separated) that
    /// objects to read may be under, as gcloud takes them; each read uses
    /// the one its object was written with. Never used to write.
    #[arg(long, global = true, value_name = "KEY,...", value_parser = parse_decryption_keys)]
    pub(crate) decryption_keys: Option<DecryptionKeys>,
}

/// `--decryption-keys`' keys (a newtype: clap takes a `Vec` as a list of
/// occurrences).
#[derive(Debug, Clone)]
pub(crate) struct DecryptionKeys(Vec<CustomerKey>);

/// Like [`parse_gcs_key`]: the refusal never echoes the value.
fn parse_decryption_keys(v: &str) -> Result<DecryptionKeys, String> {
    GcsEncryption::parse_decryption_keys(v)
        .map(DecryptionKeys)
        .map_err(|e| {
            eprintln!("shoal: --decryption-keys: {}", e.message());
            std::process::exit(2)
        })
}

/// clap would echo a refused value in its error, and this one may be a
/// key: the refusal is said here, in one line without it.
fn parse_gcs_key(v: &str) -> Result<GcsKey, String> {
    GcsKey::parse(v).map_err(|e| {
        eprintln!("shoal: --encryption-key: {}", e.message());
        std::process::exit(2)
    })
}

fn parse_key_file(path: &str) -> Result<CustomerKey, String> {
    CustomerKey::from_file(std::path::Path::new(path)).map_err(|e| e.message().to_owned())
}

impl EncryptionFlags {
    /// The GCS store's settings.
    pub(crate) fn gcs(&self) -> GcsEncryption {
        GcsEncryption {
            key: self.encryption_key.clone(),
            decryption_keys: self
                .decryption_keys
                .as_ref()
                .map(|d| d.0.clone())
                .unwrap_or_default(),
        }
    }

    /// The S3 store's settings.
    pub(crate) fn s3(&self) -> S3Encryption {
        S3Encryption {
            sse: self.sse.as_deref().map(|s| match s {
                "AES256" => Sse::Aes256,
                _ => Sse::Kms(self.sse_kms_key_id.clone()),
            }),
            customer_key: self.sse_c_key_file.clone(),
            copy_source_key: self.sse_c_copy_source_key_file.clone(),
        }
    }
}
