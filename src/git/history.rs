//! Reading history and state: paths under a prefix that differ from HEAD, and commits with
//! their trailers. Does I/O (git).

use super::*;
use crate::model::Endpoint;

impl Repo {
    /// Returns the sorted, distinct repo-relative paths under `prefix` (e.g. `work/`) that differ
    /// between HEAD and the index or the work tree: modified, deleted, untracked (inside untracked
    /// folders too) and both sides of staged renames. Ignored files are skipped, and so are paths
    /// that are not UTF-8 (coord never names files that way; `doctor` reports them).
    pub fn changed_paths(&self, prefix: &str) -> Result<Vec<String>, GitError> {
        Ok(self.changes_under(prefix)?.paths)
    }

    /// Returns those of `paths` (repo-relative files) missing from the work tree while the
    /// index flags them skip-worktree: a sparse checkout left them out. The index is read
    /// only when one is missing.
    pub fn left_out_of_work_tree(&self, paths: &[&str]) -> Vec<String> {
        let mut skipped = SkippedInWorkTree::new(&self.repo);
        paths
            .iter()
            .filter(|p| self.workdir.join(p).symlink_metadata().is_err())
            .filter(|p| skipped.holds(Some(Path::new(p))))
            .map(|p| p.to_string())
            .collect()
    }

