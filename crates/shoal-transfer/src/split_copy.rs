//! One object copied by several machines: a multipart upload whose parts
//! are written by different processes (`shoal.dask.copy`).
//!
//! A copy of many objects spreads over a cluster by handing each task a
//! share of the objects; one object bigger than a task's byte budget would
//! still be one task on one machine. Here it is cut into byte ranges that
//! become the parts of one multipart upload on the destination (S3's
//! UploadPart; on GCS parallel-composite part objects, composed at the
//! end, or the XML multipart upload where the server has it). The four
//! steps are separate calls so that a front end can run them in different
//! processes, and every decision stays here:
//!
//! 1. [`begin`] (one process): reads the source's metadata, refuses what
//!    cannot be checked, plans the parts ([`plan_parts`], [`group_parts`])
//!    and starts the upload with the source's metadata.
//! 2. [`copy_parts`] (any process, many at once): each part is one ranged
//!    GET pinned to the version `begin` read, its CRC32C computed as the
//!    bytes arrive, and one part upload carrying that CRC32C (which the
//!    server checks).
//! 3. [`finish`] (the process that began, so a GCS compose gets the
//!    metadata `begin` was given): only with every part accounted for,
//!    each part's length exactly its planned range; the parts' CRC32Cs,
//!    combined, must equal the source's whole-object CRC32C before the
//!    upload is completed, and the store's own check of the assembled
//!    object (`multipart_complete` with that CRC32C) must pass too.
//! 4. [`abort`]: every way out that is not a finished upload (a failed
//!    part, a lost worker, a cancelled or failed caller) ends here, and
//!    deletes the parts (S3 AbortMultipartUpload; GCS deletes the part
//!    objects under the upload's prefix, which also finds parts a lost
//!    worker wrote).
//!
//! Only sources with a stored CRC32C are split (GCS always has one; S3
//! when written with it, as shoal writes): the parts' CRC32Cs combine
//! into the whole object's without reading anything twice, which an MD5
//! or a composite ETag cannot. Other objects are copied whole by one task,
//! as before ([`begin`] says why). Rejected: UploadPartCopy
//! within one S3 store (the data would not pass through the workers, but
//! the part's CRC32C would then come from the server alone, and MinIO
//! returns none for copied parts); the GET + UploadPart path works within
//! and across stores alike and checks every byte on the way.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use shoal_core::checksum::{crc32c_append, crc32c_combine_all};
use shoal_core::{
    ByteRange, Error, ErrorKind, Lack, Location, MultipartUpload, ObjectMeta, ObjectVersion, Op,
    PartInfo, PutOptions, Result, Store, need,
};

/// Smallest part planned, whatever the caller asks: below a few MiB a
/// part's request costs more than its bytes (and S3 refuses parts under
/// 5 MiB but the last).
pub(crate) const MIN_PART: u64 = 8 << 20;

/// Largest part any store here accepts (S3's 5 GiB limit).
pub(crate) const MAX_PART: u64 = 5 << 30;

/// One planned part: its number and byte range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartRange {
    /// 1-based part number.
    pub number: u32,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// Parts of about `part_size` bytes (at least [`MIN_PART`] and the store's
/// minimum, at most [`MAX_PART`], and few enough for `max_parts`) covering
/// `size` bytes exactly.
pub(crate) fn plan_parts(
    size: u64,
    part_size: u64,
    min_part: u64,
    max_parts: u32,
) -> Vec<PartRange> {
    let max_parts = u64::from(max_parts.max(1));
    let part = part_size
        .max(MIN_PART)
        .max(min_part)
        .max(size.div_ceil(max_parts))
        .clamp(1, MAX_PART);
    let mut out = Vec::new();
    let mut start = 0;
    while start < size {
        let end = (start + part).min(size);
        out.push(PartRange {
            number: out.len() as u32 + 1,
            start,
            end,
        });
        start = end;
    }
    out
}

