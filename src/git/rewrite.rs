//! Moving the current branch onto another commit for `coord sync`: listing the commits only the
//! local branch has, replaying some of them onto the remote tip (a cherry-pick with libgit2,
//! keeping each commit's author, committer and message), and switching the branch and the work
//! tree to the result without overwriting anything a person changed and did not commit.
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

/// What replaying commits onto a new base gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replayed {
    /// The new tip (the base itself when nothing was left to replay).
    Done(Oid),
    /// A commit did not apply cleanly; nothing was changed.
    Conflict {
        /// The commit that did not apply, in hex.
        commit: String,
        /// Its summary line.
        summary: String,
        /// The paths in conflict.
        paths: Vec<String>,
    },
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

    /// Cherry-picks `commits` (single-parent commits, oldest first) onto `onto`, one new commit
    /// each with the original author, committer and message; a commit whose change is already
    /// in the new base is skipped. Writes objects only: no ref, index or work tree changes.
    pub fn replay(&self, onto: Oid, commits: &[Oid]) -> Result<Replayed, GitError> {
        let mut tip = onto;
        for &oid in commits {
            let read = |id: Oid| {
                self.repo
                    .find_commit(id)
                    .map_err(ctx(format!("cannot read commit {id}")))
            };
            let (cherry, base) = (read(oid)?, read(tip)?);
            let mut index = self
                .repo
                .cherrypick_commit(&cherry, &base, 0, None)
                .map_err(ctx(format!("cannot replay commit {oid} onto {tip}")))?;
            if index.has_conflicts() {
                return Ok(Replayed::Conflict {
                    commit: oid.to_string(),
                    summary: commit_info(&cherry).summary,
                    paths: conflict_paths(&index),
                });
            }
            let tree_id = index.write_tree_to(&self.repo).map_err(ctx(format!(
                "cannot write the tree of replayed commit {oid}"
            )))?;
            if tree_id == base.tree_id() {
                continue;
            }
            let commit = || -> Result<Oid, git2::Error> {
                let tree = self.repo.find_tree(tree_id)?;
                let message = String::from_utf8_lossy(cherry.message_bytes()).into_owned();
                self.repo.commit(
                    None,
                    &cherry.author(),
                    &cherry.committer(),
                    &message,
                    &tree,
                    &[&base],
                )
            };
            tip = commit().map_err(ctx(format!("cannot write replayed commit {oid}")))?;
        }
        Ok(Replayed::Done(tip))
    }

    /// Points the current branch at `new` and makes the work tree and index match it, the way
    /// `git reset --keep` does: files that differ between HEAD and `new` are updated, and
    /// nothing is written at all if one of them has uncommitted changes (that is an error naming
    /// the files). Other uncommitted changes stay as they are. The branch moves as a
    /// compare-and-swap from the HEAD it started from.
    pub fn switch_to(&self, new: Oid) -> Result<(), GitError> {
        let head = self.resolve_head()?;
        let target = self
            .repo
            .find_commit(new)
            .map_err(ctx(format!("cannot read commit {new}")))?;
        // libgit2 compares against HEAD's tree (the baseline) when none is given: files that
        // still match HEAD are updated, changed ones stop the checkout before it writes.
        let mut opts = CheckoutBuilder::new();
        opts.safe();
        self.repo
            .checkout_tree(target.as_object(), Some(&mut opts))
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

/// Returns the distinct paths of an index's conflicts.
fn conflict_paths(index: &git2::Index) -> Vec<String> {
    let mut paths: Vec<String> = index
        .conflicts()
        .map(|conflicts| {
            conflicts
                .filter_map(Result::ok)
                .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths.dedup();
    paths
}
