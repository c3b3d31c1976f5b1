//! Hub mode (`coord serve --hub`): the server is its clone's only writer and the coordinator
//! of a fleet. It takes the lease on the remote before it serves, answers writes once they are
//! committed in its clone (without reading the whole repository again; an agent's claims and
//! results as group commits: those that queued while the last group was written are applied
//! together, each checked on its own, in one commit after one sync), and pushes them in
//! batches at most `hub.pushes_per_minute` times a minute, each push renewing the lease
//! ([`crate::ops::hub`]). It writes only while its lease, counted on its own monotonic clock
//! from before the push that last renewed it, has not run out (less a margin); every write,
//! the board's forms included, waits its turn in one queue. Every grant carries the hub's
//! epoch; a result or heartbeat naming another epoch is refused (a result kept as
//! `stale_result`). A hub that finds a newer hub on the lease stops writing and the server
//! exits. Stopped by SIGTERM or SIGINT it refuses new writes, lets the one under way finish
//! and pushes what it committed, waiting at most [`LAST_PUSH`] for that push; it keeps its
//! lease (its next start takes it back in the same epoch and pushes whatever is left). See
//! docs/fleet.md.

use super::problem::Problem;
use crate::config::HubConfig;
use crate::ops::hub::{holder_of, Held, HubError};
use crate::ops::{self, Coord, Opener};
use crate::store::Session;
use axum::http::StatusCode;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long before its lease lapses the hub stops writing, at most (a tenth of a shorter
/// lease): monotonic clocks on two machines may run at slightly different rates.
const MARGIN: Duration = Duration::from_secs(2);

/// How long a hub stopping waits for its last push before it leaves what it committed to its
/// next start.
pub const LAST_PUSH: Duration = Duration::from_secs(5);

/// The settings of a hub: `hub:` of coord.yaml.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The remote it pushes to and holds its lease on.
    pub remote: String,
    /// Its pushes a minute at most.
    pub pushes_per_minute: u32,
    /// How long its lease lasts unless renewed.
    pub lease: Duration,
}

impl Settings {
    /// Returns the settings of `hub:` in coord.yaml.
    pub fn of(c: &HubConfig) -> Settings {
        Settings {
            remote: c.remote.clone(),
            pushes_per_minute: c.pushes_per_minute.max(1),
            lease: Duration::from_secs(c.lease.as_secs().max(1) as u64),
        }
    }

    /// Returns the time between two batches: a minute over the push budget.
    fn interval(&self) -> Duration {
        Duration::from_secs(60) / self.pushes_per_minute
    }

    /// Returns how long after the push that wrote the lease started this hub may write: the
    /// lease less a margin, on its own monotonic clock.
    fn valid_for(&self) -> Duration {
        self.lease - MARGIN.min(self.lease / 10)
    }
}

/// What the handlers ask of hub mode.
pub struct HubMode {
    /// The epoch of this hub's lease; every grant carries it.
    pub epoch: u64,
    /// Set once a newer hub holds the lease: no more writes.
    stopped: AtomicBool,
    /// Set once the server is stopping: no more writes.
    closing: AtomicBool,
    /// Until when this hub may write: the lease as last renewed less a margin, by this
    /// machine's monotonic clock.
    valid_until: Mutex<Instant>,
    /// One write, group or batch at a time: writes wait their turn here instead of timing
    /// out on the lock.
    writes: Mutex<()>,
    /// Set while a batch waits for `writes`: the next group waits for the batch.
    pushing: AtomicBool,
    /// Where agents' writes queue for the next group commit ([`start_writing`]).
    queue: OnceLock<mpsc::Sender<(Job, Answer)>>,
}

/// An agent's write for a group commit: `grouped` applies it in the group's session (None:
/// it must go the whole way), else `alone` does it on its own after the group's commit.
pub struct Job {
    /// Applies the write in a group commit's session.
    pub grouped: Box<InGroup>,
    /// Does the write on its own.
    pub alone: Box<dyn FnOnce() -> Done + Send>,
}

/// A write's answer, or why it was refused.
pub type Done = Result<Value, Problem>;

/// Applies a write in a group commit's session: its answer, or None when it must go the
/// whole way on its own.
pub type InGroup = dyn FnOnce(&Coord, &Session<'_>) -> Option<Done> + Send;

/// Where a queued write's answer goes.
type Answer = tokio::sync::oneshot::Sender<Done>;

/// Why a hub refuses a write.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A newer hub holds the lease.
    #[error("this hub stopped writing: a newer hub holds the lease; send requests to it")]
    Stopped,
    /// The server is stopping.
    #[error("this hub is stopping; send the request again once it or another hub serves")]
    Stopping,
    /// The lease could not be renewed in time.
    #[error(
        "this hub's lease lapsed (the remote could not be reached to renew it); try again shortly"
    )]
    Lapsed,
}

