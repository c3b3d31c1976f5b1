//! Replaying local coord commits onto a moved remote tip by what they mean, not by their diff.
//! Reads and writes git objects only (through [`crate::git`]); no ref, index or work tree.
//!
//! A commit whose every path still holds, on the new tip, the bytes it changed is carried over
//! as it is. Otherwise:
//! - a coord operation on one task (`Coord-Task`: claim, complete, fail, heartbeat, cancel,
//!   approve, reject, retry, reassign, …) checks its precondition on the new tip: the task is
//!   still in the same folder with the same `coord.state`, `assigned_to` and `attempt` it acted
//!   on. If so it is redone: the new tip's file with the operation's `coord:` and `result:`
//!   blocks (and a reassign's `agent:`), so a person's edit made meanwhile stays. If not it is dropped and reported; a result whose task
//!   moved on is handed back as a [`Stale`] result, for the caller to record in the task's
//!   `coord.history` (never lost);
//! - a person's edit (recorded external changes) of a task coord moved meanwhile is applied to
//!   the moved file: three-way on the person's part, `coord:` and `result:` from the remote
//!   (a `result:` written into an assigned task is the agent's report: it stands when the
//!   remote's copy is the same attempt, else it is handed back as [`Stale`]).
//!   Only when two edits change the same lines does the replay stop with a [`Conflict`].

use crate::engine::operation::Pre;
use crate::engine::{OpKind, Operation};
use crate::git::{FileMode, GitError, LocalCommit, Oid, PathChange, Repo, TreeEdit};
use crate::model::State;
use crate::store::TICK_TRAILER;
use crate::yaml::{parse_bytes, remove_block, set_block, Limits};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;

/// A result whose task moved on upstream (cancelled, expired, reassigned): to be recorded in
/// its history as `stale_result`.
#[derive(Clone, Debug, PartialEq)]
pub struct Stale {
    /// The task.
    pub id: String,
    /// The result as the agent wrote it.
    pub result: Value,
}

/// A local commit to replay, and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// The commit.
    pub commit: LocalCommit,
    /// A person's commit, not coord's: replayed as an edit, path by path, whatever its
    /// message says (a person may write `Coord-Task:` in one).
    pub persons: bool,
}

/// What a replay made.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replay {
    /// The new tip.
    pub tip: Option<Oid>,
    /// Commits carried over or redone.
    pub redone: usize,
    /// One line per dropped operation (a lost claim, a cancel of a task finished meanwhile).
    pub dropped: Vec<String>,
    /// Results whose task moved on.
    pub stale: Vec<Stale>,
    /// Done tasks whose handoff step could not be placed (another clone took its id
    /// meanwhile): their steps are to be made again through the engine, at free ids.
    pub hand_off_again: Vec<String>,
    /// The `--drop-edit` values that named no change that met the remote's (a value mistyped
    /// or quoted wrong), each as given.
    pub unused_drops: Vec<String>,
    /// Claims of tasks the tip has blocked (this clone's own tick, whose commit was dropped
    /// to be redone, had unblocked them), with the later operations on those tasks: made
    /// again, oldest first, on the tip sync's tick leaves ([`Defer::BlockedClaims`]).
    pub again: Vec<Kept>,
    /// This clone's own tick commits kept to replay ([`crate::sync::Ticks::Keep`]) that the
    /// tip made moot: left for the sync's tick to derive again.
    pub rederived: usize,
}

/// Why a person's change of one path could not be replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clash {
    /// Both changed the same lines of the file.
    SameLines,
    /// Both changed a link or a submodule, which do not merge.
    NotMergeable,
    /// The commit deletes a file the remote changed or moved meanwhile.
    Deleted,
    /// The commit adds a file the remote added too with other bytes, or a task whose id the
    /// remote has elsewhere.
    Added,
    /// The commit moves a task (removes its file here, adds it there) the remote moved to
    /// another place meanwhile.
    MovedOn,
    /// The commit changes a file the remote deleted meanwhile.
    Gone,
    /// The commit puts a file where the remote has a folder, or inside a path the remote has
    /// as a file.
    FileAndFolder,
    /// The commit moves the work folder (`work_dir` in coord.yaml, or its files to another
    /// folder): replayed path by path onto a remote that moved on meanwhile, a task would end
    /// in two folders or outside coord's.
    WorkDirMoved,
}

/// A person's change the remote made impossible to replay: the replay stopped and nothing was
/// changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// What clashed.
    pub clash: Clash,
    /// The local commit, in hex.
    pub commit: String,
    /// Its summary.
    pub summary: String,
    /// The path the local commit changed.
    pub path: String,
    /// Where that file is on the remote tip, if anywhere.
    pub remote_path: Option<String>,
    /// The `--drop-edit` values this sync was given (`COMMIT:PATH`): to give again with the
    /// next one.
    pub dropped_before: Vec<String>,
}

/// Why a replay stopped.
#[derive(Debug)]
pub enum Stop {
    /// A git failure.
    Git(GitError),
    /// Two edits of the same lines.
    Conflict(Box<Conflict>),
}

impl From<GitError> for Stop {
    fn from(e: GitError) -> Stop {
        Stop::Git(e)
    }
}

/// What one commit became.
enum Step {
    Redone(Option<Oid>),
    /// A person's edit redone without the parts named in `dropped`, which the remote made
    /// moot, and with the results in `stale` handed back (their task moved on).
    Partly {
        tip: Option<Oid>,
        dropped: Vec<String>,
        stale: Vec<Stale>,
    },
    Dropped(String),
    Stale(Stale),
    /// A handoff step whose id the remote has for another task: the parent's steps are made
    /// again after the replay.
    HandOffAgain(String),
    /// A claim of a task the tip has blocked: made again after sync's tick.
    ClaimAgain,
    /// One of this clone's own tick commits the tip made moot: the sync's tick derives it
    /// again.
    Rederive,
}

/// A person's edit to leave out of the replay when it conflicts (`coord sync --drop-edit
/// COMMIT:PATH`, the way out of a conflict that keeps every other local commit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DropEdit {
    /// The commit, in hex (a prefix of at least 7 digits).
    pub commit: String,
    /// The path it changed.
    pub path: String,
}

impl std::str::FromStr for DropEdit {
    type Err = String;

    fn from_str(s: &str) -> Result<DropEdit, String> {
        match s.split_once(':') {
            Some((c, p))
                if c.len() >= 7 && c.chars().all(|x| x.is_ascii_hexdigit()) && !p.is_empty() =>
            {
                Ok(DropEdit {
                    commit: c.to_ascii_lowercase(),
                    path: p.to_string(),
                })
            }
            _ => Err(format!(
                "{s:?} is not COMMIT:PATH (as coord sync printed it)"
            )),
        }
    }
}

