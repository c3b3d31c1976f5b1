//! The operation a command's commit carries out and the preconditions it acted on, written as
//! commit trailers (`Coord-Op`, `Coord-Op-Id`, `Coord-By`, `Coord-Pre-State`,
//! `Coord-Pre-Agent`, `Coord-Pre-Attempt`) so that `coord sync` can redo it on a moved remote
//! by what it means instead of by its diff. Pure: the store fills in the operation's id.

use super::{Plan, Transition};
use crate::board::Board;
use crate::model::{AgentName, State};
use std::fmt;

/// The commands whose commits `coord sync` redoes by meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    /// `coord claim`: a pull agent takes a ready task.
    Claim,
    /// `coord complete`: a success result.
    Complete,
    /// `coord fail`: a failure result.
    Fail,
    /// `coord heartbeat`: the lease is extended.
    Heartbeat,
    /// `coord cancel`.
    Cancel,
    /// `coord approve`.
    Approve,
    /// `coord reject`.
    Reject,
    /// `coord retry`.
    Retry,
    /// `coord new`: a task file is created.
    New,
    /// A person's edit of files under `work/`, recorded by coord.
    Edit,
    /// A result that arrived for another attempt, kept in `coord.history` as `stale_result`.
    SetAside,
    /// A claim withdrawn by the front end that made it (its client cancelled the request):
    /// the task goes back to `ready/`.
    Release,
    /// `coord reassign` of a task an agent holds: its attempt ends and another agent has it.
    Reassign,
}

const KINDS: [(OpKind, &str); 13] = [
    (OpKind::Claim, "claim"),
    (OpKind::Complete, "complete"),
    (OpKind::Fail, "fail"),
    (OpKind::Heartbeat, "heartbeat"),
    (OpKind::Cancel, "cancel"),
    (OpKind::Approve, "approve"),
    (OpKind::Reject, "reject"),
    (OpKind::Retry, "retry"),
    (OpKind::New, "new"),
    (OpKind::Edit, "edit"),
    (OpKind::SetAside, "set-aside"),
    (OpKind::Release, "release"),
    (OpKind::Reassign, "reassign"),
];

impl OpKind {
    /// Returns the name written in the `Coord-Op` trailer.
    pub fn as_str(self) -> &'static str {
        KINDS
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("edit", |(_, s)| s)
    }

    /// Reads a `Coord-Op` trailer's value.
    pub fn parse(s: &str) -> Option<OpKind> {
        KINDS.iter().find(|(_, n)| *n == s).map(|(k, _)| *k)
    }

    /// Returns whether the operation writes an agent's result (`complete`, `fail`).
    pub fn reports(self) -> bool {
        matches!(self, OpKind::Complete | OpKind::Fail)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the task was when the operation acted on it: its `coord.state`, `coord.assigned_to`
/// and `coord.attempt`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pre {
    /// `coord.state`; none when absent or not a state's name (written `""`).
    #[serde(with = "crate::model::state::recorded")]
    pub state: Option<State>,
    /// `coord.assigned_to`.
    pub agent: Option<AgentName>,
    /// `coord.attempt`.
    pub attempt: u32,
}

/// One operation, as its commits' trailers say it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Operation {
    /// The command.
    pub kind: OpKind,
    /// A random id the store gives each applied plan, so that two clones' operations are
    /// never the same commit (two identical claims would both look pushed).
    #[serde(default)]
    pub id: Option<String>,
    /// The agent that acted (the claimer), when one did.
    #[serde(default)]
    pub by: Option<AgentName>,
    /// The task as the operation found it; None for a file it created.
    #[serde(default)]
    pub pre: Option<Pre>,
}

/// The trailer keys, in the order they are written.
pub const OP: &str = "Coord-Op";
/// The operation's id.
pub const OP_ID: &str = "Coord-Op-Id";
/// The agent that acted.
pub const BY: &str = "Coord-By";
/// The precondition's `coord.state`.
pub const PRE_STATE: &str = "Coord-Pre-State";
/// The precondition's `coord.assigned_to` (absent: none).
pub const PRE_AGENT: &str = "Coord-Pre-Agent";
/// The precondition's `coord.attempt`.
pub const PRE_ATTEMPT: &str = "Coord-Pre-Attempt";

impl Operation {
    /// An operation of `kind` with nothing else named (the store gives it its id).
    pub fn of(kind: OpKind) -> Operation {
        Operation {
            kind,
            id: None,
            by: None,
            pre: None,
        }
    }

    /// Returns the trailer lines, each ending with a newline.
    pub fn trailers(&self) -> String {
        let mut out = format!("{OP}: {}\n", self.kind);
        if let Some(id) = &self.id {
            out += &format!("{OP_ID}: {id}\n");
        }
        if let Some(by) = &self.by {
            out += &format!("{BY}: {by}\n");
        }
        if let Some(pre) = &self.pre {
            out += &format!("{PRE_STATE}: {}\n", pre.state.map_or("", State::as_str));
            if let Some(a) = &pre.agent {
                out += &format!("{PRE_AGENT}: {a}\n");
            }
            out += &format!("{PRE_ATTEMPT}: {}\n", pre.attempt);
        }
        out
    }

