//! The REST API under `/v1`: reads answer from the hub's snapshot (the JSON of `coord show`,
//! `status`, `agents`, `log`); writes run the same operations as the command line (`new`, the
//! engine's single-task commands through the shared session, which takes the coordinator
//! lock); a read that starts after a write's answer shows the write
//! ([`super::hub::Hub::fresh`]).

use super::hub::Snapshot;
use super::problem::Problem;
use super::App;
use crate::board::TaskFile;
use crate::model::{AgentName, State, TaskId};
use crate::ops::Fence;
use crate::ops::Opener;
use crate::ops::{self, Coord, How, PersonOp, TaskFilter, Verdict};
use crate::ops::{Created, LogEntry, LogPage, NewTask, TaskCopies};
use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State as With};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The largest page of a list.
const MAX_LIMIT: usize = 1000;
/// The page size when none is asked for.
const DEFAULT_LIMIT: usize = 100;

type Answer = Result<Response, Problem>;
/// A request's query parameters, or why they do not parse.
pub type Params = Result<Query<BTreeMap<String, String>>, QueryRejection>;

/// Runs blocking repository work off the async threads.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Problem> + Send + 'static,
) -> Result<T, Problem> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request failed: {e}"),
        )
    })?
}

/// Returns the query's parameters, refusing any not in `known`.
pub fn params(q: Params, known: &[&str]) -> Result<BTreeMap<String, String>, Problem> {
    let Query(q) = q.map_err(|e| Problem::bad(format!("bad query: {e}")))?;
    if let Some(k) = q.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(Problem::bad(format!(
            "unknown query parameter '{k}' (known: {})",
            known.join(", ")
        )));
    }
    Ok(q)
}

/// Returns the task id of the path.
pub fn task_id(p: Result<Path<String>, PathRejection>) -> Result<TaskId, Problem> {
    let Path(id) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    TaskId::new(&id).map_err(|e| Problem::bad(format!("task id {id:?} {e}")))
}

fn limit(q: &BTreeMap<String, String>) -> Result<usize, Problem> {
    match q.get("limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                Problem::bad(format!("limit {s:?} is not a number from 1 to {MAX_LIMIT}"))
            }),
    }
}

/// Reads the filters of `GET /v1/tasks` into the filter `coord list` uses.
pub(super) fn filter_of(q: &BTreeMap<String, String>) -> Result<TaskFilter, Problem> {
    let state = match q.get("state") {
        Some(s) => Some(State::parse(s).ok_or_else(|| {
            let all: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
            Problem::bad(format!("state {s:?} is not one of {}", all.join(", ")))
        })?),
        None => None,
    };
    let agent = match q.get("agent") {
        Some(a) => Some(AgentName::new(a).map_err(|e| Problem::bad(format!("agent {a:?} {e}")))?),
        None => None,
    };
    let priority = match q.get("priority") {
        Some(p) => Some(serde_json::from_value(json!(p)).map_err(|_| {
            Problem::bad(format!(
                "priority {p:?} is not low, normal, high or critical"
            ))
        })?),
        None => None,
    };
    Ok(TaskFilter {
        state,
        agent,
        capability: q.get("capability").cloned(),
        priority,
    })
}

/// Encodes a position in a list as an opaque cursor.
fn cursor_of(parts: &[&str]) -> String {
    parts
        .join("\n")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Decodes a cursor into its parts.
fn parts_of(cursor: &str) -> Result<Vec<String>, Problem> {
    let bad = || Problem::bad(format!("cursor {cursor:?} is not one this server gave"));
    if !cursor.len().is_multiple_of(2) || cursor.len() > 4096 {
        return Err(bad());
    }
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes.ok_or_else(bad)?).map_err(|_| bad())?;
    Ok(text.split('\n').map(str::to_string).collect())
}