/// Whether a replay puts off the claims of tasks its tip has blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defer {
    /// A claim of a task the tip has blocked (this clone's own tick, whose commit was
    /// dropped to be redone, had unblocked it) waits, with the later operations on its task,
    /// in [`Replay::again`], for a replay onto the tip the sync's tick leaves.
    BlockedClaims,
    /// Every commit is replayed now (a claim of a blocked task is lost).
    Nothing,
}

/// Replays `commits` (local commits, oldest first) onto `onto`, leaving out the conflicting
/// edits named in `drop`.
pub fn replay(
    repo: &Repo,
    work_dir: &str,
    onto: Oid,
    commits: &[Kept],
    drop: &[DropEdit],
    defer: Defer,
) -> Result<Replay, Stop> {
    let mut out = Replay {
        tip: Some(onto),
        ..Replay::default()
    };
    let mut tip = onto;
    // Operations whose handoff is made again after the replay: their other steps are left
    // out too (a fan-out's join names its children).
    let mut handed_again: Vec<&str> = Vec::new();
    let left_out = RefCell::new(Vec::new());
    let used = RefCell::new(vec![false; drop.len()]);
    // Tasks whose claim was put off: their later operations wait with it.
    let mut put_off: Vec<&str> = Vec::new();
    for kept in commits {
        let c = &kept.commit;
        let op_id = trailer(c, "Coord-Op-Id");
        if !kept.persons && trailer(c, "Coord-Task").is_some_and(|id| put_off.contains(&id)) {
            out.again.push(kept.clone());
            continue;
        }
        if !kept.persons
            && trailer(c, "Coord-From") == Some("new")
            && op_id.is_some_and(|op| handed_again.contains(&op))
        {
            continue;
        }
        let oid = Oid::from_str(&c.info.oid).map_err(|e| GitError::Git {
            context: format!("bad commit id {}", c.info.oid),
            source: e,
        })?;
        let r = Replayer {
            repo,
            work_dir,
            tip,
            oid,
            commit: c,
            persons: kept.persons,
            parent: repo.first_parent(oid)?,
            drop,
            left_out: &left_out,
            used: &used,
            defer,
        };
        match r.step()? {
            Step::Redone(Some(new)) => {
                tip = new;
                out.redone += 1;
            }
            Step::Redone(None) => {}
            Step::Partly {
                tip: new,
                dropped,
                stale,
            } => {
                if let Some(new) = new {
                    tip = new;
                    out.redone += 1;
                }
                out.dropped.extend(dropped);
                out.stale.extend(stale);
            }
            Step::Dropped(line) => out.dropped.push(line),
            Step::Stale(s) => out.stale.push(s),
            Step::HandOffAgain(parent) => {
                handed_again.extend(op_id);
                out.hand_off_again.push(parent);
            }
            Step::ClaimAgain => {
                put_off.extend(trailer(c, "Coord-Task"));
                out.again.push(kept.clone());
            }
            Step::Rederive => out.rederived += 1,
        }
    }
    let used = used.borrow();
    out.unused_drops = drop
        .iter()
        .zip(used.iter())
        .filter(|(_, used)| !**used)
        .map(|(d, _)| format!("{}:{}", d.commit, d.path))
        .collect();
    out.tip = Some(tip);
    Ok(out)
}

struct Replayer<'a> {
    repo: &'a Repo,
    work_dir: &'a str,
    tip: Oid,
    oid: Oid,
    commit: &'a LocalCommit,
    persons: bool,
    /// The commit's first parent: what the person saw when making it.
    parent: Option<Oid>,
    drop: &'a [DropEdit],
    /// Ids of tasks whose creation an earlier commit's drop left out: later changes of them
    /// are left out too (they would land on another clone's task of that id).
    left_out: &'a RefCell<Vec<String>>,
    /// Which of `drop` left a change out so far.
    used: &'a RefCell<Vec<bool>>,
    defer: Defer,
}