    /// Reads an operation back from a commit's trailers; None for commits written before
    /// operations were named (their meaning is inferred) or with a trailer that does not read.
    pub fn from_trailers(trailers: &[(String, String)]) -> Option<Operation> {
        let get = |key: &str| {
            trailers
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let kind = OpKind::parse(get(OP)?)?;
        let agent = |key| match get(key) {
            None => Some(None),
            Some(a) => a.parse::<AgentName>().ok().map(Some),
        };
        let pre = match (get(PRE_STATE), get(PRE_ATTEMPT)) {
            (Some(state), Some(n)) => Some(Pre {
                state: State::parse(state),
                agent: agent(PRE_AGENT)?,
                attempt: n.parse().ok()?,
            }),
            _ => None,
        };
        Some(Operation {
            kind,
            id: get(OP_ID).map(str::to_string),
            by: agent(BY)?,
            pre,
        })
    }
}

/// Names the operation on every transition of a command's plan, each with the precondition
/// its task had on `board` (the snapshot the command planned from).
pub fn stamp(mut plan: Plan, board: &Board, kind: OpKind, by: Option<&AgentName>) -> Plan {
    for t in &mut plan.transitions {
        t.op = Some(Operation {
            kind,
            id: None,
            by: by.cloned(),
            pre: pre_of(board, t),
        });
    }
    plan
}

/// Returns the precondition of a transition's task on `board`.
fn pre_of(board: &Board, t: &Transition) -> Option<Pre> {
    let id = t.subject.parse().ok()?;
    let from = t.ops.first()?.paths().first().map(|p| p.to_string())?;
    let file = board.find(&id).into_iter().find(|f| f.path == from)?;
    let task = file.read.as_ref().ok()?;
    Some(Pre {
        state: task.coord.state,
        agent: task.coord.assigned_to.clone(),
        attempt: task.coord.attempt,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        text.lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_operation_reads_back_from_its_trailers() {
        let op = Operation {
            kind: OpKind::Claim,
            id: Some("00ff".into()),
            by: Some("p1".parse().unwrap()),
            pre: Some(Pre {
                state: Some(State::Ready),
                agent: None,
                attempt: 2,
            }),
        };
        let text = op.trailers();
        assert_eq!(
            text,
            "Coord-Op: claim\nCoord-Op-Id: 00ff\nCoord-By: p1\nCoord-Pre-State: ready\nCoord-Pre-Attempt: 2\n"
        );
        assert_eq!(Operation::from_trailers(&pairs(&text)), Some(op));
        let mut held = pairs(
            "Coord-Op: fail\nCoord-Pre-State: assigned\nCoord-Pre-Agent: a\nCoord-Pre-Attempt: 1\n",
        );
        let read = Operation::from_trailers(&held).unwrap();
        assert_eq!(read.pre.unwrap().agent.unwrap().as_str(), "a");
        held[0].1 = "frobnicate".into();
        assert_eq!(Operation::from_trailers(&held), None, "unknown kind");
        assert_eq!(
            Operation::from_trailers(&pairs("Coord-Task: a\n")),
            None,
            "old commit"
        );
    }

    #[test]
    fn a_grouped_commit_keeps_each_transitions_operation() {
        let t = |id: &str, op: Option<Operation>| Transition {
            subject: id.into(),
            from: crate::model::State::Ready.into(),
            to: crate::model::State::Assigned.into(),
            summary: format!("assign {id}"),
            ops: Vec::new(),
            guard: Vec::new(),
            op,
        };
        let claim = Operation {
            kind: OpKind::Claim,
            id: Some("0a".into()),
            by: Some("p1".parse().unwrap()),
            pre: None,
        };
        let (a, b) = (t("a", Some(claim)), t("b", None));
        let message = super::super::group_message(&[&a, &b]);
        let read = crate::git::recorded(
            pairs(&message)
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let ops: Vec<_> = read
            .iter()
            .map(|r| (r.subject.as_str(), r.op.as_deref()))
            .collect();
        assert_eq!(ops, [("a", Some("claim")), ("b", None)]);
        assert!(message.contains("Coord-Task: a\nCoord-From: ready\nCoord-To: assigned\nCoord-Op: claim\nCoord-Op-Id: 0a\nCoord-By: p1\n"), "{message}");
    }

    #[test]
    fn every_kind_has_one_name() {
        for (k, n) in KINDS {
            assert_eq!(OpKind::parse(n), Some(k));
            assert_eq!(k.as_str(), n);
        }
    }
}
