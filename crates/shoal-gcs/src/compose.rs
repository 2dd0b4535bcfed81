//! Multipart uploads on GCS: parallel composite uploads.
//!
//! The JSON API has no S3-style multipart upload. What it has is `compose`:
//! the server concatenates up to 32 existing objects into one, without
//! moving data through the client. So a "multipart upload" here is:
//!
//! 1. `multipart_start` invents an upload id (128 random bits: ids of
//!    concurrent uploads, even from other machines, must not collide, and
//!    the id is the only thing naming the temporaries).
//! 2. Every part is an ordinary object
//!    `.shoal-tmp/composite/<upload_id>/<part:05>`, uploaded with its CRC32C
//!    so the server verifies it. Parts have no minimum size (they are just
//!    objects), and five zero-padded digits keep the names in part order up
//!    to the 10,000 parts we allow.
//! 3. `multipart_complete` composes 32 at a time into intermediate
//!    temporaries, then those, until 32 or fewer remain, which are composed
//!    into the destination. 10,000 parts take three levels (32³ = 32,768).
//!    GCS computes the composite's CRC32C server-side from the components'
//!    checksums, and we compare it with the expected one (the caller's, or
//!    one combined from the parts' CRC32Cs): on a mismatch the destination
//!    is deleted and the upload fails with `Integrity`.
//! 4. The temporaries (parts and intermediates) are deleted afterwards,
//!    whether composing succeeded or not, so a failed upload leaves nothing
//!    behind but what a crash would; `multipart_abort` deletes by name
//!    every part this process sent (the store records them as they go
//!    out): a listing of the prefix, as before, missed parts the server
//!    stored after it. Only an upload of another process (a crash) is
//!    cleaned up by listing its prefix: a later run to the same bucket
//!    on the same machine does that for uploads whose process is gone
//!    (`leftovers`).
//!
//! Parts and intermediates carry `ifGenerationMatch=0`: only this upload
//! makes those names, so a retry never replaces anything, and a lost
//! answer is recognised as our own object (`shoal_core::retry::safe`).
//!
//! Composite objects have no MD5 on GCS (only CRC32C); that is GCS's
//! design, not a shortcut here.

use std::collections::HashSet;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use reqwest::header::CONTENT_TYPE;
use serde_json::json;
use shoal_core::checksum::{Checksums, crc32c_combine_all};
use shoal_core::retry::safe::{self, Ours, Planned};
use shoal_core::{
    Error, ErrorKind, ListRequest, ListedPart, MultipartUpload, ObjectMeta, Op, PartInfo,
    PendingUpload, Projection, PutOptions, Result,
};

use crate::client::{Client, Query, gs_url};
use crate::list::parse_object;
use crate::object::check_stored_crc;

/// Where temporaries live, relative to the bucket root.
pub(crate) const TMP_ROOT: &str = ".shoal-tmp/composite/";

/// The most sources one compose request accepts (a GCS limit).
pub(crate) const MAX_COMPOSE_SOURCES: usize = 32;

/// Concurrent compose and delete requests while completing an upload:
/// enough to hide request latency (tens of ms each on GCS) for the ~300
/// intermediate composes of a 10,000-part upload, few enough not to trip
/// per-bucket rate limits.
const FAN_OUT: usize = 16;

/// The prefix under which one upload's temporaries live.
pub(crate) fn upload_prefix(upload_id: &str) -> String {
    format!("{TMP_ROOT}{upload_id}/")
}

/// The temporary object holding one part.
pub(crate) fn part_name(upload_id: &str, part: u32) -> String {
    format!("{}{part:05}", upload_prefix(upload_id))
}

/// The custom metadata every part carries: the key its upload writes, so
/// a listing of the uploads kept for resuming (`shoal uploads`) can say
/// what each one is for. A composed object takes none of its parts'
/// metadata (checked on fake-gcs-server and storage-testbench).
pub(crate) const KEY_META: &str = "shoal-upload-key";

/// The part number `name` holds, if it is one of `upload_id`'s parts (an
/// intermediate of its completion, `c<round>-<index>`, is not).
pub(crate) fn part_number(upload_id: &str, name: &str) -> Option<u32> {
    let digits = name.strip_prefix(&upload_prefix(upload_id))?;
    if digits.len() != 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|n| *n >= 1)
}

