//! The board as people and scripts read it (`coord status --json`): counts, agents with the
//! tasks in their folders (lease ends), the review queue, ready tasks and why they wait,
//! blocked tasks and what they wait for, overdue and invalid tasks, with titles. Built as one
//! [`BoardView`] (schemas/json/status.json is generated from it) and handed on as JSON.
//! Pure: plans from a snapshot, reads nothing. `coord status`, `coord demo` and `coord serve`
//! show it.

use crate::board::{AgentEntry, Board, TaskFile};
use crate::engine::{self, Clock, Inputs, Note, Plan};
use crate::model::metrics::Budget;
use crate::model::metrics::{Period, Totals};
use crate::model::time;
use crate::model::{AgentName, AssignMode, Circuit, State, TaskId};
use jiff::Timestamp;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};
use std::cell::OnceCell;
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
    /// The view, as [`view`] builds it: a [`BoardView`] as JSON.
    pub view: Value,
    /// The earliest instant after the planning time at which any part of the view could read
    /// differently (a plan's decision, an overdue task, an agent's probe coming due): the same
    /// board shows the same view at any time from then until this instant. None when nothing
    /// in it depends on the clock.
    pub until: Option<Timestamp>,
}

/// The board as `coord status --json`, `GET /v1/board` and the MCP `status` tool (`full`)
/// answer it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BoardView {
    /// The tasks per state, every state named.
    pub counts: BTreeMap<String, usize>,
    /// Each agent with its load, circuit, budget and the tasks in its folder.
    pub agents: Vec<AgentLane>,
    /// What the board's tasks spent (`result.metrics`): all of it, by agent and by UTC day.
    pub spending: SpendingView,
    /// The ready task waiting longest; null when none is ready.
    pub oldest_ready: Option<OldestReady>,
    /// The tasks waiting for a person's approval.
    pub review: Vec<InReview>,
    /// Ready tasks no agent may take now, and why.
    pub waiting: Vec<Listed>,
    /// Tasks held back until a time or a gate, and why.
    pub held: Vec<Listed>,
    /// Blocked tasks and what they wait for.
    pub blocked: Vec<Blocked>,
    /// Tasks not final past their due time.
    pub overdue: Vec<Overdue>,
    /// Why each invalid task is invalid (the first line of its `.errors` file), by id.
    pub invalid: BTreeMap<String, String>,
    /// Ids in several places: never assigned until a person keeps one copy.
    pub duplicates: Vec<Duplicate>,
    /// Files coord leaves alone until a person acts, with the fix.
    pub problems: Vec<BoardProblem>,
    /// Files still being written, left unread until they settle.
    pub settling: Vec<Settling>,
}

/// What an agent may do and holds.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentLane {
    /// The agent.
    pub name: AgentName,
    /// The tasks in its folder.
    pub active: usize,
    /// How many it may hold at once (`max_active`).
    pub limit: u32,
    /// Whether it gets work.
    pub enabled: bool,
    /// How it gets work.
    pub assign: AssignMode,
    /// Its circuit: `open` while a budget is spent.
    pub circuit: Circuit,
    /// Why a budget keeps the circuit open; null otherwise.
    pub circuit_reason: Option<String>,
    /// Its `budget:`; null without one.
    pub budget: Option<Budget>,
    /// What it spent this UTC day.
    pub spent_today: Totals,
    /// Until when an open circuit stays open.
    pub open_until: Option<String>,
    /// Whether an open circuit's time is up, so its next task is the one half-open probe.
    pub probe_due: bool,
    /// Why its profile keeps it from new work (does not read, or `enabled: false`).
    pub disabled_because: Option<String>,
    /// The tasks in its folder.
    pub tasks: Vec<LaneTask>,
}

/// A task in an agent's folder.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LaneTask {
    /// The task.
    pub id: TaskId,
    /// Its title; null when the file does not read.
    pub title: Option<String>,
    /// Its state.
    pub state: State,
    /// Its attempt; null when the file does not read.
    pub attempt: Option<u32>,
    /// When its lease ends.
    pub lease_expires_at: Option<String>,
}

/// The totals of what the board's tasks spent.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SpendingView {
    /// Everything.
    pub total: Totals,
    /// By agent (results that name none under `-`).
    pub agents: BTreeMap<String, Totals>,
    /// By UTC day (`YYYY-MM-DD`).
    pub days: BTreeMap<String, Totals>,
}

/// The ready task waiting longest.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OldestReady {
    /// The task.
    pub id: TaskId,
    /// When it was created.
    pub since: String,
}

/// A task waiting for a person's approval.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InReview {
    /// The task.
    pub id: TaskId,
    /// Its title; null when the file does not read.
    pub title: Option<String>,
    /// The agent it names.
    pub agent: Option<AgentName>,
}

/// A task that waits, with the reason.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Listed {
    /// The task.
    pub id: TaskId,
    /// Why it waits.
    pub reason: String,
    /// Its title; null when the file does not read.
    pub title: Option<String>,
}

