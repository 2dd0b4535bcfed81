//! What a listing or a stat says about an object, as a Python value.

use std::collections::BTreeMap;

use pyo3::prelude::*;
use shoal_core::checksum::{OtherCrc, hex};
use shoal_core::{Location, ObjectMeta, ObjectVersion};

/// One object: its URL, size and what the store knows about it.
#[pyclass(frozen, get_all, module = "shoal._shoal")]
#[derive(Debug, Clone)]
pub(crate) struct ObjectInfo {
    /// `gs://bucket/key`.
    url: String,
    bucket: String,
    key: String,
    size: u64,
    /// Last update, seconds since the epoch.
    updated: Option<f64>,
    /// CRC32C as 8 hex digits.
    crc32c: Option<String>,
    /// MD5 as 32 hex digits.
    md5: Option<String>,
    /// A whole-object CRC32 as 8 hex digits (S3 objects uploaded with it,
    /// as boto3 and the AWS CLI do for one-request uploads).
    crc32: Option<String>,
    /// A whole-object CRC64NVME as 16 hex digits (what AWS computes for
    /// new objects).
    crc64nvme: Option<String>,
    /// A composite checksum (S3 multipart uploads by boto3 and the AWS
    /// CLI) as S3 spells it: `vm5fpQ==-4`, the CRC of the parts' CRCs.
    composite: Option<String>,
    /// The algorithm of `composite`'s CRCs: `CRC32` or `CRC32C`.
    composite_algorithm: Option<String>,
    /// GCS generation or S3 ETag (an S3 version id in a listing of
    /// versions): what pins a read to this object.
    version: Option<String>,
    /// GCS generation, as a number.
    generation: Option<i64>,
    /// S3 version id, where the answer named one (a versioned bucket).
    version_id: Option<String>,
    /// In a listing of versions: whether this is the key's current one.
    is_latest: Option<bool>,
    /// An S3 delete marker (no bytes: the record of a delete).
    delete_marker: bool,
    /// A GCS soft-deleted generation (`ls(soft_deleted=True)`).
    soft_deleted: bool,
    storage_class: Option<String>,
    content_encoding: Option<String>,
    /// What a stat (HEAD) says the object stores beside its bytes;
    /// listings leave these out (None, and no metadata).
    content_type: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    /// Custom metadata (S3 `x-amz-meta-*`, GCS `metadata`).
    metadata: BTreeMap<String, String>,
}

impl ObjectInfo {
    pub(crate) fn new(loc: &Location, m: ObjectMeta) -> Self {
        let at = loc.with_key(m.key.clone());
        let sums = m.checksums;
        ObjectInfo {
            url: at.to_string(),
            bucket: at.bucket,
            key: m.key,
            size: m.size,
            updated: m.updated_ns.map(|ns| ns as f64 / 1e9),
            crc32c: sums.crc32c().map(|c| format!("{c:08x}")),
            md5: sums.md5().map(|d| hex(&d)),
            crc32: match sums.other_crc() {
                Some(OtherCrc::Crc32(c)) => Some(format!("{c:08x}")),
                _ => None,
            },
            crc64nvme: match sums.other_crc() {
                Some(OtherCrc::Crc64Nvme(c)) => Some(format!("{c:016x}")),
                _ => None,
            },
            composite: sums.composite().map(|c| c.to_string()),
            composite_algorithm: sums.composite().map(|c| c.kind.name().to_owned()),
            version: m.version.as_ref().map(ObjectVersion::text),
            generation: match m.version {
                Some(ObjectVersion::Generation(g)) => Some(g),
                _ => None,
            },
            version_id: match &m.version {
                Some(ObjectVersion::VersionId(v)) => Some(v.clone()),
                _ => None,
            },
            is_latest: m.version_state.and_then(|s| s.is_latest),
            delete_marker: m.version_state.is_some_and(|s| s.delete_marker),
            soft_deleted: m.version_state.is_some_and(|s| s.soft_deleted),
            storage_class: m.storage_class,
            content_encoding: m.content_encoding,
            content_type: m.content_type,
            cache_control: m.cache_control,
            content_disposition: m.content_disposition,
            metadata: m.metadata,
        }
    }
}

#[pymethods]
impl ObjectInfo {
    fn __repr__(&self) -> String {
        format!("ObjectInfo({:?}, size={})", self.url, self.size)
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.url == other.url && self.size == other.size && self.version == other.version
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.url, self.size, &self.version).hash(&mut h);
        h.finish()
    }
}
