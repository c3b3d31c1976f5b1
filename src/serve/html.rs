//! The live board, rendered on the server: `/` (columns per state, agent lanes with load and
//! circuit, and what waits, is blocked, held, invalid or needs a person), `/board` (the same
//! without the page around it, which the page's script fetches on every `board` event),
//! `/column/{state}` (a whole column, a page at a time) and `/tasks/{id}` (one task with its
//! history and log). Every page is live: its `main` names where its script fetches it again
//! on each `board` event (`data-live`; `data-whole` when that is a whole page). Every value is HTML-escaped; the only script is the embedded
//! `board.js`. Pure but for the task log, read from git.

use super::api::{blocking, params, task_id, Params};
use super::hub::Snapshot;
use super::problem::Problem;
use super::App;
use crate::board::TaskFile;
use crate::model::{Priority, State};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State as With};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::Arc;

/// Cards shown per column on the board; the rest are counted and linked.
const COLUMN_CARDS: usize = 50;
/// Cards per page of `/column/{state}`.
const PAGE_CARDS: usize = 500;
/// Tasks listed per agent lane.
const LANE_CARDS: usize = 20;
/// Notes listed per kind (waiting, blocked, ...).
const NOTES: usize = 50;

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match crate::view::html_entity(c) {
            Some(entity) => out.push_str(entity),
            None => out.push(c),
        }
    }
    out
}

fn frame(title: &str, main: &str, generation: u64) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/assets/board.css\">\
         <script src=\"/assets/board.js\" defer></script></head>\n<body>\
         <header><a class=\"home\" href=\"/\">coord</a> <span id=\"live\">connecting…</span></header>\n\
         {main}\n<!-- generation {generation} --></body></html>\n",
        esc(title)
    )
}

/// `GET /`: the board. (Opened with `?token=`, the guard has put the token in a cookie.)
pub(super) async fn page(With(app): With<Arc<App>>, q: Params) -> Result<Response, Problem> {
    params(q, &[])?;
    let snap = app.hub.snapshot();
    let main = format!(
        "<main id=\"board\" data-live=\"/board\">{}</main>",
        board(&snap)
    );
    Ok(html(frame("coord board", &main, snap.generation)))
}

/// `GET /board`: the board without the page around it.
pub(super) async fn fragment(With(app): With<Arc<App>>) -> Response {
    html(board(&app.hub.snapshot()))
}

/// Renders the board of a snapshot.
pub fn board(snap: &Snapshot) -> String {
    let notes = Notes::of(&snap.view);
    let mut by_state: BTreeMap<State, Vec<&TaskFile>> = BTreeMap::new();
    for t in &snap.board.tasks {
        by_state.entry(t.folder.state).or_default().push(t);
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "<p class=\"summary\" data-generation=\"{}\">{} tasks · HEAD {}</p>",
        snap.generation,
        snap.board.tasks.len(),
        esc(&snap
            .head_hex()
            .map_or_else(|| "(none)".to_string(), |h| h[..10].to_string()))
    );
    lanes(&mut out, snap, &notes);
    out.push_str("<section class=\"columns\">");
    for state in State::ALL {
        let mut tasks = by_state.remove(&state).unwrap_or_default();
        let total = tasks.len();
        sort(&mut tasks, state, snap.default_priority);
        let _ = write!(
            out,
            "<div class=\"column\" data-state=\"{s}\"><h2>{s} <span class=\"n\">{total}</span></h2><ul>",
            s = state.as_str()
        );
        for t in tasks.iter().take(COLUMN_CARDS) {
            card(&mut out, t, &notes);
        }
        out.push_str("</ul>");
        if total > COLUMN_CARDS {
            let _ = write!(
                out,
                "<a class=\"more\" href=\"/column/{}\">{} more…</a>",
                state.as_str(),
                total - COLUMN_CARDS
            );
        }
        out.push_str("</div>");
    }
    out.push_str("</section>");
    notes.render(&mut out, &snap.view);
    out
}

/// Open tasks highest priority first, then by id; finished ones (most of a big board) by id
/// alone: reading a task's priority parses it (the snapshot keeps only the text), and a page
/// need not parse 10,000 finished tasks.
fn sort(tasks: &mut [&TaskFile], state: State, default: Priority) {
    if state.is_final() {
        tasks.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        return;
    }
    tasks.sort_by_cached_key(|t| {
        let p = t
            .read
            .as_ref()
            .ok()
            .and_then(|task| task.peek(|d| d.spec.priority))
            .unwrap_or(default);
        (std::cmp::Reverse(p), t.id.to_string())
    });
}

