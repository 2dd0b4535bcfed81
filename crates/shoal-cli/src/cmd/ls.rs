//! `shoal ls`: one level (with `/` as delimiter) or everything below (`-r`).
//!
//! A URL with `*`, `?` or `[` is a glob (docs/globs.md): one level shows
//! matching objects and the `dir/` prefixes of matching levels; `-r` shows
//! every object that matches or lies below a matching level. Listings go
//! through shoal-list's parallel lister (one level too: its cuts never
//! fall inside a `dir/`), which stays a plain sequential listing until the
//! first page shows there is more; results then come in no particular
//! order unless `--sorted`. `--all-versions` and `--soft-deleted` list
//! one sequential stream.
//!
//! `ls gs://b/dir` behaves like gsutil: it shows the object `dir` if it
//! exists and the contents of `dir/` if that prefix exists; neither is an
//! error ("matched no objects"), as is any listing of a missing bucket.
//!
//! `--json` ends with a closing record (see [`closing_record`]) only when
//! the listing ended without an error and exits 0: a listing kept in a file
//! (for `sync --source-listing`) that lacks it was cut short, and sync
//! refuses it rather than delete what lies past the cut.

use std::io::Write;
use std::sync::Arc;

use futures::StreamExt;
use shoal_core::{Lack, ListRequest, Location, ObjectMeta, Projection, Scheme, Store, need};
use shoal_list::{Entry, ListOptions};

use crate::args::LsArgs;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};
use crate::output::{human_bytes, meta_json, rfc3339};
use shoal_core::error::escape_controls;

struct Printer<'a> {
    out: std::io::BufWriter<std::io::StdoutLock<'a>>,
    args: &'a LsArgs,
    objects: u64,
    bytes: u64,
    /// Lines written (objects and prefixes), for the closing record.
    records: u64,
    /// `--include`/`--exclude` (only with -r) and the root names are
    /// relative to.
    filter: Option<(Arc<shoal_list::Filter>, String)>,
}

impl Printer<'_> {
    fn object(&mut self, loc: &Location, m: &ObjectMeta) -> std::io::Result<()> {
        if let Some((f, root)) = &self.filter
            && !f.admits(shoal_list::filter::name_below(root, &m.key))
        {
            return Ok(());
        }
        if self.args.soft_deleted && !loc.is_prefix_like() && m.key != loc.key {
            // `ls --soft-deleted gs://b/k` lists a prefix: keep `k` only.
            return Ok(());
        }
        let mut url = loc.with_key(m.key.clone()).to_string();
        if (self.args.all_versions || self.args.soft_deleted) && !self.args.json {
            // gcloud's `gs://b/k#GENERATION`; an S3 version id likewise.
            url = format!("{url}#{}", version_text(m));
        }
        self.objects += 1;
        self.records += 1;
        self.bytes += m.size;
        if self.args.json {
            writeln!(self.out, "{}", meta_json(&url, m))
        } else if self.args.long {
            let size = if self.args.human_readable {
                human_bytes(m.size)
            } else {
                m.size.to_string()
            };
            if self.args.all_versions || self.args.soft_deleted {
                let state = match m.version_state {
                    Some(s) if s.soft_deleted => "soft-deleted",
                    Some(s) if s.delete_marker => "marker",
                    Some(s) if s.is_latest == Some(false) => "noncurrent",
                    _ => "latest",
                };
                return writeln!(
                    self.out,
                    "{:>12}  {:<20}  {:<10}  {}",
                    size,
                    rfc3339(m.updated_ns),
                    state,
                    escape_controls(&url)
                );
            }
            writeln!(
                self.out,
                "{:>12}  {:<20}  {}",
                size,
                rfc3339(m.updated_ns),
                escape_controls(&url)
            )
        } else {
            writeln!(self.out, "{}", escape_controls(&url))
        }
    }

    fn prefix(&mut self, loc: &Location, p: &str) -> std::io::Result<()> {
        let url = loc.with_key(p.to_owned()).to_string();
        self.records += 1;
        if self.args.json {
            writeln!(
                self.out,
                "{}",
                serde_json::json!({"url": url, "prefix": true})
            )
        } else if self.args.long {
            writeln!(
                self.out,
                "{:>12}  {:<20}  {}",
                "",
                "",
                escape_controls(&url)
            )
        } else {
            writeln!(self.out, "{}", escape_controls(&url))
        }
    }
}

