//! The command line, as clap sees it. Only parsing and validation here;
//! turning flags into stores and engines happens in `config.rs`.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `shoal --version`: the version and the commit built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SHOAL_BUILT_FROM"),
    ")"
);

/// shoal: move, list and read data in cloud object storage, fast.
#[derive(Debug, Parser)]
#[command(name = "shoal", version = VERSION, about, long_about = None, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Flags every verb takes: under their own heading in every verb's help,
/// so `cp --help` shows cp's own options first, apart from them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub(crate) struct Global {
    /// Endpoint for gs:// and s3:// URLs (e.g. http://127.0.0.1:9000); the
    /// scheme-specific flags below win over it.
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) endpoint_url: Option<String>,
    /// Endpoint for gs:// only (default: $STORAGE_EMULATOR_HOST, else Google).
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) gcs_endpoint_url: Option<String>,
    /// Endpoint for s3:// only (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS).
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) s3_endpoint_url: Option<String>,
    /// Send requests without credentials (public data).
    #[arg(long, global = true)]
    pub(crate) no_sign_request: bool,
    /// S3 region (default: $AWS_REGION, $AWS_DEFAULT_REGION, us-east-1).
    #[arg(long, global = true)]
    pub(crate) region: Option<String>,
    /// AWS profile to take credentials from.
    #[arg(long, global = true)]
    pub(crate) profile: Option<String>,
    /// S3 addressing style.
    #[arg(long, global = true, value_enum, default_value_t = Addressing::Auto)]
    pub(crate) s3_addressing: Addressing,
    /// GCS requester pays: bill requests to project P (sent as userProject;
    /// default: $CLOUDSDK_BILLING_QUOTA_PROJECT, as gcloud).
    #[arg(long, global = true, value_name = "P", value_parser = parse_project)]
    pub(crate) billing_project: Option<String>,
    /// S3 requester pays: agree to pay for requests to requester-pays
    /// buckets (x-amz-request-payer: requester); `--request-payer=requester`
    /// is the same.
    #[arg(long, global = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "requester", value_parser = ["requester"])]
    pub(crate) request_payer: Option<String>,
    /// Parallel requests (default: 2 per vCPU for slices and parts, and
    /// in batches and reads up to 128 cheap one-request transfers such as
    /// small files, deletes and dataset objects); N sets both.
    #[arg(long, short = 'w', global = true, value_parser = parse_workers)]
    pub(crate) workers: Option<usize>,
    /// Attempts per request for retryable failures (1 = no retries).
    #[arg(long, global = true, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) attempts: u32,
    /// Seconds without a byte moving (the server taking the request, or
    /// sending its answer) after which a request is dropped and retried
    /// (default 60); a slow but steady transfer never times out.
    #[arg(long, global = true, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) read_timeout: Option<u64>,
    /// Seconds to make a connection (TCP, a proxy's CONNECT and TLS
    /// together) before the attempt fails and is retried (default 10).
    #[arg(long, global = true, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) connect_timeout: Option<u64>,
    /// Send every request through this proxy (http://[user:pw@]host:port)
    /// instead of $HTTPS_PROXY/$HTTP_PROXY/$ALL_PROXY; $NO_PROXY still applies.
    #[arg(long, global = true, value_name = "URL", conflicts_with = "no_proxy")]
    pub(crate) proxy: Option<String>,
    /// Connect to every server directly, ignoring the proxy variables.
    #[arg(long, global = true)]
    pub(crate) no_proxy: bool,
    /// PEM file of CA certificates to trust on top of the system's (a
    /// private CA); $SSL_CERT_FILE and, for S3, $AWS_CA_BUNDLE too.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) ca_bundle: Option<std::path::PathBuf>,
    /// No progress bars or summaries.
    #[arg(long, short = 'q', global = true)]
    pub(crate) quiet: bool,
    /// More log output (-v info, -vv debug, -vvv trace), on stderr.
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    #[command(flatten)]
    pub(crate) encryption: crate::encryption::EncryptionFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Addressing {
    /// Path style for custom endpoints, virtual host for AWS.
    Auto,
    /// https://endpoint/bucket/key
    Path,
    /// https://bucket.endpoint/key
    Virtual,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List buckets' objects and prefixes.
    // `-h` is human-readable sizes here (`ls -lh`), as in ls and du; help
    // is `--help`.
    #[command(disable_help_flag = true)]
    Ls(LsArgs),
    /// Total size and count below a URL or glob, optionally grouped.
    #[command(disable_help_flag = true)]
    Du(DuArgs),
    /// Show an object's metadata.
    Stat(StatArgs),
    /// Bring back a stored version as the live object: a GCS soft-deleted generation (`ls --soft-deleted` lists them), or any noncurrent version (`ls -a`).
    Restore(RestoreArgs),
    /// List the multipart uploads in progress below a URL; --abort discards those older than --older-than.
    Uploads(UploadsArgs),
    /// Write objects (or globs) to stdout in order; -d decompresses zstd and gzip.
    Cat(CatArgs),
    /// Delete objects.
    Rm(RmArgs),
    /// Create a bucket.
    Mb(MbArgs),
    /// Remove a bucket (empty, or with --force everything in it first).
    Rb(RbArgs),
    /// Print a URL anyone can use (GET by default; PUT, HEAD, DELETE, POST) without credentials until it expires.
    #[command(visible_alias = "signurl")]
    Presign(PresignArgs),
    /// Copy objects or files (local↔cloud, cloud↔cloud); `-r` for folders, globs for sets; `-` is stdin/stdout.
    Cp(CpArgs),
    /// Move objects or files: copy, verify, then delete the source (never a source whose copy failed); `-r` for folders and prefixes, globs for sets.
    Mv(CpArgs),
    /// Make DST hold what SRC holds: copy what is missing or differs (`--delete` removes extras).
    Sync(SyncArgs),
    /// Change objects' type, encoding, cache control, disposition, metadata or storage class on the server, without moving their bytes; pinned to the version seen (a concurrent write wins and is reported); `-r` for prefixes, globs for sets.
    Update(UpdateArgs),
    /// Run `cp`/`rm` lines from a file (or `-` for stdin) concurrently.
    Run(RunArgs),
    /// Print the CRC32C and MD5 of files (computed) and objects (as the store keeps them; --compute reads them).
    Hash(HashArgs),
    /// Compare two trees (local, gs://, s3://) by size and checksum: print what is missing on either side or differs; exit 0 when they match, 1 when not.
    Check(CheckArgs),
    /// Measure: `bench read URL...` reads and decompresses, writes nothing.
    Bench(BenchArgs),
    /// Print a shell completion script: `shoal completions bash > ~/.local/share/bash-completion/completions/shoal`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff): `shoal man | man -l -`.
    Man,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

impl Command {
    /// How GCS takes this command's uploads (`cp`/`mv --gcs-upload`): a
    /// setting of the GCS store, made with the command's stores.
    pub(crate) fn gcs_upload(&self) -> shoal_core::UploadMethod {
        use shoal_core::UploadMethod;
        match self {
            Command::Cp(a) | Command::Mv(a) => match a.gcs_upload {
                GcsUploadArg::Auto => UploadMethod::Auto,
                GcsUploadArg::Compose => UploadMethod::Compose,
                GcsUploadArg::Xml => UploadMethod::Native,
                GcsUploadArg::Resumable => UploadMethod::Session,
            },
            _ => UploadMethod::Auto,
        }
    }

    /// Whether a verb that changes things was asked for `--json` output
    /// (ls, du, stat and bench print their own).
    pub(crate) fn json(&self) -> bool {
        match self {
            Command::Cp(a) | Command::Mv(a) => a.json,
            Command::Sync(a) => a.json,
            Command::Run(a) => a.json,
            Command::Rm(a) => a.json,
            Command::Update(a) => a.json,
            Command::Mb(a) => a.json,
            Command::Rb(a) => a.json,
            Command::Presign(a) => a.json,
            Command::Uploads(a) => a.json,
            _ => false,
        }
    }

    /// The rate limits of the verbs that move data (None for the others).
    pub(crate) fn limits(&self) -> Option<&LimitFlags> {
        match self {
            Command::Cp(a) | Command::Mv(a) => Some(&a.limits),
            Command::Sync(a) => Some(&a.limits),
            Command::Run(a) => Some(&a.limits),
            Command::Cat(a) => Some(&a.limits),
            Command::Bench(BenchArgs {
                what: BenchCommand::Read(a),
            }) => Some(&a.limits),
            _ => None,
        }
    }
}

/// Rate limits for the whole command (`shoal_transfer::ops::rate`), and how
/// its copies move.
#[derive(Debug, Args, Clone)]
pub(crate) struct LimitFlags {
    /// Stream copies within one store (both gs://, or both s3:// on one
    /// endpoint) through this machine instead of having the server copy
    /// them (S3 CopyObject, GCS rewrite), which is the default.
    #[arg(long)]
    pub(crate) no_server_side: bool,
    /// Bytes per second the whole command may move, uploads and downloads
    /// together (e.g. 100MiB = 100 MiB/s). Default: unlimited.
    #[arg(long, value_parser = parse_rate, value_name = "SIZE", allow_hyphen_values = true)]
    pub(crate) rate_limit: Option<u64>,
    /// Requests the whole command may start per second, across all
    /// workers. Default: unlimited.
    #[arg(long, value_parser = parse_requests_per_sec, value_name = "N", allow_hyphen_values = true)]
    pub(crate) max_requests_per_sec: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct LsArgs {
    /// gs://bucket[/prefix], s3://bucket[/prefix] or a local folder;
    /// `gs://` or `s3://` lists buckets, nothing lists both providers' buckets.
    pub(crate) url: Option<String>,
    /// Show size and update time, and a total.
    #[arg(short = 'l', long)]
    pub(crate) long: bool,
    /// With -l: sizes as 1.5 MiB, not bytes (`ls -lh`).
    #[arg(short = 'h', long)]
    pub(crate) human_readable: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub(crate) help: Option<bool>,
    /// List everything below the prefix, not just one level.
    #[arg(short = 'r', long)]
    pub(crate) recursive: bool,
    /// One JSON object per line, then, if the listing ended without an error, a closing record `{"listing_end": {"count": N, "complete": true, "url": ..., "recursive": .., "sorted": .., "filtered": .., "started_at": .., "made_at": .., "shoal": ..}}`: a kept listing without it was cut short (sync --source-listing refuses it).
    #[arg(long)]
    pub(crate) json: bool,
    /// Parallel list requests for large listings (1 = one at a time).
    /// Extra requests start only once the first page shows there is more
    /// than one page.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) parallel: Option<u32>,
    /// Print in key order (a parallel listing holds up to 64 pages of later
    /// key ranges in memory until the earlier ones are done).
    #[arg(long)]
    pub(crate) sorted: bool,
    /// Every version: noncurrent ones and S3 delete markers too (`url#VERSION` per line; -l adds a state and a version column; --json adds generation or version_id, is_latest, delete_marker).
    #[arg(short = 'a', long)]
    pub(crate) all_versions: bool,
    /// GCS soft-deleted objects only (`url#GENERATION` per line, for `shoal restore`); a server without soft delete lists none.
    #[arg(long, conflicts_with = "all_versions")]
    pub(crate) soft_deleted: bool,
    /// With -r: names are keys below the listed prefix (a glob's: below its literal folder).
    #[command(flatten)]
    pub(crate) filters: FilterFlags,
}

#[derive(Debug, Args)]
pub(crate) struct DuArgs {
    /// gs://bucket[/prefix], s3://…, a glob (gs://b/logs/**.gz).
    #[arg(required = true)]
    pub(crate) urls: Vec<String>,
    /// Only the total per URL.
    #[arg(short = 's', long)]
    pub(crate) summarize: bool,
    /// Sizes as 1.5 MiB only, not bytes too (`du -h`, `gsutil du -h`).
    #[arg(short = 'h', long)]
    pub(crate) human_readable: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub(crate) help: Option<bool>,
    /// Group by prefix[:DEPTH] (default prefix:1), suffix, age or storage-class.
    #[arg(long, value_name = "HOW", value_parser = parse_group_by)]
    pub(crate) group_by: Option<shoal_list::du::GroupBy>,
    /// Count objects only (no sizes).
    #[arg(short = 'c', long)]
    pub(crate) count: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Parallel list requests (1 = one at a time).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) parallel: Option<u32>,
    #[command(flatten)]
    pub(crate) filters: FilterFlags,
}

fn parse_group_by(s: &str) -> Result<shoal_list::du::GroupBy, String> {
    s.parse()
}

#[derive(Debug, Args)]
pub(crate) struct StatArgs {
    /// The object.
    pub(crate) url: String,
    /// One JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    /// One stored version: a GCS generation or an S3 version id (`shoal ls -a` lists them).
    #[arg(long, value_name = "VERSION")]
    pub(crate) version_id: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// The object: `gs://b/k#GENERATION` as gcloud writes it, or with --version-id.
    pub(crate) url: String,
    /// The version to restore: a GCS generation or an S3 version id.
    #[arg(long, value_name = "VERSION")]
    pub(crate) version_id: Option<String>,
    /// Replace the key's live object if it has one (by default a restore only fills a key that has none).
    #[arg(long)]
    pub(crate) allow_overwrite: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UploadsArgs {
    /// A bucket or a key prefix: s3://bucket/prefix.
    pub(crate) url: String,
    /// Abort the uploads listed that were started at least --older-than ago (their parts are deleted).
    #[arg(long)]
    pub(crate) abort: bool,
    /// With --abort: only uploads started at least this long ago (N[s|m|h|d]; 0 for all).
    #[arg(long, default_value = "1h", value_name = "AGE", value_parser = parse_age)]
    pub(crate) older_than: std::time::Duration,
    /// One JSON object a line: each upload, then a summary.
    #[arg(long)]
    pub(crate) json: bool,
}

fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    parse_secs(s).map(std::time::Duration::from_secs)
}

#[derive(Debug, Args)]
pub(crate) struct CatArgs {
    /// Objects, globs (gs://b/logs/**.zst) or local files, written in the
    /// order given (a glob's objects in key order).
    #[arg(required = true)]
    pub(crate) urls: Vec<String>,
    #[command(flatten)]
    pub(crate) read: ReadFlags,
    /// Write whole objects as they finish instead of in order (never
    /// interleaving two objects' bytes).
    #[arg(long)]
    pub(crate) unordered: bool,
    /// End every object's output with a newline, so lines of two objects
    /// are never joined.
    #[arg(long)]
    pub(crate) lines: bool,
    /// Pipe the output to copies of CMD (`sh -c CMD`), whole lines to each
    /// (implies --lines); fails if any copy fails.
    #[arg(long, value_name = "CMD")]
    pub(crate) exec: Option<String>,
    /// Copies of the --exec command (default: one per vCPU).
    #[arg(long, value_name = "N", requires = "exec", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) jobs: Option<u16>,
    /// One stored version: a GCS generation or an S3 version id (`shoal ls -a` lists them).
    #[arg(long, value_name = "VERSION")]
    pub(crate) version_id: Option<String>,
    #[command(flatten)]
    pub(crate) limits: LimitFlags,
}

/// How `cat` and `bench read` read and decode.
#[derive(Debug, Args)]
pub(crate) struct ReadFlags {
    /// Decompress zstd and gzip, recognised by their magic bytes, else by
    /// the extension (.zst, .gz). Without it, only objects stored with
    /// Content-Encoding: gzip are decoded.
    #[arg(short = 'd', long, conflicts_with = "no_decompress")]
    pub(crate) decompress: bool,
    /// Bytes exactly as stored, even with Content-Encoding: gzip.
    #[arg(long)]
    pub(crate) no_decompress: bool,
    /// Memory for reading ahead: fetched and decoded bytes not yet written.
    #[arg(long, value_parser = parse_size, value_name = "SIZE", default_value = "256MiB")]
    pub(crate) read_ahead: u64,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Read and decompress without writing; report GB/s and CPU use.
    Read(BenchReadArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    pub(crate) what: BenchCommand,
}

#[derive(Debug, Args)]
pub(crate) struct BenchReadArgs {
    /// Objects, globs or local files.
    #[arg(required = true)]
    pub(crate) urls: Vec<String>,
    /// Bytes as stored (measure the network alone).
    #[arg(long)]
    pub(crate) no_decompress: bool,
    /// Memory for reading ahead.
    #[arg(long, value_parser = parse_size, value_name = "SIZE", default_value = "256MiB")]
    pub(crate) read_ahead: u64,
    /// One JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) limits: LimitFlags,
}

#[derive(Debug, Args)]
pub(crate) struct RmArgs {
    /// Objects or globs to delete.
    #[arg(required = true)]
    pub(crate) urls: Vec<String>,
    /// Delete everything below each URL taken as a prefix.
    #[arg(short = 'r', long)]
    pub(crate) recursive: bool,
    /// Print what would be deleted (`would remove URL`), delete nothing.
    #[arg(long, short = 'n')]
    pub(crate) dry_run: bool,
    /// Objects named that do not exist are not an error (as `rm -f`).
    #[arg(long, short = 'f')]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) matching: MatchFlags,
    /// One stored version: a GCS generation or an S3 version id (`shoal ls -a` lists them).
    #[arg(long, value_name = "VERSION")]
    pub(crate) version_id: Option<String>,
    /// Every version and S3 delete marker of each key named (a key, a glob, or with -r a prefix), each deleted for good by its own version.
    #[arg(short = 'a', long, conflicts_with = "version_id")]
    pub(crate) all_versions: bool,
    /// With -r or a glob: names are keys below the prefix (a glob's: below its literal folder).
    #[command(flatten)]
    pub(crate) filters: FilterFlags,
    /// Print one JSON object per line on stdout: each action as it finishes, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UpdateArgs {
    /// Objects or globs to change (gs:// or s3://).
    #[arg(required = true)]
    pub(crate) urls: Vec<String>,
    /// Change everything below each URL taken as a prefix.
    #[arg(short = 'r', long)]
    pub(crate) recursive: bool,
    #[command(flatten)]
    pub(crate) metadata: MetadataFlags,
    /// Remove this custom metadata key (repeatable).
    #[arg(long, value_name = "KEY")]
    pub(crate) remove_metadata: Vec<String>,
    #[command(flatten)]
    pub(crate) matching: MatchFlags,
    /// Print what would change (`would update URL`), change nothing.
    #[arg(long, short = 'n')]
    pub(crate) dry_run: bool,
    /// Print one JSON object per line on stdout: each action as it finishes, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

impl UpdateArgs {
    /// The flags as the engine's change, checked; `dst` names the store
    /// the storage class must be one of.
    pub(crate) fn change(
        &self,
        dst: &shoal_core::Location,
    ) -> Result<shoal_transfer::ops::update::Change, String> {
        let change = shoal_transfer::ops::update::Change {
            put: self.metadata.put(dst)?,
            remove: self.remove_metadata.iter().cloned().collect(),
        };
        change.check()?;
        Ok(change)
    }
}

#[derive(Debug, Args)]
pub(crate) struct MbArgs {
    /// gs://bucket or s3://bucket.
    pub(crate) url: String,
    /// Print one JSON object per line on stdout: each action as it finishes, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RbArgs {
    /// gs://bucket or s3://bucket, exactly (no key, no glob).
    pub(crate) url: String,
    /// Delete every object in the bucket first (as `rm -r` does), then the bucket.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print one JSON object per line on stdout: each action as it finishes, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PresignArgs {
    /// The object: gs://bucket/key or s3://bucket/key.
    pub(crate) url: String,
    /// How long the URL works: N[s|m|h|d], 1s to 7d.
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = parse_expires, allow_hyphen_values = true)]
    pub(crate) expires: std::time::Duration,
    /// What the URL allows.
    #[arg(long, value_enum, default_value_t = PresignMethodArg::Get)]
    pub(crate) method: PresignMethodArg,
    /// A header the URL's user must send as given, signed into the URL: NAME=VALUE or 'NAME: VALUE' (e.g. `--header content-type=text/csv` for a PUT). Repeatable.
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = parse_header)]
    pub(crate) headers: Vec<(String, String)>,
    /// A query parameter signed into the URL: NAME=VALUE (e.g. `response-content-disposition=attachment`). Repeatable.
    #[arg(long = "query-param", value_name = "NAME=VALUE", value_parser = parse_query_param)]
    pub(crate) query: Vec<(String, String)>,
    /// Print one JSON object on stdout: the URL, its method, the object and when it expires.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PresignMethodArg {
    /// Read the object.
    #[value(name = "GET", alias = "get")]
    Get,
    /// Write the object with one PUT.
    #[value(name = "PUT", alias = "put")]
    Put,
    /// Read the object's metadata.
    #[value(name = "HEAD", alias = "head")]
    Head,
    /// Delete the object.
    #[value(name = "DELETE", alias = "delete")]
    Delete,
    /// POST (GCS: start a resumable upload, with `--header x-goog-resumable=start`).
    #[value(name = "POST", alias = "post")]
    Post,
}

