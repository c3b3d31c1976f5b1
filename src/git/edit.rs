//! Reading and writing commits as trees of blobs, without a work tree, for `coord sync`'s
//! replay by meaning: what one commit changed (path, blob and mode before and after), the blob
//! and mode a commit holds at a path, finding a task file by name, a three-way merge of text, and a new
//! commit made of a base commit's tree with some paths set or removed, keeping another commit's
//! author, committer and message. Writes objects only: no ref, index or work tree changes.

use super::{check_path, ctx, GitError, Repo};
use git2::build::TreeUpdateBuilder;
use git2::{FileMode, MergeFileInput, Oid, TreeWalkMode, TreeWalkResult};
use std::path::Path;

/// One path a commit changed: its blob and mode in the parent and in the commit (None: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathChange {
    /// The repo-relative path.
    pub path: String,
    /// The blob in the first parent.
    pub old: Option<Oid>,
    /// The blob in the commit.
    pub new: Option<Oid>,
    /// The mode in the first parent (`Unreadable` when absent).
    pub old_mode: FileMode,
    /// The mode in the commit (`Unreadable` when absent).
    pub new_mode: FileMode,
}

/// One path to set in a tree, with the blob (or submodule commit) and mode it gets, or to
/// remove (`to: None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEdit {
    /// The repo-relative path.
    pub path: String,
    /// The object and mode it gets; None removes it.
    pub to: Option<(Oid, FileMode)>,
}

impl TreeEdit {
    /// Sets `path` to `blob` as a plain file, or removes it (`None`): what coord writes.
    pub fn file(path: &str, blob: Option<Oid>) -> TreeEdit {
        TreeEdit {
            path: path.to_string(),
            to: blob.map(|b| (b, FileMode::Blob)),
        }
    }
}

impl Repo {
    /// Returns what a single-parent commit changed, path by path (no rename detection).
    pub fn commit_changes(&self, commit: Oid) -> Result<Vec<PathChange>, GitError> {
        let read = || -> Result<Vec<PathChange>, git2::Error> {
            let c = self.repo.find_commit(commit)?;
            let parent = match c.parent_count() {
                0 => None,
                _ => Some(c.parent(0)?.tree()?),
            };
            // A file turned into a link (or back) is one change, not a removal and an add.
            let mut opts = git2::DiffOptions::new();
            opts.include_typechange(true);
            let diff =
                self.repo
                    .diff_tree_to_tree(parent.as_ref(), Some(&c.tree()?), Some(&mut opts))?;
            let oid = |f: git2::DiffFile<'_>| (!f.id().is_zero()).then(|| f.id());
            Ok(diff
                .deltas()
                .filter_map(|d| {
                    let path = d.new_file().path_bytes().or(d.old_file().path_bytes())?;
                    Some(PathChange {
                        // Not UTF-8: kept as bytes here, refused below.
                        path: String::from_utf8(path.to_vec()).unwrap_or_default(),
                        old: oid(d.old_file()),
                        new: oid(d.new_file()),
                        old_mode: d.old_file().mode(),
                        new_mode: d.new_file().mode(),
                    })
                })
                .collect())
        };
        let changes = read().map_err(ctx(format!("cannot read the changes of commit {commit}")))?;
        if changes.iter().any(|c| c.path.is_empty()) {
            return Err(GitError::BadPath {
                path: commit.to_string(),
                reason: "it changes a file whose name is not UTF-8, which coord cannot copy: rename the file, or push the commit before the remote moves on",
            });
        }
        Ok(changes)
    }

    /// Returns the best common ancestor of two commits, if they have one.
    pub fn merge_base(&self, a: Oid, b: Oid) -> Result<Option<Oid>, GitError> {
        match self.repo.merge_base(a, b) {
            Ok(base) => Ok(Some(base)),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(ctx(format!("cannot find the merge base of {a} and {b}"))(e)),
        }
    }

    /// Returns a commit's first parent, if it has one.
    pub fn first_parent(&self, commit: Oid) -> Result<Option<Oid>, GitError> {
        let c = self
            .repo
            .find_commit(commit)
            .map_err(ctx(format!("cannot read commit {commit}")))?;
        Ok(c.parent_id(0).ok())
    }

    /// Returns the blob commit `commit` holds at `path`, if any.
    pub fn blob_at(&self, commit: Oid, path: &str) -> Result<Option<Oid>, GitError> {
        let tree = self.tree_of(commit)?;
        match tree.get_path(Path::new(path)) {
            Ok(e) if e.kind() == Some(git2::ObjectType::Blob) => Ok(Some(e.id())),
            Ok(_) => Ok(None),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(ctx(format!("cannot look up {path} in {commit}"))(e)),
        }
    }

    /// Returns what commit `commit` holds at `path`: the id and mode of a file, link,
    /// submodule commit or folder; None when nothing is there (a file at a parent path too).
    pub fn entry_at(&self, commit: Oid, path: &str) -> Result<Option<(Oid, FileMode)>, GitError> {
        let tree = self.tree_of(commit)?;
        match tree.get_path(Path::new(path)) {
            Ok(e) => Ok(Some((e.id(), file_mode(e.filemode())))),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(ctx(format!("cannot look up {path} in {commit}"))(e)),
        }
    }

    /// Returns the mode of what commit `commit` holds at `path`, if it holds anything there.
    pub fn mode_at(&self, commit: Oid, path: &str) -> Result<Option<FileMode>, GitError> {
        let tree = self.tree_of(commit)?;
        match tree.get_path(Path::new(path)) {
            Ok(e) => Ok(Some(file_mode(e.filemode()))),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(ctx(format!("cannot look up {path} in {commit}"))(e)),
        }
    }

