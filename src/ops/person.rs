//! A person's operations on one task: `approve` / `reject` (the authority gate), `cancel` and
//! `retry` (planned in the engine), and `reassign` of a task no agent holds yet (its `agent:`
//! set). Each commits its change and returns the number of commits it made.

use super::{Coord, Error, Folders};
use crate::engine::commands::{self, CommandError};
use crate::engine::{Op, Plan, Transition};
use crate::model::{AgentName, Endpoint, State, TaskId};
use crate::store::Origin;
use crate::yaml::Limits;

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
    /// Gives a task that no agent holds yet (inbox, ready or blocked) to agent `to`: sets its
    /// `agent:` and commits the file. Refused for an unknown agent, and for a task an agent
    /// holds or that is finished, saying what to do instead. Returns the commits made (none
    /// when `to` has it already).
    pub fn reassign(&self, id: &TaskId, to: &AgentName) -> Result<usize, Error> {
        let session = self.session(super::AGENT_WAIT)?;
        let (board, _) = session.load()?;
        if !board.agents.contains_key(to) {
            let known: Vec<&str> = board.agents.keys().map(|a| a.as_str()).collect();
            return Err(Error::Refused(format!(
                "no agent named {to}; the agents are: {}",
                known.join(", ")
            )));
        }
        let file = match board.find(id).as_slice() {
            [one] => *one,
            [] => {
                return Err(Error::Refused(format!(
                    "no task '{id}'; 'coord list' shows the ids"
                )))
            }
            _ => {
                return Err(Error::Refused(format!(
                    "task '{id}' has several copies; run 'coord doctor'"
                )))
            }
        };
        let state = file.folder.state;
        if !matches!(state, State::Inbox | State::Ready | State::Blocked) {
            return Err(Error::Refused(format!(
                "task '{id}' is {state}; only a task no agent holds yet can be reassigned (cancel and retry it to send it back to the inbox first)"
            )));
        }
        let task = file
            .read
            .as_ref()
            .map_err(|_| Error::Command(CommandError::Unreadable(id.clone())))?;
        if task.waiting().agent.as_ref() == Some(to) {
            return Ok(0);
        }
        let bytes = self
            .store()
            .read_file(&file.path, Limits::default().max_bytes)?;
        let text = String::from_utf8_lossy(&bytes);
        let edited = crate::yaml::parse(&text, &Limits::default())
            .map_err(|e| Error::Refused(format!("{} does not read: {e}", file.path)))
            .and_then(|doc| {
                crate::yaml::set_block(&text, &doc, "agent", &serde_json::json!(to))
                    .map_err(|e| Error::Refused(format!("cannot edit {}: {e}", file.path)))
            })?;
        let t = Transition {
            subject: id.to_string(),
            from: Endpoint::State(state),
            to: Endpoint::State(state),
            summary: format!("reassign {id} to {to}"),
            ops: vec![Op::Write {
                path: file.path.clone(),
                text: edited,
            }],
            guard: Vec::new(),
            op: None,
        };
        self.apply(session, &Plan::one(t), Origin::Command)
    }
}
