//! Reads Backlog.md's task files (`backlog/tasks/*.md`): YAML front matter between `---`
//! lines, then the Markdown body, which becomes the description (without Backlog.md's
//! `<!-- SECTION:... -->` markers). Pure but for reading the files.

use super::beads::strings;
use super::{labels, make_id, non_empty, priority_word, read_text, ImportError, Item, Stage};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Reads the tasks of `path`: a project folder holding `backlog/tasks/`, or a folder of task
/// files.
pub(super) fn read(path: &Path) -> Result<Vec<Item>, ImportError> {
    let dir = [path.join("backlog").join("tasks"), path.to_path_buf()]
        .into_iter()
        .find(|d| d.is_dir() && !task_files(d).unwrap_or_default().is_empty())
        .ok_or(ImportError::NotFound {
            path: path.to_path_buf(),
            what: "backlog/tasks/*.md",
        })?;
    let mut files = task_files(&dir)?;
    files.sort();
    let mut items = Vec::new();
    for file in files {
        let name = file.display().to_string();
        items.push(
            item(&read_text(&file)?).map_err(|(line, message)| ImportError::Parse {
                path: name,
                line,
                message,
            })?,
        );
    }
    items.sort_by_key(|i| number(&i.key));
    Ok(items)
}

/// Returns the `.md` files of `dir`.
fn task_files(dir: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let read_err = |source| ImportError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let p = entry.map_err(read_err)?.path();
        if p.extension().is_some_and(|e| e == "md") && p.is_file() {
            out.push(p);
        }
    }
    Ok(out)
}

/// Returns the number in a key (`TASK-12` gives 12), for ordering the tasks as Backlog.md
/// numbers them.
fn number(key: &str) -> (u64, String) {
    let digits: String = key.chars().filter(char::is_ascii_digit).collect();
    (digits.parse().unwrap_or(u64::MAX), key.to_string())
}

/// Returns the item of one task file, or the line and what is wrong.
fn item(text: &str) -> Result<Item, (usize, String)> {
    let text = text.replace("\r\n", "\n");
    let rest = text
        .strip_prefix("---\n")
        .ok_or((1, "no front matter (a first line of ---)".to_string()))?;
    let (front, body) = match rest.split_once("\n---\n") {
        Some(split) => split,
        None => (
            rest.strip_suffix("\n---")
                .ok_or((1, "the front matter never ends".to_string()))?,
            "",
        ),
    };
    let doc = crate::yaml::parse(front, &crate::yaml::Limits::default())
        .map_err(|e| (2, format!("front matter: {e}")))?
        .value;
    let text_of = |k: &str| doc.get(k).and_then(Value::as_str);
    let key = text_of("id")
        .ok_or((2, "the front matter has no id".to_string()))?
        .to_string();
    let title = non_empty(text_of("title")).ok_or((2, format!("task {key} has no title")))?;
    Ok(Item {
        id: make_id("", &key.to_ascii_lowercase()).map_err(|e| (2, e))?,
        title,
        description: non_empty(Some(&body_text(body))),
        labels: labels(strings(doc.get("labels"))),
        priority: text_of("priority").and_then(priority_word),
        depends_on: strings(doc.get("dependencies")),
        stage: stage(text_of("status").unwrap_or_default()),
        key,
    })
}

/// Returns the body without Backlog.md's section markers.
fn body_text(body: &str) -> String {
    body.lines()
        .filter(|l| {
            let l = l.trim();
            !(l.starts_with("<!-- SECTION:")
                || l.starts_with("<!-- AC:")
                || l.starts_with("<!-- DOD:"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Returns Backlog.md's status (its defaults are "To Do", "In Progress" and "Done"; other
/// statuses a project configures count as open) in coord's words.
fn stage(status: &str) -> Stage {
    match status.trim().to_ascii_lowercase().as_str() {
        "done" => Stage::Done,
        "in progress" => Stage::Started,
        _ => Stage::Open,
    }
}
