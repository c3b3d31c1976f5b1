//! `import`: brings the tasks of another tracker (beads, Backlog.md, Taskmaster, GitHub
//! issues) into `work/` in one commit. Each source item keeps its key as the task's
//! `idempotency_key` (`<source>:<key>`) and gets a coord id derived from the key alone, so a
//! second import of the same source finds every task again and writes nothing; an item whose
//! fields changed in the source since is reported, never written over (the task may have
//! moved on in coord). Open items go to `inbox/` (the next tick takes them in), finished ones
//! straight to `done/` or `cancelled/`. Reading the sources is pure (`beads`, `backlog`,
//! `taskmaster`, `github`); writing goes through the store like `new`.

mod backlog;
mod beads;
mod github;
mod taskmaster;

use super::{Coord, Error, AGENT_WAIT};
use crate::board::Board;
use crate::engine::{Op, OpKind, Operation, Plan, Transition};
use crate::model::{Endpoint, Priority, State, TaskId};
use crate::store::{Origin, Session};
use crate::yaml::emit_block;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The trackers `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// beads (`br`/`bd`): `.beads/issues.jsonl`.
    Beads,
    /// Backlog.md: `backlog/tasks/*.md`.
    Backlog,
    /// Taskmaster: `.taskmaster/tasks/tasks.json` or `tasks.json`.
    Taskmaster,
    /// GitHub issues: the JSON `gh issue list --json ...` prints.
    Github,
}

impl Source {
    /// Returns the source's name, as in `idempotency_key` and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Beads => "beads",
            Source::Backlog => "backlog",
            Source::Taskmaster => "taskmaster",
            Source::Github => "github",
        }
    }
}

/// Where an item stands in its source, as coord reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Not started: the task goes to `inbox/`.
    Open,
    /// Started in the source: the task goes to `inbox/` too, unassigned.
    Started,
    /// Finished: `done/`.
    Done,
    /// Closed without being done: `cancelled/`.
    Cancelled,
}

impl Stage {
    fn state(self) -> State {
        match self {
            Stage::Open | Stage::Started => State::Inbox,
            Stage::Done => State::Done,
            Stage::Cancelled => State::Cancelled,
        }
    }
}

/// One task as a source holds it, in coord's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The source's own id (`bd-a1b`, `TASK-3`, `2.1`, `17`).
    pub key: String,
    /// The coord id the key maps to.
    pub id: TaskId,
    /// The title.
    pub title: String,
    /// Longer text.
    pub description: Option<String>,
    /// Labels.
    pub labels: Vec<String>,
    /// The priority, when the source gives one.
    pub priority: Option<Priority>,
    /// The source keys this item waits for.
    pub depends_on: Vec<String>,
    /// Where it stands.
    pub stage: Stage,
}

/// Why a source could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file or folder could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Nothing at the path looks like the source's files.
    #[error("{path}: no {what} found here; give the project folder or the file itself")]
    NotFound {
        /// The path given.
        path: PathBuf,
        /// What was looked for.
        what: &'static str,
    },
    /// A file does not read as the source writes it.
    #[error("{path}:{line}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The line (1 for a whole-file problem).
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Reads the items of `source` from `path`: the project folder the tool works in, or its
/// file (for GitHub: a file of `gh issue list --json` output).
pub fn read(source: Source, path: &Path) -> Result<Vec<Item>, ImportError> {
    match source {
        Source::Beads => beads::read(path),
        Source::Backlog => backlog::read(path),
        Source::Taskmaster => taskmaster::read(path),
        Source::Github => github::parse(&read_text(path)?, &path.display().to_string()),
    }
}

/// Reads the items of `gh issue list --json` output given as text (stdin), `name` naming it
/// in errors.
pub fn read_github(text: &str, name: &str) -> Result<Vec<Item>, ImportError> {
    github::parse(text, name)
}

fn read_text(path: &Path) -> Result<String, ImportError> {
    std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Returns `prefix` then `key` made into a task id: characters an id cannot hold become '-',
/// '..' becomes '.', at most 128 characters.
fn make_id(prefix: &str, key: &str) -> Result<TaskId, String> {
    let mut s = String::from(prefix);
    for c in key.chars() {
        let c = match c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            true => c,
            false => '-',
        };
        if !(c == '.' && s.ends_with('.')) {
            s.push(c);
        }
    }
    let s = s.trim_start_matches(['.', '_', '-']);
    let s: String = s.chars().take(128).collect();
    TaskId::new(&s).map_err(|e| format!("id {key:?} cannot be a task id ({e})"))
}

/// Returns the labels coord can keep: 1 to 100 characters, each once.
fn labels(all: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in all {
        let l = l.trim().to_string();
        if !l.is_empty() && l.chars().count() <= 100 && !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// Returns the priority a word names (`critical`, `high`, `medium`/`normal`, `low`), if any.
fn priority_word(word: &str) -> Option<Priority> {
    match word.trim().to_ascii_lowercase().as_str() {
        "critical" | "urgent" => Some(Priority::Critical),
        "high" => Some(Priority::High),
        "medium" | "normal" => Some(Priority::Normal),
        "low" => Some(Priority::Low),
        _ => None,
    }
}

/// Returns `Some(text)` when it has more than white space.
fn non_empty(text: Option<&str>) -> Option<String> {
    text.map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// What happened to one item.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Written (or, in a dry run, would be).
    Created,
    /// A task of this key is there with the same fields.
    Unchanged,
    /// A task of this key is there with other fields; left as it is.
    Changed,
}

/// One item and what became of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportedTask {
    /// The source's key.
    pub key: String,
    /// The coord id.
    pub id: TaskId,
    /// The state it was written in (or is in, for a task there already).
    pub state: String,
    /// What happened.
    pub outcome: Outcome,
    /// The file, repo-relative.
    pub path: String,
}

/// What `import` did (or, with `dry_run`, would do).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Imported {
    /// The source.
    pub source: Source,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Every item, in source order.
    pub tasks: Vec<ImportedTask>,
    /// What was kept back and why (dependencies left out, started items left unassigned).
    pub notes: Vec<String>,
    /// Whether a commit was made.
    pub committed: bool,
}

impl Imported {
    /// Returns how many items had `outcome`.
    pub fn count(&self, outcome: &Outcome) -> usize {
        self.tasks.iter().filter(|t| t.outcome == *outcome).count()
    }
}

impl Coord {
    /// Writes the items not yet imported into `work/` in one commit (none with `dry_run`)
    /// and reports every item.
    pub fn import(&self, source: Source, items: &[Item], dry_run: bool) -> Result<Imported, Error> {
        // A dry run reads the board as it is: no lock, nobody's changes recorded.
        let session = match dry_run {
            true => self.read(),
            false => self.session(AGENT_WAIT)?,
        };
        let (board, _) = session.load()?;
        let mut imported = Imported {
            source,
            dry_run,
            tasks: Vec::new(),
            notes: Vec::new(),
            committed: false,
        };
        one_task_per_item(source, items)?;
        let mut writes = Vec::new();
        for item in items {
            let (task, write) =
                self.import_item(&board, source, items, item, &mut imported.notes)?;
            imported.tasks.push(task);
            writes.extend(write);
        }
        if !dry_run && !writes.is_empty() {
            self.write_import(&session, source, &imported, writes)?;
            imported.committed = true;
        }
        session.finish()?;
        Ok(imported)
    }

    /// Returns what becomes of one item, and the file to write when it is new.
    fn import_item(
        &self,
        board: &Board,
        source: Source,
        items: &[Item],
        item: &Item,
        notes: &mut Vec<String>,
    ) -> Result<(ImportedTask, Option<Op>), Error> {
        let key = format!("{}:{}", source.as_str(), item.key);
        let deps = known_deps(board, items, item, notes);
        let fields = task_fields(item, &deps, &key);
        if let Some(t) = existing(board, &item.id, &key) {
            if t.read
                .as_ref()
                .is_ok_and(|d| d.summary().idempotency_key.as_deref() != Some(key.as_str()))
            {
                return Err(Error::Refused(format!(
                    "task '{}' is there already and was not imported from {key}; give it another id, then import again; nothing was written",
                    t.id
                )));
            }
            let same = t
                .read
                .as_ref()
                .is_ok_and(|d| fields.iter().all(|(k, v)| d.doc.value.get(*k) == Some(v)));
            let outcome = match same {
                true => Outcome::Unchanged,
                false => Outcome::Changed,
            };
            let task = ImportedTask {
                key: item.key.clone(),
                id: t.id.clone(),
                state: t.folder.state.as_str().to_string(),
                outcome,
                path: t.path.clone(),
            };
            return Ok((task, None));
        }
        if item.stage == Stage::Started {
            notes.push(format!(
                "{} ({}) was in progress in {}: it goes to the inbox unassigned",
                item.id,
                item.key,
                source.as_str()
            ));
        }
        let state = item.stage.state();
        let path = format!(
            "{}/{}/{}.yaml",
            self.store.work_dir(),
            state.as_str(),
            item.id
        );
        if std::fs::symlink_metadata(self.store.root().join(&path)).is_ok() {
            return Err(Error::Refused(format!(
                "{path} is there already (for {}); commit or move it, then import again; nothing was written",
                item.key
            )));
        }
        let mut text: String = fields.iter().map(|(k, v)| emit_block(k, v, 0)).collect();
        if state != State::Inbox {
            text.push_str(&emit_block("coord", &finished_block(state, self.now), 0));
        }
        self.check_import_text(&item.id, &text)?;
        let task = ImportedTask {
            key: item.key.clone(),
            id: item.id.clone(),
            state: state.as_str().to_string(),
            outcome: Outcome::Created,
            path: path.clone(),
        };
        Ok((task, Some(Op::Write { path, text })))
    }

    /// Commits the new files of an import in one commit.
    fn write_import(
        &self,
        session: &Session<'_>,
        source: Source,
        imported: &Imported,
        ops: Vec<Op>,
    ) -> Result<(), Error> {
        let n = ops.len();
        let first = imported
            .tasks
            .iter()
            .find(|t| t.outcome == Outcome::Created)
            .map(|t| t.id.to_string())
            .unwrap_or_default();
        let t = Transition {
            subject: first,
            from: Endpoint::New,
            to: State::Inbox.into(),
            summary: format!("import {n} tasks from {}", source.as_str()),
            ops,
            guard: Vec::new(),
            op: Some(Operation::of(OpKind::New)),
        };
        let silent: super::Sink = Box::new(|_| {});
        super::apply(session, &silent, &Plan::one(t), self.now, Origin::Command)?;
        match session.first_skipped() {
            Some((path, why)) => Err(Error::Unchanged { path, why }),
            None => Ok(()),
        }
    }

    /// Refuses a task file the schema would reject (nothing is written then).
    fn check_import_text(&self, id: &TaskId, text: &str) -> Result<(), Error> {
        let limits = crate::yaml::Limits::default();
        let schema = self.store.task_schema();
        crate::check::read_task(id.as_str(), text.as_bytes(), schema, &limits)
            .map(drop)
            .map_err(|errors| {
                let lines: Vec<String> = errors.iter().map(|v| v.message.clone()).collect();
                Error::Refused(format!(
                    "task '{id}' would be invalid: {}; nothing was written",
                    lines.join("; ")
                ))
            })
    }
}

/// Refuses an import in which two items become one task id.
fn one_task_per_item(source: Source, items: &[Item]) -> Result<(), Error> {
    let mut seen: std::collections::HashMap<&TaskId, &str> = std::collections::HashMap::new();
    for item in items {
        if let Some(first) = seen.insert(&item.id, &item.key) {
            return Err(Error::Refused(format!(
                "items {first:?} and {:?} of {} both become task '{}'; nothing was written",
                item.key,
                source.as_str(),
                item.id
            )));
        }
    }
    Ok(())
}

/// Returns the task holding `key` as its idempotency key, else the task of id `id`.
fn existing<'b>(board: &'b Board, id: &TaskId, key: &str) -> Option<&'b crate::board::TaskFile> {
    board
        .tasks
        .iter()
        .find(|t| {
            t.read
                .as_ref()
                .is_ok_and(|d| d.summary().idempotency_key.as_deref() == Some(key))
        })
        .or_else(|| board.find(id).into_iter().next())
}

/// Returns the coord ids of the item's dependencies that are in the import or on the board;
/// notes the others, which are left out.
fn known_deps(board: &Board, items: &[Item], item: &Item, notes: &mut Vec<String>) -> Vec<TaskId> {
    let mut out = Vec::new();
    for dep in &item.depends_on {
        match items.iter().find(|i| &i.key == dep) {
            Some(i) if !out.contains(&i.id) => out.push(i.id.clone()),
            Some(_) => {}
            None => match TaskId::new(dep)
                .ok()
                .filter(|id| !board.find(id).is_empty())
            {
                Some(id) => out.push(id),
                None => notes.push(format!(
                    "{} ({}): dependency {dep} is not in the import; left out",
                    item.id, item.key
                )),
            },
        }
    }
    out
}

/// Returns the fields of the task file, in order.
fn task_fields(item: &Item, deps: &[TaskId], key: &str) -> Vec<(&'static str, Value)> {
    let mut fields: Vec<(&str, Value)> = vec![("title", json!(item.title))];
    if let Some(d) = &item.description {
        fields.push(("description", json!(d)));
    }
    if let Some(p) = item.priority {
        fields.push(("priority", json!(p)));
    }
    if !deps.is_empty() {
        fields.push(("depends_on", json!(deps)));
    }
    if !item.labels.is_empty() {
        fields.push(("labels", json!(item.labels)));
    }
    fields.push(("idempotency_key", json!(key)));
    fields
}

/// Returns the `coord:` block of a task imported as finished.
fn finished_block(state: State, now: jiff::Timestamp) -> Value {
    json!({
        "state": state.as_str(),
        "attempt": 0,
        "created_at": crate::model::time::format(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_ids() {
        assert_eq!(make_id("", "bd-a1b").expect("id").as_str(), "bd-a1b");
        assert_eq!(make_id("tm-", "2.1").expect("id").as_str(), "tm-2.1");
        assert_eq!(
            make_id("", "TASK 3/x..y").expect("id").as_str(),
            "TASK-3-x.y"
        );
        assert!(make_id("", "").is_err());
    }

    #[test]
    fn labels_are_trimmed_and_kept_once() {
        let got = labels(["a".into(), " a ".into(), String::new(), "x".repeat(101)]);
        assert_eq!(got, vec!["a".to_string()]);
    }
}