/// `NAME=VALUE` or `NAME: VALUE`: a header name holds neither `=` nor
/// `:`, so the first of them ends it.
fn parse_header(s: &str) -> Result<(String, String), String> {
    let Some(at) = s.find(['=', ':']) else {
        return Err(format!("'{s}': a header is NAME=VALUE or 'NAME: VALUE'"));
    };
    let (name, value) = (s[..at].trim(), s[at + 1..].trim());
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("'{s}': '{name}' is not a header name"));
    }
    Ok((name.to_owned(), value.to_owned()))
}

fn parse_query_param(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("'{s}': a query parameter is NAME=VALUE")),
    }
}

/// `90`, `90s`, `15m`, `1h`, `7d`: whole seconds.
fn parse_secs(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let scale: u64 = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => 0,
    };
    if digits.is_empty() || scale == 0 {
        return Err(format!(
            "'{s}' is not a duration: write N, Ns, Nm, Nh or Nd (e.g. 1h)"
        ));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("'{s}' is too long a duration"))
}

/// A presigned URL's lifetime ([`parse_secs`]), within what both signature
/// versions allow (1 s to 7 days).
fn parse_expires(s: &str) -> Result<std::time::Duration, String> {
    let max = shoal_core::MAX_PRESIGN_EXPIRY.as_secs();
    let secs = Some(parse_secs(s)?)
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("'{s}' is out of range: a presigned URL lives 1s to 7d"))?;
    Ok(std::time::Duration::from_secs(secs))
}

