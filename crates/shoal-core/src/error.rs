//! Errors that mean the same on every backend.
//!
//! A user who sees an error must be able to act on it, so every error carries
//! the operation, the URL, what the server (or the OS) said, and, where we
//! know one, what to try. [`ErrorKind`] is the part programs match on; it is
//! `#[non_exhaustive]` so new kinds do not break callers. Messages are one
//! line: server bodies are trimmed and flattened before they get here.

use std::fmt;

/// Result with shoal's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, in terms a caller can branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bucket or object does not exist.
    NotFound,
    /// The credentials were accepted but do not allow this.
    PermissionDenied,
    /// No credentials, or credentials the server rejected.
    Unauthenticated,
    /// A precondition (generation, ETag, if-none-match) failed.
    Precondition,
    /// The caller asked for something malformed (bad URL, bad flag, bad key).
    InvalidInput,
    /// The request cannot be made on this backend.
    Unsupported,
    /// Could not connect (refused, DNS, TLS handshake).
    Connect,
    /// A request or read took too long.
    Timeout,
    /// The server was overloaded or failed (429, 5xx): retryable.
    ServerBusy,
    /// The server answered something we could not understand.
    Protocol,
    /// Bytes arrived but their checksum or length is wrong.
    Integrity,
    /// The object changed while we were reading it.
    Changed,
    /// Local file system error.
    Io,
    /// Anything else the server refused (4xx we do not classify).
    Rejected,
    /// The operation was cancelled.
    Cancelled,
}

impl ErrorKind {
    /// Whether repeating the same request may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::Connect | ErrorKind::Timeout | ErrorKind::ServerBusy
        )
    }
}

/// The operation that failed, for messages ("download gs://b/k: ...").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum Op {
    Stat,
    List,
    Download,
    Upload,
    Delete,
    CreateBucket,
    DeleteBucket,
    ListBuckets,
    Presign,
    Compose,
    Multipart,
    Copy,
    Credentials,
    Parse,
    Read,
    Write,
    /// Metadata changed in place (`shoal update`).
    Update,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Stat => "stat",
            Op::List => "list",
            Op::Download => "download",
            Op::Upload => "upload",
            Op::Delete => "delete",
            Op::CreateBucket => "create bucket",
            Op::DeleteBucket => "remove bucket",
            Op::ListBuckets => "list buckets",
            Op::Presign => "presign",
            Op::Compose => "compose",
            Op::Multipart => "multipart upload",
            Op::Copy => "copy",
            Op::Credentials => "credentials",
            Op::Parse => "parse",
            Op::Read => "read",
            Op::Write => "write",
            Op::Update => "update",
        })
    }
}

/// A failed operation: what, where, what the other side said, what to try.
#[derive(Debug, thiserror::Error)]
pub struct Error {
    kind: ErrorKind,
    op: Op,
    url: String,
    message: String,
    hint: Option<String>,
    status: Option<u16>,
    retry_after: Option<std::time::Duration>,
    /// No retry can help, whatever the kind says (see [`Error::permanent`]).
    permanent: bool,
    /// The request never left this machine (see [`Error::unsent`]).
    unsent: bool,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    /// A new error; `message` is flattened to one line and trimmed.
    pub fn new(kind: ErrorKind, op: Op, url: impl Into<String>, message: impl AsRef<str>) -> Self {
        Error {
            kind,
            op,
            url: redact(&url.into()),
            message: one_line(&redact(message.as_ref()), 300),
            hint: None,
            status: None,
            retry_after: None,
            permanent: false,
            unsent: false,
            source: None,
        }
    }

    /// Marks an error as one that happened before the request reached the
    /// server (a refused connection, a failed handshake): the server cannot
    /// have acted on it, so a write may be sent again as it was.
    pub fn unsent(mut self) -> Self {
        self.unsent = true;
        self
    }

    /// Whether the server may have carried out the request although it
    /// failed: a reset, a timeout or a 5xx after the request was sent (its
    /// response lost, or the server failing after the work). A write or
    /// delete that failed this way is not retried blindly
    /// ([`crate::retry::safe`]). A 429 is a refusal before any work.
    pub fn may_have_been_applied(&self) -> bool {
        if self.unsent || !self.is_retryable() {
            return false;
        }
        !matches!(self.status, Some(429))
    }