/// Consecutive parts grouped into tasks of at most `bytes_per_task` bytes
/// (a part bigger than that is a task of its own).
pub(crate) fn group_parts(parts: &[PartRange], bytes_per_task: u64) -> Vec<Vec<PartRange>> {
    let mut out: Vec<Vec<PartRange>> = Vec::new();
    let mut used = 0u64;
    for p in parts {
        let len = p.end - p.start;
        match out.last_mut() {
            Some(last) if used + len <= bytes_per_task => {
                last.push(*p);
                used += len;
            }
            _ => {
                out.push(vec![*p]);
                used = len;
            }
        }
    }
    out
}

/// A split copy under way: what every part task and the finish need.
#[derive(Debug, Clone)]
pub struct Started {
    /// The source object.
    pub src: Location,
    /// The version every part reads (the one `begin` saw).
    pub version: Option<ObjectVersion>,
    /// The source's size.
    pub size: u64,
    /// The source's whole-object CRC32C, which the parts must combine to.
    pub crc32c: u32,
    /// The destination.
    pub dst: Location,
    /// The destination's upload.
    pub upload: MultipartUpload,
    /// The parts, grouped into tasks.
    pub tasks: Vec<Vec<PartRange>>,
}

/// Reads `src`'s metadata and decides: `Err` with the reason the object is
/// copied whole (with no upload started) for an object that fits one task or has no CRC32C to
/// check the parts against; otherwise starts the upload on `dst` and
/// returns it with the parts grouped into tasks of `bytes_per_task`.
pub async fn begin(
    src_store: &Arc<dyn Store>,
    src: &Location,
    dst_store: &Arc<dyn Store>,
    dst: &Location,
    part_size: u64,
    bytes_per_task: u64,
    put: &PutOptions,
) -> Result<std::result::Result<Started, String>> {
    let url = src.to_string();
    let meta = src_store
        .head(&src.bucket, &src.key)
        .await
        .map_err(|e| e.with_url(&url).with_op(Op::Copy))?;
    if meta.size <= bytes_per_task {
        return Ok(Err(format!(
            "{} bytes fit one task of {bytes_per_task}",
            meta.size
        )));
    }
    let Some(crc32c) = crate::verify::stored_crc32c(&meta) else {
        return Ok(Err(
            "the source has no CRC32C to check parts copied apart against".into(),
        ));
    };
    let caps = dst_store.capabilities();
    let parts = plan_parts(meta.size, part_size, caps.min_part_size, caps.max_parts);
    if parts.len() < 2 {
        return Ok(Err("one part".into()));
    }
    let parts_of = need(
        dst_store.multipart(),
        Lack::Multipart,
        &dst.bucket,
        &dst.key,
    );
    let upload = (parts_of.map_err(|e| e.with_url(dst.to_string()))?)
        .multipart_start(&dst.bucket, &dst.key, &put.keeping(&meta))
        .await
        .map_err(|e| e.with_url(dst.to_string()))?;
    Ok(Ok(Started {
        src: src.clone(),
        version: meta.version.clone(),
        size: meta.size,
        crc32c,
        dst: dst.clone(),
        upload,
        tasks: group_parts(&parts, bytes_per_task),
    }))
}

/// Copies `parts` of `src` (pinned to `version`) into `upload`, up to
/// `workers` parts at once; each part's CRC32C is computed from the bytes
/// read and sent with it. Does not abort on failure: the process that
/// began the upload does, once it hears (a part task cannot know whether
/// the upload is still wanted).
pub async fn copy_parts(
    src_store: &Arc<dyn Store>,
    src: &Location,
    version: Option<&ObjectVersion>,
    dst_store: &Arc<dyn Store>,
    upload: &MultipartUpload,
    parts: &[PartRange],
    workers: usize,
) -> Result<Vec<PartInfo>> {
    futures::stream::iter(parts.iter().copied())
        .map(|p| copy_part(src_store, src, version, dst_store, upload, p))
        .buffer_unordered(workers.max(1))
        .try_collect()
        .await
}

