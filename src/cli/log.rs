//! `coord log [<id>]`: prints [`crate::ops::Coord::log`], newest first.

use super::Ctx;
use crate::model::TaskId;
use anyhow::Result;
use serde_json::json;

/// Arguments of `coord log`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this task's transitions
    id: Option<TaskId>,
    /// Show at most N transitions
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

impl Args {
    /// Returns the arguments for the whole log.
    pub fn all() -> Args {
        Args {
            id: None,
            limit: None,
        }
    }
}

/// Runs `coord log`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let entries = ctx.coord()?.log(args.id.as_ref(), args.limit)?;
    if ctx.json {
        super::print_answer(json!({ "entries": entries }));
        return Ok(());
    }
    for e in entries {
        out!(
            "{}  {:<9} -> {:<9} {}",
            e.time,
            e.from.as_deref().unwrap_or("?"),
            e.to.as_deref().unwrap_or("?"),
            e.summary
        );
    }
    Ok(())
}
