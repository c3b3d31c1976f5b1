//! Packing, left to git: libgit2 writes every object of coord's commits loose and never
//! packs, so once there are many (estimated from one fan-out folder, as `git gc --auto`
//! does) coord runs git's own `git repack -a -d -l -b`: every object in one pack with a
//! reachability bitmap for HEAD (a clone sends that pack as it is), deltas reused, the loose
//! copies and the replaced packs removed. git writes the new pack under temporary names,
//! renames it into place and only then removes what it replaces, so a kill at any point
//! leaves every object readable. Does I/O (a git subprocess).

use super::*;

/// About how many loose objects make coord pack them: git's own `gc.auto` default.
pub const PACK_LOOSE_FROM: usize = 6_700;

/// What `git repack` is asked to do: all objects into one pack (`-a`), the packs and loose
/// objects it replaces removed (`-d`), unreachable ones kept in the pack rather than dropped
/// (pruning is `git gc`'s), objects of alternates left out (`-l`), a bitmap (`-b`), no
/// `info/` files for dumb transports (`-n`), on one thread (the delta search's memory stays
/// small), quietly.
const REPACK: &[&str] = &[
    "-c",
    "pack.threads=1",
    "repack",
    "-a",
    "-d",
    "--keep-unreachable",
    "-l",
    "-b",
    "-n",
    "-q",
];

impl Repo {
    /// Packs the objects with `git repack` when git's estimate of the loose ones reaches
    /// `threshold` (0: always); returns whether it packed. A failure leaves every object
    /// readable where it was, and removes the temporary files git left.
    pub fn pack_loose_objects(&self, threshold: usize) -> Result<bool, GitError> {
        let objects = self.repo.commondir().join("objects");
        if loose_in(&objects.join("17")) * 256 < threshold {
            return Ok(false);
        }
        let git_dir = self.repo.path();
        let out = command::git_output(git_dir, REPACK).map_err(|source| GitError::Io {
            path: git_dir.to_path_buf(),
            source,
        })?;
        if !out.status.success() {
            // git leaves the pack it was writing when it fails (a full disk): it would keep
            // the room it took, and `git gc` prunes it only after two weeks.
            let _ = self.remove_dead_pack_files(&objects.join("pack"));
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(GitError::Repack(stderr.trim().to_string()));
        }
        Ok(true)
    }

    /// Removes the temporary files of a `git repack` or `git pack-objects` that no process
    /// has open (`tmp_pack_*`, `tmp_idx_*`, `tmp_rev_*`, `tmp_bitmap_*`, and `.tmp-<pid>-*`
    /// of a process that is gone); returns how many: git leaves them when it is killed, and
    /// its pack when it fails.
    pub(super) fn remove_dead_pack_files(&self, pack: &Path) -> Result<usize, GitError> {
        let Ok(entries) = std::fs::read_dir(pack) else {
            return Ok(0);
        };
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(".tmp-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            let unwritten = ["tmp_pack_", "tmp_idx_", "tmp_rev_", "tmp_bitmap_"]
                .iter()
                .any(|p| name.starts_with(p))
                && released(&e.path());
            if pid.is_some_and(crate::fsx::process_gone) || unwritten {
                remove_lock(&e.path())?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Returns whether no process has `path` open, waiting up to 2 s for one to let it go: the
/// git a killed coord ran is stopped by its guard ([`command`]) but takes a moment to exit.
fn released(path: &Path) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while crate::lock::Holder::of(path).is_known() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// Returns how many loose objects one fan-out folder holds.
fn loose_in(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            name.len() == 38 && name.as_encoded_bytes().iter().all(u8::is_ascii_hexdigit)
        })
        .count()
}
