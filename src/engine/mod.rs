//! The pure planner: `plan(board, config, now)` decides every transition of one tick from an
//! immutable snapshot and returns them as data. It never touches disk, git or the clock; the
//! store carries a plan out and git records it. Commands that change one task (claim, approve,
//! cancel, ...) build their single transition here too.

mod adopt;
pub mod archive;
mod assign;
pub mod clock;
pub mod commands;
mod complete;
pub mod copies;
mod deps;
pub(crate) mod handoff;
mod intake;
pub mod operation;
pub mod retry;
pub mod schedule;
pub mod sighting;
mod waits;
mod world;

use crate::board::Board;
use crate::config::Config;
use crate::model::{Endpoint, TaskId};
use jiff::Timestamp;
use std::fmt;

pub use clock::Clock;
pub use operation::{OpKind, Operation};
#[cfg(test)]
pub use world::NoHistory;
pub use world::{AcceptAll, AttemptFloor, Rejection, Signer, Verifier};

/// One file-system step of a transition. Paths are repo-relative.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// Renames a file; never replaces an existing one.
    Move {
        /// The current path.
        from: String,
        /// The new path.
        to: String,
    },
    /// Creates or atomically replaces a file with this text.
    Write {
        /// The path.
        path: String,
        /// The whole new content.
        text: String,
    },
    /// Rewrites an existing task or agent file planned from older bytes with `text`, the
    /// coordinator's edit of them. The store writes `text` only while the file's bytes outside
    /// the `coord:` block are still the planned-from ones (`rest`, their content hash);
    /// otherwise, when the edit changes nothing outside `coord:`, it splices the new `coord:`
    /// block into the bytes there now, and else it leaves the file as found and reports it.
    Edit {
        /// The path.
        path: String,
        /// The whole new content, as planned.
        text: String,
        /// [`rest_hash`] of the bytes the edit was planned from.
        rest: u64,
    },
    /// Removes a file.
    Remove {
        /// The path.
        path: String,
    },
}

impl Op {
    /// Returns the paths this op touches.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Op::Move { from, to } => vec![from, to],
            Op::Write { path, .. } | Op::Edit { path, .. } | Op::Remove { path } => vec![path],
        }
    }
}

/// Returns the content hash of a parsed task or profile text without its `coord:` block (the
/// bytes people and agents own), or None when that block cannot be cut out.
pub fn rest_hash(text: &str, doc: &crate::yaml::Doc) -> Option<u64> {
    let rest = crate::yaml::remove_block(text, doc, "coord").ok()?;
    Some(crate::board::content_hash(rest.as_bytes()))
}

/// One state change: one commit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Transition {
    /// The task (or agent, for profile updates) it concerns.
    pub subject: String,
    /// Where it starts: the task's state before, `new` for a created file, `agent` for a
    /// profile.
    pub from: Endpoint,
    /// Where it ends.
    pub to: Endpoint,
    /// One-line summary, without the `coord: ` prefix.
    pub summary: String,
    /// What to do on disk, in order.
    pub ops: Vec<Op>,
    /// Files that must still hold the bytes the plan was made from (path, content hash);
    /// the applier skips the transition when one changed meanwhile.
    #[serde(default)]
    pub guard: Vec<(String, u64)>,
    /// The command this transition carries out and what it acted on (commit trailers that
    /// `coord sync` redoes it by); None for what the tick derives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<Operation>,
}

impl Transition {
    /// Returns the commit message: summary line and trailers.
    pub fn message(&self) -> String {
        let key = self.subject_key();
        let op = self
            .op
            .as_ref()
            .map(Operation::trailers)
            .unwrap_or_default();
        format!(
            "coord: {}\n\n{key}: {}\nCoord-From: {}\nCoord-To: {}\n{op}",
            crate::redact::one_line(&self.summary),
            self.subject,
            self.from,
            self.to
        )
    }

    /// Returns the trailer key naming the subject: `Coord-Agent` for profiles, else
    /// `Coord-Task`.
    pub fn subject_key(&self) -> &'static str {
        if self.from == Endpoint::Agent {
            "Coord-Agent"
        } else {
            "Coord-Task"
        }
    }

    /// Returns every path the transition touches, deduplicated, in order.
    pub fn paths(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in self.ops.iter().flat_map(Op::paths) {
            if !out.iter().any(|q| q == p) {
                out.push(p.to_string());
            }
        }
        out
    }
}

