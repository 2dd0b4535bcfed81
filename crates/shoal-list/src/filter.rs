//! `--include` / `--exclude`: which names a many-file command acts on.
//!
//! Names are relative to the command's root: for `sync` the key below the
//! source or destination folder, for `cp -r DIR` the name below `DIR`, for
//! a glob source the name below its literal folder, for `ls -r`, `du` and
//! `rm -r` the key below the listed prefix. A rule's shape says where in
//! that name it looks (docs/filters.md), the way rsync, rclone and
//! `.gitignore` read patterns, because that is what users write:
//!
//! - no `/` (or only a trailing one): the last level, at any depth
//!   (`*.keep` is `x.keep` and `a/b/x.keep`);
//! - a trailing `/`: a folder and everything below it (`logs/` is
//!   `logs/x` and `a/logs/y`; the folder's own marker `logs/` too);
//! - a leading `/` or a `/` in the middle: anchored at the root
//!   (`/x.txt` only the top-level one, `a/*.txt` only in `a/`);
//! - within a pattern, [`crate::glob`]'s dialect: `*`, `?` and `[...]`
//!   within one level, `**` across levels, everything else literal.
//!
//! Why: matching the whole relative name (this module's first design)
//! made `--exclude '*.keep'` protect only top-level files and
//! `--exclude 'logs/'` protect nothing, so `sync --delete` and `rm -r`
//! deleted what the user had excluded. A folder rule is a rule on every
//! name below the folder, so an excluded folder is left out of *both*
//! listings of a sync and out of `rm -r`'s: nothing below it is compared,
//! copied or deleted, and no folder walk needs pruning to get there.
//!
//! Order (rclone's): the rules are tried in the order given and the first
//! that matches decides. A name no rule matches is included, unless any
//! `--include` was given: then the includes name what is wanted and
//! everything else is left out. `--exclude 'a/' --include '**'`: all but
//! `a/`; the other way round includes everything.
//!
//! Matching is one compiled regex per rule (the translation [`KeyGlob`]
//! uses, so a `?` is one character of `é`, not one byte); a name is
//! checked against each rule as it streams past, so filtering holds
//! nothing in memory; a [`Tally`] counts what each rule left out, in one
//! counter per rule, for the dry runs of deletions. Rejected: globset
//! (bytes, not characters, and its `{a,b}` and `\` would give meaning to
//! characters keys may hold; see [`crate::glob`]).
//!
//! [`KeyGlob`]: crate::KeyGlob

use std::sync::atomic::{AtomicU64, Ordering};

use regex_automata::meta::Regex;

use crate::glob::{compile, translate};

/// One `--include` or `--exclude`, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Names matching the pattern are acted on.
    Include(String),
    /// Names matching the pattern are left alone.
    Exclude(String),
}

impl Rule {
    fn flag(&self) -> (&'static str, &str, bool) {
        match self {
            Rule::Include(p) => ("--include", p, true),
            Rule::Exclude(p) => ("--exclude", p, false),
        }
    }
}

/// Compiled rules (see the module docs for their shapes and order).
#[derive(Debug, Clone)]
pub struct Filter {
    rules: Vec<Compiled>,
    /// What a name no rule matches gets: excluded when any include exists.
    default: bool,
}

#[derive(Debug, Clone)]
struct Compiled {
    include: bool,
    re: Regex,
    /// `--exclude 'logs/'`, for reports.
    label: String,
}

/// Which rule decided a name: its index among the rules, or `None` for
/// the default (no rule matched).
pub type Decider = Option<usize>;

