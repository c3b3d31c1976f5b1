//! Whether git is in the middle of something a writing coord command must not commit into: a
//! merge, rebase, cherry-pick, revert, bisect or `git am` in progress, unmerged index entries
//! (stages 1-3), or a detached HEAD. Reads `.git` only.

use super::{ctx, GitError, Repo};
use git2::RepositoryState;

/// An unfinished git operation, and how to finish or abort it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfinished {
    /// A merge is in progress.
    Merge,
    /// A rebase (or `git am`) is in progress.
    Rebase,
    /// A cherry-pick is in progress.
    CherryPick,
    /// A revert is in progress.
    Revert,
    /// A bisect is in progress.
    Bisect,
    /// The index holds unmerged entries for these paths.
    Unmerged(Vec<String>),
    /// HEAD points at a commit, not at a branch.
    Detached,
    /// These files under the work folder are missing or changed in the work tree while the
    /// index flags them skip-worktree (a sparse checkout): coord would work on part of its
    /// tasks.
    SkippedInWorkTree(Vec<String>),
    /// The index is a sparse index (`index.sparse`, git's `sdir` extension), which libgit2
    /// cannot read.
    SparseIndex,
    /// The index is split (`core.splitIndex`, git's `link` extension), which libgit2 cannot
    /// read.
    SplitIndex,
}

impl std::fmt::Display for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfinished::Merge => f.write_str(
                "a merge is in progress: finish it (resolve, git add, git commit) or abort it (git merge --abort)",
            ),
            Unfinished::Rebase => f.write_str(
                "a rebase is in progress: finish it (resolve, git add, git rebase --continue) or abort it (git rebase --abort)",
            ),
            Unfinished::CherryPick => f.write_str(
                "a cherry-pick is in progress: finish it (git cherry-pick --continue) or abort it (git cherry-pick --abort)",
            ),
            Unfinished::Revert => f.write_str(
                "a revert is in progress: finish it (git revert --continue) or abort it (git revert --abort)",
            ),
            Unfinished::Bisect => {
                f.write_str("a bisect is in progress: end it (git bisect reset)")
            }
            Unfinished::Unmerged(paths) => write!(
                f,
                "the index has unmerged entries ({}): resolve them and git add them, or git reset --merge",
                paths.join(", ")
            ),
            Unfinished::Detached => f.write_str(
                "HEAD is detached (no branch to commit to): check out a branch (git switch <branch>)",
            ),
            Unfinished::SkippedInWorkTree(paths) => write!(
                f,
                "git skips {} in the work tree, where they are missing or changed (a sparse checkout, or git update-index --skip-worktree), and coord needs them as they are: check them out (git sparse-checkout disable, or git update-index --no-skip-worktree <file>)",
                paths.join(", ")
            ),
            Unfinished::SplitIndex => f.write_str(
                "git's index is split (core.splitIndex), which coord cannot read: make it one file (git config core.splitIndex false && git update-index --no-split-index)",
            ),
            Unfinished::SparseIndex => f.write_str(
                "git's index is a sparse index (index.sparse), which coord cannot read: make it a full one (git sparse-checkout reapply --no-sparse-index)",
            ),
        }
    }
}

impl Repo {
    /// Returns `Unfinished` when git is in the middle of an operation or HEAD is detached:
    /// the check every writing command makes before it writes anything.
    pub fn refuse_unfinished(&self) -> Result<(), GitError> {
        match self.unfinished()? {
            Some(u) => Err(GitError::Unfinished(u)),
            None => Ok(()),
        }
    }

    /// Returns `Unfinished` when a merge, rebase, cherry-pick, revert or bisect is in
    /// progress: the cheap part of [`Repo::refuse_unfinished`] (a few file checks in `.git`),
    /// made again before each commit.
    pub(super) fn refuse_operation(&self) -> Result<(), GitError> {
        match self.operation() {
            Some(u) => Err(GitError::Unfinished(u)),
            None => Ok(()),
        }
    }

