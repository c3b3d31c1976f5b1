//! The git worktrees `coord run --worktree` gives each attempt: added on a branch of their own
//! (or on the branch a handoff names), read for their head commit, and removed. Runs the git
//! CLI ([`super::command`]); the worktree's files, index and locks are its own, so nothing done
//! in it touches the checkout coord commits in.

use super::command::git_output;
use super::{GitError, Identity, Repo};
use std::path::Path;

impl Repo {
    /// Adds a worktree at `path` on `branch`: the branch as it is when it exists (a handoff
    /// hands on the branch of the step before), else a new branch made from `base`. Whatever
    /// a killed runner left at `path` is removed first.
    pub fn add_worktree(&self, path: &Path, branch: &str, base: &str) -> Result<(), GitError> {
        self.remove_worktree(path)?;
        let at = path.to_string_lossy();
        let add = || match self.has_branch(branch) {
            // --force: the branch may still be checked out in a worktree kept for debugging.
            true => self.git(&["worktree", "add", "--force", "--quiet", &at, branch]),
            false => self.git(&["worktree", "add", "--quiet", "-b", branch, &at, base]),
        };
        if add().is_ok() {
            return Ok(());
        }
        // git may still record a worktree there whose folder is gone: forget it, then again.
        self.git(&["worktree", "prune"])?;
        add().map(drop)
    }

    /// Removes the worktree at `path` with whatever it holds, and git's record of it;
    /// nothing when there is none.
    pub fn remove_worktree(&self, path: &Path) -> Result<(), GitError> {
        if !path.exists() {
            return Ok(());
        }
        let at = path.to_string_lossy();
        if self
            .git(&["worktree", "remove", "--force", "--force", &at])
            .is_ok()
        {
            return Ok(());
        }
        // Not a worktree git knows (cut short while it was added): a plain folder, and
        // perhaps git's record of it.
        std::fs::remove_dir_all(path).map_err(|source| GitError::Write {
            path: path.to_path_buf(),
            source,
        })?;
        self.git(&["worktree", "prune"]).map(drop)
    }

    /// Returns the commit the worktree at `path` has checked out, after committing, as
    /// `who`, whatever changes the program left uncommitted there (with `message`): a branch
    /// then holds all of the attempt's work.
    pub fn worktree_head(
        &self,
        path: &Path,
        who: &Identity,
        message: &str,
    ) -> Result<String, GitError> {
        let status = git_in(path, &["status", "--porcelain=v2", "--branch"])?;
        let changed = status.lines().any(|l| !l.starts_with("# "));
        let head = status
            .lines()
            .find_map(|l| l.strip_prefix("# branch.oid "))
            .map(str::to_string);
        if let (false, Some(head)) = (changed, head) {
            return Ok(head);
        }
        git_in(path, &["add", "--all"])?;
        let author = format!("--author={} <{}>", who.name, who.email);
        let name = format!("user.name={}", who.name);
        let email = format!("user.email={}", who.email);
        let args = [
            "-c", &name, "-c", &email, "commit", "--quiet", &author, "-m", message,
        ];
        git_in(path, &args)?;
        Ok(git_in(path, &["rev-parse", "HEAD"])?.trim().to_string())
    }

    /// Returns whether the branch `refs/heads/<branch>` exists.
    pub fn has_branch(&self, branch: &str) -> bool {
        self.repo
            .find_branch(branch, git2::BranchType::Local)
            .is_ok()
    }

    /// Runs git in the root of the work tree.
    fn git(&self, args: &[&str]) -> Result<String, GitError> {
        git_in(&self.workdir, args)
    }
}

/// Runs git in `dir` and returns its stdout; a failure names the command and what git said.
fn git_in(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = git_output(dir, args).map_err(|source| GitError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    if !out.status.success() {
        return Err(GitError::Command {
            command: format!("git {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
