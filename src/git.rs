//! Git access for coord: discovering or creating the repository, committing exactly the paths a
//! transition touched, listing uncommitted changes under `work/`, and reading history back.
//!
//! This is the only module that imports `git2`, and it does I/O: it reads the work tree, writes
//! objects, moves the branch ref and rewrites `.git/index`.

use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};

use git2::build::TreeUpdateBuilder;
use git2::{ErrorCode, FileMode, IndexEntry, IndexTime, Repository, Signature, Time};

mod rewrite;
pub use git2::Oid;
pub use rewrite::{LocalCommit, Replayed};

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
    /// A path handed to coord's git layer is not a plain repo-relative file path.
    #[error("cannot commit {path:?}: {reason}")]
    BadPath {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// An author string is not of the form `name <email>`.
    #[error("bad commit author {0:?}; expected `name <email>`, e.g. `coord <coord@localhost>`")]
    BadIdentity(String),
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
        })
    }

    /// Returns the absolute root of the work tree.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// Returns the repository's git directory (`.git`, or `.git/worktrees/<name>` in a linked
    /// work tree), where the coordinator lock and caches live.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Removes lock files a killed coord left behind, so the next run is not stuck: the
    /// branch's `.lock` when it holds one of coord's own commits (nobody else writes those),
    /// and `index.lock` once it has outlived `grace` (git holds it for milliseconds). The
    /// caller holds the coordinator lock. Returns the files removed.
    pub fn remove_stale_locks(&self, grace: std::time::Duration) -> Result<Vec<PathBuf>, GitError> {
        let mut removed = Vec::new();
        if let Some(branch) = self.head()?.branch {
            let lock = self.git_dir().join(format!("refs/heads/{branch}.lock"));
            if self.lock_holds_our_commit(&lock) {
                remove_lock(&lock)?;
                removed.push(lock);
            }
        }
        let index_lock = self.git_dir().join("index.lock");
        let deadline = std::time::Instant::now() + grace;
        while index_lock.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let old = std::fs::metadata(&index_lock)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= grace);
        if old {
            remove_lock(&index_lock)?;
            removed.push(index_lock);
        }
        Ok(removed)
    }

    fn lock_holds_our_commit(&self, lock: &Path) -> bool {
        std::fs::read_to_string(lock)
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

    fn tree_of(&self, commit: Oid) -> Result<git2::Tree<'_>, GitError> {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(ctx(format!("cannot read the tree of commit {commit}")))
    }
}

/// Checks that `path` is a plain repo-relative file path: `/`-separated, no empty, `.`, `..` or
/// `.git` components, no NUL (git2 panics on NUL in tree update paths).
fn check_path(path: &str) -> Result<(), GitError> {
    let bad = |reason| {
        Err(GitError::BadPath {
            path: path.to_string(),
            reason,
        })
    };
    if path.is_empty() || path.contains('\0') {
        return bad("paths must be non-empty and contain no NUL");
    }
    for part in path.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return bad("paths must be relative, '/'-separated, without '.' or '..'");
        }
        if part.eq_ignore_ascii_case(".git") {
            return bad("paths must not enter .git");
        }
    }
    Ok(())
}

impl Repo {
    /// Makes one commit on the current branch containing exactly `paths` (repo-relative,
    /// `/`-separated) as they are in the work tree now, then updates the index entries of those
    /// paths to match, leaving every other index entry as it was.
    ///
    /// A path that exists is stored as a blob (mode 100644, 100755 or a symlink); a missing path
    /// is removed, and a folder left empty disappears. The tree is HEAD's tree with these updates,
    /// so the cost follows `paths`, not the size of the repository. An unborn branch gets a root
    /// commit; a detached HEAD moves HEAD itself. Author and committer are both `author` at
    /// `time` (UTC). Returns `Ok(None)` without committing when the tree would equal HEAD's, and
    /// `Conflict` when the branch moved meanwhile (the ref is updated as a compare-and-swap).
    pub fn commit_paths(
        &self,
        paths: &[String],
        message: &str,
        author: &Identity,
        time: jiff::Timestamp,
    ) -> Result<Option<Oid>, GitError> {
        let head = self.resolve_head()?;
        let Some((oid, changes)) = self.commit_onto(&head, paths, message, author, time)? else {
            return Ok(None);
        };
        let ops = changes.iter().map(|(path, change)| match change {
            Change::Upsert(file) => IndexOp::Add(index_entry(path, file)),
            Change::Remove => IndexOp::Remove(path),
        });
        self.write_index(ops)?;
        Ok(Some(oid))
    }

    /// Makes one commit exactly as `commit_paths` does but leaves the index untouched, for a
    /// caller that commits several times in a row and then calls `update_index` once with all
    /// the paths (writing the index costs about 10 ms at 20,000 entries, each time).
    pub fn commit_paths_no_index(
        &self,
        paths: &[String],
        message: &str,
        author: &Identity,
        time: jiff::Timestamp,
    ) -> Result<Option<Oid>, GitError> {
        let head = self.resolve_head()?;
        let committed = self.commit_onto(&head, paths, message, author, time)?;
        Ok(committed.map(|(oid, _)| oid))
    }