fn title(t: &TaskFile) -> String {
    t.read
        .as_ref()
        .map(|task| task.peek(|d| d.spec.title.clone()))
        .unwrap_or_else(|_| "(does not read)".to_string())
}

fn card(out: &mut String, t: &TaskFile, notes: &Notes) {
    let id = t.id.as_str();
    let _ = write!(
        out,
        "<li class=\"card\" data-id=\"{}\"><a href=\"/tasks/{}\">{}</a><small>{}</small>",
        esc(id),
        esc(id),
        esc(&title(t)),
        esc(id)
    );
    if let Some(why) = notes.why.get(id) {
        let _ = write!(out, "<em>{}</em>", esc(why));
    }
    out.push_str("</li>");
}

/// One lane per agent: its load against its limit, assignment mode, circuit and tasks.
fn lanes(out: &mut String, snap: &Snapshot, notes: &Notes) {
    out.push_str("<section class=\"lanes\"><h2>agents</h2>");
    let agents = snap.view["agents"].as_array().cloned().unwrap_or_default();
    if agents.is_empty() {
        out.push_str("<p>no agents; add one with <code>coord agents add NAME</code></p>");
    }
    for a in agents {
        let name = s(&a["name"]);
        let mode = if a["enabled"] == Value::Bool(false) {
            "disabled".to_string()
        } else {
            s(&a["assign"])
        };
        let _ = write!(
            out,
            "<div class=\"lane\" data-agent=\"{n}\"><h3>{n} <span class=\"load\">{}/{}</span> \
             <span class=\"mode\">{}</span> <span class=\"circuit {c}\">circuit {c}</span></h3>",
            s(&a["active"]),
            s(&a["limit"]),
            esc(&mode),
            n = esc(&name),
            c = esc(&s(&a["circuit"])),
        );
        if let Some(why) = a["disabled_because"].as_str() {
            let _ = write!(out, "<p class=\"why\">{}</p>", esc(why));
        }
        out.push_str("<ul>");
        let mine = snap
            .board
            .tasks
            .iter()
            .filter(|t| t.folder.state == State::Assigned)
            .filter(|t| t.folder.agent.as_ref().is_some_and(|x| x.as_str() == name));
        for t in mine.take(LANE_CARDS) {
            card(out, t, notes);
        }
        out.push_str("</ul></div>");
    }
    out.push_str("</section>");
}

/// Why tasks wait, from the status view.
struct Notes {
    why: HashMap<String, String>,
}

impl Notes {
    fn of(view: &Value) -> Notes {
        let mut why = HashMap::new();
        for key in ["waiting", "held"] {
            for n in view[key].as_array().into_iter().flatten() {
                why.insert(s(&n["id"]), s(&n["reason"]));
            }
        }
        for b in view["blocked"].as_array().into_iter().flatten() {
            let deps: Vec<String> = b["waiting_for"]
                .as_array()
                .into_iter()
                .flatten()
                .map(s)
                .collect();
            why.insert(s(&b["id"]), format!("waits for {}", deps.join(", ")));
        }
        if let Some(m) = view["invalid"].as_object() {
            for (id, reason) in m {
                why.insert(id.clone(), s(reason));
            }
        }
        Notes { why }
    }

    /// Lists problems and overdue tasks: what needs a person.
    fn render(&self, out: &mut String, view: &Value) {
        out.push_str("<section class=\"notes\">");
        list(out, view, "problems", "needs a person", |p| {
            let at = if p["at"].is_string() {
                &p["at"]
            } else {
                &p["path"]
            };
            format!("{}: {}", s(at), s(&p["message"]))
        });
        list(out, view, "overdue", "overdue", |o| {
            format!("{} ({}): due {}", s(&o["id"]), s(&o["state"]), s(&o["due"]))
        });
        list(
            out,
            view,
            "duplicates",
            "duplicate ids (run coord doctor)",
            |d| s(&d["id"]),
        );
        list(out, view, "settling", "still being written", |f| {
            format!("{}: until {}", s(&f["path"]), s(&f["until"]))
        });
        out.push_str("</section>");
    }
}

fn list(out: &mut String, view: &Value, key: &str, heading: &str, line: impl Fn(&Value) -> String) {
    let Some(items) = view[key].as_array().filter(|a| !a.is_empty()) else {
        return;
    };
    let _ = write!(
        out,
        "<h2>{} <span class=\"n\">{}</span></h2><ul class=\"{key}\">",
        esc(heading),
        items.len()
    );
    for i in items.iter().take(NOTES) {
        let _ = write!(out, "<li>{}</li>", esc(&line(i)));
    }
    out.push_str("</ul>");
}

