//! Moving the current branch onto another commit for `coord sync`: listing the commits only the
//! local branch has, and switching the branch and the work tree to a new commit without
//! overwriting anything a person changed and did not commit (the replay itself is
//! `crate::sync::replay` on top of [`super::edit`]).
//!
//! Like the rest of [`crate::git`], this reads and writes the repository: objects, the branch
//! ref, the index and the work tree.

use super::history::commit_info;
use super::{ctx, CommitInfo, GitError, Repo};
use git2::build::CheckoutBuilder;
use git2::{ErrorCode, Oid, Sort};

/// A commit the local branch has and the remote tip does not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalCommit {
    /// Its id, summary, time and trailers.
    pub info: CommitInfo,
    /// The author's email address.
    pub author_email: String,
    /// The author's name.
    pub author_name: String,
    /// How many parents it has (more than one: a merge).
    pub parents: usize,
}

impl Repo {
    /// Returns the commit `refname` (e.g. `refs/remotes/origin/main`) points at, or None when
    /// there is no such ref.
    pub fn ref_target(&self, refname: &str) -> Result<Option<Oid>, GitError> {
        match self.repo.refname_to_id(refname) {
            Ok(oid) => Ok(Some(oid)),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(ctx(format!("cannot resolve {refname}"))(e)),
        }
    }

    /// Returns whether `ancestor` is `descendant` or one of its ancestors.
    pub fn is_ancestor(&self, ancestor: Oid, descendant: Oid) -> Result<bool, GitError> {
        if ancestor == descendant {
            return Ok(true);
        }
        self.repo
            .graph_descendant_of(descendant, ancestor)
            .map_err(ctx(format!("cannot compare {ancestor} and {descendant}")))
    }

    /// Returns the commits reachable from `head` but not from `base`, oldest first.
    pub fn commits_between(&self, head: Oid, base: Oid) -> Result<Vec<LocalCommit>, GitError> {
        let walk = || -> Result<Vec<Oid>, git2::Error> {
            let mut walk = self.repo.revwalk()?;
            walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
            walk.push(head)?;
            walk.hide(base)?;
            walk.collect()
        };
        let oids = walk().map_err(ctx(format!(
            "cannot list the commits of {head} since {base}"
        )))?;
        let mut out = Vec::with_capacity(oids.len());
        for oid in oids {
            let commit = self
                .repo
                .find_commit(oid)
                .map_err(ctx(format!("cannot read commit {oid}")))?;
            let author = commit.author();
            out.push(LocalCommit {
                info: commit_info(&commit),
                author_email: String::from_utf8_lossy(author.email_bytes()).into_owned(),
                author_name: String::from_utf8_lossy(author.name_bytes()).into_owned(),
                parents: commit.parent_count(),
            });
        }
        Ok(out)
    }

    /// Points the current branch at `new` and makes the work tree and index match it, the way
    /// `git reset --keep` does: files that differ between HEAD and `new` are updated, and
    /// nothing is written at all if one of them has uncommitted changes (that is an error naming
    /// the files). Other uncommitted changes stay as they are. The branch moves as a
    /// compare-and-swap from `from`, the commit the caller's work started from: when the branch
    /// is elsewhere (a person committed meanwhile) nothing is written and the error is `Moved`.
    pub fn switch_to(&self, from: Option<Oid>, new: Oid) -> Result<(), GitError> {
        let head = self.resolve_head()?;
        if head.oid != from {
            return Err(GitError::Moved {
                branch: head.refname,
            });
        }
        let target = self
            .repo
            .find_commit(new)
            .map_err(ctx(format!("cannot read commit {new}")))?;
        // libgit2 compares against HEAD's tree (the baseline) when none is given: files that
        // still match HEAD are updated, changed ones stop the checkout before it writes.
        // A person's git holding the index (status, commit, gc) makes libgit2 fail at the end,
        // once the files are written: the checkout is tried again (the files already match
        // the target, so it only writes the index), as git's other lock holders are waited for.
        let lock = self.git_dir.join("index.lock");
        super::locks::retry_locked(&lock, super::locks::LOCK_WAIT, || {
            let mut opts = CheckoutBuilder::new();
            opts.safe();
            self.repo.checkout_tree(target.as_object(), Some(&mut opts))
        })?
        .map_err(|e| {
                let what = if e.code() == ErrorCode::Conflict {
                    "files it changes have uncommitted changes here; commit or stash them, then run it again"
                } else {
                    "cannot update the work tree"
                };
                ctx(format!("cannot move {} to {new}: {what}", head.refname))(e)
            })?;
        self.move_ref(&head, new, "coord sync: move onto the remote")
    }
}
