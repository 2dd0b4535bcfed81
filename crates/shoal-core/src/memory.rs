//! An in-memory store for unit tests of the engines above the trait.
//!
//! It behaves like a careful server: it validates declared checksums,
//! honours preconditions and generations, pages listings, and can be told
//! to fail (see [`MemoryStore::fail_next`]) so retry and resume logic can be
//! tested without a network. It is never used where a real server belongs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;
use futures::StreamExt;

use crate::checksum::{Checksums, Composite, PartKind};
use crate::error::{Error, ErrorKind, Op, Result};
use crate::meta::{ByteRange, ListPage, ListRequest, ObjectMeta, ObjectVersion};
use crate::served::{page_from_sorted, verify_declared};
use crate::store::{
    Assemble, BucketInfo, BucketStore, Capabilities, CopyRequest, GetResponse, MultipartStore,
    MultipartUpload, PartInfo, PutOptions, Signer, Store, StoredPart, VersionStore,
};
use crate::url::Scheme;

#[derive(Debug, Default)]
struct Inner {
    buckets: BTreeMap<String, BTreeMap<String, (Bytes, ObjectMeta)>>,
    uploads: HashMap<String, (String, String, BTreeMap<u32, Bytes>, Assemble)>,
    /// The parts of objects assembled with a composite checksum.
    parts: HashMap<(String, String), Vec<StoredPart>>,
    failures: Vec<ErrorKind>,
    /// Cut every body stream after this many bytes (once per stream).
    cut_streams_after: Option<usize>,
    /// Each GET, PUT, part and delete waits this long before it answers
    /// (a round trip), so concurrency can be seen.
    latency: std::time::Duration,
    /// Requests answering now, and the most there ever were at once.
    in_flight: usize,
    peak_in_flight: usize,
    /// Listing pages answered.
    list_pages: usize,
}

