//! The traits every backend implements: a small core, and optional parts.
//!
//! [`Store`] is deliberately small and made of *primitives*: one list page,
//! one ranged GET, one PUT, one DELETE, a HEAD. Pagination, retries of
//! whole operations, slicing, globbing and parallelism are written once on
//! top of it (in `shoal-transfer` and the listing code), so a new backend
//! gets all of them by writing these methods. The primitives have no
//! default bodies: an implementor sees at compile time everything it must
//! decide.
//!
//! ## Why it is split
//!
//! The split follows arrow-rs `object_store`: its `ObjectStore` holds what
//! every store does to objects, and abilities only some stores have are
//! traits of their own (`MultipartStore`, `Signer`) that a backend
//! implements or not. Here the optional parts are
//!
//! - [`MultipartStore`]: start, put a part, complete, abort; list a stored
//!   object's parts; keep, resume and list uploads in progress;
//! - [`BucketStore`]: create, remove and list buckets;
//! - [`Signer`]: presigned URLs (S3 and GCS; not local files);
//! - [`VersionStore`]: a stored version read or deleted, a soft-deleted
//!   one restored (S3 and GCS; not local files).
//!
//! Where `object_store` leaves a caller holding `Arc<dyn ObjectStore>` no
//! way to reach them, [`Store`] has an accessor for each
//! ([`Store::multipart`], [`Store::buckets`], [`Store::signer`],
//! [`Store::versions`]) answering `Some(self)` or None: whether a store has
//! a part is data, read before anything is sent, and a store cannot have
//! half of one. The accessors have no defaults either, so a new store, or
//! a wrapper around one (`shoal_testkit::wrap`), decides each part rather
//! than silently losing it to a default. A caller that needs a part turns
//! None into the `Unsupported` error the trait's defaults have always
//! given with [`need`] and a [`Lack`], so messages and exit codes are the
//! same whichever way a store lacks something.
//!
//! Four optional methods stay in the core, with defaults answering
//! `Unsupported`: [`Store::copy`] and [`Store::patch`] (as `copy` is core in
//! `object_store`: every caller has a way round, streaming the bytes or
//! copying the object onto itself, and which stores can is a matter of
//! the request, e.g. a GCS rewrite under a precondition some endpoints
//! ignore), [`Store::put_stream`] (another way to do a PUT, declared by
//! [`Capabilities::put_stream`]) and [`Store::delete_if`] (a DELETE with a
//! precondition, which [`Store::delete_many`] and the safe delete fall back
//! from). [`Store::delete_many`] is core too: its default sends single
//! deletes, so every store has it, and how many keys one call takes is
//! [`Capabilities::delete_batch`].
//!
//! What a caller asks before choosing a path (stream or parts, batch
//! deletes, resumable uploads, the configured upload method) is data as
//! well, in [`Capabilities`], not methods.
//!
//! Methods take `bucket` and `key` as plain strings, not a URL, because the
//! store is already bound to an endpoint and credentials; the same store
//! value serves every bucket behind that endpoint.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;

use crate::error::{Error, ErrorKind, Op, Result};
use crate::meta::{ByteRange, ListPage, ListRequest, ObjectMeta, ObjectVersion};
use crate::url::Scheme;

/// A stream of body chunks.
pub type BoxByteStream = Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>;

/// What a backend can do, declared rather than sniffed from endpoint names.
///
/// Every question a caller asks before choosing a path (stream or parts,
/// batch or single deletes, resume or start over) is a field here, not a
/// method of [`Store`]: a caller reads them all at once, a wrapper store
/// changes one by struct update, and a new question is a new field every
/// store must fill in (no default that silently answers "cannot").
///
/// [`Store::capabilities`] returns the value, not a reference: a store
/// whose abilities change while it runs (GCS stops batching deletes once
/// a server refused a batch, see [`Capabilities::delete_batch`]) answers
/// with what holds *now*, and a caller keeps a copy that does not change
/// under it while it plans one piece of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The server may honour a GCS `matchGlob` (callers re-filter anyway).
    pub match_glob: bool,
    /// The server may honour a `fields` projection.
    pub projection: bool,
    /// Listing accepts an exclusive end offset on the server.
    pub end_offset: bool,
    /// Multipart uploads are native (S3, GCS XML) rather than composed.
    pub native_multipart: bool,
    /// Server-side compose of whole objects (GCS).
    pub compose: bool,
    /// Smallest part except the last in a multipart upload.
    pub min_part_size: u64,
    /// Largest number of parts in one multipart upload.
    pub max_parts: u32,
    /// Largest single PUT the store accepts.
    pub max_put_size: u64,
    /// Largest page a list request returns.
    pub max_list_page: u32,
    /// [`Store::put_stream`] is a real single-session upload (GCS
    /// resumable); otherwise callers use multipart.
    pub put_stream: bool,
    /// How this store was configured to take uploads (see
    /// [`UploadMethod`]); [`UploadMethod::Auto`] unless it has a choice.
    pub upload_method: UploadMethod,
    /// An upload this store started in an earlier run can be picked up
    /// ([`MultipartStore::multipart_resume`]): S3 and GCS XML multipart uploads,
    /// whose parts the server keeps until the upload is completed or
    /// aborted, and GCS composite uploads, whose parts are objects.
    pub resumes_uploads: bool,
    /// How many keys one [`Store::delete_many`] call sends in one request
    /// (S3 DeleteObjects: 1,000). 1: the store has no batch delete, and
    /// callers send single deletes at their own concurrency. It may drop
    /// to 1 while the store runs (a GCS endpoint that refused a batch):
    /// ask [`Store::capabilities`] again before each piece of work.
    pub delete_batch: usize,
}

