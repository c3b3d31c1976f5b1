//! The status scan answered from the walk and the index: after a person's `git commit`, no
//! vouch or clean mark holds, and libgit2's scan (an lstat of every file, the whole index
//! read into a map with its SHA-1 checked, HEAD's tree against the index) cost a quarter of
//! a tick at 100,000 tasks. The walk has just looked at every file, so its stat data is
//! compared with what the index recorded instead, by git's own rule: an entry whose file
//! still has the stat data recorded when git hashed it holds those bytes, unless the file
//! changed in the second the index was written or later ("racy": it is hashed again). HEAD
//! against the index comes from the cache tree: when its id for `work/` is HEAD's, the
//! index's entries under `work/` are HEAD's.
//!
//! Only a clean answer is given: any difference, any entry or file this cannot judge
//! (assume-unchanged, skip-worktree, intent-to-add, a symlink, an unmerged entry, a file the
//! index does not have, a folder the walk did not enter) sends the caller to the scan, which
//! says what changed. Files are matched with entries by the checksum of their path, as the
//! vouch's digest matches them, going through both in order (`StatsByPath`). Reads the index
//! and, for racy entries, their files (through `git::Repo::clean_by_stat`).

use super::clean::Listing;
use super::Store;

impl Store {
    /// Returns whether `work/` is clean as `listing`, the walk just made, saw it: every file
    /// it listed is in the index with the stat data git recorded for it (a racy one holds
    /// the staged bytes), the index has no other entry under `work/`, and the index's tree
    /// for `work/` is HEAD's. False when it cannot tell (the caller scans).
    pub(super) fn clean_by_index(&self, listing: &Listing) -> bool {
        self.judge_by_index(listing).unwrap_or(false)
    }

    fn judge_by_index(&self, listing: &Listing) -> Option<bool> {
        let (mut stats, files) = listing.stats_by_path()?;
        let mut stat_of = |rel: &[u8]| stats.get(rel);
        Some(
            self.repo
                .clean_by_stat(self.work_dir(), files, &mut stat_of),
        )
    }
}
