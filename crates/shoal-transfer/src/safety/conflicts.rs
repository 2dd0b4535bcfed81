//! Two steps of a plan that touch one place, found among any number of
//! steps in memory bounded by a run length: the check every plan given as
//! a list passes before anything runs (a `run` file's lines, Python's
//! lists of pairs to copy or move), so none reads what another writes or
//! deletes, and none writes or deletes a place twice.
//!
//! Each line says what it reads, writes and deletes ([`Touch`]): a place
//! (one object or file) or a key range (every key starting with a prefix:
//! a glob's literal prefix, or the folder a glob copy writes into). Two
//! touches of one place conflict unless both only read: a line reading
//! what another writes or deletes gets one or the other depending on which
//! the batch happens to run first, and a place written twice (or written
//! and deleted) ends as whichever came last.
//!
//! The touches are sorted externally (runs of `run_len` in temporary
//! files, merged: [`crate::spill`]), because in byte order every key with prefix P comes
//! right after P itself: one pass over the sorted touches meets each range
//! before the keys inside it. It keeps a stack of the open ranges (each a
//! prefix of the next, so the stack is never deeper than a key is long)
//! and the touches of the current place, and of each only the first read
//! and the first write or delete: that is all a later touch can clash
//! with. Rejected: an interval tree or a map of prefixes, which hold every
//! range of the plan in memory.

use std::path::PathBuf;

use shoal_core::Location;
use shoal_core::error::escape_controls;

use crate::spill::{self, Sorter, Spill};

/// What a line does to a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum How {
    /// The step reads the place.
    Read,
    /// The step writes it.
    Write,
    /// The step deletes it (a move deletes its source).
    Delete,
}

impl How {
    fn word(self) -> &'static str {
        match self {
            How::Read => "read",
            How::Write => "written",
            How::Delete => "deleted",
        }
    }

    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(c: u8) -> std::io::Result<How> {
        match c {
            0 => Ok(How::Read),
            1 => Ok(How::Write),
            2 => Ok(How::Delete),
            _ => Err(std::io::Error::other("a spilled touch of unknown kind")),
        }
    }
}

/// One place (or key range) a line reads, writes or deletes. Fields are
/// in sort order: by key, a range before the places inside it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Touch {
    /// The place, normalised (`gs://b/key` byte for byte, or a resolved
    /// absolute local path); for a range, the prefix of every key in it.
    pub key: String,
    /// One place (true), or every place whose key starts with `key`.
    pub point: bool,
    /// The plan's line.
    pub line: u64,
    /// What the step does to it.
    pub how: How,
    /// What messages name: the place, or the glob the range stands for.
    pub shown: String,
}

/// Two touches that clash; `here` is on the later line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The touch on the later step.
    pub here: Touch,
    /// The touch it clashes with.
    pub other: Touch,
}

impl Conflict {
    fn of(a: Touch, b: Touch) -> Conflict {
        if a.line >= b.line {
            Conflict { here: a, other: b }
        } else {
            Conflict { here: b, other: a }
        }
    }

    /// The refusal of a `run` file, one line naming both lines and the
    /// place.
    pub fn message(&self, file: &str) -> String {
        self.message_as(&format!("run {file}:"), "line")
    }

