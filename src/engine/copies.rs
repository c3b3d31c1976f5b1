//! Old copies of a moved task: an editor saving a task file it had open after coord moved the
//! file leaves the old version, maybe with a person's edit, at the old path. The copy coord
//! moved last is the task (commands and the tick act on it); the tick carries an old copy's
//! edit into it and removes the old copy. Pure.

use super::world::{edit_text, ResultEdit, World};
use super::{Op, Transition};
use crate::board::TaskFile;
use crate::model::{State, TaskId};
use serde_json::Value;

/// Returns the copy coord moved last and the older ones, when the copies of one id are
/// versions of one task coord wrote: each reads, agrees with its folder, was taken in at the
/// same time, and one is further on (a later attempt, or finished) than every other. Copies
/// that cannot be ordered so (a task copied by hand into another folder) are a duplicate for
/// a person to sort out.
pub fn moved<'a>(copies: &[&'a TaskFile]) -> Option<(&'a TaskFile, Vec<&'a TaskFile>)> {
    let mut read = Vec::with_capacity(copies.len());
    for f in copies {
        let task = f.read.as_ref().ok().filter(|_| f.stand_in.is_none())?;
        let seen = task.summary();
        let agrees = seen.state == Some(f.folder.state) && seen.assigned_to == f.folder.agent;
        let c = &task.coord;
        c.created_at?;
        agrees.then_some(())?;
        read.push((*f, (c.attempt, c.finished_at.is_some()), c.created_at));
    }
    let (newest, progress, created) = *read.iter().max_by_key(|(_, p, _)| *p)?;
    if read.iter().any(|(f, _, _)| regated(f, newest)) {
        return None;
    }
    let older: Vec<&TaskFile> = read
        .iter()
        .filter(|(f, _, _)| f.path != newest.path)
        .map(|(f, p, c)| (*p < progress && *c == created).then_some(*f))
        .collect::<Option<_>>()?;
    (!older.is_empty()).then_some((newest, older))
}

/// Returns whether `copy` names another `authority` than `task` while the task has not
/// started: carried over, the gate would be skipped (it is judged at intake), so the copies
/// stay a duplicate for a person.
fn regated(copy: &TaskFile, task: &TaskFile) -> bool {
    let authority = |f: &TaskFile| {
        f.read
            .as_ref()
            .ok()
            .and_then(|t| t.doc.value.get("authority").cloned())
    };
    matches!(task.folder.state, State::Ready | State::Blocked) && authority(copy) != authority(task)
}

/// Returns `task`'s text with `copy`'s text outside `coord:` and `result:` (a person's edit
/// made in another copy), keeping `task`'s `coord:` block and `result:`; None when that
/// would change the gate of a task not started yet or the text cannot be made.
pub fn carried(copy: &TaskFile, task: &TaskFile) -> Option<String> {
    if regated(copy, task) {
        return None;
    }
    let (from, into) = (copy.read.as_ref().ok()?, task.read.as_ref().ok()?);
    edit_text(
        from,
        &into.coord,
        result_of(&into.doc.value, &from.doc.value),
    )
    .ok()
}

/// Returns the edit that leaves `into`'s `result:` on a text that has `from`'s.
fn result_of(into: &Value, from: &Value) -> ResultEdit {
    match into.get("result") {
        Some(v) => ResultEdit::Set(v.clone()),
        None if from.get("result").is_some() => ResultEdit::Remove,
        None => ResultEdit::Keep,
    }
}

/// The tick's step: for each task with old copies, carries what a person changed in an old
/// copy into the task and removes the old copy (see [`carry`]).
pub fn run(w: &mut World<'_>) {
    for (id, older) in std::mem::take(&mut w.older) {
        for old in older {
            carry(w, &id, old);
        }
    }
}

/// Removes `old`, an old copy of task `id`. When it holds keys a person writes that the task
/// lacks (its text outside `coord:` and `result:` differs), it is the person's latest edit,
/// made without seeing the move: the task takes that text, keeping its own `coord:` block
/// and `result:`. Both versions stay in git history.
fn carry(w: &mut World<'_>, id: &TaskId, old: &TaskFile) {
    if w.is_frozen(id) {
        return;
    }
    let (Some(task), Ok(copy)) = (w.entry(id).map(|e| e.into_owned()), old.read.as_ref()) else {
        return;
    };
    let mut ops = Vec::new();
    let mut text = None;
    if people(&copy.doc.value) != people(&task.task.doc.value) {
        let result = result_of(&task.task.doc.value, &copy.doc.value);
        let Ok(merged) = edit_text(copy, &task.task.coord, result) else {
            return;
        };
        ops.push(Op::Write {
            path: task.path.clone(),
            text: merged.clone(),
        });
        text = Some(merged);
    }
    ops.push(Op::Remove {
        path: old.path.clone(),
    });
    let summary = match text {
        Some(_) => format!(
            "carry the edit of {} into {}: an editor saved {id} there after it moved",
            old.path, task.path
        ),
        None => format!(
            "remove {}: an editor saved {id} there unchanged after it moved to {}",
            old.path, task.path
        ),
    };
    if text.as_deref().is_some_and(|t| !w.rewrite(id, t)) {
        return;
    }
    w.push(Transition {
        subject: id.to_string(),
        from: task.folder.state.into(),
        to: task.folder.state.into(),
        summary,
        ops,
        guard: vec![(task.path.clone(), task.hash), (old.path.clone(), old.hash)],
        op: None,
    });
}

/// Returns the keys of a task document a person writes: all but `coord:` and `result:`.
fn people(doc: &Value) -> Option<serde_json::Map<String, Value>> {
    let mut keys = doc.as_object()?.clone();
    keys.remove("coord");
    keys.remove("result");
    Some(keys)
}
