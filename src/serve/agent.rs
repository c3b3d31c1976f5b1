//! The agent routes under `/v1/agents/{agent}/`: what `coord claim`, `complete`, `fail`,
//! `heartbeat` and `coord run` do, asked over HTTP by an agent on another machine (`--hub`),
//! answered as those commands answer with `--json`. The agent is in the path, so an agent's
//! token is checked against it before the body is read ([`super::guard`]). A write sent again
//! with the same `Idempotency-Key` gets the first answer ([`Replies`]): a claim whose answer
//! was lost in transit is not made twice. A claim's key is also recorded in its grant
//! ([`claiming`]), so that holds after a restart or a failover too.

use super::api::{blocking, params, parse_body, verdict, written, Json, Params};
use super::hubmode::Job;
use super::problem::Problem;
use super::App;
use crate::model::{AgentName, TaskId};
use crate::ops::{
    Claimed, ClaimedWork, Coord, Fence, How, Opener, Signature, Verdict, WorkItem, WorkList,
};
use crate::store::Session;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State as With};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

type Answer = Result<Response, Problem>;

/// How many answers [`Replies`] keeps; the oldest go first.
const KEPT_REPLIES: usize = 4096;

/// The answers of agent writes by idempotency key, for as long as the server runs (at most
/// [`KEPT_REPLIES`]): the same key again gets the first answer without doing the write
/// again, also while the first is still being made. A refusal is not kept (a retry asks
/// again). A claim's grant outlasts these: it records the key ([`claiming`]).
#[derive(Default)]
pub struct Replies {
    kept: Mutex<Kept>,
}

/// One answer, made once.
type Cell = Arc<tokio::sync::OnceCell<Value>>;

/// The answers kept, by scope and key, and the keys oldest first.
#[derive(Default)]
struct Kept {
    cells: HashMap<String, Cell>,
    order: VecDeque<String>,
}

impl Replies {
    /// Returns the cell of `key`, made when new.
    fn cell(&self, key: String) -> Cell {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = kept.cells.get(&key) {
            return Arc::clone(c);
        }
        if kept.order.len() >= KEPT_REPLIES {
            if let Some(old) = kept.order.pop_front() {
                kept.cells.remove(&old);
            }
        }
        kept.order.push_back(key.clone());
        Arc::clone(kept.cells.entry(key).or_default())
    }
}

/// Returns the request's `Idempotency-Key`, if any; refused unless 1 to 255 visible
/// characters.
fn key_of(headers: &HeaderMap) -> Result<Option<&str>, Problem> {
    let Some(k) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    k.to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .map(Some)
        .ok_or_else(|| Problem::bad("Idempotency-Key must be 1 to 255 visible characters"))
}

/// Returns `opener` opening for a claim under the request's `Idempotency-Key`: the grant
/// records its digest, and the same claim sent again, also to a hub started again since or
/// to the hub that took over, is answered with that grant.
pub(super) fn claiming(mut opener: Opener, headers: &HeaderMap) -> Result<Opener, Problem> {
    opener.options.claim_key = key_of(headers)?.map(str::to_string);
    Ok(opener)
}

/// Runs `write` once per idempotency key in `scope` (an agent's route; every time without a
/// key): in a hub, as part of the next group commit; else on its own.
async fn once(app: &Arc<App>, headers: &HeaderMap, scope: String, write: Job) -> Answer {
    let key = key_of(headers)?;
    // In a hub, the write waits for the group after the one being committed and is refused
    // once the lease is not held.
    let mode = app.mode.clone();
    let write = move || async move {
        match mode {
            None => blocking(write.alone).await,
            Some(m) => m.submit(write).await,
        }
    };
    let answer = match key {
        None => write().await,
        Some(k) => {
            // A task of its own: a client that hangs up does not stop the write half-way,
            // and its retry finds the answer kept.
            let cell = app.replies.cell(format!("{scope}\n{k}"));
            let made = tokio::spawn(async move { cell.get_or_try_init(write).await.cloned() });
            made.await
                .map_err(|e| {
                    Problem::new(
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the request failed: {e}"),
                    )
                })
                .and_then(|a| a)
        }
    };
    // A refusal may have kept something (a stale result): reads show it too.
    written(app).await;
    Ok(Json(answer?).into_response())
}

/// Returns the agent of the path.
fn agent_of(name: &str) -> Result<AgentName, Problem> {
    AgentName::new(name).map_err(|e| Problem::bad(format!("agent {name:?} {e}")))
}

/// The body of a claim.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ClaimBody {
    /// Answer with the task as a runner's command gets it (`work`).
    work: bool,
}

