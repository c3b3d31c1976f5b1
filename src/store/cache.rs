//! The stat cache: what reading a file of `work/` gave, kept under `.git/coord/` and keyed by
//! the file's repo-relative path, size, mtime, ctime, inode and device, so a tick over
//! thousands of unchanged files neither reads nor checks them again. For a task file it keeps
//! the text, content hash and the summary planning reads of every task (the rest is parsed
//! from the text when used); for an agent profile, the text that passed the profile schema.
//!
//! An entry is trusted only while every part of its key still matches the file, and an entry
//! is written only for a file whose mtime and ctime are older than the snapshot by more than
//! the filesystem's timestamp granularity (git's "racy clean" rule): a later change to such a
//! file always gets a ctime the entry does not have, even when its size and mtime are kept.
//! Only files outside `inbox/` that passed the per-file checks are cached, under a salt of
//! coord's version and the repo's task schema, so a new schema re-checks everything.
//!
//! The cache is several files, each one length-prefixed encoding with a checksum of its
//! index: `stat-cache.bin` holds the entries outside the history folders (live tasks, agent
//! profiles), and `stat-cache.d/` one file per history folder (`done.bin`, `failed.bin`,
//! `cancelled.bin`, `archive-<month>.bin`) with the entries of the paths under it. The main
//! file is read by every load; a folder's file only when the load first asks for a path in
//! that folder, and each file is written again (to a temporary file renamed over it) only when
//! its own entries changed, so a tick that asks for no history file reads and writes the small
//! main file alone. Which file holds an entry is a function of its path alone, and each entry
//! stands on its own (its key proves it): a missing, unreadable, corrupt or torn file only
//! means a full read of the files it covered, and a run killed between two files' renames
//! leaves at most entries of paths whose files have changed since, which no key matches. A
//! folder's file is removed once its folder has no file left. Does file I/O under
//! `.git/coord/` only.

use super::settle::Written;
use crate::board::{AgentEntry, ProfileFile, TaskFile};
use crate::check::{Shown, Summary, Waiting};
use crate::hash::{checksum, Sum};
use crate::model::metrics::Spent;
use crate::model::{AgentName, Priority, State, TaskId};
use crate::text::{CacheFile, Stored, StoredRun, Text};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The main cache file, relative to the git directory (the history folders' files are in
/// the folder of the same name with `.d` for `.bin`).
pub const PATH: &str = "coord/stat-cache.bin";

/// The first bytes of the cache file: its format and version.
const MAGIC: &[u8] = b"coord stat-cache 9\n";

/// How old a stamp with whole seconds must be to be trusted (git's racy rule, FAT's 2 s).
const COARSE_SETTLE: Duration = Duration::from_secs(2);
/// How old a stamp with nanoseconds must be (the kernel's coarse clock lags by a tick or so).
const FINE_SETTLE: Duration = Duration::from_millis(50);

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatKey {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    dev: u64,
}

impl StatKey {
    /// Returns the key of a file's stat data (as `lstat` gives it).
    // The fields' integer types differ between platforms.
    #[allow(clippy::unnecessary_cast)]
    pub fn of(st: &rustix::fs::Stat) -> StatKey {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        StatKey {
            size: st.st_size as u64,
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
            ino: st.st_ino as u64,
            dev: st.st_dev as u64,
        }
    }

    /// Returns the stat data as an index entry keeps it: git truncates each field to 32 bits
    /// (ctime and mtime as seconds and nanoseconds, device, inode, size).
    pub fn entry_stat(&self) -> crate::git::EntryStat {
        let split = |ns: i128| {
            let (s, n) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
            (s as u32, n as u32)
        };
        let ((cs, cn), (ms, mn)) = (split(self.ctime_ns), split(self.mtime_ns));
        [
            cs,
            cn,
            ms,
            mn,
            self.dev as u32,
            self.ino as u32,
            self.size as u32,
        ]
    }

    /// Returns the size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Returns the ctime, in nanoseconds since the epoch.
    pub fn ctime_ns(&self) -> i128 {
        self.ctime_ns
    }

    /// Returns the mtime and size.
    pub fn written(&self) -> Written {
        Written {
            mtime_ns: self.mtime_ns,
            size: self.size,
        }
    }

    /// Appends the key's fields to `out`, little-endian.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        for n in [self.size, self.ino, self.dev] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for t in [self.mtime_ns, self.ctime_ns] {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }

    /// Reads the fields `write_to` appends.
    pub(super) fn read_from(r: &mut Reader<'_>) -> Option<StatKey> {
        let (size, ino, dev) = (r.u64()?, r.u64()?, r.u64()?);
        let (mtime_ns, ctime_ns) = (r.i128()?, r.i128()?);
        Some(StatKey {
            size,
            mtime_ns,
            ctime_ns,
            ino,
            dev,
        })
    }

    /// Returns whether both stamps are old enough, at the snapshot time `start`, that any later
    /// change of the file must get a different ctime.
    pub fn settled(&self, start: SystemTime) -> bool {
        let Ok(start) = start.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let newest = self.mtime_ns.max(self.ctime_ns);
        let whole_seconds =
            self.mtime_ns % 1_000_000_000 == 0 && self.ctime_ns % 1_000_000_000 == 0;
        let settle = if whole_seconds {
            COARSE_SETTLE
        } else {
            FINE_SETTLE
        };
        newest + settle.as_nanos() as i128 <= start.as_nanos() as i128
    }
}

/// What kind of file an entry is, with its text and what planning reads of it.
#[derive(Debug)]
pub enum Kind {
    /// A task file, with its summary and its text (left in the cache file, read when the
    /// task is parsed).
    Task(Summary, Text),
    /// An agent profile that passed the profile schema, with its text.
    Profile(String),
}

/// A file as the cache has it.
#[derive(Debug)]
pub struct Hit {
    /// Its content hash (`content_hash`).
    pub hash: u64,
    /// What it is.
    pub kind: Kind,
}

/// One entry as encoded: borrowed from the cache file's index when read, from the board when
/// written.
struct EntryRef<'a> {
    rel: &'a str,
    key: StatKey,
    hash: u64,
    text: Body<'a>,
    summary: Option<SummaryRef<'a>>,
}

/// An entry's text.
enum Body<'a> {
    /// Where it lies in the text part of the cache file read, and its length.
    At(u64, u64),
    /// A profile's text, or a task's, to write.
    Str(&'a str),
    /// A task's text as the board holds it, to write.
    Text(&'a Text),
}

impl Body<'_> {
    fn len(&self) -> usize {
        match self {
            Body::At(_, len) => *len as usize,
            Body::Str(s) => s.len(),
            Body::Text(t) => t.len(),
        }
    }
}

/// A task's summary as encoded.
struct SummaryRef<'a> {
    state: &'a str,
    assigned_to: Option<&'a str>,
    idempotency_key: Option<&'a str>,
    waiting: Option<Cow<'a, Waiting>>,
    shown: Cow<'a, Shown>,
    spent: Cow<'a, [Spent]>,
}

impl EntryRef<'_> {
    /// Returns the hit this entry, read from a cache file, gives: a task's text left in
    /// `file` (whose text part starts at `base`), a profile's read now.
    fn to_hit(&self, file: &Arc<CacheFile>, base: u64) -> Option<Hit> {
        let Body::At(at, len) = self.text else {
            return None;
        };
        let stored = Stored::new(
            Arc::clone(file),
            base.checked_add(at)?,
            u32::try_from(len).ok()?,
            self.hash,
        );
        let text = Text::Stored(stored);
        let kind = match &self.summary {
            None => Kind::Profile(text.read()?.into_owned()),
            Some(s) => Kind::Task(
                Summary {
                    state: State::parse(s.state),
                    assigned_to: s.assigned_to.map(AgentName::new).transpose().ok()?,
                    idempotency_key: s.idempotency_key.map(str::to_string),
                    waiting: s.waiting.clone().map(|w| Box::new(w.into_owned())),
                    shown: s.shown.clone().into_owned(),
                    spent: s.spent.clone().into_owned(),
                },
                text,
            ),
        };
        Some(Hit {
            hash: self.hash,
            kind,
        })
    }
}

/// Compares two work-relative paths in the order the walk visits them: folder by folder,
/// names in byte order (`a/b` before `a-b`, unlike plain string order).
pub fn walk_order(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    // At the first difference, a path whose folder name ends there comes first.
    match (a.get(same), b.get(same)) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) | (Some(b'/'), Some(_)) => Ordering::Less,
        (Some(_), None) | (Some(_), Some(b'/')) => Ordering::Greater,
        (Some(x), Some(y)) => x.cmp(y),
    }
}

