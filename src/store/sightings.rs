//! The sightings of deadlines (`engine::sighting`): when this clone first found each lease,
//! backoff and open circuit now on the board, by its own clock, and when it looked before.
//! Each tick looks (`Session::look`): values still on the board keep their sighting, new ones
//! are found now, gone ones are dropped. Kept in `.git/coord/sightings.json`; deleting it is
//! safe (the clone then trusts the writers' clocks once, never ahead of its own). Does I/O.

use super::Session;
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
            .map(|k| {
                let s = old.seen.get(&k).copied().unwrap_or(found);
                (k, s)
            })
            .collect();
        let record = Record {
            looked: Some(now.as_second()),
            seen,
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

/// Returns the keys of the deadlines on `board`: leases of assigned tasks, backoffs of ready
/// ones, open circuits.
fn deadlines(board: &Board) -> Vec<String> {
    let tasks = board.tasks.iter().filter_map(|t| {
        let task = t.read.as_ref().ok()?;
        match t.folder.state {
            State::Assigned => {
                let at = task.coord.lease_expires_at?;
                Some(key(Kind::Lease(&t.id, task.coord.attempt), at))
            }
            State::Ready => Some(key(Kind::Backoff(&t.id), task.waiting().not_before?)),
            _ => None,
        }
    });
    let circuits = board.agents.iter().filter_map(|(name, a)| {
        let at = a.profile.coord.open_until?;
        Some(key(Kind::Circuit(name), at))
    });
    tasks.chain(circuits).collect()
}
