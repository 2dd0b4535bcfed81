//! Where shoal keeps what outlives one run on this machine: the journals
//! of uploads to resume (shoal-transfer's `upload_journal`) and of
//! composite uploads whose parts a killed run left (shoal-gcs's
//! `leftovers`).

use std::path::PathBuf;

/// The state folder: `$SHOAL_STATE_DIR`, else `$XDG_STATE_HOME/shoal`, else
/// `~/.local/state/shoal`; None when none of them is set.
pub fn dir() -> Option<PathBuf> {
    let var = |n: &str| {
        std::env::var_os(n)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("SHOAL_STATE_DIR")
        .or_else(|| var("XDG_STATE_HOME").map(|d| d.join("shoal")))
        .or_else(|| var("HOME").map(|h| h.join(".local/state/shoal")))
}