    /// Marks an error of a usually retryable kind as one no retry can fix:
    /// a host name that does not exist is a wrong endpoint, not a network
    /// hiccup, and retrying it made the user wait 18 s for the message.
    pub fn permanent(mut self) -> Self {
        self.permanent = true;
        self
    }

    /// Adds what the user could try.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Records the HTTP status the server answered.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Records a server's `Retry-After`.
    pub fn with_retry_after(mut self, after: std::time::Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// How long the server asked us to wait before retrying.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        self.retry_after
    }

    /// Keeps the underlying error for `source()` chains.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Replaces the URL (backends know the request URL, callers the user's).
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = redact(&url.into());
        self
    }

    /// Replaces the operation.
    pub fn with_op(mut self, op: Op) -> Self {
        self.op = op;
        self
    }

    /// The kind, for matching.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The operation that failed.
    pub fn op(&self) -> Op {
        self.op
    }
    /// The URL the operation was about.
    pub fn url(&self) -> &str {
        &self.url
    }
    /// The HTTP status, when a server answered.
    pub fn status(&self) -> Option<u16> {
        self.status
    }
    /// The one-line message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// What to try, when known.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }
    /// Whether a retry may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable() && !self.permanent
    }

    /// An error about the caller's input.
    pub fn invalid(op: Op, url: impl Into<String>, message: impl AsRef<str>) -> Self {
        Error::new(ErrorKind::InvalidInput, op, url, message)
    }

    /// A local I/O error on `path`, classified by its `io::ErrorKind`.
    pub fn io(op: Op, path: impl Into<String>, err: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let kind = match err.kind() {
            K::NotFound => ErrorKind::NotFound,
            K::PermissionDenied | K::ReadOnlyFilesystem => ErrorKind::PermissionDenied,
            K::InvalidInput | K::InvalidFilename | K::IsADirectory | K::NotADirectory => {
                ErrorKind::InvalidInput
            }
            _ => ErrorKind::Io,
        };
        let msg = io_message(&err);
        Error::new(kind, op, path, msg).with_source(err)
    }
}

