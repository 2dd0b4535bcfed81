//! `shoal du`: total size and object count below each URL or glob.
//!
//! Default: one line per first level below the URL (`--group-by prefix`),
//! then the total; `-s` prints the total only; `--group-by` also takes
//! `prefix:DEPTH`, `suffix`, `age`, `storage-class`; `-c` counts without
//! sizes. The listing is shoal-list's parallel one, projected to name, size
//! and time (full resources only for storage classes), so `du` of a huge
//! bucket costs what listing it costs and memory grows with the groups,
//! not the keys.

use std::io::Write;

use futures::StreamExt;
use shoal_list::du::{Du, GroupBy, Totals};
use shoal_list::{KeyGlob, ListOptions};

use crate::args::DuArgs;
use crate::cmd::ls::write_failure;
use crate::config::Context;
use crate::failure::{CmdResult, Failure};
use crate::output::human_bytes;

pub(crate) async fn run(ctx: &Context, a: DuArgs) -> CmdResult {
    let locs = a
        .urls
        .iter()
        .map(|u| super::parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    for loc in &locs {
        if loc.is_local() {
            return Err(Failure::Usage(format!(
                "du {loc}: local paths are not supported (use du(1))"
            )));
        }
        shoal_list::check(loc)?;
    }
    let filter = a.filters.filter()?;
    let group_by = match (a.summarize, a.group_by) {
        (true, _) => GroupBy::None,
        (false, Some(g)) => g,
        (false, None) => GroupBy::Prefix(1),
    };
    let opts = ListOptions {
        versions: false,
        recursive: true,
        projection: group_by.projection(),
        workers: a
            .parallel
            .map_or(shoal_list::parallel::DEFAULT_WORKERS, |n| n as usize),
        sorted: false,
        page_size: None,
    };
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = false;
    let mut said_header = false;
    for loc in locs {
        let store = ctx.store(&loc)?;
        let base = KeyGlob::parse(&loc.to_string(), &loc.key)?
            .map_or_else(|| loc.key.clone(), |g| g.literal_prefix().to_owned());
        let mut du = Du::new(group_by, &base, now_ns);
        let root = shoal_list::filter::listing_root(&loc.key);
        let mut objects = std::pin::pin!(shoal_list::expand(store, &loc, &opts));
        while let Some(m) = objects.next().await {
            let m = m?;
            if let Some(f) = &filter
                && !f.admits(shoal_list::filter::name_below(&root, &m.key))
            {
                continue;
            }
            du.add(&m);
        }
        // A glob that matches nothing is an error, as for `ls`; nothing
        // below a bucket or prefix is 0, as du of an empty folder is.
        if du.total().objects == 0 && shoal_list::has_wildcard(&loc.key) {
            eprintln!("shoal: du {loc}: matched no objects");
            failed = true;
            continue;
        }
        if !said_header && !a.json {
            header(&mut out, &a).map_err(write_failure)?;
            said_header = true;
        }
        for (label, t) in du.groups() {
            let label = match group_by {
                GroupBy::Prefix(_) => loc.with_key(label).to_string(),
                _ => label,
            };
            line(&mut out, &a, &label, t, false).map_err(write_failure)?;
        }
        line(&mut out, &a, &loc.to_string(), du.total(), true).map_err(write_failure)?;
    }
    out.flush().map_err(write_failure)?;
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}

fn line(
    out: &mut impl Write,
    a: &DuArgs,
    label: &str,
    t: Totals,
    total: bool,
) -> std::io::Result<()> {
    if a.json {
        let mut v = serde_json::json!({"objects": t.objects});
        let o = v.as_object_mut().expect("object");
        o.insert(if total { "url" } else { "group" }.into(), label.into());
        if !a.count {
            o.insert("bytes".into(), t.bytes.into());
        }
        if total {
            o.insert("total".into(), true.into());
        }
        return writeln!(out, "{v}");
    }
    let label = if total && !a.summarize {
        format!("TOTAL {label}")
    } else {
        label.to_owned()
    };
    if a.count {
        writeln!(out, "{:>12}  {label}", t.objects)
    } else if a.human_readable {
        writeln!(
            out,
            "{:>11}  {:>10}  {label}",
            human_bytes(t.bytes),
            t.objects
        )
    } else {
        writeln!(
            out,
            "{:>15}  {:>10}  {:>11}  {label}",
            t.bytes,
            t.objects,
            human_bytes(t.bytes)
        )
    }
}

/// The columns' names, once, above the first line (not with --json).
fn header(out: &mut impl Write, a: &DuArgs) -> std::io::Result<()> {
    if a.count {
        writeln!(out, "{:>12}  URL", "OBJECTS")
    } else if a.human_readable {
        writeln!(out, "{:>11}  {:>10}  URL", "SIZE", "OBJECTS")
    } else {
        writeln!(
            out,
            "{:>15}  {:>10}  {:>11}  URL",
            "BYTES", "OBJECTS", "SIZE"
        )
    }
}
