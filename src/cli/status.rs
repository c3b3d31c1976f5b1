//! `coord status`: the board (docs/commands.md) for people (in colour on a terminal, long lists
//! summarised unless `--all`) or, with `--json`, for scripts.

use super::{board_markdown, board_view, Ctx};
use crate::error::{CliError, UsageError};
use crate::model::AgentName;

/// Arguments of `coord status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show only this agent's tasks and profile
    #[arg(long)]
    agent: Option<AgentName>,
    /// Print the board as Markdown (e.g. into $GITHUB_STEP_SUMMARY); not with --json
    #[arg(long)]
    markdown: bool,
    /// List every entry of long lists (by default each shows its first 10 and how many more)
    #[arg(long)]
    all: bool,
}

/// Runs `coord status`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    if args.markdown && ctx.json {
        return Err(UsageError(
            "--markdown and --json ask for two different outputs; drop one ('coord --json status' is the board as JSON)".into(),
        )
        .into());
    }
    let status = ctx.coord()?.status(args.agent.as_ref())?;
    let v = status.board;
    if args.markdown {
        out!("{}", board_markdown::render(&v).trim_end());
    } else if ctx.json {
        super::print_answer(v);
    } else {
        board_view::print(&v, board_view::Style::of(ctx.look, args.all));
    }
    if let Some(t) = status.tentative.filter(|t| !t.ids.is_empty()) {
        let ids: Vec<&str> = t.ids.iter().map(|id| id.as_str()).collect();
        ctx.status(&format!(
            "coord: {} assignment(s) here are not on {} (as of the last fetch) and may go to another clone: {}; run coord sync (or claim with --sync) before starting work",
            ids.len(),
            t.tracking,
            ids.join(", ")
        ));
    }
    if let Some(rate) = status.push_rate {
        ctx.status(&format!(
            "coord: this clone pushed {} times in the last {} minutes; the remote takes about {} a minute from all clones together (sync.pushes_per_minute): sync less often, or let one clone coordinate (docs/sync.md, \"Push budget\")",
            rate.pushes,
            crate::ops::PushRate::WINDOW_MINUTES,
            rate.budget_per_minute
        ));
    }
    Ok(())
}
