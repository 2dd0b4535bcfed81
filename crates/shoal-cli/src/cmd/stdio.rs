//! `cp SRC -` and `cp - DST`: one stream, to stdout or from stdin.
//!
//! Stdin of unknown length goes to a store as a stream (a resumable
//! session or multipart parts) and to a local file through a working file
//! renamed into place once complete, so an interrupted pipe never leaves
//! half a file under the destination's name.

use std::path::PathBuf;

use shoal_core::{Error, ErrorKind, Location, Op};
use shoal_transfer::ops::download::{check_destination, download_to_writer};
use shoal_transfer::ops::stream::{reader_stream, upload_stream};
use shoal_transfer::{Report, Run, TransferOptions};

use super::outcome::{Done, NOT_REPLACED, refusal, say_skipped};
use crate::args::CpArgs;
use crate::config::Context;
use crate::failure::Failure;
use crate::progress::Progress;

/// `cp - DST`.
pub(super) async fn stdin_to(
    ctx: &Context,
    a: &CpArgs,
    d: &Location,
    opts: &TransferOptions,
) -> Result<Done, Failure> {
    let progress = Progress::start(None, ctx.quiet);
    let run = ctx.run(opts.clone()).with_progress(progress.counter());
    match from_stdin(ctx, d, &run).await {
        Err(Failure::Failed(m)) if a.no_clobber && m.contains(NOT_REPLACED) => {
            progress.finish();
            say_skipped(
                ctx,
                format!("{d} exists (--no-clobber)"),
                format!("Skipped stdin: {d} exists (--no-clobber)"),
            );
            Ok(None)
        }
        r => Ok(Some((r?, "stdin".into(), d.to_string(), progress.finish()))),
    }
}

/// `cp SRC -`.
pub(super) async fn to_stdout(ctx: &Context, src: &Location, run: &Run) -> Result<Report, Failure> {
    let mut out = tokio::io::stdout();
    if src.is_local() {
        let mut f = tokio::fs::File::open(&src.key)
            .await
            .map_err(|e| Error::io(Op::Read, &src.key, e))?;
        let n = tokio::io::copy(&mut f, &mut out)
            .await
            .map_err(|e| Error::io(Op::Write, "stdout", e))?;
        return Ok(Report::size_only(n));
    }
    let store = ctx.store(src)?;
    Ok(download_to_writer(store, src, &mut out, run, &ctx.retry).await?)
}

/// `cp - FILE` through a working file renamed into place; `cp - URL` as
/// a stream of unknown size.
async fn from_stdin(ctx: &Context, dst: &Location, run: &Run) -> Result<Report, Failure> {
    if dst.is_local() {
        let dest = PathBuf::from(&dst.key);
        if dst.key.ends_with('/') || dest.is_dir() {
            return Err(Failure::Usage(format!(
                "cp - {}: name the file to write stdin to",
                dst.key
            )));
        }
        check_destination(&dest)?;
        let no_clobber = run.opts.no_clobber;
        let n = tokio::task::spawn_blocking(move || {
            shoal_core::workfile::write_with(&dest, no_clobber, |f| {
                std::io::copy(&mut std::io::stdin().lock(), f)
                    .map_err(|e| Error::io(Op::Write, dest.display().to_string(), e))
            })
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Io, Op::Write, &dst.key, e.to_string()))?
        .map_err(refusal)?;
        return Ok(Report::size_only(n));
    }
    if dst.is_prefix_like() {
        return Err(Failure::Usage(format!(
            "cp - {dst}: name the object to write stdin to"
        )));
    }
    let store = ctx.store(dst)?;
    let body = reader_stream(tokio::io::stdin(), "stdin");
    upload_stream(store, body, dst, &run.opts.put, run)
        .await
        .map_err(refusal)
}
