//! `shoal run FILE`: many commands, one batch (like `s5cmd run`).
//!
//! Each line is `cp SRC DST` or `rm URL` (shell quoting via shlex; blank
//! lines and `#` comments ignored). All lines run concurrently through the
//! batch engine, so a file of 100,000 small copies keeps `--workers`
//! requests in flight. A glob (`rm gs://b/tmp/*`, `cp gs://b/x/*.gz out/`)
//! is expanded as the CLI's `rm` and `cp` expand it, streamed, each match
//! a delete or a copy; a glob matching nothing is that line's failure.
//!
//! A plan is checked whole before anything runs, so a typo cannot
//! half-apply it, and its lines are independent, so running them at once
//! gives the one result the plan means. Refused with its line number, and
//! nothing run: a malformed line, a URL naming only a bucket where an
//! object is meant (`shoal_list::names_bucket`: `rm s3://b/` would delete
//! the bucket), a copy into a local folder whose source name is no safe
//! file name (docs/keys.md), and two lines touching one place unless both
//! only read it ([`conflicts`]): a line reading what another writes or
//! deletes (`cp a b` + `rm a`, the chain `cp a b` + `cp b c`), or a place
//! written twice or written and deleted. Places are compared normalised:
//! local paths absolute with `.`, `..` and the links of their existing
//! part resolved (`shoal_transfer::ops::resolve`: `/o/f` is `/o/./f`),
//! cloud keys byte for byte; a glob stands for every key starting with its
//! literal prefix (conservative: `rm gs://b/p/*.tmp` holds `gs://b/p/x`).
//!
//! The file is therefore read twice, once to check and once to run, line
//! by line: a plan of a hundred million lines costs no more memory than
//! one of ten. Standard input is kept in a temporary file for the second
//! reading, and the places are checked by an external sort
//! ([`shoal_transfer::ops::Conflicts`]): sorted runs of [`RUN_LEN`] in temporary
//! files, merged.

use std::io::{BufRead, BufReader, Seek};
use std::path::Path;

use futures::StreamExt;
use futures::stream::BoxStream;
use shoal_core::{Error, ErrorKind, Location, Op, Scheme, Seen, StoreFor};
use shoal_transfer::ops::{
    Action, Conflicts, How, Places, Planned, RUN_LEN, Touch, TreeCopy, Walk, copy_root, destination,
};

use crate::args::RunArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

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
    let stream = actions(file, a.file.clone(), store_for.clone());
    let mut opts = ctx.transfer.clone();
    opts.no_clobber = a.no_clobber;
    crate::cmd::batch::run_and_report(ctx, stream, store_for, opts, "Ran", "", Default::default())
        .await
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

/// What one line asks for.
#[derive(Debug)]
// One dominates a plan, so boxing its action would only add an
// allocation per line.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// One copy or delete, as the line names it.
    One(Action),
    /// `rm GLOB`: every object the glob names, deleted.
    DeleteGlob(Location),
    /// `cp GLOB DST`: every object the glob names, copied under the folder
    /// DST as `shoal cp GLOB DST` places it.
    CopyGlob { src: Location, dst: Location },
}

/// One line as the step it asks for.
fn parse_line(line: &str, n: u64, file: &str) -> Result<Step, Failure> {
    let line = line.trim();
    let bad = |why: &str| Failure::Usage(format!("run {file}:{n}: {why}: {line}"));
    let words = shlex::split(line).ok_or_else(|| bad("unbalanced quotes"))?;
    let parse = |s: &str| {
        let loc = Location::parse(s).map_err(|e| bad(&e.to_string()))?;
        if shoal_list::names_bucket(&loc) {
            return Err(Failure::Usage(format!(
                "run {file}:{n}: {loc} names a bucket, not an object; nothing was run"
            )));
        }
        Ok(loc)
    };
    let glob = |loc: &Location| -> Result<bool, Failure> {
        if loc.is_local() || !shoal_list::has_wildcard(&loc.key) {
            return Ok(false);
        }
        shoal_list::check(loc).map_err(|e| bad(&e.to_string()))?;
        Ok(true)
    };
    match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["cp", src, dst] => {
            let src = parse(src)?;
            // A bucket is a fine destination folder: the source's name
            // joins it.
            let mut dst = Location::parse(dst).map_err(|e| bad(&e.to_string()))?;
            if glob(&src)? {
                if dst.is_local() && Path::new(&dst.key).is_file() {
                    return Err(bad(
                        "a glob is copied into a folder, and the destination is a file",
                    ));
                }
                return Ok(Step::CopyGlob { src, dst });
            }
            if dst.is_prefix_like() || (dst.is_local() && Path::new(&dst.key).is_dir()) {
                // The source's name joins the folder by the one key → path
                // rule, so `cp gs://b/x/.. out/` cannot land (or leave a
                // temporary file) outside `out/`.
                dst = destination(&dst, src.basename(), &src.to_string())
                    .map_err(|e| bad(&e.to_string()))?;
            }
            Ok(Step::One(Action::Copy {
                src,
                meta: None,
                dst,
            }))
        }
        ["rm", url] => {
            let url = parse(url)?;
            if glob(&url)? {
                return Ok(Step::DeleteGlob(url));
            }
            Ok(Step::One(Action::Delete {
                dst: url,
                version: None,
            }))
        }
        _ => Err(bad("expected `cp SRC DST` or `rm URL`")),
    }
}

