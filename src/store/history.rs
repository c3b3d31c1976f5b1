//! The history-folder record, `.git/coord/history-folders`: for each folder of finished
//! tasks (`done/`, `failed/`, `cancelled/` and each `archive/<month>/`) a full walk found
//! settled, the folder's own stat key, the tree id HEAD had for it before the walk looked, and
//! its files' names with their stat keys. A later walk that finds the folder with the same
//! stat key (no file added, removed or renamed in it: each changes the folder's mtime and
//! ctime) and HEAD with the same tree id there takes the files' keys from the record instead
//! of an `lstat` each, so finished tasks (history no transition changes in place) cost a walk
//! nothing per file.
//!
//! The rule this makes (README, "Finished tasks are history"): an in-place edit of a file in
//! such a folder is not seen while nobody commits or stages it: its stat key is taken as
//! recorded, so the stat cache (or, when it lacks the file, HEAD) gives the committed text,
//! and the clean and quiet marks hold. Once committed, HEAD's tree id differs and the folder
//! is walked file by file again. A staged edit gives the index stat data other than the
//! recorded key, so the recording's check against the index fails and libgit2's scan records
//! it, as any change; so does any scan that runs for another reason.
//! A folder is recorded only when its stat key and every file's key are settled at the
//! walk's start (the racy-timestamp rule of the stat cache), and only when it holds regular
//! files alone. A missing, unreadable or corrupt record only means a full walk. Does file I/O
//! under `.git/` only.

use super::cache::{Reader, StatKey};
use super::clean::Listing;
use crate::git::Oid;
use crate::hash::checksum;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

/// The record file, relative to the git directory.
pub const PATH: &str = "coord/history-folders";
/// Where the record of archive months alone was kept (before `done/`, `failed/` and
/// `cancelled/` were recorded too), relative to the git directory: removed when the record
/// is written, so no stale copy stays behind.
const OLD_PATH: &str = "coord/archive-months";
/// The first bytes of the record file.
const MAGIC: &[u8] = b"coord history-folders 2\n";
/// The folders of finished tasks directly under `work/` that are recorded.
const FINISHED: [&str; 3] = ["done", "failed", "cancelled"];

/// One history folder as a walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    /// The folder's own stat key.
    pub folder: StatKey,
    /// The tree id HEAD had for the folder before the walk looked.
    pub tree: Oid,
    /// Its files' names in walk order, each with its stat key.
    pub files: Vec<(String, StatKey)>,
}

/// A history folder as the record holds it: its files stay in the record's bytes until a
/// walk takes them (a `String` per archived file was 4 % of a tick at 100,000 tasks).
#[derive(Debug, Clone)]
struct Kept {
    folder: StatKey,
    tree: Oid,
    /// How many files it holds.
    count: usize,
    /// Where its files' names and keys lie in the record's bytes.
    files: Range<usize>,
    /// Set when a load found every file of it a task as its folder says (see
    /// [`History::judge`]): a walk may then take it as one block. Where the checksums the
    /// walk's listing gives its files lie in the record's bytes ([`RecordFiles::sums`]).
    sums: Option<Range<usize>>,
}

/// A history folder to record again: as the record held it, or as a walk found it.
#[derive(Debug)]
enum Found {
    Kept(Kept),
    Walked(Folder),
}

/// What a walk may take from the record, and what it found to record.
#[derive(Debug, Default)]
pub struct History {
    /// HEAD's tree id of each history folder (work-relative: `done`, `archive/2026-07`), read
    /// before the walk looks at any file.
    trees: HashMap<String, Oid>,
    /// The record's bytes (checked), which `kept` points into; shared with the blocks a walk
    /// takes ([`RecordFiles`]).
    record: Arc<Vec<u8>>,
    /// The record as read.
    kept: HashMap<String, Kept>,
    /// The folders this walk took from the record or may record, by work-relative path.
    found: BTreeMap<String, Found>,
    /// Whether `found` differs from `kept`.
    changed: bool,
    /// Whether the walk may take a judged folder as one block ([`History::with_blocks`]).
    blocks: bool,
}

