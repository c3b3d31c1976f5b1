//! Recurring tasks: a schedule file (`work/schedules/<name>.yaml`) as a typed value, its
//! slots (the instants its cron expression names in its time zone) and the id of the task a
//! slot creates. Pure: the caller gives the clock.

use super::{Duration, TaskId};
use croner::parser::{CronParser, Seconds};
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde_json::{Map, Value};

/// What a tick does about slots that passed while nobody ticked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Runs the most recent slot not run yet, once, however late (the default).
    #[default]
    Latest,
    /// Runs a slot only when a tick sees it within `grace` of its time; later it is skipped.
    Skip,
}

/// A schedule file as written (validated against `schemas/schedule.schema.json` first).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Five-field cron expression (minute hour day-of-month month day-of-week).
    pub cron: String,
    /// IANA time zone the expression is read in (default UTC).
    #[serde(default)]
    pub timezone: Option<String>,
    /// Missed slots: `latest` or `skip`.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// How late a tick may see a slot and still run it, with `catch_up: skip` (default 10m).
    #[serde(default)]
    pub grace: Option<Duration>,
    /// A paused schedule creates nothing.
    #[serde(default)]
    pub paused: bool,
    /// The task file each slot creates (any task keys; `title` required).
    pub task: Map<String, Value>,
}

/// Why a schedule does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error("cron '{cron}' does not parse: {why}; write five fields, e.g. '0 * * * *'")]
    Cron {
        /// The expression.
        cron: String,
        /// The parser's reason.
        why: String,
    },
    /// The time zone is not known to the system's time zone database.
    #[error("timezone '{0}' is unknown; use an IANA name such as UTC or Europe/Berlin")]
    TimeZone(String),
    /// The name does not make valid task ids with a slot (too long, most often).
    #[error("schedule name '{0}' makes no valid task id with its slot ('<name>.YYYYMMDDTHHMMZ', at most 128 characters); rename the file")]
    Name(String),
}

/// The default `grace` of `catch_up: skip`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(600);

/// A schedule ready to compute slots: its spec, parsed expression and time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The name (file stem).
    pub name: String,
    /// The file as written.
    pub spec: ScheduleSpec,
    cron: Cron,
    tz: TimeZone,
}

impl Schedule {
    /// Reads a schedule's expression and time zone.
    pub fn new(name: &str, spec: ScheduleSpec) -> Result<Schedule, ScheduleError> {
        let parser = CronParser::builder().seconds(Seconds::Disallowed).build();
        let cron = parser.parse(&spec.cron).map_err(|e| ScheduleError::Cron {
            cron: spec.cron.clone(),
            why: e.to_string(),
        })?;
        let zone = spec.timezone.as_deref().unwrap_or("UTC");
        let tz = TimeZone::get(zone).map_err(|_| ScheduleError::TimeZone(zone.to_string()))?;
        if slot_task_id(name, Timestamp::UNIX_EPOCH).is_err() {
            return Err(ScheduleError::Name(name.to_string()));
        }
        Ok(Schedule {
            name: name.to_string(),
            spec,
            cron,
            tz,
        })
    }

    /// Returns the time zone's name.
    pub fn zone(&self) -> &str {
        self.spec.timezone.as_deref().unwrap_or("UTC")
    }

    /// Returns the latest slot at or before `now`.
    pub fn slot_at_or_before(&self, now: Timestamp) -> Option<Timestamp> {
        let at = now.to_zoned(self.tz.clone());
        self.cron
            .find_previous_occurrence(&at, true)
            .ok()
            .map(|z| z.timestamp())
    }

    /// Returns up to `n` slots after `now`, in order.
    pub fn next_slots(&self, now: Timestamp, n: usize) -> Vec<Timestamp> {
        let mut out = Vec::with_capacity(n);
        let mut at = now.to_zoned(self.tz.clone());
        while out.len() < n {
            match self.cron.find_next_occurrence(&at, false) {
                Ok(next) => {
                    out.push(next.timestamp());
                    at = next;
                }
                Err(_) => break,
            }
        }
        out
    }

    /// Returns the slot a tick at `now` runs, given the latest slot run before (`last`):
    /// the latest slot at or before `now`, when it is after `last`, the schedule is not
    /// paused, and (with `catch_up: skip`) it is at most `grace` old.
    pub fn due(&self, now: Timestamp, last: Option<Timestamp>) -> Option<Timestamp> {
        if self.spec.paused {
            return None;
        }
        let slot = self.slot_at_or_before(now)?;
        if last.is_some_and(|l| slot <= l) {
            return None;
        }
        match self.spec.catch_up {
            CatchUp::Latest => Some(slot),
            CatchUp::Skip => {
                let grace = self.spec.grace.unwrap_or(DEFAULT_GRACE).as_secs();
                (now.as_second() - slot.as_second() <= grace).then_some(slot)
            }
        }
    }
}

