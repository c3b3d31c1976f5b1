//! Intake (docs/behaviour.md): inbox files are validated on their own and among the others; valid
//! ones
//! go to review/, blocked/ or ready/, invalid ones to invalid/ with a `.errors` file beside the
//! original bytes. A file still being written is not on the board yet (docs/behaviour.md): every
//! inbox
//! file here has settled, so each is taken or quarantined on the tick that sees it.

use super::world::{ResultEdit, World};
use super::{Op, Transition};
use crate::board::{StandIn, TaskFile};
use crate::check::{self, Context, Task};
use crate::model::HistoryEntry;
use crate::model::{AgentName, Authority, Folder, Review, State, TaskId};
use crate::schema::Violation;

/// Admits or rejects every inbox file.
pub fn run(w: &mut World<'_>) {
    let taken = std::mem::take(&mut w.taken);
    reject_taken_ids(w, &taken);
    let board = w.board;
    let inbox: Vec<&TaskFile> = board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Inbox)
        .filter(|t| !matches!(t.stand_in, Some(StandIn::Settling(_))))
        .filter(|t| !taken.iter().any(|(r, _)| r.path == t.path))
        .collect();
    // Every file is checked against the board as it was before any of them moved, so two
    // inbox files naming each other are both rejected with the cycle, not just the first.
    let findings: Vec<Vec<String>> = inbox
        .iter()
        .map(|f| match &f.read {
            Ok(task) if w.is_entry(f) => check::check_in_context(&f.id, task, &Ctx(w))
                .iter()
                .map(|(_, v)| v.render(&f.path))
                .chain(on_a_rejected_id(task, &taken, &f.path))
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    for (f, lines) in inbox.into_iter().zip(findings) {
        match &f.read {
            Err(errors) => {
                let lines = errors
                    .iter()
                    .map(|v| crate::redact::error_line(&v.render(&f.path)))
                    .collect();
                quarantine(w, &f.id, &f.path, f.hash, lines);
            }
            Ok(_) if !w.is_entry(f) => {}
            Ok(_) if lines.is_empty() => admit(w, &f.id),
            Ok(_) => quarantine(w, &f.id, &f.path, f.hash, lines),
        }
    }
}

/// Returns a line for each dependency of `task` (the inbox file at `path`) naming an id
/// whose new file this pass rejects as taken: which of the two tasks it means cannot be
/// told, so the dependent is not let go against the old one.
fn on_a_rejected_id(task: &Task, taken: &[(&TaskFile, &str)], path: &str) -> Vec<String> {
    task.spec
        .depends_on
        .iter()
        .filter_map(|d| taken.iter().find(|(f, _)| &f.id == d))
        .map(|(f, holder)| {
            let message = format!(
                "depends on '{}', whose new file {} is rejected in this pass (the id is taken by {holder}): give that task a free id, name it in depends_on, and move this file back to the inbox",
                f.id, f.path
            );
            Violation::file(message).render(path)
        })
        .collect()
}

/// Sends each new inbox file whose id another file holds to invalid/ (docs/behaviour.md: ids are
/// unique across `work/`), naming the holder; the holder keeps the id and goes on.
fn reject_taken_ids(w: &mut World<'_>, taken: &[(&TaskFile, &str)]) {
    for &(f, holder) in taken {
        let message =
            format!(
            "id '{}' is taken by {holder}; rename this file to a free id and move it back to {}/",
            f.id,
            w.board.path_in(&Folder::of(State::Inbox), "").trim_end_matches('/'),
        );
        let mut lines = vec![crate::redact::error_line(
            &Violation::file(message).render(&f.path),
        )];
        if let Err(errors) = &f.read {
            lines.extend(
                errors
                    .iter()
                    .map(|v| crate::redact::error_line(&v.render(&f.path))),
            );
        }
        quarantine(w, &f.id, &f.path, f.hash, lines);
    }
}

/// The board as the cross-task checks see it.
pub struct Ctx<'w, 'a>(pub &'w World<'a>);

impl Context for Ctx<'_, '_> {
    fn task_exists(&self, id: &TaskId) -> bool {
        self.0.id_taken(id)
    }
    fn agent_exists(&self, agent: &AgentName) -> bool {
        self.0.agents.contains_key(agent)
    }
    fn deps_of(&self, id: &TaskId) -> Option<Vec<TaskId>> {
        self.0
            .entry(id)
            .map(|e| e.task.waiting().depends_on.clone())
    }
}

fn admit(w: &mut World<'_>, id: &TaskId) {
    let Some(e) = w.entry(id) else { return };
    let spec = &e.task.spec;
    let now = w.now();
    let mut c = e.task.coord.clone();
    let had_result = e.task.result.is_some();
    if let Some(r) = e.task.doc.value.get("result") {
        c.history.push(HistoryEntry::ResultBeforeRetry {
            at: now,
            result: r.clone(),
        });
    }
    if let Some(err) = c.error.take() {
        c.history.push(HistoryEntry::ErrorBeforeRetry {
            at: now,
            error: err,
        });
    }
    let deps_done = spec
        .depends_on
        .iter()
        .all(|d| super::deps::effective_state(w, d) == Some(State::Done));
    let deps_done = deps_done && w.closed_gates(&spec.wait_for).is_empty();
    let target = match (spec.authority, deps_done) {
        (Authority::AskMeFirst, _) => State::Review,
        (_, false) => State::Blocked,
        (_, true) => State::Ready,
    };
    c.state = Some(target);
    c.attempt_base = c.attempt;
    c.created_at.get_or_insert(now);
    c.assigned_to = None;
    c.assigned_at = None;
    c.lease_expires_at = None;
    c.not_before = None;
    c.finished_at = None;
    c.review = (target == State::Review).then_some(Review::Start);
    let edit = if had_result {
        ResultEdit::Remove
    } else {
        ResultEdit::Keep
    };
    let file = e.file_name();
    let (path, hash) = (e.path.clone(), e.hash);
    let summary = format!("accept {id} into {target}");
    let admitted = match w.try_transit(id, Folder::of(target), c, edit, summary) {
        Ok(done) => done,
        Err(message) => {
            let line = crate::redact::error_line(&Violation::file(message).render(&path));
            quarantine(w, id, &path, hash, vec![line]);
            false
        }
    };
    if admitted {
        let stale = w
            .board
            .path_in(&Folder::of(State::Invalid), &format!("{file}.errors"));
        if w.board.error_files.contains(&stale) {
            w.extend_last(Op::Remove { path: stale });
        }
    }
}

/// Moves the file at `path` (holding bytes with `hash`) to invalid/ with a `.errors` file
/// holding `lines`, and drops the task from the live set.
pub fn quarantine(w: &mut World<'_>, id: &TaskId, path: &str, hash: u64, lines: Vec<String>) {
    let from = w
        .board
        .tasks
        .iter()
        .find(|t| t.path == path)
        .map_or(State::Inbox, |t| t.folder.state);
    let invalid = Folder::of(State::Invalid);
    let name = free_name(w, path.rsplit('/').next().unwrap_or(path));
    let to = w.board.path_in(&invalid, &name);
    // The lines name the file where it will be from now on, so a person can open it.
    let lines: Vec<String> = lines
        .into_iter()
        .map(
            |l| match l.strip_prefix(path).filter(|rest| rest.starts_with(':')) {
                Some(rest) => format!("{to}{rest}"),
                None => l,
            },
        )
        .collect();
    let first = lines.first().cloned().unwrap_or_default();
    let mut text = lines.join("\n");
    text.push('\n');
    w.forget(id, path);
    w.push(Transition {
        subject: id.to_string(),
        from: from.into(),
        to: State::Invalid.into(),
        summary: format!(
            "reject {id}: {}",
            first.split_once(": ").map_or(first.as_str(), |x| x.1)
        ),
        ops: vec![
            Op::Move {
                from: path.to_string(),
                to: to.clone(),
            },
            Op::Write {
                path: format!("{to}.errors"),
                text,
            },
        ],
        guard: vec![(path.to_string(), hash)],
        op: None,
    });
}

/// Returns a file name in invalid/ that no file has: the same name, else `<stem>.<n>.<ext>`.
fn free_name(w: &World<'_>, name: &str) -> String {
    let invalid = Folder::of(State::Invalid);
    let taken = |n: &str| {
        let p = w.board.path_in(&invalid, n);
        w.board.tasks.iter().any(|t| t.path == p)
            || w.board.error_files.contains(&format!("{p}.errors"))
    };
    if !taken(name) {
        return name.to_string();
    }
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, "yaml"));
    (1..)
        .map(|n| format!("{stem}.{n}.{ext}"))
        .find(|n| !taken(n))
        .unwrap_or_else(|| name.to_string())
}
