//! `coord status`: the board (SPEC 4) for people or, with `--json`, for scripts.

use super::{board_markdown, board_view, Ctx};
use crate::model::{AgentName, State};
use anyhow::Result;

/// Arguments of `coord status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show only this agent's tasks and profile
    #[arg(long)]
    agent: Option<AgentName>,
    /// Print the board as Markdown (e.g. into $GITHUB_STEP_SUMMARY)
    #[arg(long)]
    markdown: bool,
}

/// Runs `coord status`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let (v, tentative) = board(ctx, args.agent.as_ref())?;
    if args.markdown {
        out!("{}", board_markdown::render(&v).trim_end());
    } else if ctx.json {
        super::print_json(&v);
    } else {
        board_view::print(&v);
    }
    if let Some((tracking, ids)) = tentative {
        if !ids.is_empty() {
            ctx.status(&format!(
                "coord: {} assignment(s) here are not on {tracking} (as of the last fetch) and may go to another clone: {}; run coord sync (or claim with --sync) before starting work",
                ids.len(),
                ids.join(", ")
            ));
        }
    }
    Ok(())
}

/// The remote-tracking branch and the assignments it does not have yet.
pub type Tentative = Option<(String, Vec<String>)>;

/// Returns the board as `coord status --json` prints it (only `agent`'s tasks and profile
/// when given), secrets redacted, and the assignments not yet on the remote.
pub fn board(ctx: &Ctx, agent: Option<&AgentName>) -> Result<(serde_json::Value, Tentative)> {
    let store = ctx.store()?;
    let (mut board, _) = store.load()?;
    if let Some(a) = agent {
        crate::engine::commands::known_agent(&board, a)?;
        board.tasks.retain(|t| {
            t.folder.agent.as_ref() == Some(a)
                || t.read
                    .as_ref()
                    .is_ok_and(|d| d.spec.agent.as_ref() == Some(a))
        });
        board.agents.retain(|n, _| n == a);
    }
    let reasons = crate::view::invalid_reasons(&store, &board);
    let v = board_view::view(&board, &ctx.inputs(&store), &reasons);
    let tentative = super::synced::tentative(&store, &board)?;
    Ok((crate::redact::redact_value(&v), tentative))
}

/// Returns one line of facts per task (id, state, agent, title, priority, attempt, lease end,
/// path), in the board's order; only tasks in `state`, and of `agent` (its folder or its
/// `agent:` field), when given. Redacted.
pub fn tasks(
    ctx: &Ctx,
    state: Option<State>,
    agent: Option<&AgentName>,
) -> Result<Vec<serde_json::Value>> {
    let store = ctx.store()?;
    let (board, _) = store.load()?;
    if let Some(a) = agent {
        crate::engine::commands::known_agent(&board, a)?;
    }
    Ok(board
        .tasks
        .iter()
        .filter(|t| state.is_none_or(|s| t.folder.state == s))
        .filter(|t| {
            agent.is_none_or(|a| {
                t.folder.agent.as_ref() == Some(a)
                    || t.read
                        .as_ref()
                        .is_ok_and(|d| d.spec.agent.as_ref() == Some(a))
            })
        })
        .map(|t| {
            let doc = t.read.as_ref().ok();
            crate::redact::redact_value(&serde_json::json!({
                "id": t.id,
                "state": t.folder.state.as_str(),
                "agent": t.folder.agent,
                "title": doc.map(|d| &d.spec.title),
                "priority": doc.and_then(|d| d.spec.priority),
                "attempt": doc.map(|d| d.coord.attempt),
                "lease_expires_at": doc.and_then(|d| d.coord.lease_expires_at.as_ref()),
                "path": t.path,
            }))
        })
        .collect())
}