    /// Returns what `changed_paths` returns, and whether any ignored file lies under `prefix`
    /// (a change to ignore rules alone could turn it into an untracked one).
    pub fn changes_under(&self, prefix: &str) -> Result<Changed, GitError> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(true)
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
        let mut changed = Changed::default();
        let mut skipped = SkippedInWorkTree::new(&self.repo);
        for entry in statuses.iter() {
            if entry.status().is_ignored() {
                changed.ignored |= entry.path().is_ok_and(|p| p.starts_with(prefix));
                continue;
            }
            let mut in_work_tree = entry.index_to_workdir();
            if let Some(d) = &in_work_tree {
                if skipped.holds(d.old_file().path()) {
                    let path = d.old_file().path().and_then(Path::to_str);
                    changed.skipped.extend(path.map(str::to_string));
                    in_work_tree = None;
                }
            }
            for delta in [entry.head_to_index(), in_work_tree].into_iter().flatten() {
                for file in [delta.old_file(), delta.new_file()] {
                    if let Some(path) = file.path().and_then(Path::to_str) {
                        changed.paths.push(path.to_string());
                    }
                }
            }
        }
        let read = self.index_file();
        let flagged = skipped.flagged_under(read.as_deref(), prefix);
        changed.skipped.extend(
            flagged
                .into_iter()
                .filter(|(path, id)| {
                    let bytes = std::fs::read(self.workdir.join(path));
                    bytes.is_ok_and(|b| super::blob_id(&b) != Some(*id))
                })
                .map(|(path, _)| path),
        );
        changed.paths.retain(|p| p.starts_with(prefix));
        changed.skipped.retain(|p| p.starts_with(prefix));
        changed.skipped.sort();
        changed.skipped.dedup();
        changed.skipped.truncate(5);
        changed.paths.sort();
        changed.paths.dedup();
        Ok(changed)
    }

    /// Returns the last 32 bytes of the index file, which end with the checksum of its whole
    /// content: equal bytes mean an unchanged index. None when there is no index or it is
    /// written without a checksum (`index.skipHash`).
    pub fn index_checksum(&self) -> Option<[u8; 32]> {
        checksum_of(&self.git_dir.join("index"))
    }

    /// Returns the index as read without libgit2 ([`IndexFile`]), read again only when its
    /// checksum changed since the last read; None when there is none, it has no checksum, or
    /// it is in a form that reader does not take.
    pub(crate) fn index_file(&self) -> Option<std::sync::Arc<IndexFile>> {
        let checksum = self.index_checksum()?;
        let mut kept = self.index_file.borrow_mut();
        if let Some(index) = kept.as_ref().filter(|i| i.checksum() == Some(checksum)) {
            return Some(std::sync::Arc::clone(index));
        }
        let index = std::sync::Arc::new(IndexFile::read(&self.git_dir.join("index"))?);
        *kept = Some(std::sync::Arc::clone(&index));
        Some(index)
    }

    /// Returns the id of the tree HEAD's commit has at the folder `dir` (repo-relative);
    /// None on an unborn branch or when it has none.
    pub fn head_tree_id(&self, dir: &str) -> Option<Oid> {
        let head = self.resolve_head().ok()?.oid?;
        let tree = self.tree_of(head).ok()?;
        let entry = tree.get_path(Path::new(dir)).ok()?;
        (entry.kind() == Some(git2::ObjectType::Tree)).then(|| entry.id())
    }

    /// Returns, by name, the tree id of each subfolder of the folder `dir` (repo-relative) in
    /// HEAD's commit; empty on an unborn branch or when HEAD has no `dir`.
    pub fn head_subtrees(&self, dir: &str) -> std::collections::HashMap<String, Oid> {
        let tree = self
            .head_tree_id(dir)
            .and_then(|id| self.repo.find_tree(id).ok());
        let Some(tree) = tree else {
            return std::collections::HashMap::new();
        };
        tree.iter()
            .filter(|e| e.kind() == Some(git2::ObjectType::Tree))
            .filter_map(|e| Some((e.name().ok()?.to_string(), e.id())))
            .collect()
    }

    /// Returns who made commit `oid` (the author's name) and the files under `prefix` it
    /// added, changed or deleted, compared with its first parent (with nothing, for a root
    /// commit), in path order.
    pub fn touched(&self, oid: &str, prefix: &str) -> Result<Touched, GitError> {
        let what = format!("cannot read the changes of commit {oid}");
        let commit = git2::Oid::from_str(oid)
            .and_then(|o| self.repo.find_commit(o))
            .map_err(ctx(&what))?;
        let tree = commit.tree().map_err(ctx(&what))?;
        let parent = match commit.parent(0) {
            Ok(p) => Some(p.tree().map_err(ctx(&what))?),
            Err(_) => None,
        };
        let mut opts = git2::DiffOptions::new();
        opts.pathspec(prefix.trim_end_matches('/'))
            .disable_pathspec_match(true);
        let diff = self
            .repo
            .diff_tree_to_tree(parent.as_ref(), Some(&tree), Some(&mut opts))
            .map_err(ctx(&what))?;
        let files = diff
            .deltas()
            .filter_map(|d| {
                let kind = match d.status() {
                    git2::Delta::Added => Touch::Added,
                    git2::Delta::Deleted => Touch::Deleted,
                    _ => Touch::Changed,
                };
                let file = if kind == Touch::Deleted {
                    d.old_file()
                } else {
                    d.new_file()
                };
                let path = file.path().and_then(Path::to_str)?;
                path.starts_with(prefix).then(|| (path.to_string(), kind))
            })
            .collect();
        let author = String::from_utf8_lossy(commit.author().name_bytes()).into_owned();
        Ok(Touched { author, files })
    }

    /// Returns the commits reachable from HEAD, newest first, at most `limit` of them; empty on
    /// an unborn branch.
    pub fn log(&self, limit: Option<usize>) -> Result<Vec<CommitInfo>, GitError> {
        match self.resolve_head()?.oid {
            Some(head) => self.log_from(head, limit),
            None => Ok(Vec::new()),
        }
    }

    /// Returns the commits reachable from `head` and not from `hide` (all of them without
    /// one), newest first.
    pub fn log_range(&self, head: Oid, hide: Option<Oid>) -> Result<Vec<CommitInfo>, GitError> {
        let mut walk = self.repo.revwalk().map_err(ctx("cannot walk history"))?;
        walk.push(head)
            .map_err(ctx(format!("cannot walk history from {head}")))?;
        if let Some(hide) = hide {
            walk.hide(hide)
                .map_err(ctx(format!("cannot walk history from {head} to {hide}")))?;
        }
        walk.map(|oid| {
            oid.and_then(|oid| self.repo.find_commit(oid))
                .map(|c| commit_info(&c))
                .map_err(ctx(format!("cannot read history from {head}")))
        })
        .collect()
    }

    /// Whether the object database holds the commit `oid` (a commit left behind by a reset
    /// stays until git's garbage collection drops it).
    pub fn has_commit(&self, oid: Oid) -> bool {
        self.repo.find_commit(oid).is_ok()
    }

    /// Returns the commits reachable from `head`, newest first, at most `limit` of them.
    pub fn log_from(&self, head: Oid, limit: Option<usize>) -> Result<Vec<CommitInfo>, GitError> {
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

/// One transition as a commit's trailers record it (a commit of a large tick pass records
/// several, each starting at its `Coord-Task` or `Coord-Agent` trailer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The task id, or the agent name for a profile update.
    pub subject: String,
    /// Whether the subject is an agent (`Coord-Agent`).
    pub agent: bool,
    /// `Coord-From`; None when absent or not an endpoint coord writes.
    pub from: Option<Endpoint>,
    /// `Coord-To`; None when absent or not an endpoint coord writes.
    pub to: Option<Endpoint>,
    /// `Coord-Op`: the command the transition carries out, if one did.
    pub op: Option<String>,
    /// `Coord-Summary`: the transition's summary line, in a commit that records several.
    pub summary: Option<String>,
}

