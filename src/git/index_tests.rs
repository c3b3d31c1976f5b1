//! Tests of the index reader against indexes git and libgit2 wrote, and of the status
//! answered from stat data (`Repo::clean_by_stat`), racy entries included.

use super::tests::{git, new_repo, write};
use super::*;
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, SystemTime};

/// A repository where a person committed three task files with `git add` + `git commit`.
fn committed() -> (tempfile::TempDir, Repo) {
    let (dir, repo) = new_repo();
    write(dir.path(), "README.md", "hello\n");
    write(dir.path(), "work/ready/a.yaml", "title: A\n");
    write(dir.path(), "work/done/b.yaml", "title: B\n");
    write(dir.path(), "work/assigned/bot/c.yaml", "title: C\n");
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "seed"]);
    (dir, repo)
}

/// The stat data of every file under `work/` now, by path relative to it.
fn stats_now(dir: &Path) -> HashMap<Vec<u8>, EntryStat> {
    let mut found = HashMap::new();
    for rel in [
        "ready/a.yaml",
        "done/b.yaml",
        "assigned/bot/c.yaml",
        "ready/d.yaml",
    ] {
        if let Ok(st) = rustix::fs::lstat(dir.join("work").join(rel)) {
            let key = crate::store::StatKey::of(&st);
            found.insert(rel.as_bytes().to_vec(), key.entry_stat());
        }
    }
    found
}

/// Asks `clean_by_stat` about `work/` with the stat data of its files now.
fn clean(dir: &Path, repo: &Repo) -> bool {
    let stats = stats_now(dir);
    repo.clean_by_stat("work", stats.len(), &mut |rel| stats.get(rel).copied())
}

#[test]
fn entries_and_the_cache_tree_read_as_libgit2_reads_them() {
    let (dir, repo) = committed();
    let ours = IndexFile::read(&dir.path().join(".git/index")).expect("read");
    let theirs = git2::Index::open(&dir.path().join(".git/index")).unwrap();
    let stats: Vec<EntryStat> = ours.heads().map(|h| h.stat).collect();
    let ours: Vec<_> = ours.entries().collect();
    assert_eq!(ours.len(), theirs.len());
    for ((o, t), ours_stat) in ours.iter().zip(theirs.iter()).zip(&stats) {
        assert_eq!(o.path, &t.path[..]);
        assert_eq!((o.id, o.mode, o.stage), (t.id, t.mode, 0));
        let stat = [
            t.ctime.seconds() as u32,
            t.ctime.nanoseconds(),
            t.mtime.seconds() as u32,
            t.mtime.nanoseconds(),
            t.dev,
            t.ino,
            t.file_size,
        ];
        assert_eq!(*ours_stat, stat, "{:?}", String::from_utf8_lossy(o.path));
        assert!(!o.special);
    }
    let index = repo.index_file().expect("index");
    assert_eq!(index.tree_id("work"), repo.head_tree_id("work"));
    assert!(
        index.tree_id("work").is_some(),
        "git commit writes the cache tree"
    );
    assert_eq!(
        index.get("work/done/b.yaml").map(|e| e.id),
        blob_id(b"title: B\n")
    );
    assert!(index.get("work/done").is_none());
    assert!(!index.has_conflicts());
}

#[test]
fn a_fresh_commit_is_clean_by_its_stat_data_and_any_change_is_not() {
    let (dir, repo) = committed();
    assert!(clean(dir.path(), &repo), "as git committed it");
    let d = dir.path();
    // An in-place edit that keeps the size and the mtime: only the ctime tells.
    let a = d.join("work/ready/a.yaml");
    let mtime = std::fs::metadata(&a).unwrap().modified().unwrap();
    std::fs::write(&a, "title: Z\n").unwrap();
    let f = std::fs::File::options().write(true).open(&a).unwrap();
    f.set_modified(mtime).unwrap();
    assert!(!clean(d, &repo), "same size and mtime, new bytes");
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "edit"]);
    assert!(clean(d, &repo));
    // Staged but not committed: the index's stat data matches, its tree is not HEAD's.
    write(d, "work/ready/a.yaml", "title: Y\n");
    git(d, &["add", "work/ready/a.yaml"]);
    assert!(!clean(d, &repo), "staged, not committed");
    git(d, &["commit", "-q", "-m", "again"]);
    assert!(clean(d, &repo));
    write(d, "work/ready/d.yaml", "title: D\n");
    assert!(!clean(d, &repo), "a file the index does not have");
    std::fs::remove_file(d.join("work/ready/d.yaml")).unwrap();
    std::fs::remove_file(d.join("work/done/b.yaml")).unwrap();
    assert!(!clean(d, &repo), "a file gone");
}

