//! Single-task commands as plans: claim, approve, reject, cancel, retry, reassign, heartbeat, and the
//! result an agent reports with complete / fail. Each checks the task's state and returns the
//! transitions to apply, or why it cannot. Pure.

use super::assign::{assign, backoff_wait, give, pick, queue, start_attempt};
use super::complete::finish_success;
use super::operation::{stamp, OpKind};
use super::world::{Entry, ResultEdit, World};
use super::{deps, Inputs, Op, Plan, Signer, Transition};
use crate::board::{Board, TaskFile};
use crate::model::time::whole_second;
use crate::model::HistoryEntry;
use crate::model::{AgentName, ErrorCode, ErrorInfo, Folder, NextAgent, Review, State, TaskId};
use jiff::Timestamp;
use serde_json::{json, Value};
use std::borrow::Cow;

/// Why a command cannot act.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// No task has that id.
    #[error("no task '{0}' under work/; 'coord status' lists the tasks")]
    NotFound(TaskId),
    /// The id is in several places.
    #[error("task '{0}' exists in several places; run 'coord doctor' to see which copy to keep")]
    Duplicate(TaskId),
    /// The task is in a state the command does not apply to.
    #[error("task '{id}' is {state}; {hint}")]
    WrongState {
        /// The task.
        id: TaskId,
        /// Its state (folder).
        state: String,
        /// What the command needs.
        hint: String,
    },
    /// No agent has that name.
    #[error("unknown agent '{agent}' (known: {known}); add it with 'coord agents add {agent}'")]
    UnknownAgent {
        /// The name given.
        agent: AgentName,
        /// The agents that exist, comma-separated.
        known: String,
    },
    /// The task file does not read.
    #[error("task '{0}' does not read; 'coord validate' shows why")]
    Unreadable(TaskId),
    /// Nothing for the agent to claim.
    #[error("nothing to claim for agent {agent}{why}")]
    NothingToClaim {
        /// The agent.
        agent: AgentName,
        /// Why, when known.
        why: String,
    },
    /// The result could not be signed.
    #[error("cannot sign the result: {0}")]
    Sign(String),
    /// The file could not be edited safely.
    #[error("{0}")]
    Unsafe(String),
    /// The agent or attempt named is not the task's current one (a zombie agent).
    #[error("{0}")]
    Stale(String),
    /// The task's file is being written (it changed within `settle`): an edit planned now
    /// would be left out when applied.
    #[error("task '{0}' is being written (its file changed within `settle`, coord.yaml); run the command again once it has settled")]
    BeingWritten(TaskId),
    /// A report naming no agent or attempt for a task that was handed on since its first
    /// attempt: it may be a late one of an earlier attempt.
    #[error("task '{id}' is attempt {attempt} of {agent}: it was handed on since its first attempt, so a result naming no attempt may be a late one; name yours with --agent {agent} --attempt {attempt} (or COORD_AGENT / COORD_ATTEMPT, which 'coord run' sets)")]
    Unfenced {
        /// The task.
        id: TaskId,
        /// Its current attempt.
        attempt: u32,
        /// The agent holding it.
        agent: AgentName,
    },
    /// A report, heartbeat or release naming an agent or attempt but no epoch, for an attempt
    /// a hub granted: after a failover it may be for an older hub's grant of the same attempt.
    #[error("task '{id}' is an attempt a hub granted (epoch {epoch}): a report naming no epoch may be for an older hub's grant; name the epoch your claim printed with --epoch (or COORD_EPOCH, which 'coord run' sets)")]
    NoEpoch {
        /// The task.
        id: TaskId,
        /// The epoch of the hub that granted its current attempt.
        epoch: u64,
    },
    /// An unsigned report in a repository that requires signed results: the tick would fail
    /// the task with `bad_signature`.
    #[error("this repository requires signed results (require_signed_results in coord.yaml): pass --sign with {var} set or {agent}'s key file ('coord keygen {agent}' makes one); an unsigned result would fail the task with bad_signature")]
    Unsigned {
        /// The agent whose key signs.
        agent: AgentName,
        /// The environment variable of its key.
        var: String,
    },
    /// The task already holds a result that has not been acted on yet.
    #[error("task '{0}' already has a result waiting for the next tick; it is left as it is")]
    ResultPending(TaskId),
}

/// Returns an error naming the known agents unless `agent` has a profile or a folder.
pub fn known_agent(board: &Board, agent: &AgentName) -> Result<(), CommandError> {
    if board.agents.contains_key(agent) {
        return Ok(());
    }
    let names: Vec<&str> = board.agents.keys().map(|a| a.as_str()).collect();
    Err(CommandError::UnknownAgent {
        agent: agent.clone(),
        known: if names.is_empty() {
            "none yet".to_string()
        } else {
            names.join(", ")
        },
    })
}

