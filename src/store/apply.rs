//! Carrying out transitions: a plan is written to a journal under `.git/coord/` first, with a
//! cursor advanced after each commit; each transition's file operations are idempotent, and
//! it ends in one commit of exactly the touched paths. Edits of existing files go to the bytes
//! on disk when they run (`edit`), never back to text planned from older bytes. After a crash, `recover` finishes the
//! journaled plan from the cursor, removes temp files, and commits what people changed under
//! `work/` as `coord: record external changes`.

use super::clean::Listing;
use super::edit::Edited;
use super::{io_err, Clean, Session, StoreError, Written};
use crate::board::content_hash;
use crate::engine::{Op, Transition};
use crate::fsx::inject;
use crate::fsx::{self, write_private, Flush, TEMP_SUFFIX};
use crate::model::{Endpoint, State, TaskId};
use jiff::Timestamp;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::ErrorKind;

pub(super) const JOURNAL: &str = "journal.json";
pub(super) const CURSOR: &str = "journal.pos";
/// How long an `index.lock` may live before recovery takes it for a killed run's.
const STALE_INDEX_LOCK: std::time::Duration = std::time::Duration::from_secs(3);

/// What happened to one transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Done and committed.
    Committed,
    /// Committed as far as it went: a file it was to edit changed meanwhile in a way the edit
    /// cannot be spliced into, so it was left as found (why); the next tick looks at it again.
    LeftAsFound(String),
    /// Not done: a file operation failed (what was left where, and why); what it did was undone
    /// and the task file left
    /// where it was, and the rest of the plan was not applied (it may have relied on this one).
    Failed(String),
    /// A file changed since the plan was made; left for the next tick.
    Skipped,
    /// Not done: an earlier transition of the same task failed in this run (why), so its
    /// file is not where this one expected it; left for the next tick.
    AfterFailure(String),
}

/// Who a plan's commits come from: the tick's own plan is marked with
/// [`TICK_TRAILER`](super::TICK_TRAILER), so that `coord sync` may drop those commits and tick
/// again on a newer base; everything else (commands, recovery, recorded external changes)
/// carries someone's input and is replayed instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The tick derived it from committed files alone.
    Tick,
    /// A command, recovery, or anything else carrying someone's input.
    Command,
}

/// What a recording of people's uncommitted changes under `work/` did.
#[derive(Debug, Default)]
pub struct Recorded {
    /// One line per commit made (`record external changes (N paths)`).
    pub lines: Vec<String>,
    /// How the recording knew `work/` was clean, when it was (the quiet mark is made from it).
    pub(super) clean: Option<Clean>,
}

impl Recorded {
    /// Returns what let the recording skip the status scan, as a line for verbose output:
    /// the clean mark, or the vouch the last operation (or window) left.
    pub fn skipped_scan(&self) -> Option<&'static str> {
        match self.clean {
            Some(Clean::Marked(_)) => {
                Some("coord: work/ is as a status scan last found it clean; scan skipped")
            }
            Some(Clean::Vouched(_)) => {
                Some("coord: work/ is as the last coord operation left it; scan skipped")
            }
            Some(Clean::Indexed(_)) => {
                Some("coord: work/ is as the index records it (stat data); scan skipped")
            }
            _ => None,
        }
    }

    /// Returns whether the recording found `work/` clean, however it knew.
    pub fn found_clean(&self) -> bool {
        self.clean.is_some() && self.lines.is_empty()
    }
}

/// Whether a plan is being finished after a killed run: then every transition left in the
/// journal may be half done (a group's commit comes after all its file operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resume {
    No,
    Yes,
}

/// Plans of the tick longer than this commit their transitions in groups.
const GROUP_FROM: usize = 64;
/// The number of commits a grouped plan is cut into, at most.
const GROUPS: usize = 32;
/// A group holds at least this share of the fullest folder's files (1 / this).
const FOLDER_SHARE: usize = 4;

/// Returns how many transitions go into one commit: one each for commands and small plans
/// (the usual per-transition history); a large tick plan is cut into at most [`GROUPS`]
/// commits of at least [`GROUP_FROM`] transitions, and of at least 1/[`FOLDER_SHARE`] of the
/// files the fullest folder may hold during the pass (the `fullest` folder's files before
/// it, plus every transition of the plan landing in it), because each commit writes new tree
/// objects for the folders it touches, whose size grows with the folder: so the tree bytes a
/// transition costs stay bounded however big the folders grow, also a folder the pass fills.
fn group_size(len: usize, origin: Origin, fullest: usize) -> usize {
    if origin == Origin::Command || len <= GROUP_FROM {
        1
    } else {
        len.div_ceil(GROUPS)
            .max(GROUP_FROM)
            .max((fullest + len) / FOLDER_SHARE)
    }
}

/// Returns the groups a plan is committed in, `size` transitions each, except that in a
/// tick's plan an agent's profile update (its failures in a row and circuit) joins the group
/// before it: it is a consequence of the results that group accepted and makes no commit of
/// its own (its line stays in that commit's message). A plan of profile updates alone still
/// commits them.
fn commit_groups(plan: &[Transition], size: usize, origin: Origin) -> Vec<&[Transition]> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < plan.len() {
        let mut end = (start + size.max(1)).min(plan.len());
        while origin == Origin::Tick && end < plan.len() && plan[end].from == Endpoint::Agent {
            end += 1;
        }
        groups.push(&plan[start..end]);
        start = end;
    }
    groups
}

