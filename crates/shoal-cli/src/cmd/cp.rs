//! `shoal cp SRC DST` for one object or file, in any direction, and
//! `shoal mv`: the same copy, then the source's deletion once the copy
//! is in place and verified (never before, never after a failed copy).
//!
//! Destination naming follows cp(1) and gsutil: a destination that ends in
//! `/`, is a bucket root, or is an existing local folder receives the
//! source's base name. Local writes always go through a temporary name and
//! a rename after verification (see `shoal_transfer::ops::download`).

use std::path::{Path, PathBuf};

use shoal_core::local_path::key_to_relative_path;
use shoal_core::{Error, ErrorKind, Location, Op};
use shoal_transfer::ops::download::check_destination;
use shoal_transfer::ops::{LocalStamp, delete_moved};
use shoal_transfer::{Report, TransferOptions};

use crate::args::CpArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};
use crate::progress::{Progress, summary};

use super::outcome::{Done, NOT_REPLACED, refusal, say_skipped};
use super::stdio;

pub(crate) async fn run(ctx: &Context, a: CpArgs) -> CmdResult {
    each_source(ctx, a, false).await
}

/// A refused `--if-generation-match` / `--if-match` write says so (the
/// engine's refusal wording is `--no-clobber`'s).
fn not_matched(r: CmdResult, matching: bool) -> CmdResult {
    match r {
        Err(Failure::Failed(m)) if matching && m.contains(NOT_REPLACED) => Err(Failure::Failed(
            m.replace(NOT_REPLACED, "not replaced: the precondition failed"),
        )),
        r => r,
    }
}

/// `shoal mv`.
pub(crate) async fn mv(ctx: &Context, a: CpArgs) -> CmdResult {
    each_source(ctx, a, true).await
}

/// `cp SRC DST`, or with several sources (`cp a.csv b.csv s3://b/x/`, as
/// gcloud and cp(1)) each copied into the destination folder in turn, as
/// it would be alone; one that fails is said and the others still go.
/// Every source is parsed, and the destination checked to be a folder,
/// before anything is copied.
async fn each_source(ctx: &Context, a: CpArgs, moving: bool) -> CmdResult {
    if let [one] = a.sources.as_slice() {
        let a = CpArgs {
            src: one.clone(),
            ..a
        };
        return one_source(ctx, a, moving).await;
    }
    into_folder(&a, moving)?;
    let (mut failed, mut usage) = (false, None::<String>);
    for s in &a.sources {
        let one = CpArgs {
            src: s.clone(),
            ..a.clone()
        };
        match one_source(ctx, one, moving).await {
            Ok(()) => {}
            Err(Failure::Reported) => failed = true,
            Err(Failure::Failed(m)) => {
                eprintln!("shoal: {m}");
                failed = true;
            }
            Err(Failure::Usage(m)) => {
                if let Some(before) = usage.replace(m) {
                    eprintln!("shoal: {before}");
                }
            }
        }
    }
    match (failed, usage) {
        (false, None) => Ok(()),
        (false, Some(m)) => Err(Failure::Usage(m)),
        (true, u) => {
            if let Some(m) = u {
                eprintln!("shoal: {m}");
            }
            Err(Failure::Reported)
        }
    }
}

/// What several sources need: URLs and paths that parse, no `-`, and a
/// destination that is a folder (a name ending in `/`, a bucket, an
/// existing local folder), since each source keeps its own name in it.
fn into_folder(a: &CpArgs, moving: bool) -> Result<(), Failure> {
    let verb = if moving { "mv" } else { "cp" };
    if a.dst == "-" || a.sources.iter().any(|s| s == "-") {
        return Err(Failure::Usage(format!(
            "{verb}: stdin and stdout are for one source (with several, the destination is a folder)"
        )));
    }
    for s in &a.sources {
        super::parse(s)?;
    }
    let dst = super::parse(&a.dst)?;
    let folder = if dst.is_local() {
        dst.key.ends_with('/') || Path::new(&dst.key).is_dir()
    } else {
        dst.is_prefix_like()
    };
    if !folder {
        return Err(Failure::Usage(format!(
            "{verb}: {} sources into {dst}: the destination must be a folder with several sources (end it with '/', e.g. {dst}/)",
            a.sources.len()
        )));
    }
    Ok(())
}

