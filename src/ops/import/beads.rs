//! Reads beads' `.beads/issues.jsonl` (written by `br` and `bd`): one issue per line. Pure
//! but for reading the file.

use super::{labels, make_id, non_empty, read_text, ImportError, Item, Stage};
use crate::model::Priority;
use serde_json::Value;
use std::path::Path;

/// Dependency types that make an issue wait for another; the rest (`parent-child`,
/// `related`, `discovered-from`, ...) only link issues.
const BLOCKING: [&str; 3] = ["blocks", "conditional-blocks", "waits-for"];

/// Reads the issues of `path`: a project folder holding `.beads/issues.jsonl`, or the file.
pub(super) fn read(path: &Path) -> Result<Vec<Item>, ImportError> {
    let file = match path.is_dir() {
        true => path.join(".beads").join("issues.jsonl"),
        false => path.to_path_buf(),
    };
    if !file.is_file() {
        return Err(ImportError::NotFound {
            path: path.to_path_buf(),
            what: ".beads/issues.jsonl",
        });
    }
    let name = file.display().to_string();
    let mut items = Vec::new();
    for (n, line) in read_text(&file)?.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| ImportError::Parse {
            path: name.clone(),
            line: n + 1,
            message,
        };
        let issue: Value =
            serde_json::from_str(line).map_err(|e| bad(format!("not a JSON issue: {e}")))?;
        if let Some(item) = item(&issue).map_err(bad)? {
            items.push(item);
        }
    }
    Ok(items)
}

/// Returns the item of one issue; None for a deleted one (a tombstone).
fn item(issue: &Value) -> Result<Option<Item>, String> {
    let text = |k: &str| issue.get(k).and_then(Value::as_str);
    let key = text("id").ok_or("the issue has no \"id\"")?.to_string();
    let title = non_empty(text("title")).ok_or(format!("issue {key} has no title"))?;
    let stage = match text("status").unwrap_or("open") {
        "tombstone" => return Ok(None),
        "closed" => Stage::Done,
        "in_progress" => Stage::Started,
        _ => Stage::Open,
    };
    let mut description = non_empty(text("description"));
    if let Some(ac) = non_empty(text("acceptance_criteria")) {
        let before = description.map(|d| format!("{d}\n\n")).unwrap_or_default();
        description = Some(format!("{before}Acceptance criteria:\n{ac}"));
    }
    let depends_on = issue
        .get("dependencies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|d| {
            d.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| BLOCKING.contains(&t))
        })
        .filter_map(|d| d.get("depends_on_id").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    let mut all_labels: Vec<String> = strings(issue.get("labels"));
    if let Some(t) = text("issue_type").filter(|t| *t != "task") {
        all_labels.push(t.to_string());
    }
    Ok(Some(Item {
        id: make_id("", &key)?,
        key,
        title,
        description,
        labels: labels(all_labels),
        priority: issue.get("priority").and_then(Value::as_u64).map(priority),
        depends_on,
        stage,
    }))
}

/// Returns beads' priority (0 = critical ... 4 = backlog) in coord's words.
fn priority(p: u64) -> Priority {
    match p {
        0 => Priority::Critical,
        1 => Priority::High,
        2 => Priority::Normal,
        _ => Priority::Low,
    }
}

/// Returns the strings of a JSON list.
pub(super) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}