impl Capabilities {
    /// What a store that lives in this process can do (local files, the
    /// in-memory test store): no server to narrow a listing or compose,
    /// parts of any size, one key deleted at a time.
    pub const IN_PROCESS: Capabilities = Capabilities {
        match_glob: false,
        projection: false,
        end_offset: true,
        native_multipart: true,
        compose: false,
        min_part_size: 0,
        max_parts: 10_000,
        max_put_size: u64::MAX,
        max_list_page: 1000,
        put_stream: false,
        upload_method: UploadMethod::Auto,
        resumes_uploads: false,
        delete_batch: 1,
    };
}

/// An object body being read, with what the response headers said.
pub struct GetResponse {
    /// Metadata from the response headers. `size` is the whole object's
    /// size (from `Content-Range` for ranged reads).
    pub meta: ObjectMeta,
    /// The range actually being returned, with a resolved end.
    pub range: ByteRange,
    /// The bytes.
    pub body: BoxByteStream,
}

impl Debug for GetResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetResponse")
            .field("meta", &self.meta)
            .field("range", &self.range)
            .finish()
    }
}

/// Options for writing an object.
#[derive(Debug, Clone, Default)]
pub struct PutOptions {
    /// CRC32C of the whole body; the server rejects the write if it differs
    /// (where the server validates).
    pub crc32c: Option<u32>,
    /// MD5 of the whole body, validated the same way.
    pub md5: Option<[u8; 16]>,
    /// CRC32 or CRC64NVME of the whole body, for a single S3 PUT: sent
    /// *instead of* the CRC32C (S3 keeps one algorithm per object), for
    /// pipelines that check those. Validated like the others; GCS and
    /// local files keep CRC32C only and ignore it.
    pub other_crc: Option<crate::checksum::OtherCrc>,
    /// Fail with `Precondition` if the object exists.
    pub if_not_exists: bool,
    /// Fail with `Precondition` unless the object exists at this version
    /// (GCS `ifGenerationMatch`, S3 `If-Match`): a write that replaces
    /// only what the caller read.
    pub if_match: Option<crate::ObjectVersion>,
    /// `Content-Type` to store.
    pub content_type: Option<String>,
    /// `Content-Encoding` to store.
    pub content_encoding: Option<String>,
    /// `Cache-Control` to store.
    pub cache_control: Option<String>,
    /// `Content-Disposition` to store.
    pub content_disposition: Option<String>,
    /// Custom metadata to store (S3 `x-amz-meta-KEY`, GCS `metadata`).
    pub metadata: BTreeMap<String, String>,
    /// Storage class for the new object; None: the bucket's default.
    pub storage_class: Option<String>,
    /// A canned ACL for the new object, in its store's spelling (S3
    /// `x-amz-acl`: `public-read`; GCS `predefinedAcl`: `publicRead`);
    /// None: the bucket's default. Checked by
    /// `shoal_transfer::ops::metadata::acl`.
    pub acl: Option<String>,
    /// How `multipart_start` assembles the upload, where there is a choice.
    pub assemble: Assemble,
}

/// A copy made by the server, within one store ([`Store::copy`]): no byte
/// of the object passes through the client.
#[derive(Debug, Clone)]
pub struct CopyRequest<'a> {
    /// Source bucket.
    pub src_bucket: &'a str,
    /// Source key.
    pub src_key: &'a str,
    /// The source as it was read (size, version, checksums). The copy is
    /// pinned to `src.version` (S3 `x-amz-copy-source-if-match`, GCS
    /// `ifSourceGenerationMatch`): a source replaced since fails with
    /// `Precondition` (or `NotFound`), never a mix of two versions.
    pub src: &'a ObjectMeta,
    /// Destination bucket.
    pub dst_bucket: &'a str,
    /// Destination key.
    pub dst_key: &'a str,
    /// What the destination stores beside its bytes; only
    /// `if_not_exists` and `storage_class` are read unless
    /// `replace_metadata` is set.
    pub opts: &'a PutOptions,
    /// Store `opts`'s type, encoding, cache control, disposition and
    /// custom metadata instead of the source's (S3
    /// `x-amz-metadata-directive: REPLACE`, a GCS destination resource).
    pub replace_metadata: bool,
    /// Objects larger than this are copied in parts of this size where the
    /// store copies in parts (S3 UploadPartCopy).
    pub part_size: u64,
    /// Parts copied at once.
    pub workers: usize,
    /// Where a store that copies in several requests (S3 UploadPartCopy:
    /// start, each part, complete) adds how many it sent, so the summary
    /// counts the requests made; left alone, one request is assumed.
    pub requests: Option<&'a std::sync::atomic::AtomicUsize>,
}

