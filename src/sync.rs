//! `coord sync`: several clones and CI runners coordinating through one git remote. A push is
//! the compare-and-swap that makes an assignment exclusive across machines.
//!
//! One attempt: fetch the remote branch; under the coordinator lock, record stray changes,
//! bring the local branch onto the remote tip, and tick; then push. Bringing the branch onto the
//! remote tip is a fast-forward when it can be. When both sides have new commits, the local ones
//! are sorted: commits the tick derived from the files alone (`Coord-Origin: tick`) are dropped,
//! because the next tick redoes them on the newer base; every other coord commit (recorded
//! external changes, `coord new`, `complete`, `fail`, ...) carries someone's input and is replayed
//! onto the remote tip, and so is a person's own commit (as an edit, path by path, keeping its
//! author, committer and message); a merge or a signed commit stops the sync before anything
//! is changed. A rejected push starts the next attempt after a jittered backoff. Nothing is
//! ever force-pushed.
//!
//! Fetch and push run the `git` command (it honours the credentials people and CI configured);
//! commits, replays and the branch move go through [`crate::git`] (libgit2). A killed sync
//! leaves no git process behind (`guard`). See docs/sync.md.

pub(crate) mod put_off;
pub mod replay;

use crate::board::Board;
use crate::engine::commands;
use crate::engine::{AcceptAll, Inputs, Plan};
use crate::git::{GitError, Identity, LocalCommit, Oid, Repo, UNRELATED};
use crate::lock::{self, LockError};
use crate::model::TaskId;
use crate::store::{Origin, RaceWon, Rejection, Session, Stats, Store, StoreError, TICK_TRAILER};
use jiff::Timestamp;
use put_off::PutOff;
use replay::{Clash, Defer, Stop};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `coord sync` was asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// The remote's name (`origin`).
    pub remote: String,
    /// The branch, when given; it must be the checked-out branch.
    pub branch: Option<String>,
    /// How many times to fetch, tick and push again after a rejected push.
    pub max_retries: u32,
    /// How long to wait for another coordinator's lock.
    pub wait: Duration,
    /// Whether a rejected push undoes the commits of the step (`claim`, `complete`, `fail`
    /// with `--sync`) so that the next attempt redoes it on the newer remote tip, through the
    /// engine, instead of replaying it. `coord sync` leaves its commits (tick commits are
    /// dropped and redone anyway).
    pub redo_on_reject: bool,
    /// Conflicting edits of people to leave out of the replay (`--drop-edit`).
    pub drop_edits: Vec<replay::DropEdit>,
    /// The clock for recorded changes.
    pub now: Timestamp,
    /// Another ref pushed with the branch in the same atomic push, compare-and-swap (a hub's
    /// lease): the branch lands only when this ref still holds its old value on the remote.
    pub with_ref: Option<RefUpdate>,
    /// What integrating does with this clone's tick commits the remote lacks.
    pub ticks: Ticks,
}

/// What integrating does with this clone's own tick commits when both sides moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticks {
    /// Drops them: the sync's tick derives them again on the remote's newer tip (`coord
    /// sync`, an agent's step).
    Redo,
    /// Replays them by meaning, as coord's other commits: a hub answered agents on them (it
    /// granted a task its tick had just accepted or unblocked), so its later writes stand only
    /// on them. One the remote made moot is dropped, for the tick to redo.
    Keep,
}

/// A ref pushed atomically with the branch, only over the value it is expected to hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefUpdate {
    /// The full ref name (`refs/coord/hub`).
    pub name: String,
    /// The object it must point at on the remote; None: it must not exist.
    pub old: Option<String>,
    /// The object it is to point at.
    pub new: String,
}

impl RefUpdate {
    /// Returns the `git push` arguments of this update: `--force-with-lease` and a refspec.
    pub fn push_args(&self) -> [String; 2] {
        let old = self.old.as_deref().unwrap_or("");
        [
            format!("--force-with-lease={}:{old}", self.name),
            format!("{}:{}", self.new, self.name),
        ]
    }
}

