//! The live board, rendered on the server: `/` (the state columns first, with a search and
//! filter form and a new-task form; cards with their priority, age, due date, agent and
//! attempt, and the actions a person takes on them), `/board` (the same columns without the
//! page around them, which the page's script fetches on every `board` event), `/agents` (a
//! lane per agent with its load, circuit and tasks), `/column/{state}` (a whole column, a page
//! at a time) and `/tasks/{id}` (one task with its history, log and actions). The board's
//! pages take the filters of [`BoardQuery`] as query parameters and `wall=1` for a wall
//! screen (large type, no controls). Every page is live: its `main` names where its script
//! fetches it again on each `board` event (`data-live`; `data-whole` when that is a whole
//! page). Every value is HTML-escaped; the only script is the embedded `board.js`. Pure but
//! for the task log, read from git.

use super::api::{blocking, params, task_id, Params};
use super::cards::{self, BoardQuery, Card};
use super::hub::Snapshot;
use super::problem::Problem;
use super::App;
use crate::board::TaskFile;
use crate::model::{Priority, State};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State as With};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use serde_json::{json, Value};
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
/// A wall screen reloads itself whole this often (seconds), besides its live updates.
const WALL_RELOAD: u32 = 600;

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

/// A page around its `main`: the header with its navigation and live status, the controls
/// (forms outside `main`, which a refresh does not touch), left out on a wall screen.
struct Page<'a> {
    title: &'a str,
    controls: String,
    main: String,
    generation: u64,
    wall: bool,
}

impl Page<'_> {
    fn render(&self) -> String {
        let (class, refresh, nav) = if self.wall {
            (
                " class=\"wall\"",
                format!("<meta http-equiv=\"refresh\" content=\"{WALL_RELOAD}\">"),
                String::new(),
            )
        } else {
            (
                "",
                String::new(),
                "<nav aria-label=\"pages\"><a href=\"/\">board</a> <a href=\"/agents\">agents</a></nav> "
                    .to_string(),
            )
        };
        let skip = if self.wall {
            ""
        } else {
            "<a class=\"skip\" href=\"#main\">skip to the content</a>"
        };
        format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{refresh}\
             <title>{}</title><link rel=\"stylesheet\" href=\"/assets/board.css\">\
             <script src=\"/assets/board.js\" defer></script></head>\n<body{class}>{skip}\
             <header><a class=\"home\" href=\"/\">coord</a> {nav}\
             <span id=\"live\" role=\"status\" aria-live=\"polite\">connecting…</span></header>\n\
             {}<p id=\"said\" role=\"alert\" hidden></p>\n{}\n<!-- generation {} --></body></html>\n",
            esc(self.title),
            if self.wall { "" } else { &self.controls },
            self.main,
            self.generation,
        )
    }
}

/// Reads a board page's query: its filters and `wall`, and `extra` names it also takes.
fn board_query(
    q: Params,
    extra: &[&str],
) -> Result<(BoardQuery, BTreeMap<String, String>), Problem> {
    let known: Vec<&str> = cards::KEYS.iter().chain(extra).copied().collect();
    let q = params(q, &known)?;
    Ok((BoardQuery::of(q.clone())?, q))
}

/// `GET /`: the board. (Opened with `?token=`, the guard has put the token in a cookie.)
pub(super) async fn page(With(app): With<Arc<App>>, q: Params) -> Result<Response, Problem> {
    let (query, _) = board_query(q, &[])?;
    let snap = super::api::fresh(&app).await;
    let now = app.hub.opener().now();
    let main = format!(
        "<main id=\"main\" data-live=\"/board{}\">{}</main>",
        esc(&query.query()),
        board(&snap, &query, now)
    );
    let page = Page {
        title: "coord board",
        controls: controls(&query),
        main,
        generation: snap.generation,
        wall: query.wall,
    };
    Ok(html(page.render()))
}

/// `GET /board`: the board without the page around it.
pub(super) async fn fragment(With(app): With<Arc<App>>, q: Params) -> Result<Response, Problem> {
    let (query, _) = board_query(q, &[])?;
    let now = app.hub.opener().now();
    let snap = super::api::fresh(&app).await;
    Ok(html(board(&snap, &query, now)))
}

