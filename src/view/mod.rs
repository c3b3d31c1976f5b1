//! What front ends show, as JSON: the board ([`board`]), one task's copies, the agents with
//! their load, and why invalid tasks are invalid. The command line prints these (`show`,
//! `agents`, `status`); `coord serve` answers with them. Reads the store; writes nothing.

pub mod board;

use crate::board::{Board, TaskFile};
use crate::engine::commands::CommandError;
use crate::model::metrics::Totals;
use crate::model::{AgentName, AssignMode, Circuit, State, TaskId};
use crate::redact::{one_line, redact_value};
use crate::store::Store;
use serde_json::Value;
use std::collections::BTreeMap;

/// Returns the entity a character stands as in HTML when HTML would read it as markup (`&`,
/// `<`, `>`, and the quotes that end an attribute value); None for any other character.
/// The board's pages and `status --markdown` escape text with it.
pub fn html_entity(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        '\'' => Some("&#39;"),
        _ => None,
    }
}

/// Returns every copy of a task (one, unless the id is duplicated) as `coord show --json`
/// prints it. Errs with `NotFound` when no file has the id.
pub fn task_view(board: &Board, id: &TaskId) -> Result<TaskView, CommandError> {
    let mut copies = board.find(id).into_iter().map(task_copy);
    let first = copies
        .next()
        .ok_or_else(|| CommandError::NotFound(id.clone()))?;
    Ok(TaskView {
        copy: first,
        other_copies: copies.collect(),
    })
}

/// One task as `coord show --json`, `GET /v1/tasks/{id}` and the MCP `show` tool answer it:
/// its first copy, and the others when the id is in several places.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct TaskView {
    /// The first copy.
    #[serde(flatten)]
    pub copy: TaskCopy,
    /// The other copies, when the id is in several places (`coord doctor` says which to keep).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_copies: Vec<TaskCopy>,
}

impl TaskView {
    /// Returns every copy, the first first.
    pub fn copies(&self) -> impl Iterator<Item = &TaskCopy> {
        std::iter::once(&self.copy).chain(&self.other_copies)
    }
}

/// One file of a task: where it is, and its fields (secrets redacted) or why it does not
/// read.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct TaskCopy {
    /// The task.
    pub id: TaskId,
    /// The state its folder stands for.
    pub state: State,
    /// The agent whose folder holds it; null outside `assigned/`.
    pub agent: Option<AgentName>,
    /// The file, relative to the repository.
    pub path: String,
    /// The file's fields, secrets redacted (with `result` and the `coord` block); absent when
    /// it does not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub task: Option<Value>,
    /// The totals of its results' `metrics`; absent when the file does not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spent: Option<Totals>,
    /// Why the file does not read (instead of `task`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
}

impl TaskCopy {
    /// Returns the field at `pointer` (`/coord/lease_expires_at`) of the task; null when the
    /// file does not read or has no such field.
    pub fn field(&self, pointer: &str) -> &Value {
        self.task
            .as_ref()
            .and_then(|t| t.pointer(pointer))
            .unwrap_or(&Value::Null)
    }
}

/// Returns one task file as `coord show --json` prints it.
pub fn task_copy(f: &TaskFile) -> TaskCopy {
    let mut copy = TaskCopy {
        id: f.id.clone(),
        state: f.folder.state,
        agent: f.folder.agent.clone(),
        path: f.path.clone(),
        task: None,
        spent: None,
        errors: None,
    };
    match &f.read {
        Ok(task) => {
            copy.task = Some(task.peek(|d| redact_value(&d.doc.value)));
            copy.spent = Some(Totals::of(&task.summary().spent));
        }
        Err(errors) => copy.errors = Some(errors.iter().map(|v| v.render(&f.path)).collect()),
    }
    copy
}

/// One agent as `coord agents` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct AgentRow {
    /// The agent.
    pub name: AgentName,
    /// What it can do.
    pub capabilities: Vec<String>,
    /// The tasks in its folder.
    pub active: usize,
    /// How many it may hold at once.
    pub max_active: u32,
    /// Whether it gets work.
    pub enabled: bool,
    /// How it gets work: `push` (the tick assigns) or `pull` (`coord claim`).
    pub assign: AssignMode,
    /// Its circuit breaker.
    pub circuit: Circuit,
    /// Why its profile does not read; null when it does.
    pub error: Option<String>,
}

/// Returns each agent with its capabilities, load, limit, assignment mode, circuit and the
/// error of a profile that does not read (`coord agents --json`).
pub fn agents(board: &Board) -> Vec<AgentRow> {
    board
        .agents
        .values()
        .map(|a| AgentRow {
            name: a.name.clone(),
            capabilities: a.profile.capabilities.clone(),
            active: board.load_of(&a.name),
            max_active: a.profile.max_active,
            enabled: a.profile.enabled,
            assign: a.profile.assign,
            circuit: a.profile.coord.circuit,
            error: a.error.as_ref().map(|e| e.message.clone()),
        })
        .collect()
}

/// Returns the first line of each invalid task's `.errors` file, by id.
pub fn invalid_reasons(store: &Store, board: &Board) -> BTreeMap<String, String> {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Invalid)
        .map(|t| {
            let errors = store
                .read_file(&format!("{}.errors", t.path), 64 * 1024)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let first = errors
                .lines()
                .next()
                .unwrap_or("no .errors file")
                .to_string();
            (t.id.to_string(), one_line(&first))
        })
        .collect()
}
