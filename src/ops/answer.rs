//! The answers of the operations as every front end gives them: one `Serialize` type per
//! answer, serialized as it is by `--json` (inside the [`Versioned`] envelope), REST and MCP,
//! and the JSON Schemas under `schemas/json/` generated from those types ([`schemas`]).

use crate::engine::commands::Receipt;
use crate::model::{AgentName, State, TaskId};
use jiff::Timestamp;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Serialize, Serializer};
use std::borrow::Cow;

/// The version of every `--json` answer (docs/json.md): raised when a field is removed or
/// renamed, not when one is added.
pub const JSON_VERSION: u32 = 1;

/// The `"version": 1` of a `--json` answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Version;

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(JSON_VERSION)
    }
}

impl JsonSchema for Version {
    fn schema_name() -> Cow<'static, str> {
        "Version".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"const": JSON_VERSION})
    }
}

/// A `--json` answer: `version` first, then the answer's own fields. REST and MCP give the
/// answer without it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Versioned<T> {
    /// The version of the answer's shape.
    pub version: Version,
    /// The answer.
    #[serde(flatten)]
    pub answer: T,
}

impl<T> Versioned<T> {
    /// Wraps `answer`.
    pub fn of(answer: T) -> Versioned<T> {
        Versioned {
            version: Version,
            answer,
        }
    }
}

/// What a claim answers: the task granted, or that there is nothing to claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ClaimAnswer {
    /// A task was granted.
    Granted(Granted),
    /// Nothing may go to the agent now.
    Nothing(NothingClaimed),
}

impl ClaimAnswer {
    /// Returns the answer as a hub of `epoch` gives it.
    pub fn in_epoch(mut self, epoch: u64) -> ClaimAnswer {
        match &mut self {
            ClaimAnswer::Granted(g) => g.receipt.epoch = Some(epoch),
            ClaimAnswer::Nothing(n) => n.epoch = Some(epoch),
        }
        self
    }
}

/// A claim that granted a task: its receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Granted {
    /// Always true.
    #[schemars(extend("const" = true))]
    pub claimed: bool,
    /// What the agent was granted, with the epoch of the hub that granted it (a hub's
    /// answers only).
    #[serde(flatten)]
    pub receipt: Receipt,
}

impl Granted {
    /// Returns the answer for `receipt`.
    pub fn of(receipt: Receipt) -> Granted {
        Granted {
            claimed: true,
            receipt,
        }
    }
}

/// A claim that found nothing to claim (exit 4 at the command line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NothingClaimed {
    /// Always false.
    #[schemars(extend("const" = false))]
    pub claimed: bool,
    /// The agent that asked.
    pub agent: AgentName,
    /// Why, when one reason stands out; else null.
    pub why: Option<String>,
    /// The epoch of the hub that answered (a hub's answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

impl NothingClaimed {
    /// Returns the answer for `agent`, with `why` as a claim's refusal gives it (a leading
    /// `: `, or empty).
    pub fn of(agent: AgentName, why: &str) -> NothingClaimed {
        let why = why.trim_start_matches([':', ' ']);
        NothingClaimed {
            claimed: false,
            agent,
            why: (!why.is_empty()).then(|| why.to_string()),
            epoch: None,
        }
    }
}

/// The operation a heartbeat answer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BeatOp {
    /// `heartbeat`.
    Heartbeat,
}

/// A heartbeat's answer: the lease in force afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Beat {
    /// Always `heartbeat`.
    pub op: BeatOp,
    /// The task.
    pub id: TaskId,
    /// Its state now.
    pub state: State,
    /// When the lease runs out unless extended again.
    #[serde(with = "crate::model::time::recorded")]
    #[schemars(schema_with = "crate::model::time::recorded_schema")]
    pub lease_expires_at: Option<Timestamp>,
}

/// The operation a report answer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportOp {
    /// `complete`: the work is done.
    Complete,
    /// `fail`: the work failed.
    Fail,
}

/// A result's answer (`complete`, `fail`): written into the task, waiting for the next tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReportAnswer {
    /// `complete` or `fail`.
    pub op: ReportOp,
    /// The task.
    pub id: TaskId,
    /// The agent whose folder the task is in; null for a task no agent holds.
    pub agent: Option<AgentName>,
    /// The task's state now.
    pub state: State,
    /// The attempt the result is stamped with.
    #[schemars(range(min = 1))]
    pub attempt: u32,
    /// Always true: a result that was not recorded is an error, not an answer.
    #[schemars(extend("const" = true))]
    pub recorded: bool,
}