/// An entry whose file has the stat data git recorded but other bytes (the file was
/// rewritten within the timestamp granularity after git hashed it) is trusted only when the
/// file is older than the index; one from the index's second or later is hashed again.
#[test]
fn a_racy_entry_is_hashed_again() {
    let (dir, repo) = committed();
    let d = dir.path();
    let rel = "work/ready/a.yaml";
    for (age, trusted) in [(Duration::from_secs(3600), true), (Duration::ZERO, false)] {
        // On disk other bytes of the same size; the index keeps HEAD's blob with the stat
        // data of the file now, as if git had hashed it just before the rewrite.
        std::fs::write(d.join(rel), "title: Q\n").unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(d.join(rel))
            .unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
        let stat = stage_with_stat_of_file(d, &repo, rel);
        let index = repo.index_file().unwrap();
        assert_eq!(
            index
                .heads()
                .find(|h| h.path == rel.as_bytes())
                .unwrap()
                .stat,
            stat,
            "the index has the file's stat data"
        );
        assert_eq!(index.tree_id("work"), repo.head_tree_id("work"));
        assert_eq!(
            clean(d, &repo),
            trusted,
            "file {age:?} older than the index"
        );
    }
}

/// Stages HEAD's blob of `rel` with the stat data its file has now, unsmudged (as an index
/// another git wrote would have it, hashed just before a same-size rewrite); returns them.
fn stage_with_stat_of_file(d: &Path, repo: &Repo, rel: &str) -> EntryStat {
    let st = rustix::fs::lstat(d.join(rel)).unwrap();
    let stat = crate::store::StatKey::of(&st).entry_stat();
    let mut index = repo.repo.index().unwrap();
    let mut entry = index.get_path(Path::new(rel), 0).unwrap();
    entry.ctime = git2::IndexTime::new(stat[0] as i32, stat[1]);
    entry.mtime = git2::IndexTime::new(stat[2] as i32, stat[3]);
    (entry.dev, entry.ino, entry.file_size) = (stat[4], stat[5], stat[6]);
    index.add(&entry).unwrap();
    // The cache tree the add invalidated, computed again (HEAD's tree: same blob).
    index.write_tree().unwrap();
    index.write().unwrap();
    // libgit2 may have smudged a racy entry on writing (size 0): put the size back (and
    // the checksum after it), as an index written by another git would have it.
    let path = d.join(".git/index");
    let mut bytes = std::fs::read(&path).unwrap();
    let found = IndexFile::parse(bytes.clone(), SystemTime::now()).unwrap();
    let i = found
        .entries()
        .position(|e| e.path == rel.as_bytes())
        .unwrap();
    let at = found.entries[i] + 36;
    bytes[at..at + 4].copy_from_slice(&stat[6].to_be_bytes());
    let end = bytes.len() - 20;
    let sum = <sha1::Sha1 as sha1::Digest>::digest(&bytes[..end]);
    bytes[end..].copy_from_slice(&sum);
    std::fs::write(&path, bytes).unwrap();
    stat
}

