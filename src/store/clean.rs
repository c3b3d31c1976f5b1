//! The clean mark: a digest of what `work/` and the repository looked like when a status scan
//! last found no uncommitted change under `work/`, kept in `.git/coord/clean-mark`. When the
//! next tick computes the same digest, nothing a scan depends on has changed, so it skips the
//! scan (libgit2's walk with an lstat per file and a check of the whole index) — the way git
//! trusts an index entry whose stat data still matches the file.
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
//! Between the windows of one tick, a [`Vouch`] does the same without a digest: the window
//! that found `work/` clean keeps each file's stat key from its walk and the paths it
//! committed, and the next window's walk is clean when every other file is listed as before
//! and every committed one holds what the index has. Does file I/O under `.git/` and reads
//! committed files under `work/`.

use super::cache::{checksum, StatKey};
use super::Store;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::SystemTime;

/// The mark file, relative to the git directory.
const PATH: &str = "coord/clean-mark";
/// The first bytes of the mark file.
const MAGIC: &[u8] = b"coord clean-mark 1\n";
/// Files outside `work/` whose change can change what a status scan reports, relative to the
/// work tree root (git config and attributes; ignore rules are covered by refusing a mark when
/// any file under `work/` is ignored).
const ALSO_WATCHED: [&str; 3] = [".gitattributes", ".git/config", ".git/info/attributes"];

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
        }
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
    }

    /// Adds a symlink (refused, never followed, so only its name counts).
    pub fn symlink(&mut self, rel: &str) {
        self.start_entry(rel, b'l');
        let entry = self.add_entry();
        self.files.push((checksum(rel.as_bytes()), Some(entry)));
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
        self.digest = (self.digest.rotate_left(29) ^ entry).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        entry
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

/// What a window of a tick whose recording found `work/` clean leaves for the next window,
/// which then needs no status scan ([`Store::vouches`]): the files of the window's walk, the
/// paths to check by content instead of by stat key (those the window committed, and those
/// the window before committed whose stamps were still too recent to trust), and HEAD, the
/// index checksum and the watched files' stat keys as the window left them.
#[derive(Debug)]
pub struct Vouch {
    files: HashMap<u64, Option<u64>>,
    committed: Vec<String>,
    state: Vec<u8>,
}

impl Store {
    /// Returns what the next window of a tick checks instead of a status scan, after a window
    /// whose recording found `work/` clean in the walk `listing` (with the vouch of the
    /// window before, `before`, if any) and which then committed `committed` (repo-relative
    /// paths); None when the walk did not enter every folder or the repository's state cannot
    /// be read. Call it after the window's index write.
    pub(crate) fn vouch(
        &self,
        listing: &Listing,
        mut committed: Vec<String>,
        before: Option<&Vouch>,
    ) -> Option<Vouch> {
        if !listing.entered {
            return None;
        }
        let recent: HashSet<u64> = listing
            .files
            .iter()
            .filter(|(_, entry)| entry.is_none())
            .map(|(path, _)| *path)
            .collect();
        let work = format!("{}/", self.work_dir());
        let still_recent = before.into_iter().flat_map(|v| &v.committed).filter(|p| {
            p.strip_prefix(&work)
                .is_some_and(|rel| recent.contains(&checksum(rel.as_bytes())))
        });
        committed.extend(still_recent.cloned().collect::<Vec<_>>());
        committed.sort();
        committed.dedup();
        Some(Vouch {
            files: listing.files.iter().copied().collect(),
            committed,
            state: self.repo_state(SystemTime::now())?,
        })
    }

    /// Starts collecting the paths each index write brings in line (a window of a tick, for
    /// [`Store::vouch`]).
    pub(crate) fn collect_committed(&self) {
        *self.committed.borrow_mut() = Some(Vec::new());
    }

    /// Returns the paths collected since [`Store::collect_committed`], and stops collecting.
    pub(crate) fn take_committed(&self) -> Vec<String> {
        self.committed.borrow_mut().take().unwrap_or_default()
    }

    /// Returns whether `listing`, the walk of the next window, is as clean as the walk `vouch`
    /// was made from: HEAD, the index and the watched files are as the last window left them,
    /// every file that window did not commit is listed with the same trusted stat key (none
    /// added, none gone), and every file it committed holds what the index has (or is absent
    /// from both). What a status scan would report, without reading every file's stat data
    /// against the index.
    pub(super) fn vouches(&self, vouch: &Vouch, listing: &Listing) -> bool {
        if !listing.entered || self.repo_state(listing.start).as_ref() != Some(&vouch.state) {
            return false;
        }
        let work = format!("{}/", self.work_dir());
        let committed: HashSet<u64> = vouch
            .committed
            .iter()
            .filter_map(|p| p.strip_prefix(&work))
            .map(|rel| checksum(rel.as_bytes()))
            .collect();
        let mut same = 0;
        for (path, entry) in &listing.files {
            if committed.contains(path) {
                continue;
            }
            if entry.is_none() || vouch.files.get(path) != Some(entry) {
                return false;
            }
            same += 1;
        }
        let before = vouch.files.keys().filter(|p| !committed.contains(p));
        same == before.count() && self.hold_what_is_staged(&vouch.committed)
    }

    /// Returns whether each of `paths` holds the bytes the index has for it, or is absent
    /// from both the work tree and the index.
    fn hold_what_is_staged(&self, paths: &[String]) -> bool {
        let Ok(staged) = self.repo.staged_ids(paths) else {
            return false;
        };
        paths.iter().zip(staged).all(|(path, id)| {
            match super::fsutil::read_limited(self.root(), path, usize::MAX - 1) {
                Ok(bytes) => id.is_some_and(|id| crate::git::blob_id(&bytes) == Some(id)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => id.is_none(),
                Err(_) => false,
            }
        })
    }

    /// Returns HEAD's commit, the index checksum and the watched files' stat keys (trusted
    /// at `start`), as bytes; None when one cannot be read or vouched for.
    fn repo_state(&self, start: SystemTime) -> Option<Vec<u8>> {
        let mut state = Vec::new();
        let head = self.repo.head().ok()?.oid;
        state.extend_from_slice(head.as_ref().map_or(&[][..], |oid| oid.as_bytes()));
        state.extend_from_slice(&self.repo.index_checksum()?);
        watched_keys(self.root(), &ALSO_WATCHED, start, &mut state)?;
        Some(state)
    }

    /// Returns the digest of the state a status scan under `work/` depends on, made from
    /// `listing` and HEAD, the index and the watched files as they are now; None when it
    /// cannot be vouched for. Call it before the scan.
    pub(super) fn clean_state(&self, listing: &Listing) -> Option<u64> {
        let mut state = listing.digest()?.to_le_bytes().to_vec();
        let head = self.repo.head().ok()?.oid;
        state.extend_from_slice(head.as_ref().map_or(&[][..], |oid| oid.as_bytes()));
        state.extend_from_slice(&self.repo.index_checksum()?);
        watched_keys(self.root(), &ALSO_WATCHED, listing.start, &mut state)?;
        Some(checksum(&state))
    }

    /// Returns whether the last scan that found `work/` clean saw this same state.
    pub(super) fn clean_mark_is(&self, state: u64) -> bool {
        std::fs::read(self.repo.git_dir().join(PATH))
            .is_ok_and(|b| b.strip_prefix(MAGIC) == Some(&state.to_le_bytes()[..]))
    }

    /// Records that a scan found `work/` clean in `state`. A failure only means the next tick
    /// scans again.
    pub(super) fn set_clean_mark(&self, state: u64) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&state.to_le_bytes());
        let path = self.repo.git_dir().join(PATH);
        let _ = super::fsutil::write_private(&path, &bytes, false);
    }
}