/// What `step` (on line `n`) reads, writes and deletes.
fn touches(step: &Step, n: u64, places: &mut Places) -> Vec<Touch> {
    let point = |key: String, how| Touch {
        shown: key.clone(),
        key,
        point: true,
        line: n,
        how,
    };
    let range = |key: String, how, shown: String| Touch {
        key,
        point: false,
        line: n,
        how,
        shown,
    };
    let literal = |loc: &Location| {
        shoal_list::KeyGlob::parse(&loc.to_string(), &loc.key)
            .ok()
            .flatten()
            .map_or_else(|| loc.key.clone(), |g| g.literal_prefix().to_owned())
    };
    match step {
        Step::One(Action::Copy { src, dst, .. }) => vec![
            point(places.of(src), How::Read),
            point(places.of(dst), How::Write),
        ],
        Step::One(Action::Delete { dst, .. }) => vec![point(places.of(dst), How::Delete)],
        Step::DeleteGlob(loc) => vec![range(
            loc.with_key(literal(loc)).to_string(),
            How::Delete,
            loc.to_string(),
        )],
        Step::CopyGlob { src, dst } => {
            let lit = literal(src);
            // Each match lands at DST/<its key below the glob's literal
            // folder>, so every name starts with what the literal prefix
            // holds past that folder.
            let start = lit
                .get(copy_root(src).map_or(0, |r| r.len())..)
                .unwrap_or("");
            let shown = match destination(dst, &format!("{start}*"), "") {
                Ok(d) => d.to_string(),
                Err(_) => format!("{}/{start}*", dst.key.trim_end_matches('/')),
            };
            vec![
                range(
                    src.with_key(lit.clone()).to_string(),
                    How::Read,
                    src.to_string(),
                ),
                range(places.below(dst, start), How::Write, shown),
            ]
        }
    }
}

/// Checks every line, and that no two touch one place unless both only
/// read it (see the module docs). Returns one location per scheme the
/// plan uses.
fn check(file: &std::fs::File, name: &str, run_len: usize) -> Result<Vec<Location>, Failure> {
    let mut schemes: Vec<Location> = Vec::new();
    let mut conflicts = Conflicts::new(run_len);
    let mut places = Places::new();
    let spill = |e| Failure::from(Error::io(Op::Write, "a temporary file of run's plan", e));
    for l in lines(file, name)? {
        let (n, line) = l?;
        let step = parse_line(&line, n, name)?;
        let locs = match &step {
            Step::One(Action::Copy { src, dst, .. }) | Step::CopyGlob { src, dst } => {
                [Some(src), Some(dst)]
            }
            Step::One(Action::Delete { dst, .. }) | Step::DeleteGlob(dst) => [Some(dst), None],
        };
        for l in locs.into_iter().flatten() {
            if !schemes.iter().any(|s| s.same_store(l)) {
                schemes.push(l.clone());
            }
        }
        for t in touches(&step, n, &mut places) {
            conflicts.push(t).map_err(spill)?;
        }
    }
    if let Some(c) = conflicts.find().map_err(spill)? {
        return Err(Failure::Usage(c.message(name)));
    }
    if schemes.is_empty() {
        // Nothing to run: no store is needed, but the batch wants one.
        schemes.push(Location {
            scheme: Scheme::File,
            bucket: String::new(),
            key: String::new(),
            local_root: None,
            store: None,
        });
    }
    Ok(schemes)
}

/// The checked plan's lines as actions: read on a blocking thread into a
/// bounded channel, globs expanded as they are listed.
fn actions(file: std::fs::File, name: String, store_for: StoreFor) -> BoxStream<'static, Planned> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let file_name = name.clone();
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
                .and_then(|(n, line)| Ok((n, parse_line(&line, n, &name)?)))
                .map_err(as_error);
            if tx.blocking_send(item).is_err() {
                return;
            }
        }
    });
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .flat_map(move |step| match step {
            Err(e) => futures::stream::iter([Err(e)]).boxed(),
            Ok((_, Step::One(a))) => futures::stream::iter([Ok(Seen::Item(a))]).boxed(),
            Ok((n, Step::DeleteGlob(loc))) => deletes(loc, &store_for, &file_name, n),
            Ok((n, Step::CopyGlob { src, dst })) => copies(src, dst, &store_for, &file_name, n),
        })
        .boxed()
}