/// Returns a grouped plan's transitions in the order they are applied: each intake (a task
/// leaving `inbox/`) just before the same task's next transition, when the plan has one that
/// starts where the intake ends. A task taken in and assigned in one pass then lands in the
/// same commit, so its version in `ready/` is never in a tree (one version fewer in the
/// history a clone reads). Only an intake moves, and only later: nothing else in a plan
/// relies on a task having been taken in, while everything the next transition relied on
/// (e.g. the capacity a completion freed) still comes before it.
fn intakes_beside_their_next(plan: &[Transition]) -> Vec<&Transition> {
    let mut pending: HashMap<&str, usize> = HashMap::new();
    let mut intake_before: Vec<Option<usize>> = vec![None; plan.len()];
    let mut delayed = vec![false; plan.len()];
    let tasks = plan
        .iter()
        .enumerate()
        .filter(|(_, t)| t.from != Endpoint::Agent);
    for (at, t) in tasks {
        let intake = pending.remove(t.subject.as_str());
        if let Some(i) = intake.filter(|&i| plan[i].to == t.from) {
            intake_before[at] = Some(i);
            delayed[i] = true;
        }
        if t.from == Endpoint::State(State::Inbox) {
            pending.insert(&t.subject, at);
        }
    }
    let mut out = Vec::with_capacity(plan.len());
    for (at, t) in plan.iter().enumerate() {
        out.extend(intake_before[at].map(|i| &plan[i]));
        if !delayed[at] {
            out.push(t);
        }
    }
    out
}

/// Returns the moves of a transition: where from, where to.
fn moves(t: &Transition) -> impl Iterator<Item = (&str, &str)> {
    t.ops.iter().filter_map(|op| match op {
        Op::Move { from, to } => Some((from.as_str(), to.as_str())),
        _ => None,
    })
}

/// What puts back one file operation of a transition that failed midway.
enum Undo {
    /// Move the file back from `to` to `from` (if it moved).
    Move { from: String, to: String },
    /// Give `path` these bytes again, or remove it when it did not exist.
    Restore {
        path: String,
        bytes: Option<Vec<u8>>,
    },
}

/// The journal: the transitions of a plan not yet committed, the first one possibly half
/// done. Older journals hold a single transition.
/// A tick's plan is journaled as `{"tick": [...], "size": N}`, so recovery finishes it as the
/// tick would have: in groups of the same size (the cursor counts whole groups; groups cut
/// otherwise could straddle the last commit and record its transitions again), marked as the
/// tick's. A journal without `size` (an older coord's) is cut by `group_size`.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Journal {
    Plan(Vec<Transition>),
    Tick {
        tick: Vec<Transition>,
        #[serde(default)]
        size: Option<usize>,
    },
    One(Box<Transition>),
}

/// How a tick's plan is written to the journal.
#[derive(serde::Serialize)]
struct TickJournal<'p> {
    tick: &'p [Transition],
    size: usize,
}