/// Returns the world of a command on task `id`, which must be in one place.
fn world_of<'a>(
    board: &'a Board,
    inputs: &Inputs<'a>,
    id: &TaskId,
) -> Result<World<'a>, CommandError> {
    let copies = board.find(id);
    if copies.is_empty() {
        return Err(CommandError::NotFound(id.clone()));
    }
    let live: Vec<&TaskFile> = copies
        .into_iter()
        .filter(|t| t.folder.state != State::Invalid)
        .collect();
    // Old copies an editor saved after a move do not stop the task's own commands.
    if live.len() > 1 && super::copies::moved(&live).is_none() {
        return Err(CommandError::Duplicate(id.clone()));
    }
    Ok(World::new(board, inputs))
}

/// Returns the world of a command that edits task `id`: refused while its file is being
/// written (it is left as last committed until it settles: an edit planned now would be
/// left out when applied).
fn world<'a>(
    board: &'a Board,
    inputs: &Inputs<'a>,
    id: &TaskId,
) -> Result<World<'a>, CommandError> {
    let w = world_of(board, inputs, id)?;
    if w.is_frozen(id) {
        return Err(CommandError::BeingWritten(id.clone()));
    }
    Ok(w)
}

fn state_of(w: &World<'_>, id: &TaskId) -> Result<State, CommandError> {
    match w.entry(id) {
        Some(e) => Ok(e.folder.state),
        None if w
            .board
            .find(id)
            .iter()
            .any(|f| f.folder.state == State::Invalid) =>
        {
            Ok(State::Invalid)
        }
        None => Err(CommandError::Unreadable(id.clone())),
    }
}

fn wrong(id: &TaskId, state: State, hint: &str) -> CommandError {
    CommandError::WrongState {
        id: id.clone(),
        state: state.to_string(),
        hint: hint.to_string(),
    }
}

/// Returns task `id`'s entry when it is in `state`; else `WrongState` with `hint`.
fn entry_in(w: &World<'_>, id: &TaskId, state: State, hint: &str) -> Result<Entry, CommandError> {
    let found = state_of(w, id)?;
    if found != state {
        return Err(wrong(id, found, hint));
    }
    w.entry(id)
        .map(Cow::into_owned)
        .ok_or_else(|| CommandError::Unreadable(id.clone()))
}

fn done(w: World<'_>) -> Result<Plan, CommandError> {
    let plan = w.finish();
    if let Some(super::Note::Skipped { message, .. }) = plan
        .notes
        .iter()
        .find(|n| matches!(n, super::Note::Skipped { .. }))
    {
        return Err(CommandError::Unsafe(message.clone()));
    }
    Ok(plan)
}

/// What an agent needs to know about the task it claimed: the fence it must name when it
/// reports (`--agent`, `--attempt`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Receipt {
    /// The task.
    pub id: TaskId,
    /// The agent it was given to.
    pub agent: AgentName,
    /// The attempt granted.
    #[schemars(range(min = 1))]
    pub attempt: u32,
    /// The epoch of the hub that granted it, to name when reporting (absent outside a hub).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// When the lease runs out unless extended with `coord heartbeat`.
    #[serde(with = "crate::model::time::recorded")]
    #[schemars(schema_with = "crate::model::time::recorded_schema")]
    pub lease_expires_at: Option<Timestamp>,
    /// The task file's repo-relative path.
    pub path: String,
}

/// A claim: the transition that assigns the task, and its receipt.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The assignment.
    pub plan: Plan,
    /// What the agent was granted.
    pub receipt: Receipt,
}

/// Takes the best ready task `agent` may have (pull model). With `key` (the digest of the
/// claim's idempotency key) the grant records it, and a task already granted under it to
/// `agent` is answered again instead ([`granted_under`]).
pub fn claim(
    board: &Board,
    inputs: &Inputs<'_>,
    agent: &AgentName,
    key: Option<&str>,
) -> Result<Claim, CommandError> {
    if let Some(again) = key.and_then(|k| granted_under(board, agent, k)) {
        return Ok(again);
    }
    known_agent(board, agent)?;
    let mut w = World::new(board, inputs);
    w.claim_key = key.map(str::to_string);
    let mut why = Vec::new();
    for id in queue(&w) {
        if backoff_wait(&w, &id).is_some() {
            continue;
        }
        match pick(&w, &id, Some(agent)) {
            Ok(a) => return take(w, board, id, &a),
            Err(r) if r.keeps_agent_out() => why.push(r.to_string()),
            Err(_) => {}
        }
    }
    why.dedup();
    Err(CommandError::NothingToClaim {
        agent: agent.clone(),
        why: why.first().map(|r| format!(": {r}")).unwrap_or_default(),
    })
}

