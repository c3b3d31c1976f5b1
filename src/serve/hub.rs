//! The server's picture of the repository: the latest snapshot (board, status view, HEAD),
//! reloaded when HEAD moves or a file under `work/` changes, whoever changed it (a `coord tick`
//! in a shell, a `git pull`, a person's edit, a request to this server), and the transitions
//! between two snapshots, published to every `/v1/events` subscriber with the ids of the
//! clone's event journal ([`crate::ops::events`]): one event per transition a commit records
//! (coord's from its trailers, a person's from the task files their commit moved, with its
//! author) that history did not already hold, one per state change no commit explains (a file
//! moved by hand and not committed, reported once it stayed so for [`COMMIT_GRACE`]), then one
//! `board` event. Counts the transitions of the branch's history for `/metrics`. Writes only
//! the event journal.

use super::metrics::Counters;
use crate::board::Board;
use crate::model::{Priority, State, TaskId};
use crate::ops::events::{self, Change, Journal, Logged};
use crate::ops::Opener;
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Any error of opening or reading the repository.
pub type HubError = Box<dyn std::error::Error + Send + Sync>;

/// How often the watcher looks at HEAD and the change flag.
const POLL: Duration = Duration::from_millis(100);
/// How often the snapshot is rebuilt even without a change (ages, overdue tasks, leases).
const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// How long a writer may hold the lock before the snapshot is read anyway (a killed holder).
const WRITER_FRESH: Duration = Duration::from_secs(10);
/// How long a read that must show a write waits for the coordinator lock (a writer half-way
/// through moving files) before it reads without it.
const SETTLE_WAIT: Duration = Duration::from_secs(5);
/// How long a state change no commit explains waits for one (a person's `git mv` followed by
/// `git commit`) before it is reported as not committed.
pub const COMMIT_GRACE: Duration = Duration::from_secs(2);

/// One reading of the repository.
pub struct Snapshot {
    /// Counts reloads that changed something; starts at 1.
    pub generation: u64,
    /// The commit HEAD pointed at.
    pub head: Option<crate::git::Oid>,
    /// Every task and agent.
    pub board: Board,
    /// The status view (`coord status --json`), secrets redacted.
    pub view: Value,
    /// The priority of tasks that name none.
    pub default_priority: Priority,
    /// The names of the webhook endpoints coord.yaml configures.
    pub webhooks: std::collections::BTreeSet<String>,
    /// How long reading took.
    pub took: Duration,
    /// Whether no other writer was at work while it was read (HEAD unchanged, the lock free
    /// at the end or held by the reading): only such a reading is compared with the last to
    /// find transitions.
    pub steady: bool,
}

impl Snapshot {
    /// The commit HEAD pointed at, in hex (as the API and the events give it).
    pub fn head_hex(&self) -> Option<String> {
        self.head.map(|h| h.to_string())
    }

    /// Returns each task's state by id (the first copy of a duplicated id).
    fn states(&self) -> BTreeMap<&TaskId, State> {
        let mut m = BTreeMap::new();
        for t in &self.board.tasks {
            m.entry(&t.id).or_insert(t.folder.state);
        }
        m
    }
}

/// Something that happened, as `/v1/events` sends it.
#[derive(Debug, Clone)]
pub struct Event {
    /// A transition's id in the event journal; None for a `board` event.
    pub id: Option<u64>,
    /// `transition` or `board`.
    pub kind: &'static str,
    /// The event's JSON.
    pub data: Value,
}

