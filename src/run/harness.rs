//! The agent runner's loop (`coord run`): it ticks, takes the agent's tasks (its folder for a
//! push agent, `claim` for a pull agent), runs the command once per task ([`super::Running`]),
//! heartbeats while it runs, and reports the outcome with the same operations as `coord
//! heartbeat`, `coord complete` and `coord fail`. SIGINT/SIGTERM stop the taking of work;
//! running commands get a grace period. A front end tells what happens through [`Tell`]; this
//! module runs processes and operations and prints nothing itself.

use super::logs::{self, Stream};
use super::place::{Place, PlaceError, Remote};
use super::record::{self, Held, Record};
use super::{output_of, Finished, Job, Running as Process, EXIT_FATAL, MAX_OUTPUT, TERM_GRACE};
use crate::client::Hub;
use crate::error::{CliError, Exit};
use crate::model::metrics::Metrics;
use crate::model::{AgentName, TaskId};
use crate::ops::Fence;
use crate::ops::LockError;
use crate::ops::{self, Opener, Verdict, Work, Worktree};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run, for which agent, and how.
#[derive(Debug, Clone)]
pub struct Runner {
    /// How each operation opens the repository (clock, lock wait, where events go).
    pub opener: Opener,
    /// The agent to work as.
    pub agent: AgentName,
    /// Tasks run at once, at most (the agent's `max_active` also applies).
    pub parallel: usize,
    /// Run what there is to do now, then return.
    pub once: bool,
    /// How often to look for work (a finished task looks again at once).
    pub interval: crate::model::Duration,
    /// How long running commands may finish after a stop before they are killed.
    pub grace: crate::model::Duration,
    /// Where the command runs; the repository root when None. With worktrees, the same
    /// folder in the attempt's worktree.
    pub workdir: Option<PathBuf>,
    /// Whether each attempt's command runs in a git worktree of its own (also when
    /// coord.yaml's `run.worktree` says so).
    pub worktree: bool,
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// The remote claims and results are pushed to (`--sync`), if any.
    pub remote: Option<String>,
    /// The hub to take work from and report to instead of this repository (`--hub`).
    pub hub: Option<Hub>,
}

/// Where a runner tells what happens.
pub trait Tell {
    /// A status line of the runner (serving, stopping, a failed tick).
    fn say(&self, line: &str);
    /// A task's command started.
    fn started(&self, id: &TaskId, attempt: u32);
    /// A task's command ended, and how it was reported.
    fn ended(&self, id: &TaskId, attempt: u32, told: &Told);
    /// What runs now and since when; called about once a second.
    fn progress(&self, running: &Tasks);
    /// The runner stops telling progress.
    fn done(&self);
}

/// The running tasks: attempt and start, by id.
pub type Tasks = BTreeMap<TaskId, (u32, Instant)>;

/// How a task's command ended, once reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Exit 0: completed.
    Done,
    /// Failed, to be retried.
    Failed,
    /// Failed, not to be retried (exit 100).
    Fatal,
    /// Given up without a report: the attempt is no longer this runner's.
    Dropped,
}

impl Kind {
    /// Returns the name a `--json` event gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Done => "done",
            Kind::Failed => "failed",
            Kind::Fatal => "fatal",
            Kind::Dropped => "dropped",
        }
    }
}

/// What became of one task's command.
#[derive(Debug, Clone)]
pub struct Told {
    /// How it ended.
    pub kind: Kind,
    /// Why it failed or was dropped.
    pub message: Option<String>,
    /// How long it ran.
    pub secs: f64,
    /// Why its report was not recorded (a stale attempt, a lock held too long), if it was not.
    pub not_recorded: Option<String>,
}

/// Why a runner could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An operation failed (opening the repository, reading the agent, taking work).
    #[error(transparent)]
    Ops(#[from] ops::Error),
    /// The hub refused, or could not be reached.
    #[error(transparent)]
    Hub(#[from] crate::client::ClientError),
    /// Another runner holds what this one needs.
    #[error("{what}")]
    Busy {
        /// Who holds it.
        what: String,
        /// What to do.
        hint: String,
        /// The lock.
        source: LockError,
    },
    /// A runner lock could not be made.
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// What the OS reported.
        source: std::io::Error,
    },
    /// The signal handlers could not be installed.
    #[error("cannot install the SIGINT/SIGTERM handlers: {0}")]
    Signals(std::io::Error),
}

impl From<PlaceError> for RunError {
    fn from(e: PlaceError) -> RunError {
        match e {
            PlaceError::Ops(e) => RunError::Ops(e),
            PlaceError::Hub(e) => RunError::Hub(e),
        }
    }
}

