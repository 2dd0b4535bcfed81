//! shoal's S3 backend: AWS S3 and S3-compatible servers (MinIO, s3s, ...).
//!
//! Why not `aws-sdk-s3`: it costs minutes of build and a second HTTP/TLS
//! stack, and its generated operations hide exactly the knobs shoal's fast
//! paths need (raw list parsing, opaque keys, streaming ranged reads).
//! What S3 does is small: a dozen REST calls. So this crate speaks them
//! over the shared reqwest client and borrows only the parts that must not
//! be hand-written: SigV4 signing (`aws-sigv4`) and, behind the default
//! `aws-config` feature, the AWS credential chain.
//!
//! Layout, one idea per file:
//! - `config.rs`: [`S3Config`], [`Addressing`], reading the environment;
//! - `endpoint.rs`: URLs, key encoding, path vs virtual-host addressing;
//! - `credential.rs`: lazy, cached, refreshed credentials;
//! - `sign.rs`: SigV4 settings for opaque keys;
//! - `client.rs`: send, retry, error wording;
//! - `object.rs`, `list.rs`, `multipart.rs`, `parts.rs`, `copy.rs`: the
//!   operations.
//!
//! Building an [`S3Store`] does no I/O and resolves no credentials; the first
//! request does, once.
#![warn(missing_docs, unreachable_pub)]

mod buckets;
mod client;
mod config;
mod copy;
mod credential;
mod delete;
mod endpoint;
mod list;
mod multipart;
mod object;
mod parts;
mod sign;

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use bytes::Bytes;
use shoal_core::{
    BucketInfo, ByteRange, Capabilities, Error, ErrorKind, GetResponse, ListPage, ListRequest,
    MultipartUpload, ObjectMeta, ObjectVersion, Op, PartInfo, Presign, PresignStyle, PutOptions,
    Result, Scheme, Store,
};

pub use config::{Addressing, DEFAULT_REGION, S3Config};
pub use endpoint::encode_key;
pub use list::parse_list_objects_v2;

use client::Client;
use credential::CredentialSource;
use endpoint::Endpoint;

/// An S3 (or S3-compatible) endpoint with its credentials.
pub struct S3Store {
    client: std::sync::Arc<Client>,
    caps: Capabilities,
    endpoint_label: String,
    anonymous: bool,
    /// Upload ids started with `if_not_exists`: S3 takes the precondition
    /// on CompleteMultipartUpload (`If-None-Match: *`), which is where the
    /// object appears, so the completion must remember it.
    /// The precondition header each conditional multipart upload (by
    /// upload ID) sends on its completion.
    conditional: Mutex<HashMap<String, (&'static str, String)>>,
}

/// What S3 can do. The limits are AWS's documented ones.
fn capabilities() -> Capabilities {
    Capabilities {
        // S3 has no glob, projection or end offset: shoal filters.
        match_glob: false,
        projection: false,
        end_offset: false,
        native_multipart: true,
        compose: false,
        // Every part but the last must be at least 5 MiB.
        min_part_size: 5 << 20,
        max_parts: 10_000,
        // A single PUT is limited to 5 GiB.
        max_put_size: 5 << 30,
        max_list_page: list::MAX_LIST_PAGE,
        put_stream: false,
        upload_method: shoal_core::UploadMethod::Auto,
        resumes_uploads: true,
        delete_batch: delete::BATCH,
    }
}

impl S3Store {
    /// Builds a store. Validates the endpoint and builds the HTTP client;
    /// credentials are resolved on the first request, not here.
    pub fn new(cfg: S3Config) -> Result<Self> {
        let endpoint = Endpoint::new(&cfg)?;
        let creds = CredentialSource::new(&cfg)?;
        let http = cfg.http.build()?;
        Ok(S3Store {
            endpoint_label: cfg
                .endpoint
                .clone()
                .unwrap_or_else(|| format!("AWS {}", cfg.region)),
            anonymous: cfg.anonymous,
            client: std::sync::Arc::new_cyclic(|me| Client {
                http,
                endpoint,
                creds,
                region: cfg.region,
                retry: cfg.retry,
                request_payer: cfg.request_payer,
                encryption: cfg.encryption,
                read_key: std::sync::atomic::AtomicUsize::new(0),
                me: me.clone(),
            }),
            caps: capabilities(),
            conditional: Mutex::new(HashMap::new()),
        })
    }

