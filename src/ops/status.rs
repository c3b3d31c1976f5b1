//! The reading operations: `status` (the board view and the assignments not yet on the
//! remote), `show` (one task's files) and `tasks`/`list` (one line per task, filtered). They
//! write nothing and take no lock (`show` takes it to read again a task it found in no folder
//! or in several: a move was under way); they read the store and git. Also what a tick that
//! found nothing to do saves for `status` ([`saved_status`]), which status shows while the
//! repository is in the same state and nothing the board shows has come due.

use super::{Coord, Error, Event, AGENT_WAIT};
use crate::board::{Board, TaskFile};
use crate::engine::commands::known_agent;
use crate::engine::Plan;
use crate::lock;
use crate::model::{AgentName, Priority, State, TaskId, TaskSpec};
use crate::redact::{redact_text, redact_value};
use crate::store::{Session, Store, StoreError, Walk};
use jiff::Timestamp;
use serde_json::{json, Value};

/// The board as `coord status` shows it.
#[derive(Debug, Clone)]
pub struct Status {
    /// The board view (`coord status --json`), secrets redacted.
    pub board: Value,
    /// The assignments here that the remote-tracking branch does not have yet; None without
    /// a remote-tracking branch.
    pub tentative: Option<Tentative>,
    /// This clone's pushes when they near the remote's budget; None below it.
    pub push_rate: Option<PushRate>,
}

/// This clone's pushes over the last [`PushRate::WINDOW_MINUTES`], next to the remote's budget
/// (`sync.pushes_per_minute`, for all clones together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRate {
    /// Pushes this clone made in the window, landed or rejected.
    pub pushes: usize,
    /// The budget, pushes a minute.
    pub budget_per_minute: u32,
}

impl PushRate {
    /// The window the rate is counted over.
    pub const WINDOW_MINUTES: i64 = 10;

    /// The rate when this clone alone made at least 80 % of the window's budget; None below.
    fn near_budget(store: &Store, now: Timestamp) -> Option<PushRate> {
        let budget_per_minute = store.config.sync.pushes_per_minute.max(1);
        let since = now.as_second() - Self::WINDOW_MINUTES * 60;
        let pushes = crate::store::Stats::read(store.repo.git_dir()).pushes_since(since);
        let budget = budget_per_minute as usize * Self::WINDOW_MINUTES as usize;
        (pushes * 5 >= budget * 4).then_some(PushRate {
            pushes,
            budget_per_minute,
        })
    }
}

/// Assignments that are tentative until a push lands: another clone may have won them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tentative {
    /// The remote-tracking branch compared with (`origin/main`).
    pub tracking: String,
    /// The assigned tasks it does not have in the same folder.
    pub ids: Vec<TaskId>,
}

impl Coord {
    /// Returns the board (only `agent`'s tasks and profile when given; an unknown agent is an
    /// error) and the assignments not yet on the remote.
    ///
    /// The whole board is what the last tick saved when it found nothing to do, while the
    /// repository is in the state it saw and nothing the board shows has come due
    /// (the store's quiet board); otherwise it is loaded and planned.
    pub fn status(&self, agent: Option<&AgentName>) -> Result<Status, Error> {
        let session = self.read();
        if agent.is_none() {
            let walked = session.walk_work()?;
            if let Some(status) = self.saved_board(&session, &walked)? {
                return Ok(status);
            }
            // The load takes this walk instead of walking again.
            session.keep_walk(Some(walked));
        }
        let (mut board, _) = session.load()?;
        if let Some(a) = agent {
            known_agent(&board, a)?;
            board.tasks.retain(|t| belongs_to(t, a));
            board.agents.retain(|n, _| n == a);
        }
        let reasons = crate::view::invalid_reasons(&self.store, &board);
        let mut view = crate::view::board::view(&board, &self.inputs(&session), &reasons);
        super::webhooks::add_problems(self.store.repo.git_dir(), &mut view);
        Ok(Status {
            board: redact_value(&view),
            tentative: tentative(&self.store, assigned(&board))?,
            push_rate: PushRate::near_budget(&self.store, self.now),
        })
    }

