//! An in-memory board for planner tests: files keyed by their path under `work/`, a clock, and
//! `tick` = build the board, plan, apply the ops to the map. Moves that would replace a file or
//! whose source is missing fail the test. No disk, no git.

use crate::board::{content_hash, Board, RawFile, Settling, StandIn};
use crate::check::{self, TaskDoc};
use crate::config::Config;
use crate::engine::commands::{self, CommandError, Fence, Report};
use crate::engine::{self, AcceptAll, Inputs, NoHistory, Op, Plan};
use crate::model::{AgentName, CoordBlock, TaskId};
use crate::schema::Schema;
use crate::yaml::Limits;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The start of every simulated clock.
pub const T0: &str = "2026-11-22T10:00:00Z";

/// Returns a task id.
pub fn tid(s: &str) -> TaskId {
    TaskId::new(s).expect("valid task id")
}

/// Returns an agent name.
pub fn agent(s: &str) -> AgentName {
    AgentName::new(s).expect("valid agent name")
}

/// Returns `T0` plus `secs` seconds.
pub fn at(secs: i64) -> Timestamp {
    T0.parse::<Timestamp>().expect("time") + SignedDuration::from_secs(secs)
}

/// A simulated `work/` folder.
#[derive(Clone)]
pub struct Sim {
    /// Files by path under `work/` (`ready/a.yaml`).
    pub files: BTreeMap<String, Vec<u8>>,
    /// Agent folders under `assigned/` that exist even when empty.
    pub agent_dirs: BTreeSet<String>,
    /// The repo configuration.
    pub config: Config,
    /// The clock.
    pub now: Timestamp,
    /// Files (paths under `work/`) still being written: a new inbox file is not on the board
    /// yet, any other stays there frozen, as the store loads them.
    pub settling: BTreeSet<String>,
    /// The epoch of the hub planning, as a hub's inputs give it (None: no hub).
    pub epoch: Option<u64>,
}

impl Default for Sim {
    fn default() -> Self {
        Sim::new()
    }
}

impl Sim {
    /// Returns an empty board at `T0` with the default config.
    pub fn new() -> Sim {
        Sim {
            files: BTreeMap::new(),
            agent_dirs: BTreeSet::new(),
            config: Config::default(),
            now: at(0),
            settling: BTreeSet::new(),
            epoch: None,
        }
    }

    /// Builds the board as a store would load it now.
    pub fn board(&self) -> Board {
        let raw = self
            .files
            .iter()
            .filter(|(rel, _)| !(self.settling.contains(*rel) && rel.starts_with("inbox/")))
            .map(|(rel, bytes)| RawFile {
                stand_in: self
                    .settling
                    .contains(rel)
                    .then(|| StandIn::Settling(content_hash(bytes))),
                ..RawFile::new(rel.clone(), Ok(bytes.clone()))
            })
            .collect();
        let dirs = self.agent_dirs.iter().map(|a| agent(a)).collect();
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        let mut board = Board::build("work", raw, dirs, (&t, &a), &Limits::default());
        board.settling = self
            .settling
            .iter()
            .filter(|rel| self.files.contains_key(*rel))
            .map(|rel| Settling {
                path: format!("work/{rel}"),
                id: rel
                    .rsplit('/')
                    .next()
                    .and_then(|n| n.strip_suffix(".yaml"))
                    .and_then(|s| TaskId::new(s).ok()),
                until: self.now + SignedDuration::from_secs(2),
            })
            .collect();
        board
    }

    /// Sets the clock to `now`, plans a tick and applies it; returns the plan.
    pub fn tick(&mut self, now: Timestamp) -> Plan {
        self.now = now;
        let board = self.board();
        let plan = self.plan_board(&board, now);
        self.apply(&plan);
        plan
    }

    /// Plans a tick of the current files at `now`, changing nothing.
    pub fn plan_at(&self, now: Timestamp) -> Plan {
        self.plan_board(&self.board(), now)
    }

    /// Plans a tick of `board` at `now`.
    pub fn plan_board(&self, board: &Board, now: Timestamp) -> Plan {
        let inputs = Inputs {
            config: &self.config,
            now,
            verifier: &AcceptAll,
            attempts: &NoHistory,
            sightings: &crate::engine::sighting::NoSightings,
            gates: &NoGates,
            epoch: self.epoch,
        };
        engine::plan(board, &inputs)
    }

    /// Applies every op of a plan, failing the test on a bad move.
    pub fn apply(&mut self, plan: &Plan) {
        for t in &plan.transitions {
            for op in &t.ops {
                self.apply_op(op, &t.summary);
            }
        }
    }

    fn apply_op(&mut self, op: &Op, why: &str) {
        match op {
            Op::Move { from, to } => {
                let (from, to) = (rel(from), rel(to));
                assert!(
                    !self.files.contains_key(to),
                    "{why}: move {from} onto existing {to}"
                );
                let bytes = self
                    .files
                    .remove(from)
                    .unwrap_or_else(|| panic!("{why}: move from missing {from}"));
                self.files.insert(to.to_string(), bytes);
            }
            Op::Write { path, text } | Op::Edit { path, text, .. } => {
                self.files
                    .insert(rel(path).to_string(), text.as_bytes().to_vec());
            }
            Op::Remove { path } => {
                assert!(
                    self.files.remove(rel(path)).is_some(),
                    "{why}: remove missing {path}"
                );
            }
        }
    }