/// Whether a copy is of many files (`-r`, a glob source): the batch
/// engine's, with its own report.
fn is_many(a: &CpArgs) -> bool {
    a.recursive || is_glob(&a.src)
}

/// Whether a source is a glob of objects (`s3://b/logs/*.gz`).
fn is_glob(src: &str) -> bool {
    src != "-" && src.contains("://") && shoal_list::has_wildcard(src)
}

/// One source to the destination. A copy of one object that fails with
/// `--json` says so on stdout too, as a batch does: a `fail` record with
/// the source and destination, then the summary.
async fn one_source(ctx: &Context, a: CpArgs, moving: bool) -> CmdResult {
    if moving && (a.src == "-" || a.dst == "-") {
        return Err(Failure::Usage(
            "mv: stdin and stdout cannot be moved (use cp)".into(),
        ));
    }
    let matching = a.matching.any();
    let single = !is_many(&a);
    let (src, dst) = (a.src.clone(), a.dst.clone());
    let started = std::time::Instant::now();
    let r = not_matched(go(ctx, a, moving).await, matching);
    if let Err(Failure::Failed(m)) = &r
        && single
        && ctx.json
        && dst != "-"
    {
        let verb = if moving { "mv" } else { "cp" };
        println!(
            "{}",
            serde_json::json!({"action": "fail", "source": src, "destination": dst, "error": m})
        );
        println!(
            "{}",
            serde_json::json!({"summary": {
                "verb": verb, "copied": 0, "bytes": 0, "deleted": 0, "skipped": 0,
                "skipped_unasked": 0, "failed": 1, "seconds": started.elapsed().as_secs_f64(),
            }})
        );
    }
    r
}

async fn go(ctx: &Context, a: CpArgs, moving: bool) -> CmdResult {
    let verb = if moving { "mv" } else { "cp" };
    let mut opts = transfer_options(ctx, &a, verb)?;
    let is_glob = is_glob(&a.src);
    if a.matching.any() {
        preconditions(verb, &a, is_glob, &mut opts)?;
    }
    if let Some(v) = &a.version_id {
        return copy_version(ctx, &a, v, opts, moving, is_glob).await;
    }
    if a.recursive || is_glob {
        return copy_many(ctx, &a, opts, moving).await;
    }
    refuse_batch_flags(&a, verb)?;
    let src = endpoint(&a.src)?;
    let dst = endpoint(&a.dst)?;
    check_single(&a, src.as_ref(), dst.as_ref(), moving)?;
    let done = match (src, dst) {
        (None, None) => {
            return Err(Failure::Usage(
                "cp - -: copy stdin to stdout with cat(1)".into(),
            ));
        }
        (Some(s), None) => {
            let progress = Progress::start(None, true);
            let run = ctx.run(opts).with_progress(progress.counter());
            let report = stdio::to_stdout(ctx, &s, &run).await?;
            let to = "stdout".to_string();
            Some((report, s.to_string(), to, progress.finish()))
        }
        (None, Some(d)) => stdio::stdin_to(ctx, &a, &d, &opts).await?,
        (Some(s), Some(d)) => object_to(ctx, &a, &s, &d, &opts, moving).await?,
    };
    if let Some((report, from, to, elapsed)) = done {
        say_done(ctx, moving, &report, (&from, &to), elapsed);
    }
    Ok(())
}

