//! `coord sync`: fetch, bring the branch onto the remote, tick, push; retry on a rejected push.
//! The steps live in [`crate::sync`]; this file turns flags into options and prints the outcome.

use super::Ctx;
use crate::sync::Options;
use anyhow::Result;
use serde_json::json;

/// Arguments of `coord sync`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The remote to fetch from and push to
    #[arg(long, default_value = "origin")]
    remote: String,
    /// The branch to sync (default: the checked-out branch, which it must be)
    #[arg(long)]
    branch: Option<String>,
    /// How many times to fetch, tick and push again after a rejected push
    #[arg(long, default_value_t = 30)]
    max_retries: u32,
}

/// Runs `coord sync`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let opts = Options {
        remote: args.remote,
        branch: args.branch,
        max_retries: args.max_retries,
        wait: ctx.wait.unwrap_or_default(),
        now: ctx.now,
        redo_on_reject: false,
    };
    let report = ctx.coord()?.sync(&opts)?;
    if ctx.json {
        super::print_json(&json!({
            "pushes": report.pushes,
            "rejected": report.rejected,
            "commits": report.commits,
            "dropped": report.dropped,
            "replayed": report.replayed,
        }));
    } else if report.pushes == 0 {
        ctx.status(&format!(
            "coord: {} is up to date; nothing to push",
            opts.remote
        ));
    } else {
        ctx.status(&format!(
            "coord: pushed to {} ({} rejected pushes before)",
            opts.remote, report.rejected
        ));
    }
    Ok(())
}
