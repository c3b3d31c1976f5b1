//! Completion (docs/behaviour.md): results of assigned tasks and expired leases. Success goes
//! to done (or review for do_it_and_show_me) with handoffs; failure retries with backoff or
//! goes to the dead letter; a result for an older attempt is set aside as `stale_result`.

use super::handoff;
use super::retry::{after_failure, after_success, backoff};
use super::sighting::Kind;
use super::world::Rejection;
use super::world::{Entry, ResultEdit, World};
use super::Note;
use crate::board::StandIn;
use crate::model::time::whole_second;
use crate::model::HistoryEntry;
use crate::model::{
    Authority, ErrorCode, ErrorInfo, Folder, ResultStatus, Review, State, TaskId, TaskResult,
};
use std::borrow::Cow;

/// Acts on every assigned task that has a result or an expired lease.
pub fn run(w: &mut World<'_>) {
    for id in w.ids_in(State::Assigned) {
        let Some(e) = w.entry(&id).map(Cow::into_owned) else {
            continue;
        };
        if let Some(StandIn::Oversize(size, _)) = e.stand_in {
            let why = format!(
                "1:1: the file is {size} bytes, past the 1 MiB limit (its bytes stay in git history; the version before it was restored)"
            );
            fail_attempt(w, &e, bad_result(&e.path, &why), true);
            continue;
        }
        if let Some(why) = &e.task.bad_result {
            fail_attempt(w, &e, bad_result(&e.path, why), true);
            continue;
        }
        if let Some(unknown) = unknown_next_agent(w, &e) {
            fail_attempt(w, &e, unknown, true);
            continue;
        }
        match &e.task.result {
            Some(r) if !answers_current(r, &e) => stale(w, &e),
            Some(r) => {
                let agent = e.folder.agent.clone();
                let signed = match &agent {
                    Some(a) if w.config.require_signed_results => {
                        w.verifier.verify(&id, e.task.coord.attempt, a, r)
                    }
                    _ => Ok(()),
                };
                match (signed, r.status) {
                    (Err(Rejection::Bad(why)), _) => bad_signature(w, &e, why),
                    (Err(Rejection::Unverifiable(message)), _) => w.note(Note::Skipped {
                        path: e.path.clone(),
                        message,
                    }),
                    (Ok(()), ResultStatus::Success) => succeed(w, &e),
                    (Ok(()), ResultStatus::Failure) => {
                        let mut err = r.error.clone().unwrap_or_else(|| {
                            ErrorInfo::new(
                                ErrorCode::AgentFailure,
                                "the agent reported failure",
                                true,
                            )
                        });
                        err.code
                            .get_or_insert_with(|| ErrorCode::AgentFailure.as_str().to_string());
                        fail_attempt(w, &e, err, true);
                    }
                }
            }
            None if lease_expired(w, &e) => {
                let err = ErrorInfo::new(
                    ErrorCode::Timeout,
                    "the lease expired without a result",
                    true,
                );
                fail_attempt(w, &e, err, false);
            }
            None => {}
        }
    }
}

/// Returns the error of an attempt whose `result:` coord cannot accept.
pub fn bad_result(path: &str, why: &str) -> ErrorInfo {
    ErrorInfo::new(
        ErrorCode::BadResult,
        crate::check::bad_result_line(path, why),
        true,
    )
}

/// Returns the `bad_result` error of a current result whose `next_agent` names an agent that
/// does not exist, naming the first such agent and the fix.
fn unknown_next_agent(w: &World<'_>, e: &Entry) -> Option<ErrorInfo> {
    let current = e
        .task
        .result
        .as_ref()
        .is_some_and(|r| answers_current(r, e));
    if !current {
        return None;
    }
    let found = crate::check::unknown_result_agents(&e.task, &super::intake::Ctx(w));
    let first = found.first()?;
    Some(ErrorInfo::new(
        ErrorCode::BadResult,
        first.render(&e.path),
        true,
    ))
}

/// Returns whether a result answers the task's current attempt: the attempt and agent it was
/// stamped with (when stamped) are the task's own.
fn answers_current(r: &TaskResult, e: &Entry) -> bool {
    let attempt_ok = r.attempt.is_none_or(|a| a == e.task.coord.attempt);
    let agent_ok = r
        .agent
        .as_ref()
        .is_none_or(|a| e.folder.agent.as_ref() == Some(a));
    attempt_ok && agent_ok
}

fn lease_expired(w: &World<'_>, e: &Entry) -> bool {
    let span = e.task.spec.timeout.unwrap_or(w.config.defaults.timeout);
    let lease = Kind::Lease(&e.id, e.task.coord.attempt);
    e.task
        .coord
        .lease_expires_at
        .is_some_and(|t| w.deadline_reached(lease, t, span.to_signed()))
}

fn stale(w: &mut World<'_>, e: &Entry) {
    let mut c = e.task.coord.clone();
    let result = e.task.doc.value.get("result").cloned();
    c.history.push(HistoryEntry::StaleResult {
        at: w.now(),
        result: result.unwrap_or_default(),
    });
    let summary = format!(
        "set aside a stale result for {} (not attempt {})",
        e.id, c.attempt
    );
    w.transit(&e.id, e.folder.clone(), c, ResultEdit::Remove, summary);
}