/// A blocked task.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Blocked {
    /// The task.
    pub id: TaskId,
    /// Its open dependencies.
    pub waiting_for: Vec<TaskId>,
    /// The state of each (`missing` when no file has the id).
    pub states: BTreeMap<String, String>,
    /// Gates not open yet, in words.
    pub gates: Vec<String>,
    /// Its title; null when the file does not read.
    pub title: Option<String>,
}

/// A task past its due time.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Overdue {
    /// The task.
    pub id: TaskId,
    /// Its `due:` as written.
    pub due: String,
    /// Its state.
    pub state: State,
    /// Its title; null when the file does not read.
    pub title: Option<String>,
}

/// An id in several places.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Duplicate {
    /// The id.
    pub id: TaskId,
    /// Every copy.
    pub paths: Vec<String>,
}

/// A file coord leaves alone until a person acts.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BoardProblem {
    /// The file.
    pub path: String,
    /// Where in it (`path:line:column`), for a task file that does not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// What is wrong and what to do.
    pub message: String,
}

/// A file still being written.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Settling {
    /// The file.
    pub path: String,
    /// The task id its name gives.
    pub id: Option<TaskId>,
    /// When it settles unless written again.
    pub until: String,
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
    let view = board_view(board, plan, &clock, invalid_reasons);
    let until = plan.deadline.into_iter().chain(clock.deadline()).min();
    Shown {
        view: serde_json::to_value(view).unwrap_or_default(),
        until,
    }
}

/// Builds the board view of `board` planned as `plan` at `clock`'s time.
fn board_view(
    board: &Board,
    plan: &Plan,
    clock: &Clock,
    invalid_reasons: &BTreeMap<String, String>,
) -> BoardView {
    let now = clock.now();
    // From the board's counts: a tick's board holds the tasks of its blocks as counts alone.
    let by_state = board.counts();
    let counts = State::ALL
        .iter()
        .map(|s| {
            (
                s.as_str().to_string(),
                by_state.get(s).copied().unwrap_or(0),
            )
        })
        .collect();
    let titles = Titles::of(board);
    BoardView {
        counts,
        agents: agents(board, clock),
        spending: spending(board, now),
        oldest_ready: oldest_ready(board),
        review: review(board),
        waiting: listed(&plan.notes, &titles, |n| match n {
            Note::Waiting { id, reason } => Some((id, reason)),
            _ => None,
        }),
        held: listed(&plan.notes, &titles, |n| match n {
            Note::Held { id, reason } => Some((id, reason)),
            _ => None,
        }),
        blocked: blocked(board, &plan.notes, &titles),
        overdue: overdue(board, clock, &titles),
        invalid: invalid_reasons.clone(),
        duplicates: plan
            .notes
            .iter()
            .filter_map(|n| match n {
                Note::Duplicate { id, paths } => Some(Duplicate {
                    id: id.clone(),
                    paths: paths.clone(),
                }),
                _ => None,
            })
            .collect(),
        problems: problems(board, &plan.notes),
        settling: board
            .settling
            .iter()
            .map(|s| Settling {
                path: s.path.clone(),
                id: s.id.clone(),
                until: s.until.to_string(),
            })
            .collect(),
    }
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

/// The titles of the tasks the view lists (waiting, held, blocked, overdue). The board's
/// tasks are looked up by id only when one is listed (a board of 10,000 finished tasks lists
/// none).
struct Titles<'b> {
    board: &'b Board,
    by_id: OnceCell<HashMap<&'b str, &'b TaskFile>>,
}

impl<'b> Titles<'b> {
    fn of(board: &'b Board) -> Titles<'b> {
        Titles {
            board,
            by_id: OnceCell::new(),
        }
    }

    /// Returns task `id`'s title; None when no file has the id or it does not read.
    fn get(&self, id: &TaskId) -> Option<String> {
        let by_id = self.by_id.get_or_init(|| {
            self.board
                .tasks
                .iter()
                .map(|t| (t.id.as_str(), t))
                .collect()
        });
        by_id.get(id.as_str()).and_then(|t| title(t))
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
fn lane(board: &Board, agent: &AgentName) -> Vec<LaneTask> {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.agent.as_ref() == Some(agent))
        .map(|t| {
            let (attempt, lease) = t.read.as_ref().ok().map_or((None, None), |task| {
                task.peek(|d| (Some(d.coord.attempt), d.coord.lease_expires_at))
            });
            LaneTask {
                id: t.id.clone(),
                title: title(t),
                state: t.folder.state,
                attempt,
                lease_expires_at: lease.map(time::format),
            }
        })
        .collect()
}

/// Returns the tasks waiting for a person's approval (`review/`), each with its title and the
/// agent it names.
fn review(board: &Board) -> Vec<InReview> {
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
            InReview {
                id: t.id.clone(),
                title: title(t),
                agent,
            }
        })
        .collect()
}

