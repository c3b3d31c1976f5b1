//! Where a runner takes its work and reports it: this clone's repository (each step here, or
//! with `--sync` on the remote's tip, one at a time), or a hub (`coord run --hub URL`: a `coord
//! serve` asked over HTTP, which ticks and pushes itself). One interface, two places; the
//! runner's loop (run/harness.rs) does not know which it has.

use crate::client::{ClientError, Hub};
use crate::model::metrics::Metrics;
use crate::model::{AgentName, AssignMode, TaskId};
use crate::ops::{self, CommandError, Fence, LockError, Opener, Verdict, Work};
use std::sync::{Arc, Mutex};

/// Where a runner takes work and reports.
#[derive(Clone)]
pub enum Place {
    /// This clone's repository; with a remote (`--sync`), each step on its tip.
    Repo {
        /// How each step opens the repository.
        opener: Opener,
        /// The remote of `--sync`, if any.
        remote: Option<Remote>,
    },
    /// A `coord serve` (`--hub`).
    Hub(Hub),
}

/// Why a step at a place failed.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// An operation on the repository failed.
    #[error(transparent)]
    Ops(#[from] ops::Error),
    /// The hub refused, or could not be reached.
    #[error(transparent)]
    Hub(#[from] ClientError),
}

impl PlaceError {
    /// Whether another writer held the place for now (the lock, a busy or unreachable
    /// hub): the step is tried again later, nothing is lost.
    pub fn busy(&self) -> bool {
        match self {
            PlaceError::Ops(e) => matches!(e, ops::Error::Lock(LockError::Held { .. })),
            PlaceError::Hub(e) => {
                matches!(e, ClientError::Unreachable { .. }) || e.code() == Some("locked")
            }
        }
    }

    /// Whether the step was made here but not yet on the remote (see
    /// [`ops::Error::is_tentative`]).
    pub fn is_tentative(&self) -> bool {
        matches!(self, PlaceError::Ops(e) if e.is_tentative())
    }

    /// Whether the refusal is of this command kind (`result_pending`, `being_written`).
    pub fn is(&self, code: &str) -> bool {
        match self {
            PlaceError::Ops(ops::Error::Command(c)) => matches!(
                (c, code),
                (CommandError::ResultPending(_), "result_pending")
                    | (CommandError::BeingWritten(_), "being_written")
            ),
            PlaceError::Ops(_) => false,
            PlaceError::Hub(e) => e.code() == Some(code),
        }
    }
}

/// The remote of `--sync`, and the gate that keeps this runner's sync steps (ticks, claims,
/// results, heartbeats from several threads) one at a time.
#[derive(Clone)]
pub struct Remote {
    /// The remote's name.
    pub name: String,
    gate: Arc<Mutex<()>>,
}

impl Remote {
    /// Returns the remote `name`, with a gate of its own.
    pub fn new(name: String) -> Remote {
        Remote {
            name,
            gate: Arc::new(Mutex::new(())),
        }
    }

    /// Runs `f` with the remote's name while no other sync step of this runner runs.
    fn one_at_a_time<T>(&self, f: impl FnOnce(String) -> T) -> T {
        let _turn = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        f(self.name.clone())
    }
}

impl Place {
    /// Opens the local repository (for worktrees); a hub has none here.
    pub fn open(&self) -> Result<ops::Coord, PlaceError> {
        match self {
            Place::Repo { opener, .. } => Ok(opener.open()?),
            Place::Hub(hub) => Err(ops::Error::Refused(format!(
                "working through the hub at {}, this runner has no repository of its own",
                hub.url()
            ))
            .into()),
        }
    }

    /// Returns the remote of `--sync`, if any.
    pub fn remote(&self) -> Option<&Remote> {
        match self {
            Place::Repo { remote, .. } => remote.as_ref(),
            Place::Hub(_) => None,
        }
    }

    /// Returns whether `agent` takes work with `claim` (pull) rather than being assigned it.
    pub fn pulls(&self, agent: &AgentName) -> Result<bool, PlaceError> {
        match self {
            Place::Repo { opener, .. } => {
                Ok(opener.open()?.assign_mode(agent)? == AssignMode::Pull)
            }
            Place::Hub(hub) => Ok(hub.pulls(agent)?),
        }
    }

    /// One tick, as `coord tick` (or with `--sync`, `coord sync`) makes it; a hub ticks
    /// itself (`coord serve --tick`), and a claim there ticks when it finds nothing.
    pub fn tick(&self) -> Result<(), PlaceError> {
        let Place::Repo { opener, remote } = self else {
            return Ok(());
        };
        match remote {
            Some(remote) => opener
                .open()
                .and_then(|coord| remote.one_at_a_time(|name| coord.tick_remote(&name).map(drop))),
            None => opener
                .open_with(ops::Options {
                    wait: opener.options.wait.or(Some(ops::TICK_WAIT)),
                    ..opener.options.clone()
                })
                .and_then(|coord| coord.tick().map(drop)),
        }
        .map_err(PlaceError::from)
    }

    /// Returns `agent`'s assigned tasks without a result (with a remote, only those the
    /// remote has).
    pub fn work_of(&self, agent: &AgentName) -> Result<Vec<Work>, PlaceError> {
        match self {
            Place::Repo { opener, remote } => {
                let landed_on = remote.as_ref().map(|r| r.name.as_str());
                Ok(opener.open()?.work_of(agent, landed_on)?)
            }
            Place::Hub(hub) => Ok(hub.work_waiting(agent)?),
        }
    }

    /// Claims one task for `agent`; None when there is nothing to claim. With `--sync`, the
    /// (task, attempt) of each claim made on the way whose push did not land is added to
    /// `unsettled`: a `coord sync` of this clone may carry it to the remote all the same.
    pub fn claim_work(
        &self,
        agent: &AgentName,
        unsettled: &mut Vec<ops::Unsettled>,
    ) -> Result<Option<Work>, PlaceError> {
        match self {
            Place::Repo { opener, remote } => on_repo(opener, remote, |coord, remote| {
                coord.claim_work(agent, remote, unsettled)
            }),
            Place::Hub(hub) => Ok(hub.claim_work(agent)?),
        }
    }

    /// Writes the result of the attempt `fence` names, as `coord complete`/`fail` do: a
    /// report for an attempt that is no longer current is kept in history and refused.
    /// `metrics` is what the attempt cost, written as `result.metrics`.
    pub fn report(
        &self,
        id: &TaskId,
        verdict: &Verdict,
        fence: &Fence,
        metrics: Option<Metrics>,
    ) -> Result<(), PlaceError> {
        let how = ops::How {
            fence: fence.clone(),
            metrics,
            ..ops::How::default()
        };
        match self {
            Place::Repo { opener, remote } => on_repo(opener, remote, |coord, remote| {
                coord
                    .report(id, verdict, &how, remote)?
                    .accepted(id)
                    .map(drop)
            }),
            Place::Hub(hub) => hub.report(id, verdict, &how).map(drop).map_err(Into::into),
        }
    }

    /// Extends the lease as `coord heartbeat --agent --attempt` does.
    pub fn heartbeat(&self, id: &TaskId, fence: &Fence) -> Result<(), PlaceError> {
        match self {
            Place::Repo { opener, remote } => on_repo(opener, remote, |coord, remote| {
                coord.extend_lease(id, fence, remote)
            }),
            Place::Hub(hub) => hub.heartbeat(id, fence).map(drop).map_err(Into::into),
        }
    }

    /// Returns why `id` is no longer `agent`'s `attempt`, when it is not; a check that cannot
    /// be made says nothing.
    pub fn lost(&self, id: &TaskId, agent: &AgentName, attempt: u32) -> Option<String> {
        match self {
            Place::Repo { opener, .. } => {
                let lost = opener.open().ok()?.lost(id, agent, attempt).ok()??;
                Some(lost.to_string())
            }
            Place::Hub(hub) => hub.lost(id, agent, attempt).ok()?,
        }
    }
}

/// Runs an operation on the repository at the time of the call: here, or on the remote's tip
/// and pushed with `--sync`.
fn on_repo<T>(
    opener: &Opener,
    remote: &Option<Remote>,
    op: impl FnOnce(&ops::Coord, Option<&str>) -> Result<T, ops::Error>,
) -> Result<T, PlaceError> {
    let coord = opener.open()?;
    Ok(match remote {
        Some(remote) => remote.one_at_a_time(|name| op(&coord, Some(&name))),
        None => op(&coord, None),
    }?)
}
