//! Google Cloud Storage for shoal, over the JSON API (and the XML API for
//! multipart uploads).
//!
//! Why the JSON API and not the XML (S3-like) one: only JSON listing has
//! `matchGlob` (server-side glob filtering), `fields` projections (a page of
//! names only is several times smaller and faster to parse), `endOffset`
//! (bounded ranges for parallel listing) and `compose`. Downloads work
//! equally well on both, so they use JSON too: one URL scheme, one error
//! format, one name encoding.
//!
//! Layout, one idea per file:
//! - [`config`](GcsConfig): endpoint, credentials mode, project, from the
//!   environment in one place;
//! - `credential`: anonymous or Application Default Credentials, looked up
//!   lazily and cached by `google-cloud-auth`;
//! - `client`: URLs, name encoding, retries, error translation;
//! - `list`: list requests and the (fuzzable) JSON parser;
//! - `object`: metadata, download, upload, delete, bucket creation;
//! - `batch`: many deletes in one JSON API batch request;
//! - `compose`: multipart uploads as parallel composite uploads;
//! - `xml_multipart`: multipart uploads over the XML API, where the server
//!   has it (Google's does, emulators do not);
//! - `resumable`: one stream of unknown length as a resumable upload.
//!
//! Everything here is one request (or, for compose, a bounded tree of
//! them); pagination, slicing and parallelism live above the [`Store`]
//! trait.
#![warn(missing_docs, unreachable_pub)]

mod batch;
mod bucket;
mod client;
mod compose;
mod config;
mod copy;
mod credential;
mod encryption;
mod leftovers;
mod list;
mod object;
mod resumable;
mod signed_url;
mod xml_multipart;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use shoal_core::{
    Assemble, BoxByteStream, BucketInfo, ByteRange, Capabilities, GetResponse, ListPage,
    ListRequest, MultipartUpload, ObjectMeta, ObjectVersion, PartInfo, Presign, PutOptions, Result,
    Scheme, Store,
};

pub use config::GcsConfig;
pub use list::parse_list_page;
pub use resumable::RESUMABLE_CHUNK_SIZE;

/// Parts per composite upload. Not a GCS limit (a composite object may
/// have any number of components); it matches S3's so planners use one
/// number, keeps part names at five zero-padded digits, and bounds the
/// compose tree at three levels.
pub(crate) const MAX_PARTS: u32 = 10_000;

/// A [`Store`] over the GCS JSON API (or an emulator speaking it).
pub struct GcsStore {
    client: Arc<client::Client>,
    caps: Capabilities,
    project: Option<String>,
    anonymous: bool,
    /// The server enforces a rewrite's `ifGenerationMatch` (config.rs).
    rewrite_preconditions: bool,
    /// Options given to `multipart_start`, applied when composing (the
    /// trait's `multipart_complete` does not carry them). Uploads started
    /// by another process complete with default options.
    uploads: Mutex<HashMap<String, PutOptions>>,
    /// The parts each composite upload of this process has sent (or is
    /// sending): an abort deletes them by name. Listing the upload's prefix
    /// instead missed parts the server stored after the listing.
    sent_parts: Mutex<HashMap<String, SentParts>>,
    /// Buckets whose leftover composite parts this store has looked for
    /// ([`leftovers`]): once per bucket a process.
    leftovers_checked: Mutex<std::collections::HashSet<String>>,
}

/// One composite upload's parts, sent or being sent.
///
/// A part's PUT runs as a task of its own, holding a read guard of
/// `in_flight` until the server answers, so a caller that is dropped
/// (Ctrl-C, a cancelled Python call) does not cut the request short: a
/// part whose body had reached the server would otherwise be stored after
/// the abort's delete of its name had found nothing, and stay. The abort
/// takes the write guard, which waits for every part in flight to be
/// answered, and only then deletes the parts by name.
#[derive(Default)]
struct SentParts {
    numbers: BTreeSet<u32>,
    /// Parts an earlier run stored, found when this one resumed the
    /// upload: one sent again is deleted first (a part is written only
    /// where none is), and those neither sent again nor completed are
    /// deleted with the upload's other temporaries.
    stale: BTreeSet<u32>,
    /// Picked up from an earlier run, whose parts in flight when it ended
    /// may land after this run looked: one found in a part's place is
    /// replaced (the name is this upload's alone).
    resumed: bool,
    /// Aborted: a part asked for afterwards (its task started as the abort
    /// did) is refused, not stored after the abort deleted the others.
    aborted: bool,
    in_flight: Arc<tokio::sync::RwLock<()>>,
}

