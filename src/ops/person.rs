//! A person's operations on one task: `approve` / `reject` (the authority gate), `cancel` and
//! `retry` and `reassign` (planned in the engine). Each commits its change and returns the
//! number of commits it made.

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

/// What a person's command did: the operation, the task, the commits made and the state the
/// task is in now (`--json` and the MCP tools of the same names).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Acted<'a> {
    /// The command: approve, reject, cancel, retry or reassign.
    pub op: &'a str,
    /// The task.
    pub id: &'a TaskId,
    /// The commits made.
    pub commits: usize,
    /// The task's state now (null when no file has the id any more).
    pub state: serde_json::Value,
}

impl<'a> Acted<'a> {
    /// Returns what `op` did to `id` with `commits` commits, reading the state it left.
    pub fn of(
        coord: &Coord,
        op: &'a str,
        id: &'a TaskId,
        commits: usize,
    ) -> Result<Acted<'a>, Error> {
        let state = coord
            .show(id)?
            .first()
            .map_or(serde_json::Value::Null, |c| c["state"].clone());
        Ok(Acted {
            op,
            id,
            commits,
            state,
        })
    }
}
