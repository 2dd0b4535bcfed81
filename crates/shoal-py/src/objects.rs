//! What a listing or a stat says about an object, as a Python value.

use pyo3::prelude::*;
use shoal_core::checksum::hex;
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
    /// GCS generation or S3 ETag.
    version: Option<String>,
    storage_class: Option<String>,
    content_encoding: Option<String>,
}

impl ObjectInfo {
    pub(crate) fn new(loc: &Location, m: ObjectMeta) -> Self {
        let at = loc.with_key(m.key.clone());
        ObjectInfo {
            url: at.to_string(),
            bucket: at.bucket,
            key: m.key,
            size: m.size,
            updated: m.updated_ns.map(|ns| ns as f64 / 1e9),
            crc32c: m.crc32c.map(|c| format!("{c:08x}")),
            md5: m.md5.map(|d| hex(&d)),
            version: m.version.map(|v| match v {
                ObjectVersion::Generation(g) => g.to_string(),
                ObjectVersion::ETag(e) => e,
            }),
            storage_class: m.storage_class,
            content_encoding: m.content_encoding,
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
