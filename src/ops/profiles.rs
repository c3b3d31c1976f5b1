//! Agent profiles: `agents` lists them with their load and circuit; `add_agent` writes a new
//! profile under `work/agents/` and commits it.

use super::{Coord, Error, AGENT_WAIT};
use crate::engine::{Op, Plan, Transition};
use crate::model::{AgentName, Endpoint};
use crate::store::Origin;
use crate::yaml::emit_block;
use serde_json::{json, Value};

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
    pub fn agents(&self) -> Result<Vec<Value>, Error> {
        let (board, _) = self.store().load()?;
        Ok(crate::view::agents(&board))
    }

    /// Writes the profile of a new agent and commits it; refused when the profile exists.
    pub fn add_agent(&self, agent: &NewAgent) -> Result<AddedAgent, Error> {
        let _lock = self.session(AGENT_WAIT)?;
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
        let commits = self.apply(&Plan::one(t), Origin::Command)?;
        Ok(AddedAgent { path, commits })
    }
}
