//! The settle rule (docs/behaviour.md): whether a file under `work/` is complete enough to read. A
//! file is still being written while its mtime is less than `settle` ago on the system clock
//! (never the `--now` clock: file times are real), unless it arrived by rename (a rename
//! changes the ctime but not the mtime, so its ctime is later) or `coord watch` saw it renamed
//! in after its last write (also within one timer tick of that write, when the ctime equals
//! the mtime), and it still has the size and mtime the watch noted then. A writer closing a
//! file proves nothing: it may append again. Files committed as they are count as complete too; the loader asks that
//! of the files this rule holds back. Pure.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a file looked like: its mtime in nanoseconds since the epoch and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The mtime, in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// The size in bytes.
    pub size: u64,
}

impl Written {
    /// Returns what `m` says of the file.
    pub fn of(m: &std::fs::Metadata) -> Written {
        use std::os::unix::fs::MetadataExt;
        Written {
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            size: m.size(),
        }
    }
}

/// When files are complete, for one load.
#[derive(Debug, Clone)]
pub struct Settle<'a> {
    /// How long a file's size and mtime must stay unchanged (coord.yaml `settle`).
    pub wait: Duration,
    /// The system clock at the load.
    pub now: SystemTime,
    /// Repo-relative paths `coord watch` saw renamed in and not
    /// written since, with what they looked like then.
    pub seen_complete: &'a HashMap<String, Written>,
}

impl Settle<'_> {
    /// Returns when the file at `path` (repo-relative), as `now` says it is written and with
    /// this ctime in nanoseconds since the epoch, settles; None when it is complete now.
    pub fn until(&self, path: &str, now: Written, ctime_ns: i128) -> Option<SystemTime> {
        if self.wait.is_zero() || ctime_ns > now.mtime_ns {
            return None;
        }
        if self.seen_complete.get(path) == Some(&now) {
            return None;
        }
        let mtime = UNIX_EPOCH + Duration::from_nanos(u64::try_from(now.mtime_ns).ok()?);
        let until = mtime + self.wait;
        (until > self.now).then_some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000_000;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_file_written_lately_waits_unless_renamed_closed_or_settle_is_zero() {
        fn rule(seen: &HashMap<String, Written>) -> Settle<'_> {
            Settle {
                wait: Duration::from_secs(2),
                now: at(101),
                seen_complete: seen,
            }
        }
        let w = |secs: i128, size: u64| Written {
            mtime_ns: secs * S,
            size,
        };
        let a = "work/inbox/a.yaml";
        let mut seen = HashMap::new();
        assert_eq!(rule(&seen).until(a, w(100, 10), 100 * S), Some(at(102)));
        assert_eq!(rule(&seen).until(a, w(98, 10), 98 * S), None);
        assert_eq!(rule(&seen).until(a, w(100, 10), 100 * S + 1), None);
        seen.insert(a.to_string(), w(100, 10));
        assert_eq!(rule(&seen).until(a, w(100, 10), 100 * S), None);
        assert_eq!(
            rule(&seen).until(a, w(100, 12), 100 * S),
            Some(at(102)),
            "appended to since it was renamed in, in the same clock tick"
        );
        seen.insert(a.to_string(), w(99, 10));
        assert_eq!(rule(&seen).until(a, w(100, 10), 100 * S), Some(at(102)));
        let zero = Settle {
            wait: Duration::ZERO,
            ..rule(&seen)
        };
        assert_eq!(zero.until(a, w(100, 10), 100 * S), None);
    }
}
