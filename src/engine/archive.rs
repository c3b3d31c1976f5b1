//! Archiving (docs/commands.md `coord archive`, 6 `archive_after`): done and cancelled tasks whose
//! `coord.finished_at` is at least the given age move to `archive/<YYYY-MM>/`, the month of
//! `finished_at`, one commit each. The file is moved, never rewritten: its `coord.state` stays
//! `done` or `cancelled`, which is what dependencies read (`deps::effective_state`). Pure.

use super::world::{Entry, World};
use super::{Inputs, Note, Op, Plan, Transition};
use crate::board::Board;
use crate::model::{Duration, Folder, State};
use jiff::{tz::TimeZone, Timestamp};

/// Plans moving every done or cancelled task finished at least `older_than` before now.
/// Tasks without a readable `coord.finished_at` are left where they are, with a note.
pub fn plan(board: &Board, inputs: &Inputs<'_>, older_than: Duration) -> Plan {
    let w = World::new(board, inputs);
    let cutoff = w.clock.before(older_than.to_signed());
    let mut out = Plan::default();
    for e in w.live_entries() {
        if !matches!(e.folder.state, State::Done | State::Cancelled) {
            continue;
        }
        match finished(e) {
            Some(at) if at <= cutoff => out.transitions.push(move_to_archive(board, e, at)),
            Some(_) => {}
            None => out.notes.push(Note::Skipped {
                path: e.path.clone(),
                message: "no readable coord.finished_at, so its age is unknown; not archived"
                    .to_string(),
            }),
        }
    }
    out.notes.extend(w.finish().notes);
    out
}

fn finished(e: &Entry) -> Option<Timestamp> {
    e.task.coord.finished_at
}

/// Returns the archive month (`YYYY-MM`, UTC) of a finishing time.
pub fn month_of(at: Timestamp) -> String {
    at.to_zoned(TimeZone::UTC).strftime("%Y-%m").to_string()
}

fn move_to_archive(board: &Board, e: &Entry, at: Timestamp) -> Transition {
    let folder = Folder::archive(month_of(at).into());
    let to = board.path_in(&folder, &e.file_name());
    Transition {
        subject: e.id.to_string(),
        from: e.folder.state.into(),
        to: State::Archived.into(),
        summary: format!("archive {} to {}", e.id, folder.rel_dir()),
        ops: vec![Op::Move {
            from: e.path.clone(),
            to,
        }],
        guard: vec![(e.path.clone(), e.hash)],
        op: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn month_is_utc() {
        let t: Timestamp = "2026-11-30T23:59:59Z".parse().expect("time");
        assert_eq!(month_of(t), "2026-11");
        let t: Timestamp = "2026-12-01T00:00:00Z".parse().expect("time");
        assert_eq!(month_of(t), "2026-12");
    }
}