/// Returns whether assigning task `id` reads other tasks: it depends on some (each must still
/// be done), its input holds expressions (or cannot be told not to), which resolve from its
/// dependencies' results, or its file does not read. A claim planned on a load that left other folders unread must not rely on it.
pub fn reads_other_tasks(board: &Board, id: &TaskId) -> bool {
    board.find(id).iter().any(|f| match &f.read {
        Ok(task) => {
            !task.spec.depends_on.is_empty()
                || task.spec.input.as_ref().is_some_and(|input| {
                    crate::expr::collect(input).map_or(true, |e| !e.is_empty())
                })
        }
        Err(_) => true,
    })
}

/// Takes task `id` for `agent` (pull model, one named task): refused with `WrongState` unless
/// the task is ready, and with `NothingToClaim` when the agent may not have it now (limit,
/// circuit, capabilities, backoff). With `key`, as [`claim`]: a grant of `id` to `agent`
/// under it is answered again.
pub fn claim_task(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    agent: &AgentName,
    key: Option<&str>,
) -> Result<Claim, CommandError> {
    let again = key.and_then(|k| granted_under(board, agent, k));
    if let Some(again) = again.filter(|c| c.receipt.id == *id) {
        return Ok(again);
    }
    known_agent(board, agent)?;
    let mut w = world_of(board, inputs, id)?;
    w.claim_key = key.map(str::to_string);
    let state = state_of(&w, id)?;
    if state != State::Ready {
        return Err(wrong(id, state, "only ready tasks can be claimed"));
    }
    let refuse = |why: String| CommandError::NothingToClaim {
        agent: agent.clone(),
        why: format!(": {why}"),
    };
    if let Some(why) = backoff_wait(&w, id) {
        return Err(refuse(format!("task '{id}' is {why}")));
    }
    if w.is_frozen(id) {
        return Err(refuse(format!(
            "task '{id}' is being written; claim it once its file has settled"
        )));
    }
    if let Some(dep) = super::deps::reopened_dep(&w, id) {
        return Err(refuse(format!(
            "task '{id}' waits: its dependency '{dep}' is not done (moved back out of done/)"
        )));
    }
    let a = pick(&w, id, Some(agent)).map_err(|why| refuse(why.to_string()))?;
    take(w, board, id.clone(), &a)
}

/// Returns the grant a claim of `agent` under `key` (the digest of its idempotency key) made,
/// when its attempt is still open: the task in the agent's folder, assigned to it under that
/// key, without a result. The claim is answered with it again (the same attempt and epoch),
/// planning nothing: its first answer was lost, also when the coordinator that made it
/// stopped since.
pub fn granted_under(board: &Board, agent: &AgentName, key: &str) -> Option<Claim> {
    let mine =
        |f: &&TaskFile| f.folder.state == State::Assigned && f.folder.agent.as_ref() == Some(agent);
    board.tasks.iter().filter(mine).find_map(|f| {
        let task = f.read.as_ref().ok()?;
        let c = &task.coord;
        let open = c.assigned_to.as_ref() == Some(agent)
            && c.claim_key.as_deref() == Some(key)
            && task.result.is_none();
        open.then(|| Claim {
            plan: Plan::default(),
            receipt: Receipt {
                id: f.id.clone(),
                agent: agent.clone(),
                attempt: c.attempt,
                epoch: c.epoch,
                lease_expires_at: c.lease_expires_at,
                path: f.path.clone(),
            },
        })
    })
}

/// Assigns `id` to `agent` and returns the plan with its receipt.
fn take(
    mut w: World<'_>,
    board: &Board,
    id: TaskId,
    agent: &AgentName,
) -> Result<Claim, CommandError> {
    assign(&mut w, &id, agent);
    let receipt = w.entry(&id).map(|e| Receipt {
        id: id.clone(),
        agent: agent.clone(),
        attempt: e.task.coord.attempt,
        epoch: e.task.coord.epoch,
        lease_expires_at: e.task.coord.lease_expires_at,
        path: e.path.clone(),
    });
    let plan = stamp(done(w)?, board, OpKind::Claim, Some(agent));
    receipt
        .filter(|r| r.path.contains("/assigned/"))
        .map(|receipt| Claim { plan, receipt })
        .ok_or(CommandError::Unreadable(id))
}

