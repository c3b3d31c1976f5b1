//! `doctor`: consistency checks of `work/` (docs/commands.md), each finding typed with its code,
//! the
//! file it concerns and its fix; and the safe fix (`--fix`): committing stray changes and
//! adopting hand moves. Reads the store and git; the fix commits.

use super::{Coord, Error, Folders};
use crate::board::{split_copies, Board, Copies, TaskFile};
use crate::engine::{self, Op, Transition};
use crate::model::{Endpoint, State, TaskId};
use crate::store::{Origin, Store};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingCode {
    /// Git is in the middle of an operation (merge, rebase, ...) or HEAD is detached.
    GitUnfinished,
    /// One id lives in several places.
    Duplicate,
    /// A file that does not belong under `work/` (a symlink, a stray file).
    Stray,
    /// A task file that does not read.
    Unreadable,
    /// A task whose folder and `coord:` block disagree (moved by hand).
    HandMoved,
    /// A task that depends on an id that does not exist.
    UnknownDependency,
    /// A task whose agent does not exist.
    UnknownAgent,
    /// An agent profile that does not read.
    AgentUnreadable,
    /// Uncommitted changes under `work/`.
    Uncommitted,
    /// A journaled transition of an interrupted run.
    Journal,
}

/// One problem `doctor` found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// What kind of problem.
    pub code: FindingCode,
    /// The file it concerns, repo-relative, when one does.
    pub path: Option<String>,
    /// The line for people (secrets redacted).
    pub message: String,
    /// What fixes it, when one thing does (a command).
    pub fix: Option<String>,
}

impl Finding {
    fn new(code: FindingCode, path: Option<&str>, message: String) -> Finding {
        Finding {
            code,
            path: path.map(str::to_string),
            message: crate::redact::error_line(&message),
            fix: None,
        }
    }

    fn fixed_by_doctor(mut self) -> Finding {
        self.fix = Some("coord doctor --fix".into());
        self
    }
}

impl Coord {
    /// Checks `work/` and returns every finding.
    pub fn doctor(&self) -> Result<Vec<Finding>, Error> {
        let (board, _) = self.read().load()?;
        findings(&self.store, &board)
    }

    /// Commits stray changes under `work/`, adopts hand moves, carries an editor's save of a
    /// moved task into it, and settles every other duplicate id on one copy holding the
    /// newest edit (each version stays in git history); returns the number of commits.
    pub fn doctor_fix(&self) -> Result<usize, Error> {
        let session = self.session_over(Duration::ZERO, Folders::Finished)?;
        let (board, _) = session.load()?;
        let mut plan = engine::adoption_plan(&board, &self.inputs(&session));
        plan.transitions.extend(copies_settled(&self.store, &board));
        self.apply(session, &plan, Origin::Command)
    }
}

/// The finding for a state of git that stops every writing command.
fn git_unfinished(store: &Store, state: &crate::git::Unfinished) -> Finding {
    let line = format!(
        "{}: {state}; coord writes nothing until then",
        store.root().display()
    );
    Finding::new(FindingCode::GitUnfinished, None, line)
}

