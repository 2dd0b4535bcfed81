//! `sync --checksum`: whether two entries of the same size hold the same
//! bytes.
//!
//! Stores keep different checksums: GCS a CRC32C (and an MD5 unless
//! composed), shoal's S3 uploads a CRC32C, boto3 and the AWS CLI a CRC32
//! (or a composite CRC32 of the parts, for multipart uploads), AWS a
//! CRC64NVME on new objects, and older tools leave only an MD5 ETag.
//! Comparing CRC32C alone made every object without one "differ", so a
//! sync of a bucket boto3 wrote copied everything again on every run.
//!
//! So each side says what it has (a listing, else a HEAD: S3 listings
//! carry no checksum), and a local file is checked as a download would be
//! against whichever checksum [`crate::verify`] expects of the object.
//! Two store objects compare only by a checksum both have; when they
//! share none, the caller falls back to size and time.

use std::path::{Path, PathBuf};

use shoal_core::{ErrorKind, Location, ObjectMeta, Op, Result};

use crate::rate::Rates;
use crate::tree::Entry;
use crate::verify::{Expected, Received, Verified, read_back};
use shoal_core::StoreFor;

/// What one side can say about its bytes.
// One per compared pair, short-lived: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Side {
    /// A local file: any checksum, computed on demand.
    Local(PathBuf),
    /// A store object's checksums.
    Stored(ObjectMeta),
}

/// True or false when a checksum both sides can give says so; None when
/// they share none (two stores keeping different ones).
pub(crate) async fn same_bytes(
    a: &Entry,
    b: &Entry,
    store_of: &StoreFor,
    rates: &Rates,
) -> Result<Option<bool>> {
    let sa = side(a, store_of, rates).await?;
    let sb = side(b, store_of, rates).await?;
    match (sa, sb) {
        (Side::Local(p), Side::Local(q)) => {
            let url_p = p.display().to_string();
            let url_q = q.display().to_string();
            Ok(Some(
                crc32c_of(&p, &url_p).await? == crc32c_of(&q, &url_q).await?,
            ))
        }
        (Side::Stored(m), Side::Stored(n)) => Ok(m.checksums.same_content(&n.checksums)),
        (Side::Local(p), Side::Stored(m)) => file_matches(p, &m, &b.src, store_of, rates).await,
        (Side::Stored(m), Side::Local(p)) => file_matches(p, &m, &a.src, store_of, rates).await,
    }
}

/// An entry's side: a local path, or its checksums from the listing, else
/// from a HEAD.
async fn side(e: &Entry, store_of: &StoreFor, rates: &Rates) -> Result<Side> {
    if e.src.is_local() {
        return Ok(Side::Local(PathBuf::from(&e.src.key)));
    }
    let m = &e.meta;
    if !m.checksums.is_empty() {
        return Ok(Side::Stored(m.clone()));
    }
    let store = store_of(&e.src)?;
    rates.request().await;
    let head = (store.head(&e.src.bucket, &e.src.key))
        .await
        .map_err(|err| err.with_url(e.src.to_string()).with_op(Op::Read))?;
    Ok(Side::Stored(head))
}

/// A local file against a store object's strongest checksum: the same
/// check a download makes ([`Expected::check_file`]), with the file read for
/// whichever the object has (its part list asked for a composite one).
async fn file_matches(
    path: PathBuf,
    m: &ObjectMeta,
    loc: &Location,
    store_of: &StoreFor,
    rates: &Rates,
) -> Result<Option<bool>> {
    let url = path.display().to_string();
    let expected = Expected::learn(&store_of(loc)?, loc, m, Op::Read, rates).await?;
    // The CRC32C is read here, with crc-fast; anything else is read back
    // by the check.
    let got = Received {
        crc32c: match expected {
            Expected::Crc32c(_) => crc32c_of(&path, &url).await?,
            _ => 0,
        },
        ..Default::default()
    };
    match expected.check_file(got, &path, &url, Op::Read, "").await {
        Ok(Verified::SizeOnly) => Ok(None),
        Ok(_) => Ok(Some(true)),
        Err(e) if e.kind() == ErrorKind::Integrity => Ok(Some(false)),
        Err(e) => Err(e),
    }
}

async fn crc32c_of(path: &Path, url: &str) -> Result<u32> {
    read_back(path, url, Op::Read, 0u32, |c, b| {
        *c = shoal_core::checksum::crc32c_append(*c, b)
    })
    .await
}
