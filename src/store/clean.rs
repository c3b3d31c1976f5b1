//! The clean mark: a digest of what `work/` and the repository looked like when a status scan
//! last found no uncommitted change under `work/`, kept in the clean section of coord's
//! private index (`private`). When the next tick computes the same digest, nothing a scan
//! depends on has changed, so it skips the scan (libgit2's walk with an lstat per file and a
//! check of the whole index) — the way git trusts an index entry whose stat data still
//! matches the file.
//!
//! The digest covers every path the load's walk saw under `work/` with its stat key (the same
//! key the stat cache trusts, under the same racy-timestamp rule), HEAD's commit, the index's
//! checksum, and the stat keys of the git config and attribute files. It is taken from a walk
//! made before the scan and from HEAD and the index read before the scan, so any change made
//! during or after the scan changes the next digest. No mark is made when the walk could not
//! vouch for every file (a stamp too recent to trust, a file that vanished, a folder deeper
//! than task files sit) or when an ignored file lies under `work/` (a change to ignore rules
//! alone could reveal it).
//!
//! The clean mark goes stale as soon as coord itself commits (HEAD, the index and the files
//! it wrote change), so an operation whose recording found `work/` clean also leaves a
//! [`Vouch`] (the index's vouch section) after its own commits: a digest of its walk's files
//! other than those it committed, each committed path with the blob id its index write
//! staged, and HEAD, the index checksum and the watched files' stat keys as its writes left
//! them. The next operation (a command, a tick, the next window of a tick) is clean without a
//! scan when HEAD, the index and those files are so, every other file is listed with the same
//! trusted stat key (none added, none gone), and every committed file holds the staged bytes.
//! A vouch is left only when HEAD and the index moved by coord's own commits and index writes
//! alone since the recording read them (checked under git's index lock before each commit).
//! Does file I/O under `.git/` and reads committed files under `work/`.

use super::cache::StatKey;
use super::private::{self, Section};
use super::Session;
use crate::git::EntryStat;
use crate::git::{Oid, Staged};
use crate::hash::{checksum, mixed};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::SystemTime;

/// Files outside `work/` whose change can change what a status scan reports (git config and
/// attributes; ignore rules are covered by refusing a mark when any file under `work/` is
/// ignored): relative to the work tree root.
const WATCHED_IN_TREE: [&str; 1] = [".gitattributes"];
/// The same, relative to the git directory a linked work tree shares with its main one.
const WATCHED_IN_COMMON_DIR: [&str; 2] = ["config", "info/attributes"];
/// The same, relative to the work tree's own git directory (`extensions.worktreeConfig`).
const WATCHED_IN_GIT_DIR: [&str; 1] = ["config.worktree"];

/// What the marks read of a listing ([`Listing::read_by_marks`]).
#[cfg(test)]
pub(super) type ReadByMarks<'l> = (
    Option<u64>,
    &'l [(u64, Option<u64>)],
    &'l [Option<EntryStat>],
);

/// Every path a load's walk saw under `work/`, with its stat key, digested as it comes.
#[derive(Debug)]
pub struct Listing {
    start: SystemTime,
    digest: u64,
    /// One entry's bytes, reused.
    entry: Vec<u8>,
    complete: bool,
    /// Whether the walk entered every folder.
    entered: bool,
    /// Per file, the checksums of its path and of its entry (None when its stamp is too
    /// recent to trust), for comparing the walks of two windows ([`Vouch`]).
    files: Vec<(u64, Option<u64>)>,
    /// Per file (as `files`), its stat data as an index entry keeps it (None when it
    /// vanished), for telling whether the index still describes it (`Store::clean_by_index`).
    stats: Vec<Option<EntryStat>>,
    /// Whether the walk met a symlink.
    linked: bool,
}

impl Listing {
    /// Starts a listing for a walk that began at `start`.
    pub fn new(start: SystemTime) -> Listing {
        Listing {
            start,
            digest: 0,
            entry: Vec::new(),
            complete: true,
            entered: true,
            files: Vec::new(),
            stats: Vec::new(),
            linked: false,
        }
    }

    /// Returns the checksum a walk's listing gives the file `rel` (work-relative) with the
    /// settled stat key `key` (as [`Listing::file`] computes it).
    fn file_entry(rel: &str, key: &StatKey) -> u64 {
        let mut listing = Listing::new(SystemTime::UNIX_EPOCH);
        listing.start_entry(rel, b'f');
        key.write_to(&mut listing.entry);
        checksum(&listing.entry)
    }

