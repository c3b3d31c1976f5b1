//! `coord run <agent> -- CMD…`: the agent harness. This file reads the flags and prints what
//! happens ([`super::run_output`]); the loop — tick, take the agent's tasks, run CMD once per
//! task, heartbeat, report as `coord complete`/`fail` do, stop on SIGINT/SIGTERM — is
//! [`crate::run::Runner`].

use super::run_output::Output;
use super::Ctx;
use crate::error::{CliError, UsageError};
use crate::model::{AgentName, Duration};
use crate::run::Runner;
use std::ffi::OsString;
use std::path::PathBuf;

/// Arguments of `coord run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent to work as
    agent: AgentName,
    /// Run up to N tasks at once (the agent's max_active also applies)
    #[arg(long, default_value_t = 1, value_name = "N")]
    parallel: u32,
    /// Run what there is to do now, then exit
    #[arg(long)]
    once: bool,
    /// Look for work this often (a finished task looks again at once)
    #[arg(long, default_value = "1s")]
    interval: Duration,
    /// On SIGINT/SIGTERM, let running commands finish this long before killing them
    #[arg(long, default_value = "30s")]
    grace: Duration,
    /// Run the command in this directory (default: the repository root)
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Run each attempt in a git worktree of its own, on a branch coord/<task>-<attempt>
    #[arg(long)]
    worktree: bool,
    #[command(flatten)]
    sync: super::synced::SyncArg,
    #[command(flatten)]
    hub: super::hub::HubArg,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Runs `coord run`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    if args.parallel == 0 || args.parallel > 256 {
        return Err(UsageError("--parallel must be 1 to 256".into()).into());
    }
    if args.interval.as_secs() < 1 {
        return Err(UsageError("--interval must be at least 1s".into()).into());
    }
    let hub = super::hub::of(ctx, &args.hub, args.sync.sync.as_deref())?;
    if hub.is_some() && args.worktree {
        return Err(UsageError(
            "--worktree and a hub exclude each other: worktrees are of a local repository".into(),
        )
        .into());
    }
    let remote = match hub {
        Some(_) => None,
        None => super::synced::remote(ctx, args.sync.sync.clone())?,
    };
    let output = Output::new(args.agent.clone(), ctx.json, ctx.quiet);
    // On a terminal the live line and one line per task tell what happens; commit lines
    // would break the live line.
    let quiet = Ctx {
        quiet: ctx.quiet || output.is_live(),
        ..ctx.clone()
    };
    let runner = Runner {
        opener: quiet.opener(),
        agent: args.agent,
        parallel: args.parallel as usize,
        once: args.once,
        interval: args.interval,
        grace: args.grace,
        workdir: args.workdir.map(|d| ctx.dir.join(d)),
        worktree: args.worktree,
        command: args.command,
        remote,
        hub,
    };
    Ok(runner.run(&output)?)
}
