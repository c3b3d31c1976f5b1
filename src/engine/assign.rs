//! Assignment (docs/behaviour.md): ready tasks in order of priority, due, age and id go to their
//! explicit agent or to the least-loaded enabled agent having all their capabilities, within
//! WIP limits, circuit breakers and backoff. Expressions in `input` are resolved here.

use super::retry::{backoff, gate, Gate};
use super::sighting::Kind;
use super::world::{ResultEdit, World};
use super::Note;
use crate::expr;
use crate::model::time::whole_second;
use crate::model::HistoryEntry;
use crate::model::{
    AgentCoord, AgentName, AssignMode, Circuit, CoordBlock, ErrorCode, ErrorInfo, Folder, State,
    TaskId,
};

/// Assigns every ready task that some agent can take now.
pub fn run(w: &mut World<'_>) {
    for id in queue(w) {
        if let Some(reason) = backoff_wait(w, &id) {
            w.note(Note::Waiting { id, reason });
            continue;
        }
        match pick(w, &id, None) {
            Ok(agent) => assign(w, &id, &agent),
            Err(why) => w.note(Note::Waiting {
                id,
                reason: why.to_string(),
            }),
        }
    }
}

/// Returns the ready tasks in assignment order: priority, due, age, id. Reads each task's
/// summary ([`crate::check::Waiting`]), so ordering parses no task. A task whose file is
/// still being written is not among them: nothing moves it until it settles; nor is one whose
/// dependency a person moved back out of `done/`.
pub fn queue(w: &World<'_>) -> Vec<TaskId> {
    let default = w.config.defaults.priority;
    let mut ready: Vec<_> = w
        .live_entries()
        .filter(|e| {
            e.folder.state == State::Ready
                && !w.is_frozen(&e.id)
                && super::deps::reopened_dep(w, &e.id).is_none()
        })
        .map(|e| {
            let s = e.task.waiting();
            let due = s.due_at();
            let key = (
                std::cmp::Reverse(s.priority.unwrap_or(default)),
                due.is_none(),
                due,
                s.created_at,
                e.id.clone(),
            );
            (key, e.id.clone())
        })
        .collect();
    ready.sort();
    ready.into_iter().map(|(_, id)| id).collect()
}

/// Returns why a task must still wait for its backoff, if it must.
pub fn backoff_wait(w: &World<'_>, id: &TaskId) -> Option<String> {
    let e = w.entry(id)?;
    let nb = e.task.waiting().not_before?;
    let span = backoff(id.as_str(), e.task.coord.attempt, &w.config.backoff);
    let ended = w.deadline_reached(Kind::Backoff(id), nb, span);
    (!ended).then(|| format!("backing off until {nb}"))
}

/// Returns whether the open circuit of `agent`, written to stay open until `until`, has
/// reopened by this clone's measure of its open time.
fn circuit_reopened(w: &World<'_>, agent: &AgentName, until: jiff::Timestamp) -> bool {
    let span = w.config.circuit_breaker.open_for.to_signed();
    w.deadline_reached(Kind::Circuit(agent), until, span)
}

/// Why a ready task cannot go to an agent now. Shown as one line; a claim tells only the
/// reasons that keep the claiming agent itself out ([`Unavailable::keeps_agent_out`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// The task is not on the board any more.
    Gone(TaskId),
    /// The task names another agent.
    ForOther {
        /// The task.
        id: TaskId,
        /// The agent it names.
        agent: AgentName,
    },
    /// The claiming agent lacks capabilities the task needs.
    Lacks {
        /// The agent.
        agent: AgentName,
        /// The capabilities the task needs.
        needs: Vec<String>,
    },
    /// No agent exists at all.
    NoAgents,
    /// No agent has the capabilities the task needs.
    NoneCapable(Vec<String>),
    /// The agent has no profile.
    Missing(AgentName),
    /// The agent's profile is disabled.
    Disabled(AgentName),
    /// The agent takes work only with `claim`.
    Pull(AgentName),
    /// The agent's circuit is half-open with its probe task running.
    HalfOpen(AgentName),
    /// The agent's budget is spent: its circuit is open until the period ends.
    Budget {
        /// The agent.
        agent: AgentName,
        /// Which limit, as `budget: 1,020 of 1,000 tokens today`.
        why: String,
        /// When the period ends.
        until: jiff::Timestamp,
    },
    /// The agent's circuit is open.
    Open {
        /// The agent.
        agent: AgentName,
        /// Until when, as its profile says.
        until: Option<jiff::Timestamp>,
    },
    /// The agent has as many tasks as its limit allows.
    AtLimit {
        /// The agent.
        agent: AgentName,
        /// Its tasks now.
        load: usize,
        /// Its limit.
        limit: usize,
    },
    /// Every capable agent is unavailable, each for its reason.
    Each(Vec<Unavailable>),
}

