//! The planner's clock: the time a pass plans at, and the earliest later instant any of its
//! decisions compared against. Every decision that depends on the time (a lease that expires,
//! a backoff that passes, a circuit that half-opens) asks [`Clock::reached`], so a pass knows
//! until when planning the same board again must decide the same: before that instant every
//! comparison it made comes out the same way. The tick uses it to skip planning a board that
//! has not changed since a pass that found nothing to do (the store's quiet mark); the board
//! view asks it too (overdue tasks, circuits' probes), so `coord status` knows until when a
//! saved view holds.

use jiff::{SignedDuration, Timestamp};
use std::cell::Cell;

/// The time of one planning pass, and the deadlines it compared against.
#[derive(Debug)]
pub struct Clock {
    now: Timestamp,
    deadline: Cell<Option<Timestamp>>,
}

impl Clock {
    /// Returns a clock that reads `now`.
    pub fn new(now: Timestamp) -> Clock {
        Clock {
            now,
            deadline: Cell::new(None),
        }
    }

    /// Returns the time, for stamping what a transition writes. A decision must not compare
    /// it with anything: use [`Clock::reached`].
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Returns the instant `d` after now (a lease's end, a backoff's, a circuit's reopening).
    /// Checked: past the last instant a timestamp can hold it gives that instant (the CLI keeps
    /// clocks and durations in a range where this cannot happen).
    pub fn after(&self, d: SignedDuration) -> Timestamp {
        self.now.checked_add(d).unwrap_or(Timestamp::MAX)
    }

    /// Returns the instant `d` before now (an archive cutoff); checked like [`Clock::after`].
    pub fn before(&self, d: SignedDuration) -> Timestamp {
        self.now.checked_sub(d).unwrap_or(Timestamp::MIN)
    }

    /// Returns whether the instant `t` has come; when it has not, remembers it, so the
    /// earliest such instant is known ([`Clock::deadline`]).
    pub fn reached(&self, t: Timestamp) -> bool {
        let reached = t <= self.now;
        if !reached {
            let earliest = self.deadline.get().map_or(t, |d| d.min(t));
            self.deadline.set(Some(earliest));
        }
        reached
    }

    /// Returns whether the instant `t` lies before now (strictly: `t < now`); when it does
    /// not, remembers the first instant after it, when the answer changes.
    pub fn passed(&self, t: Timestamp) -> bool {
        t.checked_add(SignedDuration::from_nanos(1))
            .is_ok_and(|next| self.reached(next))
    }

    /// Returns the earliest instant after `now` that a decision compared against: until
    /// then, every `reached` asked so far gives the same answer. None when none was asked
    /// about a later instant.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.deadline.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_earliest_instant_not_reached() {
        let at = |s: &str| s.parse::<Timestamp>().expect("time");
        let clock = Clock::new(at("2026-11-22T10:00:00Z"));
        assert!(clock.reached(at("2026-11-22T09:00:00Z")));
        assert!(clock.reached(at("2026-11-22T10:00:00Z")), "now has come");
        assert_eq!(clock.deadline(), None, "only instants not reached count");
        assert!(!clock.reached(at("2026-11-22T12:00:00Z")));
        assert!(!clock.reached(at("2026-11-22T11:00:00Z")));
        assert!(!clock.reached(at("2026-11-22T13:00:00Z")));
        assert_eq!(clock.deadline(), Some(at("2026-11-22T11:00:00Z")));
    }

    #[test]
    fn passed_is_strict_and_remembers_when_it_turns() {
        let at = |s: &str| s.parse::<Timestamp>().expect("time");
        let clock = Clock::new(at("2026-11-22T10:00:00Z"));
        assert!(clock.passed(at("2026-11-22T09:59:59Z")));
        assert_eq!(clock.deadline(), None);
        assert!(
            !clock.passed(at("2026-11-22T10:00:00Z")),
            "now itself has not passed"
        );
        assert_eq!(clock.deadline(), Some(at("2026-11-22T10:00:00.000000001Z")));
        assert!(!Clock::new(Timestamp::MAX).passed(Timestamp::MAX));
    }

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let hour = SignedDuration::from_hours(1);
        assert_eq!(Clock::new(Timestamp::MAX).after(hour), Timestamp::MAX);
        assert_eq!(Clock::new(Timestamp::MIN).before(hour), Timestamp::MIN);
        let at = |s: &str| s.parse::<Timestamp>().expect("time");
        let clock = Clock::new(at("2026-11-22T10:00:00Z"));
        assert_eq!(clock.after(hour), at("2026-11-22T11:00:00Z"));
        assert_eq!(clock.before(hour), at("2026-11-22T09:00:00Z"));
    }
}