    /// Adds a file with its stat key; a file without one (it vanished) or with a stamp too
    /// recent to trust makes the listing unable to vouch for the folder.
    pub fn file(&mut self, rel: &str, key: Option<&StatKey>) {
        self.start_entry(rel, b'f');
        let settled = match key {
            Some(k) if k.settled(self.start) => {
                k.write_to(&mut self.entry);
                true
            }
            _ => false,
        };
        self.complete &= settled;
        let entry = self.add_entry();
        self.files
            .push((checksum(rel.as_bytes()), settled.then_some(entry)));
        self.stats.push(key.map(StatKey::entry_stat));
    }

    /// Returns the checksums of the path and of the entry that [`Listing::file`] adds for
    /// the file `rel` with the settled stat key `key`: kept in the history-folder record for
    /// a folder a walk takes whole ([`Listing::file_summed`]).
    pub fn sums_of(rel: &str, key: &StatKey) -> (u64, u64) {
        (checksum(rel.as_bytes()), Listing::file_entry(rel, key))
    }

    /// Adds a file with a stat key settled at the walk's start, as [`Listing::file`] does,
    /// from the checksums [`Listing::sums_of`] gave for it (no path made, nothing
    /// checksummed again).
    pub fn file_summed(&mut self, (path, entry): (u64, u64), key: &StatKey) {
        self.chain(entry);
        self.files.push((path, Some(entry)));
        self.stats.push(Some(key.entry_stat()));
    }

    /// Makes room for `more` files (a walk knows how many a folder holds before it adds
    /// them: growing one at a time copies every entry again each time the room doubles).
    pub fn reserve(&mut self, more: usize) {
        self.files.reserve(more);
        self.stats.reserve(more);
    }

    /// Adds a symlink (refused, never followed, so only its name counts).
    pub fn symlink(&mut self, rel: &str) {
        self.start_entry(rel, b'l');
        let entry = self.add_entry();
        self.files.push((checksum(rel.as_bytes()), Some(entry)));
        self.stats.push(None);
        self.linked = true;
    }

    fn start_entry(&mut self, rel: &str, kind: u8) {
        self.entry.clear();
        self.entry.extend_from_slice(rel.as_bytes());
        self.entry.push(0);
        self.entry.push(kind);
    }

    /// Chains the entry's checksum into the digest (so order counts, as in the walk);
    /// returns the entry's checksum.
    fn add_entry(&mut self) -> u64 {
        let entry = checksum(&self.entry);
        self.chain(entry);
        entry
    }

    fn chain(&mut self, entry: u64) {
        self.digest = (self.digest.rotate_left(29) ^ entry).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    /// Returns when the walk began: a stamp must be older than that to be trusted.
    pub fn start(&self) -> SystemTime {
        self.start
    }

    /// Notes a folder the walk did not enter: files in it are not listed.
    pub fn unwalked(&mut self) {
        self.complete = false;
        self.entered = false;
    }

    /// Returns what the clean mark, the vouch and the index check read of the listing: its
    /// digest, each file's checksums, each file's stat data.
    #[cfg(test)]
    pub(super) fn read_by_marks(&self) -> ReadByMarks<'_> {
        (self.digest(), &self.files, &self.stats)
    }

    /// Returns the digest, or None when the listing cannot vouch for every file.
    fn digest(&self) -> Option<u64> {
        self.complete.then_some(self.digest)
    }
}

/// Appends the stat keys of the files at `rels` under `root` (a zero byte for one that is
/// absent) to `out`; None when a stamp is too recent to trust at `start`.
pub(super) fn watched_keys(
    root: &Path,
    rels: &[&str],
    start: SystemTime,
    out: &mut Vec<u8>,
) -> Option<()> {
    for rel in rels {
        match rustix::fs::lstat(root.join(rel)) {
            Ok(st) => {
                let key = StatKey::of(&st);
                if !key.settled(start) {
                    return None;
                }
                key.write_to(out);
            }
            Err(_) => out.push(0),
        }
    }
    Some(())
}

/// HEAD's commit, the index checksum and the watched files' stat keys, read together: what
/// a status scan depends on besides the files under `work/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RepoState {
    head: Option<Oid>,
    index: [u8; 32],
    watched: Vec<u8>,
}

