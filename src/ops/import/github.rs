//! Reads GitHub issues as `gh issue list --json number,title,body,labels,state,stateReason`
//! prints them (a JSON array; `gh api` issue objects read the same). Dependencies are not
//! part of that output: none are imported. A label such as `priority: high`, `priority/low`
//! or `P0`...`P3` sets the priority. Pure.

use super::{labels, make_id, non_empty, priority_word, ImportError, Item, Stage};
use crate::model::Priority;
use serde_json::Value;

/// Reads the issues of `text`, `name` naming it in errors.
pub(super) fn parse(text: &str, name: &str) -> Result<Vec<Item>, ImportError> {
    let bad = |message: String| ImportError::Parse {
        path: name.to_string(),
        line: 1,
        message,
    };
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "not the JSON of 'gh issue list --json number,title,body,labels,state': {e}"
        ))
    })?;
    let issues = doc
        .as_array()
        .ok_or_else(|| bad("expected a JSON array of issues".into()))?;
    issues.iter().map(|i| item(i).map_err(&bad)).collect()
}

fn item(issue: &Value) -> Result<Item, String> {
    let number = issue
        .get("number")
        .and_then(Value::as_u64)
        .ok_or("an issue has no \"number\" (ask gh for --json number,...)")?;
    let key = number.to_string();
    let title = non_empty(issue.get("title").and_then(Value::as_str))
        .ok_or(format!("issue {key} has no title"))?;
    let names: Vec<String> = issue
        .get("labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| l.get("name").and_then(Value::as_str).or(l.as_str()))
        .map(str::to_string)
        .collect();
    Ok(Item {
        id: make_id("gh-", &key)?,
        title,
        description: non_empty(issue.get("body").and_then(Value::as_str)),
        priority: names.iter().find_map(|n| priority_label(n)),
        labels: labels(names),
        depends_on: Vec::new(),
        stage: stage(issue),
        key,
    })
}

/// Returns the priority a label names, if any.
fn priority_label(label: &str) -> Option<Priority> {
    let l = label.trim().to_ascii_lowercase();
    match l.as_str() {
        "p0" => return Some(Priority::Critical),
        "p1" => return Some(Priority::High),
        "p2" => return Some(Priority::Normal),
        "p3" | "p4" => return Some(Priority::Low),
        _ => {}
    }
    let word = l.strip_prefix("priority")?;
    priority_word(word.trim_start_matches([':', '/', '-', ' ']))
}

/// Returns the issue's state in coord's words: open, or closed as completed (done) or as not
/// planned or a duplicate (cancelled).
fn stage(issue: &Value) -> Stage {
    let field = |k: &str| {
        issue
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_uppercase()
    };
    match (field("state").as_str(), field("stateReason").as_str()) {
        ("CLOSED", "NOT_PLANNED" | "DUPLICATE") => Stage::Cancelled,
        ("CLOSED", _) => Stage::Done,
        _ => Stage::Open,
    }
}
