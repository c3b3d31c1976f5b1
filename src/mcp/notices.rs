//! What the MCP server tells its client unasked: for each agent the client works as (named by
//! `coord mcp --agent`, or by a claim, heartbeat or lease_status call), a log message
//! (`notifications/message`, logger `coord`, the event as its data) when a task is assigned to
//! it, when an attempt it held loses its lease (taken back, or another attempt current) and
//! when its task is cancelled. The board is looked at every [`EVERY`], so the client hears of a
//! change about a second after the tick or command that made it. The SDK marks MCP log
//! messages deprecated (for a subscription scheme clients do not speak yet); clients show them
//! today, hence the `allow`.
#![allow(deprecated)]

use super::Server;
use crate::model::{AgentName, State, TaskId};
use crate::ops::{Lost, TaskFilter};
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the board is looked at for the client's agents.
const EVERY: Duration = Duration::from_secs(1);

/// The agents the client is told about, shared by the server's calls.
#[derive(Clone, Default)]
pub(super) struct Agents(Arc<Mutex<BTreeSet<AgentName>>>);

impl Agents {
    /// Returns the set holding `first`, when given.
    pub(super) fn new(first: Option<AgentName>) -> Agents {
        let agents = Agents::default();
        if let Some(a) = first {
            agents.add(&a);
        }
        agents
    }

    /// Tells the client about `agent` from now on.
    pub(super) fn add(&self, agent: &AgentName) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(agent.clone());
    }

    fn all(&self) -> BTreeSet<AgentName> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The attempts the client's agents hold: the agent and attempt, by task.
type Held = BTreeMap<TaskId, (AgentName, u32)>;

/// Returns the event a lost attempt is told as: `cancelled` or `lease_lost`.
pub(super) fn event_of(lost: Lost) -> &'static str {
    crate::ops::LostEvent::of(lost).as_str()
}

/// Tells the client of its agents' tasks until it goes away (its session ends).
pub(super) async fn tell(server: Server, peer: Peer<RoleServer>) {
    let mut held = Held::new();
    loop {
        tokio::time::sleep(EVERY).await;
        if peer.is_transport_closed() {
            return;
        }
        let agents = server.agents.all();
        if agents.is_empty() {
            continue;
        }
        let before = held.clone();
        let Ok(Some((now, notices))) = server.blocking(move |s| s.changes(&agents, &before)).await
        else {
            continue;
        };
        held = now;
        for n in notices {
            if peer.notify_logging_message(message(n)).await.is_err() {
                return;
            }
        }
    }
}

/// Returns the log message telling `event`: a warning for a loss, else information.
fn message(event: Value) -> LoggingMessageNotificationParam {
    let level = match event["event"] == "assigned" {
        true => LoggingLevel::Info,
        false => LoggingLevel::Warning,
    };
    LoggingMessageNotificationParam::new(level, event).with_logger("coord")
}

impl Server {
    /// Returns the attempts `agents` hold now and the events since `before`; None when the
    /// board cannot be read now (the next look tells).
    fn changes(&self, agents: &BTreeSet<AgentName>, before: &Held) -> Option<(Held, Vec<Value>)> {
        let coord = self.open().ok()?;
        let filter = TaskFilter {
            state: Some(State::Assigned),
            ..TaskFilter::default()
        };
        let now: Held = coord
            .list(&filter)
            .ok()?
            .into_iter()
            .filter_map(|r| {
                let (agent, attempt) = (r.agent?, r.attempt?);
                agents.contains(&agent).then_some((r.id, (agent, attempt)))
            })
            .collect();
        let mut events = Vec::new();
        for (id, (agent, attempt)) in before {
            if now.get(id) == Some(&(agent.clone(), *attempt)) {
                continue;
            }
            if let Ok(Some(lost)) = coord.lost(id, agent, *attempt) {
                events.push(json!({"event": event_of(lost), "id": id, "agent": agent,
                    "attempt": attempt, "why": lost.to_string()}));
            }
        }
        for (id, (agent, attempt)) in &now {
            if before.get(id) != Some(&(agent.clone(), *attempt)) {
                events.push(json!({"event": "assigned", "id": id, "agent": agent,
                    "attempt": attempt}));
            }
        }
        Some((now, events))
    }
}
