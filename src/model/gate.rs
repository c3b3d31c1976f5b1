//! Gates: what a task waits for besides other tasks (`wait_for:` in a task file): a time, a
//! git ref existing, a ref merged into a branch, a path existing on a branch. Pure data; the
//! planner answers time gates itself and asks for the others.

use jiff::Timestamp;

/// One entry of `wait_for:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Gate {
    /// Opens at this instant (RFC 3339).
    Time(String),
    /// Opens once the ref exists (a branch, a tag, or a full `refs/...` name).
    Ref(String),
    /// Opens once `ref`'s commit is reachable from `into`.
    Merged {
        /// The ref to be merged.
        #[serde(rename = "ref")]
        reference: String,
        /// The branch it must be merged into.
        into: String,
    },
    /// Opens once `path` exists in `branch`'s tip.
    Path {
        /// The branch (or any ref).
        branch: String,
        /// The repo-relative path.
        path: String,
    },
}

impl Gate {
    /// Returns the instant a time gate opens (None for other gates, or a time that does not
    /// parse: such a gate never opens, and `status` shows it as written).
    pub fn time(&self) -> Option<Timestamp> {
        match self {
            Gate::Time(t) => t.parse().ok(),
            _ => None,
        }
    }

    /// Returns the gate in words, for `status`.
    pub fn describe(&self) -> String {
        match self {
            Gate::Time(t) => format!("time {t}"),
            Gate::Ref(r) => format!("ref {r} to exist"),
            Gate::Merged { reference, into } => format!("{reference} merged into {into}"),
            Gate::Path { branch, path } => format!("{path} on {branch}"),
        }
    }
}

/// Answers the gates that need the repository (all but time gates).
pub trait GateAnswers {
    /// Returns whether `gate` is open; None when it cannot be told now (counts as closed).
    fn open(&self, gate: &Gate) -> Option<bool>;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gates_read_from_their_yaml_shape() {
        let gates: Vec<Gate> = serde_json::from_value(serde_json::json!([
            {"time": "2026-12-01T09:00:00Z"},
            {"ref": "feature"},
            {"merged": {"ref": "feature", "into": "main"}},
            {"path": {"branch": "main", "path": "docs/x.md"}}
        ]))
        .unwrap();
        assert_eq!(
            gates[0].time(),
            Some("2026-12-01T09:00:00Z".parse().unwrap())
        );
        assert_eq!(gates[2].describe(), "feature merged into main");
        assert_eq!(gates[3].describe(), "docs/x.md on main");
    }
}
