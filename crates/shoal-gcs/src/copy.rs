//! Server-side copy: `rewrite`, looped on its `rewriteToken` until `done`.
//!
//! No byte passes through the client. `rewrite` rather than `copyTo`: a
//! copy across locations or storage classes, or of a large object, may
//! need several calls, which only `rewrite` can make (`copyTo` times out
//! instead). The source is pinned with `ifSourceGenerationMatch` and
//! `--no-clobber` is `ifGenerationMatch=0`, on every call.
//!
//! Metadata: without a request body the destination keeps the source's;
//! when the caller overrides a field or asks for a storage class the whole
//! resource is sent (the source's fields with the caller's on top), since
//! a resource given replaces the source's.
//!
//! fake-gcs-server 1.56 quirk: its `rewriteTo` (and `copyTo`) ignore both
//! `ifSourceGenerationMatch` and `ifGenerationMatch`, and always finish in
//! one call. The caller's check of the destination's CRC32C and size
//! against the source's catches a source replaced by different bytes
//! there. It ignores `ifGenerationMatch=0` on compose too, and honours it
//! only on uploads: so where the store is not Google's own (the same
//! declaration that turns the XML multipart API off), a `--no-clobber`
//! copy answers `Unsupported` and the caller streams it, its final upload
//! carrying the precondition (`lib.rs`).

use bytes::Bytes;
use reqwest::header::CONTENT_TYPE;
use serde::Deserialize;
use shoal_core::checksum::Checksums;
use shoal_core::{
    CopyRequest, Error, ErrorKind, ObjectMeta, ObjectVersion, Op, PutOptions, Result,
};

use shoal_core::retry::safe::{self, Ours, Planned};

use crate::client::{Client, Query, encode, gs_url, protocol, with_kind};
use crate::list::parse_object;

/// The calls one rewrite may take before shoal gives up: GCS moves at
/// least ~1 GiB per call in practice, so this is far above any object.
const MAX_CALLS: usize = 100_000;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RewriteResponse {
    done: bool,
    #[serde(default)]
    rewrite_token: Option<String>,
    #[serde(default)]
    resource: Option<serde_json::Value>,
}

/// What a rewrite sends: nothing (the destination keeps the source's
/// metadata), or the whole resource when the caller overrides a field or
/// asks for a storage class (a resource given replaces the source's, so
/// the source's fields go with the caller's on top).
fn rewrite_body(c: &CopyRequest<'_>) -> Bytes {
    if !c.replace_metadata && c.opts.storage_class.is_none() {
        return Bytes::new();
    }
    let opts = if c.replace_metadata {
        c.opts.clone()
    } else {
        PutOptions {
            storage_class: c.opts.storage_class.clone(),
            ..PutOptions::default().keeping(c.src)
        }
    };
    let mut m = serde_json::Map::new();
    crate::object::descriptive_metadata(&mut m, &opts);
    Bytes::from(serde_json::Value::Object(m).to_string())
}

/// One rewrite answer: the finished object, or the token to call again
/// with (a call that is neither is a protocol error: it cannot go on).
fn next_step(resp: &[u8], url: &str) -> Result<std::result::Result<ObjectMeta, String>> {
    let answer: RewriteResponse = serde_json::from_slice(resp)
        .map_err(|e| protocol(Op::Copy, url, "a rewrite response", e))?;
    if answer.done {
        let resource = answer.resource.ok_or_else(|| {
            protocol(
                Op::Copy,
                url,
                "a rewrite response",
                "done without a resource",
            )
        })?;
        return parse_object(resource.to_string().as_bytes(), Op::Copy, url).map(Ok);
    }
    match answer.rewrite_token.filter(|t| !t.is_empty()) {
        Some(t) => Ok(Err(t)),
        None => Err(protocol(
            Op::Copy,
            url,
            "a rewrite response",
            "not done, and no rewriteToken to go on with",
        )),
    }
}

fn rewrite_request(
    h: &shoal_http::transport::Http,
    http_url: &str,
    body: &Bytes,
) -> reqwest::RequestBuilder {
    let r = h.post(http_url).body(body.clone());
    if body.is_empty() {
        r
    } else {
        r.header(CONTENT_TYPE, "application/json")
    }
}

