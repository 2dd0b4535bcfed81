//! `--include` / `--exclude`: which names a many-file command acts on.
//!
//! A rule is a glob in the dialect of [`crate::glob`] (`*`, `?` and `[...]`
//! within one level, `**` across levels, everything else literal), matched
//! against the whole name *relative to the command's root*: for `sync`
//! the key below the source or destination folder, for `cp -r DIR` the
//! name below `DIR`, for a glob source the name below its literal folder,
//! for `ls -r`, `du` and `rm -r` the key below the listed prefix. So
//! `*.tmp` names `x.tmp` at the top only, `**.tmp` (or `**/*.tmp`) a
//! `.tmp` at any depth, `logs/**` everything below `logs/`.
//!
//! Order (rclone's): the rules are tried in the order given and the first
//! that matches decides. A name no rule matches is included, unless any
//! `--include` was given: then the includes name what is wanted and
//! everything else is left out (`--include '*.csv'` alone copies only
//! the top-level CSV files). `--exclude 'a/**' --include '**'`: all but
//! `a/`; the other way round includes everything.
//!
//! Matching is one compiled regex per rule (the one [`KeyGlob`] uses, so a
//! `?` is one character of `é`, not one byte); a name is checked against
//! each rule as it streams past, so filtering holds nothing in memory.
//! Rejected: globset (bytes, not characters, and its `{a,b}` and `\`
//! would give meaning to characters keys may hold; see [`crate::glob`]).
//!
//! [`KeyGlob`]: crate::KeyGlob

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

/// Compiled rules (see the module docs for their order).
#[derive(Debug, Clone)]
pub struct Filter {
    rules: Vec<(bool, Regex)>,
    /// What a name no rule matches gets: excluded when any include exists.
    default: bool,
}

impl Filter {
    /// Compiles `rules`; `Ok(None)` when there are none (everything is
    /// included). An invalid glob is an error naming the flag and pattern.
    pub fn new(rules: &[Rule]) -> Result<Option<Filter>, String> {
        if rules.is_empty() {
            return Ok(None);
        }
        let mut compiled = Vec::with_capacity(rules.len());
        for r in rules {
            let (flag, pat, include) = r.flag();
            let bad = |why: String| format!("{flag} {pat:?}: {why}");
            if pat.is_empty() {
                return Err(bad("an empty pattern matches nothing".into()));
            }
            let (body, _) = translate(pat).map_err(bad)?;
            let re = compile(&format!("^{body}$")).map_err(bad)?;
            compiled.push((include, re));
        }
        let default = !rules.iter().any(|r| matches!(r, Rule::Include(_)));
        Ok(Some(Filter {
            rules: compiled,
            default,
        }))
    }

    /// Whether the command acts on `name` (relative to its root).
    pub fn admits(&self, name: &str) -> bool {
        self.rules
            .iter()
            .find(|(_, re)| re.is_match(name))
            .map_or(self.default, |(include, _)| *include)
    }
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
    fn excludes_alone_leave_the_rest_in() {
        assert_eq!(
            admitted(&[exc("*.tmp")], NAMES),
            NAMES
                .iter()
                .copied()
                .filter(|n| *n != "a.tmp")
                .collect::<Vec<_>>()
        );
        // `**` crosses levels, inside a level or as a whole one.
        let deep: Vec<&str> = NAMES
            .iter()
            .copied()
            .filter(|n| !n.ends_with(".tmp"))
            .collect();
        assert_eq!(admitted(&[exc("**.tmp")], NAMES), deep);
        assert_eq!(admitted(&[exc("**/*.tmp")], NAMES), deep);
    }

    #[test]
    fn includes_alone_leave_everything_else_out() {
        assert_eq!(
            admitted(&[inc("*.txt")], NAMES),
            ["a.txt", "with space.txt", "é.txt", "[x].txt"]
        );
        assert_eq!(
            admitted(&[inc("d/**")], NAMES),
            ["d/a.txt", "d/e/b.tmp", "d/é"]
        );
    }

    #[test]
    fn the_first_matching_rule_wins() {
        // Excluded first, so the include that follows never sees it.
        assert_eq!(
            admitted(&[exc("d/**"), inc("**.txt")], NAMES),
            ["a.txt", "with space.txt", "é.txt", "[x].txt"]
        );
        // The other way round, d/a.txt is included by the first rule.
        assert_eq!(
            admitted(&[inc("**.txt"), exc("d/**")], NAMES),
            ["a.txt", "d/a.txt", "with space.txt", "é.txt", "[x].txt"]
        );
        // Includes given: a name neither rule matches is left out.
        assert_eq!(admitted(&[exc("a.tmp"), inc("x")], NAMES), ["x"]);
    }

    #[test]
    fn awkward_names() {
        // `*` stays within a level: `a-b` is one name, `a/b` two levels.
        assert_eq!(admitted(&[inc("a*b")], NAMES), ["a-b"]);
        assert_eq!(admitted(&[inc("a?b")], NAMES), ["a-b"]);
        assert_eq!(admitted(&[inc("a**b")], NAMES), ["a-b", "a/b"]);
        assert_eq!(admitted(&[inc("a/*")], NAMES), ["a/b"]);
        // `?` is one character, multi-byte or not.
        assert_eq!(admitted(&[inc("?.txt")], NAMES), ["a.txt", "é.txt"]);
        assert_eq!(admitted(&[inc("d/?")], NAMES), ["d/é"]);
        // A space is literal; `[` is named by a class.
        assert_eq!(admitted(&[inc("with space.*")], NAMES), ["with space.txt"]);
        assert_eq!(admitted(&[inc("[[]x].txt")], NAMES), ["[x].txt"]);
        // A pattern without wildcards names one exact name.
        assert_eq!(admitted(&[exc("x")], &["x", "xx", "d/x"]), ["xx", "d/x"]);
    }

    #[test]
    fn bad_patterns_name_the_flag() {
        let e = Filter::new(&[inc("ok"), exc("a[")]).unwrap_err();
        assert!(e.starts_with("--exclude \"a[\": '[' opens"), "{e}");
        let e = Filter::new(&[inc("")]).unwrap_err();
        assert!(e.starts_with("--include \"\""), "{e}");
        let e = Filter::new(&[inc("[a/b]")]).unwrap_err();
        assert!(e.contains("cannot match '/'"), "{e}");
    }
}
