//! The tasks coord's commits named, read from history: every `Coord-Task` trailer of the
//! commits reachable from HEAD. A revert adds a commit and removes none, so a task that
//! history once named stays named (a schedule's slot, once created, is never created again).
//! Does I/O (git).

use super::*;

/// Task ids named by commits' trailers.
#[derive(Debug, Default)]
pub struct Named {
    /// The commit HEAD pointed at (None on an unborn branch).
    pub head: Option<String>,
    /// Whether only the commits after `since` were read (`since` is an ancestor of HEAD).
    pub incremental: bool,
    /// The task ids the commits read name, in walk order, possibly repeated.
    pub ids: Vec<String>,
}

impl Repo {
    /// Returns the task ids that commits reachable from HEAD name in a `Coord-Task` trailer,
    /// only those after `since` when it is an ancestor of HEAD; `keep` picks the ids wanted.
    pub fn named_tasks(
        &self,
        since: Option<&str>,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Named, GitError> {
        let Some(head) = self.resolve_head()?.oid else {
            return Ok(Named::default());
        };
        let repo = &self.repo;
        let (walk, incremental) = super::attempts::walk_since(repo, head, since)?;
        let mut ids = Vec::new();
        for oid in walk {
            let commit = oid
                .and_then(|oid| repo.find_commit(oid))
                .map_err(ctx(format!("cannot read history from {head}")))?;
            let message = String::from_utf8_lossy(commit.message_bytes());
            let Ok(trailers) = git2::message_trailers_strs(&message) else {
                continue;
            };
            ids.extend(
                trailers
                    .iter()
                    .filter(|(k, v)| *k == "Coord-Task" && keep(v))
                    .map(|(_, v)| v.to_string()),
            );
        }
        Ok(Named {
            head: Some(head.to_string()),
            incremental,
            ids,
        })
    }
}
