//! `shoal mb`: create a bucket.

use crate::args::MbArgs;
use crate::config::Context;
use crate::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: MbArgs) -> CmdResult {
    let loc = super::parse(&a.url)?;
    if loc.is_local() {
        return Err(Failure::Usage(format!(
            "mb {}: needs gs://BUCKET or s3://BUCKET",
            a.url
        )));
    }
    if !loc.key.is_empty() {
        return Err(Failure::Usage(format!(
            "mb {}: a bucket URL has no key (write {}{})",
            a.url,
            loc.scheme.prefix(),
            loc.bucket
        )));
    }
    let store = ctx.store(&loc)?;
    (store.create_bucket(&loc.bucket))
        .await
        .map_err(|e| e.with_url(loc.to_string()))?;
    if !ctx.quiet {
        eprintln!("Created {}{}", loc.scheme.prefix(), loc.bucket);
    }
    Ok(())
}