/// The command's transfer options: the context's, with this command's
/// flags.
fn transfer_options(ctx: &Context, a: &CpArgs, verb: &str) -> Result<TransferOptions, Failure> {
    let mut opts = ctx.transfer.clone();
    if let Some(n) = a.slices {
        opts.slices = Some(n as usize);
    }
    opts.resume = !a.no_resume || a.resume;
    if let Some(s) = a.slice_size {
        opts.min_slice = s;
    }
    if let Some(p) = a.part_size {
        opts.part_size = p;
    }
    opts.no_clobber = a.no_clobber;
    opts.preserve_posix = a.preserve_posix;
    if a.dst != "-" {
        let d = super::parse(&a.dst)?;
        opts.put = (a.metadata.put(&d)).map_err(|m| Failure::Usage(format!("{verb} {d}: {m}")))?;
    }
    Ok(opts)
}

/// Flags that only a copy of many files takes.
fn refuse_batch_flags(a: &CpArgs, verb: &str) -> Result<(), Failure> {
    if a.dry_run {
        return Err(Failure::Usage(format!(
            "{verb} -n/--dry-run: for {verb} -r and glob sources (to skip destinations that exist, use --no-clobber: gcloud's and s5cmd's cp -n)"
        )));
    }
    if a.filters.any() {
        return Err(Failure::Usage(format!(
            "{verb} --include/--exclude: for {verb} -r and glob sources; a single file is named by its path"
        )));
    }
    Ok(())
}

/// A source or destination: None for `-` (stdin or stdout).
fn endpoint(arg: &str) -> Result<Option<Location>, Failure> {
    if arg == "-" {
        return Ok(None);
    }
    Ok(Some(super::parse(arg)?))
}

/// `cp --version-id V SRC DST`: one stored version of `SRC` copied, to a
/// file or an object. Over a cloud object (its own key: a restore) the
/// write is pinned to what the destination held just before (GCS
/// `ifGenerationMatch`, S3 `If-Match`; nothing: it must not exist), so a
/// version written meanwhile is never replaced: the copy fails and says
/// so. `--if-generation-match`/`--if-match`/`--no-clobber` choose the pin
/// instead.
async fn copy_version(
    ctx: &Context,
    a: &CpArgs,
    v: &str,
    opts: TransferOptions,
    moving: bool,
    is_glob: bool,
) -> CmdResult {
    let verb = if moving { "mv" } else { "cp" };
    if moving || a.recursive || is_glob || a.src == "-" || a.dst == "-" {
        return Err(Failure::Usage(format!(
            "{verb} --version-id: copies one object version to a file or an object (cp, not -r, a glob, mv or stdin/stdout; cat --version-id writes one to stdout)"
        )));
    }
    refuse_batch_flags(a, verb)?;
    let src = super::parse(&a.src)?;
    let meta = super::head_version(ctx, verb, &src, v).await?;
    let dst = named_destination(&src, &super::parse(&a.dst)?)?;
    let store_for = ctx.store_for(&[&src, &dst])?;
    let caller_pinned = a.matching.any() || a.no_clobber;
    let progress = Progress::start(Some(meta.size), ctx.quiet);
    let run = ctx.run(opts).with_progress(progress.counter());
    let copied = shoal_transfer::ops::versions::copy(
        &src,
        &meta,
        &dst,
        &store_for,
        &run,
        &ctx.retry,
        caller_pinned,
    );
    let r = copied.await.map_err(|e| match e.kind() {
        ErrorKind::Precondition if !caller_pinned => Failure::Failed(format!(
            "{verb} --version-id {v} {src} {dst}: not copied: {dst} was written since it was read (a newer version is kept); run it again to restore over that one"
        )),
        _ => refusal(e),
    })?;
    let from = format!("{src}#{v}");
    say_done(ctx, false, &r, (&from, &dst.to_string()), progress.finish());
    Ok(())
}

