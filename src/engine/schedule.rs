//! Recurring tasks: which slot of each schedule a tick runs and the task file it writes into
//! `inbox/`. The task's id is derived from the schedule and the slot
//! ([`crate::model::schedule::slot_task_id`]), so two clones write the same file and the
//! sync keeps one; the latest slot history names is never run again, so neither a revert
//! of a created task nor a clock set back brings a slot back. Pure: the store reads the
//! schedules and the slots history names.

use super::{Op, Plan, Transition};
use crate::board::Board;
use crate::model::schedule::{slot_task_id, Schedule};
use crate::model::{Endpoint, State};
use crate::yaml::emit_block;
use jiff::Timestamp;
use std::collections::BTreeMap;

/// Plans the task of every schedule whose slot is due at `now`: the latest slot at or before
/// `now` after the latest slot run (`last`, by schedule name), unless a task with its id
/// exists on `board`.
pub fn plan(
    board: &Board,
    schedules: &[Schedule],
    last: &BTreeMap<String, Timestamp>,
    now: Timestamp,
) -> Plan {
    let mut plan = Plan::default();
    for s in schedules {
        let Some(slot) = s.due(now, last.get(&s.name).copied()) else {
            continue;
        };
        let Ok(id) = slot_task_id(&s.name, slot) else {
            continue;
        };
        if board.has_id(&id) {
            continue;
        }
        plan.transitions.push(Transition {
            subject: id.to_string(),
            from: Endpoint::New,
            to: State::Inbox.into(),
            summary: format!("schedule {}: new task {id} for {slot}", s.name),
            ops: vec![Op::Write {
                path: format!("{}/inbox/{id}.yaml", board.work_dir),
                text: task_text(s, slot),
            }],
            guard: Vec::new(),
            op: None,
        });
    }
    plan
}

/// Returns the task file a schedule writes for `slot`: a comment naming both, then the
/// template's keys in their order.
pub fn task_text(s: &Schedule, slot: Timestamp) -> String {
    let mut text = format!("# Created by schedule '{}' for the slot {slot}.\n", s.name);
    for (key, value) in &s.spec.task {
        text.push_str(&emit_block(key, value, 0));
    }
    text
}
