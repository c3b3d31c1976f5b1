//! Git access for coord: discovering or creating the repository, committing exactly the paths a
//! transition touched, listing uncommitted changes under `work/`, and reading history back.
//!
//! This is the only module that imports `git2`, and it does I/O: it reads the work tree, writes
//! objects, moves the branch ref and rewrites `.git/index`.

use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};

use git2::build::TreeUpdateBuilder;
use git2::{ErrorCode, IndexEntry, IndexTime, Repository, Signature, Time};

mod attempts;
pub(crate) mod command;
mod commit;
mod edit;
mod gates;
mod history;
mod index_file;
mod locks;
mod pack;
mod rewrite;
mod state;
mod subjects;
mod worktree;

pub use attempts::Granted;
use commit::check_path;
pub use commit::{IndexHold, IndexWritten, Staged};
pub use edit::{PathChange, TreeEdit};
pub use git2::{FileMode, Oid};
pub use history::{recorded, OnDisk, Recorded};
pub use index_file::EntryStat;
pub(crate) use index_file::IndexFile;
pub use pack::PACK_LOOSE_FROM;
pub use rewrite::{LocalCommit, UNRELATED};
pub use state::Unfinished;
pub use subjects::Named;

/// Returns the id git gives `bytes` as a blob.
pub fn blob_id(bytes: &[u8]) -> Option<Oid> {
    Oid::hash_object(git2::ObjectType::Blob, bytes).ok()
}

/// Errors from reading or writing the git repository.
#[derive(thiserror::Error, Debug)]
pub enum GitError {
    /// No repository contains the directory.
    #[error("{} is not in a git repository; run 'coord init' there or pass -C <dir>", path.display())]
    NotARepository {
        /// The directory the search started from.
        path: PathBuf,
    },
    /// The repository has no work tree, so there are no task files to coordinate.
    #[error("{} is a bare repository; run coord in a clone with a work tree", path.display())]
    Bare {
        /// The repository's git directory.
        path: PathBuf,
    },
    /// The branch moved between reading HEAD and updating it; nothing was committed.
    #[error("{branch} moved while coord was committing; nothing was committed, run it again")]
    Conflict {
        /// The ref that moved (`refs/heads/main`, or `HEAD` when detached).
        branch: String,
        /// What libgit2 reported.
        #[source]
        source: git2::Error,
    },
    /// The branch is no longer where coord's work started (someone committed in this clone
    /// meanwhile), so coord did not move it: their commit stays.
    #[error("{branch} moved while coord was working (a commit made in this clone meanwhile); coord left it where it is: run coord again")]
    Moved {
        /// The ref that moved (`refs/heads/main`).
        branch: String,
    },
    /// Moving the branch onto another commit stopped before it wrote anything: files with
    /// uncommitted changes in the way, or the branch moved meanwhile.
    #[error("cannot move {refname} to {to}: {why}")]
    Stopped {
        /// The branch.
        refname: String,
        /// The commit it was to move to.
        to: git2::Oid,
        /// What stopped it and the way on.
        why: String,
    },
    /// A lock file of git's stayed held by another git process for the whole wait.
    #[error("{} is {holder}; coord waited {waited:.1}s and committed nothing further; {}", lock.display(), locks::fix(holder))]
    Locked {
        /// The lock file.
        lock: PathBuf,
        /// Who holds it, as far as can be found (boxed: errors stay small).
        holder: Box<crate::lock::Holder>,
        /// How long coord waited, in seconds.
        waited: f64,
        /// What libgit2 reported.
        #[source]
        source: git2::Error,
    },
    /// A libgit2 call failed.
    #[error("{context}")]
    Git {
        /// What coord was doing, naming the path or ref involved.
        context: String,
        /// What libgit2 reported.
        #[source]
        source: git2::Error,
    },
    /// Reading a file of the work tree failed.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        #[source]
        source: io::Error,
    },
    /// Writing or removing a file of coord's own under `.git/` failed.
    #[error("cannot write {}; check that .git is writable and the disk has room", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        #[source]
        source: io::Error,
    },
    /// A path handed to coord's git layer is not a plain repo-relative file path.
    #[error("cannot commit {path:?}: {reason}")]
    BadPath {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// Git is in the middle of an operation (or HEAD is detached); coord wrote nothing.
    #[error("{0}; then run coord again (nothing was written)")]
    Unfinished(Unfinished),
    /// `git repack` failed; every object stays where it was.
    #[error("git repack failed: {0}; run `git fsck` to check the repository")]
    Repack(String),
    /// An author string is not of the form `name <email>`.
    #[error("bad commit author {0:?}; expected `name <email>`, e.g. `coord <coord@localhost>`")]
    BadIdentity(String),
    /// A git command (for an attempt's worktree) failed.
    #[error("{command} failed: {stderr}")]
    Command {
        /// The command, with its arguments.
        command: String,
        /// What git said.
        stderr: String,
    },
}

