//! Counters every coord process of a clone adds to, for `coord serve`'s `/metrics`: the ticks
//! run (a `coord tick` in a shell, `coord watch`, a sync's tick, `coord serve --tick`) with
//! their total and last duration, and the pushes the remote rejected (stale: it moved on;
//! refused: a hook or a protected branch), and when the latest pushes were made (for the push
//! budget `coord status` warns near), and when an agent's step last won a push race that other
//! clones ran too (so that its next step lets them go first). Kept in `.git/coord/stats` as `name value` lines;
//! each update is a read, change and atomic rewrite under an exclusive lock of
//! `.git/coord/stats.lock`, so concurrent processes lose no count. Best effort: a failure
//! only means one count is missed. Does file I/O under `.git/coord/` only.

use crate::fsx::write_private;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

/// The counters file, relative to the git directory.
const PATH: &str = "coord/stats";
/// The lock taken around an update, relative to the git directory.
const LOCK: &str = "coord/stats.lock";
/// The first line of the file.
const MAGIC: &str = "coord stats 1";

/// What the processes of this clone counted since the file was made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Ticks run.
    pub ticks: u64,
    /// Seconds those ticks took in all.
    pub tick_seconds: f64,
    /// Seconds the last tick took.
    pub last_tick_seconds: f64,
    /// Pushes rejected because the remote had moved on (the push is retried after a fetch).
    pub pushes_stale: u64,
    /// Pushes the remote refused (a hook, a protected branch).
    pub pushes_refused: u64,
    /// When the latest pushes were made, landed or rejected (seconds since the epoch, oldest
    /// first, at most [`PUSH_TIMES_KEPT`]).
    pub push_times: Vec<i64>,
    /// When an agent's step last landed a push while other clones' pushes were landing too
    /// (milliseconds since the epoch, the system clock), and how long its last attempt took.
    pub race_won: Option<RaceWon>,
}

/// A push race an agent's step won: when, and how long the winning attempt took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RaceWon {
    /// When it landed (milliseconds since the epoch, the system clock).
    pub at_ms: u64,
    /// How long its attempt took, fetch to push (milliseconds).
    pub round_ms: u64,
}

/// How many push instants the file keeps: a budget's window of 10 minutes at 6 a minute.
pub const PUSH_TIMES_KEPT: usize = 64;

/// Why the remote rejected a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The remote had moved on.
    Stale,
    /// A hook or a protected branch refused it.
    Refused,
}

impl Stats {
    /// Reads the counters of the clone whose git directory is `git_dir`; zeros when there are
    /// none yet (or the file does not read).
    pub fn read(git_dir: &Path) -> Stats {
        crate::fsx::read_private_text(&git_dir.join(PATH))
            .map(|text| decode(&text))
            .unwrap_or_default()
    }

    /// Counts a tick that took `took`.
    pub fn record_tick(git_dir: &Path, took: Duration) {
        update(git_dir, |s| {
            s.ticks += 1;
            s.tick_seconds += took.as_secs_f64();
            s.last_tick_seconds = took.as_secs_f64();
        });
    }

    /// Notes a push made at `at` (seconds since the epoch), whatever the remote answered.
    pub fn record_push(git_dir: &Path, at: i64) {
        update(git_dir, |s| {
            s.push_times.push(at);
            let extra = s.push_times.len().saturating_sub(PUSH_TIMES_KEPT);
            s.push_times.drain(..extra);
        });
    }

    /// The pushes made from `since` on (seconds since the epoch).
    pub fn pushes_since(&self, since: i64) -> usize {
        self.push_times.iter().filter(|&&t| t >= since).count()
    }

    /// Notes a push race an agent's step won.
    pub fn record_race_won(git_dir: &Path, won: RaceWon) {
        update(git_dir, |s| s.race_won = Some(won));
    }

    /// Counts a push the remote rejected.
    pub fn record_rejection(git_dir: &Path, why: Rejection) {
        update(git_dir, |s| match why {
            Rejection::Stale => s.pushes_stale += 1,
            Rejection::Refused => s.pushes_refused += 1,
        });
    }
}

