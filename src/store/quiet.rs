//! The quiet mark: what the repository looked like when a tick planned nothing, and until
//! when that answer holds, kept in `.git/coord/quiet-mark`. A tick whose walk of `work/`
//! finds the same state before that instant has nothing to do either, so it skips reading
//! the tasks and planning — as `git status` trusts the stat data of an unchanged index.
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
//! With the mark, the tick saves what `coord status` shows of that board (`.git/coord/
//! quiet-board`: an opaque payload the caller encodes, checksummed, with the same state and
//! the instant until which the view holds), so that status in the same state shows it instead
//! of loading and planning. Does file I/O under `.git/coord/` only.

use super::walk::Walk;
use super::{Clean, Recorded, Session};
use crate::hash::checksum;
use jiff::Timestamp;

/// The mark file, relative to the git directory.
const PATH: &str = "coord/quiet-mark";
/// The first bytes of the mark file.
const MAGIC: &[u8] = b"coord quiet-mark 1\n";
/// The saved board file, relative to the git directory.
const BOARD_PATH: &str = "coord/quiet-board";
/// The first bytes of the saved board file.
const BOARD_MAGIC: &[u8] = b"coord quiet-board 1\n";
/// The files besides `work/` that a plan depends on, relative to the work tree root.
pub(super) const SETUP_FILES: [&str; 2] = ["coord.yaml", "schemas/task.schema.json"];

impl Session<'_> {
    /// Returns whether the last tick that planned nothing saw the state this walk shows, and
    /// none of the instants its decisions waited for has come by `now`: planning again would
    /// find nothing to do; saves the walk's history-folder record then (a recording found
    /// that state clean). Call it before anything is read or changed.
    pub fn is_quiet(&self, walked: &Walk, now: Timestamp) -> bool {
        let Some(state) = self.walked_quiet_state(walked) else {
            return false;
        };
        let Ok(bytes) = crate::fsx::read_private(&self.repo.git_dir().join(PATH)) else {
            return false;
        };
        let quiet = decode(&bytes).is_some_and(|mark| mark.state == state && mark.holds_at(now));
        if quiet {
            // The walk is in a state a recording found clean: its history folders hold no
            // uncommitted change.
            self.save_history(Some(&[]));
        }
        quiet
    }

    /// Returns whether a quiet mark made from the recording `recorded` would be kept: what
    /// [`Session::set_quiet_mark`] and [`Session::save_quiet_board`] need.
    pub fn may_mark_quiet(&self, recorded: &Recorded) -> bool {
        self.recorded_quiet_state(recorded).is_some()
    }

    /// Saves `payload` (what `coord status` shows of the board the recording `recorded`
    /// found, as the caller encodes it) with the state a quiet mark made from that recording
    /// holds, good from `planned_at` until `until`. Does nothing when no mark would be made; a
    /// failure only means status loads the board.
    pub fn save_quiet_board(
        &self,
        recorded: &Recorded,
        planned_at: Timestamp,
        until: Option<Timestamp>,
        payload: &[u8],
    ) {
        let Some(state) = self.recorded_quiet_state(recorded) else {
            return;
        };
        let mark = Mark {
            state,
            planned_at,
            deadline: until,
        };
        let path = self.repo.git_dir().join(BOARD_PATH);
        let _ = crate::fsx::write_private(&path, &encode_board(&mark, payload), false);
    }

    /// Returns the payload [`Session::save_quiet_board`] saved when this walk shows the state
    /// it was saved in and `now` lies from its planning time until before its deadline; None
    /// otherwise (no file, another format, a damaged or cut file, another state, past the
    /// deadline or before the planning time). Call it before anything is read.
    pub fn quiet_board(&self, walked: &Walk, now: Timestamp) -> Option<Vec<u8>> {
        let state = self.walked_quiet_state(walked)?;
        let bytes = crate::fsx::read_private(&self.repo.git_dir().join(BOARD_PATH)).ok()?;
        let (mark, payload) = decode_board(&bytes)?;
        (mark.state == state && mark.holds_at(now)).then(|| payload.to_vec())
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
    /// `deadline` (the plan's). Does nothing unless the recording of that load (`recorded`)
    /// found `work/` clean (or the clean mark vouched for it). A failure only means the next
    /// tick plans again.
    pub fn set_quiet_mark(
        &self,
        recorded: &Recorded,
        planned_at: Timestamp,
        deadline: Option<Timestamp>,
    ) {
        let Some(state) = self.recorded_quiet_state(recorded) else {
            return;
        };
        let mark = Mark {
            state,
            planned_at,
            deadline,
        };
        let path = self.repo.git_dir().join(PATH);
        let _ = crate::fsx::write_private(&path, &encode(&mark), false);
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
    /// Returns whether the plan still holds at `now`: not before it was made (a clock set
    /// back may see a decision differently) and before its deadline.
    fn holds_at(&self, now: Timestamp) -> bool {
        self.planned_at <= now && self.deadline.is_none_or(|deadline| now < deadline)
    }
}

/// Encodes a mark: magic, state, planning time in nanoseconds, then 1 and the deadline in
/// nanoseconds, or 0; integers little-endian.
fn encode(mark: &Mark) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&mark.state.to_le_bytes());
    bytes.extend_from_slice(&mark.planned_at.as_nanosecond().to_le_bytes());
    match mark.deadline {
        Some(d) => {
            bytes.push(1);
            bytes.extend_from_slice(&d.as_nanosecond().to_le_bytes());
        }
        None => bytes.push(0),
    }
    bytes
}

