//! Globs: any key pattern parses or is refused with an error (no panic),
//! and a parsed glob's promises hold: what it matches starts with its
//! literal prefix, and every match is also matched "or below".
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_list::KeyGlob;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // "pattern\0candidate key"
    let (pattern, key) = s.split_once('\0').unwrap_or((s, s));
    let Ok(Some(g)) = KeyGlob::parse("gs://fuzz/", pattern) else {
        return;
    };
    let _ = g.match_glob();
    let _ = g.match_glob_or_below();
    let _ = g.delimiter_safe();
    let _ = g.matches_prefix(key);
    if g.matches(key) {
        assert!(key.starts_with(g.literal_prefix()), "{pattern:?} matched {key:?}");
        assert!(g.matches_or_below(key));
    }
});
