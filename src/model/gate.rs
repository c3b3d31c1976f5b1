//! Gates: what a task waits for besides other tasks (`wait_for:` in a task file): a time, a
//! git ref existing, a ref merged into a branch, a path existing on a branch, a GitHub pull
//! request merged, a GitHub Actions run finished green. Pure data; the planner answers time
//! gates itself and asks for the others.

use jiff::Timestamp;
use serde::Deserialize;

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
    /// Opens once the pull request is merged, as `gh pr view` tells: `N` (the repository's
    /// own) or `owner/repo#N`.
    #[serde(deserialize_with = "number_or_text")]
    PrMerged(String),
    /// Opens once the GitHub Actions run finished with success, as `gh run view` (a run id)
    /// or `gh run list` (`workflow/branch`: its latest run) tells; `owner/repo#` before
    /// either names another repository.
    #[serde(deserialize_with = "number_or_text")]
    RunSucceeded(String),
}

/// Reads `12` as `"12"`: a pull request's or a run's number written bare in YAML.
fn number_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Either {
        Number(u64),
        Text(String),
    }
    Ok(match Either::deserialize(d)? {
        Either::Number(n) => n.to_string(),
        Either::Text(t) => t,
    })
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
            Gate::PrMerged(pr) => format!("pull request {pr} merged"),
            Gate::RunSucceeded(run) => format!("run {run} succeeded"),
        }
    }

    /// Returns whether the `gh` CLI answers the gate.
    pub fn asks_gh(&self) -> bool {
        matches!(self, Gate::PrMerged(_) | Gate::RunSucceeded(_))
    }
}

/// Answers the gates that need the repository or GitHub (all but time gates).
pub trait GateAnswers {
    /// Returns whether `gate` is open at `now`; None when it cannot be told now (counts as
    /// closed).
    fn open(&self, gate: &Gate, now: Timestamp) -> Option<bool>;

    /// Returns the last answer to a gate asked outside the repository (`gh`), in words, for
    /// `status`; None for the others.
    fn last_answer(&self, _gate: &Gate) -> Option<String> {
        None
    }
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
            {"path": {"branch": "main", "path": "docs/x.md"}},
            {"pr_merged": "acme/app#12"},
            {"run_succeeded": "ci.yml/main"}
        ]))
        .unwrap();
        assert_eq!(
            gates[0].time(),
            Some("2026-12-01T09:00:00Z".parse().unwrap())
        );
        assert_eq!(gates[2].describe(), "feature merged into main");
        assert_eq!(gates[3].describe(), "docs/x.md on main");
        assert_eq!(gates[4].describe(), "pull request acme/app#12 merged");
        assert!(gates[5].asks_gh() && !gates[3].asks_gh());
    }
}
