//! `log`: the transitions read back from the trailers coord writes into its commits, newest
//! first. Reads git history.

use super::{Coord, Error};
use crate::engine::commands::CommandError;
use crate::git::{CommitInfo, Touch, Touched};
use crate::model::{Endpoint, TaskId};
use crate::redact::one_line;
use jiff::Timestamp;

/// One transition as history records it; serialized as `coord log --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct LogEntry {
    /// The commit id in hex.
    #[schemars(regex(pattern = r"^[0-9a-f]{40}$"))]
    pub commit: String,
    /// When it was committed (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    #[schemars(schema_with = "rfc3339_schema")]
    pub time: Timestamp,
    /// The task (or agent, for profile updates) it concerns.
    #[serde(rename = "task")]
    pub subject: String,
    /// Where the transition started (`Coord-From`), when recorded.
    pub from: Option<Endpoint>,
    /// Where it ended (`Coord-To`), when recorded.
    pub to: Option<Endpoint>,
    /// The command (`Coord-Op`: new, claim, complete, ...), or add, edit, delete for a
    /// person's change; null when not recorded.
    pub op: Option<String>,
    /// The summary line without the `coord: ` prefix, on one line.
    pub summary: String,
    /// Who, for a person's change (the commit's author); absent for coord's transitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

impl LogEntry {
    /// Returns the transitions a commit records (from its `Coord-*` trailers), newest first:
    /// one for a command's commit, several for a commit of a large tick pass, none for a
    /// commit coord did not make.
    pub(crate) fn all(c: &CommitInfo) -> Vec<LogEntry> {
        let summary = one_line(c.summary.strip_prefix("coord: ").unwrap_or(&c.summary));
        c.transitions()
            .into_iter()
            .rev()
            .map(|t| LogEntry {
                commit: c.oid.clone(),
                time: c.time,
                subject: t.subject,
                from: t.from,
                to: t.to,
                op: t.op,
                summary: t.summary.map_or_else(|| summary.clone(), |s| one_line(&s)),
                by: None,
            })
            .collect()
    }

    /// Returns the task files a commit without coord's trailers (a person's commit, or coord's
    /// recording of people's changes) added, edited or deleted under `work_dir`, newest first:
    /// op `add` (from none to the folder's state), `edit` (from and to the folder's state) or
    /// `delete` (from the folder's state to none); a file moved by hand is a delete and an add.
    pub fn edits(c: &CommitInfo, touched: &Touched, work_dir: &str) -> Vec<LogEntry> {
        let prefix = format!("{work_dir}/");
        let summary = one_line(c.summary.strip_prefix("coord: ").unwrap_or(&c.summary));
        touched
            .files
            .iter()
            .rev()
            .filter_map(|(path, how)| {
                let (folder, id) = crate::board::task_at(path.strip_prefix(&prefix)?)?;
                let state = Some(Endpoint::State(folder.state));
                let (from, to, op) = match how {
                    Touch::Added => (None, state, "add"),
                    Touch::Changed => (state, state, "edit"),
                    Touch::Deleted => (state, None, "delete"),
                };
                Some(LogEntry {
                    commit: c.oid.clone(),
                    time: c.time,
                    subject: id.to_string(),
                    from,
                    to,
                    op: Some(op.to_string()),
                    summary: summary.clone(),
                    by: Some(one_line(&touched.author)),
                })
            })
            .collect()
    }

    /// Returns the moves of task files a commit without coord's trailers made, as
    /// [`LogEntry::edits`] finds them, with a file's delete and add (a `git mv` between folders)
    /// made one entry, op `move`, from the old folder's state to the new one's; edits in place
    /// change no state and are left out.
    pub fn moves(c: &CommitInfo, touched: &Touched, work_dir: &str) -> Vec<LogEntry> {
        let all = LogEntry::edits(c, touched, work_dir);
        let mut out: Vec<LogEntry> = Vec::new();
        for e in all.into_iter().filter(|e| e.from != e.to) {
            let pair = out.iter_mut().find(|o| {
                o.subject == e.subject
                    && o.op.as_deref() != Some("move")
                    && (o.from.is_none() != e.from.is_none())
            });
            match pair {
                Some(o) => {
                    o.from = o.from.or(e.from);
                    o.to = o.to.or(e.to);
                    o.op = Some("move".to_string());
                }
                None => out.push(e),
            }
        }
        out
    }

    /// Whether coord made the commit (not a person, nor coord's recording of people's
    /// changes).
    pub fn is_coords(c: &CommitInfo) -> bool {
        is_own(c)
    }

    /// Whether the entry records no change of state: a result written, a heartbeat (`assigned
    /// -> assigned`). People's edits and reassignments are not noise.
    pub fn is_noise(&self) -> bool {
        self.by.is_none()
            && self.from.is_some()
            && self.from == self.to
            && self.op.as_deref() != Some(crate::engine::OpKind::Reassign.as_str())
    }
}

/// Serializes a timestamp as its RFC 3339 text.
fn rfc3339<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

/// The schema of an entry's `time`.
fn rfc3339_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"
    })
}

impl Coord {
    /// Returns at most `limit` entries of the history people read (`coord log`), newest
    /// first, only task `id`'s when given: coord's transitions without the noise (`assigned
    /// -> assigned`) unless `all`, and people's edits, additions and deletions of task files.
    pub fn history(
        &self,
        id: Option<&TaskId>,
        limit: Option<usize>,
        all: bool,
    ) -> Result<Vec<LogEntry>, Error> {
        let repo = &self.store.repo;
        let work_dir = self.store.work_dir();
        let mut entries = Vec::new();
        for c in repo.log(None)? {
            let mut found = LogEntry::all(&c);
            if found.is_empty() && !is_own(&c) {
                found = LogEntry::edits(&c, &repo.touched(&c.oid, work_dir)?, work_dir);
            }
            entries.extend(
                found
                    .into_iter()
                    .filter(|e| all || !e.is_noise())
                    .filter(|e| id.is_none_or(|id| id.as_str() == e.subject)),
            );
            if limit.is_some_and(|n| entries.len() >= n) {
                break;
            }
        }
        entries.truncate(limit.unwrap_or(usize::MAX));
        if let Some(id) = id.filter(|_| entries.is_empty()) {
            let (board, _) = self.read().load()?;
            if board.find(id).is_empty() {
                return Err(CommandError::NotFound(id.clone()).into());
            }
        }
        Ok(entries)
    }

    /// Returns at most `limit` transitions, newest first; only task `id`'s when given (an id
    /// that has none and is on no file is an error).
    pub fn log(&self, id: Option<&TaskId>, limit: Option<usize>) -> Result<Vec<LogEntry>, Error> {
        let entries: Vec<LogEntry> = self
            .store
            .repo
            .log(None)?
            .iter()
            .flat_map(LogEntry::all)
            .filter(|e| id.is_none_or(|id| id.as_str() == e.subject))
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        if let Some(id) = id.filter(|_| entries.is_empty()) {
            let (board, _) = self.read().load()?;
            if board.find(id).is_empty() {
                return Err(CommandError::NotFound(id.clone()).into());
            }
        }
        Ok(entries)
    }
}

/// Whether a commit is one of coord's own that records no task file change of a person's
/// (`init`, `agents add`): coord's commits say so in their summary, except the recording of
/// people's changes.
fn is_own(c: &CommitInfo) -> bool {
    c.summary.starts_with("coord: ") && !c.summary.starts_with("coord: record external changes")
}