fn findings(store: &Store, board: &Board) -> Result<Vec<Finding>, Error> {
    let mut out = Vec::new();
    let unfinished = store.repo.unfinished()?;
    if let Some(state) = &unfinished {
        out.push(git_unfinished(store, state));
    }
    // Offer `--fix` only where it can act: not while git is in the middle of something.
    let fix = if unfinished.is_some() {
        " once the git operation above is finished"
    } else {
        ", or run 'coord doctor --fix'"
    };
    duplicates(store.work_dir(), board, &mut out);
    for p in &board.problems {
        let line = format!("{}: {}", p.path, p.message);
        out.push(Finding::new(FindingCode::Stray, Some(&p.path), line));
    }
    let known: HashSet<&TaskId> = board.tasks.iter().map(|t| &t.id).collect();
    // A copy of an id in several places gets the duplicate's advice alone.
    let copied: HashSet<&TaskId> = board
        .live_by_id()
        .into_iter()
        .filter(|(_, all)| split_copies(all).kept.len() > 1)
        .map(|(id, _)| id)
        .collect();
    for t in board.tasks.iter().filter(|t| !copied.contains(&t.id)) {
        task_findings(board, t, &known, fix, &mut out);
    }
    for a in board.agents.values() {
        if let Some(e) = &a.error {
            out.push(Finding::new(
                FindingCode::AgentUnreadable,
                None,
                format!(
                    "agent {}: profile does not read: {}; the agent gets no work until it is fixed",
                    a.name, e.message
                ),
            ));
        }
    }
    // The scan reads the index, which libgit2 cannot do while it is sparse or split.
    if !matches!(
        unfinished,
        Some(crate::git::Unfinished::SparseIndex | crate::git::Unfinished::SplitIndex)
    ) {
        uncommitted(store, board, fix, &mut out)?;
    }
    if store.private_dir().join("journal.json").exists() {
        out.push(Finding::new(
            FindingCode::Journal,
            None,
            "an interrupted transition is journaled; the next coord command finishes it".into(),
        ));
    }
    if store.repo.switch_journaled() {
        out.push(Finding::new(
            FindingCode::Journal,
            None,
            "a sync killed while it moved the branch onto the remote is journaled; the next coord command finishes it".into(),
        ));
    }
    Ok(out)
}

/// The findings of a status scan of the work folder: files git leaves out of the work tree,
/// and uncommitted changes.
fn uncommitted(
    store: &Store,
    board: &Board,
    fix: &str,
    out: &mut Vec<Finding>,
) -> Result<(), Error> {
    let scan = store
        .repo
        .changes_under(&format!("{}/", store.work_dir()))?;
    let left_out = store.left_out_of_work_tree(&scan);
    if !left_out.is_empty() {
        let state = crate::git::Unfinished::SkippedInWorkTree(left_out);
        out.push(git_unfinished(store, &state));
    }
    // Files reported as problems (symlinks, stray files) are never recorded: no fix to offer.
    let changed: Vec<String> = scan
        .paths
        .into_iter()
        .filter(|c| !board.problems.iter().any(|p| &p.path == c))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    // An in-place edit of a finished task waits for the person (README "Finished tasks are
    // history too"): a tick does not record it.
    let prefix = format!("{}/", store.work_dir());
    let history = |state| {
        matches!(
            state,
            State::Done | State::Failed | State::Cancelled | State::Archived
        )
    };
    let finished = changed.iter().find(|p| {
        let rel = p.strip_prefix(&prefix).unwrap_or(p);
        crate::board::task_at(rel).is_some_and(|(folder, _)| history(folder.state))
            && store.repo.read_head_file(p).is_ok_and(|f| f.is_some())
    });
    let (path, who) = match finished {
        Some(path) => (path, "a tick leaves an in-place edit of a finished task to you until it is staged; run 'coord doctor --fix' to record them now"),
        None => (&changed[0], "the next tick records them"),
    };
    let line = format!(
        "{} uncommitted change(s) under {}/ (e.g. {path}); {who}{}",
        changed.len(),
        store.work_dir(),
        if finished.is_some() { "" } else { fix },
    );
    out.push(Finding::new(FindingCode::Uncommitted, Some(path), line).fixed_by_doctor());
    Ok(())
}

fn task_findings(
    board: &Board,
    t: &TaskFile,
    known: &HashSet<&TaskId>,
    fix: &str,
    out: &mut Vec<Finding>,
) {
    if matches!(t.folder.state, State::Inbox | State::Invalid) {
        return;
    }
    let d = match &t.read {
        Ok(d) => d,
        Err(errors) => {
            let first = errors
                .first()
                .map(|v| v.render(&t.path))
                .unwrap_or_default();
            let line = format!("{first} (the file is left where it is until a person fixes it)");
            out.push(Finding::new(FindingCode::Unreadable, Some(&t.path), line));
            return;
        }
    };
    if t.folder.state == State::Archived {
        return;
    }
    let recorded = d.coord.state;
    let agent_ok = t.folder.state != State::Assigned || d.coord.assigned_to == t.folder.agent;
    if recorded != Some(t.folder.state) || !agent_ok {
        let line = format!(
            "{}: sits in {} but its coord block says {}; the next tick adopts the folder{fix}",
            t.path,
            t.folder,
            recorded.map_or("nothing", State::as_str)
        );
        out.push(Finding::new(FindingCode::HandMoved, Some(&t.path), line).fixed_by_doctor());
    }
    if t.folder.state.is_final() {
        return;
    }
    for dep in d.spec.depends_on.iter().filter(|dep| !known.contains(dep)) {
        let line = format!("{}: depends on '{dep}', which does not exist", t.path);
        out.push(Finding::new(
            FindingCode::UnknownDependency,
            Some(&t.path),
            line,
        ));
    }
    if let Some(a) = d
        .spec
        .agent
        .as_ref()
        .filter(|a| !board.agents.contains_key(*a))
    {
        let line = format!(
            "{}: agent '{a}' is unknown; add it with 'coord agents add {a}'",
            t.path
        );
        let mut f = Finding::new(FindingCode::UnknownAgent, Some(&t.path), line);
        f.fix = Some(format!("coord agents add {a}"));
        out.push(f);
    }
}