    fn conditional_ids(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (&'static str, String)>> {
        self.conditional.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The precondition `opts` puts on a multipart upload's completion.
    fn condition(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<Option<(&'static str, String)>> {
        object::precondition(opts, Op::Multipart, &format!("s3://{bucket}/{key}"))
    }

    /// Keeps `condition` for `upload`'s completion (a started or resumed one).
    fn remember(&self, upload: &MultipartUpload, condition: Option<(&'static str, String)>) {
        if let Some(c) = condition {
            self.conditional_ids().insert(upload.upload_id.clone(), c);
        }
    }

    /// The region requests are signed for.
    pub fn region(&self) -> &str {
        &self.client.region
    }
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("endpoint", &self.endpoint_label)
            .field("region", &self.client.region)
            .field("anonymous", &self.anonymous)
            .field("credentials", &self.client.creds)
            .finish()
    }
}

#[async_trait::async_trait]
impl Store for S3Store {
    fn scheme(&self) -> Scheme {
        Scheme::S3
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
        self.client.copy(req).await
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
        version: &ObjectVersion,
    ) -> Result<shoal_core::Deleted> {
        match version {
            ObjectVersion::ETag(e) => self.client.delete_if(bucket, key, e).await,
            v => Err(Error::invalid(
                Op::Delete,
                format!("s3://{bucket}/{key}"),
                format!("S3 objects are matched by ETag, not by {v}"),
            )
            .with_hint("use --if-match ETAG (shoal stat shows the ETag)")),
        }
    }
}

#[async_trait::async_trait]
impl shoal_core::MultipartStore for S3Store {
    async fn parts(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&ObjectVersion>,
    ) -> Result<Option<Vec<shoal_core::StoredPart>>> {
        self.client.parts(bucket, key, version).await
    }

    async fn multipart_start(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<MultipartUpload> {
        let condition = self.condition(bucket, key, opts)?;
        let upload = self.client.multipart_start(bucket, key, opts).await?;
        self.remember(&upload, condition);
        Ok(upload)
    }

    async fn multipart_put(
        &self,
        upload: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc32c: u32,
    ) -> Result<PartInfo> {
        self.client
            .multipart_put(upload, part_number, data, crc32c)
            .await
    }

    async fn multipart_complete(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        crc32c: Option<u32>,
    ) -> Result<ObjectMeta> {
        let condition = self.conditional_ids().get(&upload.upload_id).cloned();
        let done = (self.client)
            .multipart_complete(upload, parts, crc32c, condition.as_ref(), true)
            .await;
        if done.is_ok() {
            self.conditional_ids().remove(&upload.upload_id);
        }
        done
    }

    async fn multipart_abort(&self, upload: &MultipartUpload) -> Result<()> {
        self.conditional_ids().remove(&upload.upload_id);
        self.client.multipart_abort(upload).await
    }

    async fn multipart_resume(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        opts: &PutOptions,
    ) -> Result<(MultipartUpload, Vec<shoal_core::ListedPart>)> {
        let condition = self.condition(bucket, key, opts)?;
        let upload = MultipartUpload {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            upload_id: upload_id.to_owned(),
        };
        let parts = self.client.list_parts(&upload).await?;
        self.remember(&upload, condition);
        Ok((upload, parts))
    }

    async fn multipart_uploads(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<shoal_core::PendingUpload>> {
        self.client.list_uploads(bucket, prefix).await
    }
}

#[async_trait::async_trait]
impl shoal_core::BucketStore for S3Store {
    async fn create_bucket(&self, bucket: &str) -> Result<()> {
        self.client.create_bucket(bucket).await
    }

    async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        self.client.delete_bucket(bucket).await
    }

    async fn list_buckets(&self) -> Result<Vec<BucketInfo>> {
        self.client.list_buckets().await
    }
}

#[async_trait::async_trait]
impl shoal_core::Signer for S3Store {
    /// SigV4 in the query string, in the store's own addressing (path or
    /// virtual-hosted, as requests are sent): the GCS-only URL shapes
    /// (another endpoint, a bucket-bound host) are refused.
    async fn presign(&self, bucket: &str, key: &str, p: &Presign) -> Result<String> {
        let target = format!("s3://{bucket}/{key}");
        endpoint::check_bucket(Op::Presign, bucket)?;
        if !key.is_empty() {
            client::check_key(Op::Presign, &target, key)?;
        }
        shoal_core::check_presign_expiry(p.expires, &target)?;
        if p.style != PresignStyle::Path || p.endpoint.is_some() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                Op::Presign,
                target,
                "an S3 URL is signed in the store's own addressing; another endpoint, \
                 virtual-hosted style or a bucket-bound host are GCS options",
            )
            .with_hint("set the endpoint and addressing style of the S3 store itself"));
        }
        let Some(creds) = self.client.creds.get(Op::Presign, &target).await? else {
            return Err(Error::new(
                ErrorKind::Unauthenticated,
                Op::Presign,
                target,
                "presigning needs credentials, and requests are unsigned here",
            )
            .with_hint("drop --no-sign-request and give AWS credentials"));
        };
        let p = &p.with_headers(self.client.encryption.presign_headers(p.method));
        let mut query: Vec<(&str, String)> = if self.client.request_payer {
            vec![(client::REQUEST_PAYER.0, client::REQUEST_PAYER.1.to_owned())]
        } else {
            Vec::new()
        };
        query.extend(p.query.iter().map(|(k, v)| (k.as_str(), v.clone())));
        let url = (self.client.endpoint).url(bucket, (!key.is_empty()).then_some(key), &query);
        sign::presign_url(&creds, &self.client.region, p, &url, &target)
    }
}

#[async_trait::async_trait]
impl shoal_core::VersionStore for S3Store {
    async fn head_version(
        &self,
        bucket: &str,
        key: &str,
        version: &ObjectVersion,
    ) -> Result<ObjectMeta> {
        let id = version_id(bucket, key, version, Op::Stat)?;
        self.client.head_at(bucket, key, Some(id)).await
    }