/// Returns the history folder whose cache file keeps the entry of the work-relative `rel`:
/// `done`, `failed` or `cancelled` for a path under one of them, `archive/<month>` for a path
/// under a month; None for every other path (its entry is in the main file).
pub fn folder_of(rel: &str) -> Option<&str> {
    let (top, rest) = rel.split_once('/')?;
    match top {
        _ if FINISHED.contains(&top) => Some(top),
        "archive" => {
            let (month, _) = rest.split_once('/')?;
            (!month.is_empty()).then(|| &rel[..top.len() + 1 + month.len()])
        }
        _ => None,
    }
}

/// Returns the folder of the history folders' cache files, next to the main file at `path`.
fn folders_dir(path: &Path) -> PathBuf {
    path.with_extension("d")
}

/// Returns the name of the cache file of the history folder `folder` (`done.bin`,
/// `archive-2026-07.bin`).
fn file_name(folder: &str) -> String {
    format!("{}.bin", folder.replacen('/', "-", 1))
}

/// Returns the history folder whose cache file is named `name` ([`file_name`]); None for any
/// other name (a temporary file left by a killed run, or a file nobody wrote).
fn folder_of_file(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".bin")?;
    match stem.strip_prefix("archive-") {
        Some(month) if !month.is_empty() && !month.contains('/') => {
            Some(format!("archive/{month}"))
        }
        Some(_) => None,
        None => FINISHED.contains(&stem).then(|| stem.to_string()),
    }
}

/// The folders of finished tasks directly under `work/` (each archive month is one too).
const FINISHED: [&str; 3] = ["done", "failed", "cancelled"];

/// The cache as read at the start of a load, consumed in walk order, and what the load used
/// of it: the main file, read at once, and each history folder's file, read when a load first
/// asks for a path in that folder.
pub struct StatCache {
    salt: u64,
    /// Where the history folders' files are; None for an empty cache, which opens none.
    dir: Option<PathBuf>,
    /// The main file (every entry outside the history folders).
    main: Part,
    /// The history folders' files opened so far, each with its folder.
    folders: Vec<(String, Part)>,
    /// Which of `folders` the last path asked for was in.
    last: usize,
}

/// One cache file as a load reads it, consumed in walk order.
struct Part {
    /// The file's index (every entry but the texts); empty when the file was absent,
    /// corrupt or of another salt.
    bytes: Vec<u8>,
    /// The file, open: hits' texts are read from it when used.
    file: Option<Arc<CacheFile>>,
    /// Where its text part starts.
    texts_at: u64,
    /// Where the next unvisited entry starts in `bytes`.
    next: usize,
    /// How many entries are not visited yet.
    left: usize,
    /// What the load used of it so far.
    tally: Tally,
}

/// What a load used of one cache file.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    /// How many entries were hits.
    hits: usize,
    /// Whether every entry of the file was a hit (known once the reading ends).
    all_hits: bool,
    /// Whether the file must be written again whole (it was absent, corrupt or of another
    /// salt, or an entry did not decode).
    stale: bool,
    /// How many entries were dropped (their files changed or went away).
    dropped: usize,
}

impl Tally {
    /// Returns whether a file this tally is of must be written again, when the new cache has
    /// `keys` files in it: when it is stale, or when the entries missed and dropped are more
    /// than [`REWRITE_SHARE`] allows next to the hits.
    fn must_write(&self, keys: usize) -> bool {
        let missed = keys.saturating_sub(self.hits);
        self.stale || (self.dropped + missed) * REWRITE_SHARE > self.hits
    }
}

/// A load of a big board leaves a cache file as it is when the entries it missed or dropped
/// are at most this share of its hits (1 / this): those few files are read from disk again by
/// the next loads, instead of every single-task command rewriting megabytes for one moved file.
const REWRITE_SHARE: usize = 256;

/// What a load used of the cache once it has taken every file it could: enough to write the
/// new cache, without the old files' index bytes (dropped once the load has taken every
/// file; the texts stay in the old files, which the board's stored texts keep open).
pub struct Used {
    salt: u64,
    /// Whether the cache was empty (a load that read every file): every file is written again.
    fresh: bool,
    /// What the load used of the main file.
    main: Tally,
    /// What it used of each history folder's file it opened.
    folders: Vec<(String, Tally)>,
    /// History folders (work-relative) the load holds whole without their files on its
    /// board (a tick's blocks): their files are kept as they are ([`Used::keeping`]).
    kept: Vec<String>,
}

impl Part {
    /// Reads the cache file at `path`; an absent, corrupt or differently salted file gives an
    /// empty part, to be written again.
    fn read(path: &Path, salt: u64) -> Part {
        let Some(opened) = open(path, salt) else {
            return Part::empty();
        };
        let source = CacheFile::new(opened.file, path.to_path_buf());
        Part {
            bytes: opened.index,
            file: Some(Arc::new(source)),
            texts_at: opened.texts_at,
            next: COUNT,
            left: opened.count,
            tally: Tally::default(),
        }
    }

    /// Returns a part with no entries, to be written again.
    fn empty() -> Part {
        Part {
            bytes: Vec::new(),
            file: None,
            texts_at: 0,
            next: 0,
            left: 0,
            tally: Tally {
                stale: true,
                ..Tally::default()
            },
        }
    }

    /// Returns what the file has of `rel` when its key still matches ([`StatCache::take`]).
    fn take(&mut self, rel: &str, key: &StatKey) -> Option<Hit> {
        let tally = &mut self.tally;
        while self.left > 0 {
            let at = self.next;
            let Some((entry, len)) = entry_at(&self.bytes, at) else {
                (self.left, tally.stale) = (0, true);
                return None;
            };
            match walk_order(entry.rel, rel) {
                Ordering::Greater => return None,
                Ordering::Less => tally.dropped += 1,
                Ordering::Equal if entry.key != *key => tally.dropped += 1,
                Ordering::Equal => {
                    let hit = self
                        .file
                        .as_ref()
                        .and_then(|f| entry.to_hit(f, self.texts_at));
                    (self.next, self.left) = (at + len, self.left - 1);
                    tally.stale |= hit.is_none();
                    tally.hits += usize::from(hit.is_some());
                    return hit;
                }
            }
            (self.next, self.left) = (at + len, self.left - 1);
        }
        None
    }

    /// Ends the reading: what the load used of the file.
    fn used(self) -> Tally {
        let t = self.tally;
        Tally {
            all_hits: !t.stale && self.left == 0 && t.dropped == 0,
            dropped: t.dropped + self.left,
            ..t
        }
    }
}

impl StatCache {
    /// Reads the main cache file at `path` (the history folders' files are read when a path
    /// in their folder is asked for); an absent, corrupt or differently salted file gives an
    /// empty one.
    pub fn read(path: &Path, salt: u64) -> StatCache {
        StatCache {
            salt,
            dir: Some(folders_dir(path)),
            main: Part::read(path, salt),
            folders: Vec::new(),
            last: 0,
        }
    }

    /// Returns an empty cache (a load that reads every file), which `save` rewrites in full.
    pub fn empty(salt: u64) -> StatCache {
        StatCache {
            salt,
            dir: None,
            main: Part::empty(),
            folders: Vec::new(),
            last: 0,
        }
    }

    /// Returns what the cache has of `rel` when its key still matches. Calls must come in
    /// walk order (`walk_order`): entries passed over belong to files that went away, and
    /// are dropped like a mismatching entry. The first path asked for in a history folder
    /// reads that folder's file.
    pub fn take(&mut self, rel: &str, key: &StatKey) -> Option<Hit> {
        let Some(folder) = folder_of(rel) else {
            return self.main.take(rel, key);
        };
        let at = self.part_of(folder)?;
        self.folders[at].1.take(rel, key)
    }

    /// Returns where the part of the history folder `folder` is in `folders`, reading its
    /// file when it is the first path asked for there; None for an empty cache.
    fn part_of(&mut self, folder: &str) -> Option<usize> {
        if self
            .folders
            .get(self.last)
            .is_some_and(|(f, _)| f == folder)
        {
            return Some(self.last);
        }
        let at = match self.folders.iter().position(|(f, _)| f == folder) {
            Some(at) => at,
            None => {
                let path = self.dir.as_ref()?.join(file_name(folder));
                let part = Part::read(&path, self.salt);
                self.folders.push((folder.to_string(), part));
                self.folders.len() - 1
            }
        };
        self.last = at;
        Some(at)
    }

    /// Ends the reading: drops the indexes' bytes and keeps what `Used::save` needs (the
    /// hits' texts still read from the open files).
    pub fn used(self) -> Used {
        Used {
            salt: self.salt,
            fresh: self.dir.is_none(),
            main: self.main.used(),
            folders: (self.folders.into_iter())
                .map(|(f, part)| (f, part.used()))
                .collect(),
            kept: Vec::new(),
        }
    }
}

