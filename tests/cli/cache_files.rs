//! The stat cache's files end to end (docs/internals.md, "The stat cache in one file per
//! history folder"): each history folder's entries are kept in a file of their own under
//! `.git/coord/stat-cache.d/`; one damaged, torn or missing only means reading that folder's
//! files again, tasks moved between folders by hand or by a tick are read where they are, and
//! a folder's file goes with the folder.

use crate::finished::{dependent, finished, input_v, person_commits, tick};
use crate::harness::TestRepo;
use serde_json::json;
use std::time::Duration;

const FILES: &str = ".git/coord/stat-cache.d";
const DONE_FILE: &str = ".git/coord/stat-cache.d/done.bin";

/// Whether the cache file at `rel` is one coord wrote (its format's first bytes).
fn written(r: &TestRepo, rel: &str) -> bool {
    std::fs::read(r.abs(rel)).is_ok_and(|b| b.starts_with(b"coord stat-cache 9\n"))
}

/// A repo with agent `bot` and the done task `old` (output 1) committed by a person, cached
/// in `done/`'s file.
fn cached_repo() -> TestRepo {
    let r = TestRepo::with_agents(&["bot --max-active 5"]);
    r.write("work/done/old.yaml", &finished("Old", 1));
    person_commits(&r, "a done task");
    tick(&r);
    tick(&r);
    assert!(written(&r, DONE_FILE), "done/ has its own file");
    r
}

/// `done/`'s file with a byte of its index flipped, cut in half or missing: the tick reads
/// `done/`'s files again, a dependent gets the right output, and the file is written again.
#[test]
fn a_damaged_torn_or_missing_folder_file_means_reading_that_folder_again() {
    for how in ["flipped", "cut", "missing"] {
        let r = cached_repo();
        let bytes = std::fs::read(r.abs(DONE_FILE)).expect("done's file");
        match how {
            "flipped" => {
                // A byte of the entry's content hash (after the header, the entry count,
                // the path and the stat key): only the index's checksum tells.
                let mut bad = bytes.clone();
                bad[19 + 32 + 8 + 8 + "done/old.yaml".len() + 56] ^= 1;
                std::fs::write(r.abs(DONE_FILE), bad).expect("write");
            }
            "cut" => std::fs::write(r.abs(DONE_FILE), &bytes[..bytes.len() / 2]).expect("write"),
            _ => std::fs::remove_file(r.abs(DONE_FILE)).expect("rm"),
        }
        r.task("next", &dependent("old", "Next"));
        tick(&r);
        assert_eq!(input_v(&r, "next"), json!(1), "{how}");
        assert_eq!(r.git_status(), "", "{how}");
        tick(&r);
        assert!(written(&r, DONE_FILE), "{how}: written again");
    }
}

/// A done task moved by hand into an archive month, edited and committed there, and moved
/// back: a dependent reads the edited output (never the entry `done/`'s file had for it),
/// and a task a tick moves from `assigned/` into `done/` is read there.
#[test]
fn tasks_moved_between_folders_are_read_where_they_are() {
    let r = cached_repo();
    std::fs::create_dir_all(r.abs("work/archive/2026-10")).expect("mkdir");
    let (done, month) = ("work/done/old.yaml", "work/archive/2026-10/old.yaml");
    std::fs::rename(r.abs(done), r.abs(month)).expect("mv out");
    tick(&r);
    r.write(month, &finished("Old", 2));
    person_commits(&r, "a corrected result");
    tick(&r);
    assert!(written(&r, &format!("{FILES}/archive-2026-10.bin")));
    std::fs::rename(r.abs(month), r.abs(done)).expect("mv back");
    r.task("next", &dependent("old", "Next"));
    tick(&r);
    assert_eq!(r.where_is("old"), done);
    assert_eq!(input_v(&r, "next"), json!(2), "the edited output");

    r.ok(&["complete", "next", "--agent", "bot"]);
    tick(&r);
    assert_eq!(r.where_is("next"), "work/done/next.yaml");
    r.task("last", "title: Last\nagent: bot\ndepends_on: [next]\n");
    tick(&r);
    assert_eq!(r.where_is("last"), "work/assigned/bot/last.yaml");
    assert_eq!(r.git_status(), "");
}

/// An archive month deleted (by a person, committed) takes its cache file with it; the
/// other folders' files stay.
#[test]
fn a_deleted_folder_takes_its_cache_file_with_it() {
    let r = cached_repo();
    r.write("work/archive/2026-09/gone.yaml", &finished("Gone", 3));
    person_commits(&r, "an archived task");
    tick(&r);
    tick(&r);
    let month_file = format!("{FILES}/archive-2026-09.bin");
    assert!(written(&r, &month_file));
    r.git(&["rm", "-rq", "work/archive/2026-09"]);
    r.git(&["commit", "-q", "-m", "drop a month"]);
    tick(&r);
    assert!(!r.exists(&month_file), "the month's file is gone");
    assert!(written(&r, DONE_FILE), "done/'s file stays");
}

/// A tick killed at any point while `done/`'s tasks move by hand into an archive month, and
/// one of them moved straight back and corrected in place (same inode, size and mtime: only
/// its ctime differs from what `done/`'s file may still hold for it): the next tick reads the
/// corrected output, every task is in one place and `git status` is clean.
#[test]
fn a_tick_killed_as_entries_move_between_files_trusts_none_in_its_old_place() {
    for delay_ms in [0, 5, 15, 40, 100] {
        let r = TestRepo::with_agents(&["bot --max-active 5"]);
        for i in 0..200 {
            r.write(&format!("work/done/d{i}.yaml"), &finished("Done", i));
        }
        person_commits(&r, "done tasks");
        tick(&r);
        tick(&r);
        let d5 = "work/done/d5.yaml";
        let mtime = std::fs::metadata(r.abs(d5))
            .and_then(|m| m.modified())
            .expect("mtime");
        std::fs::create_dir_all(r.abs("work/archive/2026-09")).expect("mkdir");
        for i in 0..100 {
            let (from, to) = (
                format!("work/done/d{i}.yaml"),
                format!("work/archive/2026-09/d{i}.yaml"),
            );
            std::fs::rename(r.abs(&from), r.abs(&to)).expect("mv");
        }
        person_commits(&r, "archived by hand");
        std::thread::sleep(Duration::from_millis(200));
        let mut child = r.spawn(&["tick"]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        std::fs::rename(r.abs("work/archive/2026-09/d5.yaml"), r.abs(d5)).expect("mv back");
        std::fs::write(r.abs(d5), finished("Done", 7)).expect("write");
        let file = std::fs::File::options().write(true).open(r.abs(d5));
        file.and_then(|f| f.set_modified(mtime)).expect("set mtime");
        person_commits(&r, "one back, corrected");
        r.task("next", &dependent("d5", "Next"));
        tick(&r);
        assert_eq!(input_v(&r, "next"), json!(7), "killed after {delay_ms} ms");
        for (id, paths) in crate::harness::task_places(r.path()) {
            assert_eq!(
                paths.len(),
                1,
                "{id} at {paths:?} (killed after {delay_ms} ms)"
            );
        }
        assert_eq!(r.git_status(), "", "killed after {delay_ms} ms");
    }
}