    /// Runs a single-task command against the current board at the current time and applies
    /// its plan.
    pub fn command<T>(
        &mut self,
        f: impl FnOnce(&Board, &Inputs<'_>) -> Result<T, CommandError>,
    ) -> Result<T, CommandError>
    where
        T: HasPlan,
    {
        let board = self.board();
        let inputs = Inputs {
            config: &self.config,
            now: self.now,
            verifier: &AcceptAll,
            attempts: &NoHistory,
            sightings: &crate::engine::sighting::NoSightings,
            gates: &NoGates,
            epoch: self.epoch,
        };
        let out = f(&board, &inputs)?;
        self.apply(out.plan());
        Ok(out)
    }

    /// Drops a task file into `inbox/`.
    pub fn drop_task(&mut self, id: &str, yaml: &str) {
        self.files
            .insert(format!("inbox/{id}.yaml"), yaml.as_bytes().to_vec());
    }

    /// Writes a file under `work/` (a path like `done/d.yaml`) with `text`.
    pub fn put(&mut self, path: &str, text: &str) {
        self.files
            .insert(path.to_string(), text.as_bytes().to_vec());
    }

    /// Writes an agent profile.
    pub fn add_agent(&mut self, name: &str, yaml: &str) {
        self.files
            .insert(format!("agents/{name}.yaml"), yaml.as_bytes().to_vec());
    }

    /// Moves a file by hand (paths under `work/`); panics when the move is impossible.
    pub fn hand_move(&mut self, from: &str, to: &str) {
        assert!(!self.files.contains_key(to), "hand move onto existing {to}");
        let bytes = self
            .files
            .remove(from)
            .unwrap_or_else(|| panic!("no file {from}"));
        self.files.insert(to.to_string(), bytes);
    }

    /// Reports a result the way `coord complete` / `coord fail` do (stamped with the attempt).
    pub fn report(&mut self, id: &str, result: Value) {
        self.try_report(id, result).expect("report");
    }

    /// Reports a result as the task's holder does (naming its agent and attempt, as
    /// `coord run` passes them); returns the command's refusal instead of failing.
    pub fn try_report(&mut self, id: &str, result: Value) -> Result<Plan, CommandError> {
        let id = tid(id);
        let fence = self.holder(&id);
        let report = Report {
            fence,
            ..Report::new(result)
        };
        self.command(|b, i| commands::report(b, i, &id, report))
            .map(|r| r.plan)
    }

    /// Returns the agent and attempt of the assigned copy of `id`, or no names when none is.
    fn holder(&self, id: &TaskId) -> Fence {
        let board = self.board();
        let held = board.find(id).into_iter().find_map(|t| {
            let task = t.read.as_ref().ok()?;
            Some(Fence {
                agent: Some(t.folder.agent.clone()?),
                attempt: Some(task.coord.attempt),
                epoch: task.coord.epoch,
            })
        });
        held.unwrap_or_default()
    }

    /// Writes a `result:` block by hand, right before the `coord:` line.
    pub fn write_result_raw(&mut self, id: &str, block: &str) {
        let path = self.path_of(id);
        let text = self.text(&path);
        let at = text.find("\ncoord:").map_or(text.len(), |i| i + 1);
        let new = format!("{}{}{}", &text[..at], block, &text[at..]);
        self.files.insert(path, new.into_bytes());
    }

    /// Returns every path under `work/` of task files with this id.
    pub fn paths_of(&self, id: &str) -> Vec<String> {
        self.files
            .keys()
            .filter(|p| !p.starts_with("agents/"))
            .filter(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                name.strip_suffix(".yaml")
                    .or_else(|| name.strip_suffix(".yml"))
                    == Some(id)
            })
            .cloned()
            .collect()
    }

    /// Returns the one path of a task, failing when there is none or several.
    pub fn path_of(&self, id: &str) -> String {
        let paths = self.paths_of(id);
        assert_eq!(paths.len(), 1, "task {id} at {paths:?}");
        paths[0].clone()
    }

    /// Returns a file's text.
    pub fn text(&self, path: &str) -> String {
        let b = self
            .files
            .get(path)
            .unwrap_or_else(|| panic!("no file {path}"));
        String::from_utf8(b.clone()).expect("utf-8")
    }

    /// Returns a task parsed the way the planner re-reads it.
    pub fn task(&self, id: &str) -> TaskDoc {
        check::reread(&self.text(&self.path_of(id))).expect("task reads")
    }

    /// Returns a task's `coord:` block.
    pub fn coord(&self, id: &str) -> CoordBlock {
        self.task(id).coord
    }

    /// Returns the ids of the task files in one folder, sorted.
    pub fn ids_in(&self, folder: &str) -> Vec<String> {
        self.files
            .keys()
            .filter_map(|p| {
                let (dir, name) = p.rsplit_once('/')?;
                (dir == folder).then_some(name.strip_suffix(".yaml")?.to_string())
            })
            .collect()
    }
}

/// A command's outcome that carries a plan.
pub trait HasPlan {
    /// Returns the plan.
    fn plan(&self) -> &Plan;
}

impl HasPlan for Plan {
    fn plan(&self) -> &Plan {
        self
    }
}

impl HasPlan for commands::Claim {
    fn plan(&self) -> &Plan {
        &self.plan
    }
}

impl HasPlan for commands::Reported {
    fn plan(&self) -> &Plan {
        &self.plan
    }
}

/// Returns the path under `work/` of a repo-relative path.
pub fn rel(path: &str) -> &str {
    path.strip_prefix("work/")
        .unwrap_or_else(|| panic!("{path} is outside work/"))
}

/// Returns the summaries of a plan's transitions.
pub fn summaries(plan: &Plan) -> Vec<String> {
    plan.transitions.iter().map(|t| t.summary.clone()).collect()
}

/// Answers no repository gate (the engine's tests have no repository).
pub(super) struct NoGates;

impl crate::model::gate::GateAnswers for NoGates {
    fn open(&self, _: &crate::model::gate::Gate, _: jiff::Timestamp) -> Option<bool> {
        None
    }
}
