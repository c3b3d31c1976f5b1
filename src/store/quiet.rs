//! The quiet mark: what the repository looked like when a tick planned nothing, and until
//! when that answer holds, kept in the quiet section of coord's private index (`private`). A
//! tick whose walk of `work/` finds the same state before that instant has nothing to do
//! either, so it skips reading the tasks and planning — as `git status` trusts the stat data
//! of an unchanged index.
//!
//! The state is the clean mark's digest (every path under `work/` with its stat key, HEAD, the
//! index and git's config and attribute files: see `clean`) of a walk whose status scan found
//! `work/` clean, with coord's version and task schema (the stat cache's salt) and the stat
//! keys of `coord.yaml` and the schema file as `Store::open` found them before reading them.
//! The plan is a function of those files and the clock; the planner reports the earliest
//! instant its decisions compared against (`engine::Clock`), and the mark holds from the time
//! it planned at (a clock set back is not trusted) until then.
//! A tick leaves a mark only when it planned no transition and no inbox file was invalid (one
//! that is still invalid next tick is quarantined). Not for repos that require signed results:
//! whether a result is accepted there also depends on keys outside the repository.
//!
//! With the mark, the tick saves in the same section what `coord status` shows of that board
//! (an opaque payload the caller encodes, with the instant until which the view holds), so
//! that status in the same state shows it instead of loading and planning. Does file I/O
//! under `.git/coord/` only.

use super::private::{self, Section};
use super::walk::Walk;
use super::{Clean, Recorded, Session};
use crate::hash::checksum;
use jiff::Timestamp;

/// The files besides `work/` that a plan depends on, relative to the work tree root.
pub(super) const SETUP_FILES: [&str; 2] = ["coord.yaml", "schemas/task.schema.json"];

impl Session<'_> {
    /// Returns whether the last tick that planned nothing saw the state this walk shows, and
    /// none of the instants its decisions waited for has come by `now`: planning again would
    /// find nothing to do; saves the walk's history-folder record then (a recording found
    /// that state clean). Call it before anything is read or changed.
    pub fn is_quiet(&self, walked: &Walk, now: Timestamp) -> bool {
        let quiet = self
            .quiet_mark(walked)
            .is_some_and(|quiet| quiet.mark.holds_at(now, quiet.mark.deadline));
        if quiet {
            // The walk is in a state a recording found clean: its history folders hold no
            // uncommitted change.
            self.save_history(Some(&[]));
        }
        quiet
    }

    /// Returns whether a quiet mark made from the recording `recorded` would be kept: what
    /// [`Session::set_quiet_mark`] needs.
    pub fn may_mark_quiet(&self, recorded: &Recorded) -> bool {
        self.recorded_quiet_state(recorded).is_some()
    }

    /// Returns the payload [`Session::set_quiet_mark`] saved when this walk shows the state
    /// it was saved in and `now` lies from its planning time until before its view's
    /// deadline; None otherwise (no index, another format, a damaged or cut one, no payload,
    /// another state, past the deadline or before the planning time). Call it before
    /// anything is read.
    pub fn quiet_board(&self, walked: &Walk, now: Timestamp) -> Option<Vec<u8>> {
        let quiet = self.quiet_mark(walked)?;
        let (until, payload) = quiet.board?;
        quiet.mark.holds_at(now, until).then_some(payload)
    }

    /// Returns the quiet mark when it was made in the state this walk shows.
    fn quiet_mark(&self, walked: &Walk) -> Option<Quiet> {
        let state = self.walked_quiet_state(walked)?;
        let bytes = private::section(self.repo.git_dir(), Section::Quiet)?;
        decode(&bytes).filter(|quiet| quiet.mark.state == state)
    }

    /// Returns the quiet state the walk shows; None when it cannot be vouched for.
    fn walked_quiet_state(&self, walked: &Walk) -> Option<u64> {
        self.clean_state(&walked.listing)
            .and_then(|clean| self.quiet_state(clean))
    }

    /// Returns the quiet state of the load a recording found clean; None when it did not.
    fn recorded_quiet_state(&self, recorded: &Recorded) -> Option<u64> {
        recorded
            .clean
            .and_then(Clean::state)
            .and_then(|s| self.quiet_state(s))
    }

    /// Records that a tick planned nothing at `planned_at` for the board it loaded, until
    /// `deadline` (the plan's), with `board`: what `coord status` shows of that board (a
    /// payload the caller encodes) and until when that view holds. Does nothing unless the
    /// recording of that load (`recorded`) found `work/` clean (or the clean mark vouched for
    /// it). A failure only means the next tick plans again and status loads the board.
    pub fn set_quiet_mark(
        &self,
        recorded: &Recorded,
        planned_at: Timestamp,
        deadline: Option<Timestamp>,
        board: Option<(Option<Timestamp>, Vec<u8>)>,
    ) {
        let Some(state) = self.recorded_quiet_state(recorded) else {
            return;
        };
        let mark = Mark {
            state,
            planned_at,
            deadline,
        };
        let bytes = encode(&Quiet { mark, board });
        private::set(self.repo.git_dir(), Section::Quiet, Some(bytes));
    }

    /// Returns the digest of a clean state with what else a plan depends on; None when the
    /// setup files could not be vouched for or results must be signed.
    fn quiet_state(&self, clean: u64) -> Option<u64> {
        if self.config.require_signed_results {
            return None;
        }
        let mut bytes = clean.to_le_bytes().to_vec();
        bytes.extend_from_slice(&self.schema_salt.to_le_bytes());
        bytes.extend_from_slice(&self.setup_keys?.to_le_bytes());
        Some(checksum(&bytes))
    }
}