/// Returns the message of one commit that records several transitions: a summary line
/// counting them by kind (or, for one task's transition with agents' profile updates, their
/// summaries), then, per transition and in order, the trailers its own commit would
/// have (with the operation's, if any) and `Coord-Summary` (its summary line), so every transition stays in history.
pub fn group_message(group: &[&Transition]) -> String {
    let mut kinds: Vec<((Endpoint, Endpoint), usize)> = Vec::new();
    for t in group {
        let kind = (t.from, t.to);
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
    }
    let counted: Vec<String> = kinds
        .iter()
        .map(|((from, to), n)| crate::redact::one_line(&format!("{n} {from} -> {to}")))
        .collect();
    let tasks = group.iter().filter(|t| t.from != Endpoint::Agent).count();
    let mut message = match tasks {
        1 => {
            let lines: Vec<&str> = group.iter().map(|t| t.summary.as_str()).collect();
            format!("coord: {}\n\n", crate::redact::one_line(&lines.join("; ")))
        }
        _ => format!(
            "coord: {} transitions ({})\n\n",
            group.len(),
            counted.join(", ")
        ),
    };
    for t in group {
        let op = t.op.as_ref().map(Operation::trailers).unwrap_or_default();
        message.push_str(&format!(
            "{}: {}\nCoord-From: {}\nCoord-To: {}\n{op}Coord-Summary: {}\n",
            t.subject_key(),
            t.subject,
            t.from,
            t.to,
            crate::redact::one_line(&t.summary)
        ));
    }
    message
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} -> {})", self.summary, self.from, self.to)
    }
}

/// Something the planner saw but did not act on; shown by `status`, `doctor` and `tick -v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A ready task no agent can take now, and why.
    Waiting {
        /// The task.
        id: TaskId,
        /// Why it waits.
        reason: String,
    },
    /// A task in an agent's hands or waiting for a person's approval, and what it waits for.
    Held {
        /// The task.
        id: TaskId,
        /// What it waits for and what ends the wait.
        reason: String,
    },
    /// A blocked task and the dependencies and gates it still waits for.
    Blocked {
        /// The task.
        id: TaskId,
        /// Open dependencies.
        open: Vec<TaskId>,
        /// Gates not open yet, in words.
        gates: Vec<String>,
    },
    /// One id in several places: never assigned until a person keeps one copy.
    Duplicate {
        /// The id.
        id: TaskId,
        /// Every copy.
        paths: Vec<String>,
    },
    /// A file that does not read, left where it is.
    Unreadable {
        /// The file.
        path: String,
        /// `path:line:col: message` lines.
        errors: Vec<String>,
    },
    /// A file still being written: not read (or, for a task committed before, left as
    /// committed) until it settles.
    Settling {
        /// The file.
        path: String,
        /// When it settles unless written again (system clock).
        until: Timestamp,
    },
    /// A transition the planner had to skip, and why.
    Skipped {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// The outcome of planning: transitions to apply, in order, and notes.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Transitions in the order they must be applied and committed.
    pub transitions: Vec<Transition>,
    /// What was seen and left alone.
    pub notes: Vec<Note>,
    /// The earliest instant after the planning time that a decision compared against (a
    /// lease's expiry, a backoff's end, a circuit's reopening): planning the same board at any
    /// time before it decides the same. None when no decision waits on the clock.
    pub deadline: Option<Timestamp>,
}

impl Plan {
    /// Returns a plan of one transition.
    pub fn one(t: Transition) -> Plan {
        Plan {
            transitions: vec![t],
            ..Plan::default()
        }
    }

    /// Returns whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.transitions.is_empty()
    }
}

/// Everything the planner needs besides the board.
pub struct Inputs<'a> {
    /// Repo configuration.
    pub config: &'a Config,
    /// The coordinator's clock.
    pub now: Timestamp,
    /// Checks result signatures when the config requires them.
    pub verifier: &'a dyn Verifier,
    /// The highest attempt granted per task before (history), for numbering new attempts.
    pub attempts: &'a dyn AttemptFloor,
    /// When this clone first saw each deadline, for measuring it with its own clock.
    pub sightings: &'a dyn sighting::Sightings,
    /// Answers the gates of waiting tasks that need the repository (refs, merges, paths).
    pub gates: &'a dyn crate::model::gate::GateAnswers,
    /// The epoch of the hub planning (its lease's), recorded in every attempt it starts; None
    /// outside a hub.
    pub epoch: Option<u64>,
}

/// Plans one tick (docs/behaviour.md): adoption of hand moves, intake, completion and timeouts,
/// dependencies, assignment, agent circuit updates.
pub fn plan(board: &Board, inputs: &Inputs<'_>) -> Plan {
    let mut w = world::World::new(board, inputs);
    copies::run(&mut w);
    adopt::run(&mut w);
    intake::run(&mut w);
    complete::run(&mut w);
    deps::run(&mut w);
    assign::run(&mut w);
    waits::run(&mut w);
    w.finish()
}

/// Plans only the adoption of hand moves and the removal of old copies of moved tasks (what
/// `coord doctor --fix` repairs).
pub fn adoption_plan(board: &Board, inputs: &Inputs<'_>) -> Plan {
    let mut w = world::World::new(board, inputs);
    copies::run(&mut w);
    adopt::run(&mut w);
    w.finish()
}

#[cfg(test)]
mod tests;
