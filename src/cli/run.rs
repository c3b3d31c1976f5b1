//! `coord run <agent> -- CMD…`: the agent harness. It ticks, takes the agent's tasks (its
//! folder for a push agent, `claim` for a pull agent), runs CMD once per task through
//! [`crate::run`], heartbeats while it runs, and reports the outcome with the same library
//! calls as `coord heartbeat`, `coord complete` and `coord fail` (see [`super::report`]).
//! SIGINT/SIGTERM stop the taking of work; running commands get a grace period.

use super::run_output::{Kind, Output, Running, Told};
use super::Ctx;
use crate::engine::commands::Fence;
use crate::lock::LockError;
use crate::model::{AgentName, AssignMode, Duration, TaskId};
use crate::ops::{self, Verdict, Work};
use crate::run::{output_of, Finished, Job, Running as Process, EXIT_FATAL};
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Arguments of `coord run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent to work as
    agent: AgentName,
    /// Run up to N tasks at once (the agent's max_active also applies)
    #[arg(long, default_value_t = 1, value_name = "N")]
    parallel: u32,
    /// Run what there is to do now, then exit
    #[arg(long)]
    once: bool,
    /// Look for work this often (a finished task looks again at once)
    #[arg(long, default_value = "1s")]
    interval: Duration,
    /// On SIGINT/SIGTERM, let running commands finish this long before killing them
    #[arg(long, default_value = "30s")]
    grace: Duration,
    /// Run the command in this directory (default: the repository root)
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    #[command(flatten)]
    sync: super::synced::SyncArg,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// One task taken, as the command gets it.
type Taken = Work;

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

/// Runs `coord run`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    if args.parallel == 0 || args.parallel > 256 {
        return Err(crate::error::UsageError("--parallel must be 1 to 256".into()).into());
    }
    if args.interval.as_secs() < 1 {
        return Err(crate::error::UsageError("--interval must be at least 1s".into()).into());
    }
    let coord = ctx.coord()?;
    let store = coord.store();
    let pull = coord.assign_mode(&args.agent)? == AssignMode::Pull;
    let _serving = if pull {
        None
    } else {
        Some(run_lock(
            store.repo.git_dir(),
            &format!("run-{}", args.agent),
            &format!(
                "another 'coord run {0}' serves this push agent in this clone; stop it, or set \
                 'assign: pull' in work/agents/{0}.yaml to run several",
                args.agent
            ),
        )?)
    };
    let workdir = match &args.workdir {
        Some(d) => ctx.dir.join(d),
        None => store.root().to_path_buf(),
    };
    ctx.status(&format!(
        "coord run: serving {} agent {} in {} ({} at once); SIGINT/SIGTERM stop it",
        if pull { "pull" } else { "push" },
        args.agent,
        workdir.display(),
        args.parallel
    ));
    let remote = super::synced::remote(ctx, args.sync.sync.clone())?.map(Remote::new);
    let _syncing = match &remote {
        Some(_) => Some(run_lock(
            store.repo.git_dir(),
            "run-sync",
            "another 'coord run --sync' runs in this clone; one at a time per clone \
             (use --parallel, or another clone)",
        )?),
        None => None,
    };
    let output = Output::new(args.agent.clone(), ctx.json, ctx.quiet);
    // On a terminal the live line and one line per task tell what happens; commit lines
    // would break the live line.
    let ctx = &Ctx {
        quiet: ctx.quiet || output.is_live(),
        ..ctx.clone()
    };
    Harness {
        ctx,
        args: &args,
        pull,
        workdir,
        remote,
        stop_now: Arc::new(AtomicBool::new(false)),
        output,
    }
    .serve()
}

/// Takes `.git/coord/<name>.lock` for as long as the harness runs, or fails with `busy`. One
/// `coord run` serves a push agent in a clone (two would both see its folder and run its tasks
/// twice; pull agents need none, each runner runs only what its own `claim` granted), and one
/// runs with `--sync` (sync steps of one clone must not overlap: a rejected push undoes the
/// branch to where that step began).
fn run_lock(git_dir: &std::path::Path, name: &str, busy: &str) -> Result<std::fs::File> {
    let dir = git_dir.join("coord");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(format!("{name}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(LockError::held(path)).context(busy.to_string())
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// The remote of `--sync`, and the gate that keeps this harness's sync steps (ticks, claims,
/// results, heartbeats from several threads) one at a time.
#[derive(Clone)]
struct Remote {
    name: String,
    gate: Arc<Mutex<()>>,
}

impl Remote {
    fn new(name: String) -> Remote {
        Remote {
            name,
            gate: Arc::new(Mutex::new(())),
        }
    }

    /// Runs `f` with the remote's name while no other sync step of this harness runs.
    fn one_at_a_time<T>(&self, f: impl FnOnce(String) -> T) -> T {
        let _turn = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        f(self.name.clone())
    }
}

struct Harness<'a> {
    ctx: &'a Ctx,
    args: &'a Args,
    pull: bool,
    workdir: PathBuf,
    /// The remote claims and results are pushed to (`--sync`), if any.
    remote: Option<Remote>,
    /// Set when the grace period is over: workers kill their commands.
    stop_now: Arc<AtomicBool>,
    /// Where task events are told.
    output: Output,
}

/// How often the live line is redrawn on a terminal.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Harness<'_> {
    /// The loop: tick, take work, start it, wait for an end or the interval; on a signal, drain.
    fn serve(&self) -> Result<()> {
        let (tx, rx) = channel();
        let signals = stop_on_signals(tx.clone())?;
        let interval = std::time::Duration::from_secs(self.args.interval.as_secs() as u64);
        let mut running = Running::new();
        let mut stopping = false;
        while !stopping {
            let ctx = self.ctx.refreshed();
            self.tick(&ctx);
            let free = (self.args.parallel as usize).saturating_sub(running.len());
            let taken = self.take(&ctx, free, &running)?;
            if self.args.once && taken.is_empty() && running.is_empty() {
                break;
            }
            for t in taken {
                running.insert(t.id.clone(), (t.attempt, Instant::now()));
                self.output.started(&t.id, t.attempt);
                self.start(t, tx.clone());
            }
            // Until the interval is over, or at once after a message (drained first).
            let mut until = Instant::now() + interval;
            loop {
                self.output.progress(&running);
                let left = until.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left.min(PROGRESS_EVERY)) {
                    Ok(Msg::Ended(e)) => self.ended(&mut running, e),
                    Ok(Msg::Stop) => stopping = true,
                    Err(RecvTimeoutError::Timeout) if Instant::now() < until => continue,
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                }
                until = Instant::now();
            }
        }
        self.output.clear();
        self.drain(&rx, &mut running);
        signals.close();
        if self.args.once {
            // What the last commands reported moves on now, not at someone's next tick.
            self.tick(&self.ctx.refreshed());
        }
        Ok(())
    }

    /// Waits for running commands up to the grace period, then has them killed.
    fn drain(&self, rx: &std::sync::mpsc::Receiver<Msg>, running: &mut Running) {
        if running.is_empty() {
            return;
        }
        self.output.say(&format!(
            "coord run: stopping; waiting up to {} for {} running task(s)",
            self.args.grace,
            running.len()
        ));
        let grace = std::time::Duration::from_secs(self.args.grace.as_secs() as u64);
        let until = Instant::now() + grace;
        while !running.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.stop_now.store(true, Ordering::SeqCst);
            }
            match rx.recv_timeout(left.max(std::time::Duration::from_millis(50))) {
                Ok(Msg::Ended(e)) => self.ended(running, e),
                Ok(Msg::Stop) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// One tick, as `coord tick` (or with `--sync`, `coord sync`) makes it; skipped when another
    /// coordinator holds the lock. An error is printed and the harness goes on.
    fn tick(&self, ctx: &Ctx) {
        let ticked = match &self.remote {
            Some(remote) => ctx
                .coord()
                .and_then(|coord| remote.one_at_a_time(|name| coord.tick_remote(&name).map(drop))),
            None => Ctx {
                wait: ctx.wait.or(Some(crate::ops::TICK_WAIT)),
                ..ctx.clone()
            }
            .coord()
            .and_then(|coord| coord.tick().map(drop)),
        };
        match ticked {
            Err(e) if !busy(&e) => self.output.say(&format!(
                "coord run: tick failed: {e:#}; trying again later"
            )),
            _ => {}
        }
    }

    fn ended(&self, running: &mut Running, e: Ended) {
        running.remove(&e.id);
        self.output.ended(&e.id, e.attempt, &e.told);
    }

    /// Returns the tasks to start now: the agent's assigned tasks without a result (push), or
    /// what `claim` grants (pull), at most `free`.
    fn take(&self, ctx: &Ctx, free: usize, running: &Running) -> Result<Vec<Taken>> {
        if free == 0 {
            return Ok(Vec::new());
        }
        if !self.pull {
            let landed_on = self.remote.as_ref().map(|r| r.name.as_str());
            let mut found = ctx.coord()?.work_of(&self.args.agent, landed_on)?;
            found.retain(|t| !running.contains_key(&t.id));
            found.truncate(free);
            return Ok(found);
        }
        let mut taken = Vec::new();
        while taken.len() < free {
            match claim(ctx, &self.args.agent, self.remote.clone()) {
                Ok(Some(t)) => taken.push(t),
                Ok(None) => break,
                Err(e) if busy(&e) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(taken)
    }

    /// Starts a worker thread for one task.
    fn start(&self, t: Taken, tx: Sender<Msg>) {
        let job = Job {
            argv: self.args.command.clone(),
            stdin: serde_json::to_vec(&t.json).unwrap_or_default(),
            env: vec![
                ("COORD_TASK_ID".into(), t.id.to_string()),
                ("COORD_AGENT".into(), self.args.agent.to_string()),
                ("COORD_ATTEMPT".into(), t.attempt.to_string()),
                ("COORD_TASK_FILE".into(), t.file.display().to_string()),
            ],
            cwd: self.workdir.clone(),
        };
        let worker = Worker {
            ctx: self.ctx.clone(),
            agent: self.args.agent.clone(),
            remote: self.remote.clone(),
            stop_now: self.stop_now.clone(),
        };
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

/// Returns whether an error means "another command holds the lock".
fn busy(e: &ops::Error) -> bool {
    matches!(e, ops::Error::Lock(LockError::Held { .. }))
}

/// Claims one task for a pull agent, as `coord claim` does, and returns it as taken; None when
/// there is nothing to claim.
fn claim(
    ctx: &Ctx,
    agent: &AgentName,
    remote: Option<Remote>,
) -> Result<Option<Taken>, ops::Error> {
    let coord = ctx.coord()?;
    match remote {
        Some(remote) => remote.one_at_a_time(|name| coord.claim_work(agent, Some(&name))),
        None => coord.claim_work(agent, None),
    }
}

/// Sends `Stop` on SIGINT or SIGTERM; the handlers stay, so a second signal does not kill the
/// harness while it drains.
fn stop_on_signals(tx: Sender<Msg>) -> Result<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .context("cannot install the SIGINT/SIGTERM handlers")?;
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
    ctx: Ctx,
    agent: AgentName,
    remote: Option<Remote>,
    stop_now: Arc<AtomicBool>,
}

/// Why a command did not end by itself.
enum Cut {
    Timeout,
    Stopped,
    Lost(String),
}

impl Worker {
    /// Runs the command for `t`, heartbeating, and reports; returns how it ended.
    fn work(&self, t: &Taken, job: &Job) -> Told {
        let started = Instant::now();
        let mut running = match Process::start(job) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("cannot start {:?}: {e}", job.argv[0]);
                return self.report_failure(t, &msg, true, started);
            }
        };
        let cut = self.watch(t, &mut running, started);
        if cut.is_some() {
            running.kill();
        }
        let finished = match running.finish() {
            Ok(f) => f,
            Err(e) => {
                return self.report_failure(t, &format!("lost the command: {e}"), true, started)
            }
        };
        match cut {
            Some(Cut::Timeout) => {
                let msg = format!("timeout: killed after {}s", t.timeout.as_secs());
                self.report_failure(t, &msg, true, started)
            }
            Some(Cut::Stopped) => {
                let msg = "coord run was stopped before the command ended";
                self.report_failure(t, msg, true, started)
            }
            Some(Cut::Lost(why)) => Told {
                kind: Kind::Dropped,
                message: Some(why),
                secs: started.elapsed().as_secs_f64(),
                not_recorded: None,
            },
            None => self.report_end(t, finished, started),
        }
    }

    /// Waits for the command, heartbeating when a third of the lease is used; returns why it
    /// was cut short, if it was.
    fn watch(&self, t: &Taken, running: &mut Process, started: Instant) -> Option<Cut> {
        let deadline = started + t.timeout;
        let mut lease_end = started + t.lease_left;
        let beat_before = t.timeout * 2 / 3;
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
                    Err(e) if busy(&e) => {}
                    Err(e) => return Some(Cut::Lost(format!("{e:#}"))),
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }

    /// Reports a command's end: success with its output on exit 0, else a failure.
    fn report_end(&self, t: &Taken, f: Finished, started: Instant) -> Told {
        if f.status.success() {
            if f.stdout_cut {
                let msg = format!(
                    "the command printed more than {} bytes",
                    crate::run::MAX_OUTPUT
                );
                return self.report_failure(t, &msg, true, started);
            }
            let verdict = Verdict::Success {
                output: output_of(&f.stdout),
                next_agents: Vec::new(),
            };
            return self.report(t, verdict, Kind::Done, None, started);
        }
        let code = f.status.code();
        let what = code.map_or("killed by a signal".to_string(), |c| format!("exit {c}"));
        let msg = match f.stderr_tail.as_str() {
            "" => what,
            tail => format!("{what}: {tail}"),
        };
        self.report_failure(t, &msg, code != Some(EXIT_FATAL), started)
    }

    fn report_failure(&self, t: &Taken, msg: &str, retryable: bool, started: Instant) -> Told {
        let verdict = Verdict::Failure {
            message: msg.to_string(),
            retryable,
        };
        let kind = if retryable { Kind::Failed } else { Kind::Fatal };
        self.report(t, verdict, kind, Some(msg.to_string()), started)
    }

    /// Writes the result for the attempt this worker was given, as `coord complete`/`fail` do.
    fn report(
        &self,
        t: &Taken,
        verdict: Verdict,
        kind: Kind,
        message: Option<String>,
        started: Instant,
    ) -> Told {
        let secs = started.elapsed().as_secs_f64();
        let not_recorded = self
            .write_result(t, &verdict)
            .err()
            .map(|e| format!("{e:#}"));
        Told {
            kind,
            message,
            secs,
            not_recorded,
        }
    }

    /// Writes the result as `coord complete`/`fail --agent --attempt` do: a report for an
    /// attempt that is no longer current is kept in history as `stale_result` and refused.
    fn write_result(&self, t: &Taken, verdict: &Verdict) -> Result<()> {
        let how = ops::How {
            fence: self.fence(t),
            ..ops::How::default()
        };
        self.on_remote(|coord, remote| {
            coord.report(&t.id, verdict, &how, remote)?.accepted(&t.id)
        })?;
        Ok(())
    }

    /// Extends the lease as `coord heartbeat --agent --attempt` does.
    fn heartbeat(&self, t: &Taken) -> Result<(), ops::Error> {
        let fence = self.fence(t);
        self.on_remote(|coord, remote| coord.heartbeat(&t.id, &fence, remote))
    }

    fn fence(&self, t: &Taken) -> Fence {
        Fence {
            agent: Some(self.agent.clone()),
            attempt: Some(t.attempt),
        }
    }

    /// Runs an operation with a fresh clock, as the CLI's agent commands do: here, or on the
    /// remote's tip and pushed with `--sync`.
    fn on_remote<T>(
        &self,
        op: impl FnOnce(&ops::Coord, Option<&str>) -> Result<T, ops::Error>,
    ) -> Result<T, ops::Error> {
        let coord = self.ctx.refreshed().coord()?;
        match &self.remote {
            Some(remote) => remote.one_at_a_time(|name| op(&coord, Some(&name))),
            None => op(&coord, None),
        }
    }
}
