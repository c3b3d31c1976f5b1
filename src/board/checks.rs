//! The board as the cross-task checks see it ([`crate::check::Context`]): which ids and
//! agents exist, and each readable task's dependencies. Pure.

use super::Board;
use crate::check::Context;
use crate::model::{AgentName, TaskId};
use std::collections::HashMap;

/// The cross-task checks' view of a board.
pub struct Checks<'b> {
    board: &'b Board,
    deps: HashMap<&'b TaskId, Vec<TaskId>>,
}

impl<'b> Checks<'b> {
    /// Indexes a board for the checks.
    pub fn new(board: &'b Board) -> Self {
        let deps = board
            .tasks
            .iter()
            .filter_map(|t| {
                t.read
                    .as_ref()
                    .ok()
                    .map(|d| (&t.id, d.spec.depends_on.clone()))
            })
            .collect();
        Checks { board, deps }
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
        self.deps.get(id).cloned()
    }
}
