//! Waiting out git's own lock files (`refs/heads/<branch>.lock`, `index.lock`): another git
//! process (a person's commit, a background gc or fetch) holds them for a moment, so an
//! operation that finds one held is tried again for a bounded time, with jitter, before coord
//! gives up and names the file and its holder. Does no I/O itself beyond sleeping and asking
//! [`Holder`] who holds the lock.

use super::GitError;
use crate::lock::Holder;
use git2::ErrorCode;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long coord waits for a git lock before it gives up.
pub(super) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Runs `op` until it does not fail for a held lock, or `wait` has passed; then returns
/// [`GitError::Locked`] naming `lock`. Other errors are returned at once.
pub(super) fn retry_locked<T>(
    lock: &Path,
    wait: Duration,
    mut op: impl FnMut() -> Result<T, git2::Error>,
) -> Result<Result<T, git2::Error>, GitError> {
    let start = Instant::now();
    loop {
        match op() {
            Err(e) if e.code() == ErrorCode::Locked => {
                if start.elapsed() >= wait {
                    return Err(GitError::Locked {
                        lock: lock.to_path_buf(),
                        holder: Box::new(Holder::of(lock)),
                        waited: start.elapsed().as_secs_f64(),
                        source: e,
                    });
                }
                std::thread::sleep(jitter());
            }
            other => return Ok(other),
        }
    }
}

/// Returns a pause of 20 to 80 ms, different between processes and attempts, so several
/// waiters do not retry in step.
fn jitter() -> Duration {
    Duration::from_millis(20 + getrandom::u64().unwrap_or(0) % 61)
}

/// Returns what to do about a git lock that stayed held: wait for the process that holds it,
/// or, when none on this machine has it open, remove the file if no git command is running
/// (git keeps some locks while closed, e.g. `index.lock` during `git commit`'s editor).
pub(super) fn fix(holder: &Holder) -> &'static str {
    if !holder.processes.is_empty() {
        "run coord again when that process is done"
    } else if holder.is_known() {
        "run coord again when that git is done (a commit may be waiting for its editor)"
    } else {
        "if no git command is running (a commit waiting for its editor counts), remove the file and run coord again"
    }
}
