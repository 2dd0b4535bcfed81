//! Where to cut a key range in two when nothing is known but the keys seen.
//!
//! Keys are read as fractions in a base made of the alphabet seen so far
//! (digit 0 is "end of key", so a key sorts before its extensions exactly
//! as it does byte-wise; Unicode scalar order is UTF-8 byte order). The cut
//! is the arithmetic midpoint of the two bounds after their common prefix,
//! made one digit longer at a time until it lies strictly between them.
//!
//! Rejected: splitting on raw bytes (a cut could fall inside a UTF-8
//! sequence, and the half of the byte space above `z` holds no keys in
//! most buckets); a fixed alphabet (`0-9a-z`: half the splits of a bucket
//! of hex or base64 names would land where no key can be). A learned
//! alphabet wastes at most a few empty requests on skewed data before the
//! cuts land inside the dense part, as each cut halves the remaining space.

use std::collections::BTreeSet;

/// Longest extension tried beyond the bounds' own length. Each digit
/// multiplies the resolution by the alphabet size (≥ 2), so 8 digits can
/// separate bounds 1/256 of a digit apart; closer bounds are not worth a
/// split (the range holds at most a page or two of keys that differ there).
const MAX_EXTRA_DIGITS: usize = 8;

/// A key strictly between `lo` and `hi` (`None` = no upper bound within
/// `prefix`), or None when there is no room worth splitting. `alphabet` is
/// the characters seen in keys so far; the result always starts with
/// `prefix` when `lo` does.
pub fn midpoint(
    lo: &str,
    hi: Option<&str>,
    prefix: &str,
    alphabet: &BTreeSet<char>,
) -> Option<String> {
    if hi.is_some_and(|h| lo >= h) {
        return None;
    }
    let common: usize = match hi {
        Some(h) => lo
            .char_indices()
            .zip(h.chars())
            .take_while(|((_, a), b)| a == b)
            .map(|((i, a), _)| i + a.len_utf8())
            .last()
            .unwrap_or(0),
        None if lo.starts_with(prefix) => prefix.len(),
        None => 0,
    };
    let head = &lo[..common];
    let lo_s: Vec<char> = lo[common..].chars().collect();
    let hi_s: Option<Vec<char>> = hi.map(|h| h[common..].chars().collect());
    let mut alpha: BTreeSet<char> = alphabet.clone();
    alpha.extend(lo_s.iter().copied());
    if let Some(h) = &hi_s {
        alpha.extend(h.iter().copied());
    }
    if alpha.is_empty() {
        alpha.insert('0');
    }
    let alpha: Vec<char> = alpha.into_iter().collect();
    let base = alpha.len() as u32 + 1;
    let digit = |c: char| alpha.binary_search(&c).expect("in alphabet") as u32 + 1;
    let longest = lo_s.len().max(hi_s.as_ref().map_or(0, Vec::len));
    for len in longest + 1..=longest + MAX_EXTRA_DIGITS {
        // Fixed point: index 0 is the integer digit.
        let mut a = vec![0u32; len + 1];
        for (i, c) in lo_s.iter().enumerate() {
            a[i + 1] = digit(*c);
        }
        let mut b = vec![0u32; len + 1];
        match &hi_s {
            Some(h) => {
                for (i, c) in h.iter().enumerate() {
                    b[i + 1] = digit(*c);
                }
            }
            None => b[0] = 1,
        }
        // (a + b) / 2, most significant digit first.
        let mut sum = vec![0u32; len + 1];
        let mut carry = 0;
        for i in (0..=len).rev() {
            let s = a[i] + b[i] + carry;
            sum[i] = s % base;
            carry = s / base;
        }
        let mut mid = vec![0u32; len + 1];
        let mut rem = carry;
        for i in 0..=len {
            let cur = rem * base + sum[i];
            mid[i] = cur / 2;
            rem = cur % 2;
        }
        debug_assert_eq!(mid[0], 0);
        // Digits to a key: drop trailing "ends"; an "end" followed by more
        // digits cannot be spelled, so it becomes the smallest character
        // (which only moves the cut up, away from `lo`).
        let mut digits = &mid[1..];
        while let Some((0, rest)) = digits.split_last() {
            digits = rest;
        }
        let mut cand = String::with_capacity(head.len() + digits.len() * 2);
        cand.push_str(head);
        // The shortest prefix of the midpoint that still lies above `lo` is
        // as good a cut and keeps keys from growing with every split.
        for &d in digits {
            cand.push(alpha[(d.max(1) - 1) as usize]);
            if cand.as_str() > lo
                && hi.is_none_or(|h| cand.as_str() < h)
                && (dirty(lo) || !dirty(&cand))
            {
                return Some(cand);
            }
        }
    }
    None
}

