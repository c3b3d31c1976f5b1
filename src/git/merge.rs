//! Merging coord's packs into one, with a reachability bitmap, as `git repack -a -d -b` does
//! without `-f`: every object's stored bytes are copied as they are (a delta stays the same
//! delta, no delta is searched again), so a merge costs a copy of the packs, not a repack.
//! A clone of a repository whose history sits in one pack with a bitmap for HEAD sends that
//! pack as it is, instead of walking every commit's trees and searching deltas for the
//! objects stored whole. Packs git keeps for a reason (`.keep`, `.promisor`, cruft packs
//! with `.mtimes`) and repositories with a multi-pack index are left alone. Does I/O (git's
//! object database).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};

use sha1::{Digest, Sha1};

use super::bitmap::{self, Kind};
use super::*;

/// Where a merge stops early, to leave what a `kill -9` at that point would (tests only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MergeStop {
    /// Never: the merge runs to the end.
    Never,
    /// After writing the new pack's temporary files, before any is renamed.
    Written,
    /// After renaming the new pack into place, before removing the old packs.
    Renamed,
}

/// One object of an old pack: its id, where its entry starts, and the checksum of its entry.
#[derive(Clone, Copy)]
struct Listed {
    id: Oid,
    offset: u64,
    crc: u32,
}

/// One object as written to the new pack.
pub(super) struct Written {
    /// The object's id.
    pub id: Oid,
    /// Where its entry starts in the new pack.
    pub offset: u64,
    /// The CRC-32 of its entry.
    pub crc: u32,
    /// Its type, or the base it is a delta of.
    pub kind: Kind,
}

/// A pack the merge may take: its `.pack` and `.idx` (the name without extension).
struct OldPack {
    base: PathBuf,
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
        let reach = self.reachable_from_head()?;
        let temp = dir.join("tmp_coord_merge");
        let (written, sum) = copy_packs(&packs, &temp.with_extension("pack"))?;
        let name = hex(&sum);
        let index = bitmap::sorted(&written);
        let bitmap_bytes = reach.and_then(|r| bitmap::build(&written, &index, &r, &sum));
        if let Some(bytes) = &bitmap_bytes {
            write_synced(&temp.with_extension("bitmap"), bytes)?;
        }
        write_synced(
            &temp.with_extension("idx"),
            &idx_bytes(&written, &index, &sum),
        )?;
        if stop == MergeStop::Written {
            return Ok(0);
        }
        let new = dir.join(format!("pack-{name}"));
        let mut exts = vec!["pack"];
        if bitmap_bytes.is_some() {
            exts.push("bitmap");
        }
        exts.push("idx");
        for ext in exts {
            let (from, to) = (temp.with_extension(ext), new.with_extension(ext));
            std::fs::rename(&from, &to).map_err(write_err(&to))?;
        }
        crate::store::fsutil::sync_dir(&dir).map_err(write_err(&dir))?;
        if stop == MergeStop::Renamed {
            return Ok(0);
        }
        for old in packs.iter().filter(|p| p.base != new) {
            remove_pack(&old.base);
        }
        Ok(packs.len())
    }

    /// Returns every object HEAD reaches (commits, trees, blobs), or `None` when HEAD has no
    /// commit yet.
    fn reachable_from_head(&self) -> Result<Option<(Oid, Vec<Oid>)>, GitError> {
        let Ok(head) = self.repo.head() else {
            return Ok(None);
        };
        let Some(tip) = head.target() else {
            return Ok(None);
        };
        let walk_err = ctx("cannot walk the history from HEAD to write a pack bitmap");
        let mut walk = self
            .repo
            .revwalk()
            .map_err(ctx("cannot walk the history"))?;
        walk.push(tip).map_err(walk_err)?;
        let mut seen = std::collections::HashSet::new();
        let mut found = Vec::new();
        for commit in walk {
            let commit = commit.map_err(ctx("cannot walk the history from HEAD"))?;
            found.push(commit);
            let tree = self
                .repo
                .find_commit(commit)
                .map_err(ctx(format!("cannot read commit {commit}")))?
                .tree_id();
            self.walk_tree(tree, &mut seen, &mut found)?;
        }
        Ok(Some((tip, found)))
    }

    /// Adds `tree` and every tree and blob under it not `seen` yet to `found`.
    fn walk_tree(
        &self,
        tree: Oid,
        seen: &mut std::collections::HashSet<Oid>,
        found: &mut Vec<Oid>,
    ) -> Result<(), GitError> {
        let mut stack = vec![tree];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            found.push(id);
            let tree = self
                .repo
                .find_tree(id)
                .map_err(ctx(format!("cannot read tree {id}")))?;
            for entry in tree.iter() {
                match entry.kind() {
                    Some(git2::ObjectType::Tree) => stack.push(entry.id()),
                    Some(git2::ObjectType::Blob) if seen.insert(entry.id()) => {
                        found.push(entry.id());
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// Returns the packs of `dir` a merge may take, oldest first; none when the directory has
/// a multi-pack index (it names the packs it covers).
fn mergeable(dir: &Path) -> Vec<OldPack> {
    if dir.join("multi-pack-index").exists() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut packs: Vec<(std::time::SystemTime, OldPack)> = entries
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
            (!kept).then_some((time, OldPack { base }))
        })
        .collect();
    packs.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.base.cmp(&b.1.base)));
    packs.into_iter().map(|(_, p)| p).collect()
}

