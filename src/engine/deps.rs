//! Dependencies (docs/behaviour.md) and gates (`wait_for`): a blocked task becomes ready when every
//! dependency is done and every gate is open, a ready
//! one goes back to blocked when a person moved a dependency back out of `done/`, and a task
//! not yet started (blocked, ready, or in review waiting to start) fails with
//! `dependency_failed` when one failed or was cancelled, the whole graph in one pass.

use super::intake::{quarantine, Ctx};
use super::world::{ResultEdit, World};
use super::Note;
use crate::check;
use crate::model::{ErrorCode, ErrorInfo, Folder, Review, State, TaskId};

/// Returns a task's state for dependency purposes: archived tasks count as what they were.
pub fn effective_state(w: &World<'_>, id: &TaskId) -> Option<State> {
    let e = w.entry(id)?;
    match e.folder.state {
        State::Archived => e.task.summary().state.or(Some(State::Done)),
        s => Some(s),
    }
}

/// Moves waiting tasks on, repeating until nothing changes (a failure cascades down the whole
/// graph in one pass). Blocked
/// tasks on a dependency cycle (possible only when someone edits a blocked file by hand) are
/// first moved to invalid/ with the cycle in their `.errors` file, as intake would have done.
pub fn run(w: &mut World<'_>) {
    reject_cycles(w);
    loop {
        let mut changed = false;
        for id in not_started(w) {
            changed |= step(w, &id);
        }
        if !changed {
            break;
        }
    }
    for id in w.ids_in(State::Blocked) {
        let open = open_deps(w, &id);
        let gates = w
            .entry(&id)
            .map(|e| e.task.waiting().wait_for.clone())
            .unwrap_or_default();
        let gates = w
            .closed_gates(&gates)
            .iter()
            .map(|g| w.describe_gate(g))
            .collect();
        w.note(Note::Blocked { id, open, gates });
    }
}

fn open_deps(w: &World<'_>, id: &TaskId) -> Vec<TaskId> {
    let deps = w
        .entry(id)
        .map(|e| e.task.waiting().depends_on.clone())
        .unwrap_or_default();
    deps.into_iter()
        .filter(|d| effective_state(w, d) != Some(State::Done))
        .collect()
}

/// Returns the tasks that wait to start: blocked, ready, or in review before their start.
fn not_started(w: &World<'_>) -> Vec<TaskId> {
    w.live_entries()
        .filter(|e| match e.folder.state {
            State::Blocked | State::Ready => true,
            State::Review => e.task.coord.review != Some(Review::Result),
            _ => false,
        })
        .map(|e| e.id.clone())
        .collect()
}

/// Fails a task whose dependency failed or was cancelled, or unblocks a blocked task whose
/// dependencies are all done. Reads the task's summary; parses it only when it moves.
fn step(w: &mut World<'_>, id: &TaskId) -> bool {
    let Some(e) = w.entry(id) else {
        return false;
    };
    let blocked = e.folder.state == State::Blocked;
    let deps = e.task.waiting().depends_on.clone();
    let failed = deps.iter().find_map(|d| match effective_state(w, d) {
        Some(s @ (State::Failed | State::Cancelled)) => Some((d.clone(), s)),
        _ => None,
    });
    if let Some((dep, how)) = failed {
        let c = e.task.coord.clone();
        let how = how.as_str();
        let error = ErrorInfo::new(
            ErrorCode::DependencyFailed,
            format!("dependency {dep} {how}"),
            false,
        );
        let summary = format!("fail {id}: dependency {dep} {how}");
        return w.end(id, c, State::Failed, error, summary);
    }
    if !blocked && e.folder.state == State::Ready {
        let Some(dep) = reopened_dep(w, id) else {
            return false;
        };
        let mut c = e.task.coord.clone();
        c.state = Some(State::Blocked);
        let summary = format!("block {id}: dependency {dep} is no longer done");
        return w.transit(id, Folder::of(State::Blocked), c, ResultEdit::Keep, summary);
    }
    // A dependency whose file is not on the board is waited for: it may be mid-move by a
    // person (its new file still settling), and status names it as missing.
    let gates = e.task.waiting().wait_for.clone();
    if blocked
        && deps
            .iter()
            .all(|d| effective_state(w, d) == Some(State::Done))
        && w.closed_gates(&gates).is_empty()
    {
        let mut c = e.task.coord.clone();
        c.state = Some(State::Ready);
        let summary = match gates.is_empty() {
            true => format!("unblock {id}: dependencies done"),
            false => format!("unblock {id}: dependencies done, gates open"),
        };
        return w.transit(id, Folder::of(State::Ready), c, ResultEdit::Keep, summary);
    }
    false
}

/// Returns a dependency of task `id` that is there but not done: a person moved it back out
/// of `done/` (to work on it again: its dependents wait again; or to `failed/`: the next tick
/// fails them). A dependency whose file is gone does not count (it was done when the task
/// became ready).
pub fn reopened_dep(w: &World<'_>, id: &TaskId) -> Option<TaskId> {
    let entry = w.entry(id)?;
    let deps = &entry.task.waiting().depends_on;
    deps.iter()
        .find(|d| effective_state(w, d).is_some_and(|s| s != State::Done))
        .cloned()
}

fn reject_cycles(w: &mut World<'_>) {
    let found: Vec<(TaskId, String, u64, Vec<String>)> = w
        .ids_in(State::Blocked)
        .into_iter()
        .filter_map(|id| {
            let e = w.entry(&id)?;
            let lines: Vec<String> = check::cycles(&id, &e.task, &Ctx(w))
                .iter()
                .map(|v| v.render(&e.path))
                .collect();
            (!lines.is_empty()).then(|| (id, e.path.clone(), e.hash, lines))
        })
        .collect();
    for (id, path, hash, lines) in found {
        quarantine(w, &id, &path, hash, lines);
    }
}
