//! `shoal cat`: objects to stdout, read ahead in parallel, optionally
//! decompressed (the engine is `shoal_transfer::ops::read`).
//!
//! Like cat(1), a failing object is reported and the rest still written;
//! the exit code says whether all succeeded. A reader that goes away
//! (`| head`) ends the command quietly (exit 1, nothing on stderr).
//!
//! `--exec CMD` is a map stage in one line of shell: the output is cut at
//! line ends and each piece goes to whichever of N `sh -c CMD` copies is
//! free, so every copy sees whole lines (each object's last line is
//! finished with a newline if it lacks one). Copies write to our stdout
//! and stderr directly; a copy that fails makes the command fail.

use std::io::Write;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures::stream::BoxStream;
use shoal_core::{Error, Op, Result};
use shoal_transfer::ops::decode::Decompress;
use shoal_transfer::ops::read::{Chunk, ReadOptions, Reader, Source};
use shoal_transfer::ops::sources::read_sources;

use crate::args::{CatArgs, ReadFlags};
use crate::config::Context;
use crate::failure::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: CatArgs) -> CmdResult {
    let sources = match &a.version_id {
        Some(v) => version_source(ctx, &a.urls, v).await?,
        None => sources(ctx, &a.urls, true)?,
    };
    let opts = ReadOptions {
        workers: ctx.transfer.workers,
        requests: ctx.transfer.small_workers,
        rates: ctx.rates.clone(),
        read_ahead: a.read.read_ahead,
        decompress: decompress(&a.read),
        ordered: !a.unordered,
        ..ReadOptions::default()
    };
    let mut reader = Reader::start(sources, opts, ctx.retry);
    let mut sink = match &a.exec {
        Some(cmd) => Sink::exec(cmd, a.jobs.map_or_else(shoal_transfer::cpus, usize::from))?,
        None => Sink::stdout(),
    };
    let lines = a.lines || a.exec.is_some();
    let mut failed = false;
    'objects: while let Some(o) = reader.next_object().await {
        let mut o = match o {
            Ok(o) => o,
            Err(e) => {
                eprintln!("shoal: {e}");
                failed = true;
                continue;
            }
        };
        let mut last = b'\n';
        let mut any = false;
        while let Some(c) = o.next().await {
            match c {
                Ok(c) => {
                    if c.is_empty() {
                        continue;
                    }
                    last = c[c.len() - 1];
                    any = true;
                    if sink.write(c).await.is_err() {
                        break 'objects;
                    }
                }
                Err(e) => {
                    eprintln!("shoal: {e}");
                    failed = true;
                    break;
                }
            }
        }
        if sink
            .end_object(lines && any && last != b'\n')
            .await
            .is_err()
        {
            break;
        }
    }
    drop(reader);
    match sink.finish().await {
        Ok(()) => {}
        Err(SinkError::Gone) => return Err(Failure::Reported),
        Err(SinkError::Failed(m)) => return Err(Failure::Failed(m)),
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

pub(crate) fn decompress(r: &ReadFlags) -> Decompress {
    if r.no_decompress {
        Decompress::Off
    } else if r.decompress {
        Decompress::Detect
    } else {
        Decompress::ContentEncoding
    }
}

/// The objects `urls` name, in order ([`read_sources`]: a glob in key
/// order when `sorted`, one matching nothing an error in its place). A
/// URL naming a prefix is refused first: it names no object.
pub(crate) fn sources(
    ctx: &Context,
    urls: &[String],
    sorted: bool,
) -> Result<BoxStream<'static, Result<Source>>, Failure> {
    let mut locs = Vec::with_capacity(urls.len());
    for u in urls {
        let loc = super::parse(u)?;
        if !loc.is_local() {
            shoal_list::check(&loc)?;
            refuse_prefix(u, &loc)?;
        }
        locs.push(loc);
    }
    Ok(read_sources(locs, &|l| ctx.store(l), sorted)?)
}

/// `cat --version-id V URL`: that one stored version, its reads pinned to it.
async fn version_source(
    ctx: &Context,
    urls: &[String],
    v: &str,
) -> Result<BoxStream<'static, shoal_core::Result<Source>>, Failure> {
    let [url] = urls else {
        return Err(Failure::Usage("cat --version-id: for one object".into()));
    };
    let loc = super::parse(url)?;
    let meta = super::head_version(ctx, "cat", &loc, v).await?;
    let source = Source::object(ctx.store(&loc)?, loc, meta);
    Ok(Box::pin(futures::stream::iter([Ok(source)])))
}

/// "404, check the bucket and key" was the answer to a prefix, which sent
/// users looking for a typo: say what it is and how to read below it.
fn refuse_prefix(u: &str, loc: &shoal_core::Location) -> Result<(), Failure> {
    if loc.key.is_empty() || (loc.key.ends_with('/') && !shoal_list::has_wildcard(&loc.key)) {
        return Err(Failure::Usage(format!(
            "{u}: names a folder (prefix), not an object; read everything below it with '{}{}/{}**'",
            loc.prefix(),
            loc.bucket,
            loc.key
        )));
    }
    Ok(())
}

enum SinkError {
    /// The reader went away (EPIPE): stop quietly.
    Gone,
    /// Something to report.
    Failed(String),
}

