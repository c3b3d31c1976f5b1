//! The reading operations: `status` (the board view and the assignments not yet on the
//! remote), `show` (one task's files) and `tasks`/`list` (one line per task, filtered). They take no
//! lock and write nothing; they read the store and git.

use super::{Coord, Error};
use crate::board::Board;
use crate::engine::commands::known_agent;
use crate::model::time;
use crate::model::{AgentName, Priority, State, TaskId, TaskSpec};
use crate::redact::redact_value;
use crate::store::Store;
use serde_json::{json, Value};

/// The board as `coord status` shows it.
#[derive(Debug, Clone)]
pub struct Status {
    /// The board view (`coord status --json`), secrets redacted.
    pub board: Value,
    /// The assignments here that the remote-tracking branch does not have yet; None without
    /// a remote-tracking branch.
    pub tentative: Option<Tentative>,
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
    pub fn status(&self, agent: Option<&AgentName>) -> Result<Status, Error> {
        let (mut board, _) = self.store.load()?;
        if let Some(a) = agent {
            known_agent(&board, a)?;
            board.tasks.retain(|t| belongs_to(t, a));
            board.agents.retain(|n, _| n == a);
        }
        let reasons = crate::view::invalid_reasons(&self.store, &board);
        let view = crate::view::board::view(&board, &self.inputs(), &reasons);
        Ok(Status {
            board: redact_value(&view),
            tentative: tentative(&self.store, &board)?,
        })
    }

    /// Returns every file of task `id` (one, unless the id is duplicated) as `coord show
    /// --json` prints each; an id no file has is an error.
    pub fn show(&self, id: &TaskId) -> Result<Vec<Value>, Error> {
        let (board, _) = self.store.load()?;
        Ok(crate::view::task_copies(&board, id)?)
    }

    /// Returns one line of facts per task (id, state, agent, title, priority, attempt, lease
    /// end, path), in the board's order; only tasks in `state`, and of `agent` (its folder or
    /// its `agent:` field), when given. Redacted.
    pub fn tasks(
        &self,
        state: Option<State>,
        agent: Option<&AgentName>,
    ) -> Result<Vec<Value>, Error> {
        self.list(&TaskFilter {
            state,
            agent: agent.cloned(),
            ..TaskFilter::default()
        })
    }

    /// Returns one line of facts per task, as [`Coord::tasks`] does, for the tasks that pass
    /// every filter given (`coord list`). An unknown agent is an error.
    pub fn list(&self, filter: &TaskFilter) -> Result<Vec<Value>, Error> {
        let (board, _) = self.store.load()?;
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

fn task_line(t: &crate::board::TaskFile) -> Value {
    let doc = t.read.as_ref().ok();
    redact_value(&json!({
        "id": t.id,
        "state": t.folder.state.as_str(),
        "agent": t.folder.agent,
        "title": doc.map(|d| &d.spec.title),
        "priority": doc.and_then(|d| d.spec.priority),
        "attempt": doc.map(|d| d.coord.attempt),
        "lease_expires_at": doc.and_then(|d| d.coord.lease_expires_at).map(time::format),
        "path": t.path,
    }))
}

/// Returns the assignments in this clone's `work/` that the remote-tracking branch does not
/// have in the same folder; None without a remote-tracking branch.
fn tentative(store: &Store, board: &Board) -> Result<Option<Tentative>, Error> {
    let remote = store.config.sync.remote.as_deref().unwrap_or("origin");
    let Some(branch) = store.repo.head()?.branch else {
        return Ok(None);
    };
    let tracking = format!("{remote}/{branch}");
    let Some(tip) = store.repo.ref_target(&format!("refs/remotes/{tracking}"))? else {
        return Ok(None);
    };
    let mut ids = Vec::new();
    for t in board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Assigned)
    {
        if store.repo.blob_at(tip, &t.path)?.is_none() {
            ids.push(t.id.clone());
        }
    }
    Ok(Some(Tentative { tracking, ids }))
}
