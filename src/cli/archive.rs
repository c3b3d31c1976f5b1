//! `coord archive [--older-than 7d] [--dry-run]`: calls [`crate::ops::Coord::archive`] and
//! prints what moved (or would move).

use super::Ctx;
use crate::error::CliError;
use crate::model::Duration;
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
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let age = args.older_than.map(|d| Duration::from_secs(d.ceil_secs()));
    let done = ctx.coord()?.archive(age, args.dry_run)?;
    for line in &done.left {
        ctx.status(&format!("coord: {line}"));
    }
    if args.dry_run && !ctx.json {
        for t in &done.planned {
            out!("{}", t.summary);
        }
    }
    if ctx.json {
        super::print_answer(json!({
            "dry_run": args.dry_run,
            "older_than": done.age.to_string(),
            "commits": done.archived,
            "transitions": done.planned,
        }));
    } else if done.planned.is_empty() {
        ctx.status(&format!(
            "coord: nothing finished {} ago or earlier to archive",
            done.age
        ));
    }
    Ok(())
}
