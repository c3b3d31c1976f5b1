//! The settle rule (SPEC 3.12): whether a file under `work/` is complete enough to read. A
//! file is still being written while its mtime is less than `settle` ago on the system clock
//! (never the `--now` clock: file times are real), unless it arrived by rename (a rename
//! changes the ctime but not the mtime, so its ctime is later) or `coord watch` saw its writer
//! close it, or rename it in, after its last write. Files committed as they are count as
//! complete too; the loader asks that of the files this rule holds back. Pure.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// When files are complete, for one load.
#[derive(Debug, Clone)]
pub struct Settle<'a> {
    /// How long a file's size and mtime must stay unchanged (coord.yaml `settle`).
    pub wait: Duration,
    /// The system clock at the load.
    pub now: SystemTime,
    /// Repo-relative paths `coord watch` saw closed by their writer or renamed in, and when.
    pub seen_complete: &'a HashMap<String, SystemTime>,
}

impl Settle<'_> {
    /// Returns when the file at `path` (repo-relative), with this mtime and ctime in
    /// nanoseconds since the epoch, settles; None when it is complete now.
    pub fn until(&self, path: &str, (mtime_ns, ctime_ns): (i128, i128)) -> Option<SystemTime> {
        if self.wait.is_zero() || ctime_ns > mtime_ns {
            return None;
        }
        let mtime = UNIX_EPOCH + Duration::from_nanos(u64::try_from(mtime_ns).ok()?);
        if self.seen_complete.get(path).is_some_and(|&t| mtime <= t) {
            return None;
        }
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
        fn rule(seen: &HashMap<String, SystemTime>) -> Settle<'_> {
            Settle {
                wait: Duration::from_secs(2),
                now: at(101),
                seen_complete: seen,
            }
        }
        let mut seen = HashMap::new();
        let written = (100 * S, 100 * S);
        assert_eq!(
            rule(&seen).until("work/inbox/a.yaml", written),
            Some(at(102))
        );
        assert_eq!(
            rule(&seen).until("work/inbox/a.yaml", (98 * S, 98 * S)),
            None
        );
        assert_eq!(
            rule(&seen).until("work/inbox/a.yaml", (100 * S, 100 * S + 1)),
            None
        );
        seen.insert("work/inbox/a.yaml".to_string(), at(100));
        assert_eq!(rule(&seen).until("work/inbox/a.yaml", written), None);
        seen.insert("work/inbox/a.yaml".to_string(), at(99));
        assert_eq!(
            rule(&seen).until("work/inbox/a.yaml", written),
            Some(at(102))
        );
        let zero = Settle {
            wait: Duration::ZERO,
            ..rule(&seen)
        };
        assert_eq!(zero.until("work/inbox/a.yaml", written), None);
    }
}