impl RunError {
    /// Returns what to do about it, when there is something to do.
    pub fn hint(&self) -> Option<String> {
        match self {
            RunError::Busy { hint, .. } => Some(hint.clone()),
            _ => None,
        }
    }
}

impl Runner {
    /// Runs until stopped (SIGINT/SIGTERM), or with `once` until nothing is left to run.
    pub fn run(&self, tell: &dyn Tell) -> Result<(), RunError> {
        let place = match &self.hub {
            Some(hub) => Place::Hub(hub.clone()),
            None => Place::Repo {
                opener: self.opener.clone(),
                remote: self.remote.clone().map(Remote::new),
            },
        };
        let pull = place.pulls(&self.agent).map_err(RunError::from)?;
        let local = match (&self.hub, self.opener.open()) {
            (None, opened) => Some(opened?),
            (Some(_), opened) => opened.ok(),
        };
        let (state_dir, root) = match &local {
            Some(coord) => (
                coord.store().repo.git_dir().to_path_buf(),
                coord.store().root().to_path_buf(),
            ),
            None => (self.opener.dir.join(".coord"), self.opener.dir.clone()),
        };
        let _serving = match pull {
            true => None,
            false => Some(run_lock(
                &state_dir,
                &format!("run-{}", self.agent),
                self.push_busy(),
            )?),
        };
        let workdir = self.workdir.clone().unwrap_or_else(|| root.clone());
        let trees = match (&local, &self.hub) {
            (Some(coord), None) if self.worktree || coord.store().config.run.worktree => {
                Some(Trees {
                    root: root.clone(),
                    keep_failed: coord.store().config.run.keep_failed_worktrees,
                })
            }
            _ => None,
        };
        let place_line = match (&trees, &local) {
            (Some(_), Some(coord)) => format!(
                "a worktree per attempt in {}",
                coord.worktree_dir()?.display()
            ),
            _ => workdir.display().to_string(),
        };
        let through = match &self.hub {
            Some(hub) => format!(" through the hub at {}", hub.url()),
            None => String::new(),
        };
        tell.say(&format!(
            "coord run: serving {} agent {}{through} in {} ({} at once); SIGINT/SIGTERM stop it",
            if pull { "pull" } else { "push" },
            self.agent,
            place_line,
            self.parallel
        ));
        let _syncing = match place.remote() {
            Some(_) => Some(run_lock(&state_dir, "run-sync", sync_busy())?),
            None => None,
        };
        drop(local);
        Harness {
            runner: self,
            tell,
            pull,
            workdir,
            trees,
            records: record::folder(&state_dir, self.agent.as_str()),
            logs: logs::folder(&state_dir),
            place,
            stop_now: Arc::new(AtomicBool::new(false)),
            ran: std::cell::RefCell::default(),
            unsettled: std::cell::RefCell::default(),
        }
        .serve()
    }

    fn push_busy(&self) -> Busy {
        Busy {
            what: format!(
                "another 'coord run {}' serves this push agent in this clone",
                self.agent
            ),
            hint: format!(
                "stop it, or set 'assign: pull' in work/agents/{}.yaml to run several",
                self.agent
            ),
        }
    }
}

/// How attempts run in worktrees of their own.
#[derive(Debug, Clone)]
struct Trees {
    /// The checkout's root: a `--workdir` inside it is the same folder of the worktree.
    root: PathBuf,
    /// Whether a failed attempt's worktree stays.
    keep_failed: bool,
}

/// Who holds a runner lock, and what to do.
struct Busy {
    what: String,
    hint: String,
}

fn sync_busy() -> Busy {
    Busy {
        what: "another 'coord run --sync' runs in this clone".into(),
        hint: "one at a time per clone: use --parallel, or another clone".into(),
    }
}

