//! Synthetic listable buckets, for measuring full listings of huge buckets.
//!
//! Why: a listing benchmark needs a million keys, and seeding them into
//! MinIO takes ~25 minutes (~650 PUT/s) per run. A bucket named `list-N`
//! (N up to ten million) instead holds N generated keys, built on first use,
//! sorted byte-wise and kept in memory; each page is cut by binary search,
//! so it costs O(page) whatever N is. Its shape is skewed on purpose: 90% of
//! the keys lie flat under one long prefix, the rest spread over 1,000 small
//! prefixes, and ~2% have bytes above 0x7F (`données-…`, `日本語/…`).
//!
//! Both list APIs, with the parameters clients send for a full listing:
//! S3 ListObjectsV2 (`prefix`, `delimiter`, `start-after`,
//! `continuation-token`, `max-keys` ≤ 1000, `encoding-type=url`) and V1
//! (`marker`, `NextMarker`); GCS `objects.list` (`prefix`, `delimiter`,
//! `startOffset` inclusive, `endOffset` exclusive, `pageToken`,
//! `maxResults` ≤ 1000, and `fields=items(a,b),prefixes,nextPageToken`
//! projections). `matchGlob` is ignored, as fake-gcs-server does. Page
//! tokens are the next key to return (base64).
//!
//! Every listed key can be read: its size is one of eight (1–128 KiB, by a
//! hash of the key), its bytes are the pattern's and its CRC32C is right.
//! A name not in the set is a 404. No `md5Hash` is given (as for GCS
//! composite objects) and the S3 ETag is not an MD5, so no client checks a
//! made-up digest. Any other bucket lists as empty.
//!
//! Past ten million (`list-100000000`, up to [`MAX_COUNTED`]) the keys are
//! not held: key `i` is computed from `i` in an order that is also the
//! byte order (10% under `misc/shard-NNN/`, 1,000 shards in a row, the
//! rest flat under the hot prefix, every index 11 digits wide, ASCII
//! only), so a page is found by binary search over computed keys and the
//! server's memory stays flat: a stand-in for buckets of billions of keys.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;

use crate::http::{crc_b64, xml_escape};
use crate::stored::Stored;

/// The largest `list-N` whose keys are held (~1.3 GB of keys).
const MAX_KEYS: usize = 10_000_000;
/// The largest `list-N` served (computed keys past [`MAX_KEYS`]).
pub const MAX_COUNTED: usize = 100_000_000_000;
/// Both APIs cap a page at this many entries (keys plus prefixes).
const MAX_PAGE: usize = 1000;
/// Where 90% of the keys live.
pub const HOT: &str = "warehouse/events/clickstream/v2/region=europe-west4/dt=2024-06-01/hour=13/";
const MTIME: &str = "2024-01-01T00:00:00.000Z";

/// N from a bucket named `list-N`.
pub fn size_of_bucket(bucket: &str) -> Option<usize> {
    let n: usize = bucket.strip_prefix("list-")?.parse().ok()?;
    (n <= MAX_COUNTED).then_some(n)
}

/// The keys of one `list-N` bucket: held and sorted, or computed.
pub enum KeySet {
    Held(Vec<String>),
    /// N keys, key `i` from [`KeySet::counted_key`].
    Counted(usize),
}

impl Default for KeySet {
    fn default() -> Self {
        KeySet::Held(Vec::new())
    }
}

impl KeySet {
    pub fn new(n: usize) -> Self {
        if n <= MAX_KEYS {
            KeySet::Held(keys(n))
        } else {
            KeySet::Counted(n)
        }
    }

    pub fn len(&self) -> usize {
        match self {
            KeySet::Held(v) => v.len(),
            KeySet::Counted(n) => *n,
        }
    }