impl Session<'_> {
    /// Applies a plan's transitions in order, committing each, and calls `each` with the
    /// outcome. The journal holds every transition not yet committed, so a run killed
    /// midway is finished by the next one (`recover`) — a handoff planned after the
    /// parent's move to done is never lost.
    ///
    /// Whatever ends it, an error included, the index is brought in line with HEAD for every
    /// path committed, so a person's next `git commit` cannot record a reversal of them.
    pub fn apply_plan(
        &self,
        plan: &[Transition],
        now: Timestamp,
        origin: Origin,
        each: &mut dyn FnMut(&Transition, Applied),
    ) -> Result<(), StoreError> {
        let applied = self.apply_journaled(plan, now, origin, each);
        match (applied, self.write_index()) {
            (Err(first), Err(StoreError::IndexBehind { work, .. })) => {
                Err(StoreError::IndexBehind {
                    work,
                    cause: Box::new(first),
                })
            }
            (applied, index) => applied.and(index),
        }
    }

    fn apply_journaled(
        &self,
        plan: &[Transition],
        now: Timestamp,
        origin: Origin,
        each: &mut dyn FnMut(&Transition, Applied),
    ) -> Result<(), StoreError> {
        if origin == Origin::Command && self.grouped.borrow().is_some() {
            let plan: Vec<&Transition> = plan.iter().collect();
            return self.apply_in_group(&plan, each);
        }
        let size = group_size(plan.len(), origin, self.fullest.get());
        let order = if size > 1 {
            intakes_beside_their_next(plan)
        } else {
            plan.iter().collect()
        };
        self.apply_groups(&order, now, origin, (Resume::No, size), each)
    }

    /// Journals `plan`, then applies it in groups of `size` transitions (`group_size` of the
    /// whole plan, also when finishing the rest of one), one commit per group, advancing the
    /// cursor after each.
    fn apply_groups(
        &self,
        plan: &[&Transition],
        now: Timestamp,
        origin: Origin,
        (resume, size): (Resume, usize),
        each: &mut dyn FnMut(&Transition, Applied),
    ) -> Result<(), StoreError> {
        if plan.is_empty() {
            return Ok(());
        }
        // Before the first file moves: a person's merge or stash must not start in between.
        self.hold_index()?;
        let plan = &with_op_id(plan);
        let journal = self.private_dir().join(JOURNAL);
        let cursor = self.private_dir().join(CURSOR);
        let text = match origin {
            Origin::Tick => serde_json::to_vec(&TickJournal { tick: plan, size }),
            Origin::Command => serde_json::to_vec(plan),
        }
        .unwrap_or_default();
        write_private(&cursor, b"0", false).map_err(io_err(&cursor))?;
        write_private(&journal, &text, false).map_err(io_err(&journal))?;
        let mut next = 0;
        for group in commit_groups(plan, size, origin) {
            let failed = self.apply_group(group, now, origin, resume, each)?;
            if failed {
                break;
            }
            next += group.len();
            write_private(&cursor, next.to_string().as_bytes(), false).map_err(io_err(&cursor))?;
        }
        self.clear_journal()
    }

    /// Carries out the file operations of a group of transitions in order and commits what
    /// was done in one commit (a group of one makes the transition's own commit), then calls
    /// `each` with every outcome. A transition whose guard no longer holds is skipped (when
    /// resuming, one that had started is finished). Returns whether a failed file operation
    /// ended the group: the rest of the plan may rely on it, so the pass stops there.
    fn apply_group(
        &self,
        group: &[Transition],
        now: Timestamp,
        origin: Origin,
        resume: Resume,
        each: &mut dyn FnMut(&Transition, Applied),
    ) -> Result<bool, StoreError> {
        if group.len() > 1 {
            *self.unsynced.borrow_mut() = Some(BTreeSet::new());
        }
        let ran = self.run_group(group, resume);
        let synced = self.sync_group();
        let outcomes = ran?;
        synced?;
        let failed = outcomes
            .last()
            .is_some_and(|(_, a)| matches!(a, Applied::Failed(_)));
        let done: Vec<&Transition> = outcomes
            .iter()
            .filter(|(_, a)| matches!(a, Applied::Committed | Applied::LeftAsFound(_)))
            .map(|(t, _)| *t)
            .collect();
        if !done.is_empty() {
            self.commit(&done, now, origin)?;
        }
        for (t, applied) in outcomes {
            each(t, applied);
        }
        Ok(failed)
    }

    /// Carries out the file operations of a group's transitions in order, up to the first
    /// that failed; returns each one's outcome.
    pub(super) fn run_group<'t>(
        &self,
        group: &'t [Transition],
        resume: Resume,
    ) -> Result<Vec<(&'t Transition, Applied)>, StoreError> {
        let mut outcomes = Vec::with_capacity(group.len());
        let moved_on = match resume {
            Resume::No => vec![false; group.len()],
            Resume::Yes => self.moved_on(group),
        };
        for (t, moved_on) in group.iter().zip(moved_on) {
            let go = || match resume {
                Resume::No => self.guard_holds(t),
                Resume::Yes => self.resumable(t),
            };
            let applied = if moved_on {
                Applied::Committed
            } else if go() {
                self.run_or_undo(t)?
            } else if let Some(why) = self.skipped_task(&t.subject) {
                Applied::AfterFailure(why)
            } else {
                Applied::Skipped
            };
            let failed = matches!(applied, Applied::Failed(_));
            outcomes.push((t, applied));
            if failed {
                break;
            }
        }
        Ok(outcomes)
    }

    /// Carries out one transition's file operations. When one fails (the file is immutable
    /// or unreadable, its folder is on another mount, the disk is full), what it did is undone
    /// and it is skipped, noted for the rest of the run: the task's file stays where it was
    /// and the next plan starts from there. A transition that follows from an earlier one (it
    /// has no guard: a handoff child, a profile update) is not skipped, nor is one whose undo
    /// fails: their error ends the pass and the journal lets the next run finish it.
    fn run_or_undo(&self, t: &Transition) -> Result<Applied, StoreError> {
        let mut log = Vec::new();
        match self.run_ops(t, &mut log) {
            Ok(applied) => Ok(applied),
            Err(StoreError::Io { path, source }) => {
                let Some((file, _)) = t.guard.first() else {
                    return Err(StoreError::Io { path, source });
                };
                if self.undo(log).is_err() {
                    return Err(StoreError::Io { path, source });
                }
                let shown = path.strip_prefix(self.root()).unwrap_or(&path);
                let why = format!("{}: {source}", shown.display());
                self.skip_file(file, &why);
                Ok(Applied::Failed(format!("left {file} where it is ({why})")))
            }
            Err(e) => Err(e),
        }
    }

    /// Undoes the file operations of a transition that failed midway, last first.
    fn undo(&self, log: Vec<Undo>) -> Result<(), StoreError> {
        let root = self.root();
        let gone = |rel: &str| fsx::file_type(root, rel).is_ok_and(|t| t.is_none());
        for step in log.into_iter().rev() {
            match step {
                Undo::Move { from, to } if gone(&from) && !gone(&to) => {
                    self.move_file(&to, &from)?;
                }
                Undo::Move { .. } => {}
                Undo::Restore { path, bytes: None } => {
                    fsx::remove_in(root, &path).map_err(io_err(&self.abs(&path)))?;
                }
                Undo::Restore {
                    path,
                    bytes: Some(bytes),
                } => {
                    let same =
                        fsx::read_limited(root, &path, bytes.len()).is_ok_and(|b| b == bytes);
                    if !same {
                        self.write_file(&path, &bytes)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Returns what puts `path` back as it is now: its bytes, or its absence.
    fn before(&self, path: &str) -> Result<Undo, StoreError> {
        let bytes = match fsx::read_limited(self.root(), path, usize::MAX - 1) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(io_err(&self.abs(path))(e)),
        };
        Ok(Undo::Restore {
            path: path.to_string(),
            bytes,
        })
    }

    pub(super) fn clear_journal(&self) -> Result<(), StoreError> {
        for name in [JOURNAL, CURSOR] {
            let path = self.private_dir().join(name);
            if let Err(e) = fs::remove_file(&path) {
                if e.kind() != ErrorKind::NotFound {
                    return Err(io_err(&path)(e));
                }
            }
        }
        inject::point("remove journal").map_err(io_err(&self.private_dir()))
    }

    /// Returns whether the transition a killed run was in may be finished: it has not started
    /// and its files are as planned, or it started (a move happened, or a write landed).
    fn resumable(&self, t: &Transition) -> bool {
        self.started(t) || self.guard_holds(t)
    }

    /// Returns whether a transition's file operations have begun: a move happened, or a
    /// write landed.
    fn started(&self, t: &Transition) -> bool {
        self.moved(t) || self.landed(t)
    }

    /// Returns whether one of a transition's moves happened: its file left where it was
    /// and is where it goes.
    fn moved(&self, t: &Transition) -> bool {
        let root = self.root();
        let gone = |rel: &str| fsx::file_type(root, rel).is_ok_and(|t| t.is_none());
        moves(t).any(|(from, to)| gone(from) && !gone(to))
    }

    /// Returns whether one of a transition's writes landed: its file holds the text.
    fn landed(&self, t: &Transition) -> bool {
        t.ops.iter().any(|op| match op {
            Op::Write { path, text } | Op::Edit { path, text, .. } => {
                fsx::read_limited(self.root(), path, text.len()).is_ok_and(|b| b == text.as_bytes())
            }
            Op::Move { .. } | Op::Remove { .. } => false,
        })
    }

    /// Returns, for each transition of a group a killed run was in, whether a later one of
    /// the same task in the group has started: the run finished this one before it began
    /// that one, so this one is done, though its file has moved on from where it left it.
    /// A later move back to where this one moved the file from proves nothing (a retry
    /// handed back to the same agent: the file is there because nothing moved yet); a write
    /// of the later one that landed does.
    fn moved_on(&self, group: &[Transition]) -> Vec<bool> {
        let mut started: HashMap<(&str, &str), Vec<&str>> = HashMap::new();
        let mut moved_on = vec![false; group.len()];
        for (at, t) in group.iter().enumerate().rev() {
            let subject = (t.subject_key(), t.subject.as_str());
            moved_on[at] = started
                .get(&subject)
                .is_some_and(|to| moves(t).all(|(from, _)| !to.contains(&from)));
            if moved_on[at] {
                continue;
            }
            if self.landed(t) {
                // Proof whatever the moves: no earlier move can be taken back for it.
                started.insert(subject, Vec::new());
            } else if self.moved(t) {
                started.insert(subject, moves(t).map(|(_, to)| to).collect());
            } else {
                started.remove(&subject);
            }
        }
        moved_on
    }

    fn guard_holds(&self, t: &Transition) -> bool {
        t.guard.iter().all(|(path, hash)| {
            fsx::read_limited(self.root(), path, usize::MAX - 1)
                .is_ok_and(|b| content_hash(&b) == *hash)
        })
    }

    /// Carries out a transition's file operations; an edit whose file changed meanwhile is
    /// spliced into what is there now, or left as found (`Applied::LeftAsFound`).
    fn run_ops(&self, t: &Transition, log: &mut Vec<Undo>) -> Result<Applied, StoreError> {
        let mut applied = Applied::Committed;
        for op in &t.ops {
            match op {
                Op::Edit { path, text, rest } => {
                    log.push(self.before(path)?);
                    if let Edited::LeftAsFound(why) = self.edit(path, text, *rest)? {
                        applied = Applied::LeftAsFound(format!("{path} left as found: {why}"));
                    }
                }
                Op::Move { from, to } => {
                    log.push(Undo::Move {
                        from: from.clone(),
                        to: to.clone(),
                    });
                    self.do_move(from, to)?;
                }
                Op::Write { path, text } => {
                    let same = fsx::read_limited(self.root(), path, text.len())
                        .is_ok_and(|b| b == text.as_bytes());
                    if !same {
                        log.push(self.before(path)?);
                        self.write_file(path, text.as_bytes())?;
                    }
                }
                Op::Remove { path } => {
                    log.push(self.before(path)?);
                    fsx::remove_in(self.root(), path).map_err(io_err(&self.abs(path)))?;
                }
            }
        }
        Ok(applied)
    }

    /// Moves a file unless the move already happened (recovery): that is looked at only when
    /// the rename failed, so a move costs one rename.
    fn do_move(&self, from: &str, to: &str) -> Result<(), StoreError> {
        let Err(e) = self.move_file(from, to) else {
            return Ok(());
        };
        let root = self.root();
        let gone = |rel| fsx::file_type(root, rel).is_ok_and(|t| t.is_none());
        if gone(from) && !gone(to) {
            return Ok(());
        }
        Err(e)
    }

    /// Writes a file atomically; in a group, its folder is synced with the group's.
    pub(super) fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let mut unsynced = self.unsynced.borrow_mut();
        let flush = unsynced.as_mut().map_or(Flush::Now, Flush::Later);
        fsx::write_atomic_in(self.root(), path, bytes, flush).map_err(io_err(&self.abs(path)))
    }

    /// Moves a file without replacing one; in a group, its folders are synced with the group's.
    fn move_file(&self, from: &str, to: &str) -> Result<(), StoreError> {
        let mut unsynced = self.unsynced.borrow_mut();
        let flush = unsynced.as_mut().map_or(Flush::Now, Flush::Later);
        fsx::rename_noreplace_in(self.root(), from, to, flush).map_err(io_err(&self.abs(to)))
    }

    /// Syncs the folders a group's writes and moves changed (once each), and ends the group.
    pub(super) fn sync_group(&self) -> Result<(), StoreError> {
        let Some(folders) = self.unsynced.borrow_mut().take() else {
            return Ok(());
        };
        fsx::sync_folders(self.root(), &folders).map_err(io_err(self.root()))
    }

    /// Commits the paths of `done` in one commit: the transition's own message for one, a
    /// message recording each of them for several.
    pub(super) fn commit(
        &self,
        done: &[&Transition],
        now: Timestamp,
        origin: Origin,
    ) -> Result<(), StoreError> {
        let mut paths: Vec<String> = done.iter().flat_map(|t| t.paths()).collect();
        inject::point("git commit").map_err(io_err(&self.abs(&done[0].subject)))?;
        let mut message = match done {
            [t] => t.message(),
            _ => crate::engine::group_message(done),
        };
        if origin == Origin::Tick {
            message.push_str(super::TICK_TRAILER);
            message.push('\n');
        }
        paths.sort();
        paths.dedup();
        self.hold_index()?;
        self.check_base();
        let made = self
            .repo
            .commit_paths(&paths, &message, &self.identity, now)?;
        self.base_committed(made);
        self.touched.borrow_mut().extend(paths);
        Ok(())
    }

    /// Takes git's index lock before a plan's first file operation or a commit, unless this run
    /// holds it already: a person's git must not start a merge or stash among coord's file
    /// moves, nor record the index between coord's commits and its index write (`write_index`).
    pub(super) fn hold_index(&self) -> Result<(), StoreError> {
        let mut hold = self.index_hold.borrow_mut();
        if hold.is_none() {
            *hold = Some(self.repo.hold_index()?);
        }
        Ok(())
    }

    /// Brings the index in line for every path committed since the last call, and lets go
    /// of git's index lock.
    pub fn write_index(&self) -> Result<(), StoreError> {
        let hold = self.index_hold.borrow_mut().take();
        let mut touched = self.touched.borrow_mut();
        if !touched.is_empty() {
            touched.sort();
            touched.dedup();
            let behind = |cause: StoreError| StoreError::IndexBehind {
                work: self.config.work_dir.clone(),
                cause: Box::new(cause),
            };
            inject::point("git index")
                .map_err(io_err(self.repo.git_dir()))
                .map_err(behind)?;
            let written = self
                .repo
                .update_index_holding(&touched, hold)
                .map_err(|e| behind(e.into()))?;
            self.base_staged(written);
            touched.clear();
            self.pack_or_owe();
        }
        Ok(())
    }

    /// Packs the objects with `git repack` when there are many loose ones, as `git gc --auto`
    /// after a commit ([`Repo::pack_loose_objects`]), or owes it to the [`PackLater`] guard
    /// while one is alive. A failure leaves every object readable
    /// where it was, so it does not fail the command that committed.
    fn pack_or_owe(&self) {
        let mut packing = self.packing.get();
        if packing.later {
            packing.owed = true;
            self.packing.set(packing);
        } else {
            let _ = self.repo.pack_loose_objects(packing.from);
            #[cfg(test)]
            self.packing.set(Packing {
                runs: packing.runs + 1,
                ..packing
            });
        }
    }

    /// Returns how many times `write_index` or a [`PackLater`] guard packed (or looked whether to).
    #[cfg(test)]
    pub(crate) fn pack_runs(&self) -> usize {
        self.packing.get().runs
    }

    /// Leaves packing until the returned guard is dropped (the tick holds one per window,
    /// declared before the window's board, so it packs at most once per window, after the
    /// board is gone): the pack builder's memory (its delta window over the big folders'
    /// trees, tens of MB in a 50,000-task burst) is then never held beside a board. The
    /// guard packs, when due, also when the window ends in an error. Guards do not nest.
    pub fn pack_later(&self) -> PackLater<'_> {
        let packing = self.packing.get();
        self.packing.set(Packing {
            later: true,
            ..packing
        });
        PackLater(self)
    }

    /// Makes `write_index` pack after every commit (tests that count packs).
    #[cfg(test)]
    pub(crate) fn pack_always(&self) {
        let packing = self.packing.get();
        self.packing.set(Packing { from: 0, ..packing });
    }

    /// Finishes what an interrupted run left: the journaled transition, temp files, and
    /// uncommitted changes under `work/`. Returns the summaries of the commits it made.
    pub fn recover(&self, now: Timestamp) -> Result<Vec<String>, StoreError> {
        let mut done = self.resume_interrupted(now)?;
        done.extend(self.record_external_changes(now, None)?.lines);
        Ok(done)
    }

    /// Removes the temporary object files (`tmp_object_git2_*`) a killed run left in
    /// `.git/objects`; the caller holds the lock, taken from a holder that was killed, so the
    /// files written before now are that run's. Returns what it did, for the report.
    pub fn remove_temp_objects(&self) -> Result<Vec<String>, StoreError> {
        let n = self
            .repo
            .remove_stale_temp_objects(std::time::SystemTime::now())?;
        let mut lines: Vec<String> = (n > 0)
            .then(|| {
                format!("removed {n} temporary object file(s) a killed run left in .git/objects")
            })
            .into_iter()
            .collect();
        let private = self.private_dir();
        let n = crate::fsx::remove_dead_temps(&private)
            + crate::fsx::remove_dead_temps(&private.join("stat-cache.d"));
        if n > 0 {
            lines.push(format!(
                "removed {n} temporary file(s) a killed run left in .git/coord"
            ));
        }
        Ok(lines)
    }

    /// Finishes what a killed run left under the lock: a half-done branch switch of `sync`,
    /// stale git locks, temp files and the journaled plan. Returns the summaries of the commits it made. Temp files under `work/`
    /// are written only by journaled transitions, so they are looked for only when a journal
    /// is left.
    pub fn resume_interrupted(&self, now: Timestamp) -> Result<Vec<String>, StoreError> {
        // Stale git locks first: finishing a switch moves the branch, and a killed switch may
        // have left the branch's lock.
        let mut done: Vec<String> = self
            .repo
            .remove_stale_locks(STALE_INDEX_LOCK)?
            .into_iter()
            .map(|lock| format!("removed the stale lock {} of a killed run", lock.display()))
            .collect();
        done.extend(self.repo.finish_switch()?);
        let finished = self.resume_journal(now, &mut done);
        let index = self.write_index();
        finished.and(index).map(|()| done)
    }

    fn resume_journal(&self, now: Timestamp, done: &mut Vec<String>) -> Result<(), StoreError> {
        let journal = self.private_dir().join(JOURNAL);
        match crate::fsx::read_private(&journal) {
            Ok(bytes) => {
                self.remove_temp_files()?;
                let (plan, origin, cut) = match serde_json::from_slice(&bytes) {
                    Ok(Journal::Plan(p)) => (p, Origin::Command, None),
                    Ok(Journal::Tick { tick, size }) => (tick, Origin::Tick, size),
                    Ok(Journal::One(t)) => (vec![*t], Origin::Command, None),
                    Err(e) => {
                        return Err(StoreError::Journal {
                            path: journal.clone(),
                            message: e.to_string(),
                        })
                    }
                };
                let done_before = crate::fsx::read_private_text(&self.private_dir().join(CURSOR))
                    .ok()
                    .and_then(|c| c.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if origin == Origin::Tick && plan.len() > GROUP_FROM && cut.is_none() {
                    // Its groups are sized by the folders, as the killed tick's were.
                    self.walk_work()?;
                }
                let size =
                    cut.unwrap_or_else(|| group_size(plan.len(), origin, self.fullest.get()));
                let plan = plan.get(done_before..).unwrap_or_default().to_vec();
                let mut report = |t: &Transition, a: Applied| match a {
                    Applied::Committed => {
                        done.push(format!("finished interrupted: {}", t.summary));
                    }
                    Applied::LeftAsFound(why) => {
                        done.push(format!("finished interrupted: {} ({why})", t.summary));
                    }
                    Applied::Failed(why) => {
                        done.push(format!("interrupted {}: {why}", t.summary));
                    }
                    Applied::Skipped | Applied::AfterFailure(_) => {}
                };
                let resume = (Resume::Yes, size);
                let plan: Vec<&Transition> = plan.iter().collect();
                let applied = self.apply_groups(&plan, now, origin, resume, &mut report);
                let index = self.write_index();
                applied.and(index)?;
                self.clear_journal()?;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&journal)(e)),
        }
        Ok(())
    }

    /// Commits what people changed under `work/` as `coord: record external changes` and
    /// brings the index in line. Returns the summary of the commit, if one was made, and how
    /// it knew `work/` was clean otherwise. With the `listing` of a walk made just before, the
    /// status scan is skipped when the vouch the last operation left holds for it, or when
    /// the clean mark shows that nothing a scan depends on changed since one found nothing;
    /// when `work/` is clean, the operation keeps what it needs to leave a vouch at its end
    /// ([`Session::leave_vouch`]).
    pub fn record_external_changes(
        &self,
        now: Timestamp,
        listing: Option<&Listing>,
    ) -> Result<Recorded, StoreError> {
        let (mut clean, mut scanned, mut undone) = (None, Vec::new(), Vec::new());
        let made = self.record_external(now, listing, &mut clean, &mut scanned, &mut undone);
        self.save_history(made.is_ok().then_some(&scanned[..]));
        let index = self.write_index();
        let made = made.and_then(|m| index.map(|()| m))?;
        Ok(Recorded {
            lines: undone
                .into_iter()
                .chain(made.map(|n| format!("record external changes ({n} paths)")))
                .collect(),
            clean,
        })
    }

    /// Commits uncommitted changes under `work/` as `coord: record external changes`; sets
    /// `clean` when it found `work/` clean, `scanned` to the changed paths a status scan
    /// found (none when it needed no scan), and `undone` to a line per hand rename of a task
    /// file it undid first.
    fn record_external(
        &self,
        now: Timestamp,
        listing: Option<&Listing>,
        clean: &mut Option<Clean>,
        scanned: &mut Vec<String>,
        undone: &mut Vec<String>,
    ) -> Result<Option<usize>, StoreError> {
        *self.base.borrow_mut() = None;
        self.held_back.borrow_mut().clear();
        // Read before the scan: a change made during or after it changes the next state.
        let walked = listing.and_then(|l| Some((l, self.repo_state(l.start())?)));
        if let Some((listing, state)) = &walked {
            if let Some(carried) = self.vouched(listing, state) {
                self.set_base(listing, state.clone(), carried);
                *clean = Some(Clean::Vouched(self.clean_state_in(listing, state)));
                return Ok(None);
            }
        }
        let state = walked
            .as_ref()
            .and_then(|(listing, state)| self.clean_state_in(listing, state));
        let keep_base = || {
            if let Some((listing, state)) = &walked {
                self.set_base(listing, state.clone(), Vec::new());
            }
        };
        if let Some(state) = state.filter(|s| self.clean_mark_is(*s)) {
            keep_base();
            *clean = Some(Clean::Marked(state));
            return Ok(None);
        }
        if walked.as_ref().is_some_and(|(l, _)| self.clean_by_index(l)) {
            keep_base();
            *clean = Some(Clean::Indexed(state));
            if let Some(state) = state {
                self.set_clean_mark(state);
            }
            return Ok(None);
        }
        let prefix = format!("{}/", self.work_dir());
        let scan = self.repo.changes_under(&prefix)?;
        let left_out = self.left_out_of_work_tree(&scan);
        if !left_out.is_empty() {
            let left_out = crate::git::Unfinished::SkippedInWorkTree(left_out);
            return Err(crate::git::GitError::Unfinished(left_out).into());
        }
        scanned.clone_from(&scan.paths);
        let (changed, held) = self.settled_changes(scan.paths, &prefix);
        let (changed, renames) = self.undo_renames(changed, &prefix)?;
        *undone = renames;
        // A rename undone just now changed work/ after the listing: no clean mark from it.
        let settling = !held.is_empty() || !undone.is_empty();
        *self.held_back.borrow_mut() = held;
        if changed.is_empty() {
            if !scan.ignored && !settling {
                keep_base();
                *clean = Some(Clean::ScannedRecent);
            }
            if let Some(state) = state.filter(|_| !scan.ignored && !settling) {
                self.set_clean_mark(state);
                *clean = Some(Clean::Scanned(state));
            }
            if scan.ignored {
                // A change to ignore rules alone could reveal the file: no mark stands.
                self.remove_clean_mark();
            }
            return Ok(None);
        }
        let mut message = String::from("coord: record external changes\n\n");
        for p in &changed {
            message.push_str(&format!("  {}\n", crate::redact::one_line(p)));
        }
        let edit = crate::engine::Operation {
            kind: crate::engine::OpKind::Edit,
            id: Some(op_id()),
            by: None,
            pre: None,
        };
        message.push('\n');
        message.push_str(&edit.trailers());
        inject::point("git commit").map_err(io_err(self.repo.git_dir()))?;
        self.hold_index()?;
        let made = self
            .repo
            .commit_paths(&changed, &message, &self.identity, now)?;
        self.touched.borrow_mut().extend(changed.iter().cloned());
        Ok(made.map(|_| changed.len()))
    }

    fn remove_temp_files(&self) -> Result<(), StoreError> {
        let work = self.abs(self.work_dir());
        let mut stack = vec![work];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.filter_map(Result::ok) {
                let ft = e.file_type().map_err(io_err(&e.path()))?;
                if ft.is_dir() {
                    stack.push(e.path());
                } else if e.file_name().to_string_lossy().ends_with(TEMP_SUFFIX) {
                    fs::remove_file(e.path()).map_err(io_err(&e.path()))?;
                }
            }
        }
        Ok(())
    }
}

