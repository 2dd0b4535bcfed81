//! `shoal cat`: objects to stdout, in the order given. Like cat(1), a
//! failing object is reported and the rest still printed; the exit code
//! says whether all succeeded.

use shoal_core::{Error, Op};
use shoal_transfer::download::download_to_writer;

use crate::args::CatArgs;
use crate::config::Context;
use crate::{CmdResult, Failure};

pub(crate) async fn run(ctx: &Context, a: CatArgs) -> CmdResult {
    let locs = a
        .urls
        .iter()
        .map(|u| super::require_object(u, "cat"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = tokio::io::stdout();
    let mut failed = false;
    for loc in locs {
        let r = if loc.is_local() {
            match tokio::fs::File::open(&loc.key).await {
                Ok(mut f) => tokio::io::copy(&mut f, &mut out)
                    .await
                    .map(|_| ())
                    .map_err(|e| Error::io(Op::Read, &loc.key, e)),
                Err(e) => Err(Error::io(Op::Read, &loc.key, e)),
            }
        } else {
            match ctx.store(&loc) {
                Ok(store) => download_to_writer(store, &loc, &mut out, &ctx.transfer, &ctx.retry)
                    .await
                    .map(|_| ()),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = r {
            if e.kind() == shoal_core::ErrorKind::Io && e.message().contains("Broken pipe") {
                return Err(Failure::Reported);
            }
            eprintln!("shoal: {e}");
            failed = true;
        }
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}
