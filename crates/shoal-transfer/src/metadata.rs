//! What an upload stores beside its bytes, where the caller left it open.
//!
//! Every write carries a `Content-Type`: the caller's, else (a copy from
//! another store) the source's, else one guessed from a name by
//! `mime_guess`'s extension table (`index.html` → `text/html`), else
//! `application/octet-stream`. Without it a synced site was served as
//! downloads, since stores answer with whatever type was stored.
//!
//! A local file's type is guessed from its own name, as gsutil and the
//! AWS CLI do; a body without a name (stdin) from the destination key.
//!
//! The rules for what a caller may ask to store (header values, metadata
//! keys, storage classes) are here too, so the CLI's flags and the Python
//! package's keywords refuse the same values with the same words.

use std::borrow::Cow;

use shoal_core::{PutOptions, Scheme};

/// The type to store for an object named `name` (a path or a key): its
/// extension's registered type, or `application/octet-stream`.
pub fn guess(name: &str) -> String {
    mime_guess::from_path(name)
        .first_raw()
        .unwrap_or("application/octet-stream")
        .to_owned()
}

/// `put`, with a type guessed from `name` when it sets none.
pub(crate) fn typed<'a>(put: &'a PutOptions, name: &str) -> Cow<'a, PutOptions> {
    match put.content_type {
        Some(_) => Cow::Borrowed(put),
        None => Cow::Owned(PutOptions {
            content_type: Some(guess(name)),
            ..put.clone()
        }),
    }
}

/// Records a regular file's modification time in `put`'s metadata, in the
/// form `scheme`'s store is read in by other tools
/// ([`shoal_core::file_time`]), unless the caller set that key itself. A
/// FIFO or device has no time worth keeping.
pub(crate) fn record_file_time(put: &mut PutOptions, scheme: Scheme, md: &std::fs::Metadata) {
    if !md.is_file() {
        return;
    }
    let Ok(modified) = md.modified() else {
        return;
    };
    let ns = system_time_ns(modified);
    use shoal_core::file_time::{Form, record};
    let form = match scheme {
        Scheme::Gs => Form::Gcloud,
        Scheme::S3 => Form::Rclone,
        // A local file's time is its own.
        Scheme::File => return,
    };
    let (k, v) = record(form, ns);
    put.metadata.entry(k.to_owned()).or_insert(v);
}

/// Records a file's mode, owner and group in `put`'s metadata (`-P`), in
/// the form `scheme`'s store is read in by other tools
/// ([`shoal_core::posix`]), unless the caller set those keys itself.
pub(crate) fn record_posix(put: &mut PutOptions, scheme: Scheme, md: &std::fs::Metadata) {
    use shoal_core::file_time::Form;
    use std::os::unix::fs::MetadataExt;
    let form = match scheme {
        Scheme::Gs => Form::Gcloud,
        Scheme::S3 => Form::Rclone,
        Scheme::File => return,
    };
    let p = shoal_core::posix::Posix {
        mode: md.mode(),
        uid: md.uid(),
        gid: md.gid(),
    };
    for (k, v) in shoal_core::posix::record(form, p) {
        put.metadata.entry(k.to_owned()).or_insert(v);
    }
}

/// Gives a downloaded `file` the mode, owner and group its object
/// recorded (`-P`): the permission bits always (never setuid, setgid or
/// sticky), the owner and group only where this process may (as root, or
/// an owner that is its own and a group it is in). What cannot be given
/// is said in the log; the bytes are kept either way.
pub(crate) fn give_posix(file: &std::fs::File, meta: &shoal_core::ObjectMeta, dest: &str) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let (mode, uid, gid) = shoal_core::posix::from_metadata(&meta.metadata);
    if let Some(m) = mode
        && let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(m))
    {
        tracing::warn!(file = dest, error = %e, "the recorded mode could not be given to the file");
    }
    if uid.is_none() && gid.is_none() {
        return;
    }
    let Ok(own) = file.metadata() else {
        return;
    };
    // The file was just made by this process: its owner is this process's.
    let root = own.uid() == 0;
    let uid = uid.filter(|u| *u != own.uid() && root);
    let gid = gid.filter(|g| *g != own.gid());
    if uid.is_none() && gid.is_none() {
        return;
    }
    // Not root, the group is only given if the system allows it (a group
    // this user is in); a refusal is no failure.
    if let Err(e) = std::os::unix::fs::fchown(file, uid, gid) {
        tracing::debug!(file = dest, error = %e, "the recorded owner or group could not be given to the file");
    }
}