/// Whether a key has an empty or dot level (`a//b`, `x/./y`, `..`), which
/// some servers refuse even as an offset (MinIO: XMinioInvalidResourceName).
/// A cut may contain one only if the keys around it already do.
fn dirty(key: &str) -> bool {
    let mut levels = key.split('/');
    let last = levels.next_back();
    levels.any(|l| l.is_empty() || l == "." || l == "..")
        || last.is_some_and(|l| l == "." || l == "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abc(s: &str) -> BTreeSet<char> {
        s.chars().collect()
    }

    fn check(lo: &str, hi: Option<&str>, prefix: &str, alpha: &str) -> Option<String> {
        let m = midpoint(lo, hi, prefix, &abc(alpha));
        if let Some(m) = &m {
            assert!(m.as_str() > lo, "{m:?} > {lo:?}");
            if let Some(h) = hi {
                assert!(m.as_str() < h, "{m:?} < {h:?}");
            }
            assert!(m.starts_with(prefix) || !lo.starts_with(prefix));
        }
        m
    }

    #[test]
    fn halves_the_alphabet() {
        assert_eq!(check("a", Some("z"), "", "amz").as_deref(), Some("m"));
        let m = check("", None, "", "0123456789").unwrap();
        assert!(m.as_str() >= "4" && m.as_str() < "6", "{m}");
    }

    #[test]
    fn long_common_prefixes_are_kept() {
        let p = "x".repeat(500);
        let lo = format!("{p}/a");
        let hi = format!("{p}/b");
        let m = check(&lo, Some(&hi), "", "ab/x").unwrap();
        assert!(m.starts_with(&format!("{p}/a")), "{m}");
    }

    #[test]
    fn unbounded_ranges_stay_inside_the_prefix() {
        let m = check("logs/2024/0001", None, "logs/", "logs/20134").unwrap();
        assert!(m.starts_with("logs/"));
    }

    #[test]
    fn cuts_are_short_and_clean() {
        let lo = "hot/0450.dat";
        let m = check(lo, None, "", "hot/0123456789.da").unwrap();
        assert!(m.len() <= 5, "{m}");
        for _ in 0..50 {
            // Repeated cuts of one range do not grow without bound.
            let m2 = check(lo, Some(&m), "", "hot/0123456789.da");
            if let Some(m2) = m2 {
                assert!(m2.len() <= lo.len() + 3, "{m2}");
                assert!(!dirty(&m2));
            }
        }
        assert!(dirty("a//b") && dirty("x/./y") && dirty("..") && dirty("/a"));
        assert!(!dirty("a/b/") && !dirty("a.b/c"));
    }

    #[test]
    fn adjacent_keys_cannot_be_split() {
        assert_eq!(check("a", Some("a0"), "", "a0"), None);
        assert_eq!(check("b", Some("a"), "", "ab"), None);
    }

    #[test]
    fn non_ascii_and_high_code_points() {
        let m = check("é", Some("\u{10FFFF}"), "", "é\u{10FFFF}\u{80}").unwrap();
        assert!(m.as_str() > "é");
        let m = check("\u{80}", Some("\u{81}"), "", "\u{80}\u{81}").unwrap();
        assert!(m.starts_with('\u{80}'));
    }

    #[test]
    fn random_bounds_always_land_strictly_between() {
        use rand::Rng;
        let mut rng = rand::rng();
        let pool: Vec<char> = "ab/0z~é\u{7f}\u{10FFFF}".chars().collect();
        let mut found = 0;
        for _ in 0..5000 {
            let mut mk = || -> String {
                let n = rng.random_range(0..6);
                (0..n)
                    .map(|_| pool[rng.random_range(0..pool.len())])
                    .collect()
            };
            let (x, y) = (mk(), mk());
            let (lo, hi) = if x < y { (x, y) } else { (y, x) };
            let alpha: String = pool.iter().take(rng.random_range(1..pool.len())).collect();
            if check(&lo, Some(&hi), "", &alpha).is_some() {
                found += 1;
            }
            check(&lo, None, "", &alpha);
        }
        assert!(found > 2000, "splits found: {found}");
    }
}