/// Returns a closure that wraps a libgit2 error with what coord was doing.
fn ctx(context: impl Into<String>) -> impl FnOnce(git2::Error) -> GitError {
    let context = context.into();
    move |source| GitError::Git { context, source }
}

/// The author and committer of coord's commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The display name, e.g. `coord`.
    pub name: String,
    /// The email address, e.g. `coord@localhost`.
    pub email: String,
}

impl Identity {
    /// Returns the identity written as `name <email>`, or `BadIdentity` when the name or the
    /// email is empty, or either contains `<`, `>` or a line break.
    pub fn parse(s: &str) -> Result<Identity, GitError> {
        let bad = || GitError::BadIdentity(s.to_string());
        let (name, rest) = s.trim().split_once('<').ok_or_else(bad)?;
        let email = rest.strip_suffix('>').ok_or_else(bad)?;
        let (name, email) = (name.trim(), email.trim());
        let invalid = |part: &str| part.is_empty() || part.contains(['<', '>', '\n', '\r', '\0']);
        if invalid(name) || invalid(email) {
            return Err(bad());
        }
        Ok(Identity {
            name: name.to_string(),
            email: email.to_string(),
        })
    }
}

impl Default for Identity {
    /// Returns `coord <coord@localhost>`.
    fn default() -> Identity {
        Identity {
            name: "coord".to_string(),
            email: "coord@localhost".to_string(),
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} <{}>", self.name, self.email)
    }
}

/// What one commit did to the files under a prefix (`Repo::touched`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Touched {
    /// The author's name.
    pub author: String,
    /// The files added, changed or deleted, repo-relative, in path order.
    pub files: Vec<(String, Touch)>,
}

/// How a commit touched a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// The file was created.
    Added,
    /// The file's content (or mode) changed.
    Changed,
    /// The file was removed.
    Deleted,
}

/// One commit as `coord log` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// The commit id in hex.
    pub oid: String,
    /// The committer time.
    pub time: jiff::Timestamp,
    /// The first paragraph of the message, whitespace squashed.
    pub summary: String,
    /// The `Key: value` lines of the message's last paragraph, in order.
    pub trailers: Vec<(String, String)>,
}

/// The uncommitted changes under a prefix (`Repo::changes_under`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// The changed paths, sorted and distinct.
    pub paths: Vec<String>,
    /// Whether an ignored file lies under the prefix.
    pub ignored: bool,
    /// Files under the prefix missing or changed in the work tree that the index flags
    /// skip-worktree (git counts them unchanged; at most five), which `paths` leaves out.
    pub skipped: Vec<String>,
}

/// Where HEAD points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadInfo {
    /// The current branch's short name (`main`), or None when HEAD is detached.
    pub branch: Option<String>,
    /// The commit HEAD resolves to, or None on an unborn branch.
    pub oid: Option<Oid>,
}

/// HEAD resolved once per commit: the ref to move and the commit it pointed at.
#[derive(Clone, Debug)]
struct ResolvedHead {
    /// `refs/heads/<branch>`, or `HEAD` when detached.
    refname: String,
    /// The parent of the next commit; None on an unborn branch.
    oid: Option<Oid>,
}

/// A path's state in the work tree, ready to go into a tree and the index.
struct WorkFile {
    oid: Oid,
    mode: FileMode,
    meta: Metadata,
}

/// What a commit does to one path.
enum Change {
    Upsert(WorkFile),
    Remove,
}

/// The paths of one commit, sorted and distinct, with what the commit does to each.
type Changes = Vec<(String, Change)>;

/// An open repository with a work tree.
pub struct Repo {
    repo: Repository,
    workdir: PathBuf,
    git_dir: PathBuf,
    /// `core.filemode`: whether the executable bit in the work tree is trusted.
    filemode: bool,
    /// The index as last read without libgit2 ([`Repo::index_file`]).
    index_file: std::cell::RefCell<Option<std::sync::Arc<IndexFile>>>,
}