/// The stat key of every file a load may keep in the new cache (its hits and the files it
/// read from disk), work-relative, in walk order: pushed as the walk's files are taken, looked
/// up in that order when the cache is written ([`KeysInOrder`]; no hash map of every hit's
/// path). Counts the keys of each history folder as they come (one run each, in walk order).
#[derive(Debug, Default)]
pub struct Keys {
    keys: Vec<(String, StatKey)>,
    /// Each history folder with keys, and how many.
    folders: Vec<(String, usize)>,
}

impl Keys {
    /// Returns an empty list with room for `n` files.
    pub fn with_capacity(n: usize) -> Keys {
        Keys {
            keys: Vec::with_capacity(n),
            folders: Vec::new(),
        }
    }

    /// Adds the key of `rel`, which comes after every path added before in walk order.
    pub fn push(&mut self, rel: &str, key: StatKey) {
        debug_assert!(self
            .keys
            .last()
            .is_none_or(|(last, _)| walk_order(last, rel) == Ordering::Less));
        if let Some(folder) = folder_of(rel) {
            match self.folders.last_mut() {
                Some((last, n)) if last == folder => *n += 1,
                _ => self.folders.push((folder.to_string(), 1)),
            }
        }
        self.keys.push((rel.to_string(), key));
    }

    /// Returns how many files have a key.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Returns how many files of the history folder `folder` have a key.
    fn in_folder(&self, folder: &str) -> usize {
        let of = self.folders.iter().filter(|(f, _)| f == folder);
        of.map(|(_, n)| n).sum()
    }

    /// Returns a look-up of keys for paths asked in walk order (see [`KeysInOrder`]).
    fn in_order(&self) -> KeysInOrder<'_> {
        KeysInOrder {
            keys: self,
            next: std::cell::Cell::new(0),
        }
    }

    /// Returns the keys of `files`, in any order.
    #[cfg(test)]
    pub fn of<const N: usize>(files: [(&str, StatKey); N]) -> Keys {
        let mut sorted = files.to_vec();
        sorted.sort_by(|a, b| walk_order(a.0, b.0));
        let mut keys = Keys::default();
        sorted.into_iter().for_each(|(r, k)| keys.push(r, k));
        keys
    }
}

/// The keys of files asked for in walk order, as a load's tasks come when the cache is
/// written: each path is compared with the key after the last one found before a binary
/// search (a search per task was 5 % of a tick that rewrote the cache at 100,000 tasks).
struct KeysInOrder<'k> {
    keys: &'k Keys,
    /// Where the key after the last one found is.
    next: std::cell::Cell<usize>,
}

impl KeysInOrder<'_> {
    /// Returns the key of `rel`, when it has one.
    fn get(&self, rel: &str) -> Option<StatKey> {
        let keys = &self.keys.keys;
        let at = match keys.get(self.next.get()) {
            Some((r, _)) if r == rel => self.next.get(),
            _ => keys.binary_search_by(|(r, _)| walk_order(r, rel)).ok()?,
        };
        self.next.set(at + 1);
        Some(keys[at].1)
    }
}

/// Where an entry of the new cache comes from.
enum Source<'b> {
    /// A task that passed the per-file checks, with the content hash of its file.
    Task(u64, &'b crate::check::Task),
    /// An agent profile that passed the profile schema.
    Profile(&'b ProfileFile),
}

/// One entry of the new cache: its work-relative path and key, and where it comes from.
type NewEntry<'b> = ((&'b str, StatKey), Source<'b>);

/// What writing one cache file needs besides its entries.
struct Target<'a, 'k> {
    salt: u64,
    /// The repo-relative prefix of work-relative paths (`work/`).
    prefix: &'a str,
    keys: &'a KeysInOrder<'k>,
    start: SystemTime,
}

impl Used {
    /// Returns this use of the cache keeping the files of the history folders `folders`
    /// (work-relative) as they are: a load that holds them as blocks has no task of them on
    /// its board, and their files must not go as the file of a folder with no task left does.
    pub fn keeping(mut self, folders: Vec<String>) -> Used {
        self.kept = folders;
        self
    }

    /// Writes the cache for the task files and agent profiles of a load that passed the
    /// per-file checks, whose key is in `keys` (every hit's and every file read from disk,
    /// work-relative) and settled at `start`: each file whose entries changed, on its own
    /// ([`Tally::must_write`]; a file whose every entry was a hit, with no file read from
    /// disk, neither). A history folder's file the load never opened is left as it is, and
    /// removed once no task is left in its folder (or by a load that read every file, when
    /// it has no entry). Each file is written entry by entry as it is encoded, never whole
    /// in memory, to a temporary file renamed over the old one. Failures are ignored: the
    /// cache is only ever an optimisation.
    pub fn save(
        mut self,
        path: &Path,
        (tasks, agents): (&[TaskFile], &BTreeMap<AgentName, AgentEntry>),
        work_dir: &str,
        keys: &Keys,
        start: SystemTime,
    ) {
        let prefix = format!("{work_dir}/");
        let in_order = keys.in_order();
        let target = Target {
            salt: self.salt,
            prefix: &prefix,
            keys: &in_order,
            start,
        };
        let dir = folders_dir(path);
        let (fresh, main) = (self.fresh, self.main);
        let kept = std::mem::take(&mut self.kept);
        let folders = self.with_keyed_folders(keys);
        let mut in_folders = 0;
        for (folder, tally) in &folders {
            let n = keys.in_folder(folder);
            in_folders += n;
            if tally.must_write(n) {
                let tasks = &tasks[under(tasks, &format!("{prefix}{folder}/"))];
                let entries = target.entries(tasks.iter(), None);
                let part = (tally, Role::Folder);
                write_part(&dir.join(file_name(folder)), part, entries, &target);
            }
        }
        if main.must_write(keys.len() - in_folders) {
            let live = live_ranges(tasks, &prefix);
            let live = live.into_iter().flat_map(|r| &tasks[r]);
            let entries = target.entries(live, Some(agents));
            write_part(path, (&main, Role::Main), entries, &target);
        }
        let opened = folders.iter().map(|(f, _)| f.as_str());
        let handled: Vec<&str> = opened.chain(kept.iter().map(String::as_str)).collect();
        remove_stale(&dir, &handled, fresh, &|folder| {
            !under(tasks, &format!("{prefix}{folder}/")).is_empty()
        });
    }

    /// Returns the history folders whose files the load opened, with what it used of each,
    /// and those it did not open but has keys in (their files unread: written again from
    /// those keys alone).
    fn with_keyed_folders(self, keys: &Keys) -> Vec<(String, Tally)> {
        let mut folders = self.folders;
        for (folder, _) in &keys.folders {
            if !folders.iter().any(|(f, _)| f == folder) {
                let unread = Tally {
                    stale: self.fresh,
                    ..Tally::default()
                };
                folders.push((folder.clone(), unread));
            }
        }
        folders
    }
}

impl<'b> Target<'_, '_> {
    /// Returns the new cache's entries for `tasks` (and `agents`' profiles when given) whose
    /// key is known and settled, in walk order.
    fn entries(
        &self,
        tasks: impl Iterator<Item = &'b TaskFile>,
        agents: Option<&'b BTreeMap<AgentName, AgentEntry>>,
    ) -> Vec<NewEntry<'b>> {
        let settled = |path| settled_key(path, self.prefix, self.keys, self.start);
        let task_entries = tasks.filter_map(|t| {
            let task = t.read.as_ref().ok()?;
            Some((settled(&t.path)?, Source::Task(t.hash, task)))
        });
        let profile_entries = agents.into_iter().flat_map(|a| a.values()).filter_map(|a| {
            let file = a.file.as_ref()?;
            Some((settled(&file.path)?, Source::Profile(file)))
        });
        let mut entries: Vec<NewEntry<'b>> = task_entries.chain(profile_entries).collect();
        entries.sort_by(|a, b| walk_order(a.0 .0, b.0 .0));
        entries
    }
}

/// Which file of the cache one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The main file, written even with no entry (its header proves the salt's schema).
    Main,
    /// A history folder's file.
    Folder,
}

/// Writes the cache file at `path` with `entries` unless every entry of the old one was a
/// hit and there is no other; a history folder's file with no entry is removed instead.
fn write_part(path: &Path, part: (&Tally, Role), entries: Vec<NewEntry<'_>>, target: &Target) {
    let (tally, role) = part;
    if tally.all_hits && entries.len() == tally.hits {
        return;
    }
    if entries.is_empty() && role == Role::Folder {
        remove(path);
        return;
    }
    let count = entries.len();
    let encoded = || {
        entries
            .iter()
            .map(|((rel, key), source)| entry_of(rel, *key, source))
    };
    if write_file(path, target.salt, count, encoded).is_err() {
        let _ = fs::remove_file(temp_path(path));
    }
}

