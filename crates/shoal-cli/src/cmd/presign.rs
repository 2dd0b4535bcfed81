//! `shoal presign URL`: a URL anyone can GET (or, with `--method PUT`,
//! write) without credentials until it expires. S3: SigV4 in the query
//! string; GCS: a V4 signed URL from a service-account key. Signing is
//! local: nothing is sent, and the object need not exist yet.
//!
//! Under an encryption key (`--sse-c-key-file`, `--sse`, a GCS
//! `--encryption-key` CSEK) the store signs the headers a request of ours
//! would carry, and the URL works only when its holder sends them: they
//! are listed on stderr (and under `"headers"` with `--json`), the key's
//! own value masked, since whoever holds the key file can fill it in.

use shoal_core::{Lack, Presign, PresignMethod, need};

use crate::args::{PresignArgs, PresignMethodArg};
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: PresignArgs) -> CmdResult {
    let loc = super::require_object(&a.url, "presign")?;
    if loc.is_local() {
        return Err(Failure::Usage(format!(
            "presign {}: needs gs://BUCKET/KEY or s3://BUCKET/KEY",
            a.url
        )));
    }
    if shoal_list::has_wildcard(&loc.key) {
        // A glob would be signed as a literal name no one meant.
        return Err(Failure::Usage(format!(
            "presign {}: signs one object; a glob names many",
            a.url
        )));
    }
    let method = match a.method {
        PresignMethodArg::Get => PresignMethod::Get,
        PresignMethodArg::Put => PresignMethod::Put,
        PresignMethodArg::Head => PresignMethod::Head,
        PresignMethodArg::Delete => PresignMethod::Delete,
        PresignMethodArg::Post => PresignMethod::Post,
    };
    let p = Presign {
        headers: a.headers,
        query: a.query,
        ..Presign::new(method, a.expires)
    };
    let store = ctx.store(&loc)?;
    let signed = match need(store.signer(), Lack::Presign, &loc.bucket, &loc.key) {
        Ok(s) => s.presign(&loc.bucket, &loc.key, &p).await,
        Err(e) => Err(e),
    };
    let url = signed.map_err(|e| e.with_url(loc.to_string()))?;
    // What the holder must send beside the URL: the caller's own
    // `--header`s and the store's encryption headers, secrets masked.
    let mut send: Vec<(String, String)> = p.headers.clone();
    let keys = ctx.presign_headers(&loc, method)?;
    let keyed = !keys.is_empty();
    for (name, value) in keys {
        if !send.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            let secret = shoal_core::encryption::S3Encryption::is_secret_header(&name);
            send.push((
                name,
                if secret {
                    "<the key, base64>".to_owned()
                } else {
                    value
                },
            ));
        }
    }
    if ctx.json {
        let method = method.as_str();
        let expires = std::time::SystemTime::now() + a.expires;
        let expires_unix = expires
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        println!(
            "{}",
            serde_json::json!({
                "action": "presign", "url": url, "object": loc.to_string(),
                "method": method, "expires_in_seconds": a.expires.as_secs(),
                "expires_unix": expires_unix,
                "headers": send
                    .iter()
                    .map(|(n, v)| (n.clone(), serde_json::Value::from(v.as_str())))
                    .collect::<serde_json::Map<_, _>>(),
            })
        );
    } else {
        println!("{url}");
        if keyed && !ctx.quiet {
            let list: Vec<String> = send.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            eprintln!("send with the headers: {}", list.join("; "));
        }
    }
    Ok(())
}
