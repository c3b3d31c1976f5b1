//! Tests of merging packs (merge.rs, bitmap.rs) against real repositories, checked by git.

use super::merge::{crc32, ofs_decode, ofs_encode, MergeStop};
use super::tests::{commit, git, new_repo, write};
use super::*;
use tempfile::TempDir;

/// A repo with `packs` packs written by coord's packing, each holding `per` commits that
/// edit the same files a little (so the packs hold deltas).
fn packed_history(packs: usize, per: usize) -> (TempDir, Repo) {
    let (dir, repo) = new_repo();
    for p in 0..packs {
        for c in 0..per {
            for f in 0..4 {
                let path = format!("work/inbox/t-{f}.yaml");
                let text = format!(
                    "title: task {f}\ndescription: |\n  A longer text that stays the same \
                     from one version to the next,\n  so versions are deltas.\nround: {p}-{c}\n"
                );
                write(dir.path(), &path, &text);
            }
            let paths: Vec<String> = (0..4).map(|f| format!("work/inbox/t-{f}.yaml")).collect();
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            commit(&repo, &paths, &format!("round {p}-{c}")).unwrap();
        }
        assert!(repo.pack_loose_objects(0).unwrap() > 0);
    }
    (dir, repo)
}

/// The pack names (`pack-<hash>`) in the repo, sorted.
fn packs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.starts_with("pack-")
                .then(|| name.strip_suffix(".idx").map(str::to_string))
                .flatten()
        })
        .collect();
    names.sort();
    names
}

/// Every object id of the history, sorted (what a clone must receive).
fn objects(dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = git(dir, &["rev-list", "--objects", "--all"])
        .lines()
        .map(|l| l[..40].to_string())
        .collect();
    ids.sort();
    ids
}

/// How many objects of the repo's packs are stored as deltas (`git verify-pack -v`).
fn deltas(dir: &Path) -> usize {
    packs(dir)
        .iter()
        .map(|p| {
            let idx = format!(".git/objects/pack/{p}.idx");
            git(dir, &["verify-pack", "-v", &idx])
                .lines()
                .filter(|l| l.split_whitespace().count() == 7)
                .count()
        })
        .sum()
}

/// Checks HEAD's bitmap against a walk of the history: git fails when there is no bitmap
/// or it differs from the walk.
fn test_bitmap(dir: &Path) {
    git(dir, &["rev-list", "--test-bitmap", "HEAD"]);
}

