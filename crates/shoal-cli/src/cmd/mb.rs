//! `shoal mb`: create a bucket.

use crate::args::MbArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

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
    if let Some(why) = bad_bucket_name(&loc.bucket) {
        return Err(Failure::Usage(format!(
            "mb {}: '{}' is not a valid bucket name: {why}",
            a.url, loc.bucket
        )));
    }
    let store = ctx.store(&loc)?;
    (store.create_bucket(&loc.bucket))
        .await
        .map_err(|e| e.with_url(loc.to_string()))?;
    let url = format!("{}{}", loc.scheme.prefix(), loc.bucket);
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"action": "create_bucket", "url": url})
        );
    } else if !ctx.quiet {
        eprintln!("Created {url}");
    }
    Ok(())
}

/// Why `name` cannot be a bucket, by the rules GCS and S3 share (S3 is
/// stricter on `_`, GCS allows longer dotted names; the server has the
/// last word on those): checked before the request, so a bad name is not
/// reported as a missing project or a permission problem.
fn bad_bucket_name(name: &str) -> Option<&'static str> {
    let ok_char =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.');
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.len() < 3 || name.len() > 222 {
        Some("it must be 3 to 63 characters (222 with dots on GCS)")
    } else if !name.chars().all(ok_char) {
        Some("only lowercase letters, digits, '-', '_' and '.' are allowed")
    } else if !edge(name.chars().next()) || !edge(name.chars().next_back()) {
        Some("it must start and end with a letter or digit")
    } else if name.contains("..") {
        Some("it must not contain '..'")
    } else {
        None
    }
}
