//! `update`: change what an object stores beside its bytes (type,
//! encoding, cache control, disposition, custom metadata, storage class)
//! without its bytes passing through this machine.
//!
//! On GCS the object is patched in place ([`Store::patch`]: objects.patch
//! with `ifGenerationMatch`). Elsewhere, and for a new storage class, it
//! is copied onto itself by the server ([`Store::copy`]: S3 CopyObject
//! with `x-amz-metadata-directive: REPLACE`, UploadPartCopy parts past
//! the part size; a GCS rewrite). A replacing copy stores only what it is
//! given, so the metadata seen is read first and merged with the change
//! ([`Change::applied`]).
//!
//! The write is pinned to the version seen: a patch by
//! `ifGenerationMatch`, a copy twice, its source (S3
//! `x-amz-copy-source-if-match`, GCS `ifSourceGenerationMatch`) and its
//! destination (S3 `If-Match`, GCS `ifGenerationMatch`). An object
//! written by someone else after it was seen is left as that writer left
//! it, and reported ([`replaced`]): a concurrent write wins.

use std::collections::BTreeSet;

use shoal_core::{
    CopyRequest, Error, ErrorKind, Location, ObjectMeta, ObjectVersion, Op, PutOptions, Store,
};

/// What to change on each object. Fields of `put` left unset keep the
/// object's value; `metadata` keys are added or replaced; `remove` keys
/// are dropped.
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// Type, encoding, cache control, disposition, custom metadata and
    /// storage class to store; the other fields are not read.
    pub put: PutOptions,
    /// Custom metadata keys to remove.
    pub remove: BTreeSet<String>,
}

/// What [`update`] did with one object.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Stored anew with the change: the object as the server describes it.
    Updated(Box<ObjectMeta>),
    /// It already held what the change asks for: nothing was sent.
    Unchanged,
}

impl Change {
    /// Whether the change asks for anything.
    pub fn is_empty(&self) -> bool {
        !self.put.overrides_metadata()
            && self.put.storage_class.is_none()
            && self.put.acl.is_none()
            && self.remove.is_empty()
    }

    /// A change that asks for nothing, or sets and removes one key, is
    /// refused with a one-line reason.
    pub fn check(&self) -> Result<(), String> {
        if self.is_empty() {
            return Err("nothing to change (give --content-type, --content-encoding, --cache-control, --content-disposition, --metadata, --remove-metadata, --storage-class, --acl or --predefined-acl)".into());
        }
        if let Some(k) = self
            .remove
            .iter()
            .find(|k| self.put.metadata.contains_key(*k))
        {
            return Err(format!("metadata key '{k}' is both set and removed"));
        }
        Ok(())
    }

    /// What the object `seen` stores after the change: its own values
    /// where the change sets none, its metadata with the change's keys
    /// added and `remove` dropped, pinned to its version.
    pub fn applied(&self, seen: &ObjectMeta) -> PutOptions {
        let mut put = self.put.keeping(seen);
        put.metadata.retain(|k, _| !self.remove.contains(k));
        if put.storage_class.is_none() {
            put.storage_class = seen.storage_class.clone();
        }
        put.if_not_exists = false;
        put.if_match = seen.version.clone();
        put
    }

    /// Whether the change asks `seen` for another storage class.
    pub fn changes_class(&self, seen: &ObjectMeta) -> bool {
        match (&self.put.storage_class, &seen.storage_class) {
            (None, _) => false,
            (Some(want), Some(has)) => !want.eq_ignore_ascii_case(has),
            (Some(_), None) => true,
        }
    }

    /// Whether `seen` already stores what the change asks for.
    pub fn holds(&self, seen: &ObjectMeta) -> bool {
        let after = self.applied(seen);
        // An object's ACL is not read: one asked for is always sent.
        self.put.acl.is_none()
            && !self.changes_class(seen)
            && after.content_type == seen.content_type
            && after.content_encoding == seen.content_encoding
            && after.cache_control == seen.cache_control
            && after.content_disposition == seen.content_disposition
            && after.metadata == seen.metadata
    }
}

/// Applies `change` to the object at `loc`, pinned to `seen` (the object
/// as it was listed or read, with its version and its custom metadata).
/// `part_size` and `workers` are those of a server-side copy
/// ([`CopyRequest`]).
pub(crate) async fn update(
    store: &dyn Store,
    loc: &Location,
    seen: &ObjectMeta,
    change: &Change,
    part_size: u64,
    workers: usize,
) -> shoal_core::Result<Outcome> {
    if change.holds(seen) {
        return Ok(Outcome::Unchanged);
    }
    if seen.version.is_none() {
        return Err(Error::new(
            ErrorKind::Unsupported,
            Op::Update,
            loc.to_string(),
            "the store gave no version to pin the update to",
        ));
    }
    let opts = change.applied(seen);
    // A copy whose source pin failed says so as `Changed` (the stores'
    // words for `cp`: "nothing was copied"); here it is the object
    // replaced after it was read, like a failed pin of a patch.
    let pinned = |r: shoal_core::Result<ObjectMeta>| match r {
        Ok(meta) => Ok(Outcome::Updated(Box::new(meta))),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::Precondition | ErrorKind::NotFound | ErrorKind::Changed
            ) =>
        {
            Err(replaced(loc, seen))
        }
        Err(e) => Err(e),
    };
    // Where the store changes metadata in place (GCS), nothing is
    // rewritten; a new storage class needs the bytes rewritten.
    if !change.changes_class(seen) {
        match store.patch(&loc.bucket, &loc.key, seen, &opts).await {
            Err(e) if e.kind() == ErrorKind::Unsupported => {}
            r => return pinned(r),
        }
    }
    let req = CopyRequest {
        src_bucket: &loc.bucket,
        src_key: &loc.key,
        src: seen,
        dst_bucket: &loc.bucket,
        dst_key: &loc.key,
        opts: &opts,
        replace_metadata: true,
        part_size,
        workers: workers.max(1),
        requests: None,
    };
    pinned(store.copy(&req).await)
}

