//! The board as the cross-task checks see it ([`crate::check::Context`]): which ids and
//! agents exist, and the dependencies of the tasks a check walks through. Pure: a task's
//! dependencies come from its summary when it is waiting to start, else from a parse made for
//! the call, so checking one new task parses only the tasks on its dependency paths.

use super::{Board, TaskFile};
use crate::check::Context;
use crate::model::{AgentName, TaskId};
use std::collections::HashMap;

/// The cross-task checks' view of a board.
pub struct Checks<'b> {
    board: &'b Board,
    /// The last readable copy of each id, as the checks have always taken it.
    by_id: HashMap<&'b TaskId, &'b TaskFile>,
}

impl<'b> Checks<'b> {
    /// Indexes a board for the checks (ids only: nothing is parsed).
    pub fn new(board: &'b Board) -> Self {
        let by_id = board
            .tasks
            .iter()
            .filter(|t| t.read.is_ok())
            .map(|t| (&t.id, t))
            .collect();
        Checks { board, by_id }
    }
}

impl Context for Checks<'_> {
    fn task_exists(&self, id: &TaskId) -> bool {
        self.board.tasks.iter().any(|t| &t.id == id)
    }
    fn agent_exists(&self, agent: &AgentName) -> bool {
        self.board.agents.contains_key(agent)
    }
    fn deps_of(&self, id: &TaskId) -> Option<Vec<TaskId>> {
        let task = self.by_id.get(id)?.read.as_ref().ok()?;
        Some(match &task.summary().waiting {
            Some(waiting) => waiting.depends_on.clone(),
            None => task.peek(|doc| doc.spec.depends_on.clone()),
        })
    }
}
