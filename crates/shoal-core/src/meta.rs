//! Object metadata and list requests, the same shape for every backend.

use std::collections::BTreeMap;
use std::ops::Range;

/// What a listing or a HEAD tells about one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The key, verbatim.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, Unix nanoseconds (None when the projection left it out).
    pub updated_ns: Option<i128>,
    /// The checksums the store keeps for the object, strongest first.
    pub checksums: crate::checksum::Checksums,
    /// The store's version token: GCS generation or S3 ETag.
    pub version: Option<ObjectVersion>,
    /// Storage class, when the store says.
    pub storage_class: Option<String>,
    /// `Content-Encoding` as stored (e.g. `gzip`).
    pub content_encoding: Option<String>,
    /// `Content-Type` as stored, when the answer carried it (a HEAD, an
    /// upload's answer; listings leave it out).
    pub content_type: Option<String>,
    /// `Cache-Control` as stored (HEAD and upload answers only).
    pub cache_control: Option<String>,
    /// `Content-Disposition` as stored (HEAD and upload answers only).
    pub content_disposition: Option<String>,
    /// Custom metadata (S3 `x-amz-meta-*`, GCS `metadata`; HEAD and
    /// upload answers only).
    pub metadata: BTreeMap<String, String>,
    /// The file time recorded in the metadata ([`crate::file_time`]), from
    /// an answer that carries it but not the whole map (a GCS listing).
    /// Read it with [`ObjectMeta::recorded_time`].
    pub recorded: crate::file_time::Recorded,
    /// Set when this describes one stored version, addressed as such: by
    /// a listing of every version ([`ListRequest::versions`]) or a read of
    /// one version ([`crate::VersionStore::head_version`]). `version` then names
    /// that version (a GCS generation, an S3
    /// [`ObjectVersion::VersionId`]), and copies and reads of it ask for
    /// that version (GCS `sourceGeneration`, S3 `?versionId=`), current
    /// or not.
    pub version_state: Option<VersionState>,
    /// GCS metageneration: bumped by every change of the object's metadata
    /// (the generation changes only with its bytes). An update of the
    /// metadata is pinned to both (`ifMetagenerationMatch`), so a change
    /// made meanwhile by another writer is never overwritten.
    pub metageneration: Option<i64>,
}

impl ObjectMeta {
    /// The file time recorded at upload ([`crate::file_time`]), when this
    /// answer carried it.
    pub fn recorded_time(&self) -> Option<crate::file_time::FileTime> {
        match self.recorded {
            crate::file_time::Recorded::At(t) => Some(t),
            _ => crate::file_time::from_metadata(&self.metadata),
        }
    }

    /// Whether this answer could say what time was recorded: it carried
    /// the metadata (an S3 listing carries none).
    pub fn knows_recorded_time(&self) -> bool {
        self.recorded != crate::file_time::Recorded::Unknown || !self.metadata.is_empty()
    }

    /// The object's time as a sync compares it: the recorded file time,
    /// else its own update time; with whether it is kept to the second.
    pub fn file_time(&self) -> Option<(i128, bool)> {
        match self.recorded_time() {
            Some(t) => Some((t.ns, t.whole_seconds)),
            None => self.updated_ns.map(|ns| (ns, false)),
        }
    }
}

/// One stored version, as a listing of every version (`ls
/// --all-versions`) or a read by version id shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VersionState {
    /// Whether it is the key's current version (S3 `IsLatest`; on GCS, a
    /// generation without `timeDeleted`); None where the answer does not
    /// say (an S3 HEAD by version id). A key whose latest entry is an S3
    /// delete marker has no current object.
    pub is_latest: Option<bool>,
    /// An S3 delete marker: no bytes, only the record of a delete.
    pub delete_marker: bool,
    /// A GCS soft-deleted generation ([`ListRequest::soft_deleted`]):
    /// gone from the bucket, restorable until its retention ends.
    pub soft_deleted: bool,
}

/// The token that pins one version of an object, so a download can detect
/// that the object was replaced while it was being read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ObjectVersion {
    /// GCS generation number.
    Generation(i64),
    /// S3 ETag, quotes included as the server sent it.
    ETag(String),
    /// S3 version id (`x-amz-version-id`): one stored version of a key in
    /// a versioned bucket, current or not. A read pinned to it asks for
    /// that version (`?versionId=`), not whatever is current, so an old
    /// version can be read, copied and deleted by it. GCS needs no such
    /// variant: a generation is both the pin and the version's name.
    VersionId(String),
}