/// Gives back a claim its claimer withdrew before using it: the task, still the attempt
/// `fence` names with no result, goes back to `ready/` without its lease, and that attempt is
/// not counted against `max_attempts` (its number is never given again, so a late report for
/// it stays stale).
pub fn release(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    fence: &Fence,
) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let e = held_entry(&w, id, fence, "nothing to release")?;
    if e.task.doc.value.get("result").is_some() {
        return Err(CommandError::ResultPending(id.clone()));
    }
    let mut c = e.task.coord.clone();
    c.state = Some(State::Ready);
    c.assigned_to = None;
    c.assigned_at = None;
    c.lease_expires_at = None;
    c.input = None;
    c.attempt_base = c.attempt_base.saturating_add(1);
    let summary = format!("release {id}: attempt {} was withdrawn", c.attempt);
    w.transit(id, Folder::of(State::Ready), c, ResultEdit::Keep, summary);
    Ok(stamp(
        done(w)?,
        board,
        OpKind::Release,
        fence.agent.as_ref(),
    ))
}

/// Approves a task in review: before start (ask_me_first) or its result (do_it_and_show_me).
pub fn approve(board: &Board, inputs: &Inputs<'_>, id: &TaskId) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let e = entry_in(
        &w,
        id,
        State::Review,
        "only tasks in review/ can be approved",
    )?;
    if e.task.coord.review == Some(Review::Result) || e.task.result.is_some() {
        finish_success(&mut w, id);
    } else {
        let mut c = e.task.coord.clone();
        c.review = None;
        c.state = Some(State::Blocked);
        let summary = format!("approve {id}");
        w.transit(id, Folder::of(State::Blocked), c, ResultEdit::Keep, summary);
        deps::run(&mut w);
    }
    Ok(stamp(done(w)?, board, OpKind::Approve, None))
}

/// Makes the handoff steps of `id`, a done task, that are missing: a step that exists is found
/// wherever its id ended up ([`super::handoff::create_children`]), a missing one is made at
/// the first free id. For sync, whose replay of an `approve` could not place a step because
/// another clone took its id meanwhile; an empty plan when every step is there.
pub fn hand_off_again(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let e = entry_in(&w, id, State::Done, "only done tasks hand off")?;
    let targets = super::handoff::targets(&w, &e);
    super::handoff::create_children(&mut w, &e, &targets);
    Ok(stamp(done(w)?, board, OpKind::Approve, None))
}

/// Rejects a task in review: it goes to failed/ with the reason.
pub fn reject(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    reason: &str,
) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let state = state_of(&w, id)?;
    if state != State::Review {
        return Err(wrong(id, state, "only tasks in review/ can be rejected"));
    }
    end(
        &mut w,
        id,
        State::Failed,
        ErrorInfo::new(ErrorCode::Rejected, reason, false),
        "reject",
    );
    Ok(stamp(done(w)?, board, OpKind::Reject, None))
}

/// Cancels a task that is not final; blocked dependents fail.
pub fn cancel(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    reason: &str,
) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let state = state_of(&w, id)?;
    if state.is_final() {
        return Err(wrong(
            id,
            state,
            "only tasks that are not final can be cancelled",
        ));
    }
    if state == State::Inbox && w.entry(id).is_none() {
        return Err(CommandError::Unreadable(id.clone()));
    }
    end(
        &mut w,
        id,
        State::Cancelled,
        ErrorInfo::new(ErrorCode::Cancelled, reason, false),
        "cancel",
    );
    Ok(stamp(done(w)?, board, OpKind::Cancel, None))
}

/// Gives task `id` to agent `to`: one no agent holds yet (inbox, ready, blocked) gets `agent:
/// to`, for the tick or a claim to act on; one an agent holds is taken from it
/// ([`take_from_holder`]). Refused for a task in review or finished. An empty plan when `to`
/// has it already.
pub fn reassign(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    to: &AgentName,
) -> Result<Plan, CommandError> {
    known_agent(board, to)?;
    let w = world(board, inputs, id)?;
    match state_of(&w, id)? {
        State::Inbox | State::Ready | State::Blocked => name_agent(&w, id, to),
        State::Assigned => take_from_holder(w, board, id, to),
        s => Err(wrong(
            id,
            s,
            "only a task not in review and not finished can be reassigned (cancel and retry it to send it back to the inbox first)",
        )),
    }
}

/// Sets `agent: to` in a task no agent holds yet.
fn name_agent(w: &World<'_>, id: &TaskId, to: &AgentName) -> Result<Plan, CommandError> {
    let e = w
        .entry(id)
        .ok_or_else(|| CommandError::Unreadable(id.clone()))?;
    if e.task.waiting().agent.as_ref() == Some(to) {
        return Ok(Plan::default());
    }
    let text = agent_named(&e, to)?;
    let state = e.folder.state;
    Ok(Plan::one(Transition {
        subject: id.to_string(),
        from: state.into(),
        to: state.into(),
        summary: format!("reassign {id} to {to}"),
        ops: vec![Op::Write {
            path: e.path.clone(),
            text,
        }],
        guard: vec![(e.path.clone(), e.hash)],
        op: None,
    }))
}

