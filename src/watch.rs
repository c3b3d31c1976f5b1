//! `coord watch`: a tick after every burst of changes under `work/` and every interval, until
//! SIGINT or SIGTERM.
//!
//! Events come from notify (inotify, FSEvents, ...; or polling with `--poll` for NFS, WSL and
//! exhausted inotify limits) through notify-debouncer-full, which merges a burst into one batch.
//! Events are only a hint: a batch that touches a relevant path wakes the loop, and the tick
//! rescans `work/` and reconciles, whatever the event kinds said. Reads (`Access` events, which
//! the tick's own reading causes), `.git`, editor temp files and coord's own temp files are
//! ignored. Two kinds of event say more: a writer closing a file it wrote marks it complete as
//! of then, and a rename passes that on to the new name (a temp file written, closed and
//! renamed in), so the settle rule reads such files at once (SPEC 3.12); and when a tick
//! leaves a file unread because it is still being written, the loop ticks again as soon as
//! it settles. coord's own writes cannot loop: a batch is skipped when HEAD is where the last
//! tick that changed nothing left it and `work/` has no uncommitted change, and a tick is
//! idempotent, so after a tick that made commits at most one more (empty) tick follows.
//! A signal lets the current tick finish; then `run` returns.

use crate::git::{GitError, Oid, Repo};
use crate::store::fsutil::TEMP_SUFFIX;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, PollWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer, new_debouncer_opt, DebounceEventResult, NoCache};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime};

/// Files seen closed by their writer or renamed in (absolute paths), and when.
pub type SeenComplete = HashMap<PathBuf, SystemTime>;

/// How long a file stays marked complete: by then its mtime alone says it settled.
const SEEN_FOR: Duration = Duration::from_secs(600);

/// How `coord watch` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Time between periodic ticks (leases, backoff).
    pub interval: Duration,
    /// Poll the file system instead of using its change events.
    pub poll: bool,
    /// How long a burst of events must be quiet before the tick.
    pub debounce: Duration,
    /// How often `--poll` scans.
    pub poll_every: Duration,
}

impl Default for Options {
    /// Returns a 60 s interval, native events, a 20 ms debounce, 500 ms polls.
    ///
    /// The debouncer holds each event until it is `debounce` old (merging repeats of one kind
    /// on one path meanwhile), so the debounce is a floor under every drop-to-commit latency.
    /// It need not wait out a writer: the settle rule keeps a file that is still being written
    /// unread, whenever the tick runs. 20 ms still pairs the halves of a rename and merges an
    /// editor's save into one batch.
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
    #[error("cannot watch {}: {source}; try --poll (for NFS, WSL or when inotify limits are reached)", path.display())]
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

/// A boxed error from the tick.
pub type TickError = Box<dyn std::error::Error + Send + Sync>;

/// How long to wait before retrying a tick that failed or found the lock held.
const BUSY_RETRY: Duration = Duration::from_secs(1);

enum Msg {
    Fs(DebounceEventResult),
    Stop,
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
    let prefix = work_prefix(repo, work);
    let mut settled: Option<Option<Oid>> = None;
    let mut ticks = 0;
    let mut next_interval = Instant::now() + opts.interval;
    let mut retry_at: Option<Instant> = None;
    let mut settle_at: Option<Instant> = None;
    let mut seen = SeenComplete::new();
    let mut why = Some(Why::Start);
    loop {
        if let Some(w) = why.take() {
            ticks += 1;
            retry_at = None;
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
                    say(&format!("coord: tick failed: {}", chain(&*e)));
                    retry_at = Some(Instant::now() + BUSY_RETRY);
                }
            }
            if w == Why::Interval {
                next_interval = Instant::now() + opts.interval;
            }
            let now = SystemTime::now();
            seen.retain(|_, at| now.duration_since(*at).is_ok_and(|age| age < SEEN_FOR));
        }
        let deadline = [retry_at, settle_at]
            .into_iter()
            .flatten()
            .fold(next_interval, Instant::min);
        let timeout = deadline.saturating_duration_since(Instant::now());
        let mut changed = false;
        match rx.recv_timeout(timeout) {
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Ok(Msg::Fs(batch)) => changed |= relevant(batch, say, &mut seen),
            Err(RecvTimeoutError::Timeout) => {}
        }
        let mut stop = false;
        for msg in rx.try_iter() {
            match msg {
                Msg::Stop => stop = true,
                Msg::Fs(batch) => changed |= relevant(batch, say, &mut seen),
            }
        }
        if stop {
            break;
        }
        let now = Instant::now();
        why = if now >= next_interval {
            Some(Why::Interval)
        } else if retry_at.is_some_and(|r| now >= r) {
            Some(Why::Retry)
        } else if settle_at.is_some_and(|r| now >= r) {
            Some(Why::Settled)
        } else if changed && !is_settled(repo, &prefix, settled) {
            Some(Why::Changed)
        } else {
            None
        };
    }
    signals.close();
    watcher.stop();
    Ok(ticks)
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

