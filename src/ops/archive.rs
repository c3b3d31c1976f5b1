//! `archive`: moves old done and cancelled tasks to `archive/<YYYY-MM>/`, one commit each, or
//! only says which would move (a dry run). The engine decides which (`engine::archive`).

use super::{Coord, Error, Folders, Moved, AGENT_WAIT};
use crate::engine::{archive, Note};
use crate::model::Duration;
use crate::store::Origin;

/// What an archive pass found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    /// The age a finished task had to reach (the flag's, else coord.yaml's `archive_after`).
    pub age: Duration,
    /// The tasks that move (or would move, in a dry run).
    pub planned: Vec<Moved>,
    /// The commits made (0 in a dry run).
    pub archived: usize,
    /// Finished tasks left where they are, with why (`path: message`).
    pub left: Vec<String>,
}

impl Coord {
    /// Moves every done or cancelled task finished at least `older_than` ago (default:
    /// `archive_after` of coord.yaml) to the archive; with `dry_run`, changes nothing.
    pub fn archive(&self, older_than: Option<Duration>, dry_run: bool) -> Result<Archived, Error> {
        let session = self.session_over(AGENT_WAIT, Folders::Finished)?;
        let (board, _) = session.load()?;
        let age = older_than.unwrap_or(session.config.archive_after);
        let plan = archive::plan(&board, &self.inputs(&session), age);
        let left = plan
            .notes
            .iter()
            .filter_map(|n| match n {
                Note::Skipped { path, message } => Some(format!("{path}: {message}")),
                _ => None,
            })
            .collect();
        let planned = plan.transitions.iter().map(Moved::of).collect();
        let archived = if dry_run {
            0
        } else {
            self.apply(session, &plan, Origin::Command)?
        };
        Ok(Archived {
            age,
            planned,
            archived,
            left,
        })
    }
}
