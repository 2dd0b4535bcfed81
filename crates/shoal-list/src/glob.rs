//! URL globs with `gcloud storage` semantics, and what a server can be told
//! about them.
//!
//! A cloud key is a glob when it contains `*`, `?` or `[`. Then:
//!
//! - `*` and `?` match within one level (never a `/`); `[abc]`, `[a-z]`,
//!   `[!a-z]` match one character of a class;
//! - `**` matches across levels: as a whole level (`a/**/b`, `**/b`, `a/**`)
//!   it stands for zero or more levels, so `a/**/b` also matches `a/b`;
//!   inside a level (`logs/**.gz`, `2024**`) it matches any run of
//!   characters, `/` included (gcloud's cloud-URL meaning);
//! - everything else is literal, `{`, `}`, `,` and `\` included: keys are
//!   opaque and gcloud gives those no meaning, so neither do we. To name a
//!   key holding `*`, `?` or `[`, put the character in a class: `[*]`.
//!
//! A key without wildcards is never a glob: `gs://b/a[1` is an error only
//! because `[` opens a class that does not close; `gs://b/a]` is literal.
//!
//! Matching compiles the glob to one anchored regular expression
//! (regex-automata's meta engine, Unicode mode: a `?` or a class matches
//! one *character*, as in gcloud, so `?/x` matches `é/x`). Rejected:
//! globset, the first choice — it matches bytes (`(?-u)`), so `?` matches
//! one byte of `é` and a class holding `é` never matches it, and its `{a,b}`
//! and `\` escapes would change the meaning of keys that hold those
//! characters. Hand-written backtracking matching: `a*a*a*…b` would be
//! exponential; the regex engines are linear.
//!
//! The server is told three things, each only a narrowing: the literal
//! prefix (everything before the first wildcard), whether a `/` delimiter
//! may be used (no `**` and every wildcard in the last level, so no match
//! can lie below a common prefix), and on GCS a `matchGlob`. The
//! `matchGlob` is written as a *superset* of our glob (whole-level `**` are
//! loosened to GCS's "any characters"), and left out when the key holds a
//! character GCS's glob syntax would read differently from ours (`{`, `}`,
//! `\`). A server that ignores it (fake-gcs-server) or reads it more
//! loosely costs bytes, never correctness: every result is re-checked here.

use regex_automata::meta::Regex;
use shoal_core::{Error, Op, Result};

/// Whether a key contains a wildcard (`*`, `?`, `[`).
pub fn has_wildcard(key: &str) -> bool {
    key.contains(['*', '?', '['])
}

/// A key pattern, parsed once: literal prefix, matcher, server hints.
#[derive(Debug, Clone)]
pub struct KeyGlob {
    raw: String,
    literal_prefix: String,
    matcher: Regex,
    /// Anything below a level `P` matches (`P/**`).
    below: Regex,
    /// The anchored patterns of `matcher` and `below`, for
    /// [`KeyGlob::may_match_under`].
    patterns: [String; 2],
    crosses_levels: bool,
    match_glob: Option<String>,
}

impl KeyGlob {
    /// Parses the key of `url`. `Ok(None)` when the key has no wildcard
    /// (it is a literal name or prefix). Errors are one line naming the URL.
    pub fn parse(url: &str, key: &str) -> Result<Option<KeyGlob>> {
        if !has_wildcard(key) {
            return Ok(None);
        }
        let bad = |msg: String| Error::invalid(Op::Parse, url, msg);
        let first = key.find(['*', '?', '[']).expect("has a wildcard");
        let literal_prefix = key[..first].to_owned();
        let (body, crosses_levels) = translate(key).map_err(bad)?;
        let matcher = compile(&format!("^{body}$")).map_err(bad)?;
        let below = if key.ends_with('/') {
            format!("^{body}.*$")
        } else {
            format!("^{body}/.*$")
        };
        let patterns = [format!("^{body}$"), below];
        let below = compile(&patterns[1]).map_err(bad)?;
        let match_glob = if key.contains(['{', '}', '\\']) {
            None
        } else {
            Some(server_glob(key))
        };
        Ok(Some(KeyGlob {
            raw: key.to_owned(),
            literal_prefix,
            matcher,
            below,
            patterns,
            crosses_levels,
            match_glob,
        }))
    }