/// Returns the copy of a duplicate id to keep: the first whose `coord:` block agrees with its
/// folder (the one coord moved last), else the first.
fn kept_copy<'b>(live: &[&'b TaskFile]) -> &'b TaskFile {
    live.iter()
        .find(|f| {
            f.read
                .as_ref()
                .is_ok_and(|d| d.coord.state == Some(f.folder.state))
        })
        .unwrap_or(&live[0])
}

/// Returns the transitions settling each duplicate id that is not an editor's save of a
/// moved task: the copy kept (see [`kept_copy`]) takes the text outside `coord:` of the copy
/// written last when that one holds a person's edit, and the other copies are removed. `--fix`
/// recorded every copy first, so each version stays in git history. Only the copies holding
/// nothing the kept one lacks are removed when a copy does not read or the edit cannot be
/// carried (it would change the gate of a task not started).
fn copies_settled(store: &Store, board: &Board) -> Vec<Transition> {
    let mut out = Vec::new();
    for (id, all) in board.live_by_id() {
        let live = split_copies(&all).kept;
        if live.len() < 2 || engine::copies::moved(&live).is_some() {
            continue;
        }
        let keep = kept_copy(&live);
        let newest = live
            .iter()
            .filter(|f| f.read.is_ok() && f.stand_in.is_none())
            .max_by_key(|f| written_at(store, &f.path))
            .filter(|_| live.iter().all(|f| f.read.is_ok() && f.stand_in.is_none()));
        let carry = newest
            .filter(|n| !same_rest(n, keep))
            .map(|n| (n, engine::copies::carried(n, keep)));
        let others = |plain_only: bool| -> Vec<&TaskFile> {
            live.iter()
                .copied()
                .filter(|f| f.path != keep.path && (!plain_only || same_rest(f, keep)))
                .collect()
        };
        let (write, gone) = match carry {
            Some((n, Some(text))) => (Some((n, text)), others(false)),
            Some((_, None)) => (None, others(true)),
            None => (None, others(newest.is_none())),
        };
        let summary = match &write {
            Some((n, _)) => format!(
                "keep {}, with the text of {} (the copy written last); remove the other copies of {id}",
                keep.path, n.path
            ),
            None => format!("remove the copies of {id} holding nothing {} lacks", keep.path),
        };
        let mut ops: Vec<Op> = write
            .map(|(_, text)| Op::Write {
                path: keep.path.clone(),
                text,
            })
            .into_iter()
            .collect();
        ops.extend(gone.iter().map(|f| Op::Remove {
            path: f.path.clone(),
        }));
        if ops.is_empty() {
            continue;
        }
        out.push(Transition {
            subject: id.to_string(),
            from: Endpoint::State(keep.folder.state),
            to: Endpoint::State(keep.folder.state),
            summary,
            ops,
            guard: live.iter().map(|f| (f.path.clone(), f.hash)).collect(),
            op: None,
        });
    }
    out
}

