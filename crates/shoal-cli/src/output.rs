//! How results are printed: full URLs, human sizes, RFC 3339 times, JSON lines.

use shoal_core::checksum::{crc32c_to_base64, hex};
use shoal_core::{ObjectMeta, ObjectVersion};

/// `1.5 GiB`-style sizes.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// RFC 3339 UTC time from Unix nanoseconds.
pub(crate) fn rfc3339(ns: Option<i128>) -> String {
    ns.and_then(|ns| time::OffsetDateTime::from_unix_timestamp_nanos(ns).ok())
        .and_then(|t| t.replace_nanosecond(0).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "-".into())
}

/// One JSON object describing an object.
pub(crate) fn meta_json(url: &str, m: &ObjectMeta) -> serde_json::Value {
    let mut v = serde_json::json!({
        "url": url,
        "name": m.key,
        "size": m.size,
    });
    let o = v.as_object_mut().expect("object");
    if let Some(ns) = m.updated_ns {
        o.insert("updated".into(), rfc3339(m.updated_ns).into());
        // The full precision, for listings read back by `sync
        // --source-listing`/`--dest-listing`: its time rule compares it.
        if let Ok(ns) = i64::try_from(ns) {
            o.insert("updated_ns".into(), ns.into());
        }
    }
    if let Some(c) = m.checksums.crc32c() {
        o.insert("crc32c".into(), crc32c_to_base64(c).into());
    }
    if let Some(c) = m.checksums.other_crc() {
        o.insert(c.kind().name().to_lowercase(), c.to_base64().into());
    }
    if let Some(c) = m.checksums.composite() {
        // As S3 shows it: `vm5fpQ==-4`, with its type.
        o.insert(c.kind.name().to_lowercase(), c.to_string().into());
        o.insert("checksum_type".into(), "COMPOSITE".into());
    }
    if let Some(md5) = m.checksums.md5() {
        o.insert("md5".into(), hex(&md5).into());
    }
    match &m.version {
        Some(ObjectVersion::Generation(g)) => {
            o.insert("generation".into(), g.to_string().into());
        }
        Some(ObjectVersion::ETag(e)) => {
            o.insert("etag".into(), e.clone().into());
        }
        Some(ObjectVersion::VersionId(v)) => {
            o.insert("version_id".into(), v.clone().into());
        }
        None => {}
    }
    if let Some(s) = &m.version_state {
        if let Some(l) = s.is_latest {
            o.insert("is_latest".into(), l.into());
        }
        if s.soft_deleted {
            o.insert("soft_deleted".into(), true.into());
        }
        if s.delete_marker {
            o.insert("delete_marker".into(), true.into());
        }
    }
    if let Some(sc) = &m.storage_class {
        o.insert("storage_class".into(), sc.clone().into());
    }
    if let Some(ce) = &m.content_encoding {
        o.insert("content_encoding".into(), ce.clone().into());
    }
    let texts = [
        ("content_type", &m.content_type),
        ("cache_control", &m.cache_control),
        ("content_disposition", &m.content_disposition),
    ];
    for (name, value) in texts {
        if let Some(t) = value {
            o.insert(name.into(), t.clone().into());
        }
    }
    if !m.metadata.is_empty() {
        o.insert("metadata".into(), serde_json::json!(m.metadata));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(256 << 20), "256.00 MiB");
        assert_eq!(
            rfc3339(Some(1_700_000_000_123_456_789)),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(rfc3339(None), "-");
    }
}
