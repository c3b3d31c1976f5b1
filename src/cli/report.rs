//! The agent's commands: `claim` (pull model), `complete` and `fail` (write a `result:` stamped
//! with the attempt, for fencing) and `heartbeat` (extend the lease). Each commits its change.

use super::hub::HubArg;
use super::synced::SyncArg;
use super::Ctx;
use crate::error::{CliError, Exit};
use crate::model::metrics::Metrics;
use crate::model::time;
use crate::model::{AgentName, TaskId};
use crate::ops::{self, Claimed, Verdict};
use crate::ops::{CommandError, Fence};
use crate::yaml::{parse_bytes, Limits};
use anyhow::Context;
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;

/// Arguments of `coord claim`.
#[derive(Debug, clap::Args)]
pub struct ClaimArgs {
    /// The agent taking work
    #[arg(long)]
    agent: AgentName,
    #[command(flatten)]
    sync: SyncArg,
    #[command(flatten)]
    hub: HubArg,
}

/// The agent, attempt and hub epoch an agent command names, so a zombie (an agent whose
/// lease was reclaimed, or whose hub was replaced) cannot report for the attempt that
/// replaced it.
#[derive(Debug, clap::Args)]
pub struct FenceArgs {
    /// The agent that worked on the task (as 'coord claim' granted it)
    #[arg(long, env = "COORD_AGENT", value_name = "AGENT")]
    agent: Option<AgentName>,
    /// The attempt worked on (as 'coord claim' printed it)
    #[arg(long, env = "COORD_ATTEMPT", value_name = "N")]
    attempt: Option<u32>,
    /// The epoch of the hub that granted the attempt (as 'coord claim' printed it)
    #[arg(long, env = "COORD_EPOCH", value_name = "N")]
    epoch: Option<u64>,
}

impl FenceArgs {
    fn fence(&self) -> Fence {
        Fence {
            agent: self.agent.clone(),
            attempt: self.attempt,
            epoch: self.epoch,
        }
    }
}

/// Arguments of `coord heartbeat`.
#[derive(Debug, clap::Args)]
pub struct HeartbeatArgs {
    /// The task's id
    pub id: TaskId,
    #[command(flatten)]
    fence: FenceArgs,
    #[command(flatten)]
    hub: HubArg,
}

/// Arguments of `coord complete`.
#[derive(Debug, clap::Args)]
pub struct CompleteArgs {
    /// The task's id
    id: TaskId,
    /// The output as YAML or JSON, from a file or '-' for stdin
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Hand off to this agent (repeat for a fan-out); overrides the task's next_agent
    #[arg(long = "next-agent", value_name = "AGENT")]
    next_agent: Vec<AgentName>,
    #[command(flatten)]
    how: How,
}

/// Arguments of `coord fail`.
#[derive(Debug, clap::Args)]
pub struct FailArgs {
    /// The task's id
    id: TaskId,
    /// What went wrong
    #[arg(long)]
    error: String,
    /// Do not retry: the task goes to failed/ at the next tick
    #[arg(long)]
    fatal: bool,
    #[command(flatten)]
    how: How,
}

/// Runs `coord claim`; nothing to claim is an answer (exit 4), not an error.
pub fn claim(ctx: &Ctx, args: ClaimArgs) -> Result<(), CliError> {
    let claimed = match super::hub::of(ctx, &args.hub, args.sync.sync.as_deref())? {
        Some(hub) => hub.claim(&args.agent)?,
        None => ctx.coord()?.claim(&args.agent, args.sync.sync.as_deref())?,
    };
    print_claimed(ctx, &claimed)
}

/// Prints what a claim found, here or through a hub: the receipt, or that there is nothing
/// to claim (exit 4).
fn print_claimed(ctx: &Ctx, claimed: &Claimed) -> Result<(), CliError> {
    let r = match claimed {
        Claimed::Granted(r) => r,
        Claimed::Nothing { agent, why } => return Err(nothing(ctx, agent.clone(), why.clone())),
    };
    if ctx.json {
        super::print_answer(claimed.answer());
    } else {
        out!("{}", r.id);
        let lease = r.lease_expires_at.map_or("never".into(), time::format);
        let epoch = r.epoch.map_or(String::new(), |n| format!(" --epoch {n}"));
        ctx.status(&format!(
            "coord: {} is attempt {} of {} (lease until {lease}); report with --agent {} --attempt {}{epoch}",
            r.id, r.attempt, r.agent, r.agent, r.attempt
        ));
    }
    Ok(())
}

/// Prints that there is nothing to claim (with `--json`, as an object on stdout) and returns
/// the exit it gives.
fn nothing(ctx: &Ctx, agent: AgentName, why: String) -> CliError {
    let line = CommandError::NothingToClaim {
        agent: agent.clone(),
        why: why.clone(),
    }
    .to_string();
    if ctx.json {
        super::print_answer(ops::NothingClaimed::of(agent, &why));
    } else if !ctx.quiet {
        err!("coord: {line}");
    }
    CliError::answered(Exit::NothingToClaim, line)
}