pub(crate) async fn run(ctx: &Context, a: LsArgs) -> CmdResult {
    let Some(url) = a.url.as_deref() else {
        return ls_buckets(ctx, &a, &[store_root(Scheme::Gs), store_root(Scheme::S3)]).await;
    };
    for scheme in [Scheme::Gs, Scheme::S3] {
        if url.eq_ignore_ascii_case(scheme.prefix()) {
            return ls_buckets(ctx, &a, &[store_root(scheme)]).await;
        }
    }
    // `NAME://`: the buckets of a store named in the config file.
    if let Some((name, scheme)) = url
        .strip_suffix("://")
        .and_then(shoal_core::url::named_store)
    {
        let root = Location {
            store: Some(name),
            ..store_root(scheme)
        };
        return ls_buckets(ctx, &a, &[root]).await;
    }
    let loc = super::parse(url)?;
    if a.filters.any() && !a.recursive {
        return Err(Failure::Usage(
            "ls --include/--exclude: for recursive listings (ls -r)".into(),
        ));
    }
    let filter = a.filters.filter()?;
    if loc.is_local() {
        return ls_local(&loc, &a, filter);
    }
    // A bad glob is a usage error before any store is built.
    shoal_list::check(&loc)?;
    if a.soft_deleted && (loc.scheme != Scheme::Gs || shoal_list::has_wildcard(&loc.key)) {
        return Err(Failure::Usage(format!(
            "ls --soft-deleted {url}: lists a GCS prefix or object (no glob); S3 keeps deleted objects as versions: ls -a"
        )));
    }
    let store = ctx.store(&loc)?;
    let stdout = std::io::stdout();
    let mut p = Printer {
        out: std::io::BufWriter::new(stdout.lock()),
        args: &a,
        objects: 0,
        bytes: 0,
        records: 0,
        filter: filter.map(|f| (f, shoal_list::filter::listing_root(&loc.key))),
    };
    let started = now();
    let found_any = list(&store, &loc, &a, &mut p).await?;
    if a.long && !a.json && found_any {
        writeln!(
            p.out,
            "TOTAL: {} objects, {} bytes ({})",
            p.objects,
            p.bytes,
            human_bytes(p.bytes)
        )
        .map_err(write_failure)?;
    }
    if !found_any {
        p.out.flush().map_err(write_failure)?;
        return Err(Failure::Failed(format!("list {}: matched no objects", loc)));
    }
    if a.json {
        let end = closing_record(&loc.to_string(), p.records, &a, started);
        writeln!(p.out, "{end}").map_err(write_failure)?;
    }
    p.out.flush().map_err(write_failure)?;
    Ok(())
}

/// The line that ends `ls --json`: one object with the single key
/// `listing_end` (an object or prefix line always has `url`), written only
/// after the listing ended without an error. It says what the listing is
/// of and how it was made, so `sync --source-listing`/`--dest-listing`
/// can tell a whole listing of the right place from a cut or a wrong one:
/// `count` (the lines before it), `complete` (always true: a listing that
/// failed writes none), `url`, `recursive`, `sorted` (`--sorted` asked),
/// `filtered` (`--include`/`--exclude` left names out), `started_at` and
/// `made_at` (UTC; objects written after the start may be missing), and
/// the `shoal` version.
pub(crate) fn closing_record(
    url: &str,
    count: u64,
    a: &LsArgs,
    started: String,
) -> serde_json::Value {
    serde_json::json!({"listing_end": {
        "count": count,
        "complete": true,
        "url": url,
        "recursive": a.recursive,
        "sorted": a.sorted,
        "filtered": a.filters.any(),
        "started_at": started,
        "made_at": now(),
        "shoal": env!("CARGO_PKG_VERSION"),
    }})
}

fn now() -> String {
    rfc3339(Some(time::OffsetDateTime::now_utc().unix_timestamp_nanos()))
}

/// What `ls` asks of each object: as little as what it prints.
fn projection(a: &LsArgs) -> Projection {
    if a.json {
        Projection::Full
    } else if a.long {
        Projection::NameSizeTime
    } else {
        Projection::NameOnly
    }
}

/// Prints what `loc` names; returns whether it named anything (a bucket
/// always does, even empty).
async fn list(
    store: &Arc<dyn Store>,
    loc: &Location,
    a: &LsArgs,
    p: &mut Printer<'_>,
) -> Result<bool, Failure> {
    let opts = ListOptions {
        recursive: a.recursive,
        projection: projection(a),
        workers: a
            .parallel
            .map_or(shoal_list::parallel::DEFAULT_WORKERS, |n| n as usize),
        sorted: a.sorted,
        page_size: None,
        versions: a.all_versions,
    };
    let delimiter = (!a.recursive).then(|| "/".to_owned());
    if a.soft_deleted {
        // One sequential listing (soft-deleted generations do not split
        // into key ranges); a name lists its prefix, kept to the name.
        let delimiter = delimiter.filter(|_| loc.is_prefix_like());
        let any = list_into(store, loc, &loc.key, delimiter, &opts, p).await?;
        return Ok(any || loc.key.is_empty() || !loc.is_prefix_like());
    }
    if let Some(entries) = shoal_list::entries(store.clone(), loc, &opts)? {
        // A glob: matching objects (and, one level, matching "directories").
        return print_entries(loc, entries, p).await;
    }
    if a.recursive || (a.all_versions && !loc.is_prefix_like()) {
        // Everything below a literal prefix or name, listed in parallel
        // once it proves to be more than a page.
        let objects = Box::pin(shoal_list::expand(store.clone(), loc, &opts));
        let any = print_entries(loc, objects.map(|r| r.map(Entry::Object)), p).await?;
        return Ok(any || loc.key.is_empty());
    }
    if loc.is_prefix_like() {
        let any = list_into(store, loc, &loc.key, delimiter, &opts, p).await?;
        // An empty bucket listing is not an error; an empty prefix is.
        return Ok(any || loc.key.is_empty());
    }
    list_named(store, loc, &opts, p).await
}