impl Filter {
    /// Compiles `rules`; `Ok(None)` when there are none (everything is
    /// included). An invalid pattern is an error naming the flag and it.
    pub fn new(rules: &[Rule]) -> Result<Option<Filter>, String> {
        if rules.is_empty() {
            return Ok(None);
        }
        let mut compiled = Vec::with_capacity(rules.len());
        for r in rules {
            let (flag, pat, include) = r.flag();
            let bad = |why: String| format!("{flag} {pat:?}: {why}");
            let re = rule_regex(pat).map_err(bad)?;
            compiled.push(Compiled {
                include,
                re,
                label: format!("{flag} '{}'", shoal_core::error::escape_controls(pat)),
            });
        }
        let default = !rules.iter().any(|r| matches!(r, Rule::Include(_)));
        Ok(Some(Filter {
            rules: compiled,
            default,
        }))
    }

    /// Refuses, beside a delete (`sync --delete`, `rm -r`), an
    /// `--exclude` whose reading differs between the tools users type it
    /// in: a `/` in the middle (`cache/*.log`) anchors it at the root here
    /// (as `.gitignore` reads it), while rsync and rclone match it at any
    /// depth, so `x/cache/b.log` would be deleted where they keep it. The
    /// error shows both spellings that say one thing only.
    pub fn check_beside_delete(rules: &[Rule]) -> Result<(), String> {
        for r in rules {
            let Rule::Exclude(p) = r else { continue };
            let body = p.trim_end_matches('/');
            if p.starts_with('/') || p.starts_with("**/") || !body.contains('/') {
                continue;
            }
            let shown = shoal_core::error::escape_controls(p);
            return Err(format!(
                "--exclude '{shown}' beside a delete: a '/' in the middle anchors it at the root here, while rsync and rclone match it at any depth; write '/{shown}' for the root only or '**/{shown}' for any depth"
            ));
        }
        Ok(())
    }

    /// Whether the command acts on `name` (relative to its root).
    pub fn admits(&self, name: &str) -> bool {
        self.decide(name).0
    }

    /// Whether the command acts on `name`, and which rule said so.
    pub fn decide(&self, name: &str) -> (bool, Decider) {
        self.rules
            .iter()
            .position(|r| r.re.is_match(name))
            .map_or((self.default, None), |i| (self.rules[i].include, Some(i)))
    }

