//! The board as people and scripts read it, built as JSON (`coord status --json`): counts,
//! agents with the tasks in their folders (lease ends), the review queue, ready tasks and why
//! they wait, blocked tasks and what they wait for, overdue and invalid tasks, with titles.
//! Pure: plans from a snapshot, reads nothing. `coord status`, `coord demo` and `coord serve`
//! show it.

use crate::board::{AgentEntry, Board, TaskFile};
use crate::engine::{self, Clock, Inputs, Note, Plan};
use crate::model::metrics::{Period, Totals};
use crate::model::time;
use crate::model::{AgentName, State};
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// Builds the board view as JSON (the `--json` output of `coord status`).
pub fn view(
    board: &Board,
    inputs: &Inputs<'_>,
    invalid_reasons: &BTreeMap<String, String>,
) -> Value {
    let plan = engine::plan(board, inputs);
    planned(board, &plan, inputs.now, invalid_reasons).view
}

/// The board view with the instant until which it holds.
#[derive(Debug)]
pub struct Shown {
    /// The view, as [`view`] builds it.
    pub view: Value,
    /// The earliest instant after the planning time at which any part of the view could read
    /// differently (a plan's decision, an overdue task, an agent's probe coming due): the same
    /// board shows the same view at any time from then until this instant. None when nothing
    /// in it depends on the clock.
    pub until: Option<Timestamp>,
}

/// Builds the board view from `plan`, the plan of `board` at `now` (`engine::plan`), and
/// tells until when it holds.
pub fn planned(
    board: &Board,
    plan: &Plan,
    now: Timestamp,
    invalid_reasons: &BTreeMap<String, String>,
) -> Shown {
    let clock = Clock::new(now);
    // From the board's counts: a tick's board holds the tasks of its blocks as counts alone.
    let by_state = board.counts();
    let counts: BTreeMap<&str, usize> = State::ALL
        .iter()
        .map(|s| (s.as_str(), by_state.get(s).copied().unwrap_or(0)))
        .collect();
    let mut view = json!({
        "counts": counts,
        "agents": agents(board, &clock),
        "spending": spending(board, now),
        "oldest_ready": oldest_ready(board),
        "review": review(board),
        "waiting": waiting(&plan.notes),
        "held": plan.notes.iter().filter_map(|n| match n {
            Note::Held { id, reason } => Some(json!({"id": id, "reason": reason})),
            _ => None,
        }).collect::<Vec<_>>(),
        "blocked": blocked(board, &plan.notes),
        "overdue": overdue(board, &clock),
        "invalid": invalid_reasons,
        "duplicates": plan.notes.iter().filter_map(|n| match n {
            Note::Duplicate { id, paths } => Some(json!({"id": id, "paths": paths})),
            _ => None,
        }).collect::<Vec<_>>(),
        "problems": problems(board, &plan.notes),
        "settling": board.settling.iter().map(|s| json!({"path": s.path, "id": s.id, "until": s.until.to_string()})).collect::<Vec<_>>(),
    });
    add_titles(board, &mut view);
    let until = plan.deadline.into_iter().chain(clock.deadline()).min();
    Shown { view, until }
}

/// The lists of the board view that [`summary`] counts instead of showing.
const LISTED: [&str; 9] = [
    "review",
    "waiting",
    "held",
    "blocked",
    "overdue",
    "invalid",
    "duplicates",
    "problems",
    "settling",
];

/// Returns the summary of a board view ([`view`]): its `counts` and `oldest_ready`, each
/// agent without its tasks but with `task_counts` (its tasks per state), and in `lists` how
/// many entries each list holds. Its size does not grow with the number of tasks.
pub fn summary(view: &Value) -> Value {
    let agents: Vec<Value> = view["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let mut a = a.clone();
            let tasks = a.as_object_mut().and_then(|o| o.remove("tasks"));
            let mut per_state = BTreeMap::<String, usize>::new();
            for t in tasks
                .as_ref()
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let state = t["state"].as_str().unwrap_or_default().to_string();
                *per_state.entry(state).or_default() += 1;
            }
            a["task_counts"] = json!(per_state);
            a
        })
        .collect();
    let lists: BTreeMap<&str, usize> = LISTED
        .iter()
        .map(|key| {
            let n = match &view[*key] {
                Value::Array(items) => items.len(),
                Value::Object(items) => items.len(),
                _ => 0,
            };
            (*key, n)
        })
        .collect();
    json!({
        "counts": view["counts"],
        "agents": agents,
        "oldest_ready": view["oldest_ready"],
        "lists": lists,
    })
}

