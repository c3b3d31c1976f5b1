//! Recurring tasks as operations: the tick's schedule step (before its walk, so the task a
//! slot creates is taken in by the same pass) and the rows `coord schedules` prints.

use super::{apply, Coord, Error, Event, Sink};
use crate::model::schedule::{CatchUp, Schedule};
use crate::store::{Applied, Origin, Session};
use jiff::Timestamp;
use std::cell::RefCell;

/// One schedule as `coord schedules` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScheduleRow {
    /// The name (file stem).
    pub name: String,
    /// Repo-relative path.
    pub path: String,
    /// The cron expression (none when the file does not read).
    pub cron: Option<String>,
    /// The time zone.
    pub timezone: Option<String>,
    /// `latest` or `skip`.
    pub catch_up: Option<CatchUp>,
    /// Whether the schedule is paused.
    pub paused: bool,
    /// The latest slot history shows run (RFC 3339).
    pub last_slot: Option<String>,
    /// The next slots (RFC 3339), none when paused.
    pub next: Vec<String>,
    /// Why the file does not read, as `path:line:column: message`.
    pub error: Option<String>,
}

impl Coord {
    /// Returns every schedule with its next `n` slots after now and the latest slot run.
    pub fn schedules(&self, n: usize) -> Result<Vec<ScheduleRow>, Error> {
        let session = self.read();
        let files = session.schedules()?;
        let last = session.slots_run();
        Ok(files
            .into_iter()
            .map(|f| match f.read {
                Ok(s) => ScheduleRow {
                    last_slot: last.get(&s.name).map(Timestamp::to_string),
                    next: match s.spec.paused {
                        true => Vec::new(),
                        false => s
                            .next_slots(self.now, n)
                            .iter()
                            .map(Timestamp::to_string)
                            .collect(),
                    },
                    cron: Some(s.spec.cron.clone()),
                    timezone: Some(s.zone().to_string()),
                    catch_up: Some(s.spec.catch_up),
                    paused: s.spec.paused,
                    name: f.name,
                    path: f.path,
                    error: None,
                },
                Err(e) => ScheduleRow {
                    name: f.name,
                    path: f.path,
                    cron: None,
                    timezone: None,
                    catch_up: None,
                    paused: false,
                    last_slot: None,
                    next: Vec::new(),
                    error: Some(crate::redact::error_line(&e)),
                },
            })
            .collect())
    }
}

/// What the schedule step did.
#[derive(Debug, Default)]
pub(crate) struct Scheduled {
    /// The commits it made.
    pub commits: usize,
    /// The transitions it committed.
    pub transitions: Vec<super::Moved>,
    /// One line per schedule file that does not read.
    pub attention: Vec<String>,
}

/// Creates the task of every schedule slot due at `now` and not run yet (the caller holds
/// the lock). Reads history only when some schedule has a slot due.
pub(crate) fn run_due(
    store: &Session<'_>,
    sink: &Sink,
    now: Timestamp,
) -> Result<Scheduled, Error> {
    let mut done = Scheduled::default();
    let mut schedules: Vec<Schedule> = Vec::new();
    for f in store.schedules()? {
        match f.read {
            Ok(s) => schedules.push(s),
            Err(e) => done.attention.push(crate::redact::error_line(&e)),
        }
    }
    if schedules.iter().all(|s| s.due(now, None).is_none()) {
        return Ok(done);
    }
    let last = store.slots_run();
    if schedules
        .iter()
        .all(|s| s.due(now, last.get(&s.name).copied()).is_none())
    {
        return Ok(done);
    }
    let board = store.load_scoped(&|_| false)?;
    let plan = crate::engine::schedule::plan(&board, &schedules, &last, now);
    if plan.is_empty() {
        return Ok(done);
    }
    if !store.plan_stays_in_scope(&board, &plan)? {
        sink(&Event::Detail(
            "coord: a scheduled task's path is taken outside a commit; the next tick looks again",
        ));
        return Ok(done);
    }
    let committed = RefCell::new(Vec::new());
    let collect = |event: &Event<'_>| {
        if let Event::Applied(t, Applied::Committed) = event {
            committed.borrow_mut().push(super::Moved::of(t));
        }
        sink(event);
    };
    done.commits = apply(store, &collect, &plan, now, Origin::Tick)?;
    done.transitions = committed.into_inner();
    Ok(done)
}
