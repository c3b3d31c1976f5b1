//! The agent's operations: `claim` (pull model), `complete` / `fail` (a result stamped with the
//! attempt, for fencing) and `heartbeat` (extend the lease); each here or against a remote.
//! Outcomes that are not failures — nothing to claim, a stale report kept in history — are
//! values.

use super::answer::{Beat, BeatOp, ClaimAnswer, Granted, NothingClaimed, ReportAnswer, ReportOp};
use super::{apply, Coord, Error, Sink, AGENT_WAIT};
use crate::board::Board;
use crate::engine::commands::{self, CommandError, Fence, Outcome, Receipt, Report};
use crate::engine::Signer;
use crate::model::metrics::Metrics;
use crate::model::{AgentName, State, TaskId};
use crate::store::{Origin, Session};
use jiff::Timestamp;
use serde_json::{json, Value};

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// A task was assigned to the agent (and pushed, with a remote).
    Granted(Receipt),
    /// No ready task may go to the agent now.
    Nothing {
        /// The agent.
        agent: AgentName,
        /// Why, when one reason stands out (WIP limit, open circuit, disabled), with a leading
        /// `: `; else empty.
        why: String,
    },
}

impl Claimed {
    /// Returns the answer every front end gives: `claim --json` (with its version), the MCP
    /// tool and the hub's claim route.
    pub fn answer(&self) -> ClaimAnswer {
        match self {
            Claimed::Granted(receipt) => ClaimAnswer::Granted(Granted::of(receipt.clone())),
            Claimed::Nothing { agent, why } => {
                ClaimAnswer::Nothing(NothingClaimed::of(agent.clone(), why))
            }
        }
    }
}

/// The result an agent reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The work is done (`coord complete`).
    Success {
        /// The output document, if any.
        output: Option<Value>,
        /// Agents to hand off to, overriding the task's `next_agent` (several: a fan-out).
        next_agents: Vec<AgentName>,
    },
    /// The work failed (`coord fail`).
    Failure {
        /// What went wrong.
        message: String,
        /// Whether the task may be tried again.
        retryable: bool,
    },
}

impl Verdict {
    /// Returns the operation that reports this verdict.
    pub fn op(&self) -> ReportOp {
        match self {
            Verdict::Success { .. } => ReportOp::Complete,
            Verdict::Failure { .. } => ReportOp::Fail,
        }
    }

    /// Returns the `result:` fields this verdict writes.
    pub fn to_value(&self) -> Value {
        match self {
            Verdict::Success {
                output,
                next_agents,
            } => {
                let mut result = json!({"status": "success"});
                if let Some(output) = output {
                    result["output"] = output.clone();
                }
                match next_agents.as_slice() {
                    [] => {}
                    [one] => result["next_agent"] = json!(one),
                    many => result["next_agent"] = json!(many),
                }
                result
            }
            Verdict::Failure { message, retryable } => json!({
                "status": "failure",
                "error": {"message": message, "retryable": retryable},
            }),
        }
    }
}

/// How a result is written.
#[derive(Debug, Clone, Default)]
pub struct How {
    /// The agent and attempt the reporter worked on (empty for a person at a terminal).
    pub fence: Fence,
    /// Sign the result with the agent's key.
    pub sign: bool,
    /// Overwrite a result already waiting (the old one is kept in `coord.history`).
    pub replace: bool,
    /// The `signature:` the agent made itself (an agent reporting through a hub signs on its
    /// own machine, with the attempt it was granted); checked like any other when the task
    /// is ticked.
    pub signed: Option<Signature>,
    /// What the attempt cost, written as `result.metrics`.
    pub metrics: Option<Metrics>,
}

/// A `signature:` value the reporter made itself, written as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature(pub String);

impl Signer for Signature {
    fn sign(&self, _: &TaskId, _: u32, _: &AgentName, _: &Value) -> Result<String, String> {
        Ok(self.0.clone())
    }
}