/// `POST /v1/agents/{agent}/claim`: takes the best ready task for the agent, as `coord claim
/// --json` answers (`{claimed, id, agent, attempt, lease_expires_at, path}` or `{claimed:
/// false, agent, why}`); with `{"work": true}`, `{claimed, work}` as `coord run` takes it.
pub(super) async fn claim(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let Path(name) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let agent = agent_of(&name)?;
    let b: ClaimBody = parse_body(&body)?;
    let opener = claiming(app.hub.opener(), &headers)?;
    let scope = format!("{agent}\nclaim");
    let epoch = app.mode.as_ref().map(|m| m.epoch);
    let (mine, key) = (agent.clone(), opener.options.claim_key.clone());
    let grouped = move |coord: &Coord, session: &Session<'_>| {
        if b.work {
            return None;
        }
        match coord.claim_in_group(session, &mine, key.as_deref()) {
            Ok(None) => None,
            Ok(Some(claimed)) => Some(Ok(claim_json(&claimed, epoch))),
            Err(e) => Some(Err(Problem::of(&e))),
        }
    };
    let alone = move || {
        let coord = opener.open().map_err(|e| Problem::of(&e))?;
        if !b.work {
            let claimed = coord.claim(&agent, None).map_err(|e| Problem::of(&e))?;
            return Ok(claim_json(&claimed, epoch));
        }
        let work = coord
            .claim_work(&agent, None, &mut Vec::new())
            .map_err(|e| Problem::of(&e))?;
        Ok(json!(ClaimedWork {
            claimed: work.is_some(),
            work: work.as_ref().map(WorkItem::of),
            epoch,
        }))
    };
    let job = Job {
        grouped: Box::new(grouped),
        alone: Box::new(alone),
    };
    once(&app, &headers, scope, job).await
}

/// Returns a claim's answer, with the epoch that granted it in a hub (as a hub's claims by
/// id answer).
fn claim_json(claimed: &Claimed, epoch: Option<u64>) -> Value {
    let answer = claimed.answer();
    json!(match epoch {
        Some(epoch) => answer.in_epoch(epoch),
        None => answer,
    })
}

/// `GET /v1/agents/{agent}/work`: the agent's assigned tasks without a result, as a push
/// agent's runner takes them.
pub(super) async fn work(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
) -> Answer {
    let Path(name) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let agent = agent_of(&name)?;
    let opener = app.hub.opener();
    let items = blocking(move || {
        let coord = opener.open().map_err(|e| Problem::of(&e))?;
        let found = coord.work_of(&agent, None).map_err(|e| Problem::of(&e))?;
        Ok(found.iter().map(WorkItem::of).collect())
    })
    .await?;
    Ok(Json(json!(WorkList { items })).into_response())
}

/// `GET /v1/agents/{agent}/tasks/{id}/lost?attempt=N`: the lease status the MCP
/// `lease_status` tool answers: whether the attempt still holds the task, how (`lost`:
/// `cancelled`, `lease_lost`) and why it lost it, and the lease.
pub(super) async fn lost(
    With(app): With<Arc<App>>,
    p: Result<Path<(String, String)>, PathRejection>,
    q: Params,
) -> Answer {
    let Path((name, id)) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let agent = agent_of(&name)?;
    let id = TaskId::new(&id).map_err(|e| Problem::bad(format!("task id {id:?} {e}")))?;
    let q = params(q, &["attempt"])?;
    let attempt: u32 = q
        .get("attempt")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| Problem::bad("lost needs ?attempt=N"))?;
    let opener = app.hub.opener();
    let status = blocking(move || {
        let coord = opener.open().map_err(|e| Problem::of(&e))?;
        let status = coord.lease_status(&id, &agent, attempt);
        status.map_err(|e| Problem::of(&e))
    })
    .await?;
    Ok(Json(json!(status)).into_response())
}

/// The body of an agent's report or heartbeat.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ReportBody {
    attempt: Option<u32>,
    epoch: Option<u64>,
    output: Option<Value>,
    next_agent: Vec<AgentName>,
    replace: bool,
    error: Option<String>,
    fatal: bool,
    signature: Option<String>,
    metrics: Option<crate::model::metrics::Metrics>,
}