/// Returns the task's text with `agent:` set to `to`.
fn agent_named(e: &Entry, to: &AgentName) -> Result<String, CommandError> {
    crate::yaml::set_block(&e.task.text, &e.task.doc, "agent", &json!(to))
        .map_err(|err| CommandError::Unsafe(format!("cannot edit {}: {err}", e.path)))
}

/// Takes task `id` from the agent holding it and gives it to `to`: the attempt ends as
/// cancelled (recorded in `coord.history`, not counted against `max_attempts`, its number
/// never given again, so the old holder's late report is a `stale_result`), `agent:` names
/// `to`, and `to` starts a new attempt at once when it can take one now; otherwise the task
/// waits in `ready/` for it. Refused while a result is waiting for the tick; an empty plan
/// when `to` holds it already.
fn take_from_holder(
    mut w: World<'_>,
    board: &Board,
    id: &TaskId,
    to: &AgentName,
) -> Result<Plan, CommandError> {
    let e = assigned_entry(&w, id)?;
    if e.task.doc.value.get("result").is_some() {
        return Err(CommandError::ResultPending(id.clone()));
    }
    let from = e.folder.agent.clone();
    if from.as_ref() == Some(to) {
        return Ok(Plan::default());
    }
    let text = agent_named(&e, to)?;
    if !w.rewrite(id, &text) {
        return Err(CommandError::Unsafe(format!("cannot edit {}", e.path)));
    }
    let mut c = e.task.coord.clone();
    let why = format!("reassigned to {to}");
    c.history.push(HistoryEntry::FailedAttempt {
        at: w.now(),
        attempt: c.attempt,
        agent: from.clone(),
        error: ErrorInfo::new(ErrorCode::Cancelled, why, false),
        result: None,
    });
    c.attempt_base = c.attempt_base.saturating_add(1);
    c.state = Some(State::Ready);
    c.assigned_to = None;
    c.assigned_at = None;
    c.lease_expires_at = None;
    c.input = None;
    let held = from.map_or(String::new(), |a| format!(" from {a}"));
    let summary = format!("reassign {id}{held} to {to}");
    let mut started = c.clone();
    let now = pick(&w, id, None).is_ok_and(|a| &a == to)
        && start_attempt(&w, id, to, &mut started).is_ok();
    if now {
        started.state = Some(State::Assigned);
        give(&mut w, id, to, started, ResultEdit::Keep, summary);
    } else {
        w.transit(id, Folder::of(State::Ready), c, ResultEdit::Keep, summary);
    }
    let mut plan = done(w)?;
    // The rewrite above is part of this one transition: it starts from the file as it is
    // and writes the whole text, `agent:` with the `coord:` block.
    if let Some(t) = plan
        .transitions
        .iter_mut()
        .find(|t| t.subject == id.as_str())
    {
        t.guard = vec![(e.path.clone(), e.hash)];
        for op in &mut t.ops {
            if let Op::Edit { path, text, .. } = op {
                let (path, text) = (std::mem::take(path), std::mem::take(text));
                *op = Op::Write { path, text };
            }
        }
    }
    Ok(stamp(plan, board, OpKind::Reassign, None))
}

/// Ends a task by a person's command and fails the blocked tasks that depended on it.
fn end(w: &mut World<'_>, id: &TaskId, to: State, error: ErrorInfo, verb: &str) {
    let Some(c) = w.entry(id).map(|e| e.task.coord.clone()) else {
        return;
    };
    let summary = if error.message.is_empty() {
        format!("{verb} {id}")
    } else {
        format!("{verb} {id}: {}", error.message)
    };
    w.end(id, c, to, error, summary);
    deps::run(w);
}

/// Sends a failed, invalid or cancelled task back to inbox/, its history kept.
pub fn retry(board: &Board, inputs: &Inputs<'_>, id: &TaskId) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let state = state_of(&w, id)?;
    match state {
        State::Invalid => Ok(stamp(retry_invalid(board, id), board, OpKind::Retry, None)),
        State::Failed | State::Cancelled => {
            let Some(e) = w.entry(id) else {
                return Err(CommandError::Unreadable(id.clone()));
            };
            let mut c = e.task.coord.clone();
            c.state = Some(State::Inbox);
            let summary = format!("retry {id}: back to inbox");
            w.transit(id, Folder::of(State::Inbox), c, ResultEdit::Keep, summary);
            Ok(stamp(done(w)?, board, OpKind::Retry, None))
        }
        s => Err(wrong(
            id,
            s,
            "only failed, invalid or cancelled tasks can be retried",
        )),
    }
}