/// Objects in a map, with injectable failures.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    generation: AtomicI64,
    caps: Capabilities,
    chunk: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            inner: Mutex::default(),
            generation: AtomicI64::new(1),
            caps: Capabilities::IN_PROCESS,
            chunk: 64 * 1024,
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next requests fail with these kinds, in order.
    pub fn fail_next(&self, kinds: &[ErrorKind]) {
        self.inner.lock().unwrap().failures.extend_from_slice(kinds);
    }

    /// Every GET, PUT, part and delete takes `d` to answer (tokio's clock,
    /// so paused-time tests stay exact).
    pub fn set_latency(&self, d: std::time::Duration) {
        self.inner.lock().unwrap().latency = d;
    }

    /// The most GETs, PUTs, parts and deletes that were answering at once.
    pub fn peak_in_flight(&self) -> usize {
        self.inner.lock().unwrap().peak_in_flight
    }

    /// Listing pages answered so far.
    pub fn list_pages(&self) -> usize {
        self.inner.lock().unwrap().list_pages
    }

    /// One request's round trip: counted in flight while it waits.
    async fn round_trip(&self) {
        let latency = {
            let mut inner = self.inner.lock().unwrap();
            inner.in_flight += 1;
            inner.peak_in_flight = inner.peak_in_flight.max(inner.in_flight);
            inner.latency
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        self.inner.lock().unwrap().in_flight -= 1;
    }

    /// Changes a stored object's bytes or metadata in place, as a disk or
    /// a server that damaged it would (or a store that kept other
    /// checksums): what is read back then disagrees with what it says.
    /// Panics if the object does not exist (tests only).
    pub fn tamper(&self, bucket: &str, key: &str, f: impl FnOnce(&mut Vec<u8>, &mut ObjectMeta)) {
        let mut inner = self.inner.lock().unwrap();
        let (data, meta) = (inner.buckets.get_mut(bucket))
            .and_then(|b| b.get_mut(key))
            .expect("tamper: no such object");
        let mut bytes = data.to_vec();
        f(&mut bytes, meta);
        *data = Bytes::from(bytes);
    }

    /// Body streams break (with a retryable error) after `n` bytes.
    pub fn cut_streams_after(&self, n: Option<usize>) {
        self.inner.lock().unwrap().cut_streams_after = n;
    }

    fn url(bucket: &str, key: &str) -> String {
        format!("mem://{bucket}/{key}")
    }

    fn injected(&self, op: Op, url: &str) -> Result<()> {
        let mut inner = self.inner.lock().unwrap();
        if inner.failures.is_empty() {
            return Ok(());
        }
        let kind = inner.failures.remove(0);
        Err(Error::new(kind, op, url, "injected failure"))
    }

    fn store_object(
        &self,
        bucket: &str,
        key: &str,
        data: Bytes,
        opts: &PutOptions,
        op: Op,
    ) -> Result<ObjectMeta> {
        let url = Self::url(bucket, key);
        verify_declared(op, &url, &data, opts)?;
        let mut inner = self.inner.lock().unwrap();
        let b = inner
            .buckets
            .get_mut(bucket)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, op, &url, "no such bucket"))?;
        if opts.if_not_exists && b.contains_key(key) {
            return Err(Error::new(
                ErrorKind::Precondition,
                op,
                url,
                "object exists",
            ));
        }
        if let Some(want) = &opts.if_match
            && b.get(key).and_then(|o| o.1.version.as_ref()) != Some(want)
        {
            return Err(Error::new(
                ErrorKind::Precondition,
                op,
                url,
                format!("the object is not at {want}"),
            ));
        }
        let meta = ObjectMeta {
            key: key.to_owned(),
            size: data.len() as u64,
            updated_ns: Some(0),
            // Like S3: one CRC, the algorithm the writer chose.
            checksums: Checksums::default()
                .with_crc32c(match opts.other_crc {
                    Some(_) => None,
                    None => Some(crc32c::crc32c(&data)),
                })
                .with_md5(crate::checksum::md5_digest(&data))
                .with_other_crc(opts.other_crc),
            version: Some(ObjectVersion::Generation(
                self.generation.fetch_add(1, Ordering::Relaxed),
            )),
            storage_class: Some(opts.storage_class.clone().unwrap_or("MEMORY".into())),
            content_encoding: opts.content_encoding.clone(),
            content_type: opts.content_type.clone(),
            cache_control: opts.cache_control.clone(),
            content_disposition: opts.content_disposition.clone(),
            recorded: crate::file_time::Recorded::of(&opts.metadata),
            metadata: opts.metadata.clone(),
            version_state: None,
            metageneration: None,
        };
        b.insert(key.to_owned(), (data, meta.clone()));
        inner.parts.remove(&(bucket.to_owned(), key.to_owned()));
        Ok(meta)
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    fn scheme(&self) -> Scheme {
        Scheme::Gs
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn multipart(&self) -> Option<&dyn MultipartStore> {
        Some(self)
    }

    fn buckets(&self) -> Option<&dyn BucketStore> {
        Some(self)
    }

    fn signer(&self) -> Option<&dyn Signer> {
        None
    }

    fn versions(&self) -> Option<&dyn VersionStore> {
        None
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let url = Self::url(bucket, key);
        self.injected(Op::Stat, &url)?;
        let inner = self.inner.lock().unwrap();
        let b = inner
            .buckets
            .get(bucket)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, Op::Stat, &url, "no such bucket"))?;
        b.get(key)
            .map(|(_, m)| m.clone())
            .ok_or_else(|| Error::new(ErrorKind::NotFound, Op::Stat, url, "no such object"))
    }

    async fn list_page(&self, bucket: &str, req: &ListRequest) -> Result<ListPage> {
        let url = Self::url(bucket, &req.prefix);
        self.injected(Op::List, &url)?;
        let mut inner = self.inner.lock().unwrap();
        inner.list_pages += 1;
        let b = inner
            .buckets
            .get(bucket)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, Op::List, &url, "no such bucket"))?;
        // Start at the furthest of prefix, start offset and page token (the
        // filter below is exact; this only skips what it would skip), so a
        // page costs O(page), not O(bucket): parallel-listing tests cut a
        // bucket into hundreds of offset ranges.
        let from = [
            Some(&req.prefix),
            req.start_offset.as_ref(),
            req.page_token.as_ref(),
        ]
        .into_iter()
        .flatten()
        .max()
        .cloned()
        .unwrap_or_default();
        let metas = b
            .range(from..)
            .map(|(_, (_, m))| m.clone())
            .take_while(|m| m.key.starts_with(&req.prefix));
        Ok(page_from_sorted(metas, req, self.caps.max_list_page))
    }

    async fn get(
        &self,
        bucket: &str,
        key: &str,
        range: ByteRange,
        version: Option<&ObjectVersion>,
    ) -> Result<GetResponse> {
        let url = Self::url(bucket, key);
        self.round_trip().await;
        self.injected(Op::Download, &url)?;
        let (data, meta, cut) = {
            let inner = self.inner.lock().unwrap();
            let b = inner.buckets.get(bucket).ok_or_else(|| {
                Error::new(ErrorKind::NotFound, Op::Download, &url, "no such bucket")
            })?;
            let (d, m) = b.get(key).ok_or_else(|| {
                Error::new(ErrorKind::NotFound, Op::Download, &url, "no such object")
            })?;
            (d.clone(), m.clone(), inner.cut_streams_after)
        };
        if version.is_some_and(|v| meta.version.as_ref() != Some(v)) {
            return Err(Error::new(
                ErrorKind::Changed,
                Op::Download,
                url,
                "generation changed",
            ));
        }
        let size = data.len() as u64;
        let end = range.end.unwrap_or(size).min(size);
        if range.start > size {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                Op::Download,
                url,
                "range not satisfiable",
            ));
        }
        let body = data.slice(range.start as usize..end as usize);
        let chunk = self.chunk;
        let mut chunks: Vec<Result<Bytes>> = Vec::new();
        let limit = cut.unwrap_or(usize::MAX).min(body.len());
        let mut off = 0;
        while off < limit {
            let n = chunk.min(limit - off);
            chunks.push(Ok(body.slice(off..off + n)));
            off += n;
        }
        if limit < body.len() {
            chunks.push(Err(Error::new(
                ErrorKind::Connect,
                Op::Download,
                &url,
                "injected stream cut",
            )));
        }
        Ok(GetResponse {
            meta,
            range: ByteRange::new(range.start, end),
            body: futures::stream::iter(chunks).boxed(),
        })
    }

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        data: Bytes,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        self.round_trip().await;
        self.injected(Op::Upload, &Self::url(bucket, key))?;
        self.store_object(bucket, key, data, opts, Op::Upload)
    }

    async fn copy(&self, req: &CopyRequest<'_>) -> Result<ObjectMeta> {
        let url = Self::url(req.src_bucket, req.src_key);
        self.round_trip().await;
        self.injected(Op::Copy, &url)?;
        let (data, meta) = {
            let inner = self.inner.lock().unwrap();
            let found = inner
                .buckets
                .get(req.src_bucket)
                .and_then(|b| b.get(req.src_key));
            found
                .cloned()
                .ok_or_else(|| Error::new(ErrorKind::NotFound, Op::Copy, &url, "no such object"))?
        };
        if req.src.version.is_some() && meta.version != req.src.version {
            return Err(Error::new(
                ErrorKind::Precondition,
                Op::Copy,
                url,
                "the source is no longer the version read",
            ));
        }
        // The source's metadata unless replaced; its checksum kind too.
        let opts = PutOptions {
            other_crc: meta.checksums.other_crc(),
            ..if req.replace_metadata {
                req.opts.clone()
            } else {
                PutOptions {
                    if_not_exists: req.opts.if_not_exists,
                    storage_class: req.opts.storage_class.clone(),
                    ..PutOptions::default().keeping(&meta)
                }
            }
        };
        self.store_object(req.dst_bucket, req.dst_key, data, &opts, Op::Copy)
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<()> {
        let url = Self::url(bucket, key);
        self.round_trip().await;
        self.injected(Op::Delete, &url)?;
        let mut inner = self.inner.lock().unwrap();
        let b = inner
            .buckets
            .get_mut(bucket)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, Op::Delete, &url, "no such bucket"))?;
        b.remove(key)
            .map(|_| ())
            .ok_or_else(|| Error::new(ErrorKind::NotFound, Op::Delete, url, "no such object"))
    }
}

