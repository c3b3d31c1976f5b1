//! Packing loose objects, as `git gc --auto` would: libgit2 writes every object of coord's
//! commits loose and never packs, so once there are many (estimated from one fan-out folder,
//! as git does) they are written into one new pack, synced, and the loose copies that pack
//! holds are removed (`git repack -d` then `git prune-packed`, without touching older packs).
//! Does I/O (git's object database).

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
        let name = self.write_pack(&loose, &pack_dir).map_err(ctx(format!(
            "cannot pack loose objects into {}",
            pack_dir.display()
        )))?;
        let base = pack_dir.join(format!("pack-{name}"));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| GitError::Io { path, source }
        };
        for ext in ["pack", "idx"] {
            let file = base.with_extension(ext);
            std::fs::File::open(&file)
                .and_then(|f| f.sync_all())
                .map_err(io(&file))?;
        }
        crate::fsx::sync_dir(&pack_dir).map_err(io(&pack_dir))?;
        let idx = base.with_extension("idx");
        let packed = std::fs::read(&idx).map_err(io(&idx))?;
        let mut removed = 0;
        for (id, file) in loose {
            if idx_has(&packed, &id) && std::fs::remove_file(&file).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Writes one pack of `loose` into `dir`; returns its name (the hash in `pack-<hash>`).
    fn write_pack(&self, loose: &[(Oid, PathBuf)], dir: &Path) -> Result<String, git2::Error> {
        let mut builder = self.repo.packbuilder()?;
        // One thread: glibc gives each thread that allocates an arena of its own, and the
        // delta search's buffers (tens of MB over big trees) stayed in the process's memory
        // after the pack (a 50,000-task burst's peak RSS: 190 MB with a thread per core,
        // 174 MB with one).
        builder.set_threads(1);
        for (id, _) in loose {
            builder.insert_object(*id, None)?;
        }
        builder.write(dir, 0o444)?;
        let name = builder.name()?.unwrap_or_default().to_string();
        Ok(name)
    }
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

/// Returns whether a version 2 pack index (`.idx`) lists `id`: its 256-entry fan-out table
/// bounds the run of sorted ids that start with `id`'s first byte.
fn idx_has(idx: &[u8], id: &Oid) -> bool {
    const HEADER: usize = 8;
    const FANOUT: usize = 256 * 4;
    if idx.get(..HEADER) != Some(b"\xfftOc\0\0\0\x02".as_slice()) {
        return false;
    }
    let fan = |i: usize| -> Option<usize> {
        let at = HEADER + i * 4;
        let bytes: [u8; 4] = idx.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_be_bytes(bytes) as usize)
    };
    let first = usize::from(id.as_bytes()[0]);
    let (Some(lo), Some(hi)) = (
        if first == 0 { Some(0) } else { fan(first - 1) },
        fan(first),
    ) else {
        return false;
    };
    let ids = HEADER + FANOUT;
    let at = |i: usize| idx.get(ids + i * 20..ids + i * 20 + 20);
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
