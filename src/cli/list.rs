//! `coord list`: the tasks as rows, filtered by state, agent, capability and priority
//! ([`crate::ops::Coord::list`]); aligned columns for people, `{version, tasks}` with `--json`.

use super::Ctx;
use crate::error::CliError;
use crate::model::{AgentName, Priority, State};
use crate::ops::{TaskFilter, TaskPage, TaskRow};

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
        super::print_answer(TaskPage {
            tasks: rows,
            next_cursor: None,
        });
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
    if !rows.is_empty() {
        out!("{}", line(&header, &widths, None));
    }
    for row in &cells {
        out!("{}", line(row, &widths, Some(ctx.look)));
    }
    Ok(())
}

/// Returns one row in aligned columns, the id and state in colour when `look` colours (not
/// the header's).
fn line(row: &[String; 6], widths: &[usize; 5], look: Option<super::human::Look>) -> String {
    let mut line = String::new();
    for (i, (w, c)) in widths.iter().zip(row).enumerate() {
        let pad = " ".repeat(w - c.chars().count() + 2);
        let cell = match (look, i) {
            (Some(look), 0) => look.paint("36", c),
            (Some(look), 1) => look.state(c),
            _ => c.clone(),
        };
        line.push_str(&cell);
        line.push_str(&pad);
    }
    line.push_str(&row[5]);
    line
}

/// Returns a task's row: id, state, agent, priority, attempt and title ("-" for none).
fn cells(row: &TaskRow) -> [String; 6] {
    let text = |s: Option<&str>, none: &str| crate::redact::one_line(s.unwrap_or(none));
    let attempt = row
        .attempt
        .filter(|n| *n > 0)
        .map_or("-".to_string(), |n| n.to_string());
    [
        text(Some(row.id.as_str()), "-"),
        text(Some(row.state.as_str()), "-"),
        text(row.agent.as_ref().map(AgentName::as_str), "-"),
        text(row.priority.map(Priority::as_str), "normal"),
        attempt,
        text(row.title.as_deref(), "(does not read)"),
    ]
}

/// Returns the state `s` names, or a message listing the names.
pub(crate) fn parse_state(s: &str) -> Result<State, String> {
    State::parse(s).ok_or_else(|| {
        let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown state {s:?}: use one of {}", names.join(", "))
    })
}