/// Copies every object of `packs` once (the first copy of an object wins) into a new pack
/// at `to`, synced; returns the objects in pack order and the pack's checksum.
fn copy_packs(packs: &[OldPack], to: &Path) -> Result<(Vec<Written>, [u8; 20]), GitError> {
    let listed: Vec<Vec<Listed>> = packs
        .iter()
        .map(|p| read_idx(&p.base.with_extension("idx")))
        .collect::<Result<_, _>>()?;
    let mut unique: Vec<Oid> = listed.iter().flatten().map(|l| l.id).collect();
    unique.sort_unstable();
    unique.dedup();
    let file = create(to)?;
    let mut out = PackOut::new(BufWriter::new(file), unique.len())?;
    let mut at: HashMap<Oid, u64> = HashMap::with_capacity(unique.len());
    let mut written = Vec::with_capacity(unique.len());
    for (pack, list) in packs.iter().zip(listed) {
        copy_pack(
            &pack.base.with_extension("pack"),
            list,
            &mut out,
            &mut at,
            &mut written,
        )
        .map_err(|e| e.at(&pack.base.with_extension("pack")))?;
    }
    let sum = out.finish().map_err(write_err(to))?;
    let thin = written
        .iter()
        .any(|w| matches!(w.kind, Kind::Delta(base) if !at.contains_key(&base)));
    if thin {
        return Err(GitError::BadPack {
            path: to.to_path_buf(),
            reason: "a delta's base is in none of the packs merged",
        });
    }
    Ok((written, sum))
}

/// Copies the objects of one pack, in their order there, skipping those already written.
fn copy_pack(
    path: &Path,
    mut list: Vec<Listed>,
    out: &mut PackOut,
    at: &mut HashMap<Oid, u64>,
    written: &mut Vec<Written>,
) -> Result<(), PackError> {
    list.sort_by_key(|l| l.offset);
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut input = BufReader::with_capacity(1 << 16, file);
    let mut head = [0u8; 12];
    input.read_exact(&mut head)?;
    let count = u32::from_be_bytes([head[8], head[9], head[10], head[11]]);
    if &head[..4] != b"PACK" || count as usize != list.len() {
        return Err(PackError::Bad("pack header does not match its index"));
    }
    let mut pos = 12u64;
    let mut entry = Vec::new();
    for (i, l) in list.iter().enumerate() {
        let end = list.get(i + 1).map_or(len.saturating_sub(20), |n| n.offset);
        if l.offset != pos || end <= pos {
            return Err(PackError::Bad("object offsets do not tile the pack"));
        }
        entry.resize(
            usize::try_from(end - pos).map_err(|_| PackError::Bad("huge object"))?,
            0,
        );
        input.read_exact(&mut entry)?;
        pos = end;
        if crc32(&entry) != l.crc {
            return Err(PackError::Bad("an object's CRC does not match the index"));
        }
        if at.contains_key(&l.id) {
            continue;
        }
        let kind = entry_kind(&entry, l.offset, &list)?;
        let offset = out.offset;
        let crc = out.entry(&entry, &kind, at)?;
        at.insert(l.id, offset);
        written.push(Written {
            id: l.id,
            offset,
            crc,
            kind: kind.kind,
        });
    }
    Ok(())
}

