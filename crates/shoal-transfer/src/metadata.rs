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

use std::borrow::Cow;

use shoal_core::PutOptions;

/// The type to store for an object named `name` (a path or a key): its
/// extension's registered type, or `application/octet-stream`.
pub fn guess(name: &str) -> String {
    mime_guess::from_path(name)
        .first_raw()
        .unwrap_or("application/octet-stream")
        .to_owned()
}

/// `put`, with a type guessed from `name` when it sets none.
pub fn typed<'a>(put: &'a PutOptions, name: &str) -> Cow<'a, PutOptions> {
    match put.content_type {
        Some(_) => Cow::Borrowed(put),
        None => Cow::Owned(PutOptions {
            content_type: Some(guess(name)),
            ..put.clone()
        }),
    }
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
}