impl HubMode {
    /// Runs `write` as the only write in progress, once the lease is known to be held.
    pub fn write<T>(&self, write: impl FnOnce() -> T) -> Result<T, Refusal> {
        let _one = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        self.may_write()?;
        Ok(write())
    }

    /// Refuses a write once a newer hub holds the lease or the lease ran out.
    fn may_write(&self) -> Result<(), Refusal> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(Refusal::Stopped);
        }
        if self.closing.load(Ordering::SeqCst) {
            return Err(Refusal::Stopping);
        }
        let until = *self.valid_until.lock().unwrap_or_else(|e| e.into_inner());
        if Instant::now() >= until {
            return Err(Refusal::Lapsed);
        }
        Ok(())
    }

    /// Queues an agent's write for the next group commit; returns its answer once the
    /// group is committed (or the write, gone its own way, is done).
    pub async fn submit(&self, job: Job) -> Done {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let queued = self.queue.get().map(|q| q.send((job, tx)));
        if !matches!(queued, Some(Ok(()))) {
            return Err(Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "this hub stopped writing; try again shortly",
            ));
        }
        rx.await.unwrap_or_else(|_| {
            Err(Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the hub's writer ended before it answered; send the request again",
            ))
        })
    }

    /// Takes the write queue, after a batch that waits for it.
    fn lock_writes(&self) -> MutexGuard<'_, ()> {
        while self.pushing.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the lease as `held` last wrote it.
    fn renewed(&self, held: &Held, settings: &Settings) {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner()) =
            held.written + settings.valid_for();
    }
}

/// Takes the lease for the clone `opener` opens: waits out another hub's lease, refusing as
/// soon as that hub renews it.
pub fn take(opener: &Opener, settings: &Settings) -> Result<(Arc<HubMode>, Held), ops::Error> {
    let coord = opener.open()?;
    let holder = holder_of(coord.store().root());
    let mut held = coord.take_lease(&settings.remote, &holder, settings.lease)?;
    // Start from the remote's latest, before answering anything.
    coord.hub_push(&mut held, settings.lease, false)?;
    let mode = Arc::new(HubMode {
        epoch: held.lease.epoch,
        stopped: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        valid_until: Mutex::new(held.written + settings.valid_for()),
        writes: Mutex::new(()),
        pushing: AtomicBool::new(false),
        queue: OnceLock::new(),
    });
    Ok((mode, held))
}

/// The thread that pushes the batches, as [`start_pushing`] started it.
pub struct Pusher {
    /// Tells the thread to push a last batch and end.
    stop: mpsc::Sender<()>,
    /// The line the thread says once its last batch landed or failed.
    last: mpsc::Receiver<String>,
}

impl Pusher {
    /// Stops the hub's writes: refuses new ones (503), lets the one under way (or the batch
    /// under way) finish, and pushes what the hub committed; returns the line saying how that
    /// went, at the latest after [`LAST_PUSH`]. The lease is kept.
    pub fn stop(self, mode: &HubMode) -> String {
        mode.closing.store(true, Ordering::SeqCst);
        let _ = self.stop.send(());
        match self.last.recv_timeout(LAST_PUSH) {
            Ok(line) => line,
            Err(_) => format!(
                "coord: the hub's last batch did not land within {}s (the remote did not answer); the next start of this hub pushes what it committed",
                LAST_PUSH.as_secs()
            ),
        }
    }
}