/// A fresh upload id: 32 hex digits.
pub(crate) fn new_upload_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Whether `id` has the form [`new_upload_id`] gives (a journal entry
/// read back names nothing else: no other prefix is ever listed and
/// cleaned on its word).
pub(crate) fn is_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A component of a compose: its name, CRC32C and size.
#[derive(Debug, Clone)]
struct Piece {
    name: String,
    crc: u32,
    size: u64,
}

impl Client {
    /// One compose request: `sources` (in order) into `dest`, which will
    /// hold `ours` (the sources' combined CRC32C and total size): what a
    /// retry after a lost answer recognises as its own.
    pub(crate) async fn compose(
        &self,
        bucket: &str,
        sources: &[&str],
        dest: &str,
        opts: &PutOptions,
        ours: Ours,
    ) -> Result<ObjectMeta> {
        let url = gs_url(bucket, dest);
        let mut destination = serde_json::Map::new();
        crate::object::descriptive_metadata(&mut destination, opts);
        let sources: Vec<_> = sources.iter().map(|s| json!({ "name": s })).collect();
        let body = &Bytes::from(
            json!({ "sourceObjects": sources, "destination": destination }).to_string(),
        );
        let url_ref = url.as_str();
        safe::write(
            &self.retry,
            Planned::of_put(opts),
            ours,
            |pre| async move {
                let g = crate::object::generation_match(&pre.apply(&PutOptions::default()));
                let q = Query::new()
                    .add_opt("ifGenerationMatch", g.as_deref())
                    .add_opt("destinationPredefinedAcl", opts.acl.as_deref());
                let q = q.as_str();
                let http_url = format!("{}/compose{q}", self.object_url(bucket, dest));
                let req = self
                    .http
                    .post(&http_url)
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone());
                let resp = self.once_bytes(Op::Compose, url_ref, req).await?;
                parse_object(&resp, Op::Compose, url_ref)
            },
            || self.probe(bucket, dest),
            |m| m,
        )
        .await
    }

    pub(crate) async fn multipart_put(
        &self,
        upload: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc32c: u32,
    ) -> Result<PartInfo> {
        let url = gs_url(&upload.bucket, &upload.key);
        PartInfo::check_number(part_number, crate::MAX_PARTS, &url)?;
        let name = part_name(&upload.upload_id, part_number);
        let size = data.len() as u64;
        // Only this upload makes this name: it must not exist yet, so a
        // retry can never replace anything, and a lost answer is
        // recognised as our own part.
        let opts = PutOptions {
            crc32c: Some(crc32c),
            if_not_exists: true,
            metadata: [(KEY_META.to_owned(), upload.key.clone())].into(),
            ..Default::default()
        };
        self.put_op(Op::Multipart, &upload.bucket, &name, data, &opts)
            .await
            .map_err(|e| e.with_url(url))?;
        Ok(PartInfo {
            part_number,
            etag: name,
            crc32c,
            size,
        })
    }

    pub(crate) async fn multipart_complete(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        crc32c: Option<u32>,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        let url = gs_url(&upload.bucket, &upload.key);
        let pieces = checked_pieces(upload, parts, &url)?;
        let mut temps: Vec<String> = pieces.iter().map(|p| p.name.clone()).collect();
        let result = self
            .compose_tree(upload, pieces, crc32c, opts, &url, &mut temps)
            .await;
        self.delete_all(&upload.bucket, temps).await;
        result
    }

    /// Composes `level` into the destination, through as many rounds of
    /// intermediate temporaries as it takes (each added to `temps` before
    /// it is written, so the caller deletes it whatever happens).
    async fn compose_tree(
        &self,
        upload: &MultipartUpload,
        mut level: Vec<Piece>,
        crc32c: Option<u32>,
        opts: &PutOptions,
        url: &str,
        temps: &mut Vec<String>,
    ) -> Result<ObjectMeta> {
        let combined = combined_crc(&level, crc32c, url)?;
        let mut round = 0u32;
        while level.len() > MAX_COMPOSE_SOURCES {
            level = self
                .compose_round(upload, &level, round, url, temps)
                .await?;
            round += 1;
        }
        let names: Vec<&str> = level.iter().map(|p| p.name.as_str()).collect();
        let expected = crc32c.unwrap_or(combined);
        let ours = Ours {
            size: level.iter().map(|p| p.size).sum(),
            checksums: Checksums::default().with_crc32c(expected),
        };
        let meta = self
            .compose(&upload.bucket, &names, &upload.key, opts, ours)
            .await?;
        self.check_composed(&upload.bucket, &upload.key, meta, expected, url)
            .await
    }

    /// One round of the tree: `level` composed [`MAX_COMPOSE_SOURCES`] at
    /// a time into intermediates, in order (a group of one passes through
    /// as it is).
    async fn compose_round(
        &self,
        upload: &MultipartUpload,
        level: &[Piece],
        round: u32,
        url: &str,
        temps: &mut Vec<String>,
    ) -> Result<Vec<Piece>> {
        let bucket = upload.bucket.as_str();
        // Intermediates, like parts, are names only this upload makes.
        let plain = PutOptions {
            if_not_exists: true,
            ..PutOptions::default()
        };
        let groups: Vec<(usize, Vec<Piece>)> = level
            .chunks(MAX_COMPOSE_SOURCES)
            .map(|c| c.to_vec())
            .enumerate()
            .collect();
        for (i, g) in &groups {
            if g.len() > 1 {
                temps.push(intermediate_name(&upload.upload_id, round, *i));
            }
        }
        futures::stream::iter(groups)
            .map(|(i, group)| {
                let plain = &plain;
                async move {
                    if let [single] = group.as_slice() {
                        return Ok(single.clone());
                    }
                    let name = intermediate_name(&upload.upload_id, round, i);
                    self.compose_group(bucket, &group, name, plain, url).await
                }
            })
            .buffered(FAN_OUT)
            .try_collect()
            .await
    }

    /// Composes `group` into the intermediate `name`, whose CRC32C must be
    /// the one combined from the group's.
    async fn compose_group(
        &self,
        bucket: &str,
        group: &[Piece],
        name: String,
        plain: &PutOptions,
        url: &str,
    ) -> Result<Piece> {
        let names: Vec<&str> = group.iter().map(|p| p.name.as_str()).collect();
        let crc = crc32c_combine_all(group.iter().map(|p| (p.crc, p.size)));
        let size = group.iter().map(|p| p.size).sum();
        let ours = Ours {
            size,
            checksums: Checksums::default().with_crc32c(crc),
        };
        let meta = self
            .compose(bucket, &names, &name, plain, ours)
            .await
            .map_err(|e| e.with_url(url))?;
        check_stored_crc(Op::Compose, url, &meta, crc)?;
        Ok(Piece { name, crc, size })
    }

    /// The composed destination, if its CRC32C is `expected`. Otherwise
    /// what we just wrote is removed, but only that generation: never a
    /// newer object someone else put there meanwhile.
    async fn check_composed(
        &self,
        bucket: &str,
        key: &str,
        meta: ObjectMeta,
        expected: u32,
        url: &str,
    ) -> Result<ObjectMeta> {
        if meta.checksums.crc32c() == Some(expected) {
            return Ok(meta);
        }
        let generation = match &meta.version {
            Some(shoal_core::ObjectVersion::Generation(g)) => Some(*g),
            _ => None,
        };
        if let Err(e) = self.delete_if(bucket, key, generation).await {
            tracing::warn!(error = %e, "could not delete a composed object with a wrong checksum");
        }
        let got = meta
            .checksums
            .crc32c()
            .map_or("none".to_owned(), |c| format!("{c:08x}"));
        Err(Error::new(
            ErrorKind::Integrity,
            Op::Compose,
            url,
            format!(
                "the composed object has CRC32C {got}, expected {expected:08x}; it was deleted"
            ),
        ))
    }

    /// Deletes an upload's temporaries: by name, the parts `sent` says
    /// this process sent (each deleted whether or not it was stored, so
    /// none stored late is missed); for an upload of another process
    /// (`sent` is None: crashed, or started elsewhere), whatever a listing
    /// of its prefix finds.
    pub(crate) async fn multipart_abort(
        &self,
        upload: &MultipartUpload,
        sent: Option<std::collections::BTreeSet<u32>>,
    ) -> Result<()> {
        let url = gs_url(&upload.bucket, &upload.key);
        let names = match sent {
            Some(parts) => parts
                .into_iter()
                .map(|n| part_name(&upload.upload_id, n))
                .collect(),
            None => self.list_temporaries(upload, &url).await?,
        };
        self.delete_temporaries(upload, names, &url).await
    }

    /// Deletes parts `numbers` of `upload` by name.
    pub(crate) async fn delete_parts(
        &self,
        upload: &MultipartUpload,
        numbers: impl IntoIterator<Item = u32>,
    ) -> Result<()> {
        let names: Vec<String> = numbers
            .into_iter()
            .map(|n| part_name(&upload.upload_id, n))
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        let url = gs_url(&upload.bucket, &upload.key);
        self.delete_temporaries(upload, names, &url).await
    }

    /// Deletes `names`, temporaries of `upload`; an error says how many
    /// are left, and where.
    async fn delete_temporaries(
        &self,
        upload: &MultipartUpload,
        names: Vec<String>,
        url: &str,
    ) -> Result<()> {
        let failed = self.delete_all(&upload.bucket, names).await;
        if failed > 0 {
            return Err(Error::new(
                ErrorKind::ServerBusy,
                Op::Multipart,
                url,
                format!("{failed} temporary objects could not be deleted"),
            )
            .with_hint(format!(
                "they are under gs://{}/{}",
                upload.bucket,
                upload_prefix(&upload.upload_id)
            )));
        }
        Ok(())
    }

    async fn list_temporaries(&self, upload: &MultipartUpload, url: &str) -> Result<Vec<String>> {
        let listed = self
            .list_below(
                &upload.bucket,
                &upload_prefix(&upload.upload_id),
                Projection::NameOnly,
            )
            .await
            .map_err(|e| e.with_url(url))?;
        Ok(listed.into_iter().map(|o| o.key).collect())
    }

    /// Every object below `prefix` (temporaries: the server's prefix
    /// handling re-checked, it is not ours to trust).
    async fn list_below(
        &self,
        bucket: &str,
        prefix: &str,
        projection: Projection,
    ) -> Result<Vec<ObjectMeta>> {
        let mut req = ListRequest {
            prefix: prefix.to_owned(),
            projection,
            ..Default::default()
        };
        let mut out = Vec::new();
        loop {
            let page = (self.list_page(bucket, &req))
                .await
                .map_err(|e| e.with_op(Op::Multipart))?;
            out.extend(
                page.objects
                    .into_iter()
                    .filter(|o| o.key.starts_with(&req.prefix)),
            );
            match page.next_page_token {
                Some(t) => req.page_token = Some(t),
                None => return Ok(out),
            }
        }
    }

    /// What an earlier run left of composite upload `upload`: its parts
    /// (name as the token, size, CRC32C), and the other temporaries (the
    /// intermediates of a completion it did not finish), deleted here so
    /// that completing again can make them anew. No parts is no error: a
    /// part that run had on its way may still land, under this upload's
    /// name, so the upload goes on under its id rather than leave it.
    pub(crate) async fn composite_resume(
        &self,
        upload: &MultipartUpload,
    ) -> Result<Vec<ListedPart>> {
        let url = gs_url(&upload.bucket, &upload.key);
        let listed = self
            .list_below(
                &upload.bucket,
                &upload_prefix(&upload.upload_id),
                Projection::Full,
            )
            .await
            .map_err(|e| e.with_url(&url))?;
        let mut parts = Vec::new();
        let mut others = Vec::new();
        for o in listed {
            match (part_number(&upload.upload_id, &o.key), o.checksums.crc32c()) {
                (Some(n), Some(crc)) => parts.push(ListedPart {
                    part_number: n,
                    etag: o.key,
                    size: o.size,
                    crc32c: Some(crc),
                }),
                _ => others.push(o.key),
            }
        }
        self.delete_temporaries(upload, others, &url).await?;
        Ok(parts)
    }

    /// The composite uploads kept for resuming in `bucket` whose keys
    /// start with `prefix`: one per upload id found under the temporaries'
    /// root, with the time its first part was stored and the key its
    /// parts name (read from one part: a listing skips custom metadata).
    /// An upload whose parts name no key (made before they did) is listed
    /// under its temporaries' prefix, when `prefix` is empty.
    pub(crate) async fn composite_uploads(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<PendingUpload>> {
        let listed = (self.list_below(bucket, TMP_ROOT, Projection::NameSizeTime))
            .await
            .map_err(|e| e.with_url(format!("gs://{bucket}/{TMP_ROOT}")))?;
        // id -> (a part's name, the earliest time)
        let mut by_id: std::collections::BTreeMap<String, (String, Option<i128>)> =
            Default::default();
        for o in listed {
            let Some(id) = o.key[TMP_ROOT.len()..].split('/').next() else {
                continue;
            };
            if !is_upload_id(id) || part_number(id, &o.key).is_none() {
                continue;
            }
            let e = by_id
                .entry(id.to_owned())
                .or_insert_with(|| (o.key.clone(), o.updated_ns));
            e.1 = match (e.1, o.updated_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let mut out = Vec::new();
        for (id, (part, initiated_ns)) in by_id {
            let key = match self.head(bucket, &part).await {
                Ok(m) => m.metadata.get(KEY_META).cloned(),
                // Completed or aborted since the listing.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e.with_op(Op::Multipart)),
            };
            let key = match key {
                Some(k) if k.starts_with(prefix) => k,
                None if prefix.is_empty() => upload_prefix(&id),
                _ => continue,
            };
            out.push(PendingUpload {
                key,
                upload_id: id,
                initiated_ns,
            });
        }
        Ok(out)
    }

    /// Deletes temporaries concurrently; "not found" counts as deleted.
    /// Returns how many could not be deleted (each logged).
    async fn delete_all(&self, bucket: &str, names: Vec<String>) -> usize {
        let unique: HashSet<String> = names.into_iter().collect();
        futures::stream::iter(unique)
            .map(|name| async move {
                match self.delete_own(bucket, &name).await {
                    Ok(()) => 0,
                    Err(e) if e.kind() == ErrorKind::NotFound => 0,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not delete a temporary object");
                        1
                    }
                }
            })
            .buffer_unordered(FAN_OUT)
            .fold(0usize, |n, f| async move { n + f })
            .await
    }
}

/// The CRC32C the parts combine to, which must be the caller's expected
/// one when given: checked before any request.
fn combined_crc(parts: &[Piece], crc32c: Option<u32>, url: &str) -> Result<u32> {
    let combined = crc32c_combine_all(parts.iter().map(|p| (p.crc, p.size)));
    if let Some(c) = crc32c.filter(|c| *c != combined) {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Compose,
            url,
            format!("the parts' CRC32Cs combine to {combined:08x}, expected {c:08x}"),
        ));
    }
    Ok(combined)
}

