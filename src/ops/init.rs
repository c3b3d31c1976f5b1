//! `init`: the work layout with `.gitkeep`s and `work/.gitignore`, the schema, an example
//! coord.yaml, the GitHub Actions workflow (unless left out) and agent profiles, committed in
//! one commit. A `work/` that is already there is adopted as it is: init says what it found
//! and only adds what is missing; one holding files the `work/.gitignore` would hide from git
//! is refused.

use super::{Coord, Error, Event, Options, Sink};
use crate::engine::{Op, Plan, Transition};
use crate::git::Repo;
use crate::model::{AgentName, Endpoint, State};
use crate::store::{Origin, Session, Store};
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

/// The example `coord.yaml`: every key of the config schema, set to its default or, for
/// those without one, commented out with an example.
pub const EXAMPLE_CONFIG: &str = "\
# coord configuration; every key is optional. Those set show their default; the commented
# ones are examples (see docs/files.md in the coord repository).
work_dir: work
defaults: {timeout: 30m, max_attempts: 3, priority: normal}
backoff: {base: 1m, max: 1h}
circuit_breaker: {failure_threshold: 5, open_for: 10m}
max_handoffs: 10
archive_after: 7d
gate_interval: 1m
require_signed_results: false
commit: {author: \"coord <coord@localhost>\"}
# settle: 2s                      # read a file once unchanged this long; 0s: at once
# sync: {remote: origin, pushes_per_minute: 6}  # claim, complete, fail and run push through
#                                 # this remote; status warns near its push budget
# hub:                            # a fleet's hub (docs/fleet.md)
#   url: https://hub.example.com  # claim, complete, fail, heartbeat, new and run in this
#                                 # folder ask this coord serve instead
#   remote: origin                # coord serve --hub pushes in batches to this remote
#   pushes_per_minute: 6          # under a lease renewed on it
#   lease: 1m
# run: {worktree: true, worktree_base: main, keep_failed_worktrees: true}  # coord run --worktree
# webhooks:                       # POST every event, signed (docs/webhooks.md)
#   ops:
#     url: https://hooks.example.com/coord
#     events: [dead_letter, lease_lost, done]   # kinds or end states; default: all
#     secret_env: OPS_HOOK_SECRET  # the variable holding the secret, never the secret
#     max_attempts: 8              # failed tries before the event's dead letter
#     retry: {base: 1s, max: 5m}   # exponential backoff with jitter
#     timeout: 10s                 # per request
# rules:                          # conditional routing after success
#   - when: {agent: research, output_contains: competitor}
#     then: competitive-analysis
";

/// What `coord init` sets up besides the layout, the schema and coord.yaml.
#[derive(Debug, Clone, Copy, Default)]
pub struct Setup<'a> {
    /// Agents to create profiles for.
    pub agents: &'a [AgentName],
    /// Leaves out `.github/workflows/coord.yml`.
    pub no_workflow: bool,
}

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
/// repository when needed, with what `setup` asks for. Says what an existing work folder
/// holds as a status event before it commits; refuses one whose files the `work/.gitignore`
/// it would write hides from git.
pub fn init(dir: &Path, setup: Setup<'_>, opts: Options, sink: Sink) -> Result<Initialized, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        what: "create",
        path: dir.display().to_string(),
        source,
    })?;
    Repo::open_or_init(dir)?;
    let coord = Coord::open(dir, opts)?.with_sink(sink);
    let session = coord.session(std::time::Duration::ZERO)?;
    let store: &Session<'_> = &session;
    let existed = store.abs(store.work_dir()).is_dir();
    if existed {
        refuse_hidden_files(store)?;
        coord.emit(Event::Status(&found(store)?));
    }
    let ops = missing_files(store, setup);
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
        commits = super::apply(
            store,
            &coord.sink,
            &Plan::one(t),
            coord.now,
            Origin::Command,
        )?;
    }
    let initialized = Initialized {
        root: store.root().to_path_buf(),
        work_dir: store.work_dir().to_string(),
        existed,
        added,
        commits,
    };
    session.finish()?;
    Ok(initialized)
}

/// Describes an existing work folder: its task files per state and its agents.
fn found(store: &Session<'_>) -> Result<String, Error> {
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

/// Refuses a work folder without a `.gitignore` that holds files the one init writes would
/// hide from git (a folder of the same name that is not coord's), naming some of them.
fn refuse_hidden_files(store: &Store) -> Result<(), Error> {
    let work = store.abs(store.work_dir());
    if exists(&work.join(".gitignore")) {
        return Ok(());
    }
    let mut hidden = Vec::new();
    hidden_files(&work, &mut hidden);
    if hidden.is_empty() {
        return Ok(());
    }
    hidden.sort();
    let wd = store.work_dir();
    let named: Vec<String> = hidden
        .iter()
        .take(3)
        .map(|p| format!("{wd}/{}", p.display()))
        .collect();
    let more = if hidden.len() > 3 { ", ..." } else { "" };
    Err(Error::Refused(format!(
        "{wd}/ holds files that are not coord's ({}{more}), which the {wd}/.gitignore init \
         writes would hide from git; give coord another folder (`work_dir: tasks` in \
         coord.yaml) and run coord init again",
        named.join(", ")
    )))
}

/// Collects, relative to `root`, the files under it that [`WORK_GITIGNORE`] ignores (names
/// starting with `.` are left out: coord never reads them).
fn hidden_files(root: &Path, out: &mut Vec<PathBuf>) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if !kept_by_gitignore(&name) {
                out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
}

/// Whether [`WORK_GITIGNORE`] lets git see a file of this name.
fn kept_by_gitignore(name: &str) -> bool {
    [".yaml", ".yml", ".errors"]
        .iter()
        .any(|ext| name.ends_with(ext))
        || name == "README.md"
}

/// Returns a write op for every file of the layout that does not exist yet.
fn missing_files(store: &Store, setup: Setup<'_>) -> Vec<Op> {
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
    if !setup.no_workflow {
        files.push((".github/workflows/coord.yml".into(), WORKFLOW.into()));
    }
    for a in setup.agents {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The example with its commented keys uncommented.
    fn uncommented() -> String {
        EXAMPLE_CONFIG
            .lines()
            .filter(|l| !l.starts_with("# coord") && !l.starts_with("# ones"))
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .map(|l| l.split("  #").next().unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_example_config_names_every_key_of_the_config_schema() {
        let schema: serde_json::Value =
            serde_json::from_str(crate::config::CONFIG_SCHEMA).expect("schema");
        let keys = schema["properties"].as_object().expect("properties");
        let text = uncommented();
        for key in keys.keys() {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{key}:"))),
                "coord.yaml written by init lacks {key}"
            );
        }
    }

    #[test]
    fn the_example_config_with_its_examples_uncommented_passes_the_schema() {
        let doc =
            crate::yaml::parse(&uncommented(), &crate::yaml::Limits::default()).expect("yaml");
        assert_eq!(crate::config::Config::violations(&doc), vec![]);
    }

    #[test]
    fn the_gitignore_keeps_what_coord_reads_and_hides_the_rest() {
        for kept in ["a.yaml", "b.yml", "c.yaml.errors", "README.md"] {
            assert!(kept_by_gitignore(kept), "{kept}");
        }
        for hidden in ["notes.txt", "main.rs", "report.pdf", "a.yaml~"] {
            assert!(!kept_by_gitignore(hidden), "{hidden}");
        }
    }
}
