//! A person's operations on one task: `approve` / `reject` (the authority gate), `cancel` and
//! `retry` and `reassign` (planned in the engine). Each commits its change and returns the
//! number of commits it made.

use super::answer::{Acted, PersonOp};
use super::{Coord, Error, Folders};
use crate::engine::commands;
use crate::model::{AgentName, TaskId};

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

impl Coord {
    /// Gives a task to agent `to` (the engine's reassign command): one no agent holds yet gets
    /// `agent: to`; one an agent holds is taken from it, its attempt ended as cancelled, and
    /// given to `to` with a new attempt (or left in `ready/` for `to` when it cannot take one
    /// now). Refused for an unknown agent, a task in review or finished, and one with a result
    /// waiting for the tick, saying what to do instead. Returns the commits made (none when
    /// `to` has it already).
    pub fn reassign(&self, id: &TaskId, to: &AgentName) -> Result<usize, Error> {
        self.act(&|b, i| commands::reassign(b, i, id, to))
    }
}

impl Coord {
    /// Returns the answer of `op` on task `id`, which made `commits` commits: the state the
    /// task's first copy is in now (only the task's own files are read).
    pub fn acted(&self, op: PersonOp, id: &TaskId, commits: usize) -> Result<Acted, Error> {
        let board = self
            .read()
            .load_scoped(&|rel| super::agent::is_file_of(rel, id))?;
        let state = board.find(id).first().map(|f| f.folder.state);
        Ok(Acted {
            op,
            id: id.clone(),
            commits,
            state,
        })
    }
}
