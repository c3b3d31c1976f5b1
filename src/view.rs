//! What front ends show, as JSON: one task's copies, a task's transitions read back from
//! commit trailers, the agents with their load, and why invalid tasks are invalid. The command
//! line prints these (`show`, `log`, `agents`, `status`); `coord serve` answers with them.
//! Reads the store and the repository; writes nothing.

use crate::board::{Board, TaskFile};
use crate::engine::commands::CommandError;
use crate::git::CommitInfo;
use crate::model::{State, TaskId};
use crate::redact::{one_line, redact_value};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::BTreeMap;

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
        Ok(d) => json!({
            "id": f.id, "state": f.folder.state.as_str(), "agent": f.folder.agent, "path": f.path,
            "task": redact_value(&d.doc.value),
        }),
        Err(errors) => json!({
            "id": f.id, "state": f.folder.state.as_str(), "path": f.path,
            "errors": errors.iter().map(|v| v.render(&f.path)).collect::<Vec<_>>(),
        }),
    }
}

/// Returns the transitions a commit records (from its `Coord-*` trailers), newest first, as
/// `coord log --json` prints each: one for a command's commit, several for a commit of a large
/// tick pass, none for a commit coord did not make.
pub fn transitions(c: &CommitInfo) -> Vec<Value> {
    let summary = one_line(c.summary.strip_prefix("coord: ").unwrap_or(&c.summary));
    c.transitions()
        .into_iter()
        .rev()
        .map(|t| {
            json!({
                "commit": c.oid,
                "time": c.time.to_string(),
                "task": t.subject,
                "from": t.from,
                "to": t.to,
                "op": t.op,
                "summary": t.summary.map_or_else(|| summary.clone(), |s| one_line(&s)),
            })
        })
        .collect()
}

/// Returns the transitions in the history of HEAD, newest first, of task `id` when given, at
/// most `limit`. Errs with `NotFound` when `id` has no transition and no file.
pub fn log(
    store: &Store,
    id: Option<&TaskId>,
    limit: usize,
) -> Result<Vec<Value>, Box<dyn std::error::Error + Send + Sync>> {
    let entries: Vec<Value> = store
        .repo
        .log(None)?
        .iter()
        .flat_map(transitions)
        .filter(|e| id.is_none_or(|id| e["task"] == id.as_str()))
        .take(limit)
        .collect();
    if let Some(id) = id.filter(|_| entries.is_empty()) {
        let (board, _) = store.load()?;
        if board.find(id).is_empty() {
            return Err(CommandError::NotFound(id.clone()).into());
        }
    }
    Ok(entries)
}

/// Returns each agent with its capabilities, load, limit, assignment mode, circuit and the
/// error of a profile that does not read (`coord agents --json`).
pub fn agents(board: &Board) -> Vec<Value> {
    board
        .agents
        .values()
        .map(|a| {
            json!({
                "name": a.name,
                "capabilities": a.profile.capabilities,
                "active": board.load_of(&a.name),
                "max_active": a.profile.max_active,
                "enabled": a.profile.enabled,
                "assign": a.profile.assign,
                "circuit": a.profile.coord.circuit.as_str(),
                "error": a.error.as_ref().map(|e| e.message.clone()),
            })
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
