//! The durable record of each command `coord run` starts, in
//! `.git/coord/run/<agent>/<task>@<attempt>.json`: written (atomically, fsynced) before the
//! command starts, again with its pid, start time and process group once it runs, and removed
//! once its end is reported. While the command is its runner's, the runner holds a lock on the
//! record's `.lock` file; the kernel lets it go when the runner dies, so a record whose lock can
//! be taken is an orphan: its runner is gone, and the next runner ends what is left of that
//! attempt, removes its worktree, and reports it before it runs anything else.

use super::procs::Attempt;
use crate::fsx::write_private;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// What a record says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    /// The task.
    pub task: String,
    /// The attempt.
    pub attempt: u32,
    /// The epoch of the hub that granted the attempt, when a hub did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// The run id given to the command (`COORD_RUN_ID`).
    pub run_id: String,
    /// The runner's pid.
    pub runner: u32,
    /// The command's pid, which is also its process group, once it started.
    pub pid: Option<i32>,
    /// The command's start time (clock ticks since boot), once it started.
    pub start: Option<u64>,
    /// The attempt's worktree, when it runs in one: removed with the attempt.
    #[serde(default)]
    pub worktree: Option<PathBuf>,
}

impl Record {
    /// Returns what identifies the attempt's processes.
    pub fn attempt(&self) -> Attempt {
        Attempt {
            pgid: self.pid,
            start: self.start,
            run_id: self.run_id.clone(),
        }
    }
}

/// A record this process holds the lock of.
#[derive(Debug)]
pub struct Held {
    path: PathBuf,
    lock_path: PathBuf,
    _lock: File,
    /// What it says.
    pub record: Record,
}

/// Returns the folder of `agent`'s records.
pub fn folder(git_dir: &Path, agent: &str) -> PathBuf {
    git_dir.join("coord").join("run").join(agent)
}

impl Held {
    /// Takes the lock and writes the record of a command about to start.
    pub fn create(dir: &Path, record: Record) -> io::Result<Held> {
        std::fs::create_dir_all(dir)?;
        let stem = format!("{}@{}", record.task, record.attempt);
        let lock_path = dir.join(format!("{stem}.lock"));
        let lock = lock_file(&lock_path)?;
        lock.lock()?;
        let held = Held {
            path: dir.join(format!("{stem}.json")),
            lock_path,
            _lock: lock,
            record,
        };
        held.write()?;
        Ok(held)
    }

    /// Records that the command runs as `pid`, started at `start` (None: it ended before
    /// its start time could be read).
    pub fn started(&mut self, pid: i32, start: Option<u64>) -> io::Result<()> {
        self.record.pid = Some(pid);
        self.record.start = start;
        self.write()
    }

    fn write(&self) -> io::Result<()> {
        let bytes = serde_json::to_vec(&self.record).map_err(io::Error::other)?;
        write_private(&self.path, &bytes, true)
    }

    /// Removes the record: its attempt is over and reported (or given up).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

/// Returns the records in `dir` whose runner is gone, each now held by this process.
pub fn orphans(dir: &Path) -> Vec<Held> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.strip_suffix(".json")?.to_string();
            take_orphan(dir, &name)
        })
        .collect()
}

/// Takes the record `<stem>.json` when its lock is free and it still exists.
fn take_orphan(dir: &Path, stem: &str) -> Option<Held> {
    let lock_path = dir.join(format!("{stem}.lock"));
    let lock = lock_file(&lock_path).ok()?;
    lock.try_lock().ok()?;
    let path = dir.join(format!("{stem}.json"));
    // Read once the lock is ours: a runner that just finished removed it.
    let bytes = crate::fsx::read_private(&path).ok()?;
    let record = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(_) => {
            // Unreadable (cut short by a crash before any command started): nothing to end.
            let _ = std::fs::remove_file(&path);
            return None;
        }
    };
    Some(Held {
        path,
        lock_path,
        _lock: lock,
        record,
    })
}

/// Returns whether a runner holds the record `<stem>.json` of any agent's in the clone whose
/// git folder is `git_dir`: the record is there and its lock is taken.
pub fn live(git_dir: &Path, stem: &str) -> bool {
    let Ok(agents) = std::fs::read_dir(git_dir.join("coord").join("run")) else {
        return false;
    };
    agents.flatten().any(|a| {
        let dir = a.path();
        if !dir.join(format!("{stem}.json")).is_file() {
            return false;
        }
        let Ok(lock) = File::open(dir.join(format!("{stem}.lock"))) else {
            return false;
        };
        matches!(lock.try_lock(), Err(std::fs::TryLockError::WouldBlock))
    })
}

fn lock_file(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}