async fn copy_part(
    src_store: &Arc<dyn Store>,
    src: &Location,
    version: Option<&ObjectVersion>,
    dst_store: &Arc<dyn Store>,
    upload: &MultipartUpload,
    p: PartRange,
) -> Result<PartInfo> {
    let url = src.to_string();
    let want = p.end - p.start;
    let resp = src_store
        .get(
            &src.bucket,
            &src.key,
            ByteRange::new(p.start, p.end),
            version,
        )
        .await
        .map_err(|e| e.with_url(&url).with_op(Op::Copy))?;
    let mut body = resp.body;
    let mut buf = BytesMut::with_capacity(want as usize);
    let mut crc = 0u32;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| e.with_url(&url))?;
        crc = crc32c_append(crc, &chunk);
        buf.extend_from_slice(&chunk);
    }
    if buf.len() as u64 != want {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Copy,
            &url,
            format!(
                "part {} (bytes {}..{}) read {} bytes, expected {want}",
                p.number,
                p.start,
                p.end,
                buf.len()
            ),
        ));
    }
    let data: Bytes = buf.freeze();
    let put = async {
        need(
            dst_store.multipart(),
            Lack::Multipart,
            &upload.bucket,
            &upload.key,
        )?
        .multipart_put(upload, p.number, data, crc)
        .await
    };
    put.await
        .map_err(|e| e.with_url(format!("{}/{}", upload.bucket, upload.key)))
}

/// Completes the upload once every planned part is in `parts` with
/// exactly its planned length and the parts' CRC32Cs combine into the
/// source's; the store checks the assembled object against the same
/// CRC32C. Aborts the upload (deleting the parts) on any failure.
pub async fn finish(
    dst_store: &Arc<dyn Store>,
    started: &Started,
    mut parts: Vec<PartInfo>,
) -> Result<ObjectMeta> {
    let r = complete(dst_store, started, &mut parts).await;
    if r.is_err() {
        let _ = abort(dst_store, &started.upload).await;
    }
    r
}

async fn complete(
    dst_store: &Arc<dyn Store>,
    started: &Started,
    parts: &mut [PartInfo],
) -> Result<ObjectMeta> {
    let url = started.dst.to_string();
    parts.sort_by_key(|p| p.part_number);
    let planned: Vec<PartRange> = started.tasks.iter().flatten().copied().collect();
    let fail = |why: String| Error::new(ErrorKind::Integrity, Op::Copy, &url, why);
    if parts.len() != planned.len() {
        return Err(fail(format!(
            "{} of {} parts were written; the upload was aborted",
            parts.len(),
            planned.len()
        )));
    }
    for (got, want) in parts.iter().zip(&planned) {
        if got.part_number != want.number || got.size != want.end - want.start {
            return Err(fail(format!(
                "part {} is not the one planned (bytes {}..{}); the upload was aborted",
                got.part_number, want.start, want.end
            )));
        }
    }
    let combined = crc32c_combine_all(parts.iter().map(|p| (p.crc32c, p.size)));
    if combined != started.crc32c {
        return Err(fail(format!(
            "the parts' CRC32C {combined:08x} is not the source's {:08x} ({}); the upload was aborted",
            started.crc32c, started.src
        )));
    }
    let up = &started.upload;
    let parts_of = need(dst_store.multipart(), Lack::Multipart, &up.bucket, &up.key);
    let meta = (parts_of.map_err(|e| e.with_url(&url))?)
        .multipart_complete(up, parts, Some(started.crc32c))
        .await
        .map_err(|e| e.with_url(&url))?;
    if meta.size != started.size {
        return Err(fail(format!(
            "the assembled object has {} bytes, the source {}",
            meta.size, started.size
        )));
    }
    Ok(meta)
}