/// `GET /v1/tasks`: tasks in id order, filtered, one page at a time, with a strong ETag.
pub(super) async fn list(With(app): With<Arc<App>>, q: Params, headers: HeaderMap) -> Answer {
    let q = params(
        q,
        &[
            "state",
            "agent",
            "capability",
            "priority",
            "limit",
            "cursor",
        ],
    )?;
    let filter = filter_of(&q)?;
    let limit = limit(&q)?;
    let after = match q.get("cursor") {
        Some(c) => match parts_of(c)?.as_slice() {
            [id, path] => Some((id.clone(), path.clone())),
            _ => {
                return Err(Problem::bad(format!(
                    "cursor {c:?} is not one this server gave"
                )))
            }
        },
        None => None,
    };
    let snap = fresh(&app).await;
    Ok(tagged(&headers, &page(&snap, &filter, after, limit), false))
}

fn page(
    snap: &Snapshot,
    filter: &TaskFilter,
    after: Option<(String, String)>,
    limit: usize,
) -> Value {
    let mut tasks: Vec<&TaskFile> = snap
        .board
        .tasks
        .iter()
        .filter(|t| filter.passes(t, snap.default_priority))
        .filter(|t| {
            after
                .as_ref()
                .is_none_or(|(id, path)| (t.id.as_str(), t.path.as_str()) > (id, path))
        })
        .collect();
    tasks.sort_by(|a, b| (a.id.as_str(), &a.path).cmp(&(b.id.as_str(), &b.path)));
    let more = tasks.len() > limit;
    tasks.truncate(limit);
    let next = tasks
        .last()
        .filter(|_| more)
        .map(|t| cursor_of(&[t.id.as_str(), &t.path]));
    json!(TaskCopies {
        items: tasks.iter().map(|t| crate::view::task_copy(t)).collect(),
        next_cursor: next,
    })
}

/// A JSON answer.
pub(super) struct Json(pub(super) Value);

impl IntoResponse for Json {
    fn into_response(self) -> Response {
        let body = serde_json::to_string_pretty(&self.0).unwrap_or_default();
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// Returns the strong ETag of a body as [`tagged`] answers it.
fn etag_of(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Answers with `body` under an ETag, or 304 when the client has that version.
fn tagged(headers: &HeaderMap, body: &Value, weak: bool) -> Response {
    let text = serde_json::to_string_pretty(body).unwrap_or_default();
    let strong = etag_of(&text);
    let etag = if weak { format!("W/{strong}") } else { strong };
    let etag_value = HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"\""));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.trim_start_matches("W/") == etag.trim_start_matches("W/"))
        });
    if matches {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag_value)]).into_response();
    }
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::ETAG, etag_value),
        ],
        text,
    )
        .into_response()
}

