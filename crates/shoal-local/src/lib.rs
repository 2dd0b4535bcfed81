//! Local files behind the [`Store`] trait.
//!
//! Buckets are folders under a root; keys are paths below them, mapped by
//! [`shoal_core::local_path`] (so unsafe keys are refused, never followed).
//! Writes go to a temporary name in the same folder and are renamed into
//! place, so a reader never sees half a file. Listings come out in UTF-8
//! byte order of keys, like the cloud stores: the order of the one local
//! walk ([`shoal_core::walk`]). Each page reads the tree whole: fine for local
//! data, which is never billions of files in one listing.
//!
//! A backend crate beside shoal-gcs and shoal-s3: the engine reaches local
//! files through the same trait as any store, and what it needs of the
//! file system itself (the one key → path rule, working files, the walk)
//! stays in shoal-core, where every crate can use it.
#![warn(missing_docs, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use shoal_core::error::{Error, ErrorKind, Op, Result};
use shoal_core::local_path::join_under;
use shoal_core::meta::{ByteRange, ListPage, ListRequest, ObjectMeta, ObjectVersion};
use shoal_core::served::{page_from_sorted, verify_declared};
use shoal_core::store::{
    BucketInfo, Capabilities, CopyRequest, GetResponse, MultipartUpload, PartInfo, PutOptions,
    Store,
};
use shoal_core::url::Scheme;

const UPLOADS_DIR: &str = ".shoal-uploads";
static UPLOAD_SEQ: AtomicU64 = AtomicU64::new(1);

/// A store over a local folder; each bucket is a sub-folder.
#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    caps: Capabilities,
}

impl LocalStore {
    /// A store rooted at `root` (which must exist for anything to work).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            root: root.into(),
            caps: Capabilities::IN_PROCESS,
        }
    }

    fn url(&self, bucket: &str, key: &str) -> String {
        format!("{}/{}/{}", self.root.display(), bucket, key)
    }

    fn bucket_dir(&self, op: Op, bucket: &str) -> Result<PathBuf> {
        if bucket.is_empty()
            || bucket.contains('/')
            || bucket == "."
            || bucket == ".."
            || bucket == UPLOADS_DIR
        {
            return Err(Error::invalid(
                op,
                self.url(bucket, ""),
                "invalid local bucket name",
            ));
        }
        let dir = self.root.join(bucket);
        if !dir.is_dir() {
            return Err(Error::new(
                ErrorKind::NotFound,
                op,
                self.url(bucket, ""),
                "bucket (folder) does not exist",
            ));
        }
        Ok(dir)
    }

    fn object_path(&self, op: Op, bucket: &str, key: &str) -> Result<PathBuf> {
        let dir = self.bucket_dir(op, bucket)?;
        join_under(&dir, key).map_err(|why| {
            Error::invalid(
                op,
                self.url(bucket, key),
                format!("cannot be a local file: {why}"),
            )
        })
    }

    async fn meta_of(&self, op: Op, path: &Path, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let md = tokio::fs::metadata(path)
            .await
            .map_err(|e| Error::io(op, self.url(bucket, key), e))?;
        if !md.is_file() {
            return Err(Error::new(
                ErrorKind::NotFound,
                op,
                self.url(bucket, key),
                "not a file",
            ));
        }
        Ok(file_meta(key, &md))
    }
}

fn file_meta(key: &str, md: &std::fs::Metadata) -> ObjectMeta {
    let updated_ns = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128);
    ObjectMeta {
        key: key.to_owned(),
        size: md.len(),
        updated_ns,
        version: Some(ObjectVersion::ETag(format!(
            "\"{}-{}\"",
            updated_ns.unwrap_or(0),
            md.len()
        ))),
        ..Default::default()
    }
}

/// Writes `data` to `path` through a working file renamed into place
/// ([`shoal_core::workfile::write_with`]), on the blocking pool; failures name
/// `op` and `url`.
pub(crate) async fn write_atomically(path: &Path, data: Bytes, op: Op, url: &str) -> Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        shoal_core::workfile::write_with(&path, false, |f| {
            use std::io::Write;
            f.write_all(&data)
                .map_err(|e| Error::io(Op::Write, path.display().to_string(), e))
        })
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Io, op, url, e.to_string()))?
    .map_err(|e| e.with_op(op).with_url(url))
}

