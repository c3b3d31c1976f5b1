//! `coord watch`: a tick after every burst of changes under `work/` and every interval, until
//! SIGINT or SIGTERM.
//!
//! Events come from notify (inotify, FSEvents, ...; or polling with `--poll` for NFS, WSL and
//! exhausted inotify limits), one at a time and in the order the kernel reported them. The
//! loop debounces them itself: the first event worth a tick starts a short wait that gathers
//! the rest of its burst, then the tick runs. Events are only a hint: the tick rescans `work/`
//! and reconciles, whatever the event kinds said. Reads (`Access` events, which the tick's own
//! reading causes, and a writer closing a file), `.git`, editor temp files and coord's own temp
//! files are ignored. One kind of event says more: a rename into place marks the file
//! complete (docs/behaviour.md), so the settle rule reads it at once; `renamed` keeps those marks
//! by
//! event order, never by the time an event came in, and confirms them with a barrier before a
//! tick uses them. A close marks nothing: a writer may append again. When a tick
//! leaves a file unread because it is still being written, the loop ticks again as soon as it
//! settles. coord's own writes cannot loop: a burst is skipped when HEAD is where the last
//! tick that changed nothing left it and `work/` has no uncommitted change, and a tick is
//! idempotent, so after a tick that made commits at most one more (empty) tick follows.
//! A signal lets the current tick finish; then `run` returns.

mod renamed;

use crate::fsx::TEMP_SUFFIX;
use crate::git::{GitError, Oid, Repo};
use notify::event::CreateKind;
use notify::{Event, EventKind, PollWatcher, RecursiveMode};
use renamed::Renamed;
pub use renamed::SeenComplete;
use std::path::{Component, Path};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How `coord watch` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Time between periodic ticks (leases, backoff).
    pub interval: Duration,
    /// Poll the file system instead of using its change events.
    pub poll: bool,
    /// How long after the first event of a burst the tick runs.
    pub debounce: Duration,
    /// How often `--poll` scans.
    pub poll_every: Duration,
}

impl Default for Options {
    /// Returns a 60 s interval, native events, a 20 ms debounce, 500 ms polls.
    ///
    /// The debounce is a floor under every drop-to-commit latency. It need not wait out a
    /// writer: the settle rule keeps a file that is still being written unread, whenever the
    /// tick runs. 20 ms still gathers both halves of a rename and an editor's save into one
    /// burst.
    fn default() -> Options {
        Options {
            interval: Duration::from_secs(60),
            poll: false,
            debounce: Duration::from_millis(20),
            poll_every: Duration::from_millis(500),
        }
    }
}

/// Why a tick runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The first tick when watching starts.
    Start,
    /// Files changed under `work/`.
    Changed,
    /// The interval passed.
    Interval,
    /// The last tick could not take the lock.
    Retry,
    /// A file the last tick left unread because it was still being written settled.
    Settled,
}

/// What a tick did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticked {
    /// It ran and made this many commits.
    Done(usize),
    /// It ran, made this many commits, and left a file unread that settles after this long.
    Settling(usize, Duration),
    /// Another coordinator held the lock; try again soon.
    Busy,
}

/// Why watching could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The repository could not be read.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The watcher could not be set up.
    #[error("cannot watch {}: {source}", path.display())]
    Notify {
        /// The folder.
        path: std::path::PathBuf,
        /// What notify reported.
        source: notify::Error,
    },
    /// The signal handlers could not be installed.
    #[error("cannot install the SIGINT/SIGTERM handlers: {0}")]
    Signals(std::io::Error),
}

impl WatchError {
    /// Returns what to do about it, when there is something to do.
    pub fn hint(&self) -> Option<String> {
        match self {
            WatchError::Notify { .. } => {
                Some("try --poll (for NFS, WSL or when inotify limits are reached)".into())
            }
            _ => None,
        }
    }
}

/// A boxed error from the tick.
pub type TickError = Box<dyn std::error::Error + Send + Sync>;

/// How long to wait before retrying a tick that failed or found the lock held.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// How long a tick waits for its barrier to come back before it runs without the marks it
/// was to confirm (those files then settle by their mtime).
const BARRIER_WAIT: Duration = Duration::from_secs(2);

enum Msg {
    Fs(notify::Result<Event>),
    Stop,
}

