//! The operations every front end calls (the CLI, `watch`, `sync`, and the coming server, MCP
//! server and agent runner): [`Coord`] opens a repository (discovery, coord.yaml, schemas)
//! at one instant, takes the coordinator lock and finishes what a killed run left, and offers
//! each operation with a typed outcome. The steps below it (store loads a board, the engine
//! plans, the store applies, git records) are called here in the order they need, so no front
//! end has to know it. Progress is reported as [`Event`]s to the sink the front end gave;
//! nothing here prints. Does I/O through the store and the lock.

mod agent;
mod answer;
mod archive;
pub(crate) mod demo;
mod doctor;
mod edit;
pub mod events;
mod export;
mod group;
pub mod hub;
pub mod import;
pub(crate) mod init;
mod install;
mod log;
mod new;
mod person;
mod prime;
mod profiles;
mod remote;
mod schedules;
mod status;
#[cfg(test)]
mod tests;
mod tick;
mod validate;
mod verify;
pub mod webhooks;
mod work;
mod worktree;

pub use crate::engine::commands::{CommandError, Fence};
pub use crate::lock::LockError;
pub use crate::view::{AgentRow, TaskCopy, TaskView};
pub use agent::{Claimed, How, Reported, Signature, Verdict};
pub use answer::{
    schemas, Acted, Agents, AnswerSchema, Beat, BeatOp, ClaimAnswer, ClaimedWork, Granted,
    LeaseStatus, Log, LogPage, LostEvent, NothingClaimed, PersonOp, ReportAnswer, ReportOp,
    TaskCopies, Version, Versioned, WorkItem, WorkList, JSON_VERSION,
};
pub use archive::Archived;
pub use doctor::{Finding, FindingCode};
pub use edit::EditSource;
pub use export::Exported;
pub use init::{init, Initialized, Setup};
pub use install::Touched;
pub use log::LogEntry;
pub use new::{Created, NewTask};
pub use profiles::{AddedAgent, NewAgent};
pub use schedules::ScheduleRow;
pub use status::{Cursor, PushRate, Status, TaskFilter, TaskPage, TaskRow, Tentative};
pub use tick::{describe, Moved, Planned, Ticked, TICK_WAIT};
pub use validate::{validate, Validation};
pub use verify::{Verified, Violation, ViolationKind};
pub use work::{Lost, Unsettled, Work};
pub use worktree::Worktree;

