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
    cut(lo, hi, prefix, alphabet, None)
}

/// Like [`midpoint`], but when the last page spanned `[page_first, lo]`,
/// the cut is no further than [`PAGES_AHEAD`] such spans above `lo`.
///
/// Why: keys are rarely spread evenly over the alphabet. `hot/000000000` …
/// `hot/009999999` occupy a sliver of the space between `hot/` and the next
/// prefix, so cutting at the alphabet midpoint hands the thief an empty
/// range, again and again, one halving per page, ~4 bits per character of
/// common prefix. The last page says where the keys are dense; cutting a
/// few pages ahead leaves the victim a known amount of work and gives the
/// thief everything after, which the next thief cuts the same way. (The
/// ClickHouse proposal in LISTING-NOTES.md reads key spacing the same way.)
pub fn cut(
    lo: &str,
    hi: Option<&str>,
    prefix: &str,
    alphabet: &BTreeSet<char>,
    page_first: Option<&str>,
) -> Option<String> {
    cut_ahead(lo, hi, prefix, alphabet, page_first, PAGES_AHEAD)
}

/// A cut `pages` spans ahead: [`counter_ahead`] where the page is
/// numbered by a decimal counter, else [`cut_ahead`] (a Dask listing's
/// next task, python/shoal/dask.py).
pub fn cut_pages(
    lo: &str,
    hi: Option<&str>,
    prefix: &str,
    alphabet: &BTreeSet<char>,
    page_first: Option<&str>,
    pages: u32,
) -> Option<String> {
    page_first
        .and_then(|f| counter_ahead(lo, hi, f, pages))
        .or_else(|| cut_ahead(lo, hi, prefix, alphabet, page_first, pages))
}

/// Like [`cut`], but no further than `pages` spans of `[page_first, lo]`
/// above `lo`: where a caller that saw one page of keys wants a cut many
/// pages on (a Dask listing's next task, python/shoal/dask.py, about a
/// task's keys past the page it peeked at).
pub fn cut_ahead(
    lo: &str,
    hi: Option<&str>,
    prefix: &str,
    alphabet: &BTreeSet<char>,
    page_first: Option<&str>,
    pages: u32,
) -> Option<String> {
    if hi.is_some_and(|h| lo >= h) {
        return None;
    }
    let common = common_head(lo, hi, prefix);
    let head = &lo[..common];
    let lo_s: Vec<char> = lo[common..].chars().collect();
    let hi_s: Option<Vec<char>> = hi.map(|h| h[common..].chars().collect());
    let first_s: Option<Vec<char>> = page_first
        .filter(|f| f.starts_with(head) && *f < lo)
        .map(|f| f[common..].chars().collect());
    let digits = Digits::new(
        alphabet,
        [Some(lo_s.as_slice()), hi_s.as_deref(), first_s.as_deref()],
    );
    let longest = lo_s
        .len()
        .max(hi_s.as_ref().map_or(0, Vec::len))
        .max(first_s.as_ref().map_or(0, Vec::len));
    for len in longest + 1..=longest + MAX_EXTRA_DIGITS {
        let a = digits.number(&lo_s, len);
        let b = match &hi_s {
            Some(h) => digits.number(h, len),
            None => {
                let mut b = vec![0u32; len + 1];
                b[0] = 1;
                b
            }
        };
        let target = digits.target(&a, &b, first_s.as_deref(), len, pages.max(1));
        if let Some(cand) = digits.shortest_cut(head, lo, hi, &a, &target, len) {
            return Some(cand);
        }
    }
    None
}

/// Where a page of keys numbered by a decimal counter (`part-00016162-…`
/// … `part-00017161-…`) says the keys `pages` such pages above `lo` lie:
/// the counter field where `page_first` and `lo` first differ, advanced by
/// their difference times `pages` and written at its width
/// (`part-00316162`). None when the keys differ first elsewhere than in a
/// run of ASCII digits as wide in both, when the aim overflows the field,
/// or when it does not lie strictly between `lo` and `hi`. When `hi` has
/// the same field (an earlier cut) and the aim lies past it, the cut is
/// the counter halfway between them.
///
/// Why beside [`cut_ahead`]: read in the base of the alphabet seen (hex
/// hashes and letters beside the digits: 40 and more), a decimal counter
/// leaves most of each digit's room empty, so a cut aimed 300 pages of
/// `part-…` keys on landed 19,800 keys on, not 300,000, and a Dask
/// listing's rest was split 1:9 (bench/results/DASK-LISTING.md).
pub fn counter_ahead(lo: &str, hi: Option<&str>, page_first: &str, pages: u32) -> Option<String> {
    Counter::read(lo, hi, page_first)?.ahead(lo, hi, pages)
}

