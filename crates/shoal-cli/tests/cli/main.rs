//! The CLI's integration tests, one module a subject, linked as one test
//! binary: 31 binaries of 100-300 MB each took most of a build's link
//! time and disk. Run one subject with `cargo test -p shoal-cli --test cli
//! data_safety::` (a name filter).

mod common;

mod bad_input;
mod cat;
mod cli;
mod composite_checksums;
mod crash;
mod daily;
mod data_safety;
mod encryption;
mod faults;
mod filters;
mod gcs_batch_delete;
mod gcs_retry_conformance;
mod http_faults;
mod inventory;
mod local_faults;
mod lost_responses;
mod ls_glob;
mod many_files;
mod metadata;
mod named_stores;
mod network;
mod other_checksums;
mod overlap;
mod preconditions;
mod random_plans;
mod resume;
mod round_trips;
mod s3_servers;
mod secrets;
mod server_side;
mod skips;
mod soak;
mod sync_checksums;
mod update;
mod upload_methods;
mod upload_resume;
mod versions;