impl PutOptions {
    /// Whether these options set anything a copy would otherwise take from
    /// its source (type, encoding, cache control, disposition, custom
    /// metadata): then a server-side copy must replace the source's.
    pub fn overrides_metadata(&self) -> bool {
        self.content_type.is_some()
            || self.content_encoding.is_some()
            || self.cache_control.is_some()
            || self.content_disposition.is_some()
            || !self.metadata.is_empty()
    }
}

impl PutOptions {
    /// Whether the write carries a precondition on what it replaces.
    pub fn conditional(&self) -> bool {
        self.if_not_exists || self.if_match.is_some()
    }

    /// These options for a copy of an object described by `src`: what is
    /// set here wins, the rest (content type, encoding, cache control,
    /// disposition) is the source's; custom metadata is the source's with
    /// these keys added or replaced. The storage class is not carried:
    /// classes differ between stores, so the destination's default holds
    /// unless one is asked for.
    pub fn keeping(&self, src: &ObjectMeta) -> PutOptions {
        let or = |mine: &Option<String>, theirs: &Option<String>| mine.clone().or(theirs.clone());
        let mut metadata = src.metadata.clone();
        metadata.extend(self.metadata.iter().map(|(k, v)| (k.clone(), v.clone())));
        PutOptions {
            content_type: or(&self.content_type, &src.content_type),
            content_encoding: or(&self.content_encoding, &src.content_encoding),
            cache_control: or(&self.cache_control, &src.cache_control),
            content_disposition: or(&self.content_disposition, &src.content_disposition),
            metadata,
            ..self.clone()
        }
    }
}

/// How a multipart upload is assembled, for stores that have more than one
/// way (GCS: its XML API's multipart upload, or parts stored as temporary
/// objects and composed). Stores with one way ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Assemble {
    /// The store's choice: native where the server has it.
    #[default]
    Auto,
    /// The server's multipart upload (S3, the GCS XML API).
    Native,
    /// Parts as temporary objects, composed on the server (GCS).
    Compose,
    /// The server's multipart upload, the object keeping only a checksum
    /// of its parts' CRC32Cs (S3's COMPOSITE, `xxxx-N`) instead of a
    /// whole-object CRC32C: what servers without full-object checksums
    /// store, and the shape of what boto3 and the AWS CLI leave (in
    /// CRC32). Downloads check it part by part.
    Composite,
}

/// A multipart upload in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartUpload {
    /// Destination bucket.
    pub bucket: String,
    /// Destination key.
    pub key: String,
    /// The store's upload id (S3 UploadId, or shoal's id for composed uploads).
    pub upload_id: String,
}

/// One uploaded part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartInfo {
    /// 1-based part number; parts are assembled in this order.
    pub part_number: u32,
    /// The store's token for the part (ETag, or the temporary object name).
    pub etag: String,
    /// CRC32C of the part.
    pub crc32c: u32,
    /// Size of the part in bytes.
    pub size: u64,
}

impl PartInfo {
    /// Fails unless `part_number` is in `1..=max` (the numbering every
    /// multipart protocol here shares).
    pub fn check_number(part_number: u32, max: u32, url: &str) -> Result<()> {
        if (1..=max).contains(&part_number) {
            return Ok(());
        }
        Err(Error::invalid(
            Op::Multipart,
            url,
            format!("part number {part_number} is outside 1..={max}"),
        ))
    }

    /// The part as stored; a CRC32C the server computed (`echo`) must be
    /// the one sent.
    pub fn stored(self, echo: Option<u32>, url: &str) -> Result<PartInfo> {
        match echo {
            Some(theirs) if theirs != self.crc32c => Err(Error::new(
                ErrorKind::Integrity,
                Op::Multipart,
                url,
                format!(
                    "part {}: server computed CRC32C {theirs:08x}, we sent {:08x}",
                    self.part_number, self.crc32c
                ),
            )),
            _ => Ok(self),
        }
    }

