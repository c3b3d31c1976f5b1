//! `export`: every task as one flat record with stable field names, for `coord export`'s JSON
//! Lines (schemas/json/export.json). Reads the board; writes nothing. Secrets are redacted
//! as everywhere else.

use super::{Coord, Error};
use crate::board::TaskFile;
use crate::model::State;

/// One task as `coord export` writes it (one JSON line each).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exported {
    /// The id.
    pub id: String,
    /// The state (its folder).
    pub state: String,
    /// The title; None when the file does not read.
    pub title: Option<String>,
    /// Longer text.
    pub description: Option<String>,
    /// The priority written in the file (None: coord.yaml's default applies).
    pub priority: Option<String>,
    /// Labels.
    pub labels: Vec<String>,
    /// Ids that must be done first.
    pub depends_on: Vec<String>,
    /// The explicit assignee (`agent:`).
    pub agent: Option<String>,
    /// The agent whose folder it is in, when assigned.
    pub assigned_to: Option<String>,
    /// Capabilities asked for.
    pub capabilities: Vec<String>,
    /// The idempotency key (`<source>:<key>` for an imported task).
    pub idempotency_key: Option<String>,
    /// The file, repo-relative.
    pub path: String,
}

impl Coord {
    /// Returns every task in board order, only those in `states` when some are given.
    pub fn export(&self, states: &[State]) -> Result<Vec<Exported>, Error> {
        let (board, _) = self.read().load()?;
        Ok(board
            .tasks
            .iter()
            .filter(|t| states.is_empty() || states.contains(&t.folder.state))
            .map(exported)
            .collect())
    }
}

fn exported(t: &TaskFile) -> Exported {
    let spec = t.read.as_ref().ok().map(|d| &d.spec);
    let redact = |s: &String| crate::redact::redact_text(s);
    Exported {
        id: t.id.to_string(),
        state: t.folder.state.as_str().to_string(),
        title: spec.map(|s| redact(&s.title)),
        description: spec.and_then(|s| s.description.as_ref()).map(redact),
        priority: spec
            .and_then(|s| s.priority)
            .map(|p| p.as_str().to_string()),
        labels: spec.map(|s| s.labels.clone()).unwrap_or_default(),
        depends_on: spec
            .map(|s| s.depends_on.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
        agent: spec.and_then(|s| s.agent.as_ref()).map(ToString::to_string),
        assigned_to: t.folder.agent.as_ref().map(ToString::to_string),
        capabilities: spec.map(|s| s.capabilities.clone()).unwrap_or_default(),
        idempotency_key: spec.and_then(|s| s.idempotency_key.clone()),
        path: t.path.clone(),
    }
}