impl History {
    /// Starts a walk's history folders from the record at `path` and HEAD's tree ids of the
    /// history folders (work-relative: `done`, `archive/2026-07`; see [`History::trees`]).
    pub fn read(path: &Path, trees: HashMap<String, Oid>) -> History {
        let record = crate::fsx::read_private(path).unwrap_or_default();
        let Some(kept) = decode(&record) else {
            return History {
                trees,
                ..History::default()
            };
        };
        History {
            trees,
            record: Arc::new(record),
            kept,
            ..History::default()
        }
    }

    /// Returns this record letting the walk take each judged folder as one block (a tick's
    /// walk: its board then holds no file of such a folder, see `board::Block`).
    pub fn with_blocks(mut self) -> History {
        self.blocks = true;
        self
    }

    /// Returns whether the walk may take judged folders as blocks.
    pub fn blocks(&self) -> bool {
        self.blocks
    }

    /// Returns, work-relative, the history folders among HEAD's subtrees of `work/` (`top`,
    /// by name) and of `work/archive/` (`archive`, by month), with their tree ids.
    pub fn trees(top: HashMap<String, Oid>, archive: HashMap<String, Oid>) -> HashMap<String, Oid> {
        let finished = top
            .into_iter()
            .filter(|(name, _)| FINISHED.contains(&name.as_str()));
        let months = archive
            .into_iter()
            .filter(|(name, _)| crate::board::is_month(name))
            .map(|(name, id)| (format!("archive/{name}"), id));
        finished.chain(months).collect()
    }

    /// Returns whether the folder `rel` (work-relative) at `depth` below `work/` is a history
    /// folder (`done`, `failed`, `cancelled` or `archive/YYYY-MM`), the only ones recorded.
    pub fn is_history(rel: &str, depth: usize) -> bool {
        match depth {
            1 => FINISHED.contains(&rel),
            2 => rel
                .strip_prefix("archive/")
                .is_some_and(crate::board::is_month),
            _ => false,
        }
    }

    /// Returns the recorded files of the history folder `rel` when its stat key is `folder`
    /// and HEAD still has the recorded tree id for it; the walk takes them as they are.
    pub fn take(&mut self, rel: &str, folder: &StatKey) -> Option<Taken> {
        let tree = self.trees.get(rel)?;
        let kept = self.kept.remove(rel)?;
        if kept.folder != *folder || kept.tree != *tree {
            self.changed = true;
            return None;
        }
        self.record.get(kept.files.clone())?;
        let taken = Taken {
            files: RecordFiles {
                record: Arc::clone(&self.record),
                range: kept.files.clone(),
                count: kept.count,
                sums: kept.sums.clone(),
            },
            judged: kept.sums.is_some(),
            folder: kept.folder,
            tree: kept.tree,
        };
        self.found.insert(rel.to_string(), Found::Kept(kept));
        Some(taken)
    }

    /// Notes the history folder `rel` as a walk found it file by file: `files` when it held
    /// regular files alone, each with a key; recorded when that and the folder's key are
    /// settled at `start` and HEAD has a tree for it. Returns the folder's key and tree
    /// when it is recorded.
    pub fn walked(
        &mut self,
        rel: &str,
        folder: Option<StatKey>,
        files: Option<Vec<(String, StatKey)>>,
        start: SystemTime,
    ) -> Option<(StatKey, Oid)> {
        let kept = self.kept.remove(rel);
        let settled = |k: &StatKey| k.settled(start);
        let walked = match (folder, files, self.trees.get(rel)) {
            (Some(folder), Some(files), Some(tree))
                if settled(&folder) && files.iter().all(|(_, k)| settled(k)) =>
            {
                Some(Folder {
                    folder,
                    tree: *tree,
                    files,
                })
            }
            _ => None,
        };
        // A folder walked file by file is one the record did not hold as it is (else the
        // walk took it): what the record held of it, if anything, changes.
        self.changed |= kept.is_some() || walked.is_some();
        let recorded = walked.as_ref().map(|w| (w.folder, w.tree));
        if let Some(walked) = walked {
            self.found.insert(rel.to_string(), Found::Walked(walked));
        }
        recorded
    }

