//! Agent profiles: `agents` lists them with their load and circuit; `add_agent` writes a new
//! profile under `work/agents/` and commits it; `enable_agent` sets its `enabled:` and
//! `remove_agent` deletes it, each in one commit.

use super::{Coord, Error, AGENT_WAIT};
use crate::engine::{Op, Plan, Transition};
use crate::model::{AgentName, Endpoint};
use crate::store::Origin;
use crate::yaml::emit_block;
use serde_json::json;

/// A profile to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAgent {
    /// The agent's name (the profile's file name).
    pub name: AgentName,
    /// Its capabilities.
    pub capabilities: Vec<String>,
    /// How many tasks it is assigned at once.
    pub max_active: u32,
    /// Whether it takes work only with `claim` (pull model).
    pub pull: bool,
}

/// A profile added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedAgent {
    /// The profile's repo-relative path.
    pub path: String,
    /// The commits made (one).
    pub commits: usize,
}

impl Coord {
    /// Returns every agent with its capabilities, load, limit, assignment mode and circuit
    /// (the JSON `coord agents` prints).
    pub fn agents(&self) -> Result<Vec<super::AgentRow>, Error> {
        let (board, _) = self.read().load()?;
        Ok(crate::view::agents(&board))
    }

    /// Writes the profile of a new agent and commits it; refused when the profile exists.
    pub fn add_agent(&self, agent: &NewAgent) -> Result<AddedAgent, Error> {
        let session = self.session(AGENT_WAIT)?;
        let store = self.store();
        let name = &agent.name;
        let path = format!("{}/agents/{name}.yaml", store.work_dir());
        if store.abs(&path).symlink_metadata().is_ok() {
            return Err(Error::Refused(format!(
                "{path} already exists; edit it instead"
            )));
        }
        let mut text = emit_block("capabilities", &json!(agent.capabilities), 0);
        text.push_str(&emit_block("max_active", &json!(agent.max_active), 0));
        if agent.pull {
            text.push_str("assign: pull\n");
        }
        let t = Transition {
            subject: name.to_string(),
            from: Endpoint::Agent,
            to: Endpoint::Added,
            summary: format!("add agent {name}"),
            ops: vec![Op::Write {
                path: path.clone(),
                text,
            }],
            guard: Vec::new(),
            op: None,
        };
        let commits = self.apply(session, &Plan::one(t), Origin::Command)?;
        Ok(AddedAgent { path, commits })
    }

    /// Sets an agent's `enabled:` (a disabled agent is assigned nothing; what it holds runs
    /// on) and commits the profile; refused for an unknown agent. Returns the commits made
    /// (none when it already was so).
    pub fn enable_agent(&self, name: &AgentName, enabled: bool) -> Result<usize, Error> {
        let session = self.session(AGENT_WAIT)?;
        let (board, _) = session.load()?;
        let file = profile_of(&board, name)?;
        if board.agents[name].profile.enabled == enabled {
            return Ok(0);
        }
        let text = crate::yaml::set_block(&file.text, &file.doc, "enabled", &json!(enabled))
            .map_err(|e| Error::Refused(format!("cannot edit {}: {e}", file.path)))?;
        let verb = if enabled { "enable" } else { "disable" };
        let ops = vec![Op::Write {
            path: file.path.clone(),
            text,
        }];
        self.apply(
            session,
            &Plan::one(agent_change(name, verb, ops)),
            Origin::Command,
        )
    }

    /// Deletes an agent's profile and commits it; refused while a task is in its folder or
    /// names it in `agent:` and is not finished (reassign or cancel those first).
    pub fn remove_agent(&self, name: &AgentName) -> Result<usize, Error> {
        let session = self.session(AGENT_WAIT)?;
        let (board, _) = session.load()?;
        let file = profile_of(&board, name)?;
        let held: Vec<&str> = board
            .tasks
            .iter()
            .filter(|t| !t.folder.state.is_final())
            .filter(|t| {
                t.folder.agent.as_ref() == Some(name)
                    || t.read
                        .as_ref()
                        .is_ok_and(|task| task.spec.agent.as_ref() == Some(name))
            })
            .map(|t| t.id.as_str())
            .collect();
        if !held.is_empty() {
            return Err(Error::Refused(format!(
                "agent {name} still has unfinished tasks ({}); reassign or cancel them first, or disable the agent with 'coord agents disable {name}'",
                held.join(", ")
            )));
        }
        let ops = vec![Op::Remove {
            path: file.path.clone(),
        }];
        self.apply(
            session,
            &Plan::one(agent_change(name, "remove", ops)),
            Origin::Command,
        )
    }
}

/// Returns the profile file of agent `name`, or why there is none.
fn profile_of<'b>(
    board: &'b crate::board::Board,
    name: &AgentName,
) -> Result<&'b crate::board::ProfileFile, Error> {
    let known: Vec<&str> = board.agents.keys().map(|a| a.as_str()).collect();
    board
        .agents
        .get(name)
        .and_then(|a| a.file.as_ref())
        .ok_or_else(|| {
            Error::Refused(format!(
                "no agent named {name}; the agents are: {}",
                known.join(", ")
            ))
        })
}

/// Returns the transition of a person's change to agent `name`'s profile (`verb agent name`).
fn agent_change(name: &AgentName, verb: &str, ops: Vec<Op>) -> Transition {
    Transition {
        subject: name.to_string(),
        from: Endpoint::Agent,
        to: Endpoint::Agent,
        summary: format!("{verb} agent {name}"),
        ops,
        guard: Vec::new(),
        op: None,
    }
}
