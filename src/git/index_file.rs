//! `.git/index` read without libgit2: its entries' paths, stages, flags, blob ids and stat
//! data, and the cache tree (the `TREE` extension git keeps with the tree id of each folder
//! whose entries did not change since a tree was written). libgit2 reads the whole index
//! into a map and checks its SHA-1 with collision detection (~30 ms for 100,000 entries);
//! the questions coord asks of it before committing (is anything unmerged, is this file
//! staged, is `work/` as HEAD has it and as the walk saw it) need only a pass over the bytes.
//! coord's own index writes are libgit2's ([`Repo::update_index`]).
//!
//! Only what this reader fully understands is answered: index versions 2 and 3, SHA-1 ids,
//! no split index, no sparse folder entries, the file's SHA-1 checksum right. Anything else (or bytes that do not parse) gives
//! None and the caller asks libgit2, as before. Reads the index file only.

use super::{Oid, Repo};
use sha1::{Digest, Sha1};

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Index entry modes of regular files.
const REGULAR: [u32; 2] = [0o100_644, 0o100_755];
/// The length of an object id (SHA-1).
const ID_LEN: usize = 20;
/// The fixed part of an entry before its flags: ten 32-bit stat fields and the id.
const STAT_LEN: usize = 40;
/// Entry flag: assume unchanged (`git update-index --assume-unchanged`).
const ASSUME_VALID: u16 = 0x8000;
/// Entry flag: an extended flags word follows (version 3).
const EXTENDED: u16 = 0x4000;
/// Entry flags: the path's length, or all ones for a path of 4,095 bytes or more.
const NAME_MASK: u16 = 0x0FFF;
/// Extended flag: skip-worktree (sparse checkouts, `git update-index --skip-worktree`).
pub(super) const SKIP_WORKTREE: u16 = 0x4000;
/// Extended flags that make git look at an entry otherwise: skip-worktree, intent-to-add.
const SKIP_OR_INTENT: u16 = SKIP_WORKTREE | 0x2000;

/// The stat data an index entry keeps, as git truncates it to 32 bits: ctime (seconds,
/// nanoseconds), mtime (seconds, nanoseconds), device, inode, size.
pub type EntryStat = [u32; 7];

/// One entry of the index.
#[derive(Debug)]
pub struct Entry<'a> {
    /// The repo-relative path.
    pub path: &'a [u8],
    /// The merge stage (0 unless unmerged).
    pub stage: u16,
    /// The mode (`0o100644`, `0o100755`, `0o120000`, `0o160000`).
    pub mode: u32,
    /// The blob id.
    pub id: Oid,
    /// Whether git is told not to compare the entry with the work tree (assume-unchanged,
    /// skip-worktree) or it holds no content yet (intent-to-add).
    pub special: bool,
    /// Whether the entry is flagged skip-worktree.
    pub skip_worktree: bool,
}

/// An entry without its blob id but with its stat data ([`IndexFile::head`]), and where it
/// starts.
pub(super) struct Head<'a> {
    at: usize,
    /// The repo-relative path.
    pub(super) path: &'a [u8],
    stage: u16,
    mode: u32,
    /// The stat data git recorded when it hashed the file.
    pub(super) stat: EntryStat,
    special: bool,
    skip_worktree: bool,
}

/// A node of the cache tree: a folder and the tree id of the index entries under it, when
/// still valid.
#[derive(Debug)]
struct TreeNode {
    name: Vec<u8>,
    id: Option<Oid>,
    children: Vec<TreeNode>,
}

/// An index file as read.
#[derive(Debug)]
pub struct IndexFile {
    bytes: Vec<u8>,
    /// Where each entry starts, in the index's order (path, then stage).
    pub(super) entries: Vec<usize>,
    /// Where the entries end (the extensions start).
    entries_end: usize,
    version: u32,
    tree: Option<TreeNode>,
    /// The index file's mtime: an entry whose file changed at or after it is "racy".
    pub mtime: SystemTime,
}

