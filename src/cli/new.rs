//! `coord new`: turns the flags (and the YAML of `coord new -` or `--edit`, see
//! [`super::new_text`]) into a [`NewTask`] for [`crate::ops::Coord::new_task`] and prints
//! the id.

use super::Ctx;
use crate::error::CliError;
use crate::error::UsageError;
use crate::model::{AgentName, Authority, Duration, Priority, TaskId};
use crate::ops::NewTask;
use serde_json::{Map, Value};

/// Arguments of `coord new`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task's title; `-` reads the whole task as YAML (a task file's fields) on stdin
    #[arg(required_unless_present = "edit")]
    title: Option<String>,
    /// Write the task as YAML in $VISUAL or $EDITOR (flags fill what it leaves out)
    #[arg(long, conflicts_with = "title")]
    edit: bool,
    /// Longer text for whoever does the task
    #[arg(long)]
    description: Option<String>,
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
    /// With --next-agent: a join task for this agent, depending on every handoff child
    #[arg(long = "join-agent", value_name = "AGENT")]
    join_agent: Option<AgentName>,
    /// just_do_it (default), do_it_and_show_me or ask_me_first
    #[arg(long)]
    authority: Option<Authority>,
    /// When the task should be done by (RFC 3339, e.g. 2026-12-01T17:00:00Z, or a date)
    #[arg(long, value_name = "TIME")]
    due: Option<String>,
    /// The lease per attempt (e.g. 30m, 2h; default from coord.yaml)
    #[arg(long, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// Attempts before the task fails (1 to 100; default from coord.yaml)
    #[arg(long = "max-attempts", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    max_attempts: Option<u32>,
    /// A label (repeatable)
    #[arg(long = "label", value_name = "LABEL")]
    labels: Vec<String>,
    /// Input for the agent as key=value (repeatable; the value is read as JSON when it parses)
    #[arg(long = "input", value_name = "KEY=VALUE")]
    input: Vec<String>,
    /// Use this id instead of a generated one
    #[arg(long)]
    id: Option<String>,
    /// A second `coord new` with the same key does nothing and prints the first id
    #[arg(long = "idempotency-key", value_name = "KEY")]
    idempotency_key: Option<String>,
    #[command(flatten)]
    hub: super::hub::HubArg,
}

/// Runs `coord new`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let id = match &args.id {
        Some(s) => Some(
            TaskId::new(s)
                .map_err(|e| UsageError(format!("--id {s:?} {e}; nothing was written")))?,
        ),
        None => None,
    };
    let from_text = match args.title.as_deref() {
        Some("-") => Some(super::new_text::from_stdin()?),
        _ if args.edit => Some(super::new_text::from_editor()?),
        _ => None,
    };
    let flags = NewTask {
        title: args.title.unwrap_or_default(),
        description: args.description,
        agent: args.agent,
        capabilities: args.capabilities,
        priority: args.priority,
        depends_on: args.depends_on,
        next_agents: args.next_agent,
        join_agent: args.join_agent,
        authority: args.authority,
        timeout: args.timeout,
        max_attempts: args.max_attempts,
        due: args.due,
        labels: args.labels,
        input: parse_input(&args.input)?,
        id,
        idempotency_key: args.idempotency_key,
    };
    let task = match from_text {
        Some(text) => super::new_text::fill(text, flags),
        None => flags,
    };
    let created = match super::hub::of(ctx, &args.hub, None)? {
        Some(hub) => hub.new_task(&task)?,
        None => crate::error::same_fields(ctx.coord()?.new_task(&task)?, &task)?,
    };
    if ctx.json {
        super::print_answer(serde_json::to_value(&created)?);
    } else {
        out!("{}", created.id);
    }
    Ok(())
}

fn parse_input(pairs: &[String]) -> anyhow::Result<Map<String, Value>> {
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