/// `rm GLOB` on line `n`: a delete of each object the glob names, as
/// `shoal rm GLOB` lists them.
fn deletes(loc: Location, store_for: &StoreFor, file: &str, n: u64) -> BoxStream<'static, Planned> {
    let store = match store_for(&loc) {
        Ok(s) => s,
        Err(e) => return futures::stream::iter([Err(e)]).boxed(),
    };
    let none = Error::new(
        ErrorKind::NotFound,
        Op::Delete,
        loc.to_string(),
        format!("no objects match (run {file}:{n})"),
    );
    let base = loc.clone();
    let listed = shoal_list::expand(store, &loc, &shoal_list::ListOptions::default())
        .map(move |m| {
            let m = m?;
            Ok(Seen::Item(Action::Delete {
                dst: base.with_key(m.key),
                version: m.version,
            }))
        })
        .boxed();
    or_none(listed, none)
}

/// `cp GLOB DST` on line `n`: a copy of each object the glob names to
/// where `shoal cp GLOB DST` puts it.
fn copies(
    src: Location,
    dst: Location,
    store_for: &StoreFor,
    file: &str,
    n: u64,
) -> BoxStream<'static, Planned> {
    let none = Error::new(
        ErrorKind::NotFound,
        Op::Copy,
        src.to_string(),
        format!("matched no objects (run {file}:{n})"),
    );
    let tree = TreeCopy {
        verb: "cp".to_owned(),
        src,
        dst,
        name: None,
        recursive: false,
        walk: Walk::default(),
        filter: None,
    };
    match tree.plan(store_for) {
        Ok(plan) => or_none(plan, none),
        Err(e) => futures::stream::iter([Err(e)]).boxed(),
    }
}