use crate::engine::{AcceptAll, Inputs, Plan, Transition};
use crate::git::GitError;
use crate::lock;
use crate::sign::KeyRing;
use crate::store::{Applied, Origin, Session, Store, StoreError};
use crate::sync::{self, SyncError};
use crate::watch::SeenComplete;
use jiff::Timestamp;
use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why an operation failed. Each variant shows its cause's message and keeps the cause as its
/// source, so a front end can tell the kinds apart by walking the chain.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store could not read, write or recover.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A git failure (or git is in the middle of an operation).
    #[error("{0}")]
    Git(#[from] GitError),
    /// The coordinator lock could not be taken.
    #[error("{0}")]
    Lock(#[from] LockError),
    /// A single-task command was refused (no such task, wrong state, nothing to claim, ...).
    #[error("{0}")]
    Command(#[from] CommandError),
    /// A sync with the remote failed.
    #[error("{0}")]
    Sync(#[source] SyncError),
    /// Hub mode's lease (`coord serve --hub`).
    #[error("{0}")]
    Hub(#[from] hub::HubError),
    /// A value given to an operation is unusable (a usage error: exit 2).
    #[error("{0}")]
    Usage(String),
    /// The operation refused to act (the message says why and what to do).
    #[error("{0}")]
    Refused(String),
    /// On the remote the task had moved on: the result reported for it was not accepted and
    /// is kept in its `coord.history` as a `stale_result`.
    #[error("task '{id}' is {state} on the remote; the result was not accepted and is kept in its coord.history as stale_result")]
    MovedOn {
        /// The task.
        id: crate::model::TaskId,
        /// Its state on the remote.
        state: String,
    },
    /// A file outside `work/` (AGENTS.md) could not be read or written.
    #[error("cannot {what} {path}")]
    Io {
        /// `read` or `write`.
        what: &'static str,
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file a command was to change could not be changed; nothing was committed for it.
    #[error("{path} could not be changed ({why}); nothing was committed for it")]
    Unchanged {
        /// The task file, repo-relative.
        path: String,
        /// Why.
        why: String,
    },
}

impl Error {
    /// Returns whether the step was made in this clone but not pushed, the branch having moved
    /// on meanwhile (a `coord sync` in the same clone committed): it is not lost, the next
    /// `coord sync` replays it (or drops it, when the task moved on upstream).
    pub fn is_tentative(&self) -> bool {
        matches!(self, Error::Sync(SyncError::NotUndone { .. }))
    }
}

impl From<SyncError> for Error {
    /// Keeps a lock error a lock error, so that it is told apart (exit 3).
    fn from(e: SyncError) -> Error {
        match e {
            SyncError::Lock(e) => Error::Lock(e),
            e => Error::Sync(e),
        }
    }
}

/// How a repository is opened for operations.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The instant the operations act at; None reads the system clock when opening.
    pub now: Option<Timestamp>,
    /// How long a writing operation waits for another coordinator's lock; None for each
    /// operation's default (0 s for the tick and sync, 10 s for agent and person commands).
    pub wait: Option<Duration>,
    /// Files a watcher saw renamed in and not written since, with
    /// their mtime and size then: loads read them without waiting for them to settle.
    pub seen_complete: SeenComplete,
    /// Acts on this clone only, whatever `sync.remote` says (a hub, its clone's only writer,
    /// pushes in batches of its own).
    pub local: bool,
    /// The epoch of the hub opening it (its lease's): every attempt it starts records it.
    pub epoch: Option<u64>,
    /// The idempotency key of the claim this opening makes (a claim over HTTP): the grant
    /// records a digest of it, and a claim under a key already granted to the agent is
    /// answered with that grant again (`engine::commands::granted_under`).
    pub claim_key: Option<String>,
}

/// How a long-running front end (a watch loop, a server, an MCP server) opens the repository
/// for each call: the folder, the options (a clock given once stays fixed, else each opening
/// reads the system clock) and where events go. Cheap to clone and to share between threads.
#[derive(Clone)]
pub struct Opener {
    /// The folder in the repository.
    pub dir: PathBuf,
    /// The options of each opening.
    pub options: Options,
    sink: Arc<dyn Fn(&Event<'_>) + Send + Sync>,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("dir", &self.dir)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Opener {
    /// Returns an opener of the repository around `dir` with `options`, reporting events to
    /// `sink`.
    pub fn new(
        dir: PathBuf,
        options: Options,
        sink: impl Fn(&Event<'_>) + Send + Sync + 'static,
    ) -> Opener {
        Opener {
            dir,
            options,
            sink: Arc::new(sink),
        }
    }

    /// Opens the repository now (see [`Coord::open`]).
    pub fn open(&self) -> Result<Coord, Error> {
        self.open_with(self.options.clone())
    }

    /// Opens the repository now with other `options`, reporting to this opener's sink.
    pub fn open_with(&self, options: Options) -> Result<Coord, Error> {
        let sink = Arc::clone(&self.sink);
        Ok(Coord::open(&self.dir, options)?.with_sink(Box::new(move |e| sink(e))))
    }

    /// Returns the instant an opening now would act at.
    pub fn now(&self) -> Timestamp {
        self.options.now.unwrap_or_else(Timestamp::now)
    }
}

/// Something an operation did on its way, for a front end to show as it happens.
#[derive(Debug)]
pub enum Event<'a> {
    /// Recovery, or the recording of people's changes, did something (one line).
    Recovered(&'a str),
    /// A transition was applied, with what happened to it.
    Applied(&'a Transition, &'a Applied),
    /// A status line from a step that words its own lines (sync), to show as it is.
    Status(&'a str),
    /// A detail worth showing only to whom asked for more (`--verbose`).
    Detail(&'a str),
}

/// Where a [`Coord`] reports [`Event`]s.
pub type Sink = Box<dyn Fn(&Event<'_>)>;

/// The default wait for the lock of agent and person commands (claim, complete, ...).
pub const AGENT_WAIT: Duration = Duration::from_secs(10);

/// A coord repository opened at one instant: every operation a front end offers.
pub struct Coord {
    store: Store,
    now: Timestamp,
    wait: Option<Duration>,
    local: bool,
    epoch: Option<u64>,
    claim_key: Option<String>,
    keys: OnceCell<KeyRing>,
    sink: Sink,
}

impl Coord {
    /// Opens the repository around `dir` (its coord.yaml and schema) at `opts.now`, or at the
    /// system clock's time.
    pub fn open(dir: &Path, opts: Options) -> Result<Coord, Error> {
        let store = Store::open(dir)?;
        let store = match opts.seen_complete {
            seen if seen.is_empty() => store,
            seen => {
                let root = store.root().to_path_buf();
                let rel = |p: &Path| Some(p.strip_prefix(&root).ok()?.to_str()?.to_string());
                let seen = seen.iter().filter_map(|(p, w)| Some((rel(p)?, *w)));
                store.with_seen_complete(seen.collect())
            }
        };
        let now = opts.now.unwrap_or_else(Timestamp::now);
        Ok(Coord {
            store,
            now,
            wait: opts.wait,
            local: opts.local,
            epoch: opts.epoch,
            claim_key: opts.claim_key.as_deref().map(crate::hash::digest_hex),
            keys: OnceCell::new(),
            sink: Box::new(|_| {}),
        })
    }

    /// Returns this repository reporting its events to `sink`.
    pub fn with_sink(mut self, sink: Sink) -> Coord {
        self.sink = sink;
        self
    }

    /// Returns the store under the operations.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Returns the instant the operations act at.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Returns the agents' keys from the environment and the key folder, loaded on first use.
    pub fn keys(&self) -> &KeyRing {
        self.keys.get_or_init(KeyRing::from_env)
    }

    /// Starts a session that only reads (no lock): what a read's load and planner inputs
    /// come from.
    pub fn read(&self) -> Session<'_> {
        self.store.session(None)
    }

    /// Returns the planner inputs over `session` (a session of this repository, or of a sync
    /// step's opening of it): with `require_signed_results`, a verifier holding the agents'
    /// keys.
    pub fn inputs<'a>(&'a self, session: &'a Session<'_>) -> Inputs<'a> {
        inputs_for(session, self.now, self.keys(), self.epoch)
    }

    /// Returns the digest of the idempotency key of the claim this opening makes, if any.
    fn claim_key(&self) -> Option<&str> {
        self.claim_key.as_deref()
    }

    fn emit(&self, event: Event<'_>) {
        (self.sink)(&event);
    }

    fn emit_lines(&self, lines: &[String]) {
        for line in lines {
            self.emit(Event::Recovered(line));
        }
    }

    /// Takes the coordinator lock (waiting `Options::wait`, else `default`) and finishes
    /// anything a killed run left. Refuses, before writing anything, when git is in the middle
    /// of an operation or HEAD is detached. Returns the session that holds the lock until it
    /// ends (`Session::finish`, or when it is dropped).
    pub fn lock(&self, default: Duration) -> Result<Session<'_>, Error> {
        let store = &self.store;
        store.repo.refuse_unfinished()?;
        let say = &mut |line: &str| self.emit(Event::Status(&format!("coord: {line}")));
        let guard = lock::acquire_saying(store.repo.git_dir(), self.wait.unwrap_or(default), say)?;
        let session = store.session(Some(guard));
        if session.previous_killed() {
            self.emit_lines(&session.remove_temp_objects()?);
        }
        store.repo.refuse_unfinished()?;
        self.emit_lines(&session.resume_interrupted(self.now)?);
        Ok(session)
    }

    /// Takes the lock as [`Coord::lock`] does and records people's uncommitted changes under
    /// `work/`: what a single-task command starts with. The recording is checked against a
    /// walk of `work/` (skipping the status scan when the vouch the last operation left, or
    /// the clean mark, holds for it), and the command's load reads that same walk.
    pub fn session(&self, default: Duration) -> Result<Session<'_>, Error> {
        self.session_over(default, Folders::Live)
    }

    /// Starts a session as [`Coord::session`] does, for a command that acts on `folders`:
    /// with [`Folders::Finished`] the walk looks at every file of the history folders too,
    /// so a person's in-place edit of a finished task there (which a tick leaves to the
    /// person) is recorded before the command acts on that task.
    pub(crate) fn session_over(
        &self,
        default: Duration,
        folders: Folders,
    ) -> Result<Session<'_>, Error> {
        let session = self.lock(default)?;
        let walk = || match folders {
            Folders::Live => session.walk_work(),
            Folders::Finished => session.walk_work_whole(),
        };
        // Without a work folder yet (`coord init`) there is nothing to walk or to vouch for.
        let walked = match walk() {
            Err(StoreError::NoWorkDir { .. }) => None,
            walked => Some(walked?),
        };
        let listing = walked.as_ref().map(|w| &w.listing);
        let recorded = session.record_external_changes(self.now, listing)?;
        if let Some(why) = recorded.skipped_scan() {
            self.emit(Event::Detail(why));
        }
        self.emit_lines(&recorded.lines);
        // Something was recorded: a file may have come after the walk; the load walks again.
        session.keep_walk(walked.filter(|_| recorded.lines.is_empty()));
        Ok(session)
    }

    /// Applies a plan's transitions in `session` (which holds the lock), committing each,
    /// and ends the session; reports each as an [`Event::Applied`]. Returns the number of
    /// commits.
    pub fn apply(&self, session: Session<'_>, plan: &Plan, origin: Origin) -> Result<usize, Error> {
        let n = apply(&session, &self.sink, plan, self.now, origin)?;
        session.finish()?;
        Ok(n)
    }

    /// Runs a single-task command: session, load, plan with `planner`, apply. A file the plan
    /// was to change that could not be changed is an error.
    pub fn act(
        &self,
        planner: &dyn Fn(&crate::board::Board, &Inputs<'_>) -> Result<Plan, CommandError>,
    ) -> Result<usize, Error> {
        self.act_over(Folders::Live, planner)
    }

    /// Runs a single-task command as [`Coord::act`] does, its session over `folders`
    /// ([`Coord::session_over`]). While the task's file is still being written (a person
    /// edited it just before the command), waits for it to settle, without the lock, when
    /// `settle` is at most [`PERSON_SETTLE_WAIT`]; refuses at once with a longer one.
    pub(crate) fn act_over(
        &self,
        folders: Folders,
        planner: &dyn Fn(&crate::board::Board, &Inputs<'_>) -> Result<Plan, CommandError>,
    ) -> Result<usize, Error> {
        let started = std::time::Instant::now();
        let settle = self.store.config.settle_wait();
        let limit = match settle <= PERSON_SETTLE_WAIT {
            true => settle + SETTLE_POLL,
            false => Duration::ZERO,
        };
        loop {
            match self.act_once(folders, planner) {
                Err(Error::Command(CommandError::BeingWritten(_))) if started.elapsed() < limit => {
                    std::thread::sleep(SETTLE_POLL);
                }
                done => return done,
            }
        }
    }

    fn act_once(
        &self,
        folders: Folders,
        planner: &dyn Fn(&crate::board::Board, &Inputs<'_>) -> Result<Plan, CommandError>,
    ) -> Result<usize, Error> {
        let session = self.session_over(AGENT_WAIT, folders)?;
        let (board, _) = session.load()?;
        let plan = planner(&board, &self.inputs(&session))?;
        let n = apply(&session, &self.sink, &plan, self.now, Origin::Command)?;
        if let Some((path, why)) = session.first_skipped() {
            return Err(Error::Unchanged { path, why });
        }
        session.finish()?;
        Ok(n)
    }

    /// Runs `coord sync`: fetch, bring the branch onto the remote, tick (this library's tick),
    /// push; retry on a rejected push.
    pub fn sync(&self, opts: &sync::Options) -> Result<sync::Report, Error> {
        let mut tick = |session: &Session<'_>| -> Result<usize, sync::TickError> {
            Ok(self.tick_on(session)?.commits)
        };
        let mut say = |line: &str| self.emit(Event::Status(line));
        Ok(sync::run(self.store.root(), opts, &mut tick, &mut say)?)
    }
}

/// The longest a person's command waits for the task's file to settle.
const PERSON_SETTLE_WAIT: Duration = Duration::from_secs(10);

/// How often a command waiting for a file to settle looks again.
const SETTLE_POLL: Duration = Duration::from_millis(100);

/// The folders a command acts on, for its session's walk ([`Coord::session_over`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Folders {
    /// Live tasks only: the history folders are taken from their record.
    Live,
    /// Finished tasks too (`retry`, `archive`, `doctor --fix`): every file is looked at.
    Finished,
}

/// Returns the planner inputs over `session` at `now`, in a hub of `epoch` (None outside one).
pub(crate) fn inputs_for<'a>(
    session: &'a Session<'_>,
    now: Timestamp,
    keys: &'a KeyRing,
    epoch: Option<u64>,
) -> Inputs<'a> {
    let store = session.store();
    let verifier: &dyn crate::engine::Verifier = if store.config.require_signed_results {
        keys
    } else {
        &AcceptAll
    };
    Inputs {
        config: &store.config,
        now,
        verifier,
        attempts: session,
        sightings: session,
        gates: store,
        epoch,
    }
}

/// Applies a plan's transitions in `session`, reporting each to `sink`; returns the commits.
pub(crate) fn apply(
    store: &Session<'_>,
    sink: &dyn Fn(&Event<'_>),
    plan: &Plan,
    now: Timestamp,
    origin: Origin,
) -> Result<usize, Error> {
    let mut n = 0;
    store.apply_plan(&plan.transitions, now, origin, &mut |t, applied| {
        if matches!(applied, Applied::Committed | Applied::LeftAsFound(_)) {
            n += 1;
        }
        sink(&Event::Applied(t, &applied));
    })?;
    store.leave_vouch();
    // The walk a session kept shows `work/` before these commits: a later load walks again.
    store.keep_walk(None);
    Ok(n)
}