/// What a page numbered by a decimal counter says about cutting `[lo, hi)`.
#[derive(Debug, PartialEq)]
pub enum CounterCut {
    /// Cut here ([`counter_ahead`]).
    At(String),
    /// The counter says the range holds at most one more page like
    /// `[page_first, lo]` (their counters' distance), so a cut would cost
    /// a request and save none: the victim's next request lists it all.
    ///
    /// Why: the alphabet's cut lands coarsely, but a counter's halves are
    /// exact, and thieves that take the lowest range (a sorted listing)
    /// halved the same head down to ranges of 1-3 keys: a paused-clock
    /// listing of 400 pages in one 100,000-key piece took 519 requests,
    /// not 434.
    NearEnd,
    /// Not numbered so, or no room for the counter's aim: cut some other
    /// way.
    None,
}

/// [`counter_ahead`] for a lister's steal, which also needs to know when
/// the counter says not to cut ([`CounterCut::NearEnd`]); the page is read
/// once for both.
pub fn counter_cut(lo: &str, hi: Option<&str>, page_first: &str, pages: u32) -> CounterCut {
    let Some(c) = Counter::read(lo, hi, page_first) else {
        return CounterCut::None;
    };
    if c.field
        .end
        .is_some_and(|e| e.saturating_sub(c.field.pos) <= c.field.pos - c.first)
    {
        return CounterCut::NearEnd;
    }
    c.ahead(lo, hi, pages)
        .map_or(CounterCut::None, CounterCut::At)
}

/// A decimal counter field shared by a page's first and last keys
/// ([`counter_ahead`]).
struct Counter {
    /// The field in `lo`, the page's last key.
    field: Field,
    /// The field's value in the page's first key.
    first: u64,
}

impl Counter {
    fn read(lo: &str, hi: Option<&str>, page_first: &str) -> Option<Counter> {
        let (l, f) = (lo.as_bytes(), page_first.as_bytes());
        let i = l.iter().zip(f).position(|(a, b)| a != b)?;
        if !l[i].is_ascii_digit() || !f[i].is_ascii_digit() || l[i] < f[i] {
            return None;
        }
        let start = l[..i]
            .iter()
            .rposition(|c| !c.is_ascii_digit())
            .map_or(0, |p| p + 1);
        let width = l[start..]
            .iter()
            .zip(&f[start..])
            .take_while(|(a, b)| a.is_ascii_digit() && b.is_ascii_digit())
            .count();
        let end = start + width;
        let whole = |s: &[u8]| s.get(end).is_none_or(|c| !c.is_ascii_digit());
        if width > 18 || !whole(l) || !whole(f) {
            return None;
        }
        let field = Field::read(lo, hi, start..end)?;
        Some(Counter {
            first: Field::value(page_first, &field.run)?,
            field,
        })
    }

    /// `pages` spans of the page above `lo`.
    fn ahead(&self, lo: &str, hi: Option<&str>, pages: u32) -> Option<String> {
        let pos = self.field.pos;
        let aim = (pos - self.first)
            .checked_mul(u64::from(pages))?
            .checked_add(pos)?;
        self.field.cut(lo, hi, aim)
    }
}

/// A decimal field of `lo` (the bytes `run`): its value there, and in
/// `hi` when `hi` shares everything before it.
struct Field {
    run: std::ops::Range<usize>,
    pos: u64,
    end: Option<u64>,
}

impl Field {
    fn read(lo: &str, hi: Option<&str>, run: std::ops::Range<usize>) -> Option<Field> {
        let end = hi
            .filter(|h| h.as_bytes().get(..run.start) == lo.as_bytes().get(..run.start))
            .and_then(|h| Field::value(h, &run));
        Some(Field {
            pos: Field::value(lo, &run)?,
            end,
            run,
        })
    }