    /// [`Filter::admits`], counting a name left out in `tally` under the
    /// rule that left it out.
    pub fn admits_counted(&self, name: &str, tally: &Tally) -> bool {
        let (admitted, by) = self.decide(name);
        if !admitted {
            let i = by.unwrap_or(self.rules.len());
            if let Some(c) = tally.counts.get(i) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        admitted
    }

    /// A tally for this filter's rules, every count at zero.
    pub fn tally(&self) -> Tally {
        let mut labels: Vec<String> = self.rules.iter().map(|r| r.label.clone()).collect();
        labels.push("no --include matching".into());
        Tally {
            counts: labels.iter().map(|_| AtomicU64::new(0)).collect(),
            labels,
        }
    }
}

/// How many names each rule left out (and how many the default did, when
/// an include made it "left out"): what a dry run of `sync --delete` or
/// `rm -r` reports as kept from deletion. One counter per rule, however
/// many names pass.
#[derive(Debug)]
pub struct Tally {
    labels: Vec<String>,
    counts: Vec<AtomicU64>,
}

impl Tally {
    /// `(rule, count)` for each rule that left something out, in the
    /// order given (`("--exclude 'logs/'", 4)`), the default last.
    pub fn kept(&self) -> Vec<(&str, u64)> {
        self.labels
            .iter()
            .zip(&self.counts)
            .map(|(l, c)| (l.as_str(), c.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// One pattern as an anchored regex over the whole relative name, by its
/// shape (module docs).
fn rule_regex(pat: &str) -> Result<Regex, String> {
    if pat.is_empty() {
        return Err("an empty pattern matches nothing".into());
    }
    let (rooted, rest) = match pat.strip_prefix('/') {
        Some(rest) => (true, rest),
        None => (false, pat),
    };
    let (folder, body) = match rest.strip_suffix('/') {
        Some(body) => (true, body),
        None => (false, rest),
    };
    if body.is_empty() {
        return Err("names no file or folder ('/' only anchors or marks a folder)".into());
    }
    let anchored = rooted || body.contains('/');
    let (re, _) = translate(body)?;
    let lead = if anchored { "" } else { "(?:.*/)?" };
    let tail = if folder { "/.*" } else { "" };
    compile(&format!("(?s)^{lead}{re}{tail}$"))
}

/// The root a listing's names are relative to, for `ls -r`, `du` and
/// `rm -r`: a glob's literal folder (`logs/2026-*.gz` → `logs/`), a
/// prefix ending in `/` (or a bucket) itself, any other key as a folder
/// (`data` → `data/`, what `rm -r`/`ls -r` list below it).
pub fn listing_root(key: &str) -> String {
    if crate::has_wildcard(key) {
        let first = key.find(['*', '?', '[']).unwrap_or(key.len());
        return key[..key[..first].rfind('/').map_or(0, |i| i + 1)].to_owned();
    }
    if key.is_empty() || key.ends_with('/') {
        key.to_owned()
    } else {
        format!("{key}/")
    }
}

/// `key`'s name below `root` ([`listing_root`]); a key that is the root's
/// own name without its `/` (the object `data` of `rm -r gs://b/data`) is
/// named by its last level.
pub fn name_below<'a>(root: &str, key: &'a str) -> &'a str {
    if let Some(rest) = key.strip_prefix(root) {
        return rest;
    }
    key.rsplit('/').next().unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_and_names() {
        assert_eq!(listing_root("logs/2026-*.gz"), "logs/");
        assert_eq!(listing_root("a/b*/**"), "a/");
        assert_eq!(listing_root("*.gz"), "");
        assert_eq!(listing_root(""), "");
        assert_eq!(listing_root("p/"), "p/");
        assert_eq!(listing_root("data"), "data/");
        assert_eq!(name_below("data/", "data/x/y"), "x/y");
        assert_eq!(name_below("data/", "data"), "data");
        assert_eq!(name_below("", "a/b"), "a/b");
    }

    fn inc(p: &str) -> Rule {
        Rule::Include(p.into())
    }
    fn exc(p: &str) -> Rule {
        Rule::Exclude(p.into())
    }
    fn admitted<'a>(rules: &[Rule], names: &[&'a str]) -> Vec<&'a str> {
        let f = Filter::new(rules).unwrap().unwrap();
        names.iter().copied().filter(|n| f.admits(n)).collect()
    }
    /// The names `rule` (as an exclude) leaves out.
    fn excluded<'a>(rule: &str, names: &[&'a str]) -> Vec<&'a str> {
        let f = Filter::new(&[exc(rule)]).unwrap().unwrap();
        names.iter().copied().filter(|n| !f.admits(n)).collect()
    }

    const NAMES: &[&str] = &[
        "a.txt",
        "a.tmp",
        "d/a.txt",
        "d/e/b.tmp",
        "a-b",
        "a/b",
        "with space.txt",
        "é.txt",
        "d/é",
        "[x].txt",
        "x",
    ];

    #[test]
    fn no_rules_is_no_filter() {
        assert!(Filter::new(&[]).unwrap().is_none());
    }

    #[test]
    fn no_slash_matches_the_last_level_at_any_depth() {
        let names = ["x.keep", "a/x.keep", "a/b/x.keep", "x.keep/y", "a/x.keeper"];
        assert_eq!(
            excluded("*.keep", &names),
            ["x.keep", "a/x.keep", "a/b/x.keep"]
        );
        // A literal name too, never a part of one.
        assert_eq!(
            excluded("x", &["x", "xx", "d/x", "d/xx", "x/y"]),
            ["x", "d/x"]
        );
        // `**` inside a level still crosses levels.
        assert_eq!(excluded("**.tmp", NAMES), ["a.tmp", "d/e/b.tmp"]);
    }

    #[test]
    fn trailing_slash_is_a_folder_and_everything_below() {
        let names = [
            "logs",
            "logs/",
            "logs/x",
            "logs/a/b",
            "a/logs/y",
            "a/b/logs/z",
            "logsx/y",
            "a/mylogs/y",
            "a/logs",
        ];
        assert_eq!(
            excluded("logs/", &names),
            ["logs/", "logs/x", "logs/a/b", "a/logs/y", "a/b/logs/z"]
        );
        // With a `/` in the middle, anchored at the root.
        assert_eq!(excluded("a/logs/", &names), ["a/logs/y"]);
        assert_eq!(excluded("/logs/", &names), ["logs/", "logs/x", "logs/a/b"]);
        // Wildcards name the folder level.
        assert_eq!(
            excluded("l*s/", &names),
            ["logs/", "logs/x", "logs/a/b", "a/logs/y", "a/b/logs/z"]
        );
    }

    #[test]
    fn leading_slash_anchors_at_the_root() {
        let names = ["x.txt", "a/x.txt", "a/b/x.txt", "y.txt"];
        assert_eq!(excluded("/x.txt", &names), ["x.txt"]);
        assert_eq!(excluded("/*.txt", &names), ["x.txt", "y.txt"]);
        assert_eq!(excluded("/a/*.txt", &names), ["a/x.txt"]);
    }

    #[test]
    fn middle_slash_anchors_at_the_root() {
        let names = ["a/x.txt", "a/b/x.txt", "z/a/x.txt", "a/b", "a/b/c"];
        assert_eq!(excluded("a/*.txt", &names), ["a/x.txt"]);
        // Without a trailing `/`, one name, not what is below it.
        assert_eq!(excluded("a/b", &names), ["a/b"]);
        assert_eq!(excluded("a/b/", &names), ["a/b/x.txt", "a/b/c"]);
    }

    #[test]
    fn double_star_crosses_levels() {
        let names = ["a/x", "a/b/x", "a/b/c/x", "x", "b/x", "a"];
        assert_eq!(excluded("a/**", &names), ["a/x", "a/b/x", "a/b/c/x"]);
        // A whole level `**/` is zero or more levels.
        assert_eq!(excluded("a/**/x", &names), ["a/x", "a/b/x", "a/b/c/x"]);
        assert_eq!(
            excluded("**/x", &names),
            ["a/x", "a/b/x", "a/b/c/x", "x", "b/x"]
        );
        // `*` and `?` stay within a level.
        assert_eq!(excluded("a/*", &names), ["a/x"]);
        assert_eq!(excluded("a/?/x", &names), ["a/b/x"]);
        assert_eq!(excluded("**", &names), names);
    }

    #[test]
    fn excludes_alone_leave_the_rest_in() {
        assert_eq!(
            admitted(&[exc("*.tmp")], NAMES),
            NAMES
                .iter()
                .copied()
                .filter(|n| !n.ends_with(".tmp"))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            admitted(&[exc("**/*.tmp")], NAMES),
            admitted(&[exc("*.tmp")], NAMES)
        );
    }

    #[test]
    fn includes_alone_leave_everything_else_out() {
        assert_eq!(
            admitted(&[inc("*.txt")], NAMES),
            ["a.txt", "d/a.txt", "with space.txt", "é.txt", "[x].txt"]
        );
        assert_eq!(
            admitted(&[inc("/*.txt")], NAMES),
            ["a.txt", "with space.txt", "é.txt", "[x].txt"]
        );
        assert_eq!(
            admitted(&[inc("d/")], NAMES),
            ["d/a.txt", "d/e/b.tmp", "d/é"]
        );
    }

    #[test]
    fn the_first_matching_rule_wins() {
        // Excluded first, so the include that follows never sees it.
        assert_eq!(
            admitted(&[exc("d/"), inc("*.txt")], NAMES),
            ["a.txt", "with space.txt", "é.txt", "[x].txt"]
        );
        // The other way round, d/a.txt is included by the first rule.
        assert_eq!(
            admitted(&[inc("*.txt"), exc("d/")], NAMES),
            ["a.txt", "d/a.txt", "with space.txt", "é.txt", "[x].txt"]
        );
        // Includes given: a name neither rule matches is left out.
        assert_eq!(admitted(&[exc("a.tmp"), inc("x")], NAMES), ["x"]);
        // An exclude-then-include-all keeps the rest in.
        assert_eq!(
            admitted(&[exc("e/"), inc("**")], NAMES).len(),
            NAMES.len() - 1
        );
    }

    #[test]
    fn awkward_names() {
        // `*` stays within a level: `a-b` is one name, `a/b` two levels.
        assert_eq!(admitted(&[inc("a*b")], NAMES), ["a-b"]);
        assert_eq!(admitted(&[inc("a?b")], NAMES), ["a-b"]);
        assert_eq!(admitted(&[inc("a**b")], NAMES), ["a-b", "a/b"]);
        assert_eq!(admitted(&[inc("a/*")], NAMES), ["a/b"]);
        // `?` is one character, multi-byte or not.
        assert_eq!(
            admitted(&[inc("?.txt")], NAMES),
            ["a.txt", "d/a.txt", "é.txt"]
        );
        assert_eq!(admitted(&[inc("d/?")], NAMES), ["d/é"]);
        assert_eq!(admitted(&[inc("?")], NAMES), ["a/b", "d/é", "x"]);
        // Unicode folders and classes.
        assert_eq!(
            excluded("é/", &["é/x", "a/é/y", "e/x", "é"]),
            ["é/x", "a/é/y"]
        );
        assert_eq!(excluded("[é]*", &["éa", "d/éb", "ea"]), ["éa", "d/éb"]);
        // A space is literal; `[` is named by a class.
        assert_eq!(admitted(&[inc("with space.*")], NAMES), ["with space.txt"]);
        assert_eq!(admitted(&[inc("[[]x].txt")], NAMES), ["[x].txt"]);
        // A newline in a name is matched like any character.
        assert_eq!(
            excluded("*.keep", &["a\nb/x.keep", "x\n.keep"]),
            ["a\nb/x.keep", "x\n.keep"]
        );
    }

    #[test]
    fn a_tally_counts_what_each_rule_left_out() {
        let f = Filter::new(&[exc("logs/"), exc("*.keep"), inc("*.txt")])
            .unwrap()
            .unwrap();
        let t = f.tally();
        let names = [
            "logs/a.txt",
            "a/logs/b",
            "x.keep",
            "y.txt",
            "z.bin",
            "logs/c.keep",
        ];
        let kept: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| f.admits_counted(n, &t))
            .collect();
        assert_eq!(kept, ["y.txt"]);
        assert_eq!(
            t.kept(),
            [
                ("--exclude 'logs/'", 3),
                ("--exclude '*.keep'", 1),
                ("no --include matching", 1)
            ]
        );
        assert_eq!(f.decide("y.txt"), (true, Some(2)));
        assert_eq!(f.decide("z.bin"), (false, None));
    }

    #[test]
    fn bad_patterns_name_the_flag() {
        let e = Filter::new(&[inc("ok"), exc("a[")]).unwrap_err();
        assert!(e.starts_with("--exclude \"a[\": '[' opens"), "{e}");
        let e = Filter::new(&[inc("")]).unwrap_err();
        assert!(e.starts_with("--include \"\""), "{e}");
        let e = Filter::new(&[inc("[a/b]")]).unwrap_err();
        assert!(e.contains("cannot match '/'"), "{e}");
        for p in ["/", "//"] {
            let e = Filter::new(&[exc(p)]).unwrap_err();
            assert!(e.contains("names no file or folder"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
