//! `shoal`, the command line.
//!
//! Exit codes: 0 success, 1 failure, 2 usage error. Every failure is one
//! line on stderr naming the operation, the URL, what the server said and
//! what to try; a panic is caught and reported the same way, never as a
//! stack trace.

// Diagnostics and listings never abort the process. std's `eprintln!` and
// `println!` panic when the stream is closed (`shoal cp -r … 2>&1 | true`,
// `shoal sync --dry-run … | head`), and the panic, printed to the same
// closed stream, became an abort (exit 134) in the middle of a transfer,
// its working files left behind. These shadow them for the whole crate: a
// write that fails is dropped and the transfer goes on. (Where stdout is
// the data itself, `ls` and `cat` write through their own writers and end
// quietly on a closed pipe.)
macro_rules! eprintln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
macro_rules! println {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod args;
mod cmd;
mod config;
mod encryption;
mod failure;
mod listing_file;
mod output;
mod progress;

use std::process::ExitCode;

use crate::args::{Cli, Command};
use crate::config::Context;
use crate::failure::{CmdResult, exit_code};

fn main() -> ExitCode {
    install_panic_hook();
    ignore_file_size_signal();
    let cli = match parse_args() {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(code) = generated(&cli.command) {
        return code;
    }
    let runtime = match start(cli.global.verbose) {
        Ok(r) => r,
        Err(code) => return code,
    };
    // The named stores (`NAME://`) must be known before any URL is parsed.
    let store_file = match shoal_config::StoreFile::load() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("shoal: {e}");
            return ExitCode::from(2);
        }
    };
    let ctx = Context::new(
        &cli.global,
        cli.command.limits(),
        cli.command.json(),
        cli.command.gcs_upload(),
    )
    .with_store_file(store_file);
    // Ctrl-C or SIGTERM drops the command: every transfer in flight is
    // cancelled, working files are removed by their guards, multipart
    // uploads are aborted (GCS composite parts deleted) by the cleanups
    // their guards spawn, which are awaited here; partial downloads keep
    // their finished slices for a rerun. Then exit 130 / 143, as a shell
    // does for a process killed by the signal.
    let (result, signal) = runtime.block_on(async {
        tokio::select! {
            r = dispatch(&ctx, cli.command) => (r, None),
            s = interrupted() => (Ok(()), Some(s)),
        }
    });
    if let Some(sig) = signal {
        return clean_up_after(runtime, sig);
    }
    // Don't wait for idle pooled connections or stray tasks.
    runtime.shutdown_background();
    exit_code(result)
}

/// A panic is reported as one line, like any failure, never as a trace.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "shoal: internal error: {}{at} (this is a bug; please report it)",
            shoal_core::error::one_line(&msg, 200)
        );
    }));
}

/// A write past the file size limit (`ulimit -f`) sends SIGXFSZ, whose
/// default action kills the process on the spot (exit 153, no message),
/// leaving the working files of every transfer in flight. Ignored, that
/// write fails with EFBIG instead: the transfer ends as any failed write
/// does, its working file removed, with "file too large" on its line.
fn ignore_file_size_signal() {
    // SAFETY: sets the disposition of one signal to "ignore", before any
    // other thread exists; no handler runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// The command line, or how to exit: help and version printed (0), a
/// usage error as one line (2).
fn parse_args() -> Result<Cli, ExitCode> {
    use clap::{CommandFactory, FromArgMatches};
    let parsed = Cli::command().try_get_matches().and_then(|m| {
        let mut cli = Cli::from_arg_matches(&m)?;
        cli.command.order_filters(&m);
        Ok(cli)
    });
    let e = match parsed {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    use clap::error::ErrorKind as K;
    if matches!(
        e.kind(),
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return Err(if e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        });
    }
    // clap renders several lines (problem, detail, usage, tip): join what
    // comes before "Usage:" into the one line we promise.
    let rendered = e.render().to_string();
    let problem: Vec<String> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        // clap's "tip: a similar argument exists: '--delete'" is the
        // "did you mean" a typo needs: kept, after a semicolon.
        .map(|l| {
            l.strip_prefix("tip: ")
                .map_or(l.to_owned(), |t| format!("; {t}"))
        })
        .collect();
    let mut problem = problem.join(" ").replace(" ;", ";");
    if e.kind() == K::MissingRequiredArgument && problem.contains("provided: <SRC>...") {
        // `cp a`: clap takes the one path for the destination (the last
        // positional) and names the sources as missing; it is the
        // destination that was not given.
        problem = problem.replace("provided: <SRC>...", "provided: <DST>");
    }
    let problem = problem.trim_start_matches("error: ");
    eprintln!(
        "shoal: {} (see 'shoal --help')",
        shoal_core::error::one_line(problem, 300)
    );
    Err(ExitCode::from(2))
}

/// `completions` and `man`: generated from the flags themselves, so they
/// never drift from them. None for every other command.
fn generated(command: &Command) -> Option<ExitCode> {
    match command {
        Command::Completions(a) => {
            let mut cmd = <args::Cli as clap::CommandFactory>::command();
            clap_complete::generate(a.shell, &mut cmd, "shoal", &mut std::io::stdout());
            Some(ExitCode::SUCCESS)
        }
        Command::Man => {
            let cmd = <args::Cli as clap::CommandFactory>::command();
            Some(
                match clap_mangen::Man::new(cmd).render(&mut std::io::stdout()) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("shoal: man: {e}");
                        ExitCode::FAILURE
                    }
                },
            )
        }
        _ => None,
    }
}

