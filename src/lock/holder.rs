//! Who holds a lock file, for the messages of a wait that gives up: the processes on this
//! machine that have the file open (found on Linux by reading `/proc/<pid>/fd`; other systems
//! and other users' processes stay unknown), with their command lines, and how long the file
//! has existed unchanged (its mtime).
//!
//! This module does I/O: it reads the lock's metadata and, on Linux, `/proc`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Longest command line shown for a holder, in characters.
const MAX_COMMAND: usize = 80;

/// Most holders named in one message.
const MAX_SHOWN: usize = 3;

/// A process that holds a lock file open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its process id.
    pub pid: u32,
    /// Its command line, arguments separated by spaces; empty when unreadable.
    pub command: String,
}

/// What is known of who holds a lock file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    /// The processes on this machine that have the file open (not this one).
    pub processes: Vec<Process>,
    /// When none has it open: the `git` processes working in the repository the lock belongs
    /// to (git closes some locks while it still works: `git commit` keeps `index.lock`
    /// closed while its editor runs).
    pub git_here: Vec<Process>,
    /// How long ago the file was last written (taken, for git's and coord's locks).
    pub age: Option<Duration>,
}

impl Holder {
    /// Returns what can be found of the holder of `lock`: the processes that have it open and
    /// its age. A lock that no longer exists has no age.
    pub fn of(lock: &Path) -> Holder {
        let age = std::fs::metadata(lock)
            .and_then(|m| m.modified())
            .ok()
            .map(|t| SystemTime::now().duration_since(t).unwrap_or_default());
        let processes = open_by(lock);
        let git_here = match (&processes[..], repo_root_of(lock)) {
            ([], Some(root)) => git_working_in(&root),
            _ => Vec::new(),
        };
        Holder {
            processes,
            git_here,
            age,
        }
    }

    /// Returns the holder of a lock file that stays in place (coord's own), with `pid` (as the
    /// holder wrote it into the file, taking the lock) named first, also when `/proc` does not show it (another user's process, or no `/proc`),
    /// unless `/proc` shows that no such process runs.
    pub fn with_pid(lock: &Path, pid: Option<u32>) -> Holder {
        let mut holder = Holder::of(lock);
        // An OS lock is held only by who has the file open.
        holder.git_here.clear();
        if pid.is_none() {
            // A lock file that stays in place (coord's) gets its mtime from the pid written
            // into it; without one, the mtime says nothing about the holder.
            holder.age = None;
        }
        if let Some(pid) = pid.filter(|&p| may_run(p)) {
            holder.processes.retain(|p| p.pid != pid);
            let command = command_of(pid);
            holder.processes.insert(0, Process { pid, command });
        }
        holder
    }

    /// Returns whether a process on this machine is known to hold the file, open or (a git
    /// working in its repository) closed.
    pub fn is_known(&self) -> bool {
        !self.processes.is_empty() || !self.git_here.is_empty()
    }
}

impl fmt::Display for Holder {
    /// Writes `held by pid 4242 (git gc --auto) for 12s`, or `held by an unknown process (no
    /// process on this machine has it open) for 12s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.processes[..], &self.git_here[..]) {
            ([], []) => {
                f.write_str("held by an unknown process (no process on this machine has it open)")?
            }
            ([], git) => write!(
                f,
                "held, closed, by a git working in this repository: {}",
                named(git)
            )?,
            (open, _) => write!(f, "held by {}", named(open))?,
        }
        match self.age {
            Some(age) => write!(f, " for {}", short(age)),
            None => Ok(()),
        }
    }
}

/// Returns `pid 1 (git gc), pid 2 and 3 more`.
fn named(processes: &[Process]) -> String {
    let shown: Vec<String> = processes
        .iter()
        .take(MAX_SHOWN)
        .map(|p| match p.command.as_str() {
            "" => format!("pid {}", p.pid),
            c => format!("pid {} ({c})", p.pid),
        })
        .collect();
    let more = processes.len().saturating_sub(MAX_SHOWN);
    match more {
        0 => shown.join(", "),
        n => format!("{} and {n} more", shown.join(", ")),
    }
}

/// Returns the work tree of the repository whose `.git` folder holds `lock`.
fn repo_root_of(lock: &Path) -> Option<PathBuf> {
    let git = lock
        .ancestors()
        .find(|a| a.file_name() == Some(".git".as_ref()))?;
    git.parent()?.canonicalize().ok()
}

/// Returns the `git` processes (other than this one) whose working folder is `root` or
/// under it; none where `/proc` cannot be read.
fn git_working_in(root: &Path) -> Vec<Process> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let is_git = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == "git")
    };
    let works_here = |pid: u32| {
        std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(root))
    };
    let mut found: Vec<Process> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id() && is_git(pid) && works_here(pid))
        .map(|pid| Process {
            pid,
            command: command_of(pid),
        })
        .collect();
    found.sort_by_key(|p| p.pid);
    found
}

