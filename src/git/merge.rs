//! Merging coord's packs into one, with a reachability bitmap, as `git repack -a -d -b` does
//! without `-f`: every object's stored bytes are copied as they are (a delta stays the same
//! delta, no delta is searched again), so a merge costs a copy of the packs, not a repack.
//! A clone of a repository whose history sits in one pack with a bitmap for HEAD sends that
//! pack as it is, instead of walking every commit's trees and searching deltas for the
//! objects stored whole. Packs git keeps for a reason (`.keep`, `.promisor`, cruft packs
//! with `.mtimes`) and repositories with a multi-pack index are left alone. Does I/O (git's
//! object database).

mod copy;

use std::fs::File;
use std::io::Write;

use super::bitmap;
use super::*;
pub(super) use copy::Objects;
#[cfg(test)]
pub(super) use copy::{crc32, ofs_decode, ofs_encode};

/// Where a merge stops early, to leave what a `kill -9` at that point would (tests only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeStop {
    /// Never: the merge runs to the end.
    Never,
    /// After writing the new pack's temporary files, before any is renamed.
    Written,
    /// After renaming the new pack into place, before removing the old packs.
    Renamed,
}

/// What HEAD reaches, as numbers of the objects being merged: HEAD's commit, and one bit
/// per object.
pub(super) struct Reach {
    /// The number of HEAD's commit.
    pub tip: usize,
    /// Bit `n` set: HEAD reaches object number `n`.
    pub bits: Vec<u64>,
}

impl Repo {
    /// Merges the packs in `objects/pack` into one when there are at least two that coord
    /// may merge; writes a bitmap for HEAD when every object HEAD reaches is in the new pack.
    /// Returns how many packs it merged (0: nothing done). The new pack, its bitmap and its
    /// index are written and synced before the index is renamed into place (the pack exists
    /// for readers from then), and only then are the old packs removed, so a failure or a
    /// kill at any point leaves every object readable.
    pub fn merge_packs(&self) -> Result<usize, GitError> {
        self.merge_packs_until(MergeStop::Never)
    }

    /// [`Repo::merge_packs`], stopping early at `stop` (tests use it to leave what a kill
    /// there would).
    pub(crate) fn merge_packs_until(&self, stop: MergeStop) -> Result<usize, GitError> {
        let dir = self.repo.commondir().join("objects/pack");
        let packs = mergeable(&dir);
        if packs.len() < 2 {
            return Ok(0);
        }
        // The process's own names: another coord merging in a linked work tree of the same
        // repository, which shares `objects/`, must not write into this one's files.
        let temp = dir.join(format!("tmp_coord_merge_{}", std::process::id()));
        let merged = self.merge_into(&dir, &packs, &temp, stop);
        if merged.is_err() {
            // A merge that failed (a full disk, a damaged pack) leaves no partial file: on a
            // full disk it would keep the room it took, and no later run removes it.
            remove_pack(&temp);
        }
        merged
    }

    /// Writes the merge of `packs` under the temporary name `temp`, renames it into `dir` and
    /// removes the old packs ([`Repo::merge_packs_until`]).
    fn merge_into(
        &self,
        dir: &Path,
        packs: &[PathBuf],
        temp: &Path,
        stop: MergeStop,
    ) -> Result<usize, GitError> {
        let idxs: Vec<PathBuf> = packs.iter().map(|p| p.with_extension("idx")).collect();
        let mut objects = Objects::list(&idxs)?;
        let reach = self.reachable_from_head(&objects, packs)?;
        let sum = copy::copy_packs(packs, &mut objects, &temp.with_extension("pack"))?;
        let bitmap_bytes = reach.and_then(|r| bitmap::build(&objects, &r, &sum));
        if let Some(bytes) = &bitmap_bytes {
            write_synced(&temp.with_extension("bitmap"), bytes)?;
        }
        write_synced(
            &temp.with_extension("idx"),
            &copy::idx_bytes(&objects, &sum),
        )?;
        drop(objects);
        if stop == MergeStop::Written {
            return Ok(0);
        }
        let new = dir.join(format!("pack-{}", hex(&sum)));
        let exts: &[&str] = match bitmap_bytes {
            Some(_) => &["pack", "bitmap", "idx"],
            None => &["pack", "idx"],
        };
        for ext in exts {
            let (from, to) = (temp.with_extension(ext), new.with_extension(ext));
            std::fs::rename(&from, &to).map_err(write_err(&to))?;
        }
        crate::fsx::sync_dir(dir).map_err(write_err(dir))?;
        if stop == MergeStop::Renamed {
            return Ok(0);
        }
        for old in packs.iter().filter(|p| **p != new) {
            remove_pack(old);
        }
        Ok(packs.len())
    }