/// A person's operation on one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PersonOp {
    /// `approve`: the task in review goes on.
    Approve,
    /// `reject`: the task in review fails.
    Reject,
    /// `cancel`: the task stops.
    Cancel,
    /// `retry`: the finished task goes back to the inbox.
    Retry,
    /// `reassign`: the task goes to another agent.
    Reassign,
}

/// What a person's operation (`approve`, `reject`, `cancel`, `retry`, `reassign`) did: the
/// same answer from `--json`, `POST /v1/tasks/{id}/{op}` and the MCP tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Acted {
    /// The operation.
    pub op: PersonOp,
    /// The task.
    pub id: TaskId,
    /// The commits made (none when there was nothing to change).
    pub commits: usize,
    /// The task's state now; null when no file has the id any more.
    pub state: Option<State>,
}

/// The agents (`coord agents --json`; `GET /v1/agents` answers the list alone).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Agents {
    /// Each agent, by name.
    pub agents: Vec<super::AgentRow>,
}

/// Transitions from git history, newest first (`coord log --json` and the MCP `log` tool;
/// `GET /v1/tasks/{id}/log` pages the entries as `items`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Log {
    /// The transitions.
    pub entries: Vec<super::LogEntry>,
}

/// One page of `GET /v1/tasks`: each task file whole, as `coord show` gives a copy. The
/// command line's `list` and MCP's answer [`super::TaskPage`] rows instead; REST keeps the
/// files whole under `items` for the board's script and its clients.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskCopies {
    /// The task files of this page, in id order (then path).
    pub items: Vec<super::TaskCopy>,
    /// What to pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// One page of `GET /v1/tasks/{id}/log`: the entries of [`Log`], paged.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LogPage {
    /// The transitions of this page, newest first.
    pub items: Vec<super::LogEntry>,
    /// What to pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// One task of work as a runner takes it from a hub (`POST /v1/agents/{agent}/claim` with
/// `{"work": true}`, `GET /v1/agents/{agent}/work`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WorkItem {
    /// The task.
    pub id: TaskId,
    /// The attempt granted (to name when reporting).
    pub attempt: u32,
    /// The epoch of the hub that granted it; null outside a hub.
    pub epoch: Option<u64>,
    /// The task's timeout in seconds.
    pub timeout_secs: u64,
    /// What is left of the lease, in seconds.
    pub lease_left_secs: u64,
    /// The task file, repo-relative.
    pub path: String,
    /// The task as the runner's command reads it on stdin.
    pub json: serde_json::Value,
    /// The branch of the task it was handed off from, for a worktree to check out.
    pub branch: Option<String>,
}

impl WorkItem {
    /// Returns the answer for `work`.
    pub fn of(work: &super::Work) -> WorkItem {
        WorkItem {
            id: work.id.clone(),
            attempt: work.attempt,
            epoch: work.epoch,
            timeout_secs: work.timeout.as_secs(),
            lease_left_secs: work.lease_left.as_secs(),
            path: work.path.clone(),
            json: work.json.clone(),
            branch: work.branch.clone(),
        }
    }
}

/// What a claim of work answers: the task granted as work, or null.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ClaimedWork {
    /// Whether a task was granted.
    pub claimed: bool,
    /// The task granted; null when none.
    pub work: Option<WorkItem>,
    /// The epoch of the hub that answered (a hub's answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

/// An agent's assigned tasks without a result, as work (`GET /v1/agents/{agent}/work`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WorkList {
    /// The tasks, as work.
    pub items: Vec<WorkItem>,
}

/// How an attempt lost its task, as a lease status and the MCP notices name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LostEvent {
    /// A person cancelled the task.
    Cancelled,
    /// Anything else: the lease ran out, the task went to another agent or attempt, or is gone.
    LeaseLost,
}

impl LostEvent {
    /// Returns the event `lost` is told as.
    pub fn of(lost: super::Lost) -> LostEvent {
        match lost {
            super::Lost::Cancelled => LostEvent::Cancelled,
            _ => LostEvent::LeaseLost,
        }
    }

    /// Returns the event's name.
    pub fn as_str(self) -> &'static str {
        match self {
            LostEvent::Cancelled => "cancelled",
            LostEvent::LeaseLost => "lease_lost",
        }
    }
}

