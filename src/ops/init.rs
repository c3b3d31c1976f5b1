//! `init`: the work layout with `.gitkeep`s and `work/.gitignore`, the schema, an example
//! coord.yaml, the GitHub Actions workflow and agent profiles, committed in one commit. A
//! `work/` that is already there is adopted as it is: init says what it found and only adds
//! what is missing.

use super::{Coord, Error, Event, Options, Sink};
use crate::engine::{Op, Plan, Transition};
use crate::git::Repo;
use crate::model::{AgentName, Endpoint, State};
use crate::store::{Origin, Store};
use std::path::{Path, PathBuf};

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

/// What `init` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initialized {
    /// The repository's root.
    pub root: PathBuf,
    /// The work folder, repo-relative.
    pub work_dir: String,
    /// Whether a work folder was there already (and was adopted as it is).
    pub existed: bool,
    /// The files it added and committed (none: it was initialized already).
    pub added: Vec<String>,
    /// The commits it made.
    pub commits: usize,
}

/// Initializes (or adopts) the repository at `dir`, creating the folder and the git
/// repository when needed, with a profile for each of `agents`. Says what an existing work
/// folder holds as a status event before it commits.
pub fn init(
    dir: &Path,
    agents: &[AgentName],
    opts: Options,
    sink: Sink,
) -> Result<Initialized, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        what: "create",
        path: dir.display().to_string(),
        source,
    })?;
    Repo::open_or_init(dir)?;
    let coord = Coord::open(dir, opts)?.with_sink(sink);
    let _lock = coord.session(std::time::Duration::ZERO)?;
    let store = coord.store();
    let existed = store.abs(store.work_dir()).is_dir();
    if existed {
        coord.emit(Event::Status(&found(store)?));
    }
    let ops = missing_files(store, agents);
    let added = ops
        .iter()
        .filter_map(|op| match op {
            Op::Write { path, .. } => Some(path.clone()),
            _ => None,
        })
        .collect();
    let mut commits = 0;
    if !ops.is_empty() {
        let t = Transition {
            subject: "init".to_string(),
            from: Endpoint::New,
            to: Endpoint::Initialized,
            summary: "init: work layout, schema, config and workflow".to_string(),
            ops,
            guard: Vec::new(),
            op: None,
        };
        commits = coord.apply(&Plan::one(t), Origin::Command)?;
    }
    Ok(Initialized {
        root: store.root().to_path_buf(),
        work_dir: store.work_dir().to_string(),
        existed,
        added,
        commits,
    })
}

/// Describes an existing work folder: its task files per state and its agents.
fn found(store: &Store) -> Result<String, Error> {
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

/// Returns a write op for every file of the layout that does not exist yet.
fn missing_files(store: &Store, agents: &[AgentName]) -> Vec<Op> {
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
