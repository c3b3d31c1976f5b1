//! `coord list`: the tasks as rows, filtered by state, agent, capability and priority
//! ([`crate::ops::Coord::list`]); aligned columns for people, `{version, tasks}` with `--json`.

use super::Ctx;
use crate::error::CliError;
use crate::model::{AgentName, Priority, State};
use crate::ops::TaskFilter;
use serde_json::{json, Value};

/// Arguments of `coord list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only tasks in this state (inbox, ready, assigned, review, done, failed, ...)
    #[arg(long, value_parser = parse_state)]
    state: Option<State>,
    /// Only this agent's tasks (in its folder, or naming it in `agent:`)
    #[arg(long)]
    agent: Option<AgentName>,
    /// Only tasks that ask for this capability
    #[arg(long, value_name = "CAP")]
    capability: Option<String>,
    /// Only tasks of this priority (low, normal, high or critical; none given is normal)
    #[arg(long)]
    priority: Option<Priority>,
}

/// Runs `coord list`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let filter = TaskFilter {
        state: args.state,
        agent: args.agent,
        capability: args.capability,
        priority: args.priority,
    };
    let rows = ctx.coord()?.list(&filter)?;
    if ctx.json {
        super::print_answer(json!({ "tasks": rows }));
        return Ok(());
    }
    if rows.is_empty() {
        ctx.status("coord: no task matches");
    }
    let cells: Vec<[String; 6]> = rows.iter().map(cells).collect();
    let header = ["ID", "STATE", "AGENT", "PRIORITY", "ATTEMPT", "TITLE"].map(String::from);
    let mut widths = [0; 5];
    for row in std::iter::once(&header).chain(&cells) {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    for row in std::iter::once(&header)
        .chain(&cells)
        .filter(|_| !rows.is_empty())
    {
        let mut line = String::new();
        for (w, c) in widths.iter().zip(row) {
            line.push_str(&format!("{c:<w$}  "));
        }
        line.push_str(&row[5]);
        out!("{}", crate::redact::one_line(&line));
    }
    Ok(())
}

/// Returns a task's row: id, state, agent, priority, attempt and title ("-" for none).
fn cells(v: &Value) -> [String; 6] {
    let text = |k: &str, none: &str| v[k].as_str().unwrap_or(none).to_string();
    let attempt = v["attempt"]
        .as_u64()
        .filter(|n| *n > 0)
        .map_or("-".to_string(), |n| n.to_string());
    [
        text("id", "-"),
        text("state", "-"),
        text("agent", "-"),
        text("priority", "normal"),
        attempt,
        text("title", "(does not read)"),
    ]
}

/// Returns the state `s` names, or a message listing the names.
pub(crate) fn parse_state(s: &str) -> Result<State, String> {
    State::parse(s).ok_or_else(|| {
        let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown state {s:?}: use one of {}", names.join(", "))
    })
}