/// Gives every task listed in the view (waiting, held, blocked, overdue) its title. The
/// board's tasks are looked up by id only when one is listed (a board of 10,000 finished tasks
/// lists none).
fn add_titles(board: &Board, view: &mut Value) {
    const LISTS: [&str; 4] = ["waiting", "held", "blocked", "overdue"];
    if LISTS
        .iter()
        .all(|key| view[key].as_array().is_none_or(Vec::is_empty))
    {
        return;
    }
    let by_id: HashMap<&str, &TaskFile> = board.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    for key in LISTS {
        for item in view[key].as_array_mut().into_iter().flatten() {
            let title = item["id"]
                .as_str()
                .and_then(|id| by_id.get(id))
                .map_or(Value::Null, |t| json!(title(t)));
            item["title"] = title;
        }
    }
}

/// Returns a task's title; None when the file does not read.
fn title(t: &TaskFile) -> Option<String> {
    t.read
        .as_ref()
        .ok()
        .map(|task| task.peek(|d| d.spec.title.clone()))
}

/// Returns the tasks in `agent`'s folder, each with its title, state, attempt and lease end.
fn lane(board: &Board, agent: &AgentName) -> Vec<Value> {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.agent.as_ref() == Some(agent))
        .map(|t| {
            let (attempt, lease) = t.read.as_ref().ok().map_or((None, None), |task| {
                task.peek(|d| (Some(d.coord.attempt), d.coord.lease_expires_at))
            });
            json!({
                "id": t.id,
                "title": title(t),
                "state": t.folder.state.as_str(),
                "attempt": attempt,
                "lease_expires_at": lease.map(time::format),
            })
        })
        .collect()
}

/// Returns the tasks waiting for a person's approval (`review/`), each with its title and the
/// agent it names.
fn review(board: &Board) -> Vec<Value> {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Review)
        .map(|t| {
            let agent = t
                .read
                .as_ref()
                .ok()
                .and_then(|task| task.peek(|d| d.spec.agent.clone()));
            json!({"id": t.id, "title": title(t), "agent": agent})
        })
        .collect()
}

/// Returns every file coord leaves alone until a person acts: stray files and symlinks, task
/// files outside the inbox that do not read (the first reason, at its line), and files the
/// planner could not act on, with the fix.
fn problems(board: &Board, notes: &[Note]) -> Vec<Value> {
    let from_notes = notes.iter().filter_map(|n| match n {
        Note::Unreadable { path, errors } => {
            let first = errors.first().map_or("", String::as_str);
            let (at, why) = split_rendered(path, first);
            Some(json!({"path": path, "at": at, "message": format!("{why}; it stays where it is until the file is fixed")}))
        }
        Note::Skipped { path, message } => Some(json!({"path": path, "message": message})),
        _ => None,
    });
    board
        .problems
        .iter()
        .map(|p| json!({"path": p.path, "message": p.message}))
        .chain(from_notes)
        .collect()
}

/// Splits `path:line:col: message` into `path:line:col` and the message.
fn split_rendered(path: &str, line: &str) -> (String, String) {
    let rest = line.strip_prefix(path).unwrap_or(line);
    let mut parts = rest.splitn(3, ": ");
    match (parts.next(), parts.next(), parts.next()) {
        (Some(pos), Some(a), Some(b)) if pos.starts_with(':') => {
            (format!("{path}{pos}"), format!("{a}: {b}"))
        }
        (Some(pos), Some(a), None) if pos.starts_with(':') => {
            (format!("{path}{pos}"), a.to_string())
        }
        _ => (path.to_string(), rest.trim_start_matches(": ").to_string()),
    }
}