/// A project id as GCS takes it: printable, no spaces (the server judges
/// the rest).
fn parse_project(s: &str) -> Result<String, String> {
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!("'{s}' is not a project id"));
    }
    Ok(s.to_owned())
}

#[derive(Debug, Args, Clone)]
pub(crate) struct CpArgs {
    /// Source: URL, local path, or `-` for stdin. Several sources (`cp
    /// a.csv b.csv s3://b/x/`, as gcloud) each go into the destination,
    /// which must then be a folder: ending in `/`, a bucket, or an existing
    /// local folder.
    #[arg(required = true, num_args = 1.., value_name = "SRC")]
    pub(crate) sources: Vec<String>,
    /// Destination: URL, local path, or `-` for stdout. A destination ending
    /// in `/` or naming an existing folder receives the source's base name.
    pub(crate) dst: String,
    /// The one source this copy reads (`sources` one at a time).
    #[arg(skip)]
    pub(crate) src: String,
    /// Copy folders and prefixes with everything below them.
    #[arg(short = 'r', long)]
    pub(crate) recursive: bool,
    /// Slices for a download (1 = one plain stream). Default: from the size.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) slices: Option<u64>,
    /// Smallest slice (e.g. 32MiB); objects below two slices are one stream.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub(crate) slice_size: Option<u64>,
    /// Multipart part size for uploads (e.g. 16MiB).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub(crate) part_size: Option<u64>,
    /// Pick up an interrupted sliced download or multipart upload where it
    /// stopped (the default: slices on disk and parts stored are checked
    /// against the object or the file and kept).
    #[arg(long, overrides_with = "no_resume")]
    pub(crate) resume: bool,
    /// Start from zero: discard the slices an interrupted download left,
    /// and neither resume nor keep an upload for resuming.
    #[arg(long)]
    pub(crate) no_resume: bool,
    /// How uploads to gs:// are made: `xml` (the XML API's multipart
    /// upload: parallel parts, no temporary objects), `compose` (parallel
    /// parts as temporary objects, then compose), `resumable` (one session)
    /// or `auto` (xml on Google's endpoints; elsewhere compose for files and
    /// resumable for stdin and cloud-to-cloud).
    #[arg(long, value_enum, default_value = "auto", value_name = "METHOD")]
    pub(crate) gcs_upload: GcsUploadArg,
    /// Never replace a destination that exists (atomically: the store's precondition, or a rename that does not replace); those are counted as skipped. No short letter: gcloud's and s5cmd's `cp -n` is this flag, shoal's `-n` is --dry-run.
    #[arg(long)]
    pub(crate) no_clobber: bool,
    /// Uploads record each file's mode, owner and group (GCS: goog-reserved-posix-mode/uid/gid as gcloud; S3: mode/uid/gid as rclone); downloads give them back (the mode always, never setuid/setgid/sticky; owner and group where this process may).
    #[arg(short = 'P', long)]
    pub(crate) preserve_posix: bool,
    #[command(flatten)]
    pub(crate) matching: MatchFlags,
    /// The source's stored version: a GCS generation or an S3 version id. Copied over its own key, an old version is restored as the current one, the write pinned to the version current just before (a concurrent write wins).
    #[arg(long, value_name = "VERSION")]
    pub(crate) version_id: Option<String>,
    /// With -r or a glob source: print what would be copied, copy nothing.
    #[arg(long, short = 'n')]
    pub(crate) dry_run: bool,
    /// With -r or a glob source: names are relative to the folder copied (`cp -r DIR`: below `DIR/`; a glob: below its literal folder).
    #[command(flatten)]
    pub(crate) filters: FilterFlags,
    #[command(flatten)]
    pub(crate) metadata: MetadataFlags,
    #[command(flatten)]
    pub(crate) links: LinkFlags,
    #[command(flatten)]
    pub(crate) limits: LimitFlags,
    /// Print one JSON object per line on stdout: each action as it finishes, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `--if-generation-match` / `--if-match`: a write or delete of one object
/// that happens only if the object is at the version the user read, as a
/// precondition of the request itself (never a stat first).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct MatchFlags {
    /// Only if the gs:// object is at this generation (0: only if it does not exist), checked by the server (gcloud's flag). One object.
    #[arg(long, value_name = "GENERATION", conflicts_with = "if_match")]
    pub(crate) if_generation_match: Option<i64>,
    /// Only if the s3:// object's ETag is this one (S3 If-Match), checked by the server. One object.
    #[arg(long, value_name = "ETAG")]
    pub(crate) if_match: Option<String>,
}