impl ObjectVersion {
    /// The version as its store writes it: a generation's digits, an ETag
    /// or version id as sent. [`crate::Scheme::parse_version`] reads a
    /// generation or an ETag back.
    pub fn text(&self) -> String {
        match self {
            ObjectVersion::Generation(g) => g.to_string(),
            ObjectVersion::ETag(e) | ObjectVersion::VersionId(e) => e.clone(),
        }
    }
}

impl std::fmt::Display for ObjectVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectVersion::Generation(g) => write!(f, "generation {g}"),
            ObjectVersion::ETag(e) => write!(f, "etag {e}"),
            ObjectVersion::VersionId(v) => write!(f, "version id {v}"),
        }
    }
}

/// A byte range `[start, end)`; `end == None` means to the end of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte, or None for "to the end".
    pub end: Option<u64>,
}

impl ByteRange {
    /// `[start, end)`.
    pub fn new(start: u64, end: u64) -> Self {
        ByteRange {
            start,
            end: Some(end),
        }
    }
    /// From `start` to the end.
    pub fn from(start: u64) -> Self {
        ByteRange { start, end: None }
    }
    /// The HTTP `Range` header value (`bytes=a-b`, inclusive end), or None
    /// when the range is the whole object.
    pub fn header_value(&self) -> Option<String> {
        match self.end {
            None if self.start == 0 => None,
            None => Some(format!("bytes={}-", self.start)),
            Some(end) => Some(format!("bytes={}-{}", self.start, end.saturating_sub(1))),
        }
    }
    /// Length, when bounded.
    pub fn len(&self) -> Option<u64> {
        self.end.map(|e| e.saturating_sub(self.start))
    }
    /// Whether the range is bounded and empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

impl From<Range<u64>> for ByteRange {
    fn from(r: Range<u64>) -> Self {
        ByteRange::new(r.start, r.end)
    }
}

/// How much of each object a listing should return. Backends that can
/// project (GCS `fields`) ask the server for less; others ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Projection {
    /// Only names (a plain `ls`).
    NameOnly,
    /// Name, size, update time (`ls -l`, `du`).
    NameSizeTime,
    /// Everything the backend has.
    #[default]
    Full,
}

/// One page of a listing. Offsets follow GCS: `start_offset` inclusive,
/// `end_offset` exclusive. Backends without an end (S3) stop on the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListRequest {
    /// Only keys starting with this.
    pub prefix: String,
    /// Group keys by this separator into `prefixes` (usually `/`).
    pub delimiter: Option<String>,
    /// First key to return (inclusive).
    pub start_offset: Option<String>,
    /// Keys before this one only (exclusive).
    pub end_offset: Option<String>,
    /// Continuation token from the previous page.
    pub page_token: Option<String>,
    /// Page size hint (backends cap it at their maximum).
    pub max_results: Option<u32>,
    /// A GCS `matchGlob` hint; the caller re-filters, so backends may ignore it.
    pub match_glob: Option<String>,
    /// What each result needs to carry.
    pub projection: Projection,
    /// Every version of each key, noncurrent ones and S3 delete markers
    /// too (S3 ListObjectVersions, GCS `versions=true`), newest first
    /// within a key, each with its [`ObjectMeta::version_state`]. The page
    /// token is then the store's own (S3: key and version-id markers).
    pub versions: bool,
    /// Only soft-deleted generations (GCS `softDeleted=true`, on buckets
    /// with a soft-delete policy), each marked
    /// [`VersionState::soft_deleted`]. A server that ignores the
    /// parameter answers live objects, which the backend drops: such a
    /// listing is empty, never live objects taken for deleted ones.
    pub soft_deleted: bool,
}

/// One page of results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    /// Objects on this page, in key order.
    pub objects: Vec<ObjectMeta>,
    /// Common prefixes (with a delimiter), in key order.
    pub prefixes: Vec<String>,
    /// Token for the next page, None on the last.
    pub next_page_token: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_headers() {
        assert_eq!(ByteRange::from(0).header_value(), None);
        assert_eq!(ByteRange::from(5).header_value().unwrap(), "bytes=5-");
        assert_eq!(ByteRange::new(0, 10).header_value().unwrap(), "bytes=0-9");
        assert_eq!(ByteRange::new(10, 11).len(), Some(1));
    }
}
