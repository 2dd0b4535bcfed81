//! `shoal rb URL`: remove a bucket.
//!
//! Only a bucket named exactly (`gs://B`, never `gs://B/prefix` or a glob)
//! is removed. An empty one goes at once; a non-empty one is refused, with
//! the count of objects one list page saw, unless `--force`, which deletes
//! every object the way `rm -r` does (streamed as listed, in parallel) and
//! then the bucket. A versioned bucket keeps noncurrent versions and
//! delete markers after that: they are listed (S3 ListObjectVersions, GCS
//! `versions=true`) and each deleted by its own version, in batches, and
//! then the bucket goes.

use shoal_core::{ErrorKind, Lack, ListRequest, Op, Projection, need};

use crate::args::RbArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: RbArgs) -> CmdResult {
    let loc = super::parse(&a.url)?;
    if loc.is_local() {
        return Err(Failure::Usage(format!(
            "rb {}: needs gs://BUCKET or s3://BUCKET",
            a.url
        )));
    }
    if !loc.key.is_empty() {
        return Err(Failure::Usage(format!(
            "rb {}: removes a whole bucket, named exactly (write {}{}); to delete objects below a prefix use rm -r",
            a.url,
            loc.prefix(),
            loc.bucket
        )));
    }
    let store = ctx.store(&loc)?;
    let bucket_url = format!("{}{}", loc.prefix(), loc.bucket);
    if a.force {
        let (mut deleted, mut failed) =
            super::rm::delete_below(ctx, &loc.with_key(""), false).await?;
        if failed == 0 {
            // A versioned bucket still holds noncurrent versions and
            // delete markers (the deletes above made markers): each goes
            // by its own version, in batches.
            (deleted, failed) = super::rm::delete_versions_below(ctx, &loc.with_key(""))
                .await
                .map(|(d, f)| (d + deleted, f))?;
        }
        if failed > 0 {
            return Err(Failure::Failed(format!(
                "remove bucket {bucket_url}: {failed} objects could not be deleted ({deleted} were); the bucket is kept"
            )));
        }
    } else {
        let probe = ListRequest {
            projection: Projection::NameOnly,
            ..Default::default()
        };
        let page = (store.list_page(&loc.bucket, &probe))
            .await
            .map_err(|e| e.with_url(bucket_url.clone()))?;
        let n = page.objects.len();
        if n > 0 {
            let count = if page.next_page_token.is_some() {
                format!("at least {n} objects")
            } else if n == 1 {
                "1 object".to_owned()
            } else {
                format!("{n} objects")
            };
            return Err(Failure::Failed(format!(
                "remove bucket {bucket_url}: not empty (its first list page holds {count}); use rb --force to delete them and the bucket"
            )));
        }
    }
    let removed = match need(store.buckets(), Lack::DeleteBucket, &loc.bucket, "") {
        Ok(b) => b.delete_bucket(&loc.bucket).await,
        Err(e) => Err(e),
    };
    match removed {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(shoal_core::Error::new(
                ErrorKind::NotFound,
                Op::DeleteBucket,
                bucket_url,
                "no such bucket",
            )
            .into());
        }
        Err(e) => return Err(e.with_url(bucket_url).into()),
    }
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"action": "remove bucket", "url": bucket_url})
        );
    } else if !ctx.quiet {
        eprintln!("Removed bucket {bucket_url}");
    }
    Ok(())
}
