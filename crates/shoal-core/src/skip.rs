//! What a command did not do, and why: an outcome, not an error.
//!
//! A walk meets links it does not follow and FIFOs it must not open; a
//! plan meets folder markers that are no file's name; `--no-clobber`
//! finds its destination there; a pinned delete finds its object written
//! again. None of these failed, and the code that meets one must not be
//! able to mistake it for a failure (retry it, count it as a failed
//! request, hand it to Python as an exception) or a failure for it. So a
//! skip is its own value, [`Skip`], carried beside the items of a walk,
//! a plan or a batch as [`Seen::Skipped`], never inside an `Err`.
//!
//! A skip is **asked** (`--no-clobber`, `--skip-symlinks`, shoal's own
//! working files, a delete kept because its object changed) or **not
//! asked** (a link not followed, a special file, a link loop, a source a
//! move kept): one nobody asked for means the command did not do all it
//! was asked, so it makes the exit status 1 and `sync --delete` deletes
//! nothing after it.

use std::fmt;

use crate::error::{Op, escape_controls};

/// Something not done, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    asked: bool,
    op: Op,
    url: String,
    why: String,
}

impl Skip {
    /// A skip the user asked for, or one that is what the command means
    /// (see the module docs).
    pub fn asked(op: Op, url: impl Into<String>, why: impl Into<String>) -> Skip {
        Skip {
            asked: true,
            op,
            url: url.into(),
            why: why.into(),
        }
    }

    /// A skip nobody asked for: the command did not do all it was asked.
    pub fn unasked(op: Op, url: impl Into<String>, why: impl Into<String>) -> Skip {
        Skip {
            asked: false,
            ..Skip::asked(op, url, why)
        }
    }

    /// Whether the user asked for it (see the module docs).
    pub fn is_asked(&self) -> bool {
        self.asked
    }

    /// What was not done.
    pub fn op(&self) -> Op {
        self.op
    }

    /// What it was not done to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Why.
    pub fn why(&self) -> &str {
        &self.why
    }
}

/// `copy gs://b/k: exists; not replaced (--no-clobber)`: the shape of an
/// error's line, control characters of a key escaped.
impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.op,
            escape_controls(&self.url),
            self.why
        )
    }
}

/// One step of a walk, a plan or a batch: the item it gave (a file found,
/// an action planned, the bytes an action moved), or a skip in its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen<T> {
    /// The item.
    Item(T),
    /// Not done, and why.
    Skipped(Skip),
}

impl<T> Seen<T> {
    /// The item, if this is one.
    pub fn item(self) -> Option<T> {
        match self {
            Seen::Item(t) => Some(t),
            Seen::Skipped(_) => None,
        }
    }

    /// The item passed through `f`; a skip stays as it is.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Seen<U> {
        match self {
            Seen::Item(t) => Seen::Item(f(t)),
            Seen::Skipped(s) => Seen::Skipped(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A skip's line has an error's shape, and a key's control characters
    /// are escaped in it as in an error's.
    #[test]
    fn a_skip_reads_like_an_error_line_and_escapes_the_key() {
        let s = Skip::asked(
            Op::Copy,
            "gs://b/a\u{1b}[2J",
            "exists; not replaced (--no-clobber)",
        );
        let e = crate::Error::new(
            crate::ErrorKind::Precondition,
            Op::Copy,
            "gs://b/a\u{1b}[2J",
            "exists; not replaced (--no-clobber)",
        );
        assert_eq!(s.to_string(), e.to_string());
        assert!(!s.to_string().contains('\u{1b}'));
        assert!(s.is_asked());
        assert!(!Skip::unasked(Op::Read, "/x", "a FIFO").is_asked());
    }
}