    /// Key `i` (`i < len()`).
    pub fn key(&self, i: usize) -> Cow<'_, str> {
        match self {
            KeySet::Held(v) => Cow::Borrowed(v[i].as_str()),
            KeySet::Counted(n) => Cow::Owned(Self::counted_key(*n, i)),
        }
    }

    fn get(&self, i: usize) -> Option<Cow<'_, str>> {
        (i < self.len()).then(|| self.key(i))
    }

    /// Key `i` of `n` computed keys: the first tenth `misc/shard-NNN/obj-…`
    /// (shards in a row), the rest under [`HOT`]; byte order is index order.
    pub fn counted_key(n: usize, i: usize) -> String {
        let misc = n / 10;
        if i < misc {
            let shard = i * 1000 / misc;
            format!("misc/shard-{shard:03}/obj-{i:011}.bin")
        } else {
            format!("{HOT}part-{:011}.json.zst", i - misc)
        }
    }

    /// The first index whose key is not `before` (keys with `before` true
    /// come first, as for `slice::partition_point`).
    fn partition_point(&self, before: impl Fn(&str) -> bool) -> usize {
        match self {
            KeySet::Held(v) => v.partition_point(|x| before(x)),
            KeySet::Counted(n) => {
                let (mut lo, mut hi) = (0, *n);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if before(&Self::counted_key(*n, mid)) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo
            }
        }
    }

    /// Whether `name` is one of the keys.
    pub fn contains(&self, name: &str) -> bool {
        let i = self.partition_point(|k| k < name);
        self.get(i).is_some_and(|k| k == name)
    }
}

/// The keys of `list-N`, sorted (Rust orders `str` by bytes, as S3 and GCS do).
pub fn keys(n: usize) -> Vec<String> {
    let hot = n / 10 * 9 + n % 10 * 9 / 10;
    let mut v = Vec::with_capacity(n);
    for i in 0..hot {
        let h = mix(i as u64) as u32;
        let stem = if i % 100 == 7 { "données" } else { "part" };
        v.push(format!("{HOT}{stem}-{i:08}-{h:08x}.json.zst"));
    }
    for j in 0..n - hot {
        if j % 10 == 3 {
            v.push(format!("misc/日本語/ファイル-{j:07}.txt"));
        } else {
            let shard = mix(j as u64 ^ 0xABCD) % 1000;
            v.push(format!("misc/shard-{shard:03}/obj-{j:07}.bin"));
        }
    }
    v.sort_unstable();
    v
}

fn mix(mut x: u64) -> u64 {
    // splitmix64's finaliser: a fixed, well-spread hash of an index.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Size and CRC32C of a listed key: one of eight sizes, by a hash of the key.
pub fn object_of(key: &str) -> Stored {
    static CRCS: OnceLock<[u32; 8]> = OnceLock::new();
    let crcs = CRCS.get_or_init(|| std::array::from_fn(|i| crate::pattern::crc_of_size(1024 << i)));
    let i = (crc32c::crc32c(key.as_bytes()) % 8) as usize;
    Stored {
        size: 1024 << i,
        crc: crcs[i],
    }
}

/// The key sets built so far, by N.
#[derive(Default)]
pub struct Lists(Mutex<HashMap<usize, Arc<KeySet>>>);

impl Lists {
    /// The keys of `bucket` if it is a `list-N` bucket (built on first use).
    pub fn get(&self, bucket: &str) -> Option<Arc<KeySet>> {
        let n = size_of_bucket(bucket)?;
        let mut m = self.0.lock().unwrap();
        Some(
            m.entry(n)
                .or_insert_with(|| Arc::new(KeySet::new(n)))
                .clone(),
        )
    }
}

/// One page: keys, common prefixes, and the key the next page starts at.
struct Page<'a> {
    keys: Vec<Cow<'a, str>>,
    prefixes: Vec<String>,
    next: Option<String>,
}

/// Index of the first key >= `k`.
fn lower(keys: &KeySet, k: &str) -> usize {
    keys.partition_point(|x| x < k)
}

/// Index of the first key past `p` and everything that starts with `p`.
fn past_prefix(keys: &KeySet, p: &str) -> usize {
    keys.partition_point(|x| x < p || x.starts_with(p))
}

/// Walks from `start` while keys have `prefix` (and are < `end`), rolling
/// keys with `delim` after the prefix into one common prefix each.
fn page<'a>(
    keys: &'a KeySet,
    prefix: &str,
    delim: &str,
    mut i: usize,
    end: Option<&str>,
    max: usize,
) -> Page<'a> {
    let mut p = Page {
        keys: Vec::new(),
        prefixes: Vec::new(),
        next: None,
    };
    while let Some(k) = keys.get(i) {
        if !k.starts_with(prefix) || end.is_some_and(|e| &*k >= e) {
            break;
        }
        if p.keys.len() + p.prefixes.len() == max {
            p.next = Some(k.into_owned());
            break;
        }
        match k[prefix.len()..].find(delim).filter(|_| !delim.is_empty()) {
            Some(d) => {
                let cp = k[..prefix.len() + d + delim.len()].to_owned();
                i = past_prefix(keys, &cp);
                p.prefixes.push(cp);
            }
            None => {
                p.keys.push(k);
                i += 1;
            }
        }
    }
    p
}

