//! What the gates of waiting tasks ask of the repository: whether a ref exists, whether one
//! ref's commit is reachable from another, whether a path exists at a ref's tip. Local refs
//! only (a sync's fetch brings the remote's). Does I/O (git).

use super::*;

impl Repo {
    /// Returns the commit `name` resolves to: a full ref name, a branch, a tag, or a
    /// remote-tracking branch of `origin`; None when none exists.
    pub fn ref_commit(&self, name: &str) -> Option<Oid> {
        let candidates = [
            name.to_string(),
            format!("refs/heads/{name}"),
            format!("refs/tags/{name}"),
            format!("refs/remotes/origin/{name}"),
        ];
        candidates.iter().find_map(|full| {
            let r = self.repo.find_reference(full).ok()?;
            r.peel_to_commit().ok().map(|c| c.id())
        })
    }

    /// Returns whether `name`'s commit is reachable from `into`'s (None when either does not
    /// resolve).
    pub fn is_merged(&self, name: &str, into: &str) -> Option<bool> {
        let (commit, tip) = (self.ref_commit(name)?, self.ref_commit(into)?);
        Some(commit == tip || self.repo.graph_descendant_of(tip, commit).ok()?)
    }

    /// Returns whether `path` exists in the tree of `name`'s commit (None when the ref does
    /// not resolve).
    pub fn path_at(&self, name: &str, path: &str) -> Option<bool> {
        let commit = self.repo.find_commit(self.ref_commit(name)?).ok()?;
        let tree = commit.tree().ok()?;
        Some(tree.get_path(std::path::Path::new(path)).is_ok())
    }
}