/// `GET /v1/tasks/{id}`: the task as `coord show --json` prints it, with a strong ETag.
pub(super) async fn one(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Answer {
    let id = task_id(p)?;
    let body = task_body(&*fresh(&app).await, &id)?;
    Ok(tagged(&headers, &body, false))
}

/// Returns the task as `coord show --json` answers it (without `version`).
fn task_body(snap: &Snapshot, id: &TaskId) -> Result<Value, Problem> {
    let shown = crate::view::task_view(&snap.board, id).map_err(|e| Problem::of_command(&e))?;
    Ok(json!(shown))
}

/// `GET /v1/tasks/{id}/log`: the task's transitions from commit trailers, newest first.
pub(super) async fn task_log(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
    q: Params,
    headers: HeaderMap,
) -> Answer {
    let id = task_id(p)?;
    let q = params(q, &["limit", "cursor"])?;
    let limit = limit(&q)?;
    let after = match q.get("cursor") {
        Some(c) => Some(parts_of(c)?.concat()),
        None => None,
    };
    let opener = app.hub.opener();
    let entries = blocking(move || log_of(&opener, &id, None)).await?;
    let start = match &after {
        Some(oid) => entries
            .iter()
            .position(|e| e.commit == *oid)
            .map(|i| i + 1)
            .ok_or_else(|| Problem::bad("the cursor names no commit of this task's log"))?,
        None => 0,
    };
    let items: Vec<LogEntry> = entries.into_iter().skip(start).take(limit + 1).collect();
    let more = items.len() > limit;
    let mut page = LogPage {
        items,
        next_cursor: None,
    };
    page.items.truncate(limit);
    page.next_cursor = page
        .items
        .last()
        .filter(|_| more)
        .map(|e| cursor_of(&[&e.commit]));
    Ok(tagged(&headers, &json!(page), true))
}

/// `POST /v1/tasks`: creates a task like `coord new`; an `Idempotency-Key` used before with
/// the same fields answers as the first time, with other fields 409.
pub(super) async fn create(With(app): With<Arc<App>>, headers: HeaderMap, body: Bytes) -> Answer {
    let mut task: NewTask = parse_body(&body)?;
    if let Some(key) = headers.get("idempotency-key") {
        let key = key
            .to_str()
            .ok()
            .filter(|k| !k.is_empty() && k.len() <= 255)
            .ok_or_else(|| Problem::bad("Idempotency-Key must be 1 to 255 visible characters"))?;
        if task.idempotency_key.as_deref().is_some_and(|k| k != key) {
            return Err(Problem::bad(
                "the body's idempotency_key differs from the Idempotency-Key header",
            ));
        }
        task.idempotency_key = Some(key.to_string());
    }
    let opener = app.hub.opener();
    let mode = app.mode.clone();
    let made = blocking(move || {
        let make = || opener.open().and_then(|c| c.new_task(&task));
        match &mode {
            None => make(),
            Some(m) => m.write(make).map_err(|r| refused(&r))?,
        }
        .map_err(|e| Problem::of(&e))
    })
    .await;
    written(&app).await;
    let made = made?;
    if !made.same {
        return Err(Problem::conflict(format!(
            "Idempotency-Key was used before for task '{}' with other fields; use a new key",
            made.id
        )));
    }
    written(&app).await;
    let location = HeaderValue::from_str(&format!("/v1/tasks/{}", made.id))
        .unwrap_or(HeaderValue::from_static("/v1/tasks"));
    // A replay answers as the first time did (`created: true`); its header tells it.
    let answer = json!(Created {
        created: true,
        ..made.clone()
    });
    let mut r = (StatusCode::CREATED, Json(answer)).into_response();
    r.headers_mut().insert(header::LOCATION, location);
    if !made.created {
        r.headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(r)
}

/// Parses a JSON body; an empty body is `{}`.
pub fn parse_body<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, Problem> {
    let bytes: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    serde_json::from_slice(bytes).map_err(|e| Problem::bad(format!("bad JSON body: {e}")))
}

/// After a write, answered or refused (a refusal may have kept something, as a stale result
/// is): counts it, so that every read that starts after the answer shows it. A plain server
/// reads the repository again before answering, so its events go out with the answer; a hub
/// leaves the reading to the next read or poll (its answers come from the write itself).
pub(super) async fn written(app: &Arc<App>) {
    app.hub.wrote();
    if app.mode.is_none() {
        fresh(app).await;
    }
}

/// Answers a write a hub refused (503: another hub, or a lapsed lease).
pub(super) fn refused(r: &super::hubmode::Refusal) -> Problem {
    Problem::new(StatusCode::SERVICE_UNAVAILABLE, r.to_string())
}

/// Returns the snapshot a read answers from: one that shows every write answered before
/// the read started ([`super::hub::Hub::fresh`]); the last one when the repository cannot
/// be read (the watcher says why).
pub(crate) async fn fresh(app: &Arc<App>) -> Arc<Snapshot> {
    let hub = Arc::clone(&app.hub);
    let read = tokio::task::spawn_blocking(move || hub.fresh()).await;
    match read {
        Ok(Ok(snap)) => snap,
        _ => app.hub.snapshot(),
    }
}

/// The body of each action.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActBody {
    #[serde(default)]
    agent: Option<AgentName>,
    #[serde(default)]
    attempt: Option<u32>,
    #[serde(default)]
    output: Option<Value>,
    #[serde(default)]
    next_agent: Vec<AgentName>,
    #[serde(default)]
    replace: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    fatal: bool,
    #[serde(default)]
    reason: Option<String>,
    /// The epoch of the hub that granted the attempt (hub mode's claim answers carry it).
    #[serde(default)]
    epoch: Option<u64>,
    #[serde(default)]
    metrics: Option<crate::model::metrics::Metrics>,
}

impl ActBody {
    fn fence(&self) -> Fence {
        Fence {
            agent: self.agent.clone(),
            attempt: self.attempt,
            epoch: self.epoch,
        }
    }
}

/// `POST /v1/tasks/{id}/{action}`: claim, complete, fail, heartbeat, approve, reject,
/// cancel, retry, reassign; 409 when the task is not in a state for it, or the attempt is stale; 412
/// when `If-Match` names another version of the task than the current one.
pub(super) async fn act(
    With(app): With<Arc<App>>,
    p: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let Path((id, action)) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let id = TaskId::new(&id).map_err(|e| Problem::bad(format!("task id {id:?} {e}")))?;
    const ACTIONS: [&str; 9] = [
        "claim",
        "complete",
        "fail",
        "heartbeat",
        "approve",
        "reject",
        "cancel",
        "retry",
        "reassign",
    ];
    if !ACTIONS.contains(&action.as_str()) {
        return Err(Problem::not_found(format!(
            "no action '{action}' (known: {})",
            ACTIONS.join(", ")
        )));
    }
    let b: ActBody = parse_body(&body)?;
    if let Some(wanted) = headers.get(header::IF_MATCH) {
        // Read again first: the tag is compared with the task as it is now.
        let hub = Arc::clone(&app.hub);
        let now = tokio::task::spawn_blocking(move || hub.reread()).await;
        let snap = now.ok().and_then(Result::ok);
        let snap = snap.unwrap_or_else(|| app.hub.snapshot());
        version_matches(&task_body(&snap, &id)?, wanted, &id)?;
    }
    let opener = match action.as_str() {
        "claim" => super::agent::claiming(app.hub.opener(), &headers)?,
        _ => app.hub.opener(),
    };
    let mode = app.mode.clone();
    let body = blocking(move || match &mode {
        None => run_action(&opener, &id, &action, b),
        Some(m) => m
            .write(|| run_action(&opener, &id, &action, b))
            .map_err(|r| refused(&r))?,
    })
    .await;
    written(&app).await;
    Ok(Json(body?).into_response())
}

/// Refuses with 412 unless `wanted` (an `If-Match` value: `*` or a list of ETags) names the
/// version of the task `body` is.
fn version_matches(body: &Value, wanted: &HeaderValue, id: &TaskId) -> Result<(), Problem> {
    let text = serde_json::to_string_pretty(body).unwrap_or_default();
    let etag = etag_of(&text);
    let wanted = wanted.to_str().unwrap_or("");
    if wanted
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t == etag)
    {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::PRECONDITION_FAILED,
        format!(
            "task '{id}' changed since that version (If-Match {wanted}; now {etag}); read it again"
        ),
    ))
}