/// Why a sync stopped.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A libgit2 failure.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The store could not be opened or recovered.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another coordinator holds the lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// HEAD is detached.
    #[error("HEAD is detached; check out the branch to sync (git switch <branch>), then run coord sync again")]
    Detached,
    /// `--branch` names another branch than the checked-out one.
    #[error("--branch {wanted} is not the checked-out branch ({current}); run 'git switch {wanted}' first")]
    WrongBranch {
        /// The branch asked for.
        wanted: String,
        /// The branch checked out.
        current: String,
    },
    /// The remote is not configured in this clone.
    #[error("no remote '{0}' is configured in this clone; add it (git remote add {0} <url>) or name a configured one (--remote, or sync.remote in coord.yaml; 'git remote -v' lists them)")]
    NoRemote(String),
    /// A remote or branch name git would read as something else.
    #[error("{what} {name:?} is not a plain name; pass the name of a configured remote and branch ('git remote -v' lists remotes)")]
    BadName {
        /// `remote` or `branch`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The branch and the remote's share no commit (a repository made by `coord init`
    /// instead of a clone of the remote).
    #[error("{branch} and {remote}/{branch} share no history ({branch}'s first commit {commit} is not on {remote}): this repository was not cloned from {remote}. Clone it instead (git clone <url of {remote}>), or keep this branch's commits by replaying them onto {remote}'s (git rebase {remote}/{branch}), run coord doctor, then run coord sync again")]
    Unrelated {
        /// The branch.
        branch: String,
        /// The remote.
        remote: String,
        /// The root commit, abbreviated, and its summary in quotes.
        commit: String,
    },
    /// The `git` command could not be run or failed.
    #[error("git {action} failed: {message}")]
    GitCommand {
        /// `fetch` or `push`.
        action: &'static str,
        /// What git said (last lines of its stderr) or why it did not run.
        message: String,
    },
    /// A person's merge or signed commit is not on the remote and the branches diverged.
    #[error("{branch} has {what} by {author} that {remote} does not have ({commit}), and {remote} moved on; coord copies a person's commits onto {remote}'s tip but not {what}: integrate it yourself (git pull --rebase {remote} {branch}), run coord doctor (it names any task git's text merge left in two places), then run coord sync again")]
    PersonsCommit {
        /// `a merge`, `a signed commit`, ... ([`LocalCommit::not_copyable`]).
        what: &'static str,
        /// The branch.
        branch: String,
        /// The remote.
        remote: String,
        /// The commit, abbreviated, and its summary in quotes.
        commit: String,
        /// Its author.
        author: String,
    },
    /// A person's edit and the remote changed the same lines of one file.
    #[error("{}", conflict_message(remote, branch, detail))]
    Conflict {
        /// The branch.
        branch: String,
        /// The remote.
        remote: String,
        /// The local commit, the path, and where the file is on the remote.
        detail: Box<replay::Conflict>,
    },
    /// A person is still writing a file of a task the remote changed meanwhile: moving onto
    /// the remote now, the change would land later without being replayed onto the remote's.
    #[error("{path} is still being written, and {remote} changed task {id} meanwhile; nothing was changed here: run 'coord sync' again once it settles (a moment after the last write), or stage it first ('git add {path}')")]
    StillWritten {
        /// The file held back, repo-relative.
        path: String,
        /// Its task.
        id: String,
        /// The remote.
        remote: String,
    },
    /// Every push was rejected.
    #[error("push to {remote}/{branch} rejected {attempts} times (last: {reason}); others keep pushing: run coord sync again later, or raise --max-retries")]
    Rejected {
        /// The remote.
        remote: String,
        /// The branch.
        branch: String,
        /// How many pushes were made.
        attempts: u32,
        /// git's reason for the last rejection.
        reason: String,
    },
    /// The remote refused the push for a reason retrying does not change.
    #[error("{remote} refused the push to {branch}: {reason}; check the branch protection and hooks of the remote")]
    Refused {
        /// The remote.
        remote: String,
        /// The branch.
        branch: String,
        /// git's reason.
        reason: String,
    },
    /// A step whose push did not land could not be undone: the branch moved on from it (a
    /// commit made in this clone meanwhile), which coord does not rewrite.
    #[error("the step was not pushed to {remote}/{branch} ({why}), and {branch} moved on from it meanwhile (a commit made in this clone): coord left both there; the step is tentative until coord sync replays it or drops it")]
    NotUndone {
        /// The remote.
        remote: String,
        /// The branch.
        branch: String,
        /// Why the push did not land.
        why: String,
    },
    /// The tick failed.
    #[error("the tick failed")]
    Tick(#[source] TickError),
}

/// Says which changes met and how to resolve it without making a duplicate.
fn conflict_message(remote: &str, branch: &str, c: &replay::Conflict) -> String {
    let (commit, path) = (short(&c.commit), &c.path);
    let there = c.remote_path.as_deref().unwrap_or(path);
    let moved = match &c.remote_path {
        Some(p) if p != path => format!(" (now {p} there)"),
        _ => String::new(),
    };
    let save = format!("save your version ('git show {commit}:{path} > my-edit.yaml')");
    let before: String = c
        .dropped_before
        .iter()
        .map(|d| format!("--drop-edit {d} "))
        .collect();
    let skip =
        format!("sync without that change ('coord sync {before}--drop-edit {commit}:{path}')");
    let (what, then) = match c.clash {
        Clash::SameLines => (
            format!("it and {remote} changed the same lines of {path}{moved}"),
            format!("{save}, {skip}, make your edit again in {there} (your version is in my-edit.yaml)"),
        ),
        Clash::NotMergeable => (
            format!("it and {remote} both changed {path}{moved}, a link or a submodule, which do not merge"),
            format!("{skip}, then change {there} again"),
        ),
        Clash::Deleted => (
            format!("it deletes {path}, which {remote} changed meanwhile{moved}"),
            format!("{skip}, look at {there} and delete it again if you still mean to"),
        ),
        Clash::Added if there != path.as_str() => (
            format!("it adds {path}, and {remote} has a task with that id at {there}"),
            format!("{save}, {skip}, add it again under another id"),
        ),
        Clash::Added => (
            format!("it adds {path}, which {remote} added too with other content"),
            format!("{save}, {skip}, merge your version into {path} by hand or add it under another name"),
        ),
        Clash::MovedOn => (
            format!("it moves {} to {path}, and {remote} moved that task to {there} meanwhile", replay::task_id(path)),
            format!("{skip}, look at {there} and move it again if you still mean to"),
        ),
        Clash::Gone => (
            format!("it changes {path}, which {remote} deleted or moved away meanwhile"),
            format!("{save}, {skip}, add it again if it is still wanted"),
        ),
        Clash::WorkDirMoved => (
            format!("it moves the work folder (work_dir in {path}), and {remote} moved on meanwhile: replayed file by file, its tasks could end in both folders"),
            format!("take the commit out here ('git rebase --onto {commit}~1 {commit}'), run 'coord sync', make the move again"),
        ),
        Clash::FileAndFolder => (
            format!("it puts a file at {path}, where {remote} has a folder (or a file at a parent path)"),
            format!("{save}, {skip}, add it again under another name"),
        ),
    };
    format!(
        "cannot apply {:?} ({commit}) onto {remote}/{branch}: {what}; nothing was changed here. To resolve, keeping your other commits: {then}, then run 'coord sync'",
        c.summary
    )
}

/// A boxed error from the tick.
pub type TickError = Box<dyn std::error::Error + Send + Sync>;

/// What a sync did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Pushes made (the last one accepted); 0 when there was nothing to push.
    pub pushes: u32,
    /// Pushes rejected before the one that was accepted.
    pub rejected: u32,
    /// Commits made by the ticks of the accepted attempt.
    pub commits: usize,
    /// Local coord commits dropped to be redone, over all attempts.
    pub dropped: usize,
    /// Local coord commits replayed onto the remote tip, over all attempts.
    pub replayed: usize,
    /// Local operations dropped because the remote moved their task on (lost claims, …).
    pub lost: Vec<String>,
}

/// How the local branch relates to the remote tip, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Integration {
    /// The remote has nothing the local branch lacks.
    Ahead,
    /// The local branch has nothing the remote lacks: move to the remote tip.
    FastForward(Oid),
    /// Both moved: replay `keep` onto `onto`, dropping `dropped` tick commits.
    Rebuild {
        /// The remote tip.
        onto: Oid,
        /// Local commits to replay, oldest first.
        keep: Vec<replay::Kept>,
        /// How many tick commits are dropped.
        dropped: usize,
    },
    /// Both moved and a local commit cannot be copied (a merge, or a signed commit): touch
    /// nothing.
    Refuse(Box<LocalCommit>),
}

