//! `coord watch`: tick on every change under `work/` (debounced) and every interval, until
//! Ctrl-C or SIGTERM. The loop lives in [`crate::watch`]; each tick here takes the lock, so
//! agent commands can run between ticks.

use super::Ctx;
use crate::lock::LockError;
use crate::ops;
use crate::watch::{self, Options, SeenComplete, Ticked, Why};
use anyhow::{Context, Result};

/// Arguments of `coord watch`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Time between periodic ticks, for leases and backoff (e.g. 60s, 5m)
    #[arg(long, default_value = "60s")]
    interval: super::wait::FlagDuration,
    /// Poll the file system instead of using change events (NFS, WSL, inotify limits)
    #[arg(long)]
    poll: bool,
}

/// How long one tick waits for an agent command to release the lock before trying later.
pub(crate) const TICK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `coord watch`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    if args.interval.get().as_secs() < 1 {
        return Err(crate::error::UsageError("--interval must be at least 1s".to_string()).into());
    }
    let store = ctx.store()?;
    let work = store.abs(store.work_dir());
    let opts = Options {
        interval: args.interval.get(),
        poll: args.poll,
        ..Options::default()
    };
    let mut tick = |why: Why, seen: &SeenComplete| tick(ctx, why, seen).map_err(Into::into);
    let mut say = |line: &str| err!("{line}");
    let ticks = watch::run(&store.repo, &work, &opts, &mut tick, &mut say)
        .context("coord watch stopped")?;
    ctx.status(&format!("coord: stopped after {ticks} ticks"));
    Ok(())
}

/// One tick with a fresh clock: lock (briefly), recover, tick; files seen complete are read
/// without waiting for them to settle. `coord serve --tick` runs it too.
pub(crate) fn tick(ctx: &Ctx, why: Why, seen: &SeenComplete) -> Result<Ticked> {
    let ctx = Ctx {
        wait: ctx.wait.or(Some(TICK_WAIT)),
        ..ctx.refreshed()
    };
    let coord = ctx.coord()?;
    let root = coord.store().root().to_path_buf();
    coord.store().set_seen_complete(
        seen.iter()
            .filter_map(|(p, written)| {
                let rel = p.strip_prefix(&root).ok()?.to_str()?.to_string();
                Some((rel, *written))
            })
            .collect(),
    );
    let pass = match coord.tick() {
        Ok(pass) => pass,
        Err(e @ ops::Error::Lock(LockError::Held { .. })) => {
            ctx.status(&format!("coord: {e}; trying again shortly"));
            return Ok(Ticked::Busy);
        }
        Err(e) => return Err(e.into()),
    };
    let n = pass.commits;
    if ctx.verbose > 0 {
        ctx.status(&format!("coord: tick ({why:?}): {n} commits"));
    }
    let now = jiff::Timestamp::now();
    Ok(match pass.settles_at {
        Some(at) => {
            let after = std::time::Duration::try_from(at.duration_since(now)).unwrap_or_default();
            Ticked::Settling(n, after + std::time::Duration::from_millis(20))
        }
        None => Ticked::Done(n),
    })
}
