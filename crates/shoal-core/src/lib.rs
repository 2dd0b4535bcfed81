//! The vocabulary every other shoal crate speaks.
//!
//! shoal moves bytes between Google Cloud Storage, S3-compatible stores and
//! local files. The fast paths (sliced downloads, parallel listing, dataset
//! streaming) are written once, in terms of the small [`Store`] trait below,
//! and each backend implements only the primitives: one list request, one
//! ranged GET, one PUT, the multipart steps. Anything a backend can or cannot
//! do is declared in [`Capabilities`], never guessed from an endpoint name.
//!
//! Keys are opaque strings: `a//b`, a trailing `/`, `..`, spaces and `%`
//! travel unchanged. The one place a key becomes a local path is
//! [`local_path::key_to_relative_path`], and that is where it is checked.
#![warn(missing_docs, unreachable_pub)]

pub mod checksum;
pub mod cleanup;
pub mod encryption;
pub mod error;
pub mod file_time;
pub mod local_path;
#[cfg(any(test, feature = "memory"))]
pub mod memory;
pub mod meta;
pub mod paginate;
pub mod posix;
pub mod resume;
pub mod retry;
pub mod sent;
pub mod served;
pub mod skip;
pub mod state;
pub mod store;
pub mod url;
pub mod walk;
pub mod workfile;
pub mod xml;

pub use error::{Error, ErrorKind, Op, Result};
pub use meta::{
    ByteRange, ListPage, ListRequest, ObjectMeta, ObjectVersion, Projection, VersionState,
};
pub use skip::{Seen, Skip};
pub use store::{
    Assemble, BoxByteStream, BucketInfo, BucketStore, Capabilities, CopyRequest, DeleteKey,
    Deleted, GetResponse, Lack, ListedPart, MAX_PRESIGN_EXPIRY, MultipartStore, MultipartUpload,
    PartInfo, PendingUpload, Presign, PresignMethod, PresignStyle, PutOptions, Signer, Store,
    StoreFor, StoredPart, UploadMethod, VersionStore, check_presign_expiry, need,
};
pub use url::{Location, Scheme, StoreName};
