//! Presigned URLs (`shoal.presign`, fsspec's `sign`): what `shoal presign`
//! prints. S3: SigV4 in the query string; GCS: a V4 signed URL, which
//! needs a service-account key. Signing is local: nothing is sent, and the
//! object need not exist yet.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;
use shoal_core::{
    Error, Lack, Location, MAX_PRESIGN_EXPIRY, Op, Presign, PresignMethod, PresignStyle,
};

use crate::errors::{IntoPyResult, to_py};
use crate::list::object;
use crate::runtime::blocking_and_async;
use crate::session::Session;

/// How the URL is made beyond its method and life, as Python passes it
/// (all optional): signed headers and query parameters, the URL's shape
/// (`virtual_hosted`, `bucket_bound_host`), the `endpoint` it names, and
/// the signing time in Unix seconds.
#[derive(Default, FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct Shape {
    headers: Option<Vec<(String, String)>>,
    query: Option<Vec<(String, String)>>,
    virtual_hosted: Option<bool>,
    bucket_bound_host: Option<String>,
    endpoint: Option<String>,
    signed_at: Option<f64>,
}

/// `expires` seconds and `method` as the CLI's `--expires` and `--method`
/// take them (1 s to 7 days; GET, PUT, HEAD, DELETE or POST), with
/// `shape`'s options; an InvalidInputError (a ValueError) naming the URL
/// otherwise.
fn checked(url: &str, expires: i64, method: &str, shape: Shape) -> shoal_core::Result<Presign> {
    let max = MAX_PRESIGN_EXPIRY.as_secs();
    if !(1..=max as i64).contains(&expires) {
        return Err(Error::invalid(
            Op::Presign,
            url,
            format!("expires={expires}: a presigned URL lives 1 s to 7 days ({max} s)"),
        ));
    }
    let Some(method) = PresignMethod::parse(method) else {
        return Err(Error::invalid(
            Op::Presign,
            url,
            format!(
                "method={method:?}: a presigned URL allows {}",
                PresignMethod::NAMES
            ),
        ));
    };
    let style = match (
        shape.bucket_bound_host,
        shape.virtual_hosted.unwrap_or(false),
    ) {
        (Some(_), true) => {
            return Err(Error::invalid(
                Op::Presign,
                url,
                "a URL names its bucket by a bucket-bound host or virtual-hosted style, not both",
            ));
        }
        (Some(host), false) => PresignStyle::BucketBound(host),
        (None, true) => PresignStyle::VirtualHosted,
        (None, false) => PresignStyle::Path,
    };
    let time = match shape.signed_at {
        None => None,
        Some(t) if t.is_finite() && t >= 0.0 => {
            Some(std::time::UNIX_EPOCH + Duration::from_secs_f64(t))
        }
        Some(t) => {
            return Err(Error::invalid(
                Op::Presign,
                url,
                format!("signed_at={t}: a time after 1970 in Unix seconds"),
            ));
        }
    };
    Ok(Presign {
        headers: shape.headers.unwrap_or_default(),
        query: shape.query.unwrap_or_default(),
        style,
        endpoint: shape.endpoint,
        time,
        ..Presign::new(method, Duration::from_secs(expires as u64))
    })
}

fn presign_impl(
    s: &Session,
    url: String,
    expires: i64,
    method: String,
    shape: Option<Shape>,
) -> impl Future<Output = PyResult<String>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = bucket_or_object(&url).py()?;
        if shoal_list::has_wildcard(&loc.key) {
            // A glob would be signed as a literal name no one meant.
            return Err(to_py(Error::invalid(
                Op::Presign,
                &url,
                "signs one object; a glob names many",
            )));
        }
        let p = checked(&url, expires, &method, shape.unwrap_or_default()).py()?;
        if loc.key.is_empty() && p.method != PresignMethod::Get {
            // On S3 a DELETE of the bucket's URL deletes the bucket: a key
            // left out by mistake must not make that URL.
            return Err(to_py(Error::invalid(
                Op::Presign,
                &url,
                "names a bucket: a bucket's URL is signed for GET only (a listing); name an object",
            )));
        }
        let store = stores.store(&loc).py()?;
        let signed = match shoal_core::need(store.signer(), Lack::Presign, &loc.bucket, &loc.key) {
            Ok(s) => s.presign(&loc.bucket, &loc.key, &p).await,
            Err(e) => Err(e),
        };
        signed.map_err(|e| to_py(e.with_url(&url)))
    }
}

/// An object, or a bucket (`gs://bucket`: a URL for listing it).
fn bucket_or_object(url: &str) -> shoal_core::Result<Location> {
    let loc = Location::parse(url)?;
    if !loc.is_local() && !loc.bucket.is_empty() && loc.key.is_empty() {
        return Ok(loc);
    }
    object(Op::Presign, url)
}

blocking_and_async! {
    /// A URL anyone can use without credentials for `expires` seconds
    /// (1 s to 7 days): `method` "GET" reads the object, "PUT" writes it
    /// with one request (also HEAD, DELETE, POST). `shape`: a dict of
    /// headers, query, virtual_hosted, bucket_bound_host, endpoint,
    /// signed_at (see `shoal.presign`). GCS needs a service-account key
    /// (GOOGLE_APPLICATION_CREDENTIALS) to sign with.
    #[pyo3(signature = (session, url, *, expires=3600, method="GET".to_owned(), shape=None))]
    fn presign / presign_async(url: String, expires: i64, method: String, shape: Option<Shape>) -> String = presign_impl;
}
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(presign, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(presign_async, m)?)?;
    Ok(())
}
