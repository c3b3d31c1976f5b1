//! The stat cache: what reading a task file gave (its text, content hash and the summary
//! planning reads of every task; the rest is parsed from the text when used), kept in
//! `.git/coord/stat-cache.bin` (a plain length-prefixed encoding, so reading it is little more
//! than copying the texts) and keyed by the file's repo-relative path, size, mtime, ctime,
//! inode and device, so a tick over thousands of unchanged files does not parse them again.
//!
//! An entry is trusted only while every part of its key still matches the file, and an entry
//! is written only for a file whose mtime and ctime are older than the snapshot by more than
//! the filesystem's timestamp granularity (git's "racy clean" rule): a later change to such a
//! file always gets a ctime the entry does not have, even when its size and mtime are kept.
//! Only files outside `inbox/` that passed the per-file checks are cached, under a salt of
//! coord's version and the repo's task schema, so a new schema re-checks everything. A
//! missing, unreadable or corrupt cache (an entry whose text does not have its hash) only
//! means a full read. Does file I/O under `.git/coord/` only.

use crate::board::{content_hash, TaskFile};
use crate::check::Summary;
use crate::model::AgentName;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The cache file's name under `.git/coord/`.
pub const CACHE_FILE: &str = "stat-cache.bin";

/// The first bytes of the cache file: its format and version.
const MAGIC: &[u8] = b"coord stat-cache 2\n";

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
    /// Returns the key of a file's metadata (as `symlink_metadata` gives it).
    pub fn of(meta: &fs::Metadata) -> StatKey {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        StatKey {
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
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

struct Entry {
    key: StatKey,
    hash: u64,
    text: String,
    summary: Summary,
}

struct EntryRef<'a> {
    key: StatKey,
    hash: u64,
    text: &'a str,
    summary: &'a Summary,
}

/// The cache as read at the start of a load, and what the load used of it.
pub struct StatCache {
    salt: u64,
    entries: HashMap<String, Entry>,
    hits: usize,
    stale: bool,
}

impl StatCache {
    /// Reads the cache at `path`; an absent, corrupt or differently salted file gives an empty one.
    pub fn read(path: &Path, salt: u64) -> StatCache {
        let entries = fs::read(path)
            .ok()
            .and_then(|b| decode(&b, salt))
            .unwrap_or_default();
        StatCache {
            salt,
            entries,
            hits: 0,
            stale: false,
        }
    }

    /// Returns an empty cache (a load that reads every file), which `save` rewrites in full.
    pub fn empty(salt: u64) -> StatCache {
        StatCache {
            salt,
            entries: HashMap::new(),
            hits: 0,
            stale: true,
        }
    }

    /// Returns the cached text and summary of `rel` when its key still matches (and the text
    /// its hash), taking it out of the cache; a mismatching entry is dropped.
    pub fn take(&mut self, rel: &str, key: &StatKey) -> Option<(String, Summary)> {
        let entry = self.entries.remove(rel)?;
        if entry.key == *key && content_hash(entry.text.as_bytes()) == entry.hash {
            self.hits += 1;
            Some((entry.text, entry.summary))
        } else {
            self.stale = true;
            None
        }
    }

    /// Writes the cache for the task files of a load whose key is known and settled at
    /// `start`; does nothing when every entry was a hit and none went away. Failures are
    /// ignored: the cache is only ever an optimisation.
    pub fn save(
        self,
        path: &Path,
        tasks: &[TaskFile],
        work_dir: &str,
        keys: &HashMap<String, StatKey>,
        start: SystemTime,
    ) {
        let prefix = format!("{work_dir}/");
        let entries: BTreeMap<&str, EntryRef<'_>> = tasks
            .iter()
            .filter_map(|t| {
                let task = t.read.as_ref().ok()?;
                let rel = t.path.strip_prefix(&prefix)?;
                if rel.starts_with("inbox/") {
                    return None;
                }
                let key = *keys.get(rel)?;
                key.settled(start).then_some((
                    rel,
                    EntryRef {
                        key,
                        hash: t.hash,
                        text: task.text(),
                        summary: task.summary(),
                    },
                ))
            })
            .collect();
        if !self.stale && self.entries.is_empty() && entries.len() == self.hits {
            return;
        }
        let text = encode(self.salt, &entries);
        let tmp = path.with_extension(format!(
            "{}{}",
            std::process::id(),
            super::fsutil::TEMP_SUFFIX
        ));
        let written = path.parent().is_some_and(|d| fs::create_dir_all(d).is_ok())
            && fs::write(&tmp, &text).is_ok()
            && fs::rename(&tmp, path).is_ok();
        if !written {
            let _ = fs::remove_file(&tmp);
        }
    }
}

/// Encodes the cache: magic, salt, entry count, then per entry its path, key, hash, summary
/// and text; integers little-endian, strings length-prefixed.
fn encode(salt: u64, entries: &BTreeMap<&str, EntryRef<'_>>) -> Vec<u8> {
    let size: usize = entries
        .iter()
        .map(|(r, e)| r.len() + e.text.len() + 128)
        .sum();
    let mut out = Vec::with_capacity(MAGIC.len() + 16 + size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&salt.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (rel, e) in entries {
        put_str(&mut out, rel);
        for n in [e.key.size, e.key.ino, e.key.dev, e.hash] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for t in [e.key.mtime_ns, e.key.ctime_ns] {
            out.extend_from_slice(&t.to_le_bytes());
        }
        put_str(&mut out, &e.summary.state);
        put_opt(
            &mut out,
            e.summary.assigned_to.as_ref().map(AgentName::as_str),
        );
        put_opt(&mut out, e.summary.idempotency_key.as_deref());
        put_str(&mut out, e.text);
    }
    out
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

/// Decodes what `encode` wrote under `salt`; anything else (other salt, truncated, trailing
/// bytes, bad UTF-8 or agent name) gives `None`.
fn decode(bytes: &[u8], salt: u64) -> Option<HashMap<String, Entry>> {
    let mut r = Reader(bytes.strip_prefix(MAGIC)?);
    if r.u64()? != salt {
        return None;
    }
    let count = usize::try_from(r.u64()?).ok()?;
    let mut entries = HashMap::with_capacity(count.min(bytes.len() / 64));
    for _ in 0..count {
        let rel = r.str()?.to_string();
        let (size, ino, dev, hash) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let (mtime_ns, ctime_ns) = (r.i128()?, r.i128()?);
        let state = r.str()?.to_string();
        let assigned_to = match r.opt()? {
            Some(a) => Some(AgentName::new(a).ok()?),
            None => None,
        };
        let idempotency_key = r.opt()?.map(str::to_string);
        let text = r.str()?.to_string();
        let key = StatKey {
            size,
            mtime_ns,
            ctime_ns,
            ino,
            dev,
        };
        let summary = Summary {
            state,
            assigned_to,
            idempotency_key,
        };
        entries.insert(
            rel,
            Entry {
                key,
                hash,
                text,
                summary,
            },
        );
    }
    r.0.is_empty().then_some(entries)
}

/// The unread rest of the cache file.
struct Reader<'b>(&'b [u8]);

impl<'b> Reader<'b> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    fn i128(&mut self) -> Option<i128> {
        self.take().map(i128::from_le_bytes)
    }

    fn str(&mut self) -> Option<&'b str> {
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
}

/// Returns the salt of the cache: coord's version and the bytes of the repo's task schema.
pub fn salt(schema_file: &Path) -> u64 {
    let mut bytes = format!("stat-cache 2 coord {}", env!("CARGO_PKG_VERSION")).into_bytes();
    bytes.push(0);
    bytes.extend(fs::read(schema_file).unwrap_or_default());
    crate::board::content_hash(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{Board, RawFile};
    use crate::schema::Schema;
    use crate::yaml::Limits;

    const TEXT: &str = "title: a\ncoord:\n  state: done\n  attempt: 1\n";

    fn board(text: &str) -> Board {
        let raw = RawFile {
            rel: "done/a.yaml".to_string(),
            bytes: Ok(text.as_bytes().to_vec()),
            seen_before: false,
            parsed: None,
        };
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        Board::build("work", vec![raw], vec![], (&t, &a), &Limits::default())
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
        let path = dir.join(CACHE_FILE);
        let keys = HashMap::from([("done/a.yaml".to_string(), k)]);
        StatCache::read(&path, 7).save(&path, &board(TEXT).tasks, "work", &keys, later());
        path
    }

    #[test]
    fn hit_when_the_key_matches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key(40, 1_000_000_000, 1_000_000_001, 9);
        let path = saved(dir.path(), k);
        let mut cache = StatCache::read(&path, 7);
        let (text, summary) = cache.take("done/a.yaml", &k).expect("hit");
        assert_eq!(text, TEXT);
        assert_eq!(summary.state, "done");
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
        std::fs::write(&path, &whole[..whole.len() - 1]).expect("write");
        assert!(StatCache::read(&path, 7).take("done/a.yaml", &k).is_none());
        let mut flipped = whole.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 1;
        std::fs::write(&path, &flipped).expect("write");
        assert!(
            StatCache::read(&path, 7).take("done/a.yaml", &k).is_none(),
            "text that lost its hash"
        );
        let absent = dir.path().join("none.json");
        assert!(StatCache::read(&absent, 7)
            .take("done/a.yaml", &k)
            .is_none());
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
        let path = dir.path().join(CACHE_FILE);
        let racy = key(40, 99_990_000_001, 99_990_000_001, 9);
        let keys = HashMap::from([("done/a.yaml".to_string(), racy)]);
        StatCache::read(&path, 7).save(&path, &board(TEXT).tasks, "work", &keys, later());
        assert!(StatCache::read(&path, 7)
            .take("done/a.yaml", &racy)
            .is_none());
    }
}
