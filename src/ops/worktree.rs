//! The git worktree of one attempt that `coord run --worktree` (or `run.worktree: true` in
//! coord.yaml) runs a command in: where it goes (`.git/coord/worktrees/<task>-<attempt>`, or
//! under `run.worktree_dir`, never in the checkout coord commits in), the branch it checks out
//! (the one the task it was handed off from worked on, else a new `coord/<task>-<attempt>`
//! made from `run.worktree_base`), the commit its branch ends on, and its removal. coord
//! records branches and commits; it never merges them.

use super::work::BRANCH_PREFIX;
use super::{Coord, Error, Work};
use crate::git::Identity;
use crate::model::TaskId;
use std::path::{Component, Path, PathBuf};

/// Where an attempt's command runs, and on which branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// The worktree's folder.
    pub path: PathBuf,
    /// The branch it has checked out.
    pub branch: String,
    /// Whether the branch is new to this attempt (else a handoff gave it).
    pub new_branch: bool,
}

impl Coord {
    /// Returns the worktree `work`'s attempt runs in (nothing is made yet).
    pub fn worktree_of(&self, work: &Work) -> Result<Worktree, Error> {
        let name = format!("{}-{}", work.id, work.attempt);
        let (branch, new_branch) = match &work.branch {
            Some(handed) => (handed.clone(), false),
            None => (format!("{BRANCH_PREFIX}{name}"), true),
        };
        Ok(Worktree {
            path: self.worktree_dir()?.join(name),
            branch,
            new_branch,
        })
    }

    /// Returns the folder the worktrees go in, or a usage error when `run.worktree_dir` lies
    /// inside the checkout.
    pub fn worktree_dir(&self) -> Result<PathBuf, Error> {
        let repo = &self.store().repo;
        let Some(dir) = &self.store().config.run.worktree_dir else {
            return Ok(repo.git_dir().join("coord").join("worktrees"));
        };
        let dir = lexical(&repo.workdir().join(dir));
        if dir.starts_with(repo.workdir()) && !dir.starts_with(repo.git_dir()) {
            return Err(Error::Usage(format!(
                "run.worktree_dir {} lies in the checkout coord commits in; name a folder outside it, or leave it out for .git/coord/worktrees",
                dir.display()
            )));
        }
        Ok(dir)
    }

    /// Makes the worktree: its branch as it is when a handoff gave it, else a new branch from
    /// `run.worktree_base`. A new branch's name that is taken already is refused: the branch
    /// is a person's, or an earlier task's of the same id (an attempt's own branch is made
    /// once: a killed runner's attempt is failed, never started again), and its commits are
    /// not this attempt's to build on.
    pub fn add_worktree(&self, tree: &Worktree) -> Result<(), Error> {
        let repo = &self.store().repo;
        if tree.new_branch && repo.has_branch(&tree.branch) {
            let b = &tree.branch;
            return Err(Error::Refused(format!(
                "branch {b} is there already, made by someone else than this attempt; rename it ('git branch -m {b} <name>') or delete it ('git branch -D {b}')"
            )));
        }
        if !tree.new_branch && !repo.has_branch(&tree.branch) {
            return Err(Error::Refused(format!(
                "branch {} that the step before worked on is gone; restore it, or cancel the task",
                tree.branch
            )));
        }
        let base = &self.store().config.run.worktree_base;
        Ok(repo.add_worktree(&tree.path, &tree.branch, base)?)
    }

    /// Returns the commit the worktree's branch ends on. What the command left uncommitted
    /// there is committed first, by coord's author, so the branch holds all of the attempt's
    /// work.
    pub fn worktree_commit(
        &self,
        tree: &Worktree,
        id: &TaskId,
        attempt: u32,
    ) -> Result<String, Error> {
        let store = self.store();
        let who = Identity::parse(&store.config.commit.author)?;
        let message = format!("{id}: changes attempt {attempt} left uncommitted");
        Ok(store.repo.worktree_head(&tree.path, &who, &message)?)
    }

    /// Removes the worktree at `path` (and git's record of it); its branch stays.
    pub fn remove_worktree(&self, path: &Path) -> Result<(), Error> {
        Ok(self.store().repo.remove_worktree(path)?)
    }
}

/// Returns `path` with its `.` and `..` parts resolved, without reading the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_resolves_dots_without_the_file_system() {
        assert_eq!(lexical(Path::new("/r/./a/../b")), PathBuf::from("/r/b"));
        assert_eq!(lexical(Path::new("/r/../trees")), PathBuf::from("/trees"));
    }
}