/// Returns when the file at `path` was last written (the epoch when that cannot be read).
fn written_at(store: &Store, path: &str) -> std::time::SystemTime {
    std::fs::symlink_metadata(store.abs(path))
        .and_then(|m| m.modified())
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// Returns whether two copies of a task hold the same text outside their `coord:` blocks:
/// removing one then loses nothing a person or agent wrote.
fn same_rest(a: &TaskFile, b: &TaskFile) -> bool {
    let rest = |f: &TaskFile| {
        f.read
            .as_ref()
            .ok()
            .and_then(|t| engine::rest_hash(&t.text, &t.doc))
    };
    rest(a).is_some_and(|h| Some(h) == rest(b))
}

/// The finding of a new inbox file reusing the id `holder` has: the next tick rejects it
/// (docs/behaviour.md), so the advice is to give it a free id.
fn taken_id(id: &TaskId, file: &TaskFile, holder: &str) -> Finding {
    let line = format!(
        "new task file {} reuses id '{id}' of {holder}: the next tick moves it to invalid/; rename it to a free id",
        file.path
    );
    Finding::new(FindingCode::Duplicate, Some(&file.path), line)
}

/// The findings of files in `invalid/` whose id a live task holds: a second write to a file
/// coord had already taken in, or a copy. Left alone, the rejected file could never be sent in
/// again under its name, and what it adds is not on the task.
fn rejected_copies(
    work: &str,
    board: &Board,
    live: &BTreeMap<&TaskId, Vec<&TaskFile>>,
    out: &mut Vec<Finding>,
) {
    let rejected = board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Invalid);
    for file in rejected {
        let Some(holder) = live.get(&file.id).and_then(|all| all.first()) else {
            continue;
        };
        let line = format!(
            "{} has the id '{}' of {}: copy what it adds into {} by hand and 'git rm' it, or rename it to a free id and move it back to {}/inbox/",
            file.path,
            file.id,
            holder.path,
            holder.path,
            work,
        );
        out.push(Finding::new(FindingCode::Duplicate, Some(&file.path), line));
    }
}

/// The finding of old copies of a moved task an editor saved at their old paths: the tick
/// (or `--fix`) carries a person's edit in them into the task and removes them.
fn older_copies(id: &TaskId, task: &TaskFile, older: &[&TaskFile]) -> Finding {
    let paths: Vec<&str> = older.iter().map(|f| f.path.as_str()).collect();
    let line = format!(
        "duplicate id '{id}': {} {} an editor's save from before coord moved the task to {}; the next tick carries a person's edit in the copy into {} and removes the copy, or run 'coord doctor --fix'",
        paths.join(", "),
        if paths.len() == 1 { "is" } else { "are" },
        task.path,
        task.path,
    );
    Finding::new(FindingCode::Duplicate, Some(&task.path), line).fixed_by_doctor()
}

fn duplicates(work: &str, board: &Board, out: &mut Vec<Finding>) {
    let live = board.live_by_id();
    rejected_copies(work, board, &live, out);
    for (id, all) in live {
        let Copies { taken, kept: live } = split_copies(&all);
        for (f, holder) in taken {
            out.push(taken_id(id, f, holder));
        }
        if live.len() < 2 {
            continue;
        }
        if let Some((task, older)) = engine::copies::moved(&live) {
            out.push(older_copies(id, task, &older));
            continue;
        }
        let keep = kept_copy(&live);
        let (plain, edited): (Vec<&TaskFile>, Vec<&TaskFile>) = live
            .iter()
            .filter(|f| f.path != keep.path)
            .partition(|f| same_rest(f, keep));
        let paths = |fs: &[&TaskFile]| -> String {
            fs.iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut advice = Vec::new();
        if !edited.is_empty() {
            advice.push(format!(
                "{} holds changes {} lacks: 'coord doctor --fix' gives {} the text of the copy written last (keeping its coord block) and removes the other copies, every version staying in git history; or copy the changes in by hand and 'git rm' the copy",
                paths(&edited),
                keep.path,
                keep.path
            ));
        }
        if !plain.is_empty() {
            advice.push(format!(
                "'git rm' {} (it holds nothing the kept copy lacks), or run 'coord doctor --fix'",
                paths(&plain)
            ));
        }
        let line = format!(
            "duplicate id '{id}' in {} places: keep {} (its coord block agrees with its folder); {}",
            live.len(),
            keep.path,
            advice.join("; ")
        );
        let f = Finding::new(FindingCode::Duplicate, Some(&keep.path), line);
        out.push(f.fixed_by_doctor());
    }
}