impl MatchFlags {
    pub(crate) fn any(&self) -> bool {
        self.if_generation_match.is_some() || self.if_match.is_some()
    }

    /// The flag given, as error messages name it.
    pub(crate) fn flag(&self) -> &'static str {
        if self.if_match.is_some() {
            "--if-match"
        } else {
            "--if-generation-match"
        }
    }

    /// The version `loc` must be at; a usage error where the flag cannot
    /// apply (a local path, or the other provider's kind of version).
    pub(crate) fn version(
        &self,
        verb: &str,
        loc: &shoal_core::Location,
    ) -> Result<Option<shoal_core::ObjectVersion>, String> {
        use shoal_core::{ObjectVersion, url::Scheme};
        let flag = self.flag();
        match (&loc.scheme, self.if_generation_match, &self.if_match) {
            (_, None, None) => Ok(None),
            (Scheme::File, _, _) => Err(format!(
                "{verb} {flag}: {} is a local path; local files have no versions",
                loc.key
            )),
            (_, _, _) if loc.key.is_empty() || loc.key.ends_with('/') => {
                Err(format!("{verb} {flag}: {loc} is not one object"))
            }
            (Scheme::Gs, Some(g), _) if g >= 0 => Ok(Some(ObjectVersion::Generation(g))),
            (Scheme::Gs, Some(g), _) => Err(format!(
                "{verb} --if-generation-match {g}: a generation is 0 or more"
            )),
            (Scheme::Gs, None, Some(_)) => Err(format!(
                "{verb} --if-match: {loc} is a GCS object, matched by generation; use --if-generation-match N (shoal stat shows it)"
            )),
            (Scheme::S3, Some(_), _) => Err(format!(
                "{verb} --if-generation-match: {loc} is an S3 object, matched by ETag; use --if-match ETAG (shoal stat shows it)"
            )),
            (Scheme::S3, None, Some(e)) if e.trim_matches('"').is_empty() => {
                Err(format!("{verb} --if-match: the ETag is empty"))
            }
            // As S3 sends it, in quotes (users often copy it without).
            (Scheme::S3, None, Some(e)) if e.starts_with('"') => {
                Ok(Some(ObjectVersion::ETag(e.clone())))
            }
            (Scheme::S3, None, Some(e)) => Ok(Some(ObjectVersion::ETag(format!("\"{e}\"")))),
        }
    }
}