    /// Makes the index entries of `paths` match HEAD's tree, reading and writing the index once.
    ///
    /// A path HEAD has gets HEAD's blob, with the work file's stat data when the file still holds
    /// those bytes (so `git status` is clean for it) and with empty stat data otherwise (so git
    /// re-reads it and shows the later edit as unstaged). A path HEAD lacks leaves the index.
    pub fn update_index(&self, paths: &[String]) -> Result<(), GitError> {
        let tree = match self.resolve_head()?.oid {
            Some(oid) => self.tree_of(oid)?,
            None => self.empty_tree()?,
        };
        let changes = self.read_changes(paths, &tree)?;
        let mut ops = Vec::with_capacity(changes.len());
        for (path, change) in &changes {
            let in_head = tree
                .get_path(Path::new(path))
                .ok()
                .filter(|e| e.kind() == Some(git2::ObjectType::Blob));
            ops.push(match (in_head, change) {
                (None, _) => IndexOp::Remove(path),
                (Some(head), Change::Upsert(file))
                    if head.id() == file.oid && head.filemode() == i32::from(file.mode) =>
                {
                    IndexOp::Add(index_entry(path, file))
                }
                (Some(head), _) => IndexOp::Add(unverified_entry(path, head.id(), head.filemode())),
            });
        }
        self.write_index(ops)
    }

    /// Commits `paths` on top of `head` as read earlier; the ref update fails with `Conflict` if
    /// the ref no longer points where `head` says. Returns the commit and the changes it made.
    fn commit_onto(
        &self,
        head: &ResolvedHead,
        paths: &[String],
        message: &str,
        author: &Identity,
        time: jiff::Timestamp,
    ) -> Result<Option<(Oid, Changes)>, GitError> {
        let baseline = match head.oid {
            Some(oid) => self.tree_of(oid)?,
            None => self.empty_tree()?,
        };
        let changes = self.read_changes(paths, &baseline)?;
        let tree = self.build_tree(&baseline, &changes)?;
        if tree == baseline.id() {
            return Ok(None);
        }
        let oid = self.write_commit(head, tree, message, author, time)?;
        self.move_ref(head, oid, message)?;
        Ok(Some((oid, changes)))
    }

