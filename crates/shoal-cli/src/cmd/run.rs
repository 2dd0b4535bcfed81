//! `shoal run FILE`: many commands, one batch (like `s5cmd run`).
//!
//! Each line is `cp SRC DST` or `rm URL` (shell quoting via shlex; blank
//! lines and `#` comments ignored). All lines run concurrently through the
//! batch engine, so a file of 100,000 small copies keeps `--workers`
//! requests in flight.
//!
//! A plan is checked whole before anything runs, so a typo cannot
//! half-apply it: a malformed line, a copy into a local folder whose source
//! name is no safe file name (docs/keys.md), or two lines writing one
//! destination is reported with its line number and nothing runs. The file
//! is therefore read twice, once to check and once to run, line by line:
//! a plan of a hundred million lines costs no more memory than one of ten.
//! Standard input is kept in a temporary file for the second reading, and
//! the destinations are checked for repeats by an external sort
//! ([`Repeats`]): sorted runs of [`RUN_LEN`] in temporary files, merged.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufRead, BufReader, BufWriter, Seek, Write};

use futures::StreamExt;
use shoal_core::{Error, Location, Op, Scheme};
use shoal_transfer::batch::Action;
use shoal_transfer::tree::destination;

use crate::args::RunArgs;
use crate::config::Context;
use crate::{CmdResult, Failure};

/// Destinations sorted in memory before they go to a temporary file:
/// 100,000 are ~10 MB.
const RUN_LEN: usize = 100_000;

pub(crate) async fn run(ctx: &Context, a: RunArgs) -> CmdResult {
    let name = a.file.clone();
    let (file, schemes) = tokio::task::spawn_blocking(move || {
        let file = open_plan(&name)?;
        let schemes = check(&file, &name, RUN_LEN)?;
        Ok::<_, Failure>((file, schemes))
    })
    .await
    .map_err(|e| Failure::Failed(format!("run {}: {e}", a.file)))??;
    let locs: Vec<&Location> = schemes.iter().collect();
    let store_for = ctx.store_for(&locs)?;
    let stream = actions(file, a.file.clone());
    let mut opts = ctx.transfer.clone();
    opts.no_clobber = a.no_clobber;
    crate::cmd::batch::run_and_report(ctx, stream, store_for, opts, "Ran", "", false).await
}

/// The plan as a file that can be read twice: the named one, or standard
/// input kept in an unnamed temporary file.
fn open_plan(name: &str) -> Result<std::fs::File, Failure> {
    let io = |e| Failure::from(Error::io(Op::Read, name, e));
    if name != "-" {
        return std::fs::File::open(name).map_err(io);
    }
    let mut f = tempfile::tempfile().map_err(io)?;
    std::io::copy(&mut std::io::stdin().lock(), &mut f).map_err(io)?;
    Ok(f)
}

/// The lines of `file` from its start, numbered from 1, blank lines and
/// comments left out.
fn lines(
    file: &std::fs::File,
    name: &str,
) -> Result<impl Iterator<Item = Result<(u64, String), Failure>>, Failure> {
    let mut f = file.try_clone().map_err(|e| Error::io(Op::Read, name, e))?;
    f.rewind().map_err(|e| Error::io(Op::Read, name, e))?;
    let name = name.to_owned();
    Ok(BufReader::new(f)
        .lines()
        .enumerate()
        .filter_map(move |(i, l)| match l {
            Ok(l) if l.trim().is_empty() || l.trim().starts_with('#') => None,
            Ok(l) => Some(Ok((i as u64 + 1, l))),
            Err(e) => Some(Err(Failure::from(Error::io(Op::Read, &name, e)))),
        }))
}