/// `--include` / `--exclude` (see `shoal_list::filter`): rules tried in
/// the order given, the first that matches decides; when any `--include`
/// is given, a name no rule matches is left out, otherwise it is kept.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct FilterFlags {
    /// Act on names matching GLOB (repeatable; rules are tried in the order given, first match wins; with any --include, names no rule matches are left out). Names are relative to the command's root: no `/` matches the last level at any depth (`*.csv`), a trailing `/` a folder and all below it (`logs/`), a leading or middle `/` anchors at the root (`/x.txt`, `a/*.txt`); `*`, `?`, `[..]` within a level, `**` across levels (docs/filters.md).
    #[arg(long, value_name = "GLOB")]
    pub(crate) include: Vec<String>,
    /// Leave alone names matching GLOB (repeatable; see --include for the order). `sync --delete` and `rm -r` never delete an excluded name, nor anything below an excluded folder.
    #[arg(long, value_name = "GLOB")]
    pub(crate) exclude: Vec<String>,
    /// Both kinds of rule in command-line order (filled from clap's
    /// indices after parsing: see `order_rules`).
    #[arg(skip)]
    pub(crate) rules: Vec<shoal_list::Rule>,
}

impl FilterFlags {
    /// Whether any rule was given.
    pub(crate) fn any(&self) -> bool {
        !self.include.is_empty() || !self.exclude.is_empty()
    }