impl std::fmt::Debug for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repo")
            .field("workdir", &self.workdir)
            .finish_non_exhaustive()
    }
}

impl Repo {
    /// Returns the repository containing `dir`, searching upwards like git does (stopping at
    /// `GIT_CEILING_DIRECTORIES`); `NotARepository` when there is none, `Bare` when it has no
    /// work tree.
    pub fn discover(dir: &Path) -> Result<Repo, GitError> {
        let ceilings: Vec<PathBuf> = std::env::var_os("GIT_CEILING_DIRECTORIES")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        let flags = git2::RepositoryOpenFlags::empty();
        match Repository::open_ext(dir, flags, &ceilings) {
            Ok(repo) => Repo::wrap(repo),
            Err(e) if e.code() == ErrorCode::NotFound => Err(GitError::NotARepository {
                path: dir.to_path_buf(),
            }),
            Err(e) => Err(ctx(format!(
                "cannot open the repository at {}",
                dir.display()
            ))(e)),
        }
    }

    /// Returns the repository whose work tree root is `dir`, creating one there (initial branch
    /// `main`) when `dir` is not a repository's root, as `git init` would.
    pub fn open_or_init(dir: &Path) -> Result<Repo, GitError> {
        match Repository::open(dir) {
            Ok(repo) => Repo::wrap(repo),
            Err(e) if e.code() == ErrorCode::NotFound => {
                let mut opts = git2::RepositoryInitOptions::new();
                opts.initial_head("main");
                let repo = Repository::init_opts(dir, &opts).map_err(ctx(format!(
                    "cannot create a repository in {}",
                    dir.display()
                )))?;
                Repo::wrap(repo)
            }
            Err(e) => Err(ctx(format!(
                "cannot open the repository at {}",
                dir.display()
            ))(e)),
        }
    }

    fn wrap(repo: Repository) -> Result<Repo, GitError> {
        let git_dir: PathBuf = repo.path().components().collect();
        let Some(workdir) = repo.workdir() else {
            return Err(GitError::Bare { path: git_dir });
        };
        let workdir: PathBuf = workdir.components().collect();
        let filemode = repo
            .config()
            .and_then(|c| c.get_bool("core.filemode"))
            .unwrap_or(cfg!(unix));
        Ok(Repo {
            repo,
            workdir,
            git_dir,
            filemode,
            index_file: std::cell::RefCell::new(None),
        })
    }

    /// Returns the absolute root of the work tree.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// Returns whether the repository is a shallow clone (history cut below some commits).
    pub fn is_shallow(&self) -> bool {
        self.repo.is_shallow()
    }

    /// In a shallow clone, fetches the history it lacks from the remote its branch tracks
    /// (else `origin`); returns whether it did. Attempt numbers come from that history.
    pub fn unshallow(&self) -> bool {
        let branch = self.head().ok().and_then(|h| h.branch);
        let config = self.repo.config().ok();
        let tracked = branch.and_then(|b| {
            let key = format!("branch.{b}.remote");
            config.as_ref()?.get_string(&key).ok()
        });
        let Some(remote) = tracked.or_else(|| {
            self.repo
                .find_remote("origin")
                .is_ok()
                .then(|| "origin".to_string())
        }) else {
            return false;
        };
        let args = ["fetch", "--quiet", "--no-tags", "--unshallow", &remote];
        command::git_output(&self.workdir, &args).is_ok_and(|out| out.status.success())
    }

    /// Returns the repository's git directory (`.git`, or `.git/worktrees/<name>` in a linked
    /// work tree), where the coordinator lock and caches live.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Returns every config entry git resolves for this repository, at every level and
    /// through includes (name, value and level, NUL-separated), or None when the config
    /// cannot be read: a digest of it tells whether a setting that changes what a status
    /// scan reports (`core.fileMode`, `core.autocrlf`, ...) changed, wherever it is set.
    pub fn config_entries(&self) -> Option<Vec<u8>> {
        let config = self.repo.config().ok()?.snapshot().ok()?;
        let mut out = Vec::new();
        config
            .entries(None)
            .ok()?
            .for_each(|e| {
                out.extend_from_slice(e.name_bytes());
                out.push(0);
                out.extend_from_slice(e.value_bytes());
                out.push(0);
                out.extend_from_slice(&(e.level() as i32).to_le_bytes());
            })
            .ok()?;
        Some(out)
    }