/// Every file below `dir` with its key, in key order: the one local walk
/// ([`shoal_core::walk`]), without following links. What it skips (links,
/// special files, working files, names that are not UTF-8) is not an
/// object here; an unreadable folder or file fails the listing.
fn walk(dir: &Path) -> Result<Vec<(String, std::fs::Metadata)>> {
    use shoal_core::walk::{Depth, Symlinks};
    let mut out = Vec::new();
    let mut failed = None;
    shoal_core::walk::walk(dir, dir, Symlinks::Skip, Depth::All, &mut |found| {
        match found {
            Ok(shoal_core::Seen::Item(f)) => out.push((f.rel, f.meta)),
            Ok(shoal_core::Seen::Skipped(_)) => {}
            Err(e) if e.kind() == ErrorKind::InvalidInput => {}
            Err(e) => {
                failed = Some(e);
                return false;
            }
        }
        true
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[async_trait::async_trait]
impl Store for LocalStore {
    fn scheme(&self) -> Scheme {
        Scheme::File
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn multipart(&self) -> Option<&dyn shoal_core::MultipartStore> {
        Some(self)
    }

    fn buckets(&self) -> Option<&dyn shoal_core::BucketStore> {
        Some(self)
    }

    fn signer(&self) -> Option<&dyn shoal_core::Signer> {
        None
    }

    fn versions(&self) -> Option<&dyn shoal_core::VersionStore> {
        None
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let path = self.object_path(Op::Stat, bucket, key)?;
        self.meta_of(Op::Stat, &path, bucket, key).await
    }

    async fn list_page(&self, bucket: &str, req: &ListRequest) -> Result<ListPage> {
        let dir = self.bucket_dir(Op::List, bucket)?;
        let url = self.url(bucket, &req.prefix);
        let found = tokio::task::spawn_blocking(move || walk(&dir))
            .await
            .map_err(|e| Error::new(ErrorKind::Io, Op::List, &url, e.to_string()))??;
        let metas = found.into_iter().map(|(k, md)| file_meta(&k, &md));
        Ok(page_from_sorted(metas, req, self.caps.max_list_page))
    }

    async fn get(
        &self,
        bucket: &str,
        key: &str,
        range: ByteRange,
        version: Option<&ObjectVersion>,
    ) -> Result<GetResponse> {
        let url = self.url(bucket, key);
        let path = self.object_path(Op::Download, bucket, key)?;
        let meta = self.meta_of(Op::Download, &path, bucket, key).await?;
        if let Some(v) = version
            && meta.version.as_ref() != Some(v)
        {
            return Err(Error::new(
                ErrorKind::Changed,
                Op::Download,
                url,
                "the file changed since it was first read",
            ));
        }
        let end = range.end.unwrap_or(meta.size).min(meta.size);
        if range.start > meta.size
            || (range.start == meta.size && meta.size > 0 && range.end.is_some())
        {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                Op::Download,
                url,
                "range starts past the end",
            ));
        }
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| Error::io(Op::Download, &url, e))?;
        file.seek(std::io::SeekFrom::Start(range.start))
            .await
            .map_err(|e| Error::io(Op::Download, &url, e))?;
        let remaining = end.saturating_sub(range.start);
        let body =
            futures::stream::unfold((file, remaining, url), |(mut f, left, url)| async move {
                if left == 0 {
                    return None;
                }
                let n = left.min(1 << 20) as usize;
                let mut buf = vec![0u8; n];
                match f.read_exact(&mut buf).await {
                    Ok(_) => Some((Ok(Bytes::from(buf)), (f, left - n as u64, url))),
                    Err(e) => Some((Err(Error::io(Op::Download, &url, e)), (f, 0, url))),
                }
            })
            .boxed();
        Ok(GetResponse {
            meta,
            range: ByteRange::new(range.start, end),
            body,
        })
    }

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        data: Bytes,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        let url = self.url(bucket, key);
        let path = self.object_path(Op::Upload, bucket, key)?;
        if let Some(v) = &opts.if_match {
            return Err(Error::invalid(
                Op::Upload,
                url,
                format!("a local file has no {v} to match"),
            ));
        }
        if opts.if_not_exists && tokio::fs::try_exists(&path).await.unwrap_or(false) {
            return Err(Error::new(
                ErrorKind::Precondition,
                Op::Upload,
                url,
                "the object already exists",
            ));
        }
        verify_declared(Op::Upload, &url, &data, opts)?;
        write_atomically(&path, data, Op::Upload, &url).await?;
        self.meta_of(Op::Upload, &path, bucket, key).await
    }

    /// The "server" is this machine's file system: the file is read and
    /// written in this process, never through an engine's network path.
    async fn copy(&self, req: &CopyRequest<'_>) -> Result<ObjectMeta> {
        let url = self.url(req.src_bucket, req.src_key);
        let path = self.object_path(Op::Copy, req.src_bucket, req.src_key)?;
        let data = tokio::fs::read(&path)
            .await
            .map_err(|e| Error::io(Op::Copy, &url, e))?;
        let now = self
            .meta_of(Op::Copy, &path, req.src_bucket, req.src_key)
            .await?;
        if req.src.version.is_some() && now.version != req.src.version {
            return Err(Error::new(
                ErrorKind::Precondition,
                Op::Copy,
                url,
                "the source is no longer the version read",
            ));
        }
        let opts = PutOptions {
            if_not_exists: req.opts.if_not_exists,
            ..PutOptions::default()
        };
        self.put(req.dst_bucket, req.dst_key, Bytes::from(data), &opts)
            .await
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<()> {
        let url = self.url(bucket, key);
        let path = self.object_path(Op::Delete, bucket, key)?;
        tokio::fs::remove_file(&path)
            .await
            .map_err(|e| Error::io(Op::Delete, url, e))
    }
}

#[async_trait::async_trait]
impl shoal_core::MultipartStore for LocalStore {
    async fn multipart_start(
        &self,
        bucket: &str,
        key: &str,
        _opts: &PutOptions,
    ) -> Result<MultipartUpload> {
        self.object_path(Op::Multipart, bucket, key)?;
        let id = format!(
            "{}-{}",
            std::process::id(),
            UPLOAD_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = self.root.join(UPLOADS_DIR).join(&id);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| Error::io(Op::Multipart, self.url(bucket, key), e))?;
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
        crc32c: u32,
    ) -> Result<PartInfo> {
        let url = self.url(&up.bucket, &up.key);
        if crc32c::crc32c(&data) != crc32c {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Multipart,
                url,
                format!("part {part_number}: CRC32C mismatch"),
            ));
        }
        let dir = self.root.join(UPLOADS_DIR).join(&up.upload_id);
        if !dir.is_dir() {
            return Err(Error::new(
                ErrorKind::NotFound,
                Op::Multipart,
                url,
                "no such upload",
            ));
        }
        let path = dir.join(format!("{part_number:05}"));
        let size = data.len() as u64;
        write_atomically(&path, data, Op::Multipart, &url).await?;
        Ok(PartInfo {
            part_number,
            etag: format!("{part_number:05}"),
            crc32c,
            size,
        })
    }

    async fn multipart_complete(
        &self,
        up: &MultipartUpload,
        parts: &[PartInfo],
        crc: Option<u32>,
    ) -> Result<ObjectMeta> {
        let url = self.url(&up.bucket, &up.key);
        let dest = self.object_path(Op::Multipart, &up.bucket, &up.key)?;
        let dir = self.root.join(UPLOADS_DIR).join(&up.upload_id);
        let mut sorted = parts.to_vec();
        sorted.sort_by_key(|p| p.part_number);
        let mut data = Vec::new();
        for p in &sorted {
            let bytes = tokio::fs::read(dir.join(&p.etag))
                .await
                .map_err(|e| Error::io(Op::Multipart, &url, e))?;
            data.extend_from_slice(&bytes);
        }
        if let Some(want) = crc
            && crc32c::crc32c(&data) != want
        {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Multipart,
                url,
                "assembled object's CRC32C differs",
            ));
        }
        write_atomically(&dest, Bytes::from(data), Op::Multipart, &url).await?;
        let _ = tokio::fs::remove_dir_all(&dir).await;
        self.meta_of(Op::Multipart, &dest, &up.bucket, &up.key)
            .await
    }

    async fn multipart_abort(&self, up: &MultipartUpload) -> Result<()> {
        let dir = self.root.join(UPLOADS_DIR).join(&up.upload_id);
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(Op::Multipart, self.url(&up.bucket, &up.key), e)),
        }
    }
}