    /// [`FilterFlags::filter`] for a command that deletes what the rules
    /// admit: a rule read one way here and another by rsync and rclone is
    /// refused ([`shoal_list::Filter::check_beside_delete`]).
    pub(crate) fn filter_for_delete(
        &self,
    ) -> Result<Option<std::sync::Arc<shoal_list::Filter>>, crate::failure::Failure> {
        let rules: Vec<shoal_list::Rule> = self
            .exclude
            .iter()
            .map(|p| shoal_list::Rule::Exclude(p.clone()))
            .collect();
        shoal_list::Filter::check_beside_delete(&rules).map_err(crate::failure::Failure::Usage)?;
        self.filter()
    }

    /// The compiled filter (None without rules); an invalid glob is a
    /// usage error naming the flag.
    pub(crate) fn filter(
        &self,
    ) -> Result<Option<std::sync::Arc<shoal_list::Filter>>, crate::failure::Failure> {
        let rules = if self.rules.is_empty() {
            // Not reordered (a caller that built the flags itself).
            self.include
                .iter()
                .map(|p| shoal_list::Rule::Include(p.clone()))
                .chain(
                    self.exclude
                        .iter()
                        .map(|p| shoal_list::Rule::Exclude(p.clone())),
                )
                .collect()
        } else {
            self.rules.clone()
        };
        shoal_list::Filter::new(&rules)
            .map(|f| f.map(std::sync::Arc::new))
            .map_err(crate::failure::Failure::Usage)
    }

    /// Puts `--include` and `--exclude` back in the order they were typed
    /// (clap keeps each flag's values apart, with their positions).
    fn order_rules(&mut self, m: &clap::ArgMatches) {
        let mut rules: Vec<(usize, shoal_list::Rule)> = Vec::new();
        for (id, include) in [("include", true), ("exclude", false)] {
            if let (Some(at), Some(values)) = (m.indices_of(id), m.get_many::<String>(id)) {
                for (i, v) in at.zip(values) {
                    let r = if include {
                        shoal_list::Rule::Include(v.clone())
                    } else {
                        shoal_list::Rule::Exclude(v.clone())
                    };
                    rules.push((i, r));
                }
            }
        }
        rules.sort_by_key(|(i, _)| *i);
        self.rules = rules.into_iter().map(|(_, r)| r).collect();
    }
}

impl Command {
    /// Fills each verb's [`FilterFlags::rules`] from the parsed matches.
    pub(crate) fn order_filters(&mut self, m: &clap::ArgMatches) {
        let Some((_, sub)) = m.subcommand() else {
            return;
        };
        match self {
            Command::Cp(a) | Command::Mv(a) => a.filters.order_rules(sub),
            Command::Sync(a) => a.filters.order_rules(sub),
            Command::Check(a) => a.filters.order_rules(sub),
            Command::Rm(a) => a.filters.order_rules(sub),
            Command::Ls(a) => a.filters.order_rules(sub),
            Command::Du(a) => a.filters.order_rules(sub),
            _ => {}
        }
    }
}

/// What every object written stores beside its bytes. Unset, a file's
/// Content-Type is guessed from its name and a cloud-to-cloud copy keeps
/// the source's type, cache control, disposition and metadata.
#[derive(Debug, Args, Clone)]
pub(crate) struct MetadataFlags {
    /// Content-Type of every object written (default: from the file name, index.html → text/html, else application/octet-stream; a cloud copy keeps the source's).
    #[arg(long, value_name = "TYPE", value_parser = parse_header_value)]
    pub(crate) content_type: Option<String>,
    /// Content-Encoding of every object written (e.g. gzip: readers decompress; the bytes are stored as given).
    #[arg(long, value_name = "ENCODING", value_parser = parse_header_value)]
    pub(crate) content_encoding: Option<String>,
    /// Cache-Control of every object written (e.g. 'public, max-age=3600').
    #[arg(long, value_name = "VALUE", value_parser = parse_header_value)]
    pub(crate) cache_control: Option<String>,
    /// Content-Disposition of every object written (e.g. 'attachment; filename="a.csv"').
    #[arg(long, value_name = "VALUE", value_parser = parse_header_value)]
    pub(crate) content_disposition: Option<String>,
    /// Custom metadata KEY=VALUE (repeatable; S3 x-amz-meta-KEY, GCS metadata); a cloud copy adds it to the source's.
    #[arg(long = "metadata", value_name = "KEY=VALUE", value_parser = parse_metadata)]
    pub(crate) metadata: Vec<(String, String)>,
    /// Storage class of every object written (gs: STANDARD, NEARLINE, COLDLINE, ARCHIVE; s3: STANDARD, STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR, ...). Default: the bucket's.
    #[arg(long, value_name = "CLASS", value_parser = parse_storage_class)]
    pub(crate) storage_class: Option<String>,
    /// Canned ACL of every s3:// object written: private, public-read, public-read-write, authenticated-read, bucket-owner-read, bucket-owner-full-control, aws-exec-read.
    #[arg(long, value_name = "ACL")]
    pub(crate) acl: Option<String>,
    /// Predefined ACL of every gs:// object written: authenticatedRead, bucketOwnerFullControl, bucketOwnerRead, private, projectPrivate, publicRead.
    #[arg(long, value_name = "ACL")]
    pub(crate) predefined_acl: Option<String>,
}

impl MetadataFlags {
    /// The flags as what each write stores; the storage class must be one
    /// `dst`'s store knows.
    pub(crate) fn put(&self, dst: &shoal_core::Location) -> Result<shoal_core::PutOptions, String> {
        if let Some(class) = &self.storage_class {
            check_storage_class(class, dst)?;
        }
        let mut metadata = std::collections::BTreeMap::new();
        for (k, v) in &self.metadata {
            if metadata.insert(k.clone(), v.clone()).is_some() {
                return Err(format!("--metadata {k}: the key is given twice"));
            }
        }
        Ok(shoal_core::PutOptions {
            content_type: self.content_type.clone(),
            content_encoding: self.content_encoding.clone(),
            cache_control: self.cache_control.clone(),
            content_disposition: self.content_disposition.clone(),
            storage_class: self.storage_class.clone(),
            acl: shoal_transfer::ops::metadata::acl(
                self.acl.as_deref(),
                self.predefined_acl.as_deref(),
                dst.scheme,
            )?,
            metadata,
            ..Default::default()
        })
    }
}