    /// Returns whether git trusts the execute bit of work-tree files (`core.fileMode`).
    pub fn trusts_file_mode(&self) -> bool {
        self.filemode
    }

    /// Returns the git directory a linked work tree shares with its main one (the same as
    /// [`Repo::git_dir`] elsewhere): where the config, `info/` and the objects live.
    pub fn common_dir(&self) -> &Path {
        self.repo.commondir()
    }

    /// Removes lock files a killed coord left behind, so the next run is not stuck: the
    /// branch's `.lock` at once when it holds one of coord's own commits (nobody else writes
    /// those), `index.lock` at once when it is coord's own hold and no process has it open,
    /// and any `.lock` of the branch or the index that outlives `grace` (git holds
    /// them for milliseconds) unless a process on this machine has it open (a long git
    /// command, whose lock the commit then waits for and names). The caller holds the
    /// coordinator lock. Returns what it removed.
    pub fn remove_stale_locks(&self, grace: std::time::Duration) -> Result<Vec<PathBuf>, GitError> {
        let mut locks = vec![self.git_dir().join("index.lock")];
        if let Some(branch) = self.head()?.branch {
            locks.push(self.git_dir().join(format!("refs/heads/{branch}.lock")));
        }
        let mut removed = Vec::new();
        for lock in locks {
            let stale = || outlives(&lock, grace) && !crate::lock::Holder::of(&lock).is_known();
            if self.left_by_a_killed_coord(&lock) || stale() {
                remove_lock(&lock)?;
                removed.push(lock);
            }
        }
        Ok(removed)
    }