    async fn delete_version(&self, bucket: &str, key: &str, version: &ObjectVersion) -> Result<()> {
        let id = version_id(bucket, key, version, Op::Delete)?;
        self.client.delete_version(bucket, key, id).await
    }
}

/// The version id one stored version of an S3 object is named by.
fn version_id<'v>(bucket: &str, key: &str, version: &'v ObjectVersion, op: Op) -> Result<&'v str> {
    match version {
        ObjectVersion::VersionId(v) => Ok(v),
        v => Err(Error::invalid(
            op,
            format!("s3://{bucket}/{key}"),
            format!("S3 versions are named by version id, not by {v}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_does_no_io_and_debug_is_redacted() {
        let store = S3Store::new(S3Config {
            endpoint: Some("http://127.0.0.1:1".into()),
            access_key: Some("AKIAXXXXSECRETID".into()),
            secret_key: Some("verysecretvalue".into()),
            ..Default::default()
        })
        .unwrap();
        let s = format!("{store:?}");
        assert!(
            !s.contains("verysecretvalue") && !s.contains("AKIAXXXXSECRETID"),
            "{s}"
        );
        assert!(s.contains("unresolved"), "{s}");
        assert_eq!(store.capabilities().min_part_size, 5 * 1024 * 1024);
    }
}