/// `--storage-class`: upper case, as both stores spell them; one either knows.
fn parse_storage_class(s: &str) -> Result<String, String> {
    shoal_transfer::ops::metadata::storage_class(s)
}

/// A class the destination's store knows (local files have none).
fn check_storage_class(class: &str, dst: &shoal_core::Location) -> Result<(), String> {
    shoal_transfer::ops::metadata::check_storage_class(class, dst.scheme)
        .map_err(|e| format!("--storage-class {e}"))
}

/// A header value the stores take (`shoal_transfer::ops::metadata::header_value`).
fn parse_header_value(s: &str) -> Result<String, String> {
    shoal_transfer::ops::metadata::header_value(s)
}

/// `--metadata KEY=VALUE` (`shoal_transfer::ops::metadata::metadata_entry`).
fn parse_metadata(s: &str) -> Result<(String, String), String> {
    let Some((k, v)) = s.split_once('=') else {
        return Err(format!("'{}' is not KEY=VALUE", s.escape_debug()));
    };
    shoal_transfer::ops::metadata::metadata_entry(k, v)?;
    Ok((k.to_owned(), v.to_owned()))
}

/// What a walk of a local folder does with symbolic links. Without either
/// flag a link is not followed and is reported: counted, named, and the
/// run exits 1 (a `sync --delete` deletes nothing).
#[derive(Debug, Args, Clone)]
pub(crate) struct LinkFlags {
    /// Follow symbolic links in local folders: copy the file a link points to, walk the folder it points to (a link back into a folder above it is a loop, reported).
    #[arg(short = 'L', long, conflicts_with = "skip_symlinks")]
    pub(crate) follow_symlinks: bool,
    /// Skip symbolic links in local folders without an error (they are counted; -v names them).
    #[arg(
        long,
        visible_alias = "no-follow-symlinks",
        visible_alias = "ignore-symlinks"
    )]
    pub(crate) skip_symlinks: bool,
}

impl LinkFlags {
    pub(crate) fn walk(&self) -> shoal_transfer::ops::Walk {
        use shoal_transfer::ops::{Symlinks, Walk};
        Walk {
            symlinks: if self.follow_symlinks {
                Symlinks::Follow
            } else if self.skip_symlinks {
                Symlinks::Skip
            } else {
                Symlinks::Report
            },
            destination: false,
        }
    }
}

fn parse_workers(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))?;
    if !(1..=4096).contains(&n) {
        return Err(format!("{n} is out of range: use 1 to 4096"));
    }
    Ok(n)
}

/// Most a `--rate-limit` may be: 1 TiB/s is far past any one machine's
/// network, so a bigger value is a typo.
const MAX_RATE: u64 = 1 << 40;

/// `--rate-limit`: a size per second (`100MiB`, also `100MiB/s`).
fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let out_of_range = || format!("'{s}' is out of range (1 byte/s to 1TiB/s)");
    let n = parse_size(t.strip_suffix("/s").unwrap_or(t)).map_err(|e| {
        if e.contains("out of range") {
            out_of_range()
        } else {
            e
        }
    })?;
    if n > MAX_RATE {
        return Err(out_of_range());
    }
    Ok(n)
}

/// `--max-requests-per-sec`: a whole number, 1 to a million.
fn parse_requests_per_sec(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))?;
    if !(1..=1_000_000).contains(&n) {
        return Err(format!("{n} is out of range: use 1 to 1000000"));
    }
    Ok(n)
}

/// Parses sizes like `123`, `64KiB`, `16M`, `1.5GiB` (K/M/G/T are powers of 1024).
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "'{s}' is not a size (examples: 1048576, 64KiB, 16MiB, 2GiB)"
        ));
    }
    let value: f64 = num.parse().map_err(|_| format!("'{s}' is not a size"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{s}' (use KiB, MiB, GiB, TiB)"
            ));
        }
    };
    let bytes = value * mult as f64;
    if !(1.0..=(1u64 << 50) as f64).contains(&bytes) {
        return Err(format!("'{s}' is out of range (1 byte to 1 PiB)"));
    }
    Ok(bytes as u64)
}