    /// Leaves out of the record the folder `rel` (work-relative) when this walk walked it file
    /// by file; a folder taken from the record stays as it was.
    pub fn forget_walked(&mut self, rel: &str) {
        if matches!(self.found.get(rel), Some(Found::Walked(_))) {
            self.found.remove(rel);
            self.changed = true;
        }
    }

    /// Writes the record again at `path` when this walk found it changed (a history folder
    /// walked anew, or one no longer there), removing the record of archive months alone
    /// that an older coord kept beside it. Failures are ignored: the record is only an
    /// optimisation, and one left stale is checked before any use.
    pub fn save(self, path: &Path) {
        if !self.changed && self.kept.is_empty() {
            return;
        }
        if let Some(git_dir) = path.parent().and_then(Path::parent) {
            let _ = std::fs::remove_file(git_dir.join(OLD_PATH));
        }
        if self.found.is_empty() {
            let _ = std::fs::remove_file(path);
            return;
        }
        let folders = self.found.iter().map(|(rel, found)| match found {
            Found::Kept(k) => kept_folder(&self.record, rel, k, None),
            Found::Walked(m) => {
                let (head, count) = ((m.folder, m.tree), m.files.len());
                let files = Cow::Owned(encode_files(&m.files));
                (rel.as_str(), head, count, files, None)
            }
        });
        let _ = crate::fsx::write_private(path, &encode(folders), false);
    }

    /// Marks as judged, in the record at `path`, each history folder of `judged` the record
    /// still holds with the same stat key and tree id: a load found every one of its files a
    /// readable task file whose recorded state is its folder's, not settling, standing in
    /// for nothing and of an id no other file of the folder has. A later walk takes such a
    /// folder as one block ([`RecordFiles`]), no file of it on the board. Failures are
    /// ignored (the folder stays unjudged, walked per file).
    pub fn judge(path: &Path, judged: &[Judged]) {
        if judged.is_empty() {
            return;
        }
        let Ok(record) = crate::fsx::read_private(path) else {
            return;
        };
        let Some(kept) = decode(&record) else {
            return;
        };
        let newly: HashMap<&str, Vec<u8>> = judged
            .iter()
            .filter_map(|j| {
                let k = kept.get(&j.rel)?;
                let same = k.folder == j.folder && k.tree == j.tree && k.sums.is_none();
                Some((
                    j.rel.as_str(),
                    listing_sums(&record, &j.rel, k).filter(|_| same)?,
                ))
            })
            .collect();
        if newly.is_empty() {
            return;
        }
        let mut folders: Vec<(&String, &Kept)> = kept.iter().collect();
        folders.sort_by(|a, b| a.0.cmp(b.0));
        let folders = folders.into_iter().map(|(rel, k)| {
            let sums = newly.get(rel.as_str()).map(|s| Cow::Borrowed(&s[..]));
            kept_folder(&record, rel, k, sums)
        });
        let _ = crate::fsx::write_private(path, &encode(folders), false);
    }
}

/// Returns a folder the record kept as [`encode`] takes it: judged with `sums` when given,
/// else as it was.
fn kept_folder<'r>(
    record: &'r [u8],
    rel: &'r str,
    k: &Kept,
    sums: Option<Cow<'r, [u8]>>,
) -> Encoded<'r> {
    let files = record.get(k.files.clone()).unwrap_or_default();
    let kept_sums = k
        .sums
        .clone()
        .and_then(|r| record.get(r))
        .map(Cow::Borrowed);
    let head = (k.folder, k.tree);
    (rel, head, k.count, Cow::Borrowed(files), sums.or(kept_sums))
}

