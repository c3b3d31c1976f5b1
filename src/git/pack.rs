//! Packing loose objects, as `git gc --auto` would: libgit2 writes every object of coord's
//! commits loose and never packs, so once there are many (estimated from one fan-out folder,
//! as git does) they are written into one new pack, synced, and the loose copies that pack
//! holds are removed (`git repack -d` then `git prune-packed`, without touching older packs).
//! Packs are then kept in a geometric progression, as `git repack --geometric=2` does: the
//! smallest packs are merged into one until each pack holds at least twice the objects of all
//! smaller ones together, so a long-lived repo has a few packs (a clone reads one long run of
//! deltas instead of many small packs) and each object is rewritten a logarithmic number of
//! times. Does I/O (git's object database).

use super::*;

/// About how many loose objects make coord pack them: git's own `gc.auto` default.
pub const PACK_LOOSE_FROM: usize = 6_700;

impl Repo {
    /// Packs the loose objects when git's estimate of their number reaches `threshold` (0:
    /// always);
    /// returns how many loose files it removed (0 when it did not pack). Nothing is removed
    /// before the pack and its index are written and synced, and only objects that index
    /// lists are removed, so a failure leaves every object readable.
    pub fn pack_loose_objects(&self, threshold: usize) -> Result<usize, GitError> {
        let objects = self.repo.commondir().join("objects");
        let sample = loose_in(&objects.join("17")).len();
        if sample * 256 < threshold {
            return Ok(0);
        }
        let loose = all_loose(&objects);
        let pack_dir = objects.join("pack");
        let ids: Vec<Oid> = loose.iter().map(|(id, _)| *id).collect();
        let name = self.write_pack(&ids, &pack_dir).map_err(ctx(format!(
            "cannot pack loose objects into {}",
            pack_dir.display()
        )))?;
        sync_pack(&pack_dir, &name)?;
        let idx = pack_dir.join(format!("pack-{name}.idx"));
        let packed = std::fs::read(&idx).map_err(io(&idx))?;
        let mut removed = 0;
        for (id, file) in loose {
            if idx_has(&packed, &id) && std::fs::remove_file(&file).is_ok() {
                removed += 1;
            }
        }
        self.merge_small_packs(&pack_dir)?;
        Ok(removed)
    }

    /// Merges the smallest packs of `pack_dir` into one, as `git repack --geometric=2`
    /// would (see the module comment). Kept, promisor and cruft packs are left alone. The merged pack is written and synced before any pack it replaces is removed,
    /// so a kill at any point leaves every object readable.
    fn merge_small_packs(&self, pack_dir: &Path) -> Result<(), GitError> {
        let packs = geometric_rollup(packs_in(pack_dir));
        if packs.len() < 2 {
            return Ok(());
        }
        let ids: Vec<Oid> = packs.iter().flat_map(|p| p.ids()).collect();
        let name = self.write_pack(&ids, pack_dir).map_err(ctx(format!(
            "cannot merge the packs in {}",
            pack_dir.display()
        )))?;
        sync_pack(pack_dir, &name)?;
        for pack in &packs {
            pack.remove();
        }
        Ok(())
    }

    /// Writes one pack of `ids` into `dir`; returns its name (the hash in `pack-<hash>`).
    fn write_pack(&self, ids: &[Oid], dir: &Path) -> Result<String, git2::Error> {
        let mut builder = self.repo.packbuilder()?;
        // One thread: glibc gives each thread that allocates an arena of its own, and the
        // delta search's buffers (tens of MB over big trees) stayed in the process's memory
        // after the pack (a 50,000-task burst's peak RSS: 190 MB with a thread per core,
        // 174 MB with one).
        builder.set_threads(1);
        for id in ids {
            builder.insert_object(*id, None)?;
        }
        builder.write(dir, 0o444)?;
        let name = builder.name()?.unwrap_or_default().to_string();
        Ok(name)
    }
}

/// Returns a function that wraps an I/O error on `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GitError {
    let path = path.to_path_buf();
    move |source| GitError::Io { path, source }
}

/// Syncs the pack `pack-<name>` (its `.pack` and `.idx`) and the folder that holds it.
fn sync_pack(dir: &Path, name: &str) -> Result<(), GitError> {
    let base = dir.join(format!("pack-{name}"));
    for ext in ["pack", "idx"] {
        let file = base.with_extension(ext);
        std::fs::File::open(&file)
            .and_then(|f| f.sync_all())
            .map_err(io(&file))?;
    }
    crate::store::fsutil::sync_dir(dir).map_err(io(dir))
}

/// One pack of the object store: its path without extension and its index's bytes.
struct Pack {
    base: PathBuf,
    idx: Vec<u8>,
}

impl Pack {
    /// How many objects the pack holds (the last entry of its index's fan-out table).
    fn count(&self) -> usize {
        idx_fan(&self.idx, 255).unwrap_or(0)
    }

