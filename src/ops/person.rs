//! A person's operations on one task: `approve` / `reject` (the authority gate), `cancel` and
//! `retry`. Each plans its transitions in the engine and commits them; each returns the number
//! of commits it made.

use super::{Coord, Error, Folders};
use crate::engine::commands;
use crate::model::TaskId;

impl Coord {
    /// Approves a task waiting in review (before its start, or its result).
    pub fn approve(&self, id: &TaskId) -> Result<usize, Error> {
        self.act(&|b, i| commands::approve(b, i, id))
    }

    /// Rejects a task waiting in review, saying why.
    pub fn reject(&self, id: &TaskId, reason: &str) -> Result<usize, Error> {
        self.act(&|b, i| commands::reject(b, i, id, reason))
    }

    /// Cancels a task that is not final, saying why (may be empty).
    pub fn cancel(&self, id: &TaskId, reason: &str) -> Result<usize, Error> {
        self.act(&|b, i| commands::cancel(b, i, id, reason))
    }

    /// Sends a failed, invalid or cancelled task back to the inbox.
    pub fn retry(&self, id: &TaskId) -> Result<usize, Error> {
        self.act_over(Folders::Finished, &|b, i| commands::retry(b, i, id))
    }
}