/// Starts the thread that pushes a batch every minute over the push budget (renewing the
/// lease with it, or alone when a third of the lease passed without a push) and calls
/// `changed` after each batch. It ends once a newer hub holds the lease, sending why on
/// `lost`, or once told to stop ([`Pusher::stop`]), after a last batch.
pub fn start_pushing(
    mode: Arc<HubMode>,
    mut held: Held,
    opener: Opener,
    settings: Settings,
    changed: impl Fn() + Send + 'static,
    lost: tokio::sync::oneshot::Sender<String>,
) -> std::io::Result<Pusher> {
    let (stop, stopped) = mpsc::channel();
    let (said, last) = mpsc::channel();
    std::thread::Builder::new()
        .name("coord-hub-push".into())
        .spawn(move || {
            let mut renewed = Instant::now();
            let mut last = renewed;
            loop {
                let wait = settings.interval().saturating_sub(last.elapsed());
                if stopped.recv_timeout(wait) != Err(RecvTimeoutError::Timeout) {
                    let _ = said.send(last_batch(&mode, &mut held, &opener, &settings));
                    return;
                }
                let started = Instant::now();
                let renew = renewed.elapsed() >= settings.lease / 3;
                // Writes wait for the batch: no answer reads the repository while the
                // batch's integration and tick move files. The batch goes next, after the
                // group being committed.
                mode.pushing.store(true, Ordering::SeqCst);
                let one = mode.writes.lock().unwrap_or_else(|e| e.into_inner());
                mode.pushing.store(false, Ordering::SeqCst);
                let pushed = opener
                    .open()
                    .and_then(|c| c.hub_push(&mut held, settings.lease, renew));
                drop(one);
                match pushed {
                    Ok(report) => {
                        if report.pushes > 0 || renew {
                            renewed = started;
                            mode.renewed(&held, &settings);
                        }
                        changed();
                    }
                    Err(ops::Error::Hub(e @ HubError::Superseded { .. })) => {
                        let _one = mode.writes.lock().unwrap_or_else(|e| e.into_inner());
                        mode.stopped.store(true, Ordering::SeqCst);
                        let _ = lost.send(e.to_string());
                        return;
                    }
                    Err(e) => crate::term::write_err(format_args!(
                        "coord: the hub's batch did not land ({e}); trying again"
                    )),
                }
                last = started;
            }
        })?;
    Ok(Pusher { stop, last })
}

/// Pushes what the hub committed once the write under way is done (later writes are
/// refused); returns the line saying how it went.
fn last_batch(mode: &HubMode, held: &mut Held, opener: &Opener, settings: &Settings) -> String {
    let _one = mode.writes.lock().unwrap_or_else(|e| e.into_inner());
    let pushed = opener
        .open()
        .and_then(|c| c.hub_push(held, settings.lease, false));
    match pushed {
        Ok(r) if r.pushes == 0 => "coord: hub stopped; everything it committed was pushed".into(),
        Ok(_) => "coord: hub stopped after pushing its last batch".into(),
        Err(e) => format!(
            "coord: the hub's last batch did not land ({e}); the next start of this hub pushes what it committed"
        ),
    }
}

/// Starts the thread that commits agents' writes in groups: the writes queued while it
/// committed the last group are taken together, once the lease is known to be held, each
/// applied on its own in one session and all committed in one commit, then each answered;
/// a write that must go the whole way goes after the group's commit, on its own.
pub fn start_writing(mode: Arc<HubMode>, opener: Opener) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel::<(Job, Answer)>();
    let _ = mode.queue.set(tx);
    std::thread::Builder::new()
        .name("coord-hub-write".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let _one = mode.lock_writes();
                // Everything queued meanwhile (behind a batch, a group) joins it.
                let mut jobs = vec![first];
                jobs.extend(rx.try_iter());
                match mode.may_write() {
                    Ok(()) => write_group(&opener, jobs),
                    Err(r) => {
                        let refused = Problem::new(StatusCode::SERVICE_UNAVAILABLE, r.to_string());
                        for (_, answer) in jobs {
                            let _ = answer.send(Err(refused.clone()));
                        }
                    }
                }
            }
        })
        .map(drop)
}

/// Applies `jobs` as one group commit and answers each once the group is committed; those
/// that must go the whole way go after it, one by one.
fn write_group(opener: &Opener, jobs: Vec<(Job, Answer)>) {
    let mut answers = Vec::with_capacity(jobs.len());
    let mut alone = Vec::new();
    let committed = opener.open().and_then(|coord| {
        let session = coord.group_session()?;
        for (job, answer) in jobs {
            if session.group_broken() {
                alone.push((job.alone, answer));
                continue;
            }
            let Job {
                grouped,
                alone: own,
            } = job;
            match grouped(&coord, &session) {
                Some(done) => answers.push((answer, done)),
                None => alone.push((own, answer)),
            }
        }
        coord.commit_group(session)
    });
    match committed {
        Ok(_) => {
            for (answer, done) in answers {
                let _ = answer.send(done);
            }
        }
        Err(e) => {
            let failed = Problem::of(&e);
            for (answer, _) in answers {
                let _ = answer.send(Err(failed.clone()));
            }
        }
    }
    for (write, answer) in alone {
        let _ = answer.send(write());
    }
}