    /// The ids the pack's index lists.
    fn ids(&self) -> impl Iterator<Item = Oid> + '_ {
        (0..self.count()).filter_map(|i| {
            let at = IDX_IDS + i * 20;
            Oid::from_bytes(self.idx.get(at..at + 20)?).ok()
        })
    }

    /// Removes the pack's files, its index first so no reader finds the index without the
    /// pack. A failure leaves a duplicate of objects the merged pack holds: harmless.
    fn remove(&self) {
        for ext in ["idx", "pack", "rev", "bitmap", "mtimes"] {
            let _ = std::fs::remove_file(self.base.with_extension(ext));
        }
    }
}

/// Returns the packs of `dir` that may be merged: each `.pack` with a readable version 2
/// index, and no `.keep`, `.promisor` or `.mtimes` (a cruft pack's) file.
fn packs_in(dir: &Path) -> Vec<Pack> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = path.file_name()?.to_str()?;
            if !name.starts_with("pack-") || path.extension()? != "pack" {
                return None;
            }
            let base = path.with_extension("");
            let kept = ["keep", "promisor", "mtimes"]
                .iter()
                .any(|ext| base.with_extension(ext).exists());
            let idx = std::fs::read(base.with_extension("idx")).ok()?;
            (!kept && idx.starts_with(IDX_MAGIC)).then_some(Pack { base, idx })
        })
        .collect()
}

/// Returns the smallest packs to merge so that, once merged, each pack holds at least twice
/// the objects of all smaller packs together (empty when the packs are that way already).
fn geometric_rollup(mut packs: Vec<Pack>) -> Vec<Pack> {
    packs.sort_by_key(Pack::count);
    let counts: Vec<usize> = packs.iter().map(Pack::count).collect();
    let merge = rollup_len(&counts);
    packs.truncate(merge);
    packs
}

/// How many of `counts` (ascending) to merge: the longest prefix whose sum is more than half
/// of the count that follows it, so that every pack after the merged one holds at least twice
/// all before it.
fn rollup_len(counts: &[usize]) -> usize {
    let mut sum = 0;
    let mut merge = 0;
    for (i, &count) in counts.iter().enumerate() {
        if i > 0 && sum * 2 > count {
            merge = i + 1;
        }
        sum += count;
    }
    merge
}

/// Returns the loose objects of one fan-out folder: (id, file).
fn loose_in(dir: &Path) -> Vec<(Oid, PathBuf)> {
    let Some(prefix) = dir.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            let hex = name.len() == 38 && name.bytes().all(|b| b.is_ascii_hexdigit());
            let id = Oid::from_str(&format!("{prefix}{name}"))
                .ok()
                .filter(|_| hex)?;
            Some((id, e.path()))
        })
        .collect()
}

/// Returns every loose object under `objects/`.
fn all_loose(objects: &Path) -> Vec<(Oid, PathBuf)> {
    (0..=255u8)
        .flat_map(|b| loose_in(&objects.join(format!("{b:02x}"))))
        .collect()
}

/// The first bytes of a version 2 pack index: its magic number and version.
const IDX_MAGIC: &[u8] = b"\xfftOc\0\0\0\x02";
/// Where a version 2 pack index's sorted ids start: after the header and the 256-entry
/// fan-out table.
const IDX_IDS: usize = 8 + 256 * 4;

/// Entry `i` of a version 2 pack index's fan-out table: how many ids start with a byte up
/// to `i`.
fn idx_fan(idx: &[u8], i: usize) -> Option<usize> {
    let at = 8 + i * 4;
    let bytes: [u8; 4] = idx.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes) as usize)
}

/// Returns whether a version 2 pack index (`.idx`) lists `id`: its 256-entry fan-out table
/// bounds the run of sorted ids that start with `id`'s first byte.
fn idx_has(idx: &[u8], id: &Oid) -> bool {
    if !idx.starts_with(IDX_MAGIC) {
        return false;
    }
    let first = usize::from(id.as_bytes()[0]);
    let (Some(lo), Some(hi)) = (
        if first == 0 {
            Some(0)
        } else {
            idx_fan(idx, first - 1)
        },
        idx_fan(idx, first),
    ) else {
        return false;
    };
    let at = |i: usize| idx.get(IDX_IDS + i * 20..IDX_IDS + i * 20 + 20);
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match at(mid).map(|s| s.cmp(id.as_bytes())) {
            Some(std::cmp::Ordering::Equal) => return true,
            Some(std::cmp::Ordering::Less) => lo = mid + 1,
            Some(std::cmp::Ordering::Greater) => hi = mid,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::rollup_len;

    #[test]
    fn the_rollup_merges_the_smallest_packs_until_each_holds_twice_all_smaller_ones() {
        assert_eq!(rollup_len(&[]), 0);
        assert_eq!(rollup_len(&[5]), 0);
        assert_eq!(rollup_len(&[1, 2, 6, 18]), 0);
        assert_eq!(rollup_len(&[1, 2, 4, 8]), 4);
        assert_eq!(rollup_len(&[10, 10]), 2);
        assert_eq!(rollup_len(&[8, 10, 13, 14]), 4);
        assert_eq!(rollup_len(&[7, 7, 50]), 2);
        assert_eq!(rollup_len(&[7, 7, 7, 7, 50]), 5);
        assert_eq!(rollup_len(&[1, 3, 3, 100]), 3);
    }
}