impl Session<'_> {
    /// Splits the changed `paths` under `work/` (`prefix`) into those to record now and
    /// those held back because they are still being written (the settle rule). A deletion of
    /// a task file waits with a file of the same task still being written: a hand move is
    /// recorded whole, never as the deletion alone.
    fn settled_changes(&self, paths: Vec<String>, prefix: &str) -> (Vec<String>, Vec<String>) {
        let settle = self.settle_rule(&self.seen_complete);
        let mut held = Vec::new();
        let mut held_ids = HashSet::new();
        let mut deleted = Vec::new();
        let mut changed = Vec::new();
        let layout = paths
            .into_iter()
            .filter(|p| p.strip_prefix(prefix).is_some_and(crate::board::is_layout));
        for p in layout {
            match self.abs(&p).symlink_metadata() {
                Ok(m) if m.file_type().is_symlink() => {}
                Ok(m) => {
                    let still_written = settle.until(&p, Written::of(&m), ctime_ns(&m)).is_some()
                        && !self.is_staged(&p);
                    match still_written {
                        true => {
                            held_ids.extend(task_id_in(&p, prefix));
                            held.push(p);
                        }
                        false => changed.push(p),
                    }
                }
                Err(_) => deleted.push(p),
            }
        }
        for p in deleted {
            match task_id_in(&p, prefix).is_some_and(|id| held_ids.contains(&id)) {
                true => held.push(p),
                false => changed.push(p),
            }
        }
        changed.sort();
        (changed, held)
    }

    /// Returns the files under `work/` the last recording of people's changes held back as
    /// still being written (repo-relative), with the deletions held with them.
    pub fn held_back(&self) -> Vec<String> {
        self.held_back.borrow().clone()
    }

    /// Returns whether a file under `work/` holds what the index has for it (staged on
    /// purpose, e.g. by coord itself before HEAD moved back): complete, whatever its age.
    fn is_staged(&self, path: &str) -> bool {
        fsx::read_limited(self.root(), path, usize::MAX - 1)
            .is_ok_and(|b| self.repo.is_recorded(path, &b))
    }
}