impl Unavailable {
    /// Whether this keeps the agent itself out (its limit, its open circuit, its disabled
    /// profile): what a claim that found nothing tells.
    pub fn keeps_agent_out(&self) -> bool {
        match self {
            Unavailable::AtLimit { .. }
            | Unavailable::Open { .. }
            | Unavailable::Budget { .. }
            | Unavailable::Disabled(_) => true,
            Unavailable::Each(all) => all.iter().any(Unavailable::keeps_agent_out),
            _ => false,
        }
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Gone(id) => write!(f, "task {id} is gone"),
            Unavailable::ForOther { id, agent } => write!(f, "task {id} is for agent {agent}"),
            Unavailable::Lacks { agent, needs } => {
                write!(f, "agent {agent} lacks capabilities {needs:?}")
            }
            Unavailable::NoAgents => {
                write!(f, "no agents exist; add one with 'coord agents add NAME'")
            }
            Unavailable::NoneCapable(needs) => write!(f, "no agent has capabilities {needs:?}"),
            Unavailable::Missing(agent) => write!(f, "agent {agent} does not exist"),
            Unavailable::Disabled(agent) => write!(f, "agent {agent} is disabled"),
            Unavailable::Pull(agent) => write!(f, "agent {agent} takes work with 'coord claim'"),
            Unavailable::HalfOpen(agent) => {
                write!(f, "agent {agent} is half-open with a probe task running")
            }
            Unavailable::Budget { agent, why, until } => write!(
                f,
                "circuit of agent {agent} is open ({why}) until {}; raise its budget in work/agents/{agent}.yaml to go on now",
                crate::model::time::format(*until)
            ),
            Unavailable::Open { agent, until } => write!(
                f,
                "circuit of agent {agent} is open until {}",
                until.map_or("?".into(), crate::model::time::format)
            ),
            Unavailable::AtLimit { agent, load, limit } => {
                write!(f, "agent {agent} is at its limit ({load}/{limit})")
            }
            Unavailable::Each(all) => {
                let lines: Vec<String> = all.iter().map(ToString::to_string).collect();
                write!(f, "{}", lines.join("; "))
            }
        }
    }
}

/// Returns the agent that should take `id` now; with `only`, that agent or nobody (claim).
pub fn pick(
    w: &World<'_>,
    id: &TaskId,
    only: Option<&AgentName>,
) -> Result<AgentName, Unavailable> {
    let e = w.entry(id).ok_or_else(|| Unavailable::Gone(id.clone()))?;
    let spec = e.task.waiting();
    if let Some(agent) = &spec.agent {
        if only.is_some_and(|o| o != agent) {
            return Err(Unavailable::ForOther {
                id: id.clone(),
                agent: agent.clone(),
            });
        }
        return available(w, agent, only.is_some()).map(|_| agent.clone());
    }
    let capable: Vec<&AgentName> = w
        .agents
        .iter()
        .filter(|(n, st)| {
            only.is_none_or(|o| o == *n)
                && spec
                    .capabilities
                    .iter()
                    .all(|c| st.profile.capabilities.contains(c))
        })
        .map(|(n, _)| n)
        .collect();
    if capable.is_empty() {
        let needs = spec.capabilities.clone();
        return Err(match only {
            Some(o) => Unavailable::Lacks {
                agent: o.clone(),
                needs,
            },
            None if needs.is_empty() => Unavailable::NoAgents,
            None => Unavailable::NoneCapable(needs),
        });
    }
    let mut reasons = Vec::new();
    let mut best: Option<(usize, &AgentName)> = None;
    for a in capable {
        match available(w, a, only.is_some()) {
            Ok(load) if best.is_none_or(|(l, _)| load < l) => best = Some((load, a)),
            Ok(_) => {}
            Err(r) => reasons.push(r),
        }
    }
    best.map(|(_, a)| a.clone()).ok_or(match reasons.len() {
        1 => reasons.remove(0),
        _ => Unavailable::Each(reasons),
    })
}

