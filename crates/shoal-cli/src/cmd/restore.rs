//! `shoal restore URL --version-id V` (or `URL#GENERATION`, as gcloud
//! writes it): one stored version made the live object again, by
//! [`shoal_transfer::ops::versions::restore`], which decides how (a GCS
//! soft-deleted generation through the store's restore, any other version
//! copied onto its key) and that a live object is replaced only with
//! `--allow-overwrite`.

use shoal_transfer::ops::versions::Restored;

use crate::args::RestoreArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: RestoreArgs) -> CmdResult {
    let (url, v) = match (&a.version_id, a.url.rsplit_once('#')) {
        (Some(v), _) => (a.url.clone(), v.clone()),
        (None, Some((u, g))) if !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()) => {
            (u.to_owned(), g.to_owned())
        }
        _ => {
            return Err(Failure::Usage(format!(
                "restore {}: which version? give --version-id V or gs://b/k#GENERATION (shoal ls --soft-deleted or ls -a lists them)",
                a.url
            )));
        }
    };
    let loc = super::require_object(&url, "restore")?;
    super::version_of("restore", &loc, &v)?;
    let store_for = ctx.store_for(&[&loc])?;
    let run = ctx.run(ctx.transfer.clone());
    let done = shoal_transfer::ops::versions::restore(
        &loc,
        &v,
        &store_for,
        &run,
        &ctx.retry,
        a.allow_overwrite,
    )
    .await?;
    let how = match done {
        Restored::SoftDeleted => "soft-deleted generation".to_owned(),
        Restored::Copied(n) => format!("version, {n} bytes copied"),
    };
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"action": "restore", "url": url, "version": v, "soft_deleted": done == Restored::SoftDeleted})
        );
    } else if !ctx.quiet {
        eprintln!(
            "Restored {}#{v} ({how})",
            shoal_core::error::escape_controls(&url)
        );
    }
    Ok(())
}