fn token(next: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(next)
}

fn untoken(t: &str) -> Option<String> {
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t.trim_end_matches('='))
        .ok()?;
    String::from_utf8(b).ok()
}

fn max_of(v: Option<&String>) -> usize {
    v.and_then(|m| m.parse::<usize>().ok())
        .unwrap_or(MAX_PAGE)
        .clamp(1, MAX_PAGE)
}

/// The parameters of an S3 listing request, as the client sent them.
struct S3Query<'q> {
    prefix: &'q str,
    delim: &'q str,
    /// ListObjectsV2 (`list-type=2`), else V1.
    v2: bool,
    max: usize,
    /// `encoding-type=url`: keys and prefixes come back percent-encoded.
    url: bool,
    /// Where the listing resumes: `start-after` (V2) or `marker` (V1).
    after: &'q str,
    /// `continuation-token` (V2 only).
    token: &'q str,
}

impl<'q> S3Query<'q> {
    fn parse(q: &'q HashMap<String, String>) -> Self {
        let get = |k: &str| q.get(k).map(String::as_str).unwrap_or("");
        let v2 = get("list-type") == "2";
        S3Query {
            prefix: get("prefix"),
            delim: get("delimiter"),
            v2,
            max: max_of(q.get("max-keys")),
            url: get("encoding-type") == "url",
            after: if v2 {
                get("start-after")
            } else {
                get("marker")
            },
            token: get("continuation-token"),
        }
    }

    /// A key or prefix as the client asked to see it: percent-encoded under
    /// `encoding-type=url`, then XML-escaped.
    fn enc(&self, s: &str) -> String {
        let s = if self.url {
            percent_encoding::utf8_percent_encode(s, S3_URL).to_string()
        } else {
            s.to_owned()
        };
        xml_escape(&s)
    }

    /// The index of the page's first key: past the prefix's start, the
    /// start-after key or marker, and the continuation token. `None` when
    /// the token is not one this server made.
    fn start(&self, keys: &KeySet) -> Option<usize> {
        let mut start = lower(keys, self.prefix);
        let after = self.after;
        if !after.is_empty() {
            let mut i = keys.partition_point(|x| x <= after);
            // A V1 NextMarker that is a common prefix resumes past all of it.
            if !self.v2 && !self.delim.is_empty() && after.ends_with(self.delim) {
                i = past_prefix(keys, after);
            }
            start = start.max(i);
        }
        if self.v2 && !self.token.is_empty() {
            start = start.max(lower(keys, &untoken(self.token)?));
        }
        Some(start)
    }
}

/// S3 `GET /B?list-type=2` (or V1 without it): the ListBucketResult XML.
/// `None` when a continuation token is not one this server made.
pub fn s3(keys: &KeySet, bucket: &str, q: &HashMap<String, String>) -> Option<String> {
    let q = S3Query::parse(q);
    let p = page(keys, q.prefix, q.delim, q.start(keys)?, None, q.max);
    let mut x = String::with_capacity(256 + 240 * (p.keys.len() + p.prefixes.len()));
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    s3_header(&mut x, bucket, &q, &p);
    if q.v2 {
        s3_resume_v2(&mut x, &q, &p);
    } else {
        s3_resume_v1(&mut x, &q, &p);
    }
    s3_entries(&mut x, &q, &p);
    x.push_str("</ListBucketResult>");
    Some(x)
}

/// The fields every S3 listing answer starts with.
fn s3_header(x: &mut String, bucket: &str, q: &S3Query, p: &Page) {
    *x += &format!(
        "<Name>{}</Name><Prefix>{}</Prefix><MaxKeys>{}</MaxKeys><IsTruncated>{}</IsTruncated>",
        xml_escape(bucket),
        q.enc(q.prefix),
        q.max,
        p.next.is_some()
    );
    if !q.delim.is_empty() {
        *x += &format!("<Delimiter>{}</Delimiter>", q.enc(q.delim));
    }
    if q.url {
        x.push_str("<EncodingType>url</EncodingType>");
    }
}

