//! The stat cache: what reading a file of `work/` gave, kept in `.git/coord/stat-cache.bin`
//! and keyed by the file's repo-relative path, size, mtime, ctime, inode and device, so a tick
//! over thousands of unchanged files neither reads nor checks them again. For a task file it
//! keeps the text, content hash and the summary planning reads of every task (the rest is
//! parsed from the text when used); for an agent profile, the text that passed the profile
//! schema.
//!
//! An entry is trusted only while every part of its key still matches the file, and an entry
//! is written only for a file whose mtime and ctime are older than the snapshot by more than
//! the filesystem's timestamp granularity (git's "racy clean" rule): a later change to such a
//! file always gets a ctime the entry does not have, even when its size and mtime are kept.
//! Only files outside `inbox/` that passed the per-file checks are cached, under a salt of
//! coord's version and the repo's task schema, so a new schema re-checks everything. The file
//! is one length-prefixed encoding with a checksum of its body: a missing, unreadable or
//! corrupt cache only means a full read. Does file I/O under `.git/coord/` only.

use super::settle::Written;
use crate::board::{AgentEntry, ProfileFile, TaskFile};
use crate::check::{Summary, Waiting};
use crate::model::{AgentName, Priority, State, TaskId};
use crate::text::{CacheFile, Stored, StoredRun, Text};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The cache file, relative to the git directory.
pub const PATH: &str = "coord/stat-cache.bin";

/// The first bytes of the cache file: its format and version.
const MAGIC: &[u8] = b"coord stat-cache 6\n";

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

/// The cache as read at the start of a load, consumed in walk order, and what the load used
/// of it.
pub struct StatCache {
    salt: u64,
    /// The cache file's index (every entry but the texts); empty when the file was absent,
    /// corrupt or of another salt.
    bytes: Vec<u8>,
    /// The cache file, open: hits' texts are read from it when used.
    file: Option<Arc<CacheFile>>,
    /// Where its text part starts.
    texts_at: u64,
    /// Where the next unvisited entry starts in `bytes`.
    next: usize,
    /// How many entries are not visited yet.
    left: usize,
    /// How many entries were hits.
    hits: usize,
    /// Whether the file must be written again whole (it was absent, corrupt or of another
    /// salt, or an entry did not decode).
    stale: bool,
    /// How many entries were dropped (their files changed or went away).
    dropped: usize,
}

/// A load of a big board leaves the cache as it is when the entries it missed or dropped are
/// at most this share of its hits (1 / this): those few files are read from disk again by the
/// next loads, instead of every single-task command rewriting megabytes for one moved file.
const REWRITE_SHARE: usize = 256;

/// What a load used of the cache once it has taken every file it could: enough to write the
/// new cache, without the old file's index bytes (dropped once the load has taken every
/// file; the texts stay in the old file, which the board's stored texts keep open).
pub struct Used {
    salt: u64,
    /// How many entries were hits.
    hits: usize,
    /// Whether every entry of the old file was a hit.
    all_hits: bool,
    /// Whether the file must be written again whole.
    stale: bool,
    /// How many entries of the old file were not hits.
    dropped: usize,
}

impl StatCache {
    /// Reads the cache at `path`; an absent, corrupt or differently salted file gives an empty one.
    pub fn read(path: &Path, salt: u64) -> StatCache {
        let mut cache = StatCache::empty(salt);
        cache.stale = false;
        if let Some(opened) = open(path, salt) {
            (cache.bytes, cache.next, cache.left) = (opened.index, COUNT, opened.count);
            let source = CacheFile::new(opened.file, path.to_path_buf());
            (cache.file, cache.texts_at) = (Some(Arc::new(source)), opened.texts_at);
        }
        cache
    }

    /// Returns an empty cache (a load that reads every file), which `save` rewrites in full.
    pub fn empty(salt: u64) -> StatCache {
        StatCache {
            salt,
            bytes: Vec::new(),
            file: None,
            texts_at: 0,
            next: 0,
            left: 0,
            hits: 0,
            stale: true,
            dropped: 0,
        }
    }

    /// Returns what the cache has of `rel` when its key still matches. Calls must come in
    /// walk order (`walk_order`): entries passed over belong to files that went away, and
    /// are dropped like a mismatching entry.
    pub fn take(&mut self, rel: &str, key: &StatKey) -> Option<Hit> {
        while self.left > 0 {
            let at = self.next;
            let Some((entry, len)) = entry_at(&self.bytes, at) else {
                (self.left, self.stale) = (0, true);
                return None;
            };
            match walk_order(entry.rel, rel) {
                Ordering::Greater => return None,
                Ordering::Less => self.dropped += 1,
                Ordering::Equal if entry.key != *key => self.dropped += 1,
                Ordering::Equal => {
                    let hit = self
                        .file
                        .as_ref()
                        .and_then(|f| entry.to_hit(f, self.texts_at));
                    (self.next, self.left) = (at + len, self.left - 1);
                    self.stale |= hit.is_none();
                    self.hits += usize::from(hit.is_some());
                    return hit;
                }
            }
            (self.next, self.left) = (at + len, self.left - 1);
        }
        None
    }