    /// The key pattern as typed.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Everything before the first wildcard: the listing prefix.
    pub fn literal_prefix(&self) -> &str {
        &self.literal_prefix
    }

    /// Whether `key` matches.
    pub fn matches(&self, key: &str) -> bool {
        self.matcher.is_match(key)
    }

    /// Whether `key` matches or lies below a level that matches (what a
    /// recursive command acts on: `rm -r gs://b/d*` removes `d1/x`).
    pub fn matches_or_below(&self, key: &str) -> bool {
        self.matcher.is_match(key) || self.below.is_match(key)
    }

    /// Whether a common prefix (`dir/`, from a delimiter listing) names a
    /// level that matches: `d*` matches the prefix `d1/`.
    pub fn matches_prefix(&self, prefix: &str) -> bool {
        let p = prefix.strip_suffix('/').unwrap_or(prefix);
        self.matcher.is_match(p) || self.matcher.is_match(prefix)
    }

    /// Whether some key that starts with `prefix` could match (with
    /// `recursive`, or lie below a matching level): what a copy of this
    /// glob into the folder `prefix` of the same bucket must know, since
    /// such a copy would write over what it is still reading. Exact, not
    /// a guess from the literal prefix: `data/*.csv` can match nothing
    /// under `data/archive/`, `data/**` can. Each byte of `prefix` is fed
    /// to a lazy DFA of the glob; the answer is no only when it dies. A
    /// DFA that gives up answers yes, the safe side.
    pub fn may_match_under(&self, prefix: &str, recursive: bool) -> bool {
        let patterns = if recursive {
            &self.patterns[..]
        } else {
            &self.patterns[..1]
        };
        patterns
            .iter()
            .any(|p| viable(p, prefix.as_bytes()).unwrap_or(true))
    }

    /// Whether a match can contain a `/` after the literal prefix's last
    /// level: `**` anywhere, or a wildcard before the last `/`.
    pub fn crosses_levels(&self) -> bool {
        self.crosses_levels
    }

    /// Whether a `/`-delimited listing of the literal prefix sees every
    /// match as an object (no match hides below a common prefix).
    pub fn delimiter_safe(&self) -> bool {
        !self.crosses_levels
    }

    /// The GCS `matchGlob` to send (a superset of this glob), if any.
    pub fn match_glob(&self) -> Option<&str> {
        self.match_glob.as_deref()
    }

    /// The `matchGlob` for a recursive command: this glob or anything below
    /// it. `P**` is a superset of both.
    pub fn match_glob_or_below(&self) -> Option<String> {
        self.match_glob
            .as_ref()
            .map(|g| format!("{}**", g.trim_end_matches('*')))
    }
}

/// Whether the anchored `pattern` can still match after reading `prefix`.
fn viable(pattern: &str, prefix: &[u8]) -> std::result::Result<bool, String> {
    use regex_automata::hybrid::dfa::DFA;
    use regex_automata::{Anchored, Input};
    let dfa = DFA::new(pattern).map_err(|e| e.to_string())?;
    let mut cache = dfa.create_cache();
    let input = Input::new(prefix).anchored(Anchored::Yes);
    let mut sid = (dfa.start_state_forward(&mut cache, &input)).map_err(|e| e.to_string())?;
    for &b in prefix {
        sid = (dfa.next_state(&mut cache, sid, b)).map_err(|e| e.to_string())?;
        if sid.is_dead() {
            return Ok(false);
        }
        if sid.is_quit() {
            return Ok(true);
        }
    }
    Ok(true)
}