/// V2's count and where the next page starts (an opaque token).
fn s3_resume_v2(x: &mut String, q: &S3Query, p: &Page) {
    *x += &format!("<KeyCount>{}</KeyCount>", p.keys.len() + p.prefixes.len());
    if !q.token.is_empty() {
        *x += &format!(
            "<ContinuationToken>{}</ContinuationToken>",
            xml_escape(q.token)
        );
    }
    if let Some(n) = &p.next {
        *x += &format!(
            "<NextContinuationToken>{}</NextContinuationToken>",
            token(n)
        );
    }
    if !q.after.is_empty() {
        *x += &format!("<StartAfter>{}</StartAfter>", q.enc(q.after));
    }
}

/// V1's marker and where the next page starts (the last entry's name).
fn s3_resume_v1(x: &mut String, q: &S3Query, p: &Page) {
    *x += &format!("<Marker>{}</Marker>", q.enc(q.after));
    // The last entry of this page, as S3 gives it (V1 clients resume there).
    let last = p
        .keys
        .last()
        .map(|k| &**k)
        .max(p.prefixes.last().map(String::as_str));
    if let (Some(_), Some(l)) = (&p.next, last) {
        *x += &format!("<NextMarker>{}</NextMarker>", q.enc(l));
    }
}

/// The page's keys (`Contents`), then its common prefixes.
fn s3_entries(x: &mut String, q: &S3Query, p: &Page) {
    for k in &p.keys {
        let o = object_of(k);
        *x += &format!(
            "<Contents><Key>{}</Key><LastModified>{MTIME}</LastModified><ETag>&quot;{:08x}{:016x}&quot;</ETag>\
             <Size>{}</Size><StorageClass>STANDARD</StorageClass></Contents>",
            q.enc(k),
            o.crc,
            o.size,
            o.size
        );
    }
    for cp in &p.prefixes {
        *x += &format!(
            "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
            q.enc(cp)
        );
    }
}

/// What S3's `encoding-type=url` leaves alone: unreserved characters and `/`.
const S3_URL: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// The item properties a GCS `fields` value asks for: `None` = all, and
/// whether `prefixes` and `nextPageToken` are wanted. Only the forms
/// clients send are understood: `items(a,b)`, `items`, `items/a`.
fn gcs_fields(fields: Option<&str>) -> (Option<Vec<&str>>, bool, bool) {
    let Some(f) = fields.filter(|f| !f.is_empty()) else {
        return (None, true, true);
    };
    let items = if let Some(i) = f.find("items(") {
        let inner = &f[i + 6..];
        Some(
            inner[..inner.find(')').unwrap_or(inner.len())]
                .split(',')
                .map(str::trim)
                .collect(),
        )
    } else if f.contains("items/") {
        Some(
            f.split(',')
                .filter_map(|p| p.trim().strip_prefix("items/"))
                .collect(),
        )
    } else if f.split(',').any(|p| p.trim() == "items") {
        None
    } else {
        Some(Vec::new())
    };
    (items, f.contains("prefixes"), f.contains("nextPageToken"))
}