    /// Ends the reading: drops the index's bytes and keeps what `Used::save` needs (the
    /// hits' texts still read from the open file).
    pub fn used(self) -> Used {
        Used {
            salt: self.salt,
            hits: self.hits,
            all_hits: !self.stale && self.left == 0 && self.dropped == 0,
            stale: self.stale,
            dropped: self.dropped + self.left,
        }
    }
}

/// The stat key of every file a load may keep in the new cache (its hits and the files it
/// read from disk), work-relative, in walk order: pushed as the walk's files are taken, looked
/// up in that order when the cache is written ([`KeysInOrder`]; no hash map of every hit's
/// path).
#[derive(Debug, Default)]
pub struct Keys(Vec<(String, StatKey)>);

impl Keys {
    /// Returns an empty list with room for `n` files.
    pub fn with_capacity(n: usize) -> Keys {
        Keys(Vec::with_capacity(n))
    }

    /// Adds the key of `rel`, which comes after every path added before in walk order.
    pub fn push(&mut self, rel: &str, key: StatKey) {
        debug_assert!(self
            .0
            .last()
            .is_none_or(|(last, _)| walk_order(last, rel) == Ordering::Less));
        self.0.push((rel.to_string(), key));
    }

    /// Returns how many files have a key.
    pub fn len(&self) -> usize {
        self.0.len()
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
        let mut keys: Vec<(String, StatKey)> =
            files.iter().map(|(r, k)| (r.to_string(), *k)).collect();
        keys.sort_by(|a, b| walk_order(&a.0, &b.0));
        Keys(keys)
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
        let keys = &self.keys.0;
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

impl Used {
    /// Writes the cache for the task files and agent profiles of a load that passed the
    /// per-file checks, whose key is in `keys` (every hit's and every file read from disk,
    /// work-relative) and settled at `start`. Does nothing when every entry was a hit and no
    /// file was read from disk, nor when the entries missed and dropped are few next to the
    /// hits ([`REWRITE_SHARE`]). The file is written entry by entry as it is encoded, never
    /// whole in memory. Failures are ignored: the cache is only ever an optimisation.
    pub fn save(
        self,
        path: &Path,
        (tasks, agents): (&[TaskFile], &BTreeMap<AgentName, AgentEntry>),
        work_dir: &str,
        keys: &Keys,
        start: SystemTime,
    ) {
        let missed = keys.len().saturating_sub(self.hits);
        if !self.stale && (self.dropped + missed) * REWRITE_SHARE <= self.hits {
            return;
        }
        let prefix = format!("{work_dir}/");
        let keys = keys.in_order();
        let settled = |path| settled_key(path, &prefix, &keys, start);
        let task_entries = tasks.iter().filter_map(|t| {
            let task = t.read.as_ref().ok()?;
            Some((settled(&t.path)?, Source::Task(t.hash, task)))
        });
        let profile_entries = agents.values().filter_map(|a| {
            let file = a.file.as_ref()?;
            Some((settled(&file.path)?, Source::Profile(file)))
        });
        let mut entries: Vec<((&str, StatKey), Source<'_>)> =
            task_entries.chain(profile_entries).collect();
        entries.sort_by(|a, b| walk_order(a.0 .0, b.0 .0));
        if self.all_hits && entries.len() == self.hits {
            return;
        }
        let count = entries.len();
        let entries = || {
            entries
                .iter()
                .map(|((rel, key), source)| entry_of(rel, *key, source))
        };
        let written = write_file(path, self.salt, count, entries);
        if written.is_err() {
            let _ = fs::remove_file(temp_path(path));
        }
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
    path.with_extension(format!(
        "{}{}",
        std::process::id(),
        super::fsutil::TEMP_SUFFIX
    ))
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
        }
    }
    out.extend_from_slice(&text_at.to_le_bytes());
    out.extend_from_slice(&(e.text.len() as u64).to_le_bytes());
}

/// Returns a 64-bit checksum of `bytes` (see [`Sum`]).
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut sum = Sum::new();
    sum.add(bytes);
    sum.finish()
}

/// A 64-bit checksum taken over bytes given in any number of parts, eight bytes at a time (a
/// rotate, xor and multiply by an odd constant per word, each step invertible, so changing
/// any one word always changes the result), the length last. Fast over megabytes; not meant
/// to resist anyone choosing the bytes, and coord's own files under `.git/coord/` are all it
/// checks.
pub struct Sum {
    h: u64,
    len: u64,
    /// The bytes of a word not complete yet.
    part: [u8; 8],
    filled: usize,
}

impl Sum {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;

    /// Returns the sum of no bytes.
    pub fn new() -> Sum {
        Sum {
            h: Self::K,
            len: 0,
            part: [0; 8],
            filled: 0,
        }
    }

    fn mix(&mut self, word: u64) {
        self.h = (self.h.rotate_left(23) ^ word).wrapping_mul(Self::K);
    }