/// The search and filter form, and the new-task form.
fn controls(q: &BoardQuery) -> String {
    let mut out = String::from(
        "<section class=\"controls\" aria-label=\"search, filter and add\">\
         <form role=\"search\" method=\"get\" action=\"/\" class=\"filter\">",
    );
    let _ = write!(
        out,
        "<label for=\"q\">search</label><input id=\"q\" name=\"q\" type=\"search\" value=\"{}\">",
        esc(q.value("q"))
    );
    let states: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
    select(
        &mut out,
        "f-state",
        "state",
        "state",
        &states,
        q.value("state"),
        "any",
    );
    let _ = write!(
        out,
        "<label for=\"f-agent\">agent</label><input id=\"f-agent\" name=\"agent\" value=\"{}\" size=\"10\">",
        esc(q.value("agent"))
    );
    select(
        &mut out,
        "f-priority",
        "priority",
        "priority",
        &PRIORITIES,
        q.value("priority"),
        "any",
    );
    let _ = write!(
        out,
        "<label for=\"f-label\">label</label><input id=\"f-label\" name=\"label\" value=\"{}\" size=\"10\">\
         <button type=\"submit\">filter</button> <a href=\"/\">clear</a></form>",
        esc(q.value("label"))
    );
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/tasks\" class=\"new\">\
         <input type=\"hidden\" name=\"back\" value=\"/{}\">\
         <label for=\"new-title\">new task</label><input id=\"new-title\" name=\"title\" required>",
        esc(&q.query())
    );
    select(
        &mut out,
        "new-priority",
        "priority",
        "priority",
        &PRIORITIES,
        "",
        "default",
    );
    out.push_str(
        "<label for=\"new-agent\">agent</label><input id=\"new-agent\" name=\"agent\" size=\"10\">\
         <label for=\"new-label\">labels</label><input id=\"new-label\" name=\"label\" size=\"10\">\
         <button type=\"submit\">add</button></form></section>\n",
    );
    out
}

const PRIORITIES: [&str; 4] = ["critical", "high", "normal", "low"];

/// A labelled `select` of `options`, `chosen` selected, `none` naming the empty choice.
fn select(
    out: &mut String,
    id: &str,
    name: &str,
    label: &str,
    options: &[&str],
    chosen: &str,
    none: &str,
) {
    let _ = write!(
        out,
        "<label for=\"{id}\">{label}</label><select id=\"{id}\" name=\"{name}\"><option value=\"\">{none}</option>"
    );
    for o in options {
        let sel = if *o == chosen { " selected" } else { "" };
        let _ = write!(out, "<option{sel}>{o}</option>");
    }
    out.push_str("</select>");
}

/// Renders the board of a snapshot: the state columns the query keeps, then the notes.
pub fn board(snap: &Snapshot, q: &BoardQuery, now: Timestamp) -> String {
    let notes = Notes::of(&snap.view);
    let mut by_state: BTreeMap<State, Vec<&TaskFile>> = BTreeMap::new();
    for t in cards::filter(&snap.board.tasks, q, snap.default_priority) {
        by_state.entry(t.folder.state).or_default().push(t);
    }
    let shown: usize = by_state.values().map(Vec::len).sum();
    let mut out = String::new();
    let _ = write!(
        out,
        "<h1>board <span class=\"n\">{}</span></h1><p class=\"summary\" data-generation=\"{}\">{} tasks · HEAD {}</p>",
        if q.narrows() { format!("{shown} of {}", snap.board.tasks.len()) } else { shown.to_string() },
        snap.generation,
        snap.board.tasks.len(),
        esc(&snap
            .head_hex()
            .map_or_else(|| "(none)".to_string(), |h| h[..10].to_string()))
    );
    out.push_str("<div class=\"columns\">");
    let context = Context {
        q,
        now,
        default: snap.default_priority,
        notes: &notes,
    };
    for state in State::ALL {
        if q.filter.state.is_some_and(|s| s != state) {
            continue;
        }
        let mut tasks = by_state.remove(&state).unwrap_or_default();
        column_section(&mut out, state, &mut tasks, &context);
    }
    out.push_str("</div>");
    if !q.narrows() {
        notes.render(&mut out, &snap.view);
    }
    out
}

/// What rendering a card needs besides its task.
struct Context<'a> {
    q: &'a BoardQuery,
    now: Timestamp,
    default: Priority,
    notes: &'a Notes,
}

