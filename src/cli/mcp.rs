//! `coord mcp`: the MCP server ([`crate::mcp`]) over stdio, for a client that starts coord
//! itself; status lines go to stderr.

use super::Ctx;
use crate::error::CliError;
use crate::model::AgentName;

/// Arguments of `coord mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent the client works as: it is told when a task is assigned to it, when its
    /// lease is lost and when its task is cancelled (an agent a claim, heartbeat or
    /// lease_status call names is told too)
    #[arg(long, env = "COORD_AGENT", value_name = "AGENT")]
    agent: Option<AgentName>,
}

/// Runs `coord mcp`: serves until the client closes stdin.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    ctx.store()?;
    let opener = crate::ops::Opener::new(ctx.dir.clone(), ctx.opener().options, |_| {});
    let server = crate::mcp::Server::new(opener, args.agent, None);
    crate::mcp::serve_stdio(server)
}