/// A time as nanoseconds since the epoch (before it: negative).
pub(crate) fn system_time_ns(t: std::time::SystemTime) -> i128 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// The time `ns` nanoseconds after the epoch (before it: negative).
pub(crate) fn ns_system_time(ns: i128) -> Option<std::time::SystemTime> {
    let d = std::time::Duration::from_nanos(u64::try_from(ns.unsigned_abs()).ok()?);
    if ns >= 0 {
        std::time::UNIX_EPOCH.checked_add(d)
    } else {
        std::time::UNIX_EPOCH.checked_sub(d)
    }
}

/// Storage classes each store documents (GCS: storage classes; S3: the
/// `x-amz-storage-class` values of PutObject).
pub(crate) const GCS_STORAGE_CLASSES: &[&str] = &[
    "STANDARD",
    "NEARLINE",
    "COLDLINE",
    "ARCHIVE",
    "MULTI_REGIONAL",
    "REGIONAL",
    "DURABLE_REDUCED_AVAILABILITY",
];
/// See [`GCS_STORAGE_CLASSES`].
pub(crate) const S3_STORAGE_CLASSES: &[&str] = &[
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "OUTPOSTS",
    "GLACIER_IR",
    "SNOW",
    "EXPRESS_ONEZONE",
];

/// S3's canned ACLs (`x-amz-acl`), for `--acl` and `acl=`.
pub(crate) const S3_ACLS: &[&str] = &[
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
    "aws-exec-read",
];
/// GCS's predefined ACLs (`predefinedAcl`), for `--predefined-acl` and
/// `predefined_acl=`.
pub(crate) const GCS_ACLS: &[&str] = &[
    "authenticatedRead",
    "bucketOwnerFullControl",
    "bucketOwnerRead",
    "private",
    "projectPrivate",
    "publicRead",
];

/// The canned ACL to send to `scheme`'s store: `s3` (S3's spelling, from
/// `--acl`) and `gcs` (GCS's, from `--predefined-acl`), at most the one
/// that store takes, and a value it knows. The error is one line naming
/// the valid values.
pub fn acl(s3: Option<&str>, gcs: Option<&str>, scheme: Scheme) -> Result<Option<String>, String> {
    let (given, flag, known, other) = match (scheme, s3, gcs) {
        (_, None, None) => return Ok(None),
        (Scheme::S3, Some(a), _) => (a, "--acl", S3_ACLS, None),
        (Scheme::Gs, _, Some(a)) => (a, "--predefined-acl", GCS_ACLS, None),
        (Scheme::S3, None, Some(_)) => (
            "",
            "--predefined-acl",
            S3_ACLS,
            Some("s3:// objects take --acl"),
        ),
        (Scheme::Gs, Some(_), None) => (
            "",
            "--acl",
            GCS_ACLS,
            Some("gs:// objects take --predefined-acl"),
        ),
        (Scheme::File, _, _) => {
            return Err("--acl/--predefined-acl: local files have no ACL".into());
        }
    };
    if let Some(hint) = other {
        return Err(format!(
            "{flag} is for the other store: {hint} ({})",
            known.join(", ")
        ));
    }
    known
        .iter()
        .find(|k| k.eq_ignore_ascii_case(given.trim()))
        .map(|k| Some((*k).to_owned()))
        .ok_or_else(|| {
            format!(
                "{flag}: unknown ACL '{given}' (one of: {})",
                known.join(", ")
            )
        })
}

