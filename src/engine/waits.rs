//! What held tasks wait for: a task in an agent's hands waits for its result or its lease's
//! end, a task in review for a person's approval. Noted for every such task the tick left
//! where it was, so no task that is not final is ever silent.

use super::world::World;
use super::Note;
use crate::model::{Review, State};

/// Notes every task left in review or in an agent's hands with what ends its wait.
pub fn run(w: &mut World<'_>) {
    let held: Vec<_> = w
        .live_entries()
        .filter(|e| matches!(e.folder.state, State::Review | State::Assigned))
        .filter(|e| !w.acted_on(&e.id))
        .map(|e| {
            let id = e.id.clone();
            let c = &e.task.coord;
            let reason = match (e.folder.state, &e.folder.agent) {
                (State::Assigned, Some(agent)) => {
                    let lease = c.lease_expires_at.map_or_else(
                        || "it has no lease; 'coord fail' or a result ends it".to_string(),
                        |t| format!("the lease ends at {t} ('coord heartbeat {id}' extends it)"),
                    );
                    format!(
                        "{agent} works on it (attempt {}); {lease}",
                        c.attempt
                    )
                }
                _ if c.review == Some(Review::Result) => format!(
                    "its result waits for approval: 'coord approve {id}' or 'coord reject {id} --reason R'"
                ),
                _ => format!(
                    "waits for approval to start: 'coord approve {id}' or 'coord reject {id} --reason R'"
                ),
            };
            (id, reason)
        })
        .collect();
    for (id, reason) in held {
        w.note(Note::Held { id, reason });
    }
}