/// Sorts the local-only commits: tick commits are dropped (kept with [`Ticks::Keep`]), coord's
/// other commits and people's commits kept (replayed), and the first merge or signed commit is
/// returned as the reason to refuse: a copy of it would lose a parent or its signature. A commit is coord's when its
/// summary is, nobody else committed it (an amend would), and it has coord's author or names
/// its task in a `Coord-Task` trailer (coord.yaml's author may have changed since).
pub fn sort_local(
    commits: &[LocalCommit],
    identity: &Identity,
    ticks: Ticks,
) -> Result<(Vec<replay::Kept>, usize), Box<LocalCommit>> {
    let mut keep = Vec::new();
    let mut dropped = 0;
    for c in commits {
        if c.not_copyable.is_some() {
            return Err(Box::new(c.clone()));
        }
        let coords = c.committed_by_author
            && c.info.summary.starts_with("coord: ")
            && (c.author_email == identity.email && c.author_name == identity.name
                || c.info.trailers.iter().any(|(k, _)| k == "Coord-Task"));
        let (key, value) = TICK_TRAILER.split_once(": ").unwrap_or_default();
        let tick = c.info.trailers.iter().any(|(k, v)| k == key && v == value);
        if coords && tick && ticks == Ticks::Redo {
            dropped += 1;
        } else {
            keep.push(replay::Kept {
                commit: c.clone(),
                persons: !coords,
            });
        }
    }
    Ok((keep, dropped))
}

/// Decides how to bring the local branch at `head` onto the remote tip `remote`.
pub fn integration(
    repo: &Repo,
    head: Option<Oid>,
    remote: Option<Oid>,
    identity: &Identity,
    ticks: Ticks,
) -> Result<Integration, GitError> {
    let Some(remote) = remote else {
        return Ok(Integration::Ahead);
    };
    let Some(head) = head else {
        return Ok(Integration::FastForward(remote));
    };
    if repo.is_ancestor(remote, head)? {
        return Ok(Integration::Ahead);
    }
    if repo.is_ancestor(head, remote)? {
        return Ok(Integration::FastForward(remote));
    }
    let local = repo.commits_between(head, remote)?;
    Ok(match sort_local(&local, identity, ticks) {
        Ok((keep, dropped)) => Integration::Rebuild {
            onto: remote,
            keep,
            dropped,
        },
        Err(c) => Integration::Refuse(c),
    })
}

/// The result of one `git push`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Every ref accepted (or already up to date).
    Accepted,
    /// Rejected because the remote moved meanwhile: fetch and try again.
    Stale(String),
    /// Rejected for another reason (protected branch, hook).
    Refused(String),
}

/// Reads `git push --porcelain` output: accepted only when every ref line is accepted (` `
/// fast-forward, `*` new, `=` up to date; `+` forced only for a ref under `refs/coord/`, a
/// hub's lease moved by compare-and-swap); None when git reported no ref at all.
pub fn read_push(stdout: &str) -> Option<Pushed> {
    let mut refs = 0;
    for line in stdout.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(spec), summary) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if flag.chars().count() != 1 {
            continue;
        }
        refs += 1;
        let lease = flag == "+" && spec.ends_with(":refs/coord/hub");
        if lease || matches!(flag, " " | "*" | "=") {
            continue;
        }
        let reason = summary.unwrap_or(flag).trim().to_string();
        let stale = [
            "fetch first",
            "non-fast-forward",
            "stale info",
            "failed to update ref",
            "cannot lock ref",
            "incorrect old value",
            // Two pushes storing the same pack at once (receive-pack's quarantine).
            "unable to migrate objects",
        ];
        return Some(if stale.iter().any(|s| reason.contains(s)) {
            Pushed::Stale(reason)
        } else {
            Pushed::Refused(reason)
        });
    }
    (refs > 0).then_some(Pushed::Accepted)
}

/// Returns how long to wait before attempt `attempt` (1 = the first retry): between half and
/// all of `min(100 ms * 2^(attempt-1), 5 s)`, the rest chosen at random so that clones that
/// collided once do not collide again.
pub fn backoff(attempt: u32, random: u64) -> Duration {
    let cap_ms = 100u64
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(16))
        .min(5_000);
    let half = cap_ms / 2;
    Duration::from_millis(half + random % (cap_ms - half + 1))
}

/// The longest an agent's step waits for its turn in a race: a round longer than this (a
/// remote that hangs) is not a measure of the race.
const RACE_WAIT_CAP: Duration = Duration::from_secs(2);

/// Returns how long an agent's step waits before it tries again after losing a race to
/// another clone's push (the remote moved): a random part of `round / losses`, where `round`
/// is how long its last attempt took. The wait shrinks with each race lost in a row, so a
/// clone that keeps losing comes back sooner, never later, than the clone that just won (a
/// wait that grew to seconds let the winner win again and again while the others slept).
pub fn race_wait(losses: u32, round: Duration, random: u64) -> Duration {
    let cap = round.min(RACE_WAIT_CAP).as_millis() as u64 / u64::from(losses.max(1));
    Duration::from_millis(random % (cap + 1))
}

/// Returns how long an agent's step waits before its first fetch when this clone's previous
/// step won a race less than four rounds ago: between half and all of that round, so that
/// the clones that lost it, coming back within a round, go first. None otherwise.
pub fn sit_out(won: Option<RaceWon>, now_ms: u64, random: u64) -> Option<Duration> {
    let won = won?;
    let round = won.round_ms.min(RACE_WAIT_CAP.as_millis() as u64);
    let since = now_ms.checked_sub(won.at_ms)?;
    (since < 4 * round).then(|| Duration::from_millis(round / 2 + random % (round / 2 + 1)))
}

/// When a rejected push is tried again and when it gives up: `coord sync` counts every
/// rejection; an agent's step counts only rejections after which the remote had not moved
/// (no other clone's push landed), so it never gives up while others make progress and
/// work may be ready for it. A lost race waits [`race_wait`], a stall [`backoff`].
struct Retries {
    /// Counting only stalls (an agent's step) instead of every rejection.
    step: bool,
    /// Rejections that count towards `max_retries`.
    counted: u32,
    /// Races lost in a row (rejections after which the remote had moved).
    losses: u32,
    /// The remote tip the last rejected attempt started from.
    rejected_from: Option<Option<Oid>>,
    /// Whether other clones' pushes landed while this one ran (it lost a race, or its first
    /// fetch found the remote moved on since this clone last saw it).
    contended: bool,
    /// How long the last attempt took, fetch to push.
    round: Duration,
}

impl Retries {
    /// No rejection yet.
    fn new(step: bool) -> Retries {
        Retries {
            step,
            counted: 0,
            losses: 0,
            rejected_from: None,
            contended: false,
            round: Duration::ZERO,
        }
    }

    /// Notes a rejected push of an attempt that started from `tip`.
    fn rejected(&mut self, tip: Option<Oid>) {
        self.rejected_from = Some(tip);
        if !self.step {
            self.counted += 1;
        }
    }

    /// Notes the remote tip an attempt fetched, and the one this clone knew before: a race
    /// lost when the remote moved since the last rejection, a stall when it did not.
    fn fetched(&mut self, known: Option<Oid>, tip: Option<Oid>) {
        self.contended |= known.is_some() && known != tip;
        match self.rejected_from.take() {
            Some(before) if before != tip => self.losses += 1,
            Some(_) => {
                self.losses = 0;
                self.counted += u32::from(self.step);
            }
            None => {}
        }
    }