impl IndexFile {
    /// Reads the index at `path`; None when it is absent, does not read, or is in a form
    /// this reader does not take (see the module's documentation).
    pub fn read(path: &Path) -> Option<IndexFile> {
        let mut file = std::fs::File::open(path).ok()?;
        let mtime = file.metadata().ok()?.modified().ok()?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).ok()?;
        IndexFile::parse(bytes, mtime)
    }

    /// Parses the bytes of an index file and checks their checksum.
    pub(super) fn parse(bytes: Vec<u8>, mtime: SystemTime) -> Option<IndexFile> {
        if bytes.get(..4)? != b"DIRC" {
            return None;
        }
        let version = be32(&bytes, 4)?;
        if !(2..=3).contains(&version) {
            return None;
        }
        let count = be32(&bytes, 8)? as usize;
        let end = bytes.len().checked_sub(ID_LEN)?;
        // The checksum git and libgit2 check too (zeros: written with `index.skipHash`).
        let (content, sum) = bytes.split_at(end);
        if sum.iter().any(|&b| b != 0) && Sha1::digest(content)[..] != *sum {
            return None;
        }
        let mut entries = Vec::with_capacity(count.min(end / 62));
        let mut at = 12;
        for _ in 0..count {
            entries.push(at);
            at = next_entry(&bytes, at, end)?;
        }
        let tree = extensions(&bytes, at, end)?;
        Some(IndexFile {
            bytes,
            entries,
            entries_end: at,
            version,
            tree,
            mtime,
        })
    }

    /// Returns the entry at position `i`.
    fn entry(&self, i: usize) -> Option<Entry<'_>> {
        let head = self.head(i)?;
        Some(Entry {
            path: head.path,
            stage: head.stage,
            mode: head.mode,
            id: self.id_at(head.at)?,
            special: head.special,
            skip_worktree: head.skip_worktree,
        })
    }

    /// Returns the entry at position `i` without its blob id (making an `Oid` goes through
    /// libgit2: a stat comparison of 100,000 entries needs only the racy ones').
    fn head(&self, i: usize) -> Option<Head<'_>> {
        let at = *self.entries.get(i)?;
        let b = &self.bytes;
        let mut stat = [0u32; 7];
        for (slot, field) in stat.iter_mut().zip([0, 1, 2, 3, 4, 5, 9]) {
            *slot = be32(b, at + 4 * field)?;
        }
        let flags = be16(b, at + STAT_LEN + ID_LEN)?;
        let ext = if flags & EXTENDED != 0 {
            be16(b, at + STAT_LEN + ID_LEN + 2)?
        } else {
            0
        };
        let (path_at, len) = path_of(b, at, self.entries_end)?;
        Some(Head {
            at,
            path: &b[path_at..path_at + len],
            stage: (flags >> 12) & 3,
            mode: be32(b, at + 24)?,
            stat,
            special: flags & ASSUME_VALID != 0 || ext & SKIP_OR_INTENT != 0,
            skip_worktree: ext & SKIP_WORKTREE != 0,
        })
    }

    /// Returns every entry without its blob id, in the index's order.
    #[cfg(test)]
    pub(super) fn heads(&self) -> impl Iterator<Item = Head<'_>> {
        (0..self.entries.len()).filter_map(|i| self.head(i))
    }

    /// Returns the blob id of the entry at byte `at`.
    fn id_at(&self, at: usize) -> Option<Oid> {
        Oid::from_bytes(self.bytes.get(at + STAT_LEN..at + STAT_LEN + ID_LEN)?).ok()
    }

    /// Returns the last 32 bytes of the file, which end with its checksum (as
    /// `Repo::index_checksum` reads them).
    pub fn checksum(&self) -> Option<[u8; 32]> {
        let tail = self.bytes.get(self.bytes.len().checked_sub(32)?..)?;
        tail.try_into().ok()
    }

    /// Returns every entry, in the index's order.
    pub fn entries(&self) -> impl Iterator<Item = Entry<'_>> {
        (0..self.entries.len()).filter_map(|i| self.entry(i))
    }

    /// Returns the path and blob id of each entry under `prefix` flagged skip-worktree; only
    /// an index of version 3 or later can flag one, so a version 2 index is not gone through.
    pub fn skipped_under(&self, prefix: &str) -> Vec<(String, Oid)> {
        if self.version < 3 {
            return Vec::new();
        }
        self.entries()
            .filter(|e| e.skip_worktree && e.path.starts_with(prefix.as_bytes()))
            .filter_map(|e| Some((String::from_utf8(e.path.to_vec()).ok()?, e.id)))
            .collect()
    }

    /// Returns whether any entry is unmerged (a stage other than 0): only each entry's flags
    /// are read (decoding every entry was 1 % of a tick at 100,000 tasks, twice).
    pub fn has_conflicts(&self) -> bool {
        let stage = |&at: &usize| be16(&self.bytes, at + STAT_LEN + ID_LEN).map(|f| (f >> 12) & 3);
        self.entries.iter().any(|at| stage(at) != Some(0))
    }

    /// Returns the stage-0 entry at `path` (repo-relative), found by a binary search.
    pub fn get(&self, path: &str) -> Option<Entry<'_>> {
        let key = path.as_bytes();
        let i = self
            .entries
            .binary_search_by(|&at| {
                let e = self.entry_path(at).unwrap_or_default();
                e.cmp(key)
            })
            .ok()?;
        // Entries of one path sort by stage; any of them may have been found.
        let first = (0..=i)
            .rev()
            .take_while(|&j| self.entry(j).is_some_and(|e| e.path == key))
            .last()?;
        self.entry(first).filter(|e| e.stage == 0)
    }

    fn entry_path(&self, at: usize) -> Option<&[u8]> {
        let (path_at, len) = path_of(&self.bytes, at, self.entries_end)?;
        self.bytes.get(path_at..path_at + len)
    }

    /// Returns the tree id the cache tree holds for the folder `dir` (repo-relative, no
    /// trailing slash), when it is still valid: the index's entries under it are exactly
    /// that tree's.
    pub fn tree_id(&self, dir: &str) -> Option<Oid> {
        let mut node = self.tree.as_ref()?;
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            node = node.children.iter().find(|c| c.name == part.as_bytes())?;
        }
        node.id
    }
}

