//! `coord sync`: fetch, bring the branch onto the remote, tick, push; retry on a rejected push.
//! The steps live in [`crate::sync`]; this file turns flags into options and prints the outcome.

use super::Ctx;
use crate::error::CliError;
use crate::sync::Options;
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
    /// Leave out a person's edit that conflicts with the remote (COMMIT:PATH, as a conflict
    /// message prints it); the remote's version of that file stays. Repeatable
    #[arg(long, value_name = "COMMIT:PATH")]
    drop_edit: Vec<crate::sync::replay::DropEdit>,
    #[command(flatten)]
    deliver: super::webhooks::Deliver,
}

/// Runs `coord sync`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let opts = Options {
        remote: args.remote,
        branch: args.branch,
        max_retries: args.max_retries,
        wait: ctx.wait.unwrap_or_default(),
        now: ctx.now,
        redo_on_reject: false,
        drop_edits: args.drop_edit,
        with_ref: None,
        ticks: crate::sync::Ticks::Redo,
    };
    let once = args.deliver.prepare(ctx, Some(&opts.remote))?;
    let report = ctx.coord()?.sync(&opts)?;
    if ctx.json {
        super::print_answer(json!({
            "pushes": report.pushes,
            "rejected": report.rejected,
            "commits": report.commits,
            "dropped": report.dropped,
            "replayed": report.replayed,
            "lost": report.lost,
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
    args.deliver.deliver(ctx, once)
}
