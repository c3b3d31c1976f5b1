//! `coord log [<id>]`: transitions read back from commit trailers, newest first.

use super::Ctx;
use crate::engine::commands::CommandError;
use crate::model::TaskId;
use crate::redact::one_line;
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
    let limit = limit.unwrap_or(usize::MAX);
    let entries: Vec<_> = store
        .repo
        .log(None)?
        .into_iter()
        .filter_map(|c| {
            let get = |k: &str| {
                c.trailers
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let subject = get("Coord-Task").or_else(|| get("Coord-Agent"))?;
            if id.is_some_and(|id| id.as_str() != subject) {
                return None;
            }
            Some(json!({
                "commit": c.oid,
                "time": c.time.to_string(),
                "task": subject,
                "from": get("Coord-From"),
                "to": get("Coord-To"),
                "op": get("Coord-Op"),
                "summary": one_line(c.summary.strip_prefix("coord: ").unwrap_or(&c.summary)),
            }))
        })
        .take(limit)
        .collect();
    if let Some(id) = id.filter(|_| entries.is_empty()) {
        let (board, _) = store.load()?;
        if board.find(id).is_empty() {
            return Err(CommandError::NotFound(id.clone()).into());
        }
    }
    Ok(entries)
}