/// An entry coord does not touch, racy in the index it read (its file's mtime at or after
/// the index's) and whose file changed since git hashed it, is written smudged (size 0), as
/// git writes it: the new index is later than the file, and a reader would otherwise trust
/// the entry's stat data and miss the change.
#[test]
fn an_untouched_racy_entry_of_a_changed_file_is_written_smudged() {
    let (dir, repo) = committed();
    let d = dir.path();
    let rel = "work/ready/a.yaml";
    let then = SystemTime::now() - Duration::from_secs(100);
    std::fs::write(d.join(rel), "title: Q\n").unwrap();
    let f = std::fs::File::options()
        .write(true)
        .open(d.join(rel))
        .unwrap();
    f.set_modified(then).unwrap();
    stage_with_stat_of_file(d, &repo, rel);
    // The index was written in the file's second: the entry is racy in it.
    let index = std::fs::File::options()
        .write(true)
        .open(d.join(".git/index"))
        .unwrap();
    index.set_modified(then).unwrap();
    write(d, "work/ready/n.yaml", "title: N\n");
    let paths = vec!["work/ready/n.yaml".to_string()];
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    repo.commit_paths(&paths, "by coord", &Identity::default(), now)
        .unwrap();
    let hold = repo.hold_index().unwrap();
    repo.update_index_holding(&paths, Some(hold)).unwrap();
    let entry = git2::Index::open(&d.join(".git/index"))
        .unwrap()
        .get_path(Path::new(rel), 0)
        .unwrap();
    assert_eq!(entry.file_size, 0, "the changed racy entry is smudged");
    assert_eq!(git(d, &["status", "--porcelain"]), format!(" M {rel}\n"));
}

#[test]
fn unmerged_entries_and_other_index_versions_are_seen() {
    let (dir, repo) = committed();
    let d = dir.path();
    git(d, &["update-index", "--index-version", "4"]);
    assert!(repo.index_file().is_none(), "version 4 is left to libgit2");
    assert!(!clean(d, &repo));
    git(d, &["update-index", "--index-version", "2"]);
    assert!(clean(d, &repo), "version 2 is read");
    assert!(!repo.index_file().expect("read").has_conflicts());
    git(d, &["update-index", "--skip-worktree", "work/done/b.yaml"]);
    assert!(!clean(d, &repo), "an entry git does not compare");
    git(
        d,
        &["update-index", "--no-skip-worktree", "work/done/b.yaml"],
    );
    git(d, &["checkout", "-q", "-b", "other"]);
    write(d, "work/ready/a.yaml", "title: theirs\n");
    git(d, &["commit", "-q", "-am", "theirs"]);
    git(d, &["checkout", "-q", "-"]);
    write(d, "work/ready/a.yaml", "title: ours\n");
    git(d, &["commit", "-q", "-am", "ours"]);
    let merged = Command::new("git")
        .args(["merge", "-q", "other"])
        .current_dir(d)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap();
    assert!(!merged.status.success(), "a conflict: {merged:?}");
    let index = repo.index_file().expect("read");
    assert!(index.has_conflicts());
    assert!(index.get("work/ready/a.yaml").is_none(), "no stage 0 entry");
    assert!(!clean(d, &repo));
}

/// coord's index write under its hold of the lock (libgit2's): the entries it did not change
/// are kept, the cache tree keeps the folders no change is under, and git and libgit2 read
/// the result (its SHA-1 checks) as the index of HEAD.
#[test]
fn an_index_written_again_is_what_git_reads_and_keeps_the_untouched_trees() {
    let (dir, repo) = committed();
    let d = dir.path();
    write(d, "work/ready/a.yaml", "title: A again\n");
    write(d, "work/ready/n.yaml", "title: N\n");
    std::fs::remove_file(d.join("work/done/b.yaml")).unwrap();
    let paths: Vec<String> = ["work/done/b.yaml", "work/ready/a.yaml", "work/ready/n.yaml"]
        .map(str::to_string)
        .to_vec();
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let kept_before = repo.index_file().unwrap().tree_id("work/assigned");
    assert!(kept_before.is_some());
    repo.commit_paths(&paths, "by coord", &Identity::default(), now)
        .unwrap();
    let hold = repo.hold_index().unwrap();
    let written = repo.update_index_holding(&paths, Some(hold)).unwrap();
    assert!(!d.join(".git/index.lock").exists(), "the lock is let go");
    assert_eq!(written.checksum, repo.index_checksum());
    let index = IndexFile::read(&d.join(".git/index")).unwrap();
    assert_eq!(
        index.tree_id("work/assigned"),
        kept_before,
        "untouched folder kept"
    );
    assert_eq!(
        index.tree_id("work/ready"),
        None,
        "a changed folder is invalid"
    );
    assert_eq!(index.tree_id("work"), None);
    git2::Index::open(&d.join(".git/index")).expect("libgit2 reads it, checksum and all");
    assert_eq!(git(d, &["status", "--porcelain"]), "");
    let head_tree = git(d, &["rev-parse", "HEAD^{tree}"]);
    assert_eq!(git(d, &["write-tree"]), head_tree, "the index is HEAD's");
    let listed = git(d, &["ls-files"]);
    assert_eq!(
        listed,
        "README.md\nwork/assigned/bot/c.yaml\nwork/ready/a.yaml\nwork/ready/n.yaml\n"
    );
}

