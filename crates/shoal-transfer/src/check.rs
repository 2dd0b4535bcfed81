//! `check SRC DST`: whether two trees (local folders, gs:// or s3://
//! prefixes, any pair) hold the same files, without copying anything.
//!
//! The two listings are merged exactly as `sync` merges them
//! ([`crate::sync::merge_listings`]: same names, same order checks, same
//! filters applied by the caller), so `check` says what a `sync` would
//! find. Each name both sides have is compared by size, then (unless
//! `size_only`) by checksum as `sync --checksum` compares
//! ([`crate::same`]): a local file is read for whichever checksum the
//! object keeps, two objects by one both keep. Where they keep none in
//! common (an S3 object with an MD5 ETag only against a composed GCS
//! object with a CRC32C only), one side is read for the checksum the
//! other keeps, or both read when neither keeps one: a pair is never
//! called the same on size alone unless asked.

use futures::stream::{BoxStream, StreamExt};
use shoal_core::{Location, ObjectMeta, Op, Result, Seen, StoreFor};

use crate::hash::{Sums, hash_file, read_sums};
use crate::rate::Rates;
use crate::same::same_bytes;
use crate::sync::{Matched, merge_listings};
use crate::tree::{Entry, Listed};

/// What `check` found of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Both sides hold the same bytes (or the same size, with `size_only`).
    Same(String),
    /// Both have it and it differs; why.
    Differs(String, String),
    /// Only the source has it.
    MissingFromDestination(String),
    /// Only the destination has it.
    MissingFromSource(String),
}

impl Verdict {
    /// The name below the two roots.
    pub fn name(&self) -> &str {
        match self {
            Verdict::Same(n)
            | Verdict::Differs(n, _)
            | Verdict::MissingFromDestination(n)
            | Verdict::MissingFromSource(n) => n,
        }
    }
}

/// Compares every name of the two listings (entries relative to the two
/// roots, in key order, as `sync` lists them), `at_once` comparisons in
/// flight; verdicts in name order, problems as `Err` items, what a
/// listing skipped (a local walk's links) as skips.
pub fn check_trees(
    src: BoxStream<'static, Listed>,
    dst: BoxStream<'static, Listed>,
    dst_root: Location,
    size_only: bool,
    store_for: StoreFor,
    rates: Rates,
    at_once: usize,
) -> BoxStream<'static, Result<Seen<Verdict>>> {
    merge_listings(src, dst, dst_root)
        .map(move |m| {
            let (store_for, rates) = (store_for.clone(), rates.clone());
            async move {
                let v = match m? {
                    Seen::Skipped(s) => return Ok(Seen::Skipped(s)),
                    Seen::Item(Matched::SourceOnly(e)) => Verdict::MissingFromDestination(e.rel),
                    Seen::Item(Matched::DestinationOnly(e)) => Verdict::MissingFromSource(e.rel),
                    Seen::Item(Matched::Both(a, b)) => {
                        compare(a, b, size_only, &store_for, &rates).await?
                    }
                };
                Ok(Seen::Item(v))
            }
        })
        .buffered(at_once.max(1))
        .boxed()
}

async fn compare(
    a: Entry,
    b: Entry,
    size_only: bool,
    store_for: &StoreFor,
    rates: &Rates,
) -> Result<Verdict> {
    if a.meta.size != b.meta.size {
        let why = format!("size {} here, {} there", a.meta.size, b.meta.size);
        return Ok(Verdict::Differs(a.rel, why));
    }
    if size_only {
        return Ok(Verdict::Same(a.rel));
    }
    let same = match same_bytes(&a, &b, store_for, rates).await? {
        Some(same) => same,
        None => read_and_compare(&a, &b, store_for, rates).await?,
    };
    Ok(if same {
        Verdict::Same(a.rel)
    } else {
        Verdict::Differs(a.rel, "content (checksums differ)".into())
    })
}

/// Two sides that keep no checksum in common: the side that keeps one
/// stays as it is, the other is read for it; when neither keeps one, both
/// are read.
async fn read_and_compare(
    a: &Entry,
    b: &Entry,
    store_for: &StoreFor,
    rates: &Rates,
) -> Result<bool> {
    let (ka, kb) = (
        kept(a, store_for, rates).await?,
        kept(b, store_for, rates).await?,
    );
    let (kept_side, read_side) = match (&ka, &kb) {
        (Some(k), _) => (Some(k.clone()), b),
        (None, Some(k)) => (Some(k.clone()), a),
        (None, None) => (None, b),
    };
    let read = read_entry(read_side, store_for, rates).await?;
    let other = match kept_side {
        Some(k) => k,
        None => read_entry(a, store_for, rates).await?,
    };
    Ok(match (other.crc32c, read.crc32c, other.md5, read.md5) {
        (Some(x), Some(y), _, _) => x == y,
        (_, _, Some(x), Some(y)) => x == y,
        _ => false,
    })
}

/// An object's stored CRC32C or MD5 (from a HEAD when its listing had
/// none); None for a local file or an object that keeps neither.
async fn kept(e: &Entry, store_for: &StoreFor, rates: &Rates) -> Result<Option<Sums>> {
    if e.src.is_local() {
        return Ok(None);
    }
    let m = stored(e, store_for, rates).await?;
    let (crc32c, md5) = (m.checksums.crc32c(), m.checksums.md5());
    Ok((crc32c.is_some() || md5.is_some()).then(|| Sums {
        url: e.src.to_string(),
        size: m.size,
        crc32c,
        md5,
        computed: false,
    }))
}

async fn stored(e: &Entry, store_for: &StoreFor, rates: &Rates) -> Result<ObjectMeta> {
    if !e.meta.checksums.is_empty() {
        return Ok(e.meta.clone());
    }
    rates.request().await;
    (store_for(&e.src)?.head(&e.src.bucket, &e.src.key))
        .await
        .map_err(|err| err.with_url(e.src.to_string()).with_op(Op::Stat))
}

/// Both sums of an entry's bytes, read.
async fn read_entry(e: &Entry, store_for: &StoreFor, rates: &Rates) -> Result<Sums> {
    if e.src.is_local() {
        return hash_file(&e.src.key).await;
    }
    read_sums(&store_for(&e.src)?, &e.src, &e.meta, rates).await
}