    /// Returns the whole board as the last quiet tick saved it when `walked` shows the state
    /// it saw and nothing the board shows has come due; None otherwise.
    fn saved_board(&self, session: &Session<'_>, walked: &Walk) -> Result<Option<Status>, Error> {
        let saved = session.quiet_board(walked, self.now);
        let Some((mut board, assigned)) = saved.as_deref().and_then(decode_saved) else {
            return Ok(None);
        };
        super::webhooks::add_problems(self.store.repo.git_dir(), &mut board);
        self.emit(Event::Detail(SHOWN_SAVED));
        let assigned = assigned.iter().map(|(id, path)| (id, path.as_str()));
        Ok(Some(Status {
            board,
            tentative: tentative(&self.store, assigned)?,
            push_rate: PushRate::near_budget(&self.store, self.now),
        }))
    }

    /// Returns every file of task `id` (one, unless the id is duplicated) as `coord show
    /// --json` prints them; an id no file has is an error.
    pub fn show(&self, id: &TaskId) -> Result<super::TaskView, Error> {
        let board = self.load_settled(id, &|s| Ok(s.load()?.0))?;
        Ok(crate::view::task_view(&board, id)?)
    }

    /// Returns the board `load` reads without the lock; when task `id` is in no folder or in
    /// several there (a tick or write may have been moving its file while the folders were
    /// read), the board `load` reads again under the lock, once any move is over. When the
    /// lock cannot be had in time, the first reading stands.
    pub(super) fn load_settled(
        &self,
        id: &TaskId,
        load: &dyn Fn(&Session<'_>) -> Result<Board, StoreError>,
    ) -> Result<Board, Error> {
        let board = load(&self.read())?;
        if board.find(id).len() == 1 {
            return Ok(board);
        }
        let wait = self.wait.unwrap_or(AGENT_WAIT);
        let Ok(guard) = lock::acquire(self.store.repo.git_dir(), wait) else {
            return Ok(board);
        };
        Ok(load(&self.store.session(Some(guard)))?)
    }

    /// Returns one line of facts per task (id, state, agent, title, priority, attempt, lease
    /// end, path), in the board's order; only tasks in `state`, and of `agent` (its folder or
    /// its `agent:` field), when given. Redacted.
    pub fn tasks(
        &self,
        state: Option<State>,
        agent: Option<&AgentName>,
    ) -> Result<Vec<TaskRow>, Error> {
        self.list(&TaskFilter {
            state,
            agent: agent.cloned(),
            ..TaskFilter::default()
        })
    }

    /// Returns one line of facts per task, as [`Coord::tasks`] does, for the tasks that pass
    /// every filter given (`coord list`). An unknown agent is an error.
    pub fn list(&self, filter: &TaskFilter) -> Result<Vec<TaskRow>, Error> {
        let (board, _) = self.read().load()?;
        if let Some(a) = &filter.agent {
            known_agent(&board, a)?;
        }
        Ok(board
            .tasks
            .iter()
            .filter(|t| filter.passes(t, self.store.config.defaults.priority))
            .map(task_line)
            .collect())
    }
}

/// One page of task rows in id order (then path, for copies of one id), as `coord mcp`'s
/// `list` answers it; `coord list --json` answers every row in one page.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TaskPage {
    /// The tasks of this page, one row each.
    pub tasks: Vec<TaskRow>,
    /// What to pass for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// One task's facts, as `coord list` shows them. Redacted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct TaskRow {
    /// The task.
    pub id: TaskId,
    /// The state its folder stands for.
    pub state: State,
    /// The agent whose folder holds it; null outside `assigned/`.
    pub agent: Option<AgentName>,
    /// Its title; null when the file does not read.
    pub title: Option<String>,
    /// Its priority; null when it names none or does not read.
    pub priority: Option<Priority>,
    /// Attempts started so far; null when the file does not read.
    pub attempt: Option<u32>,
    /// When the current attempt's lease ends.
    #[serde(with = "crate::model::time::recorded")]
    #[schemars(schema_with = "crate::model::time::recorded_schema")]
    pub lease_expires_at: Option<Timestamp>,
    /// The file, repo-relative.
    pub path: String,
}

/// A position in the tasks in id order: the id and path of the last task a page held. Given
/// out opaque (hex), as `GET /v1/tasks` gives its cursors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    id: String,
    path: String,
}