/// Returns every file coord leaves alone until a person acts: stray files and symlinks, task
/// files outside the inbox that do not read (the first reason, at its line), and files the
/// planner could not act on, with the fix.
fn problems(board: &Board, notes: &[Note]) -> Vec<BoardProblem> {
    let from_notes = notes.iter().filter_map(|n| match n {
        Note::Unreadable { path, errors } => {
            let first = errors.first().map_or("", String::as_str);
            let (at, why) = split_rendered(path, first);
            Some(BoardProblem {
                path: path.clone(),
                at: Some(at),
                message: format!("{why}; it stays where it is until the file is fixed"),
            })
        }
        Note::Skipped { path, message } => Some(BoardProblem::of(path, message)),
        _ => None,
    });
    board
        .problems
        .iter()
        .map(|p| BoardProblem::of(&p.path, &p.message))
        .chain(from_notes)
        .collect()
}

impl BoardProblem {
    /// Returns the problem of `path`, with the fix in `message`.
    pub fn of(path: &str, message: &str) -> BoardProblem {
        BoardProblem {
            path: path.to_string(),
            at: None,
            message: message.to_string(),
        }
    }
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
fn agents(board: &Board, clock: &Clock) -> Vec<AgentLane> {
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
                Some(_) => Circuit::Open,
                None => a.profile.coord.circuit,
            };
            let gate = engine::retry::gate(&a.profile.coord, |t| clock.reached(t));
            AgentLane {
                name: a.name.clone(),
                active,
                limit: a.profile.max_active,
                enabled: a.profile.enabled,
                assign: a.profile.assign,
                circuit,
                circuit_reason: over.map(|(why, _)| why),
                budget: a.profile.budget.clone(),
                spent_today: agent_spent(board, &a.name, Period::Day, clock.now()),
                open_until: a.profile.coord.open_until.map(time::format),
                probe_due: gate == engine::retry::Gate::Probe,
                disabled_because: disabled_because(a),
                tasks: lane(board, &a.name),
            }
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
pub fn spending(board: &Board, now: Timestamp) -> SpendingView {
    let s = board.spending(now);
    SpendingView {
        total: s.total,
        agents: s.agents,
        days: s.days,
    }
}

/// Returns why an agent gets no new work because of its profile: the profile does not read
/// (with where and why), or it says `enabled: false`.
fn disabled_because(a: &AgentEntry) -> Option<String> {
    match (&a.error, &a.file) {
        (Some(e), _) => Some(format!(
            "its profile does not read: {}; fix the file",
            e.message
        )),
        (None, Some(f)) if !a.profile.enabled => Some(format!("{} says enabled: false", f.path)),
        _ => None,
    }
}

fn oldest_ready(board: &Board) -> Option<OldestReady> {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Ready)
        .filter_map(|t| {
            let d = t.read.as_ref().ok()?;
            Some((d.coord.created_at, t.id.clone()))
        })
        .min()
        .map(|(at, id)| OldestReady {
            id,
            since: at.map(time::format).unwrap_or_default(),
        })
}

/// Returns the tasks of the notes `pick` takes, each with its reason and title.
fn listed(
    notes: &[Note],
    titles: &Titles<'_>,
    pick: impl Fn(&Note) -> Option<(&TaskId, &String)>,
) -> Vec<Listed> {
    notes
        .iter()
        .filter_map(pick)
        .map(|(id, reason)| Listed {
            id: id.clone(),
            reason: reason.clone(),
            title: titles.get(id),
        })
        .collect()
}

/// Returns each blocked task with its open dependencies and the state each is in
/// (`missing` when no file has that id).
fn blocked(board: &Board, notes: &[Note], titles: &Titles<'_>) -> Vec<Blocked> {
    notes
        .iter()
        .filter_map(|n| match n {
            Note::Blocked { id, open, gates } => {
                let states = open
                    .iter()
                    .map(|d| {
                        let state = board
                            .find(d)
                            .first()
                            .map_or("missing", |f| f.folder.state.as_str());
                        (d.to_string(), state.to_string())
                    })
                    .collect();
                Some(Blocked {
                    id: id.clone(),
                    waiting_for: open.clone(),
                    states,
                    gates: gates.clone(),
                    title: titles.get(id),
                })
            }
            _ => None,
        })
        .collect()
}

/// Returns the tasks not final whose due time `clock` has passed.
fn overdue(board: &Board, clock: &Clock, titles: &Titles<'_>) -> Vec<Overdue> {
    board
        .tasks
        .iter()
        .filter(|t| !t.folder.state.is_final())
        .filter_map(|t| {
            let spec = &t.read.as_ref().ok()?.spec;
            let (due, at) = (spec.due.clone()?, spec.due_at()?);
            clock.passed(at).then(|| Overdue {
                id: t.id.clone(),
                due,
                state: t.folder.state,
                title: titles.get(&t.id),
            })
        })
        .collect()
}