/// Returns the checksums the walk's listing gives each file of the folder `rel` the record
/// `record` holds as `k` ([`Listing::sums_of`]), in its files' order: what a walk that takes
/// the folder whole adds to its listing without a path made or checksummed per file.
fn listing_sums(record: &[u8], rel: &str, k: &Kept) -> Option<Vec<u8>> {
    let files = Files {
        reader: Reader(record.get(k.files.clone())?),
        left: k.count,
    };
    let mut sums = Vec::with_capacity(k.count * 16);
    for (name, key) in files {
        let (path, entry) = Listing::sums_of(&format!("{rel}/{name}"), &key);
        sums.extend_from_slice(&path.to_le_bytes());
        sums.extend_from_slice(&entry.to_le_bytes());
    }
    Some(sums)
}

/// A history folder a walk took from the record.
#[derive(Debug)]
pub struct Taken {
    /// Its files.
    pub files: RecordFiles,
    /// Whether a load judged it (see [`History::judge`]).
    pub judged: bool,
    /// Its stat key.
    pub folder: StatKey,
    /// HEAD's tree id for it.
    pub tree: Oid,
}

/// A history folder a load may mark as judged ([`History::judge`]): as the walk found it.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The folder, work-relative.
    pub rel: String,
    /// Its stat key.
    pub folder: StatKey,
    /// HEAD's tree id for it.
    pub tree: Oid,
}

/// The files of a history folder as the record holds them, shared with the record's bytes
/// (no copy, no allocation per file).
#[derive(Debug, Clone)]
pub struct RecordFiles {
    record: Arc<Vec<u8>>,
    range: Range<usize>,
    count: usize,
    sums: Option<Range<usize>>,
}

impl RecordFiles {
    /// Returns the files, in walk order: each name with its stat key.
    pub fn iter(&self) -> Files<'_> {
        Files {
            reader: Reader(self.record.get(self.range.clone()).unwrap_or_default()),
            left: self.count,
        }
    }

    /// Returns, for a judged folder, the checksums of each file's path and listing entry
    /// ([`Listing::sums_of`]), in the order of [`RecordFiles::iter`].
    pub fn sums(&self) -> Option<impl Iterator<Item = (u64, u64)> + '_> {
        let bytes = self.record.get(self.sums.clone()?)?;
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
        Some(
            bytes
                .chunks_exact(16)
                .map(move |c| (word(&c[..8]), word(&c[8..]))),
        )
    }

    /// Returns how many files the folder holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Returns whether the folder holds no file.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// The files of a history folder as the record holds them, in walk order: each name with its
/// stat key.
pub struct Files<'r> {
    reader: Reader<'r>,
    left: usize,
}

impl<'r> Iterator for Files<'r> {
    type Item = (&'r str, StatKey);

    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        let name = self.reader.str()?;
        Some((name, StatKey::read_from(&mut self.reader)?))
    }

    /// Exact: the record's files were all checked when it was read.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Files<'_> {}

/// Appends a length-prefixed string.
fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Returns the files of a history folder as the record holds them: each name and key.
fn encode_files(files: &[(String, StatKey)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, key) in files {
        put_str(&mut out, name);
        key.write_to(&mut out);
    }
    out
}

/// One history folder to encode: its path, folder key and tree id, file count, files as
/// [`encode_files`] gives them, and for a judged folder its files' listing checksums.
type Encoded<'m> = (
    &'m str,
    (StatKey, Oid),
    usize,
    Cow<'m, [u8]>,
    Option<Cow<'m, [u8]>>,
);

