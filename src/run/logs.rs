//! The logs of the attempts `coord run` runs, a pair of files per attempt in
//! `.git/coord/logs/`: `<task>@<attempt>.stdout` and `<task>@<attempt>.stderr`. They are
//! written while the command runs (`coord logs --follow` reads them as they grow), each at most
//! [`LOG_MAX`] bytes: the first ones of stdout, the last ones of stderr (rewritten once the
//! command ended). Rotated when an attempt ends: a task keeps the logs of its last
//! [`KEEP_PER_TASK`] attempts, and the folder holds at most [`BUDGET`] bytes, the oldest files
//! removed first.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The most bytes kept of one stream of one attempt.
pub const LOG_MAX: usize = 64 * 1024;

/// How many of a task's attempts keep their logs.
pub const KEEP_PER_TASK: usize = 3;

/// The most bytes the logs of a clone take.
pub const BUDGET: u64 = 64 * 1024 * 1024;

/// One of a command's output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Its stdout.
    Stdout,
    /// Its stderr.
    Stderr,
}

impl Stream {
    /// Both streams, stdout first.
    pub const BOTH: [Stream; 2] = [Stream::Stdout, Stream::Stderr];

    /// Returns its name, also the log file's extension.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Returns the folder of the logs of the clone whose git folder is `git_dir`.
pub fn folder(git_dir: &Path) -> PathBuf {
    git_dir.join("coord").join("logs")
}

/// Returns the log file of `stream` of `task`'s `attempt` in `dir`.
pub fn path(dir: &Path, task: &str, attempt: u32, stream: Stream) -> PathBuf {
    dir.join(format!("{task}@{attempt}.{}", stream.as_str()))
}

/// Returns the attempts of `task` that have a log in `dir`, oldest first.
pub fn attempts(dir: &Path, task: &str) -> Vec<u32> {
    let mut found: Vec<u32> = entries(dir)
        .into_iter()
        .filter(|e| e.task == task)
        .map(|e| e.attempt)
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// Returns whether `task`'s `attempt` is running now: a runner holds its record.
pub fn running(git_dir: &Path, task: &str, attempt: u32) -> bool {
    super::record::live(git_dir, &format!("{task}@{attempt}"))
}

/// One log file.
struct Entry {
    path: PathBuf,
    task: String,
    attempt: u32,
    len: u64,
    modified: SystemTime,
}

/// Returns the log files in `dir` (not the temporary files of a write under way).
fn entries(dir: &Path) -> Vec<Entry> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let stem = Stream::BOTH
                .iter()
                .find_map(|s| name.strip_suffix(&format!(".{}", s.as_str())))?;
            let (task, attempt) = stem.rsplit_once('@')?;
            if task.starts_with('.') {
                return None;
            }
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            Some(Entry {
                path: e.path(),
                task: task.to_string(),
                attempt: attempt.parse().ok()?,
                len: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            })
        })
        .collect()
}

/// Removes the logs rotation drops, once an attempt of `task` ended: the task's attempts
/// before its last [`KEEP_PER_TASK`], then the oldest files while the folder holds more than
/// `budget` bytes. Returns how many files it removed.
pub fn rotate(dir: &Path, task: &str, budget: u64) -> usize {
    let first_kept = attempts(dir, task)
        .iter()
        .rev()
        .nth(KEEP_PER_TASK - 1)
        .copied();
    let mut removed = 0;
    let mut left = Vec::new();
    for e in entries(dir) {
        let dropped = e.task == task && first_kept.is_some_and(|k| e.attempt < k);
        if !dropped {
            left.push(e);
        } else if std::fs::remove_file(&e.path).is_ok() {
            removed += 1;
        }
    }
    left.sort_by_key(|e| std::cmp::Reverse(e.modified));
    let mut total = 0;
    for e in left {
        total += e.len;
        if total > budget && std::fs::remove_file(&e.path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, task: &str, attempt: u32, bytes: usize) {
        for s in Stream::BOTH {
            std::fs::write(path(dir, task, attempt, s), vec![b'x'; bytes]).expect("write");
        }
    }

    #[test]
    fn a_task_keeps_its_last_attempts_and_others_are_untouched() {
        let dir = tempfile::tempdir().expect("tmp");
        for attempt in 1..=5 {
            write(dir.path(), "a.b", attempt, 10);
        }
        write(dir.path(), "other", 1, 10);
        std::fs::write(dir.path().join(".a.b@9.stdout.123.tmp"), "x").expect("temp");
        assert_eq!(rotate(dir.path(), "a.b", BUDGET), 4);
        assert_eq!(attempts(dir.path(), "a.b"), vec![3, 4, 5]);
        assert_eq!(attempts(dir.path(), "other"), vec![1]);
    }

    #[test]
    fn the_oldest_files_go_when_the_folder_is_over_its_budget() {
        let dir = tempfile::tempdir().expect("tmp");
        for (n, task) in ["old", "mid", "new"].iter().enumerate() {
            write(dir.path(), task, 1, 100);
            let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 * n as u64);
            for s in Stream::BOTH {
                let f = std::fs::File::options()
                    .write(true)
                    .open(path(dir.path(), task, 1, s))
                    .expect("open");
                f.set_modified(when).expect("mtime");
            }
        }
        assert_eq!(rotate(dir.path(), "new", 450), 2);
        assert!(attempts(dir.path(), "old").is_empty());
        assert_eq!(attempts(dir.path(), "mid"), vec![1]);
        assert_eq!(attempts(dir.path(), "new"), vec![1]);
    }
}