/// `s`, or `none` as its one item when it has none.
fn or_none(s: BoxStream<'static, Planned>, none: Error) -> BoxStream<'static, Planned> {
    futures::stream::unfold((Some(s), Some(none)), |(s, none)| async move {
        let mut s = s?;
        match s.next().await {
            Some(item) => Some((item, (Some(s), None))),
            None => none.map(|e| (Err(e), (None, None))),
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` of a plan written to a file, with a tiny run length so
    /// the places spill into many temporary files.
    fn checked(text: &str) -> Result<Vec<Location>, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan");
        std::fs::write(&p, text).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let small = check(&f, "plan", 3);
        let whole = check(&f, "plan", RUN_LEN);
        match (small, whole) {
            (Ok(a), Ok(_)) => Ok(a),
            (Err(Failure::Usage(a)), Err(Failure::Usage(b))) => {
                assert_eq!(a, b, "one answer whatever the run length");
                Err(a)
            }
            (a, b) => panic!("{:?} / {:?}", a.err(), b.err()),
        }
    }

    #[test]
    fn plans_are_checked_whole_with_line_numbers() {
        let mut text = String::from("# a comment\n\n");
        for i in 0..50 {
            text.push_str(&format!("cp gs://b/src{i} gs://b/dst{i}\n"));
        }
        text.push_str("rm s3://c/x\n");
        let schemes = checked(&text).unwrap();
        let mut s: Vec<_> = schemes.iter().map(|l| l.scheme).collect();
        s.sort_by_key(|s| format!("{s:?}"));
        assert_eq!(s, [Scheme::Gs, Scheme::S3]);

        text.push_str("cp gs://b/other gs://b/dst7\n");
        let err = checked(&text).unwrap_err();
        assert!(
            err.contains("plan:54: gs://b/dst7 is written here and by line 10"),
            "{err}"
        );
    }

    /// The plans of issue 36: each was run, and lost or garbled data.
    #[test]
    fn plans_touching_one_place_twice_are_refused() {
        for (plan, needle) in [
            (
                "cp gs://b/a gs://b/z\nrm gs://b/a\n",
                "plan:2: gs://b/a is deleted here and read by line 1; a plan never deletes or writes what it reads (nothing was run)",
            ),
            (
                "cp gs://b/a gs://b/b\ncp gs://b/b gs://b/c\n",
                "plan:2: gs://b/b is read here and written by line 1",
            ),
            (
                "cp gs://b/b gs://b/c\ncp gs://b/a gs://b/b\n",
                "plan:2: gs://b/b is written here and read by line 1",
            ),
            (
                "cp gs://b/a gs://b/a\n",
                "plan:1: gs://b/a is read and written by this line",
            ),
            (
                "rm gs://b/p/*\ncp gs://b/p/x /tmp/x\n",
                "plan:2: gs://b/p/x is read here and deleted by line 1 (as part of gs://b/p/*)",
            ),
            (
                "cp gs://b/p/x* gs://c/out/\nrm gs://c/out/x1\n",
                "plan:2: gs://c/out/x1 is deleted here and written by line 1 (as part of gs://c/out/x*)",
            ),
            (
                "cp gs://b/p/* gs://b/p/q/\n",
                "plan:1: gs://b/p/q/* is read and written by this line",
            ),
            (
                "rm s3://b/tmp/*\nrm s3://b/t*\n",
                "plan:2: s3://b/tmp/* is deleted here (as part of s3://b/t*) and by line 1",
            ),
        ] {
            let err = checked(plan).unwrap_err();
            assert!(err.contains(needle), "{plan}: {err}");
        }
        // Reads of one place, deletes and writes of others: independent.
        checked(
            "cp gs://b/a gs://b/x\ncp gs://b/a gs://b/y\nrm gs://b/t/*\ncp gs://b/p/* gs://b/q/\n",
        )
        .unwrap();
        // A glob's range starts at its literal prefix: `gs://b/p/y*` does
        // not hold `gs://b/p/x`.
        checked("rm gs://b/p/y*\ncp gs://b/p/x gs://b/z\n").unwrap();
    }

    /// `/o/f`, `/o/./f`, `/o/sub/../f`, a relative path and a link to the
    /// folder all name one file.
    #[test]
    fn local_aliases_are_one_place() {
        let dir = tempfile::tempdir().unwrap();
        let o = dir.path().join("o");
        std::fs::create_dir_all(o.join("sub")).unwrap();
        std::os::unix::fs::symlink(&o, dir.path().join("link")).unwrap();
        let d = dir.path().display();
        for alias in [
            format!("{d}/o/./f"),
            format!("{d}/o/sub/../f"),
            format!("{d}/link/f"),
            format!("{d}/o//f"),
        ] {
            let err =
                checked(&format!("cp gs://b/x {d}/o/f\ncp gs://b/y '{alias}'\n")).unwrap_err();
            assert!(
                err.contains("plan:2:") && err.contains("by line 1"),
                "{alias}: {err}"
            );
            let err = checked(&format!("cp '{alias}' gs://b/x\nrm {d}/o/f\n")).unwrap_err();
            assert!(
                err.contains("is deleted here and read by line 1"),
                "{alias}: {err}"
            );
        }
        // Copied into the folder: lands at o/f too.
        let err = checked(&format!("cp gs://b/x/f {d}/o/\nrm {d}/o/f\n")).unwrap_err();
        assert!(err.contains("deleted here and written by line 1"), "{err}");
        checked(&format!("cp gs://b/x {d}/o/f\ncp gs://b/y {d}/o/g\n")).unwrap();
    }

    #[test]
    fn bucket_urls_are_never_objects() {
        for (plan, url) in [
            ("rm s3://bucket/\n", "s3://bucket/"),
            ("rm s3://bucket\n", "s3://bucket/"),
            ("rm gs://bucket//\n", "gs://bucket//"),
            ("cp s3://bucket/ /tmp/x\n", "s3://bucket/"),
        ] {
            let err = checked(&format!("cp gs://b/a gs://b/b\n{plan}")).unwrap_err();
            assert_eq!(
                err,
                format!("run plan:2: {url} names a bucket, not an object; nothing was run")
            );
        }
        // A bucket is a destination folder: the source's name joins it.
        checked("cp gs://b/a s3://c/\n").unwrap();
    }

    #[test]
    fn glob_lines_are_steps_of_many() {
        let step = parse_line("rm 's3://b/tmp/*'", 1, "plan").unwrap();
        assert!(matches!(step, Step::DeleteGlob(l) if l.key == "tmp/*"));
        let step = parse_line("cp gs://b/x/*.gz out/", 1, "plan").unwrap();
        assert!(matches!(step, Step::CopyGlob { .. }));
        let step = parse_line("cp /tmp/a*b gs://c/", 1, "plan").unwrap();
        assert!(
            matches!(step, Step::One(_)),
            "local paths are taken as written"
        );
        let Err(Failure::Usage(e)) = parse_line("rm gs://b/x[", 3, "plan") else {
            panic!("a bad glob is refused");
        };
        assert!(e.starts_with("run plan:3:"), "{e}");
    }
}