    /// Returns what HEAD reaches (every commit, tree and blob), or `None` when HEAD has no
    /// commit yet or reaches an object none of the packs merged holds (then no bitmap can
    /// say the pack holds all HEAD reaches).
    ///
    /// A bitmap coord wrote for one of `packs` (a pack path without extension) says what an
    /// earlier HEAD reached; when that commit is an ancestor of HEAD, its objects are taken
    /// from the bitmap and only the commits since, and the trees they do not share, are
    /// walked. Walking the whole history each time mapped every tree of it into memory
    /// (31 MB more at the peak of a 50,000-task burst).
    fn reachable_from_head(
        &self,
        objects: &Objects,
        packs: &[PathBuf],
    ) -> Result<Option<Reach>, GitError> {
        let Some(tip) = self.repo.head().ok().and_then(|h| h.target()) else {
            return Ok(None);
        };
        let Some(tip_number) = objects.find(&tip) else {
            return Ok(None);
        };
        let walk_err = "cannot walk the history from HEAD to write a pack bitmap";
        let mut walk = self.repo.revwalk().map_err(ctx(walk_err))?;
        walk.push(tip).map_err(ctx(walk_err))?;
        let mut reach = Reach {
            tip: tip_number,
            bits: vec![0; objects.ids.len().div_ceil(64)],
        };
        if let Some((earlier, reached)) = packs.iter().find_map(|p| bitmap::read(p)) {
            let ancestor =
                earlier == tip || self.repo.graph_descendant_of(tip, earlier).unwrap_or(false);
            if ancestor && reached.iter().all(|id| reach.mark(objects, *id).is_some()) {
                walk.hide(earlier).map_err(ctx(walk_err))?;
            } else {
                reach.bits.fill(0);
            }
        }
        for commit in walk {
            let commit = commit.map_err(ctx("cannot walk the history from HEAD"))?;
            let tree = self
                .repo
                .find_commit(commit)
                .map_err(ctx(format!("cannot read commit {commit}")))?
                .tree_id();
            if reach.mark(objects, commit).is_none()
                || !self.walk_tree(tree, objects, &mut reach)?
            {
                return Ok(None);
            }
        }
        Ok(Some(reach))
    }

    /// Marks `tree` and every tree and blob under it; returns whether every one is among
    /// `objects`.
    fn walk_tree(&self, tree: Oid, objects: &Objects, reach: &mut Reach) -> Result<bool, GitError> {
        let mut stack = vec![tree];
        while let Some(id) = stack.pop() {
            match reach.mark(objects, id) {
                None => return Ok(false),
                Some(false) => continue,
                Some(true) => {}
            }
            let tree = self
                .repo
                .find_tree(id)
                .map_err(ctx(format!("cannot read tree {id}")))?;
            for entry in tree.iter() {
                match entry.kind() {
                    Some(git2::ObjectType::Tree) => stack.push(entry.id()),
                    // Marks the blob; one no pack merged holds ends the walk.
                    Some(git2::ObjectType::Blob) if reach.mark(objects, entry.id()).is_none() => {
                        return Ok(false);
                    }
                    _ => {}
                }
            }
        }
        Ok(true)
    }
}

impl Reach {
    /// Marks `id` as reached; returns whether it was new, or `None` when no pack merged
    /// holds it.
    fn mark(&mut self, objects: &Objects, id: Oid) -> Option<bool> {
        let n = objects.find(&id)?;
        let (word, bit) = (n / 64, 1u64 << (n % 64));
        let new = self.bits[word] & bit == 0;
        self.bits[word] |= bit;
        Some(new)
    }
}

/// Returns the packs of `dir` a merge may take (each as its path without extension), oldest
/// first; none when the directory has a multi-pack index (it names the packs it covers).
fn mergeable(dir: &Path) -> Vec<PathBuf> {
    if dir.join("multi-pack-index").exists() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut packs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let stem = name.strip_prefix("pack-")?.strip_suffix(".idx")?;
            let base = dir.join(format!("pack-{stem}"));
            let kept = ["keep", "promisor", "mtimes"]
                .iter()
                .any(|ext| base.with_extension(ext).exists());
            let time = base
                .with_extension("pack")
                .metadata()
                .ok()?
                .modified()
                .ok()?;
            (!kept).then_some((time, base))
        })
        .collect();
    packs.sort();
    packs.into_iter().map(|(_, p)| p).collect()
}

/// Writes `bytes` to `path` (replacing what a killed merge left there) and syncs it.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), GitError> {
    let mut file = create(path)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(write_err(path))
}

/// Creates `path` read-only for everyone, as git and libgit2 leave pack files, replacing
/// what a killed merge left there.
fn create(path: &Path) -> Result<File, GitError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(write_err(path)(e)),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)
        .map_err(write_err(path))
}

/// Removes an old pack: its index first, so no reader finds an index without its pack.
fn remove_pack(base: &Path) {
    for ext in ["idx", "pack", "rev", "bitmap"] {
        let _ = std::fs::remove_file(base.with_extension(ext));
    }
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> GitError {
    let path = path.to_path_buf();
    move |source| GitError::Write { path, source }
}

/// Returns `bytes` as lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