    /// The refusal, one line: `{at}{step}: … by {unit} {other step} …`
    /// (`at` "run F:" and unit "line" for a run file; "copy_many pair "
    /// and "pair" for a list of pairs).
    pub fn message_as(&self, at: &str, unit: &str) -> String {
        let (h, o) = (&self.here, &self.other);
        // A place rather than a range when there is one; of two ranges,
        // the narrower (the one inside the other).
        let url = if h.point || (!o.point && h.key.len() >= o.key.len()) {
            &h.shown
        } else {
            &o.shown
        };
        let via = |t: &Touch| {
            if t.point || t.shown == *url {
                String::new()
            } else {
                format!(" (as part of {})", escape_controls(&t.shown))
            }
        };
        let why = if h.how == How::Read || o.how == How::Read {
            "a plan never deletes or writes what it reads"
        } else {
            "a plan writes or deletes each place once"
        };
        let shown = escape_controls(url);
        let what = if h.line == o.line {
            let (first, then) = (h.how.min(o.how), h.how.max(o.how));
            format!(
                "{shown} is {} and {} by this line",
                first.word(),
                then.word()
            )
        } else if h.how == o.how {
            format!(
                "{shown} is {} here{} and by {unit} {}{}",
                h.how.word(),
                via(h),
                o.line,
                via(o)
            )
        } else {
            format!(
                "{shown} is {} here{} and {} by {unit} {}{}",
                h.how.word(),
                via(h),
                o.how.word(),
                o.line,
                via(o)
            )
        };
        format!("{at}{}: {what}; {why} (nothing was run)", h.line)
    }
}

/// The touches of a plan, sorted in runs of at most `run_len` kept in
/// temporary files ([`crate::spill`]), then merged and scanned for a
/// [`Conflict`].
pub struct Conflicts {
    sorter: Sorter<Touch>,
}

impl Conflicts {
    /// Touches kept in memory `run_len` at a time.
    pub fn new(run_len: usize) -> Self {
        Conflicts {
            sorter: Sorter::new(run_len),
        }
    }

    /// Adds a step's touch (spilling a sorted run when one is full).
    pub fn push(&mut self, t: Touch) -> std::io::Result<()> {
        self.sorter.push(t)
    }