/// `ls gs://b/dir`: the object `dir` if there is one, and one level of
/// `dir/` if that prefix exists, found with one request.
async fn list_named(
    store: &Arc<dyn Store>,
    loc: &Location,
    opts: &ListOptions,
    p: &mut Printer<'_>,
) -> Result<bool, Failure> {
    let projection = opts.projection;
    let probe = ListRequest {
        prefix: loc.key.clone(),
        delimiter: Some("/".into()),
        end_offset: Some(format!("{}0", loc.key)), // '0' follows '/': stop after `key/`
        projection,
        ..Default::default()
    };
    let first = (store.list_page(&loc.bucket, &probe))
        .await
        .map_err(|e| e.with_url(loc.to_string()))?;
    let exact = first.objects.iter().find(|o| o.key == loc.key).cloned();
    let dir = format!("{}/", loc.key);
    let has_dir =
        first.prefixes.contains(&dir) || first.objects.iter().any(|o| o.key.starts_with(&dir));
    let found_any = exact.is_some() || has_dir;
    if let Some(m) = exact {
        p.object(loc, &m).map_err(write_failure)?;
    }
    if has_dir {
        list_into(store, loc, &dir, Some("/".into()), opts, p).await?;
    }
    Ok(found_any)
}

/// `ls gs://`, `ls s3://`, or plain `ls` (both): the buckets the
/// credentials see (GCS: in the project). With both, each provider is
/// listed in turn and a failing one is reported on its own line, the other
/// still listed.
fn store_root(scheme: Scheme) -> Location {
    Location {
        scheme,
        bucket: String::new(),
        key: String::new(),
        local_root: None,
        store: None,
    }
}