/// Returns the task id of a task file's repo-relative path under `work/` (`prefix`).
fn task_id_in(path: &str, prefix: &str) -> Option<TaskId> {
    crate::board::task_at(path.strip_prefix(prefix)?).map(|(_, id)| id)
}

/// Returns a file's ctime in nanoseconds since the epoch.
fn ctime_ns(m: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec())
}

/// Returns the plan with one fresh random id on every named operation (`Coord-Op-Id`): two
/// clones doing the same thing at the same second still make different commits, so a push
/// lands only the commits of the run that made them.
pub(super) fn with_op_id(plan: &[&Transition]) -> Vec<Transition> {
    let id = op_id();
    let mut plan: Vec<Transition> = plan.iter().map(|t| (*t).clone()).collect();
    for op in plan.iter_mut().filter_map(|t| t.op.as_mut()) {
        op.id.get_or_insert_with(|| id.clone());
    }
    plan
}

/// Returns 16 random hex digits (the time and process id when the system has no randomness).
fn op_id() -> String {
    let n = getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 40)
    });
    format!("{n:016x}")
}

/// Packing left to the end of a tick ([`Session::pack_later`]): dropped, it packs when due.
pub struct PackLater<'s>(&'s Session<'s>);

impl Drop for PackLater<'_> {
    fn drop(&mut self) {
        let packing = self.0.packing.get();
        self.0.packing.set(Packing {
            later: false,
            owed: false,
            ..packing
        });
        if packing.owed {
            self.0.pack_or_owe();
        }
    }
}

