//! `coord new -` and `coord new --edit`: a task written as YAML (the fields of a task file),
//! read from stdin or from a draft opened in `$VISUAL` / `$EDITOR`, read into a
//! [`NewTask`] before anything is written; the command's flags fill the fields the text leaves
//! out. A draft that does not read is refused with one line naming why and where the text is
//! kept; nothing is written.

use crate::error::UsageError;
use crate::ops::NewTask;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The draft `--edit` opens: every field a person usually sets, with what it takes.
const TEMPLATE: &str = "\
# A new task. Give it a title; fill in what you need and delete the rest.
# Saved with an empty title, nothing is written.
title: 
description: 
# agent: alice
# capabilities: [rust]
# priority: normal        # low, normal, high or critical
# depends_on: [other-task]
# authority: just_do_it   # do_it_and_show_me or ask_me_first
# due: 2026-12-01
# labels: [docs]
";

/// Reads the task on stdin.
pub fn from_stdin() -> Result<NewTask> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .context("cannot read the task on stdin")?;
    Ok(parse(&text)
        .map_err(|why| UsageError(format!("the task on stdin {why}; nothing was written")))?)
}

/// Opens a draft in the editor and reads the task saved in it; the draft is removed when it
/// reads, and kept (its path named) when it does not.
pub fn from_editor() -> Result<NewTask> {
    let draft = draft_path();
    std::fs::write(&draft, TEMPLATE)
        .with_context(|| format!("cannot write the draft {}", draft.display()))?;
    edit(&draft)?;
    let text = std::fs::read_to_string(&draft)
        .with_context(|| format!("cannot read the draft {}", draft.display()))?;
    match parse(&text) {
        Ok(task) => {
            let _ = std::fs::remove_file(&draft);
            Ok(task)
        }
        Err(why) => Err(UsageError(format!(
            "the task {why}; nothing was written (the text is kept in {})",
            draft.display()
        ))
        .into()),
    }
}

fn draft_path() -> PathBuf {
    std::env::temp_dir().join(format!("coord-new-{}.yaml", std::process::id()))
}

/// Runs `$VISUAL`, else `$EDITOR`, else `vi` on `file` through the shell (so the variable
/// may hold arguments), waiting for it to end.
pub(super) fn edit(file: &Path) -> Result<()> {
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_string());
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("{editor} \"$1\""), "editor"])
        .arg(file)
        .status()
        .with_context(|| format!("cannot start the editor '{editor}'"))?;
    if !status.success() {
        return Err(UsageError(format!(
            "the editor '{editor}' failed ({status}); nothing was written (the text is kept in {})",
            file.display()
        ))
        .into());
    }
    Ok(())
}

/// Returns the task a YAML text describes, or why it does not read ("does not read: …").
fn parse(text: &str) -> Result<NewTask, String> {
    let doc = crate::yaml::parse(text, &crate::yaml::Limits::default())
        .map_err(|e| format!("does not read: {e}"))?;
    let Value::Object(mut fields) = doc.value else {
        return Err("does not read: it is not a mapping of fields ('title: ...')".into());
    };
    fields.retain(|_, v| !v.is_null());
    if let Some(one @ Value::String(_)) = fields.get("next_agent").cloned() {
        fields.insert("next_agent".into(), Value::Array(vec![one]));
    }
    serde_json::from_value(Value::Object(fields)).map_err(|e| format!("does not read: {e}"))
}

/// Returns `text` with the fields it leaves out taken from `flags`.
pub fn fill(mut text: NewTask, flags: NewTask) -> NewTask {
    fn or_vec<T>(a: Vec<T>, b: Vec<T>) -> Vec<T> {
        if a.is_empty() {
            b
        } else {
            a
        }
    }
    text.description = text.description.or(flags.description);
    text.agent = text.agent.or(flags.agent);
    text.capabilities = or_vec(text.capabilities, flags.capabilities);
    text.priority = text.priority.or(flags.priority);
    text.depends_on = or_vec(text.depends_on, flags.depends_on);
    text.next_agents = or_vec(text.next_agents, flags.next_agents);
    text.join_agent = text.join_agent.or(flags.join_agent);
    text.authority = text.authority.or(flags.authority);
    text.timeout = text.timeout.or(flags.timeout);
    text.max_attempts = text.max_attempts.or(flags.max_attempts);
    text.due = text.due.or(flags.due);
    text.labels = or_vec(text.labels, flags.labels);
    if text.input.is_empty() {
        text.input = flags.input;
    }
    text.id = text.id.or(flags.id);
    text.idempotency_key = text.idempotency_key.or(flags.idempotency_key);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_reads_as_a_task_without_a_title() {
        let task = parse(TEMPLATE).expect("the template reads");
        assert!(task.title.is_empty());
    }

    #[test]
    fn unknown_fields_and_wrong_types_do_not_read() {
        let err = parse("title: x\ncolour: red\n").expect_err("unknown");
        assert!(err.contains("colour"), "{err}");
        assert!(parse("title: [a, b]\n").is_err());
        assert!(parse("- a list\n").is_err());
        let task = parse("title: x\nnext_agent: bob\n").expect("one next agent");
        assert_eq!(task.next_agents.len(), 1);
    }
}