/// One line as the action it asks for.
fn parse_line(line: &str, n: u64, file: &str) -> Result<Action, Failure> {
    let line = line.trim();
    let bad = |why: &str| Failure::Usage(format!("run {file}:{n}: {why}: {line}"));
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
            if dst.is_prefix_like() || (dst.is_local() && std::path::Path::new(&dst.key).is_dir()) {
                // The source's name joins the folder by the one key → path
                // rule, so `cp gs://b/x/.. out/` cannot land (or leave a
                // temporary file) outside `out/`.
                dst = destination(&dst, src.basename(), &src.to_string())
                    .map_err(|e| bad(&e.to_string()))?;
            }
            Ok(Action::Copy {
                src,
                meta: None,
                dst,
            })
        }
        ["rm", url] => Ok(Action::Delete { dst: parse(url)? }),
        _ => Err(bad("expected `cp SRC DST` or `rm URL`")),
    }
}

/// Checks every line, and that no two write (or delete) one destination:
/// two lines writing one place would race (the file would be one of them,
/// but which one is luck), and a plan that deletes what another line
/// writes is no better. Returns one location per scheme the plan uses.
fn check(file: &std::fs::File, name: &str, run_len: usize) -> Result<Vec<Location>, Failure> {
    let mut schemes: Vec<Location> = Vec::new();
    let mut repeats = Repeats::new(run_len);
    let spill = |e| Failure::from(Error::io(Op::Write, "a temporary file of run's plan", e));
    for l in lines(file, name)? {
        let (n, line) = l?;
        let action = parse_line(&line, n, name)?;
        let (dst, src) = match &action {
            Action::Copy { src, dst, .. } => (dst, Some(src)),
            Action::Delete { dst } => (dst, None),
        };
        for l in [Some(dst), src].into_iter().flatten() {
            if !schemes.iter().any(|s| s.scheme == l.scheme) {
                schemes.push(l.clone());
            }
        }
        repeats.push(dst.to_string(), n).map_err(spill)?;
    }
    if let Some((dst, first, again)) = repeats.find().map_err(spill)? {
        return Err(Failure::Usage(format!(
            "run {name}:{again}: {dst} is already written by line {first}; a plan writes each destination once (nothing was run)"
        )));
    }
    if schemes.is_empty() {
        // Nothing to run: no store is needed, but the batch wants one.
        schemes.push(Location {
            scheme: Scheme::File,
            bucket: String::new(),
            key: String::new(),
            local_root: None,
        });
    }
    Ok(schemes)
}

/// The checked plan's lines as actions, read on a blocking thread into a
/// bounded channel.
fn actions(
    file: std::fs::File,
    name: String,
) -> futures::stream::BoxStream<'static, shoal_core::Result<Action>> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    tokio::task::spawn_blocking(move || {
        let as_error = |f: Failure| match f {
            Failure::Usage(m) | Failure::Failed(m) => Error::invalid(Op::Read, &name, m),
            Failure::Reported => Error::invalid(Op::Read, &name, "a line could not be read"),
        };
        let lines = match lines(&file, &name) {
            Ok(l) => l,
            Err(f) => {
                let _ = tx.blocking_send(Err(as_error(f)));
                return;
            }
        };
        for l in lines {
            let item = l
                .and_then(|(n, line)| parse_line(&line, n, &name))
                .map_err(as_error);
            if tx.blocking_send(item).is_err() {
                return;
            }
        }
    });
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

/// Finds a destination named twice among any number of them, in memory
/// bounded by `run_len`: sorted runs go to temporary files, then a merge
/// of the runs meets equal names side by side.
struct Repeats {
    run_len: usize,
    run: Vec<(String, u64)>,
    files: Vec<std::fs::File>,
}

impl Repeats {
    fn new(run_len: usize) -> Self {
        Repeats {
            run_len: run_len.max(1),
            run: Vec::new(),
            files: Vec::new(),
        }
    }