/// When `Session::write_index` packs the loose objects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Packing {
    /// How many loose objects (git's estimate) make it pack them
    /// ([`crate::git::PACK_LOOSE_FROM`]; 0 in tests that pack after every commit).
    from: usize,
    /// Whether packing waits for a [`PackLater`] guard to be dropped.
    later: bool,
    /// Whether a commit was made while it waited.
    owed: bool,
    /// How many times it packed (tests).
    #[cfg(test)]
    runs: usize,
}

impl Default for Packing {
    fn default() -> Packing {
        Packing {
            from: crate::git::PACK_LOOSE_FROM,
            later: false,
            owed: false,
            #[cfg(test)]
            runs: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{group_size, intakes_beside_their_next, Origin};
    use crate::engine::Transition;
    use crate::model::{Endpoint, State};

    fn step(subject: &str, from: State, to: State) -> Transition {
        Transition {
            subject: subject.to_string(),
            from: Endpoint::State(from),
            to: Endpoint::State(to),
            summary: format!("{subject} {from} -> {to}"),
            ops: Vec::new(),
            guard: Vec::new(),
            op: None,
        }
    }

    fn summaries<'t>(plan: &[&'t Transition]) -> Vec<&'t str> {
        plan.iter().map(|t| t.summary.as_str()).collect()
    }

    /// A task taken in and assigned in one pass is committed once; the completion that freed
    /// the agent stays before the assignment, and an intake with nothing after it stays put.
    #[test]
    fn a_grouped_plan_takes_each_task_in_just_before_its_next_transition() {
        use State::*;
        let plan = [
            step("a", Inbox, Ready),
            step("b", Inbox, Ready),
            step("c", Inbox, Invalid),
            step("z", Assigned, Done),
            step("b", Ready, Assigned),
            step("a", Ready, Assigned),
        ];
        let out = intakes_beside_their_next(&plan);
        assert_eq!(
            summaries(&out),
            [
                "c inbox -> invalid",
                "z assigned -> done",
                "b inbox -> ready",
                "b ready -> assigned",
                "a inbox -> ready",
                "a ready -> assigned",
            ]
        );
    }

    /// 10,000 completions into an empty `done/` while the fullest folder holds 1,000 files:
    /// the groups count what the pass adds (a 1/16 of the files before gave 32 commits, each
    /// writing a bigger `done/` tree).
    #[test]
    fn a_pass_that_fills_a_folder_counts_what_it_adds_in_its_group_size() {
        assert_eq!(group_size(10_000, Origin::Tick, 1_000), 2_750);
        assert_eq!(group_size(10_000, Origin::Tick, 0), 2_500);
        assert_eq!(group_size(1_000, Origin::Tick, 0), 250);
        assert_eq!(group_size(100, Origin::Tick, 0), 64);
    }

    #[test]
    fn commands_and_small_plans_keep_one_commit_per_transition() {
        assert_eq!(group_size(10_000, Origin::Command, 1_000), 1);
        assert_eq!(group_size(64, Origin::Tick, 100_000), 1);
    }
}
