//! `shoal run FILE`: many commands, one batch (like `s5cmd run`).
//!
//! Each line is `cp SRC DST` or `rm URL` (shell quoting via shlex; blank
//! lines and `#` comments ignored). All lines run concurrently through the
//! batch engine, so a file of 100,000 small copies keeps `--workers`
//! requests in flight. A malformed line is reported with its number and
//! nothing runs, so a typo cannot half-apply a plan; so is a copy into a
//! local folder whose source name is no safe file name (docs/keys.md).

use std::io::Read;

use futures::StreamExt;
use shoal_core::Location;
use shoal_transfer::batch::Action;
use shoal_transfer::tree::destination;

use crate::args::RunArgs;
use crate::config::Context;
use crate::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: RunArgs) -> CmdResult {
    let mut text = String::new();
    let read = if a.file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(&a.file).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| Failure::from(shoal_core::Error::io(shoal_core::Op::Read, &a.file, e)))?;

    let mut actions = Vec::new();
    // Where each destination was named: two lines writing one place would
    // race (the file would be one of them, but which one is luck), and
    // a plan that deletes what another line writes is no better.
    let mut writers: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| Failure::Usage(format!("run {}:{}: {why}: {line}", a.file, n + 1));
        let words = shlex::split(line).ok_or_else(|| bad("unbalanced quotes"))?;
        let parse = |s: &str| Location::parse(s).map_err(|e| bad(&e.to_string()));
        match words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["cp", src, dst] => {
                let src = parse(src)?;
                let mut dst = parse(dst)?;
                if dst.is_prefix_like()
                    || (dst.is_local() && std::path::Path::new(&dst.key).is_dir())
                {
                    // The source's name joins the folder by the one key →
                    // path rule, so `cp gs://b/x/.. out/` cannot land (or
                    // leave a temporary file) outside `out/`.
                    dst = destination(&dst, src.basename(), &src.to_string())
                        .map_err(|e| bad(&e.to_string()))?;
                }
                claim(&mut writers, &dst, n + 1, &a.file, line)?;
                actions.push(Action::Copy {
                    src,
                    meta: None,
                    dst,
                });
            }
            ["rm", url] => {
                let dst = parse(url)?;
                claim(&mut writers, &dst, n + 1, &a.file, line)?;
                actions.push(Action::Delete { dst });
            }
            _ => return Err(bad("expected `cp SRC DST` or `rm URL`")),
        }
    }
    let mut locs: Vec<&Location> = Vec::new();
    for act in &actions {
        match act {
            Action::Copy { src, dst, .. } => locs.extend([src, dst]),
            Action::Delete { dst } => locs.push(dst),
        }
    }
    let store_for = ctx.store_for(&locs)?;
    let stream = futures::stream::iter(actions.into_iter().map(Ok)).boxed();
    crate::cmd::batch::run_and_report(ctx, stream, store_for, ctx.transfer.clone(), "Ran", "").await
}

/// Records that line `n` writes (or deletes) `dst`; a second line doing so
/// refuses the whole plan, naming both.
fn claim(
    writers: &mut std::collections::HashMap<String, usize>,
    dst: &Location,
    n: usize,
    file: &str,
    line: &str,
) -> Result<(), Failure> {
    match writers.entry(dst.to_string()) {
        std::collections::hash_map::Entry::Occupied(first) => Err(Failure::Usage(format!(
            "run {file}:{n}: {line}: {dst} is already written by line {}; a plan writes each destination once (nothing was run)",
            first.get()
        ))),
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(n);
            Ok(())
        }
    }
}
