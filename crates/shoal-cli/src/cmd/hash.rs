//! `shoal hash FILE|URL...`: CRC32C and MD5, printed as gcloud prints
//! them (base64, or `--hex`), one block or JSON line per argument, in the
//! order given. The engine computes or asks the store
//! (`shoal_transfer::ops::hash`); this only prints. A sum the store does not
//! keep is printed as missing, with why, never made up.

use futures::StreamExt;
use shoal_core::checksum::{crc32c_to_base64, hex, md5_to_base64};
use shoal_transfer::ops::hash::{Sums, hash_all};

use crate::args::HashArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: HashArgs) -> CmdResult {
    let mut locs = Vec::with_capacity(a.urls.len());
    for u in &a.urls {
        locs.push(super::require_object(u, "hash")?);
    }
    let refs: Vec<&shoal_core::Location> = locs.iter().collect();
    let store_for = ctx.store_for(&refs)?;
    let at_once = ctx.transfer.workers.max(1);
    let mut sums = hash_all(locs, a.compute, store_for, ctx.rates.clone(), at_once);
    let mut failed = false;
    while let Some(s) = sums.next().await {
        match s {
            Ok(s) if a.json => println!("{}", json(&s, a.hex)),
            Ok(s) => print_text(&s, a.hex),
            Err(e) => {
                failed = true;
                eprintln!("shoal: {e}");
            }
        }
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

fn crc_text(c: u32, as_hex: bool) -> String {
    if as_hex {
        format!("{c:08x}")
    } else {
        crc32c_to_base64(c)
    }
}

fn md5_text(m: &[u8; 16], as_hex: bool) -> String {
    if as_hex { hex(m) } else { md5_to_base64(m) }
}

/// Why an object has no MD5: GCS composed objects and S3 multipart or
/// encrypted uploads keep none.
const NO_MD5: &str = "none kept by the store (a composite, multipart or encrypted upload); --compute reads the object";
const NO_CRC: &str = "none kept by the store; --compute reads the object";

fn print_text(s: &Sums, as_hex: bool) {
    let enc = if as_hex { "hex" } else { "base64" };
    println!("{}:", s.url);
    println!("    Size:                {}", s.size);
    match s.crc32c {
        Some(c) => println!("    Hash (crc32c, {enc}): {}", crc_text(c, as_hex)),
        None => println!("    Hash (crc32c):       {NO_CRC}"),
    }
    match &s.md5 {
        Some(m) => println!("    Hash (md5, {enc}):    {}", md5_text(m, as_hex)),
        None => println!("    Hash (md5):          {NO_MD5}"),
    }
}

fn json(s: &Sums, as_hex: bool) -> serde_json::Value {
    serde_json::json!({
        "url": s.url,
        "size": s.size,
        "crc32c": s.crc32c.map(|c| crc_text(c, as_hex)),
        "md5": s.md5.as_ref().map(|m| md5_text(m, as_hex)),
        "encoding": if as_hex { "hex" } else { "base64" },
        "computed": s.computed,
    })
}