/// One state's column: its heading and count, its first cards, a link to the rest.
fn column_section(out: &mut String, state: State, tasks: &mut [&TaskFile], cx: &Context) {
    let total = tasks.len();
    cards::sort(tasks, state, cx.default);
    let _ = write!(
        out,
        "<section class=\"column\" data-state=\"{s}\" aria-labelledby=\"col-{s}\">\
         <h2 id=\"col-{s}\">{s} <span class=\"n\">{total}</span></h2><ul>",
        s = state.as_str()
    );
    for t in tasks.iter().take(COLUMN_CARDS) {
        card(out, t, cx);
    }
    out.push_str("</ul>");
    if total > COLUMN_CARDS {
        let _ = write!(
            out,
            "<a class=\"more\" href=\"/column/{}{}\">{} more…</a>",
            state.as_str(),
            esc(&cx.q.query()),
            total - COLUMN_CARDS
        );
    }
    out.push_str("</section>");
}

/// One card: title, facts, why it waits, and the actions of its state.
fn card(out: &mut String, t: &TaskFile, cx: &Context) {
    let id = esc(t.id.as_str());
    let c = Card::of(t, cx.default, cx.now);
    let _ = write!(
        out,
        "<li class=\"card\" data-id=\"{id}\" data-priority=\"{p}\"><a href=\"/tasks/{id}\">{}</a>\
         <span class=\"facts\"><span class=\"prio {p}\">{p}</span>",
        esc(&c.title),
        p = c.priority.as_str(),
    );
    if let Some(age) = &c.age {
        let _ = write!(
            out,
            " <span class=\"age\" title=\"age\">{}</span>",
            esc(age)
        );
    }
    if let Some(due) = &c.due {
        let late = if c.overdue { " overdue" } else { "" };
        let _ = write!(out, " <span class=\"due{late}\">due {}</span>", esc(due));
    }
    if let Some(agent) = &c.agent {
        let _ = write!(out, " <span class=\"agent\">{}</span>", esc(agent));
    }
    if c.attempt > 0 {
        let _ = write!(out, " <span class=\"attempt\">attempt {}</span>", c.attempt);
    }
    let _ = write!(out, "</span><small>{id}</small>");
    if let Some(why) = cx.notes.why.get(t.id.as_str()) {
        let _ = write!(out, "<em>{}</em>", esc(why));
    }
    if !cx.q.wall {
        let back = format!("/{}", cx.q.query());
        card_actions(out, t, &back);
    }
    out.push_str("</li>");
}

/// The one-button actions of a card: approve in review, retry once failed, cancelled or
/// invalid. (Those that need a reason are on the task's page.)
fn card_actions(out: &mut String, t: &TaskFile, back: &str) {
    let action = match t.folder.state {
        State::Review => "approve",
        State::Failed | State::Cancelled | State::Invalid => "retry",
        _ => return,
    };
    button(out, t.id.as_str(), action, back);
}

/// A form posting `action` on task `id`, going back to `back`.
fn button(out: &mut String, id: &str, action: &str, back: &str) {
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/tasks/{id}/{action}\" class=\"act\">\
         <input type=\"hidden\" name=\"back\" value=\"{}\">\
         <button type=\"submit\" aria-label=\"{action} {id}\">{action}</button></form>",
        esc(back),
        id = esc(id),
    );
}

/// `GET /agents`: one lane per agent.
pub(super) async fn agents(With(app): With<Arc<App>>, q: Params) -> Result<Response, Problem> {
    let (query, _) = board_query(q, &[])?;
    let snap = super::api::fresh(&app).await;
    let now = app.hub.opener().now();
    let notes = Notes::of(&snap.view);
    let cx = Context {
        q: &query,
        now,
        default: snap.default_priority,
        notes: &notes,
    };
    let mut main = format!(
        "<main id=\"main\" class=\"page\" data-live=\"/agents{}\" data-whole><h1>agents</h1>",
        esc(&query.query())
    );
    lanes(&mut main, &snap, &cx);
    main.push_str("</main>");
    let page = Page {
        title: "coord agents",
        controls: String::new(),
        main,
        generation: snap.generation,
        wall: query.wall,
    };
    Ok(html(page.render()))
}

