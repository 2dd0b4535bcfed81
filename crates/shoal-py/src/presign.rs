//! Presigned URLs (`shoal.presign`, fsspec's `sign`): what `shoal presign`
//! prints. S3: SigV4 in the query string; GCS: a V4 signed URL, which
//! needs a service-account key. Signing is local: nothing is sent, and the
//! object need not exist yet.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;
use shoal_core::{Error, MAX_PRESIGN_EXPIRY, Op, PresignMethod};

use crate::errors::{IntoPyResult, to_py};
use crate::list::object;
use crate::runtime::blocking_and_async;
use crate::session::Session;

/// `expires` seconds and `method` as the CLI's `--expires` and `--method`
/// take them (1 s to 7 days; GET or PUT); an InvalidInputError (a
/// ValueError) naming the URL otherwise.
fn checked(url: &str, expires: i64, method: &str) -> shoal_core::Result<(Duration, PresignMethod)> {
    let max = MAX_PRESIGN_EXPIRY.as_secs();
    if !(1..=max as i64).contains(&expires) {
        return Err(Error::invalid(
            Op::Presign,
            url,
            format!("expires={expires}: a presigned URL lives 1 s to 7 days ({max} s)"),
        ));
    }
    let method = match method.to_ascii_uppercase().as_str() {
        "GET" => PresignMethod::Get,
        "PUT" => PresignMethod::Put,
        _ => {
            return Err(Error::invalid(
                Op::Presign,
                url,
                format!("method={method:?}: a presigned URL allows 'GET' or 'PUT'"),
            ));
        }
    };
    Ok((Duration::from_secs(expires as u64), method))
}

fn presign_impl(
    s: &Session,
    url: String,
    expires: i64,
    method: String,
) -> impl Future<Output = PyResult<String>> + use<> {
    let stores = s.stores.clone();
    async move {
        let loc = object(Op::Presign, &url).py()?;
        if shoal_list::has_wildcard(&loc.key) {
            // A glob would be signed as a literal name no one meant.
            return Err(to_py(Error::invalid(
                Op::Presign,
                &url,
                "signs one object; a glob names many",
            )));
        }
        let (expires, method) = checked(&url, expires, &method).py()?;
        let store = stores.store(&loc).py()?;
        store
            .presign(method, &loc.bucket, &loc.key, expires)
            .await
            .map_err(|e| to_py(e.with_url(&url)))
    }
}

blocking_and_async! {
    /// A URL anyone can use without credentials for `expires` seconds
    /// (1 s to 7 days): `method` "GET" reads the object, "PUT" writes it
    /// with one request. GCS needs a service-account key
    /// (GOOGLE_APPLICATION_CREDENTIALS) to sign with.
    #[pyo3(signature = (session, url, expires=3600, method="GET".to_owned()))]
    fn presign / presign_async(url: String, expires: i64, method: String) -> String = presign_impl;
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(presign, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(presign_async, m)?)?;
    Ok(())
}