    /// The decimal number at `run` in `s`, if every byte there is a digit.
    fn value(s: &str, run: &std::ops::Range<usize>) -> Option<u64> {
        let f = s.get(run.clone())?;
        f.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| f.parse().ok())?
    }

    /// `lo` up to the field, then `aim` at the field's width: or the value
    /// halfway to the end's, when the end is numbered in the same field
    /// and that is nearer (what is left is less than the aim). None when
    /// the aim does not move, overflows the field, or the cut does not
    /// lie strictly between `lo` and `hi`, or adds an empty or dot level.
    fn cut(&self, lo: &str, hi: Option<&str>, aim: u64) -> Option<String> {
        let (pos, width) = (self.pos, self.run.len());
        let aim = match self.end {
            Some(top) if top > pos && pos + (top - pos) / 2 < aim => pos + (top - pos) / 2,
            _ => aim,
        };
        if aim == pos || aim >= 10u64.pow(width as u32) {
            return None;
        }
        let cand = format!("{}{aim:0width$}", &lo[..self.run.start]);
        (cand.as_str() > lo && hi.is_none_or(|h| cand.as_str() < h) && (dirty(lo) || !dirty(&cand)))
            .then_some(cand)
    }
}

/// The folder number of `key`: the run of ASCII digits that ends the name
/// of its folder (`misc/shard-000/obj-7.bin` → `000`, `logs/2024/01/02/x`
/// → `02`), as the byte range of the run. None when the key has no folder
/// or its name does not end in a digit.
pub fn folder_number(key: &str) -> Option<std::ops::Range<usize>> {
    let slash = key.rfind('/')?;
    let start = key[..slash]
        .bytes()
        .rposition(|c| !c.is_ascii_digit())
        .map_or(0, |p| p + 1);
    (start < slash && slash - start <= 18).then_some(start..slash)
}

/// Where to cut when keys are numbered by a counter that restarts in
/// every folder, and a cut [`counter_ahead`] aims inside `lo`'s folder
/// lands past its end: `lo`'s folder number advanced by `folders`,
/// written at its width (`misc/shard-000/obj-…` → `misc/shard-032`), or
/// halfway to `hi` when `hi` numbers the same field. None when `lo` has
/// no folder number, the aim overflows the field, or it does not lie
/// strictly between `lo` and `hi`.
///
/// Why: a counter read inside one folder says nothing of the folders
/// after it. Aimed there, the victim keeps what is left of its folder and
/// the thief everything above, whose first page is a round trip away:
/// one folder a round trip. shoal-benchserver's `misc/shard-NNN/` (2,000
/// keys a folder in `list-20000000`) listed at 77,000 keys/s so; its
/// first million keys now take 1.8-2.0 s where they took 13.1-13.4 (16
/// workers, +10 ms each way), sorted 4.3-4.5 s where 13.3-13.4.
///
/// The lister (`parallel.rs`) learns which folder families restart their
/// counter: a range cut off inside its victim's folder whose first keys
/// lie in a later folder. Where folders are big the in-folder cut stands.
pub fn folder_ahead(lo: &str, hi: Option<&str>, folders: u32) -> Option<String> {
    let field = Field::read(lo, hi, folder_number(lo)?)?;
    field.cut(lo, hi, field.pos.checked_add(u64::from(folders))?)
}

/// Bytes of `lo` that every key of the range shares and a cut keeps: the
/// common prefix of the bounds, or the listing's prefix when there is no
/// upper bound. Always at a character boundary of `lo`.
fn common_head(lo: &str, hi: Option<&str>, prefix: &str) -> usize {
    match hi {
        Some(h) => lo
            .char_indices()
            .zip(h.chars())
            .take_while(|((_, a), b)| a == b)
            .map(|((i, a), _)| i + a.len_utf8())
            .last()
            .unwrap_or(0),
        None if lo.starts_with(prefix) => prefix.len(),
        None => 0,
    }
}

/// The alphabet keys below the common head are read in: digit 0 is "end
/// of key", digit `i` the `i`-th smallest character; a number is the
/// integer digit 0 followed by the key's digits.
struct Digits {
    alpha: Vec<char>,
    base: u32,
}