impl How {
    /// Returns the `result:` fields `verdict` writes, with the metrics when given.
    pub fn result_of(&self, verdict: &Verdict) -> Value {
        let mut result = verdict.to_value();
        if let Some(m) = &self.metrics {
            result["metrics"] = json!(m);
        }
        result
    }
}

/// What became of a reported result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    /// The result was written, stamped with this attempt of this agent.
    Written {
        /// The agent whose folder the task is in.
        agent: Option<AgentName>,
        /// The attempt.
        attempt: u32,
    },
    /// The reporter named another agent or attempt than the current one: the result was kept
    /// in `coord.history` as a `stale_result`, and this says which attempt is current.
    Stale(CommandError),
    /// On the remote the task had moved on (to `state`): the result was kept in its
    /// `coord.history` as a `stale_result`.
    MovedOn {
        /// The task's state on the remote.
        state: String,
    },
}

impl Reported {
    /// Returns the agent and attempt the result was written for, or the refusal a front end
    /// reports for a result that was not accepted (kept in `coord.history` either way): a
    /// stale attempt, or a task that moved on upstream.
    pub fn accepted(self, id: &TaskId) -> Result<(Option<AgentName>, u32), Error> {
        match self {
            Reported::Written { agent, attempt } => Ok((agent, attempt)),
            Reported::Stale(refused) => Err(Error::Command(refused)),
            Reported::MovedOn { state } => Err(Error::MovedOn {
                id: id.clone(),
                state,
            }),
        }
    }
}

/// Returns whether task `id` on `board` holds `result` as `written` stamped it (its attempt).
fn holds_result(board: &Board, id: &TaskId, result: &Value, written: &Reported) -> bool {
    let Reported::Written { attempt, .. } = written else {
        return false;
    };
    board.find(id).iter().any(|f| {
        let Some(held) = f.read.as_ref().ok().and_then(|t| t.doc.value.get("result")) else {
            return false;
        };
        let same = |(k, v): (&String, &Value)| held.get(k) == Some(v);
        held.get("attempt") == Some(&json!(attempt))
            && result.as_object().is_some_and(|r| r.iter().all(same))
    })
}

/// Returns whether task `id` on `board` holds a result of the agent and attempt `how` names.
fn own_result(board: &Board, id: &TaskId, how: &How) -> bool {
    let (Some(agent), Some(attempt)) = (&how.fence.agent, how.fence.attempt) else {
        return false;
    };
    board.find(id).iter().any(|f| {
        let held = f.read.as_ref().ok().and_then(|t| t.doc.value.get("result"));
        held.is_some_and(|r| r["attempt"] == json!(attempt) && r["agent"] == json!(agent))
    })
}

/// Returns whether the work-relative path `rel` names a file of task `id`.
pub(super) fn is_file_of(rel: &str, id: &TaskId) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.strip_suffix(".yaml")
        .or_else(|| name.strip_suffix(".yml"))
        .is_some_and(|stem| stem == id.as_str())
}

/// Returns "nothing to claim" as an outcome, any other error as it is.
fn nothing_or(e: Error) -> Result<Claimed, Error> {
    match e {
        Error::Command(CommandError::NothingToClaim { agent, why }) => {
            Ok(Claimed::Nothing { agent, why })
        }
        e => Err(e),
    }
}

/// The refusal of a claim withdrawn before it took anything.
fn withdrawn_before(agent: &AgentName) -> Error {
    Error::Command(CommandError::NothingToClaim {
        agent: agent.clone(),
        why: ": the claim was withdrawn before it took anything".into(),
    })
}

impl Coord {
    /// Takes the best ready task for `agent` (pull model), here or on the tip of `remote` (see
    /// [`Coord::remote`]); after a lost race on the remote, the next best.
    pub fn claim(&self, agent: &AgentName, remote: Option<&str>) -> Result<Claimed, Error> {
        self.claim_unless(agent, remote, &|| false)
    }

