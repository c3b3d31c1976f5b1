//! The agent's commands: `claim` (pull model), `complete` and `fail` (write a `result:` stamped
//! with the attempt, for fencing) and `heartbeat` (extend the lease). Each commits its change.

use super::synced::SyncArg;
use super::Ctx;
use crate::error::{CliError, Exit, JSON_VERSION};
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
}

/// The agent and attempt an agent command names, so a zombie (an agent whose lease was
/// reclaimed) cannot report for the attempt that replaced it.
#[derive(Debug, clap::Args)]
pub struct FenceArgs {
    /// The agent that worked on the task (as 'coord claim' granted it)
    #[arg(long, env = "COORD_AGENT", value_name = "AGENT")]
    agent: Option<AgentName>,
    /// The attempt worked on (as 'coord claim' printed it)
    #[arg(long, env = "COORD_ATTEMPT", value_name = "N")]
    attempt: Option<u32>,
}

impl FenceArgs {
    fn fence(&self) -> Fence {
        Fence {
            agent: self.agent.clone(),
            attempt: self.attempt,
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
    let r = match ctx.coord()?.claim(&args.agent, args.sync.sync.as_deref())? {
        Claimed::Granted(r) => r,
        Claimed::Nothing { agent, why } => return Err(nothing(ctx, agent, why)),
    };
    if ctx.json {
        let mut receipt = serde_json::json!({ "claimed": true });
        if let (Value::Object(m), Value::Object(fields)) = (&mut receipt, serde_json::to_value(&r)?)
        {
            m.extend(fields);
        }
        super::print_answer(receipt);
    } else {
        out!("{}", r.id);
        let lease = r.lease_expires_at.map_or("never".into(), time::format);
        ctx.status(&format!(
            "coord: {} is attempt {} of {} (lease until {lease}); report with --agent {} --attempt {}",
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
        let mut answer = serde_json::json!({"version": JSON_VERSION});
        if let (Some(answer), Value::Object(nothing)) = (
            answer.as_object_mut(),
            serde_json::json!(NothingClaimed::of(agent, &why)),
        ) {
            answer.extend(nothing);
        }
        super::print_json(&answer);
    } else if !ctx.quiet {
        err!("coord: {line}");
    }
    CliError::answered(Exit::NothingToClaim, line)
}

/// The answer of a claim that found nothing to claim (`claim --json` and the MCP tool).
#[derive(Debug, Clone, serde::Serialize)]
pub struct NothingClaimed {
    /// Always false.
    pub claimed: bool,
    /// The agent that asked.
    pub agent: AgentName,
    /// Why, when one reason stands out; else null.
    pub why: Option<String>,
}

impl NothingClaimed {
    /// Returns the answer for `agent`, with `why` as [`ops::Claimed::Nothing`] gives it (a
    /// leading `: `, or empty).
    pub fn of(agent: AgentName, why: &str) -> NothingClaimed {
        let why = why.trim_start_matches([':', ' ']);
        NothingClaimed {
            claimed: false,
            agent,
            why: (!why.is_empty()).then(|| why.to_string()),
        }
    }
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
}

fn write_result(ctx: &Ctx, id: &TaskId, verdict: &Verdict, how: How) -> Result<(), CliError> {
    let written = ops::How {
        fence: how.fence.fence(),
        sign: how.sign,
        replace: how.replace,
        metrics: how.metrics,
    };
    let attempt = report(ctx, id, verdict, &written, how.sync.sync.as_deref())?;
    if ctx.json {
        let op = match verdict {
            Verdict::Success { .. } => "complete",
            Verdict::Failure { .. } => "fail",
        };
        let state = super::state_of(&ctx.coord()?, id)?;
        super::print_json(&serde_json::json!({
            "version": JSON_VERSION, "op": op, "id": id, "state": state, "attempt": attempt,
        }));
    }
    Ok(())
}

/// Reports `verdict` for task `id` as `coord complete`/`fail` do (here, or through `remote`):
/// a refused report (a stale attempt, a task that moved on upstream) is an error. Returns the
/// attempt the result is stamped with.
fn report(
    ctx: &Ctx,
    id: &TaskId,
    verdict: &Verdict,
    written: &ops::How,
    remote: Option<&str>,
) -> Result<u32, CliError> {
    let reported = ctx
        .coord()?
        .report(id, verdict, written, remote)
        .map_err(|e| replace_hint(e, REPLACE_HINT))?;
    let (agent, attempt) = reported.accepted(id)?;
    if !written.fence.is_named() {
        let who = agent.map_or(String::new(), |a| format!(" of {a}"));
        ctx.status(&format!(
            "coord: stamped the result for attempt {attempt}{who}"
        ));
    }
    Ok(attempt)
}

/// Runs `coord heartbeat`.
/// With `--json`, prints `{version, op, id, state, lease_expires_at}`.
pub fn heartbeat(ctx: &Ctx, args: HeartbeatArgs) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    coord.heartbeat(&args.id, &args.fence.fence(), None)?;
    if ctx.json {
        let copies = coord.show(&args.id)?;
        let first = copies.first();
        super::print_json(&serde_json::json!({
            "version": JSON_VERSION, "op": "heartbeat", "id": args.id,
            "state": first.map(|c| &c["state"]),
            "lease_expires_at": first.map(|c| &c["task"]["coord"]["lease_expires_at"]),
        }));
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

/// Returns a report's error, with `hint` (how to replace the result) when a result is
/// already waiting.
pub(crate) fn replace_hint(e: ops::Error, hint: &str) -> CliError {
    let pending = matches!(e, ops::Error::Command(CommandError::ResultPending(_)));
    let e = CliError::from(e);
    match pending {
        true => e.with_hint(hint),
        false => e,
    }
}
