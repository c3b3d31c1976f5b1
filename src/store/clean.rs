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
//! alone could reveal it). Does file I/O under `.git/` only.

use super::cache::{checksum, StatKey};
use super::Store;
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
}

impl Listing {
    /// Starts a listing for a walk that began at `start`.
    pub fn new(start: SystemTime) -> Listing {
        Listing {
            start,
            digest: 0,
            entry: Vec::new(),
            complete: true,
        }
    }

    /// Adds a file with its stat key; a file without one (it vanished) or with a stamp too
    /// recent to trust makes the listing unable to vouch for the folder.
    pub fn file(&mut self, rel: &str, key: Option<&StatKey>) {
        self.start_entry(rel, b'f');
        match key {
            Some(k) if k.settled(self.start) => k.write_to(&mut self.entry),
            _ => self.complete = false,
        }
        self.add_entry();
    }

    /// Adds a symlink (refused, never followed, so only its name counts).
    pub fn symlink(&mut self, rel: &str) {
        self.start_entry(rel, b'l');
        self.add_entry();
    }

    fn start_entry(&mut self, rel: &str, kind: u8) {
        self.entry.clear();
        self.entry.extend_from_slice(rel.as_bytes());
        self.entry.push(0);
        self.entry.push(kind);
    }

    /// Chains the entry's checksum into the digest (so order counts, as in the walk).
    fn add_entry(&mut self) {
        let entry = checksum(&self.entry);
        self.digest = (self.digest.rotate_left(29) ^ entry).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    /// Returns when the walk began: a stamp must be older than that to be trusted.
    pub fn start(&self) -> SystemTime {
        self.start
    }

    /// Notes a folder the walk did not enter: files in it are not listed.
    pub fn unwalked(&mut self) {
        self.complete = false;
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

impl Store {
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
