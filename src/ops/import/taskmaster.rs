//! Reads Taskmaster's `tasks.json` (`.taskmaster/tasks/tasks.json`, or `tasks/tasks.json` and
//! `tasks.json` of older versions), tagged (`{"master": {"tasks": [...]}}`, every tag read)
//! or not (`{"tasks": [...]}`). Subtasks become tasks of their own (`tm-2.1`) that their
//! parent depends on. Pure but for reading the file.

use super::{make_id, non_empty, priority_word, read_text, ImportError, Item, Stage};
use serde_json::Value;
use std::path::Path;

/// Where Taskmaster keeps its tasks under a project folder, newest layout first.
const PLACES: [&str; 3] = [
    ".taskmaster/tasks/tasks.json",
    "tasks/tasks.json",
    "tasks.json",
];

/// Reads the tasks of `path`: a project folder or the `tasks.json` file.
pub(super) fn read(path: &Path) -> Result<Vec<Item>, ImportError> {
    let file = match path.is_dir() {
        true => PLACES.iter().map(|p| path.join(p)).find(|p| p.is_file()),
        false => Some(path.to_path_buf()).filter(|p| p.is_file()),
    }
    .ok_or(ImportError::NotFound {
        path: path.to_path_buf(),
        what: ".taskmaster/tasks/tasks.json or tasks.json",
    })?;
    let name = file.display().to_string();
    let bad = |message: String| ImportError::Parse {
        path: name.clone(),
        line: 1,
        message,
    };
    let doc: Value = serde_json::from_str(&read_text(&file)?)
        .map_err(|e| bad(format!("not Taskmaster's JSON: {e}")))?;
    let mut items = Vec::new();
    for tasks in task_lists(&doc) {
        for task in tasks {
            items.extend(task_items(task).map_err(&bad)?);
        }
    }
    Ok(items)
}

/// Returns the task lists of every tag (or the one untagged list).
fn task_lists(doc: &Value) -> Vec<&Vec<Value>> {
    if let Some(tasks) = doc.get("tasks").and_then(Value::as_array) {
        return vec![tasks];
    }
    doc.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, tag)| tag.get("tasks").and_then(Value::as_array))
        .collect()
}

/// Returns a task's item, then its subtasks' items.
fn task_items(task: &Value) -> Result<Vec<Item>, String> {
    let key = id_text(task.get("id")).ok_or("a task has no \"id\"")?;
    let subtasks: Vec<&Value> = task
        .get("subtasks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut sub_items = Vec::new();
    for sub in subtasks {
        let n = id_text(sub.get("id")).ok_or(format!("a subtask of task {key} has no \"id\""))?;
        let deps = deps(sub, |d| match d.contains('.') {
            true => d.to_string(),
            false => format!("{key}.{d}"),
        });
        sub_items.push(item(sub, format!("{key}.{n}"), deps)?);
    }
    let mut deps = deps(task, str::to_string);
    deps.extend(sub_items.iter().map(|s| s.key.clone()));
    let mut out = vec![item(task, key, deps)?];
    out.extend(sub_items);
    Ok(out)
}

fn item(task: &Value, key: String, depends_on: Vec<String>) -> Result<Item, String> {
    let text = |k: &str| task.get(k).and_then(Value::as_str);
    let title = non_empty(text("title")).ok_or(format!("task {key} has no title"))?;
    let parts: Vec<String> = [
        non_empty(text("description")),
        non_empty(text("details")).map(|d| format!("Details:\n{d}")),
        non_empty(text("testStrategy")).map(|t| format!("Test strategy:\n{t}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    Ok(Item {
        id: make_id("tm-", &key)?,
        key,
        title,
        description: (!parts.is_empty()).then(|| parts.join("\n\n")),
        labels: Vec::new(),
        priority: text("priority").and_then(priority_word),
        depends_on,
        stage: stage(text("status").unwrap_or("pending")),
    })
}

/// Returns Taskmaster's status in coord's words.
fn stage(status: &str) -> Stage {
    match status {
        "done" => Stage::Done,
        "cancelled" => Stage::Cancelled,
        "in-progress" | "review" => Stage::Started,
        _ => Stage::Open,
    }
}

/// Returns the dependency keys of a task or subtask, `full` making each one whole.
fn deps(task: &Value, full: impl Fn(&str) -> String) -> Vec<String> {
    task.get("dependencies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| id_text(Some(d)))
        .map(|d| full(&d))
        .collect()
}

/// Returns an id given as a number or a string.
fn id_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}