/// Returns where the tasks under the repo-relative folder `dir` (ending in `/`) are in
/// `tasks`, sorted by path.
fn under(tasks: &[TaskFile], dir: &str) -> Range<usize> {
    let start = tasks.partition_point(|t| t.path.as_str() < dir);
    let end = start + tasks[start..].partition_point(|t| t.path.starts_with(dir));
    start..end
}

/// Returns the runs of `tasks` (sorted by path) outside every history folder: one look at
/// the first task of each folder, a binary search past it.
fn live_ranges(tasks: &[TaskFile], prefix: &str) -> Vec<Range<usize>> {
    let (mut runs, mut from, mut i) = (Vec::new(), 0, 0);
    while let Some(task) = tasks.get(i) {
        let folder = task.path.strip_prefix(prefix).and_then(folder_of);
        let Some(folder) = folder else {
            i += 1;
            continue;
        };
        runs.push(from..i);
        i = under(tasks, &format!("{prefix}{folder}/")).end.max(i + 1);
        from = i;
    }
    runs.push(from..tasks.len());
    runs
}

/// Removes the files of the folder `dir` that are not a history folder's cache file, or whose
/// folder this save did not write and `has_tasks` says is gone (every one not written, after
/// a load that read every file).
fn remove_stale(dir: &Path, handled: &[&str], fresh: bool, has_tasks: &dyn Fn(&str) -> bool) {
    let Ok(listing) = fs::read_dir(dir) else {
        return;
    };
    for entry in listing.flatten() {
        let name = entry.file_name();
        let folder = name.to_str().and_then(folder_of_file);
        let keep =
            folder.is_some_and(|f| handled.contains(&f.as_str()) || (!fresh && has_tasks(&f)));
        if !keep {
            remove(&entry.path());
        }
    }
}

/// Removes a cache file (a failure only leaves it: its entries are still checked by key).
fn remove(path: &Path) {
    if crate::fsx::inject::point("stat-cache remove").is_ok() {
        let _ = fs::remove_file(path);
    }
}
/// Returns the entry of the new cache for `source` at `rel`.
fn entry_of<'b>(rel: &'b str, key: StatKey, source: &'b Source<'b>) -> EntryRef<'b> {
    match source {
        Source::Task(hash, task) => {
            let s = task.summary();
            let summary = Some(SummaryRef {
                state: s.state.map_or("", State::as_str),
                assigned_to: s.assigned_to.as_ref().map(AgentName::as_str),
                idempotency_key: s.idempotency_key.as_deref(),
                waiting: s.waiting.as_deref().map(Cow::Borrowed),
                shown: Cow::Borrowed(&s.shown),
                spent: Cow::Borrowed(&s.spent),
            });
            EntryRef {
                rel,
                key,
                hash: *hash,
                text: Body::Text(task.text()),
                summary,
            }
        }
        Source::Profile(file) => EntryRef {
            rel,
            key,
            hash: crate::board::content_hash(file.text.as_bytes()),
            text: Body::Str(&file.text[..]),
            summary: None,
        },
    }
}

/// Returns the temporary file the cache at `path` is written to before its rename.
fn temp_path(path: &Path) -> std::path::PathBuf {
    path.with_extension(format!("{}{}", std::process::id(), crate::fsx::TEMP_SUFFIX))
}

/// Writes the cache file (see `encode_entry` for the layout) by a rename, so a reader sees
/// the old or the new file: header with a zero checksum and index length, then the index of
/// `count` entries as `entries` gives them, then their texts
/// in the same order (`entries` is run a second time; texts the old cache file keeps are
/// copied from it, those that lie one after another there with one read), then the index's checksum and length in the header. Nothing is held
/// whole in memory.
fn write_file<'b, I: Iterator<Item = EntryRef<'b>>>(
    path: &Path,
    salt: u64,
    count: usize,
    entries: impl Fn() -> I,
) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = temp_path(path);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, fs::File::create(&tmp)?);
    out.write_all(MAGIC)?;
    out.write_all(&salt.to_le_bytes())?;
    out.write_all(&[0; 24])?;
    let mut sum = Sum::new();
    let mut buf = (count as u64).to_le_bytes().to_vec();
    let (mut index_len, mut text_at) = (0, 0);
    for entry in entries() {
        encode_entry(&mut buf, &entry, text_at);
        text_at += entry.text.len() as u64;
        sum.add(&buf);
        index_len += buf.len();
        out.write_all(&buf)?;
        buf.clear();
    }
    let mut run = StoredRun::default();
    for entry in entries() {
        match entry.text {
            Body::Text(text) => run.write(text, &mut out, &mut buf)?,
            Body::Str(text) => {
                run.flush(&mut out, &mut buf)?;
                out.write_all(text.as_bytes())?;
            }
            Body::At(..) => return Err(std::io::Error::other("an entry without its text")),
        }
    }
    run.flush(&mut out, &mut buf)?;
    let mut file = out.into_inner().map_err(|e| e.into_error())?;
    file.seek(SeekFrom::Start((HEADER - 24) as u64))?;
    file.write_all(&sum.finish().to_le_bytes())?;
    file.write_all(&(index_len as u64).to_le_bytes())?;
    file.write_all(&text_at.to_le_bytes())?;
    drop(file);
    crate::fsx::inject::point("stat-cache rename")?;
    fs::rename(&tmp, path)
}

/// Returns whether the cache may keep the file at the work-relative `rel`: a task file
/// outside `inbox/` or an agent profile (once it passes the per-file checks).
pub fn cacheable(rel: &str) -> bool {
    !rel.starts_with("inbox/") && (rel.ends_with(".yaml") || rel.ends_with(".yml"))
}

/// Returns the work-relative path of a file the cache may keep (`cacheable`), with its key:
/// known and settled at `start`.
fn settled_key<'p>(
    path: &'p str,
    prefix: &str,
    keys: &KeysInOrder<'_>,
    start: SystemTime,
) -> Option<(&'p str, StatKey)> {
    let rel = path.strip_prefix(prefix)?;
    let key = keys.get(rel)?;
    (cacheable(rel) && key.settled(start)).then_some((rel, key))
}

/// The length of the header: magic, salt, the index's checksum, its length and the length of
/// the text part.
const HEADER: usize = MAGIC.len() + 32;

/// The length of the index's entry count, which its first entry follows.
const COUNT: usize = 8;

/// Appends one entry of the index to `out`, its text at `text_at` in the text part. The cache
/// file is: magic, salt, the checksum and length of the index and the length of the text
/// part, then the index (entry count
/// and per entry its path, key, hash, kind with a task's summary, and where its text lies in
/// the text part and its length), then the text part: every entry's text, in the index's
/// order. Integers little-endian, strings length-prefixed. A load reads the index alone;
/// a text is read when its task is parsed, and checked against the entry's hash then.
fn encode_entry(out: &mut Vec<u8>, e: &EntryRef<'_>, text_at: u64) {
    put_str(out, e.rel);
    e.key.write_to(out);
    out.extend_from_slice(&e.hash.to_le_bytes());
    match &e.summary {
        None => out.push(0),
        Some(summary) => {
            out.push(1);
            put_str(out, summary.state);
            put_opt(out, summary.assigned_to);
            put_opt(out, summary.idempotency_key);
            put_waiting(out, summary.waiting.as_deref());
            put_shown(out, &summary.shown);
            put_spent(out, &summary.spent);
        }
    }
    out.extend_from_slice(&text_at.to_le_bytes());
    out.extend_from_slice(&(e.text.len() as u64).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_opt(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
    }
}

/// Encodes what the planner reads of a task waiting to start: a 0 byte for none, else a 1
/// and its fields (optional strings, then the three lists as a count and strings; gates as JSON).
fn put_waiting(out: &mut Vec<u8>, w: Option<&Waiting>) {
    let Some(w) = w else {
        out.push(0);
        return;
    };
    out.push(1);
    put_opt(out, w.priority.map(Priority::as_str));
    put_opt(out, w.due.as_deref());
    for t in [w.created_at, w.not_before] {
        put_opt(out, t.map(|t| t.to_string()).as_deref());
    }
    put_opt(out, w.agent.as_ref().map(AgentName::as_str));
    put_list(out, w.capabilities.iter().map(String::as_str));
    put_list(out, w.depends_on.iter().map(TaskId::as_str));
    let gates: Vec<String> = w
        .wait_for
        .iter()
        .filter_map(|g| serde_json::to_string(g).ok())
        .collect();
    put_list(out, gates.iter().map(String::as_str));
}

/// Encodes what a board reads of a task: its title, labels, priority and agent.
fn put_shown(out: &mut Vec<u8>, s: &Shown) {
    put_str(out, &s.title);
    put_list(out, s.labels.iter().map(String::as_str));
    put_opt(out, s.priority.map(Priority::as_str));
    put_opt(out, s.agent.as_ref().map(AgentName::as_str));
}

/// Decodes what `put_shown` wrote; None when the bytes are not such an encoding.
fn read_shown(r: &mut Reader<'_>) -> Option<Shown> {
    Some(Shown {
        title: r.str()?.to_string(),
        labels: r.list()?.into_iter().map(str::to_string).collect(),
        priority: r.opt()?.map(str::parse).transpose().ok()?,
        agent: r.opt()?.map(AgentName::new).transpose().ok()?,
    })
}

fn put_list<'s>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = &'s str>) {
    out.extend_from_slice(&(items.len() as u64).to_le_bytes());
    items.for_each(|s| put_str(out, s));
}