/// Runs one action through the library's operations; answers as the command's `--json` does
/// without `version`: the claim's receipt (with the epoch a hub's grant recorded), the lease
/// a heartbeat extended, the result written, or what a person's action did. A result or
/// heartbeat for a grant of another epoch is refused by the engine's fence (the result kept
/// as `stale_result`).
fn run_action(opener: &Opener, id: &TaskId, action: &str, b: ActBody) -> Result<Value, Problem> {
    let need = |v: Option<String>, what: &str| {
        v.ok_or_else(|| Problem::bad(format!("{action} needs \"{what}\" in the body")))
    };
    let coord = opener.open().map_err(|e| Problem::of(&e))?;
    let fail = |e: ops::Error| Problem::of(&e);
    let how = How {
        fence: b.fence(),
        sign: false,
        replace: b.replace,
        signed: None,
        metrics: b.metrics.clone(),
    };
    match action {
        "claim" => {
            let agent = b
                .agent
                .clone()
                .ok_or_else(|| Problem::bad("claim needs \"agent\" in the body"))?;
            Ok(json!(coord.claim_id(id, &agent).map_err(fail)?))
        }
        "complete" | "fail" => report(&coord, id, &verdict_of(action, b)?, &how),
        "heartbeat" => Ok(json!(coord
            .heartbeat(id, &how.fence, None)
            .map_err(fail)?)),
        "approve" => acted(&coord, PersonOp::Approve, id, coord.approve(id)),
        "reject" => {
            let reason = need(b.reason, "reason")?;
            acted(&coord, PersonOp::Reject, id, coord.reject(id, &reason))
        }
        "cancel" => {
            let reason = b.reason.unwrap_or_default();
            acted(&coord, PersonOp::Cancel, id, coord.cancel(id, &reason))
        }
        "reassign" => {
            let agent = b
                .agent
                .ok_or_else(|| Problem::bad("reassign needs \"agent\" in the body"))?;
            acted(&coord, PersonOp::Reassign, id, coord.reassign(id, &agent))
        }
        _ => acted(&coord, PersonOp::Retry, id, coord.retry(id)),
    }
}