/// An old entry taken apart: what it is, its size, and where its compressed data starts.
struct Entry {
    kind: Kind,
    size: u64,
    data: usize,
}

/// Reads an entry's header: its type and size, and for a delta, its base's id.
fn entry_kind(entry: &[u8], offset: u64, list: &[Listed]) -> Result<Entry, PackError> {
    let bad = || PackError::Bad("truncated object header");
    let first = *entry.first().ok_or_else(bad)?;
    let kind = (first >> 4) & 7;
    let mut size = u64::from(first & 15);
    let mut shift = 4;
    let mut i = 1;
    let mut byte = first;
    while byte & 0x80 != 0 {
        byte = *entry.get(i).ok_or_else(bad)?;
        size |= u64::from(byte & 0x7f).checked_shl(shift).ok_or_else(bad)?;
        shift += 7;
        i += 1;
    }
    let kind = match kind {
        1..=4 => Kind::Whole(kind),
        6 => {
            let (back, used) = ofs_decode(entry.get(i..).ok_or_else(bad)?).ok_or_else(bad)?;
            i += used;
            let base = offset
                .checked_sub(back)
                .and_then(|b| list.binary_search_by_key(&b, |l| l.offset).ok())
                .ok_or(PackError::Bad("a delta's base is not in its pack"))?;
            Kind::Delta(list[base].id)
        }
        7 => {
            let id = entry.get(i..i + 20).ok_or_else(bad)?;
            i += 20;
            Kind::Delta(Oid::from_bytes(id).map_err(|_| bad())?)
        }
        _ => return Err(PackError::Bad("unknown object type")),
    };
    Ok(Entry {
        kind,
        size,
        data: i,
    })
}

/// Decodes a delta's base distance (git's offset encoding); returns it and the bytes used.
pub(super) fn ofs_decode(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut i = 0;
    let mut c = *bytes.first()?;
    let mut ofs = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        i += 1;
        c = *bytes.get(i)?;
        ofs = ofs.checked_add(1)?.checked_mul(128)? | u64::from(c & 0x7f);
    }
    Some((ofs, i + 1))
}

/// Encodes a delta's base distance as git does.
pub(super) fn ofs_encode(mut ofs: u64) -> Vec<u8> {
    let mut out = vec![(ofs & 0x7f) as u8];
    ofs >>= 7;
    while ofs != 0 {
        ofs -= 1;
        out.push(0x80 | (ofs & 0x7f) as u8);
        ofs >>= 7;
    }
    out.reverse();
    out
}

/// Encodes an entry's type and size header.
fn header(kind: u8, mut size: u64) -> Vec<u8> {
    let mut byte = (kind << 4) | (size & 15) as u8;
    size >>= 4;
    let mut out = Vec::new();
    while size != 0 {
        out.push(byte | 0x80);
        byte = (size & 0x7f) as u8;
        size >>= 7;
    }
    out.push(byte);
    out
}

/// The new pack being written: its bytes go through SHA-1 as they are written.
struct PackOut {
    out: BufWriter<File>,
    sha: Sha1,
    offset: u64,
}