    /// `parts` in assembly order; fails when there are none or a number
    /// repeats.
    pub fn in_order<'a>(parts: &'a [PartInfo], url: &str) -> Result<Vec<&'a PartInfo>> {
        let mut sorted: Vec<&PartInfo> = parts.iter().collect();
        sorted.sort_by_key(|p| p.part_number);
        if sorted.is_empty() {
            return Err(Error::invalid(Op::Multipart, url, "no parts to assemble"));
        }
        if let Some(w) = sorted
            .windows(2)
            .find(|w| w[0].part_number == w[1].part_number)
        {
            return Err(Error::invalid(
                Op::Multipart,
                url,
                format!("part {} is listed twice", w[0].part_number),
            ));
        }
        Ok(sorted)
    }
}

/// A part of an upload in progress as the store lists it (S3
/// ListParts): what a resumed upload checks against the file before it
/// trusts the part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPart {
    /// 1-based part number.
    pub part_number: u32,
    /// The store's token for the part (ETag, quoted as sent).
    pub etag: String,
    /// Bytes.
    pub size: u64,
    /// The part's CRC32C, when it was sent with one and the store says.
    pub crc32c: Option<u32>,
}

/// A multipart upload started and neither completed nor aborted, as the
/// store lists it (S3 ListMultipartUploads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingUpload {
    /// The key the upload writes.
    pub key: String,
    /// The store's upload id.
    pub upload_id: String,
    /// When it was started, Unix nanoseconds, when the store says.
    pub initiated_ns: Option<i128>,
}

/// One part of a stored multipart object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredPart {
    /// Bytes.
    pub size: u64,
    /// Its CRC, in the algorithm of the object's composite checksum, when
    /// the store gives it.
    pub crc: Option<u32>,
}

/// One bucket, as a bucket listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketInfo {
    /// The bucket's name.
    pub name: String,
    /// When it was created, as the server wrote it (RFC 3339), if it said.
    pub created: Option<String>,
}

/// What a presigned URL lets its holder do: the HTTP method it is signed
/// for (a URL signed for GET cannot be used to PUT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresignMethod {
    /// Read the object.
    Get,
    /// Write the object (one PUT of the whole body).
    Put,
    /// Read the object's metadata.
    Head,
    /// Delete the object.
    Delete,
    /// A POST: on GCS, starting a resumable upload (with the signed header
    /// `x-goog-resumable: start`).
    Post,
}

impl PresignMethod {
    /// The HTTP method.
    pub fn as_str(self) -> &'static str {
        match self {
            PresignMethod::Get => "GET",
            PresignMethod::Put => "PUT",
            PresignMethod::Head => "HEAD",
            PresignMethod::Delete => "DELETE",
            PresignMethod::Post => "POST",
        }
    }

    /// `name` in any case (`get`, `PUT`...); None for a method no signed
    /// URL is made for.
    pub fn parse(name: &str) -> Option<PresignMethod> {
        Some(match name.to_ascii_uppercase().as_str() {
            "GET" => PresignMethod::Get,
            "PUT" => PresignMethod::Put,
            "HEAD" => PresignMethod::Head,
            "DELETE" => PresignMethod::Delete,
            "POST" => PresignMethod::Post,
            _ => return None,
        })
    }

    /// The names [`PresignMethod::parse`] takes, for messages.
    pub const NAMES: &'static str = "GET, PUT, HEAD, DELETE or POST";
}

/// How a presigned URL names its bucket.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PresignStyle {
    /// `https://host/bucket/key`, the store's own form.
    #[default]
    Path,
    /// `https://bucket.host/key`.
    VirtualHosted,
    /// `https://cdn.example.com/key`: a host (a CNAME or a load balancer)
    /// that stands for the bucket, given as `host` or `scheme://host`.
    BucketBound(String),
}

/// One presigned URL to make. Beyond the method and the life, what the
/// URL's holder must send (signed `headers`, e.g. a content type a PUT
/// must carry), what the URL carries (`query`, e.g. `response-content-disposition`),
/// and how it names the bucket. The signing time is now unless `time` is
/// set: a URL signed for a later time is valid only from then (and, for
/// tests and reproducible URLs, a fixed time gives the same URL).
#[derive(Debug, Clone)]
pub struct Presign {
    /// The HTTP method the URL is for.
    pub method: PresignMethod,
    /// How long the URL lives (1 s to [`MAX_PRESIGN_EXPIRY`]).
    pub expires: std::time::Duration,
    /// Headers the request must carry, signed (names in any case).
    pub headers: Vec<(String, String)>,
    /// Query parameters signed into the URL.
    pub query: Vec<(String, String)>,
    /// How the URL names the bucket.
    pub style: PresignStyle,
    /// The `scheme://host` the URL names instead of the store's endpoint
    /// (a client that reaches the store through a proxy or an emulator,
    /// signing URLs for others to use on the real one).
    pub endpoint: Option<String>,
    /// The signing time; None signs now.
    pub time: Option<std::time::SystemTime>,
}

