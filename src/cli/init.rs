//! `coord init`: calls [`crate::ops::init`] (the layout, schema, coord.yaml, workflow and
//! profiles in one commit; an existing `work/` adopted as it is), says what it did and what
//! to do next.

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
    /// Leave out the GitHub Actions workflow (.github/workflows/coord.yml)
    #[arg(long)]
    pub no_workflow: bool,
}

/// Runs `coord init`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let setup = crate::ops::Setup {
        agents: &args.agents,
        no_workflow: args.no_workflow,
    };
    let done = crate::ops::init(&ctx.dir, setup, ctx.options(), ctx.sink())?;
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
    if !done.added.is_empty() {
        ctx.status(&next_steps(&args, &done));
    }
    Ok(())
}

/// The commands a newcomer runs next, as a few lines for stderr.
fn next_steps(args: &Args, done: &Initialized) -> String {
    let mut steps: Vec<(String, String)> = Vec::new();
    let agent = match args.agents.first() {
        Some(a) => a.to_string(),
        None => {
            steps.push((
                "coord agents add alice".into(),
                format!("an agent: a profile in {}/agents/", done.work_dir),
            ));
            "alice".to_string()
        }
    };
    steps.push((
        format!("coord new \"First task\" --agent {agent}"),
        format!("a task file in {}/inbox/, committed", done.work_dir),
    ));
    steps.push((
        "coord tick".into(),
        "assigns it (coord watch keeps ticking)".into(),
    ));
    steps.push(("coord status".into(), "the board".into()));
    if done.added.iter().any(|f| f.starts_with(".github/")) {
        steps.push((
            "git push".into(),
            "the workflow in .github/workflows/ ticks every 15 minutes".into(),
        ));
    }
    let width = steps.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut lines = vec!["coord: next steps:".to_string()];
    lines.extend(
        steps
            .iter()
            .map(|(c, why)| format!("  {c:width$}  # {why}")),
    );
    lines.push("coord: guide: https://github.com/coord-dev/coord/blob/main/docs/guide.md".into());
    lines.join("\n")
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
