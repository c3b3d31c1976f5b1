//! What an agent runner (`coord run`) takes: the agent's assigned tasks without a result, each
//! as the command gets it (`Work`: the task JSON on stdin, its attempt, timeout and lease), and
//! the task a claim granted; with a remote, only assignments the remote has.

use super::{Claimed, Coord, Error, LeaseStatus, LostEvent};
use crate::board::Board;
use crate::engine::commands::known_agent;
use crate::model::time;
use crate::model::{AgentName, AssignMode, State, TaskId};
use crate::store::Store;
use jiff::Timestamp;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// The prefix of the branches a runner with worktrees makes: `coord/<task>-<attempt>`.
pub const BRANCH_PREFIX: &str = "coord/";

/// One task an agent is to work on, as a runner hands it to its command.
#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    /// The task.
    pub id: TaskId,
    /// The attempt granted (to name when reporting).
    pub attempt: u32,
    /// The epoch of the hub that granted it (to name when reporting; none outside a hub).
    pub epoch: Option<u64>,
    /// The task's timeout (at least a second).
    pub timeout: Duration,
    /// What is left of the lease now.
    pub lease_left: Duration,
    /// The task file, repo-relative.
    pub path: String,
    /// The task file, absolute.
    pub file: PathBuf,
    /// The task as the command reads it on stdin: id, agent, attempt, title, description,
    /// input (resolved), previous, timeout, lease_expires_at, file.
    pub json: Value,
    /// The branch the task it was handed off from worked on (that task's `output.branch`,
    /// written by a runner with worktrees): a worktree of this attempt checks it out.
    pub branch: Option<String>,
}

/// Why a task is no longer an attempt's ([`Coord::lost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// No task has the id any more.
    Gone,
    /// A person cancelled it.
    Cancelled,
    /// Another agent holds it.
    OtherAgent,
    /// This attempt is current now.
    OtherAttempt(u32),
    /// It was taken back into this state: its lease ran out, or a person moved it.
    TakenBack(State),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Gone => write!(f, "the task is gone"),
            Lost::Cancelled => write!(f, "the task was cancelled"),
            Lost::OtherAgent => write!(f, "the task was given to another agent"),
            Lost::OtherAttempt(a) => write!(f, "attempt {a} of the task is current now"),
            Lost::TakenBack(state) => write!(
                f,
                "the task was taken back (now {state}): its lease ran out or a person moved it"
            ),
        }
    }
}

/// A claim a runner made whose push did not land, which a push of its own clone may still
/// carry to the remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsettled {
    /// The task claimed.
    pub id: TaskId,
    /// The attempt the claim granted.
    pub attempt: u32,
    /// The commit that made the claim in this clone, when it was read.
    pub commit: Option<String>,
}

impl Coord {
    /// Returns how `agent` takes work (push or pull); an unknown agent is an error.
    pub fn assign_mode(&self, agent: &AgentName) -> Result<AssignMode, Error> {
        let (board, _) = self.read().load()?;
        known_agent(&board, agent)?;
        Ok(board
            .agents
            .get(agent)
            .map_or(AssignMode::Push, |a| a.profile.assign))
    }

    /// Returns `agent`'s assigned, readable tasks that have no result yet, in id order; with
    /// `landed_on` (a remote), only those whose attempt its remote-tracking branch has (as of
    /// the last fetch or accepted push), never an assignment tentative in this clone.
    pub fn work_of(&self, agent: &AgentName, landed_on: Option<&str>) -> Result<Vec<Work>, Error> {
        let (board, _) = self.read().load()?;
        let found = waiting_in_folder(&board, agent, self.now(), self.store());
        match landed_on {
            Some(remote) => landed(self.store(), remote, found),
            None => Ok(found),
        }
    }

    /// Returns whether `commit` (a claim made in this clone whose push did not land) is on
    /// `remote`'s branch as last fetched: another push of this clone carried it there. A
    /// claim of the same task and attempt by the same agent in another clone is not.
    pub fn carried_to(&self, remote: &str, commit: &str) -> Result<bool, Error> {
        let repo = &self.store().repo;
        let branch = repo.head()?.branch.unwrap_or_default();
        let Some(tip) = repo.ref_target(&format!("refs/remotes/{remote}/{branch}"))? else {
            return Ok(false);
        };
        let Ok(oid) = crate::git::Oid::from_str(commit) else {
            return Ok(false);
        };
        Ok(repo.is_ancestor(oid, tip).unwrap_or(false))
    }

    /// Returns why `id` is no longer `agent`'s for `attempt`, as a runner or the MCP server
    /// checks while the attempt runs: cancelled, taken back (its lease ran out, a person moved
    /// it), or another attempt current; None while it is still the attempt's, and also once
    /// the attempt's result was accepted (done, in review).
    pub fn lost(
        &self,
        id: &TaskId,
        agent: &AgentName,
        attempt: u32,
    ) -> Result<Option<Lost>, Error> {
        let (board, _) = self.read().load()?;
        Ok(lost_on(&board, id, agent, attempt))
    }

    /// Returns whether `agent`'s `attempt` still holds task `id`, how and why it lost it
    /// ([`Coord::lost`]), and the lease while it holds it.
    pub fn lease_status(
        &self,
        id: &TaskId,
        agent: &AgentName,
        attempt: u32,
    ) -> Result<LeaseStatus, Error> {
        let (board, _) = self.read().load()?;
        let lost = lost_on(&board, id, agent, attempt);
        let lease = board
            .tasks
            .iter()
            .find(|f| &f.id == id)
            .filter(|_| lost.is_none())
            .and_then(|f| f.read.as_ref().ok()?.coord.lease_expires_at);
        Ok(LeaseStatus {
            id: id.clone(),
            agent: agent.clone(),
            attempt,
            held: lost.is_none(),
            lost: lost.map(LostEvent::of),
            why: lost.map(|l| l.to_string()),
            lease_expires_at: lease,
        })
    }