/// `POST /v1/agents/{agent}/tasks/{id}/{complete|fail|heartbeat}`: as `coord complete`,
/// `fail` and `heartbeat --agent AGENT` answer with `--json` (without `version` and `op`);
/// a result for another attempt (or epoch) is kept in the task's history and refused (409,
/// `stale`); a task never granted to the agent is refused and left as it is (403).
pub(super) async fn act(
    With(app): With<Arc<App>>,
    p: Result<Path<(String, String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let Path((name, id, action)) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let agent = agent_of(&name)?;
    let id = TaskId::new(&id).map_err(|e| Problem::bad(format!("task id {id:?} {e}")))?;
    const ACTIONS: [&str; 3] = ["complete", "fail", "heartbeat"];
    if !ACTIONS.contains(&action.as_str()) {
        return Err(Problem::not_found(format!(
            "no agent action '{action}' (known: {})",
            ACTIONS.join(", ")
        )));
    }
    let b: ReportBody = parse_body(&body)?;
    let opener = app.hub.opener();
    let scope = format!("{agent}\n{id}\n{action}");
    let report = Arc::new(Report::of(agent, id, &action, b, opener.options.epoch));
    let mine = Arc::clone(&report);
    let job = Job {
        grouped: Box::new(move |coord, session| mine.in_group(coord, session)),
        alone: Box::new(move || report.alone(&opener)),
    };
    once(&app, &headers, scope, job).await
}

/// An agent's report or heartbeat, as its route asked for it.
struct Report {
    agent: AgentName,
    id: TaskId,
    /// The verdict of a report (a body that names none is refused once the task is known to
    /// be the agent's); None for a heartbeat.
    verdict: Option<Result<Verdict, Problem>>,
    how: How,
    /// The hub's epoch (None outside a hub).
    epoch: Option<u64>,
}

impl Report {
    /// Reads an action's body.
    fn of(agent: AgentName, id: TaskId, action: &str, b: ReportBody, epoch: Option<u64>) -> Report {
        let verdict = (action != "heartbeat")
            .then(|| verdict(action, b.output, b.next_agent, b.error, b.fatal));
        let how = How {
            fence: Fence {
                agent: Some(agent.clone()),
                attempt: b.attempt,
                epoch: b.epoch,
            },
            sign: false,
            replace: b.replace,
            signed: b.signature.map(Signature),
            metrics: b.metrics,
        };
        Report {
            agent,
            id,
            verdict,
            how,
            epoch,
        }
    }

    /// Refuses a task never granted to the agent (403), and a report without a verdict.
    fn check(&self, coord: &Coord, session: Option<&Session<'_>>) -> Result<(), Problem> {
        if !granted_to(coord, session, &self.id, &self.agent)? {
            return Err(Problem::new(
                axum::http::StatusCode::FORBIDDEN,
                never_granted(&self.id, &self.agent, self.how.fence.epoch, self.epoch),
            ));
        }
        match &self.verdict {
            Some(Err(refused)) => Err(refused.clone()),
            _ => Ok(()),
        }
    }

    /// Writes the report in a group commit; None when it goes on its own (a heartbeat, or a
    /// report that must go the whole way).
    fn in_group(&self, coord: &Coord, session: &Session<'_>) -> Option<Result<Value, Problem>> {
        let Some(Ok(verdict)) = &self.verdict else {
            return None;
        };
        if let Err(refused) = self.check(coord, Some(session)) {
            return Some(Err(refused));
        }
        match coord.report_in_group(session, &self.id, verdict, &self.how) {
            Ok(None) => None,
            Ok(Some(answer)) => Some(Ok(json!(answer))),
            Err(e) => Some(Err(Problem::of(&e))),
        }
    }

    /// Writes the report or heartbeat on its own; returns its answer.
    fn alone(&self, opener: &Opener) -> Result<Value, Problem> {
        let coord = opener.open().map_err(|e| Problem::of(&e))?;
        self.check(&coord, None)?;
        let Some(Ok(verdict)) = &self.verdict else {
            return heartbeat(&coord, &self.id, &self.how.fence);
        };
        let answer = coord
            .report_answer(&self.id, verdict, &self.how, None)
            .map_err(|e| Problem::of(&e))?;
        Ok(json!(answer))
    }
}

/// Says why a report on task `id` is refused when its history never granted it to `agent`:
/// with an epoch older than the hub's (`current`), the grant was an older hub's that never
/// reached the remote before a failover.
fn never_granted(
    id: &TaskId,
    agent: &AgentName,
    named: Option<u64>,
    current: Option<u64>,
) -> String {
    match (named, current) {
        (Some(e), Some(now)) if e < now => format!(
            "task '{id}' was never agent {agent}'s here: its grant of epoch {e} was made by an older hub and never reached the remote (this hub is epoch {now}); the result is not credited, claim again"
        ),
        _ => format!("task '{id}' was never agent {agent}'s: its routes cannot report on it"),
    }
}

/// Returns whether task `id` is or was `agent`'s: assigned to it, or a result or failed
/// attempt of it in the task (a set-aside `stale_result` names its reporter, not a holder).
/// Reads only the task's files (in `session` when given).
fn granted_to(
    coord: &Coord,
    session: Option<&Session<'_>>,
    id: &TaskId,
    agent: &AgentName,
) -> Result<bool, Problem> {
    let shown = coord.show_task(session, id).map_err(|e| Problem::of(&e))?;
    let names = |v: &Value| v.as_str() == Some(agent.as_str());
    let granted = shown.copies().any(|copy| {
        let history = copy
            .field("/coord/history")
            .as_array()
            .into_iter()
            .flatten();
        names(copy.field("/coord/assigned_to"))
            || names(copy.field("/result/agent"))
            || history
                .filter(|h| h["event"] != "stale_result")
                .any(|h| names(&h["agent"]) || names(&h["result"]["agent"]))
    });
    Ok(granted)
}

/// Extends the lease; answers the task's state and new lease.
fn heartbeat(coord: &Coord, id: &TaskId, fence: &Fence) -> Result<Value, Problem> {
    let beat = coord
        .heartbeat(id, fence, None)
        .map_err(|e| Problem::of(&e))?;
    Ok(json!(beat))
}
