//! `shoal mb`: create a bucket.

use shoal_core::{Lack, Scheme, need};

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
            loc.prefix(),
            loc.bucket
        )));
    }
    if let Some(why) = bad_bucket_name(loc.scheme, &loc.bucket) {
        return Err(Failure::Usage(format!(
            "mb {}: '{}' is not a valid bucket name: {why}",
            a.url, loc.bucket
        )));
    }
    let store = ctx.store(&loc)?;
    let made = match need(store.buckets(), Lack::CreateBucket, &loc.bucket, "") {
        Ok(b) => b.create_bucket(&loc.bucket).await,
        Err(e) => Err(e),
    };
    made.map_err(|e| e.with_url(loc.to_string()))?;
    let url = format!("{}{}", loc.prefix(), loc.bucket);
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

/// Why `name` cannot be a bucket of `scheme`, by that store's rules
/// (S3: 3 to 63 of lowercase letters, digits, '-' and '.', no IP
/// address, no `xn--` or `-s3alias`; GCS: also '_', up to 222 with dots,
/// each dotted part at most 63, no `goog` prefix): checked before the
/// request, so a bad name is not reported as a missing project or a
/// permission problem.
fn bad_bucket_name(scheme: Scheme, name: &str) -> Option<&'static str> {
    let s3 = scheme == Scheme::S3;
    let ok_char = |c: char| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.') || (!s3 && c == '_')
    };
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let max = if s3 || !name.contains('.') { 63 } else { 222 };
    if name.len() < 3 || name.len() > max {
        Some(if s3 {
            "an S3 bucket name is 3 to 63 characters"
        } else {
            "a GCS bucket name is 3 to 63 characters (222 with dots)"
        })
    } else if !name.chars().all(ok_char) {
        Some(if s3 {
            "S3 allows only lowercase letters, digits, '-' and '.' (no '_', no uppercase)"
        } else {
            "GCS allows only lowercase letters, digits, '-', '_' and '.'"
        })
    } else if !edge(name.chars().next()) || !edge(name.chars().next_back()) {
        Some("it must start and end with a letter or digit")
    } else if name.contains("..") {
        Some("it must not contain '..'")
    } else if name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok()) {
        Some("it must not look like an IP address")
    } else if s3
        && (name.starts_with("xn--")
            || name.ends_with("-s3alias")
            || name.contains(".-")
            || name.contains("-."))
    {
        Some("S3 reserves names starting 'xn--' or ending '-s3alias', and refuses '.-' and '-.'")
    } else if !s3 && (name.starts_with("goog") || name.split('.').any(|p| p.len() > 63)) {
        Some("GCS refuses names starting 'goog' and dotted parts over 63 characters")
    } else {
        None
    }
}