    /// Returns a blob's bytes.
    pub fn blob_bytes(&self, blob: Oid) -> Result<Vec<u8>, GitError> {
        self.repo
            .find_blob(blob)
            .map(|b| b.content().to_vec())
            .map_err(ctx(format!("cannot read blob {blob}")))
    }

    /// Stores bytes as a blob.
    pub fn write_blob(&self, bytes: &[u8]) -> Result<Oid, GitError> {
        self.repo
            .blob(bytes)
            .map_err(ctx("cannot write a blob".to_string()))
    }

    /// Returns the paths under `prefix/` in `commit`'s tree whose file name is one of `names`.
    pub fn find_named(
        &self,
        commit: Oid,
        prefix: &str,
        names: &[String],
    ) -> Result<Vec<String>, GitError> {
        let tree = self.tree_of(commit)?;
        let Ok(entry) = tree.get_path(Path::new(prefix)) else {
            return Ok(Vec::new());
        };
        let sub = self
            .repo
            .find_tree(entry.id())
            .map_err(ctx(format!("cannot read {prefix} in {commit}")))?;
        let mut found = Vec::new();
        sub.walk(TreeWalkMode::PreOrder, |dir, e| {
            let name = e.name().unwrap_or_default();
            if e.kind() == Some(git2::ObjectType::Blob) && names.iter().any(|n| n == name) {
                found.push(format!("{prefix}/{dir}{name}"));
            }
            TreeWalkResult::Ok
        })
        .map_err(ctx(format!("cannot walk {prefix} in {commit}")))?;
        Ok(found)
    }

    /// Returns every file under `prefix/` in `commit`'s tree with its blob id, in tree order;
    /// empty when the commit has no `prefix`.
    pub fn files_under(&self, commit: Oid, prefix: &str) -> Result<Vec<(String, Oid)>, GitError> {
        let tree = self.tree_of(commit)?;
        let Ok(entry) = tree.get_path(Path::new(prefix)) else {
            return Ok(Vec::new());
        };
        let Ok(sub) = self.repo.find_tree(entry.id()) else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        sub.walk(TreeWalkMode::PreOrder, |dir, e| {
            if e.kind() == Some(git2::ObjectType::Blob) {
                let name = e.name().unwrap_or_default();
                found.push((format!("{prefix}/{dir}{name}"), e.id()));
            }
            TreeWalkResult::Ok
        })
        .map_err(ctx(format!("cannot walk {prefix} in {commit}")))?;
        Ok(found)
    }

    /// Returns the commit a revision names (`HEAD`, `main`, `origin/main`, a commit id, ...);
    /// None for `HEAD` on an unborn branch.
    pub fn resolve_rev(&self, rev: &str) -> Result<Option<Oid>, GitError> {
        if rev == "HEAD" {
            return Ok(self.resolve_head()?.oid);
        }
        self.repo
            .revparse_single(rev)
            .and_then(|o| o.peel_to_commit())
            .map(|c| Some(c.id()))
            .map_err(ctx(format!("cannot find the commit '{rev}' names")))
    }

    /// Returns the three-way merge of `ours` and `theirs` from `base`, line by line as git
    /// merges; None when they changed the same (or adjacent) lines.
    pub fn merge_text(
        &self,
        base: &[u8],
        ours: &[u8],
        theirs: &[u8],
    ) -> Result<Option<Vec<u8>>, GitError> {
        let input = |bytes| {
            let mut i = MergeFileInput::new();
            i.content(bytes);
            i
        };
        let merged = git2::merge_file(&input(base), &input(ours), &input(theirs), None)
            .map_err(ctx("cannot merge text".to_string()))?;
        Ok(merged.is_automergeable().then(|| merged.content().to_vec()))
    }

    /// Writes a commit whose parent is `base` and whose tree is `base`'s with `edits` applied,
    /// with the author, committer and message of `like` (or `message` when given). Returns
    /// None when the tree would not change, unless `keep_empty` (a commit made empty on
    /// purpose).
    pub fn commit_edits(
        &self,
        base: Oid,
        like: Oid,
        edits: &[TreeEdit],
        message: Option<&str>,
        keep_empty: bool,
    ) -> Result<Option<Oid>, GitError> {
        for e in edits {
            check_path(&e.path)?;
        }
        let write = || -> Result<Option<Oid>, git2::Error> {
            let parent = self.repo.find_commit(base)?;
            let model = self.repo.find_commit(like)?;
            let mut update = TreeUpdateBuilder::new();
            for e in edits {
                match e.to {
                    Some((id, mode)) => update.upsert(e.path.as_str(), id, mode),
                    None => update.remove(e.path.as_str()),
                };
            }
            let tree_id = update.create_updated(&self.repo, &parent.tree()?)?;
            if tree_id == parent.tree_id() && !keep_empty {
                return Ok(None);
            }
            let tree = self.repo.find_tree(tree_id)?;
            let text = String::from_utf8_lossy(model.message_bytes()).into_owned();
            let oid = self.repo.commit(
                None,
                &model.author(),
                &model.committer(),
                message.unwrap_or(&text),
                &tree,
                &[&parent],
            )?;
            Ok(Some(oid))
        };
        write().map_err(ctx(format!("cannot write a commit onto {base}")))
    }
}

/// Reads a tree entry's mode as libgit2 gives it.
fn file_mode(raw: i32) -> FileMode {
    [
        FileMode::Blob,
        FileMode::BlobExecutable,
        FileMode::BlobGroupWritable,
        FileMode::Link,
        FileMode::Commit,
        FileMode::Tree,
    ]
    .into_iter()
    .find(|m| i32::from(*m) == raw)
    .unwrap_or(FileMode::Unreadable)
}