pub(crate) fn compile(re: &str) -> std::result::Result<Regex, String> {
    Regex::new(re).map_err(|e| format!("invalid glob: {e}"))
}

const UNCLOSED: &str =
    "'[' opens a character class that is never closed (write [[] for a literal '[')";

/// A character as a regex literal (inside or outside a class).
fn lit(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:x}}}", c as u32));
    }
}

/// Our syntax → a regex body (unanchored). Returns it and whether a
/// match can hold a `/` beyond the literal prefix's levels.
pub(crate) fn translate(key: &str) -> std::result::Result<(String, bool), String> {
    let chars: Vec<char> = key.chars().collect();
    // `(?s)`: keys may hold newlines, and `.` must match them too.
    let mut out = String::with_capacity(key.len() * 2 + 8);
    out.push_str("(?s:");
    let mut crosses = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i = match c {
            '*' => stars(&chars, i, &mut out, &mut crosses),
            '?' => {
                out.push_str("[^/]");
                i + 1
            }
            '[' => class(&chars, i, &mut out)?,
            _ => {
                lit(&mut out, c);
                i + 1
            }
        };
    }
    out.push(')');
    // A wildcard before the last '/' also puts matches in several levels:
    // a delimiter listing of the literal prefix would fold them away.
    let first_wild = key.find(['*', '?', '[']).unwrap_or(key.len());
    if key[first_wild..].contains('/') {
        crosses = true;
    }
    Ok((out, crosses))
}

/// The run of `*` at `chars[i]` as a regex; returns where the glob goes
/// on. `*` stays within a level; `**` crosses levels (`crosses`), and as a
/// whole level (`**/`) stands for zero or more whole levels.
fn stars(chars: &[char], i: usize, out: &mut String, crosses: &mut bool) -> usize {
    let mut n = 0;
    while i + n < chars.len() && chars[i + n] == '*' {
        n += 1;
    }
    if n == 1 {
        out.push_str("[^/]*");
        return i + 1;
    }
    *crosses = true;
    let at_start = i == 0 || chars[i - 1] == '/';
    let followed_by_slash = i + n < chars.len() && chars[i + n] == '/';
    if at_start && followed_by_slash {
        // `**/` as a whole level: zero or more whole levels.
        out.push_str("(?:.*/)?");
        i + n + 1
    } else {
        // `a/**`, `**`, or inside a level: any characters.
        out.push_str(".*");
        i + n
    }
}

/// The `[...]` class at `chars[i]` as a regex class that never matches
/// `/` (a class that could is refused: it would cross a level); returns
/// where the glob goes on.
fn class(chars: &[char], i: usize, out: &mut String) -> std::result::Result<usize, String> {
    let mut j = i + 1;
    let negated = j < chars.len() && (chars[j] == '!' || chars[j] == '^');
    if negated {
        j += 1;
    }
    let first = j;
    let mut members: Vec<(char, char)> = Vec::new();
    loop {
        if j >= chars.len() {
            return Err(UNCLOSED.into());
        }
        let m = chars[j];
        if m == ']' && j > first {
            break;
        }
        if m == '/' {
            let class: String = chars[i..].iter().collect();
            return Err(format!("a character class cannot match '/': {class}"));
        }
        if j + 2 < chars.len() && chars[j + 1] == '-' && chars[j + 2] != ']' {
            let hi = chars[j + 2];
            if hi < m {
                return Err(format!("invalid character range {m}-{hi} in a [...] class"));
            }
            if hi == '/' || (m..=hi).contains(&'/') {
                return Err(format!(
                    "a character class cannot match '/': range {m}-{hi}"
                ));
            }
            members.push((m, hi));
            j += 3;
        } else {
            members.push((m, m));
            j += 1;
        }
    }
    out.push('[');
    if negated {
        out.push('^');
        out.push('/');
    }
    for (a, b) in members {
        lit(out, a);
        if a != b {
            out.push('-');
            lit(out, b);
        }
    }
    out.push(']');
    Ok(j + 1)
}

