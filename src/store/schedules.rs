//! Schedules as the tick reads them: every `work/schedules/<name>.yaml`, checked against
//! `schemas/schedule.schema.json` and its task template against the task schema; and the
//! latest slot of each schedule that history names (a `Coord-Task` trailer with the id of a
//! slot's task), kept in `.git/coord/schedule-slots.json` with the HEAD it was read at so a
//! tick reads only the commits since. Deleting that file is always safe. Does I/O (files,
//! git).

use super::{io_err, Session, Store, StoreError};
use crate::check::read_task;
use crate::engine::schedule::task_text;
use crate::fsx;
use crate::model::schedule::{parse_slot_task_id, Schedule, ScheduleSpec};
use crate::model::AgentName;
use crate::schema::Schema;
use crate::yaml::{parse_bytes, Limits};
use jiff::Timestamp;
use std::collections::BTreeMap;

const FILE: &str = "schedule-slots.json";

/// The largest schedule file read.
const MAX_BYTES: usize = 256 * 1024;

/// One schedule file.
#[derive(Debug, Clone)]
pub struct ScheduleFile {
    /// The schedule's name (the file's stem).
    pub name: String,
    /// Repo-relative path.
    pub path: String,
    /// The schedule, or the `path:line:column: message` line saying why it does not read.
    pub read: Result<Schedule, String>,
}

/// The latest slot run per schedule (Unix seconds), with the HEAD it was read at.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Slots {
    head: Option<String>,
    latest: BTreeMap<String, i64>,
}

impl Store {
    /// Returns the schedules under `work/schedules/`, sorted by name (none when the folder
    /// does not exist).
    pub fn schedules(&self) -> Result<Vec<ScheduleFile>, StoreError> {
        let rel = format!("{}/schedules", self.work_dir());
        let dir = self.abs(&rel);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&dir)(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err(&dir))?;
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = file
                .strip_suffix(".yaml")
                .or_else(|| file.strip_suffix(".yml"))
            else {
                continue;
            };
            if AgentName::new(stem).is_err() || file.starts_with('.') {
                continue;
            }
            let path = format!("{rel}/{file}");
            let read = self.read_schedule(stem, &path);
            out.push(ScheduleFile {
                name: stem.to_string(),
                path,
                read,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn read_schedule(&self, name: &str, path: &str) -> Result<Schedule, String> {
        let bytes = fsx::read_limited(self.root(), path, MAX_BYTES)
            .map_err(|e| format!("{path}: cannot read: {e}"))?;
        let doc = parse_bytes(&bytes, &Limits::default())
            .map_err(|e| format!("{path}:{}:{}: {}", e.pos.line, e.pos.col, e.message))?;
        if let Some(v) = Schema::builtin_schedule().validate(&doc).first() {
            return Err(v.render(path));
        }
        let spec: ScheduleSpec =
            serde_json::from_value(doc.value.clone()).map_err(|e| format!("{path}: {e}"))?;
        let schedule = Schedule::new(name, spec).map_err(|e| format!("{path}: {e}"))?;
        let sample = task_text(&schedule, Timestamp::UNIX_EPOCH);
        if let Err(errors) = read_task(
            name,
            sample.as_bytes(),
            self.task_schema(),
            &Limits::default(),
        ) {
            let why = errors
                .first()
                .map(|v| v.message.clone())
                .unwrap_or_default();
            return Err(format!(
                "{path}: the task template is not a valid task: {why}"
            ));
        }
        Ok(schedule)
    }
}

impl Session<'_> {
    /// Returns the latest slot history names per schedule (by the ids of the tasks slots
    /// created), reading only the commits since the last read when HEAD descends from it.
    /// In a shallow clone it first fetches the history the clone lacks, when the command
    /// gave it a way to. A failure to read history keeps what is known.
    pub fn slots_run(&self) -> BTreeMap<String, Timestamp> {
        self.deepen_once();
        let path = self.private_dir().join(FILE);
        let mut known: Slots = fsx::read_private(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let keep = |id: &str| parse_slot_task_id(id).is_some();
        let Ok(named) = self.repo.named_tasks(known.head.as_deref(), &keep) else {
            return known.as_times();
        };
        if known.head == named.head {
            return known.as_times();
        }
        if !named.incremental {
            known.latest.clear();
        }
        for id in &named.ids {
            if let Some((name, slot)) = parse_slot_task_id(id) {
                let secs = slot.as_second();
                let latest = known.latest.entry(name.to_string()).or_insert(secs);
                *latest = (*latest).max(secs);
            }
        }
        known.head = named.head;
        if let Ok(bytes) = serde_json::to_vec(&known) {
            let _ = fsx::write_private(&path, &bytes, false);
        }
        known.as_times()
    }
}

impl Slots {
    fn as_times(&self) -> BTreeMap<String, Timestamp> {
        self.latest
            .iter()
            .filter_map(|(name, s)| Some((name.clone(), Timestamp::from_second(*s).ok()?)))
            .collect()
    }
}