    /// Returns how long to wait before the next attempt.
    fn wait(&self, random: u64) -> Duration {
        match (self.step, self.losses) {
            (true, 1..) => race_wait(self.losses, self.round, random),
            _ => backoff(self.counted.max(1), random),
        }
    }
}

/// Waits before an agent's step when this clone won the last race ([`sit_out`]).
fn wait_for_turn(git_dir: &Path) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let random = getrandom::u64().unwrap_or(0);
    if let Some(wait) = sit_out(Stats::read(git_dir).race_won, now_ms, random) {
        std::thread::sleep(wait);
    }
}

/// Notes, for the clone's next step, a race its step won after `retries`.
fn note_race_won(git_dir: &Path, retries: &Retries) {
    if !(retries.step && retries.contended) {
        return;
    }
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let round_ms = retries.round.as_millis() as u64;
    Stats::record_race_won(git_dir, RaceWon { at_ms, round_ms });
}

/// Runs `coord sync` in the repository around `dir`. `tick` runs one tick with the lock held
/// and returns its commit count; `say` prints a progress line.
pub fn run(
    dir: &Path,
    opts: &Options,
    tick: &mut dyn FnMut(&Session<'_>) -> Result<usize, TickError>,
    say: &mut dyn FnMut(&str),
) -> Result<Report, SyncError> {
    let store = Store::open(dir)?;
    store.repo.refuse_unfinished()?;
    let branch = checked_out_branch(&store.repo, opts.branch.as_deref())?;
    plain_name("remote", &opts.remote)?;
    let tracking = format!("refs/remotes/{}/{branch}", opts.remote);
    let mut report = Report::default();
    let mut retries = Retries::new(opts.redo_on_reject);
    let mut last_rejection = None;
    if opts.redo_on_reject {
        wait_for_turn(store.repo.git_dir());
    }
    loop {
        if let Some(reason) = last_rejection.take() {
            if retries.counted > opts.max_retries {
                return Err(SyncError::Rejected {
                    remote: opts.remote.clone(),
                    branch,
                    attempts: report.pushes,
                    reason,
                });
            }
            std::thread::sleep(retries.wait(getrandom::u64().unwrap_or(0)));
        }
        let started = std::time::Instant::now();
        let known = store.repo.ref_target(&tracking)?;
        fetch(store.root(), &opts.remote, &branch, &tracking)?;
        let remote_tip = store.repo.ref_target(&tracking)?;
        retries.fetched(known, remote_tip);
        let (before, head) = {
            let session = store.session(Some(lock::acquire(store.repo.git_dir(), opts.wait)?));
            let store = &session;
            store.repo.refuse_unfinished()?;
            let mut recovered = Vec::new();
            if store.previous_killed() {
                recovered = store.remove_temp_objects()?;
            }
            recovered.extend(store.recover(opts.now)?);
            for line in recovered {
                say(&format!("coord: {line}"));
            }
            settle_put_off(store)?;
            integrate(store, opts, &branch, remote_tip, &mut report, say)?;
            if opts.redo_on_reject {
                for line in store.record_external_changes(opts.now, None)?.lines {
                    say(&format!("coord: {line}"));
                }
            }
            let before = store.repo.head()?.oid;
            store.deepen_with(unshallow(store.root(), &opts.remote, &branch, &tracking));
            report.commits = tick(store).map_err(SyncError::Tick)?;
            if !opts.redo_on_reject {
                replay_put_off(store, opts, &branch, &mut report, say)?;
            }
            let after = store.repo.head()?.oid;
            session.finish()?;
            (before, after)
        };
        let Some(head) = head.filter(|h| Some(*h) != remote_tip) else {
            return Ok(report);
        };
        report.pushes += 1;
        Stats::record_push(store.repo.git_dir(), opts.now.as_second());
        let mut pushed = push(store.root(), opts, &branch, head);
        retries.round = started.elapsed();
        count_rejection(&store, &pushed);
        if opts.redo_on_reject
            && matches!(pushed, Ok(Pushed::Stale(_)))
            && landed_meanwhile(&store, opts, &branch, &tracking, head)
        {
            // Another push from this clone (a sync, a watch machine's cron) carried the step
            // there first: it is on the remote, so it is done, not to be undone and redone.
            pushed = Ok(Pushed::Accepted);
        }
        if opts.redo_on_reject && !matches!(pushed, Ok(Pushed::Accepted)) {
            // The step did not land: it must not stay here looking done (an agent would work
            // on a claim it does not hold); the next attempt or run redoes it.
            undo(&store, opts, head, before).map_err(|e| not_undone(e, opts, &branch, &pushed))?;
        }
        match pushed? {
            Pushed::Accepted => {
                note_race_won(store.repo.git_dir(), &retries);
                return Ok(report);
            }
            Pushed::Refused(reason) => {
                return Err(SyncError::Refused {
                    remote: opts.remote.clone(),
                    branch,
                    reason,
                })
            }
            Pushed::Stale(reason) => {
                report.rejected += 1;
                retries.rejected(remote_tip);
                say(&format!(
                    "coord: push rejected ({reason}); fetching and trying again"
                ));
                last_rejection = Some(reason);
            }
        }
    }
}

/// Counts a push the remote rejected in the clone's stats (`coord serve`'s `/metrics`).
fn count_rejection(store: &Store, pushed: &Result<Pushed, SyncError>) {
    let why = match pushed {
        Ok(Pushed::Stale(_)) => Rejection::Stale,
        Ok(Pushed::Refused(_)) => Rejection::Refused,
        _ => return,
    };
    Stats::record_rejection(store.repo.git_dir(), why);
}

/// Returns whether `head` reached the remote after all (fetching again): a push rejected
/// because another push of this clone already carried it. A failed fetch counts as no.
fn landed_meanwhile(
    store: &Store,
    opts: &Options,
    branch: &str,
    tracking: &str,
    head: Oid,
) -> bool {
    fetch(store.root(), &opts.remote, branch, tracking).is_ok()
        && store
            .repo
            .ref_target(tracking)
            .ok()
            .flatten()
            .is_some_and(|tip| store.repo.is_ancestor(head, tip).unwrap_or(false))
}

/// Moves the branch back from the step's `head` to `before`, undoing a step whose push did
/// not land; a branch that moved on from `head` meanwhile is left alone (`GitError::Moved`).
fn undo(store: &Store, opts: &Options, head: Oid, before: Option<Oid>) -> Result<(), SyncError> {
    let _lock = lock::acquire(store.repo.git_dir(), opts.wait)?;
    if let Some(before) = before {
        store.repo.switch_to(Some(head), before)?;
    }
    Ok(())
}

/// Names a step that could not be undone because a person committed on top of it.
fn not_undone(
    e: SyncError,
    opts: &Options,
    branch: &str,
    pushed: &Result<Pushed, SyncError>,
) -> SyncError {
    if !matches!(e, SyncError::Git(GitError::Moved { .. })) {
        return e;
    }
    let why = match pushed {
        Ok(Pushed::Stale(reason) | Pushed::Refused(reason)) => reason.clone(),
        Ok(Pushed::Accepted) => "accepted".to_string(),
        Err(e) => e.to_string(),
    };
    SyncError::NotUndone {
        remote: opts.remote.clone(),
        branch: branch.to_string(),
        why,
    }
}

/// Stops a sync about to move onto `tip` when a file the last recording held back as still
/// being written (a person's edit, or a hand move held whole) belongs to a task the remote
/// changed since `head`: its change would land later as it is, never replayed onto the
/// remote's (a hand move as a second copy of the task).
fn refuse_still_written(
    store: &Session<'_>,
    remote: &str,
    head: Option<Oid>,
    tip: Oid,
) -> Result<(), SyncError> {
    let held = store.held_back();
    if held.is_empty() {
        return Ok(());
    }
    let base = match head {
        Some(head) => store.repo.merge_base(head, tip)?,
        None => None,
    };
    let prefix = format!("{}/", store.work_dir());
    let task_of = |path: &str| Some(crate::board::task_at(path.strip_prefix(&prefix)?)?.1);
    let changed: std::collections::HashSet<_> = store
        .repo
        .paths_between(base, tip)?
        .iter()
        .filter_map(|p| task_of(p))
        .collect();
    let Some((path, id)) = held.into_iter().find_map(|p| {
        task_of(&p)
            .filter(|id| changed.contains(id))
            .map(|id| (p, id))
    }) else {
        return Ok(());
    };
    Err(SyncError::StillWritten {
        path,
        id: id.to_string(),
        remote: remote.to_string(),
    })
}

/// Brings the local branch onto the remote tip (the caller holds the lock). The commits the
/// replay puts off until after the tick ([`replay::Replay::again`]) are added to the record
/// of them ([`PutOff`]) before the branch moves without them.
fn integrate(
    store: &Session<'_>,
    opts: &Options,
    branch: &str,
    remote_tip: Option<Oid>,
    report: &mut Report,
    say: &mut dyn FnMut(&str),
) -> Result<(), SyncError> {
    let head = store.repo.head()?.oid;
    let integration = integration(&store.repo, head, remote_tip, &store.identity, opts.ticks)?;
    if let (Some(tip), false) = (remote_tip, matches!(integration, Integration::Ahead)) {
        refuse_still_written(store, &opts.remote, head, tip)?;
    }
    match integration {
        Integration::Ahead => Ok(()),
        Integration::FastForward(tip) => Ok(store.repo.switch_to(head, tip)?),
        Integration::Refuse(c) if c.not_copyable == Some(UNRELATED) => Err(SyncError::Unrelated {
            branch: branch.to_string(),
            remote: opts.remote.clone(),
            commit: format!("{} {:?}", short(&c.info.oid), c.info.summary),
        }),
        Integration::Refuse(c) => Err(SyncError::PersonsCommit {
            what: c.not_copyable.unwrap_or("a merge"),
            branch: branch.to_string(),
            remote: opts.remote.clone(),
            commit: format!("{} {:?}", short(&c.info.oid), c.info.summary),
            author: format!("{} <{}>", c.author_name, c.author_email),
        }),
        Integration::Rebuild {
            onto,
            keep,
            dropped,
        } => {
            // An agent's step stands in for the tick (`--sync`): nothing to put off for.
            let defer = match opts.redo_on_reject {
                true => Defer::Nothing,
                false => Defer::BlockedClaims,
            };
            let drops = &opts.drop_edits;
            let replay = replay::replay(&store.repo, store.work_dir(), onto, &keep, drops, defer)
                .map_err(|stop| stopped(stop, opts, branch))?;
            put_off(store, &keep, &replay.again, replay.tip.unwrap_or(onto))?;
            store.repo.switch_to(head, replay.tip.unwrap_or(onto))?;
            let dropped = dropped + replay.rederived;
            report.dropped += dropped;
            report.replayed += replay.redone;
            say(&format!(
                "coord: onto {}/{branch}: dropped {dropped} tick commits to redo, replayed {}",
                opts.remote, replay.redone
            ));
            for line in &replay.dropped {
                say(&format!("coord: {line}"));
            }
            for value in &replay.unused_drops {
                say(&format!("coord: note: --drop-edit {value} named no change of the commits replayed that met {}'s; nothing was left out for it", opts.remote));
            }
            report.lost.extend(replay.dropped);
            set_aside(store, opts.now, replay.stale, say)?;
            hand_off_again(store, opts.now, &replay.hand_off_again, say)
        }
    }
}

/// Returns the error for a replay that stopped.
fn stopped(stop: Stop, opts: &Options, branch: &str) -> SyncError {
    match stop {
        Stop::Git(e) => e.into(),
        Stop::Conflict(c) => SyncError::Conflict {
            branch: branch.to_string(),
            remote: opts.remote.clone(),
            detail: c,
        },
    }
}

/// Adds the commits a replay put off to the record of them, durably.
/// Commits of the record still on the branch (`keep`: a sync killed before it moved the
/// branch) are replayed by this integration and leave the record; the record names `tip`,
/// the tip the branch moves onto.
fn put_off(
    store: &Store,
    keep: &[replay::Kept],
    again: &[replay::Kept],
    tip: Oid,
) -> Result<(), SyncError> {
    let git_dir = store.repo.git_dir();
    let mut record = PutOff::read(git_dir);
    if record.commits.is_empty() && again.is_empty() {
        return Ok(());
    }
    let on_branch = |oid: &Oid| keep.iter().any(|k| k.commit.info.oid == oid.to_string());
    record.commits.retain(|oid| !on_branch(oid));
    record.onto = Some(tip);
    for kept in again {
        let oid = Oid::from_str(&kept.commit.info.oid).map_err(|e| GitError::Git {
            context: format!("bad commit id {}", kept.commit.info.oid),
            source: e,
        })?;
        if !record.commits.contains(&oid) {
            record.commits.push(oid);
        }
    }
    match record.commits.is_empty() {
        true => Ok(PutOff::remove(git_dir)?),
        false => Ok(record.write(git_dir)?),
    }
}

/// Ends the record of put-off commits of a sync killed after the branch moved onto their
/// replay (the branch holds them); a replay the branch never took is made again.
fn settle_put_off(store: &Store) -> Result<(), SyncError> {
    let git_dir = store.repo.git_dir();
    let mut record = PutOff::read(git_dir);
    let Some(made) = record.made.take() else {
        return Ok(());
    };
    let head = store.repo.head()?.oid;
    if head.is_some_and(|h| store.repo.is_ancestor(made, h).unwrap_or(false)) {
        return Ok(PutOff::remove(git_dir)?);
    }
    Ok(record.write(git_dir)?)
}

/// Replays, on the tip sync's tick left, the claims put off because the remote had their task
/// blocked (this clone's own tick had unblocked it, and its commit was dropped to be redone),
/// with the later operations on those tasks. A claim stands when the tick unblocked the task
/// again and nobody took it meanwhile; otherwise it is lost and said so.
fn replay_put_off(
    store: &Session<'_>,
    opts: &Options,
    branch: &str,
    report: &mut Report,
    say: &mut dyn FnMut(&str),
) -> Result<(), SyncError> {
    let git_dir = store.repo.git_dir();
    let mut record = PutOff::read(git_dir);
    let head = store.repo.head()?.oid;
    let Some(onto) = head.filter(|_| !record.commits.is_empty()) else {
        return Ok(());
    };
    let holds = |tip: Oid| store.repo.is_ancestor(tip, onto).unwrap_or(false);
    if record.onto.is_some_and(|tip| !holds(tip)) {
        say(&format!(
            "coord: lost claim: {} commit(s) put off until the tick were left out: the branch was moved elsewhere since (a git reset?)",
            record.commits.len()
        ));
        return Ok(PutOff::remove(git_dir)?);
    }
    let mut again = Vec::new();
    for &oid in &record.commits {
        match store.repo.local_commit(oid) {
            Ok(commit) => again.push(replay::Kept {
                commit,
                persons: false,
            }),
            Err(_) => say(&format!(
                "coord: lost claim: commit {oid}, put off until the tick, is gone from the repository"
            )),
        }
    }
    let work_dir = store.work_dir();
    let replay = replay::replay(&store.repo, work_dir, onto, &again, &[], Defer::Nothing)
        .map_err(|stop| stopped(stop, opts, branch))?;
    let tip = replay.tip.unwrap_or(onto);
    if tip != onto {
        record.made = Some(tip);
        record.write(git_dir)?;
        store.repo.switch_to(head, tip)?;
        say(&format!(
            "coord: replayed {} commits that waited for the tick to unblock their task",
            replay.redone
        ));
    }
    PutOff::remove(git_dir)?;
    report.replayed += replay.redone;
    for line in &replay.dropped {
        say(&format!("coord: {line}"));
    }
    report.lost.extend(replay.dropped);
    set_aside(store, opts.now, replay.stale, say)
}

/// Makes the handoff steps of `parents` again, through the engine, where the replay could not
/// place them (another clone took a step's id meanwhile): the missing ones get free ids.
fn hand_off_again(
    store: &Session<'_>,
    now: Timestamp,
    parents: &[String],
    say: &mut dyn FnMut(&str),
) -> Result<(), SyncError> {
    for parent in parents {
        let Ok(id) = parent.parse::<TaskId>() else {
            continue;
        };
        match command(store, now, |board, inputs| {
            commands::hand_off_again(board, inputs, &id)
        })? {
            Ok(plan) => {
                let made: Vec<&str> = plan
                    .transitions
                    .iter()
                    .map(|t| t.subject.as_str())
                    .collect();
                say(&format!(
                    "coord: a handoff step id of {id} was taken on the remote meanwhile: handed off again as {}",
                    made.join(", ")
                ));
            }
            Err(e) => say(&format!(
                "coord: the handoff of {id} could not be made again: {e}"
            )),
        }
    }
    Ok(())
}

/// Plans a command through the engine on the board as it is now and applies it; the plan on
/// success, the command's refusal otherwise.
fn command(
    store: &Session<'_>,
    now: Timestamp,
    plan: impl FnOnce(&Board, &Inputs<'_>) -> Result<Plan, commands::CommandError>,
) -> Result<Result<Plan, commands::CommandError>, SyncError> {
    let (board, _) = store.load()?;
    let inputs = Inputs {
        config: &store.config,
        now,
        verifier: &AcceptAll,
        attempts: store,
        sightings: store,
        gates: store.store(),
        epoch: None,
    };
    let planned = plan(&board, &inputs);
    if let Ok(p) = &planned {
        store.apply_plan(&p.transitions, now, Origin::Command, &mut |_, _| {})?;
    }
    Ok(planned)
}

/// Records results whose task moved on upstream in the task's history, through the engine.
fn set_aside(
    store: &Session<'_>,
    now: Timestamp,
    stale: Vec<replay::Stale>,
    say: &mut dyn FnMut(&str),
) -> Result<(), SyncError> {
    for s in stale {
        let Ok(id) = s.id.parse::<TaskId>() else {
            continue;
        };
        match command(store, now, |board, inputs| {
            commands::set_aside(board, inputs, &id, s.result)
        })? {
            Ok(_) => {
                say(&format!(
                    "coord: the result for {id} arrived after it moved on: kept in its coord.history as stale_result"
                ));
            }
            Err(e) => say(&format!(
                "coord: the result for {id} could not be kept: {e}"
            )),
        }
    }
    Ok(())
}

fn short(oid: &str) -> String {
    oid.chars().take(10).collect()
}

/// Returns the checked-out branch, checking it against `--branch`.
fn checked_out_branch(repo: &Repo, wanted: Option<&str>) -> Result<String, SyncError> {
    let current = repo.head()?.branch.ok_or(SyncError::Detached)?;
    match wanted {
        Some(w) if w != current => Err(SyncError::WrongBranch {
            wanted: w.to_string(),
            current,
        }),
        _ => {
            plain_name("branch", &current)?;
            Ok(current)
        }
    }
}

/// Refuses names that git could read as an option, a refspec or a path.
fn plain_name(what: &'static str, name: &str) -> Result<(), SyncError> {
    let ok = !name.is_empty()
        && !name.starts_with(['-', '/', '.'])
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    if ok {
        Ok(())
    } else {
        Err(SyncError::BadName {
            what,
            name: name.to_string(),
        })
    }
}

/// Fetches the remote branch into its remote-tracking ref; a branch the remote does not have
/// yet leaves no ref (the first push creates it).
fn fetch(root: &Path, remote: &str, branch: &str, tracking: &str) -> Result<(), SyncError> {
    let refspec = format!("+refs/heads/{branch}:{tracking}");
    let args = ["fetch", "--quiet", "--no-tags", remote, &refspec];
    let mut out = git(root, "fetch", &args)?;
    let mut tries = 1;
    while !out.status.success()
        && tries < FETCH_TRIES
        && local_race(&String::from_utf8_lossy(&out.stderr))
    {
        // A person's git pull, fetch, push or gc in this clone got in the way, or a killed
        // one (a sync killed during its fetch) left its lock.
        match dead_gits_lock(&String::from_utf8_lossy(&out.stderr)) {
            Some(lock) => {
                let _ = std::fs::remove_file(lock);
            }
            None => std::thread::sleep(backoff(1, getrandom::u64().unwrap_or(0))),
        }
        out = git(root, "fetch", &args)?;
        tries += 1;
    }
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("couldn't find remote ref") {
        return Ok(());
    }
    if !is_configured(root, remote) {
        return Err(SyncError::NoRemote(remote.to_string()));
    }
    Err(SyncError::GitCommand {
        action: "fetch",
        message: last_lines(&stderr),
    })
}

/// Returns whether `remote` is a remote configured in the clone at `root` (git reads an
/// unknown name as a path or URL, and blames access rights when there is none).
fn is_configured(root: &Path, remote: &str) -> bool {
    let args = ["remote", "get-url", remote];
    git(root, "remote", &args).map_or(true, |out| out.status.success())
}

/// Returns the way sync deepens a shallow clone before an attempt is numbered: a fetch of
/// the branch's whole history (attempt numbers come from the assignment commits in it).
fn unshallow(root: &Path, remote: &str, branch: &str, tracking: &str) -> crate::store::Deepen {
    let root = root.to_path_buf();
    let (remote, refspec) = (
        remote.to_string(),
        format!("+refs/heads/{branch}:{tracking}"),
    );
    Box::new(move || {
        let args = [
            "fetch",
            "--quiet",
            "--no-tags",
            "--unshallow",
            &remote,
            &refspec,
        ];
        git(&root, "fetch", &args).is_ok_and(|out| out.status.success())
    })
}

/// Returns the ref lock git's stderr says it found ("Unable to create '<path>.lock': File
/// exists") when a killed git left it: no process on this machine has it open and it is older
/// than the moment a live git holds a ref lock closed before renaming it.
fn dead_gits_lock(stderr: &str) -> Option<PathBuf> {
    let path = stderr
        .split("Unable to create '")
        .nth(1)?
        .split("': File exists")
        .next()?;
    let path = PathBuf::from(path);
    let a_ref_lock =
        path.extension().is_some_and(|e| e == "lock") && path.to_string_lossy().contains("/refs/");
    let old = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= DEAD_LOCK_AGE);
    (a_ref_lock && old && !lock::Holder::of(&path).is_known()).then_some(path)
}

/// How old a ref lock no process has open must be to be taken for a killed git's.
const DEAD_LOCK_AGE: Duration = Duration::from_secs(1);

/// How many times a fetch that lost a race with another git of the clone is run in all.
const FETCH_TRIES: u32 = 30;

/// Returns whether git's stderr says the fetch lost a race with another git process of this
/// clone: a local ref being updated (its lock file existed, or the ref moved between git
/// reading and locking it), or an object folder a `git gc` removed while the fetch wrote
/// into it.
fn local_race(stderr: &str) -> bool {
    stderr.contains("cannot lock ref")
        || (stderr.contains("Unable to create") && stderr.contains(".lock"))
        || stderr.contains("unable to create temporary file")
}

/// Pushes `head` to the remote branch, never forcing.
fn push(root: &Path, opts: &Options, branch: &str, head: Oid) -> Result<Pushed, SyncError> {
    let refspec = format!("{head}:refs/heads/{branch}");
    let mut args = vec!["push", "--porcelain"];
    let with = opts.with_ref.as_ref().map(RefUpdate::push_args);
    if let Some([lease, _]) = &with {
        args.extend(["--atomic", lease.as_str()]);
    }
    args.extend([opts.remote.as_str(), &refspec]);
    if let Some([_, spec]) = &with {
        args.push(spec);
    }
    let out = git(root, "push", &args)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match read_push(&stdout) {
        Some(Pushed::Accepted) if !out.status.success() => None,
        other => other,
    }
    .ok_or_else(|| SyncError::GitCommand {
        action: "push",
        message: last_lines(&String::from_utf8_lossy(&out.stderr)),
    })
}

fn git(
    root: &Path,
    action: &'static str,
    args: &[&str],
) -> Result<std::process::Output, SyncError> {
    crate::git::command::git_output(root, args).map_err(|e| SyncError::GitCommand {
        action,
        message: format!("cannot run git ({e}); install git and put it on PATH"),
    })
}

/// Returns the last lines of git's stderr on one line.
fn last_lines(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "no message".to_string()
    } else {
        tail.join("; ")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::git::CommitInfo;

    fn commit(n: u8, author: &str, summary: &str, trailers: &[(&str, &str)]) -> LocalCommit {
        LocalCommit {
            info: CommitInfo {
                oid: format!("{n:040x}"),
                time: Timestamp::UNIX_EPOCH,
                summary: summary.to_string(),
                trailers: trailers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            author_email: format!("{author}@localhost"),
            author_name: author.to_string(),
            parents: 1,
            not_copyable: None,
            committed_by_author: true,
        }
    }

    #[test]
    fn tick_commits_drop_other_commits_replay_merges_and_signed_commits_refuse() {
        let id = Identity::default();
        let tick = [("Coord-Task", "a"), ("Coord-Origin", "tick")];
        let commits = [
            commit(1, "coord", "coord: record external changes", &[]),
            commit(2, "coord", "coord: assign a to alice", &tick),
            commit(
                3,
                "coord",
                "coord: alice reports success for a",
                &[("Coord-Task", "a")],
            ),
            commit(4, "coord", "coord: assign b to bob", &tick),
        ];
        let (keep, dropped) = sort_local(&commits, &id, Ticks::Redo).unwrap();
        assert_eq!(dropped, 2);
        let kept = |c: &LocalCommit, persons| replay::Kept {
            commit: c.clone(),
            persons,
        };
        assert_eq!(keep, [kept(&commits[0], false), kept(&commits[2], false)]);

        let mut person = commits.to_vec();
        person.insert(2, commit(5, "alice", "fix typo", &tick));
        let (keep, dropped) = sort_local(&person, &id, Ticks::Redo).unwrap();
        assert_eq!(
            dropped, 2,
            "a person's tick trailer does not make it coord's"
        );
        assert_eq!(keep[1], kept(&person[2], true));
        let impostor = commit(7, "coord", "add a file by hand", &tick);
        let (keep, _) = sort_local(std::slice::from_ref(&impostor), &id, Ticks::Redo).unwrap();
        assert_eq!(keep, [kept(&impostor, true)], "summary must be coord's");
        let mut amended = commits[1].clone();
        amended.committed_by_author = false;
        let (keep, _) = sort_local(std::slice::from_ref(&amended), &id, Ticks::Redo).unwrap();
        assert_eq!(keep, [kept(&amended, true)], "a person amended it");
        let old_author = commit(9, "coord-bot", "coord: assign c to carl", &tick);
        let (keep, dropped) = sort_local(&[old_author], &id, Ticks::Redo).unwrap();
        assert_eq!(
            (keep.len(), dropped),
            (0, 1),
            "coord.yaml's author changed since"
        );

        let mut merge = commit(6, "coord", "coord: merge", &[]);
        merge.parents = 2;
        merge.not_copyable = Some("a merge");
        assert!(sort_local(&[merge], &id, Ticks::Redo).is_err());
        let mut signed = commit(8, "alice", "signed", &[]);
        signed.not_copyable = Some("a signed commit");
        person.insert(0, signed);
        assert_eq!(
            sort_local(&person, &id, Ticks::Redo)
                .unwrap_err()
                .info
                .summary,
            "signed"
        );
    }

    #[test]
    fn push_porcelain_is_accepted_only_when_every_ref_is() {
        let ok = "To /r.git\n \trefs/heads/main:refs/heads/main\tabc..def\nDone\n";
        assert_eq!(read_push(ok), Some(Pushed::Accepted));
        let new = "To /r.git\n*\tabc:refs/heads/main\t[new branch]\nDone\n";
        assert_eq!(read_push(new), Some(Pushed::Accepted));
        let same = "To /r.git\n=\tabc:refs/heads/main\t[up to date]\nDone\n";
        assert_eq!(read_push(same), Some(Pushed::Accepted));
        let stale = "To /r.git\n!\tabc:refs/heads/main\t[rejected] (fetch first)\nDone\n";
        assert!(matches!(read_push(stale), Some(Pushed::Stale(r)) if r.contains("fetch first")));
        let lock = "To /r.git\n!\tabc:refs/heads/main\t[remote rejected] (failed to update ref)\n";
        assert!(matches!(read_push(lock), Some(Pushed::Stale(_))));
        let quarantine = "To /r.git\n!\tabc:refs/heads/main\t[remote rejected] (unable to migrate objects to permanent storage)\nDone\n";
        assert!(matches!(read_push(quarantine), Some(Pushed::Stale(_))));
        let hook =
            "To /r.git\n!\tabc:refs/heads/main\t[remote rejected] (pre-receive hook declined)\n";
        assert!(matches!(read_push(hook), Some(Pushed::Refused(r)) if r.contains("hook declined")));
        let forced = "To /r.git\n+\tabc:refs/heads/main\tabc...def (forced update)\n";
        assert!(matches!(read_push(forced), Some(Pushed::Refused(_))));
        let lease = "To /r.git\n \tabc:refs/heads/main\tabc..def\n+\tdef:refs/coord/hub\tabc...def (forced update)\n";
        assert_eq!(read_push(lease), Some(Pushed::Accepted));
        assert_eq!(read_push("To /r.git\nDone\n"), None);
    }

    #[test]
    fn a_fetch_that_lost_a_race_with_another_git_of_the_clone_is_told_apart() {
        assert!(local_race(
            "error: cannot lock ref 'refs/remotes/origin/main': is at 7bf7 but expected 47cb"
        ));
        assert!(local_race(
            "fatal: Unable to create '/r/.git/refs/remotes/origin/main.lock': File exists."
        ));
        assert!(!local_race(
            "fatal: 'origin' does not appear to be a git repository"
        ));
        assert!(!local_race(
            "fatal: couldn't find remote ref refs/heads/main"
        ));
        assert!(local_race(
            "error: unable to create temporary file: No such file or directory"
        ));
    }

    #[test]
    fn backoff_grows_with_jitter_and_a_cap() {
        assert_eq!(backoff(1, 0), Duration::from_millis(50));
        assert_eq!(backoff(1, 50), Duration::from_millis(100));
        assert_eq!(backoff(3, 0), Duration::from_millis(200));
        assert!(backoff(3, 7) > backoff(3, 0));
        assert_eq!(backoff(30, u64::MAX), backoff(30, u64::MAX % 2501));
        assert!(backoff(30, u64::MAX) <= Duration::from_secs(5));
    }

    #[test]
    fn a_step_that_keeps_losing_races_waits_less_each_time() {
        let round = Duration::from_millis(400);
        assert_eq!(race_wait(1, round, 400), round);
        assert_eq!(race_wait(2, round, 200), Duration::from_millis(200));
        assert_eq!(
            race_wait(4, round, u64::MAX),
            race_wait(4, round, u64::MAX % 101)
        );
        assert!(race_wait(1, Duration::from_secs(60), u64::MAX) <= RACE_WAIT_CAP);
    }

    #[test]
    fn the_winner_of_a_recent_race_sits_out_part_of_a_round() {
        let won = RaceWon {
            at_ms: 10_000,
            round_ms: 200,
        };
        assert_eq!(
            sit_out(Some(won), 10_100, 0),
            Some(Duration::from_millis(100))
        );
        assert_eq!(
            sit_out(Some(won), 10_799, 100),
            Some(Duration::from_millis(200))
        );
        assert_eq!(sit_out(Some(won), 10_800, 0), None);
        assert_eq!(sit_out(Some(won), 9_000, 0), None, "a clock set back");
        assert_eq!(sit_out(None, 10_100, 0), None);
    }

    #[test]
    fn a_step_gives_up_only_on_rejections_while_the_remote_stood_still() {
        let oid = |n: u8| Oid::from_bytes(&[n; 20]).ok();
        let (a, b) = (oid(1), oid(2));
        let mut step = Retries::new(true);
        step.fetched(a, a);
        assert!(!step.contended);
        step.rejected(a);
        step.fetched(a, b);
        assert_eq!((step.counted, step.losses), (0, 1));
        assert!(step.contended);
        step.rejected(b);
        step.fetched(b, b);
        assert_eq!((step.counted, step.losses), (1, 0));
        let mut sync = Retries::new(false);
        sync.rejected(a);
        sync.fetched(a, b);
        assert_eq!(sync.counted, 1);
    }

    #[test]
    fn names_that_git_could_misread_are_refused() {
        for bad in ["", "-f", "/abs", "a..b", "a:b", "a b", ".hidden"] {
            assert!(plain_name("remote", bad).is_err(), "{bad:?}");
        }
        for good in ["origin", "up-stream", "feature/x", "v1.2"] {
            assert!(plain_name("branch", good).is_ok(), "{good:?}");
        }
    }
}
