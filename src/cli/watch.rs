//! `coord watch`: tick on every change under `work/` (debounced) and every interval, until
//! Ctrl-C or SIGTERM. The loop lives in [`crate::watch`]; each tick here takes the lock, so
//! agent commands can run between ticks.

use super::Ctx;
use crate::lock::LockError;
use crate::model::Duration;
use crate::watch::{self, Options, Ticked, Why};
use anyhow::{Context, Result};

/// Arguments of `coord watch`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Time between periodic ticks, for leases and backoff (e.g. 60s, 5m)
    #[arg(long, default_value = "60s")]
    interval: Duration,
    /// Poll the file system instead of using change events (NFS, WSL, inotify limits)
    #[arg(long)]
    poll: bool,
}

/// How long one tick waits for an agent command to release the lock before trying later.
const TICK_WAIT: Duration = Duration::from_secs(2);

/// Runs `coord watch`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    if args.interval.as_secs() < 1 {
        return Err(crate::error::UsageError("--interval must be at least 1s".to_string()).into());
    }
    let store = ctx.store()?;
    let work = store.abs(store.work_dir());
    let opts = Options {
        interval: std::time::Duration::from_secs(args.interval.as_secs() as u64),
        poll: args.poll,
        ..Options::default()
    };
    let mut tick = |why: Why| tick(ctx, why).map_err(Into::into);
    let mut say = |line: &str| eprintln!("{line}");
    let ticks = watch::run(&store.repo, &work, &opts, &mut tick, &mut say)
        .context("coord watch stopped")?;
    ctx.status(&format!("coord: stopped after {ticks} ticks"));
    Ok(())
}

/// One tick with a fresh clock: lock (briefly), recover, tick.
fn tick(ctx: &Ctx, why: Why) -> Result<Ticked> {
    let ctx = ctx.refreshed();
    let (store, _lock) = match ctx.locked(TICK_WAIT) {
        Ok(s) => s,
        Err(e) if matches!(e.downcast_ref::<LockError>(), Some(LockError::Held { .. })) => {
            ctx.status(&format!("coord: {e}; trying again shortly"));
            return Ok(Ticked::Busy);
        }
        Err(e) => return Err(e),
    };
    let n = super::tick::tick_once(&ctx, &store)?;
    if ctx.verbose > 0 {
        ctx.status(&format!("coord: tick ({why:?}): {n} commits"));
    }
    Ok(Ticked::Done(n))
}
