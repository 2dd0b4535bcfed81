//! The promises a plan keeps before it writes or deletes anything, in one
//! place: every command of this crate (copy, move, sync, delete, run
//! files, Python's lists of pairs, Dask's split syncs) goes through these,
//! and a front end adds none of its own: front ends make plans only
//! through [`crate::ops`], whose `Sync::new`, `TreeCopy::plan` and
//! `Pairs::check` run the overlap and conflict checks first.
//!
//! | Promise | Kept by |
//! |---|---|
//! | Never read what the plan writes, never delete what it reads: source and destination do not overlap | [`overlap`] |
//! | A plan given as a list touches each place once, and no step reads what another writes or deletes | [`conflicts`] |
//! | Deletes wait for a complete, successful plan: an empty source, a failure or more than `--max-delete` holds them all | [`deletes::deletes_held`], [`deletes::batch_holds_deletes`] |
//! | A delete names the version it was planned against; a version written meanwhile is kept | [`deletes::delete_at`], [`deletes::delete_moved`] |
//! | An extra is deleted only if the live source does not hold it (a kept listing or an inventory report is a hint) | [`crate::sync`]'s `confirm_extras` |
//! | An upload is aborted only as the store lists it now, by its id, and only once older than the age given: one being sent now is left alone | [`deletes::abort_justified`], called by [`crate::uploads::abort`] |
//! | What a plan does not do is a skip, an outcome counted apart from failures, never an error a retry or an exception handler could mistake for one; a skip nobody asked for holds every delete | [`shoal_core::skip`], [`deletes::batch_holds_deletes`] |
//!
//! Kept below this crate, where the backends need them:
//!
//! | Promise | Kept by |
//! |---|---|
//! | Retry only what is safe: a retried write or delete carries its precondition, a lost answer is looked at before anything is sent again | [`shoal_core::retry::safe`] |
//! | Never write outside the destination, whatever a key holds or a link points at | [`shoal_core::local_path`] |
//! | A file is written under a temporary name this run owns and renamed once its checksum matches | [`shoal_core::workfile`] |

pub(crate) mod conflicts;
pub(crate) mod deletes;
pub(crate) mod overlap;