/// Widens a pipe on `fd` to 1 MiB (Linux; the unprivileged maximum by
/// default). With the default 64 KiB, every 1 MiB block is 16 wake-ups of
/// the writer and of the reader at the other end; this is what `pv` and
/// `splice`-based tools do too. Anything but a pipe, or a refusal, is
/// left as it is.
fn grow_pipe(fd: std::os::fd::RawFd) {
    #[cfg(target_os = "linux")]
    // SAFETY: fstat and fcntl on a descriptor we do not own only read or
    // resize the pipe's buffer; failures are returned, not faults.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO {
            let _ = libc::fcntl(fd, libc::F_SETPIPE_SZ, 1 << 20);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = fd;
}

/// Where the bytes go: stdout through a writer thread (so a slow pipe
/// never stalls the async workers), or --exec children.
enum Sink {
    Stdout {
        /// Chunks, not their bytes: a chunk dropped after its write gives
        /// its block back for reuse and holds its budget share till then.
        tx: tokio::sync::mpsc::Sender<Chunk>,
        thread: std::thread::JoinHandle<std::io::Result<()>>,
    },
    Exec {
        tx: tokio::sync::mpsc::Sender<Bytes>,
        carry: BytesMut,
        cmd: String,
        threads: Vec<std::thread::JoinHandle<std::io::Result<std::process::ExitStatus>>>,
    },
}

impl Sink {
    fn stdout() -> Sink {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Chunk>(16);
        grow_pipe(1);
        let thread = std::thread::spawn(move || {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            while let Some(b) = rx.blocking_recv() {
                out.write_all(&b)?;
            }
            out.flush()
        });
        Sink::Stdout { tx, thread }
    }

    fn exec(cmd: &str, jobs: usize) -> Result<Sink, Failure> {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(jobs * 2);
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::new();
        for k in 0..jobs {
            let mut child = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .env("SHOAL_JOB", k.to_string())
                .stdin(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| Failure::Failed(format!("cat --exec: cannot start sh: {e}")))?;
            let mut stdin = child.stdin.take().expect("piped");
            let rx = rx.clone();
            threads.push(std::thread::spawn(move || {
                loop {
                    let next = rx.lock().unwrap().blocking_recv();
                    let Some(b) = next else { break };
                    // A copy that stops reading (`head`) just gets no more.
                    if stdin.write_all(&b).is_err() {
                        break;
                    }
                }
                drop(stdin);
                drop(rx);
                child.wait()
            }));
        }
        Ok(Sink::Exec {
            tx,
            carry: BytesMut::new(),
            cmd: cmd.to_owned(),
            threads,
        })
    }

    async fn write(&mut self, c: Chunk) -> Result<(), ()> {
        match self {
            Sink::Stdout { tx, .. } => tx.send(c).await.map_err(|_| ()),
            Sink::Exec { tx, carry, .. } => {
                let b = c.bytes().clone();
                drop(c);
                // Whole lines only: up to the last newline goes out, the
                // rest waits for the next chunk.
                let Some(nl) = b.iter().rposition(|&c| c == b'\n') else {
                    carry.extend_from_slice(&b);
                    return Ok(());
                };
                let head = if carry.is_empty() {
                    b.slice(..=nl)
                } else {
                    carry.extend_from_slice(&b[..=nl]);
                    carry.split().freeze()
                };
                carry.extend_from_slice(&b[nl + 1..]);
                tx.send(head).await.map_err(|_| ())
            }
        }
    }

    /// An object ended; `newline` finishes its unterminated last line.
    async fn end_object(&mut self, newline: bool) -> Result<(), ()> {
        match self {
            Sink::Stdout { tx, .. } if newline => tx
                .send(Bytes::from_static(b"\n").into())
                .await
                .map_err(|_| ()),
            Sink::Stdout { .. } => Ok(()),
            Sink::Exec { tx, carry, .. } => {
                if carry.is_empty() {
                    return Ok(());
                }
                carry.extend_from_slice(b"\n");
                let line = carry.split().freeze();
                tx.send(line).await.map_err(|_| ())
            }
        }
    }

    async fn finish(self) -> Result<(), SinkError> {
        match self {
            Sink::Stdout { tx, thread } => {
                drop(tx);
                let r = tokio::task::spawn_blocking(move || thread.join())
                    .await
                    .map_err(|e| SinkError::Failed(format!("write stdout: {e}")))?;
                match r {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        Err(SinkError::Gone)
                    }
                    Ok(Err(e)) => Err(SinkError::Failed(
                        Error::io(Op::Write, "stdout", e).to_string(),
                    )),
                    Err(_) => Err(SinkError::Failed(
                        "write stdout: writer thread failed".into(),
                    )),
                }
            }
            Sink::Exec {
                tx, cmd, threads, ..
            } => {
                drop(tx);
                let n = threads.len();
                let statuses = tokio::task::spawn_blocking(move || {
                    threads.into_iter().map(|t| t.join()).collect::<Vec<_>>()
                })
                .await
                .map_err(|e| SinkError::Failed(format!("cat --exec: {e}")))?;
                let mut bad = Vec::new();
                for s in statuses {
                    match s {
                        Ok(Ok(st)) if st.success() => {}
                        Ok(Ok(st)) => bad.push(st.to_string()),
                        Ok(Err(e)) => bad.push(e.to_string()),
                        Err(_) => bad.push("thread failed".into()),
                    }
                }
                if bad.is_empty() {
                    return Ok(());
                }
                Err(SinkError::Failed(format!(
                    "cat --exec {}: {} of {n} copies failed ({})",
                    shoal_core::error::one_line(&cmd, 80),
                    bad.len(),
                    bad[0]
                )))
            }
        }
    }
}