/// Answers a person's operation `op` on `id` that made `commits` commits, as `--json` does.
fn acted(
    coord: &Coord,
    op: PersonOp,
    id: &TaskId,
    commits: Result<usize, ops::Error>,
) -> Result<Value, Problem> {
    let answer = commits.and_then(|n| coord.acted(op, id, n));
    Ok(json!(answer.map_err(|e| Problem::of(&e))?))
}

/// Returns the result a `complete` or `fail` body reports.
fn verdict_of(action: &str, b: ActBody) -> Result<Verdict, Problem> {
    verdict(action, b.output, b.next_agent, b.error, b.fatal)
}

/// Returns the verdict a `complete` (else `fail`) body names; a `fail` without `error` is
/// refused.
pub(super) fn verdict(
    action: &str,
    output: Option<Value>,
    next_agents: Vec<AgentName>,
    error: Option<String>,
    fatal: bool,
) -> Result<Verdict, Problem> {
    Ok(match action {
        "complete" => Verdict::Success {
            output,
            next_agents,
        },
        _ => Verdict::Failure {
            message: error
                .ok_or_else(|| Problem::bad(format!("{action} needs \"error\" in the body")))?,
            retryable: !fatal,
        },
    })
}

/// Writes a result as `coord complete` / `coord fail` do and answers as they do; a stale
/// report is kept in the task's history and answered with 409.
fn report(coord: &Coord, id: &TaskId, verdict: &Verdict, how: &How) -> Result<Value, Problem> {
    match coord.report_answer(id, verdict, how, None) {
        Ok(answer) => Ok(json!(answer)),
        Err(e @ ops::Error::MovedOn { .. }) => Err(Problem::conflict(e.to_string())),
        Err(e) => Err(Problem::of(&e)),
    }
}

/// `GET /v1/board`: the status view (`coord status --json`), with a strong ETag.
pub(super) async fn board(With(app): With<Arc<App>>, headers: HeaderMap) -> Answer {
    Ok(tagged(&headers, &fresh(&app).await.view, false))
}

/// `GET /v1/agents`: the agents (`coord agents --json`), with a strong ETag.
pub(super) async fn agents(With(app): With<Arc<App>>, headers: HeaderMap) -> Answer {
    let body = json!(crate::view::agents(&fresh(&app).await.board));
    Ok(tagged(&headers, &body, false))
}

/// `GET /v1/openapi.json`: this API described.
pub(super) async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("assets/openapi.json"),
    )
        .into_response()
}

/// `GET /healthz`: the server runs and has read the repository.
pub(super) async fn health(With(app): With<Arc<App>>) -> Answer {
    let snap = app.hub.snapshot();
    Ok(Json(json!({
        "status": "ok",
        "head": snap.head_hex(),
        "generation": snap.generation,
        "tasks": snap.board.tasks.len(),
    }))
    .into_response())
}

/// Returns task `id`'s transitions, newest first, at most `limit`, as `coord log --json`
/// answers them.
pub(crate) fn log_of(
    opener: &Opener,
    id: &TaskId,
    limit: Option<usize>,
) -> Result<Vec<LogEntry>, Problem> {
    let coord = opener.open().map_err(|e| Problem::of(&e))?;
    coord.log(Some(id), limit).map_err(|e| Problem::of(&e))
}