/// The shared state of the server: the snapshot, the event channel and the counters.
///
/// Reads see the writes answered before they started: each write the server answers is
/// counted ([`Hub::wrote`]) once it is committed, each snapshot records the count as it was
/// before its reading began, and a read whose snapshot counts fewer reads again first
/// ([`Hub::fresh`]).
pub struct Hub {
    opener: Opener,
    /// What reads answer from.
    current: RwLock<Arc<Snapshot>>,
    /// The last reading compared with the one before it (transitions published up to it);
    /// held while reading again, one reading at a time.
    reloading: Mutex<Arc<Snapshot>>,
    /// How many writes the server answered (counted once committed).
    wrote: AtomicU64,
    /// How many of them the snapshot reads answer from shows.
    seen: AtomicU64,
    events: broadcast::Sender<Arc<Event>>,
    journal: Journal,
    /// The id of the last transition sent to subscribers; held while sending.
    published: Mutex<u64>,
    dirty: AtomicBool,
    /// Since when a state change no commit explains has waited for one.
    unexplained_since: Mutex<Option<Instant>>,
    /// The transitions of the branch's history.
    pub counters: Mutex<Counters>,
    /// Where the counters are saved (`.git/coord/events/counts.json`).
    counts: PathBuf,
    /// The repository's git directory, where coord processes leave their stats.
    pub git_dir: PathBuf,
}

impl Hub {
    /// Reads the repository around `opener.dir` for the first time.
    pub fn open(opener: Opener) -> Result<Arc<Hub>, HubError> {
        let first = load(&opener, 1, Reading::Free)?;
        let repo = crate::git::Repo::discover(&opener.dir)?;
        let git_dir = repo.git_dir().to_path_buf();
        let journal = Journal::open(&git_dir);
        // What happened while no server ran is in the journal for clients that resume.
        journal.record(&repo, &first.board.work_dir, first.head, Vec::new())?;
        let counts = git_dir.join("coord").join("events").join("counts.json");
        let counters = counted(&repo, &first.board.work_dir, &counts, first.head)?;
        counters.save(&counts, &first.head_hex().unwrap_or_default());
        let (events, _) = broadcast::channel(1024);
        let first = Arc::new(first);
        Ok(Arc::new(Hub {
            opener,
            current: RwLock::new(Arc::clone(&first)),
            reloading: Mutex::new(first),
            wrote: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            events,
            published: Mutex::new(journal.last()),
            journal,
            dirty: AtomicBool::new(false),
            unexplained_since: Mutex::new(None),
            counters: Mutex::new(counters),
            counts,
            git_dir,
        }))
    }

    /// Returns the latest snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Returns how a request opens the repository (each opening reads the clock, unless it
    /// was given).
    pub fn opener(&self) -> Opener {
        self.opener.clone()
    }

