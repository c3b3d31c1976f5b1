//! The processes of one attempt, as /proc shows them: those of the command's process group,
//! and those that carry the attempt's run id (`COORD_RUN_ID`) in their environment, which a
//! child that left the group (`setsid cmd &`) still does. Ending an attempt ends them all:
//! SIGTERM, a grace, then SIGKILL. Linux only, as the rest of the runner.

use rustix::process::{kill_process, Pid, Signal};
use std::time::{Duration, Instant};

/// The environment variable naming the attempt a process belongs to.
pub const RUN_ID_VAR: &str = "COORD_RUN_ID";

/// How often the ending of processes is checked.
const POLL: Duration = Duration::from_millis(20);

/// What identifies one attempt's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The command's process group (its pid), once it started.
    pub pgid: Option<i32>,
    /// The command's start time (clock ticks since boot), once it started.
    pub start: Option<u64>,
    /// The run id given to the command in its environment.
    pub run_id: String,
}

/// What /proc/<pid>/stat says of a process that has not ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its process group.
    pub pgrp: i32,
    /// When it started, in clock ticks since boot.
    pub start: u64,
}

/// Returns what /proc says of `pid`: None when it is gone or has ended (a zombie).
pub fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let (_, rest) = text.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 3 (state), 5 (pgrp) and 22 (starttime) of proc(5), counted from `state`.
    if fields.first()?.starts_with(['Z', 'X']) {
        return None;
    }
    Some(Stat {
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

impl Attempt {
    /// Returns the pids of the attempt's processes that have not ended.
    pub fn members(&self) -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let me = std::process::id() as i32;
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me && self.owns(pid))
            .collect()
    }

    /// Returns whether `pid` is one of the attempt's: in its group (started no earlier than
    /// the command, so a reused group id is not taken for it) or carrying its run id.
    fn owns(&self, pid: i32) -> bool {
        let Some(s) = stat(pid) else {
            return false;
        };
        let in_group = self.pgid == Some(s.pgrp) && self.start.is_none_or(|t| s.start >= t);
        in_group || self.carries_id(pid)
    }

    fn carries_id(&self, pid: i32) -> bool {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let want = format!("{RUN_ID_VAR}={}", self.run_id);
        env.split(|&b| b == 0).any(|v| v == want.as_bytes())
    }

    /// Ends the attempt's processes: SIGTERM, up to `grace` for them to end, then SIGKILL.
    /// Returns how many there were.
    pub fn end(&self, grace: Duration) -> usize {
        let first = self.members();
        if first.is_empty() {
            return 0;
        }
        signal_all(&first, Signal::TERM);
        let until = Instant::now() + grace;
        let mut left = self.members();
        while !left.is_empty() && Instant::now() < until {
            std::thread::sleep(POLL);
            left = self.members();
        }
        // Anything started meanwhile is among the members now.
        signal_all(&left, Signal::KILL);
        let until = Instant::now() + Duration::from_secs(1);
        while !self.members().is_empty() && Instant::now() < until {
            std::thread::sleep(POLL);
        }
        first.len()
    }
}

fn signal_all(pids: &[i32], signal: Signal) {
    for pid in pids.iter().filter_map(|&p| Pid::from_raw(p)) {
        let _ = kill_process(pid, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_running_and_a_made_up_pid_as_gone() {
        let me = stat(std::process::id() as i32).expect("running");
        assert!(me.start > 0);
        assert_eq!(stat(i32::MAX), None);
    }
}