#[test]
fn an_index_whose_checksum_does_not_match_is_left_to_libgit2() {
    let (dir, repo) = committed();
    let path = dir.path().join(".git/index");
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(IndexFile::parse(bytes.clone(), SystemTime::now()).is_some());
    let i = bytes.len() - 30;
    bytes[i] ^= 1;
    assert!(IndexFile::parse(bytes.clone(), SystemTime::now()).is_none());
    std::fs::write(&path, &bytes).unwrap();
    assert!(repo.index_file().is_none());
    assert!(!clean(dir.path(), &repo));
    let n = bytes.len();
    bytes[n - 20..].fill(0);
    assert!(
        IndexFile::parse(bytes, SystemTime::now()).is_some(),
        "no checksum (index.skipHash) is not checked"
    );
}

/// An entry git smudged (size 0 on a non-empty blob: racily clean when written) is never
/// clean by its stat data, even when a file's stat data were to match it: git's own rule.
#[test]
fn a_smudged_entry_is_never_clean_by_its_stat_data() {
    let (dir, repo) = committed();
    let path = dir.path().join(".git/index");
    let mut bytes = std::fs::read(&path).unwrap();
    let read = IndexFile::parse(bytes.clone(), SystemTime::UNIX_EPOCH).unwrap();
    for &at in &read.entries {
        bytes[at + 36..at + 40].fill(0);
    }
    let end = bytes.len() - 20;
    let sum = <sha1::Sha1 as sha1::Digest>::digest(&bytes[..end]);
    bytes[end..].copy_from_slice(&sum);
    std::fs::write(&path, bytes).unwrap();
    let later = SystemTime::now() + Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let index = repo.index_file().expect("the smudged index reads");
    let stats: HashMap<Vec<u8>, EntryStat> = index
        .heads()
        .filter_map(|h| Some((h.path.strip_prefix(b"work/")?.to_vec(), h.stat)))
        .collect();
    assert!(stats.values().all(|s| s[6] == 0), "every entry smudged");
    let clean = repo.clean_by_stat("work", stats.len(), &mut |rel| stats.get(rel).copied());
    assert!(!clean, "a smudged entry was taken as clean");
}

/// A path's length comes from its entry's flags, as git reads it (up to the NUL only for a
/// path of 4,095 bytes or more); an entry whose NUL is not where its flags say is refused.
#[test]
fn a_path_is_as_long_as_its_flags_say_and_a_long_one_ends_at_its_nul() {
    let (dir, repo) = committed();
    let d = dir.path();
    let blob = git(d, &["hash-object", "-w", "README.md"]);
    let long = format!("work/{}/x.yaml", ["a"; 2100].join("/"));
    let info = format!("100644,{},{long}", blob.trim());
    git(d, &["update-index", "--add", "--cacheinfo", &info]);
    let index = repo.index_file().expect("read");
    assert_eq!(index.get(&long).map(|e| e.path.len()), Some(long.len()));
    assert!(
        index.get("work/ready/a.yaml").is_some(),
        "after the long one"
    );
    let mut bytes = std::fs::read(d.join(".git/index")).unwrap();
    // The first entry is README.md's: its flags sit after the stat data and the id.
    let flags_at = 12 + 40 + 20;
    assert_eq!(bytes[flags_at + 1], 9, "README.md");
    bytes[flags_at + 1] = 8;
    let n = bytes.len() - 20;
    let sum = <sha1::Sha1 as sha1::Digest>::digest(&bytes[..n]);
    bytes[n..].copy_from_slice(&sum);
    assert!(IndexFile::parse(bytes, SystemTime::now()).is_none());
}