impl Presign {
    /// With `extra` signed too, where the caller did not already give a
    /// header of that name (a store's encryption headers, for one).
    pub fn with_headers(&self, extra: Vec<(String, String)>) -> Presign {
        let mut p = self.clone();
        for (name, value) in extra {
            if !p.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                p.headers.push((name, value));
            }
        }
        p
    }

    /// `method` for `expires`, path style, at the store's endpoint, now.
    pub fn new(method: PresignMethod, expires: std::time::Duration) -> Presign {
        Presign {
            method,
            expires,
            headers: Vec::new(),
            query: Vec::new(),
            style: PresignStyle::Path,
            endpoint: None,
            time: None,
        }
    }

    /// The signing time: [`Presign::time`] or now.
    pub fn signed_at(&self) -> std::time::SystemTime {
        self.time.unwrap_or_else(std::time::SystemTime::now)
    }
}

/// How a store with more than one way to take an upload takes one, as its
/// configuration says (GCS: `--gcs-upload`). The engine asks the store
/// ([`Capabilities::upload_method`]) and picks its path from the answer: one PUT,
/// one streamed session, or parts in parallel assembled as
/// [`UploadMethod::assemble`] says. Stores with one way (S3's native
/// multipart) answer [`UploadMethod::Auto`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UploadMethod {
    /// The store's best: on GCS, the XML API's multipart upload where the
    /// server has it (Google's endpoints); elsewhere (emulators) files are
    /// parallel composite uploads, and streams of unknown length (stdin,
    /// cloud to cloud) one resumable session, which leaves no temporary
    /// objects behind.
    #[default]
    Auto,
    /// Always parallel composite: parts on parallel connections stored as
    /// temporary objects, then composed; the result has no MD5.
    Compose,
    /// Always the native multipart upload (GCS: the XML API's): parts on
    /// parallel connections, no temporary objects; the result has no MD5.
    Native,
    /// Always one streamed session (GCS: resumable): one connection, no
    /// temporary objects, the server checks the whole object.
    Session,
}

impl UploadMethod {
    /// How the store is asked to assemble a multipart upload.
    pub fn assemble(self) -> Assemble {
        match self {
            UploadMethod::Compose => Assemble::Compose,
            UploadMethod::Native => Assemble::Native,
            UploadMethod::Auto | UploadMethod::Session => Assemble::Auto,
        }
    }
}

/// The longest a presigned URL may live: 7 days, the limit of both SigV4
/// and GCS V4 signatures (servers refuse longer ones).
pub const MAX_PRESIGN_EXPIRY: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// A presigned URL's life must be 1 second to [`MAX_PRESIGN_EXPIRY`]; the
/// stores check it before signing (`target` names the object).
pub fn check_presign_expiry(expires: std::time::Duration, target: &str) -> Result<()> {
    if expires.is_zero() || expires > MAX_PRESIGN_EXPIRY {
        return Err(Error::invalid(
            Op::Presign,
            target,
            "a presigned URL must expire within 1 second to 7 days",
        ));
    }
    Ok(())
}

/// What a store answers for a capability it lacks (the trait's defaults):
/// `Unsupported`, which callers take as "go another way".
fn unsupported(op: Op, target: String, what: &str) -> Error {
    Error::new(ErrorKind::Unsupported, op, target, what)
}

/// Something a store may lack: one of its optional parts
/// ([`Store::multipart`], [`Store::buckets`], [`Store::signer`],
/// [`Store::versions`]) or an optional method of one. Each names the
/// operation and the words of the `Unsupported` error that says so, in one
/// place: the parts' default methods and [`need`] both make their errors
/// here, so a caller asking a store without the part, and a part without
/// the method, get the same error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    /// No multipart uploads at all.
    Multipart,
    /// No uploads picked up from an earlier run
    /// ([`MultipartStore::multipart_resume`]).
    ResumeUploads,
    /// No multipart uploads in progress to list
    /// ([`MultipartStore::multipart_uploads`]).
    ListUploads,
    /// No buckets to create.
    CreateBucket,
    /// No buckets to remove.
    DeleteBucket,
    /// No buckets to list.
    ListBuckets,
    /// No presigned URLs.
    Presign,
    /// No stored versions to read ([`VersionStore::head_version`]).
    HeadVersion,
    /// No stored versions to delete ([`VersionStore::delete_version`]).
    DeleteVersion,
    /// No soft-deleted objects to bring back
    /// ([`VersionStore::restore_soft_deleted`]).
    SoftDelete,
}

