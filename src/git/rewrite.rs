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
use git2::{CheckoutNotificationType, ErrorCode, Oid, Sort};

/// A commit the local branch has and the remote tip does not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalCommit {
    /// Its id, summary, time and trailers.
    pub info: CommitInfo,
    /// The author's email address.
    pub author_email: String,
    /// The author's name.
    pub author_name: String,
    /// Whether its committer is its author (name and email): not so after a person amended
    /// or rebased someone else's commit.
    pub committed_by_author: bool,
    /// How many parents it has (more than one: a merge).
    pub parents: usize,
    /// Why a copy of it onto another parent could not be the same commit, if it could not:
    /// `a merge`, [`UNRELATED`], `a signed commit` (the copy would lose the signature), `a commit whose
    /// message is not UTF-8` (or names another encoding).
    pub not_copyable: Option<&'static str>,
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
        oids.into_iter().map(|oid| self.local_commit(oid)).collect()
    }

    /// Returns the commit `oid` as a replay takes it.
    pub fn local_commit(&self, oid: Oid) -> Result<LocalCommit, GitError> {
        let commit = self
            .repo
            .find_commit(oid)
            .map_err(ctx(format!("cannot read commit {oid}")))?;
        let author = commit.author();
        let committer = commit.committer();
        Ok(LocalCommit {
            committed_by_author: committer.name_bytes() == author.name_bytes()
                && committer.email_bytes() == author.email_bytes(),
            info: commit_info(&commit),
            author_email: String::from_utf8_lossy(author.email_bytes()).into_owned(),
            author_name: String::from_utf8_lossy(author.name_bytes()).into_owned(),
            parents: commit.parent_count(),
            not_copyable: not_copyable(&commit),
        })
    }

    /// Points the current branch at `new` and makes the work tree and index match it, the way
    /// `git reset --keep` does: files that differ between HEAD and `new` are updated, and
    /// nothing is written at all if one of them has uncommitted changes (that is an error naming
    /// the files). Other uncommitted changes stay as they are. The branch moves as a
    /// compare-and-swap from `from`, the commit the caller's work started from: when the branch
    /// is elsewhere (a person committed meanwhile) nothing is written and the error is `Moved`.
    ///
    /// The switch is journaled first (`.git/coord/switch`): a run killed after the work tree
    /// moved and before the branch did is finished by [`Repo::finish_switch`], so the next run
    /// never takes the new files for a person's edit of the old commit.
    pub fn switch_to(&self, from: Option<Oid>, new: Oid) -> Result<(), GitError> {
        let head = self.resolve_head()?;
        if head.oid != from {
            return Err(GitError::Moved {
                branch: head.refname,
            });
        }
        let switch = Switch {
            refname: head.refname.clone(),
            from,
            to: new,
        };
        // Files with uncommitted changes the switch changes stop it before the journal: a
        // run killed later never takes them for files it wrote.
        self.checkout_to(&head.refname, new, Checkout::DryRun)
            .map_err(|stopped| stopped.error)?;
        self.journal_switch(&switch)?;
        if let Err(stopped) = self.checkout_to(&head.refname, new, Checkout::From(from)) {
            // Stopped before it wrote: no switch is half done, and the next run must not
            // write over the files that stopped it.
            if stopped.wrote_nothing {
                self.clear_switch_journal()?;
            }
            return Err(stopped.error);
        }
        self.move_ref(&head, new, "coord sync: move onto the remote")?;
        self.clear_switch_journal()
    }

    /// Finishes a switch a killed run left half done (see [`Repo::switch_to`]). Returns what
    /// it did, for the report, or None when no switch was journaled. When the branch is still
    /// where the switch started, the files the switch changes and their index entries are
    /// written as in its target and the branch moved; when the branch is
    /// at the target already, only the journal goes; when a person moved the branch meanwhile,
    /// their commit stands and the journal goes.
    pub fn finish_switch(&self) -> Result<Option<String>, GitError> {
        let switch = match self.read_switch_journal()? {
            None => return Ok(None),
            Some(None) => {
                self.clear_switch_journal()?;
                return Ok(Some(format!(
                    "removed {}: it named no switch",
                    self.switch_journal().display()
                )));
            }
            Some(Some(switch)) => switch,
        };
        let head = self.resolve_head()?;
        let done = if head.refname != switch.refname || head.oid != switch.from {
            let at_target = head.refname == switch.refname && head.oid == Some(switch.to);
            if at_target {
                None
            } else {
                Some(format!(
                    "dropped an interrupted switch of {} to {}: the branch moved since",
                    switch.refname, switch.to
                ))
            }
        } else {
            let kept = self.finish_checkout(&switch)?;
            self.move_ref(&head, switch.to, "coord sync: move onto the remote")?;
            let mut said = format!(
                "finished an interrupted switch of {} to {}",
                switch.refname, switch.to
            );
            for line in kept {
                said.push_str("; ");
                said.push_str(&line);
            }
            Some(said)
        };
        self.clear_switch_journal()?;
        Ok(done)
    }

    /// Makes the work tree and index match `new`, leaving files changed since HEAD alone
    /// unless `new` changes them too (then nothing is written and the error names them).
    pub(super) fn checkout_to(
        &self,
        refname: &str,
        new: Oid,
        how: Checkout,
    ) -> Result<(), Stopped> {
        let target = self.repo.find_commit(new).map_err(|e| Stopped {
            error: ctx(format!("cannot read commit {new}"))(e),
            wrote_nothing: true,
        })?;
        // libgit2 compares against HEAD's tree (the baseline) when none is given: files that
        // still match HEAD are updated, changed ones stop the checkout before it writes, and
        // files that already match the target are left as they are.
        // A person's git holding the index (status, commit, gc) makes libgit2 fail at the end,
        // once the files are written: the checkout is tried again (the files already match
        // the target, so it only writes the index), as git's other lock holders are waited for.
        let lock = self.git_dir.join("index.lock");
        let in_the_way = std::cell::RefCell::new(Vec::new());
        let tries = std::cell::Cell::new(0);
        super::locks::retry_locked(&lock, super::locks::LOCK_WAIT, || {
            tries.set(tries.get() + 1);
            in_the_way.borrow_mut().clear();
            if let Checkout::From(from) = how {
                // A person's commit while their git held the index: the checkout would take
                // it for the baseline and write the target's index over it.
                if self.resolve_head().map(|h| h.oid).ok() != Some(from) {
                    return Err(git2::Error::from_str(BRANCH_MOVED));
                }
            }
            let mut opts = CheckoutBuilder::new();
            if how == Checkout::DryRun {
                opts.dry_run();
            }
            opts.safe()
                .notify_on(CheckoutNotificationType::CONFLICT)
                .notify(|_, path, _, _, _| {
                    let path = path.map(|p| p.to_string_lossy().into_owned());
                    in_the_way.borrow_mut().extend(path);
                    true
                });
            self.repo.checkout_tree(target.as_object(), Some(&mut opts))
        })
        .map_err(|error| Stopped {
            error,
            wrote_nothing: false,
        })?
        .map_err(|e| {
            // A conflict or a moved branch is found before anything is written; on a retry,
            // the first try may have written files.
            let conflict = e.code() == ErrorCode::Conflict;
            let moved = e.message() == BRANCH_MOVED;
            let stopped = |why: String| GitError::Stopped {
                refname: refname.to_string(),
                to: new,
                why,
            };
            let error = match conflict {
                true => stopped(uncommitted_in_the_way(&in_the_way.borrow())),
                false if moved => stopped(BRANCH_MOVED.to_string()),
                false => ctx(format!(
                    "cannot move {refname} to {new}: cannot update the work tree"
                ))(e),
            };
            Stopped {
                error,
                wrote_nothing: (conflict || moved) && tries.get() == 1,
            }
        })
    }

    /// Writes the files a switch changes as they are in its target, whatever the killed run
    /// left in them (the old version, the new one, or a file cut short mid-write: the switch
    /// checked first that none of them had uncommitted changes). A file a person changed
    /// since (neither version, nor a part of the target's) keeps the change: merged onto the
    /// target's version, or saved under `.git/coord/kept/` when it does not merge. Other
    /// files are left alone. Returns a line for each file a person had changed.
    fn finish_checkout(&self, switch: &Switch) -> Result<Vec<String>, GitError> {
        let paths = self.paths_between(switch.from, switch.to)?;
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut merged = Vec::new();
        let mut said = Vec::new();
        for path in &paths {
            match self.changed_since(switch, path)? {
                Since::Untouched => {}
                Since::Merged(bytes) => merged.push((path, bytes)),
                Since::Saved(at) => said.push(format!(
                    "{path} was changed after it was cut short and does not merge with {}'s version: yours is in {}",
                    switch.to,
                    at.display()
                )),
            }
        }
        let target = self
            .repo
            .find_commit(switch.to)
            .map_err(ctx(format!("cannot read commit {}", switch.to)))?;
        let lock = self.git_dir.join("index.lock");
        super::locks::retry_locked(&lock, super::locks::LOCK_WAIT, || {
            let mut opts = CheckoutBuilder::new();
            opts.force().disable_pathspec_match(true);
            for path in &paths {
                opts.path(path);
            }
            self.repo.checkout_tree(target.as_object(), Some(&mut opts))
        })?
        .map_err(ctx(format!(
            "cannot finish moving {} to {}",
            switch.refname, switch.to
        )))?;
        for (path, bytes) in merged {
            crate::fsx::write_atomic_in(self.workdir(), path, &bytes, crate::fsx::Flush::Now)
                .map_err(|source| GitError::Write {
                    path: self.workdir().join(path),
                    source,
                })?;
            said.push(format!(
                "{path} was changed after it was cut short: the change is kept, merged onto {}'s version",
                switch.to
            ));
        }
        Ok(said)
    }

    /// Returns what happened to `path` in the work tree since a switch was cut short: nothing
    /// a person did (it holds the version of either end, a part of the target's the killed
    /// checkout wrote, or is no regular file), or a person's change, merged onto the target's
    /// version or saved when it does not merge.
    fn changed_since(&self, switch: &Switch, path: &str) -> Result<Since, GitError> {
        let file = self.workdir().join(path);
        let regular = std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file());
        let Some(now) = regular.then(|| std::fs::read(&file).ok()).flatten() else {
            return Ok(Since::Untouched);
        };
        let old = self.bytes_at(switch.from, path)?;
        let new = self.bytes_at(Some(switch.to), path)?;
        if old.as_deref() == Some(&now[..]) || new.as_ref().is_some_and(|n| n.starts_with(&now)) {
            return Ok(Since::Untouched);
        }
        if let (Some(old), Some(new)) = (&old, &new) {
            if let Some(bytes) = self.merge_text(old, &now, new)? {
                return Ok(Since::Merged(bytes));
            }
        }
        let at = self
            .git_dir
            .join(KEPT)
            .join(switch.to.to_string())
            .join(path);
        crate::fsx::write_private(&at, &now, true).map_err(|source| GitError::Write {
            path: at.clone(),
            source,
        })?;
        Ok(Since::Saved(at))
    }

    /// Returns the bytes `commit` holds at `path`, if a file is there.
    fn bytes_at(&self, commit: Option<Oid>, path: &str) -> Result<Option<Vec<u8>>, GitError> {
        match commit.map(|c| self.blob_at(c, path)).transpose()?.flatten() {
            Some(blob) => Ok(Some(self.blob_bytes(blob)?)),
            None => Ok(None),
        }
    }

    /// Returns the paths whose content differs between the trees of `from` and `to`.
    pub(crate) fn paths_between(
        &self,
        from: Option<Oid>,
        to: Oid,
    ) -> Result<Vec<String>, GitError> {
        let tree = |oid: Oid| {
            self.repo
                .find_commit(oid)
                .and_then(|c| c.tree())
                .map_err(ctx(format!("cannot read the tree of {oid}")))
        };
        let old = from.map(tree).transpose()?;
        let new = tree(to)?;
        let diff = self
            .repo
            .diff_tree_to_tree(old.as_ref(), Some(&new), None)
            .map_err(ctx(format!("cannot compare with {to}")))?;
        let mut paths: Vec<String> = diff
            .deltas()
            .flat_map(|d| [d.old_file().path(), d.new_file().path()])
            .flatten()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        Ok(paths)
    }

    /// Returns whether a killed run left a switch for [`Repo::finish_switch`] to finish.
    pub fn switch_journaled(&self) -> bool {
        self.switch_journal().exists()
    }

    fn switch_journal(&self) -> std::path::PathBuf {
        self.git_dir.join(SWITCH_JOURNAL)
    }

    /// Records a switch before it writes anything, durably (the work tree it guards is).
    pub(super) fn journal_switch(&self, switch: &Switch) -> Result<(), GitError> {
        let path = self.switch_journal();
        crate::fsx::write_private(&path, switch.to_text().as_bytes(), true)
            .map_err(|source| GitError::Write { path, source })
    }

    /// Returns the journaled switch: None when there is none, `Some(None)` when the file holds
    /// something else (coord writes it atomically, so not a switch cut short).
    fn read_switch_journal(&self) -> Result<Option<Option<Switch>>, GitError> {
        let path = self.switch_journal();
        match crate::fsx::read_private_text(&path) {
            Ok(text) => Ok(Some(Switch::parse(&text))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(GitError::Io { path, source }),
        }
    }

    fn clear_switch_journal(&self) -> Result<(), GitError> {
        let path = self.switch_journal();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(GitError::Write { path, source }),
        }
    }
}