/// Decodes what `encode` wrote; None for anything else.
fn decode(bytes: &[u8]) -> Option<Mark> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (state, rest) = rest.split_first_chunk::<8>()?;
    let (planned_at, rest) = rest.split_first_chunk::<16>()?;
    let deadline = match rest {
        [0] => None,
        [1, nanos @ ..] => Some(timestamp(nanos.try_into().ok()?)?),
        _ => return None,
    };
    Some(Mark {
        state: u64::from_le_bytes(*state),
        planned_at: timestamp(*planned_at)?,
        deadline,
    })
}

/// Encodes a saved board: magic, the checksum of the rest, the payload's length, the payload,
/// then the mark as [`encode`] writes it; integers little-endian.
fn encode_board(mark: &Mark, payload: &[u8]) -> Vec<u8> {
    let mut rest = (payload.len() as u64).to_le_bytes().to_vec();
    rest.extend_from_slice(payload);
    rest.extend_from_slice(&encode(mark));
    let mut bytes = BOARD_MAGIC.to_vec();
    bytes.extend_from_slice(&checksum(&rest).to_le_bytes());
    bytes.extend_from_slice(&rest);
    bytes
}

/// Decodes what `encode_board` wrote, checking its checksum; None for anything else.
fn decode_board(bytes: &[u8]) -> Option<(Mark, &[u8])> {
    let (sum, rest) = bytes.strip_prefix(BOARD_MAGIC)?.split_first_chunk::<8>()?;
    if checksum(rest) != u64::from_le_bytes(*sum) {
        return None;
    }
    let (len, rest) = rest.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    let (payload, mark) = rest.split_at_checked(len)?;
    Some((decode(mark)?, payload))
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

    #[test]
    fn a_mark_reads_back_and_nothing_else_does() {
        for deadline in [None, Some(at("2026-11-22T11:00:00.5Z"))] {
            let mark = Mark {
                state: 7,
                planned_at: at("2026-11-22T10:00:00Z"),
                deadline,
            };
            assert_eq!(decode(&encode(&mark)), Some(mark));
        }
        let whole = encode(&Mark {
            state: 7,
            planned_at: at("2026-11-22T10:00:00Z"),
            deadline: Some(at("2026-11-22T11:00:00Z")),
        });
        for cut in 0..whole.len() {
            assert_eq!(decode(&whole[..cut]), None, "cut at {cut}");
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(decode(&longer), None);
    }

    #[test]
    fn a_saved_board_reads_back_and_nothing_damaged_does() {
        let mark = Mark {
            state: 7,
            planned_at: at("2026-11-22T10:00:00Z"),
            deadline: Some(at("2026-11-22T11:00:00Z")),
        };
        let whole = encode_board(&mark, b"{\"board\": 1}");
        let (read, payload) = decode_board(&whole).expect("reads back");
        assert_eq!((read, payload), (mark, &b"{\"board\": 1}"[..]));
        for cut in 0..whole.len() {
            assert_eq!(decode_board(&whole[..cut]), None, "cut at {cut}");
        }
        for at in 0..whole.len() {
            let mut flipped = whole.clone();
            flipped[at] ^= 0x20;
            assert_eq!(decode_board(&flipped), None, "byte {at} changed");
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(decode_board(&longer), None);
    }

    #[test]
    fn a_mark_holds_from_its_planning_time_until_its_deadline() {
        let mark = Mark {
            state: 7,
            planned_at: at("2026-11-22T10:00:00Z"),
            deadline: Some(at("2026-11-22T11:00:00Z")),
        };
        assert!(!mark.holds_at(at("2026-11-22T09:59:59Z")), "clock set back");
        assert!(mark.holds_at(at("2026-11-22T10:00:00Z")));
        assert!(mark.holds_at(at("2026-11-22T10:59:59Z")));
        assert!(!mark.holds_at(at("2026-11-22T11:00:00Z")), "deadline come");
        let open = Mark {
            deadline: None,
            ..mark
        };
        assert!(open.holds_at(at("2030-01-01T00:00:00Z")));
    }
}
