//! Commits of exactly the touched paths: blobs from the work tree, a tree built from HEAD's
//! with `TreeUpdateBuilder`, the branch moved as a compare-and-swap, and the index entries of
//! those paths brought in line. Does I/O (work tree, object database, index).

use super::state::unmerged_in;
use super::*;

/// Checks that `path` is a plain repo-relative file path: `/`-separated, no empty, `.`, `..` or
/// `.git` components, no NUL (git2 panics on NUL in tree update paths).
pub(super) fn check_path(path: &str) -> Result<(), GitError> {
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

/// An entry of HEAD's tree: its kind, mode and id.
type Entry = (Option<git2::ObjectType>, i32, Oid);

/// The trees of a baseline's folders, each read once. libgit2 caches no tree over 4 KB, so
/// looking up many paths of one big folder from the root re-reads (inflates and hashes) that
/// folder's tree for each: a 1,600-task group in a 50,000-task inbox took minutes.
struct Folders<'a, 'r> {
    repo: &'r git2::Repository,
    root: &'a git2::Tree<'r>,
    trees: std::cell::RefCell<std::collections::HashMap<String, Option<git2::Tree<'r>>>>,
}

impl<'a, 'r> Folders<'a, 'r> {
    fn new(repo: &'r git2::Repository, root: &'a git2::Tree<'r>) -> Self {
        Folders {
            repo,
            root,
            trees: std::cell::RefCell::default(),
        }
    }

    /// Returns the entry at `path` (a `/`-separated repo path), if the baseline has one.
    fn entry(&self, path: &str) -> Option<Entry> {
        let of = |e: git2::TreeEntry<'_>| (e.kind(), e.filemode(), e.id());
        let Some((dir, name)) = path.rsplit_once('/') else {
            return self.root.get_name(path).map(of);
        };
        let mut trees = self.trees.borrow_mut();
        let tree = trees.entry(dir.to_string()).or_insert_with(|| {
            let e = self.root.get_path(Path::new(dir)).ok()?;
            self.repo.find_tree(e.id()).ok()
        });
        tree.as_ref()?.get_name(name).map(of)
    }
}

impl Repo {
    /// Makes one commit on the current branch containing exactly `paths` (repo-relative,
    /// `/`-separated) as they are in the work tree now. The index is left as it is: a caller
    /// that commits several times in a row calls `update_index` once with all the paths
    /// (writing the index costs about 10 ms at 20,000 entries, each time).
    ///
    /// A path that exists is stored as a blob (mode 100644, 100755 or a symlink); a missing path
    /// is removed, and a folder left empty disappears. The tree is HEAD's tree with these updates,
    /// so the cost follows `paths`, not the size of the repository. An unborn branch gets a root
    /// commit; a detached HEAD moves HEAD itself. Author and committer are both `author` at
    /// `time` (UTC). Returns `Ok(None)` without committing when the tree would equal HEAD's, and
    /// `Conflict` when the branch moved meanwhile (the ref is updated as a compare-and-swap).
    /// A branch lock held by another git process is waited for (a few seconds), then
    /// `Locked` names it.
    pub fn commit_paths(
        &self,
        paths: &[String],
        message: &str,
        author: &Identity,
        time: jiff::Timestamp,
    ) -> Result<Option<Oid>, GitError> {
        let head = self.resolve_head()?;
        self.commit_onto(&head, paths, message, author, time)
    }

    /// Makes the index entries of `paths` match HEAD's tree, reading and writing the index once.
    ///
    /// A path HEAD has gets HEAD's blob, with the work file's stat data when the file still holds
    /// those bytes (so `git status` is clean for it) and with empty stat data otherwise (so git
    /// re-reads it and shows the later edit as unstaged). A path HEAD lacks leaves the index.
    pub fn update_index(&self, paths: &[String]) -> Result<(), GitError> {
        self.update_index_holding(paths, None).map(drop)
    }

    /// Takes git's index lock (`.git/index.lock`) and keeps it until the returned hold is
    /// given to [`Repo::update_index_holding`] or dropped: what `git commit` does between
    /// moving the branch and writing the index. Held from before coord's first commit of a
    /// pass to the index write after its last, no person's `git commit` or `git stash` can
    /// run in between and record the index, still at the old commit, as a reversal of coord's
    /// commits. A lock another git holds is waited for (a few seconds), then named. Once it
    /// holds the lock it checks that no merge, rebase, cherry-pick or revert is in progress.
    pub fn hold_index(&self) -> Result<IndexHold, GitError> {
        let path = self.git_dir.join("index.lock");
        let created = super::locks::retry_locked(&path, super::locks::LOCK_WAIT, || {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(git2::Error::new(
                    ErrorCode::Locked,
                    git2::ErrorClass::Index,
                    "the index is locked",
                )),
                other => Ok(other),
            }
        })?;
        match created {
            Ok(Ok(mut file)) => {
                // Marks the lock as coord's (git never reads another's lock file), so a run
                // that finds it left by a killed coord removes it at once.
                let _ = std::io::Write::write_all(&mut file, INDEX_HOLD_MARK);
                let hold = IndexHold {
                    path,
                    held: true,
                    _open: file,
                };
                // An operation started before the lock was taken must not go on under
                // coord's writes (dropping the hold lets go of the lock).
                self.refuse_operation()?;
                Ok(hold)
            }
            Ok(Err(source)) => Err(GitError::Write { path, source }),
            Err(e) => Err(ctx(format!("cannot lock {}", path.display()))(e)),
        }
    }

    /// [`Repo::update_index`], writing the index through `hold` when coord holds the index
    /// lock already (then the lock is released by the write, as git does: the new index is
    /// renamed from the lock file). Returns what the write left.
    pub fn update_index_holding(
        &self,
        paths: &[String],
        hold: Option<IndexHold>,
    ) -> Result<IndexWritten, GitError> {
        let tree = match self.resolve_head()?.oid {
            Some(oid) => self.tree_of(oid)?,
            None => self.empty_tree()?,
        };
        let folders = Folders::new(&self.repo, &tree);
        let changes = self.read_changes(paths, &folders)?;
        let mut ops = Vec::with_capacity(changes.len());
        for (path, change) in &changes {
            let in_head = folders
                .entry(path)
                .filter(|(kind, _, _)| *kind == Some(git2::ObjectType::Blob));
            ops.push(match (in_head, change) {
                (None, _) => IndexOp::Remove(path),
                (Some((_, mode, id)), Change::Upsert(file))
                    if id == file.oid && mode == i32::from(file.mode) =>
                {
                    IndexOp::Add(index_entry(path, file))
                }
                (Some((_, mode, id)), _) => IndexOp::Add(unverified_entry(path, id, mode)),
            });
        }
        let staged = ops
            .iter()
            .map(|op| match op {
                IndexOp::Add(entry) => (
                    String::from_utf8_lossy(&entry.path).into_owned(),
                    Some(Staged {
                        id: entry.id,
                        mode: entry.mode,
                    }),
                ),
                IndexOp::Remove(path) => ((*path).to_string(), None),
            })
            .collect();
        let checksum = match hold {
            Some(hold) => Some(self.write_index_held(ops, hold)?),
            None => self.write_index(ops).map(|()| None)?,
        };
        Ok(IndexWritten {
            checksum: checksum.flatten(),
            staged,
        })
    }

    /// Commits `paths` on top of `head` as read earlier; the ref update fails with `Conflict` if
    /// the ref no longer points where `head` says. Returns the commit.
    pub(super) fn commit_onto(
        &self,
        head: &ResolvedHead,
        paths: &[String],
        message: &str,
        author: &Identity,
        time: jiff::Timestamp,
    ) -> Result<Option<Oid>, GitError> {
        // Checked at every commit, not only when the command started: a person may have started
        // a merge or rebase meanwhile, and a commit now would land inside it.
        self.refuse_operation()?;
        let baseline = match head.oid {
            Some(oid) => self.tree_of(oid)?,
            None => self.empty_tree()?,
        };
        let folders = Folders::new(&self.repo, &baseline);
        let changes = self.read_changes(paths, &folders)?;
        let tree = self.build_tree(&folders, &changes)?;
        if tree == baseline.id() {
            return Ok(None);
        }
        let oid = self.write_commit(head, tree, message, author, time)?;
        self.move_ref(head, oid, message)?;
        Ok(Some(oid))
    }

    fn empty_tree(&self) -> Result<git2::Tree<'_>, GitError> {
        let write = || -> Result<git2::Tree<'_>, git2::Error> {
            let oid = self.repo.treebuilder(None)?.write()?;
            self.repo.find_tree(oid)
        };
        write().map_err(ctx("cannot write the empty tree"))
    }

    /// Returns what committing each distinct path means, read from the work tree.
    fn read_changes(&self, paths: &[String], baseline: &Folders) -> Result<Changes, GitError> {
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

    fn read_change(&self, path: &str, baseline: &Folders) -> Result<Change, GitError> {
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
            let bytes = crate::fsx::read_limited(&self.workdir, path, usize::MAX - 1).map_err(
                |source| GitError::Io {
                    path: full.clone(),
                    source,
                },
            )?;
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
    fn blob_mode(&self, meta: &Metadata, path: &str, baseline: &Folders) -> FileMode {
        if !self.filemode {
            let head_mode = baseline.entry(path).map(|(_, mode, _)| mode);
            return match head_mode {
                Some(mode) if mode == i32::from(FileMode::BlobExecutable) => {
                    FileMode::BlobExecutable
                }
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
        baseline: &Folders,
        changes: &[(String, Change)],
    ) -> Result<Oid, GitError> {
        let mut builder = TreeUpdateBuilder::new();
        for (path, change) in changes {
            match change {
                Change::Upsert(file) => {
                    builder.upsert(path.as_str(), file.oid, file.mode);
                }
                // libgit2 fails on removing an absent entry, so only present ones are removed.
                Change::Remove if baseline.entry(path).is_some() => {
                    builder.remove(path.as_str());
                }
                Change::Remove => {}
            }
        }
        let first = changes.first().map_or("", |(p, _)| p.as_str());
        builder
            .create_updated(&self.repo, baseline.root)
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
        let oid = write().map_err(ctx(format!("cannot write a commit for {}", head.refname)))?;
        self.check_written(oid)?;
        Ok(oid)
    }

    /// Fails when the object `oid` just written is not in the object store: on a full disk
    /// libgit2 can report a write that failed as done (its streaming retry), and the branch
    /// update would then fail naming a missing object instead of the disk.
    fn check_written(&self, oid: Oid) -> Result<(), GitError> {
        let kept = self.repo.odb().is_ok_and(|odb| odb.exists(oid));
        if kept {
            return Ok(());
        }
        Err(GitError::Write {
            path: self.repo.commondir().join("objects"),
            source: io::Error::other(format!("commit {oid} was written there but is not in it")),
        })
    }

    /// Points `head.refname` at `new` if it still points at `head.oid` (or still does not
    /// exist, on an unborn branch).
    pub(super) fn move_ref(
        &self,
        head: &ResolvedHead,
        new: Oid,
        message: &str,
    ) -> Result<(), GitError> {
        let summary = message.lines().next().unwrap_or_default();
        let lock = self.git_dir.join(format!("{}.lock", head.refname));
        let result =
            super::locks::retry_locked(&lock, super::locks::LOCK_WAIT, || match head.oid {
                Some(old) => {
                    let log = format!("commit: {summary}");
                    self.repo
                        .reference_matching(&head.refname, new, true, old, &log)
                }
                None => {
                    let log = format!("commit (initial): {summary}");
                    self.repo.reference(&head.refname, new, false, &log)
                }
            })?;
        match result {
            Ok(_) => Ok(()),
            Err(source) if matches!(source.code(), ErrorCode::Modified | ErrorCode::Exists) => {
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
        self.apply_index_ops(&mut index, ops)?;
        let lock = self.git_dir.join("index.lock");
        super::locks::retry_locked(&lock, super::locks::LOCK_WAIT, || index.write())?
            .map_err(ctx(format!("cannot write {}", index_path.display())))
    }

    /// [`Repo::write_index`] under coord's own hold of the index lock: libgit2 cannot write an
    /// index whose lock is taken, so the index is copied under `.git/coord/` (with its mtime,
    /// against which libgit2 judges which entries are racy), changed and written there by
    /// libgit2, then renamed onto the lock file and from it onto the index. Returns the
    /// checksum of the index written (read before it took the index's place).
    fn write_index_held<'p>(
        &self,
        ops: impl IntoIterator<Item = IndexOp<'p>>,
        mut hold: IndexHold,
    ) -> Result<Option<[u8; 32]>, GitError> {
        let index_path = self.git_dir.join("index");
        let next = self.git_dir.join("coord/index.next");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| GitError::Write { path, source }
        };
        std::fs::create_dir_all(self.git_dir.join("coord")).map_err(io(&next))?;
        // The copy is coord's alone while it holds git's index lock: a lock libgit2 left on it
        // is a killed run's, and would fail this write and every later one.
        let next_lock = self.git_dir.join("coord/index.next.lock");
        match std::fs::remove_file(&next_lock) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io(&next_lock)(e)),
            _ => {}
        }
        copy_index(&index_path, &next)?;
        let mut index = git2::Index::open(&next)
            .map_err(ctx(format!("cannot read {}", index_path.display())))?;
        // An index of a repository: libgit2 smudges racy entries only in one (the handle lets
        // go of the index when dropped; coord's own keeps the one it reads).
        let owner = git2::Repository::open(self.repo.path())
            .and_then(|owner| owner.set_index(&mut index).map(|()| owner))
            .map_err(ctx(format!("cannot read {}", index_path.display())))?;
        self.apply_index_ops(&mut index, ops)?;
        index
            .write()
            .map_err(ctx(format!("cannot write {}", next.display())))?;
        drop(owner);
        let checksum = super::history::checksum_of(&next);
        // `apply_index_ops` refused an index with unmerged entries and added none.
        self.note_merged_index(checksum);
        std::fs::rename(&next, &hold.path).map_err(io(&hold.path))?;
        std::fs::rename(&hold.path, &index_path).map_err(io(&index_path))?;
        hold.held = false;
        Ok(checksum)
    }

    /// Applies `ops` to `index`, after checking no merge, rebase or stash pop started since
    /// the command checked: writing stage-0 entries next to its conflict entries would break
    /// it.
    fn apply_index_ops<'p>(
        &self,
        index: &mut git2::Index,
        ops: impl IntoIterator<Item = IndexOp<'p>>,
    ) -> Result<(), GitError> {
        let index_path = self.git_dir.join("index");
        self.refuse_operation()?;
        if index.has_conflicts() {
            return Err(GitError::Unfinished(Unfinished::Unmerged(unmerged_in(
                index,
            )?)));
        }
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
        Ok(())
    }
}