/// Where a branch switch in progress is recorded, under the git directory.
const SWITCH_JOURNAL: &str = "coord/switch";

/// A branch switch: the branch, the commit it left and the commit it goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Switch {
    pub(super) refname: String,
    pub(super) from: Option<Oid>,
    pub(super) to: Oid,
}

impl Switch {
    /// Three lines: the ref, the commit it left (`none` on an unborn branch), the target.
    fn to_text(&self) -> String {
        let from = self.from.map_or("none".to_string(), |o| o.to_string());
        format!("{}\n{from}\n{}\n", self.refname, self.to)
    }

    fn parse(text: &str) -> Option<Switch> {
        let mut lines = text.lines();
        let refname = lines.next()?.to_string();
        let from = match lines.next()? {
            "none" => None,
            oid => Some(Oid::from_str(oid).ok()?),
        };
        let to = Oid::from_str(lines.next()?).ok()?;
        Some(Switch { refname, from, to })
    }
}

/// What [`LocalCommit::not_copyable`] says of a root commit: the branch's history and the
/// remote's share no commit.
pub const UNRELATED: &str = "a first commit";

/// Returns why a copy of `commit` onto another parent could not be the same commit.
fn not_copyable(commit: &git2::Commit<'_>) -> Option<&'static str> {
    let header = |f: &str| commit.header_field_bytes(f).is_ok();
    if commit.parent_count() == 0 {
        Some(UNRELATED)
    } else if commit.parent_count() > 1 {
        Some("a merge")
    } else if header("gpgsig") || header("gpgsig-sha256") {
        Some("a signed commit")
    } else if header("encoding") || std::str::from_utf8(commit.message_raw_bytes()).is_err() {
        Some("a commit whose message is not UTF-8")
    } else {
        None
    }
}

/// Where the finish of a cut-short switch saves a person's change that does not merge,
/// relative to the git directory (then the target commit and the file's path).
const KEPT: &str = "coord/kept";

/// What happened to a file since a switch was cut short ([`Repo::finish_switch`]).
enum Since {
    /// Nothing a person did.
    Untouched,
    /// A person's change, merged onto the target's version.
    Merged(Vec<u8>),
    /// A person's change that does not merge, saved here.
    Saved(std::path::PathBuf),
}

/// How [`Repo::checkout_to`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Checkout {
    /// Checks for files in the way and writes nothing.
    DryRun,
    /// Writes, while the branch is still at this commit.
    From(Option<Oid>),
}

/// Why a retried checkout stopped when the branch moved while it waited for the index.
const BRANCH_MOVED: &str = "the branch moved (a commit made here) while it waited for git's index lock; the files it wrote are left for the next run";

/// Why a checkout stopped, and whether it stopped before writing any file.
#[derive(Debug)]
pub(super) struct Stopped {
    /// What went wrong.
    error: GitError,
    /// Whether the work tree and index are as they were.
    wrote_nothing: bool,
}

/// Says which files with uncommitted changes stopped a checkout that changes them too.
fn uncommitted_in_the_way(paths: &[String]) -> String {
    let named = match paths {
        [] => "files it changes have".to_string(),
        [one] => format!("{one}, which it changes, has"),
        [first, rest @ ..] => format!("{first} and {} other files it changes have", rest.len()),
    };
    format!("{named} uncommitted changes here; commit or stash them, then run it again")
}
