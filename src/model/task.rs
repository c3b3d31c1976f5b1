//! Typed views of a task file (docs/files.md): the person-owned fields, the agent's `result:` and
//! the coordinator's `coord:` block.

use super::{AgentName, Duration, HistoryEntry, State, TaskId};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Task priority; assignment takes critical first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Deserialize,
    Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum Priority {
    /// Lowest.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Before normal.
    High,
    /// First of all.
    Critical,
}

impl Priority {
    /// Returns the name as written in task files.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        serde_json::from_value(Value::String(s.to_string()))
            .map_err(|_| format!("unknown priority {s:?}: use low, normal, high or critical"))
    }
}

/// How much a person wants to be asked (docs/behaviour.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// Assign and finish without asking.
    #[default]
    JustDoIt,
    /// Hold a success result in review before done and handoff.
    DoItAndShowMe,
    /// Wait in review before assignment.
    AskMeFirst,
}

impl std::str::FromStr for Authority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        serde_json::from_value(Value::String(s.to_string())).map_err(|_| {
            format!("unknown authority {s:?}: use just_do_it, do_it_and_show_me or ask_me_first")
        })
    }
}

/// One agent or several (fan-out).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum NextAgent {
    /// A single handoff.
    One(AgentName),
    /// A fan-out to several agents.
    Many(Vec<AgentName>),
}

impl NextAgent {
    /// Returns the named agents in order.
    pub fn agents(&self) -> Vec<AgentName> {
        match self {
            NextAgent::One(a) => vec![a.clone()],
            NextAgent::Many(v) => v.clone(),
        }
    }
}

/// Returns the instant a `due:` value names: an RFC 3339 time as written, or for a date alone
/// (`2026-12-01`) the end of that day in UTC, i.e. the next day's midnight UTC. None when it is
/// neither, or the date is not a real one.
pub fn due_instant(due: &str) -> Option<jiff::Timestamp> {
    if let Ok(t) = due.parse::<jiff::Timestamp>() {
        return Some(t);
    }
    let date: jiff::civil::Date = due.parse().ok()?;
    date.tomorrow()
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

/// The person-owned fields of a task file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct TaskSpec {
    /// Optional; must equal the file stem.
    pub id: Option<TaskId>,
    /// Required, non-empty.
    pub title: String,
    /// Longer text.
    pub description: Option<String>,
    /// Explicit assignee.
    pub agent: Option<AgentName>,
    /// Any agent having all of these may take the task.
    pub capabilities: Vec<String>,
    /// Priority; the config default applies when absent.
    pub priority: Option<Priority>,
    /// Ids that must be done first.
    pub depends_on: Vec<TaskId>,
    /// `wait_for`: gates that must open before it becomes ready.
    pub wait_for: Vec<super::gate::Gate>,
    /// Handoff after success.
    pub next_agent: Option<NextAgent>,
    /// Fan-in agent with a `next_agent` list.
    pub join_agent: Option<AgentName>,
    /// Approval gating.
    pub authority: Authority,
    /// Lease per attempt.
    pub timeout: Option<Duration>,
    /// Attempts before the dead letter.
    pub max_attempts: Option<u32>,
    /// SLA: RFC 3339, or a date alone (see [`due_instant`]).
    pub due: Option<String>,
    /// Free labels.
    pub labels: Vec<String>,
    /// `coord new` with the same key is a no-op.
    pub idempotency_key: Option<String>,
    /// Free-form input for the agent; may hold expressions.
    pub input: Option<Value>,
}

impl TaskSpec {
    /// Returns the instant the task is due, when it has a readable `due:`.
    pub fn due_at(&self) -> Option<jiff::Timestamp> {
        self.due.as_deref().and_then(due_instant)
    }
}

/// success | failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    /// The work is done.
    Success,
    /// The attempt failed.
    Failure,
}

impl ResultStatus {
    /// Returns the name as written in task files.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Success => "success",
            ResultStatus::Failure => "failure",
        }
    }
}

/// An error: in a failure result, or the reason a task failed or was cancelled.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
pub struct ErrorInfo {
    /// A machine-readable reason (`timeout`, `dependency_failed`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// What went wrong, for people.
    #[serde(default)]
    pub message: String,
    /// Whether another attempt may help; defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

impl ErrorInfo {
    /// Returns an error with a code and a message.
    pub fn new(code: super::ErrorCode, message: impl Into<String>, retryable: bool) -> ErrorInfo {
        ErrorInfo {
            code: Some(code.as_str().to_string()),
            message: message.into(),
            retryable: Some(retryable),
        }
    }