fn s(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `GET /column/{state}?from=N`: one column, a page at a time.
pub(super) async fn column(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
    q: Params,
) -> Result<Response, Problem> {
    let Path(name) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let state =
        State::parse(&name).ok_or_else(|| Problem::not_found(format!("no state '{name}'")))?;
    let q = params(q, &["from"])?;
    let from: usize = match q.get("from") {
        Some(f) => f
            .parse()
            .map_err(|_| Problem::bad(format!("from {f:?} is not a number")))?,
        None => 0,
    };
    let snap = app.hub.snapshot();
    let notes = Notes::of(&snap.view);
    let mut tasks: Vec<&TaskFile> = snap
        .board
        .tasks
        .iter()
        .filter(|t| t.folder.state == state)
        .collect();
    sort(&mut tasks, state, snap.default_priority);
    let mut main = format!(
        "<main class=\"page\" data-live=\"/column/{s}?from={from}\" data-whole>\
         <h1>{s} <span class=\"n\">{}</span></h1><ul>",
        tasks.len(),
        s = state.as_str(),
    );
    for t in tasks.iter().skip(from).take(PAGE_CARDS) {
        card(&mut main, t, &notes);
    }
    main.push_str("</ul>");
    if from + PAGE_CARDS < tasks.len() {
        let _ = write!(
            main,
            "<a class=\"more\" href=\"/column/{}?from={}\">next page…</a>",
            state.as_str(),
            from + PAGE_CARDS
        );
    }
    main.push_str("</main>");
    Ok(html(frame(state.as_str(), &main, snap.generation)))
}

/// `GET /tasks/{id}`: one task, its history and its log.
pub(super) async fn task(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let id = task_id(p)?;
    let snap = app.hub.snapshot();
    let copies = crate::view::task_copies(&snap.board, &id).map_err(|e| Problem::of_command(&e))?;
    let opener = app.hub.opener();
    let log_id = id.clone();
    let log = blocking(move || super::api::log_of(&opener, &log_id, Some(200))).await?;
    let notes = Notes::of(&snap.view);
    let mut main = format!(
        "<main class=\"page task\" data-live=\"/tasks/{}\" data-whole>",
        esc(id.as_str())
    );
    for c in &copies {
        detail(&mut main, c, notes.why.get(id.as_str()));
    }
    main.push_str("<h2>log</h2><ol class=\"log\">");
    for e in &log {
        let _ = write!(
            main,
            "<li><time>{}</time> {} → {} {}</li>",
            esc(&s(&e["time"])),
            esc(&s(&e["from"])),
            esc(&s(&e["to"])),
            esc(&s(&e["summary"]))
        );
    }
    main.push_str("</ol></main>");
    Ok(html(frame(id.as_str(), &main, snap.generation)))
}

fn detail(out: &mut String, c: &Value, why: Option<&String>) {
    let task = &c["task"];
    let _ = write!(
        out,
        "<h1>{}</h1><p><span class=\"state\">{}</span> <code>{}</code></p>",
        esc(&Some(s(&task["title"]))
            .filter(|t| !t.is_empty())
            .unwrap_or(s(&c["id"]))),
        esc(&s(&c["state"])),
        esc(&s(&c["path"]))
    );
    if let Some(w) = why {
        let _ = write!(out, "<p class=\"why\">{}</p>", esc(w));
    }
    for e in c["errors"].as_array().into_iter().flatten() {
        let _ = write!(out, "<p class=\"why\">{}</p>", esc(&s(e)));
    }
    out.push_str("<table>");
    for (k, v) in task.as_object().into_iter().flatten() {
        if k != "coord" {
            let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&s(v)));
        }
    }
    for (k, v) in task["coord"].as_object().into_iter().flatten() {
        if k != "history" {
            let _ = write!(
                out,
                "<tr><th>coord.{}</th><td>{}</td></tr>",
                esc(k),
                esc(&s(v))
            );
        }
    }
    out.push_str("</table><h2>history</h2><ol class=\"history\">");
    for h in task["coord"]["history"].as_array().into_iter().flatten() {
        let _ = write!(out, "<li>{}</li>", esc(&s(h)));
    }
    out.push_str("</ol>");
}

pub(super) async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/board.js"),
    )
        .into_response()
}

pub(super) async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/board.css"),
    )
        .into_response()
}