impl RepoState {
    /// Returns the state as bytes (the clean mark's and the vouch's encoding).
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(52 + self.watched.len());
        out.extend_from_slice(self.head.as_ref().map_or(&[][..], |oid| oid.as_bytes()));
        out.extend_from_slice(&self.index);
        out.extend_from_slice(&self.watched);
        out
    }
}

/// What an operation whose recording found `work/` clean keeps while it runs, to leave a
/// [`Vouch`] at its end: the files of the walk the recording was checked against, the
/// repository's state then (HEAD and the index moved on by coord's own commits and index
/// writes only), and each path coord committed since with the blob id its index write staged
/// (with the paths an earlier vouch could not yet trust by stat key).
#[derive(Debug)]
pub(super) struct Base {
    files: Vec<(u64, Option<u64>)>,
    /// What the digest of files an earlier vouch listed adds (an operation that carried
    /// that vouch without walking: [`Session::carry_vouch`]); 0 otherwise.
    carried: u64,
    state: RepoState,
    committed: Vec<(String, Option<Staged>)>,
}

/// What an operation whose recording found `work/` clean leaves for the next one in the
/// private index's vouch section, which then needs no status scan ([`Session::vouched`]): a
/// digest of its walk's files other than those it committed, the paths it committed with the
/// blob id staged for each (checked by content: their stamps are too recent to trust), and
/// HEAD, the index checksum and the watched files' stat keys as it left them.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Vouch {
    digest: u64,
    committed: Vec<(String, Option<Staged>)>,
    state: Vec<u8>,
}

impl Vouch {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.digest.to_le_bytes());
        out.extend_from_slice(&(self.committed.len() as u32).to_le_bytes());
        for (path, id) in &self.committed {
            out.extend_from_slice(&(path.len() as u32).to_le_bytes());
            out.extend_from_slice(path.as_bytes());
            match id {
                Some(staged) => {
                    out.push(1);
                    out.extend_from_slice(staged.id.as_bytes());
                    out.extend_from_slice(&staged.mode.to_le_bytes());
                }
                None => out.push(0),
            }
        }
        out.extend_from_slice(&self.state);
        out
    }

    /// Decodes a vouch section; None when it is not one (truncated).
    fn decode(bytes: &[u8]) -> Option<Vouch> {
        let mut rest = bytes;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
            rest = tail;
            Some(head)
        };
        let digest = u64::from_le_bytes(take(8)?.try_into().ok()?);
        let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
        let mut committed = Vec::new();
        for _ in 0..count {
            let len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
            let path = std::str::from_utf8(take(len)?).ok()?.to_string();
            let id = match take(1)? {
                [1] => Some(Staged {
                    id: Oid::from_bytes(take(20)?).ok()?,
                    mode: u32::from_le_bytes(take(4)?.try_into().ok()?),
                }),
                [0] => None,
                _ => return None,
            };
            committed.push((path, id));
        }
        Some(Vouch {
            digest,
            committed,
            state: rest.to_vec(),
        })
    }
}

impl Listing {
    /// Returns the digest of the listing's files other than those in `skip` (path checksums),
    /// chained in walk order; None when the walk did not enter every folder or one of those
    /// files has a stamp too recent to trust.
    fn digest_without(&self, skip: &HashSet<u64>) -> Option<u64> {
        digest_of(self.entered.then_some(&self.files[..])?, skip)
    }

    /// Returns a look-up of each file's stat data as an index entry keeps it, by path, and
    /// the number of files; None when the walk did not enter every folder or met a symlink.
    pub(super) fn stats_by_path(&self) -> Option<(StatsByPath<'_>, usize)> {
        if !self.entered || self.linked {
            return None;
        }
        let stats = StatsByPath {
            files: &self.files,
            stats: &self.stats,
            next: 0,
            by_path: None,
        };
        Some((stats, self.files.len()))
    }

    /// Returns the path checksums of the files whose stamps are too recent to trust.
    fn recent(&self) -> HashSet<u64> {
        recent_in(&self.files)
    }
}

/// The stat data of a walk's files by path, for paths asked in about the walk's order: the
/// index's order, which differs from it only where a folder's name is the start of a
/// sibling's (the walk goes through `bot/` before `bot-2/`, the index has `bot-2/` first).
/// Each path is compared with the file after the last one found; only a path that is not
/// that one is looked up in a map of every file, made at the first such miss (a map look-up
/// per entry was 6 % of a tick at 100,000 tasks).
pub(super) struct StatsByPath<'l> {
    /// The listing's files: the checksum of each path (and of its entry).
    files: &'l [(u64, Option<u64>)],
    /// Each file's stat data, as `files`.
    stats: &'l [Option<EntryStat>],
    /// Where the file after the last one found is.
    next: usize,
    /// Where each file is, by the checksum of its path; made at the first miss.
    by_path: Option<HashMap<u64, usize>>,
}