impl Digits {
    /// The characters seen so far and those of the bounds (never empty).
    fn new(seen: &BTreeSet<char>, bounds: [Option<&[char]>; 3]) -> Self {
        let mut alpha: BTreeSet<char> = seen.clone();
        for b in bounds.into_iter().flatten() {
            alpha.extend(b.iter().copied());
        }
        if alpha.is_empty() {
            alpha.insert('0');
        }
        let alpha: Vec<char> = alpha.into_iter().collect();
        let base = alpha.len() as u32 + 1;
        Digits { alpha, base }
    }

    /// `chars` as a number of `len` fractional digits.
    fn number(&self, chars: &[char], len: usize) -> Vec<u32> {
        let mut v = vec![0u32; len + 1];
        for (i, c) in chars.iter().enumerate().take(len) {
            v[i + 1] = self.alpha.binary_search(c).expect("in alphabet") as u32 + 1;
        }
        v
    }

    /// Where to aim between `a` and `b`: their midpoint, or, when the last
    /// page spanned `[first, a]`, `pages` such spans above `a` if that is
    /// nearer.
    fn target(
        &self,
        a: &[u32],
        b: &[u32],
        first: Option<&[char]>,
        len: usize,
        pages: u32,
    ) -> Vec<u32> {
        let base = self.base;
        let mut target = half(&add(a, b, base), base);
        if let Some(f) = first {
            let span = sub(a, &self.number(f, len), base);
            let ahead = add(a, &mul(&span, pages, base), base);
            if ahead[0] == 0 && ahead < target {
                target = ahead;
            }
        }
        target
    }

    /// The cut is the shortest prefix of `target` at or above the point
    /// halfway between `lo` (`a`) and `target`: short keys (offsets do not
    /// grow with every cut) that still leave the victim about its share.
    /// It must lie strictly between the bounds, and have no empty or dot
    /// level unless `lo` has one.
    fn shortest_cut(
        &self,
        head: &str,
        lo: &str,
        hi: Option<&str>,
        a: &[u32],
        target: &[u32],
        len: usize,
    ) -> Option<String> {
        let floor = digits_to_key(
            head,
            &half(&add(a, target, self.base), self.base)[1..],
            &self.alpha,
        );
        let mut cand = String::with_capacity(head.len() + len * 2);
        cand.push_str(head);
        for &d in trim(&target[1..]) {
            cand.push(self.alpha[(d.max(1) - 1) as usize]);
            if cand.as_str() > lo
                && cand >= floor
                && hi.is_none_or(|h| cand.as_str() < h)
                && (dirty(lo) || !dirty(&cand))
            {
                return Some(cand);
            }
        }
        None
    }
}

/// Pages of keys a victim keeps when the last page's spacing is known.
/// More means fewer cuts (each costs one extra request) but a slower ramp
/// to all workers busy; 8 pages of 1,000 keys is a few round trips of work.
pub const PAGES_AHEAD: u32 = 8;

fn trim(d: &[u32]) -> &[u32] {
    let mut d = d;
    while let Some((0, rest)) = d.split_last() {
        d = rest;
    }
    d
}

/// Digits to a key: an "end" followed by more digits cannot be spelled, so
/// it becomes the smallest character (which only moves the key up).
fn digits_to_key(head: &str, digits: &[u32], alpha: &[char]) -> String {
    let mut s = head.to_owned();
    for &d in trim(digits) {
        s.push(alpha[(d.max(1) - 1) as usize]);
    }
    s
}

fn add(a: &[u32], b: &[u32], base: u32) -> Vec<u32> {
    let mut out = vec![0u32; a.len()];
    let mut carry = 0;
    for i in (0..a.len()).rev() {
        let s = a[i] + b[i] + carry;
        out[i] = s % base;
        carry = s / base;
    }
    // Overflow past the integer digit saturates (it only happens with
    // the unbounded upper end, and then `target` is capped by the midpoint).
    if carry > 0 {
        out[0] = base;
    }
    out
}

/// `a - b` for `a >= b`.
fn sub(a: &[u32], b: &[u32], base: u32) -> Vec<u32> {
    let mut out = vec![0u32; a.len()];
    let mut borrow = 0i64;
    for i in (0..a.len()).rev() {
        let mut d = a[i] as i64 - b[i] as i64 - borrow;
        borrow = 0;
        if d < 0 {
            d += base as i64;
            borrow = 1;
        }
        out[i] = d as u32;
    }
    out
}