    /// Returns a receiver of every event published from now on, and the id of the last
    /// transition published before.
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<Event>>, u64) {
        let published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        (self.events.subscribe(), *published)
    }

    /// Returns the id of the last transition in the event journal.
    pub fn last_id(&self) -> u64 {
        self.journal.last()
    }

    /// Returns the transitions published after id `after`, from the event journal.
    pub fn replay(&self, after: u64) -> Result<Vec<Arc<Event>>, HubError> {
        Ok(self
            .journal
            .after(after)?
            .into_iter()
            .map(transition)
            .collect())
    }

    /// Returns how many clients listen to events.
    pub fn listeners(&self) -> usize {
        self.events.receiver_count()
    }

    /// Reads the repository again and publishes what changed since the last snapshot; a
    /// reading made while a writer was at work is left for the next poll.
    pub fn refresh(&self) -> Result<(), HubError> {
        let mut base = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        self.reload(&mut base, Reading::Free)
    }

    /// Returns a snapshot that shows every write counted by [`Hub::wrote`] before the call:
    /// when the current one does not, reads the repository again first, under the
    /// coordinator lock so that no writer is half-way through moving files (without it once
    /// [`SETTLE_WAIT`] has passed: the writes counted are in the reading either way).
    pub fn fresh(&self) -> Result<Arc<Snapshot>, HubError> {
        let need = self.wrote.load(Ordering::SeqCst);
        if self.seen.load(Ordering::SeqCst) < need {
            let mut base = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
            // Another read may have read again meanwhile.
            if self.seen.load(Ordering::SeqCst) < need {
                self.reload(&mut base, Reading::Settled)?;
            }
        }
        Ok(self.snapshot())
    }

    /// Reads the repository again under the coordinator lock and returns the reading.
    pub fn reread(&self) -> Result<Arc<Snapshot>, HubError> {
        let mut base = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        self.reload(&mut base, Reading::Settled)?;
        Ok(self.snapshot())
    }

    /// Counts a write the server answers, once it is committed (or refused after keeping
    /// something, as a stale result is): reads that start from now on show it.
    pub fn wrote(&self) {
        self.wrote.fetch_add(1, Ordering::SeqCst);
        self.dirty.store(true, Ordering::SeqCst);
    }

    /// Reads the repository `how` and makes the reading what reads answer from; publishes
    /// the transitions since `base` and makes it the new base when no writer was at work
    /// and every state change is explained (or waited for long enough).
    fn reload(&self, base: &mut Arc<Snapshot>, how: Reading) -> Result<(), HubError> {
        self.dirty.store(false, Ordering::SeqCst);
        let covers = self.wrote.load(Ordering::SeqCst);
        let mut new = load(&self.opener, base.generation, how)?;
        if !new.steady {
            // Read again once the writer is done; a read that must show a write takes this
            // reading meanwhile.
            self.dirty.store(true, Ordering::SeqCst);
            if how == Reading::Settled {
                self.show(new, covers);
            }
            return Ok(());
        }
        let repo = crate::git::Repo::discover(&self.opener.dir)?;
        let work_dir = new.board.work_dir.clone();
        let change = events::change(&repo, &work_dir, base.head, new.head)?;
        let explained: HashSet<&str> = change.iter().flat_map(Change::subjects).collect();
        let by_hand = moved_by_hand(base, &new, &explained);
        if self.wait_for_commit(!by_hand.is_empty()) {
            // Reads show the change at once; its transition waits for a commit.
            self.dirty.store(true, Ordering::SeqCst);
            self.show(new, covers);
            return Ok(());
        }
        let logged = self.journal.record(&repo, &work_dir, new.head, by_hand)?;
        self.count(&repo, &work_dir, change.as_ref(), new.head)?;
        let changed = !logged.is_empty() || new.view != base.view || new.head != base.head;
        if changed {
            new.generation = base.generation + 1;
        }
        let (generation, head) = (new.generation, new.head_hex());
        *base = self.show(new, covers);
        if !changed {
            return Ok(());
        }
        self.publish(logged)?;
        let board = json!({"generation": generation, "head": head});
        let _ = self.events.send(Arc::new(Event {
            id: None,
            kind: "board",
            data: board,
        }));
        Ok(())
    }

    /// Makes `snap` what reads answer from, showing the writes counted up to `covers`.
    fn show(&self, snap: Snapshot, covers: u64) -> Arc<Snapshot> {
        let snap = Arc::new(snap);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&snap);
        self.seen.fetch_max(covers, Ordering::SeqCst);
        snap
    }

    /// Counts the transitions a move of HEAD added and takes back those it removed; counts
    /// the whole history again when the old HEAD is gone. Saves the counters when they moved.
    fn count(
        &self,
        repo: &crate::git::Repo,
        work_dir: &str,
        change: Option<&Change>,
        head: Option<crate::git::Oid>,
    ) -> Result<(), HubError> {
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        match change {
            Some(c) if c.added.is_empty() && c.removed.is_empty() => return Ok(()),
            Some(change) => counters.apply(change),
            None => *counters = counted(repo, work_dir, &self.counts, head)?,
        }
        counters.save(
            &self.counts,
            &head.map(|h| h.to_string()).unwrap_or_default(),
        );
        Ok(())
    }

    /// Sends the transitions of the journal not sent yet: `logged` when it follows the last
    /// sent, else read back from the journal (another process, or the webhook deliverer,
    /// recorded some meanwhile).
    fn publish(&self, logged: Vec<Logged>) -> Result<(), HubError> {
        let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        let follows = match logged.first() {
            Some(l) => l.id == *published + 1,
            None => self.journal.last() <= *published,
        };
        let due: Vec<Arc<Event>> = if follows {
            logged.into_iter().map(transition).collect()
        } else {
            self.replay(*published)?
        };
        for ev in due {
            *published = ev.id.unwrap_or(*published).max(*published);
            // No subscriber is not an error: the event is simply not wanted.
            let _ = self.events.send(ev);
        }
        Ok(())
    }

    /// Whether to read again later instead of reporting state changes no commit explains
    /// (`unexplained`): for [`COMMIT_GRACE`] after they were first seen.
    fn wait_for_commit(&self, unexplained: bool) -> bool {
        let mut since = self
            .unexplained_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !unexplained {
            *since = None;
            return false;
        }
        let first = *since.get_or_insert_with(Instant::now);
        if first.elapsed() < COMMIT_GRACE {
            return true;
        }
        *since = None;
        false
    }

    /// Reloads at the next poll (a tick this server ran changed something).
    pub fn changed(&self) {
        self.dirty.store(true, Ordering::SeqCst);
    }

    /// Starts the thread that reloads on change: it polls HEAD every 100 ms and is woken by
    /// changes under `work/` (notify), and rebuilds every 10 s regardless.
    pub fn watch(self: &Arc<Hub>) -> Result<(), HubError> {
        let snap = self.snapshot();
        let dir = self.opener.dir.clone();
        let store = Store::open(&dir)?;
        let work = store.abs(&snap.board.work_dir);
        let hub = Arc::clone(self);
        let watcher = start_notify(&work, Arc::clone(self))?;
        std::thread::Builder::new()
            .name("coord-serve-watch".into())
            .spawn(move || {
                let _keep = watcher;
                hub.poll_loop(&store);
            })?;
        Ok(())
    }

    fn poll_loop(&self, store: &Store) {
        let mut last = Instant::now();
        loop {
            std::thread::sleep(POLL);
            if crate::lock::busy(store.repo.git_dir(), WRITER_FRESH) {
                continue;
            }
            let head = store.repo.head().ok().and_then(|h| h.oid);
            let moved = head != self.snapshot().head;
            let due = last.elapsed() >= REFRESH_EVERY;
            if moved || due || self.dirty.load(Ordering::SeqCst) {
                last = Instant::now();
                if let Err(e) = self.refresh() {
                    crate::term::write_err(format_args!(
                        "coord serve: cannot read the repository: {}",
                        crate::redact::error_line(&e.to_string())
                    ));
                }
            }
        }
    }
}

