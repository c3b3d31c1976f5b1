//! `coord init`: the work layout with `.gitkeep`s and `work/.gitignore`, the schema, an example
//! coord.yaml, the GitHub Actions workflow and agent profiles, committed in one commit. A
//! `work/` that is already there is adopted as it is: init says what it found and only adds
//! what is missing.

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

/// The `work/.gitignore` `coord init` writes: git sees only what belongs to the layout.
pub const WORK_GITIGNORE: &str = "\
# Written by coord init. Under work/ git tracks only what coord reads: task files, their
# .errors, agent profiles, README files and the .gitkeeps of empty folders. Editors' swap and
# backup files, notes and other scratch files stay out of the history.
*
!*/
!*.yaml
!*.yml
!*.errors
!README.md
!.gitkeep
!.gitignore
";

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
    let (coord, _lock) = ctx.session(crate::model::Duration::from_secs(0))?;
    let store = coord.store();
    let existed = store.abs(store.work_dir()).is_dir();
    if existed {
        ctx.status(&found(store)?);
    }
    let ops = missing_files(store, &args.agents);
    if ops.is_empty() {
        ctx.status("coord: already initialized; nothing to do");
        answer(ctx, store, existed, &[], 0);
        return Ok(());
    }
    let t = Transition {
        subject: "init".to_string(),
        from: "new".to_string(),
        to: "initialized".to_string(),
        summary: "init: work layout, schema, config and workflow".to_string(),
        ops,
        guard: Vec::new(),
        op: None,
    };
    let added = ops_paths(&t.ops);
    let commits = ctx.apply(store, &crate::engine::Plan::one(t))?;
    answer(ctx, store, existed, &added, commits);
    if existed {
        ctx.status(&format!(
            "coord: adopted {}/; added {}",
            store.work_dir(),
            added.join(", ")
        ));
    } else {
        ctx.status(&format!("coord: initialized {}", store.root().display()));
    }
    Ok(())
}

/// Describes an existing work folder: its task files per state and its agents.
fn found(store: &Store) -> Result<String> {
    let (board, _) = store.load()?;
    let per_state: Vec<String> = State::ALL
        .iter()
        .filter_map(|s| {
            let n = board.tasks.iter().filter(|t| t.folder.state == *s).count();
            (n > 0).then(|| format!("{} {n}", s.as_str()))
        })
        .collect();
    let tasks = if per_state.is_empty() {
        "no task files".to_string()
    } else {
        format!(
            "{} task files ({})",
            board.tasks.len(),
            per_state.join(", ")
        )
    };
    Ok(format!(
        "coord: found {}/ with {tasks} and {} agents; adopting it as it is",
        store.work_dir(),
        board.agents.len()
    ))
}

/// With `--json`, prints what init did: the repo, whether it adopted a work folder, the files
/// it added and the commits it made.
fn answer(ctx: &Ctx, store: &Store, adopted: bool, added: &[String], commits: usize) {
    if ctx.json {
        super::print_answer(serde_json::json!({
            "root": store.root(),
            "work_dir": store.work_dir(),
            "adopted": adopted,
            "added": added,
            "commits": commits,
        }));
    }
}

/// Returns the paths a list of write ops creates.
fn ops_paths(ops: &[Op]) -> Vec<String> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Write { path, .. } => Some(path.clone()),
            _ => None,
        })
        .collect()
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
    files.push((format!("{wd}/.gitignore"), WORK_GITIGNORE.into()));
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