fn io_message(err: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match err.kind() {
        K::NotFound => "no such file or directory".into(),
        K::PermissionDenied => "permission denied".into(),
        K::StorageFull => "no space left on device".into(),
        K::ReadOnlyFilesystem => "read-only file system".into(),
        K::IsADirectory => "is a directory".into(),
        K::NotADirectory => "a parent is not a directory".into(),
        K::FileTooLarge => {
            "file too large (past the file size limit, `ulimit -f`, or the file system's)".into()
        }
        _ => {
            // std's Display adds " (os error N)"; keep it, it helps searches.
            err.to_string()
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A key may hold control characters; never send them raw to a terminal.
        write!(
            f,
            "{} {}: {}",
            self.op,
            escape_controls(&self.url),
            self.message
        )?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// `s` with the secrets a URL can carry replaced by `***`: the password
/// (and user) of `scheme://user:password@host`, and the values of signing
/// and token query parameters (presigned URLs). Every error goes through
/// it, so a credential put in an endpoint URL is never printed back.
pub fn redact(s: &str) -> String {
    const SECRET_PARAMS: [&str; 8] = [
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-signature",
        "x-goog-credential",
        "access_token",
        "signature",
        "sig",
    ];
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    // userinfo: between "://" and the next "@" before any "/", " " or end.
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(a) => {
                out.push_str("***@");
                rest = &tail[a + 1..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    // Query parameters: NAME=VALUE after '?' or '&'.
    let lower = out.to_ascii_lowercase();
    let mut cut: Vec<(usize, usize)> = Vec::new();
    for p in SECRET_PARAMS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(&format!("{p}=")) {
            let start = from + i;
            from = start + p.len() + 1;
            let before = lower[..start].chars().next_back();
            if !matches!(before, Some('?') | Some('&')) {
                continue;
            }
            let vend = lower[from..]
                .find(|c: char| c == '&' || c == '#' || c.is_whitespace() || c == '"')
                .map_or(lower.len(), |j| from + j);
            cut.push((from, vend));
        }
    }
    cut.sort_unstable();
    for (a, b) in cut.into_iter().rev() {
        if a < b {
            out.replace_range(a..b, "***");
        }
    }
    out
}

/// `s` safe to show on a terminal: control characters (a key may hold
/// `\r` or `ESC [2J`, which would forge a line or clear the screen) are
/// written as escapes, `\r` `\n` `\t` `\x1b` `\u{9b}`, and a backslash
/// as `\\` so an escape cannot be forged either. Everything else, unicode
/// included, is kept. Borrowed when there is nothing to escape.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Flattens `s` to one line of at most `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 3));
    let mut last_space = true;
    for c in s.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' {
            if last_space {
                continue;
            }
            last_space = true;
        } else {
            last_space = false;
        }
        if out.chars().count() >= max {
            out.push('…');
            break;
        }
        out.push(c);
    }
    while out.ends_with(' ') {
        out.pop();
    }
    out
}

/// The innermost useful message of an error chain ("Connection refused (os
/// error 111)"), without the URL reqwest prepends.
pub fn chain_message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut msgs = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        let m = e.to_string();
        // reqwest's own top level message repeats the URL; skip it when a
        // more specific cause exists.
        if !m.starts_with("error sending request") && !m.starts_with("error decoding response") {
            msgs.push(m);
        }
        cur = e.source();
    }
    let m = msgs.last().cloned().unwrap_or_else(|| err.to_string());
    one_line(&m, 200)
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("plain é/key"), "plain é/key");
        assert_eq!(escape_controls("a\rb\x1b[2Jc\n\\"), "a\\rb\\x1b[2Jc\\n\\\\");
        assert_eq!(escape_controls("\u{9b}x"), "\\u{9b}x");
        let e = Error::invalid(Op::Read, "gs://b/a\rFORGED", "m");
        assert!(!e.to_string().contains('\r'), "{e}");
    }

    #[test]
    fn secrets_in_urls_are_redacted() {
        for (raw, want) in [
            ("http://user:PW@host:9000", "http://***@host:9000"),
            ("parse http://u:PW@h/x: bad", "parse http://***@h/x: bad"),
            (
                "https://h/b/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=abc123&x=1",
                "https://h/b/k?X-Amz-Credential=***&X-Amz-Signature=***&x=1",
            ),
            (
                "https://h/o?x-goog-signature=deadbeef",
                "https://h/o?x-goog-signature=***",
            ),
            ("gs://bucket/a@b/c", "gs://bucket/a@b/c"),
            ("s3://b/k?design=1", "s3://b/k?design=1"),
        ] {
            assert_eq!(redact(raw), want, "{raw}");
        }
        let e = Error::invalid(Op::Parse, "http://u:SeCrEt@h", "in http://u:SeCrEt@h");
        assert!(!e.to_string().contains("SeCrEt"), "{e}");
        assert!(
            !e.with_url("http://a:SeCrEt@h")
                .to_string()
                .contains("SeCrEt")
        );
    }

    use super::*;

    #[test]
    fn display_is_one_line_with_op_url_and_hint() {
        let e = Error::new(
            ErrorKind::NotFound,
            Op::Download,
            "gs://b/k",
            "No such\nobject:\r\n  b/k",
        )
        .with_hint("check the name");
        let s = e.to_string();
        assert_eq!(s, "download gs://b/k: No such object: b/k (check the name)");
        assert!(!s.contains('\n'));
    }

    #[test]
    fn long_server_bodies_are_cut() {
        let body = "x".repeat(10_000);
        let e = Error::new(ErrorKind::Protocol, Op::List, "s3://b/", &body);
        assert!(e.to_string().chars().count() < 400);
    }

    #[test]
    fn control_characters_in_urls_are_escaped() {
        let e = Error::new(
            ErrorKind::NotFound,
            Op::Stat,
            "gs://b/a\u{1b}[2Jb\n",
            "gone",
        );
        // As GNU ls and the issue ask: the common ones by name, others as
        // \xNN (ASCII) or \u{..}.
        assert_eq!(e.to_string(), "stat gs://b/a\\x1b[2Jb\\n: gone");
    }

    #[test]
    fn retryable_kinds() {
        assert!(ErrorKind::ServerBusy.is_retryable());
        assert!(ErrorKind::Connect.is_retryable());
        assert!(!ErrorKind::NotFound.is_retryable());
        assert!(!ErrorKind::Integrity.is_retryable());
    }
}