    /// Claims one task for `agent` as [`Coord::claim`] does and returns it as work; None when
    /// there is nothing to claim. Adds to `unsettled` each claim made on the way whose push
    /// did not land: another push of this clone (a `coord sync`) may have carried it to
    /// `remote` all the same ([`Coord::carried_to`]), and then it is the caller's to run.
    pub fn claim_work(
        &self,
        agent: &AgentName,
        remote: Option<&str>,
        unsettled: &mut Vec<Unsettled>,
    ) -> Result<Option<Work>, Error> {
        let mut tried = Vec::new();
        let claimed = self.claim_noting(agent, remote, &mut tried);
        unsettled.extend(tried.into_iter().map(|(r, commit)| Unsettled {
            id: r.id,
            attempt: r.attempt,
            commit,
        }));
        let id = match claimed? {
            Claimed::Granted(receipt) => receipt.id,
            Claimed::Nothing { .. } => return Ok(None),
        };
        let (board, _) = self.read().load()?;
        let work = waiting_in_folder(&board, agent, self.now(), self.store())
            .into_iter()
            .find(|t| t.id == id);
        work.map(Some).ok_or_else(|| {
            Error::Refused(format!(
                "claimed {id}, but it is not in the folder of {agent} now"
            ))
        })
    }
}

/// Keeps the tasks whose attempt is on `remote`'s tracking branch.
fn landed(store: &Store, remote: &str, found: Vec<Work>) -> Result<Vec<Work>, Error> {
    let branch = store.repo.head()?.branch.unwrap_or_default();
    let Some(tip) = store
        .repo
        .ref_target(&format!("refs/remotes/{remote}/{branch}"))?
    else {
        return Ok(Vec::new());
    };
    let mut kept = Vec::new();
    for t in found {
        let Some(blob) = store.repo.blob_at(tip, &t.path)? else {
            continue;
        };
        let text = store.repo.blob_bytes(blob)?;
        let attempt = crate::yaml::parse_bytes(&text, &crate::yaml::Limits::default())
            .ok()
            .and_then(|d| d.value.pointer("/coord/attempt").and_then(Value::as_u64));
        if attempt == Some(u64::from(t.attempt)) {
            kept.push(t);
        }
    }
    Ok(kept)
}

/// Returns the agent's assigned, readable tasks that have no result yet, in id order.
fn waiting_in_folder(board: &Board, agent: &AgentName, now: Timestamp, store: &Store) -> Vec<Work> {
    board
        .tasks
        .iter()
        .filter(|f| f.folder.state == State::Assigned && f.folder.agent.as_ref() == Some(agent))
        .filter_map(|f| {
            let task = f.read.as_ref().ok()?;
            if task.result.is_some() {
                return None;
            }
            let timeout = task.spec.timeout.unwrap_or(store.config.defaults.timeout);
            let lease_left = task
                .coord
                .lease_expires_at
                .map(|t| t.duration_since(now).as_secs().max(0) as u64)
                .unwrap_or(0);
            let input = task.coord.input.clone().or_else(|| task.spec.input.clone());
            let previous = input.as_ref().and_then(|i| i.get("previous")).cloned();
            Some(Work {
                id: f.id.clone(),
                attempt: task.coord.attempt,
                epoch: task.coord.epoch,
                timeout: Duration::from_secs(timeout.as_secs().max(1) as u64),
                lease_left: Duration::from_secs(lease_left),
                path: f.path.clone(),
                file: store.abs(&f.path),
                json: json!({
                    "id": f.id, "agent": agent, "attempt": task.coord.attempt,
                    "title": task.spec.title, "description": task.spec.description,
                    "input": input, "previous": previous,
                    "timeout": timeout.to_string(), "lease_expires_at": task.coord.lease_expires_at.map(time::format),
                    "file": f.path,
                }),
                branch: task.coord.parent.as_ref().and_then(|p| handed_branch(board, p)),
            })
        })
        .collect()
}

/// Returns the branch the task `parent` recorded in its result (`output.branch`), when it is
/// one of the branches coord's runner makes (`coord/…`).
fn handed_branch(board: &Board, parent: &TaskId) -> Option<String> {
    board.find(parent).iter().find_map(|f| {
        let task = f.read.as_ref().ok()?;
        let output = task.result.as_ref()?.output.as_ref()?;
        let branch = output.get("branch")?.as_str()?;
        branch
            .starts_with(BRANCH_PREFIX)
            .then(|| branch.to_string())
    })
}

/// Returns why `id` on `board` is no longer `agent`'s for `attempt` ([`Coord::lost`]).
fn lost_on(board: &Board, id: &TaskId, agent: &AgentName, attempt: u32) -> Option<Lost> {
    let Some(f) = board.tasks.iter().find(|f| &f.id == id) else {
        return Some(Lost::Gone);
    };
    let current = f.read.as_ref().ok().map(|t| t.coord.attempt);
    match f.folder.state {
        State::Cancelled => Some(Lost::Cancelled),
        State::Done | State::Review | State::Archived => None,
        State::Assigned if f.folder.agent.as_ref() != Some(agent) => Some(Lost::OtherAgent),
        State::Assigned => current.filter(|&a| a != attempt).map(Lost::OtherAttempt),
        other => Some(Lost::TakenBack(other)),
    }
}