/// What a tick that planned nothing recorded.
#[derive(Debug, PartialEq, Eq)]
struct Mark {
    /// The digest of everything the plan depended on but the clock.
    state: u64,
    /// When it planned.
    planned_at: Timestamp,
    /// The plan's deadline.
    deadline: Option<Timestamp>,
}

impl Mark {
    /// Returns whether what was planned still holds at `now`: not before it was made (a clock
    /// set back may see a decision differently) and before `deadline`.
    fn holds_at(&self, now: Timestamp, deadline: Option<Timestamp>) -> bool {
        self.planned_at <= now && deadline.is_none_or(|deadline| now < deadline)
    }
}

/// The quiet section: the mark, with what status shows of the board (until when that view
/// holds, and the caller's payload), when the tick saved it.
#[derive(Debug, PartialEq, Eq)]
struct Quiet {
    mark: Mark,
    board: Option<(Option<Timestamp>, Vec<u8>)>,
}

/// Encodes the quiet section: state, planning time in nanoseconds, the deadline, then 0 or 1,
/// the view's deadline and the payload; an instant that may be missing is 0, or 1 and the
/// instant in nanoseconds; integers little-endian.
fn encode(quiet: &Quiet) -> Vec<u8> {
    let mut bytes = quiet.mark.state.to_le_bytes().to_vec();
    bytes.extend_from_slice(&quiet.mark.planned_at.as_nanosecond().to_le_bytes());
    put_instant(&mut bytes, quiet.mark.deadline);
    match &quiet.board {
        Some((until, payload)) => {
            bytes.push(1);
            put_instant(&mut bytes, *until);
            bytes.extend_from_slice(payload);
        }
        None => bytes.push(0),
    }
    bytes
}

fn put_instant(bytes: &mut Vec<u8>, at: Option<Timestamp>) {
    match at {
        Some(at) => {
            bytes.push(1);
            bytes.extend_from_slice(&at.as_nanosecond().to_le_bytes());
        }
        None => bytes.push(0),
    }
}

/// Decodes what `encode` wrote; None for anything else.
fn decode(bytes: &[u8]) -> Option<Quiet> {
    let (state, rest) = bytes.split_first_chunk::<8>()?;
    let (planned_at, rest) = rest.split_first_chunk::<16>()?;
    let (deadline, rest) = take_instant(rest)?;
    let mark = Mark {
        state: u64::from_le_bytes(*state),
        planned_at: timestamp(*planned_at)?,
        deadline,
    };
    let board = match rest.split_first()? {
        (0, []) => None,
        (1, rest) => {
            let (until, payload) = take_instant(rest)?;
            Some((until, payload.to_vec()))
        }
        _ => return None,
    };
    Some(Quiet { mark, board })
}

fn take_instant(bytes: &[u8]) -> Option<(Option<Timestamp>, &[u8])> {
    match bytes.split_first()? {
        (0, rest) => Some((None, rest)),
        (1, rest) => {
            let (nanos, rest) = rest.split_first_chunk::<16>()?;
            Some((Some(timestamp(*nanos)?), rest))
        }
        _ => None,
    }
}

fn timestamp(nanos: [u8; 16]) -> Option<Timestamp> {
    Timestamp::from_nanosecond(i128::from_le_bytes(nanos)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    fn mark(deadline: Option<Timestamp>) -> Mark {
        Mark {
            state: 7,
            planned_at: at("2026-11-22T10:00:00Z"),
            deadline,
        }
    }

    #[test]
    fn a_quiet_section_reads_back_and_no_cut_of_its_mark_does() {
        for deadline in [None, Some(at("2026-11-22T11:00:00.5Z"))] {
            for board in [
                None,
                Some((None, Vec::new())),
                Some((deadline, b"{}".to_vec())),
            ] {
                let quiet = Quiet {
                    mark: mark(deadline),
                    board,
                };
                assert_eq!(decode(&encode(&quiet)), Some(quiet));
            }
        }
        let quiet = Quiet {
            mark: mark(Some(at("2026-11-22T11:00:00Z"))),
            board: None,
        };
        let whole = encode(&quiet);
        for cut in 0..whole.len() {
            assert_eq!(decode(&whole[..cut]), None, "cut at {cut}");
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(decode(&longer), None);
    }

    #[test]
    fn a_mark_holds_from_its_planning_time_until_its_deadline() {
        let deadline = Some(at("2026-11-22T11:00:00Z"));
        let mark = mark(deadline);
        assert!(
            !mark.holds_at(at("2026-11-22T09:59:59Z"), deadline),
            "clock set back"
        );
        assert!(mark.holds_at(at("2026-11-22T10:00:00Z"), deadline));
        assert!(mark.holds_at(at("2026-11-22T10:59:59Z"), deadline));
        assert!(
            !mark.holds_at(at("2026-11-22T11:00:00Z"), deadline),
            "deadline come"
        );
        assert!(mark.holds_at(at("2030-01-01T00:00:00Z"), None));
    }
}