impl StatsByPath<'_> {
    /// Returns the stat data of the file at `rel` (work-relative) as an index entry keeps
    /// it; None when the walk did not list it or it vanished.
    pub(super) fn get(&mut self, rel: &[u8]) -> Option<EntryStat> {
        let sum = checksum(rel);
        let at = match self.files.get(self.next) {
            Some((path, _)) if *path == sum => self.next,
            _ => {
                let files = self.files;
                let by_path = self.by_path.get_or_insert_with(|| {
                    files
                        .iter()
                        .enumerate()
                        .map(|(i, (p, _))| (*p, i))
                        .collect()
                });
                *by_path.get(&sum)?
            }
        };
        self.next = at + 1;
        self.stats[at]
    }
}

/// Returns the vouch's digest of `files` other than those in `skip`: a sum of each entry's
/// mix, so that the order of the files does not count (each entry names its path) and an
/// operation that did not walk can take out the entries of the files it commits
/// ([`Session::carry_vouch`]).
fn digest_of(files: &[(u64, Option<u64>)], skip: &HashSet<u64>) -> Option<u64> {
    let mut digest = 0u64;
    for (path, entry) in files {
        if skip.contains(path) {
            continue;
        }
        digest = digest.wrapping_add(mixed((*entry)?));
    }
    Some(digest)
}

fn recent_in(files: &[(u64, Option<u64>)]) -> HashSet<u64> {
    files
        .iter()
        .filter(|(_, entry)| entry.is_none())
        .map(|(path, _)| *path)
        .collect()
}