/// Runs `coord complete`.
pub fn complete(ctx: &Ctx, args: CompleteArgs) -> Result<(), CliError> {
    let output = match &args.output {
        Some(src) => Some(read_output(ctx, src)?),
        None => None,
    };
    let verdict = Verdict::Success {
        output,
        next_agents: args.next_agent,
    };
    write_result(ctx, &args.id, &verdict, args.how)
}

/// Runs `coord fail`.
pub fn fail(ctx: &Ctx, args: FailArgs) -> Result<(), CliError> {
    let verdict = Verdict::Failure {
        message: args.error,
        retryable: !args.fatal,
    };
    write_result(ctx, &args.id, &verdict, args.how)
}

/// How `complete` and `fail` write their result: signed, replacing one that waits, fenced,
/// pushed.
#[derive(Debug, clap::Args)]
pub struct How {
    /// Sign the result with the agent's key (COORD_KEY_<AGENT> or the key file)
    #[arg(long)]
    sign: bool,
    #[command(flatten)]
    sync: SyncArg,
    /// Overwrite a result that is already waiting (the old one is kept in coord.history)
    #[arg(long)]
    replace: bool,
    /// What the attempt cost, as key=value pairs: tokens_in, tokens_out, cost, model,
    /// duration_s (e.g. tokens_in=700,cost=0.12)
    #[arg(long, value_name = "K=V,...")]
    metrics: Option<Metrics>,
    #[command(flatten)]
    fence: FenceArgs,
    #[command(flatten)]
    hub: HubArg,
}

fn write_result(ctx: &Ctx, id: &TaskId, verdict: &Verdict, how: How) -> Result<(), CliError> {
    let written = ops::How {
        fence: how.fence.fence(),
        sign: how.sign,
        replace: how.replace,
        metrics: how.metrics,
        signed: None,
    };
    let remote = how.sync.sync.as_deref();
    let answer = match super::hub::of(ctx, &how.hub, remote)? {
        Some(hub) => hub.report(id, verdict, &written).map_err(pending_there)?,
        None => ctx
            .coord()?
            .report_answer(id, verdict, &written, remote)
            .map_err(|e| crate::error::replace_hint(e, REPLACE_HINT))?,
    };
    stamped(ctx, &written, answer.agent.as_ref(), answer.attempt);
    if ctx.json {
        super::print_answer(answer);
    }
    Ok(())
}

/// Says which attempt a result was stamped with, when the reporter named none.
fn stamped(ctx: &Ctx, written: &ops::How, agent: Option<&AgentName>, attempt: u32) {
    if !written.fence.is_named() {
        let who = agent.map_or(String::new(), |a| format!(" of {a}"));
        ctx.status(&format!(
            "coord: stamped the result for attempt {attempt}{who}"
        ));
    }
}

/// Runs `coord heartbeat`.
/// With `--json`, prints `{version, op, id, state, lease_expires_at}`.
pub fn heartbeat(ctx: &Ctx, args: HeartbeatArgs) -> Result<(), CliError> {
    let fence = args.fence.fence();
    let beat = match super::hub::of(ctx, &args.hub, None)? {
        Some(hub) => hub.heartbeat(&args.id, &fence)?,
        None => ctx.coord()?.heartbeat(&args.id, &fence, None)?,
    };
    if ctx.json {
        super::print_answer(beat);
    }
    Ok(())
}

/// Reads an output document from a file (relative to `-C`) or stdin: YAML (so JSON too),
/// within the usual limits.
fn read_output(ctx: &Ctx, src: &PathBuf) -> anyhow::Result<Value> {
    let mut bytes = Vec::new();
    if src.as_os_str() == "-" {
        std::io::stdin()
            .take(Limits::default().max_bytes as u64 + 1)
            .read_to_end(&mut bytes)?;
    } else {
        bytes = std::fs::read(ctx.dir.join(src))
            .with_context(|| format!("cannot read --output {}", src.display()))?;
    }
    let doc = parse_bytes(&bytes, &Limits::default())
        .map_err(|e| anyhow::anyhow!("{}:{e}", src.display()))?;
    Ok(doc.value)
}

/// What to do about a result already waiting, at the command line.
const REPLACE_HINT: &str = "pass --replace to overwrite it (the old one is kept in coord.history)";

/// Returns a hub's refusal of a report, with the hint of [`crate::error::replace_hint`] when a result is
/// already waiting.
fn pending_there(e: crate::client::ClientError) -> CliError {
    let pending = e.code() == Some("result_pending");
    let e = CliError::from(e);
    match pending {
        true => e.with_hint(REPLACE_HINT),
        false => e,
    }
}
