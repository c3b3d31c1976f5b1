//! The sightings of deadlines (`engine::sighting`): when this clone first found each lease,
//! backoff and open circuit now on the board, by its own clock, and when it looked before.
//! Each tick looks (`Session::look`): values still on the board keep their sighting, new ones
//! are found now, gone ones are dropped. A hub that takes the lease over from another sets a
//! floor (`Session::floor_leases`): every lease it looks at from then on counts as first seen
//! no earlier than the takeover, so a grant of the older hub gets at least its whole span on
//! the new hub's clock. Kept in `.git/coord/sightings.json`; deleting it is safe (the clone
//! then trusts the writers' clocks once, never ahead of its own). Does I/O.

use super::{io_err, Session, StoreError};
use crate::board::Board;
use crate::engine::sighting::{key, Kind, Sighting, Sightings};
use crate::fsx;
use crate::model::State;
use jiff::Timestamp;
use std::collections::BTreeMap;

const FILE: &str = "sightings.json";

/// The sightings, with the time of the last look, in seconds since the epoch.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Record {
    looked: Option<i64>,
    /// The look that found each deadline, and the look before it.
    seen: BTreeMap<String, (i64, Option<i64>)>,
    /// When this clone's hub took the lease over: no lease counts as seen before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    floor: Option<i64>,
}

impl Sightings for Session<'_> {
    fn sighting(&self, key: &str) -> Option<Sighting> {
        let mut cell = self.sightings.borrow_mut();
        let (found, before) = *cell
            .get_or_insert_with(|| self.read_sightings())
            .seen
            .get(key)?;
        Some(Sighting {
            found: Timestamp::from_second(found).ok()?,
            before: before.and_then(|t| Timestamp::from_second(t).ok()),
        })
    }
}

impl Session<'_> {
    /// Looks at `board` at `now`: records the deadlines on it not seen before as found now,
    /// forgets those no longer on it. A failure to write keeps the record in memory only.
    pub fn look(&self, board: &Board, now: Timestamp) {
        let mut cell = self.sightings.borrow_mut();
        let old = cell.take().unwrap_or_else(|| self.read_sightings());
        let found = (now.as_second(), old.looked);
        let seen = deadlines(board)
            .into_iter()
            .map(|(k, lease)| {
                let s = old.seen.get(&k).copied().unwrap_or(found);
                let s = match old.floor {
                    Some(floor) if lease => floored(s, floor),
                    _ => s,
                };
                (k, s)
            })
            .collect();
        let record = Record {
            looked: Some(now.as_second()),
            seen,
            floor: old.floor,
        };
        self.write_sightings(&record);
        *cell = Some(record);
    }

    /// Records a look at `now` that found the board as the last look left it (a quiet tick).
    pub fn look_unchanged(&self, now: Timestamp) {
        let mut cell = self.sightings.borrow_mut();
        let mut record = cell.take().unwrap_or_else(|| self.read_sightings());
        record.looked = Some(now.as_second());
        self.write_sightings(&record);
        *cell = Some(record);
    }

    /// Records that this clone's hub took the lease over from another at `now`: from the
    /// next look on, every lease on the board counts as first seen no earlier than `now`.
    /// Fails when the record cannot be written (the floor must outlive this process).
    pub fn floor_leases(&self, now: Timestamp) -> Result<(), StoreError> {
        let mut cell = self.sightings.borrow_mut();
        let mut record = cell.take().unwrap_or_else(|| self.read_sightings());
        record.floor = Some(now.as_second());
        let path = self.private_dir().join(FILE);
        let bytes = serde_json::to_vec(&record).map_err(|e| io_err(&path)(e.into()))?;
        fsx::write_private(&path, &bytes, true).map_err(io_err(&path))?;
        *cell = Some(record);
        Ok(())
    }

    fn read_sightings(&self) -> Record {
        fsx::read_private(&self.private_dir().join(FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn write_sightings(&self, record: &Record) {
        if let Ok(bytes) = serde_json::to_vec(record) {
            let _ = fsx::write_private(&self.private_dir().join(FILE), &bytes, false);
        }
    }
}

/// Returns a sighting `(found, before)` moved to no earlier than `floor`: the span of its
/// deadline runs from `floor` at the earliest.
fn floored((found, before): (i64, Option<i64>), floor: i64) -> (i64, Option<i64>) {
    (found.max(floor), Some(before.unwrap_or(floor).max(floor)))
}

/// Returns the keys of the deadlines on `board` (leases of assigned tasks, backoffs of ready
/// ones, open circuits), each with whether it is a lease.
fn deadlines(board: &Board) -> Vec<(String, bool)> {
    let tasks = board.tasks.iter().filter_map(|t| {
        let task = t.read.as_ref().ok()?;
        match t.folder.state {
            State::Assigned => {
                let at = task.coord.lease_expires_at?;
                Some((key(Kind::Lease(&t.id, task.coord.attempt), at), true))
            }
            State::Ready => Some((key(Kind::Backoff(&t.id), task.waiting().not_before?), false)),
            _ => None,
        }
    });
    let circuits = board.agents.iter().filter_map(|(name, a)| {
        let at = a.profile.coord.open_until?;
        Some((key(Kind::Circuit(name), at), false))
    });
    tasks.chain(circuits).collect()
}

#[cfg(test)]
mod tests {
    use super::floored;

    #[test]
    fn a_floor_moves_a_sighting_and_the_look_before_it_to_no_earlier_than_itself() {
        assert_eq!(floored((100, Some(50)), 200), (200, Some(200)));
        assert_eq!(floored((300, None), 200), (300, Some(200)));
        assert_eq!(floored((300, Some(250)), 200), (300, Some(250)));
    }
}