    fn empty_tree(&self) -> Result<git2::Tree<'_>, GitError> {
        let write = || -> Result<git2::Tree<'_>, git2::Error> {
            let oid = self.repo.treebuilder(None)?.write()?;
            self.repo.find_tree(oid)
        };
        write().map_err(ctx("cannot write the empty tree"))
    }

    /// Returns what committing each distinct path means, read from the work tree.
    fn read_changes(
        &self,
        paths: &[String],
        baseline: &git2::Tree<'_>,
    ) -> Result<Changes, GitError> {
        let mut paths: Vec<&String> = paths.iter().collect();
        paths.sort();
        paths.dedup();
        paths
            .into_iter()
            .map(|path| {
                check_path(path)?;
                Ok((path.clone(), self.read_change(path, baseline)?))
            })
            .collect()
    }

    fn read_change(&self, path: &str, baseline: &git2::Tree<'_>) -> Result<Change, GitError> {
        let full = self.workdir.join(path);
        let meta = match std::fs::symlink_metadata(&full) {
            Ok(meta) => meta,
            Err(e) if is_missing(&e) => {
                return check_removable(path, baseline).map(|()| Change::Remove)
            }
            Err(source) => return Err(GitError::Io { path: full, source }),
        };
        let file_type = meta.file_type();
        let (oid, mode) = if file_type.is_symlink() {
            let target = link_target(&full)?;
            let oid = self
                .repo
                .blob(&target)
                .map_err(ctx(format!("cannot store {path}")))?;
            (oid, FileMode::Link)
        } else if file_type.is_file() {
            let bytes = crate::store::fsutil::read_limited(&self.workdir, path, usize::MAX - 1)
                .map_err(|source| GitError::Io {
                    path: full.clone(),
                    source,
                })?;
            let oid = self
                .repo
                .blob(&bytes)
                .map_err(ctx(format!("cannot store {path}")))?;
            (oid, self.blob_mode(&meta, path, baseline))
        } else {
            return Err(GitError::BadPath {
                path: path.to_string(),
                reason: "it is a directory or a special file, not a file",
            });
        };
        Ok(Change::Upsert(WorkFile { oid, mode, meta }))
    }

    /// Returns 100755 when the owner may execute the file (as git does), else 100644; with
    /// `core.filemode = false` the mode in HEAD is kept.
    fn blob_mode(&self, meta: &Metadata, path: &str, baseline: &git2::Tree<'_>) -> FileMode {
        if !self.filemode {
            let head_mode = baseline.get_path(Path::new(path)).map(|e| e.filemode());
            return match head_mode {
                Ok(mode) if mode == i32::from(FileMode::BlobExecutable) => FileMode::BlobExecutable,
                _ => FileMode::Blob,
            };
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if meta.permissions().mode() & 0o100 != 0 {
                return FileMode::BlobExecutable;
            }
        }
        let _ = meta;
        FileMode::Blob
    }

    fn build_tree(
        &self,
        baseline: &git2::Tree<'_>,
        changes: &[(String, Change)],
    ) -> Result<Oid, GitError> {
        let mut builder = TreeUpdateBuilder::new();
        for (path, change) in changes {
            match change {
                Change::Upsert(file) => {
                    builder.upsert(path.as_str(), file.oid, file.mode);
                }
                // libgit2 fails on removing an absent entry, so only present ones are removed.
                Change::Remove if baseline.get_path(Path::new(path)).is_ok() => {
                    builder.remove(path.as_str());
                }
                Change::Remove => {}
            }
        }
        let first = changes.first().map_or("", |(p, _)| p.as_str());
        builder
            .create_updated(&self.repo, baseline)
            .map_err(ctx(format!(
                "cannot build the tree for {first} and {} more",
                changes.len().saturating_sub(1)
            )))
    }

    fn write_commit(
        &self,
        head: &ResolvedHead,
        tree: Oid,
        message: &str,
        author: &Identity,
        time: jiff::Timestamp,
    ) -> Result<Oid, GitError> {
        let sig = Signature::new(&author.name, &author.email, &Time::new(time.as_second(), 0))
            .map_err(|_| GitError::BadIdentity(author.to_string()))?;
        let message = if message.ends_with('\n') {
            message.to_string()
        } else {
            format!("{message}\n")
        };
        let write = || -> Result<Oid, git2::Error> {
            let tree = self.repo.find_tree(tree)?;
            let parent = head.oid.map(|oid| self.repo.find_commit(oid)).transpose()?;
            let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
            self.repo
                .commit(None, &sig, &sig, &message, &tree, &parents)
        };
        write().map_err(ctx(format!("cannot write a commit for {}", head.refname)))
    }

    /// Points `head.refname` at `new` if it still points at `head.oid` (or still does not
    /// exist, on an unborn branch).
    fn move_ref(&self, head: &ResolvedHead, new: Oid, message: &str) -> Result<(), GitError> {
        let summary = message.lines().next().unwrap_or_default();
        let result = match head.oid {
            Some(old) => {
                let log = format!("commit: {summary}");
                self.repo
                    .reference_matching(&head.refname, new, true, old, &log)
            }
            None => {
                let log = format!("commit (initial): {summary}");
                self.repo.reference(&head.refname, new, false, &log)
            }
        };
        match result {
            Ok(_) => Ok(()),
            Err(source)
                if matches!(
                    source.code(),
                    ErrorCode::Modified | ErrorCode::Exists | ErrorCode::Locked
                ) =>
            {
                Err(GitError::Conflict {
                    branch: head.refname.clone(),
                    source,
                })
            }
            Err(e) => Err(ctx(format!("cannot update {}", head.refname))(e)),
        }
    }

    /// Applies `ops` to the index, reading it once (only if it changed on disk since the last
    /// read) and writing it once.
    fn write_index<'p>(&self, ops: impl IntoIterator<Item = IndexOp<'p>>) -> Result<(), GitError> {
        let index_path = self.git_dir.join("index");
        let mut index = self
            .repo
            .index()
            .and_then(|mut index| index.read(false).map(|()| index))
            .map_err(ctx(format!("cannot read {}", index_path.display())))?;
        for op in ops {
            let (path, result) = match &op {
                IndexOp::Add(entry) => (String::from_utf8_lossy(&entry.path), index.add(entry)),
                IndexOp::Remove(path) => ((*path).into(), index.remove_path(Path::new(path))),
            };
            result.map_err(ctx(format!(
                "cannot update {path} in {}",
                index_path.display()
            )))?;
        }
        index
            .write()
            .map_err(ctx(format!("cannot write {}", index_path.display())))
    }
}

/// One change to the index.
enum IndexOp<'p> {
    Add(IndexEntry),
    Remove(&'p str),
}

/// Returns an index entry for HEAD's blob whose stat data matches no file, so git compares the
/// work file's bytes instead of trusting its stat data.
fn unverified_entry(path: &str, id: Oid, mode: i32) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode: mode as u32,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: 0,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Refuses to "remove" a path that is a folder in HEAD: coord commits files only.
fn check_removable(path: &str, baseline: &git2::Tree<'_>) -> Result<(), GitError> {
    match baseline.get_path(Path::new(path)) {
        Ok(entry) if entry.kind() == Some(git2::ObjectType::Tree) => Err(GitError::BadPath {
            path: path.to_string(),
            reason: "it is a directory in HEAD, not a file",
        }),
        _ => Ok(()),
    }
}