async fn ls_buckets(ctx: &Context, a: &LsArgs, schemes: &[Location]) -> CmdResult {
    if a.recursive || a.filters.any() || a.sorted || a.parallel.is_some() {
        return Err(Failure::Usage(
            "ls of buckets takes only -l and --json; name a bucket to list its objects".into(),
        ));
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failures = Vec::new();
    let (started, mut count) = (now(), 0);
    for loc in schemes {
        let listed = match ctx.store(loc) {
            Ok(store) => match need(store.buckets(), Lack::ListBuckets, &loc.bucket, "") {
                Ok(b) => b.list_buckets().await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let buckets = match listed {
            Ok(b) => b,
            Err(e) if schemes.len() == 1 => return Err(e.into()),
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        for b in buckets {
            count += 1;
            let url = format!("{}{}", loc.prefix(), b.name);
            let r = if a.json {
                writeln!(
                    out,
                    "{}",
                    serde_json::json!({"url": url, "bucket": b.name, "created": b.created})
                )
            } else if a.long {
                writeln!(
                    out,
                    "{:<24}  {}",
                    b.created.as_deref().unwrap_or("-"),
                    escape_controls(&url)
                )
            } else {
                writeln!(out, "{}", escape_controls(&url))
            };
            r.map_err(write_failure)?;
        }
    }
    if failures.is_empty() && a.json {
        let url = a.url.as_deref().unwrap_or("");
        writeln!(out, "{}", closing_record(url, count, a, started)).map_err(write_failure)?;
    }
    out.flush().map_err(write_failure)?;
    if failures.is_empty() {
        return Ok(());
    }
    for e in &failures {
        eprintln!("shoal: {e}");
    }
    Err(Failure::Reported)
}

async fn print_entries(
    loc: &Location,
    entries: impl futures::Stream<Item = shoal_core::Result<Entry>>,
    p: &mut Printer<'_>,
) -> Result<bool, Failure> {
    let mut entries = std::pin::pin!(entries);
    let mut any = false;
    while let Some(e) = entries.next().await {
        any = true;
        match e? {
            Entry::Object(m) => p.object(loc, &m),
            Entry::Prefix(x) => p.prefix(loc, &x),
        }
        .map_err(write_failure)?;
    }
    Ok(any)
}

/// One level below `prefix` (or all of it without a delimiter), listed in
/// parallel once it proves to be more than a page ([`shoal_list::level`];
/// versions and soft-deleted objects in one sequential listing), each
/// page's objects and prefixes interleaved in key order.
async fn list_into(
    store: &Arc<dyn Store>,
    loc: &Location,
    prefix: &str,
    delimiter: Option<String>,
    opts: &ListOptions,
    p: &mut Printer<'_>,
) -> Result<bool, Failure> {
    let req = ListRequest {
        prefix: prefix.to_owned(),
        delimiter,
        projection: opts.projection,
        versions: p.args.all_versions,
        soft_deleted: p.args.soft_deleted,
        ..Default::default()
    };
    let mut stream = shoal_list::level(store.clone(), loc.bucket.clone(), req, opts);
    let mut any = false;
    while let Some(page) = stream.next().await {
        let page = page.map_err(|e| e.with_url(loc.with_key(prefix.to_owned()).to_string()))?;
        // Objects and prefixes interleave in key order.
        let (mut oi, mut pi) = (0, 0);
        while oi < page.objects.len() || pi < page.prefixes.len() {
            let take_obj = pi >= page.prefixes.len()
                || (oi < page.objects.len()
                    && page.objects[oi].key.as_str() < page.prefixes[pi].as_str());
            any = true;
            if take_obj {
                p.object(loc, &page.objects[oi]).map_err(write_failure)?;
                oi += 1;
            } else {
                p.prefix(loc, &page.prefixes[pi]).map_err(write_failure)?;
                pi += 1;
            }
        }
    }
    Ok(any)
}

/// The version an `ls -a` line names: a GCS generation, an S3 version id.
fn version_text(m: &ObjectMeta) -> String {
    match &m.version {
        Some(shoal_core::ObjectVersion::Generation(g)) => g.to_string(),
        Some(shoal_core::ObjectVersion::VersionId(v)) => v.clone(),
        Some(shoal_core::ObjectVersion::ETag(e)) => e.clone(),
        None => String::new(),
    }
}

/// Output errors: a closed pipe (`| head`) ends quietly.
pub(crate) fn write_failure(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::Reported
    } else {
        Failure::Failed(format!("write stdout: {e}"))
    }
}

/// A local folder (or file), read by the walk `cp -r` and `sync` make
/// ([`shoal_core::walk`]): in key order, shoal's working files left out,
/// links and special files not followed but named on stderr, as `cp -r`
/// names them. A folder that cannot be read is reported and the listing
/// goes on; the exit status says so.
fn ls_local(loc: &Location, a: &LsArgs, filter: Option<Arc<shoal_list::Filter>>) -> CmdResult {
    use shoal_core::Seen;
    use shoal_core::walk::{Depth, Symlinks};
    let top = std::path::Path::new(&loc.key);
    if let Err(e) = std::fs::metadata(top) {
        return Err(shoal_core::Error::io(shoal_core::Op::List, &loc.key, e).into());
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let depth = if a.recursive { Depth::All } else { Depth::One };
    let (mut failed, mut written) = (false, Ok(()));
    let (started, mut count) = (now(), 0);
    shoal_core::walk::walk(top, top, Symlinks::Report, depth, &mut |found| {
        let f = match found {
            Ok(Seen::Item(f)) => f,
            Ok(Seen::Skipped(s)) if s.is_asked() => return true,
            Ok(Seen::Skipped(s)) => {
                eprintln!("shoal: skipped: {s}");
                return true;
            }
            Err(e) => {
                eprintln!("shoal: {e}");
                failed = true;
                return true;
            }
        };
        if let Some(rules) = &filter
            && !rules.admits(&f.rel)
        {
            return true;
        }
        count += 1;
        written = writeln!(out, "{}", local_line(&f, a));
        written.is_ok()
    });
    written.map_err(write_failure)?;
    if !failed && a.json {
        let end = closing_record(&loc.key, count, a, started);
        writeln!(out, "{end}").map_err(write_failure)?;
    }
    out.flush().map_err(write_failure)?;
    if failed {
        return Err(Failure::Reported);
    }
    Ok(())
}

/// One line of a local listing: a folder (one level) as `path/`.
fn local_line(f: &shoal_core::walk::Found, a: &LsArgs) -> String {
    let mut name = f.path.display().to_string();
    if f.is_dir {
        name.push('/');
    }
    let size = if f.is_dir { 0 } else { f.meta.len() };
    let ns = (f.meta.modified().ok())
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128);
    if a.json {
        serde_json::json!({"url": name, "size": size, "updated": rfc3339(ns), "prefix": f.is_dir})
            .to_string()
    } else if a.long && !f.is_dir {
        format!("{size:>12}  {:<20}  {name}", rfc3339(ns))
    } else {
        name
    }
}