/// Returns each agent's load, limit and circuit; `probe_due` when an open circuit's time is
/// up (as `clock` tells), so its next task is the single half-open probe.
fn agents(board: &Board, clock: &Clock) -> Vec<Value> {
    board
        .agents
        .values()
        .map(|a| {
            let active = board.load_of(&a.name);
            let over = board.budget_spent(a, clock.now());
            if let Some((_, next)) = &over {
                clock.reached(*next);
            }
            let circuit = match &over {
                Some(_) => "open",
                None => a.profile.coord.circuit.as_str(),
            };
            json!({
                "name": a.name,
                "active": active,
                "limit": a.profile.max_active,
                "enabled": a.profile.enabled,
                "assign": a.profile.assign,
                "circuit": circuit,
                "circuit_reason": over.as_ref().map(|(why, _)| why),
                "budget": a.profile.budget,
                "spent_today": agent_spent(board, &a.name, Period::Day, clock.now()),
                "open_until": a.profile.coord.open_until.map(time::format),
                "probe_due": engine::retry::gate(&a.profile.coord, |t| clock.reached(t)) == engine::retry::Gate::Probe,
                "disabled_because": disabled_because(a),
                "tasks": lane(board, &a.name),
            })
        })
        .collect()
}

/// Returns what `agent` spent in the `period` around `now`.
fn agent_spent(board: &Board, agent: &AgentName, period: Period, now: Timestamp) -> Totals {
    let (start, next) = period.bounds(now);
    Totals::of(
        board
            .spends()
            .map(|(_, s)| s)
            .filter(|s| s.agent.as_ref() == Some(agent))
            .filter(|s| s.at.is_none_or(|at| at >= start && at < next)),
    )
}

/// Returns the totals of what the board's tasks spent (`result.metrics`): all of it, by
/// agent and by UTC day (`coord status`; `coord show` gives a task's).
pub fn spending(board: &Board, now: Timestamp) -> Value {
    let s = board.spending(now);
    json!({"total": s.total, "agents": s.agents, "days": s.days})
}

/// Returns why an agent gets no new work because of its profile: the profile does not read
/// (with where and why), or it says `enabled: false`.
fn disabled_because(a: &AgentEntry) -> Value {
    match (&a.error, &a.file) {
        (Some(e), _) => json!(format!(
            "its profile does not read: {}; fix the file",
            e.message
        )),
        (None, Some(f)) if !a.profile.enabled => {
            json!(format!("{} says enabled: false", f.path))
        }
        _ => Value::Null,
    }
}

fn oldest_ready(board: &Board) -> Value {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Ready)
        .filter_map(|t| {
            let d = t.read.as_ref().ok()?;
            Some((d.coord.created_at, t.id.clone()))
        })
        .min()
        .map_or(
            Value::Null,
            |(at, id)| json!({"id": id, "since": at.map(time::format).unwrap_or_default()}),
        )
}

fn waiting(notes: &[Note]) -> Vec<Value> {
    notes
        .iter()
        .filter_map(|n| match n {
            Note::Waiting { id, reason } => Some(json!({"id": id, "reason": reason})),
            _ => None,
        })
        .collect()
}

/// Returns each blocked task with its open dependencies and the state each is in
/// (`missing` when no file has that id).
fn blocked(board: &Board, notes: &[Note]) -> Vec<Value> {
    notes
        .iter()
        .filter_map(|n| match n {
            Note::Blocked { id, open, gates } => {
                let states: BTreeMap<String, &str> = open
                    .iter()
                    .map(|d| {
                        let state = board
                            .find(d)
                            .first()
                            .map_or("missing", |f| f.folder.state.as_str());
                        (d.to_string(), state)
                    })
                    .collect();
                Some(json!({"id": id, "waiting_for": open, "states": states, "gates": gates}))
            }
            _ => None,
        })
        .collect()
}

/// Returns the tasks not final whose due time `clock` has passed.
fn overdue(board: &Board, clock: &Clock) -> Vec<Value> {
    board
        .tasks
        .iter()
        .filter(|t| !t.folder.state.is_final())
        .filter_map(|t| {
            let spec = &t.read.as_ref().ok()?.spec;
            let (due, at) = (spec.due.clone()?, spec.due_at()?);
            clock
                .passed(at)
                .then(|| json!({"id": t.id, "due": due, "state": t.folder.state.as_str()}))
        })
        .collect()
}