/// One lane per agent: its load against its limit, assignment mode, circuit and tasks.
fn lanes(out: &mut String, snap: &Snapshot, cx: &Context) {
    out.push_str("<div class=\"lanes\">");
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
            "<section class=\"lane\" data-agent=\"{n}\" aria-label=\"agent {n}\"><h2>{n} <span class=\"load\">{}/{}</span> \
             <span class=\"mode\">{}</span> <span class=\"circuit {c}\">circuit {c}</span></h2>",
            s(&a["active"]),
            s(&a["limit"]),
            esc(&mode),
            n = esc(&name),
            c = esc(&s(&a["circuit"])),
        );
        if let Some(why) = a["disabled_because"].as_str() {
            let _ = write!(out, "<p class=\"why\">{}</p>", esc(why));
        }
        spent_today(out, &a);
        out.push_str("<ul>");
        let mine = snap
            .board
            .tasks
            .iter()
            .filter(|t| t.folder.state == State::Assigned)
            .filter(|t| t.folder.agent.as_ref().is_some_and(|x| x.as_str() == name));
        for t in mine.take(LANE_CARDS) {
            card(out, t, cx);
        }
        out.push_str("</ul></section>");
    }
    out.push_str("</div>");
}

/// An agent's spend today and, while its budget keeps its circuit open, why.
fn spent_today(out: &mut String, a: &Value) {
    if let Some(why) = a["circuit_reason"].as_str() {
        let _ = write!(out, "<p class=\"why\">circuit open: {}</p>", esc(why));
    }
    let t = &a["spent_today"];
    if t["results"].as_u64().unwrap_or(0) > 0 {
        let tokens = t["tokens_in"].as_u64().unwrap_or(0) + t["tokens_out"].as_u64().unwrap_or(0);
        let _ = write!(
            out,
            "<p class=\"spent\">spent today: {} tokens, cost {:.2}</p>",
            crate::model::metrics::grouped(tokens),
            t["cost"].as_f64().unwrap_or(0.0)
        );
    }
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

/// `GET /column/{state}?from=N`: one column, a page at a time, filtered as the board is.
pub(super) async fn column(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
    q: Params,
) -> Result<Response, Problem> {
    let Path(name) = p.map_err(|e| Problem::bad(format!("bad path: {e}")))?;
    let state =
        State::parse(&name).ok_or_else(|| Problem::not_found(format!("no state '{name}'")))?;
    let (query, q) = board_query(q, &["from"])?;
    let from: usize = match q.get("from") {
        Some(f) => f
            .parse()
            .map_err(|_| Problem::bad(format!("from {f:?} is not a number")))?,
        None => 0,
    };
    let snap = super::api::fresh(&app).await;
    let now = app.hub.opener().now();
    let notes = Notes::of(&snap.view);
    let mut tasks: Vec<&TaskFile> = cards::filter(&snap.board.tasks, &query, snap.default_priority)
        .into_iter()
        .filter(|t| t.folder.state == state)
        .collect();
    cards::sort(&mut tasks, state, snap.default_priority);
    let rest = query.query();
    let join = if rest.is_empty() { "?" } else { "&" };
    let here = if rest.is_empty() {
        "?".to_string()
    } else {
        format!("{rest}&")
    };
    let mut main = format!(
        "<main id=\"main\" class=\"page\" data-live=\"/column/{s}{}from={from}\" data-whole>\
         <h1>{s} <span class=\"n\">{}</span></h1><ul>",
        esc(&here),
        tasks.len(),
        s = state.as_str(),
    );
    let cx = Context {
        q: &query,
        now,
        default: snap.default_priority,
        notes: &notes,
    };
    for t in tasks.iter().skip(from).take(PAGE_CARDS) {
        card(&mut main, t, &cx);
    }
    main.push_str("</ul>");
    let next = from.saturating_add(PAGE_CARDS);
    if next < tasks.len() {
        let _ = write!(
            main,
            "<a class=\"more\" href=\"/column/{}{}{join}from={next}\">next page…</a>",
            state.as_str(),
            esc(&rest),
        );
    }
    main.push_str("</main>");
    let page = Page {
        title: state.as_str(),
        controls: String::new(),
        main,
        generation: snap.generation,
        wall: query.wall,
    };
    Ok(html(page.render()))
}

/// `GET /tasks/{id}`: one task, its actions, history and log.
pub(super) async fn task(
    With(app): With<Arc<App>>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let id = task_id(p)?;
    let snap = super::api::fresh(&app).await;
    let shown = crate::view::task_view(&snap.board, &id).map_err(|e| Problem::of_command(&e))?;
    let copies: Vec<Value> = shown.copies().map(|c| json!(c)).collect();
    let opener = app.hub.opener();
    let log_id = id.clone();
    let log = blocking(move || super::api::log_of(&opener, &log_id, Some(200))).await?;
    let notes = Notes::of(&snap.view);
    let mut main = format!(
        "<main id=\"main\" class=\"page task\" data-live=\"/tasks/{}\" data-whole>",
        esc(id.as_str())
    );
    for c in &copies {
        detail(&mut main, c, notes.why.get(id.as_str()));
    }
    if let Some(state) = copies.first().and_then(|c| State::parse(&s(&c["state"]))) {
        let agents: Vec<&str> = snap.board.agents.keys().map(|a| a.as_str()).collect();
        task_actions(&mut main, id.as_str(), state, &agents);
    }
    run_logs(&mut main, &app.hub.git_dir, &id);
    main.push_str("<h2>log</h2><ol class=\"log\">");
    for e in log.iter().map(|e| json!(e)) {
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
    let page = Page {
        title: id.as_str(),
        controls: String::new(),
        main,
        generation: snap.generation,
        wall: false,
    };
    Ok(html(page.render()))
}

/// The actions a person may take on a task in `state`, as forms; `agents` are those it may
/// be reassigned to.
fn task_actions(out: &mut String, id: &str, state: State, agents: &[&str]) {
    let back = format!("/tasks/{id}");
    let mut forms = String::new();
    if state == State::Review {
        button(&mut forms, id, "approve", &back);
        with_reason(&mut forms, id, "reject", &back, true);
    }
    if matches!(state, State::Failed | State::Cancelled | State::Invalid) {
        button(&mut forms, id, "retry", &back);
    }
    if !state.is_final() {
        with_reason(&mut forms, id, "cancel", &back, false);
    }
    if !state.is_final() && state != State::Review && !agents.is_empty() {
        reassign(&mut forms, id, &back, agents);
    }
    if !forms.is_empty() {
        let _ = write!(
            out,
            "<section class=\"actions\" aria-labelledby=\"actions\"><h2 id=\"actions\">actions</h2>{forms}</section>"
        );
    }
}

/// The form giving task `id` to one of `agents`.
fn reassign(out: &mut String, id: &str, back: &str, agents: &[&str]) {
    let options: String = agents
        .iter()
        .map(|a| format!("<option>{}</option>", esc(a)))
        .collect();
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/tasks/{id}/reassign\" class=\"act\">\
         <input type=\"hidden\" name=\"back\" value=\"{}\">\
         <label for=\"reassign-agent\">agent</label>\
         <select id=\"reassign-agent\" name=\"agent\" required>{options}</select>\
         <button type=\"submit\">reassign</button></form>",
        esc(back),
        id = esc(id),
    );
}

/// A form posting `action` with a reason (`required` or not).
fn with_reason(out: &mut String, id: &str, action: &str, back: &str, required: bool) {
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/tasks/{id}/{action}\" class=\"act\">\
         <input type=\"hidden\" name=\"back\" value=\"{}\">\
         <label for=\"{action}-reason\">reason</label>\
         <input id=\"{action}-reason\" name=\"reason\"{}>\
         <button type=\"submit\">{action}</button></form>",
        esc(back),
        if required { " required" } else { "" },
        id = esc(id),
    );
}

/// Names the attempts of `id` whose stdout and stderr `coord run` kept in this clone, and the
/// command that prints them (their text stays off the page: it is the agent's, unredacted).
fn run_logs(out: &mut String, git_dir: &std::path::Path, id: &crate::model::TaskId) {
    let kept = crate::run::logs::attempts(&crate::run::logs::folder(git_dir), id.as_str());
    let Some(last) = kept.last() else {
        return;
    };
    let names: Vec<String> = kept.iter().map(u32::to_string).collect();
    let _ = write!(
        out,
        "<h2>run logs</h2><p class=\"logs\">attempt {} kept in this clone: <code>coord logs {} --attempt {last}</code></p>",
        names.join(", "),
        esc(id.as_str())
    );
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