impl Session<'_> {
    /// Returns the path checksums (relative to `work/`) of repo-relative `paths`.
    fn work_checksums<'p>(&self, paths: impl IntoIterator<Item = &'p String>) -> HashSet<u64> {
        let work = format!("{}/", self.work_dir());
        paths
            .into_iter()
            .filter_map(|p| p.strip_prefix(&work))
            .map(|rel| checksum(rel.as_bytes()))
            .collect()
    }

    /// Returns whether the vouch the last operation left holds for `listing`, the walk of
    /// this one: HEAD, the index and the watched files are as it left them, every file it did
    /// not commit is listed with the same trusted stat key (none added, none gone), and every
    /// file it committed holds the bytes its index write staged (or is absent from both).
    /// What a status scan would report, without reading every file's stat data against the
    /// index. `state` is the repository's, read after the walk. Returns the committed paths
    /// whose stamps are still too recent to trust or that still settle (the next vouch
    /// checks them by content again).
    pub(super) fn vouched(
        &self,
        listing: &Listing,
        state: &RepoState,
    ) -> Option<Vec<(String, Option<Staged>)>> {
        let bytes = private::section(self.repo.git_dir(), Section::Vouch)?;
        let vouch = Vouch::decode(&bytes)?;
        if state.bytes() != vouch.state {
            return None;
        }
        let committed = self.work_checksums(vouch.committed.iter().map(|(p, _)| p));
        if listing.digest_without(&committed)? != vouch.digest
            || !self.hold_what_is_staged(&vouch.committed)
        {
            return None;
        }
        let recent = listing.recent();
        let work = format!("{}/", self.work_dir());
        let settle = self.settle_rule(&self.seen_complete);
        let carried = vouch.committed.into_iter().filter(|(p, _)| {
            let recent = p
                .strip_prefix(&work)
                .is_some_and(|rel| recent.contains(&checksum(rel.as_bytes())));
            recent || self.settling(p, &settle)
        });
        Some(carried.collect())
    }

    /// Returns whether the file at `path` (repo-relative) is still inside the settle window:
    /// a load will ask whether it is committed as it is, which the vouch's list answers
    /// without reading the index ([`Session::staged_by_coord`]).
    fn settling(&self, path: &str, settle: &super::settle::Settle<'_>) -> bool {
        rustix::fs::lstat(self.abs(path)).is_ok_and(|st| {
            let key = StatKey::of(&st);
            settle.until(path, key.written(), key.ctime_ns()).is_some()
        })
    }

    /// Returns whether each of `paths` holds the bytes of the blob given with its mode (a
    /// `chmod` keeps the bytes), or is absent when none is given.
    fn hold_what_is_staged(&self, paths: &[(String, Option<Staged>)]) -> bool {
        paths.iter().all(|(path, staged)| {
            match crate::fsx::read_limited(self.root(), path, usize::MAX - 1) {
                Ok(bytes) => staged.is_some_and(|s| {
                    crate::git::blob_id(&bytes) == Some(s.id) && self.has_mode(path, s.mode)
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => staged.is_none(),
                Err(_) => false,
            }
        })
    }

    /// Returns whether the file at `path` (repo-relative) is a regular file with the mode git
    /// reads for it: with `core.fileMode`, executable when its owner may execute it, as
    /// staged; without it git does not look at the bit, so any regular file is as staged.
    fn has_mode(&self, path: &str, mode: u32) -> bool {
        let Ok(st) = rustix::fs::lstat(self.abs(path)) else {
            return false;
        };
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return false;
        }
        if !self.repo.trusts_file_mode() {
            return true;
        }
        let found = if st.st_mode & 0o100 != 0 {
            0o100_755
        } else {
            0o100_644
        };
        found == mode
    }

    /// Returns whether `bytes` are what coord's own last index write staged at `path`
    /// (`path` is among the paths of the vouch this operation's recording trusted, or of its
    /// own commits since), without reading the index.
    pub(super) fn staged_by_coord(&self, path: &str, bytes: &[u8]) -> bool {
        let base = self.base.borrow();
        let Some(staged) = base.as_ref().and_then(|b| {
            let at = b.committed.iter().rev().find(|(p, _)| p == path)?;
            at.1
        }) else {
            return false;
        };
        crate::git::blob_id(bytes) == Some(staged.id)
    }

    /// Starts keeping what a vouch is made from, after a recording found `work/` clean in
    /// `listing` with the repository in `state`; `carried` are the paths an earlier vouch
    /// still checks by content.
    pub(super) fn set_base(
        &self,
        listing: &Listing,
        state: RepoState,
        carried: Vec<(String, Option<Staged>)>,
    ) {
        *self.base.borrow_mut() = listing.entered.then(|| Base {
            files: listing.files.clone(),
            carried: 0,
            state,
            committed: carried,
        });
    }

    /// Carries the vouch the last operation left over an operation that does not walk
    /// `work/` (a scoped single-task command, docs/internals.md) and is about to commit the
    /// repo-relative `paths`: when HEAD, the index and the watched files are as that vouch
    /// says, the base this operation leaves its vouch from is that vouch with `paths` taken
    /// out of its digest (each file's entry as its stat key is now) and added to its
    /// committed files. Nothing is checked here: the next operation checks the whole vouch,
    /// and a file changed since the old vouch (its entry no longer the one taken out, or
    /// any other) fails that check, which then scans. Otherwise there is no base, and no
    /// vouch is left.
    pub(crate) fn carry_vouch(&self, paths: &[String]) {
        *self.base.borrow_mut() = self.carried_base(paths);
    }

    fn carried_base(&self, paths: &[String]) -> Option<Base> {
        let bytes = private::section(self.repo.git_dir(), Section::Vouch)?;
        let vouch = Vouch::decode(&bytes)?;
        let state = self.repo_state(SystemTime::now())?;
        if state.bytes() != vouch.state {
            return None;
        }
        let listed = self.work_checksums(vouch.committed.iter().map(|(p, _)| p));
        let work = format!("{}/", self.work_dir());
        let mut digest = vouch.digest;
        for rel in paths.iter().filter_map(|p| p.strip_prefix(&work)) {
            if listed.contains(&checksum(rel.as_bytes())) {
                continue;
            }
            if let Ok(st) = rustix::fs::lstat(self.abs(&format!("{work}{rel}"))) {
                let entry = Listing::file_entry(rel, &StatKey::of(&st));
                digest = digest.wrapping_sub(mixed(entry));
            }
        }
        Some(Base {
            files: Vec::new(),
            carried: digest,
            state,
            committed: vouch.committed,
        })
    }

    /// Before coord's own commit (the index lock held): forgets the base when HEAD or the
    /// index moved since the base was read, by someone else.
    pub(super) fn check_base(&self) {
        let mut base = self.base.borrow_mut();
        let moved = base.as_ref().is_some_and(|b| {
            self.repo.head().ok().and_then(|h| h.oid) != b.state.head
                || self.repo.index_checksum() != Some(b.state.index)
        });
        if moved {
            *base = None;
        }
    }

    /// After coord's own commit `oid`: HEAD is there now.
    pub(super) fn base_committed(&self, oid: Option<Oid>) {
        if let (Some(base), Some(oid)) = (self.base.borrow_mut().as_mut(), oid) {
            base.state.head = Some(oid);
        }
    }

    /// After coord's own index write: the index is as `written` says.
    pub(super) fn base_staged(&self, written: crate::git::IndexWritten) {
        let mut base = self.base.borrow_mut();
        match (base.as_mut(), written.checksum) {
            (Some(b), Some(checksum)) => {
                b.state.index = checksum;
                let paths: HashSet<&String> = written.staged.iter().map(|(p, _)| p).collect();
                b.committed.retain(|(p, _)| !paths.contains(p));
                b.committed.extend(written.staged);
            }
            _ => *base = None,
        }
    }

    /// Leaves a vouch for the next operation, made from the base (see [`Session::set_base`]):
    /// when HEAD and the index are still as coord's own writes left them. Otherwise removes
    /// the last one. A failure only means the next operation scans.
    pub(crate) fn leave_vouch(&self) {
        let vouch = self.base.borrow().as_ref().and_then(|base| {
            // HEAD and the index as coord's own writes left them: the base's state, whose
            // watched files the next operation reads again.
            let same = self.repo.head().ok()?.oid == base.state.head
                && self.repo.index_checksum() == Some(base.state.index);
            if !same {
                return None;
            }
            let mut committed = base.committed.clone();
            committed.sort();
            committed.dedup();
            let skip = self.work_checksums(committed.iter().map(|(p, _)| p));
            Some(Vouch {
                digest: digest_of(&base.files, &skip)?.wrapping_add(base.carried),
                committed,
                state: base.state.bytes(),
            })
        });
        let bytes = vouch.map(|v| v.encode());
        private::set(self.repo.git_dir(), Section::Vouch, bytes);
    }

    /// Returns HEAD's commit, the index checksum, the watched files' stat keys (trusted at
    /// `start`) and a digest of the resolved git config; None when one cannot be read or
    /// vouched for.
    pub(super) fn repo_state(&self, start: SystemTime) -> Option<RepoState> {
        let head = self.repo.head().ok()?.oid;
        let index = self.repo.index_checksum()?;
        let mut watched = Vec::new();
        watched_keys(self.root(), &WATCHED_IN_TREE, start, &mut watched)?;
        watched_keys(
            self.repo.common_dir(),
            &WATCHED_IN_COMMON_DIR,
            start,
            &mut watched,
        )?;
        watched_keys(
            self.repo.git_dir(),
            &WATCHED_IN_GIT_DIR,
            start,
            &mut watched,
        )?;
        // Settings from included files and the global and system config, read as git
        // resolves them (a file's stat key above covers only the repo's own config).
        let config = self.repo.config_entries()?;
        watched.extend_from_slice(&checksum(&config).to_le_bytes());
        Some(RepoState {
            head,
            index,
            watched,
        })
    }

    /// Returns the digest of the state a status scan under `work/` depends on, made from
    /// `listing` and HEAD, the index and the watched files as they are now; None when it
    /// cannot be vouched for. Call it before the scan.
    pub(super) fn clean_state(&self, listing: &Listing) -> Option<u64> {
        self.clean_state_in(listing, &self.repo_state(listing.start)?)
    }

    /// Returns the clean-mark digest of `listing` with the repository in `state`.
    pub(super) fn clean_state_in(&self, listing: &Listing, state: &RepoState) -> Option<u64> {
        let mut bytes = listing.digest()?.to_le_bytes().to_vec();
        bytes.extend_from_slice(&state.bytes());
        Some(checksum(&bytes))
    }

    /// Returns whether the last scan that found `work/` clean saw this same state.
    pub(super) fn clean_mark_is(&self, state: u64) -> bool {
        private::section(self.repo.git_dir(), Section::Clean)
            .is_some_and(|b| b == state.to_le_bytes())
    }

    /// Removes the clean mark (a failure only leaves a mark no later state matches).
    pub(super) fn remove_clean_mark(&self) {
        private::set(self.repo.git_dir(), Section::Clean, None);
    }

    /// Records that a scan found `work/` clean in `state`. A failure only means the next tick
    /// scans again.
    pub(super) fn set_clean_mark(&self, state: u64) {
        let bytes = state.to_le_bytes().to_vec();
        private::set(self.repo.git_dir(), Section::Clean, Some(bytes));
    }
}
