//! `coord log [<id>]`: transitions read back from commit trailers, newest first.

use super::Ctx;
use crate::model::TaskId;
use anyhow::Result;
use serde_json::{json, Value};

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
    let entries = entries(ctx, args.id.as_ref(), args.limit)?;
    if ctx.json {
        super::print_json(&json!(entries));
        return Ok(());
    }
    for e in entries {
        out!(
            "{}  {:<9} -> {:<9} {}",
            e["time"].as_str().unwrap_or_default(),
            e["from"].as_str().unwrap_or("?"),
            e["to"].as_str().unwrap_or("?"),
            e["summary"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}

/// Returns the transitions (of task `id`, when given), newest first, at most `limit`, as
/// `coord log --json` prints them.
pub fn entries(ctx: &Ctx, id: Option<&TaskId>, limit: Option<usize>) -> Result<Vec<Value>> {
    let store = ctx.store()?;
    crate::view::log(&store, id, limit.unwrap_or(usize::MAX)).map_err(|e| anyhow::anyhow!(e))
}
