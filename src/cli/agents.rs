//! `coord agents`: lists agents with their load and circuit; `coord agents add` creates a
//! profile, `disable` / `enable` set its `enabled:` and `remove` deletes it, each committed. Both call [`crate::ops::Coord`] and print.

use super::Ctx;
use crate::error::CliError;
use crate::model::AgentName;
use crate::ops::{self, NewAgent};
use serde_json::json;

/// Arguments of `coord agents`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Create an agent profile
    Add {
        /// The agent's name
        name: AgentName,
        /// A capability (repeatable)
        #[arg(long = "capability", value_name = "CAP")]
        capabilities: Vec<String>,
        /// Tasks assigned at once
        #[arg(long = "max-active", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
        max_active: u32,
        /// Take work only with `coord claim`
        #[arg(long)]
        pull: bool,
    },
    /// Assign an agent nothing more (`enabled: false`); what it holds runs on
    Disable {
        /// The agent's name
        name: AgentName,
    },
    /// Assign an agent work again (`enabled: true`)
    Enable {
        /// The agent's name
        name: AgentName,
    },
    /// Delete an agent's profile; refused while it has unfinished tasks
    Remove {
        /// The agent's name
        name: AgentName,
    },
}

/// Runs `coord agents`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    match args.action {
        None => list(ctx),
        Some(Action::Add {
            name,
            capabilities,
            max_active,
            pull,
        }) => add(
            ctx,
            NewAgent {
                name,
                capabilities,
                max_active,
                pull,
            },
        ),
        Some(Action::Disable { name }) => change(ctx, "disable", &name),
        Some(Action::Enable { name }) => change(ctx, "enable", &name),
        Some(Action::Remove { name }) => change(ctx, "remove", &name),
    }
}

/// Runs `coord agents disable|enable|remove NAME`.
fn change(ctx: &Ctx, verb: &str, name: &AgentName) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let commits = match verb {
        "remove" => coord.remove_agent(name)?,
        _ => coord.enable_agent(name, verb == "enable")?,
    };
    if ctx.json {
        super::print_answer(
            json!({"op": format!("agents {verb}"), "agent": name, "commits": commits}),
        );
    } else if commits == 0 {
        ctx.status(&format!("coord: agent {name} was {verb}d already"));
    }
    Ok(())
}

fn list(ctx: &Ctx) -> Result<(), CliError> {
    let rows = ctx.coord()?.agents()?;
    if ctx.json {
        super::print_answer(ops::Agents { agents: rows });
        return Ok(());
    }
    if rows.is_empty() {
        out!("no agents; add one with 'coord agents add NAME'");
    }
    for r in rows {
        let line = format!(
            "{:<20} {}/{} {:<8} {:<9} {}{}",
            r.name.as_str(),
            r.active,
            r.max_active,
            match r.enabled {
                true => r.assign.as_str(),
                false => "disabled",
            },
            r.circuit.as_str(),
            r.capabilities.join(","),
            r.error.map(|e| format!("  ({e})")).unwrap_or_default(),
        );
        out!("{}", crate::redact::error_line(&line));
    }
    Ok(())
}

fn add(ctx: &Ctx, agent: NewAgent) -> Result<(), CliError> {
    let added = ctx.coord()?.add_agent(&agent)?;
    if ctx.json {
        super::print_answer(
            json!({"op": "agents add", "agent": agent.name, "path": added.path, "commits": added.commits}),
        );
    }
    Ok(())
}
