//! `shoal stat`: an object's metadata.

use shoal_core::checksum::{crc32c_to_base64, hex};
use shoal_core::error::escape_controls;
use shoal_core::{Error, ObjectMeta, ObjectVersion, Op};

use crate::args::StatArgs;
use crate::config::Context;
use crate::failure::CmdResult;
use crate::output::{meta_json, rfc3339};

pub(crate) async fn run(ctx: &Context, a: StatArgs) -> CmdResult {
    let loc = super::require_object(&a.url, "stat")?;
    if a.version_id.is_some() && loc.is_local() {
        return Err(crate::failure::Failure::Usage(format!(
            "stat --version-id: {} is a local path; local files have no versions",
            loc.key
        )));
    }
    let meta = if loc.is_local() {
        let md = std::fs::metadata(&loc.key).map_err(|e| Error::io(Op::Stat, &loc.key, e))?;
        ObjectMeta {
            key: loc.key.clone(),
            size: md.len(),
            updated_ns: md
                .modified()
                .ok()
                .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i128),
            ..Default::default()
        }
    } else {
        if let Some(v) = &a.version_id {
            super::head_version(ctx, "stat", &loc, v).await?
        } else {
            let store = ctx.store(&loc)?;
            (store.head(&loc.bucket, &loc.key))
                .await
                .map_err(|e| e.with_url(loc.to_string()))?
        }
    };
    let url = loc.to_string();
    if a.json {
        println!("{}", meta_json(&url, &meta));
        return Ok(());
    }
    println!("{url}:");
    println!("    Size:             {}", meta.size);
    println!("    Updated:          {}", rfc3339(meta.updated_ns));
    if let Some(c) = meta.checksums.crc32c() {
        println!("    CRC32C:           {} ({c:08x})", crc32c_to_base64(c));
    }
    if let Some(c) = meta.checksums.other_crc() {
        println!("    {:<18}{c}", format!("{}:", c.kind().name()));
    }
    if let Some(c) = meta.checksums.composite() {
        let name = c.kind.name();
        let label = format!("{name}:");
        let of = match c.parts {
            1 => format!("its one part's {name}"),
            n => format!("its {n} parts' {name}s"),
        };
        println!("    {label:<18}{c} (composite: the {name} of {of})");
    }
    if let Some(m) = meta.checksums.md5() {
        println!("    MD5:              {}", hex(&m));
    }
    match &meta.version {
        Some(ObjectVersion::Generation(g)) => println!("    Generation:       {g}"),
        Some(ObjectVersion::ETag(e)) => println!("    ETag:             {e}"),
        Some(ObjectVersion::VersionId(v)) => println!("    Version id:       {v}"),
        None => {}
    }
    if let Some(sc) = &meta.storage_class {
        println!("    Storage class:    {sc}");
    }
    // Values are the server's: control characters are shown escaped.
    let texts = [
        ("Content-Encoding:", &meta.content_encoding),
        ("Content-Type:", &meta.content_type),
        ("Cache-Control:", &meta.cache_control),
        ("Content-Disposition:", &meta.content_disposition),
    ];
    for (label, value) in texts {
        if let Some(v) = value {
            println!("    {label:<17} {}", escape_controls(v));
        }
    }
    if !meta.metadata.is_empty() {
        println!("    Metadata:");
        for (k, v) in &meta.metadata {
            println!("        {}: {}", escape_controls(k), escape_controls(v));
        }
    }
    Ok(())
}