impl Repo {
    /// Returns whether the index and HEAD agree under the folder `dir` and the index
    /// describes `files` files there, each as `stat_of` (by path relative to `dir`) gives its
    /// stat data now: every entry under `dir` is a regular file's whose stat data is what
    /// git recorded when it hashed it, and one changed in the second the index was written
    /// or later (racy) still hashes to the entry's blob. False when anything differs or
    /// cannot be judged (see the module's documentation).
    pub fn clean_by_stat(
        &self,
        dir: &str,
        files: usize,
        stat_of: &mut dyn FnMut(&[u8]) -> Option<EntryStat>,
    ) -> bool {
        self.judge_by_stat(dir, files, stat_of).unwrap_or(false)
    }

    fn judge_by_stat(
        &self,
        dir: &str,
        files: usize,
        stat_of: &mut dyn FnMut(&[u8]) -> Option<EntryStat>,
    ) -> Option<bool> {
        let index = self.index_file()?;
        if index.tree_id(dir)? != self.head_tree_id(dir)? {
            return None;
        }
        let racy_from = index.mtime.duration_since(UNIX_EPOCH).ok()?.as_secs();
        let prefix = format!("{dir}/");
        let mut matched = 0;
        for i in 0..index.entries.len() {
            let entry = index.head(i)?;
            let Some(rel) = entry.path.strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            if entry.special || entry.stage != 0 || !REGULAR.contains(&entry.mode) {
                return None;
            }
            // A size of 0 on a non-empty blob is git's smudge: such an entry is never clean
            // by its stat data.
            if entry.stat[6] == 0 && index.id_at(entry.at) != super::blob_id(b"") {
                return None;
            }
            let stat = stat_of(rel)?;
            if stat != entry.stat {
                return None;
            }
            if u64::from(stat[2]) >= racy_from {
                let path = std::str::from_utf8(entry.path).ok()?;
                let bytes = std::fs::read(self.workdir.join(path)).ok()?;
                if super::blob_id(&bytes) != index.id_at(entry.at) {
                    return None;
                }
            }
            matched += 1;
        }
        Some(matched == files)
    }
}