/// Returns the agent's load when it can take one more task now, else why not.
fn available(w: &World<'_>, agent: &AgentName, claiming: bool) -> Result<usize, Unavailable> {
    let st = w
        .agents
        .get(agent)
        .ok_or_else(|| Unavailable::Missing(agent.clone()))?;
    if !st.profile.enabled {
        return Err(Unavailable::Disabled(agent.clone()));
    }
    if st.profile.assign == AssignMode::Pull && !claiming {
        return Err(Unavailable::Pull(agent.clone()));
    }
    if gate(&st.coord, |t| circuit_reopened(w, agent, t)) == Gate::Shut {
        return Err(match st.coord.circuit {
            Circuit::HalfOpen => Unavailable::HalfOpen(agent.clone()),
            _ => Unavailable::Open {
                agent: agent.clone(),
                until: st.coord.open_until,
            },
        });
    }
    if let Some((why, until)) = &st.over_budget {
        // A quiet tick looks again when the period ends.
        w.clock.reached(*until);
        return Err(Unavailable::Budget {
            agent: agent.clone(),
            why: why.clone(),
            until: *until,
        });
    }
    let load = w.load_of(agent);
    let limit = st.profile.max_active as usize;
    if load >= limit {
        return Err(Unavailable::AtLimit {
            agent: agent.clone(),
            load,
            limit,
        });
    }
    Ok(load)
}

/// Assigns `id` to `agent` (or fails it with `bad_expression`).
pub fn assign(w: &mut World<'_>, id: &TaskId, agent: &AgentName) {
    let Some(e) = w.entry(id) else { return };
    let mut c = e.task.coord.clone();
    c.state = Some(State::Assigned);
    // A result in a task that is not assigned answers an earlier attempt: set it aside now,
    // so the next tick does not have to.
    let edit = match e.task.doc.value.get("result") {
        Some(r) => {
            c.history.push(HistoryEntry::StaleResult {
                at: w.now(),
                result: r.clone(),
            });
            ResultEdit::Remove
        }
        None => ResultEdit::Keep,
    };
    match start_attempt(w, id, agent, &mut c) {
        Ok(()) => {
            let summary = format!("assign {id} to {agent}");
            give(w, id, agent, c, edit, summary);
        }
        Err(error) => {
            c.assigned_to = None;
            let summary = format!("fail {id}: {}", error.message);
            w.end(id, c, State::Failed, error, summary);
        }
    }
}

/// Moves task `id` into `agent`'s folder with `c`, an attempt [`start_attempt`] started; an
/// agent whose circuit lets one probe through is half-open from then on. Returns whether the
/// task moved.
pub fn give(
    w: &mut World<'_>,
    id: &TaskId,
    agent: &AgentName,
    c: CoordBlock,
    edit: ResultEdit,
    summary: String,
) -> bool {
    let probe = w
        .agents
        .get(agent)
        .filter(|st| gate(&st.coord, |t| circuit_reopened(w, agent, t)) == Gate::Probe)
        .map(|st| AgentCoord {
            circuit: Circuit::HalfOpen,
            ..st.coord.clone()
        });
    let moved = w.transit(id, Folder::assigned(agent.clone()), c, edit, summary);
    if let Some(probe) = probe.filter(|_| moved) {
        w.set_agent_coord(agent, probe);
    }
    moved
}

/// Starts a new attempt in `c`: attempt + 1, the hub's epoch, the claim's key, lease, resolved
/// input. Errs with `bad_expression`.
pub fn start_attempt(
    w: &World<'_>,
    id: &TaskId,
    agent: &AgentName,
    c: &mut CoordBlock,
) -> Result<(), ErrorInfo> {
    let e = w
        .entry(id)
        .ok_or_else(|| ErrorInfo::new(ErrorCode::Gone, "task vanished", true))?;
    let spec = &e.task.spec;
    let timeout = spec.timeout.unwrap_or(w.config.defaults.timeout);
    let floor = w.attempts.floor(id);
    if floor > c.attempt {
        // Granted before and since undone (a revert, a hand edit): never number an attempt
        // twice, but count only the attempts the file records against max_attempts.
        c.attempt_base = c.attempt_base.saturating_add(floor - c.attempt);
        c.attempt = floor;
    }
    c.attempt = c.attempt.saturating_add(1);
    c.epoch = w.epoch;
    c.claim_key = w.claim_key.clone();
    c.assigned_to = Some(agent.clone());
    c.assigned_at = Some(w.now());
    c.lease_expires_at = Some(whole_second(w.clock.after(timeout.to_signed())));
    c.not_before = None;
    c.input = None;
    if let Some(input) = &spec.input {
        if expr::collect(input).is_ok_and(|found| !found.is_empty()) {
            let outputs = expr::Outputs {
                output_of: &|dep| w.output_of(dep),
                locate: &|dep| w.locate(dep),
            };
            let resolved = expr::resolve(input, &outputs)
                .map_err(|m| ErrorInfo::new(ErrorCode::BadExpression, m, false))?;
            c.input = Some(resolved);
        }
    }
    Ok(())
}