    /// Removes the `tmp_object_git2_*` files a killed libgit2 writer left in the object
    /// database (in `objects/` or a fan-out folder), those last written before `before`; a
    /// writer that is alive renames its file away within milliseconds. Also the temporary files of
    /// a killed `git repack`. Returns how many it removed.
    pub fn remove_stale_temp_objects(
        &self,
        before: std::time::SystemTime,
    ) -> Result<usize, GitError> {
        let objects = self.repo.commondir().join("objects");
        let mut removed = self.remove_dead_pack_files(&objects.join("pack"))?;
        let mut dirs = vec![objects.clone()];
        if let Ok(entries) = std::fs::read_dir(&objects) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().len() == 2)
                    .map(|e| e.path()),
            );
        }
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let stale = e
                    .file_name()
                    .to_string_lossy()
                    .starts_with("tmp_object_git2_")
                    && e.metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t < before);
                if stale {
                    remove_lock(&e.path())?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Returns whether `lock` was left by a coord that is gone: a branch lock holding one of
    /// coord's commits (the caller holds the coordinator lock, so no coord is writing it), or
    /// coord's index hold that no process has open.
    fn left_by_a_killed_coord(&self, lock: &Path) -> bool {
        let text = std::fs::read(lock).unwrap_or_default();
        if text == commit::INDEX_HOLD_MARK {
            // coord's own hold of the index (Repo::hold_index), kept open while it is held.
            return !crate::lock::Holder::of(lock).is_known();
        }
        String::from_utf8(text)
            .ok()
            .and_then(|text| Oid::from_str(text.trim()).ok())
            .and_then(|oid| self.repo.find_commit(oid).ok())
            .is_some_and(|c| c.message_bytes().starts_with(b"coord: "))
    }

    /// Returns the current branch (None when HEAD is detached) and the commit HEAD points at
    /// (None on an unborn branch).
    pub fn head(&self) -> Result<HeadInfo, GitError> {
        let head = self.resolve_head()?;
        let branch = head.refname.strip_prefix("refs/heads/").map(str::to_string);
        Ok(HeadInfo {
            branch,
            oid: head.oid,
        })
    }

    fn resolve_head(&self) -> Result<ResolvedHead, GitError> {
        let head = self
            .repo
            .find_reference("HEAD")
            .map_err(ctx("cannot read HEAD"))?;
        // git2 0.21 returns Err here when the target name is not UTF-8.
        let target = head.symbolic_target().map_err(ctx("cannot read HEAD"))?;
        let Some(target) = target else {
            return Ok(ResolvedHead {
                refname: "HEAD".to_string(),
                oid: head.target(),
            });
        };
        let oid = match self.repo.refname_to_id(target) {
            Ok(oid) => Some(oid),
            Err(e) if e.code() == ErrorCode::NotFound => None,
            Err(e) => return Err(ctx(format!("cannot resolve {target}"))(e)),
        };
        Ok(ResolvedHead {
            refname: target.to_string(),
            oid,
        })
    }

    /// Returns the contents of the file at `path` in HEAD's tree, or None when HEAD is unborn or
    /// has no such file.
    pub fn read_head_file(&self, path: &str) -> Result<Option<Vec<u8>>, GitError> {
        check_path(path)?;
        let Some(oid) = self.resolve_head()?.oid else {
            return Ok(None);
        };
        let tree = self.tree_of(oid)?;
        let entry = match tree.get_path(Path::new(path)) {
            Ok(entry) => entry,
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(ctx(format!("cannot look up {path} in HEAD"))(e)),
        };
        let object = entry
            .to_object(&self.repo)
            .map_err(ctx(format!("cannot read {path}")))?;
        match object.into_blob() {
            Ok(blob) => Ok(Some(blob.content().to_vec())),
            Err(_) => Err(GitError::BadPath {
                path: path.to_string(),
                reason: "it is a directory in HEAD",
            }),
        }
    }

    /// Returns the blob id the index has for each of `paths` (repo-relative), None for a path
    /// it does not have; reads the index once.
    pub fn staged_ids(&self, paths: &[String]) -> Result<Vec<Option<Oid>>, GitError> {
        let mut index = self.repo.index().map_err(ctx("cannot open the index"))?;
        index.read(false).map_err(ctx("cannot read the index"))?;
        Ok(paths
            .iter()
            .map(|p| index.get_path(Path::new(p), 0).map(|e| e.id))
            .collect())
    }

    /// Returns whether `bytes` are exactly what HEAD or the index holds at `path` (a version
    /// someone recorded on purpose, not a write in progress).
    pub fn is_recorded(&self, path: &str, bytes: &[u8]) -> bool {
        let Ok(oid) = Oid::hash_object(git2::ObjectType::Blob, bytes) else {
            return false;
        };
        let staged = match self.index_file() {
            Some(index) => index.get(path).map(|e| e.id),
            None => self
                .repo
                .index()
                .and_then(|mut i| i.read(false).map(|()| i))
                .ok()
                .and_then(|i| i.get_path(Path::new(path), 0).map(|e| e.id)),
        };
        if staged == Some(oid) {
            return true;
        }
        let head = self.resolve_head().ok().and_then(|h| h.oid);
        head.and_then(|h| self.tree_of(h).ok())
            .and_then(|t| t.get_path(Path::new(path)).ok())
            .is_some_and(|e| e.id() == oid)
    }

    /// Returns the newest version of `path` that `accept` takes, looking at HEAD and its
    /// first parents, at most `depth` commits; None when there is none.
    pub fn newest_version(
        &self,
        path: &str,
        depth: usize,
        accept: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Option<Vec<u8>>, GitError> {
        check_path(path)?;
        let Some(mut oid) = self.resolve_head()?.oid else {
            return Ok(None);
        };
        for _ in 0..depth {
            let commit = self
                .repo
                .find_commit(oid)
                .map_err(ctx(format!("cannot read commit {oid}")))?;
            let tree = commit
                .tree()
                .map_err(ctx(format!("cannot read the tree of commit {oid}")))?;
            let blob = tree
                .get_path(Path::new(path))
                .ok()
                .and_then(|e| e.to_object(&self.repo).ok())
                .and_then(|o| o.into_blob().ok());
            if let Some(b) = blob.filter(|b| accept(b.content())) {
                return Ok(Some(b.content().to_vec()));
            }
            match commit.parent_id(0) {
                Ok(parent) => oid = parent,
                Err(_) => break,
            }
        }
        Ok(None)
    }

    fn tree_of(&self, commit: Oid) -> Result<git2::Tree<'_>, GitError> {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(ctx(format!("cannot read the tree of commit {commit}")))
    }
}

/// Waits up to `grace` for a lock file to go away; returns whether it is still there and at
/// least `grace` old.
fn outlives(lock: &Path, grace: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + grace;
    while lock.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= grace)
}

fn remove_lock(path: &Path) -> Result<(), GitError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(GitError::Io {
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod index_tests;
