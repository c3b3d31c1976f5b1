//! People's actions posted from the board's pages as plain HTML forms: `POST /tasks` (a new
//! task) and `POST /tasks/{id}/{action}` (approve, reject, cancel, retry, reassign). They run the same
//! operations as the command line and the API, behind the guard's same-origin check like
//! every write, so another site's page cannot post them; each answers 303 back to the page
//! it came from (`back`, a path on this server), so the pages work without their script, and
//! the script posts the same forms and refreshes in place. In a hub they queue with the API's
//! writes and are refused (503) once the hub does not hold its lease.

use super::api::{blocking, refused, task_id, written};
use super::hubmode::HubMode;
use super::problem::Problem;
use super::App;
use crate::model::{AgentName, Priority};
use crate::ops::NewTask;
use axum::extract::rejection::{FormRejection, PathRejection};
use axum::extract::{Path, State as With};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::Deserialize;
use std::sync::Arc;

/// The actions a form may post on one task.
pub const ACTIONS: [&str; 5] = ["approve", "reject", "cancel", "retry", "reassign"];

/// The fields of an action's form.
#[derive(Debug, Deserialize)]
pub(super) struct ActForm {
    /// Why (reject needs it; cancel keeps it).
    #[serde(default)]
    reason: String,
    /// The agent to give the task to (reassign).
    #[serde(default)]
    agent: String,
    /// The page to go back to.
    #[serde(default)]
    back: String,
}

/// The fields of the new-task form; empty ones are not given.
#[derive(Debug, Deserialize)]
pub(super) struct NewForm {
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    priority: String,
    #[serde(default)]
    agent: String,
    /// Labels, separated by commas.
    #[serde(default)]
    label: String,
    #[serde(default)]
    back: String,
}

fn form<T>(f: Result<Form<T>, FormRejection>) -> Result<T, Problem> {
    f.map(|Form(t)| t)
        .map_err(|e| Problem::bad(format!("bad form: {}", e.body_text())))
}

/// `POST /tasks/{id}/{action}`: a person's action on one task, as `coord approve` (`reject`,
/// `cancel`, `retry`, `reassign`) runs it.
pub(super) async fn act(
    With(app): With<Arc<App>>,
    p: Result<Path<(String, String)>, PathRejection>,
    f: Result<Form<ActForm>, FormRejection>,
) -> Result<Response, Problem> {
    let Path((id, action)) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let id = task_id(Ok(Path(id)))?;
    if !ACTIONS.contains(&action.as_str()) {
        return Err(Problem::not_found(format!(
            "no action '{action}' (known: {})",
            ACTIONS.join(", ")
        )));
    }
    let f = form(f)?;
    let back = back(&f.back, &format!("/tasks/{id}"))?;
    let reason = f.reason.trim().to_string();
    if action == "reject" && reason.is_empty() {
        return Err(Problem::bad("reject needs a reason"));
    }
    let agent = match (action.as_str(), f.agent.trim()) {
        ("reassign", "") => return Err(Problem::bad("reassign needs an agent")),
        ("reassign", a) => {
            Some(AgentName::new(a).map_err(|e| Problem::bad(format!("agent {a:?} {e}")))?)
        }
        _ => None,
    };
    let opener = app.hub.opener();
    let mode = app.mode.clone();
    let done = blocking(move || {
        in_turn(mode.as_deref(), || {
            let c = opener.open().map_err(|e| Problem::of(&e))?;
            let done = match (action.as_str(), &agent) {
                ("approve", _) => c.approve(&id),
                ("reject", _) => c.reject(&id, &reason),
                ("cancel", _) => c.cancel(&id, &reason),
                ("reassign", Some(to)) => c.reassign(&id, to),
                _ => c.retry(&id),
            };
            done.map(|_| ()).map_err(|e| Problem::of(&e))
        })
    })
    .await;
    written(&app).await;
    done?;
    Ok(see_other(&back))
}

/// `POST /tasks`: a new task, as `coord new` makes it.
pub(super) async fn new_task(
    With(app): With<Arc<App>>,
    f: Result<Form<NewForm>, FormRejection>,
) -> Result<Response, Problem> {
    let f = form(f)?;
    let back = back(&f.back, "/")?;
    let task = task_of(f)?;
    let opener = app.hub.opener();
    let mode = app.mode.clone();
    let made = blocking(move || {
        in_turn(mode.as_deref(), || {
            let made = opener.open().and_then(|c| c.new_task(&task));
            made.map(|_| ()).map_err(|e| Problem::of(&e))
        })
    })
    .await;
    written(&app).await;
    made?;
    Ok(see_other(&back))
}

/// Runs `write` at once, or in a hub in its turn with the hub's other writes (refused once the
/// hub does not hold its lease).
fn in_turn(
    mode: Option<&HubMode>,
    write: impl FnOnce() -> Result<(), Problem>,
) -> Result<(), Problem> {
    match mode {
        None => write(),
        Some(m) => m.write(write).map_err(|r| refused(&r))?,
    }
}

/// Reads the new-task form into the task `coord new` writes.
fn task_of(f: NewForm) -> Result<NewTask, Problem> {
    let title = f.title.trim().to_string();
    if title.is_empty() {
        return Err(Problem::bad("a new task needs a title"));
    }
    let given = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    let priority: Option<Priority> = match given(&f.priority) {
        Some(p) => Some(serde_json::from_value(serde_json::json!(p)).map_err(|_| {
            Problem::bad(format!(
                "priority {p:?} is not low, normal, high or critical"
            ))
        })?),
        None => None,
    };
    let agent = match given(&f.agent) {
        Some(a) => Some(AgentName::new(&a).map_err(|e| Problem::bad(format!("agent {a:?} {e}")))?),
        None => None,
    };
    Ok(NewTask {
        title,
        description: given(&f.description),
        priority,
        agent,
        labels: f.label.split(',').filter_map(given).collect(),
        ..NewTask::default()
    })
}

/// Returns where to go after a form: `back` when it is a path on this server, `default`
/// when none is given; 400 for anything else (another site, a header break).
fn back(back: &str, default: &str) -> Result<String, Problem> {
    if back.is_empty() {
        return Ok(default.to_string());
    }
    if super::guard::on_this_server(back) {
        Ok(back.to_string())
    } else {
        Err(Problem::bad(format!(
            "back {back:?} is not a path on this server"
        )))
    }
}

/// Answers 303 See Other to `to`.
fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(l) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, l);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_stays_on_this_server() {
        assert_eq!(back("", "/").ok().as_deref(), Some("/"));
        assert_eq!(back("/?q=a", "/").ok().as_deref(), Some("/?q=a"));
        for bad in [
            "//evil.example/",
            "/\\evil.example",
            "http://evil.example/",
            "/\r\nX: y",
        ] {
            assert!(back(bad, "/").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_new_task_form_reads_like_coord_new() {
        let f = NewForm {
            title: " Plan ".into(),
            description: String::new(),
            priority: "high".into(),
            agent: String::new(),
            label: "a, b,,".into(),
            back: String::new(),
        };
        let t = task_of(f).expect("task");
        assert_eq!(t.title, "Plan");
        assert_eq!(t.priority, Some(Priority::High));
        assert_eq!(t.agent, None);
        assert_eq!(t.labels, ["a", "b"]);
    }
}