impl Lack {
    /// The operation the error names.
    pub fn op(self) -> Op {
        match self {
            Lack::Multipart | Lack::ResumeUploads | Lack::ListUploads => Op::Multipart,
            Lack::CreateBucket => Op::CreateBucket,
            Lack::DeleteBucket => Op::DeleteBucket,
            Lack::ListBuckets => Op::ListBuckets,
            Lack::Presign => Op::Presign,
            Lack::HeadVersion => Op::Stat,
            Lack::DeleteVersion => Op::Delete,
            Lack::SoftDelete => Op::Copy,
        }
    }

    /// What the error says.
    pub fn what(self) -> &'static str {
        match self {
            Lack::Multipart => "this store has no multipart uploads",
            Lack::ResumeUploads => "this store does not resume uploads",
            Lack::ListUploads => "this store keeps no multipart uploads to list (S3 does)",
            Lack::CreateBucket | Lack::DeleteBucket | Lack::ListBuckets => {
                "this store has no buckets to manage"
            }
            Lack::Presign => "this store has no presigned URLs",
            Lack::HeadVersion | Lack::DeleteVersion => "this store has no object versions",
            Lack::SoftDelete => "this store has no soft delete",
        }
    }

    /// The `Unsupported` error for `bucket`/`key` (the target written
    /// `bucket/key`, as every store's defaults always wrote it).
    pub fn error(self, bucket: &str, key: &str) -> Error {
        unsupported(self.op(), format!("{bucket}/{key}"), self.what())
    }
}

/// The part a store has, or the `Unsupported` error `lack` makes for
/// `bucket`/`key`: how a caller holding an `Arc<dyn Store>` reaches an
/// optional part, e.g.
/// `need(store.signer(), Lack::Presign, bucket, key)?.presign(bucket, key, &p)`.
pub fn need<'a, T: ?Sized>(
    part: Option<&'a T>,
    lack: Lack,
    bucket: &str,
    key: &str,
) -> Result<&'a T> {
    part.ok_or_else(|| lack.error(bucket, key))
}

/// An object store: the primitives shoal's engines are built from, and
/// the way to its optional parts (see the module docs).
#[async_trait::async_trait]
pub trait Store: Send + Sync + Debug {
    /// Which URL scheme this store serves.
    fn scheme(&self) -> Scheme;

    /// What this store can do, as it stands now (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities;

    /// Its multipart uploads; None: it has none.
    fn multipart(&self) -> Option<&dyn MultipartStore>;

    /// Its buckets, to create, remove and list; None: it has none to
    /// manage.
    fn buckets(&self) -> Option<&dyn BucketStore>;

    /// Its presigned URLs; None: it makes none.
    fn signer(&self) -> Option<&dyn Signer>;

    /// Its stored versions of objects; None: it keeps one version of a
    /// key, the current one.
    fn versions(&self) -> Option<&dyn VersionStore>;

    /// Metadata of one object.
    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta>;

    /// One page of a listing.
    async fn list_page(&self, bucket: &str, req: &ListRequest) -> Result<ListPage>;

    /// Reads `range` of an object. With `version`, fails with
    /// `ErrorKind::Changed` (or `NotFound`) if the object is no longer that
    /// version, so slices of two versions are never stitched together.
    async fn get(
        &self,
        bucket: &str,
        key: &str,
        range: ByteRange,
        version: Option<&ObjectVersion>,
    ) -> Result<GetResponse>;

    /// Writes a whole object in one request.
    async fn put(
        &self,
        bucket: &str,
        key: &str,
        data: Bytes,
        opts: &PutOptions,
    ) -> Result<ObjectMeta>;

    /// Deletes an object.
    async fn delete(&self, bucket: &str, key: &str) -> Result<()>;

    /// Copies an object to another bucket or key of this store on the
    /// server (S3 CopyObject, or UploadPartCopy parts above
    /// `req.part_size`; GCS rewrite): see [`CopyRequest`]. The answer
    /// describes the destination, with the checksums the server gives.
    /// Stores that cannot answer `Unsupported`; callers then stream the
    /// bytes through the client.
    async fn copy(&self, req: &CopyRequest<'_>) -> Result<ObjectMeta> {
        Err(unsupported(
            Op::Copy,
            format!("{}/{}", req.src_bucket, req.src_key),
            "this store has no server-side copy",
        ))
    }

    /// Changes what an object stores beside its bytes in place (GCS
    /// objects.patch), pinned to `seen.version`: `opts`'s type, encoding,
    /// cache control, disposition and custom metadata become the object's
    /// (a key of `seen.metadata` absent from `opts.metadata` is removed).
    /// An object at another version fails with `Precondition` and is left
    /// alone. Stores without it answer `Unsupported`; callers then copy
    /// the object onto itself ([`Store::copy`]).
    async fn patch(
        &self,
        bucket: &str,
        key: &str,
        seen: &ObjectMeta,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        let _ = (seen, opts);
        Err(unsupported(
            Op::Update,
            format!("{bucket}/{key}"),
            "this store has no metadata patch",
        ))
    }

