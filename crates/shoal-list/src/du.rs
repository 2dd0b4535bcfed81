//! `du`: totals of size and count, grouped by prefix, suffix, age or
//! storage class, over any listing.
//!
//! Groups are kept in a map that grows with the number of *groups*, never
//! with the number of objects, so `du` of a billion keys runs in the
//! memory of its output. That is why grouping by prefix has a depth, and
//! why objects above that depth share one group (their folder) instead of
//! one line each.

use std::collections::BTreeMap;
use std::str::FromStr;

use shoal_core::{ObjectMeta, Projection};

/// How to group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// One total.
    None,
    /// By the first `depth` levels below the base prefix.
    Prefix(usize),
    /// By extension (after the last `.` of the last level).
    Suffix,
    /// By time since last update, in buckets ([`AGE_BUCKETS`]).
    Age,
    /// By storage class.
    StorageClass,
}

impl GroupBy {
    /// What the listing must return for this grouping.
    pub fn projection(self) -> Projection {
        match self {
            GroupBy::StorageClass => Projection::Full,
            _ => Projection::NameSizeTime,
        }
    }
}

impl FromStr for GroupBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        let no_arg = |g| {
            if arg.is_empty() {
                Ok(g)
            } else {
                Err(format!("'{name}' takes no ':{arg}'"))
            }
        };
        match name {
            "prefix" if arg.is_empty() => Ok(GroupBy::Prefix(1)),
            "prefix" => match arg.parse::<usize>() {
                Ok(d) if (1..=64).contains(&d) => Ok(GroupBy::Prefix(d)),
                _ => Err(format!("prefix depth '{arg}' must be 1 to 64")),
            },
            "suffix" => no_arg(GroupBy::Suffix),
            "age" => no_arg(GroupBy::Age),
            "storage-class" => no_arg(GroupBy::StorageClass),
            "none" => no_arg(GroupBy::None),
            _ => Err(format!(
                "unknown grouping '{s}' (use prefix[:DEPTH], suffix, age, storage-class)"
            )),
        }
    }
}

/// Age buckets: upper bound in days and label. Chosen to match storage
/// class minimum durations and common retention rules (30, 90, 365 days).
pub const AGE_BUCKETS: &[(i128, &str)] = &[
    (1, "0-1d"),
    (7, "1-7d"),
    (30, "7-30d"),
    (90, "30-90d"),
    (365, "90-365d"),
    (i128::MAX, "365d+"),
];

/// Bytes and objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sum of sizes.
    pub bytes: u64,
    /// Number of objects.
    pub objects: u64,
}

impl Totals {
    fn add(&mut self, size: u64) {
        self.bytes += size;
        self.objects += 1;
    }
}

/// A running `du`.
#[derive(Debug, Clone)]
pub struct Du {
    group_by: GroupBy,
    base: String,
    now_ns: i128,
    groups: BTreeMap<String, Totals>,
    total: Totals,
}

impl Du {
    /// Groups keys below `base` (a prefix: `dir/`, or a glob's literal
    /// prefix cut back to its last `/`). `now_ns` is the clock for ages.
    pub fn new(group_by: GroupBy, base: &str, now_ns: i128) -> Du {
        let base = match base.rfind('/') {
            Some(i) => base[..=i].to_owned(),
            None => String::new(),
        };
        Du {
            group_by,
            base,
            now_ns,
            groups: BTreeMap::new(),
            total: Totals::default(),
        }
    }

    /// Counts one object.
    pub fn add(&mut self, m: &ObjectMeta) {
        self.total.add(m.size);
        let label = match self.group_by {
            GroupBy::None => return,
            GroupBy::Prefix(depth) => self.prefix_group(&m.key, depth),
            GroupBy::Suffix => suffix(&m.key),
            GroupBy::Age => age(m.updated_ns, self.now_ns).to_owned(),
            GroupBy::StorageClass => m
                .storage_class
                .clone()
                .unwrap_or_else(|| "(unknown)".into()),
        };
        match self.groups.get_mut(&label) {
            Some(t) => t.add(m.size),
            None => {
                let mut t = Totals::default();
                t.add(m.size);
                self.groups.insert(label, t);
            }
        }
    }

    fn prefix_group(&self, key: &str, depth: usize) -> String {
        let rest = key.strip_prefix(self.base.as_str()).unwrap_or(key);
        // After the depth-th '/', or, for an object above that depth,
        // after its last '/' (its own folder).
        let end = rest
            .match_indices('/')
            .take(depth)
            .last()
            .map_or(0, |(i, _)| i + 1);
        format!("{}{}", self.base, &rest[..end])
    }