impl Replayer<'_> {
    fn step(&self) -> Result<Step, Stop> {
        let changes = self.repo.commit_changes(self.oid)?;
        if changes.is_empty() && self.persons {
            // `git commit --allow-empty`: kept as made.
            let tip = self
                .repo
                .commit_edits(self.tip, self.oid, &[], None, true)?;
            return Ok(Step::Redone(tip));
        }
        if self.persons && moves_work_dir(self.repo, self.tip, &changes)? {
            return Err(Stop::Conflict(Box::new(Conflict {
                clash: Clash::WorkDirMoved,
                commit: self.commit.info.oid.clone(),
                summary: self.commit.info.summary.clone(),
                path: CONFIG.to_string(),
                remote_path: None,
                dropped_before: self.drops_given(),
            })));
        }
        if let Some(id) = self
            .trailer("Coord-Task")
            .filter(|id| !self.persons && self.left_out.borrow().iter().any(|l| l == id))
        {
            return Ok(self.dropped(id, "its task was left out above, as asked"));
        }
        if let Some(lost) = self.claim_of_reopened(&changes)? {
            return Ok(lost);
        }
        if self.applies_as_is(&changes)? {
            let edits: Vec<_> = changes.iter().map(as_committed).collect();
            return Ok(Step::Redone(self.commit_with(&edits)?));
        }
        if !self.persons && self.is_tick() {
            return self.tick_again(&changes);
        }
        // A new file and a person's edit are merged path by path; an operation on a task is
        // redone by its precondition.
        let files = self.persons
            || self
                .op()
                .is_some_and(|op| matches!(op.kind, OpKind::New | OpKind::Edit));
        if !files && self.trailer("Coord-From") == Some("new") {
            if let Some(parent) = self.step_parent(&changes)? {
                return Ok(Step::HandOffAgain(parent));
            }
        }
        match self.trailer("Coord-Task") {
            Some(id) if !files => self.operation(id, &changes),
            // A tick commit a person amended: coord's move of the task is an edit of the task
            // wherever the remote has it (the tick redoes the move), the rest the person's.
            Some(id) if self.amended_tick() => self.edit(&move_as_edit(changes, id)),
            _ => self.edit(&changes),
        }
    }

    fn trailer(&self, key: &str) -> Option<&str> {
        trailer(self.commit, key)
    }

    /// Returns whether this is a tick commit a person amended (a person's commit, by its
    /// committer, with a tick's trailer).
    fn amended_tick(&self) -> bool {
        self.persons && self.is_tick()
    }

    /// Returns whether the commit carries the tick's trailer.
    fn is_tick(&self) -> bool {
        let (key, value) = TICK_TRAILER.split_once(": ").unwrap_or_default();
        self.trailer(key) == Some(value)
    }

    /// Redoes one of this clone's own tick commits that does not apply as it is (kept by a
    /// hub, [`crate::sync::Ticks::Keep`]): a move of one task, on the tip's copy of the task
    /// (a person's edit made meanwhile stays), when the tip has it as the tick found it. A
    /// commit of several transitions, or one whose task moved on, is left for the sync's tick
    /// to derive again: a tick commit never stops a sync.
    fn tick_again(&self, changes: &[PathChange]) -> Result<Step, Stop> {
        let subjects = self.commit.info.trailers.iter();
        let named = subjects.filter(|(k, _)| k == "Coord-Task" || k == "Coord-Agent");
        let (Some(id), 1) = (self.trailer("Coord-Task"), named.count()) else {
            return Ok(Step::Rederive);
        };
        Ok(match self.operation(id, changes)? {
            Step::Redone(tip) => Step::Redone(tip),
            _ => Step::Rederive,
        })
    }

    /// Returns whether every path still holds the bytes and mode the commit started from, and
    /// no task file it adds is elsewhere on the tip (another clone's task of that id, or the
    /// task moved on): carrying such a commit over would put one id in two places.
    fn applies_as_is(&self, changes: &[PathChange]) -> Result<bool, GitError> {
        for c in changes {
            if self.repo.entry_at(self.tip, &c.path)? != c.old.map(|o| (o, c.old_mode)) {
                return Ok(false);
            }
        }
        let removed: Vec<&str> = changes
            .iter()
            .filter(|c| c.new.is_none())
            .map(|c| c.path.as_str())
            .collect();
        for c in changes.iter().filter(|c| c.old.is_none()) {
            if let Some(at) = self.elsewhere(&c.path)? {
                if !removed.contains(&at.as_str()) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn commit_with(&self, edits: &[TreeEdit]) -> Result<Option<Oid>, GitError> {
        self.repo
            .commit_edits(self.tip, self.oid, edits, None, false)
    }

    /// Redoes an operation on one task when the task is still as it found it; else drops it.
    /// The precondition is the commit's `Coord-Pre-*` trailers, or (a commit written before
    /// operations were named) the `coord:` block of the file it started from.
    fn operation(&self, id: &str, changes: &[PathChange]) -> Result<Step, Stop> {
        let names = [format!("{id}.yaml"), format!("{id}.yml")];
        let named = |p: &str| {
            names
                .iter()
                .any(|n| p.rsplit('/').next() == Some(n.as_str()))
        };
        let src = changes.iter().find(|c| c.old.is_some() && named(&c.path));
        let dst = changes.iter().find(|c| c.new.is_some() && named(&c.path));
        let (Some(src), Some(dst)) = (src, dst) else {
            return Ok(self.dropped(id, "its file is not there any more"));
        };
        let before = self.text(src.old)?;
        let now = match self.repo.blob_at(self.tip, &src.path)? {
            Some(b) => Some(self.repo.blob_bytes(b)?),
            None => None,
        };
        let after = self.text(dst.new)?;
        let holds = now
            .as_deref()
            .is_some_and(|n| match self.op().and_then(|o| o.pre) {
                Some(pre) => pre_holds(&pre, n),
                None => same_attempt(&before, n),
            });
        if !holds && self.defer == Defer::BlockedClaims && self.is_claim() && self.blocked(src)? {
            return Ok(Step::ClaimAgain);
        }
        let reassign = self.op().is_some_and(|o| o.kind == OpKind::Reassign);
        let redone = match (holds, now) {
            (true, Some(now)) => redo(&before, &now, &after).and_then(|text| {
                if reassign {
                    with_agent(&text, &after)
                } else {
                    Some(text)
                }
            }),
            _ => None,
        };
        let Some(text) = redone else {
            return Ok(self.moved_on(id, &after));
        };
        let mut edits = vec![TreeEdit::file(
            &dst.path,
            Some(self.repo.write_blob(&text)?),
        )];
        if src.path != dst.path {
            edits.push(TreeEdit::file(&src.path, None));
        }
        for c in changes
            .iter()
            .filter(|c| c.path != src.path && c.path != dst.path)
        {
            if self.repo.blob_at(self.tip, &c.path)? == c.old {
                edits.push(as_committed(c));
            }
        }
        Ok(Step::Redone(self.commit_with(&edits)?))
    }

    /// Returns the lost claim when this commit is a claim of a task one of whose
    /// dependencies a person moved back out of `done/` on the remote meanwhile.
    fn claim_of_reopened(&self, changes: &[PathChange]) -> Result<Option<Step>, GitError> {
        let claim = !self.persons && self.op().is_some_and(|o| o.kind == OpKind::Claim);
        let (Some(id), true) = (self.trailer("Coord-Task"), claim) else {
            return Ok(None);
        };
        let Some(claimed) = changes.iter().find_map(|c| c.new) else {
            return Ok(None);
        };
        let dep = self.reopened_dep(&self.repo.blob_bytes(claimed)?)?;
        Ok(dep.map(|dep| {
            let why = format!("its dependency {dep} is no longer done on the remote");
            self.dropped(id, &why)
        }))
    }

    /// Returns a dependency of the task `text` that was finished where this clone's history
    /// and the remote's meet and that the tip has only outside `done/` and `archive/` (a
    /// person moved it back on the remote meanwhile): a claim of the task does not stand
    /// then, as it would not have been made. A dependency whose file is gone does not count,
    /// nor one this clone finished itself (the remote never had it done).
    fn reopened_dep(&self, text: &[u8]) -> Result<Option<String>, GitError> {
        let Ok(doc) = parse_bytes(text, &Limits::default()) else {
            return Ok(None);
        };
        let deps = doc.value.get("depends_on").and_then(Value::as_array);
        let Some(base) = self.repo.merge_base(self.tip, self.oid)? else {
            return Ok(None);
        };
        for dep in deps.into_iter().flatten().filter_map(Value::as_str) {
            if self.done_at(base, dep)? == Some(true) && self.done_at(self.tip, dep)? == Some(false)
            {
                return Ok(Some(dep.to_string()));
            }
        }
        Ok(None)
    }

    /// Returns whether commit `at` has task `id` finished (a copy in `done/` or `archive/`),
    /// None when it has no file of that id.
    fn done_at(&self, at: Oid, id: &str) -> Result<Option<bool>, GitError> {
        let profiles = format!("{}/agents/", self.work_dir);
        let finished = [
            format!("{}/done/", self.work_dir),
            format!("{}/archive/", self.work_dir),
        ];
        let names = [format!("{id}.yaml"), format!("{id}.yml")];
        let found = self.repo.find_named(at, self.work_dir, &names)?;
        let copies: Vec<&String> = found.iter().filter(|p| !p.starts_with(&profiles)).collect();
        if copies.is_empty() {
            return Ok(None);
        }
        Ok(Some(copies.iter().any(|p| {
            finished.iter().any(|f| p.starts_with(f.as_str()))
        })))
    }

    /// Returns the parent of the handoff step this commit creates (its `coord.parent`), if it
    /// creates one.
    fn step_parent(&self, changes: &[PathChange]) -> Result<Option<String>, GitError> {
        let [PathChange {
            old: None,
            new: Some(blob),
            ..
        }] = changes
        else {
            return Ok(None);
        };
        let doc = parse_bytes(&self.repo.blob_bytes(*blob)?, &Limits::default()).ok();
        Ok(doc.and_then(|d| {
            d.value
                .get("coord")?
                .get("parent")?
                .as_str()
                .map(String::from)
        }))
    }

    /// Returns the operation the commit's trailers name, if they name one.
    fn op(&self) -> Option<Operation> {
        Operation::from_trailers(&self.commit.info.trailers)
    }

    fn text(&self, blob: Option<Oid>) -> Result<Vec<u8>, GitError> {
        match blob {
            Some(b) => self.repo.blob_bytes(b),
            None => Ok(Vec::new()),
        }
    }

    /// The task moved on upstream: a result (or a result set aside as stale) is handed back
    /// to be kept in the task's history, anything else dropped.
    fn moved_on(&self, id: &str, after: &[u8]) -> Step {
        let doc = parse_bytes(after, &Limits::default()).ok();
        let kind = self.op().map(|o| o.kind);
        let result = match kind {
            Some(OpKind::SetAside) => doc.and_then(|d| last_stale_result(&d.value)),
            Some(k) if k.reports() => doc.and_then(|d| d.value.get("result").cloned()),
            Some(_) => None,
            None if self.trailer("Coord-From") == Some("assigned")
                && self.trailer("Coord-To") == Some("assigned") =>
            {
                doc.and_then(|d| d.value.get("result").cloned())
            }
            None => None,
        };
        match result {
            Some(result) => Step::Stale(Stale {
                id: id.to_string(),
                result,
            }),
            None => self.dropped(id, "the task changed on the remote meanwhile"),
        }
    }

    /// Returns whether the tip has the task whose file `src` was blocked, and blocked still.
    fn blocked(&self, src: &PathChange) -> Result<bool, GitError> {
        let name = src.path.rsplit('/').next().unwrap_or(&src.path);
        let path = format!("{}/blocked/{name}", self.work_dir);
        match self.repo.blob_at(self.tip, &path)? {
            Some(b) => Ok(is_blocked(&self.repo.blob_bytes(b)?)),
            None => Ok(false),
        }
    }

    /// Returns whether the commit is a claim (by its operation, or by the move of a commit
    /// written before operations were named).
    fn is_claim(&self) -> bool {
        match self.op() {
            Some(op) => op.kind == OpKind::Claim,
            None => {
                self.trailer("Coord-From") == Some("ready")
                    && self.trailer("Coord-To") == Some("assigned")
            }
        }
    }

    fn dropped(&self, id: &str, why: &str) -> Step {
        let what = if self.is_claim() {
            "lost claim"
        } else {
            "dropped"
        };
        Step::Dropped(format!(
            "{what}: {} ({id}: {why})",
            self.commit.info.summary
        ))
    }

    /// Applies a person's edit path by path, following files coord moved meanwhile. A file
    /// the edit adds whose task the remote already has elsewhere (a hand move of a task that
    /// moved on upstream) is left out and reported: a task id lives in one place.
    fn edit(&self, changes: &[PathChange]) -> Result<Step, Stop> {
        let mut edits = Vec::new();
        let mut moot = Vec::new();
        let mut stale = Vec::new();
        let moved = self.hand_moves(changes, &mut edits, &mut moot, &mut stale)?;
        // A hand move (the file removed here and added there in one commit) is no copy.
        let removed: Vec<&str> = changes
            .iter()
            .filter(|c| c.new.is_none())
            .map(|c| c.path.as_str())
            .collect();
        for c in changes.iter().filter(|c| !moved.contains(&c.path)) {
            if c.old.is_some() && self.was_left_out(&c.path) {
                moot.push(format!(
                    "dropped: the change of {} in {:?} (its task was left out above, as asked)",
                    c.path, self.commit.info.summary
                ));
                continue;
            }
            let entry = self.repo.entry_at(self.tip, &c.path)?;
            if c.new.is_some() && self.file_and_folder(&c.path, entry)? {
                moot.push(self.stop_unless_dropped(Clash::FileAndFolder, &c.path, None)?);
                continue;
            }
            let now = entry.map(|(id, _)| id);
            let tip_mode = entry.map(|(_, mode)| mode);
            if c.old.is_none() && now.is_none() {
                let at = self.elsewhere(&c.path)?;
                if let Some(at) = at.filter(|at| !removed.contains(&at.as_str())) {
                    // A new task (a person's file, or coord's `new`) is theirs to drop; the
                    // moot half of a move whose task moved on upstream is reported.
                    let hand_move = same_id_removed(&removed, &c.path);
                    if self.persons || !same_name_elsewhere(changes, &c.path, false) {
                        let clash = match hand_move {
                            true => Clash::MovedOn,
                            false => Clash::Added,
                        };
                        moot.push(self.stop_unless_dropped(clash, &c.path, Some(at))?);
                        continue;
                    }
                    moot.push(format!(
                        "dropped: {} ({}: the task is at {at} on the remote)",
                        self.commit.info.summary, c.path
                    ));
                    continue;
                }
            }
            if now == c.old || (now == c.new && tip_mode != c.new.map(|_| c.new_mode)) {
                let mode = if c.old_mode == c.new_mode {
                    tip_mode
                } else {
                    None
                };
                edits.push(TreeEdit {
                    path: c.path.clone(),
                    to: c.new.map(|b| (b, mode.unwrap_or(c.new_mode))),
                });
                continue;
            }
            if c.new.is_none() && now.is_none() {
                // Deleted here, moved on there: the task lives on unless the person says so.
                // (A hand move, which adds the same name elsewhere, goes as its add does.)
                let moved = self.moved_copy(&c.path, None)?;
                if let Some(at) = moved.filter(|_| !same_name_elsewhere(changes, &c.path, true)) {
                    moot.push(self.stop_unless_dropped(Clash::Deleted, &c.path, Some(at.0))?);
                }
                continue;
            }
            if now == c.new {
                continue;
            }
            let (Some(old), Some(new)) = (c.old, c.new) else {
                let clash = match c.new {
                    None => Clash::Deleted,
                    Some(_) => Clash::Added,
                };
                moot.push(self.stop_unless_dropped(clash, &c.path, Some(c.path.clone()))?);
                continue;
            };
            let Some((at, theirs)) = self.moved_copy(&c.path, now)? else {
                let id = task_id(&c.path);
                if self.amended_tick() && self.trailer("Coord-Task") == Some(id.as_str()) {
                    // coord's move of a task the remote deleted: moot.
                    moot.push(format!(
                        "dropped: the move of {id} in {:?} ({id}: not on the remote any more)",
                        self.commit.info.summary
                    ));
                    continue;
                }
                moot.push(self.stop_unless_dropped(Clash::Gone, &c.path, None)?);
                continue;
            };
            let mode = match c.old_mode == c.new_mode {
                true => self.repo.mode_at(self.tip, &at)?.unwrap_or(c.new_mode),
                false => c.new_mode,
            };
            if !is_file(c.old_mode) || !is_file(c.new_mode) || !is_file(mode) {
                moot.push(self.stop_unless_dropped(Clash::NotMergeable, &c.path, Some(at))?);
                continue;
            }
            let moved = at != c.path;
            match self.merge_file(&at, moved, [old, new, theirs], &mut stale)? {
                Some(text) => edits.push(TreeEdit {
                    path: at,
                    to: Some((self.repo.write_blob(&text)?, mode)),
                }),
                None => moot.push(self.stop_unless_dropped(Clash::SameLines, &c.path, Some(at))?),
            }
        }
        let tip = self.commit_with(&edits)?;
        Ok(if moot.is_empty() && stale.is_empty() {
            Step::Redone(tip)
        } else {
            Step::Partly {
                tip,
                dropped: moot,
                stale,
            }
        })
    }

    /// Replays the hand moves (a file removed at one path and added under the same name at
    /// another, in one commit) whose old file the remote changed in place meanwhile: the file
    /// moves with both changes merged, or the move stops as one conflict named by its new
    /// path (dropping it drops the whole move: never the task in two places). Returns the
    /// paths it took.
    fn hand_moves(
        &self,
        changes: &[PathChange],
        edits: &mut Vec<TreeEdit>,
        moot: &mut Vec<String>,
        stale: &mut Vec<Stale>,
    ) -> Result<Vec<String>, Stop> {
        let mut taken = Vec::new();
        for (from, to) in hand_move_pairs(changes, |p| self.is_task_path(p)) {
            let (Some(old), Some(new)) = (from.old, to.new) else {
                continue;
            };
            let now = self.repo.entry_at(self.tip, &from.path)?;
            let Some((theirs, mode)) = now.filter(|(id, _)| *id != old) else {
                continue;
            };
            let files = [from.old_mode, to.new_mode, mode].into_iter().all(is_file);
            if !files || self.repo.entry_at(self.tip, &to.path)?.is_some() {
                continue;
            }
            taken.extend([from.path.clone(), to.path.clone()]);
            match self.merge_file(&to.path, true, [old, new, theirs], stale)? {
                Some(text) => {
                    let blob = self.repo.write_blob(&text)?;
                    edits.push(TreeEdit::file(&from.path, None));
                    edits.push(TreeEdit {
                        path: to.path.clone(),
                        to: Some((blob, to.new_mode)),
                    });
                }
                None => moot.push(self.stop_unless_dropped(
                    Clash::SameLines,
                    &to.path,
                    Some(from.path.clone()),
                )?),
            }
        }
        Ok(taken)
    }

    /// Returns the three-way merge of a file whose `[base, ours, theirs]` blobs are given, to
    /// be written at `at` (None when both changed the same lines); `moved` when the file is
    /// not where the edit found it (a task moved to another folder is another attempt, even
    /// before a tick writes so). A task file merges as a person's edit of a task; a result it
    /// hands back is added to `stale`.
    fn merge_file(
        &self,
        at: &str,
        moved: bool,
        [base, ours, theirs]: [Oid; 3],
        stale: &mut Vec<Stale>,
    ) -> Result<Option<Vec<u8>>, GitError> {
        let (base, ours, theirs) = (
            self.repo.blob_bytes(base)?,
            self.repo.blob_bytes(ours)?,
            self.repo.blob_bytes(theirs)?,
        );
        if !self.is_task_path(at) {
            return self.repo.merge_text(&base, &ours, &theirs);
        }
        let (text, result) = merge_task(self.repo, moved, [&base, &ours, &theirs])?;
        stale.extend(result.map(|result| Stale {
            id: task_id(at),
            result,
        }));
        Ok(text)
    }

    /// Returns the `--drop-edit` values this sync was given.
    fn drops_given(&self) -> Vec<String> {
        self.drop
            .iter()
            .map(|d| format!("{}:{}", d.commit, d.path))
            .collect()
    }

    /// Returns whether `path` is the file of a task an earlier drop left out.
    fn was_left_out(&self, path: &str) -> bool {
        self.is_task_path(path) && self.left_out.borrow().contains(&task_id(path))
    }

    /// Returns whether `path` is a task file: a `.yaml`/`.yml` file under the work folder,
    /// agent profiles aside. Only a task file has `coord:` and `result:` blocks of coord's.
    fn is_task_path(&self, path: &str) -> bool {
        let profiles = format!("{}/agents/", self.work_dir);
        path.starts_with(&format!("{}/", self.work_dir))
            && !path.starts_with(&profiles)
            && path.rsplit('/').next().is_some_and(is_task_file)
    }

    /// Returns where the remote tip has the task of `path`'s id (`.yaml` or `.yml`) at another
    /// path under the work folder (agent profiles aside), if it has one the commit's parent did not have
    /// there: a file the person added beside one they saw (a corrected task next to its
    /// rejected copy in `invalid/`) is theirs to add, as it was before the remote moved.
    fn elsewhere(&self, path: &str) -> Result<Option<String>, GitError> {
        let profiles = format!("{}/agents/", self.work_dir);
        let name = path.rsplit('/').next().filter(|n| is_task_file(n));
        let Some(name) = name.filter(|_| !path.starts_with(&profiles)) else {
            return Ok(None);
        };
        let id = task_id(name);
        let names = [format!("{id}.yaml"), format!("{id}.yml")];
        let found = self.repo.find_named(self.tip, self.work_dir, &names)?;
        for at in found {
            if at == path || at.starts_with(&profiles) {
                continue;
            }
            let seen = match self.parent {
                Some(p) => self.repo.blob_at(p, &at)?.is_some(),
                None => false,
            };
            if !seen {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }

    /// Returns where the remote tip has the file: at the same path, or (a task file coord
    /// moved) the one file under the work folder with the same name.
    fn moved_copy(&self, path: &str, now: Option<Oid>) -> Result<Option<(String, Oid)>, GitError> {
        if let Some(b) = now {
            return Ok(Some((path.to_string(), b)));
        }
        let Some(name) = path.rsplit('/').next() else {
            return Ok(None);
        };
        let profiles = format!("{}/agents/", self.work_dir);
        let found = self
            .repo
            .find_named(self.tip, self.work_dir, &[name.to_string()])?;
        let found: Vec<_> = found
            .iter()
            .filter(|at| at.starts_with(&profiles) == path.starts_with(&profiles))
            .collect();
        let [at] = found.as_slice() else {
            return Ok(None);
        };
        Ok(self
            .repo
            .blob_at(self.tip, at)?
            .map(|b| (at.to_string(), b)))
    }

    /// Returns whether a file at `path` would clash with a folder: the tip has a folder
    /// there (`entry`), or a file at one of its parent paths.
    fn file_and_folder(
        &self,
        path: &str,
        entry: Option<(Oid, FileMode)>,
    ) -> Result<bool, GitError> {
        if entry.is_some_and(|(_, mode)| mode == FileMode::Tree) {
            return Ok(true);
        }
        for (i, _) in path.match_indices('/') {
            match self.repo.entry_at(self.tip, &path[..i])? {
                Some((_, FileMode::Tree)) => {}
                Some(_) => return Ok(true),
                None => return Ok(false),
            }
        }
        Ok(false)
    }

    /// Stops with a conflict at `path`, unless the person asked to drop this edit: then the
    /// remote's version stays and the line to report is returned.
    fn stop_unless_dropped(
        &self,
        clash: Clash,
        path: &str,
        remote_path: Option<String>,
    ) -> Result<String, Stop> {
        let named = self
            .drop
            .iter()
            .position(|d| d.path == path && self.commit.info.oid.starts_with(&d.commit));
        if let Some(i) = named {
            self.used.borrow_mut()[i] = true;
        }
        let dropped = named.is_some();
        // A task moved on upstream lives on: later edits of it follow it there.
        if dropped && clash == Clash::Added && self.is_task_path(path) {
            self.left_out.borrow_mut().push(task_id(path));
        }
        if !dropped {
            return Err(Stop::Conflict(Box::new(Conflict {
                clash,
                commit: self.commit.info.oid.clone(),
                summary: self.commit.info.summary.clone(),
                path: path.to_string(),
                remote_path,
                dropped_before: self.drops_given(),
            })));
        }
        Ok(format!(
            "dropped as asked: the edit of {path} in {:?} ({}); the remote's version stays",
            self.commit.info.summary,
            short(&self.commit.info.oid)
        ))
    }
}

/// The configuration file, whose `work_dir` names the work folder.
const CONFIG: &str = "coord.yaml";

/// Returns the `work_dir` a coord.yaml blob names (`work` when none, or no file).
fn work_dir_of(repo: &Repo, blob: Option<Oid>) -> Result<String, GitError> {
    let named = match blob {
        Some(blob) => parse_bytes(&repo.blob_bytes(blob)?, &Limits::default())
            .ok()
            .and_then(|d| d.value.get("work_dir")?.as_str().map(String::from)),
        None => None,
    };
    Ok(named.unwrap_or_else(|| "work".to_string()))
}

/// Returns whether the changes move the work folder: set another `work_dir` in coord.yaml,
/// or move files of the tip's work folder to the same paths under another folder (a `git mv
/// work tasks` committed before coord.yaml is changed).
fn moves_work_dir(repo: &Repo, tip: Oid, changes: &[PathChange]) -> Result<bool, GitError> {
    if let Some(c) = changes.iter().find(|c| c.path == CONFIG) {
        if work_dir_of(repo, c.old)? != work_dir_of(repo, c.new)? {
            return Ok(true);
        }
    }
    let prefix = format!("{}/", work_dir_of(repo, repo.blob_at(tip, CONFIG)?)?);
    let removed: std::collections::HashSet<&str> = changes
        .iter()
        .filter(|c| c.new.is_none())
        .filter_map(|c| c.path.strip_prefix(&prefix))
        .collect();
    let moved_out = changes
        .iter()
        .filter(|c| c.old.is_none() && !c.path.starts_with(&prefix))
        .any(|c| {
            c.path
                .match_indices('/')
                .any(|(i, _)| removed.contains(&c.path[i + 1..]))
        });
    Ok(moved_out)
}

/// Returns whether a mode is a regular file's (the only kind whose bytes merge).
fn is_file(mode: FileMode) -> bool {
    matches!(
        mode,
        FileMode::Blob | FileMode::BlobExecutable | FileMode::BlobGroupWritable
    )
}

/// Returns `changes` with the move of task `id` (its file removed at one path and added at
/// another) made one change at the old path, from the old bytes to the new.
fn move_as_edit(changes: Vec<PathChange>, id: &str) -> Vec<PathChange> {
    let names = [format!("{id}.yaml"), format!("{id}.yml")];
    let named = |c: &PathChange| names.iter().any(|n| c.path.rsplit('/').next() == Some(n));
    let from = changes.iter().find(|c| named(c) && c.new.is_none());
    let to = changes.iter().find(|c| named(c) && c.old.is_none());
    let (Some(from), Some(to)) = (from.cloned(), to.cloned()) else {
        return changes;
    };
    let mut out: Vec<PathChange> = changes
        .into_iter()
        .filter(|c| c.path != from.path && c.path != to.path)
        .collect();
    out.push(PathChange {
        new: to.new,
        new_mode: to.new_mode,
        ..from
    });
    out
}

/// Returns the hand moves of tasks among `changes`: a task file removed at one path and one
/// of the same id added at another (`is_task` tells a task file's path).
fn hand_move_pairs(
    changes: &[PathChange],
    is_task: impl Fn(&str) -> bool,
) -> Vec<(&PathChange, &PathChange)> {
    let tasks = || changes.iter().filter(|c| is_task(&c.path));
    let mut added: HashMap<String, &PathChange> = HashMap::new();
    for c in tasks().filter(|c| c.old.is_none()) {
        added.entry(task_id(&c.path)).or_insert(c);
    }
    tasks()
        .filter(|c| c.new.is_none())
        .filter_map(|from| {
            let to = added.get(&task_id(&from.path))?;
            (to.path != from.path).then_some((from, *to))
        })
        .collect()
}

/// Returns whether `changes` add (`added`) or remove a file named like `path` at another
/// path: the other half of a move.
/// Returns whether one of the `removed` paths is a file of the task `path` adds: the commit
/// moves the task (`.yaml` or `.yml`).
fn same_id_removed(removed: &[&str], path: &str) -> bool {
    let id = task_id(path);
    removed
        .iter()
        .any(|r| *r != path && is_task_file(r.rsplit('/').next().unwrap_or(r)) && task_id(r) == id)
}

fn same_name_elsewhere(changes: &[PathChange], path: &str, added: bool) -> bool {
    let name = path.rsplit('/').next();
    changes.iter().any(|c| {
        let half = if added {
            c.old.is_none()
        } else {
            c.new.is_none()
        };
        half && c.path != path && c.path.rsplit('/').next() == name
    })
}

/// Returns the value of the commit's trailer `key`, if it has one.
fn trailer<'c>(c: &'c LocalCommit, key: &str) -> Option<&'c str> {
    c.info
        .trailers
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The path as the commit left it: its blob and mode, or removed.
fn as_committed(c: &PathChange) -> TreeEdit {
    TreeEdit {
        path: c.path.clone(),
        to: c.new.map(|b| (b, c.new_mode)),
    }
}

fn short(oid: &str) -> String {
    oid.chars().take(10).collect()
}

/// Returns whether a file name is a task's (`.yaml` / `.yml`; `.gitkeep`, `.errors` and the
/// like can stand in many folders).
fn is_task_file(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml")
}

/// Returns whether `now` is the task in the state `before` was in: same `coord.state`,
/// `assigned_to` and `attempt`.
fn same_attempt(before: &[u8], now: &[u8]) -> bool {
    let coord = |b: &[u8]| {
        parse_bytes(b, &Limits::default()).ok().map(|d| {
            let c = d.value.get("coord").cloned().unwrap_or(Value::Null);
            (
                c.get("state").cloned(),
                c.get("assigned_to").cloned(),
                c.get("attempt").cloned(),
            )
        })
    };
    matches!((coord(before), coord(now)), (Some(a), Some(b)) if a == b)
}

/// Returns whether the task file `text` is blocked (waits for its dependencies).
fn is_blocked(text: &[u8]) -> bool {
    parse_bytes(text, &Limits::default()).is_ok_and(|doc| {
        doc.value.pointer("/coord/state").and_then(Value::as_str) == Some("blocked")
    })
}

/// Returns whether the task file `now` is in the state a precondition names: the same
/// `coord.state`, `coord.assigned_to` and `coord.attempt`.
fn pre_holds(pre: &Pre, now: &[u8]) -> bool {
    let Ok(doc) = parse_bytes(now, &Limits::default()) else {
        return false;
    };
    let c = doc.value.get("coord").cloned().unwrap_or(Value::Null);
    let agent = pre.agent.as_ref().map(|a| Value::from(a.as_str()));
    c.get("state")
        .and_then(Value::as_str)
        .and_then(State::parse)
        == pre.state
        && c.get("assigned_to").cloned() == agent
        && c.get("attempt").and_then(Value::as_u64) == Some(u64::from(pre.attempt))
}

/// Returns the result of the last `stale_result` entry of a task's `coord.history`.
fn last_stale_result(task: &Value) -> Option<Value> {
    task.pointer("/coord/history")?
        .as_array()?
        .iter()
        .rev()
        .find(|e| e.get("event").and_then(Value::as_str) == Some("stale_result"))?
        .get("result")
        .cloned()
}

/// Redoes an operation (`before` → `after`) on the remote's copy `now` of the task: `now`
/// with the operation's `coord:` and `result:` blocks, where `coord.history` is the remote's
/// with the entries the operation added after it (the history is append-only: an entry the
/// remote added meanwhile, such as a zombie's `stale_result`, is kept). None when a file does
/// not read as a block mapping.
fn redo(before: &[u8], now: &[u8], after: &[u8]) -> Option<Vec<u8>> {
    let history = |b: &[u8]| -> Option<Vec<Value>> {
        let doc = parse_bytes(b, &Limits::default()).ok()?;
        Some(match doc.value.pointer("/coord/history") {
            Some(Value::Array(h)) => h.clone(),
            _ => Vec::new(),
        })
    };
    let (old, theirs, ours) = (history(before)?, history(now)?, history(after)?);
    if theirs.len() <= old.len() || !ours.starts_with(&old) {
        return with_blocks(now, after);
    }
    let mut merged = theirs;
    merged.extend(ours.into_iter().skip(old.len()));
    let mut doc = parse_bytes(after, &Limits::default()).ok()?.value;
    doc.pointer_mut("/coord")?
        .as_object_mut()?
        .insert("history".to_string(), Value::Array(merged));
    let text = serde_json::to_string(&doc).ok()?;
    with_blocks(now, text.as_bytes())
}

/// Returns `text` with its `coord:` and `result:` blocks replaced by those of `from` (removed
/// where `from` has none); None when a file does not read as a block mapping.
fn with_blocks(text: &[u8], from: &[u8]) -> Option<Vec<u8>> {
    let from = parse_bytes(from, &Limits::default()).ok()?;
    let mut out = String::from_utf8(text.to_vec()).ok()?;
    for key in ["result", "coord"] {
        let doc = crate::yaml::parse(&out, &Limits::default()).ok()?;
        out = match from.value.get(key) {
            Some(v) => set_block(&out, &doc, key, v).ok()?,
            None => remove_block(&out, &doc, key).ok()?,
        };
    }
    Some(out.into_bytes())
}

/// Returns `text` with the `agent:` of `from` (a reassign names the new agent there as well
/// as in its `coord:` block); None when a file does not read as a block mapping.
fn with_agent(text: &[u8], from: &[u8]) -> Option<Vec<u8>> {
    let from = parse_bytes(from, &Limits::default()).ok()?;
    let out = String::from_utf8(text.to_vec()).ok()?;
    let doc = crate::yaml::parse(&out, &Limits::default()).ok()?;
    let out = match from.value.get("agent") {
        Some(v) => set_block(&out, &doc, "agent", v).ok()?,
        None => remove_block(&out, &doc, "agent").ok()?,
    };
    Some(out.into_bytes())
}

/// Returns the task's id: its file name without `.yaml` / `.yml`.
pub(crate) fn task_id(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name
        .strip_suffix(".yaml")
        .or_else(|| name.strip_suffix(".yml"));
    stem.unwrap_or(name).to_string()
}

/// Returns a person's edit of a task file (`base` → `ours`) applied to the remote's copy
/// `theirs` (None when both changed the same lines), and the result to keep as stale.
///
/// A `result:` the edit wrote into an assigned task is the agent's report, written by hand and
/// committed with git: it stands on the remote's copy when that copy is still the same
/// attempt, in the same place (not `moved`), with the result `base` had; otherwise (the task
/// moved on, by a tick or by hand, or another result
/// arrived first) it is handed back to be kept in the task's history. Any other change of
/// `result:` or `coord:` is coord's to make: those blocks come from `theirs`.
fn merge_task(
    repo: &Repo,
    moved: bool,
    [base, ours, theirs]: [&[u8]; 3],
) -> Result<(Option<Vec<u8>>, Option<Value>), GitError> {
    let merged = merge_person(repo, base, ours, theirs)?;
    let Some(result) = written_result(base, ours) else {
        return Ok((merged, None));
    };
    let counts = !moved && same_attempt(base, theirs) && result_of(theirs) == result_of(base);
    match (merged, counts) {
        // A conflict on the same attempt: the edit, result and all, is the person's to make
        // again where the task is (or to drop).
        (None, true) => Ok((None, None)),
        (Some(text), true) => Ok((with_result(&text, &result), None)),
        (merged, false) => Ok((merged, Some(result))),
    }
}

/// Returns the `result:` a person's edit `base` → `ours` wrote into a task that was assigned
/// in `base`, if it wrote one.
fn written_result(base: &[u8], ours: &[u8]) -> Option<Value> {
    let assigned = parse_bytes(base, &Limits::default())
        .ok()
        .and_then(|d| d.value.pointer("/coord/state").cloned())
        == Some(Value::from("assigned"));
    let result = result_of(ours)?;
    (assigned && result_of(base).as_ref() != Some(&result)).then_some(result)
}

/// Returns a task file's `result:` block, if it reads and has one.
fn result_of(text: &[u8]) -> Option<Value> {
    parse_bytes(text, &Limits::default())
        .ok()?
        .value
        .get("result")
        .cloned()
}

/// Returns `text` with its `result:` block set to `result`; None when it does not read as a
/// block mapping.
fn with_result(text: &[u8], result: &Value) -> Option<Vec<u8>> {
    let out = String::from_utf8(text.to_vec()).ok()?;
    let doc = crate::yaml::parse(&out, &Limits::default()).ok()?;
    Some(set_block(&out, &doc, "result", result).ok()?.into_bytes())
}

/// Returns a person's edit (`base` → `ours`) applied to the remote's copy `theirs`: the
/// fields people own merged three-way, `coord:` and `result:` taken from `theirs`. None when
/// both changed the same lines.
fn merge_person(
    repo: &Repo,
    base: &[u8],
    ours: &[u8],
    theirs: &[u8],
) -> Result<Option<Vec<u8>>, GitError> {
    let strip = |b: &[u8]| with_blocks(b, b"{}\n");
    let (Some(b), Some(o), Some(t)) = (strip(base), strip(ours), strip(theirs)) else {
        return repo.merge_text(base, ours, theirs);
    };
    let Some(merged) = repo.merge_text(&b, &o, &t)? else {
        return Ok(None);
    };
    Ok(with_blocks(&merged, theirs))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_swapped_and_people_lines_kept() {
        let person = b"# mine\ntitle: new title\nprompt: p\n";
        let coord = b"title: old\ncoord:\n  state: assigned\n  attempt: 2\n";
        let out = with_blocks(person, coord).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("# mine\ntitle: new title\nprompt: p\n"),
            "{text}"
        );
        assert!(
            text.contains("coord:\n  state: assigned\n  attempt: 2\n"),
            "{text}"
        );
        let stripped = with_blocks(coord, b"{}\n").unwrap();
        assert_eq!(stripped, b"title: old\n");
    }

    #[test]
    fn a_redo_keeps_history_entries_the_remote_added_meanwhile() {
        let before =
            b"title: t\ncoord:\n  state: assigned\n  attempt: 1\n  history:\n  - {event: a}\n";
        let now = b"title: t (edited)\ncoord:\n  state: assigned\n  attempt: 1\n  history:\n  - {event: a}\n  - {event: remote}\n";
        let after = b"title: t\ncoord:\n  state: assigned\n  attempt: 1\n  history:\n  - {event: a}\n  - {event: local}\nresult:\n  status: success\n";
        let text = String::from_utf8(redo(before, now, after).unwrap()).unwrap();
        let doc = parse_bytes(text.as_bytes(), &Limits::default())
            .unwrap()
            .value;
        let events: Vec<_> = doc["coord"]["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(events, ["a", "remote", "local"]);
        assert_eq!(doc["title"], "t (edited)");
        assert_eq!(doc["result"]["status"], "success");
        let plain = b"title: t\ncoord:\n  state: ready\n  attempt: 0\n";
        let claimed = b"title: t\ncoord:\n  state: assigned\n  attempt: 1\n";
        assert_eq!(redo(plain, plain, claimed), with_blocks(plain, claimed));
    }

    #[test]
    fn a_precondition_is_state_agent_and_attempt() {
        let pre = Pre {
            state: Some(State::Assigned),
            agent: Some("p1".parse().unwrap()),
            attempt: 1,
        };
        assert!(pre_holds(
            &pre,
            b"coord:\n  state: assigned\n  assigned_to: p1\n  attempt: 1\n"
        ));
        assert!(!pre_holds(
            &pre,
            b"coord:\n  state: assigned\n  assigned_to: p2\n  attempt: 1\n"
        ));
        assert!(!pre_holds(
            &pre,
            b"coord:\n  state: assigned\n  assigned_to: p1\n  attempt: 2\n"
        ));
        assert!(!pre_holds(
            &pre,
            b"coord:\n  state: done\n  assigned_to: p1\n  attempt: 1\n"
        ));
        let ready = Pre {
            state: Some(State::Ready),
            agent: None,
            attempt: 0,
        };
        assert!(pre_holds(&ready, b"coord:\n  state: ready\n  attempt: 0\n"));
    }

    #[test]
    fn the_same_attempt_is_state_agent_and_attempt() {
        let a = b"title: t\ncoord:\n  state: assigned\n  assigned_to: p1\n  attempt: 1\n";
        let b = b"title: other\ncoord:\n  state: assigned\n  assigned_to: p1\n  attempt: 1\n  lease_expires_at: x\n";
        let c = b"title: t\ncoord:\n  state: assigned\n  assigned_to: p2\n  attempt: 1\n";
        assert!(same_attempt(a, b));
        assert!(!same_attempt(a, c));
        assert!(!same_attempt(a, b"title: t\n: : bad"));
    }
}