/// How a reading treats writers at work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Without the lock: a writer that starts meanwhile makes the reading unsteady.
    Free,
    /// Under the coordinator lock, waiting [`SETTLE_WAIT`] for it.
    Settled,
}

/// Reads the board and the status view.
fn load(opener: &Opener, generation: u64, how: Reading) -> Result<Snapshot, HubError> {
    let started = Instant::now();
    let coord = opener.open()?;
    let store = coord.store();
    let git_dir = store.repo.git_dir();
    let lock = match how {
        Reading::Free => None,
        Reading::Settled => crate::lock::acquire(git_dir, SETTLE_WAIT).ok(),
    };
    let locked = lock.is_some();
    let head = store.repo.head()?.oid;
    let session = store.session(lock);
    let (board, _) = session.load()?;
    // A writer that started during the read (the poll saw the lock free) may have moved
    // files that its commit does not name yet: such a read would report them as moved by
    // hand, and again from the commit once it lands.
    let after = store.repo.head()?.oid;
    let steady = after == head && (locked || !crate::lock::busy(git_dir, WRITER_FRESH));
    let reasons = crate::view::invalid_reasons(store, &board);
    let mut view = crate::view::board::view(&board, &coord.inputs(&session), &reasons);
    drop(session);
    crate::ops::webhooks::add_problems(git_dir, &mut view);
    Ok(Snapshot {
        generation,
        head,
        board,
        view: crate::redact::redact_value(&view),
        default_priority: store.config.defaults.priority,
        webhooks: store.config.webhooks.keys().cloned().collect(),
        took: started.elapsed(),
        steady,
    })
}

/// Returns the counters of the history up to `head`: those saved at `counts` and the
/// transitions since the commit they count up to, or, without them, the whole history's.
fn counted(
    repo: &crate::git::Repo,
    work_dir: &str,
    counts: &Path,
    head: Option<crate::git::Oid>,
) -> Result<Counters, HubError> {
    if let Some((mut counters, at)) = Counters::load(counts) {
        if let Ok(at) = at.parse() {
            if let Some(change) = events::change(repo, work_dir, Some(at), head)? {
                counters.apply(&change);
                return Ok(counters);
            }
        }
    }
    let mut counters = Counters::default();
    counters.apply(&events::change(repo, work_dir, None, head)?.unwrap_or_default());
    Ok(counters)
}