fn bad_signature(w: &mut World<'_>, e: &Entry, why: String) {
    let error = ErrorInfo::new(ErrorCode::BadSignature, why, false);
    let summary = format!("fail {}: bad result signature", e.id);
    w.end(&e.id, e.task.coord.clone(), State::Failed, error, summary);
}

fn succeed(w: &mut World<'_>, e: &Entry) {
    if hold_or_finish(w, e) {
        if let Some(agent) = &e.folder.agent {
            w.set_agent_coord(agent, after_success());
        }
    }
}

/// Holds a successful task for review or finishes it; returns whether that was planned.
fn hold_or_finish(w: &mut World<'_>, e: &Entry) -> bool {
    if e.task.spec.authority == Authority::DoItAndShowMe {
        let mut c = e.task.coord.clone();
        c.state = Some(State::Review);
        c.review = Some(Review::Result);
        c.lease_expires_at = None;
        let summary = format!("hold {} for review of its result", e.id);
        return w.transit(
            &e.id,
            Folder::of(State::Review),
            c,
            ResultEdit::Keep,
            summary,
        );
    }
    finish_success(w, &e.id)
}

/// Moves a task with a success result to done and creates its handoffs (or fails it with
/// `handoff_limit` when the chain is too long); returns whether that was planned.
pub fn finish_success(w: &mut World<'_>, id: &TaskId) -> bool {
    let Some(e) = w.entry(id).map(Cow::into_owned) else {
        return false;
    };
    let targets = handoff::targets(w, &e);
    let mut c = e.task.coord.clone();
    c.review = None;
    let max = w.config.max_handoffs as usize;
    if !targets.is_empty() && c.chain.len() + 1 > max {
        let msg = format!("handoff chain longer than max_handoffs ({max})");
        let error = ErrorInfo::new(ErrorCode::HandoffLimit, msg, false);
        let summary = format!("fail {id}: handoff limit of {max} reached");
        return w.end(id, c, State::Failed, error, summary);
    }
    c.finished_at = Some(w.now());
    c.lease_expires_at = None;
    c.state = Some(State::Done);
    let summary = format!("complete {id}");
    let moved = w.transit(id, Folder::of(State::Done), c, ResultEdit::Keep, summary);
    if moved {
        handoff::create_children(w, &e, &targets);
    }
    moved
}

/// Records a failed attempt: another try after backoff, or the dead letter.
/// The agent's breaker counts it only once the failure is recorded in the task.
pub fn fail_attempt(w: &mut World<'_>, e: &Entry, err: ErrorInfo, had_result: bool) {
    if record_failure(w, e, err, had_result) {
        if let Some(agent) = &e.folder.agent {
            let st = w
                .agents
                .get(agent)
                .map(|s| s.coord.clone())
                .unwrap_or_default();
            let next = after_failure(&st, &w.config.circuit_breaker, w.clock.now());
            w.set_agent_coord(agent, next);
        }
    }
}

/// Writes a failed attempt into the task; returns whether the transition was planned.
fn record_failure(w: &mut World<'_>, e: &Entry, err: ErrorInfo, had_result: bool) -> bool {
    let mut c = e.task.coord.clone();
    let max = e
        .task
        .spec
        .max_attempts
        .unwrap_or(w.config.defaults.max_attempts);
    let mut record = HistoryEntry::FailedAttempt {
        at: w.now(),
        attempt: c.attempt,
        agent: c.assigned_to.clone(),
        error: err.clone(),
        result: None,
    };
    c.lease_expires_at = None;
    if err.is_retryable() && c.attempt - c.attempt_base.min(c.attempt) < max {
        if had_result {
            if let HistoryEntry::FailedAttempt { result, .. } = &mut record {
                *result = Some(e.task.doc.value.get("result").cloned().unwrap_or_default());
            }
        }
        c.history.push(record);
        let delay = backoff(e.id.as_str(), c.attempt, &w.config.backoff);
        c.state = Some(State::Ready);
        c.not_before = Some(whole_second(w.clock.after(delay)));
        c.assigned_to = None;
        c.assigned_at = None;
        let summary = format!(
            "retry {} after {} (attempt {}/{max})",
            e.id,
            code(&err),
            c.attempt
        );
        let edit = if had_result {
            ResultEdit::Remove
        } else {
            ResultEdit::Keep
        };
        w.transit(&e.id, Folder::of(State::Ready), c, edit, summary)
    } else {
        c.history.push(record);
        let why = if err.is_retryable() {
            "attempts exhausted"
        } else {
            "not retryable"
        };
        let summary = format!("fail {}: {} ({why})", e.id, code(&err));
        w.end(&e.id, c, State::Failed, err, summary)
    }
}

fn code(err: &ErrorInfo) -> String {
    err.code.clone().unwrap_or_else(|| "failure".to_string())
}