impl Cursor {
    /// Returns the cursor's text.
    pub fn encode(&self) -> String {
        format!("{}\n{}", self.id, self.path)
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Reads a cursor's text; a usage error for anything [`Cursor::encode`] did not make.
    pub fn decode(text: &str) -> Result<Cursor, Error> {
        let bad = || {
            Error::Usage(format!(
                "cursor {text:?} is not one coord gave; pass the next_cursor of the last answer, or none for the first page"
            ))
        };
        if !text.len().is_multiple_of(2) || text.len() > 4096 {
            return Err(bad());
        }
        let bytes: Option<Vec<u8>> = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
            .collect();
        let text = String::from_utf8(bytes.ok_or_else(bad)?).map_err(|_| bad())?;
        let (id, path) = text.split_once('\n').ok_or_else(bad)?;
        Ok(Cursor {
            id: id.to_string(),
            path: path.to_string(),
        })
    }
}

impl Coord {
    /// Returns the tasks that pass `filter` in id order, at most `limit` of them, from just
    /// after `after` (from the first without it), and the cursor of the next page when there
    /// are more. Redacted, as [`Coord::list`].
    pub fn list_page(
        &self,
        filter: &TaskFilter,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<TaskPage, Error> {
        let (board, _) = self.read().load()?;
        if let Some(a) = &filter.agent {
            known_agent(&board, a)?;
        }
        let default = self.store.config.defaults.priority;
        let mut tasks: Vec<&TaskFile> = board
            .tasks
            .iter()
            .filter(|t| after.is_none_or(|c| (t.id.as_str(), t.path.as_str()) > (&c.id, &c.path)))
            .filter(|t| filter.passes(t, default))
            .collect();
        tasks.sort_by(|a, b| (a.id.as_str(), &a.path).cmp(&(b.id.as_str(), &b.path)));
        let more = tasks.len() > limit;
        tasks.truncate(limit);
        let next_cursor = tasks.last().filter(|_| more).map(|t| {
            Cursor {
                id: t.id.to_string(),
                path: t.path.clone(),
            }
            .encode()
        });
        Ok(TaskPage {
            tasks: tasks.into_iter().map(task_line).collect(),
            next_cursor,
        })
    }
}

/// Which tasks `coord list` and `GET /v1/tasks` show: those that pass every filter given.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only tasks in this state.
    pub state: Option<State>,
    /// Only this agent's tasks: in its folder, or naming it in `agent:`.
    pub agent: Option<AgentName>,
    /// Only tasks that ask for this capability.
    pub capability: Option<String>,
    /// Only tasks of this priority (a task that names none has coord.yaml's
    /// `defaults.priority`).
    pub priority: Option<Priority>,
}

impl TaskFilter {
    /// Returns whether a task passes every filter, a task without a priority counting as
    /// `default`. Its fields are read only when a filter asks about them, through
    /// `Task::peek` (a parse for this call only), so filtering a long-lived board (coord
    /// serve) leaves no parse of every task behind.
    pub(crate) fn passes(&self, t: &crate::board::TaskFile, default: Priority) -> bool {
        if self.state.is_some_and(|s| t.folder.state != s) {
            return false;
        }
        let asks = self.agent.is_some() || self.capability.is_some() || self.priority.is_some();
        match &t.read {
            Ok(task) if asks => task.peek(|d| self.by_spec(t, Some(&d.spec), default)),
            _ => self.by_spec(t, None, default),
        }
    }