/// Returns the transitions a commit's trailers record, in order.
pub fn recorded<'a>(trailers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Recorded> {
    let mut out: Vec<Recorded> = Vec::new();
    for (key, value) in trailers {
        let agent = key == "Coord-Agent";
        if agent || key == "Coord-Task" {
            out.push(Recorded {
                subject: value.to_string(),
                agent,
                ..Recorded::default()
            });
            continue;
        }
        let Some(last) = out.last_mut() else {
            continue;
        };
        match key {
            "Coord-From" => last.from = value.parse().ok(),
            "Coord-To" => last.to = value.parse().ok(),
            "Coord-Op" => last.op = Some(value.to_string()),
            "Coord-Summary" => last.summary = Some(value.to_string()),
            _ => continue,
        }
    }
    out
}

impl CommitInfo {
    /// Returns the transitions this commit records, in order.
    pub fn transitions(&self) -> Vec<Recorded> {
        recorded(self.trailers.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

pub(super) fn commit_info(commit: &git2::Commit<'_>) -> CommitInfo {
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

/// Returns the last 32 bytes of the index file at `path` (see [`Repo::index_checksum`]).
pub(super) fn checksum_of(path: &Path) -> Option<[u8; 32]> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(SeekFrom::End(-32)).ok()?;
    let mut tail = [0u8; 32];
    file.read_exact(&mut tail).ok()?;
    tail[12..].iter().any(|&b| b != 0).then_some(tail)
}

/// A file as the work tree has it: its bytes and whether its owner may execute it; None
/// when there is none.
pub type OnDisk<'a> = Option<(&'a [u8], bool)>;

impl Repo {
    /// Returns whether each of `files` (a repo-relative path with its bytes in the work tree
    /// and whether it is executable there; None when absent) is exactly as HEAD has it and as
    /// the index stages it, and no index entry is one git does not compare with the work tree
    /// (skip-worktree: a sparse checkout; assume-unchanged; intent-to-add): a commit of only
    /// these paths then carries no change anyone else made and drops nobody's staged change.
    /// False on any doubt (a file that does not hash, a mode git may ignore).
    pub fn as_committed(&self, files: &[(&str, OnDisk<'_>)]) -> Result<bool, GitError> {
        let Some(staged) = self.staged_plainly(files)? else {
            return Ok(false);
        };
        let tree = match self.resolve_head()?.oid {
            Some(oid) => Some(self.tree_of(oid)?),
            None => None,
        };
        for ((path, disk), staged) in files.iter().zip(staged) {
            let head = tree.as_ref().and_then(|t| t.get_path(Path::new(path)).ok());
            let head = head.map(|e| (e.id(), e.filemode() as u32));
            let disk = match disk {
                Some((bytes, executable)) => {
                    let Ok(oid) = Oid::hash_object(git2::ObjectType::Blob, bytes) else {
                        return Ok(false);
                    };
                    let mode = if *executable { 0o100755 } else { 0o100644 };
                    Some((oid, mode))
                }
                None => None,
            };
            if disk != head || staged != head {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Returns the blob id and mode the index stages at each of `files`' paths (None for a
    /// path it does not have), or None when an entry of the index is one git does not
    /// compare with the work tree.
    fn staged_plainly(
        &self,
        files: &[(&str, OnDisk<'_>)],
    ) -> Result<Option<Vec<StagedAt>>, GitError> {
        if let Some(index) = self.index_file() {
            if index.entries().any(|e| e.special) {
                return Ok(None);
            }
            let staged = files.iter().map(|(p, _)| index.get(p));
            return Ok(Some(staged.map(|e| e.map(|e| (e.id, e.mode))).collect()));
        }
        let mut index = self.repo.index().map_err(ctx("cannot open the index"))?;
        index.read(false).map_err(ctx("cannot read the index"))?;
        let special = |e: git2::IndexEntry| {
            e.flags & ASSUME_VALID != 0 || e.flags_extended & (SKIP_WORKTREE | INTENT_TO_ADD) != 0
        };
        if index.iter().any(special) {
            return Ok(None);
        }
        let staged = files.iter().map(|(p, _)| index.get_path(Path::new(p), 0));
        Ok(Some(staged.map(|e| e.map(|e| (e.id, e.mode))).collect()))
    }
}

/// The blob id and mode the index stages at a path; None when it has no entry there.
type StagedAt = Option<(Oid, u32)>;

/// The assume-unchanged bit of an index entry's flags (`CE_VALID`).
const ASSUME_VALID: u16 = 0x8000;
/// The intent-to-add bit of an index entry's extended flags (`CE_INTENT_TO_ADD`).
const INTENT_TO_ADD: u16 = 1 << 13;

/// The index entries git flags skip-worktree (sparse checkouts, `git update-index
/// --skip-worktree`): git takes such a file as it is in the index whatever the work tree
/// holds, so a missing or different file there is no change to record (libgit2's status
/// does not honour the flag: it reports such a file deleted). The index is read only when
/// the status reports a work-tree change.
struct SkippedInWorkTree<'r> {
    repo: &'r git2::Repository,
    index: Option<Option<git2::Index>>,
}

use super::index_file::SKIP_WORKTREE;

impl<'r> SkippedInWorkTree<'r> {
    fn new(repo: &'r git2::Repository) -> Self {
        SkippedInWorkTree { repo, index: None }
    }

    /// Returns the path and blob id of each entry under `prefix` flagged skip-worktree (a
    /// file there with other bytes is a change libgit2's status does not see, as git does
    /// not): from `read`, the index as read without libgit2 and kept for the operation, else
    /// through libgit2. Only an index of version 3 or later can flag an entry, so a version 2
    /// index (git's usual) is not gone through.
    fn flagged_under(&mut self, read: Option<&IndexFile>, prefix: &str) -> Vec<(String, Oid)> {
        if let Some(read) = read {
            return read.skipped_under(prefix);
        }
        let repo = self.repo;
        let Some(index) = self.index.get_or_insert_with(|| repo.index().ok()) else {
            return Vec::new();
        };
        if index.version() < 3 {
            return Vec::new();
        }
        index
            .iter()
            .filter(|e| e.flags_extended & SKIP_WORKTREE != 0)
            .filter_map(|e| Some((String::from_utf8(e.path).ok()?, e.id)))
            .filter(|(path, _)| path.starts_with(prefix))
            .collect()
    }

    /// Returns whether the index entry at `path` is flagged skip-worktree.
    fn holds(&mut self, path: Option<&Path>) -> bool {
        let repo = self.repo;
        let index = self.index.get_or_insert_with(|| repo.index().ok());
        match (index, path) {
            (Some(index), Some(path)) => index
                .get_path(path, 0)
                .is_some_and(|e| e.flags_extended & SKIP_WORKTREE != 0),
            _ => false,
        }
    }
}