/// GCS `GET /storage/v1/b/B/o`: the objects.list JSON. `None` when a page
/// token is not one this server made.
pub fn gcs(keys: &KeySet, bucket: &str, q: &HashMap<String, String>) -> Option<String> {
    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or("");
    let (prefix, delim) = (get("prefix"), get("delimiter"));
    let mut start = lower(keys, prefix);
    if !get("startOffset").is_empty() {
        start = start.max(lower(keys, get("startOffset")));
    }
    if !get("pageToken").is_empty() {
        start = start.max(lower(keys, &untoken(get("pageToken"))?));
    }
    let end = Some(get("endOffset")).filter(|e| !e.is_empty());
    let p = page(keys, prefix, delim, start, end, max_of(q.get("maxResults")));
    let (props, want_prefixes, want_token) = gcs_fields(q.get("fields").map(String::as_str));
    let want = |name: &str| props.as_ref().is_none_or(|v| v.contains(&name));
    let jstr = |s: &str| serde_json::to_string(s).unwrap();
    let b = jstr(bucket);
    let mut x = String::with_capacity(64 + 400 * p.keys.len());
    x.push_str("{\"kind\":\"storage#objects\"");
    if props.as_ref().is_none_or(|v| !v.is_empty()) && !p.keys.is_empty() {
        x.push_str(",\"items\":[");
        for (n, k) in p.keys.iter().enumerate() {
            let o = object_of(k);
            let name = jstr(k);
            let mut fields: Vec<(&str, String)> = Vec::with_capacity(14);
            let mut add = |f: &'static str, v: &dyn Fn() -> String| {
                if want(f) {
                    fields.push((f, v()));
                }
            };
            add("kind", &|| "\"storage#object\"".into());
            add("id", &|| jstr(&format!("{bucket}/{k}/1")));
            add("name", &|| name.clone());
            add("bucket", &|| b.clone());
            add("generation", &|| "\"1\"".into());
            add("metageneration", &|| "\"1\"".into());
            add("contentType", &|| "\"application/octet-stream\"".into());
            add("storageClass", &|| "\"STANDARD\"".into());
            add("size", &|| format!("\"{}\"", o.size));
            add("crc32c", &|| format!("\"{}\"", crc_b64(o.crc)));
            add("etag", &|| "\"CAE=\"".into());
            add("timeCreated", &|| format!("\"{MTIME}\""));
            add("updated", &|| format!("\"{MTIME}\""));
            if n > 0 {
                x.push(',');
            }
            x.push('{');
            for (i, (f, v)) in fields.iter().enumerate() {
                if i > 0 {
                    x.push(',');
                }
                x += &format!("\"{f}\":{v}");
            }
            x.push('}');
        }
        x.push(']');
    }
    if want_prefixes && !p.prefixes.is_empty() {
        let ps: Vec<String> = p.prefixes.iter().map(|s| jstr(s)).collect();
        x += &format!(",\"prefixes\":[{}]", ps.join(","));
    }
    if let (true, Some(n)) = (want_token, &p.next) {
        x += &format!(",\"nextPageToken\":\"{}\"", token(n));
    }
    x.push('}');
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(k: &[String]) -> KeySet {
        KeySet::Held(k.to_vec())
    }

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Every key of a GCS listing, following page tokens.
    fn gcs_all(keys: &[String], extra: &[(&str, &str)]) -> (Vec<String>, Vec<String>, usize) {
        let (mut names, mut prefixes, mut pages) = (Vec::new(), Vec::new(), 0);
        let mut tok: Option<String> = None;
        loop {
            let mut qq = q(extra);
            if let Some(t) = &tok {
                qq.insert("pageToken".into(), t.clone());
            }
            let v: serde_json::Value =
                serde_json::from_str(&gcs(&held(keys), "b", &qq).unwrap()).unwrap();
            pages += 1;
            for i in v["items"].as_array().into_iter().flatten() {
                names.push(i["name"].as_str().unwrap().to_owned());
            }
            for p in v["prefixes"].as_array().into_iter().flatten() {
                prefixes.push(p.as_str().unwrap().to_owned());
            }
            match v["nextPageToken"].as_str() {
                Some(t) => tok = Some(t.to_owned()),
                None => return (names, prefixes, pages),
            }
        }
    }

    #[test]
    fn keys_are_sorted_unique_and_skewed() {
        let k = keys(5000);
        assert_eq!(k.len(), 5000);
        assert!(k.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(k.iter().filter(|x| x.starts_with(HOT)).count(), 4500);
        assert!(k.iter().filter(|x| !x.is_ascii()).count() > 50);
        assert_eq!(keys(7).len(), 7);
    }

    #[test]
    fn counted_keys_are_in_byte_order_and_found_by_search() {
        let n = 20_000_000;
        let ks = KeySet::Counted(n);
        let at = [0, 1, 1_999_999, 2_000_000, 2_000_001, n / 2, n - 1];
        for w in at.windows(2) {
            assert!(
                ks.key(w[0]) < ks.key(w[1]),
                "{} < {}",
                ks.key(w[0]),
                ks.key(w[1])
            );
        }
        for &i in &at {
            assert_eq!(lower(&ks, &ks.key(i)), i);
            assert!(ks.contains(&ks.key(i)));
        }
        assert!(!ks.contains("misc/shard-000/obj-x"));
        assert_eq!(
            ks.key(n - 1),
            format!("{HOT}part-{:011}.json.zst", n - n / 10 - 1)
        );
        // A page from the middle, and the prefix roll-up.
        let qq = q(&[("list-type", "2"), ("prefix", HOT), ("max-keys", "3")]);
        let x = s3(&ks, "b", &qq).unwrap();
        assert!(
            x.contains(&format!("<Key>{HOT}part-00000000000.json.zst</Key>")),
            "{x}"
        );
        assert!(x.contains("<KeyCount>3</KeyCount>") && x.contains("<IsTruncated>true"));
        let v: serde_json::Value =
            serde_json::from_str(&gcs(&ks, "b", &q(&[("delimiter", "/")])).unwrap()).unwrap();
        let prefixes: Vec<&str> = v["prefixes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert_eq!(prefixes, ["misc/", "warehouse/"]);
        assert_eq!(size_of_bucket("list-100000000"), Some(100_000_000));
    }

    #[test]
    fn gcs_pages_cover_every_key_once() {
        let k = keys(2500);
        let (names, _, pages) = gcs_all(&k, &[("fields", "items(name),nextPageToken")]);
        assert_eq!(names, k);
        assert_eq!(pages, 3);
        let (names, ..) = gcs_all(&k, &[("maxResults", "7"), ("prefix", "misc/")]);
        assert_eq!(names.len(), 250);
        // Offsets: inclusive start, exclusive end.
        let (names, ..) = gcs_all(&k, &[("startOffset", &k[10]), ("endOffset", &k[20])]);
        assert_eq!(names, &k[10..20]);
    }

    #[test]
    fn gcs_delimiter_rolls_up_prefixes() {
        let k = keys(2500);
        let (names, prefixes, _) = gcs_all(&k, &[("delimiter", "/"), ("maxResults", "1")]);
        assert!(names.is_empty());
        assert_eq!(prefixes, ["misc/", "warehouse/"]);
        let v: serde_json::Value = serde_json::from_str(
            &gcs(
                &held(&k),
                "b",
                &q(&[
                    ("prefix", "misc/"),
                    ("delimiter", "/"),
                    ("fields", "items(name)"),
                ]),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(v["prefixes"].is_null(), "not asked for");
    }

    #[test]
    fn s3_v2_pages_start_after_and_url_encoding() {
        let k = keys(2500);
        let mut got = Vec::new();
        let mut tok = String::new();
        let key_rx = |x: &str| -> Vec<String> {
            x.split("<Key>")
                .skip(1)
                .map(|s| s.split("</Key>").next().unwrap().to_owned())
                .collect()
        };
        loop {
            let mut qq = q(&[("list-type", "2"), ("encoding-type", "url")]);
            if !tok.is_empty() {
                qq.insert("continuation-token".into(), tok.clone());
            }
            let x = s3(&held(&k), "b", &qq).unwrap();
            for e in key_rx(&x) {
                got.push(
                    percent_encoding::percent_decode_str(&e)
                        .decode_utf8()
                        .unwrap()
                        .into_owned(),
                );
            }
            match x.split("<NextContinuationToken>").nth(1) {
                Some(t) => tok = t.split('<').next().unwrap().to_owned(),
                None => break,
            }
        }
        assert_eq!(got, k);
        let x = s3(
            &held(&k),
            "b",
            &q(&[("list-type", "2"), ("start-after", &k[2497])]),
        )
        .unwrap();
        assert_eq!(key_rx(&x), &k[2498..]);
        assert!(x.contains("<KeyCount>2</KeyCount>") && x.contains("<IsTruncated>false"));
    }

    #[test]
    fn s3_v1_markers_skip_a_rolled_up_prefix() {
        let k = keys(2500);
        let x = s3(&held(&k), "b", &q(&[("delimiter", "/"), ("max-keys", "1")])).unwrap();
        assert!(x.contains("<NextMarker>misc/</NextMarker>"), "{x}");
        let x = s3(
            &held(&k),
            "b",
            &q(&[("delimiter", "/"), ("marker", "misc/")]),
        )
        .unwrap();
        assert!(x.contains("<Prefix>warehouse/</Prefix>") && !x.contains("<Prefix>misc/"));
    }

    #[test]
    fn bucket_names() {
        assert_eq!(size_of_bucket("list-1000"), Some(1000));
        assert_eq!(size_of_bucket("list-x"), None);
        assert_eq!(size_of_bucket("bench"), None);
        assert_eq!(size_of_bucket("list-999999999999"), None);
    }
}
