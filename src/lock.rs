//! The coordinator lock: one tick at a time per clone, through an OS file lock on
//! `<git_dir>/coord.lock` that records the holder's pid.
//!
//! This module does I/O: it creates, locks and writes that file. The kernel releases the lock
//! when the holder exits, however it exits, so a crashed coordinator never blocks the next one.

pub mod holder;

pub use holder::Holder;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long to sleep between attempts while waiting for the lock.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// How long a wait goes on before it is reported: shorter waits (an agent command between two
/// ticks of `coord watch`) are routine.
const SAY_AFTER: Duration = Duration::from_secs(1);

/// Errors from taking the coordinator lock.
#[derive(thiserror::Error, Debug)]
pub enum LockError {
    /// Another coordinator held the lock for the whole wait.
    #[error("{} is {holder}: another coordinator is running; wait for it or pass --wait 30s", path.display())]
    Held {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, as far as can be found (boxed: errors stay small).
        holder: Box<Holder>,
    },
    /// The lock file could not be opened, locked or written.
    #[error("cannot lock {}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the OS reported.
        #[source]
        source: io::Error,
    },
}

impl LockError {
    /// Returns `Held` for the lock file at `path`, naming its holder: the pid written in the
    /// file (when that process runs) and the processes that have the file open.
    pub fn held(path: PathBuf) -> LockError {
        let holder = Box::new(Holder::with_pid(&path, read_pid(&path)));
        LockError::Held { path, holder }
    }
}

/// The held coordinator lock; dropping it releases the lock.
#[derive(Debug)]
pub struct CoordLock {
    file: File,
    path: PathBuf,
    previous_killed: bool,
}

impl CoordLock {
    /// Returns the path of the lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns whether the previous holder ended without releasing the lock cleanly (killed,
    /// crashed): it left its pid in the file, which a clean holder empties.
    pub fn previous_killed(&self) -> bool {
        self.previous_killed
    }
}

impl Drop for CoordLock {
    /// Empties the pid before the lock goes (closing the file releases it), so a later reader
    /// does not name a coordinator that has finished.
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// Takes the exclusive lock on `<git_dir>/coord.lock` and writes our pid into it, retrying every
/// 50 ms while another coordinator holds it. Returns `Held` (naming the holder) once `wait`
/// has passed; a zero `wait` tries once.
pub fn acquire(git_dir: &Path, wait: Duration) -> Result<CoordLock, LockError> {
    acquire_saying(git_dir, wait, &mut |_| {})
}

/// Takes the lock as [`acquire`] does, and when the wait goes on for a second, passes `say`
/// one line naming the lock, its holder and how long it waits in all.
pub fn acquire_saying(
    git_dir: &Path,
    wait: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<CoordLock, LockError> {
    let path = git_dir.join("coord.lock");
    let io_err = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    // No truncate on open: the file holds the current holder's pid until we own the lock.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err)?;
    let start = Instant::now();
    let deadline = start + wait;
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(LockError::held(path));
                }
                if !said && start.elapsed() >= SAY_AFTER {
                    said = true;
                    let holder = Holder::with_pid(&path, read_pid(&path));
                    say(&format!(
                        "waiting for {} (up to {} in all): {holder}",
                        path.display(),
                        holder::short(wait),
                    ));
                }
                std::thread::sleep(left.min(RETRY_EVERY));
            }
            Err(TryLockError::Error(source)) => return Err(io_err(source)),
        }
    }
    let previous_killed = read_pid(&path).is_some();
    write_pid(&file).map_err(io_err)?;
    Ok(CoordLock {
        file,
        path,
        previous_killed,
    })
}

/// Returns whether a coordinator is writing in the repository of `git_dir` right now, without
/// taking the lock (the server's file watcher waits for a consistent `work/` this way without
/// delaying a writer): the holder's pid is in the lock file, written within `fresh` (a
/// killed holder's pid stays behind until the next coordinator).
pub fn busy(git_dir: &Path, fresh: Duration) -> bool {
    let path = git_dir.join("coord.lock");
    std::fs::metadata(&path).is_ok_and(|m| {
        m.len() > 0
            && m.modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age < fresh)
    })
}

fn write_pid(mut file: &File) -> io::Result<()> {
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    file.flush()
}

/// Returns the pid written in the lock file, or None when it is empty, garbled or unreadable
/// (Windows locks are mandatory, so there it cannot be read while held).
fn read_pid(path: &Path) -> Option<u32> {
    crate::fsx::read_private_text(path)
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_is_held_with_our_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path(), Duration::ZERO).unwrap();
        let err = acquire(dir.path(), Duration::ZERO).unwrap_err();
        let LockError::Held { path, holder } = &err else {
            panic!("expected Held, got {err:?}");
        };
        assert_eq!(path, first.path());
        assert_eq!(holder.processes[0].pid, std::process::id());
        assert!(holder.age.is_some());
        let message = err.to_string();
        assert!(
            message.contains(&format!(
                "coord.lock is held by pid {} (",
                std::process::id()
            )),
            "{message}"
        );
        assert!(
            message.contains("another coordinator is running; wait for it or pass --wait"),
            "{message}"
        );
    }

    #[test]
    fn busy_while_held_and_not_after() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!busy(dir.path(), Duration::from_secs(10)));
        let held = acquire(dir.path(), Duration::ZERO).unwrap();
        assert!(busy(dir.path(), Duration::from_secs(10)));
        assert!(!busy(dir.path(), Duration::ZERO));
        drop(held);
        assert!(!busy(dir.path(), Duration::from_secs(10)));
    }

    #[test]
    fn acquire_succeeds_after_drop() {
        let dir = tempfile::tempdir().unwrap();
        drop(acquire(dir.path(), Duration::ZERO).unwrap());
        let again = acquire(dir.path(), Duration::ZERO).unwrap();
        let written = std::fs::read_to_string(again.path()).unwrap();
        assert_eq!(written, std::process::id().to_string());
    }

    #[test]
    fn wait_retries_until_another_thread_releases() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path(), Duration::ZERO).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(held);
        });
        let start = Instant::now();
        let lock = acquire(dir.path(), Duration::from_secs(10));
        releaser.join().unwrap();
        assert!(lock.is_ok(), "{lock:?}");
        assert!(start.elapsed() >= Duration::from_millis(150));
    }

    #[test]
    fn wait_gives_up_after_the_deadline_having_said_who_it_waits_for() {
        let dir = tempfile::tempdir().unwrap();
        let _held = acquire(dir.path(), Duration::ZERO).unwrap();
        let start = Instant::now();
        let mut said = Vec::new();
        let err = acquire_saying(dir.path(), Duration::from_millis(1300), &mut |l| {
            said.push(l.to_string())
        })
        .unwrap_err();
        assert_eq!(said.len(), 1, "{said:?}");
        let me = format!(
            "coord.lock (up to 1s in all): held by pid {}",
            std::process::id()
        );
        assert!(said[0].starts_with("waiting for "), "{said:?}");
        assert!(said[0].contains(&me), "{said:?}");
        assert!(matches!(err, LockError::Held { .. }), "{err:?}");
        assert!(start.elapsed() >= Duration::from_millis(1300));
    }

    #[test]
    fn missing_git_dir_is_an_io_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = acquire(&dir.path().join("nope"), Duration::ZERO).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("nope/coord.lock"), "{err}");
    }
}