/// Returns where the entry after the one at `at` starts (entries are padded with 1 to 8 NUL
/// bytes to a multiple of 8); None when it does not fit before `end`.
fn next_entry(bytes: &[u8], at: usize, end: usize) -> Option<usize> {
    let (path_at, len) = path_of(bytes, at, end)?;
    let fixed = path_at - at;
    let next = at + (fixed + len + 8) / 8 * 8;
    (next <= end).then_some(next)
}

/// Returns where the path of the entry at `at` starts and its length, as git reads it: the
/// length the entry's flags give, or up to the first NUL when they give [`NAME_MASK`] (a
/// path of 4,095 bytes or more); None when no NUL ends the path there before `end`, or the
/// path holds one.
fn path_of(bytes: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
    let flags = be16(bytes, at + STAT_LEN + ID_LEN)?;
    let path_at = at + STAT_LEN + ID_LEN + if flags & EXTENDED != 0 { 4 } else { 2 };
    let rest = bytes.get(path_at..end)?;
    let named = usize::from(flags & NAME_MASK);
    let len = if named < usize::from(NAME_MASK) {
        named
    } else {
        rest.iter().position(|&c| c == 0)?
    };
    (rest.get(len) == Some(&0) && !rest[..len].contains(&0)).then_some((path_at, len))
}

/// Reads the extensions from `at` to `end` and returns the cache tree, if any. None when an
/// extension does not fit, or one this reader cannot honour is there: a split index, sparse
/// folder entries, or any other extension git marks as required (a lowercase signature).
/// Optional ones (resolve-undo, the untracked cache, the fsmonitor state, offset tables) are
/// passed over.
fn extensions(bytes: &[u8], mut at: usize, end: usize) -> Option<Option<TreeNode>> {
    let mut tree = None;
    while at < end {
        let sig = bytes.get(at..at + 4)?;
        let len = be32(bytes, at + 4)? as usize;
        let next = (at + 8).checked_add(len).filter(|&n| n <= end)?;
        let data = bytes.get(at + 8..next)?;
        match sig {
            b"TREE" => tree = Some(parse_tree(data, &mut 0)?),
            [b'A'..=b'Z', ..] => {}
            _ => return None,
        }
        at = next;
    }
    Some(tree)
}

/// Parses one node of the cache tree and its children from `pos` (git's format: name, NUL,
/// entry count or -1, space, child count, newline, the tree id when the count is not -1).
fn parse_tree(data: &[u8], pos: &mut usize) -> Option<TreeNode> {
    let rest = data.get(*pos..)?;
    let nul = rest.iter().position(|&c| c == 0)?;
    let name = rest[..nul].to_vec();
    let line_end = nul + rest.get(nul..)?.iter().position(|&c| c == b'\n')?;
    let line = std::str::from_utf8(rest.get(nul + 1..line_end)?).ok()?;
    let (count, children) = line.split_once(' ')?;
    let (count, children): (i64, usize) = (count.parse().ok()?, children.parse().ok()?);
    *pos += line_end + 1;
    let id = if count >= 0 {
        let id = Oid::from_bytes(data.get(*pos..*pos + ID_LEN)?).ok()?;
        *pos += ID_LEN;
        Some(id)
    } else {
        None
    };
    let mut node = TreeNode {
        name,
        id,
        children: Vec::with_capacity(children.min(data.len())),
    };
    for _ in 0..children {
        node.children.push(parse_tree(data, pos)?);
    }
    Some(node)
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}