fn retry_invalid(board: &Board, id: &TaskId) -> Plan {
    let mut plan = Plan::default();
    if let Some(f) = board
        .find(id)
        .into_iter()
        .find(|f| f.folder.state == State::Invalid)
    {
        let to = board.path_in(&Folder::of(State::Inbox), f.file_name());
        let mut ops = vec![Op::Move {
            from: f.path.clone(),
            to,
        }];
        let errors = format!("{}.errors", f.path);
        if board.error_files.contains(&errors) {
            ops.push(Op::Remove { path: errors });
        }
        plan.transitions.push(Transition {
            subject: id.to_string(),
            from: State::Invalid.into(),
            to: State::Inbox.into(),
            summary: format!("retry {id}: back to inbox"),
            ops,
            guard: vec![(f.path.clone(), f.hash)],
            op: None,
        });
    }
    plan
}

/// The attempt token a reporter says it worked on: the agent, the attempt and, for an
/// attempt a hub granted, the hub's epoch (`--agent`, `--attempt`, `--epoch`, or
/// `COORD_AGENT` / `COORD_ATTEMPT` / `COORD_EPOCH`). Empty for a person at a terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fence {
    /// The agent.
    pub agent: Option<AgentName>,
    /// The attempt.
    pub attempt: Option<u32>,
    /// The epoch of the hub that granted the attempt.
    pub epoch: Option<u64>,
}

impl Fence {
    /// Returns whether the reporter named anything.
    pub fn is_named(&self) -> bool {
        self.agent.is_some() || self.attempt.is_some() || self.epoch.is_some()
    }

    /// Returns why the fence does not match the task's current attempt, if it does not: the
    /// agent, the attempt or the epoch named is not the current attempt's.
    fn mismatch(&self, e: &Entry) -> Option<String> {
        let c = &e.task.coord;
        let assigned = e.folder.state == State::Assigned;
        let agent_ok = self
            .agent
            .as_ref()
            .is_none_or(|a| assigned && e.folder.agent.as_ref() == Some(a));
        let attempt_ok = self.attempt.is_none_or(|n| assigned && n == c.attempt);
        let epoch_ok = self.epoch.is_none_or(|n| assigned && Some(n) == c.epoch);
        if agent_ok && attempt_ok && epoch_ok {
            return None;
        }
        let named = match (&self.agent, self.attempt) {
            (Some(a), Some(n)) => format!("attempt {n} of {a}"),
            (Some(a), None) => format!("agent {a}"),
            (None, Some(n)) => format!("attempt {n}"),
            (None, None) => "that attempt".to_string(),
        };
        let now = match (&e.folder.agent, assigned) {
            (Some(a), true) => format!("is attempt {} of {a}{}", c.attempt, in_epoch(c.epoch)),
            _ => format!("is {} (last attempt {})", e.folder.state, c.attempt),
        };
        let named = format!("{named}{}", in_epoch(self.epoch));
        Some(format!("task '{}' {now}, not {named}", e.id))
    }

    /// Refuses a fence naming an agent or attempt but no epoch for an attempt a hub granted.
    fn epoch_named(&self, e: &Entry) -> Result<(), CommandError> {
        match e.task.coord.epoch {
            Some(epoch) if self.is_named() && self.epoch.is_none() => Err(CommandError::NoEpoch {
                id: e.id.clone(),
                epoch,
            }),
            _ => Ok(()),
        }
    }
}

/// Returns " granted in epoch N" for an attempt a hub granted, else "".
fn in_epoch(epoch: Option<u64>) -> String {
    epoch.map_or(String::new(), |n| format!(" granted in epoch {n}"))
}

fn fenced_entry(w: &World<'_>, id: &TaskId) -> Result<Entry, CommandError> {
    let state = state_of(w, id)?;
    if matches!(state, State::Invalid | State::Inbox) {
        let hint = "no attempt of it is running; 'coord status' shows it";
        return Err(wrong(id, state, hint));
    }
    w.entry(id)
        .map(Cow::into_owned)
        .ok_or_else(|| CommandError::Unreadable(id.clone()))
}

/// Returns the assigned entry of `id` when `fence` names its current attempt; else refuses as
/// stale, saying why and then `refused`.
fn held_entry(
    w: &World<'_>,
    id: &TaskId,
    fence: &Fence,
    refused: &str,
) -> Result<Entry, CommandError> {
    let e = fenced_entry(w, id)?;
    if let Some(why) = fence.mismatch(&e) {
        return Err(CommandError::Stale(format!("{why}: {refused}")));
    }
    fence.epoch_named(&e)?;
    assigned_entry(w, id)
}

