//! `coord prime`: prints the instructions for an agent working in this repo
//! ([`crate::ops::Coord::prime`]) for a session-start hook, or installs them with `--install`
//! into a marked section of AGENTS.md ([`crate::ops::Coord::install_prime`]).

use super::Ctx;
use crate::error::CliError;
use crate::model::AgentName;

/// Arguments of `coord prime`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent the instructions are for (default: a placeholder the reader fills in)
    #[arg(long, env = "COORD_AGENT", value_name = "AGENT")]
    agent: Option<AgentName>,
    /// Write the instructions into AGENTS.md at the repo root (a marked section, updated in place)
    #[arg(long)]
    install: bool,
}

/// Runs `coord prime`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let agent = args.agent.as_ref();
    if !args.install {
        // A command `coord run` started: the runner reports for it.
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
        return Ok(());
    }
    let changed = coord.install_prime(agent)?;
    let what = if changed { "wrote" } else { "unchanged:" };
    if ctx.json {
        super::print_json(
            &serde_json::json!({"version": 1, "path": "AGENTS.md", "changed": changed}),
        );
    } else {
        ctx.status(&format!("coord: {what} the coord section of AGENTS.md"));
    }
    Ok(())
}