/// Takes `.git/coord/<name>.lock` for as long as the runner runs, or fails with `busy`. One
/// `coord run` serves a push agent in a clone (two would both see its folder and run its tasks
/// twice; pull agents need none, each runner runs only what its own `claim` granted), and one
/// runs with `--sync` (sync steps of one clone must not overlap: a rejected push undoes the
/// branch to where that step began).
fn run_lock(git_dir: &Path, name: &str, busy: Busy) -> Result<std::fs::File, RunError> {
    let dir = git_dir.join("coord");
    let path = dir.join(format!("{name}.lock"));
    let io = |source| RunError::Lock {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(RunError::Busy {
            what: busy.what,
            hint: busy.hint,
            source: LockError::held(path),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

/// How one task ended.
struct Ended {
    id: TaskId,
    attempt: u32,
    told: Told,
}

enum Msg {
    Ended(Ended),
    Stop,
}

struct Harness<'a> {
    runner: &'a Runner,
    tell: &'a dyn Tell,
    pull: bool,
    workdir: PathBuf,
    /// How attempts get worktrees, when they do.
    trees: Option<Trees>,
    /// Where the records of the commands this agent's runners start are kept.
    records: PathBuf,
    /// Where each attempt's stdout and stderr are kept.
    logs: PathBuf,
    /// Where work is taken and reported.
    place: Place,
    /// Set when the grace period is over: workers kill their commands.
    stop_now: Arc<AtomicBool>,
    /// The attempt of each task this runner last ran, kept while the task is still the
    /// agent's: an attempt runs once. One whose result could not be recorded (a writing
    /// command refused, a heartbeat failed) waits for its lease like any unreported one,
    /// instead of running again at once, in a loop.
    ran: std::cell::RefCell<BTreeMap<TaskId, u32>>,
    /// The claims this runner made whose push did not land (a `coord sync` in this clone
    /// committed or pushed meanwhile), by task: the sync may carry one to the remote all the
    /// same, and then it is this runner's to run.
    unsettled: std::cell::RefCell<BTreeMap<TaskId, ops::Unsettled>>,
}

/// What a report left for the next `coord sync` to push says.
const PENDING: &str = "pushed by the next coord sync: a sync in this clone committed meanwhile";

/// How often a running command's task is checked for a cancel or a lost lease.
const LOST_CHECK: Duration = Duration::from_secs(2);

/// How often progress is told.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How long a report waits for its task's file to settle (the command may have written
/// a note into it just before it ended), and how often it tries again meanwhile.
const SETTLE_WAIT: Duration = Duration::from_secs(30);
const SETTLE_POLL: Duration = Duration::from_millis(250);

impl Harness<'_> {
    /// The loop: tick, take work, start it, wait for an end or the interval; on a signal, drain.
    fn serve(&self) -> Result<(), RunError> {
        let (tx, rx) = channel();
        let signals = stop_on_signals(tx.clone())?;
        let mut running = Tasks::new();
        let mut stopping = false;
        while !stopping {
            let synced = self.tick();
            self.recover();
            let free = self.runner.parallel.saturating_sub(running.len());
            let mut taken = self.landed_claims(free, &running, synced)?;
            taken.extend(self.take(free - taken.len(), &running)?);
            let settled = self.unsettled.borrow().is_empty();
            if self.runner.once && taken.is_empty() && running.is_empty() && settled {
                break;
            }
            for t in taken {
                running.insert(t.id.clone(), (t.attempt, Instant::now()));
                self.tell.started(&t.id, t.attempt);
                self.start(t, tx.clone());
            }
            stopping = self.wait(&rx, &mut running);
        }
        self.tell.done();
        self.drain(&rx, &mut running);
        signals.close();
        if self.runner.once {
            // What the last commands reported moves on now, not at someone's next tick.
            self.tick();
        }
        Ok(())
    }

    /// Waits until the interval is over, or at once after a message (drained first); returns
    /// whether a stop was asked for.
    fn wait(&self, rx: &Receiver<Msg>, running: &mut Tasks) -> bool {
        let mut stopping = false;
        let mut until = Instant::now() + std_duration(self.runner.interval);
        loop {
            self.tell.progress(running);
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(PROGRESS_EVERY)) {
                Ok(Msg::Ended(e)) => self.ended(running, e),
                Ok(Msg::Stop) => stopping = true,
                Err(RecvTimeoutError::Timeout) if Instant::now() < until => continue,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
            until = Instant::now();
        }
        stopping
    }

    /// Waits for running commands up to the grace period, then has them killed.
    fn drain(&self, rx: &Receiver<Msg>, running: &mut Tasks) {
        if running.is_empty() {
            return;
        }
        self.tell.say(&format!(
            "coord run: stopping; waiting up to {} for {} running task(s)",
            self.runner.grace,
            running.len()
        ));
        let until = Instant::now() + std_duration(self.runner.grace);
        while !running.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.stop_now.store(true, Ordering::SeqCst);
            }
            match rx.recv_timeout(left.max(Duration::from_millis(50))) {
                Ok(Msg::Ended(e)) => self.ended(running, e),
                Ok(Msg::Stop) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// One tick, as `coord tick` (or with `--sync`, `coord sync`) makes it; skipped when another
    /// coordinator holds the lock. An error is told and the runner goes on. Returns whether
    /// it ran: with `--sync`, this clone then holds what the remote holds.
    fn tick(&self) -> bool {
        let ticked = self.place.tick();
        match &ticked {
            Err(e) if !e.busy() => self
                .tell
                .say(&format!("coord run: tick failed: {e}; trying again later")),
            _ => {}
        }
        ticked.is_ok()
    }

    /// Returns the work of the unsettled claims the remote holds after all, at most `free`.
    /// Once `synced` (this clone holds what the remote does), forgets those neither the remote
    /// nor this clone holds for the agent (undone, or dropped by the sync that replayed
    /// them), and those whose lease ran out.
    fn landed_claims(
        &self,
        free: usize,
        running: &Tasks,
        synced: bool,
    ) -> Result<Vec<Work>, RunError> {
        let mut unsettled = self.unsettled.borrow_mut();
        let Some(remote) = self.place.remote().filter(|_| !unsettled.is_empty()) else {
            return Ok(Vec::new());
        };
        let coord = self.place.open()?;
        let agent = &self.runner.agent;
        let here = coord.work_of(agent, None)?;
        let mut landed = coord.work_of(agent, Some(&remote.name))?;
        let ran = self.ran.borrow();
        let mut taken = Vec::new();
        unsettled.retain(|id, u| {
            let attempt = u.attempt;
            let is = |w: &Work| &w.id == id && w.attempt == attempt;
            if running.contains_key(id) || ran.get(id) == Some(&attempt) {
                return false;
            }
            // The remote holding this (task, attempt) for the agent is not enough: a runner of
            // the same agent in another clone may hold it. Only a claim this clone pushed is
            // this runner's.
            let ours = u
                .commit
                .as_deref()
                .is_some_and(|c| coord.carried_to(&remote.name, c).unwrap_or(false));
            if let Some(at) = landed.iter().position(is) {
                if ours && taken.len() < free {
                    taken.push(landed.swap_remove(at));
                    return false;
                }
                // Another clone's claim of the same attempt is not this runner's to run.
                return ours;
            }
            let pending = here.iter().any(|w| is(w) && !w.lease_left.is_zero());
            pending || !synced
        });
        Ok(taken)
    }

    /// Ends what is left of the attempts whose runner is gone (killed while its commands ran)
    /// and reports each as failed, retryable, before anything else runs: an attempt runs once,
    /// so it is never started again, nor left running beside its retry.
    fn recover(&self) {
        for held in record::orphans(&self.records) {
            let r = &held.record;
            let id = match TaskId::new(&r.task) {
                Ok(id) => id,
                Err(_) => {
                    held.remove();
                    continue;
                }
            };
            let ended = r.attempt().end(TERM_GRACE);
            let msg = match ended {
                0 => "coord run was killed before it reported the command's end".to_string(),
                n => {
                    format!("coord run was killed while the command ran; ended its {n} process(es)")
                }
            };
            let worker = self.worker(r.epoch);
            let told = worker.report_failure(&id, r.attempt, &msg, true, Instant::now());
            if let (Some(path), Ok(repo)) = (&r.worktree, self.place.open()) {
                worker.put_away(&repo, path, Kind::Failed);
            }
            self.ran.borrow_mut().insert(id.clone(), r.attempt);
            self.tell.ended(&id, r.attempt, &told);
            held.remove();
        }
    }

    /// Returns a worker for an attempt granted in `epoch` (by a hub; None otherwise).
    fn worker(&self, epoch: Option<u64>) -> Worker {
        Worker {
            place: self.place.clone(),
            agent: self.runner.agent.clone(),
            epoch,
            stop_now: self.stop_now.clone(),
            records: self.records.clone(),
            logs: self.logs.clone(),
            trees: self.trees.clone(),
        }
    }

    fn ended(&self, running: &mut Tasks, e: Ended) {
        running.remove(&e.id);
        self.ran.borrow_mut().insert(e.id.clone(), e.attempt);
        self.tell.ended(&e.id, e.attempt, &e.told);
    }

    /// Returns the tasks to start now: the agent's assigned tasks without a result (push), or
    /// what `claim` grants (pull), at most `free`.
    fn take(&self, free: usize, running: &Tasks) -> Result<Vec<Work>, RunError> {
        if free == 0 {
            return Ok(Vec::new());
        }
        let agent = &self.runner.agent;
        if !self.pull {
            let mut found = self.place.work_of(agent)?;
            let mut ran = self.ran.borrow_mut();
            ran.retain(|id, _| found.iter().any(|t| &t.id == id));
            found.retain(|t| !running.contains_key(&t.id) && ran.get(&t.id) != Some(&t.attempt));
            found.truncate(free);
            return Ok(found);
        }
        let mut taken = Vec::new();
        while taken.len() < free {
            let mut unsettled = Vec::new();
            let claimed = self.place.claim_work(agent, &mut unsettled);
            self.unsettled
                .borrow_mut()
                .extend(unsettled.into_iter().map(|u| (u.id.clone(), u)));
            match claimed {
                Ok(Some(t)) => {
                    self.unsettled.borrow_mut().remove(&t.id);
                    taken.push(t);
                }
                Ok(None) => break,
                Err(e) if e.busy() => break,
                Err(e) if e.is_tentative() => {
                    // Not granted here; the next sync replays or drops it.
                    self.tell.say(&format!("coord run: claim put off: {e}"));
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(taken)
    }

    /// Starts a worker thread for one task.
    fn start(&self, t: Work, tx: Sender<Msg>) {
        let agent = self.runner.agent.clone();
        let job = Job {
            argv: self.runner.command.clone(),
            stdin: serde_json::to_vec(&t.json).unwrap_or_default(),
            env: vec![
                ("COORD_TASK_ID".into(), t.id.to_string()),
                ("COORD_AGENT".into(), agent.to_string()),
                ("COORD_ATTEMPT".into(), t.attempt.to_string()),
                ("COORD_TASK_FILE".into(), t.file.display().to_string()),
            ]
            .into_iter()
            .chain(t.epoch.map(|n| ("COORD_EPOCH".into(), n.to_string())))
            .collect(),
            cwd: self.workdir.clone(),
            run_id: crate::hash::random_hex(),
            log: Some((
                logs::path(&self.logs, t.id.as_str(), t.attempt, Stream::Stdout),
                logs::path(&self.logs, t.id.as_str(), t.attempt, Stream::Stderr),
            )),
        };
        let worker = self.worker(t.epoch);
        std::thread::spawn(move || {
            let told = worker.work(&t, &job);
            let _ = tx.send(Msg::Ended(Ended {
                id: t.id,
                attempt: t.attempt,
                told,
            }));
        });
    }
}

/// Returns a duration of coord's as the standard library's (a negative one as zero).
fn std_duration(d: crate::model::Duration) -> Duration {
    Duration::from_secs(u64::try_from(d.as_secs()).unwrap_or(0))
}

/// Returns an error and each of its causes, joined by `: `.
fn chain(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // A wrapper that only passes its source on says the same words again.
        let text = s.to_string();
        if !line.ends_with(&text) {
            line = format!("{line}: {text}");
        }
        source = s.source();
    }
    line
}

/// Sends `Stop` on SIGINT or SIGTERM; the handlers stay, so a second signal does not kill the
/// runner while it drains.
fn stop_on_signals(tx: Sender<Msg>) -> Result<signal_hook::iterator::Handle, RunError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(RunError::Signals)?;
    let handle = signals.handle();
    std::thread::spawn(move || {
        for _ in signals.forever() {
            let _ = tx.send(Msg::Stop);
        }
    });
    Ok(handle)
}

/// Runs one task's command and reports its outcome.
struct Worker {
    place: Place,
    agent: AgentName,
    /// The epoch of the hub that granted the attempt worked on: reports name it.
    epoch: Option<u64>,
    stop_now: Arc<AtomicBool>,
    records: PathBuf,
    logs: PathBuf,
    trees: Option<Trees>,
}

/// Splits the `metrics` map off a command's output object: what the attempt cost, written as
/// the result's `metrics`.
fn metrics_of(output: Option<Value>) -> Result<(Option<Value>, Option<Metrics>), String> {
    let Some(Value::Object(mut map)) = output else {
        return Ok((output, None));
    };
    let metrics = match map.remove("metrics") {
        None => None,
        Some(m) => Some(
            serde_json::from_value(m)
                .map_err(|e| format!("the command's metrics do not read: {e}"))?,
        ),
    };
    Ok((Some(Value::Object(map)), metrics))
}

/// Splits a command's output into what it says and the agents it hands off to: a mapping's
/// `next_agent` (a name or a list of names), as a task file's `result.next_agent` does.
fn handoff(output: Option<Value>) -> Result<(Option<Value>, Vec<AgentName>), String> {
    let Some(Value::Object(mut map)) = output else {
        return Ok((output, Vec::new()));
    };
    let names = match map.remove("next_agent") {
        None => Vec::new(),
        Some(Value::String(one)) => vec![one],
        Some(Value::Array(many)) => many
            .into_iter()
            .map(|v| v.as_str().map(String::from).ok_or(()))
            .collect::<Result<_, _>>()
            .map_err(|_| "the command's next_agent is not a list of agent names".to_string())?,
        Some(other) => {
            return Err(format!(
                "the command's next_agent is not an agent name: {other}"
            ))
        }
    };
    let agents = names
        .iter()
        .map(|n| AgentName::new(n).map_err(|e| format!("the command's next_agent '{n}': {e}")))
        .collect::<Result<_, _>>()?;
    Ok((Some(Value::Object(map)), agents))
}

/// Returns a command's output with the branch its worktree is on and the commit that branch
/// ends on (`branch`, `commit`); an output that is a list goes under `items`.
fn with_branch(output: Option<Value>, tree: &Worktree, commit: String) -> Value {
    let mut map = match output {
        None => serde_json::Map::new(),
        Some(Value::Object(map)) => map,
        Some(other) => serde_json::Map::from_iter([("items".to_string(), other)]),
    };
    map.insert("branch".into(), Value::String(tree.branch.clone()));
    map.insert("commit".into(), Value::String(commit));
    Value::Object(map)
}

/// Why a command did not end by itself.
enum Cut {
    Timeout,
    Stopped,
    Lost(String),
}

impl Worker {
    /// Runs the command for `t`, heartbeating, and reports; returns how it ended. The
    /// command is recorded before it starts and until its end is reported ([`record`]).
    fn work(&self, t: &Work, job: &Job) -> Told {
        let started = Instant::now();
        let fail = |msg: String| self.report_failure(&t.id, t.attempt, &msg, true, started);
        // Opened once for the attempt's worktree: placed, made, read and removed with it.
        let repo = match self.trees.as_ref().map(|_| self.place.open()) {
            Some(Err(e)) => return fail(format!("cannot open the repository: {e}")),
            opened => opened.and_then(Result::ok),
        };
        let tree = match repo.as_ref().map(|c| c.worktree_of(t)) {
            Some(Err(e)) => return fail(format!("cannot place the attempt's worktree: {e}")),
            found => found.and_then(Result::ok),
        };
        let mut held = match Held::create(&self.records, self.record(t, job, tree.as_ref())) {
            Ok(h) => h,
            Err(e) => return fail(format!("cannot record the command before it starts: {e}")),
        };
        let at = tree.as_ref().zip(repo.as_ref());
        let job = match at {
            Some((tree, c)) => match c.add_worktree(tree) {
                Ok(()) => self.in_tree(job, tree),
                Err(e) => {
                    let _ = c.remove_worktree(&tree.path);
                    held.remove();
                    return fail(format!("cannot make the attempt's worktree: {e}"));
                }
            },
            None => job.clone(),
        };
        let job = &job;
        let mut running = match Process::start(job) {
            Ok(r) => r,
            Err(e) => {
                held.remove();
                return fail(format!("cannot start {:?}: {e}", job.argv[0]));
            }
        };
        let (pid, start) = running.pid();
        if let Err(e) = held.started(pid, start) {
            running.kill();
            held.remove();
            return fail(format!("cannot record the command it started: {e}"));
        }
        let told = self.outcome(t, running, started, at);
        if let Some((tree, c)) = at {
            self.put_away(c, &tree.path, told.kind);
        }
        held.remove();
        told
    }

    /// Returns `job` run in `tree`: its `--workdir` there, its path and branch in the
    /// environment.
    fn in_tree(&self, job: &Job, tree: &Worktree) -> Job {
        let root = self.trees.as_ref().map(|t| t.root.as_path());
        let inside = root.and_then(|r| job.cwd.strip_prefix(r).ok());
        let mut job = job.clone();
        job.cwd = tree.path.join(inside.unwrap_or(Path::new("")));
        job.env.extend([
            ("COORD_WORKTREE".into(), tree.path.display().to_string()),
            ("COORD_BRANCH".into(), tree.branch.clone()),
        ]);
        job
    }

    /// Removes an attempt's worktree once it ended as `kind`; a failed one stays when
    /// coord.yaml's `run.keep_failed_worktrees` says so. A worktree that cannot be removed
    /// stays too: it holds no task's state.
    fn put_away(&self, repo: &ops::Coord, path: &Path, kind: Kind) {
        let keep = self.trees.as_ref().is_some_and(|t| t.keep_failed);
        if keep && matches!(kind, Kind::Failed | Kind::Fatal) {
            return;
        }
        let _ = repo.remove_worktree(path);
    }

    /// Watches a started command to its end and reports it.
    fn outcome(
        &self,
        t: &Work,
        mut running: Process,
        started: Instant,
        tree: Option<(&Worktree, &ops::Coord)>,
    ) -> Told {
        let cut = self.watch(t, &mut running, started);
        if cut.is_some() {
            running.kill();
        }
        let fail = |msg: &str| self.report_failure(&t.id, t.attempt, msg, true, started);
        let finished = match running.finish() {
            Ok(f) => f,
            Err(e) => return fail(&format!("lost the command: {e}")),
        };
        self.close_log(t, &finished);
        match cut {
            Some(Cut::Timeout) => fail(&format!("timeout: killed after {}s", t.timeout.as_secs())),
            Some(Cut::Stopped) => fail("coord run was stopped before the command ended"),
            Some(Cut::Lost(why)) => Told {
                kind: Kind::Dropped,
                message: Some(why),
                secs: started.elapsed().as_secs_f64(),
                not_recorded: None,
            },
            None => self.report_end(t, finished, started, tree),
        }
    }

    /// Returns the record of the command about to start for `t`.
    fn record(&self, t: &Work, job: &Job, tree: Option<&Worktree>) -> Record {
        Record {
            task: t.id.to_string(),
            attempt: t.attempt,
            epoch: t.epoch,
            run_id: job.run_id.clone(),
            runner: std::process::id(),
            pid: None,
            start: None,
            worktree: tree.map(|t| t.path.clone()),
        }
    }

    /// Waits for the command, heartbeating when a third of the lease is used and checking
    /// every [`LOST_CHECK`] that the task is still this attempt's (not cancelled, not taken
    /// back); returns why it was cut short, if it was.
    fn watch(&self, t: &Work, running: &mut Process, started: Instant) -> Option<Cut> {
        let deadline = started + t.timeout;
        let mut lease_end = started + t.lease_left;
        let beat_before = t.timeout * 2 / 3;
        let mut next_check = started + LOST_CHECK;
        loop {
            match running.poll() {
                Ok(Some(_)) | Err(_) => return None,
                Ok(None) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Some(Cut::Timeout);
            }
            if self.stop_now.load(Ordering::SeqCst) {
                return Some(Cut::Stopped);
            }
            if lease_end.saturating_duration_since(now) < beat_before {
                match self.heartbeat(t) {
                    Ok(()) => lease_end = now + t.timeout,
                    Err(e) if e.busy() => {}
                    Err(e) => return Some(Cut::Lost(e.to_string())),
                }
            }
            if now >= next_check {
                next_check = now + LOST_CHECK;
                if let Some(why) = self.lost(t) {
                    return Some(Cut::Lost(format!("ended the command: {why}")));
                }
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Returns why the task of `t` is no longer its attempt's, when it is not; a check that
    /// cannot be made (the lock held, the repository unreadable) says nothing.
    fn lost(&self, t: &Work) -> Option<String> {
        self.place.lost(&t.id, &self.agent, t.attempt)
    }

    /// Reports a command's end: success with its output on exit 0 (a `next_agent` in it
    /// hands off; the branch and commit of its worktree added), else a failure.
    fn report_end(
        &self,
        t: &Work,
        f: Finished,
        started: Instant,
        tree: Option<(&Worktree, &ops::Coord)>,
    ) -> Told {
        let fail =
            |msg: &str, retryable| self.report_failure(&t.id, t.attempt, msg, retryable, started);
        if !f.status.success() {
            let msg = match f.stderr_tail() {
                tail if tail.is_empty() => f.how_it_ended(),
                tail => format!("{}: {tail}", f.how_it_ended()),
            };
            return fail(&msg, f.status.code() != Some(EXIT_FATAL));
        }
        if f.stdout_cut {
            return fail(
                &format!("the command printed more than {MAX_OUTPUT} bytes"),
                true,
            );
        }
        let (mut output, metrics) = match metrics_of(output_of(&f.stdout)) {
            Ok(split) => split,
            Err(why) => return fail(&why, true),
        };
        let (mut output, next_agents) = match handoff(output.take()) {
            Ok(split) => split,
            Err(why) => return fail(&why, true),
        };
        if let Some((tree, c)) = tree {
            match c.worktree_commit(tree, &t.id, t.attempt) {
                Ok(commit) => output = Some(with_branch(output, tree, commit)),
                Err(e) => return fail(&format!("cannot read the worktree's commit: {e}"), true),
            }
        }
        let verdict = Verdict::Success {
            output,
            next_agents,
        };
        self.report(
            &t.id,
            t.attempt,
            (verdict, metrics),
            Kind::Done,
            None,
            started,
        )
    }

    /// Finishes the attempt's logs once the command ended: a stderr longer than the log
    /// keeps its end instead of its start, and the logs rotate ([`logs::rotate`]). A log that
    /// cannot be written is not a reason to fail the task.
    fn close_log(&self, t: &Work, f: &Finished) {
        if f.stderr_cut {
            let from = f.stderr.len().saturating_sub(logs::LOG_MAX);
            let path = logs::path(&self.logs, t.id.as_str(), t.attempt, Stream::Stderr);
            // Rewritten in place, so the file keeps the owner-only mode it was made with.
            let _ = std::fs::write(&path, &f.stderr[from..]);
        }
        logs::rotate(&self.logs, t.id.as_str(), logs::BUDGET);
    }

    fn report_failure(
        &self,
        id: &TaskId,
        attempt: u32,
        msg: &str,
        retryable: bool,
        started: Instant,
    ) -> Told {
        let verdict = Verdict::Failure {
            message: msg.to_string(),
            retryable,
        };
        let kind = if retryable { Kind::Failed } else { Kind::Fatal };
        let result = (verdict, None);
        self.report(id, attempt, result, kind, Some(msg.to_string()), started)
    }

    /// Writes the result for the attempt this worker was given, as `coord complete`/`fail` do.
    /// `result` is the verdict with what the attempt cost, when the command said.
    fn report(
        &self,
        id: &TaskId,
        attempt: u32,
        result: (Verdict, Option<Metrics>),
        kind: Kind,
        message: Option<String>,
        started: Instant,
    ) -> Told {
        let secs = started.elapsed().as_secs_f64();
        match self.write_result(id, attempt, &result.0, result.1) {
            Ok(()) => Told {
                kind,
                message,
                secs,
                not_recorded: None,
            },
            // The command reported the attempt itself (`coord complete`/`fail`): that result
            // stands, and nothing is lost.
            Err(e) if e.is("result_pending") => Told {
                kind,
                message: Some("the command reported it itself".into()),
                secs,
                not_recorded: None,
            },
            Err(e) if e.is_tentative() => Told {
                kind,
                message: Some(match message {
                    Some(m) => format!("{m} ({PENDING})"),
                    None => PENDING.to_string(),
                }),
                secs,
                not_recorded: None,
            },
            Err(e) => Told {
                kind,
                message,
                secs,
                not_recorded: Some(chain(&e)),
            },
        }
    }

    /// Writes the result as `coord complete`/`fail --agent --attempt` do: a report for an
    /// attempt that is no longer current is kept in history as `stale_result` and refused.
    /// While the task's file is being written (the command wrote a note into it), the report
    /// waits for it to settle, up to [`SETTLE_WAIT`].
    fn write_result(
        &self,
        id: &TaskId,
        attempt: u32,
        verdict: &Verdict,
        metrics: Option<Metrics>,
    ) -> Result<(), PlaceError> {
        let fence = self.fence(attempt);
        let start = Instant::now();
        loop {
            match self.place.report(id, verdict, &fence, metrics.clone()) {
                Err(e) if e.is("being_written") && start.elapsed() < SETTLE_WAIT => {
                    std::thread::sleep(SETTLE_POLL);
                }
                other => return other,
            }
        }
    }

    /// Extends the lease as `coord heartbeat --agent --attempt` does.
    fn heartbeat(&self, t: &Work) -> Result<(), PlaceError> {
        self.place.heartbeat(&t.id, &self.fence(t.attempt))
    }

    fn fence(&self, attempt: u32) -> Fence {
        Fence {
            agent: Some(self.agent.clone()),
            attempt: Some(attempt),
            epoch: self.epoch,
        }
    }
}

/// How the command line reports a failed run: an operation's error by its type, a busy lock
/// as `locked`.
impl From<RunError> for CliError {
    fn from(e: RunError) -> CliError {
        let hint = e.hint();
        match e {
            RunError::Ops(e) => e.into(),
            RunError::Hub(e) => e.into(),
            e @ RunError::Busy { .. } => CliError::new(e.into(), Exit::Locked, "locked"),
            e => CliError::new(e.into(), Exit::Problem, "problem"),
        }
        .with_hints(hint)
    }
}