/// Checks the repo the way git would: every object connected and well formed.
fn fsck(dir: &Path) {
    git(dir, &["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn merging_keeps_every_object_and_delta_in_one_pack_with_a_bitmap_git_verifies() {
    let (dir, repo) = packed_history(3, 8);
    let d = dir.path();
    let before = objects(d);
    let delta_count = deltas(d);
    assert!(delta_count > 20, "{delta_count} deltas");
    assert_eq!(packs(d).len(), 3);
    assert_eq!(repo.merge_packs().unwrap(), 3);
    let after = packs(d);
    assert_eq!(after.len(), 1, "{after:?}");
    fsck(d);
    assert_eq!(objects(d), before);
    assert_eq!(deltas(d), delta_count, "every delta copied as it was");
    let pack = d.join(format!(".git/objects/pack/{}", after[0]));
    for ext in ["pack", "idx", "bitmap"] {
        let meta = std::fs::metadata(pack.with_extension(ext)).unwrap();
        assert!(
            meta.permissions().readonly(),
            "{ext} is read-only, as git's"
        );
    }
    test_bitmap(d);
    let by_bitmap = git(d, &["rev-list", "--use-bitmap-index", "--objects", "HEAD"]);
    assert_eq!(by_bitmap.lines().count(), before.len());
    let clone = tempfile::tempdir().unwrap();
    let url = format!("file://{}", d.display());
    git(clone.path(), &["clone", "-q", &url, "c"]);
    assert_eq!(
        std::fs::read_to_string(clone.path().join("c/work/inbox/t-2.yaml")).unwrap(),
        std::fs::read_to_string(d.join("work/inbox/t-2.yaml")).unwrap()
    );
    write(d, "work/inbox/t-9.yaml", "title: after the merge\n");
    assert!(commit(&repo, &["work/inbox/t-9.yaml"], "after").is_some());
    assert_eq!(
        repo.read_head_file("work/inbox/t-0.yaml").unwrap().unwrap(),
        std::fs::read(d.join("work/inbox/t-0.yaml")).unwrap()
    );
    fsck(d);
}

#[test]
fn one_pack_is_not_merged_again() {
    let (dir, repo) = packed_history(1, 3);
    assert_eq!(repo.merge_packs().unwrap(), 0);
    assert_eq!(packs(dir.path()).len(), 1);
}

/// A kill -9 during a merge leaves its temporary files, or the new pack beside the old ones:
/// every object stays readable, and the next merge finishes the job.
#[test]
fn a_merge_killed_at_any_step_leaves_every_object_readable_and_the_next_one_finishes() {
    for stop in [MergeStop::Written, MergeStop::Renamed] {
        let (dir, repo) = packed_history(3, 4);
        let d = dir.path();
        let before = objects(d);
        assert_eq!(repo.merge_packs_until(stop).unwrap(), 0);
        let expect = if stop == MergeStop::Written { 3 } else { 4 };
        assert_eq!(packs(d).len(), expect, "{stop:?}");
        fsck(d);
        assert_eq!(objects(d), before, "{stop:?}");
        let again = Repo::open_or_init(d).unwrap();
        assert!(again.merge_packs().unwrap() >= 3, "{stop:?}");
        assert_eq!(packs(d).len(), 1, "{stop:?}");
        fsck(d);
        assert_eq!(objects(d), before, "{stop:?}");
        test_bitmap(d);
        let leftovers: Vec<_> = std::fs::read_dir(d.join(".git/objects/pack"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("tmp_"))
            .map(|e| e.file_name())
            .collect();
        assert!(leftovers.len() <= 3, "{stop:?}: {leftovers:?}");
    }
}

/// A kill in the middle of writing the pack leaves a truncated temporary file; a merge of a
/// process that got the same id writes it again from the start.
#[test]
fn a_truncated_temporary_pack_is_written_again() {
    let (dir, repo) = packed_history(2, 4);
    let d = dir.path();
    let pack_dir = d.join(".git/objects/pack");
    let temp = pack_dir.join(format!("tmp_coord_merge_{}", std::process::id()));
    std::fs::write(temp.with_extension("pack"), b"PACK\0\0\0\x02trunc").unwrap();
    std::fs::write(temp.with_extension("idx"), b"\xfftOc").unwrap();
    assert_eq!(repo.merge_packs().unwrap(), 2);
    fsck(d);
    test_bitmap(d);
}

/// A pack git keeps (`.keep`) is not merged, and since HEAD reaches objects in it, the
/// merged pack gets no bitmap (one would claim objects the pack does not hold).
#[test]
fn a_kept_pack_is_left_alone_and_no_bitmap_claims_its_objects() {
    let (dir, repo) = packed_history(3, 4);
    let d = dir.path();
    let before = objects(d);
    let oldest = oldest_pack(d);
    std::fs::write(oldest.with_extension("keep"), b"").unwrap();
    assert_eq!(repo.merge_packs().unwrap(), 2);
    let after = packs(d);
    assert_eq!(after.len(), 2);
    assert!(oldest.with_extension("idx").exists());
    let bitmaps = std::fs::read_dir(d.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".bitmap"))
        .count();
    assert_eq!(bitmaps, 0);
    fsck(d);
    assert_eq!(objects(d), before);
}

fn oldest_pack(dir: &Path) -> PathBuf {
    let pack_dir = dir.join(".git/objects/pack");
    packs(dir)
        .into_iter()
        .map(|p| pack_dir.join(p))
        .min_by_key(|p| {
            std::fs::metadata(p.with_extension("pack"))
                .unwrap()
                .modified()
                .unwrap()
        })
        .unwrap()
}

/// An object whose stored bytes no longer match the CRC its index records is not copied:
/// the merge gives up and removes nothing.
#[test]
fn a_damaged_pack_stops_the_merge_and_every_pack_stays() {
    let (dir, repo) = packed_history(2, 4);
    let d = dir.path();
    let oldest = oldest_pack(d);
    let path = oldest.with_extension("pack");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let names = packs(d);
    let err = repo.merge_packs().unwrap_err();
    assert!(matches!(err, GitError::BadPack { .. }), "{err}");
    assert!(err.to_string().contains("git fsck"), "{err}");
    assert_eq!(packs(d), names);
}

#[test]
fn a_multi_pack_index_makes_the_merge_leave_every_pack() {
    let (dir, repo) = packed_history(2, 2);
    let d = dir.path();
    git(d, &["multi-pack-index", "write"]);
    assert_eq!(repo.merge_packs().unwrap(), 0);
    assert_eq!(packs(d).len(), 2);
}

#[test]
fn delta_distances_and_crcs_are_encoded_as_git_does() {
    for ofs in [
        0u64,
        1,
        127,
        128,
        129,
        16_511,
        16_512,
        1 << 20,
        u64::from(u32::MAX) + 7,
    ] {
        let bytes = ofs_encode(ofs);
        assert_eq!(ofs_decode(&bytes), Some((ofs, bytes.len())), "{ofs}");
    }
    assert_eq!(ofs_encode(128), vec![0x80, 0x00]);
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
}

/// Adds `rounds` commits to `repo` and packs them (one more pack).
fn more_history(dir: &Path, repo: &Repo, tag: &str, rounds: usize) {
    for c in 0..rounds {
        let path = format!("work/ready/{tag}-{c}.yaml");
        write(dir, &path, &format!("title: {tag} {c}\n"));
        commit(repo, &[path.as_str()], &format!("{tag} {c}")).unwrap();
    }
    assert!(repo.pack_loose_objects(0).unwrap() > 0);
}

/// The next merge reads what the last one's bitmap says its HEAD reached and walks only the
/// commits since; the bitmap it writes still agrees with a walk of the whole history.
#[test]
fn the_next_merge_starts_from_the_last_bitmap_and_its_own_is_exact() {
    let (dir, repo) = packed_history(2, 4);
    let d = dir.path();
    assert_eq!(repo.merge_packs().unwrap(), 2);
    let base = d.join(".git/objects/pack").join(&packs(d)[0]);
    let (tip, reached) = super::bitmap::read(&base).expect("coord's own bitmap reads back");
    assert_eq!(tip.to_string(), git(d, &["rev-parse", "HEAD"]).trim());
    assert_eq!(reached.len(), objects(d).len());
    more_history(d, &repo, "later", 3);
    assert_eq!(repo.merge_packs().unwrap(), 2);
    assert_eq!(packs(d).len(), 1);
    test_bitmap(d);
    fsck(d);
}

/// When the last bitmap's commit is no longer in HEAD's history (a reset, or `coord sync`
/// dropping tick commits), what it reached is not taken: HEAD may not reach it all.
#[test]
fn a_bitmap_of_a_commit_head_left_behind_is_not_taken() {
    let (dir, repo) = packed_history(2, 4);
    let d = dir.path();
    assert_eq!(repo.merge_packs().unwrap(), 2);
    git(d, &["reset", "-q", "--hard", "HEAD~3"]);
    more_history(d, &repo, "other", 2);
    assert_eq!(repo.merge_packs().unwrap(), 2);
    test_bitmap(d);
    fsck(d);
}
