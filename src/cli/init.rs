//! `coord init`: calls [`crate::ops::init`] (the layout, schema, coord.yaml, workflow and
//! profiles in one commit; an existing `work/` adopted as it is) and says what it did.

use super::Ctx;
use crate::error::CliError;
use crate::model::AgentName;
use crate::ops::Initialized;

/// Arguments of `coord init`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Agents to create profiles for, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub agents: Vec<AgentName>,
}

/// Runs `coord init`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let done = crate::ops::init(&ctx.dir, &args.agents, ctx.options(), ctx.sink())?;
    answer(ctx, &done);
    if done.added.is_empty() {
        ctx.status("coord: already initialized; nothing to do");
    } else if done.existed {
        ctx.status(&format!(
            "coord: adopted {}/; added {}",
            done.work_dir,
            done.added.join(", ")
        ));
    } else {
        ctx.status(&format!("coord: initialized {}", done.root.display()));
    }
    Ok(())
}

/// With `--json`, prints what init did: the repo, whether it adopted a work folder, the files
/// it added and the commits it made.
fn answer(ctx: &Ctx, done: &Initialized) {
    if ctx.json {
        super::print_answer(serde_json::json!({
            "root": done.root,
            "work_dir": done.work_dir,
            "adopted": done.existed,
            "added": done.added,
            "commits": done.commits,
        }));
    }
}