#[derive(Debug, Args)]
pub(crate) struct SyncArgs {
    /// Source folder, prefix or bucket.
    pub(crate) src: String,
    /// Destination folder, prefix or bucket.
    pub(crate) dst: String,
    /// Delete destination files the source does not have (after both listings ended without an error; none when the source lists nothing, see --delete-when-source-empty).
    #[arg(long)]
    pub(crate) delete: bool,
    /// With --delete: delete nothing, and fail, when more than N would be deleted.
    #[arg(long, value_name = "N", requires = "delete")]
    pub(crate) max_delete: Option<u64>,
    /// With --delete: a source that lists nothing empties the destination (refused otherwise: a typo in a prefix must not wipe a folder).
    #[arg(long, requires = "delete")]
    pub(crate) delete_when_source_empty: bool,
    /// With --delete: delete extras even when a copy of the same run failed (by default nothing is deleted after a failure, as rsync and rclone do).
    #[arg(long, requires = "delete")]
    pub(crate) ignore_errors: bool,
    /// Print what would be done, do nothing.
    #[arg(long, short = 'n')]
    pub(crate) dry_run: bool,
    /// Compare checksums instead of size and modification time: the strongest both sides have (CRC32C, CRC32, CRC64NVME, composite, MD5; local files are read), else size and time. (Default: copy when the sizes differ, else when the source is newer.)
    #[arg(long, short = 'c')]
    pub(crate) checksum: bool,
    /// Compare sizes only: copy when they differ, whatever the times.
    #[arg(long, conflicts_with = "checksum")]
    pub(crate) size_only: bool,
    /// Never replace a destination file newer than its source, whatever the sizes (otherwise the comparison above decides).
    #[arg(long, short = 'u')]
    pub(crate) update: bool,
    /// Never replace a destination that exists: only what it lacks is copied (atomically, as cp --no-clobber); the rest is counted as skipped. No short letter: `-n` is --dry-run.
    #[arg(long)]
    pub(crate) no_clobber: bool,
    /// Uploads record each file's mode, owner and group (GCS: goog-reserved-posix-mode/uid/gid as gcloud; S3: mode/uid/gid as rclone); downloads give them back (the mode always, never setuid/setgid/sticky; owner and group where this process may).
    #[arg(short = 'P', long)]
    pub(crate) preserve_posix: bool,
    /// Names are keys relative to SRC and DST; an excluded destination file is never deleted.
    #[command(flatten)]
    pub(crate) filters: FilterFlags,
    /// Read the source bucket's listing from FILE (written by `shoal ls -r --json --sorted SRC > FILE`) instead of listing it, or from an inventory report: FILE an S3 Inventory or GCS Storage Insights `…manifest.json` (CSV or Parquet), local with its data files beside it, or its URL where the store wrote it (s3://…/manifest.json; copied down and checked first) (docs/inventory.md). Trusted only whole: it must end with ls's closing record for SRC, or match its manifest (a listing cut short is refused, nothing deleted).
    #[arg(long, value_name = "FILE")]
    pub(crate) source_listing: Option<String>,
    /// Read the destination bucket's listing from FILE (`shoal ls -r --json --sorted DST > FILE`) instead of listing it (or an inventory report's manifest.json, as --source-listing): for a destination only this sync writes. Trusted only whole, as --source-listing.
    #[arg(long, value_name = "FILE")]
    pub(crate) dest_listing: Option<String>,
    #[command(flatten)]
    pub(crate) metadata: MetadataFlags,
    #[command(flatten)]
    pub(crate) links: LinkFlags,
    #[command(flatten)]
    pub(crate) limits: LimitFlags,
    /// Print one JSON object per line on stdout: each action as it finishes, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct HashArgs {
    /// Local files and gs:// or s3:// objects.
    #[arg(required = true, value_name = "FILE|URL")]
    pub(crate) urls: Vec<String>,
    /// Read objects' bytes and compute both sums (checked against those the store keeps), instead of printing the store's.
    #[arg(long)]
    pub(crate) compute: bool,
    /// Print sums in hex rather than base64 (which is how gcloud prints them and GCS keeps them).
    #[arg(long)]
    pub(crate) hex: bool,
    /// One JSON object per line: url, size, crc32c, md5 (null where the store keeps none), computed.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// One tree: a local folder, or a gs:// or s3:// prefix or bucket.
    pub(crate) src: String,
    /// The other tree, named as SRC.
    pub(crate) dst: String,
    /// Compare sizes only, reading no checksum.
    #[arg(long)]
    pub(crate) size_only: bool,
    /// Names are relative to SRC and DST, as in sync.
    #[command(flatten)]
    pub(crate) filters: FilterFlags,
    /// Print one JSON object per line for every name (`{"name", "status": "same"|"differs"|"missing_from_dst"|"missing_from_src", "why"}`), then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// File of commands, one per line (`cp SRC DST`, `rm URL`, globs expanded as cp and rm expand them; `#` comments); `-` reads stdin. The lines run at once, so they must be independent: a plan where a line reads what another writes or deletes, or two lines write one place, is refused before anything runs.
    pub(crate) file: String,
    /// Never replace a destination that exists, on every `cp` line (atomically, as cp --no-clobber); those are counted as skipped. No short letter.
    #[arg(long)]
    pub(crate) no_clobber: bool,
    #[command(flatten)]
    pub(crate) limits: LimitFlags,
    /// Print one JSON object per line on stdout: each action as it finishes, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `--gcs-upload` values (see `shoal_core::UploadMethod`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum GcsUploadArg {
    Auto,
    Compose,
    Xml,
    Resumable,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries() {
        let d = |s: &str| parse_expires(s).map(|d| d.as_secs());
        assert_eq!(d("1h"), Ok(3600));
        assert_eq!(d("90"), Ok(90));
        assert_eq!(d("15m"), Ok(900));
        assert_eq!(d("7d"), Ok(604_800));
        for bad in [
            "0",
            "0s",
            "-1h",
            "8d",
            "604801",
            "h",
            "",
            "1w",
            "1.5h",
            "99999999999999999999d",
        ] {
            assert!(d(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(parse_size("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_size("16M").unwrap(), 16 << 20);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("-5").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("99999999999999999999TiB").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100MiB").unwrap(), 100 << 20);
        assert_eq!(parse_rate("100MiB/s").unwrap(), 100 << 20);
        assert_eq!(parse_rate("1TiB").unwrap(), 1 << 40);
        for bad in ["0", "-1", "2TiB", "fast", "10XB/s", ""] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_requests_per_sec("50").unwrap(), 50);
        for bad in ["0", "-5", "1.5", "1000001", "many"] {
            assert!(parse_requests_per_sec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_values() {
        assert_eq!(parse_metadata("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert_eq!(parse_metadata("k=").unwrap(), ("k".into(), "".into()));
        for bad in ["novalue", "=v", "a b=v", "k=line\nbreak", "ké=v", "k=é"] {
            assert!(parse_metadata(bad).is_err(), "{bad}");
        }
        assert!(parse_header_value("text/html; charset=utf-8").is_ok());
        assert!(parse_header_value("a\r\nx-evil: 1").is_err());
        assert!(parse_header_value(" ").is_err());
        assert_eq!(parse_storage_class("nearline").unwrap(), "NEARLINE");
        assert!(parse_storage_class("FROZEN").is_err());
        let s3 = shoal_core::Location::parse("s3://b/k").unwrap();
        let gs = shoal_core::Location::parse("gs://b/k").unwrap();
        assert!(check_storage_class("NEARLINE", &s3).is_err());
        assert!(check_storage_class("NEARLINE", &gs).is_ok());
        assert!(check_storage_class("STANDARD_IA", &gs).is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
