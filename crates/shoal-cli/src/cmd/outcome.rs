//! What one copy ends as and says, shared by `cp` and its stdin/stdout
//! forms (`stdio`), so neither imports the other.

use shoal_core::{Error, ErrorKind};
use shoal_transfer::Report;

use crate::config::Context;
use crate::failure::Failure;

/// What one copy did: its report, what it read and wrote, and how long it
/// took; None when `--no-clobber` skipped it (said already).
pub(crate) type Done = Option<(Report, String, String, std::time::Duration)>;

/// What a `--no-clobber` refusal says (`shoal_core::workfile::persist_error`
/// and the stores' precondition failures both become it in `copy_one`).
pub(crate) const NOT_REPLACED: &str = "not replaced (--no-clobber)";

/// A skip as asked (`--no-clobber`): a JSON object with `reason`, or the
/// `line` on stderr.
pub(crate) fn say_skipped(ctx: &Context, reason: String, line: String) {
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"action": "skip", "asked": true, "reason": reason})
        );
    } else if !ctx.quiet {
        eprintln!("{line}");
    }
}

/// An engine's error as the command's: a failed precondition (only
/// `--no-clobber` sends one) says it was that refusal.
pub(crate) fn refusal(e: Error) -> Failure {
    if e.kind() == ErrorKind::Precondition && !e.to_string().contains(NOT_REPLACED) {
        return Failure::Failed(format!("{e} ({NOT_REPLACED})"));
    }
    e.into()
}