    /// Adds the next bytes.
    pub fn add(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        while !bytes.is_empty() {
            if self.filled == 0 {
                // Whole words straight from the bytes (no copy through `part`).
                let words = bytes.chunks_exact(8);
                let rest = words.remainder();
                for word in words {
                    self.mix(u64::from_le_bytes(word.try_into().expect("8 bytes")));
                }
                bytes = rest;
                if bytes.is_empty() {
                    break;
                }
            }
            let n = (8 - self.filled).min(bytes.len());
            self.part[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
            (self.filled, bytes) = (self.filled + n, &bytes[n..]);
            if self.filled == 8 {
                self.mix(u64::from_le_bytes(self.part));
                self.filled = 0;
            }
        }
    }

    /// Returns the sum of the bytes added.
    pub fn finish(mut self) -> u64 {
        self.part[self.filled..].fill(0);
        self.mix(u64::from_le_bytes(self.part));
        self.mix(self.len);
        self.h ^ (self.h >> 29)
    }
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
/// and its fields (optional strings, then the two lists as a count and strings).
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
}

fn put_list<'s>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = &'s str>) {
    out.extend_from_slice(&(items.len() as u64).to_le_bytes());
    items.for_each(|s| put_str(out, s));
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
    Some(Some(Waiting {
        priority,
        due,
        created_at,
        not_before,
        agent,
        capabilities,
        depends_on: depends_on.collect::<Result<_, _>>().ok()?,
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
    let mut file = fs::File::open(path).ok()?;
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
    let mut bytes = format!("stat-cache 2 coord {}", env!("CARGO_PKG_VERSION")).into_bytes();
    bytes.push(0);
    bytes.extend_from_slice(schema);
    crate::board::content_hash(&bytes)
}

/// Returns whether the cache at `path` was written under `salt`, reading only its header: a
/// cache is written only after its schema compiled, so this proves the schema compiles.
pub fn written_under(path: &Path, salt: u64) -> bool {
    use std::io::Read;
    let mut header = [0u8; MAGIC.len() + 8];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
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
        assert!(cache.take("done/a.yaml", &k).is_some());
        assert!(
            cache.take("agents/bot.yaml", &k).is_none(),
            "an entry before the last taken one is gone"
        );
        assert_eq!(cache.dropped, 1, "the profile's entry was dropped");
    }

    proptest::proptest! {
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

    #[test]
    fn other_salt_corrupt_or_missing_file_is_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        assert!(StatCache::read(&path, 8).take("done/a.yaml", &k).is_none());
        let whole = std::fs::read(&path).expect("read");
        let longer = [&whole[..], b"x"].concat();
        for (bytes, why) in [
            (&whole[..whole.len() - 1], "truncated"),
            (&longer[..], "a byte more"),
        ] {
            std::fs::write(&path, bytes).expect("write");
            assert!(
                StatCache::read(&path, 7).take("done/a.yaml", &k).is_none(),
                "{why}"
            );
        }
        let mut flipped = whole.clone();
        flipped[HEADER + 10] ^= 1;
        std::fs::write(&path, &flipped).expect("write");
        assert!(
            StatCache::read(&path, 7).take("done/a.yaml", &k).is_none(),
            "a flipped byte in the index breaks its checksum"
        );
        let absent = dir.path().join("none.json");
        assert!(StatCache::read(&absent, 7)
            .take("done/a.yaml", &k)
            .is_none());
    }

    /// A text is read from the cache file only when used: a byte flipped in the text part is
    /// found then (the entry's hash), the task does not parse from it, and the cache file is
    /// removed so that the next load reads the file itself again.
    #[test]
    fn a_damaged_text_is_found_when_read_and_forgets_the_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        let mut flipped = std::fs::read(&path).expect("read");
        let last = flipped.len() - 2;
        flipped[last] ^= 1;
        std::fs::write(&path, &flipped).expect("write");
        let (summary, text, _) = task_of(StatCache::read(&path, 7).take("done/a.yaml", &k));
        let task = crate::check::Task::unparsed(text, summary);
        assert_eq!(task.spec.title, "", "no task parsed from damaged bytes");
        assert!(!path.exists(), "the cache file is gone");
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
            cached: Some(crate::board::Cached::Task(task, hash)),
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
    fn checksum_changes_with_any_byte_and_the_length() {
        let base: Vec<u8> = (0..37u8).collect();
        let sum = checksum(&base);
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i] ^= 0x40;
            assert_ne!(checksum(&changed), sum, "byte {i}");
        }
        assert_ne!(checksum(&base[..36]), sum);
        assert_ne!(checksum(&[0; 8]), checksum(&[0; 16]));
    }

    proptest::proptest! {
        #[test]
        fn a_sum_taken_in_parts_is_the_sum_of_the_whole(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            cuts in proptest::collection::vec(0usize..64, 0..5),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut sum = Sum::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                sum.add(&bytes[from..cut]);
                from = cut;
            }
            proptest::prop_assert_eq!(sum.finish(), checksum(&bytes));
        }
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
}