/// Encodes the record: the magic, the number of folders, each folder (path, folder key, tree
/// id, judged or not, number of files, each file's name and key, for a judged one each
/// file's listing checksums, 16 bytes), then a checksum of all before it.
fn encode<'m>(folders: impl ExactSizeIterator<Item = Encoded<'m>>) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&(folders.len() as u64).to_le_bytes());
    for (rel, (folder, tree), count, files, sums) in folders {
        put_str(&mut out, rel);
        folder.write_to(&mut out);
        out.extend_from_slice(tree.as_bytes());
        out.push(u8::from(sums.is_some()));
        out.extend_from_slice(&(count as u64).to_le_bytes());
        out.extend_from_slice(&files);
        out.extend_from_slice(&sums.unwrap_or_default());
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Decodes what [`encode`] wrote, each folder's files checked but left in `bytes`; None when
/// anything does not read or the checksum differs.
fn decode(bytes: &[u8]) -> Option<HashMap<String, Kept>> {
    let (body, sum) = bytes.split_last_chunk::<8>()?;
    if checksum(body) != u64::from_le_bytes(*sum) {
        return None;
    }
    let mut r = Reader(body.strip_prefix(MAGIC)?);
    let count = r.u64()?;
    let mut months = HashMap::new();
    for _ in 0..count {
        let rel = r.str()?.to_string();
        let folder = StatKey::read_from(&mut r)?;
        let tree = Oid::from_bytes(&r.take::<20>()?).ok()?;
        let judged = match r.take::<1>()? {
            [0] => false,
            [1] => true,
            _ => return None,
        };
        let n = usize::try_from(r.u64()?).ok()?;
        let from = bytes.len() - 8 - r.0.len();
        let mut files = Files { reader: r, left: n };
        if files.by_ref().count() != n {
            return None;
        }
        r = files.reader;
        let files = from..bytes.len() - 8 - r.0.len();
        let sums = if judged {
            let len = n.checked_mul(16)?;
            let at = files.end;
            r.0 = r.0.get(len..)?;
            Some(at..at + len)
        } else {
            None
        };
        months.insert(
            rel,
            Kept {
                folder,
                tree,
                count: n,
                files,
                sums,
            },
        );
    }
    r.0.is_empty().then_some(months)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> StatKey {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'x'; n as usize]).expect("write");
        StatKey::of(&rustix::fs::lstat(&path).expect("lstat"))
    }

    fn month(files: &[&str]) -> Folder {
        Folder {
            folder: key(1),
            tree: Oid::from_bytes(&[7; 20]).expect("oid"),
            files: files.iter().map(|n| (n.to_string(), key(2))).collect(),
        }
    }

    /// Encodes `months` as [`History::save`] does.
    fn encoded(months: &BTreeMap<String, Folder>) -> Vec<u8> {
        encode(months.iter().map(|(rel, m)| {
            let files = Cow::Owned(encode_files(&m.files));
            (rel.as_str(), (m.folder, m.tree), m.files.len(), files, None)
        }))
    }

    /// Writes a record holding one month, `archive/2026-07` with a.yaml and b.yaml, in `dir`;
    /// returns its path and the month.
    fn recorded_month(dir: &std::path::Path) -> (std::path::PathBuf, Folder) {
        let path = dir.join("record");
        let m = month(&["a.yaml", "b.yaml"]);
        let record = BTreeMap::from([("archive/2026-07".to_string(), m.clone())]);
        std::fs::write(&path, encoded(&record)).expect("write");
        (path, m)
    }

    /// Returns the month `rel` of a record as `decode` reads it from `bytes`.
    fn decoded(bytes: &[u8], rel: &str) -> Option<Folder> {
        let kept = decode(bytes)?.remove(rel)?;
        let files = Files {
            reader: Reader(&bytes[kept.files.clone()]),
            left: kept.count,
        };
        let files = files.map(|(n, k)| (n.to_string(), k)).collect();
        Some(Folder {
            folder: kept.folder,
            tree: kept.tree,
            files,
        })
    }

    #[test]
    fn a_record_reads_back_and_any_changed_byte_voids_it() {
        let mut months = BTreeMap::new();
        months.insert("archive/2026-07".to_string(), month(&["a.yaml", "b.yaml"]));
        months.insert("archive/2026-08".to_string(), month(&[]));
        let bytes = encoded(&months);
        assert_eq!(decode(&bytes).expect("reads").len(), 2);
        for rel in ["archive/2026-07", "archive/2026-08"] {
            assert_eq!(decoded(&bytes, rel).as_ref(), Some(&months[rel]), "{rel}");
        }
        for at in [0, MAGIC.len() + 3, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert!(decode(&bad).is_none(), "byte {at} changed");
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_none(), "cut short");
    }

    #[test]
    fn a_month_is_taken_only_with_its_folder_key_and_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, m) = recorded_month(dir.path());
        let trees = |id: Oid| HashMap::from([("archive/2026-07".to_string(), id)]);
        let mut same = History::read(&path, trees(m.tree));
        let taken: Option<Vec<(String, StatKey)>> = same
            .take("archive/2026-07", &m.folder)
            .map(|t| t.files.iter().map(|(n, k)| (n.to_string(), k)).collect());
        assert_eq!(taken, Some(m.files.clone()));
        let mut moved = History::read(&path, trees(m.tree));
        assert!(
            moved.take("archive/2026-07", &key(9)).is_none(),
            "folder changed"
        );
        let other = Oid::from_bytes(&[8; 20]).expect("oid");
        let mut staged = History::read(&path, trees(other));
        assert!(
            staged.take("archive/2026-07", &m.folder).is_none(),
            "tree changed"
        );
        let mut unknown = History::read(&path, HashMap::new());
        assert!(
            unknown.take("archive/2026-07", &m.folder).is_none(),
            "no tree"
        );
    }

    /// A record saved again keeps the months taken from it as they were, next to a month
    /// walked anew.
    #[test]
    fn a_record_saved_again_keeps_what_was_taken_from_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, m) = recorded_month(dir.path());
        let trees = HashMap::from([
            ("archive/2026-07".to_string(), m.tree),
            ("done".to_string(), m.tree),
        ]);
        let mut months = History::read(&path, trees);
        assert_eq!(
            months
                .take("archive/2026-07", &m.folder)
                .map(|t| t.files.len()),
            Some(2)
        );
        let walked = month(&["c.yaml"]);
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        months.walked(
            "done",
            Some(walked.folder),
            Some(walked.files.clone()),
            later,
        );
        months.save(&path);
        let bytes = std::fs::read(&path).expect("saved");
        assert_eq!(decoded(&bytes, "archive/2026-07"), Some(m));
        assert_eq!(decoded(&bytes, "done"), Some(walked));
    }

    /// Only the folders of finished tasks are history: `done/`, `failed/`, `cancelled/` and
    /// the month folders of `archive/`, at their own depth.
    #[test]
    fn only_the_folders_of_finished_tasks_are_history() {
        for (rel, depth) in [
            ("done", 1),
            ("failed", 1),
            ("cancelled", 1),
            ("archive/2026-07", 2),
        ] {
            assert!(History::is_history(rel, depth), "{rel}");
        }
        for (rel, depth) in [
            ("ready", 1),
            ("inbox", 1),
            ("review", 1),
            ("archive", 1),
            ("assigned/done", 2),
            ("archive/notes", 2),
            ("done", 2),
        ] {
            assert!(!History::is_history(rel, depth), "{rel} at {depth}");
        }
        let id = Oid::from_bytes(&[7; 20]).expect("oid");
        let names = |n: &[&str]| n.iter().map(|n| (n.to_string(), id)).collect();
        let trees = History::trees(
            names(&["done", "ready", "archive", "failed"]),
            names(&["2026-07", "notes"]),
        );
        let mut rels: Vec<&str> = trees.keys().map(String::as_str).collect();
        rels.sort_unstable();
        assert_eq!(rels, ["archive/2026-07", "done", "failed"]);
    }
}