    /// Uploads a body of unknown length in one session (GCS resumable
    /// upload): no temporary objects, the server checks the whole object.
    /// Where [`Capabilities::put_stream`] is false the store answers
    /// `Unsupported`; callers use multipart.
    async fn put_stream(
        &self,
        bucket: &str,
        key: &str,
        body: BoxByteStream,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        let _ = (body, opts);
        Err(unsupported(
            Op::Upload,
            format!("{bucket}/{key}"),
            "this store has no single-session streaming upload",
        ))
    }

    /// Deletes an object only if it is at `version` (GCS
    /// `ifGenerationMatch`, S3 `If-Match`); otherwise `Precondition`, and
    /// the object stays. After a lost answer it never deletes another
    /// version: a key stored again meanwhile is [`Deleted::Replaced`] and
    /// kept (see [`crate::retry::safe::delete`]). Stores without versions
    /// answer `Unsupported`.
    async fn delete_if(&self, bucket: &str, key: &str, version: &ObjectVersion) -> Result<Deleted> {
        let _ = version;
        Err(unsupported(
            Op::Delete,
            format!("{bucket}/{key}"),
            "this store has no object versions to match",
        ))
    }

    /// Deletes `keys` of `bucket`, each pinned to its version where it
    /// names one ([`DeleteKey`]): one result per key, in order, a key
    /// already gone counted as deleted, a key at another version
    /// `Precondition` (and kept). The outer error means the request as a
    /// whole was refused (a store without the batch call), and the caller
    /// falls back to single deletes. How many keys one call takes is
    /// [`Capabilities::delete_batch`]. The default sends them one after
    /// another.
    async fn delete_many(&self, bucket: &str, keys: &[DeleteKey]) -> Result<Vec<Result<()>>> {
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let r = match &k.version {
                Some(v) if k.exact => match self.versions() {
                    Some(s) => s.delete_version(bucket, &k.key, v).await,
                    None => Err(Lack::DeleteVersion.error(bucket, &k.key)),
                },
                Some(v) => match self.delete_if(bucket, &k.key, v).await {
                    Err(e) if e.kind() == ErrorKind::Unsupported => {
                        self.delete(bucket, &k.key).await
                    }
                    r => r.map(|_| ()),
                },
                None => self.delete(bucket, &k.key).await,
            };
            out.push(match r {
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                r => r,
            });
        }
        Ok(out)
    }
}

/// Multipart uploads: parts sent in parallel, then assembled on the
/// server (S3, the GCS XML API; GCS composite uploads, local files and
/// the memory store do it their own way). Reached through
/// [`Store::multipart`].
#[async_trait::async_trait]
pub trait MultipartStore: Send + Sync {
    /// Starts a multipart upload. Parts may then be sent in parallel.
    async fn multipart_start(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<MultipartUpload>;

    /// Uploads one part (1-based `part_number`).
    async fn multipart_put(
        &self,
        upload: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc32c: u32,
    ) -> Result<PartInfo>;

    /// Assembles the parts, in part-number order, into the object.
    /// `crc32c` is the whole object's checksum, checked where possible.
    async fn multipart_complete(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        crc32c: Option<u32>,
    ) -> Result<ObjectMeta>;

    /// Abandons an upload and frees its parts.
    async fn multipart_abort(&self, upload: &MultipartUpload) -> Result<()>;

    /// The parts of a multipart object, in order, for checking a
    /// [`Composite`](crate::checksum::Composite) checksum: S3's
    /// GetObjectAttributes. With `version`, fails with `Changed` if the
    /// object is no longer that version. None where the store cannot say.
    async fn parts(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&ObjectVersion>,
    ) -> Result<Option<Vec<StoredPart>>> {
        let _ = (bucket, key, version);
        Ok(None)
    }

    /// Upload `upload` is written down to be resumed by a later run: a
    /// store that cleans up uploads it takes for abandoned (GCS composite
    /// parts whose process is gone) leaves this one to the run that
    /// resumes it, or to `shoal uploads --abort`.
    fn multipart_keep(&self, upload: &MultipartUpload) {
        let _ = upload;
    }

    /// Picks up upload `upload_id` to `bucket`/`key`, started by an
    /// earlier run with the same `opts` (their precondition applies again
    /// at completion), and lists the parts the server holds. An upload
    /// that no longer exists (completed, aborted, expired) is `NotFound`.
    /// Where [`Capabilities::resumes_uploads`] is false the store answers
    /// `Unsupported`.
    async fn multipart_resume(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        opts: &PutOptions,
    ) -> Result<(MultipartUpload, Vec<ListedPart>)> {
        let _ = (upload_id, opts);
        Err(Lack::ResumeUploads.error(bucket, key))
    }

    /// The multipart uploads in progress in `bucket` whose keys start with
    /// `prefix`, every page of them.
    async fn multipart_uploads(&self, bucket: &str, prefix: &str) -> Result<Vec<PendingUpload>> {
        Err(Lack::ListUploads.error(bucket, prefix))
    }
}

/// Buckets: made, removed and listed. Reached through [`Store::buckets`].
#[async_trait::async_trait]
pub trait BucketStore: Send + Sync {
    /// Creates a bucket.
    async fn create_bucket(&self, bucket: &str) -> Result<()>;