#[async_trait::async_trait]
impl shoal_core::BucketStore for LocalStore {
    async fn create_bucket(&self, bucket: &str) -> Result<()> {
        let url = self.url(bucket, "");
        if bucket.is_empty() || bucket.contains('/') || bucket.starts_with('.') {
            return Err(Error::invalid(
                Op::CreateBucket,
                url,
                "invalid local bucket name",
            ));
        }
        match tokio::fs::create_dir(self.root.join(bucket)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::new(
                ErrorKind::Precondition,
                Op::CreateBucket,
                url,
                "bucket already exists",
            )),
            Err(e) => Err(Error::io(Op::CreateBucket, url, e)),
        }
    }

    async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        let url = self.url(bucket, "");
        if bucket.is_empty() || bucket.contains('/') || bucket.starts_with('.') {
            return Err(Error::invalid(
                Op::DeleteBucket,
                url,
                "invalid local bucket name",
            ));
        }
        // `remove_dir` refuses a folder that holds anything: the same
        // "not empty" answer a server gives.
        match tokio::fs::remove_dir(self.root.join(bucket)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Err(Error::new(
                ErrorKind::Precondition,
                Op::DeleteBucket,
                url,
                "the bucket is not empty",
            )),
            Err(e) => Err(Error::io(Op::DeleteBucket, url, e)),
        }
    }

    async fn list_buckets(&self) -> Result<Vec<BucketInfo>> {
        let url = self.root.display().to_string();
        let mut dir = (tokio::fs::read_dir(&self.root).await)
            .map_err(|e| Error::io(Op::ListBuckets, &url, e))?;
        let mut out = Vec::new();
        while let Some(entry) =
            (dir.next_entry().await).map_err(|e| Error::io(Op::ListBuckets, &url, e))?
        {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // Hidden folders (the uploads area) are not buckets.
            if name.starts_with('.') {
                continue;
            }
            if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
                out.push(BucketInfo {
                    name,
                    created: None,
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}
