//! `shoal.update(url, ...)`: one object's metadata changed on the server
//! by the engine ([`shoal_transfer::ops::update`]), as `shoal update` does.

use std::collections::BTreeMap;
use std::future::Future;

use pyo3::prelude::*;
use shoal_core::{Error, Op};
use shoal_transfer::ops::update::{Change, Outcome};

use crate::errors::IntoPyResult;
use crate::list::object;
use crate::runtime::blocking_and_async;
use crate::session::Session;
use crate::transfer::Stored;

#[allow(clippy::too_many_arguments)] // the Python signature
fn update_impl(
    s: &Session,
    url: String,
    content_type: Option<String>,
    content_encoding: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    remove_metadata: Option<Vec<String>>,
    storage_class: Option<String>,
    acl: Option<String>,
    predefined_acl: Option<String>,
    dry_run: bool,
) -> impl Future<Output = PyResult<String>> + use<> {
    let stores = s.stores.clone();
    let opts = s.transfer_options(None, None);
    async move {
        let loc = object(Op::Update, &url).py()?;
        let stored = Stored {
            content_type,
            content_encoding,
            cache_control,
            content_disposition,
            metadata,
            storage_class,
        };
        let mut put = stored.put_options(Op::Update, &loc, false).py()?;
        let invalid = |m: String| Error::invalid(Op::Update, &url, m);
        put.acl = shoal_transfer::ops::metadata::acl(
            acl.as_deref(),
            predefined_acl.as_deref(),
            loc.scheme,
        )
        .map_err(|m| {
            invalid(
                m.replace("--acl", "acl")
                    .replace("--predefined-acl", "predefined_acl"),
            )
        })
        .py()?;
        let change = Change {
            put,
            remove: remove_metadata.unwrap_or_default().into_iter().collect(),
        };
        change.check().map_err(invalid).py()?;
        let store = stores.store(&loc).py()?;
        let out = shoal_transfer::ops::update::update_current(
            store.as_ref(),
            &loc,
            None,
            &change,
            dry_run,
            opts.part_size,
            opts.workers,
        )
        .await
        .py()?;
        Ok(match out {
            Outcome::Updated(_) => "updated",
            Outcome::Unchanged => "unchanged",
        }
        .to_owned())
    }
}

blocking_and_async! {
    /// Changes one object's type, encoding, cache control, disposition,
    /// custom metadata (added, replaced, `remove_metadata` keys dropped),
    /// storage class or canned ACL on the server, pinned to the version
    /// read; `"updated"` or `"unchanged"` (it already held that).
    #[pyo3(signature = (session, url, *, content_type=None, content_encoding=None, cache_control=None, content_disposition=None, metadata=None, remove_metadata=None, storage_class=None, acl=None, predefined_acl=None, dry_run=false))]
    fn update / update_async(url: String, content_type: Option<String>, content_encoding: Option<String>, cache_control: Option<String>, content_disposition: Option<String>, metadata: Option<BTreeMap<String, String>>, remove_metadata: Option<Vec<String>>, storage_class: Option<String>, acl: Option<String>, predefined_acl: Option<String>, dry_run: bool) -> String = update_impl;
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(update, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(update_async, m)?)?;
    Ok(())
}