fn mul(a: &[u32], k: u32, base: u32) -> Vec<u32> {
    let mut out = vec![0u32; a.len()];
    let mut carry = 0u64;
    for i in (0..a.len()).rev() {
        let p = a[i] as u64 * k as u64 + carry;
        out[i] = (p % base as u64) as u32;
        carry = p / base as u64;
    }
    if carry > 0 {
        out[0] = base;
    }
    out
}

fn half(a: &[u32], base: u32) -> Vec<u32> {
    let mut out = vec![0u32; a.len()];
    let mut rem = 0;
    for i in 0..a.len() {
        let cur = rem * base + a[i];
        out[i] = cur / 2;
        rem = cur % 2;
    }
    out
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
    fn cuts_follow_the_density_of_the_last_page() {
        let alpha = abc("hot/0123456789p");
        let m = cut("hot/000000999", None, "", &alpha, Some("hot/000000000")).unwrap();
        // About PAGES_AHEAD pages of 1,000 keys ahead, not at the alphabet's middle.
        assert!(
            m.as_str() > "hot/000000999" && m.as_str() <= "hot/000009",
            "{m}"
        );
        assert!(m.as_str() >= "hot/000004", "{m}");
        // A near end wins over the spacing.
        let m = cut(
            "hot/000000999",
            Some("hot/000001"),
            "",
            &alpha,
            Some("hot/000000000"),
        )
        .unwrap();
        assert!(m.as_str() < "hot/000001", "{m}");
    }

    #[test]
    fn a_cut_can_aim_many_pages_ahead() {
        let alpha = abc("hot/0123456789p");
        let lo = "hot/000000999";
        let near = cut(lo, None, "", &alpha, Some("hot/000000000")).unwrap();
        let far = cut_ahead(lo, None, "", &alpha, Some("hot/000000000"), 100).unwrap();
        // 100 pages of 1,000 keys on, not 8 (read in the alphabet's base,
        // so the distance is rough), and still below the midpoint.
        assert!(far > near, "{far} vs {near}");
        assert!(
            far.as_str() >= "hot/00002" && far.as_str() <= "hot/0002",
            "{far}"
        );
        assert_eq!(
            cut_ahead(lo, None, "", &alpha, Some("hot/000000000"), 8).as_deref(),
            Some(near.as_str())
        );
    }

    #[test]
    fn cut_pages_counts_a_counter_in_decimal() {
        // 8 pages of 999 keys on, counted in decimal; read in the
        // alphabet's base the same aim lands about 2 pages on.
        let alpha = abc("hot/0123456789.jsonzpart-");
        let (first, lo) = ("hot/part-00000001000.json", "hot/part-00000001999.json");
        assert_eq!(
            cut_pages(lo, None, "hot/", &alpha, Some(first), 8).as_deref(),
            Some("hot/part-00000009991")
        );
        let rough = cut(lo, None, "hot/", &alpha, Some(first)).unwrap();
        assert!(rough.as_str() < "hot/part-000000045", "{rough}");
        // No counter: the alphabet's cut.
        for (lo, hi, first) in [
            ("hot/b", None, Some("hot/a")),
            ("hot/b", Some("hot/z"), None),
        ] {
            assert_eq!(
                cut_pages(lo, hi, "hot/", &alpha, first, 3),
                cut_ahead(lo, hi, "hot/", &alpha, first, 3)
            );
        }
    }

    #[test]
    fn the_head_is_what_every_key_of_the_range_shares() {
        assert_eq!(common_head("logs/é1", Some("logs/é2"), ""), "logs/é".len());
        assert_eq!(common_head("a", Some("b"), "a"), 0);
        // No upper bound: the listing's prefix, if the range lies in it.
        assert_eq!(common_head("logs/2024", None, "logs/"), 5);
        assert_eq!(common_head("a", None, "logs/"), 0);
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

    #[test]
    fn a_counter_is_advanced_in_decimal() {
        let f = "w/part-00016162-cf335071.json";
        let lo = "w/part-00017161-2ddd2867.json";
        // 999 a page, 300 pages on: 17,161 + 299,700.
        assert_eq!(
            counter_ahead(lo, None, f, 300).as_deref(),
            Some("w/part-00316861")
        );
        assert_eq!(
            counter_ahead(lo, Some("w/part-0031"), f, 300),
            None,
            "past the end"
        );
        // An end in the same field: halfway to it.
        assert_eq!(
            counter_ahead(lo, Some("w/part-00117161"), f, 300).as_deref(),
            Some("w/part-00067161")
        );
        assert_eq!(
            counter_ahead(lo, None, f, 200_000),
            None,
            "overflows the field"
        );
        // The keys differ first in a hash, or in fields of unequal width.
        assert_eq!(counter_ahead("w/a-1-ff", None, "w/a-1-0f", 3), None);
        assert_eq!(counter_ahead("w/a-10", None, "w/a-9", 3), None);
        assert_eq!(counter_ahead("w/a-19x", None, "w/a-123", 3), None);
        // A short run inside a longer key: obj-9 … obj-12 style stays out.
        assert_eq!(
            counter_ahead("s-2/x", None, "s-1/x", 3).as_deref(),
            Some("s-5")
        );
    }

    #[test]
    fn a_folder_number_is_advanced_in_decimal() {
        let lo = "misc/shard-000/obj-00000001999.bin";
        assert_eq!(folder_number(lo), Some(11..14));
        assert_eq!(
            folder_ahead(lo, None, 32).as_deref(),
            Some("misc/shard-032")
        );
        // Halfway to an end numbered the same way; none past another.
        assert_eq!(
            folder_ahead(lo, Some("misc/shard-010"), 32).as_deref(),
            Some("misc/shard-005")
        );
        assert_eq!(folder_ahead(lo, Some("misc/shard-001"), 32), None);
        assert_eq!(folder_ahead(lo, Some("misc/shard-01"), 32), None);
        assert_eq!(
            folder_ahead("logs/2024/01/02/x", None, 3).as_deref(),
            Some("logs/2024/01/05")
        );
        // No folder, a name not ending in a digit, an overflow.
        assert_eq!(folder_ahead("obj-1", None, 3), None);
        assert_eq!(folder_ahead("a/b/x-1", None, 3), None);
        assert_eq!(folder_ahead("s-98/x", None, 3), None);
        assert_eq!(folder_ahead("9/x", None, 0), None);
    }

    #[test]
    fn a_folder_cut_always_lands_strictly_between() {
        let mut seed = 11u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut found = 0;
        for _ in 0..5_000 {
            let w = 1 + next(5) as usize;
            let a = next(10u64.pow(w as u32));
            let lo = format!(
                "m/s-{a:0w$}/{}",
                ["", "x", "obj-7", "/", "é"][next(5) as usize]
            );
            let top = a + next(50);
            let his = [
                format!("m/s-{top:0w$}"),
                format!("m/s-{top:0w$}/a"),
                format!("m/s-{}", next(10u64.pow(w as u32))),
                format!("m/t{}", next(9)),
            ];
            for h in his.iter().map(|h| Some(h.as_str())).chain([None]) {
                if h.is_some_and(|h| h <= lo.as_str()) {
                    continue;
                }
                if let Some(c) = folder_ahead(&lo, h, 1 + next(64) as u32) {
                    found += 1;
                    assert!(c > lo && h.is_none_or(|h| c.as_str() < h), "{lo} {h:?} {c}");
                    assert!(!dirty(&c) || dirty(&lo), "{lo} {c}");
                }
            }
        }
        assert!(found > 5_000, "cuts found: {found}");
    }

    #[test]
    fn a_counter_cut_always_lands_strictly_between() {
        let mut seed = 7u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..5_000 {
            let w = 1 + next(6) as usize;
            let a = next(10u64.pow(w as u32));
            let b = a + next(10u64.pow(w as u32) - a);
            let f = format!("p/{a:0w$}-{}", next(99));
            let lo = format!("p/{b:0w$}-{}", next(99));
            let hi = format!("p/{:0w$}", b + next(1000));
            let pages = 1 + next(500) as u32;
            for h in [None, Some(hi.as_str())] {
                if let Some(c) = counter_ahead(&lo, h, &f, pages) {
                    assert!(
                        c > lo && h.is_none_or(|h| c.as_str() < h),
                        "{f} {lo} {h:?} {c}"
                    );
                }
            }
        }
    }
}