    /// Removes a bucket. The server refuses one that still holds objects
    /// (`Precondition`); emptying it first is the caller's decision.
    async fn delete_bucket(&self, bucket: &str) -> Result<()>;

    /// The buckets these credentials can see (GCS: in the configured
    /// project), every page of them.
    async fn list_buckets(&self) -> Result<Vec<BucketInfo>>;
}

/// Presigned URLs. Reached through [`Store::signer`].
#[async_trait::async_trait]
pub trait Signer: Send + Sync {
    /// A URL that lets anyone holding it make the request `p` describes
    /// on the object (`key` empty: on the bucket) without credentials,
    /// until `p.expires` after it was signed (at most
    /// [`MAX_PRESIGN_EXPIRY`]). Signing is local: no request is sent, and
    /// the object need not exist.
    async fn presign(&self, bucket: &str, key: &str, p: &Presign) -> Result<String>;
}

/// Stored versions of objects, current or not (GCS generations, S3
/// version ids). Reached through [`Store::versions`].
#[async_trait::async_trait]
pub trait VersionStore: Send + Sync {
    /// Metadata of one stored version of an object, current or not: a GCS
    /// generation (`?generation=`), an S3 [`ObjectVersion::VersionId`]
    /// (`?versionId=`). The answer's `version` is that same version, so a
    /// download pinned to it ([`Store::get`]) reads that version's bytes.
    async fn head_version(
        &self,
        bucket: &str,
        key: &str,
        version: &ObjectVersion,
    ) -> Result<ObjectMeta>;

    /// Deletes one stored version for good (GCS `?generation=`, S3
    /// `?versionId=`), current or noncurrent, or an S3 delete marker; no
    /// other version of the key is touched, and no delete marker is made.
    /// A version already gone counts as deleted.
    async fn delete_version(&self, bucket: &str, key: &str, version: &ObjectVersion) -> Result<()>;

    /// Brings a soft-deleted generation back as the key's live object
    /// (GCS `objects.restore`); with `only_if_absent`, only while the key
    /// has no live object (`ifGenerationMatch=0`), so a restore never
    /// replaces a newer object unless asked. Stores without soft delete
    /// answer `Unsupported`.
    async fn restore_soft_deleted(
        &self,
        bucket: &str,
        key: &str,
        generation: i64,
        only_if_absent: bool,
    ) -> Result<ObjectMeta> {
        let _ = (generation, only_if_absent);
        Err(Lack::SoftDelete.error(bucket, key))
    }
}

/// What a delete pinned to a version did (see
/// [`crate::retry::safe::delete`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The version is gone: deleted by this call (or found gone after its
    /// answer was lost).
    Gone,
    /// The version is gone, and the key now holds a newer object (this
    /// version, when the store gave one) that another writer stored after
    /// the delete was sent, whose answer was lost. That object was kept:
    /// the delete was planned against the older version only.
    Replaced(Option<ObjectVersion>),
}

/// One key of [`Store::delete_many`], and the version it was planned
/// against: deleted only while it is at that version (GCS
/// `ifGenerationMatch`, S3's `ETag` element of DeleteObjects), so an
/// object written after the listing that planned the delete is kept.
/// None: whatever is there. Servers that ignore the precondition delete
/// anyway (fake-gcs-server and MinIO do; docs/s3-servers.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteKey {
    /// The key.
    pub key: String,
    /// The version it must still be at.
    pub version: Option<ObjectVersion>,
    /// `version` names one stored version to delete for good
    /// ([`VersionStore::delete_version`]: GCS `generation=`, S3's `VersionId`
    /// element), current or not, rather than the current object pinned
    /// to it: what `rm --all-versions` sends.
    pub exact: bool,
}

impl DeleteKey {
    /// `key`, at whatever version is there.
    pub fn any(key: impl Into<String>) -> DeleteKey {
        DeleteKey {
            key: key.into(),
            version: None,
            exact: false,
        }
    }
}

/// Finds the store serving a location: what a batch of actions over
/// several schemes is given (the CLI and the Python package build their
/// stores once per scheme).
pub type StoreFor =
    std::sync::Arc<dyn Fn(&crate::Location) -> Result<std::sync::Arc<dyn Store>> + Send + Sync>;