#[async_trait::async_trait]
impl MultipartStore for MemoryStore {
    async fn multipart_start(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<MultipartUpload> {
        let id = format!("up-{}", self.generation.fetch_add(1, Ordering::Relaxed));
        self.inner.lock().unwrap().uploads.insert(
            id.clone(),
            (
                bucket.to_owned(),
                key.to_owned(),
                BTreeMap::new(),
                opts.assemble,
            ),
        );
        Ok(MultipartUpload {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            upload_id: id,
        })
    }

    async fn multipart_put(
        &self,
        up: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc: u32,
    ) -> Result<PartInfo> {
        let url = Self::url(&up.bucket, &up.key);
        self.round_trip().await;
        self.injected(Op::Multipart, &url)?;
        if crc32c::crc32c(&data) != crc {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Multipart,
                url,
                "part CRC32C mismatch",
            ));
        }
        let mut inner = self.inner.lock().unwrap();
        let u = inner.uploads.get_mut(&up.upload_id).ok_or_else(|| {
            Error::new(ErrorKind::NotFound, Op::Multipart, &url, "no such upload")
        })?;
        let size = data.len() as u64;
        u.2.insert(part_number, data);
        Ok(PartInfo {
            part_number,
            etag: format!("p{part_number}"),
            crc32c: crc,
            size,
        })
    }

    async fn multipart_complete(
        &self,
        up: &MultipartUpload,
        parts: &[PartInfo],
        crc: Option<u32>,
    ) -> Result<ObjectMeta> {
        let url = Self::url(&up.bucket, &up.key);
        let (_, _, stored, assemble) = self
            .inner
            .lock()
            .unwrap()
            .uploads
            .remove(&up.upload_id)
            .ok_or_else(|| {
                Error::new(ErrorKind::NotFound, Op::Multipart, &url, "no such upload")
            })?;
        let mut data = Vec::new();
        let mut sorted = parts.to_vec();
        sorted.sort_by_key(|p| p.part_number);
        let mut kept = Vec::new();
        for p in sorted {
            let d = stored.get(&p.part_number).ok_or_else(|| {
                Error::new(ErrorKind::Rejected, Op::Multipart, &url, "missing part")
            })?;
            data.extend_from_slice(d);
            kept.push(StoredPart {
                size: d.len() as u64,
                crc: Some(crc32c::crc32c(d)),
            });
        }
        if assemble != Assemble::Composite {
            let opts = PutOptions {
                crc32c: crc,
                ..Default::default()
            };
            return self.store_object(&up.bucket, &up.key, Bytes::from(data), &opts, Op::Multipart);
        }
        // Like S3's COMPOSITE: no whole-object CRC, no MD5; the parts kept.
        let mut meta = self.store_object(
            &up.bucket,
            &up.key,
            Bytes::from(data),
            &PutOptions::default(),
            Op::Multipart,
        )?;
        let crcs: Vec<u32> = kept.iter().filter_map(|p| p.crc).collect();
        meta.checksums = (meta.checksums.with_crc32c(None).with_md5(None))
            .with_composite(Composite::of_parts(PartKind::Crc32c, &crcs));
        let mut inner = self.inner.lock().unwrap();
        let at = (up.bucket.clone(), up.key.clone());
        if let Some((_, m)) = inner
            .buckets
            .get_mut(&up.bucket)
            .and_then(|b| b.get_mut(&up.key))
        {
            *m = meta.clone();
        }
        inner.parts.insert(at, kept);
        Ok(meta)
    }

    async fn parts(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&ObjectVersion>,
    ) -> Result<Option<Vec<StoredPart>>> {
        let url = Self::url(bucket, key);
        self.round_trip().await;
        self.injected(Op::Stat, &url)?;
        let inner = self.inner.lock().unwrap();
        let (_, meta) = inner
            .buckets
            .get(bucket)
            .and_then(|b| b.get(key))
            .ok_or_else(|| Error::new(ErrorKind::NotFound, Op::Stat, &url, "no such object"))?;
        if version.is_some_and(|v| meta.version.as_ref() != Some(v)) {
            return Err(Error::new(
                ErrorKind::Changed,
                Op::Stat,
                url,
                "the object changed",
            ));
        }
        Ok(inner
            .parts
            .get(&(bucket.to_owned(), key.to_owned()))
            .cloned())
    }

    async fn multipart_abort(&self, up: &MultipartUpload) -> Result<()> {
        self.inner.lock().unwrap().uploads.remove(&up.upload_id);
        Ok(())
    }
}