    /// Returns whether another attempt may help (true unless said otherwise).
    pub fn is_retryable(&self) -> bool {
        self.retryable.unwrap_or(true)
    }
}

/// The agent-owned `result:` block.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct TaskResult {
    /// success | failure.
    pub status: ResultStatus,
    /// Free-form output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Overrides the task's `next_agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_agent: Option<NextAgent>,
    /// With failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// `hmac-sha256:<hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The attempt this result answers (fencing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The agent that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentName>,
    /// What the attempt cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<super::metrics::Metrics>,
}

/// The coordinator-owned `coord:` block. Read leniently: a person's stray edit never makes a
/// task unreadable.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct CoordBlock {
    /// The state the coordinator last recorded; none when absent or not a state's name (a
    /// person's stray edit, which the next tick's adoption replaces).
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "super::state::recorded"
    )]
    pub state: Option<State>,
    /// The agent the task is assigned to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assigned_to: Option<AgentName>,
    /// Attempts started so far.
    pub attempt: u32,
    /// Attempts made before the last `coord retry`: `max_attempts` counts from here, while
    /// `attempt` keeps growing so a late result of an old attempt is never accepted.
    #[serde(skip_serializing_if = "is_zero")]
    pub attempt_base: u32,
    /// The epoch of the hub that granted the current attempt (docs/fleet.md); none when no
    /// hub granted it. A report must name the same epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// A digest of the `Idempotency-Key` of the claim that started the current attempt, when
    /// it carried one (a claim over HTTP): that claim sent again is answered with this grant.
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub claim_key: Option<String>,
    /// When intake accepted the task.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "super::time::recorded"
    )]
    pub created_at: Option<Timestamp>,
    /// When the current attempt started.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "super::time::recorded"
    )]
    pub assigned_at: Option<Timestamp>,
    /// When the current attempt's lease ends.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "super::time::recorded"
    )]
    pub lease_expires_at: Option<Timestamp>,
    /// Backoff: no assignment before this time.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "super::time::recorded"
    )]
    pub not_before: Option<Timestamp>,
    /// When the task reached a final state.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "super::time::recorded"
    )]
    pub finished_at: Option<Timestamp>,
    /// What a task in review waits for: `start` (ask_me_first) or `result` (do_it_and_show_me);
    /// any other value reads as none.
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub review: Option<Review>,
    /// Handoff parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<TaskId>,
    /// Root id of the handoff chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<TaskId>,
    /// Ids of the chain from the root to the parent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<TaskId>,
    /// Input with expressions resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Why the task failed or was cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Earlier attempts' results and errors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
}

/// What a task in `review/` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Review {
    /// Approval before it starts (`authority: ask_me_first`).
    Start,
    /// Approval of its result (`authority: do_it_and_show_me`).
    Result,
}

/// Reads a value that is coord's own but may have been edited by hand: one that does not read
/// counts as none, and leaves the rest of the block readable.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl CoordBlock {
    /// Reads a `coord:` value; anything unreadable counts as no block.
    pub fn from_value(v: Option<&Value>) -> CoordBlock {
        v.and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// Returns the block as a JSON value, in field order.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_alone_is_due_at_the_end_of_that_day_utc() {
        let at = due_instant("2026-12-01").expect("a date");
        assert_eq!(at.to_string(), "2026-12-02T00:00:00Z");
        assert_eq!(
            due_instant("2026-12-01T17:00:00+01:00").map(|t| t.to_string()),
            Some("2026-12-01T16:00:00Z".to_string())
        );
        assert_eq!(due_instant("2026-02-30"), None);
        assert_eq!(due_instant("soon"), None);
    }

    #[test]
    fn state_reads_as_written_and_a_stray_value_reads_as_none() {
        let block = |state: &str| {
            let v: Value = serde_json::from_str(&format!(r#"{{"state": {state}, "attempt": 3}}"#))
                .expect("json");
            CoordBlock::from_value(Some(&v))
        };
        let ready = block(r#""ready""#);
        assert_eq!(ready.state, Some(State::Ready));
        assert_eq!(ready.to_value()["state"], "ready");
        for stray in [r#""later""#, "7", "null", r#""Ready""#] {
            let b = block(stray);
            assert_eq!((b.state, b.attempt), (None, 3), "{stray}");
            assert!(b.to_value().get("state").is_none(), "{stray}");
        }
    }

    #[test]
    fn review_reads_as_written_and_a_stray_value_leaves_the_block_readable() {
        let block = |review: &str| {
            let v: Value = serde_json::from_str(&format!(
                r#"{{"state": "review", "attempt": 2, "review": {review}}}"#
            ))
            .expect("json");
            CoordBlock::from_value(Some(&v))
        };
        let start = block(r#""start""#);
        assert_eq!(start.review, Some(Review::Start));
        assert_eq!(start.to_value()["review"], "start");
        assert_eq!(block(r#""result""#).review, Some(Review::Result));
        let stray = block(r#""later, maybe""#);
        assert_eq!((stray.review, stray.attempt), (None, 2));
    }
}