/// Our glob as a GCS `matchGlob` that matches at least what ours does.
fn server_glob(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    let mut out = String::with_capacity(key.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '*' {
            let mut n = 0;
            while i + n < chars.len() && chars[i + n] == '*' {
                n += 1;
            }
            if n == 1 {
                out.push('*');
                i += 1;
                continue;
            }
            out.push_str("**");
            let at_end = i + n == chars.len() || chars[i + n] == '/';
            i += n;
            // `a/**/b` → `a/**b`, `**/b` → `**b`: "any characters" covers
            // zero levels too.
            if at_end && i < chars.len() {
                i += 1;
            }
            continue;
        }
        if c == '[' && i + 1 < chars.len() && chars[i + 1] == '^' {
            out.push_str("[!");
            i += 2;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(p: &str) -> KeyGlob {
        KeyGlob::parse("gs://b/x", p).unwrap().expect("a glob")
    }

    /// Whether a copy of a glob into a folder of the same bucket could
    /// write over a key the glob reads: (glob, folder, recursive, may).
    #[test]
    fn may_match_under_a_folder() {
        for (glob, folder, recursive, may) in [
            ("p/*", "p/", false, true),
            ("p/*", "", false, true),
            ("*", "", false, true),
            ("p/**", "p/sub/", false, true),
            ("p/**", "p/sub/deeper/", false, true),
            ("q/**", "q/", true, true),
            ("data/*.csv", "data/archive/", false, false),
            ("data/*.csv", "data/archive/", true, false),
            ("data/*", "data/archive/", false, false),
            // `-r`: everything below a matching level is read too.
            ("data/*", "data/archive/", true, true),
            ("data/*.csv", "other/", false, false),
            ("p*", "pq/", false, false),
            ("p*", "pq/", true, true),
            ("p*/x", "pq/", false, true),
            ("a/**/b", "a/x/y/", false, true),
            ("a/?/b", "a/é/", false, true),
            ("a/?/b", "a/éé/", false, false),
            ("[xy]/*", "z/", true, false),
            ("[xy]/*", "y/", false, true),
        ] {
            assert_eq!(
                g(glob).may_match_under(folder, recursive),
                may,
                "{glob} under {folder:?} (recursive {recursive})"
            );
        }
    }

    /// The table: pattern, key, matches?
    const CASES: &[(&str, &str, bool)] = &[
        ("folder/ABC*.zip", "folder/ABC.zip", true),
        ("folder/ABC*.zip", "folder/ABC123.zip", true),
        ("folder/ABC*.zip", "folder/ABC/deep.zip", false),
        ("folder/ABC*.zip", "folder/ABC1.zip.bak", false),
        ("folder/ABC*.zip", "other/ABC1.zip", false),
        ("*", "top", true),
        ("*", "dir/x", false),
        ("*.txt", "a.txt", true),
        ("*.txt", "d/a.txt", false),
        ("??.txt", "ab.txt", true),
        ("??.txt", "a.txt", false),
        ("??.txt", "a/.txt", false),
        ("[aeiou].txt", "e.txt", true),
        ("[aeiou].txt", "x.txt", false),
        ("[a-e].txt", "c.txt", true),
        ("[!a-e].txt", "c.txt", false),
        ("[!a-e].txt", "z.txt", true),
        ("[^a-e].txt", "z.txt", true),
        ("[*].txt", "*.txt", true),
        ("[*].txt", "a.txt", false),
        ("**", "a/b/c", true),
        ("**", "", true),
        ("a/**", "a/b/c", true),
        ("a/**", "a/", true),
        ("a/**", "ab/c", false),
        ("**/c", "c", true),
        ("**/c", "a/b/c", true),
        ("**/c", "a/bc", false),
        ("a/**/c", "a/c", true),
        ("a/**/c", "a/b/c", true),
        ("a/**/c", "a/b/d/c", true),
        ("a/**/c", "a/bc", false),
        ("**.txt", "a.txt", true),
        ("**.txt", "a/b/c.txt", true),
        ("**.txt", "a/b/c.txt.gz", false),
        ("logs/**.gz", "logs/2024/01/x.gz", true),
        ("logs/**.gz", "logs/x.gz", true),
        ("logs/**.gz", "other/x.gz", false),
        ("2024**", "2024/01/x", true),
        ("2024**", "2024", true),
        ("dir*/x", "dir1/x", true),
        ("dir*/x", "dir1/y/x", false),
        ("*/x", "a/x", true),
        ("*/x", "a/b/x", false),
        // Literal characters that are special elsewhere.
        ("{a,b}*", "{a,b}1", true),
        ("{a,b}*", "a1", false),
        ("a\\*", "a\\x", true),
        ("a\\*", "a*", false),
        ("sp ace/ü*/100%", "sp ace/über/100%", true),
        ("a//*", "a//b", true),
        ("a//*", "a/b", false),
        ("x/*", "x/\u{80}é\u{10FFFF}", true),
        // One character, not one byte.
        ("?/*.txt", "é/ü.txt", true),
        ("[é中]", "中", true),
        ("[!é]", "é", false),
        ("[!é]", "\u{10FFFF}", true),
        ("a?c", "a\nc", true),
        ("[]]", "]", true),
        ("[!]]", "x", true),
        ("[a-]", "-", true),
        ("*", "a\nb", true),
    ];

    #[test]
    fn table() {
        for (pat, key, want) in CASES {
            assert_eq!(g(pat).matches(key), *want, "{pat:?} vs {key:?}");
        }
    }

    #[test]
    fn literal_prefixes_and_delimiters() {
        let c = g("folder/ABC*.zip");
        assert_eq!(c.literal_prefix(), "folder/ABC");
        assert!(c.delimiter_safe());
        assert_eq!(c.match_glob(), Some("folder/ABC*.zip"));
        assert_eq!(
            c.match_glob_or_below().as_deref(),
            Some("folder/ABC*.zip**")
        );
        assert!(!g("a/**/c").delimiter_safe());
        assert!(!g("*/x").delimiter_safe());
        assert!(!g("**.txt").delimiter_safe());
        assert_eq!(g("[ab]/x").literal_prefix(), "");
    }

    #[test]
    fn server_globs_are_supersets() {
        assert_eq!(g("a/**/c").match_glob(), Some("a/**c"));
        assert_eq!(g("**/c").match_glob(), Some("**c"));
        assert_eq!(g("a/**").match_glob(), Some("a/**"));
        assert_eq!(g("[^a]x").match_glob(), Some("[!a]x"));
        assert_eq!(g("{x}*").match_glob(), None);
        assert_eq!(g("a\\*").match_glob(), None);
    }

    #[test]
    fn literal_keys_are_not_globs() {
        for k in ["", "a", "a/b/", "a]b", "{x}", "a\\b"] {
            assert!(KeyGlob::parse("gs://b/k", k).unwrap().is_none(), "{k}");
        }
    }

    #[test]
    fn bad_globs_are_one_line_errors_naming_the_url() {
        for k in ["a[bc", "x/[", "[z-a]", "[a/b]c", "[!]", "[.-0]"] {
            let e = KeyGlob::parse(&format!("gs://b/{k}"), k).unwrap_err();
            let s = e.to_string();
            assert!(s.contains(&format!("gs://b/{k}")), "{s}");
            assert!(!s.contains('\n'));
            assert_eq!(e.kind(), shoal_core::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn below_and_prefix_matching() {
        let c = g("d*");
        assert!(c.matches_or_below("d1/x/y"));
        assert!(c.matches_or_below("d1"));
        assert!(!c.matches_or_below("e/d1"));
        assert!(c.matches_prefix("d1/"));
        assert!(!c.matches_prefix("e1/"));
    }
}
