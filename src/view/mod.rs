//! What front ends show, as JSON: the board ([`board`]), one task's copies, the agents with
//! their load, and why invalid tasks are invalid. The command line prints these (`show`,
//! `agents`, `status`); `coord serve` answers with them. Reads the store; writes nothing.

pub mod board;

use crate::board::{Board, TaskFile};
use crate::engine::commands::CommandError;
use crate::model::{AgentName, AssignMode, Circuit, State, TaskId};
use crate::redact::{one_line, redact_value};
use crate::store::Store;
use serde_json::{json, Value};
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
/// prints each: id, state, agent, path and the task (secrets redacted), or the errors of a
/// file that does not read. Errs with `NotFound` when no file has the id.
pub fn task_copies(board: &Board, id: &TaskId) -> Result<Vec<Value>, CommandError> {
    let files = board.find(id);
    if files.is_empty() {
        return Err(CommandError::NotFound(id.clone()));
    }
    Ok(files.into_iter().map(task_copy).collect())
}

/// Returns one task file as `coord show --json` prints it.
pub fn task_copy(f: &TaskFile) -> Value {
    match &f.read {
        Ok(task) => json!({
            "id": f.id, "state": f.folder.state.as_str(), "agent": f.folder.agent, "path": f.path,
            "task": task.peek(|d| redact_value(&d.doc.value)),
            "spent": crate::model::metrics::Totals::of(&task.summary().spent),
        }),
        Err(errors) => json!({
            "id": f.id, "state": f.folder.state.as_str(), "path": f.path,
            "errors": errors.iter().map(|v| v.render(&f.path)).collect::<Vec<_>>(),
        }),
    }
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