    fn push(&mut self, dst: String, line: u64) -> std::io::Result<()> {
        self.run.push((dst, line));
        if self.run.len() >= self.run_len {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> std::io::Result<()> {
        self.run.sort_unstable();
        let mut w = BufWriter::new(tempfile::tempfile()?);
        for (dst, line) in self.run.drain(..) {
            serde_json::to_writer(&mut w, &(dst, line))?;
            w.write_all(b"\n")?;
        }
        let mut f = w.into_inner().map_err(|e| e.into_error())?;
        f.rewind()?;
        self.files.push(f);
        Ok(())
    }

    /// The first destination (in sort order) named twice, with the lines
    /// of its first two namings.
    fn find(mut self) -> std::io::Result<Option<(String, u64, u64)>> {
        if self.files.is_empty() {
            self.run.sort_unstable();
            return Ok(self
                .run
                .windows(2)
                .find(|w| w[0].0 == w[1].0)
                .map(|w| (w[0].0.clone(), w[0].1, w[1].1)));
        }
        if !self.run.is_empty() {
            self.spill()?;
        }
        type Run = std::io::Lines<BufReader<std::fs::File>>;
        let next = |r: &mut Run| -> std::io::Result<Option<(String, u64)>> {
            match r.next() {
                None => Ok(None),
                Some(l) => serde_json::from_str(&l?)
                    .map(Some)
                    .map_err(std::io::Error::other),
            }
        };
        let mut runs: Vec<Run> = self
            .files
            .into_iter()
            .map(|f| BufReader::new(f).lines())
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, r) in runs.iter_mut().enumerate() {
            if let Some((dst, line)) = next(r)? {
                heap.push(Reverse((dst, line, i)));
            }
        }
        let mut last: Option<(String, u64)> = None;
        while let Some(Reverse((dst, line, i))) = heap.pop() {
            if let Some((prev, first)) = &last
                && *prev == dst
            {
                return Ok(Some((dst, *first, line)));
            }
            if let Some((d, l)) = next(&mut runs[i])? {
                heap.push(Reverse((d, l, i)));
            }
            last = Some((dst, line));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(names: &[&str], run_len: usize) -> Option<(String, u64, u64)> {
        let mut r = Repeats::new(run_len);
        for (i, n) in names.iter().enumerate() {
            r.push(n.to_string(), i as u64 + 1).unwrap();
        }
        r.find().unwrap()
    }

    /// The same answer whether the names fit one run or are merged from
    /// many temporary files.
    #[test]
    fn repeats_are_found_in_memory_and_across_runs() {
        let mut names: Vec<String> = (0..1000)
            .map(|i| format!("gs://b/k{:04}", (i * 7919) % 1000))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        for run_len in [1, 3, 64, 10_000] {
            assert_eq!(find(&refs, run_len), None, "run_len {run_len}");
        }
        names.push("gs://b/k0500".into());
        let at = names.iter().position(|n| n == "gs://b/k0500").unwrap() as u64 + 1;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        for run_len in [1, 3, 64, 10_000] {
            assert_eq!(
                find(&refs, run_len),
                Some(("gs://b/k0500".into(), at, 1001)),
                "run_len {run_len}"
            );
        }
        assert_eq!(find(&[], 2), None);
        assert_eq!(find(&["a", "a"], 1), Some(("a".into(), 1, 2)));
    }

    #[test]
    fn plans_are_checked_whole_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan");
        let mut text = String::from("# a comment\n\n");
        for i in 0..50 {
            text.push_str(&format!("cp gs://b/src{i} gs://b/dst{i}\n"));
        }
        text.push_str("rm s3://c/x\n");
        std::fs::write(&p, &text).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let schemes = check(&f, "plan", 7).unwrap();
        let mut s: Vec<_> = schemes.iter().map(|l| l.scheme).collect();
        s.sort_by_key(|s| format!("{s:?}"));
        assert_eq!(s, [Scheme::Gs, Scheme::S3]);

        text.push_str("cp gs://b/other gs://b/dst7\n");
        std::fs::write(&p, &text).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let Err(Failure::Usage(err)) = check(&f, "plan", 7) else {
            panic!("a repeat is refused");
        };
        assert!(err.contains("plan:54") && err.contains("line 10"), "{err}");
    }
}