fn assigned_entry(w: &World<'_>, id: &TaskId) -> Result<Entry, CommandError> {
    let e = fenced_entry(w, id)?;
    if e.folder.state != State::Assigned {
        let state = e.folder.state;
        return Err(wrong(id, state, "only assigned tasks take this command"));
    }
    let adopted =
        e.task.coord.state == Some(State::Assigned) && e.task.coord.assigned_to == e.folder.agent;
    if !adopted {
        let hint = "it was moved by hand and no attempt has started yet; run 'coord tick' first";
        return Err(wrong(id, State::Assigned, hint));
    }
    Ok(e)
}

/// Extends the lease of an assigned task by its timeout from now; refuses (changing nothing)
/// when `fence` names another agent or attempt.
pub fn heartbeat(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    fence: &Fence,
) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let refused = "the heartbeat was refused; stop working on it";
    let e = held_entry(&w, id, fence, refused)?;
    let timeout = e.task.spec.timeout.unwrap_or(w.config.defaults.timeout);
    if lease_well_ahead(&w, &e, timeout.to_signed()) {
        return Ok(Plan::default());
    }
    let mut c = e.task.coord.clone();
    let until = whole_second(w.clock.after(timeout.to_signed()));
    c.lease_expires_at = Some(until);
    w.transit(
        id,
        e.folder.clone(),
        c,
        ResultEdit::Keep,
        format!("heartbeat {id}: lease until {until}"),
    );
    let by = fence.agent.as_ref();
    Ok(stamp(done(w)?, board, OpKind::Heartbeat, by))
}

/// Returns whether the committed lease of `e` ends more than half of `span` from now, by
/// this clone's own measure of it and as written, and was written by a clock not ahead of
/// this one's: a heartbeat then changes nothing (no commit). The agent's next heartbeat,
/// within half the lease, finds less than half left and commits, so the lease every clone
/// reads never runs out under an agent that heartbeats; the answer shows the lease in force.
fn lease_well_ahead(w: &World<'_>, e: &Entry, span: jiff::SignedDuration) -> bool {
    let Some(at) = e.task.coord.lease_expires_at else {
        return false;
    };
    let now = w.now();
    let kind = super::sighting::Kind::Lease(&e.id, e.task.coord.attempt);
    let end = w.local_deadline(kind, at, span).min(at);
    let written_here_or_before = at.checked_sub(span).is_ok_and(|start| start <= now);
    written_here_or_before && now.checked_add(span / 2).is_ok_and(|half| end > half)
}

/// What an agent reports with `coord complete` or `coord fail`.
pub struct Report<'s> {
    /// success or failure result fields (status, output, error, next_agent).
    pub result: Value,
    /// Signs the result once it is stamped with the attempt and agent (`--sign`).
    pub signer: Option<&'s dyn Signer>,
    /// The agent and attempt the reporter worked on.
    pub fence: Fence,
    /// Overwrites a result already waiting (`--replace`); the old one goes to history.
    pub replace: bool,
}

#[cfg(test)]
impl Report<'_> {
    /// Returns a report of `result` by someone who names no attempt, unsigned.
    pub fn new(result: Value) -> Report<'static> {
        Report {
            result,
            signer: None,
            fence: Fence::default(),
            replace: false,
        }
    }
}

/// What became of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The result was written, stamped with this attempt of this agent.
    Stamped {
        /// The agent whose folder the task is in.
        agent: Option<AgentName>,
        /// The attempt.
        attempt: u32,
    },
    /// The reporter named another agent or attempt: the result went to `coord.history` as a
    /// `stale_result` (when the task could take it), and the command must fail with this.
    Stale(CommandError),
}

/// A report's plan and outcome.
#[derive(Debug, Clone)]
pub struct Reported {
    /// The transition to apply (also for a stale report: it records the result in history).
    pub plan: Plan,
    /// What happened.
    pub outcome: Outcome,
}

