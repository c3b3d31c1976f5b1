//! `coord init`: the work layout with `.gitkeep`s, the schema, an example coord.yaml, the
//! GitHub Actions workflow and agent profiles, committed in one commit.

use super::Ctx;
use crate::engine::{Op, Transition};
use crate::git::Repo;
use crate::model::{AgentName, State};
use crate::store::Store;
use anyhow::{Context, Result};
use std::path::Path;

/// Arguments of `coord init`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Agents to create profiles for, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub agents: Vec<AgentName>,
}

/// The workflow `coord init` writes as `.github/workflows/coord.yml`.
pub const WORKFLOW: &str = include_str!("../../templates/coord-workflow.yml");

/// The example `coord.yaml`.
pub const EXAMPLE_CONFIG: &str = "\
# coord configuration; every key is optional and shows its default.
work_dir: work
defaults: {timeout: 30m, max_attempts: 3, priority: normal}
backoff: {base: 1m, max: 1h}
circuit_breaker: {failure_threshold: 5, open_for: 10m}
max_handoffs: 10
archive_after: 7d
require_signed_results: false
commit: {author: \"coord <coord@localhost>\"}
# rules:                          # conditional routing after success
#   - when: {agent: research, output_contains: competitor}
#     then: competitive-analysis
";

/// Runs `coord init`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    std::fs::create_dir_all(&ctx.dir)
        .with_context(|| format!("cannot create {}", ctx.dir.display()))?;
    Repo::open_or_init(&ctx.dir)?;
    let (store, _lock) = ctx.session(crate::model::Duration::from_secs(0))?;
    let ops = missing_files(&store, &args.agents);
    if ops.is_empty() {
        ctx.status("coord: already initialized; nothing to do");
        return Ok(());
    }
    let t = Transition {
        subject: "init".to_string(),
        from: "new".to_string(),
        to: "initialized".to_string(),
        summary: "init: work layout, schema, config and workflow".to_string(),
        ops,
        guard: Vec::new(),
    };
    ctx.apply(&store, &crate::engine::Plan::one(t))?;
    ctx.status(&format!("coord: initialized {}", store.root().display()));
    Ok(())
}

/// Returns a write op for every file of the layout that does not exist yet.
pub fn missing_files(store: &Store, agents: &[AgentName]) -> Vec<Op> {
    let wd = store.work_dir().to_string();
    let mut files: Vec<(String, String)> = State::ALL
        .iter()
        .filter(|s| **s != State::Archived)
        .map(|s| (format!("{wd}/{}/.gitkeep", s.as_str()), String::new()))
        .collect();
    files.push((format!("{wd}/archive/.gitkeep"), String::new()));
    files.push((format!("{wd}/agents/.gitkeep"), String::new()));
    files.push((
        "schemas/task.schema.json".into(),
        crate::schema::TASK_SCHEMA.into(),
    ));
    files.push(("coord.yaml".into(), EXAMPLE_CONFIG.into()));
    files.push((".github/workflows/coord.yml".into(), WORKFLOW.into()));
    for a in agents {
        files.push((
            format!("{wd}/agents/{a}.yaml"),
            "capabilities: []\nmax_active: 1\n".into(),
        ));
    }
    files
        .into_iter()
        .filter(|(p, _)| !exists(&store.abs(p)))
        .map(|(path, text)| Op::Write { path, text })
        .collect()
}

fn exists(p: &Path) -> bool {
    p.symlink_metadata().is_ok()
}