/// Whether an attempt still holds its task (the MCP `lease_status` tool and
/// `GET /v1/agents/{agent}/tasks/{id}/lost`). Read only: the lease is not extended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct LeaseStatus {
    /// The task.
    pub id: TaskId,
    /// The agent asked about.
    pub agent: AgentName,
    /// The attempt asked about.
    pub attempt: u32,
    /// Whether the attempt still holds the task.
    pub held: bool,
    /// How it lost the task; null while held.
    pub lost: Option<LostEvent>,
    /// Why it lost the task, in words; null while held.
    pub why: Option<String>,
    /// When the lease runs out unless extended; null when lost or without a lease.
    #[serde(with = "crate::model::time::recorded")]
    #[schemars(schema_with = "crate::model::time::recorded_schema")]
    pub lease_expires_at: Option<Timestamp>,
}

/// One answer schema under `schemas/json/`: the file's name and the schema of its `--json`
/// answer.
pub struct AnswerSchema {
    /// The file name without `.json`.
    pub name: &'static str,
    /// The schema as it is written to the file.
    pub schema: Schema,
}

/// Returns the schema of `Versioned<T>` under `name`, titled and described.
fn versioned<T: JsonSchema>(name: &'static str, title: &str, description: &str) -> AnswerSchema {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12().for_serialize();
    settings.inline_subschemas = true;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<Versioned<T>>();
    schema.insert(
        "$id".into(),
        format!("https://coord.dev/schemas/json/{name}.json").into(),
    );
    schema.insert("title".into(), title.into());
    schema.insert("description".into(), description.into());
    AnswerSchema { name, schema }
}

/// Returns the answer schemas generated from the types here, by file name.
pub fn schemas() -> Vec<AnswerSchema> {
    vec![
        versioned::<ClaimAnswer>(
            "claim",
            "coord claim --json",
            "A claim: the receipt, or nothing to claim (exit 4).",
        ),
        versioned::<Beat>("heartbeat", "coord heartbeat --json", "The lease extended."),
        versioned::<ReportAnswer>(
            "report",
            "coord complete|fail --json",
            "A result written into an assigned task; the next tick takes it.",
        ),
        versioned::<super::TaskPage>(
            "list",
            "coord list --json",
            "The tasks that pass every filter given, one row each, in the board's order.",
        ),
        versioned::<Agents>(
            "agents",
            "coord agents --json",
            "The agents with their capabilities, load, limit, mode and circuit.",
        ),
        versioned::<Acted>(
            "gate",
            "coord approve|reject|cancel|retry|reassign --json",
            "What a person's command did and where the task is now.",
        ),
        versioned::<crate::view::board::BoardView>(
            "status",
            "coord status --json",
            "The board: counts per state, agents, what waits and why, problems.",
        ),
        versioned::<super::TaskView>(
            "show",
            "coord show --json",
            "One task: its state, file and fields; the other copies when the id is in several places.",
        ),
        versioned::<Log>(
            "log",
            "coord log --json",
            "Transitions from git history, newest first.",
        ),
        versioned::<super::Created>(
            "new",
            "coord new --json",
            "The task written, or the one an idempotency key names.",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns a receipt of attempt 1 of task `t` for agent `p`, granted by a hub of `epoch`.
    fn receipt(epoch: Option<u64>) -> Receipt {
        Receipt {
            id: TaskId::new("t").expect("id"),
            agent: AgentName::new("p").expect("agent"),
            attempt: 1,
            epoch,
            lease_expires_at: None,
            path: "work/assigned/p/t.yaml".into(),
        }
    }

    #[test]
    fn a_receipt_carries_the_epoch_of_the_hub_that_granted_it() {
        let from_hub = serde_json::to_value(receipt(Some(3))).expect("json");
        assert_eq!(from_hub["epoch"], 3, "{from_hub}");
        let alone = serde_json::to_value(receipt(None)).expect("json");
        assert!(alone.get("epoch").is_none(), "{alone}");
    }

    #[test]
    fn a_grant_in_an_epoch_names_it_once() {
        let answer = ClaimAnswer::Granted(Granted::of(receipt(None))).in_epoch(4);
        let text = serde_json::to_string(&answer).expect("json");
        assert_eq!(text.matches("\"epoch\"").count(), 1, "{text}");
        assert!(text.contains("\"epoch\":4"), "{text}");
    }
}
