//! `coord new`: turns the flags into a [`NewTask`] for [`crate::ops::Coord::new_task`] and
//! prints the id.

use super::Ctx;
use crate::error::UsageError;
use crate::model::{AgentName, Priority, TaskId};
use crate::ops::NewTask;
use anyhow::Result;
use serde_json::{Map, Value};

/// Arguments of `coord new`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task's title
    title: String,
    /// Explicit assignee
    #[arg(long)]
    agent: Option<AgentName>,
    /// A capability the agent must have (repeatable)
    #[arg(long = "capability", value_name = "CAP")]
    capabilities: Vec<String>,
    /// low, normal, high or critical
    #[arg(long)]
    priority: Option<Priority>,
    /// An id that must be done first (repeatable)
    #[arg(long = "depends-on", value_name = "ID")]
    depends_on: Vec<TaskId>,
    /// Hand off to this agent after success (repeat for a fan-out)
    #[arg(long = "next-agent", value_name = "AGENT")]
    next_agent: Vec<AgentName>,
    /// Input for the agent as key=value (repeatable; the value is read as JSON when it parses)
    #[arg(long = "input", value_name = "KEY=VALUE")]
    input: Vec<String>,
    /// Use this id instead of a generated one
    #[arg(long)]
    id: Option<String>,
    /// A second `coord new` with the same key does nothing and prints the first id
    #[arg(long = "idempotency-key", value_name = "KEY")]
    idempotency_key: Option<String>,
}

/// Runs `coord new`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let id = match &args.id {
        Some(s) => Some(
            TaskId::new(s)
                .map_err(|e| UsageError(format!("--id {s:?} {e}; nothing was written")))?,
        ),
        None => None,
    };
    let task = NewTask {
        title: args.title,
        agent: args.agent,
        capabilities: args.capabilities,
        priority: args.priority,
        depends_on: args.depends_on,
        next_agents: args.next_agent,
        input: parse_input(&args.input)?,
        id,
        idempotency_key: args.idempotency_key,
    };
    let created = ctx.coord()?.new_task(&task)?;
    if ctx.json {
        super::print_answer(serde_json::to_value(&created)?);
    } else {
        out!("{}", created.id);
    }
    Ok(())
}

fn parse_input(pairs: &[String]) -> Result<Map<String, Value>> {
    pairs
        .iter()
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| UsageError(format!("--input {p:?} is not key=value")))?;
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
            Ok((k.to_string(), value))
        })
        .collect()
}