/// What an index write left: the checksum of the index written (None when libgit2 wrote it
/// in place, or it has none) and, per path, the blob id now staged (None: not in the index).
#[derive(Debug, Default)]
pub struct IndexWritten {
    /// The last 32 bytes of the index written ([`Repo::index_checksum`]).
    pub checksum: Option<[u8; 32]>,
    /// Each path written with the blob the index now has for it (None: not in the index).
    pub staged: Vec<(String, Option<Staged>)>,
}

/// A blob as an index entry has it: its id and its mode (`0o100644`, `0o100755` or a
/// symlink's `0o120000`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Staged {
    /// The blob id.
    pub id: Oid,
    /// The entry's mode.
    pub mode: u32,
}

/// What coord writes into `index.lock` while it holds it.
pub(super) const INDEX_HOLD_MARK: &[u8] = b"coord holds the index\n";

/// coord's hold of git's index lock (see [`Repo::hold_index`]); dropping it unused removes
/// the lock file, leaving the index as it was.
#[derive(Debug)]
pub struct IndexHold {
    path: PathBuf,
    held: bool,
    /// Kept open so that a stale-lock check (`Holder::of`) sees this process holds it.
    _open: std::fs::File,
}

impl Drop for IndexHold {
    fn drop(&mut self) {
        if self.held {
            let _ = std::fs::remove_file(&self.path);
        }
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

/// The in-memory flag of an entry whose file coord hashed with the stat data it read before
/// (libgit2 writes no such flag): as git marks what it adds, so that the write does not hash
/// the file again to decide whether to smudge it.
const HASHED: u16 = git2::IndexEntryExtendedFlag::UPTODATE.bits();

/// Copies the index at `from` to `to` with its mtime (against which libgit2 judges which
/// entries are racy); an absent index leaves no copy.
fn copy_index(from: &Path, to: &Path) -> Result<(), GitError> {
    let write = |source| GitError::Write {
        path: to.to_path_buf(),
        source,
    };
    match std::fs::copy(from, to) {
        Ok(_) => {
            let mtime = std::fs::metadata(from).and_then(|m| m.modified());
            let copy = std::fs::File::options().write(true).open(to);
            copy.and_then(|copy| copy.set_modified(mtime?))
                .map_err(write)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::remove_file(to) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(write(e)),
            _ => Ok(()),
        },
        Err(source) => Err(GitError::Io {
            path: from.to_path_buf(),
            source,
        }),
    }
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Refuses to "remove" a path that is a folder in HEAD: coord commits files only.
fn check_removable(path: &str, baseline: &Folders) -> Result<(), GitError> {
    match baseline.entry(path) {
        Some((Some(git2::ObjectType::Tree), _, _)) => Err(GitError::BadPath {
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
        flags_extended: HASHED,
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
        flags_extended: HASHED,
        path: path.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod folders_tests {
    use super::*;

    /// Many lookups in one folder read its tree once; root files, missing folders and a path
    /// under a file answer like `Tree::get_path`.
    #[test]
    fn each_folder_tree_is_read_once_and_entries_match_get_path() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let blob = repo.blob(b"x\n").unwrap();
        let mut builder = TreeUpdateBuilder::new();
        for i in 0..50 {
            builder.upsert(format!("work/inbox/t{i}.yaml"), blob, FileMode::Blob);
        }
        builder.upsert("work/a/b/deep.yaml", blob, FileMode::BlobExecutable);
        builder.upsert("top.txt", blob, FileMode::Blob);
        let empty = repo.treebuilder(None).unwrap().write().unwrap();
        let empty = repo.find_tree(empty).unwrap();
        let root = builder.create_updated(&repo, &empty).unwrap();
        let root = repo.find_tree(root).unwrap();

        let folders = Folders::new(&repo, &root);
        let mut probes: Vec<String> = (0..60).map(|i| format!("work/inbox/t{i}.yaml")).collect();
        probes.extend(
            [
                "work/a/b/deep.yaml",
                "work/a/b",
                "top.txt",
                "top.txt/under",
                "work",
                "nope/x.yaml",
                "missing.txt",
            ]
            .map(String::from),
        );
        for path in &probes {
            let want = root
                .get_path(Path::new(path))
                .ok()
                .map(|e| (e.kind(), e.filemode(), e.id()));
            assert_eq!(folders.entry(path), want, "{path}");
        }
        let trees = folders.trees.borrow();
        let mut read: Vec<&str> = trees.keys().map(String::as_str).collect();
        read.sort();
        assert_eq!(
            read,
            ["nope", "top.txt", "work/a", "work/a/b", "work/inbox"]
        );
    }
}