/// A transition of the journal as subscribers get it.
fn transition(l: Logged) -> Arc<Event> {
    Arc::new(Event {
        id: Some(l.id),
        kind: "transition",
        data: l.data,
    })
}

/// Returns a transition for each task whose state changed without a commit saying so.
fn moved_by_hand(old: &Snapshot, new: &Snapshot, explained: &HashSet<&str>) -> Vec<Value> {
    let before = old.states();
    let after = new.states();
    let ids: std::collections::BTreeSet<&&TaskId> = before.keys().chain(after.keys()).collect();
    ids.into_iter()
        .filter(|id| !explained.contains(id.as_str()))
        .filter_map(|id| {
            let (from, to) = (before.get(*id), after.get(*id));
            (from != to).then(|| {
                json!({
                    "commit": null,
                    "task": id.as_str(),
                    "from": from.map_or("none", |s| s.as_str()),
                    "to": to.map_or("none", |s| s.as_str()),
                    "summary": "changed in the work tree (not committed)",
                })
            })
        })
        .collect()
}

/// Marks the hub dirty on every change under `work/` that is not a read, git's or an
/// editor's temp file.
fn start_notify(work: &Path, hub: Arc<Hub>) -> Result<notify::RecommendedWatcher, HubError> {
    use notify::Watcher;
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            let relevant = !matches!(ev.kind, notify::EventKind::Access(_))
                && ev.paths.iter().any(|p| !crate::watch::ignored(p));
            if relevant {
                hub.dirty.store(true, Ordering::SeqCst);
            }
        }
    })?;
    w.watch(work, notify::RecursiveMode::Recursive)?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Options;

    fn tick_with(dir: &Path, opts: &Options, id: &str) {
        let task = format!("title: {id}\nagent: alice\n");
        std::fs::write(dir.join(format!("work/inbox/{id}.yaml")), task).expect("task");
        crate::ops::Coord::open(dir, opts.clone())
            .expect("open")
            .tick()
            .expect("tick");
    }

    #[test]
    fn a_commit_made_after_a_reading_is_left_to_the_next_reading() {
        let t = tempfile::tempdir().expect("tempdir");
        let opts = Options {
            now: Some("2026-11-22T10:00:00Z".parse().expect("time")),
            ..Options::default()
        };
        crate::ops::init(
            t.path(),
            crate::ops::Setup::default(),
            opts.clone(),
            Box::new(|_| {}),
        )
        .expect("init");
        let config = std::fs::read_to_string(t.path().join("coord.yaml")).expect("config");
        std::fs::write(t.path().join("coord.yaml"), config + "\nsettle: 0s\n").expect("config");
        std::fs::write(t.path().join("work/agents/alice.yaml"), "max_active: 9\n").expect("agent");
        let opener = Opener::new(t.path().to_path_buf(), opts.clone(), |_| {});
        let old = load(&opener, 1, Reading::Free).expect("load");
        tick_with(t.path(), &opts, "first");
        let new = load(&opener, 2, Reading::Free).expect("load");
        // A writer commits between the reading and the walk of its history.
        tick_with(t.path(), &opts, "second");
        let tasks = |a: &Snapshot, b: &Snapshot| -> Vec<String> {
            let repo = crate::git::Repo::discover(t.path()).expect("repo");
            let change = events::change(&repo, &b.board.work_dir, a.head, b.head)
                .expect("history")
                .expect("the old HEAD is there");
            let mut ids: Vec<String> = change.real().iter().map(|e| e.subject.clone()).collect();
            ids.dedup();
            ids
        };
        assert_eq!(
            tasks(&old, &new),
            ["first"],
            "only the commits the reading saw"
        );
        let newer = load(&opener, 3, Reading::Free).expect("load");
        assert_eq!(tasks(&new, &newer), ["second"], "each commit once");
    }
}
