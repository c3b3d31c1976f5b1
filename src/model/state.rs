//! Task states and the folders that hold them (docs/files.md): the folder is the source of truth.

use super::AgentName;
use std::fmt;
use std::sync::Arc;

/// A task's state, named as its folder under `work/`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum State {
    /// New, not yet validated.
    Inbox,
    /// Valid, waiting for `depends_on`.
    Blocked,
    /// Valid, waiting for an agent.
    Ready,
    /// Waiting for a person's approval.
    Review,
    /// Given to one agent.
    Assigned,
    /// Finished successfully.
    Done,
    /// Dead letter.
    Failed,
    /// Cancelled by a person.
    Cancelled,
    /// Rejected at intake.
    Invalid,
    /// Old done/cancelled task, sharded by month.
    Archived,
}

impl State {
    /// Every state, in board order.
    pub const ALL: [State; 10] = [
        State::Inbox,
        State::Blocked,
        State::Ready,
        State::Review,
        State::Assigned,
        State::Done,
        State::Failed,
        State::Cancelled,
        State::Invalid,
        State::Archived,
    ];

    /// Returns the state's name as written in `coord.state` and commit trailers.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Inbox => "inbox",
            State::Blocked => "blocked",
            State::Ready => "ready",
            State::Review => "review",
            State::Assigned => "assigned",
            State::Done => "done",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
            State::Invalid => "invalid",
            State::Archived => "archived",
        }
    }

    /// Parses a state name.
    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Returns whether no further transition happens on its own (done, failed, cancelled, invalid, archived).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            State::Done | State::Failed | State::Cancelled | State::Invalid | State::Archived
        )
    }
}

/// (De)serializes a recorded state (`coord.state`, a journaled precondition) that a person may
/// have edited: written as its name, or `""` for none; a value that names no state reads as
/// none, so it never makes the rest of what holds it unreadable.
pub(crate) mod recorded {
    use super::State;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the state's name, or `""` for none.
    pub fn serialize<S: Serializer>(state: &Option<State>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(state.map_or("", State::as_str))
    }

    /// Reads a state's name; anything else reads as none.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<State>, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(v.as_str().and_then(State::parse))
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A folder under `work/` that holds task files: a state, plus the agent or month where the
/// state has subfolders.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Folder {
    /// The state this folder stands for.
    pub state: State,
    /// `assigned/<agent>/`: the agent.
    pub agent: Option<AgentName>,
    /// `archive/<YYYY-MM>/`: the month (shared: the files of one month folder hold one).
    pub month: Option<Arc<str>>,
}

impl Folder {
    /// Returns the folder of a state without subfolders.
    pub fn of(state: State) -> Folder {
        Folder {
            state,
            agent: None,
            month: None,
        }
    }

    /// Returns `assigned/<agent>/`.
    pub fn assigned(agent: AgentName) -> Folder {
        Folder {
            state: State::Assigned,
            agent: Some(agent),
            month: None,
        }
    }

    /// Returns `archive/<month>/`.
    pub fn archive(month: Arc<str>) -> Folder {
        Folder {
            state: State::Archived,
            agent: None,
            month: Some(month),
        }
    }

    /// Returns the folder's path relative to the work dir, without a trailing slash.
    pub fn rel_dir(&self) -> String {
        match (self.state, &self.agent, &self.month) {
            (State::Assigned, Some(a), _) => format!("assigned/{a}"),
            (State::Archived, _, Some(m)) => format!("archive/{m}"),
            (State::Archived, _, None) => "archive".to_string(),
            (s, _, _) => s.as_str().to_string(),
        }
    }
}

impl fmt::Display for Folder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.agent {
            Some(a) => write!(f, "assigned/{a}"),
            None => f.write_str(self.state.as_str()),
        }
    }
}