/// Returns the bytes git stores for a symlink: its target.
fn link_target(full: &Path) -> Result<Vec<u8>, GitError> {
    let target = std::fs::read_link(full).map_err(|source| GitError::Io {
        path: full.to_path_buf(),
        source,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(target.as_os_str().as_bytes().to_vec())
    }
    #[cfg(not(unix))]
    {
        Ok(target.to_string_lossy().replace('\\', "/").into_bytes())
    }
}

/// Returns the index entry for a committed file, with the stat data read before hashing it, so
/// git sees the file as unchanged until it is written again.
#[cfg(unix)]
fn index_entry(path: &str, file: &WorkFile) -> IndexEntry {
    use std::os::unix::fs::MetadataExt;
    let m = &file.meta;
    // The index stores 32-bit stat fields; truncating is what git does too.
    IndexEntry {
        ctime: IndexTime::new(m.ctime() as i32, m.ctime_nsec() as u32),
        mtime: IndexTime::new(m.mtime() as i32, m.mtime_nsec() as u32),
        dev: m.dev() as u32,
        ino: m.ino() as u32,
        mode: u32::from(file.mode),
        uid: m.uid(),
        gid: m.gid(),
        file_size: m.size() as u32,
        id: file.oid,
        flags: 0,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// Returns the index entry for a committed file, with the times read before hashing it.
#[cfg(not(unix))]
fn index_entry(path: &str, file: &WorkFile) -> IndexEntry {
    let time = |t: io::Result<std::time::SystemTime>| {
        let d = t
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .unwrap_or_default();
        IndexTime::new(d.as_secs() as i32, d.subsec_nanos())
    };
    IndexEntry {
        ctime: time(file.meta.created()),
        mtime: time(file.meta.modified()),
        dev: 0,
        ino: 0,
        mode: u32::from(file.mode),
        uid: 0,
        gid: 0,
        file_size: file.meta.len() as u32,
        id: file.oid,
        flags: 0,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

impl Repo {
    /// Returns the sorted, distinct repo-relative paths under `prefix` (e.g. `work/`) that differ
    /// between HEAD and the index or the work tree: modified, deleted, untracked (inside untracked
    /// folders too) and both sides of staged renames. Ignored files are skipped, and so are paths
    /// that are not UTF-8 (coord never names files that way; `doctor` reports them).
    pub fn changed_paths(&self, prefix: &str) -> Result<Vec<String>, GitError> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false)
            .exclude_submodules(true)
            .renames_head_to_index(true);
        let spec = prefix.trim_end_matches('/');
        if !spec.is_empty() {
            opts.pathspec(spec).disable_pathspec_match(true);
        }
        let statuses = self
            .repo
            .statuses(Some(&mut opts))
            .map_err(ctx(format!("cannot list changes under {prefix}")))?;
        let mut paths = Vec::new();
        for entry in statuses.iter() {
            let deltas = [entry.head_to_index(), entry.index_to_workdir()];
            for delta in deltas.into_iter().flatten() {
                for file in [delta.old_file(), delta.new_file()] {
                    if let Some(path) = file.path().and_then(Path::to_str) {
                        paths.push(path.to_string());
                    }
                }
            }
        }
        paths.retain(|p| p.starts_with(prefix));
        paths.sort();
        paths.dedup();
        Ok(paths)
    }

    /// Returns the commits reachable from HEAD, newest first, at most `limit` of them; empty on
    /// an unborn branch.
    pub fn log(&self, limit: Option<usize>) -> Result<Vec<CommitInfo>, GitError> {
        let Some(head) = self.resolve_head()?.oid else {
            return Ok(Vec::new());
        };
        let mut walk = self.repo.revwalk().map_err(ctx("cannot walk history"))?;
        // Unsorted is libgit2's incremental walk, children before parents; Sort::TIME would
        // shuffle commits that share a timestamp (common with `--now`).
        walk.push(head)
            .map_err(ctx(format!("cannot walk history from {head}")))?;
        let mut commits = Vec::new();
        for oid in walk.take(limit.unwrap_or(usize::MAX)) {
            let commit = oid
                .and_then(|oid| self.repo.find_commit(oid))
                .map_err(ctx(format!("cannot read history from {head}")))?;
            commits.push(commit_info(&commit));
        }
        Ok(commits)
    }
}

fn commit_info(commit: &git2::Commit<'_>) -> CommitInfo {
    let message = String::from_utf8_lossy(commit.message_bytes());
    let trailers = git2::message_trailers_strs(&message)
        .map(|t| {
            t.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let summary = commit
        .summary_bytes()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    CommitInfo {
        oid: commit.id().to_string(),
        time: jiff::Timestamp::from_second(commit.time().seconds())
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        summary: summary.into_owned(),
        trailers,
    }
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
mod tests {
    use super::*;
    use std::process::Command;
    use tempfile::TempDir;

    const NOW: i64 = 1_700_000_000;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "user")
            .env("GIT_AUTHOR_EMAIL", "user@example.com")
            .env("GIT_COMMITTER_NAME", "user")
            .env("GIT_COMMITTER_EMAIL", "user@example.com")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "git {args:?} failed: {stderr}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// `git status --porcelain` listing every untracked file, one sorted line each.
    fn status(dir: &Path) -> Vec<String> {
        let out = git(dir, &["status", "--porcelain", "--untracked-files=all"]);
        let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
        lines.sort();
        lines
    }

    fn write(dir: &Path, path: &str, content: &str) {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }

    fn new_repo() -> (TempDir, Repo) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::open_or_init(dir.path()).unwrap();
        (dir, repo)
    }

    fn commit(repo: &Repo, paths: &[&str], message: &str) -> Option<Oid> {
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        let now = jiff::Timestamp::from_second(NOW).unwrap();
        repo.commit_paths(&paths, message, &Identity::default(), now)
            .unwrap()
    }

    fn rev(dir: &Path, spec: &str) -> String {
        git(dir, &["rev-parse", spec]).trim().to_string()
    }

    #[test]
    fn identity_parses_name_and_email() {
        let id = Identity::parse("  Ada Lovelace <ada@example.com> ").unwrap();
        assert_eq!(id.name, "Ada Lovelace");
        assert_eq!(id.email, "ada@example.com");
        assert_eq!(Identity::default().to_string(), "coord <coord@localhost>");
        for bad in [
            "",
            "ada",
            "<ada@x>",
            "ada <>",
            "ada <a@x",
            "a<b <c@x>",
            "ada <a@x> z",
        ] {
            assert!(
                matches!(Identity::parse(bad), Err(GitError::BadIdentity(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn unborn_branch_gets_a_root_commit_then_children() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        let head = repo.head().unwrap();
        assert_eq!((head.branch.as_deref(), head.oid), (Some("main"), None));
        assert_eq!(
            commit(&repo, &["work/a.yaml"], "nothing"),
            None,
            "absent path, no commit"
        );

        write(d, "work/a.yaml", "a: 1\n");
        let root = commit(&repo, &["work/a.yaml"], "coord: one").unwrap();
        assert_eq!(rev(d, "HEAD"), root.to_string());
        assert_eq!(git(d, &["rev-list", "--count", "HEAD"]).trim(), "1");
        let who = git(d, &["log", "-1", "--format=%an <%ae> %at|%cn <%ce> %ct"]);
        assert_eq!(
            who.trim(),
            format!("coord <coord@localhost> {NOW}|coord <coord@localhost> {NOW}")
        );

        write(d, "work/b.yaml", "b: 1\n");
        let child = commit(&repo, &["work/b.yaml", "work/a.yaml"], "coord: two").unwrap();
        assert_eq!(rev(d, "HEAD~1"), root.to_string());
        assert_eq!(repo.head().unwrap().oid, Some(child));

        assert_eq!(commit(&repo, &["work/a.yaml", "work/b.yaml"], "same"), None);
        assert_eq!(rev(d, "HEAD"), child.to_string());
        assert!(status(d).is_empty(), "{:?}", status(d));
    }

    #[test]
    fn rename_is_one_commit_and_leaves_status_clean() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        write(d, "work/inbox/t1.yaml", "id: t1\n");
        commit(&repo, &["work/inbox/t1.yaml"], "coord: new t1").unwrap();
        std::fs::create_dir_all(d.join("work/ready")).unwrap();
        std::fs::rename(d.join("work/inbox/t1.yaml"), d.join("work/ready/t1.yaml")).unwrap();

        let paths = ["work/inbox/t1.yaml", "work/ready/t1.yaml"];
        commit(&repo, &paths, "coord: ready t1").unwrap();
        assert_eq!(git(d, &["rev-list", "--count", "HEAD"]).trim(), "2");
        let shown = git(
            d,
            &["show", "--no-renames", "--name-status", "--format=", "HEAD"],
        );
        assert_eq!(shown, "D\twork/inbox/t1.yaml\nA\twork/ready/t1.yaml\n");
        assert!(status(d).is_empty(), "{:?}", status(d));
        // The stat data written into the index is right: no refresh needed to see it clean.
        assert_eq!(git(d, &["diff-files", "--name-only"]), "");
    }

    #[test]
    fn user_staged_unstaged_and_untracked_changes_are_left_alone() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        for path in ["work/a.yaml", "staged.txt", "unstaged.txt"] {
            write(d, path, "v1\n");
        }
        commit(
            &repo,
            &["work/a.yaml", "staged.txt", "unstaged.txt"],
            "base",
        )
        .unwrap();
        write(d, "staged.txt", "v2\n");
        git(d, &["add", "staged.txt"]);
        write(d, "unstaged.txt", "v2\n");
        write(d, "untracked.txt", "new\n");
        write(d, "work/a.yaml", "v2\n");
        write(d, "work/b.yaml", "new\n");
        let before = status(d);
        assert!(before.contains(&" M work/a.yaml".to_string()), "{before:?}");

        commit(&repo, &["work/a.yaml", "work/b.yaml"], "coord: tick").unwrap();

        let expected: Vec<String> = before
            .into_iter()
            .filter(|l| !l.contains("work/"))
            .collect();
        assert_eq!(status(d), expected);
        assert_eq!(
            expected,
            [" M unstaged.txt", "?? untracked.txt", "M  staged.txt"]
        );
        let stat = git(d, &["show", "--stat", "--format=", "HEAD"]);
        assert!(
            stat.contains("work/a.yaml") && stat.contains("work/b.yaml"),
            "{stat}"
        );
        assert!(!stat.contains(".txt"), "{stat}");
        assert_eq!(repo.read_head_file("staged.txt").unwrap().unwrap(), b"v1\n");
    }

    #[test]
    fn nested_folders_appear_and_empty_ones_disappear() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        write(d, "work/ready/keep.yaml", "k\n");
        write(d, "work/assigned/alice/x.yaml", "x\n");
        commit(
            &repo,
            &["work/ready/keep.yaml", "work/assigned/alice/x.yaml"],
            "add",
        )
        .unwrap();
        let files = git(d, &["ls-tree", "-r", "--name-only", "HEAD"]);
        assert_eq!(files, "work/assigned/alice/x.yaml\nwork/ready/keep.yaml\n");

        std::fs::remove_file(d.join("work/assigned/alice/x.yaml")).unwrap();
        commit(&repo, &["work/assigned/alice/x.yaml"], "remove").unwrap();
        let dirs = git(d, &["ls-tree", "-r", "-d", "--name-only", "HEAD"]);
        assert_eq!(dirs, "work\nwork/ready\n");
        assert!(status(d).is_empty(), "{:?}", status(d));
    }

    #[cfg(unix)]
    #[test]
    fn executable_bit_and_symlinks_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, repo) = new_repo();
        let d = dir.path();
        write(d, "work/run.sh", "#!/bin/sh\n");
        std::fs::set_permissions(
            d.join("work/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("run.sh", d.join("work/link")).unwrap();
        commit(&repo, &["work/run.sh", "work/link"], "modes").unwrap();
        let tree = git(d, &["ls-tree", "-r", "HEAD"]);
        assert!(tree.contains("100755 blob"), "{tree}");
        assert!(tree.contains("120000 blob"), "{tree}");
        assert_eq!(
            repo.read_head_file("work/link").unwrap().unwrap(),
            b"run.sh"
        );
        assert!(status(d).is_empty(), "{:?}", status(d));
    }

    #[test]
    fn branch_moved_meanwhile_is_a_conflict_and_branch_is_unchanged() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        write(d, "work/a.yaml", "1\n");
        commit(&repo, &["work/a.yaml"], "one").unwrap();
        let stale = repo.resolve_head().unwrap();
        git(d, &["commit", "-q", "--allow-empty", "-m", "someone else"]);
        let theirs = rev(d, "main");

        write(d, "work/a.yaml", "2\n");
        let paths = ["work/a.yaml".to_string()];
        let now = jiff::Timestamp::from_second(NOW).unwrap();
        let result = repo.commit_onto(&stale, &paths, "two", &Identity::default(), now);
        let Err(err) = result else {
            panic!("expected a conflict")
        };
        assert!(matches!(&err, GitError::Conflict { branch, .. } if branch == "refs/heads/main"));
        assert!(err.to_string().contains("nothing was committed"), "{err}");
        assert_eq!(rev(d, "main"), theirs);
    }

    #[test]
    fn unborn_branch_created_meanwhile_is_a_conflict() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        let stale = repo.resolve_head().unwrap();
        git(d, &["commit", "-q", "--allow-empty", "-m", "someone else"]);
        let theirs = rev(d, "main");
        write(d, "work/a.yaml", "1\n");
        let paths = ["work/a.yaml".to_string()];
        let now = jiff::Timestamp::from_second(NOW).unwrap();
        let result = repo.commit_onto(&stale, &paths, "one", &Identity::default(), now);
        assert!(matches!(result, Err(GitError::Conflict { .. })));
        assert_eq!(rev(d, "main"), theirs);
    }

    #[test]
    fn detached_head_commits_on_head() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        write(d, "work/a.yaml", "1\n");
        let first = commit(&repo, &["work/a.yaml"], "one").unwrap();
        git(d, &["checkout", "-q", "--detach"]);
        write(d, "work/a.yaml", "2\n");
        let second = commit(&repo, &["work/a.yaml"], "two").unwrap();
        assert_eq!(
            repo.head().unwrap(),
            HeadInfo {
                branch: None,
                oid: Some(second)
            }
        );
        assert_eq!(rev(d, "main"), first.to_string());
    }

    #[test]
    fn changed_paths_lists_every_kind_of_change_under_the_prefix() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        let base = [
            "work/a.yaml",
            "work/b.yaml",
            "work/c.yaml",
            "other/x.txt",
            ".gitignore",
        ];
        for path in base {
            write(d, path, "1\n");
        }
        write(d, ".gitignore", "*.tmp\n");
        commit(&repo, &base, "base").unwrap();
        assert!(repo.changed_paths("work/").unwrap().is_empty());

        write(d, "work/a.yaml", "2\n");
        std::fs::remove_file(d.join("work/b.yaml")).unwrap();
        git(d, &["mv", "work/c.yaml", "work/d.yaml"]);
        write(d, "work/new/deep/e.yaml", "new\n");
        write(d, "work/ignored.tmp", "junk\n");
        write(d, "other/x.txt", "changed outside the prefix\n");
        write(d, "workshop/z.yaml", "outside\n");

        let changed = repo.changed_paths("work/").unwrap();
        let expected = ["work/a.yaml", "work/b.yaml", "work/c.yaml", "work/d.yaml"];
        let expected: Vec<&str> = expected
            .into_iter()
            .chain(["work/new/deep/e.yaml"])
            .collect();
        assert_eq!(changed, expected);

        // Recording them leaves nothing to record.
        commit(
            &repo,
            &changed.iter().map(String::as_str).collect::<Vec<_>>(),
            "external",
        )
        .unwrap();
        assert!(repo.changed_paths("work/").unwrap().is_empty());
        assert_eq!(status(d), [" M other/x.txt", "?? workshop/z.yaml"]);
    }

    #[test]
    fn log_reads_trailers_newest_first_and_respects_limit() {
        let (dir, repo) = new_repo();
        assert!(
            repo.log(None).unwrap().is_empty(),
            "unborn HEAD has no history"
        );
        for (i, to) in ["ready", "assigned", "done"].into_iter().enumerate() {
            write(dir.path(), "work/t.yaml", &format!("{i}\n"));
            let message = format!("coord: {to} t\n\nCoord-Task: t\nCoord-To: {to}");
            commit(&repo, &["work/t.yaml"], &message).unwrap();
        }
        let log = repo.log(None).unwrap();
        let summaries: Vec<&str> = log.iter().map(|c| c.summary.as_str()).collect();
        assert_eq!(
            summaries,
            ["coord: done t", "coord: assigned t", "coord: ready t"]
        );
        let trailers =
            [("Coord-Task", "t"), ("Coord-To", "done")].map(|(k, v)| (k.into(), v.into()));
        assert_eq!(log[0].trailers, trailers);
        assert_eq!(log[0].time.as_second(), NOW);
        assert_eq!(log[0].oid, rev(dir.path(), "HEAD"));
        assert_eq!(repo.log(Some(2)).unwrap(), log[..2]);
    }

    #[test]
    fn read_head_file_returns_none_when_absent() {
        let (dir, repo) = new_repo();
        assert_eq!(repo.read_head_file("work/a.yaml").unwrap(), None);
        write(dir.path(), "work/a.yaml", "a\n");
        commit(&repo, &["work/a.yaml"], "a").unwrap();
        assert_eq!(repo.read_head_file("work/a.yaml").unwrap().unwrap(), b"a\n");
        assert_eq!(repo.read_head_file("work/b.yaml").unwrap(), None);
        assert!(matches!(
            repo.read_head_file("work"),
            Err(GitError::BadPath { .. })
        ));
    }

    #[test]
    fn discover_finds_the_root_from_a_subfolder() {
        let (dir, _) = new_repo();
        std::fs::create_dir_all(dir.path().join("work/inbox")).unwrap();
        let repo = Repo::discover(&dir.path().join("work/inbox")).unwrap();
        let root = dir.path().canonicalize().unwrap();
        assert_eq!(repo.workdir().canonicalize().unwrap(), root);
        assert_eq!(repo.git_dir().canonicalize().unwrap(), root.join(".git"));
        let again = Repo::open_or_init(dir.path()).unwrap();
        assert_eq!(again.git_dir(), repo.git_dir());
    }

    #[test]
    fn discover_outside_a_repository_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let err = Repo::discover(dir.path()).unwrap_err();
        assert!(matches!(err, GitError::NotARepository { .. }), "{err:?}");
        assert!(
            err.to_string().contains("is not in a git repository"),
            "{err}"
        );
    }

    #[test]
    fn bare_repository_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "--bare"]);
        assert!(matches!(
            Repo::discover(dir.path()),
            Err(GitError::Bare { .. })
        ));
    }

    /// Not a test: prints how commit_paths of one file scales with the size of HEAD's tree.
    /// Run with `cargo test --lib timing -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing report, not a check"]
    fn timing_commit_one_file_1k_vs_20k() {
        for n in [1_000, 20_000] {
            let (dir, repo) = new_repo();
            let d = dir.path();
            std::fs::create_dir_all(d.join("work/done")).unwrap();
            for i in 0..n {
                std::fs::write(
                    d.join(format!("work/done/t{i:05}.yaml")),
                    format!("id: t{i}\n"),
                )
                .unwrap();
            }
            git(d, &["add", "-A"]);
            git(d, &["commit", "-q", "-m", "base"]);
            std::thread::sleep(std::time::Duration::from_millis(1100));
            let (mut tree, mut index, mut total) = (Vec::new(), Vec::new(), Vec::new());
            let now = jiff::Timestamp::from_second(NOW).unwrap();
            for round in 0..14 {
                // Odd rounds add to the big folder (its tree object is rewritten whole).
                let folder = if round % 2 == 0 { "inbox" } else { "done" };
                let path = format!("work/{folder}/new{round}.yaml");
                write(d, &path, "id: new\n");
                let start = std::time::Instant::now();
                let head = repo.resolve_head().unwrap();
                let (_, changes) = repo
                    .commit_onto(&head, &[path], "m", &Identity::default(), now)
                    .unwrap()
                    .unwrap();
                let committed = start.elapsed();
                let ops = changes.iter().map(|(path, change)| match change {
                    Change::Upsert(file) => IndexOp::Add(index_entry(path, file)),
                    Change::Remove => IndexOp::Remove(path),
                });
                repo.write_index(ops).unwrap();
                total.push(start.elapsed());
                tree.push(committed);
                index.push(start.elapsed() - committed);
            }
            assert!(status(d).is_empty());
            let median = |v: &[std::time::Duration], parity: usize| {
                let mut v: Vec<_> = v.iter().skip(parity).step_by(2).collect();
                v.sort();
                *v[v.len() / 2]
            };
            for (parity, folder) in [(0, "other folder"), (1, "same folder")] {
                println!(
                    "{n:>6} files, new file in {folder}: commit_paths {:?} = tree+commit+ref {:?} \
                     + index {:?} (median of 7)",
                    median(&total, parity),
                    median(&tree, parity),
                    median(&index, parity)
                );
            }
        }
    }

    #[test]
    fn commits_without_index_then_one_index_update_leave_status_clean() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        write(d, "work/a.yaml", "1\n");
        write(d, "work/gone.yaml", "1\n");
        commit(&repo, &["work/a.yaml", "work/gone.yaml"], "base").unwrap();
        let now = jiff::Timestamp::from_second(NOW).unwrap();
        let id = Identity::default();
        write(d, "work/a.yaml", "2\n");
        write(d, "work/b.yaml", "new\n");
        std::fs::remove_file(d.join("work/gone.yaml")).unwrap();
        let first = ["work/a.yaml".to_string(), "work/gone.yaml".to_string()];
        repo.commit_paths_no_index(&first, "one", &id, now)
            .unwrap()
            .unwrap();
        let second = ["work/b.yaml".to_string()];
        repo.commit_paths_no_index(&second, "two", &id, now)
            .unwrap()
            .unwrap();
        assert_eq!(git(d, &["rev-list", "--count", "HEAD"]).trim(), "3");
        assert!(!status(d).is_empty(), "the index still has the old entries");
        // Edited after its commit, before the index update: must stay visible as unstaged.
        write(d, "work/b.yaml", "edited later\n");

        let all: Vec<String> = first.iter().chain(&second).cloned().collect();
        repo.update_index(&all).unwrap();
        assert_eq!(status(d), [" M work/b.yaml"]);
        assert_eq!(git(d, &["diff", "--cached", "--name-only"]), "");
        write(d, "work/b.yaml", "new\n");
        assert!(status(d).is_empty(), "{:?}", status(d));
    }

    #[test]
    fn bad_paths_are_refused_before_anything_is_written() {
        let (dir, repo) = new_repo();
        std::fs::create_dir_all(dir.path().join("work/dir")).unwrap();
        let now = jiff::Timestamp::from_second(NOW).unwrap();
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "work/../x",
            "work//x",
            "./x",
            ".git/config",
            "a\0b",
            "work/dir",
        ] {
            let result = repo.commit_paths(&[bad.to_string()], "m", &Identity::default(), now);
            assert!(
                matches!(result, Err(GitError::BadPath { .. })),
                "{bad:?}: {result:?}"
            );
        }
        assert_eq!(repo.head().unwrap().oid, None);
    }

    #[test]
    fn stale_locks_of_a_killed_coord_are_removed_and_others_kept() {
        let (dir, repo) = new_repo();
        let d = dir.path();
        write(d, "work/a.yaml", "1\n");
        let ours = commit(&repo, &["work/a.yaml"], "coord: one").unwrap();
        let lock = repo.git_dir().join("refs/heads/main.lock");
        std::fs::write(&lock, format!("{ours}\n")).unwrap();
        let removed = repo.remove_stale_locks(std::time::Duration::ZERO).unwrap();
        assert_eq!(removed, vec![lock.clone()]);
        write(d, "work/b.yaml", "2\n");
        let theirs = commit(&repo, &["work/b.yaml"], "a person's commit").unwrap();
        std::fs::write(&lock, format!("{theirs}\n")).unwrap();
        let index_lock = repo.git_dir().join("index.lock");
        std::fs::write(&index_lock, "").unwrap();
        let removed = repo.remove_stale_locks(std::time::Duration::ZERO).unwrap();
        assert_eq!(removed, vec![index_lock], "a person's ref lock stays");
        assert!(lock.exists());
    }
}