/// Returns the id of the task `schedule` creates for `slot`: `<schedule>.<YYYYMMDDTHHMMZ>`
/// (UTC), the same in every clone, so two clones create the same file.
pub fn slot_task_id(schedule: &str, slot: Timestamp) -> Result<TaskId, super::NameError> {
    TaskId::new(&format!("{schedule}.{}", slot_stamp(slot)))
}

/// Returns a slot written as in a task id: `20261128T0300Z`.
pub fn slot_stamp(slot: Timestamp) -> String {
    slot.strftime("%Y%m%dT%H%MZ").to_string()
}

/// Reads a task id made by [`slot_task_id`] back into its schedule and slot.
pub fn parse_slot_task_id(id: &str) -> Option<(&str, Timestamp)> {
    let (name, stamp) = id.rsplit_once('.')?;
    if stamp.len() != 14 || name.is_empty() {
        return None;
    }
    let slot = jiff::fmt::strtime::parse("%Y%m%dT%H%MZ", stamp)
        .ok()?
        .to_datetime()
        .ok()?
        .to_zoned(TimeZone::UTC)
        .ok()?
        .timestamp();
    Some((name, slot))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn schedule(yaml: &str) -> Schedule {
        let value: Value = serde_json::from_str(yaml).unwrap();
        Schedule::new("s", serde_json::from_value(value).unwrap()).unwrap()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_slot_is_due_once_and_never_before_the_last_run() {
        let s = schedule(r#"{"cron": "0 * * * *", "task": {"title": "t"}}"#);
        let now = ts("2026-11-28T03:20:00Z");
        assert_eq!(s.due(now, None), Some(ts("2026-11-28T03:00:00Z")));
        assert_eq!(s.due(now, Some(ts("2026-11-28T03:00:00Z"))), None);
        // The clock went back: the slot before the last run is not run again.
        let back = ts("2026-11-28T01:30:00Z");
        assert_eq!(s.due(back, Some(ts("2026-11-28T03:00:00Z"))), None);
    }

    #[test]
    fn skip_runs_a_slot_only_within_grace() {
        let s = schedule(r#"{"cron": "0 * * * *", "catch_up": "skip", "task": {"title": "t"}}"#);
        assert_eq!(
            s.due(ts("2026-11-28T03:09:00Z"), None),
            Some(ts("2026-11-28T03:00:00Z"))
        );
        assert_eq!(s.due(ts("2026-11-28T03:11:00Z"), None), None);
    }

    #[test]
    fn slots_follow_the_time_zone_across_a_dst_change() {
        let s = schedule(
            r#"{"cron": "30 2 * * *", "timezone": "Europe/Berlin", "task": {"title": "t"}}"#,
        );
        // 2026-03-29 02:30 does not exist in Berlin; the slots around it stay one a day.
        let next = s.next_slots(ts("2026-03-27T12:00:00Z"), 3);
        assert_eq!(next.len(), 3);
        assert_eq!(next[0], ts("2026-03-28T01:30:00Z"));
        assert_eq!(next[2], ts("2026-03-30T00:30:00Z"));
    }

    #[test]
    fn a_slot_id_reads_back() {
        let slot = ts("2026-11-28T03:00:00Z");
        let id = slot_task_id("nightly.build", slot).unwrap();
        assert_eq!(id.as_str(), "nightly.build.20261128T0300Z");
        assert_eq!(
            parse_slot_task_id(id.as_str()),
            Some(("nightly.build", slot))
        );
        assert_eq!(parse_slot_task_id("fix-login"), None);
    }

    #[test]
    fn bad_expressions_and_zones_are_named() {
        let spec = |cron: &str, tz: &str| -> ScheduleSpec {
            serde_json::from_value(
                serde_json::json!({"cron": cron, "timezone": tz, "task": {"title": "t"}}),
            )
            .unwrap()
        };
        assert!(matches!(
            Schedule::new("s", spec("61 * * * *", "UTC")),
            Err(ScheduleError::Cron { .. })
        ));
        assert!(matches!(
            Schedule::new("s", spec("0 * * * *", "Mars/Olympus")),
            Err(ScheduleError::TimeZone(_))
        ));
    }
}