/// Writes an agent's `result:` into an assigned task, stamped with the attempt and agent.
/// A report naming another agent or attempt than the task's current one is set aside as a
/// `stale_result`; a result already waiting is kept unless `replace` is set.
pub fn report(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    report: Report<'_>,
) -> Result<Reported, CommandError> {
    if let Ok(next) = serde_json::from_value::<NextAgent>(report.result["next_agent"].clone()) {
        for a in next.agents() {
            known_agent(board, &a)?;
        }
    }
    let mut w = world(board, inputs, id)?;
    let e = fenced_entry(&w, id)?;
    if let Some(why) = report.fence.mismatch(&e) {
        let mut stale = refuse_stale(w, &e, &report, why);
        stale.plan = stamp(
            stale.plan,
            board,
            OpKind::SetAside,
            report.fence.agent.as_ref(),
        );
        return Ok(stale);
    }
    let e = assigned_entry(&w, id)?;
    report.fence.epoch_named(&e)?;
    refuse_unfenced(&e, &report.fence)?;
    if let Some(agent) = e.folder.agent.as_ref() {
        if w.config.require_signed_results && report.signer.is_none() {
            return Err(CommandError::Unsigned {
                agent: agent.clone(),
                var: agent.key_var(),
            });
        }
    }
    let mut c = e.task.coord.clone();
    if let Some(old) = e.task.doc.value.get("result") {
        if !report.replace {
            return Err(CommandError::ResultPending(id.clone()));
        }
        c.history.push(HistoryEntry::ReplacedResult {
            at: w.now(),
            result: old.clone(),
        });
    }
    let mut result = report.result;
    result["attempt"] = json!(c.attempt);
    if let Some(a) = &e.folder.agent {
        result["agent"] = json!(a);
    }
    if let Some(signer) = report.signer {
        let agent = e.folder.agent.as_ref().ok_or_else(|| {
            CommandError::Sign(format!("task '{id}' is not in an agent's folder"))
        })?;
        let sig = signer
            .sign(id, c.attempt, agent, &result)
            .map_err(CommandError::Sign)?;
        result["signature"] = json!(sig);
    }
    let status = result["status"].as_str().unwrap_or("success").to_string();
    let kind = if status == "failure" {
        OpKind::Fail
    } else {
        OpKind::Complete
    };
    let who = e
        .folder
        .agent
        .as_ref()
        .map_or("agent".to_string(), |a| a.to_string());
    let outcome = Outcome::Stamped {
        agent: e.folder.agent.clone(),
        attempt: c.attempt,
    };
    let summary = format!("{who} reports {status} for {id}");
    w.transit(id, e.folder.clone(), c, ResultEdit::Set(result), summary);
    Ok(Reported {
        plan: stamp(done(w)?, board, kind, report.fence.agent.as_ref()),
        outcome,
    })
}

/// Refuses a report naming no agent or attempt for a task past its first attempt: an earlier
/// holder (timed out, handed on, retried) may be the one reporting.
fn refuse_unfenced(e: &Entry, fence: &Fence) -> Result<(), CommandError> {
    let attempt = e.task.coord.attempt;
    match (&e.folder.agent, fence.is_named()) {
        (Some(agent), false) if attempt > 1 => Err(CommandError::Unfenced {
            id: e.id.clone(),
            attempt,
            agent: agent.clone(),
        }),
        _ => Ok(()),
    }
}

/// Records a zombie's report in the task's history as a `stale_result` and refuses it.
fn refuse_stale(mut w: World<'_>, e: &Entry, report: &Report<'_>, why: String) -> Reported {
    let mut result = report.result.clone();
    if let Some(n) = report.fence.attempt {
        result["attempt"] = json!(n);
    }
    if let Some(a) = &report.fence.agent {
        result["agent"] = json!(a);
    }
    if let Some(n) = report.fence.epoch {
        result["epoch"] = json!(n);
    }
    let mut c = e.task.coord.clone();
    c.history.push(HistoryEntry::StaleResult {
        at: w.now(),
        result,
    });
    let summary = format!("set aside a stale result for {}: {why}", e.id);
    let kept = w.transit(&e.id, e.folder.clone(), c, ResultEdit::Keep, summary);
    let plan = w.finish();
    let note = if kept && !plan.is_empty() {
        "it is kept in its coord.history as stale_result"
    } else {
        "it could not be recorded"
    };
    let message = format!("{why}: your result was not accepted ({note}); stop working on it");
    Reported {
        plan,
        outcome: Outcome::Stale(CommandError::Stale(message)),
    }
}

/// Records a result that reached the repository after its task moved on (cancelled, expired,
/// reassigned on another clone) as a `stale_result` entry of the task's `coord.history`,
/// wherever the task is now, so it is never lost (`coord sync`'s replay).
pub fn set_aside(
    board: &Board,
    inputs: &Inputs<'_>,
    id: &TaskId,
    result: Value,
) -> Result<Plan, CommandError> {
    let mut w = world(board, inputs, id)?;
    let Some(e) = w.entry(id) else {
        return Err(CommandError::Unreadable(id.clone()));
    };
    let mut c = e.task.coord.clone();
    c.history.push(HistoryEntry::StaleResult {
        at: w.now(),
        result,
    });
    let folder = e.folder.clone();
    let summary = format!("set aside a result for {id} that arrived after it moved on");
    w.transit(id, folder, c, ResultEdit::Keep, summary);
    Ok(stamp(done(w)?, board, OpKind::SetAside, None))
}