/// How long an abort waits for parts in flight before deleting by name
/// anyway (a part answered later may then stay, as after a crash).
const ABORT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl std::fmt::Debug for GcsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No credentials in here, ever.
        f.debug_struct("GcsStore")
            .field("endpoint", &self.client.base)
            .field("auth", &self.client.auth)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl GcsStore {
    /// A store for `cfg`. Looks up no credentials: that happens on the
    /// first request (and never when anonymous).
    pub fn new(cfg: GcsConfig) -> Result<Self> {
        let xml_multipart = cfg.has_xml_multipart();
        let rewrite_preconditions = cfg.has_rewrite_preconditions();
        Ok(GcsStore {
            client: Arc::new(client::Client::new(&cfg)?),
            caps: Capabilities {
                // Real GCS honours both; emulators may not, and callers
                // re-filter anyway.
                match_glob: true,
                projection: true,
                end_offset: true,
                native_multipart: xml_multipart,
                compose: true,
                // Composed parts are ordinary objects, of any size; the XML
                // API keeps S3's 5 MiB minimum.
                min_part_size: if xml_multipart {
                    xml_multipart::MIN_PART_SIZE
                } else {
                    0
                },
                max_parts: MAX_PARTS,
                // The GCS object size limit.
                max_put_size: 5 << 40,
                max_list_page: list::MAX_LIST_PAGE,
                put_stream: true,
                upload_method: cfg.upload,
                resumes_uploads: true,
                delete_batch: batch::BATCH,
            },
            project: cfg.project,
            anonymous: cfg.anonymous,
            rewrite_preconditions,
            uploads: Mutex::new(HashMap::new()),
            sent_parts: Mutex::new(HashMap::new()),
            leftovers_checked: Mutex::new(Default::default()),
        })
    }

    /// Whether requests go unsigned.
    pub fn is_anonymous(&self) -> bool {
        self.anonymous
    }

    /// Keeps `opts` for the completion of composite upload `upload_id`,
    /// without the whole object's checksums: those cannot be checked per
    /// part, and the expected CRC32C comes with `multipart_complete`.
    fn remember_options(&self, upload_id: &str, opts: &PutOptions) {
        let kept = PutOptions {
            crc32c: None,
            md5: None,
            ..opts.clone()
        };
        (self.uploads.lock().unwrap_or_else(|p| p.into_inner())).insert(upload_id.to_owned(), kept);
    }

    fn upload_options(&self, upload_id: &str, remove: bool) -> PutOptions {
        let mut map = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        let found = if remove {
            map.remove(upload_id)
        } else {
            map.get(upload_id).cloned()
        };
        found.unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl Store for GcsStore {
    fn scheme(&self) -> Scheme {
        Scheme::Gs
    }

    /// The declared abilities, with the batch size as it is now: 1 once
    /// the endpoint refused a batch request (`client.batch_refused`, set
    /// by the first refusal and never cleared), so callers send single
    /// deletes from then on.
    fn capabilities(&self) -> Capabilities {
        let refused = (self.client.batch_refused).load(std::sync::atomic::Ordering::Relaxed);
        Capabilities {
            delete_batch: if refused { 1 } else { self.caps.delete_batch },
            ..self.caps
        }
    }

    fn multipart(&self) -> Option<&dyn shoal_core::MultipartStore> {
        Some(self)
    }

    fn buckets(&self) -> Option<&dyn shoal_core::BucketStore> {
        Some(self)
    }

    fn signer(&self) -> Option<&dyn shoal_core::Signer> {
        Some(self)
    }

    fn versions(&self) -> Option<&dyn shoal_core::VersionStore> {
        Some(self)
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        self.client.head(bucket, key).await
    }

    async fn list_page(&self, bucket: &str, req: &ListRequest) -> Result<ListPage> {
        self.client.list_page(bucket, req).await
    }

    async fn get(
        &self,
        bucket: &str,
        key: &str,
        range: ByteRange,
        version: Option<&ObjectVersion>,
    ) -> Result<GetResponse> {
        self.client.get(bucket, key, range, version).await
    }

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        data: Bytes,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        self.client.put(bucket, key, data, opts).await
    }

    async fn copy(&self, req: &shoal_core::CopyRequest<'_>) -> Result<ObjectMeta> {
        // fake-gcs-server ignores `ifGenerationMatch` on rewrite (see
        // copy.rs): where the server is not declared to enforce it, a copy
        // that must not replace is streamed instead.
        if req.opts.conditional() && !self.rewrite_preconditions {
            return Err(shoal_core::Error::new(
                shoal_core::ErrorKind::Unsupported,
                shoal_core::Op::Copy,
                format!("gs://{}/{}", req.dst_bucket, req.dst_key),
                "this endpoint does not enforce ifGenerationMatch on a rewrite",
            ));
        }
        self.client.copy(req).await
    }

    async fn patch(
        &self,
        bucket: &str,
        key: &str,
        seen: &ObjectMeta,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        self.client.patch(bucket, key, seen, opts).await
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<()> {
        self.client.delete(bucket, key).await
    }

    async fn delete_many(
        &self,
        bucket: &str,
        keys: &[shoal_core::DeleteKey],
    ) -> Result<Vec<Result<()>>> {
        self.client.delete_many(bucket, keys).await
    }

    async fn delete_if(
        &self,
        bucket: &str,
        key: &str,
        version: &shoal_core::ObjectVersion,
    ) -> Result<shoal_core::Deleted> {
        let shoal_core::ObjectVersion::Generation(g) = version else {
            return Err(shoal_core::Error::invalid(
                shoal_core::Op::Delete,
                format!("gs://{bucket}/{key}"),
                format!("GCS objects are matched by generation, not by ETag {version}"),
            )
            .with_hint("use --if-generation-match N (shoal stat shows the generation)"));
        };
        self.client.delete_if(bucket, key, Some(*g)).await
    }

    async fn put_stream(
        &self,
        bucket: &str,
        key: &str,
        body: BoxByteStream,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        // The caller chose a session: one even for a few bytes.
        self.client
            .resumable_upload(bucket, key, body, opts, RESUMABLE_CHUNK_SIZE, true)
            .await
    }
}

#[async_trait::async_trait]
impl shoal_core::MultipartStore for GcsStore {
    async fn multipart_start(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<MultipartUpload> {
        let xml = match opts.assemble {
            // GCS keeps a whole-object CRC32C however an object is made.
            Assemble::Native | Assemble::Composite => true,
            Assemble::Compose => false,
            // A conditional write needs compose's `ifGenerationMatch`.
            Assemble::Auto => self.caps.native_multipart && !opts.conditional(),
        };
        if xml {
            return self.client.xml_start(bucket, key, opts).await;
        }
        let upload_id = compose::new_upload_id();
        self.clean_leftovers(bucket).await;
        leftovers::record(&self.client.base, bucket, &upload_id, false);
        self.remember_options(&upload_id, opts);
        Ok(MultipartUpload {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            upload_id,
        })
    }

    async fn multipart_put(
        &self,
        upload: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc32c: u32,
    ) -> Result<PartInfo> {
        if xml_multipart::is_xml_upload(&upload.upload_id) {
            return self.client.xml_put(upload, part_number, data, crc32c).await;
        }
        let aborted = || {
            shoal_core::Error::new(
                shoal_core::ErrorKind::Cancelled,
                shoal_core::Op::Multipart,
                client::gs_url(&upload.bucket, &upload.key),
                "the upload was aborted",
            )
        };
        let (in_flight, stale, resumed) = {
            let mut sent = self.sent_parts.lock().unwrap_or_else(|p| p.into_inner());
            let parts = sent.entry(upload.upload_id.clone()).or_default();
            if parts.aborted {
                return Err(aborted());
            }
            parts.numbers.insert(part_number);
            let stale = parts.stale.remove(&part_number);
            (parts.in_flight.clone(), stale, parts.resumed)
        };
        let guard = in_flight.read_owned().await;
        // An abort marks the upload before it waits for the parts in
        // flight: one that got here after that wait must not go out.
        let now_aborted = (self.sent_parts.lock().unwrap_or_else(|p| p.into_inner()))
            .get(&upload.upload_id)
            .is_some_and(|p| p.aborted);
        if now_aborted {
            return Err(aborted());
        }
        let (client, upload) = (self.client.clone(), upload.clone());
        let task = tokio::spawn(async move {
            if stale {
                client.delete_parts(&upload, [part_number]).await?;
            }
            let mut r = client
                .multipart_put(&upload, part_number, data.clone(), crc32c)
                .await;
            if resumed
                && let Err(e) = &r
                && e.kind() == shoal_core::ErrorKind::Precondition
            {
                // An earlier run's part, landed after this run listed.
                client.delete_parts(&upload, [part_number]).await?;
                r = client
                    .multipart_put(&upload, part_number, data, crc32c)
                    .await;
            }
            drop(guard);
            r
        });
        task.await.unwrap_or_else(|e| {
            Err(shoal_core::Error::new(
                shoal_core::ErrorKind::Protocol,
                shoal_core::Op::Multipart,
                "a composite part upload",
                format!("the part's task ended without an answer: {e}"),
            ))
        })
    }

    async fn multipart_complete(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        crc32c: Option<u32>,
    ) -> Result<ObjectMeta> {
        if xml_multipart::is_xml_upload(&upload.upload_id) {
            return self.client.xml_complete(upload, parts, crc32c).await;
        }
        // Temporaries are deleted whatever happens, so the upload is over.
        let opts = self.upload_options(&upload.upload_id, true);
        let sent =
            (self.sent_parts.lock().unwrap_or_else(|p| p.into_inner())).remove(&upload.upload_id);
        let done = self
            .client
            .multipart_complete(upload, parts, crc32c, &opts)
            .await;
        // An earlier run's parts this one neither completed with nor sent
        // again (past the end of a file now shorter in parts).
        let unused = sent.map(|s| s.stale).unwrap_or_default();
        let unused = unused
            .into_iter()
            .filter(|n| !parts.iter().any(|p| p.part_number == *n));
        if let Err(e) = self.client.delete_parts(upload, unused).await {
            tracing::warn!(error = %e, "an earlier run's unused parts were not deleted");
        }
        if done.is_ok() {
            leftovers::forget(&upload.upload_id);
        }
        done
    }

    fn multipart_keep(&self, upload: &MultipartUpload) {
        if !xml_multipart::is_xml_upload(&upload.upload_id) {
            leftovers::record(&self.client.base, &upload.bucket, &upload.upload_id, true);
        }
    }

    async fn multipart_resume(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        opts: &PutOptions,
    ) -> Result<(MultipartUpload, Vec<shoal_core::ListedPart>)> {
        let upload = MultipartUpload {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            upload_id: upload_id.to_owned(),
        };
        let parts = if xml_multipart::is_xml_upload(upload_id) {
            self.client.xml_list_parts(&upload).await?
        } else if compose::is_upload_id(upload_id) {
            self.composite_resume(&upload, opts).await?
        } else {
            // Names nothing this store makes: nothing is listed or deleted
            // on its word.
            return Err(shoal_core::Error::new(
                shoal_core::ErrorKind::NotFound,
                shoal_core::Op::Multipart,
                client::gs_url(bucket, key),
                "not an upload id this store makes",
            ));
        };
        Ok((upload, parts))
    }

    /// Composite uploads kept for resuming (their parts name their key),
    /// and where the server has it the XML API's uploads in progress.
    async fn multipart_uploads(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<shoal_core::PendingUpload>> {
        let mut out = self.client.composite_uploads(bucket, prefix).await?;
        if self.caps.native_multipart {
            out.extend(self.client.xml_list_uploads(bucket, prefix).await?);
        }
        Ok(out)
    }

    async fn multipart_abort(&self, upload: &MultipartUpload) -> Result<()> {
        if xml_multipart::is_xml_upload(&upload.upload_id) {
            return self.client.xml_abort(upload).await;
        }
        self.upload_options(&upload.upload_id, true);
        // The entry stays, marked, so that no part goes out after this.
        let sent = {
            let mut map = self.sent_parts.lock().unwrap_or_else(|p| p.into_inner());
            let ours = map.contains_key(&upload.upload_id);
            let parts = map.entry(upload.upload_id.clone()).or_default();
            parts.aborted = true;
            ours.then(|| (std::mem::take(&mut parts.numbers), parts.in_flight.clone()))
        };
        if let Some((_, in_flight)) = &sent {
            // Parts in flight are answered first (see `SentParts`).
            let _ = tokio::time::timeout(ABORT_WAIT, in_flight.write()).await;
        }
        let ours = sent.is_some();
        let done = self
            .client
            .multipart_abort(upload, sent.map(|(numbers, _)| numbers))
            .await;
        if done.is_ok() {
            if ours {
                leftovers::forget(&upload.upload_id);
            } else {
                // Another run's upload: a part it had on its way may land
                // after the listing this abort deleted by. Written down as
                // this process's, so the next upload to the bucket after
                // this process ends looks again.
                leftovers::record(&self.client.base, &upload.bucket, &upload.upload_id, false);
            }
        }
        done
    }
}

#[async_trait::async_trait]
impl shoal_core::BucketStore for GcsStore {
    async fn create_bucket(&self, bucket: &str) -> Result<()> {
        self.client
            .create_bucket(bucket, self.project.as_deref())
            .await
    }

    async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        self.client.delete_bucket(bucket).await
    }

    async fn list_buckets(&self) -> Result<Vec<BucketInfo>> {
        let project = self.project.clone().or_else(credential::key_file_project);
        self.client.list_buckets(project.as_deref()).await
    }
}

#[async_trait::async_trait]
impl shoal_core::Signer for GcsStore {
    /// Signs with the service-account key of
    /// `GOOGLE_APPLICATION_CREDENTIALS`, also against an emulator (whose
    /// requests are otherwise unsigned).
    async fn presign(&self, bucket: &str, key: &str, p: &Presign) -> Result<String> {
        let target = format!("gs://{bucket}/{key}");
        let signer = credential::service_account_signer(&target)?;
        let p = &p.with_headers(self.client.encryption.presign_headers(p.method));
        signed_url::presign(
            &signer,
            &self.client.base,
            bucket,
            key,
            self.client.user_project.as_deref(),
            p,
        )
        .await
    }
}

#[async_trait::async_trait]
impl shoal_core::VersionStore for GcsStore {
    async fn head_version(
        &self,
        bucket: &str,
        key: &str,
        version: &shoal_core::ObjectVersion,
    ) -> Result<ObjectMeta> {
        let g = generation_of(bucket, key, version, shoal_core::Op::Stat)?;
        let mut meta = self.client.head_at(bucket, key, Some(g)).await?;
        meta.version_state.get_or_insert(list::LATEST);
        Ok(meta)
    }

    async fn delete_version(
        &self,
        bucket: &str,
        key: &str,
        version: &shoal_core::ObjectVersion,
    ) -> Result<()> {
        let g = generation_of(bucket, key, version, shoal_core::Op::Delete)?;
        self.client.delete_generation(bucket, key, g).await
    }

    async fn restore_soft_deleted(
        &self,
        bucket: &str,
        key: &str,
        generation: i64,
        only_if_absent: bool,
    ) -> Result<shoal_core::ObjectMeta> {
        self.client
            .restore_generation(bucket, key, generation, only_if_absent)
            .await
    }
}

impl GcsStore {
    /// Picks up composite upload `upload` of an earlier run: its stored
    /// parts, and this process's record of it (options, parts to delete
    /// on an abort, kept from the leftovers' cleanup).
    async fn composite_resume(
        &self,
        upload: &MultipartUpload,
        opts: &PutOptions,
    ) -> Result<Vec<shoal_core::ListedPart>> {
        let parts = self.client.composite_resume(upload).await?;
        self.remember_options(&upload.upload_id, opts);
        let numbers: BTreeSet<u32> = parts.iter().map(|p| p.part_number).collect();
        (self.sent_parts.lock().unwrap_or_else(|p| p.into_inner())).insert(
            upload.upload_id.clone(),
            SentParts {
                numbers: numbers.clone(),
                stale: numbers,
                resumed: true,
                aborted: false,
                in_flight: Default::default(),
            },
        );
        leftovers::record(&self.client.base, &upload.bucket, &upload.upload_id, true);
        Ok(parts)
    }

    /// Deletes the parts of composite uploads to `bucket` that this
    /// machine started and whose process is gone (killed before it could
    /// clean up; see [`leftovers`]), once per bucket and process. Failures
    /// are left for a later run: the upload at hand does not wait on them.
    async fn clean_leftovers(&self, bucket: &str) {
        let first = (self
            .leftovers_checked
            .lock()
            .unwrap_or_else(|p| p.into_inner()))
        .insert(bucket.to_owned());
        if !first {
            return;
        }
        for e in leftovers::dead(&self.client.base, bucket) {
            let upload = MultipartUpload {
                bucket: e.bucket.clone(),
                key: compose::upload_prefix(&e.upload_id),
                upload_id: e.upload_id.clone(),
            };
            match self.client.multipart_abort(&upload, None).await {
                Ok(()) => {
                    tracing::info!(
                        "removed the parts a killed upload left under gs://{bucket}/{}",
                        upload.key
                    );
                    leftovers::forget(&e.upload_id);
                }
                Err(err) => tracing::debug!("leftover parts not removed yet: {err}"),
            }
        }
    }
}

/// The generation a version of a GCS object is named by.
fn generation_of(
    bucket: &str,
    key: &str,
    version: &shoal_core::ObjectVersion,
    op: shoal_core::Op,
) -> Result<i64> {
    match version {
        shoal_core::ObjectVersion::Generation(g) => Ok(*g),
        v => Err(shoal_core::Error::invalid(
            op,
            format!("gs://{bucket}/{key}"),
            format!("GCS versions are generations (numbers), not {v}"),
        )),
    }
}
