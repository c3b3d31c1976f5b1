//! `coord status`: the board (SPEC 4) for people or, with `--json`, for scripts.

use super::{board_markdown, board_view, Ctx};
use crate::model::{AgentName, State};
use crate::store::Store;
use anyhow::Result;
use std::collections::BTreeMap;

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
    let store = ctx.store()?;
    let (mut board, _) = store.load()?;
    if let Some(a) = &args.agent {
        crate::engine::commands::known_agent(&board, a)?;
        board.tasks.retain(|t| {
            t.folder.agent.as_ref() == Some(a)
                || t.read
                    .as_ref()
                    .is_ok_and(|d| d.spec.agent.as_ref() == Some(a))
        });
        board.agents.retain(|n, _| n == a);
    }
    let reasons = invalid_reasons(&store, &board);
    let v = board_view::view(&board, &ctx.inputs(&store), &reasons);
    if args.markdown {
        out!(
            "{}",
            board_markdown::render(&crate::redact::redact_value(&v)).trim_end()
        );
    } else if ctx.json {
        super::print_json(&crate::redact::redact_value(&v));
    } else {
        board_view::print(&v);
    }
    if let Some((tracking, ids)) = super::synced::tentative(&store, &board)? {
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

/// Returns the first line of each invalid task's `.errors` file, by id.
pub fn invalid_reasons(store: &Store, board: &crate::board::Board) -> BTreeMap<String, String> {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Invalid)
        .map(|t| {
            let errors = store
                .read_file(&format!("{}.errors", t.path), 64 * 1024)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let first = errors
                .lines()
                .next()
                .unwrap_or("no .errors file")
                .to_string();
            (t.id.to_string(), crate::redact::one_line(&first))
        })
        .collect()
}
