//! The attempts coord granted, read from history: the task file as each assignment commit
//! (trailer `Coord-To: assigned`) wrote it. A revert adds a commit and a hand edit changes a
//! file, but neither removes an assignment commit from HEAD's history, so what this finds is a
//! high-water mark they cannot lower. Does I/O (git).

use super::*;
use crate::model::{Endpoint, State};

/// Task files as assignment commits wrote them.
#[derive(Debug, Default)]
pub struct Granted {
    /// The commit HEAD pointed at (None on an unborn branch).
    pub head: Option<String>,
    /// Whether only the commits after `since` were read (`since` is an ancestor of HEAD).
    pub incremental: bool,
    /// (task id, the task file's bytes) per assignment commit read.
    pub files: Vec<(String, Vec<u8>)>,
}

impl Repo {
    /// Returns the task files of the assignment commits reachable from HEAD, only those
    /// after `since` when it is an ancestor of HEAD. `assigned` is the folder of agent folders
    /// (`work/assigned`). `reopen` walks with the repository opened again: after a fetch
    /// deepened a shallow clone, the one held still sees the old history boundary.
    pub fn granted_attempts(
        &self,
        assigned: &str,
        since: Option<&str>,
        reopen: bool,
    ) -> Result<Granted, GitError> {
        let Some(head) = self.resolve_head()?.oid else {
            return Ok(Granted::default());
        };
        let reopened = reopen
            .then(|| Repository::open(&self.git_dir))
            .transpose()
            .map_err(ctx("cannot open the repository again"))?;
        let repo = reopened.as_ref().unwrap_or(&self.repo);
        let (walk, incremental) = walk_since(repo, head, since)?;
        let mut files = Vec::new();
        for oid in walk {
            let commit = oid
                .and_then(|oid| repo.find_commit(oid))
                .map_err(ctx(format!("cannot read history from {head}")))?;
            for id in assigned_tasks(&commit) {
                files.extend(assigned_file(repo, &commit, assigned, &id).map(|b| (id, b)));
            }
        }
        Ok(Granted {
            head: Some(head.to_string()),
            incremental,
            files,
        })
    }
}

/// Returns the bytes of `<assigned>/<agent>/<id>.yaml` (or `.yml`) in a commit's tree.
fn assigned_file(
    repo: &Repository,
    commit: &git2::Commit<'_>,
    assigned: &str,
    id: &str,
) -> Option<Vec<u8>> {
    let tree = commit.tree().ok()?;
    let agents = tree.get_path(Path::new(assigned)).ok()?;
    let agents = agents.to_object(repo).ok()?.into_tree().ok()?;
    agents.iter().find_map(|agent| {
        let folder = agent.to_object(repo).ok()?.into_tree().ok()?;
        [format!("{id}.yaml"), format!("{id}.yml")]
            .iter()
            .find_map(|name| folder.get_name(name))
            .and_then(|e| e.to_object(repo).ok()?.into_blob().ok())
            .map(|blob| blob.content().to_vec())
    })
}

/// Returns the tasks a commit assigned: those its trailers say it moved to `assigned`.
fn assigned_tasks(commit: &git2::Commit<'_>) -> Vec<String> {
    let message = String::from_utf8_lossy(commit.message_bytes());
    let Ok(trailers) = git2::message_trailers_strs(&message) else {
        return Vec::new();
    };
    super::recorded(trailers.iter())
        .into_iter()
        .filter(|t| !t.agent && t.to == Some(Endpoint::State(State::Assigned)))
        .map(|t| t.subject)
        .collect()
}

/// A walk of the commits reachable from `head`, only those after `since` when `since` is
/// `head` or one of its ancestors (then the second value is true: the walk is incremental).
pub(super) fn walk_since<'r>(
    repo: &'r Repository,
    head: Oid,
    since: Option<&str>,
) -> Result<(git2::Revwalk<'r>, bool), GitError> {
    let mut walk = repo.revwalk().map_err(ctx("cannot walk history"))?;
    walk.push(head)
        .map_err(ctx(format!("cannot walk history from {head}")))?;
    let since = since.and_then(|s| Oid::from_str(s).ok());
    let incremental =
        since.is_some_and(|s| s == head || repo.graph_descendant_of(head, s).unwrap_or(false));
    if let Some(s) = since.filter(|_| incremental) {
        walk.hide(s)
            .map_err(ctx(format!("cannot walk history to {s}")))?;
    }
    Ok((walk, incremental))
}