fn intermediate_name(upload_id: &str, round: u32, index: usize) -> String {
    format!("{}c{round}-{index:05}", upload_prefix(upload_id))
}

/// The parts in order, each checked to be one of this upload's temporaries
/// (never compose, and then delete, an arbitrary object named by a token).
fn checked_pieces(upload: &MultipartUpload, parts: &[PartInfo], url: &str) -> Result<Vec<Piece>> {
    let sorted = PartInfo::in_order(parts, url)?;
    let mut pieces = Vec::with_capacity(sorted.len());
    for p in sorted {
        let expected = part_name(&upload.upload_id, p.part_number);
        if p.etag != expected {
            return Err(Error::invalid(
                Op::Multipart,
                url,
                format!(
                    "part {} does not belong to upload {}",
                    p.part_number, upload.upload_id
                ),
            ));
        }
        pieces.push(Piece {
            name: expected,
            crc: p.crc32c,
            size: p.size,
        });
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up() -> MultipartUpload {
        MultipartUpload {
            bucket: "b".into(),
            key: "k".into(),
            upload_id: "id".into(),
        }
    }

    #[test]
    fn only_part_names_of_the_upload_are_parts() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(part_number(id, &part_name(id, 1)), Some(1));
        assert_eq!(part_number(id, &part_name(id, 10_000)), Some(10_000));
        assert_eq!(part_number(id, &intermediate_name(id, 0, 3)), None);
        assert_eq!(
            part_number(id, &format!("{}00000", upload_prefix(id))),
            None
        );
        assert_eq!(part_number(id, &format!("{}0001", upload_prefix(id))), None);
        let other = "f".repeat(32);
        assert_eq!(part_number(id, &part_name(&other, 1)), None);
    }

    #[test]
    fn names_sort_in_part_order() {
        assert_eq!(part_name("id", 7), ".shoal-tmp/composite/id/00007");
        assert!(part_name("id", 9999) < part_name("id", 10000));
        assert_eq!(new_upload_id().len(), 32);
    }

    #[test]
    fn parts_are_sorted_and_checked() {
        let p = |n: u32| PartInfo {
            part_number: n,
            etag: part_name("id", n),
            crc32c: n,
            size: 1,
        };
        let pieces = checked_pieces(&up(), &[p(2), p(1)], "gs://b/k").unwrap();
        assert_eq!(pieces[0].name, part_name("id", 1));
        let e = checked_pieces(&up(), &[p(1), p(1)], "gs://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let mut foreign = p(3);
        foreign.etag = "important/data".into();
        let e = checked_pieces(&up(), &[foreign], "gs://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(checked_pieces(&up(), &[], "gs://b/k").is_err());
    }

    #[test]
    fn parts_must_combine_to_the_expected_crc() {
        let piece = |data: &[u8]| Piece {
            name: String::new(),
            crc: crc32c::crc32c(data),
            size: data.len() as u64,
        };
        let parts = [piece(b"hello "), piece(b"world")];
        let whole = crc32c::crc32c(b"hello world");
        assert_eq!(combined_crc(&parts, None, "gs://b/k").unwrap(), whole);
        assert_eq!(
            combined_crc(&parts, Some(whole), "gs://b/k").unwrap(),
            whole
        );
        let e = combined_crc(&parts, Some(whole ^ 1), "gs://b/k").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(
            e.to_string().contains("the parts' CRC32Cs combine to"),
            "{e}"
        );
    }
}