/// Ends the upload and deletes its parts.
pub async fn abort(dst_store: &Arc<dyn Store>, upload: &MultipartUpload) -> Result<()> {
    need(
        dst_store.multipart(),
        Lack::Multipart,
        &upload.bucket,
        &upload.key,
    )?
    .multipart_abort(upload)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_core::BucketStore;
    use shoal_core::memory::MemoryStore;

    #[test]
    fn parts_cover_the_object_exactly_and_group_by_budget() {
        let mib = 1u64 << 20;
        let parts = plan_parts(100 * mib + 3, 16 * mib, 5 * mib, 10_000);
        assert_eq!(parts.len(), 7);
        assert_eq!(parts[0].start, 0);
        assert!(parts.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(parts.last().unwrap().end, 100 * mib + 3);
        // A tiny part size is raised; too many parts are made bigger.
        assert_eq!(plan_parts(64 * mib, 1, 0, 10_000).len(), 8);
        assert_eq!(plan_parts(64 * mib, 8 * mib, 0, 4).len(), 4);
        let tasks = group_parts(&parts, 40 * mib);
        assert_eq!(tasks.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 3]);
        assert_eq!(group_parts(&parts, 1).len(), 7);
    }

    async fn setup(size: usize) -> (Arc<dyn Store>, Location, Location, Vec<u8>) {
        let mem = MemoryStore::new();
        mem.create_bucket("b").await.unwrap();
        let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let crc = crc32c_append(0, &data);
        let opts = PutOptions {
            crc32c: Some(crc),
            ..Default::default()
        };
        mem.put("b", "big", Bytes::from(data.clone()), &opts)
            .await
            .unwrap();
        let store: Arc<dyn Store> = Arc::new(mem);
        let src = Location::parse("gs://b/big").unwrap();
        let dst = Location::parse("gs://b/copy").unwrap();
        (store, src, dst, data)
    }

    /// Parts copied by separate calls (as separate tasks would) assemble
    /// into the source's bytes.
    #[tokio::test]
    async fn parts_copied_apart_assemble_the_object() {
        let (store, src, dst, data) = setup(40 << 20).await;
        let s = begin(
            &store,
            &src,
            &store,
            &dst,
            8 << 20,
            16 << 20,
            &PutOptions::default(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(s.tasks.len(), 3);
        let mut parts = Vec::new();
        for t in s.tasks.iter().rev() {
            parts.extend(
                copy_parts(&store, &src, s.version.as_ref(), &store, &s.upload, t, 2)
                    .await
                    .unwrap(),
            );
        }
        let meta = finish(&store, &s, parts).await.unwrap();
        assert_eq!(meta.size, data.len() as u64);
        let resp = store
            .get("b", "copy", ByteRange::new(0, data.len() as u64), None)
            .await
            .unwrap();
        let got: Vec<Bytes> = resp.body.try_collect().await.unwrap();
        assert!(got.concat() == data);
    }

    /// A part missing (a lost task) or one that does not match the source
    /// aborts the upload: no object, no parts left.
    #[tokio::test]
    async fn a_missing_or_wrong_part_aborts() {
        let (store, src, dst, _) = setup(40 << 20).await;
        for wrong in [false, true] {
            let s = begin(
                &store,
                &src,
                &store,
                &dst,
                8 << 20,
                16 << 20,
                &PutOptions::default(),
            )
            .await
            .unwrap()
            .unwrap();
            let mut parts = Vec::new();
            for t in &s.tasks[..if wrong {
                s.tasks.len()
            } else {
                s.tasks.len() - 1
            }] {
                parts.extend(
                    copy_parts(&store, &src, s.version.as_ref(), &store, &s.upload, t, 2)
                        .await
                        .unwrap(),
                );
            }
            if wrong {
                parts[0].crc32c ^= 1;
            }
            let e = finish(&store, &s, parts).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
            assert!(store.head("b", "copy").await.is_err(), "nothing written");
            let late = (store.multipart().unwrap())
                .multipart_put(
                    &s.upload,
                    1,
                    Bytes::from_static(b"x"),
                    crc32c_append(0, b"x"),
                )
                .await;
            assert!(late.is_err(), "the upload is gone");
        }
        // Fits one task, or no CRC32C: copied whole.
        let whole = begin(
            &store,
            &src,
            &store,
            &dst,
            8 << 20,
            64 << 20,
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert!(whole.is_err());
    }
}