/// Returns `850ms`, `12s`, `3m 5s` or `2h 1m`.
pub fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, s % 3600 / 60),
    }
}

/// Returns the processes other than this one that have `lock` open, by pid; none where
/// `/proc` cannot be read.
fn open_by(lock: &Path) -> Vec<Process> {
    let Ok(target) = lock.canonicalize() else {
        return Vec::new();
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut found: Vec<Process> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && has_open(pid, &target))
        .map(|pid| Process {
            pid,
            command: command_of(pid),
        })
        .collect();
    found.sort_by_key(|p| p.pid);
    found
}

/// Returns whether process `pid` has a descriptor open on `target` (other users' processes
/// cannot be read and count as not).
fn has_open(pid: u32, target: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == target))
}

/// Returns whether process `pid` may be running: false only when `/proc` is there and does not
/// list it.
fn may_run(pid: u32) -> bool {
    !Path::new("/proc/self").exists() || Path::new(&format!("/proc/{pid}")).exists()
}

/// Returns the command line of `pid` with its arguments joined by spaces and cut to
/// [`MAX_COMMAND`] characters; empty when it cannot be read.
fn command_of(pid: u32) -> String {
    let raw = std::fs::read(PathBuf::from(format!("/proc/{pid}/cmdline"))).unwrap_or_default();
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let line = words.join(" ");
    if line.chars().count() <= MAX_COMMAND {
        return line;
    }
    let cut: String = line.chars().take(MAX_COMMAND).collect();
    format!("{cut}…")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short_and_readable() {
        assert_eq!(short(Duration::from_millis(850)), "850ms");
        assert_eq!(short(Duration::from_secs(12)), "12s");
        assert_eq!(short(Duration::from_secs(185)), "3m 5s");
        assert_eq!(short(Duration::from_secs(7260)), "2h 1m");
    }

    #[test]
    fn an_unknown_holder_says_so_with_the_age() {
        let h = Holder {
            processes: Vec::new(),
            git_here: Vec::new(),
            age: Some(Duration::from_secs(12)),
        };
        assert_eq!(
            h.to_string(),
            "held by an unknown process (no process on this machine has it open) for 12s"
        );
    }

    #[test]
    fn holders_are_named_by_pid_and_command() {
        let p = |pid, c: &str| Process {
            pid,
            command: c.to_string(),
        };
        let h = Holder {
            processes: vec![p(1, "git gc"), p(2, ""), p(3, "a"), p(4, "b")],
            git_here: vec![p(5, "git commit")],
            age: None,
        };
        assert_eq!(
            h.to_string(),
            "held by pid 1 (git gc), pid 2, pid 3 (a) and 1 more"
        );
        let closed = Holder {
            processes: Vec::new(),
            ..h
        };
        assert_eq!(
            closed.to_string(),
            "held, closed, by a git working in this repository: pid 5 (git commit)"
        );
    }

    /// Returns `Holder::of(lock)` once `settled` holds of it, or after two seconds: a child
    /// is spawned before the kernel has written its new command line into `/proc`.
    pub(super) fn once_exec_done(lock: &Path, settled: impl Fn(&Holder) -> bool) -> Holder {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            let holder = Holder::of(lock);
            if settled(&holder) || std::time::Instant::now() > deadline {
                return holder;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_holding_the_file_open_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("index.lock");
        let file = std::fs::File::create(&lock).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdout(file)
            .spawn()
            .unwrap();
        let holder = once_exec_done(&lock, |h| h.processes.iter().all(|p| !p.command.is_empty()));
        child.kill().unwrap();
        child.wait().unwrap();
        let found = &holder.processes;
        assert_eq!(found.len(), 1, "{holder:?}");
        assert_eq!(found[0].pid, child.id());
        assert_eq!(found[0].command, "sleep 30");
        assert!(holder.age.is_some());
        assert!(!Holder::of(&lock).is_known(), "the child is gone");
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod git_tests {
    use super::*;

    #[test]
    fn a_git_working_in_the_repository_is_found_when_none_has_the_lock_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let lock = dir.path().join(".git/index.lock");
        std::fs::write(&lock, "").unwrap();
        assert!(!Holder::of(&lock).is_known());
        // `git hash-object --stdin` waits for its input: a git at work in the folder.
        let mut git = std::process::Command::new("git")
            .args(["hash-object", "--stdin"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let holder = super::tests::once_exec_done(&lock, |h| {
            h.git_here.iter().all(|p| !p.command.is_empty()) && !h.git_here.is_empty()
        });
        drop(git.stdin.take());
        git.wait().unwrap();
        assert!(holder.processes.is_empty(), "{holder:?}");
        assert_eq!(holder.git_here.len(), 1, "{holder:?}");
        assert_eq!(holder.git_here[0].pid, git.id());
        assert_eq!(holder.git_here[0].command, "git hash-object --stdin");
    }
}