/// A storage class in upper case, as both stores spell them; one either
/// store knows.
pub fn storage_class(s: &str) -> Result<String, String> {
    let c = s.trim().to_ascii_uppercase();
    if GCS_STORAGE_CLASSES.contains(&c.as_str()) || S3_STORAGE_CLASSES.contains(&c.as_str()) {
        return Ok(c);
    }
    Err(format!(
        "unknown storage class '{s}' (gs://: {}; s3://: {})",
        GCS_STORAGE_CLASSES[..4].join(", "),
        S3_STORAGE_CLASSES.join(", ")
    ))
}

/// Whether `scheme`'s store knows `class` (local files have none, so
/// anything goes there).
pub fn check_storage_class(class: &str, scheme: Scheme) -> Result<(), String> {
    let (known, prefix) = match scheme {
        Scheme::Gs => (GCS_STORAGE_CLASSES, "gs://"),
        Scheme::S3 => (S3_STORAGE_CLASSES, "s3://"),
        _ => return Ok(()),
    };
    if known.contains(&class) {
        return Ok(());
    }
    Err(format!(
        "{class}: not a {prefix} storage class (use one of {})",
        known.join(", ")
    ))
}

/// A header value the stores take: visible ASCII and spaces, no control
/// characters (a newline would end the header), not empty.
pub fn header_value(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("the value is empty".into());
    }
    if let Some(c) = s.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ')) {
        return Err(format!(
            "'{}' holds {c:?}: header values take printable ASCII only",
            s.escape_debug()
        ));
    }
    Ok(s.to_owned())
}

/// One custom metadata entry: a key an HTTP header name can carry
/// (letters, digits and `!#$%&'*+-.^_`|~`; S3 sends it as
/// `x-amz-meta-KEY`), a value a header value can (it may be empty).
pub fn metadata_entry(k: &str, v: &str) -> Result<(), String> {
    const TCHAR: &str = "!#$%&'*+-.^_`|~";
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || TCHAR.contains(c))
    {
        return Err(format!(
            "metadata key '{}' must be letters, digits and !#$%&'*+-.^_`|~ (it is sent as a header name)",
            k.escape_debug()
        ));
    }
    if !v.is_empty() {
        header_value(v).map_err(|e| format!("metadata {k}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_extension() {
        assert_eq!(guess("site/index.html"), "text/html");
        assert_eq!(guess("a.css"), "text/css");
        assert_eq!(guess("photo.JPG"), "image/jpeg");
        assert_eq!(guess("x.unknownext"), "application/octet-stream");
        assert_eq!(guess("no-extension"), "application/octet-stream");
        assert_eq!(guess(""), "application/octet-stream");
    }

    #[test]
    fn a_type_given_wins() {
        let put = PutOptions {
            content_type: Some("text/plain".into()),
            ..Default::default()
        };
        assert_eq!(
            typed(&put, "a.html").content_type.as_deref(),
            Some("text/plain")
        );
        let put = PutOptions::default();
        assert_eq!(
            typed(&put, "a.html").content_type.as_deref(),
            Some("text/html")
        );
    }

    #[test]
    fn acls_are_the_stores_own() {
        assert_eq!(
            acl(Some("Public-Read"), None, Scheme::S3)
                .unwrap()
                .as_deref(),
            Some("public-read")
        );
        assert_eq!(
            acl(None, Some("publicread"), Scheme::Gs)
                .unwrap()
                .as_deref(),
            Some("publicRead")
        );
        assert_eq!(acl(None, None, Scheme::Gs).unwrap(), None);
        let e = acl(Some("world"), None, Scheme::S3).unwrap_err();
        assert!(e.contains("bucket-owner-full-control"), "{e}");
        let e = acl(Some("public-read"), None, Scheme::Gs).unwrap_err();
        assert!(e.contains("--predefined-acl"), "{e}");
        assert!(acl(None, Some("private"), Scheme::File).is_err());
    }
}