    /// The first conflict in sort order, if any.
    pub fn find(self) -> std::io::Result<Option<Conflict>> {
        let mut scan = Scan::default();
        for t in self.sorter.sorted()? {
            if let Some(c) = scan.feed(t?) {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }
}

/// A touch spilled. Most touches show their own key (a place, not a
/// glob), so a flag says so instead of a second copy of the key.
impl Spill for Touch {
    fn put(&self, out: &mut Vec<u8>) {
        spill::put_str(out, &self.key);
        spill::put_u64(out, self.line);
        let same = self.shown == self.key;
        out.push(self.how.code() | u8::from(self.point) << 2 | u8::from(same) << 3);
        if !same {
            spill::put_str(out, &self.shown);
        }
    }

    fn get(f: &mut spill::Fields<'_>) -> std::io::Result<Self> {
        let key = f.str()?;
        let line = f.u64()?;
        let bits = f.u8()?;
        if bits >> 4 != 0 {
            return Err(std::io::Error::other("a spilled touch of unknown kind"));
        }
        let shown = if bits & 8 != 0 { key.clone() } else { f.str()? };
        Ok(Touch {
            key,
            point: bits & 4 != 0,
            line,
            how: How::from_code(bits & 3)?,
            shown,
        })
    }
}

/// The places a plan compares, normalised (see the module docs). Local
/// paths are resolved against the file system; the last folder resolved
/// is remembered, since plans name many files of one folder.
pub struct Places {
    cwd: PathBuf,
    folder: Option<(PathBuf, PathBuf)>,
}

impl Default for Places {
    fn default() -> Self {
        Self::new()
    }
}

impl Places {
    /// Places relative to the current folder.
    pub fn new() -> Self {
        Places {
            cwd: std::env::current_dir().unwrap_or_default(),
            folder: None,
        }
    }

    /// `loc` as the key it is compared by: the URL, or for a local path
    /// what `overlap::resolve` makes of it.
    pub fn of(&mut self, loc: &Location) -> String {
        if !loc.is_local() {
            return loc.to_string();
        }
        let abs = self.cwd.join(&loc.key);
        let resolved = match (abs.parent(), abs.file_name()) {
            (Some(parent), Some(name)) => {
                let folder = match &self.folder {
                    Some((given, real)) if given == parent => real.clone(),
                    _ => {
                        let real = super::overlap::resolve(parent);
                        self.folder = Some((parent.to_path_buf(), real.clone()));
                        real
                    }
                };
                let out = folder.join(name);
                std::fs::canonicalize(&out).unwrap_or(out)
            }
            _ => super::overlap::resolve(&abs),
        };
        resolved.display().to_string()
    }

    /// Everything in the folder `dst` whose name starts with `start`: a
    /// glob copy's destinations.
    pub fn below(&mut self, dst: &Location, start: &str) -> String {
        let mut folder = if dst.is_local() {
            self.of(dst)
        } else {
            return format!("{}{start}", dst.with_key(super::overlap::folder(dst)));
        };
        if !folder.ends_with('/') {
            folder.push('/');
        }
        folder + start
    }
}

/// Refuses a list of `(source, destination)` pairs in which one pair
/// reads, writes or deletes what another writes or deletes (or writes a
/// place twice), before any runs: what Python's `copy_many` /
/// `move_many` and fsspec's `cp`/`mv`/`get` pass. A move deletes its
/// source, so no other pair may read or write it. The error names both
/// pairs (numbered from 1).
pub(crate) fn check_pairs(pairs: &[(Location, Location)], moving: bool) -> shoal_core::Result<()> {
    let mut conflicts = Conflicts::new(RUN_LEN);
    let mut places = Places::new();
    let spill = |e: std::io::Error| {
        shoal_core::Error::io(
            shoal_core::Op::Write,
            "a temporary file of a plan's check",
            e,
        )
    };
    for (i, (src, dst)) in pairs.iter().enumerate() {
        let line = i as u64 + 1;
        let point = |key: String, how| Touch {
            shown: key.clone(),
            key,
            point: true,
            line,
            how,
        };
        let read = if moving { How::Delete } else { How::Read };
        conflicts.push(point(places.of(src), read)).map_err(spill)?;
        conflicts
            .push(point(places.of(dst), How::Write))
            .map_err(spill)?;
    }
    match conflicts.find().map_err(spill)? {
        Some(c) => Err(shoal_core::Error::invalid(
            shoal_core::Op::Copy,
            c.here.shown.clone(),
            c.message_as("pair ", "pair"),
        )),
        None => Ok(()),
    }
}

/// Touches sorted in memory before they go to a temporary file: 100,000
/// are ~20 MB.
pub const RUN_LEN: usize = 100_000;

/// What a later touch of one key (or range) can clash with: the first
/// read and the first write or delete seen of it.
struct Seen {
    key: String,
    read: Option<Touch>,
    other: Option<Touch>,
}

impl Seen {
    fn new(key: &str) -> Self {
        Seen {
            key: key.to_owned(),
            read: None,
            other: None,
        }
    }

    fn clash(&self, t: &Touch) -> Option<&Touch> {
        match t.how {
            How::Read => self.other.as_ref(),
            How::Write | How::Delete => self.read.as_ref().or(self.other.as_ref()),
        }
    }

    fn record(&mut self, t: Touch) {
        let slot = match t.how {
            How::Read => &mut self.read,
            How::Write | How::Delete => &mut self.other,
        };
        slot.get_or_insert(t);
    }
}

/// The pass over the sorted touches (see the module docs).
#[derive(Default)]
struct Scan {
    /// Ranges whose keys may still come, each a prefix of the next.
    open: Vec<Seen>,
    /// The touches of the current place.
    place: Option<Seen>,
}

impl Scan {
    fn feed(&mut self, t: Touch) -> Option<Conflict> {
        // Sorted order: once a key does not start with a range's prefix,
        // no later key does.
        while self.open.last().is_some_and(|r| !t.key.starts_with(&r.key)) {
            self.open.pop();
        }
        if self.place.as_ref().is_some_and(|p| p.key != t.key) {
            self.place = None;
        }
        let place = if t.point { self.place.as_ref() } else { None };
        if let Some(o) = self.open.iter().chain(place).find_map(|s| s.clash(&t)) {
            return Some(Conflict::of(t, o.clone()));
        }
        if t.point {
            self.place
                .get_or_insert_with(|| Seen::new(&t.key))
                .record(t);
        } else if let Some(top) = self.open.last_mut().filter(|r| r.key == t.key) {
            top.record(t);
        } else {
            let mut s = Seen::new(&t.key);
            s.record(t);
            self.open.push(s);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(key, range?, how)` per line, numbered from 1.
    fn touches(spec: &[(&str, bool, How)]) -> Vec<Touch> {
        spec.iter()
            .enumerate()
            .map(|(i, (k, range, how))| Touch {
                key: k.to_string(),
                point: !range,
                line: i as u64 + 1,
                how: *how,
                shown: k.to_string(),
            })
            .collect()
    }

    /// The conflict found, as (later line, earlier line, shown place),
    /// the same for every run length (one run in memory, or many spilled
    /// files merged).
    fn find(ts: &[Touch]) -> Option<(u64, u64, String)> {
        let mut answers = Vec::new();
        for run_len in [1, 2, 3, 1000] {
            let mut c = Conflicts::new(run_len);
            for t in ts {
                c.push(t.clone()).unwrap();
            }
            answers.push(c.find().unwrap().map(|c| {
                let url = if c.here.point || c.other.point {
                    if c.here.point {
                        c.here.key
                    } else {
                        c.other.key
                    }
                } else {
                    c.here.key
                };
                (c.here.line, c.other.line, url)
            }));
        }
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
        answers.pop().unwrap()
    }

    use How::{Delete as D, Read as R, Write as W};

    #[test]
    fn places_clash_unless_both_only_read() {
        assert_eq!(
            find(&touches(&[("gs://b/a", false, R), ("gs://b/a", false, R)])),
            None
        );
        for (a, b) in [(R, W), (W, R), (R, D), (D, R), (W, W), (W, D), (D, D)] {
            assert_eq!(
                find(&touches(&[("gs://b/a", false, a), ("gs://b/a", false, b)])),
                Some((2, 1, "gs://b/a".into())),
                "{a:?} {b:?}"
            );
        }
        // Keys are bytes: a different key, or one in another bucket, is
        // another place.
        let ts = touches(&[
            ("gs://b/a", false, R),
            ("gs://b/a/", false, D),
            ("gs://b/ab", false, W),
            ("gs://c/a", false, D),
            ("s3://b/a", false, W),
        ]);
        assert_eq!(find(&ts), None);
    }

    /// `cp a b` then `cp b c`: which `b` the second copy reads depends
    /// on which line the batch runs first.
    #[test]
    fn chains_clash() {
        let ts = touches(&[
            ("gs://b/a", false, R),
            ("gs://b/b", false, W),
            ("gs://b/b", false, R),
            ("gs://b/c", false, W),
        ]);
        let mut ts = ts;
        // Lines as a plan numbers them: one cp is two touches of one line.
        for (t, line) in ts.iter_mut().zip([1, 1, 2, 2]) {
            t.line = line;
        }
        assert_eq!(find(&ts), Some((2, 1, "gs://b/b".into())));
    }

    #[test]
    fn ranges_hold_the_places_that_start_with_their_prefix() {
        // rm gs://b/p/* (a delete of the range p/) against reads.
        for (key, clash) in [
            ("gs://b/p/x", true),
            ("gs://b/p/", true),
            ("gs://b/p/deep/er", true),
            ("gs://b/p", false),
            ("gs://b/pq", false),
            ("gs://b/o", false),
            ("gs://c/p/x", false),
        ] {
            let ts = touches(&[("gs://b/p/", true, D), (key, false, R)]);
            assert_eq!(find(&ts).is_some(), clash, "{key}");
            // Either order of lines.
            let ts = touches(&[(key, false, R), ("gs://b/p/", true, D)]);
            assert_eq!(find(&ts).is_some(), clash, "{key}");
        }
        // Reading a range another line reads is fine.
        let ts = touches(&[("gs://b/p/", true, R), ("gs://b/p/x", false, R)]);
        assert_eq!(find(&ts), None);
    }

    #[test]
    fn ranges_clash_when_one_holds_the_other() {
        for (a, b, clash) in [
            ("gs://b/p/", "gs://b/p/q", true),
            ("gs://b/p/q", "gs://b/p/", true),
            ("gs://b/p/", "gs://b/p/", true),
            ("gs://b/", "gs://b/p/q/r", true),
            ("gs://b/p/", "gs://b/q/", false),
            ("gs://b/p/a", "gs://b/p/b", false),
        ] {
            let ts = touches(&[(a, true, R), (b, true, D)]);
            assert_eq!(find(&ts).is_some(), clash, "{a} {b}");
            let ts = touches(&[(a, true, R), (b, true, R)]);
            assert_eq!(find(&ts), None, "{a} {b}");
        }
        // Ranges nested three deep are all open inside the deepest (the
        // outermost clash is named), and a range is closed by the first
        // key past it.
        let ts = touches(&[
            ("gs://b/a", true, R),
            ("gs://b/ab", true, R),
            ("gs://b/abc", true, R),
            ("gs://b/abcd", false, W),
        ]);
        assert_eq!(find(&ts), Some((4, 1, "gs://b/abcd".into())));
        let ts = touches(&[
            ("gs://b/x/", true, D),
            ("gs://b/x0", false, R),
            ("gs://b/w", false, R),
            ("gs://b/y/z", false, R),
        ]);
        assert_eq!(find(&ts), None);
    }

    /// Many lines, with one clash far apart in the file and in sort
    /// order, found across many spilled runs.
    #[test]
    fn a_clash_is_found_across_runs() {
        let mut spec: Vec<(String, bool, How)> = (0..500)
            .flat_map(|i| {
                let k = (i * 7919) % 500;
                [
                    (format!("gs://b/src/{k:04}"), false, R),
                    (format!("gs://b/dst/{k:04}"), false, W),
                ]
            })
            .collect();
        let owned = |spec: &[(String, bool, How)]| -> Vec<Touch> {
            let refs: Vec<(&str, bool, How)> =
                spec.iter().map(|(k, r, h)| (k.as_str(), *r, *h)).collect();
            touches(&refs)
        };
        assert_eq!(find(&owned(&spec)), None);
        spec.push(("gs://b/src/02".into(), true, D));
        let at = spec
            .iter()
            .position(|(k, _, _)| k == "gs://b/src/0200")
            .unwrap() as u64
            + 1;
        assert_eq!(
            find(&owned(&spec)),
            Some((1001, at, "gs://b/src/0200".into()))
        );
    }

    #[test]
    fn messages_name_both_lines_and_the_place() {
        let t = |key: &str, point, line, how, shown: &str| Touch {
            key: key.into(),
            point,
            line,
            how,
            shown: shown.into(),
        };
        let c = Conflict::of(
            t("gs://b/a", true, 7, R, "gs://b/a"),
            t("gs://b/a", true, 3, D, "gs://b/a"),
        );
        assert_eq!(
            c.message("F"),
            "run F:7: gs://b/a is read here and deleted by line 3; a plan never deletes or writes what it reads (nothing was run)"
        );
        let c = Conflict::of(
            t("gs://b/p/", false, 1, D, "gs://b/p/*"),
            t("gs://b/p/x", true, 2, R, "gs://b/p/x"),
        );
        assert_eq!(
            c.message("F"),
            "run F:2: gs://b/p/x is read here and deleted by line 1 (as part of gs://b/p/*); a plan never deletes or writes what it reads (nothing was run)"
        );
        let c = Conflict::of(t("/o/f", true, 4, W, "/o/f"), t("/o/f", true, 2, W, "/o/f"));
        assert_eq!(
            c.message("F"),
            "run F:4: /o/f is written here and by line 2; a plan writes or deletes each place once (nothing was run)"
        );
        let c = Conflict::of(
            t("gs://b/a", true, 5, R, "gs://b/a"),
            t("gs://b/a", true, 5, W, "gs://b/a"),
        );
        assert!(
            c.message("F")
                .contains("F:5: gs://b/a is read and written by this line")
        );
    }
}