/// The loop's view of the events: what they asked for and what they showed renamed in.
struct Events<'a> {
    rx: Receiver<Msg>,
    work: &'a Path,
    say: &'a mut dyn FnMut(&str),
    renamed: Renamed,
    /// When the burst under way is to be ticked.
    burst_at: Option<Instant>,
    debounce: Duration,
    stop: bool,
    barriers: u64,
}

impl Events<'_> {
    /// Waits for one message until `deadline` and takes it.
    fn wait(&mut self, deadline: Instant) {
        let timeout = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(timeout) {
            Ok(msg) => self.take(msg),
            Err(RecvTimeoutError::Disconnected) => self.stop = true,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }

    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Stop => self.stop = true,
            Msg::Fs(Ok(e)) => {
                self.renamed.note(&e, &ignored);
                if relevant(&e) && self.burst_at.is_none() {
                    self.burst_at = Some(Instant::now() + self.debounce);
                }
            }
            Msg::Fs(Err(e)) => {
                (self.say)(&format!("coord: watch error: {e}"));
                self.renamed.forget_all();
                self.burst_at.get_or_insert_with(Instant::now);
            }
        }
    }

    /// Returns the files confirmed renamed in and not written since, and whether
    /// every mark could be confirmed. When a mark waits for confirmation, first makes a
    /// barrier (a file of coord's own in `work/`) and takes events until its creation comes
    /// back: every event before it is then in.
    fn seen_complete(&mut self) -> (SeenComplete, bool) {
        let confirmed = !self.renamed.unconfirmed() || {
            self.renamed.snap();
            self.barrier()
        };
        self.renamed.expire();
        (self.renamed.complete(), confirmed)
    }

    /// Makes a barrier and waits up to [`BARRIER_WAIT`] for it; returns false when it did not
    /// come back in time (the marks stay, for the next barrier). Marks that no barrier can
    /// confirm (`work/` is not writable) are forgotten.
    fn barrier(&mut self) -> bool {
        self.barriers += 1;
        let name = format!(
            ".coord-watch.{}.{}{TEMP_SUFFIX}",
            std::process::id(),
            self.barriers
        );
        let path = self.work.join(name);
        if std::fs::File::create(&path).is_err() {
            self.renamed.forget_all();
            return true;
        }
        let deadline = Instant::now() + BARRIER_WAIT;
        let mut back = false;
        while !back && !self.stop && Instant::now() < deadline {
            let timeout = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(timeout) {
                Ok(Msg::Fs(Ok(e))) if is_creation_of(&e, &path) => back = true,
                Ok(msg) => self.take(msg),
                Err(RecvTimeoutError::Disconnected) => self.stop = true,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        if back {
            self.renamed.confirm();
        }
        let _ = std::fs::remove_file(&path);
        back
    }
}

fn is_creation_of(e: &Event, path: &Path) -> bool {
    matches!(
        e.kind,
        EventKind::Create(CreateKind::File | CreateKind::Any)
    ) && e.paths == [path]
}

/// Watches `work` (the absolute work folder of the repository `repo`) and calls `tick` after
/// changes and every interval until SIGINT or SIGTERM. A tick's error goes to `say` and the
/// loop goes on. Returns the number of ticks run.
pub fn run(
    repo: &Repo,
    work: &Path,
    opts: &Options,
    tick: &mut dyn FnMut(Why, &SeenComplete) -> Result<Ticked, TickError>,
    say: &mut dyn FnMut(&str),
) -> Result<usize, WatchError> {
    let (tx, rx) = channel();
    let signals = stop_on_signals(tx.clone())?;
    let watcher = start_watcher(work, opts, tx)?;
    let how = if opts.poll { "polling" } else { "watching" };
    say(&format!(
        "coord: {how} {} (tick every {}s); Ctrl-C stops",
        work.display(),
        opts.interval.as_secs()
    ));
    let mut events = Events {
        rx,
        work,
        say,
        renamed: Renamed::default(),
        burst_at: None,
        debounce: opts.debounce,
        stop: false,
        barriers: 0,
    };
    let ticks = ticks(repo, work, opts, tick, &mut events);
    signals.close();
    drop(watcher);
    Ok(ticks)
}

/// The loop of [`run`]: ticks when asked until a signal; returns the number of ticks.
fn ticks(
    repo: &Repo,
    work: &Path,
    opts: &Options,
    tick: &mut dyn FnMut(Why, &SeenComplete) -> Result<Ticked, TickError>,
    events: &mut Events<'_>,
) -> usize {
    let prefix = work_prefix(repo, work);
    let mut settled: Option<Option<Oid>> = None;
    let mut ticks = 0;
    let mut next_interval = Instant::now() + opts.interval;
    let mut retry_at: Option<Instant> = None;
    let mut settle_at: Option<Instant> = None;
    let mut why = Some(Why::Start);
    loop {
        if let Some(w) = why.take() {
            let (seen, confirmed) = events.seen_complete();
            if events.stop {
                break;
            }
            ticks += 1;
            // Marks a late barrier left unconfirmed are tried again soon.
            retry_at = (!confirmed).then(|| Instant::now() + BUSY_RETRY);
            settle_at = None;
            match tick(w, &seen) {
                Ok(Ticked::Done(0)) => settled = repo.head().ok().map(|h| h.oid),
                Ok(Ticked::Done(_)) => settled = None,
                Ok(Ticked::Settling(_, after)) => {
                    settled = None;
                    settle_at = Some(Instant::now() + after);
                }
                Ok(Ticked::Busy) => retry_at = Some(Instant::now() + BUSY_RETRY),
                Err(e) => {
                    (events.say)(&format!("coord: tick failed: {}", chain(&*e)));
                    retry_at = Some(Instant::now() + BUSY_RETRY);
                }
            }
            if w == Why::Interval {
                next_interval = Instant::now() + opts.interval;
            }
        }
        let deadline = [retry_at, settle_at, events.burst_at]
            .into_iter()
            .flatten()
            .fold(next_interval, Instant::min);
        events.wait(deadline);
        if events.stop {
            break;
        }
        let now = Instant::now();
        why = if now >= next_interval {
            Some(Why::Interval)
        } else if retry_at.is_some_and(|r| now >= r) {
            Some(Why::Retry)
        } else if settle_at.is_some_and(|r| now >= r) {
            Some(Why::Settled)
        } else if events.burst_at.is_some_and(|b| now >= b) {
            events.burst_at = None;
            (!is_settled(repo, &prefix, settled)).then_some(Why::Changed)
        } else {
            None
        };
    }
    ticks
}

/// Returns whether HEAD is where the last empty tick left it and `work/` has no uncommitted
/// change: then nothing happened that a tick would act on. When in doubt (git unreadable),
/// not settled: the tick will say what is wrong.
fn is_settled(repo: &Repo, prefix: &str, settled: Option<Option<Oid>>) -> bool {
    let Some(head) = settled else {
        return false;
    };
    repo.head().is_ok_and(|h| h.oid == head)
        && repo.changed_paths(prefix).is_ok_and(|c| c.is_empty())
}

fn work_prefix(repo: &Repo, work: &Path) -> String {
    let rel = work
        .strip_prefix(repo.workdir())
        .unwrap_or(Path::new("work"));
    format!("{}/", rel.to_string_lossy().trim_end_matches('/'))
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.dedup();
    crate::redact::one_line(&parts.join(": "))
}

/// Returns whether an event is worth a tick: anything but an access (a read, which the
/// tick's own reading causes, or a close) on a path that is not noise.
fn relevant(e: &Event) -> bool {
    !matches!(e.kind, EventKind::Access(_)) && e.paths.iter().any(|p| !ignored(p))
}

/// Returns whether a changed path is noise: inside `.git`, an editor's temp or lock file
/// (`*.swp`, `*.swx`, `*~`, vim's `4913`, emacs' `.#*`) or coord's own temp file.
pub fn ignored(path: &Path) -> bool {
    if path
        .components()
        .any(|c| c == Component::Normal(".git".as_ref()))
    {
        return true;
    }
    let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else {
        return false;
    };
    name.ends_with(".swp")
        || name.ends_with(".swx")
        || name.ends_with('~')
        || name == "4913"
        || name.starts_with(".#")
        || name.ends_with(TEMP_SUFFIX)
}

/// Starts notify on `work`, recursively; its events go to `tx` one by one, in order.
fn start_watcher(
    work: &Path,
    opts: &Options,
    tx: Sender<Msg>,
) -> Result<Box<dyn notify::Watcher>, WatchError> {
    let err = |source| WatchError::Notify {
        path: work.to_path_buf(),
        source,
    };
    let handler = move |e: notify::Result<Event>| {
        let _ = tx.send(Msg::Fs(e));
    };
    let mut watcher: Box<dyn notify::Watcher> = if opts.poll {
        let config = notify::Config::default().with_poll_interval(opts.poll_every);
        Box::new(PollWatcher::new(handler, config).map_err(err)?)
    } else {
        Box::new(notify::recommended_watcher(handler).map_err(err)?)
    };
    watcher.watch(work, RecursiveMode::Recursive).map_err(err)?;
    Ok(watcher)
}

/// Sends `Stop` on the first SIGINT or SIGTERM. The handlers stay installed after that, so a
/// later signal does not kill the process mid-tick either.
fn stop_on_signals(tx: Sender<Msg>) -> Result<signal_hook::iterator::Handle, WatchError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(WatchError::Signals)?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("coord-signals".to_string())
        .spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(Msg::Stop);
            }
        })
        .map_err(WatchError::Signals)?;
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_ignored_and_task_files_are_not() {
        for noise in [
            "/r/.git/index",
            "/r/work/.git/x",
            "/r/work/inbox/.a.yaml.swp",
            "/r/work/inbox/a.yaml~",
            "/r/work/inbox/4913",
            "/r/work/inbox/.#a.yaml",
            "/r/work/ready/.a.yaml.123.coord-tmp",
        ] {
            assert!(ignored(Path::new(noise)), "{noise}");
        }
        for real in [
            "/r/work/inbox/a.yaml",
            "/r/work/assigned/bob/b.yml",
            "/r/work/inbox",
        ] {
            assert!(!ignored(Path::new(real)), "{real}");
        }
    }

    #[test]
    fn a_burst_is_ticked_one_debounce_after_its_first_event() {
        // The old 150 ms debounce held every drop that long; a few tens of ms gather a rename.
        let debounce = Options::default().debounce;
        assert!(debounce <= Duration::from_millis(50), "{debounce:?}");
        let (tx, rx) = channel();
        let work = Path::new("/r/work");
        let mut said = |_: &str| {};
        let mut events = Events {
            rx,
            work,
            say: &mut said,
            renamed: Renamed::default(),
            burst_at: None,
            debounce,
            stop: false,
            barriers: 0,
        };
        let event = |name: &str| {
            Msg::Fs(Ok(Event::new(EventKind::Create(CreateKind::File))
                .add_path(work.join("inbox").join(name))))
        };
        let before = Instant::now();
        events.take(event("a.yaml"));
        let after = Instant::now();
        let at = events.burst_at.expect("a burst started");
        assert!(before + debounce <= at && at <= after + debounce);
        events.take(event("b.yaml"));
        assert_eq!(
            events.burst_at,
            Some(at),
            "the rest of the burst does not push it back"
        );
        events.burst_at = None;
        events.take(event(".b.yaml.swp"));
        assert_eq!(events.burst_at, None, "noise starts no burst");
        drop(tx);
    }

    #[test]
    fn a_failed_tick_is_retried_without_waiting_for_a_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repo::open_or_init(dir.path()).expect("repo");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).expect("work dir");
        let opts = Options {
            interval: Duration::from_secs(30),
            ..Options::default()
        };
        let mut calls = Vec::new();
        let mut tick = |why: Why, _: &SeenComplete| -> Result<Ticked, TickError> {
            calls.push(why);
            if calls.len() == 1 {
                return Err("the disk hiccupped".into());
            }
            let me = std::process::id().to_string();
            std::process::Command::new("kill")
                .args(["-TERM", &me])
                .status()
                .map_err(|e| Box::new(e) as TickError)?;
            Ok(Ticked::Done(0))
        };
        let mut said = Vec::new();
        let started = std::time::Instant::now();
        let ticks = run(&repo, &work, &opts, &mut tick, &mut |l| {
            said.push(l.to_string())
        })
        .expect("watch runs");
        assert_eq!(ticks, 2);
        assert_eq!(calls, [Why::Start, Why::Retry], "{said:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(said
            .iter()
            .any(|l| l.contains("tick failed: the disk hiccupped")));
    }
}
