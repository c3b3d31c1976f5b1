//! What the board's tasks spent (`result.metrics`, read from each task's summary, so no task
//! is parsed): the spends of every task file, totals by task, agent and UTC day, and whether
//! an agent's budget is spent. Derived from the files every time; nothing is counted apart.
//! Pure.

use super::{AgentEntry, Board, TaskFile};
use crate::model::metrics::{Spent, Totals};
use crate::model::{AgentName, State, TaskId};
use jiff::Timestamp;
use std::collections::BTreeMap;

/// Totals of the board's spends by task, by agent and by UTC day (`YYYY-MM-DD`; a result
/// still waiting for the tick counts on the day of `now`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Spending {
    /// Everything.
    pub total: Totals,
    /// By task.
    pub tasks: BTreeMap<TaskId, Totals>,
    /// By agent (results that name none are under `-`).
    pub agents: BTreeMap<String, Totals>,
    /// By UTC day.
    pub days: BTreeMap<String, Totals>,
}

impl Board {
    /// Returns every spend the board's task files record (not those in `invalid/`), each
    /// with its file.
    pub fn spends(&self) -> impl Iterator<Item = (&TaskFile, &Spent)> {
        self.tasks
            .iter()
            .filter(|t| t.folder.state != State::Invalid)
            .filter_map(|t| t.read.as_ref().ok().map(|task| (t, task)))
            .flat_map(|(t, task)| task.summary().spent.iter().map(move |s| (t, s)))
    }

    /// Returns the totals of the board's spends at `now`.
    pub fn spending(&self, now: Timestamp) -> Spending {
        let mut s = Spending::default();
        for (file, spent) in self.spends() {
            let m = &spent.metrics;
            s.total.add(m);
            s.tasks.entry(file.id.clone()).or_default().add(m);
            let agent = spent.agent.as_ref().map_or("-", AgentName::as_str);
            s.agents.entry(agent.to_string()).or_default().add(m);
            let day = spent.at.unwrap_or(now);
            let day = day.to_zoned(jiff::tz::TimeZone::UTC).date().to_string();
            s.days.entry(day).or_default().add(m);
        }
        s
    }

    /// Returns why `agent`'s budget is spent at `now` (`budget: 1,020 of 1,000 tokens
    /// today`) with the instant its period ends; None without a budget or while it has room.
    pub fn budget_spent(&self, agent: &AgentEntry, now: Timestamp) -> Option<(String, Timestamp)> {
        let budget = agent.profile.budget.as_ref()?;
        let spends: Vec<&Spent> = self
            .spends()
            .map(|(_, s)| s)
            .filter(|s| s.agent.as_ref() == Some(&agent.name))
            .collect();
        budget.spent(&spends, now)
    }

    /// Returns whether any agent's profile sets a budget.
    pub fn has_budgets(&self) -> bool {
        self.agents.values().any(|a| a.profile.budget.is_some())
    }
}