/// Applies `change` to the object at `loc` as it is now: its metadata
/// read (a listing does not carry an S3 object's), then [`update`] pinned
/// to the version read. With `expected` (the version a listing showed, or
/// the caller asked for), an object at another version is left as it is
/// and reported ([`replaced`]). With `dry_run` nothing is written, and an
/// object the change would alter is `Updated` as read.
pub async fn update_current(
    store: &dyn Store,
    loc: &Location,
    expected: Option<&ObjectVersion>,
    change: &Change,
    dry_run: bool,
    part_size: u64,
    workers: usize,
) -> shoal_core::Result<Outcome> {
    let seen = store.head(&loc.bucket, &loc.key).await?;
    if let Some(v) = expected
        && seen.version.as_ref() != Some(v)
    {
        let was = ObjectMeta {
            version: Some(v.clone()),
            ..seen
        };
        return Err(replaced(loc, &was));
    }
    if change.holds(&seen) {
        return Ok(Outcome::Unchanged);
    }
    if dry_run {
        return Ok(Outcome::Updated(Box::new(seen)));
    }
    update(store, loc, &seen, change, part_size, workers).await
}

/// The object `seen` at `loc` is no longer what was read: it was
/// replaced or deleted, and is left as it is.
pub(crate) fn replaced(loc: &Location, seen: &ObjectMeta) -> Error {
    let at = seen
        .version
        .as_ref()
        .map(|v| format!(" (seen at {v})"))
        .unwrap_or_default();
    Error::new(
        ErrorKind::Precondition,
        Op::Update,
        loc.to_string(),
        format!("changed since it was read{at}; the newer object was left as it is"),
    )
    .with_hint("run the update again to change the object as it is now")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use shoal_core::BucketStore;
    use shoal_core::memory::MemoryStore;

    fn change() -> Change {
        let mut c = Change::default();
        c.put.content_type = Some("text/csv".into());
        c.put.metadata.insert("new".into(), "1".into());
        c.remove.insert("old".into());
        c
    }

    async fn stored(store: &MemoryStore) -> ObjectMeta {
        let mut put = PutOptions {
            cache_control: Some("no-cache".into()),
            ..Default::default()
        };
        put.metadata.insert("old".into(), "x".into());
        put.metadata.insert("kept".into(), "y".into());
        store
            .put("b", "k", Bytes::from_static(b"data"), &put)
            .await
            .unwrap();
        store.head("b", "k").await.unwrap()
    }

    #[tokio::test]
    async fn merges_with_what_is_stored() {
        let store = MemoryStore::new();
        store.create_bucket("b").await.unwrap();
        let seen = stored(&store).await;
        let loc = Location::parse("gs://b/k").unwrap();
        let c = change();
        let out = update(&store, &loc, &seen, &c, 1 << 20, 1).await.unwrap();
        assert!(matches!(out, Outcome::Updated(_)));
        let now = store.head("b", "k").await.unwrap();
        assert_eq!(now.content_type.as_deref(), Some("text/csv"));
        assert_eq!(now.cache_control.as_deref(), Some("no-cache"));
        let keys: Vec<_> = now.metadata.keys().cloned().collect();
        assert_eq!(keys, ["kept", "new"]);
        assert_eq!(now.size, 4);
        // Again: nothing left to change.
        let out = update(&store, &loc, &now, &c, 1 << 20, 1).await.unwrap();
        assert!(matches!(out, Outcome::Unchanged));
    }

    #[tokio::test]
    async fn a_second_writer_wins() {
        let store = MemoryStore::new();
        store.create_bucket("b").await.unwrap();
        let seen = stored(&store).await;
        store
            .put(
                "b",
                "k",
                Bytes::from_static(b"newer"),
                &PutOptions::default(),
            )
            .await
            .unwrap();
        let loc = Location::parse("gs://b/k").unwrap();
        let e = update(&store, &loc, &seen, &change(), 1 << 20, 1)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Precondition);
        assert!(e.to_string().contains("left as it is"), "{e}");
        let now = store.head("b", "k").await.unwrap();
        assert_eq!(now.size, 5);
        assert!(now.metadata.is_empty());
        assert_ne!(now.content_type.as_deref(), Some("text/csv"));
    }

    #[test]
    fn refuses_empty_and_contradictory_changes() {
        assert!(Change::default().check().is_err());
        let mut c = change();
        assert!(c.check().is_ok());
        c.remove.insert("new".into());
        assert!(c.check().unwrap_err().contains("both set and removed"));
    }
}
