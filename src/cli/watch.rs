//! `coord watch`: tick on every change under `work/` (debounced) and every interval, until
//! Ctrl-C or SIGTERM. The loop lives in [`crate::watch`]; each tick is
//! [`crate::ops::Opener::watch_tick`] (it takes the lock, so agent commands can run between
//! ticks). With `webhooks:` in coord.yaml it also delivers the events
//! ([`crate::ops::webhooks`]), unless another process of the clone does.

use super::Ctx;
use crate::error::{CliError, UsageError};
use crate::watch::{self, Options, SeenComplete, Why};

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

/// Runs `coord watch`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    if args.interval.get().as_secs() < 1 {
        return Err(UsageError("--interval must be at least 1s".to_string()).into());
    }
    let store = ctx.store()?;
    let work = store.abs(store.work_dir());
    let opts = Options {
        interval: args.interval.get(),
        poll: args.poll,
        ..Options::default()
    };
    let opener = ctx.opener();
    crate::ops::webhooks::start(&opener.dir, Box::new(|line| err!("{line}")))?;
    let mut tick = |why: Why, seen: &SeenComplete| Ok(opener.watch_tick(why, seen)?);
    let mut say = |line: &str| err!("{line}");
    let ticks = watch::run(&store.repo, &work, &opts, &mut tick, &mut say)?;
    ctx.status(&format!("coord: stopped after {ticks} ticks"));
    Ok(())
}