    /// Returns the git operation in progress, if any.
    fn operation(&self) -> Option<Unfinished> {
        match self.repo.state() {
            RepositoryState::Clean => None,
            RepositoryState::Merge => Some(Unfinished::Merge),
            RepositoryState::Revert | RepositoryState::RevertSequence => Some(Unfinished::Revert),
            RepositoryState::CherryPick | RepositoryState::CherryPickSequence => {
                Some(Unfinished::CherryPick)
            }
            RepositoryState::Bisect => Some(Unfinished::Bisect),
            RepositoryState::Rebase
            | RepositoryState::RebaseInteractive
            | RepositoryState::RebaseMerge
            | RepositoryState::ApplyMailbox
            | RepositoryState::ApplyMailboxOrRebase => Some(Unfinished::Rebase),
        }
    }

    /// Returns the unfinished git operation that forbids coord to write, if any.
    pub fn unfinished(&self) -> Result<Option<Unfinished>, GitError> {
        let state = self.operation();
        if state.is_some() {
            return Ok(state);
        }
        let unmerged = match self.unmerged_paths() {
            Err(GitError::Unfinished(u)) => return Ok(Some(u)),
            other => other?,
        };
        if !unmerged.is_empty() {
            return Ok(Some(Unfinished::Unmerged(unmerged)));
        }
        let head = self.head()?;
        Ok((head.branch.is_none() && head.oid.is_some()).then_some(Unfinished::Detached))
    }

    /// Returns the paths with unmerged entries in the index as it is on disk (at most five).
    /// An index whose checksum is the one last found (or written) without any is not read.
    /// A sparse index is `Unfinished::SparseIndex`.
    fn unmerged_paths(&self) -> Result<Vec<String>, GitError> {
        let path = self.git_dir.join("index");
        if !path.exists() {
            return Ok(Vec::new());
        }
        let checksum = self.index_checksum();
        if checksum.is_some() && checksum == self.merged_index() {
            return Ok(Vec::new());
        }
        // Read without libgit2's map of every entry and its SHA-1 check when it can be.
        if let Some(index) = self.index_file().filter(|i| i.checksum() == checksum) {
            if !index.has_conflicts() {
                self.note_merged_index(checksum);
                return Ok(Vec::new());
            }
        }
        let index = git2::Index::open(&path).map_err(|source| {
            // libgit2 names the extension it cannot read; a sparse index is one git writes on
            // purpose, so it gets its fix rather than a read error.
            let message = source.message();
            if message.contains("'sdir'") {
                GitError::Unfinished(Unfinished::SparseIndex)
            } else if message.contains("'link'") {
                GitError::Unfinished(Unfinished::SplitIndex)
            } else {
                ctx(format!("cannot read {}", path.display()))(source)
            }
        })?;
        if !index.has_conflicts() {
            // Noted only when the index read is the one the checksum was taken from (not
            // replaced between the two reads).
            if self.index_checksum() == checksum {
                self.note_merged_index(checksum);
            }
            return Ok(Vec::new());
        }
        unmerged_in(&index)
    }

    /// Returns the checksum of the last index found or written without unmerged entries.
    fn merged_index(&self) -> Option<[u8; 32]> {
        crate::fsx::read_private(&self.git_dir.join(MERGED_INDEX))
            .ok()
            .and_then(|b| b.try_into().ok())
    }

    /// Notes that the index with `checksum` has no unmerged entries (the checksum covers its
    /// whole content). A failure only means the next check reads the index.
    pub(super) fn note_merged_index(&self, checksum: Option<[u8; 32]>) {
        if let Some(checksum) = checksum {
            let path = self.git_dir.join(MERGED_INDEX);
            let _ = crate::fsx::write_private(&path, &checksum, false);
        }
    }
}

/// The checksum of the last index known to have no unmerged entries, relative to the git
/// directory.
const MERGED_INDEX: &str = "coord/index-merged";

/// Returns the paths with unmerged entries in `index` (at most five).
pub(super) fn unmerged_in(index: &git2::Index) -> Result<Vec<String>, GitError> {
    let conflicts = index
        .conflicts()
        .map_err(ctx("cannot read the index's conflict entries"))?;
    let mut paths: Vec<String> = conflicts
        .flatten()
        .filter_map(|c| c.our.or(c.their).or(c.ancestor))
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .collect();
    paths.truncate(5);
    Ok(paths)
}