/// Logging, the allocator's settings and the async runtime, or how to
/// exit when one cannot be had.
fn start(verbose: u8) -> Result<tokio::runtime::Runtime, ExitCode> {
    if let Err(m) = init_logging(verbose) {
        eprintln!("shoal: {m}");
        return Err(ExitCode::from(2));
    }
    keep_freed_memory();
    let threads = shoal_transfer::runtime_threads().map_err(|m| {
        eprintln!("shoal: {m}");
        ExitCode::from(2)
    })?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("shoal: cannot start: {e}");
            ExitCode::FAILURE
        })
}

async fn dispatch(ctx: &Context, command: Command) -> CmdResult {
    match command {
        Command::Ls(a) => cmd::ls::run(ctx, a).await,
        Command::Du(a) => cmd::du::run(ctx, a).await,
        Command::Stat(a) => cmd::stat::run(ctx, a).await,
        Command::Restore(a) => cmd::restore::run(ctx, a).await,
        Command::Uploads(a) => cmd::uploads::run(ctx, a).await,
        Command::Cat(a) => cmd::cat::run(ctx, a).await,
        Command::Rm(a) => cmd::rm::run(ctx, a).await,
        Command::Update(a) => cmd::update::run(ctx, a).await,
        Command::Mb(a) => cmd::mb::run(ctx, a).await,
        Command::Rb(a) => cmd::rb::run(ctx, a).await,
        Command::Presign(a) => cmd::presign::run(ctx, a).await,
        Command::Cp(a) => cmd::cp::run(ctx, a).await,
        Command::Mv(a) => cmd::cp::mv(ctx, a).await,
        Command::Sync(a) => cmd::sync::run(ctx, a).await,
        Command::Run(a) => cmd::run::run(ctx, a).await,
        Command::Hash(a) => cmd::hash::run(ctx, a).await,
        Command::Check(a) => cmd::check::run(ctx, a).await,
        Command::Bench(a) => cmd::bench::run(ctx, a).await,
        Command::Completions(_) | Command::Man => Ok(()),
    }
}

/// After Ctrl-C or SIGTERM: waits for the cleanups the cancelled
/// transfers spawned (a second signal stops waiting), says what was left,
/// and exits as a shell does for a process killed by `sig`.
fn clean_up_after(runtime: tokio::runtime::Runtime, sig: u8) -> ExitCode {
    let left = runtime.block_on(async {
        tokio::select! {
            n = shoal_transfer::ops::cleanup::finish(std::time::Duration::from_secs(30)) => n,
            _ = interrupted() => 1,
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    let name = if sig == 130 {
        "interrupted"
    } else {
        "terminated"
    };
    if left > 0 {
        eprintln!(
            "shoal: {name}; {left} multipart upload(s) could not be aborted in time (their parts may remain)"
        );
    } else {
        eprintln!("shoal: {name}; transfers in flight were cancelled and cleaned up");
    }
    let kept = shoal_transfer::ops::cleanup::kept();
    if !kept.is_empty() {
        eprintln!(
            "shoal: {} multipart upload(s) kept to resume ({}{}): run the same command again to go on, or `shoal uploads --abort --older-than 0 URL` to discard",
            kept.len(),
            shoal_core::error::escape_controls(&kept[0]),
            if kept.len() > 1 { ", ..." } else { "" }
        );
    }
    ExitCode::from(sig)
}

/// Exit codes: 0, 1 for a failure (said here unless already reported),
/// 2 for bad usage.
/// The exit code for the first Ctrl-C (130) or SIGTERM (143).
async fn interrupted() -> u8 {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    let mut int = match signal(SignalKind::interrupt()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = int.recv() => 130,
        _ = term.recv() => 143,
    }
}

fn init_logging(verbose: u8) -> Result<(), String> {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // Our crates at the chosen level; other crates only at error by default
    // (their warnings, e.g. about missing AWS config files, are noise to a
    // user who gets one clear error line from us). SHOAL_LOG overrides.
    let ours = [
        "shoal",
        "shoal_core",
        "shoal_gcs",
        "shoal_s3",
        "shoal_transfer",
        "shoal_list",
    ];
    let mut default = ours
        .iter()
        .map(|c| format!("{c}={level}"))
        .collect::<Vec<_>>()
        .join(",")
        + ",error";
    if verbose == 0 {
        // It logs a refused certificate at error level, and that failure
        // is then our one error line (with what to do about it).
        default.push_str(",rustls_platform_verifier=off");
    }
    let filter = match std::env::var("SHOAL_LOG") {
        Ok(f) => tracing_subscriber::EnvFilter::try_new(&f).map_err(|e| {
            format!("SHOAL_LOG={f:?}: {e} (a tracing filter, e.g. 'shoal=debug' or 'debug')")
        })?,
        Err(_) => tracing_subscriber::EnvFilter::new(default),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
    Ok(())
}

/// Tells glibc's allocator to keep freed memory for reuse. By default a
/// freed block above its (self-adjusting) mmap threshold goes back to the
/// kernel, and so does the free top of the heap past twice that: a download
/// then receives every body into pages the kernel must fault in afresh (a
/// tenth of the client's CPU for a 1 GiB download). Blocks up to 4 MiB
/// from the heap and 64 MiB of free heap kept make those faults rare, and
/// peak memory does not grow, as what is freed is soon allocated again. A
/// process setting of the command line only: the Python package leaves its
/// host's allocator alone.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called once, before
    // any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}
