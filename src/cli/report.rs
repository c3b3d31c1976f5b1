//! The agent's commands: `claim` (pull model), `complete` and `fail` (write a `result:` stamped
//! with the attempt, for fencing) and `heartbeat` (extend the lease). Each commits its change.

use super::synced::{self, SyncArg};
use super::{Ctx, AGENT_WAIT};
use crate::engine::commands::{self, Report};
use crate::engine::Signer;
use crate::model::{AgentName, TaskId};
use crate::yaml::{parse_bytes, Limits};
use anyhow::{Context, Result};
use serde_json::{json, Value};
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

/// Arguments naming one task.
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// The task's id
    pub id: TaskId,
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
    /// Sign the result with the agent's key (COORD_KEY_<AGENT> or the key file)
    #[arg(long)]
    sign: bool,
    #[command(flatten)]
    sync: SyncArg,
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
    /// Sign the result with the agent's key (COORD_KEY_<AGENT> or the key file)
    #[arg(long)]
    sign: bool,
    #[command(flatten)]
    sync: SyncArg,
}

/// Runs `coord claim`.
pub fn claim(ctx: &Ctx, args: ClaimArgs) -> Result<()> {
    let id = match synced::remote(ctx, args.sync.sync)? {
        Some(remote) => synced::claim(ctx, remote, &args.agent)?,
        None => {
            let (store, _lock) = ctx.session(AGENT_WAIT)?;
            let (board, _) = store.load()?;
            let (plan, id) = commands::claim(&board, &ctx.inputs(&store), &args.agent)?;
            ctx.apply(&store, &plan)?;
            id
        }
    };
    if ctx.json {
        super::print_json(&json!({"id": id, "agent": args.agent}));
    } else {
        out!("{id}");
    }
    Ok(())
}

/// Runs `coord complete`.
pub fn complete(ctx: &Ctx, args: CompleteArgs) -> Result<()> {
    let mut result = json!({"status": "success"});
    if let Some(src) = &args.output {
        result["output"] = read_output(ctx, src)?;
    }
    match args.next_agent.as_slice() {
        [] => {}
        [one] => result["next_agent"] = json!(one),
        many => result["next_agent"] = json!(many),
    }
    write_result(ctx, &args.id, result, args.sign, args.sync)
}

/// Runs `coord fail`.
pub fn fail(ctx: &Ctx, args: FailArgs) -> Result<()> {
    let result = json!({
        "status": "failure",
        "error": {"message": args.error, "retryable": !args.fatal},
    });
    write_result(ctx, &args.id, result, args.sign, args.sync)
}

fn write_result(ctx: &Ctx, id: &TaskId, result: Value, sign: bool, sync: SyncArg) -> Result<()> {
    let signer: Option<&dyn Signer> = if sign { Some(ctx.keys()) } else { None };
    let planner: &super::Planner<'_> = &|b, i| {
        commands::report(
            b,
            i,
            id,
            Report {
                result: result.clone(),
                signer,
            },
        )
    };
    match synced::remote(ctx, sync.sync)? {
        Some(remote) => synced::act(ctx, remote, planner),
        None => ctx.act(planner),
    }
}

/// Runs `coord heartbeat`.
pub fn heartbeat(ctx: &Ctx, args: IdArgs) -> Result<()> {
    ctx.act(&|b, i| commands::heartbeat(b, i, &args.id))
}

/// Reads an output document from a file (relative to `-C`) or stdin: YAML (so JSON too),
/// within the usual limits.
fn read_output(ctx: &Ctx, src: &PathBuf) -> Result<Value> {
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
