//! How a command ends: its failure, and the exit code and line it
//! becomes. Every command module returns a [`CmdResult`]; `main` turns it
//! into the process's exit, so the codes (0, 1, 2) are decided here only.

use std::process::ExitCode;

/// A command's failure: how to exit and what to say.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad usage (exit 2).
    Usage(String),
    /// The operation failed (exit 1).
    Failed(String),
    /// Already reported (per-item failures); just exit 1.
    Reported,
}

impl From<shoal_core::Error> for Failure {
    fn from(e: shoal_core::Error) -> Self {
        if e.kind() == shoal_core::ErrorKind::InvalidInput && e.status().is_none() {
            Failure::Usage(e.to_string())
        } else {
            Failure::Failed(e.to_string())
        }
    }
}

pub(crate) type CmdResult = Result<(), Failure>;

/// The exit code (0 success, 1 failure, 2 usage) and, for a failure not
/// yet reported, its line on stderr.
pub(crate) fn exit_code(result: CmdResult) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("shoal: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(m)) => {
            eprintln!("shoal: {m}");
            ExitCode::FAILURE
        }
        Err(Failure::Reported) => ExitCode::FAILURE,
    }
}
