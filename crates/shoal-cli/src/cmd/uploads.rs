//! `shoal uploads URL [--abort [--older-than AGE]]`: the multipart uploads
//! in progress below a bucket or prefix (what a killed run left, resumable
//! by running it again; aws s3api list-multipart-uploads), and, with
//! `--abort`, aborting the ones started at least `--older-than` ago
//! (default 1h, so an upload being sent now is not cut off). The engine
//! decides which ([`shoal_transfer::ops::uploads`]); this prints.

use shoal_core::PendingUpload;

use crate::args::UploadsArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

fn started(u: &PendingUpload) -> String {
    crate::output::rfc3339(u.initiated_ns)
}

fn line(ctx: &Context, action: &str, url: &str, u: &PendingUpload) {
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({
                "action": action, "url": format!("{url}{}", u.key),
                "key": u.key, "upload_id": u.upload_id,
                "initiated_unix_ns": u.initiated_ns.map(|n| n.to_string()),
            })
        );
    } else {
        println!(
            "{}  {}  {}",
            started(u),
            u.upload_id,
            shoal_core::error::escape_controls(&u.key)
        );
    }
}

/// `--older-than` as it is typed: `1h`, `90m`, `45s`.
fn age(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".to_owned(),
        _ if s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        _ if s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

pub(crate) async fn run(ctx: &Context, a: UploadsArgs) -> CmdResult {
    let loc = super::parse(&a.url)?;
    if loc.is_local() {
        return Err(Failure::Usage(format!(
            "uploads {}: needs s3://BUCKET[/PREFIX]",
            a.url
        )));
    }
    let store = ctx.store(&loc)?;
    let base = loc.with_key(String::new()).to_string();
    let base = if base.ends_with('/') {
        base
    } else {
        format!("{base}/")
    };
    if !a.abort {
        let listed = shoal_transfer::ops::uploads::list(&store, &loc).await?;
        for u in &listed {
            line(ctx, "upload", &base, u);
        }
        if ctx.json {
            println!(
                "{}",
                serde_json::json!({"summary": {"uploads": listed.len()}})
            );
        } else if !ctx.quiet && listed.is_empty() {
            eprintln!("No uploads in progress below {}", a.url);
        }
        return Ok(());
    }
    let done = shoal_transfer::ops::uploads::abort(&store, &loc, a.older_than).await?;
    for u in &done.aborted {
        line(ctx, "abort", &base, u);
    }
    for (u, e) in &done.failed {
        eprintln!("shoal: abort {base}{} (upload {}): {e}", u.key, u.upload_id);
    }
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"summary": {"aborted": done.aborted.len(), "younger": done.young.len(), "failed": done.failed.len()}})
        );
    } else if !ctx.quiet {
        eprintln!(
            "Aborted {} upload(s); {} younger than {} left alone",
            done.aborted.len(),
            done.young.len(),
            age(a.older_than)
        );
    }
    if done.failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}
