//! `coord archive [--older-than 7d]`: moves old done and cancelled tasks to
//! `archive/<YYYY-MM>/`, one commit each. The engine decides which (`engine::archive`).

use super::{Ctx, AGENT_WAIT};
use crate::engine::{archive, Note};
use crate::model::Duration;
use anyhow::Result;
use serde_json::json;

/// Arguments of `coord archive`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Archive tasks finished at least this long ago (default: archive_after in coord.yaml)
    #[arg(long = "older-than", value_name = "AGE")]
    older_than: Option<super::wait::FlagDuration>,
    /// Print what would move and change nothing
    #[arg(long)]
    dry_run: bool,
}

/// Runs `coord archive`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let (coord, _lock) = ctx.session(AGENT_WAIT)?;
    let store = coord.store();
    let (board, _) = store.load()?;
    let age = args.older_than.map_or(store.config.archive_after, |d| {
        Duration::from_secs(d.ceil_secs())
    });
    let plan = archive::plan(&board, &ctx.inputs(store), age);
    for note in &plan.notes {
        if let Note::Skipped { path, message } = note {
            ctx.status(&format!("coord: {path}: {message}"));
        }
    }
    let n = if args.dry_run {
        if !ctx.json {
            for t in &plan.transitions {
                out!("{}", crate::redact::one_line(&t.summary));
            }
        }
        0
    } else {
        ctx.apply(store, &plan)?
    };
    if ctx.json {
        let ts: Vec<_> = plan
            .transitions
            .iter()
            .map(super::transition_json)
            .collect();
        super::print_answer(json!({
            "dry_run": args.dry_run,
            "older_than": age.to_string(),
            "commits": n,
            "transitions": ts,
        }));
    } else if plan.transitions.is_empty() {
        ctx.status(&format!(
            "coord: nothing finished {age} ago or earlier to archive"
        ));
    }
    Ok(())
}
