//! An index written again from the one read, with a few entries added, replaced or removed:
//! the other entries are copied as bytes (the runs between two changes at once), the cache
//! tree keeps every folder no change is under, and the file ends with the SHA-1 of its
//! content, as git writes it, hashed on from the state the read kept where the new bytes
//! part from the old (at 100,000 tasks the archive's entries, ~80 % of the file, sort before
//! what a tick changes). libgit2 reads
//! the whole index into a map (checking its SHA-1 with collision detection) and encodes every
//! entry again to change a few: ~15 % of a 200-task tick at 100,000 tasks. No I/O.

use super::{Entry, IndexFile, TreeNode, ID_LEN};
use git2::IndexEntry;

/// One change: the path, and the entry it gets (None: it leaves the index).
pub type IndexChange<'e> = (&'e [u8], Option<&'e IndexEntry>);

impl IndexFile {
    /// Returns this index with `changes` (sorted by path, distinct) made, as it is to be
    /// written (its mtime is the epoch until [`IndexFile::written_at`] sets the file's); None
    /// when it has unmerged entries (the caller refuses those) or an entry does not read.
    /// A copied entry that was racy in this index (its file's mtime at or after the index's
    /// second) and whose file `differs` from its blob now is written with its size smudged
    /// to 0, as git and libgit2 write it: the new index is later, so without that a reader
    /// would trust the entry's stat data for a file changed in that second.
    pub fn rewritten(
        &self,
        changes: &[IndexChange<'_>],
        differs: &dyn Fn(&Entry<'_>) -> bool,
    ) -> Option<IndexFile> {
        if self.has_conflicts() {
            return None;
        }
        let mut out = Vec::with_capacity(self.bytes.len() + changes.len() * 128);
        out.extend_from_slice(b"DIRC");
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        let entries = self.write_entries(&mut out, changes, differs)?;
        let count = u32::try_from(entries.len()).ok()?;
        out[8..12].copy_from_slice(&count.to_be_bytes());
        let entries_end = out.len();
        let tree = self.tree.clone().map(|mut tree| {
            for (path, _) in changes {
                invalidate(&mut tree, path);
            }
            tree
        });
        if let Some(tree) = &tree {
            let mut data = Vec::new();
            encode_tree(&mut data, tree);
            out.extend_from_slice(b"TREE");
            out.extend_from_slice(&u32::try_from(data.len()).ok()?.to_be_bytes());
            out.extend_from_slice(&data);
        }
        let mut kept = Vec::with_capacity(self.kept.len());
        for range in &self.kept {
            let at = out.len();
            out.extend_from_slice(self.bytes.get(range.clone())?);
            kept.push(at..out.len());
        }
        // The bytes before the first change are this index's: their SHA-1 states are known.
        let content = &self.bytes[..self.bytes.len() - ID_LEN];
        let (sum, sums) = super::digest(&out, &self.sums, same_prefix(content, &out));
        out.extend_from_slice(&sum);
        Some(IndexFile {
            bytes: out,
            entries,
            entries_end,
            version: self.version,
            tree,
            kept,
            mtime: std::time::UNIX_EPOCH,
            sums,
        })
    }

    /// Sets the mtime of the file this index was written to.
    pub(crate) fn written_at(self, mtime: std::time::SystemTime) -> IndexFile {
        IndexFile { mtime, ..self }
    }

    /// Appends the entries of this index with `changes` made to `out`; returns where each
    /// starts in it. The entries between two changes are copied as one run of bytes.
    fn write_entries(
        &self,
        out: &mut Vec<u8>,
        changes: &[IndexChange<'_>],
        differs: &dyn Fn(&Entry<'_>) -> bool,
    ) -> Option<Vec<usize>> {
        let racy_from = self
            .mtime
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs();
        let mut starts = Vec::with_capacity(self.entries.len() + changes.len());
        let mut next = 0;
        for (path, entry) in changes {
            let at = self
                .entries
                .partition_point(|&at| self.entry_path(at).unwrap_or_default() < *path)
                .max(next);
            self.copy_run(out, &mut starts, next..at, racy_from, differs)?;
            let replaced = self.entries.get(at).and_then(|&e| self.entry_path(e)) == Some(*path);
            next = at + usize::from(replaced);
            encode(out, &mut starts, path, *entry);
        }
        let all = self.entries.len();
        self.copy_run(out, &mut starts, next..all, racy_from, differs)?;
        Some(starts)
    }

    /// Appends the entries at positions `run` as they are, but for a racy one whose file
    /// `differs` (see [`IndexFile::rewritten`]), and notes where each starts in `starts`.
    fn copy_run(
        &self,
        out: &mut Vec<u8>,
        starts: &mut Vec<usize>,
        run: std::ops::Range<usize>,
        racy_from: u64,
        differs: &dyn Fn(&Entry<'_>) -> bool,
    ) -> Option<()> {
        let Some(&first) = self.entries.get(run.start).filter(|_| !run.is_empty()) else {
            return Some(());
        };
        let end = self
            .entries
            .get(run.end)
            .copied()
            .unwrap_or(self.entries_end);
        let base = out.len();
        out.extend_from_slice(self.bytes.get(first..end)?);
        for i in run {
            let at = *self.entries.get(i)?;
            let copied_at = base + at - first;
            starts.push(copied_at);
            // Only a racy entry is decoded (its mtime's seconds are its third field).
            let racy = u64::from(super::be32(&self.bytes, at + MTIME_AT)?) >= racy_from;
            if racy && differs(&self.entry(i)?) {
                out[copied_at + SIZE_AT..copied_at + SIZE_AT + 4].fill(0);
            }
        }
        Some(())
    }
}

/// Returns how many leading bytes `a` and `b` share, rounded down to a [`super::CHUNK`]
/// (or the shorter's length): compared a chunk at a time.
fn same_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut at = 0;
    while at < n {
        let end = (at + super::CHUNK).min(n);
        if a[at..end] != b[at..end] {
            break;
        }
        at = end;
    }
    at
}

/// Where the seconds of an entry's mtime sit in it (after ctime's seconds and nanoseconds).
const MTIME_AT: usize = 8;
/// Where an entry's file size sits in it (after ctime, mtime, device, inode, mode, uid, gid).
const SIZE_AT: usize = 36;

/// Marks the folders of `path` in the cache tree as changed (git's invalidation: the root and
/// each folder down to the file's own; the others keep their tree ids).
fn invalidate(node: &mut TreeNode, path: &[u8]) {
    node.count = -1;
    node.id = None;
    let Some(slash) = path.iter().position(|&c| c == b'/') else {
        return;
    };
    let (folder, rest) = (&path[..slash], &path[slash + 1..]);
    if let Some(child) = node.children.iter_mut().find(|c| c.name == folder) {
        invalidate(child, rest);
    }
}

/// Appends `node` and its children in git's cache tree format.
fn encode_tree(out: &mut Vec<u8>, node: &TreeNode) {
    out.extend_from_slice(&node.name);
    out.push(0);
    let count = if node.id.is_some() { node.count } else { -1 };
    out.extend_from_slice(format!("{count} {}\n", node.children.len()).as_bytes());
    if let Some(id) = node.id.filter(|_| count >= 0) {
        out.extend_from_slice(id.as_bytes());
    }
    for child in &node.children {
        encode_tree(out, child);
    }
}

/// Appends the entry for `path` (version 2 layout, which version 3 shares for entries
/// without extended flags) and notes where it starts in `starts`; nothing for a removal.
fn encode(out: &mut Vec<u8>, starts: &mut Vec<usize>, path: &[u8], entry: Option<&IndexEntry>) {
    let Some(e) = entry else {
        return;
    };
    let start = out.len();
    starts.push(start);
    // The index stores 32-bit stat fields; truncating is what git does too.
    let fields = [
        e.ctime.seconds() as u32,
        e.ctime.nanoseconds(),
        e.mtime.seconds() as u32,
        e.mtime.nanoseconds(),
        e.dev,
        e.ino,
        e.mode,
        e.uid,
        e.gid,
        e.file_size,
    ];
    for field in fields {
        out.extend_from_slice(&field.to_be_bytes());
    }
    out.extend_from_slice(e.id.as_bytes());
    let len = path.len().min(0xFFF) as u16;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(path);
    // Padded with 1 to 8 NUL bytes to a multiple of 8.
    let fixed = 40 + ID_LEN + 2 + path.len();
    out.resize(start + (fixed + 8) / 8 * 8, 0);
}