    /// The groups, by label (ages in bucket order).
    pub fn groups(&self) -> Vec<(String, Totals)> {
        let mut v: Vec<(String, Totals)> =
            self.groups.iter().map(|(k, t)| (k.clone(), *t)).collect();
        if self.group_by == GroupBy::Age {
            let rank = |l: &str| {
                AGE_BUCKETS
                    .iter()
                    .position(|(_, b)| *b == l)
                    .unwrap_or(usize::MAX)
            };
            v.sort_by_key(|(l, _)| rank(l));
        }
        v
    }

    /// Everything counted.
    pub fn total(&self) -> Totals {
        self.total
    }
}

fn suffix(key: &str) -> String {
    let last = key.rsplit('/').next().unwrap_or(key);
    match last.rfind('.') {
        Some(i) if i > 0 && i + 1 < last.len() => last[i..].to_owned(),
        _ => "(none)".into(),
    }
}

fn age(updated_ns: Option<i128>, now_ns: i128) -> &'static str {
    const DAY_NS: i128 = 86_400 * 1_000_000_000;
    let Some(u) = updated_ns else {
        return "(unknown)";
    };
    let days = (now_ns - u).max(0) / DAY_NS;
    AGE_BUCKETS
        .iter()
        .find(|(max, _)| days < *max)
        .map_or("365d+", |(_, l)| l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(key: &str, size: u64, days_old: i128) -> ObjectMeta {
        ObjectMeta {
            key: key.into(),
            size,
            updated_ns: Some(1_000 * 86_400 * 1_000_000_000 - days_old * 86_400 * 1_000_000_000),
            storage_class: (size > 5).then(|| "COLDLINE".into()),
            ..Default::default()
        }
    }

    fn run(g: GroupBy, base: &str, objs: &[ObjectMeta]) -> Du {
        let mut d = Du::new(g, base, 1_000 * 86_400 * 1_000_000_000);
        for o in objs {
            d.add(o);
        }
        d
    }

    fn objs() -> Vec<ObjectMeta> {
        vec![
            m("data/a/1.csv", 1, 0),
            m("data/a/b/2.csv", 2, 3),
            m("data/c/3.json", 4, 40),
            m("data/top.txt", 8, 400),
            m("data/noext", 16, 10),
        ]
    }

    #[test]
    fn prefix_groups() {
        let d = run(GroupBy::Prefix(1), "data/", &objs());
        let g = d.groups();
        let labels: Vec<&str> = g.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["data/", "data/a/", "data/c/"]);
        assert_eq!(
            g[0].1,
            Totals {
                bytes: 24,
                objects: 2
            }
        );
        assert_eq!(
            g[1].1,
            Totals {
                bytes: 3,
                objects: 2
            }
        );
        assert_eq!(
            d.total(),
            Totals {
                bytes: 31,
                objects: 5
            }
        );
        let d = run(GroupBy::Prefix(2), "data/", &objs());
        let labels: Vec<String> = d.groups().into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["data/", "data/a/", "data/a/b/", "data/c/"]);
    }

    #[test]
    fn suffix_age_class() {
        let d = run(GroupBy::Suffix, "", &objs());
        let labels: Vec<String> = d.groups().into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["(none)", ".csv", ".json", ".txt"]);
        let d = run(GroupBy::Age, "", &objs());
        let labels: Vec<String> = d.groups().into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["0-1d", "1-7d", "7-30d", "30-90d", "365d+"]);
        let d = run(GroupBy::StorageClass, "", &objs());
        let g = d.groups();
        assert_eq!(
            g[0],
            (
                "(unknown)".into(),
                Totals {
                    bytes: 7,
                    objects: 3
                }
            )
        );
        assert_eq!(
            g[1],
            (
                "COLDLINE".into(),
                Totals {
                    bytes: 24,
                    objects: 2
                }
            )
        );
    }

    #[test]
    fn parse_group_by() {
        assert_eq!("prefix".parse(), Ok(GroupBy::Prefix(1)));
        assert_eq!("prefix:3".parse(), Ok(GroupBy::Prefix(3)));
        assert_eq!("storage-class".parse(), Ok(GroupBy::StorageClass));
        assert!("prefix:0".parse::<GroupBy>().is_err());
        assert!("age:2".parse::<GroupBy>().is_err());
        assert!("size".parse::<GroupBy>().is_err());
    }
}
