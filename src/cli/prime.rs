//! `coord prime`: prints the instructions for an agent working in this repo
//! ([`crate::ops::Coord::prime`]) for a session-start hook, or sets the repo up for the
//! agents people use with `--install` (AGENTS.md, `.mcp.json`, `.codex/config.toml`;
//! [`crate::ops::Coord::install_prime`]) and takes that out again with `--uninstall`.

use super::Ctx;
use crate::error::CliError;
use crate::model::AgentName;
use crate::ops::Touched;

/// Arguments of `coord prime`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent the instructions are for (default: a placeholder the reader fills in; not
    /// with --install: AGENTS.md is read by every agent)
    #[arg(long, env = "COORD_AGENT", value_name = "AGENT")]
    agent: Option<AgentName>,
    /// Write the instructions into AGENTS.md and coord's MCP server into .mcp.json and
    /// .codex/config.toml (merged with what is there; a conflicting entry is an error)
    #[arg(long, conflicts_with = "uninstall")]
    install: bool,
    /// Take out what --install wrote (a file not changed since is put back as it was)
    #[arg(long)]
    uninstall: bool,
}

/// Runs `coord prime`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let agent = args.agent.as_ref();
    let touched = match (args.install, args.uninstall) {
        (true, _) => coord.install_prime()?,
        (_, true) => coord.uninstall_prime()?,
        _ => {
            print_text(ctx, &coord, agent);
            return Ok(());
        }
    };
    if ctx.json {
        let changed = touched.iter().any(|t| t.changed);
        super::print_json(&serde_json::json!({
            "version": 1, "path": "AGENTS.md", "changed": changed, "files": touched,
        }));
        return Ok(());
    }
    let verb = if args.install { "wrote" } else { "restored" };
    for Touched { path, changed } in &touched {
        let what = if *changed { verb } else { "unchanged:" };
        ctx.status(&format!("coord: {what} {path}"));
    }
    Ok(())
}

/// Prints the instructions; for a command `coord run` started, saying the runner reports.
fn print_text(ctx: &Ctx, coord: &crate::ops::Coord, agent: Option<&AgentName>) {
    let text = match std::env::var_os(crate::run::RUN_ID_VAR) {
        Some(_) => coord.prime_under_run(agent),
        None => coord.prime(agent),
    };
    if ctx.json {
        let shown = agent.map_or("<you>", |a| a.as_str());
        super::print_json(&serde_json::json!({"version": 1, "agent": shown, "text": text}));
    } else {
        out!("{}", text.trim_end());
    }
}