/// Encodes a task's spends: a count, then each as JSON.
fn put_spent(out: &mut Vec<u8>, spent: &[Spent]) {
    let each: Vec<String> = spent
        .iter()
        .filter_map(|s| serde_json::to_string(s).ok())
        .collect();
    put_list(out, each.iter().map(String::as_str));
}

/// Decodes what `put_spent` wrote; None when the bytes are not such an encoding.
fn read_spent(r: &mut Reader<'_>) -> Option<Vec<Spent>> {
    let each = r.list()?.into_iter().map(serde_json::from_str);
    each.collect::<Result<_, _>>().ok()
}

/// Decodes what `put_waiting` wrote; None when the bytes are not such an encoding.
fn read_waiting(r: &mut Reader<'_>) -> Option<Option<Waiting>> {
    match r.take::<1>()? {
        [0] => return Some(None),
        [1] => {}
        _ => return None,
    }
    let owned = |s: Option<&str>| s.map(str::to_string);
    let priority = r.opt()?.map(str::parse).transpose().ok()?;
    let time = |s: Option<&str>| s.map(str::parse::<jiff::Timestamp>).transpose().ok();
    let due = owned(r.opt()?);
    let (created_at, not_before) = (time(r.opt()?)?, time(r.opt()?)?);
    let agent = r.opt()?.map(AgentName::new).transpose().ok()?;
    let capabilities = r.list()?.into_iter().map(str::to_string).collect();
    let depends_on = r.list()?.into_iter().map(TaskId::new);
    let wait_for = r.list()?.into_iter().map(serde_json::from_str);
    Some(Some(Waiting {
        priority,
        due,
        created_at,
        not_before,
        agent,
        capabilities,
        depends_on: depends_on.collect::<Result<_, _>>().ok()?,
        wait_for: wait_for.collect::<Result<_, _>>().ok()?,
    }))
}

/// A cache file opened by a load: its index, read and checked, and the file itself.
struct Opened {
    /// The index (entry count, then the entries).
    index: Vec<u8>,
    /// How many entries it has.
    count: usize,
    file: fs::File,
    /// Where the text part starts in the file.
    texts_at: u64,
}

/// Opens the cache file at `path` written under `salt` and reads its index (magic, salt,
/// checksum, the length of the whole); None when it is absent or not such a file.
fn open(path: &Path, salt: u64) -> Option<Opened> {
    use std::io::Read;
    let (mut file, _) = crate::fsx::open_private(path).ok()?;
    let mut header = [0u8; HEADER];
    file.read_exact(&mut header).ok()?;
    let mut r = Reader(header.strip_prefix(MAGIC)?);
    let (file_salt, sum, len, texts) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    let size = file.metadata().ok()?.len();
    let whole = (HEADER as u64).checked_add(len)?.checked_add(texts)?;
    if file_salt != salt || size != whole {
        return None;
    }
    let mut index = Vec::with_capacity(usize::try_from(len).ok()?);
    (&mut file).take(len).read_to_end(&mut index).ok()?;
    if index.len() as u64 != len || checksum(&index) != sum {
        return None;
    }
    let count = usize::try_from(Reader(&index).u64()?).ok()?;
    Some(Opened {
        index,
        count,
        file,
        texts_at: HEADER as u64 + len,
    })
}

/// Decodes the entry starting at `at`; returns it with its encoded length, or None when the
/// bytes there are not an entry (truncated, bad UTF-8 or kind).
fn entry_at(bytes: &[u8], at: usize) -> Option<(EntryRef<'_>, usize)> {
    let mut r = Reader(bytes.get(at..)?);
    let before = r.0.len();
    let rel = r.str()?;
    let key = StatKey::read_from(&mut r)?;
    let hash = r.u64()?;
    let summary = match r.take::<1>()? {
        [0] => None,
        [1] => Some(SummaryRef {
            state: r.str()?,
            assigned_to: r.opt()?,
            idempotency_key: r.opt()?,
            waiting: read_waiting(&mut r)?.map(Cow::Owned),
            shown: Cow::Owned(read_shown(&mut r)?),
            spent: Cow::Owned(read_spent(&mut r)?),
        }),
        _ => return None,
    };
    let text = Body::At(r.u64()?, r.u64()?);
    let entry = EntryRef {
        rel,
        key,
        hash,
        text,
        summary,
    };
    Some((entry, before - r.0.len()))
}

/// The unread rest of the cache file.
pub(super) struct Reader<'b>(pub(super) &'b [u8]);

impl<'b> Reader<'b> {
    pub(super) fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    fn i128(&mut self) -> Option<i128> {
        self.take().map(i128::from_le_bytes)
    }

    pub(super) fn str(&mut self) -> Option<&'b str> {
        let n = usize::try_from(self.u64()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        std::str::from_utf8(s).ok()
    }

    fn opt(&mut self) -> Option<Option<&'b str>> {
        match self.take::<1>()? {
            [0] => Some(None),
            [1] => self.str().map(Some),
            _ => None,
        }
    }

    fn list(&mut self) -> Option<Vec<&'b str>> {
        let n = usize::try_from(self.u64()?).ok()?;
        // Each string takes at least its 8-byte length: a bad count fails here, not in alloc.
        if n > self.0.len() / 8 {
            return None;
        }
        (0..n).map(|_| self.str()).collect()
    }
}

/// Returns the salt of the cache: coord's version and the bytes of the task schema in force.
pub fn salt(schema: &[u8]) -> u64 {
    let mut bytes = format!("stat-cache 3 coord {}", env!("CARGO_PKG_VERSION")).into_bytes();
    bytes.push(0);
    bytes.extend_from_slice(schema);
    crate::board::content_hash(&bytes)
}

