//! One module per verb.

pub(crate) mod batch;
pub(crate) mod bench;
pub(crate) mod cat;
pub(crate) mod check;
pub(crate) mod cp;
pub(crate) mod du;
pub(crate) mod hash;
pub(crate) mod ls;
pub(crate) mod mb;
mod outcome;
pub(crate) mod presign;
pub(crate) mod rb;
pub(crate) mod restore;
pub(crate) mod rm;
pub(crate) mod run;
pub(crate) mod stat;
mod stdio;
pub(crate) mod sync;
pub(crate) mod update;
pub(crate) mod uploads;

use shoal_core::Location;

use crate::failure::Failure;

/// Parses a URL argument; a bad one is a usage error.
pub(crate) fn parse(url: &str) -> Result<Location, Failure> {
    Location::parse(url).map_err(|e| Failure::Usage(e.to_string()))
}

/// The stored version `--version-id V` names on `loc`
/// ([`shoal_transfer::ops::versions::parse`]); a usage error otherwise.
pub(crate) fn version_of(
    verb: &str,
    loc: &Location,
    v: &str,
) -> Result<shoal_core::ObjectVersion, Failure> {
    (shoal_transfer::ops::versions::parse(shoal_core::Op::Stat, loc, v))
        .map_err(|e| Failure::Usage(format!("{verb} --version-id {v}: {loc}: {}", e.message())))
}

/// One stored version's metadata ([`shoal_transfer::ops::versions::head`]).
pub(crate) async fn head_version(
    ctx: &crate::config::Context,
    verb: &str,
    loc: &Location,
    v: &str,
) -> Result<shoal_core::ObjectMeta, Failure> {
    version_of(verb, loc, v)?;
    let store = ctx.store(loc)?;
    Ok(shoal_transfer::ops::versions::head(store.as_ref(), loc, v).await?)
}

/// Requires a URL that is not only a bucket (for verbs that act on one
/// object): `shoal_list::names_bucket`, the one rule.
pub(crate) fn require_object(url: &str, verb: &str) -> Result<Location, Failure> {
    let loc = parse(url)?;
    if shoal_list::names_bucket(&loc) {
        return Err(Failure::Usage(format!(
            "{verb} {url}: needs an object, not a bucket (write {}{}/KEY)",
            loc.prefix(),
            loc.bucket
        )));
    }
    Ok(loc)
}