#[async_trait::async_trait]
impl BucketStore for MemoryStore {
    async fn create_bucket(&self, bucket: &str) -> Result<()> {
        let mut inner = self.inner.lock().unwrap();
        if inner.buckets.contains_key(bucket) {
            return Err(Error::new(
                ErrorKind::Precondition,
                Op::CreateBucket,
                Self::url(bucket, ""),
                "bucket exists",
            ));
        }
        inner.buckets.insert(bucket.to_owned(), BTreeMap::new());
        Ok(())
    }

    async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        let mut inner = self.inner.lock().unwrap();
        let url = Self::url(bucket, "");
        match inner.buckets.get(bucket) {
            None => Err(Error::new(
                ErrorKind::NotFound,
                Op::DeleteBucket,
                url,
                "no such bucket",
            )),
            Some(objects) if !objects.is_empty() => Err(Error::new(
                ErrorKind::Precondition,
                Op::DeleteBucket,
                url,
                "the bucket is not empty",
            )),
            Some(_) => {
                inner.buckets.remove(bucket);
                Ok(())
            }
        }
    }

    async fn list_buckets(&self) -> Result<Vec<BucketInfo>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .buckets
            .keys()
            .map(|name| BucketInfo {
                name: name.clone(),
                created: None,
            })
            .collect())
    }
}