    /// Returns whether a task passes the filters on its fields (`spec`, None when unreadable)
    /// and its folder's agent.
    fn by_spec(
        &self,
        t: &crate::board::TaskFile,
        spec: Option<&TaskSpec>,
        default: Priority,
    ) -> bool {
        self.agent.as_ref().is_none_or(|a| {
            t.folder.agent.as_ref() == Some(a) || spec.is_some_and(|s| s.agent.as_ref() == Some(a))
        }) && self
            .capability
            .as_ref()
            .is_none_or(|c| spec.is_some_and(|s| s.capabilities.contains(c)))
            && self
                .priority
                .is_none_or(|p| spec.is_some_and(|s| s.priority.unwrap_or(default) == p))
    }
}

/// Whether a task is `agent`'s: in its folder, or naming it in `agent:`.
fn belongs_to(t: &crate::board::TaskFile, agent: &AgentName) -> bool {
    t.folder.agent.as_ref() == Some(agent)
        || t.read
            .as_ref()
            .is_ok_and(|d| d.spec.agent.as_ref() == Some(agent))
}

fn task_line(t: &crate::board::TaskFile) -> TaskRow {
    let doc = t.read.as_ref().ok();
    TaskRow {
        id: t.id.clone(),
        state: t.folder.state,
        agent: t.folder.agent.clone(),
        title: doc.map(|d| redact_text(&d.spec.title)),
        priority: doc.and_then(|d| d.spec.priority),
        attempt: doc.map(|d| d.coord.attempt),
        lease_expires_at: doc.and_then(|d| d.coord.lease_expires_at),
        path: t.path.clone(),
    }
}

/// What `coord status -v` says when it shows the board a tick saved.
const SHOWN_SAVED: &str = "coord: nothing changed since a tick found nothing to do, and nothing the board shows has come due; showing the board it saved";

/// What a tick that found nothing to do saves for `coord status`, encoded, and until when it
/// holds.
#[derive(Debug)]
pub(crate) struct SavedStatus {
    /// The view (secrets redacted) and the assigned tasks' ids and paths, as JSON.
    pub bytes: Vec<u8>,
    /// The view's deadline ([`crate::view::board::Shown::until`]).
    pub until: Option<Timestamp>,
}

/// Returns what `coord status` shows of `board`, planned as `plan` at `now`, for the tick to
/// save: the view status builds, and the assigned tasks in board order (whether each is on
/// the remote-tracking branch is looked up when status runs: that branch is not part of the
/// state the save is bound to). None when it cannot be encoded.
pub(crate) fn saved_status(
    store: &Store,
    board: &Board,
    plan: &Plan,
    now: Timestamp,
) -> Option<SavedStatus> {
    let reasons = crate::view::invalid_reasons(store, board);
    let shown = crate::view::board::planned(board, plan, now, &reasons);
    let assigned: Vec<Value> = assigned(board)
        .map(|(id, path)| json!([id, path]))
        .collect();
    let saved = json!({"board": redact_value(&shown.view), "assigned": assigned});
    Some(SavedStatus {
        bytes: serde_json::to_vec(&saved).ok()?,
        until: shown.until,
    })
}

/// Decodes what [`saved_status`] encoded into the board view and the assigned tasks; None
/// for anything else.
fn decode_saved(bytes: &[u8]) -> Option<(Value, Vec<(TaskId, String)>)> {
    let mut saved: Value = serde_json::from_slice(bytes).ok()?;
    let assigned = saved
        .get("assigned")?
        .as_array()?
        .iter()
        .map(|pair| {
            let id = TaskId::new(pair.get(0)?.as_str()?).ok()?;
            Some((id, pair.get(1)?.as_str()?.to_string()))
        })
        .collect::<Option<Vec<_>>>()?;
    let board = saved.get_mut("board").filter(|b| b.is_object())?.take();
    Some((board, assigned))
}

/// Returns the assigned tasks of `board` with their paths, in board order.
fn assigned(board: &Board) -> impl Iterator<Item = (&TaskId, &str)> {
    board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Assigned)
        .map(|t: &TaskFile| (&t.id, t.path.as_str()))
}

/// Returns the assignments (`assigned`: ids and paths in this clone's `work/`) that the
/// remote-tracking branch does not have in the same folder; None without a remote-tracking
/// branch.
fn tentative<'a>(
    store: &Store,
    assigned: impl Iterator<Item = (&'a TaskId, &'a str)>,
) -> Result<Option<Tentative>, Error> {
    let remote = store.config.sync.remote.as_deref().unwrap_or("origin");
    let Some(branch) = store.repo.head()?.branch else {
        return Ok(None);
    };
    let tracking = format!("{remote}/{branch}");
    let Some(tip) = store.repo.ref_target(&format!("refs/remotes/{tracking}"))? else {
        return Ok(None);
    };
    let mut ids = Vec::new();
    for (id, path) in assigned {
        if store.repo.blob_at(tip, path)?.is_none() {
            ids.push(id.clone());
        }
    }
    Ok(Some(Tentative { tracking, ids }))
}