impl Client {
    pub(crate) async fn copy(&self, c: &CopyRequest<'_>) -> Result<ObjectMeta> {
        let src_url = gs_url(c.src_bucket, c.src_key);
        let url = gs_url(c.dst_bucket, c.dst_key);
        let generation = match &c.src.version {
            Some(ObjectVersion::Generation(g)) => Some(g.to_string()),
            _ => None,
        };
        // One stored version chosen (a restore): that generation is read
        // (`sourceGeneration`), live or not. Otherwise the live object,
        // which must still be the generation read.
        let (pin, source) = match c.src.version_state {
            Some(_) => ("sourceGeneration", generation.as_deref()),
            None => ("ifSourceGenerationMatch", generation.as_deref()),
        };
        crate::object::check_write_version(c.opts, Op::Copy, &url)?;
        let dst_generation = crate::object::generation_match(c.opts);
        let body = rewrite_body(c);
        let base = format!(
            "{}/rewriteTo/b/{}/o/{}",
            self.object_url(c.src_bucket, c.src_key),
            encode(c.dst_bucket),
            encode(c.dst_key)
        );
        let mut token: Option<String> = None;
        for _ in 0..MAX_CALLS {
            let resp = match &token {
                // The first call may finish the copy: a lost answer is
                // looked into before it is sent again (retry::safe).
                None => {
                    self.first_rewrite(c, &base, (pin, source), &body, &url)
                        .await
                }
                // Later calls continue the server's own copy, named by
                // the token: sending one again repeats no write.
                Some(t) => {
                    let q = Query::new()
                        .add_opt(pin, source)
                        .add_opt("ifGenerationMatch", dst_generation.as_deref())
                        .add_opt("destinationPredefinedAcl", c.opts.acl.as_deref())
                        .add("rewriteToken", t);
                    let http_url = format!("{base}{}", q.as_str());
                    self.call_bytes(Op::Copy, &url, |h| rewrite_request(h, &http_url, &body))
                        .await
                        .and_then(|r| next_step(&r, &url))
                }
            };
            let step = match resp {
                Ok(r) => r,
                Err(e) => {
                    return Err(self
                        .why_refused(
                            e,
                            c,
                            source.filter(|_| c.src.version_state.is_none()),
                            &src_url,
                        )
                        .await);
                }
            };
            match step {
                Ok(done) => return Ok(done),
                Err(next) => token = Some(next),
            }
        }
        Err(Error::new(
            ErrorKind::Protocol,
            Op::Copy,
            url,
            format!("the server did not finish the rewrite in {MAX_CALLS} calls"),
        ))
    }

    /// The first rewrite call, retried safely: the destination holding the
    /// source's size and checksum after a lost answer is the copy done.
    async fn first_rewrite(
        &self,
        c: &CopyRequest<'_>,
        base: &str,
        (pin, generation): (&str, Option<&str>),
        body: &Bytes,
        url: &str,
    ) -> Result<std::result::Result<ObjectMeta, String>> {
        let ours = Ours {
            size: c.src.size,
            checksums: Checksums::default()
                .with_crc32c(c.src.checksums.crc32c())
                .with_md5(c.src.checksums.md5()),
        };
        safe::write(
            &self.retry,
            Planned::of_put(c.opts),
            ours,
            |pre| async move {
                let g = crate::object::generation_match(&pre.apply(&PutOptions::default()));
                let q = Query::new()
                    .add_opt(pin, generation)
                    .add_opt("ifGenerationMatch", g.as_deref())
                    .add_opt("destinationPredefinedAcl", c.opts.acl.as_deref());
                let http_url = format!("{base}{}", q.as_str());
                let req = rewrite_request(&self.http, &http_url, body);
                let resp = self.once_bytes(Op::Copy, url, req).await?;
                next_step(&resp, url)
            },
            || self.probe(c.dst_bucket, c.dst_key),
            Ok,
        )
        .await
    }

    /// A refused rewrite in words a user can act on: a 412 is the source's
    /// pin (it was replaced) or `ifGenerationMatch=0` (the destination
    /// exists); with both sent, the source's generation now says which.
    async fn why_refused(
        &self,
        e: Error,
        c: &CopyRequest<'_>,
        generation: Option<&str>,
        src_url: &str,
    ) -> Error {
        if e.kind() != ErrorKind::Precondition {
            return e;
        }
        // `generation`: the live source's pin (None for a chosen
        // generation, which cannot change: a 412 is the destination's).
        let source_changed = match (generation, c.opts.conditional()) {
            (None, _) => false,
            (Some(_), false) => true,
            (Some(_), true) => match self.head(c.src_bucket, c.src_key).await {
                Ok(now) => now.version != c.src.version,
                Err(_) => true,
            },
        };
        if source_changed {
            return Error::new(
                ErrorKind::Changed,
                Op::Copy,
                src_url,
                format!(
                    "{}; the source changed since it was read (no longer generation {})",
                    e.message(),
                    generation.unwrap_or_default()
                ),
            )
            .with_hint("nothing was copied; run the command again to copy the current version");
        }
        with_kind(e, ErrorKind::Precondition)
            .with_hint("the object already exists; it was not replaced")
    }
}