/// Returns whether the cache at `path` was written under `salt`, reading only its header: a
/// cache is written only after its schema compiled, so this proves the schema compiles.
pub fn written_under(path: &Path, salt: u64) -> bool {
    use std::io::Read;
    let mut header = [0u8; MAGIC.len() + 8];
    crate::fsx::open_private(path)
        .and_then(|(mut f, _)| f.read_exact(&mut header))
        .is_ok_and(|()| header.strip_prefix(MAGIC) == Some(&salt.to_le_bytes()[..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{Board, RawFile};
    use crate::schema::Schema;
    use crate::yaml::Limits;

    const TEXT: &str = "title: a\ncoord:\n  state: done\n  attempt: 1\n";

    const PROFILE: &str = "capabilities: [x]\n";

    fn board(text: &str) -> Board {
        let raw =
            |rel: &str, text: &str| RawFile::new(rel.to_string(), Ok(text.as_bytes().to_vec()));
        let files = vec![raw("done/a.yaml", text), raw("agents/bot.yaml", PROFILE)];
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        Board::build("work", files, vec![], (&t, &a), &Limits::default())
    }

    fn save(path: &Path, keys: &Keys) {
        let b = board(TEXT);
        StatCache::read(path, 7)
            .used()
            .save(path, (&b.tasks, &b.agents), "work", keys, later());
    }

    fn key(size: u64, mtime_ns: i128, ctime_ns: i128, ino: u64) -> StatKey {
        StatKey {
            size,
            mtime_ns,
            ctime_ns,
            ino,
            dev: 1,
        }
    }

    /// A snapshot time well after the stamps of `key(.., 1e9, 1e9, ..)`.
    fn later() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(100)
    }

    fn saved(dir: &Path, k: StatKey) -> std::path::PathBuf {
        let path = dir.join("stat-cache.bin");
        let keys = Keys::of([("done/a.yaml", k), ("agents/bot.yaml", k)]);
        save(&path, &keys);
        path
    }

    /// Returns the task a hit holds (its summary, text and content hash); panics on anything
    /// else.
    fn task_of(hit: Option<Hit>) -> (Summary, Text, u64) {
        match hit {
            Some(Hit {
                kind: Kind::Task(summary, text),
                hash,
            }) => (summary, text, hash),
            other => panic!("no task hit: {other:?}"),
        }
    }

    /// Saves the tasks of `b` into a new cache at `path` (the work-relative `rel` with key
    /// `k`), as a load does, and returns the task reading it back gives.
    fn saved_and_read(path: &Path, b: &Board, rel: &str, k: StatKey) -> (Summary, Text, u64) {
        let keys = Keys::of([(rel, k)]);
        StatCache::empty(7)
            .used()
            .save(path, (&b.tasks, &b.agents), "work", &keys, later());
        task_of(StatCache::read(path, 7).take(rel, &k))
    }

    /// Keys asked in walk order are found one after another; one asked out of that order,
    /// or again, is found all the same, and an unknown path has none.
    #[test]
    fn keys_are_found_in_walk_order_and_out_of_it() {
        let (a, b, c) = (key(1, 1, 1, 1), key(2, 1, 1, 2), key(3, 1, 1, 3));
        let keys = Keys::of([("done/a.yaml", a), ("done/b.yaml", b), ("ready/c.yaml", c)]);
        let keys = keys.in_order();
        let asked = ["done/a.yaml", "done/b.yaml", "ready/c.yaml", "done/a.yaml"];
        let found = asked.map(|rel| keys.get(rel));
        assert_eq!(found, [Some(a), Some(b), Some(c), Some(a)]);
        assert_eq!(keys.get("ready/c.yaml"), Some(c), "skipping b");
        assert_eq!(keys.get("done/x.yaml"), None);
    }

    #[test]
    fn a_waiting_task_keeps_what_the_planner_reads_of_it() {
        let text = "title: r\npriority: high\ndue: 2026-12-01\nagent: bot\n\
                    capabilities: [x, y]\ndepends_on: [a, b]\ncoord:\n  state: ready\n  \
                    created_at: 2026-11-22T10:00:00Z\n  not_before: 2026-11-22T11:00:00Z\n";
        let raw = RawFile::new("ready/r.yaml".to_string(), Ok(text.as_bytes().to_vec()));
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        let b = Board::build("work", vec![raw], vec![], (&t, &a), &Limits::default());
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stat-cache.bin");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let (summary, ..) = saved_and_read(&path, &b, "ready/r.yaml", k);
        let parsed = crate::check::reread(text).expect("parses");
        assert_eq!(summary, Summary::of(&parsed));
        let waiting = summary.waiting.expect("a ready task's summary has it");
        assert_eq!(waiting.priority, Some(Priority::High));
        assert_eq!(waiting.agent.as_ref().map(AgentName::as_str), Some("bot"));
        assert_eq!(waiting.capabilities, ["x", "y"]);
        assert_eq!(waiting.depends_on.len(), 2);
        let not_before = waiting.not_before.map(|t| t.to_string());
        assert_eq!(not_before.as_deref(), Some("2026-11-22T11:00:00Z"));
        assert!(waiting.due_at().is_some());
    }

    #[test]
    fn hit_when_the_key_matches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        let mut cache = StatCache::read(&path, 7);
        let profile = cache.take("agents/bot.yaml", &k).expect("profile hit");
        assert!(matches!(profile.kind, Kind::Profile(text) if text == PROFILE));
        let hit = cache.take("done/a.yaml", &k).expect("hit");
        assert_eq!(hit.hash, crate::board::content_hash(TEXT.as_bytes()));
        match hit.kind {
            Kind::Task(summary, text) => {
                assert_eq!(summary.state, Some(State::Done));
                assert_eq!(text.read().as_deref(), Some(TEXT));
            }
            Kind::Profile(_) => panic!("a task came back as a profile"),
        }
    }

    #[test]
    fn a_key_holds_what_std_reads_of_the_file() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, TEXT).expect("write");
        let meta = path.symlink_metadata().expect("metadata");
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        let expected = StatKey {
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        };
        let key = StatKey::of(&rustix::fs::lstat(&path).expect("lstat"));
        assert_eq!(key, expected);
        assert_eq!(key.size, TEXT.len() as u64);
    }

    #[test]
    fn entries_passed_over_in_walk_order_are_dropped() {
        assert_eq!(walk_order("a/b", "a-b"), Ordering::Less, "folder by folder");
        assert_eq!(walk_order("a-b", "a/b"), Ordering::Greater);
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        let mut cache = StatCache::read(&path, 7);
        assert!(cache.take("assigned/bot/x.yaml", &k).is_none());
        assert!(
            cache.take("agents/bot.yaml", &k).is_none(),
            "an entry before the last taken one is gone"
        );
        assert_eq!(
            cache.main.tally.dropped, 1,
            "the profile's entry was dropped"
        );
        assert!(
            cache.take("done/a.yaml", &k).is_some(),
            "a history folder's file is read on its own"
        );
    }

    #[test]
    fn a_path_s_file_is_its_history_folder_s_or_the_main_one() {
        let cases = [
            ("done/a.yaml", Some("done")),
            ("cancelled/x/b.yaml", Some("cancelled")),
            ("archive/2026-07/c.yaml", Some("archive/2026-07")),
            ("archive/c.yaml", None),
            ("ready/d.yaml", None),
            ("done-x/e.yaml", None),
            ("agents/bot.yaml", None),
        ];
        for (rel, folder) in cases {
            assert_eq!(folder_of(rel), folder, "{rel}");
        }
        for name in ["done.1.coord-tmp", "ready.bin", "archive-.bin", "done"] {
            assert_eq!(folder_of_file(name), None, "{name}");
        }
    }

    proptest::proptest! {
        #[test]
        fn a_folder_s_file_name_gives_the_folder_back(month in "[a-z0-9.-]{1,12}") {
            for folder in [format!("archive/{month}"), "done".to_string(), "failed".to_string()] {
                proptest::prop_assert_eq!(folder_of_file(&file_name(&folder)), Some(folder));
            }
        }

        #[test]
        fn walk_order_is_folder_by_folder(a in "[ab/-]{0,6}", b in "[ab/-]{0,6}") {
            proptest::prop_assert_eq!(walk_order(&a, &b), a.split('/').cmp(b.split('/')));
        }
    }

    #[test]
    fn miss_when_any_part_of_the_key_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        for changed in [
            key(41, 1_000_000_000, 1_000_000_001, 9),
            key(40, 1_000_000_002, 1_000_000_001, 9),
            key(40, 1_000_000_000, 1_000_000_003, 9),
            key(40, 1_000_000_000, 1_000_000_001, 10),
        ] {
            let mut cache = StatCache::read(&path, 7);
            assert!(cache.take("done/a.yaml", &changed).is_none(), "{changed:?}");
        }
    }

    /// Each file of the cache stands on its own: the main file or a history folder's file of
    /// another salt, truncated, a byte longer, with a flipped byte in its index or missing
    /// gives none of its entries, and the other file's entries still hit.
    #[test]
    fn other_salt_corrupt_or_missing_file_is_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        assert!(StatCache::read(&path, 8).take("done/a.yaml", &k).is_none());
        let done = folders_dir(&path).join("done.bin");
        let rels = ["agents/bot.yaml", "done/a.yaml"];
        for (damaged, lost) in [(&path, rels[0]), (&done, rels[1])] {
            let whole = std::fs::read(damaged).expect("read");
            let longer = [&whole[..], b"x"].concat();
            let mut flipped = whole.clone();
            // A byte of the first entry's content hash: after the count, the path and the key.
            flipped[HEADER + COUNT + 8 + lost.len() + 56] ^= 1;
            for (bytes, why) in [
                (Some(&whole[..whole.len() - 1]), "truncated"),
                (Some(&longer[..]), "a byte more"),
                (
                    Some(&flipped[..]),
                    "a flipped byte in the index breaks its checksum",
                ),
                (None, "missing"),
            ] {
                match bytes {
                    Some(bytes) => std::fs::write(damaged, bytes).expect("write"),
                    // Gone already when a damaged text was found (see the next test).
                    None => drop(std::fs::remove_file(damaged)),
                }
                let mut cache = StatCache::read(&path, 7);
                let hits = rels.map(|rel| cache.take(rel, &k).is_some());
                assert_eq!(hits, rels.map(|rel| rel != lost), "{why}: {damaged:?}");
            }
            std::fs::write(damaged, &whole).expect("write");
        }
    }

    /// A text is read from the cache file only when used: a byte flipped in the text part is
    /// found then (the entry's hash), the task does not parse from it, and the cache file is
    /// removed so that the next load reads the file itself again.
    #[test]
    fn a_damaged_text_is_found_when_read_and_forgets_the_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        let done = folders_dir(&path).join("done.bin");
        let mut flipped = std::fs::read(&done).expect("read");
        let last = flipped.len() - 2;
        flipped[last] ^= 1;
        std::fs::write(&done, &flipped).expect("write");
        let (summary, text, _) = task_of(StatCache::read(&path, 7).take("done/a.yaml", &k));
        let task = crate::check::Task::unparsed(text, summary);
        assert_eq!(task.spec.title, "", "no task parsed from damaged bytes");
        assert!(!done.exists(), "the folder's cache file is gone");
        assert!(path.exists(), "the main file is left");
    }

    /// A cache written from a board whose tasks came from the cache copies their texts from
    /// the old file (which the board never held), whole.
    #[test]
    fn texts_left_in_the_old_file_are_copied_into_the_new_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        let (summary, text, hash) = task_of(StatCache::read(&path, 7).take("done/a.yaml", &k));
        assert!(
            matches!(text, Text::Stored(_)),
            "the text is left in the file"
        );
        let task = crate::check::Task::unparsed(text, summary);
        let raw = RawFile {
            cached: Some(crate::board::Cached::Task(Box::new(task), hash)),
            ..RawFile::new("done/a.yaml".to_string(), Ok(Vec::new()))
        };
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        let b = Board::build("work", vec![raw], vec![], (&t, &a), &Limits::default());
        // Saved over the file the texts come from, as a load does: the new file is renamed
        // in while the board's texts are read from the old one.
        let (_, copied, _) = saved_and_read(&path, &b, "done/a.yaml", k);
        assert_eq!(copied.read().as_deref(), Some(TEXT));
        let held = b.tasks[0].read.as_ref().expect("a task").text();
        assert_eq!(
            held.read().as_deref(),
            Some(TEXT),
            "the board's text still reads"
        );
    }

    #[test]
    fn recent_stamps_are_not_trusted() {
        let start = UNIX_EPOCH + Duration::from_secs(10);
        let fine = |ns: i128| key(1, ns, ns, 1).settled(start);
        assert!(fine(9_900_000_001 - 60_000_000));
        assert!(!fine(9_990_000_001), "10 ms before the snapshot");
        let coarse = |s: i128| key(1, s * 1_000_000_000, s * 1_000_000_000, 1).settled(start);
        assert!(coarse(8));
        assert!(!coarse(9), "whole-second stamps need git's 2 s");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stat-cache.bin");
        let racy = key(40, 99_990_000_001, 99_990_000_001, 9);
        let keys = Keys::of([("done/a.yaml", racy)]);
        save(&path, &keys);
        assert!(StatCache::read(&path, 7)
            .take("done/a.yaml", &racy)
            .is_none());
    }

    const READY: &str = "title: r\ncoord:\n  state: ready\n  attempt: 0\n";

    /// Returns a board of `files` (work-relative path and text) and the agent bot's profile.
    fn board_of(files: &[(&str, &str)]) -> Board {
        let raw =
            |rel: &str, text: &str| RawFile::new(rel.to_string(), Ok(text.as_bytes().to_vec()));
        let mut raws: Vec<RawFile> = files.iter().map(|(rel, text)| raw(rel, text)).collect();
        raws.push(raw("agents/bot.yaml", PROFILE));
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        Board::build("work", raws, vec![], (&t, &a), &Limits::default())
    }

    /// Takes `files` (work-relative path and key) from the cache at `path` in walk order and
    /// saves it for the board `b` at the snapshot time `start`, as a load does; returns which
    /// were hits, in walk order.
    fn load_and_save(
        path: &Path,
        files: &[(&str, StatKey)],
        b: &Board,
        start: SystemTime,
    ) -> Vec<bool> {
        let mut sorted = files.to_vec();
        sorted.sort_by(|a, b| walk_order(a.0, b.0));
        let mut cache = StatCache::read(path, 7);
        let hits = sorted.iter().map(|(rel, k)| cache.take(rel, k).is_some());
        let hits: Vec<bool> = hits.collect();
        let mut keys = Keys::default();
        sorted.iter().for_each(|(rel, k)| keys.push(rel, *k));
        cache
            .used()
            .save(path, (&b.tasks, &b.agents), "work", &keys, start);
        hits
    }

    /// Returns the inode and mtime of each file of the cache at `path` (the main file, then
    /// `done.bin` and `archive-2026-07.bin`; None for one that is absent): a file written
    /// again is a new inode.
    fn stamps(path: &Path) -> [Option<(u64, SystemTime)>; 3] {
        use std::os::unix::fs::MetadataExt;
        let d = folders_dir(path);
        [
            path.to_path_buf(),
            d.join("done.bin"),
            d.join("archive-2026-07.bin"),
        ]
        .map(|p| {
            fs::metadata(p)
                .ok()
                .and_then(|m| Some((m.ino(), m.modified().ok()?)))
        })
    }

    const HISTORY_AND_LIVE: [(&str, &str); 3] = [
        ("archive/2026-07/b.yaml", TEXT),
        ("done/a.yaml", TEXT),
        ("ready/r.yaml", READY),
    ];

    /// Every file of the board with the key `k`, `ready/r.yaml` with `r`.
    fn all_keys(k: StatKey, r: StatKey) -> [(&'static str, StatKey); 4] {
        [
            ("agents/bot.yaml", k),
            ("archive/2026-07/b.yaml", k),
            ("done/a.yaml", k),
            ("ready/r.yaml", r),
        ]
    }

    /// A history folder's file is read only when a path in that folder is asked for, and
    /// written only when that folder's entries changed: a load that asks for live paths alone
    /// reads and writes the main file alone, and leaves the other files as they are.
    #[test]
    fn a_folders_file_is_read_and_written_only_when_its_entries_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stat-cache.bin");
        let (k, r) = (
            key(40, 1_000_000_000, 1_000_000_001, 9),
            key(41, 1_000_000_000, 1_000_000_001, 10),
        );
        let b = board_of(&HISTORY_AND_LIVE);
        assert_eq!(
            load_and_save(&path, &all_keys(k, k), &b, later()),
            [false; 4]
        );
        assert_eq!(
            load_and_save(&path, &all_keys(k, k), &b, later()),
            [true; 4]
        );
        let written = stamps(&path);
        assert!(written.iter().all(Option::is_some), "{written:?}");
        let mut cache = StatCache::read(&path, 7);
        assert!(cache.take("agents/bot.yaml", &k).is_some());
        assert!(cache.take("ready/r.yaml", &k).is_some());
        assert!(
            cache.folders.is_empty(),
            "no history folder's file was read"
        );
        let hits = load_and_save(&path, &all_keys(k, r), &b, later());
        assert_eq!(hits, [true, true, true, false], "ready/r.yaml changed");
        let after = stamps(&path);
        assert_ne!(after[0], written[0], "the main file is written again");
        assert_eq!(
            after[1..],
            written[1..],
            "the history folders' files are left"
        );
        let live = [("agents/bot.yaml", k), ("ready/r.yaml", r)];
        assert_eq!(load_and_save(&path, &live, &b, later()), [true, true]);
        assert_eq!(
            stamps(&path),
            after,
            "nothing asked in a folder: its file is kept"
        );
    }

    /// A history folder's file is removed once its folder has no task left, whoever moved
    /// them; a file of no folder (a temporary file a killed run left) is removed too.
    #[test]
    fn a_folder_gone_loses_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stat-cache.bin");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let b = board_of(&HISTORY_AND_LIVE);
        load_and_save(&path, &all_keys(k, k), &b, later());
        let d = folders_dir(&path);
        for stray in ["done.1.coord-tmp", "junk", "archive-.bin"] {
            fs::write(d.join(stray), "x").expect("write");
        }
        let gone = board_of(&HISTORY_AND_LIVE[1..]);
        let [agents, _, done, ready] = all_keys(k, k);
        let hits = load_and_save(&path, &[agents, done, ready], &gone, later());
        assert_eq!(hits, [true; 3]);
        let [main, done_file, month] = stamps(&path);
        assert!(
            main.is_some() && done_file.is_some(),
            "the other files are kept"
        );
        assert_eq!(month, None, "the month's file is gone with its folder");
        let mut left: Vec<String> = fs::read_dir(&d)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
            .collect();
        left.sort();
        assert_eq!(left, ["done.bin"]);
    }

    /// A history folder a load holds as a block (no task of it on the board, none asked
    /// for) keeps its file, which it would lose as a folder with no task left.
    #[test]
    fn a_folder_held_as_a_block_keeps_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stat-cache.bin");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let b = board_of(&HISTORY_AND_LIVE);
        load_and_save(&path, &all_keys(k, k), &b, later());
        let before = stamps(&path);
        let live = board_of(&HISTORY_AND_LIVE[2..]);
        let [agents, _, _, ready] = all_keys(k, k);
        let mut cache = StatCache::read(&path, 7);
        assert!(cache.take(agents.0, &agents.1).is_some());
        assert!(cache.take(ready.0, &ready.1).is_some());
        let mut keys = Keys::default();
        keys.push(agents.0, agents.1);
        keys.push(ready.0, ready.1);
        let blocks = vec!["archive/2026-07".to_string(), "done".to_string()];
        cache.used().keeping(blocks).save(
            &path,
            (&live.tasks, &live.agents),
            "work",
            &keys,
            later(),
        );
        assert_eq!(
            stamps(&path)[1..],
            before[1..],
            "the blocks' files are kept"
        );
        assert!(before[1].is_some() && before[2].is_some());
    }

    /// The racy rule holds in each file: an entry whose stamps are too recent is left out of
    /// the main file and of a history folder's file alike, the others are kept.
    #[test]
    fn each_file_keeps_only_settled_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stat-cache.bin");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let racy = key(40, 99_990_000_001, 99_990_000_001, 9);
        let b = board_of(&HISTORY_AND_LIVE);
        let [agents, month, done, ready] = all_keys(k, racy);
        let files = [agents, (month.0, racy), done, ready];
        load_and_save(&path, &files, &b, later());
        let mut cache = StatCache::read(&path, 7);
        let hits = files.map(|(rel, key)| cache.take(rel, &key).is_some());
        assert_eq!(hits, [true, false, true, false]);
    }

    /// Loads the files `rels` of the work tree `work` (walk order; their keys as `lstat` gives
    /// them, their texts as read) with the cache at `path` and saves it, once the stamps are
    /// settled; returns which were hits.
    fn load_real(path: &Path, work: &Path, rels: &[&str]) -> Vec<bool> {
        std::thread::sleep(FINE_SETTLE * 2);
        let start = SystemTime::now();
        let key_of = |rel: &str| StatKey::of(&rustix::fs::lstat(work.join(rel)).expect("lstat"));
        let files: Vec<(&str, StatKey)> = rels.iter().map(|r| (*r, key_of(r))).collect();
        let tasks = rels.iter().filter(|r| !r.starts_with("agents/"));
        let texts: Vec<(&str, String)> = tasks
            .map(|r| (*r, fs::read_to_string(work.join(r)).expect("read")))
            .collect();
        let texts: Vec<(&str, &str)> = texts.iter().map(|(r, t)| (*r, t.as_str())).collect();
        load_and_save(path, &files, &board_of(&texts), start)
    }

    /// Moves the file `from` to `to` in `work` by a rename (the same inode), then writes
    /// `text` in place and sets its mtime to what `like` had: the file keeps the inode, size
    /// and mtime of the earlier version at `to`, and only its ctime tells it apart.
    fn move_back(work: &Path, (from, to): (&str, &str), text: &str, like: StatKey) {
        fs::rename(work.join(from), work.join(to)).expect("rename");
        fs::write(work.join(to), text).expect("write");
        let mtime = UNIX_EPOCH + Duration::from_nanos(like.mtime_ns as u64);
        let f = fs::File::options()
            .write(true)
            .open(work.join(to))
            .expect("open");
        f.set_times(fs::FileTimes::new().set_modified(mtime))
            .expect("set mtime");
        let now = StatKey::of(&rustix::fs::lstat(work.join(to)).expect("lstat"));
        assert_eq!(
            (now.size, now.mtime_ns, now.ino),
            (like.size, like.mtime_ns, like.ino)
        );
        assert_ne!(now.ctime_ns, like.ctime_ns);
    }

    /// A run killed between the writes of two cache files (or before removing one) leaves an
    /// entry of a task moved from `done/` to `ready/` and back in the file it no longer
    /// belongs to: it is never trusted for the file now at that path, which only its ctime
    /// tells apart (same inode, size and mtime), and the next loads come back to hits.
    #[test]
    fn a_kill_between_two_files_writes_trusts_no_entry_in_its_old_place() {
        use crate::fsx::inject::crash_on;
        let crashes = [
            Some(("stat-cache rename", 1)),
            Some(("stat-cache rename", 2)),
            Some(("stat-cache remove", 1)),
            None,
        ];
        for crash in crashes {
            let dir = tempfile::tempdir().expect("tempdir");
            let (work, path) = (dir.path().join("work"), dir.path().join("stat-cache.bin"));
            for folder in ["agents", "done", "ready"] {
                fs::create_dir_all(work.join(folder)).expect("mkdir");
            }
            fs::write(work.join("agents/bot.yaml"), PROFILE).expect("write");
            fs::write(work.join("done/a.yaml"), TEXT).expect("write");
            let in_done = ["agents/bot.yaml", "done/a.yaml"];
            let in_ready = ["agents/bot.yaml", "ready/a.yaml"];
            assert_eq!(load_real(&path, &work, &in_done), [false, false]);
            assert_eq!(load_real(&path, &work, &in_done), [true, true]);
            let done_key =
                StatKey::of(&rustix::fs::lstat(work.join("done/a.yaml")).expect("lstat"));
            fs::rename(work.join("done/a.yaml"), work.join("ready/a.yaml")).expect("rename");
            fs::write(work.join("ready/a.yaml"), READY).expect("write");
            crash_on(crash);
            assert_eq!(
                load_real(&path, &work, &in_ready),
                [true, false],
                "{crash:?}"
            );
            crash_on(None);
            let ready_key =
                StatKey::of(&rustix::fs::lstat(work.join("ready/a.yaml")).expect("lstat"));
            move_back(&work, ("ready/a.yaml", "done/a.yaml"), TEXT, done_key);
            crash_on(crash);
            let hits = load_real(&path, &work, &in_done);
            crash_on(None);
            assert_eq!(hits, [true, false], "back in done/ after {crash:?}");
            move_back(&work, ("done/a.yaml", "ready/a.yaml"), READY, ready_key);
            let hits = load_real(&path, &work, &in_ready);
            assert_eq!(hits, [true, false], "back in ready/ after {crash:?}");
            assert_eq!(load_real(&path, &work, &in_ready), [true, true]);
        }
    }

    /// Times, for a cache of `n` tasks (a fifth in `done/`, the rest but 200 in four archive
    /// months, 200 in `ready/`): a load that asks for every file, as a tick does while every
    /// history folder is walked file by file, and one that asks for the 200 live files alone
    /// (each changed, so the main file is written again), as once the history folders come
    /// from their record. Prints the medians; run by hand (docs/performance.md).
    #[test]
    #[ignore = "a measurement, run by hand: cargo test --release --lib -- --ignored --nocapture"]
    fn measure_a_load_asking_for_live_files_alone() {
        for n in [1_000, 100_000] {
            let (ready, done) = (200, n / 5);
            let month = (n - done - ready) / 4;
            let mut rels: Vec<String> = (0..done).map(|i| format!("done/d-{i:06}.yaml")).collect();
            for m in 7..11 {
                rels.extend((0..month).map(|i| format!("archive/2026-{m:02}/a-{i:06}.yaml")));
            }
            rels.extend((0..ready).map(|i| format!("ready/t-{i:06}.yaml")));
            let texts: Vec<(&str, &str)> = (rels.iter())
                .map(|r| {
                    (
                        r.as_str(),
                        if r.starts_with("ready/") { READY } else { TEXT },
                    )
                })
                .collect();
            let b = board_of(&texts);
            let (k, changed) = (
                key(40, 1_000_000_000, 1_000_000_001, 9),
                key(41, 1_000_000_000, 1_000_000_001, 9),
            );
            let all: Vec<(&str, StatKey)> = texts.iter().map(|(r, _)| (*r, k)).collect();
            let live: Vec<(&str, StatKey)> = (all.iter())
                .filter(|(r, _)| r.starts_with("ready/"))
                .map(|(r, _)| (*r, changed))
                .collect();
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("stat-cache.bin");
            let time = |files: &[(&str, StatKey)], reset: &dyn Fn()| {
                let mut times: Vec<Duration> = (0..9)
                    .map(|_| {
                        reset();
                        let at = std::time::Instant::now();
                        load_and_save(&path, files, &b, later());
                        at.elapsed()
                    })
                    .collect();
                times.sort();
                times[4]
            };
            let warm = || {
                load_and_save(&path, &all, &b, later());
            };
            let every = time(&all, &warm);
            let alone = time(&live, &warm);
            println!("{n} tasks: every file asked {every:?}, live files alone {alone:?}");
        }
    }
}