/// Returns whether a batch holds an event worth a tick, and notes in `seen` the files it
/// shows closed by their writer or renamed in; reports watcher errors.
fn relevant(
    batch: DebounceEventResult,
    say: &mut dyn FnMut(&str),
    seen: &mut SeenComplete,
) -> bool {
    match batch {
        Ok(events) => {
            let mut any = false;
            for e in &events {
                let complete = marks_complete(&e.kind);
                match (&e.kind, &e.paths[..]) {
                    (EventKind::Access(_), [.., p]) if complete && !ignored(p) => {
                        let at = SystemTime::now().checked_sub(e.time.elapsed());
                        seen.insert(p.clone(), at.unwrap_or_else(SystemTime::now));
                    }
                    (EventKind::Modify(_), [from, to]) if complete => {
                        if let Some(at) = seen.remove(from) {
                            seen.insert(to.clone(), at);
                        }
                    }
                    _ => {}
                }
                any |= (complete || !matches!(e.kind, EventKind::Access(_)))
                    && e.paths.iter().any(|p| !ignored(p));
            }
            any
        }
        Err(errors) => {
            for e in errors {
                say(&format!("coord: watch error: {e}"));
            }
            true
        }
    }
}

/// Returns whether an event can show a path complete: a writer closing it (stamped when the
/// event came in; opening it again to write moves its mtime past that), or a rename, which
/// passes on to the new name what was known of the old (a temp file closed, then renamed in).
/// A file renamed in long after it was written is complete by its ctime anyway.
fn marks_complete(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Access(AccessKind::Close(AccessMode::Write))
            | EventKind::Modify(ModifyKind::Name(RenameMode::Both))
    )
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

type NativeDebouncer = notify_debouncer_full::Debouncer<
    notify::RecommendedWatcher,
    notify_debouncer_full::RecommendedCache,
>;

/// A running watcher of either kind.
enum Watcher {
    Native(NativeDebouncer),
    Poll(notify_debouncer_full::Debouncer<PollWatcher, NoCache>),
}

impl Watcher {
    /// Stops watching and waits for the debouncer's thread.
    fn stop(self) {
        match self {
            Watcher::Native(d) => d.stop(),
            Watcher::Poll(d) => d.stop(),
        }
    }
}

fn start_watcher(work: &Path, opts: &Options, tx: Sender<Msg>) -> Result<Watcher, WatchError> {
    let err = |source| WatchError::Notify {
        path: work.to_path_buf(),
        source,
    };
    let handler = move |batch: DebounceEventResult| {
        let _ = tx.send(Msg::Fs(batch));
    };
    if opts.poll {
        let config = notify::Config::default().with_poll_interval(opts.poll_every);
        let mut d = new_debouncer_opt::<_, PollWatcher, NoCache>(
            opts.debounce,
            None,
            handler,
            NoCache,
            config,
        )
        .map_err(err)?;
        d.watch(work, RecursiveMode::Recursive).map_err(err)?;
        Ok(Watcher::Poll(d))
    } else {
        let mut d = new_debouncer(opts.debounce, None, handler).map_err(err)?;
        d.watch(work, RecursiveMode::Recursive).map_err(err)?;
        Ok(Watcher::Native(d))
    }
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