    /// Claims as [`Coord::claim`] does unless `withdrawn` says the claimer no longer wants
    /// the task (a cancelled request): asked under the lock just before the claim is
    /// committed (then nothing is taken), and again after (then the task is released, see
    /// [`Coord::release`]); either way the answer is [`Claimed::Nothing`], saying so.
    pub fn claim_unless(
        &self,
        agent: &AgentName,
        remote: Option<&str>,
        withdrawn: &dyn Fn() -> bool,
    ) -> Result<Claimed, Error> {
        let claimed = self.claim_checked(agent, remote, withdrawn, &mut Vec::new())?;
        let Claimed::Granted(receipt) = &claimed else {
            return Ok(claimed);
        };
        if !withdrawn() {
            return Ok(claimed);
        }
        let fence = Fence {
            agent: Some(receipt.agent.clone()),
            attempt: Some(receipt.attempt),
            epoch: receipt.epoch,
        };
        self.release(&receipt.id, &fence, remote)?;
        Ok(Claimed::Nothing {
            agent: agent.clone(),
            why: format!(
                ": the claim was withdrawn; task '{}' went back to ready",
                receipt.id
            ),
        })
    }

    /// Gives back the claim `fence` names on task `id` (here or on `remote`): the task goes
    /// back to `ready/` and the attempt does not count.
    pub fn release(&self, id: &TaskId, fence: &Fence, remote: Option<&str>) -> Result<(), Error> {
        let remote = self.remote(remote);
        let mut step = |store: &Session<'_>| -> Result<usize, Error> {
            let (board, _) = store.load()?;
            let plan = commands::release(&board, &self.inputs(store), id, fence)?;
            apply(store, &self.sink, &plan, self.now, Origin::Command)
        };
        self.run_step(remote, &mut step)
    }

    /// Claims as [`Coord::claim`] does, and adds to `unsettled` each claim a try of the step
    /// made here whose push did not land (undone and redone on the newer tip, or left for the
    /// next sync): another push of this clone (a `coord sync`) may have carried it to the
    /// remote all the same, so its claimer is to look for it there.
    pub(crate) fn claim_noting(
        &self,
        agent: &AgentName,
        remote: Option<&str>,
        unsettled: &mut Vec<(Receipt, Option<String>)>,
    ) -> Result<Claimed, Error> {
        self.claim_checked(agent, remote, &|| false, unsettled)
    }

    /// Claims as [`Coord::claim_unless`] does, asking `withdrawn` only before the commit; the
    /// claims of tries that did not land are added to `unsettled`, each with the commit that
    /// made it here.
    fn claim_checked(
        &self,
        agent: &AgentName,
        remote: Option<&str>,
        withdrawn: &dyn Fn() -> bool,
        unsettled: &mut Vec<(Receipt, Option<String>)>,
    ) -> Result<Claimed, Error> {
        let remote = self.remote(remote);
        if remote.is_none() {
            match self.claim_in_scope(agent, withdrawn) {
                Ok(Some(receipt)) => return Ok(Claimed::Granted(receipt)),
                Ok(None) => {}
                Err(e) => return nothing_or(e),
            }
        }
        let mut tries = Vec::new();
        let mut step = |store: &Session<'_>| -> Result<usize, Error> {
            let (claim, ticked) = self.claim_or_tick(store, agent)?;
            if withdrawn() {
                return Err(withdrawn_before(agent));
            }
            let n = apply(store, &self.sink, &claim.plan, self.now, Origin::Command)?;
            let commit = store.repo.head()?.oid.map(|oid| oid.to_string());
            tries.push((claim.receipt, commit));
            Ok(ticked + n)
        };
        let stepped = self.run_step(remote, &mut step);
        let granted = match stepped {
            Ok(()) => tries.pop().map(|(receipt, _)| receipt),
            Err(_) => None,
        };
        unsettled.extend(tries);
        match stepped {
            Err(e) => nothing_or(e),
            Ok(()) => Ok(Claimed::Granted(granted.ok_or_else(|| {
                CommandError::Unsafe("the claim made no commit; run coord claim again".into())
            })?)),
        }
    }

    /// Claims the task `id` for `agent` (a claim of one named task, as HTTP's `claim` action
    /// makes); returns its receipt.
    pub fn claim_id(&self, id: &TaskId, agent: &AgentName) -> Result<Option<Receipt>, Error> {
        let receipt = std::cell::RefCell::new(None);
        self.act(&|board, i| {
            let c = commands::claim_task(board, i, id, agent, self.claim_key())?;
            *receipt.borrow_mut() = Some(c.receipt);
            Ok(c.plan)
        })?;
        Ok(receipt.into_inner())
    }

    /// Plans a claim for `agent` on `store` (locked). With nothing to claim, runs one tick
    /// and plans again when it committed: the agent's own results reported since the last
    /// tick leave its count, and tasks just sent into the inbox become ready, without a
    /// tick of their own in the agent's loop. Returns the claim and the tick's commits.
    fn claim_or_tick(
        &self,
        store: &Session<'_>,
        agent: &AgentName,
    ) -> Result<(commands::Claim, usize), Error> {
        let (board, _) = store.load()?;
        match commands::claim(&board, &self.inputs(store), agent, self.claim_key()) {
            Err(nothing @ CommandError::NothingToClaim { .. }) => {
                drop(board);
                let ticked = self.tick_on(store)?.commits;
                if ticked == 0 {
                    return Err(nothing.into());
                }
                let (board, _) = store.load()?;
                let claim = commands::claim(&board, &self.inputs(store), agent, self.claim_key())?;
                Ok((claim, ticked))
            }
            other => Ok((other?, 0)),
        }
    }

    /// Claims for `agent` reading only `ready/`, the agent's folder and the profiles (the
    /// other folders by name), without recording anyone's changes: done when the plan touches
    /// only files exactly as committed, takes no task with a copy elsewhere and resolves no
    /// expression; None (nothing done, the lock let go) when the claim must go the whole way.
    fn claim_in_scope(
        &self,
        agent: &AgentName,
        withdrawn: &dyn Fn() -> bool,
    ) -> Result<Option<Receipt>, Error> {
        let session = self.lock(AGENT_WAIT)?;
        let mine = format!("assigned/{agent}/");
        let looked = |rel: &str| {
            rel.starts_with("ready/") || rel.starts_with(&mine) || rel.starts_with("agents/")
        };
        let board = session.load_scoped(&looked)?;
        let inputs = self.inputs(&session);
        let Ok(claim) = commands::claim(&board, &inputs, agent, self.claim_key()) else {
            return Ok(None);
        };
        if commands::reads_other_tasks(&board, &claim.receipt.id)
            || !session.plan_stays_in_scope(&board, &claim.plan)?
        {
            return Ok(None);
        }
        if withdrawn() {
            return Err(withdrawn_before(agent));
        }
        self.emit(super::Event::Detail(
            "read ready/, the agent's folder and the profiles only; nothing to record",
        ));
        apply(&session, &self.sink, &claim.plan, self.now, Origin::Command)?;
        if let Some((path, why)) = session.first_skipped() {
            return Err(Error::Unchanged { path, why });
        }
        session.finish()?;
        Ok(Some(claim.receipt))
    }

    /// Writes an agent's result into an assigned task, here or on the tip of `remote` (see
    /// [`Coord::remote`]). A report for an attempt that is not the current one is kept in
    /// the task's history and returned as [`Reported::Stale`].
    pub fn report(
        &self,
        id: &TaskId,
        verdict: &Verdict,
        how: &How,
        remote: Option<&str>,
    ) -> Result<Reported, Error> {
        let remote = self.remote(remote);
        if remote.is_none() {
            if let Some(reported) = self.report_in_scope(id, verdict, how)? {
                return Ok(reported);
            }
        }
        let result = how.result_of(verdict);
        let mut reported = None;
        let mut written = None;
        let mut step = |store: &Session<'_>| -> Result<usize, Error> {
            let (board, _) = store.load()?;
            if let Some(w) = written
                .clone()
                .filter(|w| holds_result(&board, id, &result, w))
            {
                // An earlier try's push did not land, but another push of this clone (a
                // `coord sync`) carried its result there: it stands, it is not redone.
                reported = Some(w);
                return Ok(0);
            }
            if remote.is_some() && !how.replace && own_result(&board, id, how) {
                // The attempt reported itself already (its command ran `coord complete`),
                // and the task may have moved on with that result: nothing to set aside.
                return Err(CommandError::ResultPending(id.clone()).into());
            }
            let inputs = self.inputs(store);
            let done = match commands::report(&board, &inputs, id, self.report_of(&result, how)) {
                // On the remote the task moved on: keep the result in its history.
                Err(CommandError::WrongState { state, .. })
                    if remote.is_some() && state != "assigned" =>
                {
                    let plan = commands::set_aside(&board, &inputs, id, result.clone())?;
                    reported = Some(Reported::MovedOn { state });
                    return apply(store, &self.sink, &plan, self.now, Origin::Command);
                }
                other => other?,
            };
            let (n, outcome) = self.apply_report(store, done)?;
            if matches!(outcome, Reported::Written { .. }) {
                written = Some(outcome.clone());
            }
            reported = Some(outcome);
            Ok(n)
        };
        match (self.run_step(remote, &mut step), remote, written) {
            (Err(e), Some(remote), Some(w)) if e.is_tentative() => {
                return self.settle_report(remote, id, &result, w);
            }
            (stepped, _, _) => stepped?,
        }
        reported.ok_or_else(|| {
            Error::Command(CommandError::Unsafe(
                "the report made no commit; run the command again".into(),
            ))
        })
    }

    /// Settles a result left in this clone because a `coord sync` here committed while its
    /// push ran: a sync now carries it to `remote` (replayed by the sync's rules), and then
    /// the remote says what became of it: accepted, or set aside because the task moved on
    /// there.
    fn settle_report(
        &self,
        remote: &str,
        id: &TaskId,
        result: &Value,
        written: Reported,
    ) -> Result<Reported, Error> {
        self.sync_now(remote)?;
        let (board, _) = self.read().load()?;
        if holds_result(&board, id, result, &written) {
            return Ok(written);
        }
        let state = board.find(id).first().map(|f| f.folder.state.to_string());
        Ok(Reported::MovedOn {
            state: state.unwrap_or_else(|| "gone".into()),
        })
    }

    /// Writes a result reading only the files of task `id` and the profiles (the other task
    /// files by name), without recording anyone's changes: done when the plan touches only
    /// files exactly as committed and the task has no copy elsewhere; None (nothing done,
    /// the lock let go) when the report must go the whole way.
    fn report_in_scope(
        &self,
        id: &TaskId,
        verdict: &Verdict,
        how: &How,
    ) -> Result<Option<Reported>, Error> {
        let session = self.lock(AGENT_WAIT)?;
        let looked = |rel: &str| rel.starts_with("agents/") || is_file_of(rel, id);
        let board = session.load_scoped(&looked)?;
        let result = how.result_of(verdict);
        let report = self.report_of(&result, how);
        let Ok(done) = commands::report(&board, &self.inputs(&session), id, report) else {
            return Ok(None);
        };
        if !session.plan_stays_in_scope(&board, &done.plan)? {
            return Ok(None);
        }
        self.emit(super::Event::Detail(
            "read the task's files and the profiles only; nothing to record",
        ));
        let (_, reported) = self.apply_report(&session, done)?;
        session.finish()?;
        Ok(Some(reported))
    }

    /// Returns the report of `result` as `how` says.
    pub(super) fn report_of<'a>(&'a self, result: &Value, how: &'a How) -> Report<'a> {
        let signer: Option<&dyn Signer> = match &how.signed {
            Some(given) => Some(given as &dyn Signer),
            None => how.sign.then(|| self.keys() as &dyn Signer),
        };
        Report {
            result: result.clone(),
            signer,
            fence: how.fence.clone(),
            replace: how.replace,
        }
    }

    /// Applies a report's plan on `store` (the caller holds the lock); returns the commits
    /// and what became of the result. A stale report's commit is the history entry, so it
    /// is not shown as applied: the refusal says the rest.
    pub(super) fn apply_report(
        &self,
        store: &Session<'_>,
        done: commands::Reported,
    ) -> Result<(usize, Reported), Error> {
        let silent: Sink = Box::new(|_| {});
        let sink = match done.outcome {
            Outcome::Stale(_) => &silent,
            Outcome::Stamped { .. } => &self.sink,
        };
        let n = apply(store, sink, &done.plan, self.now, Origin::Command)?;
        let reported = match done.outcome {
            Outcome::Stamped { agent, attempt } => Reported::Written { agent, attempt },
            Outcome::Stale(refused) => Reported::Stale(refused),
        };
        Ok((n, reported))
    }

    /// Extends the lease of an assigned task, here or on the tip of `remote` (see
    /// [`Coord::remote`]); returns the lease in force afterwards.
    pub fn heartbeat(
        &self,
        id: &TaskId,
        fence: &Fence,
        remote: Option<&str>,
    ) -> Result<Beat, Error> {
        self.extend_lease(id, fence, remote)?;
        let (state, lease) = self.now_in(id)?;
        Ok(Beat {
            op: BeatOp::Heartbeat,
            id: id.clone(),
            state,
            lease_expires_at: lease,
        })
    }

    /// Extends the lease as [`Coord::heartbeat`] does, without reading the task again for
    /// an answer (a runner's heartbeats).
    pub(crate) fn extend_lease(
        &self,
        id: &TaskId,
        fence: &Fence,
        remote: Option<&str>,
    ) -> Result<(), Error> {
        let Some(remote) = self.remote(remote) else {
            return self
                .act(&|b, i| commands::heartbeat(b, i, id, fence))
                .map(drop);
        };
        let mut step = |store: &Session<'_>| -> Result<usize, Error> {
            let (board, _) = store.load()?;
            let plan = commands::heartbeat(&board, &self.inputs(store), id, fence)?;
            apply(store, &self.sink, &plan, self.now, Origin::Command)
        };
        self.run_step(Some(remote), &mut step)
    }

    /// Reports `verdict` as [`Coord::report`] does and answers as every front end does: a
    /// result that was not accepted (a stale attempt, a task that moved on upstream) is an
    /// error.
    pub fn report_answer(
        &self,
        id: &TaskId,
        verdict: &Verdict,
        how: &How,
        remote: Option<&str>,
    ) -> Result<ReportAnswer, Error> {
        let (agent, attempt) = self.report(id, verdict, how, remote)?.accepted(id)?;
        let (state, _) = self.now_in(id)?;
        Ok(ReportAnswer {
            op: verdict.op(),
            id: id.clone(),
            agent,
            state,
            attempt,
            recorded: true,
        })
    }

    /// Returns the state of task `id` (its first copy's) and its lease, as its files read
    /// now (only the task's own files are read), once a move of them under way is over.
    fn now_in(&self, id: &TaskId) -> Result<(State, Option<Timestamp>), Error> {
        let board = self.load_settled(id, &|s| s.load_scoped(&|rel| is_file_of(rel, id)))?;
        let first = board.find(id).into_iter().next();
        let file = first.ok_or_else(|| CommandError::NotFound(id.clone()))?;
        let lease = file
            .read
            .as_ref()
            .ok()
            .and_then(|t| t.coord.lease_expires_at);
        Ok((file.folder.state, lease))
    }
}