/// What a copy of one object refuses before it starts: a prefix as the
/// source, a folder or the destination itself as what `mv` moves, `--json`
/// where stdout carries the bytes.
fn check_single(
    a: &CpArgs,
    src: Option<&Location>,
    dst: Option<&Location>,
    moving: bool,
) -> Result<(), Failure> {
    let verb = if moving { "mv" } else { "cp" };
    if let Some(s) = src
        && !s.is_local()
        && s.is_prefix_like()
    {
        let what = if moving { "move" } else { "copy" };
        return Err(Failure::Usage(format!(
            "{verb} {s}: the source is a bucket or prefix, not an object (to {what} everything under it, use {verb} -r)"
        )));
    }
    if moving && let (Some(s), Some(d)) = (src, dst) {
        if s.is_local() && Path::new(&s.key).is_dir() {
            return Err(Failure::Usage(format!(
                "mv {}: is a folder (to move a folder, use mv -r)",
                s.key
            )));
        }
        refuse_self_move(s, d)?;
    }
    if a.json && a.dst == "-" {
        return Err(Failure::Usage(
            "cp --json: stdout carries the object's bytes; use --json with a file or URL destination".into(),
        ));
    }
    Ok(())
}

/// `cp SRC DST` and `mv SRC DST` of one object: the copy, then for a move
/// the source's deletion.
async fn object_to(
    ctx: &Context,
    a: &CpArgs,
    s: &Location,
    d: &Location,
    opts: &TransferOptions,
    moving: bool,
) -> Result<Done, Failure> {
    let stamp = if moving { LocalStamp::of(s)? } else { None };
    match copy_one(ctx, s, d, opts).await {
        Ok((report, dst_name, elapsed)) => {
            if moving {
                delete_source(ctx, s, &report, stamp, &dst_name).await?;
            }
            Ok(Some((report, s.to_string(), dst_name, elapsed)))
        }
        Err(Failure::Failed(m)) if a.no_clobber && m.contains(NOT_REPLACED) => {
            if moving {
                return Err(Failure::Failed(format!(
                    "mv {s}: the destination exists; not replaced (--no-clobber), the source was kept"
                )));
            }
            say_skipped(
                ctx,
                format!("{s}: the destination exists (--no-clobber)"),
                format!("Skipped {s}: the destination exists (--no-clobber)"),
            );
            tracing::debug!("{m}");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The one line (or JSON object) a finished copy or move prints.
fn say_done(
    ctx: &Context,
    moving: bool,
    report: &Report,
    (from, to): (&str, &str),
    elapsed: std::time::Duration,
) {
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({
                "action": if moving { "move" } else { "copy" }, "source": from, "destination": to,
                "bytes": report.bytes, "resumed_bytes": report.resumed, "requests": report.pieces,
                "verified": report.verified.to_string(), "seconds": elapsed.as_secs_f64(),
            })
        );
        return;
    }
    if ctx.quiet {
        return;
    }
    let unit = if report.pieces == 1 {
        "request"
    } else {
        "parallel requests"
    };
    let resumed = if report.resumed > 0 {
        format!(
            ", resumed: {} were already here",
            crate::output::human_bytes(report.resumed)
        )
    } else {
        String::new()
    };
    eprintln!(
        "{} {}: {} ({} {unit}, {} verified{resumed})",
        if moving { "Moved" } else { "Copied" },
        shoal_core::error::escape_controls(&format!("{from} → {to}")),
        summary(report.bytes - report.resumed, elapsed),
        report.pieces,
        report.verified
    );
}

/// `mv SRC DST` naming one object twice: the copy would be the source,
/// and deleting the source would delete it. Local files are compared by
/// device and inode, so another name for the file (a hard link, a bind
/// mount) is caught too.
fn refuse_self_move(src: &Location, dst: &Location) -> Result<(), Failure> {
    use std::os::unix::fs::MetadataExt;
    let same = match (src.is_local(), dst.is_local()) {
        (false, false) => {
            let d = cloud_dest(dst, src.basename());
            d.same_store(src) && d.bucket == src.bucket && d.key == src.key
        }
        (true, true) => {
            let from = Path::new(&src.key);
            let name = from.file_name().map(PathBuf::from).unwrap_or_default();
            let to = if dst.key.ends_with('/') || Path::new(&dst.key).is_dir() {
                Path::new(&dst.key).join(name)
            } else {
                PathBuf::from(&dst.key)
            };
            // One file under two names (a hard link, a bind mount) has
            // one device and inode: replacing the destination and then
            // deleting the source would lose it.
            let same_inode = match (std::fs::metadata(from), std::fs::symlink_metadata(&to)) {
                (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
                _ => false,
            };
            same_inode
                || match (from.canonicalize(), to.canonicalize()) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => false,
                }
        }
        _ => false,
    };
    if same {
        return Err(Failure::Usage(format!(
            "mv {src} {dst}: the source and the destination are the same object (nothing to move)"
        )));
    }
    Ok(())
}

/// `mv`'s last step, once the copy is in place and verified: the engine's
/// [`shoal_transfer::ops::delete_moved`], so only what was copied goes.
async fn delete_source(
    ctx: &Context,
    src: &Location,
    copied: &Report,
    stamp: Option<LocalStamp>,
    dst_name: &str,
) -> Result<(), Failure> {
    let store_for = ctx.store_for(&[src])?;
    let gone = delete_moved(src, copied.source_version.as_ref(), stamp, &store_for).await;
    gone.map_err(|e| {
        if e.kind() == ErrorKind::Changed {
            return Failure::Failed(format!("mv {src}: copied to {dst_name}, but {}", e.message()));
        }
        Failure::Failed(format!(
            "mv {src}: copied to {dst_name}, but the source could not be deleted: {} (the object is now in both places; delete the source with shoal rm)",
            e.message()
        ))
    })
}

/// `cp -r`, `mv -r` and glob sources: many files through the batch engine.
async fn copy_many(ctx: &Context, a: &CpArgs, opts: TransferOptions, moving: bool) -> CmdResult {
    let verb = if moving { "mv -r" } else { "cp -r" };
    if a.src == "-" || a.dst == "-" {
        return Err(Failure::Usage(format!(
            "{verb}: stdin and stdout hold one stream, not a tree"
        )));
    }
    let src = super::parse(&a.src)?;
    let dst = super::parse(&a.dst)?;
    check_many(&src, &dst, verb)?;
    let tree = tree_copy(a, &src, &dst, verb)?;
    let store_for = ctx.store_for(&[&src, &dst])?;
    if !dst.is_local() && !a.dry_run {
        destination_bucket_exists(&store_for(&dst)?, &dst, verb).await?;
    }
    let actions = tree.plan(&store_for)?;
    if a.dry_run {
        return crate::cmd::batch::dry_run(ctx, actions, if moving { "mv" } else { "cp" }).await;
    }
    let done = if moving { "Moved" } else { "Copied" };
    let what = src.to_string();
    let mode = shoal_transfer::ops::Mode {
        moving,
        ..Default::default()
    };
    crate::cmd::batch::run_and_report(ctx, actions, store_for, opts, done, &what, mode).await
}

/// A tree copied into a bucket that does not exist (or whose name the
/// server refuses) fails once, up front, instead of once per file: one
/// list request of one key. Any other answer (403 for credentials that may
/// write but not list, a timeout) is left to the copies themselves.
async fn destination_bucket_exists(
    store: &std::sync::Arc<dyn shoal_core::Store>,
    dst: &Location,
    verb: &str,
) -> Result<(), Failure> {
    let probe = shoal_core::ListRequest {
        prefix: dst.key.clone(),
        max_results: Some(1),
        projection: shoal_core::Projection::NameOnly,
        ..Default::default()
    };
    let bucket = format!("{}{}", dst.prefix(), dst.bucket);
    match store.list_page(&dst.bucket, &probe).await {
        Err(e) if e.kind() == ErrorKind::NotFound || e.status() == Some(400) => {
            Err(Failure::Failed(format!(
                "{verb} {dst}: the destination bucket {bucket} cannot be written: {}; nothing was copied (shoal mb creates a bucket)",
                e.message().trim_end_matches('.')
            )))
        }
        Err(e) => {
            tracing::debug!("destination probe of {bucket}: {e}");
            Ok(())
        }
        Ok(_) => Ok(()),
    }
}

/// `--if-generation-match` / `--if-match` on the one destination object:
/// a precondition of the write itself (generation 0: it must not exist).
fn preconditions(
    verb: &str,
    a: &CpArgs,
    is_glob: bool,
    opts: &mut TransferOptions,
) -> Result<(), Failure> {
    let flag = a.matching.flag();
    if a.recursive || is_glob {
        return Err(Failure::Usage(format!(
            "{verb} {flag}: for one object, not {verb} -r or a glob (use --no-clobber to keep every destination that exists)"
        )));
    }
    if a.no_clobber {
        return Err(Failure::Usage(format!(
            "{verb} {flag} --no-clobber: choose one (--if-generation-match 0 is a no-clobber that fails instead of skipping)"
        )));
    }
    if a.dst == "-" {
        return Err(Failure::Usage(format!(
            "{verb} {flag}: stdout has no versions"
        )));
    }
    let d = super::parse(&a.dst)?;
    match a.matching.version(verb, &d).map_err(Failure::Usage)? {
        Some(shoal_core::ObjectVersion::Generation(0)) => opts.put.if_not_exists = true,
        v => opts.put.if_match = v,
    }
    Ok(())
}

/// What a copy of a tree refuses before it starts: a missing local
/// source, a file as the destination folder, a tree landing inside itself.
fn check_many(src: &Location, dst: &Location, verb: &str) -> Result<(), Failure> {
    shoal_list::check(src).map_err(|e| Failure::Usage(e.to_string()))?;
    if src.is_local() && !Path::new(&src.key).exists() {
        return Err(Error::io(
            Op::Read,
            &src.key,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
        .into());
    }
    if dst.is_local() && Path::new(&dst.key).is_file() {
        return Err(Failure::Usage(format!(
            "{verb}: destination {} is a file, not a folder",
            dst.key
        )));
    }
    Ok(())
}

/// The engine's tree copy for `cp -r`, `mv -r` or a glob: refused here,
/// before anything is listed, when the tree would land where it is read
/// from (a tree lands at DST/<its last level>).
fn tree_copy(
    a: &CpArgs,
    src: &Location,
    dst: &Location,
    verb: &str,
) -> Result<shoal_transfer::ops::TreeCopy, Failure> {
    let tree = shoal_transfer::ops::TreeCopy {
        verb: verb.to_owned(),
        src: src.clone(),
        dst: dst.clone(),
        // `cp -r DIR` names its entries `DIR/...`; rules see what is below.
        name: tree_name(a, src),
        recursive: a.recursive,
        walk: a.links.walk(),
        filter: None,
    };
    tree.check().map_err(|e| Failure::Usage(e.to_string()))?;
    Ok(shoal_transfer::ops::TreeCopy {
        filter: a.filters.filter()?,
        ..tree
    })
}

/// The level `cp -r SRC` nests its tree under (SRC's last level), or None
/// when it copies contents (`.`, `..`, a glob).
fn tree_name(a: &CpArgs, src: &Location) -> Option<String> {
    if !a.recursive || shoal_list::has_wildcard(&src.key) {
        return None;
    }
    let name = Path::new(src.key.trim_end_matches('/'))
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (!name.is_empty() && name != "." && name != "..").then_some(name)
}

/// `cp SRC DST` of one object or file: the destination named as cp(1)
/// names it, then the bytes moved by the one routing of a pair
/// ([`shoal_transfer::ops::copy_one`]), with a progress bar.
async fn copy_one(
    ctx: &Context,
    src: &Location,
    dst: &Location,
    opts: &TransferOptions,
) -> Result<(Report, String, std::time::Duration), Failure> {
    let size = if src.is_local() {
        Some(local_source_size(src)?)
    } else {
        None
    };
    let dst = named_destination(src, dst)?;
    let store_for = ctx.store_for(&[src, &dst])?;
    let meta = if !src.is_local() && dst.is_local() {
        download_meta(ctx, src, &store_for).await?
    } else {
        None
    };
    let progress = Progress::start(size.or(meta.as_ref().map(|m| m.size)), ctx.quiet);
    let run = ctx.run(opts.clone()).with_progress(progress.counter());
    let r = shoal_transfer::ops::copy_one(src, meta.as_ref(), &dst, &store_for, &run, &ctx.retry)
        .await
        .map_err(refusal)?;
    Ok((r, dst.to_string(), progress.finish()))
}

/// A local source's size; a folder is a usage error.
fn local_source_size(src: &Location) -> Result<u64, Failure> {
    let md = std::fs::metadata(&src.key).map_err(|e| Error::io(Op::Read, &src.key, e))?;
    if md.is_dir() {
        return Err(Failure::Usage(format!(
            "cp {}: is a folder (to copy a folder, use cp -r)",
            src.key
        )));
    }
    Ok(md.len())
}

/// Where one object lands: a folder destination (a local folder, a name
/// ending in `/`, a bucket root) gets the source's base name; a local
/// destination's folder must exist.
fn named_destination(src: &Location, dst: &Location) -> Result<Location, Failure> {
    if !dst.is_local() {
        return Ok(cloud_dest(dst, src.basename()));
    }
    let named = if src.is_local() {
        let name = Path::new(&src.key)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        local_dest(
            &dst.key,
            &Location {
                key: name,
                ..src.clone()
            },
        )?
    } else {
        local_dest(&dst.key, src)?
    };
    check_destination(&named)?;
    Ok(Location {
        key: named.display().to_string(),
        ..dst.clone()
    })
}

/// A download's source metadata, for the bar: it needs the size before
/// the first byte, so a HEAD, one round trip more, only when someone
/// watches it. Otherwise the first GET tells the size.
async fn download_meta(
    ctx: &Context,
    src: &Location,
    store_for: &shoal_core::StoreFor,
) -> Result<Option<shoal_core::ObjectMeta>, Failure> {
    if !Progress::shown(ctx.quiet) {
        return Ok(None);
    }
    let store = store_for(src)?;
    let meta = (store.head(&src.bucket, &src.key))
        .await
        .map_err(|e| e.with_url(src.to_string()).with_op(Op::Download))?;
    Ok(Some(meta))
}

/// A cloud destination ending in `/` (or a bare bucket) gets the source's name.
fn cloud_dest(dst: &Location, basename: &str) -> Location {
    if dst.is_prefix_like() {
        dst.with_key(format!("{}{basename}", dst.key))
    } else {
        dst.clone()
    }
}

/// A local destination that is a folder (or ends with `/`) gets the source's
/// base name, which must itself be a safe file name.
fn local_dest(dst: &str, src: &Location) -> Result<PathBuf, Failure> {
    let p = PathBuf::from(dst);
    if dst.ends_with('/') || p.is_dir() {
        let name = src.basename();
        let rel = key_to_relative_path(name).map_err(|why| {
            Failure::Failed(
                Error::new(
                    ErrorKind::InvalidInput,
                    Op::Download,
                    src.to_string(),
                    format!("cannot name a local file after it: {why}"),
                )
                .to_string(),
            )
        })?;
        Ok(p.join(rel))
    } else {
        Ok(p)
    }
}
