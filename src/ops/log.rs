//! `log`: the transitions read back from the trailers coord writes into its commits, newest
//! first. Reads git history.

use super::{Coord, Error};
use crate::engine::commands::CommandError;
use crate::git::CommitInfo;
use crate::model::TaskId;
use crate::redact::one_line;
use jiff::Timestamp;

/// One transition as history records it; serialized as `coord log --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogEntry {
    /// The commit id in hex.
    pub commit: String,
    /// When it was committed (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub time: Timestamp,
    /// The task (or agent, for profile updates) it concerns.
    #[serde(rename = "task")]
    pub subject: String,
    /// The state before (`Coord-From`), when recorded.
    pub from: Option<String>,
    /// The state after (`Coord-To`), when recorded.
    pub to: Option<String>,
    /// The operation (`Coord-Op`: new, claim, complete, ...), when recorded.
    pub op: Option<String>,
    /// The summary line without the `coord: ` prefix, on one line.
    pub summary: String,
}

impl LogEntry {
    /// Returns the transitions a commit records (from its `Coord-*` trailers), newest first:
    /// one for a command's commit, several for a commit of a large tick pass, none for a
    /// commit coord did not make.
    pub fn all(c: &CommitInfo) -> Vec<LogEntry> {
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
            })
            .collect()
    }
}

/// Serializes a timestamp as its RFC 3339 text.
fn rfc3339<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

impl Coord {
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
            let (board, _) = self.store.load()?;
            if board.find(id).is_empty() {
                return Err(CommandError::NotFound(id.clone()).into());
            }
        }
        Ok(entries)
    }
}