impl PackOut {
    /// Starts a pack of `count` objects.
    fn new(out: BufWriter<File>, count: usize) -> Result<PackOut, GitError> {
        let count = u32::try_from(count).map_err(|_| GitError::BadPack {
            path: PathBuf::from("objects/pack"),
            reason: "too many objects for one pack",
        })?;
        let mut pack = PackOut {
            out,
            sha: Sha1::new(),
            offset: 0,
        };
        let mut head = b"PACK\0\0\0\x02".to_vec();
        head.extend_from_slice(&count.to_be_bytes());
        pack.put(&head).map_err(|source| GitError::Write {
            path: PathBuf::from("objects/pack"),
            source,
        })?;
        Ok(pack)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.sha.update(bytes);
        self.offset += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    /// Writes one entry: as it was, or for a delta whose base is already written, with the
    /// base named by its distance (a delta by offset); returns the entry's CRC-32.
    fn entry(
        &mut self,
        old: &[u8],
        parsed: &Entry,
        at: &HashMap<Oid, u64>,
    ) -> Result<u32, PackError> {
        let mut new = match parsed.kind {
            Kind::Delta(base) => match at.get(&base) {
                Some(&base_at) => {
                    let mut h = header(6, parsed.size);
                    h.extend(ofs_encode(self.offset - base_at));
                    h
                }
                None => {
                    let mut h = header(7, parsed.size);
                    h.extend_from_slice(base.as_bytes());
                    h
                }
            },
            Kind::Whole(_) => old[..parsed.data].to_vec(),
        };
        new.extend_from_slice(&old[parsed.data..]);
        self.put(&new)?;
        Ok(crc32(&new))
    }

    /// Writes the trailing checksum and syncs the file; returns the checksum.
    fn finish(mut self) -> io::Result<[u8; 20]> {
        let sum: [u8; 20] = self.sha.clone().finalize().into();
        self.out.write_all(&sum)?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(sum)
    }
}

/// Why an old pack could not be copied.
#[derive(Debug)]
enum PackError {
    Io(io::Error),
    Bad(&'static str),
}

impl From<io::Error> for PackError {
    fn from(e: io::Error) -> Self {
        PackError::Io(e)
    }
}

impl PackError {
    /// Names the pack the error is about.
    fn at(self, path: &Path) -> GitError {
        match self {
            PackError::Io(source) => GitError::Io {
                path: path.to_path_buf(),
                source,
            },
            PackError::Bad(reason) => GitError::BadPack {
                path: path.to_path_buf(),
                reason,
            },
        }
    }
}

/// Reads a version 2 pack index: every object's id, offset and CRC-32.
fn read_idx(path: &Path) -> Result<Vec<Listed>, GitError> {
    let bytes = std::fs::read(path).map_err(|source| GitError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_idx(&bytes).ok_or_else(|| GitError::BadPack {
        path: path.to_path_buf(),
        reason: "not a version 2 pack index",
    })
}

/// Parses a version 2 pack index; `None` when it is not one.
fn parse_idx(bytes: &[u8]) -> Option<Vec<Listed>> {
    if bytes.get(..8)? != b"\xfftOc\0\0\0\x02" {
        return None;
    }
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    let n = u32_at(8 + 255 * 4)? as usize;
    let ids = 8 + 256 * 4;
    let crcs = ids + n * 20;
    let offsets = crcs + n * 4;
    let large = offsets + n * 4;
    (0..n)
        .map(|i| {
            let id = Oid::from_bytes(bytes.get(ids + i * 20..ids + i * 20 + 20)?).ok()?;
            let small = u32_at(offsets + i * 4)?;
            let offset = if small & 0x8000_0000 == 0 {
                u64::from(small)
            } else {
                let at = large + (small & 0x7fff_ffff) as usize * 8;
                u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?)
            };
            Some(Listed {
                id,
                offset,
                crc: u32_at(crcs + i * 4)?,
            })
        })
        .collect()
}

/// Returns a version 2 pack index of `written`, whose ids in order are `index` (positions
/// into `written`), for the pack whose checksum is `sum`.
fn idx_bytes(written: &[Written], index: &[u32], sum: &[u8; 20]) -> Vec<u8> {
    let mut out = b"\xfftOc\0\0\0\x02".to_vec();
    let mut fan = [0u32; 256];
    for w in written {
        fan[usize::from(w.id.as_bytes()[0])] += 1;
    }
    let mut total = 0;
    for count in fan {
        total += count;
        out.extend_from_slice(&total.to_be_bytes());
    }
    let objects = || index.iter().map(|&i| &written[i as usize]);
    for w in objects() {
        out.extend_from_slice(w.id.as_bytes());
    }
    for w in objects() {
        out.extend_from_slice(&w.crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for w in objects() {
        let small = match u32::try_from(w.offset) {
            Ok(o) if o < 0x8000_0000 => o,
            _ => {
                large.extend_from_slice(&w.offset.to_be_bytes());
                0x8000_0000 | (large.len() / 8 - 1) as u32
            }
        };
        out.extend_from_slice(&small.to_be_bytes());
    }
    out.extend_from_slice(&large);
    out.extend_from_slice(sum);
    let own = Sha1::digest(&out);
    out.extend_from_slice(&own);
    out
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

/// The CRC-32 (IEEE) git stores per object in a pack index.
pub(super) fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    !bytes
        .iter()
        .fold(!0u32, |c, &b| TABLE[usize::from((c as u8) ^ b)] ^ (c >> 8))
}