/// Reads, changes and rewrites the counters under the lock; gives up silently.
fn update(git_dir: &Path, change: impl FnOnce(&mut Stats)) {
    let lock = git_dir.join(LOCK);
    let _ = std::fs::create_dir_all(git_dir.join("coord"));
    // Never blocks on a FIFO put in its place (no reader: the open fails).
    let Ok(file) = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&lock)
    else {
        return;
    };
    if file.lock().is_err() {
        return;
    }
    let mut stats = Stats::read(git_dir);
    change(&mut stats);
    let _ = write_private(&git_dir.join(PATH), encode(&stats).as_bytes(), false);
}

fn encode(s: &Stats) -> String {
    let times: Vec<String> = s.push_times.iter().map(i64::to_string).collect();
    let race = match s.race_won {
        Some(w) => format!("race_won {} {}\n", w.at_ms, w.round_ms),
        None => String::new(),
    };
    format!(
        "{MAGIC}\nticks {}\ntick_seconds {}\nlast_tick_seconds {}\npushes_stale {}\npushes_refused {}\npush_times {}\n{race}",
        s.ticks,
        s.tick_seconds,
        s.last_tick_seconds,
        s.pushes_stale,
        s.pushes_refused,
        times.join(" ")
    )
}

/// Reads the lines it knows; anything else (another version's file, a torn copy) reads as
/// zeros, so counters start again rather than go wrong.
fn decode(text: &str) -> Stats {
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Stats::default();
    }
    let mut s = Stats::default();
    for line in lines {
        let Some((name, value)) = line.split_once(' ') else {
            continue;
        };
        let int = || value.parse::<u64>().unwrap_or(0);
        let float = || {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
        };
        match name {
            "ticks" => s.ticks = int(),
            "tick_seconds" => s.tick_seconds = float(),
            "last_tick_seconds" => s.last_tick_seconds = float(),
            "pushes_stale" => s.pushes_stale = int(),
            "pushes_refused" => s.pushes_refused = int(),
            "push_times" => {
                s.push_times = value
                    .split(' ')
                    .filter_map(|t| t.parse().ok())
                    .take(PUSH_TIMES_KEPT)
                    .collect()
            }
            "race_won" => {
                s.race_won = value.split_once(' ').and_then(|(at, round)| {
                    Some(RaceWon {
                        at_ms: at.parse().ok()?,
                        round_ms: round.parse().ok()?,
                    })
                })
            }
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_across_updates_and_a_foreign_file_reads_as_zeros() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(Stats::read(dir.path()), Stats::default());
        Stats::record_tick(dir.path(), Duration::from_millis(250));
        Stats::record_tick(dir.path(), Duration::from_millis(500));
        Stats::record_rejection(dir.path(), Rejection::Stale);
        Stats::record_rejection(dir.path(), Rejection::Refused);
        Stats::record_rejection(dir.path(), Rejection::Stale);
        let s = Stats::read(dir.path());
        assert_eq!(
            (s.ticks, s.tick_seconds, s.last_tick_seconds),
            (2, 0.75, 0.5)
        );
        assert_eq!((s.pushes_stale, s.pushes_refused), (2, 1));
        std::fs::write(dir.path().join(PATH), "something else\nticks 9\n").expect("write");
        assert_eq!(Stats::read(dir.path()), Stats::default());
    }

    #[test]
    fn the_latest_push_times_are_kept_and_counted_from_an_instant() {
        let dir = tempfile::tempdir().expect("tempdir");
        for at in 0..(PUSH_TIMES_KEPT as i64 + 6) {
            Stats::record_push(dir.path(), 1_000 + at);
        }
        let s = Stats::read(dir.path());
        assert_eq!(s.push_times.len(), PUSH_TIMES_KEPT);
        assert_eq!(s.push_times.first(), Some(&1_006));
        assert_eq!(s.pushes_since(1_060), 10);
        let won = RaceWon {
            at_ms: 1_700_000_000_123,
            round_ms: 80,
        };
        Stats::record_race_won(dir.path(), won);
        let s = Stats::read(dir.path());
        assert_eq!(
            (s.race_won, s.push_times.len()),
            (Some(won), PUSH_TIMES_KEPT)
        );
    }

    #[test]
    fn concurrent_updates_lose_no_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let d = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        Stats::record_rejection(&d, Rejection::Stale);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(Stats::read(dir.path()).pushes_stale, 100);
    }
}
