//! Adoption of hand moves (docs/files.md): a file a person moved between folders keeps its folder's
//! state; its `coord:` block is brought in line with the folder.

use super::assign::start_attempt;
use super::world::{ResultEdit, World};
use crate::model::{Review, State, TaskId};

/// Brings every live task's `coord:` block in line with its folder.
pub fn run(w: &mut World<'_>) {
    let ids: Vec<TaskId> = w
        .live_entries()
        .filter(|e| {
            !matches!(
                e.folder.state,
                State::Inbox | State::Invalid | State::Archived
            )
        })
        .filter(|e| {
            let seen = e.task.summary();
            let recorded = seen.state;
            let agent_ok = e.folder.state != State::Assigned || seen.assigned_to == e.folder.agent;
            recorded != Some(e.folder.state) || !agent_ok
        })
        .map(|e| e.id.clone())
        .collect();
    for id in ids {
        adopt(w, &id);
    }
}

fn adopt(w: &mut World<'_>, id: &TaskId) {
    let Some(e) = w.entry(id) else { return };
    let folder = e.folder.clone();
    let mut c = e.task.coord.clone();
    let now = w.now();
    c.state = Some(folder.state);
    c.created_at.get_or_insert(now);
    match (&folder.agent, folder.state) {
        (Some(agent), State::Assigned) => {
            let agent = agent.clone();
            if let Err(reason) = start_attempt(w, id, &agent, &mut c) {
                c.error = Some(reason);
            }
        }
        (_, State::Done | State::Failed | State::Cancelled) => {
            c.lease_expires_at = None;
            c.finished_at = Some(now);
        }
        (_, State::Review) => {
            c.review.get_or_insert(Review::Start);
        }
        _ => {
            c.assigned_to = None;
            c.assigned_at = None;
            c.lease_expires_at = None;
        }
    }
    let summary = format!("adopt {id}, moved by hand to {folder}");
    w.transit(id, folder, c, ResultEdit::Keep, summary);
}
