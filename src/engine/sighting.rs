//! Deadlines measured by the clone that reads them (docs/sync.md, "Clocks"). A lease's end, a
//! backoff's end and a circuit's reopening are written as instants by whichever clone's clock
//! made them; another clone's clock may be hours ahead or behind. So a clone does not compare
//! the written instant with its own clock: it takes the span the writer meant (the task's
//! timeout, its backoff, the circuit's open time) and measures it from when it first saw the
//! value, by its own clock. The first sighting is the writer's start (the written instant minus
//! the span) when that lies between this clone's previous look and the look that found the
//! value, else the nearer end of that interval: a fast writer never pushes a deadline past
//! the span from when the value was seen, and a slow writer never pulls it before this
//! clone's previous look. A clone that has no earlier look takes the writer's start, but never
//! one ahead of its own clock. Pure: the store keeps the sightings (`store::sightings`).

use crate::model::{AgentName, TaskId};
use jiff::{SignedDuration, Timestamp};

/// When this clone first found a deadline's value, by its own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sighting {
    /// The look that found it.
    pub found: Timestamp,
    /// The look before that one, when this clone looked before.
    pub before: Option<Timestamp>,
}

/// The sightings a clone keeps, by [`key`].
pub trait Sightings {
    /// Returns when this clone first saw the deadline `key`, if it recorded that.
    fn sighting(&self, key: &str) -> Option<Sighting>;
}

/// No record (engine tests): every deadline is taken from its writer's start, bounded by the
/// clock.
#[cfg(test)]
pub struct NoSightings;

#[cfg(test)]
impl Sightings for NoSightings {
    fn sighting(&self, _: &str) -> Option<Sighting> {
        None
    }
}

/// What a deadline ends.
#[derive(Debug, Clone, Copy)]
pub enum Kind<'a> {
    /// The lease of a task's attempt.
    Lease(&'a TaskId, u32),
    /// The backoff of a task waiting to be retried.
    Backoff(&'a TaskId),
    /// The open time of an agent's circuit.
    Circuit(&'a AgentName),
}

/// Returns the key a deadline is recorded under: what it ends and its written value, so a
/// new value (a heartbeat, a new attempt) is a new sighting.
pub fn key(kind: Kind<'_>, at: Timestamp) -> String {
    let at = crate::model::time::format(at);
    match kind {
        Kind::Lease(id, attempt) => format!("lease {id} {attempt} {at}"),
        Kind::Backoff(id) => format!("backoff {id} {at}"),
        Kind::Circuit(agent) => format!("circuit {agent} {at}"),
    }
}

/// Returns the instant, by this clone's clock at `now`, at which a deadline written as `at`,
/// `span` after its writer's start, ends.
pub fn local_deadline(
    at: Timestamp,
    span: SignedDuration,
    seen: Option<Sighting>,
    now: Timestamp,
) -> Timestamp {
    let start = at.checked_sub(span).unwrap_or(Timestamp::MIN);
    let first = match seen {
        Some(s) => start.clamp(s.before.unwrap_or(Timestamp::MIN).min(s.found), s.found),
        None => start.min(now),
    };
    first.checked_add(span).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    #[test]
    fn a_deadline_is_measured_from_when_this_clone_first_saw_it() {
        let span = SignedDuration::from_mins(30);
        let seen = Sighting {
            found: at("2026-11-22T12:01:00Z"),
            before: Some(at("2026-11-22T12:00:00Z")),
        };
        let now = at("2026-11-22T12:05:00Z");
        // A slow writer: its start lies before the previous look.
        let slow = at("2026-11-22T10:01:00Z");
        assert_eq!(
            local_deadline(slow, span, Some(seen), now),
            at("2026-11-22T12:30:00Z")
        );
        // A fast writer: its start lies after the look that found it.
        let fast = at("2026-11-22T14:31:00Z");
        assert_eq!(
            local_deadline(fast, span, Some(seen), now),
            at("2026-11-22T12:31:00Z")
        );
        // A writer that agrees: its own start.
        let same = at("2026-11-22T12:30:30Z");
        assert_eq!(local_deadline(same, span, Some(seen), now), same);
    }

    #[test]
    fn without_a_sighting_a_start_ahead_of_the_clock_is_not_trusted() {
        let span = SignedDuration::from_mins(10);
        let now = at("2026-11-22T10:00:00Z");
        assert_eq!(
            local_deadline(at("2026-11-22T12:10:00Z"), span, None, now),
            at("2026-11-22T10:10:00Z")
        );
        assert_eq!(
            local_deadline(at("2026-11-22T09:00:00Z"), span, None, now),
            at("2026-11-22T09:00:00Z")
        );
        assert_eq!(
            local_deadline(Timestamp::MAX, span, None, Timestamp::MAX),
            Timestamp::MAX
        );
    }
}
