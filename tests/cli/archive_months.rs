//! The archive-month record end to end (`.git/coord/history-folders`, docs/internals.md
//! "Archived tasks are history"): a tick takes the files of an archive month folder that is
//! committed and unchanged from the record instead of an lstat each; an in-place edit of an
//! archived file is left to the person until it is committed, and every other change (a file
//! added, removed or moved by hand, `coord archive`, a staged edit, a reset, a lost or
//! corrupt record) is seen as before.

use crate::finished::{finished as archived, input_v, person_commits, recordings, tick};
use crate::harness::TestRepo;
use serde_json::json;
use std::time::Duration;

const MONTH: &str = "work/archive/2026-10";
const RECORD: &str = ".git/coord/history-folders";

/// A task that waits for `old` and takes its output `v` as input.
fn dependent() -> &'static str {
    "title: Next\nagent: bot\ndepends_on: [old]\ninput:\n  v: ${tasks.old.result.output.v}\n"
}

/// A repo with agent `bot` and the archived task `old` (output 1) committed by a person,
/// after a tick that recorded its month.
fn recorded_repo() -> TestRepo {
    let r = TestRepo::with_agents(&["bot --max-active 5"]);
    r.write(&format!("{MONTH}/old.yaml"), &archived("Old", 1));
    person_commits(&r, "archive");
    tick(&r);
    assert!(recorded(&r), "the month is recorded");
    r
}

fn recorded(r: &TestRepo) -> bool {
    std::fs::read(r.abs(RECORD))
        .is_ok_and(|b| String::from_utf8_lossy(&b).contains("archive/2026-10"))
}

/// The rule: an archived file edited in place is not read, recorded or committed while
/// nobody commits it (even when the stat cache is lost, its committed version is what the
/// board holds); once a person commits it, dependents read the new version.
#[test]
fn an_archived_file_edited_in_place_is_left_to_the_person_until_committed() {
    let r = recorded_repo();
    let old = format!("{MONTH}/old.yaml");
    r.write(&old, &archived("Old", 2));
    let commits = r.commit_count();
    tick(&r);
    assert_eq!(r.commit_count(), commits, "nothing recorded");
    assert_eq!(r.git_status(), format!(" M {old}\n"));

    std::fs::remove_file(r.abs(".git/coord/stat-cache.bin")).expect("rm cache");
    r.task("next", dependent());
    r.git(&["add", "work/inbox/next.yaml"]);
    r.git(&["commit", "-q", "-m", "a dependent"]);
    tick(&r);
    assert_eq!(r.where_is("next"), "work/assigned/bot/next.yaml");
    assert_eq!(input_v(&r, "next"), json!(1), "the committed version");
    assert_eq!(r.git_status(), format!(" M {old}\n"));

    r.task("next2", &dependent().replace("Next", "Next 2"));
    person_commits(&r, "the edit and a dependent");
    tick(&r);
    assert_eq!(input_v(&r, "next2"), json!(2), "the committed edit is read");
    assert_eq!(r.git_status(), "");
}

/// A staged edit (the index's tree for the month no longer HEAD's) is seen and recorded as
/// any change a person makes, and so is a reset that rewrites the month.
#[test]
fn a_staged_edit_or_a_reset_of_an_archive_month_is_seen() {
    let r = recorded_repo();
    let old = format!("{MONTH}/old.yaml");
    r.write(&old, &archived("Old", 2));
    r.git(&["add", &old]);
    let before = recordings(&r);
    r.task("next", dependent());
    tick(&r);
    assert_eq!(recordings(&r), before + 1, "recorded");
    assert_eq!(input_v(&r, "next"), json!(2));
    assert_eq!(r.git_status(), "");

    tick(&r);
    assert!(recorded(&r));
    r.git(&["reset", "-q", "--hard", "HEAD~3"]);
    assert_eq!(r.read(&old), archived("Old", 1));
    r.task("next3", &dependent().replace("Next", "Next 3"));
    tick(&r);
    assert_eq!(input_v(&r, "next3"), json!(1), "the reset version");
}

/// A file added or removed by hand in a recorded month changes the folder: the tick walks it
/// again and records the change.
#[test]
fn a_file_added_or_removed_by_hand_in_an_archive_month_is_seen() {
    let r = recorded_repo();
    let extra = format!("{MONTH}/extra.yaml");
    r.write(&extra, &archived("Extra", 3));
    let before = recordings(&r);
    tick(&r);
    assert_eq!(recordings(&r), before + 1, "the new file is recorded");
    assert_eq!(r.git_status(), "");
    assert!(r.git(&["ls-files", &extra]).contains("extra.yaml"));

    tick(&r);
    assert!(recorded(&r));
    std::fs::remove_file(r.abs(&extra)).expect("rm");
    tick(&r);
    assert_eq!(recordings(&r), before + 2, "the removal is recorded");
    assert_eq!(r.git_status(), "");
    assert_eq!(r.git(&["ls-files", &extra]), "");
}

/// A file moved by hand out of a recorded month, and `coord archive` moving it back, leave
/// exactly one copy of the task, where it was moved, and dependents still read it.
#[test]
fn a_hand_move_out_of_an_archive_month_and_coord_archive_into_it_are_seen() {
    let r = recorded_repo();
    std::fs::rename(
        r.abs(&format!("{MONTH}/old.yaml")),
        r.abs("work/done/old.yaml"),
    )
    .expect("mv");
    tick(&r);
    assert_eq!(r.where_is("old"), "work/done/old.yaml");
    assert_eq!(r.git_status(), "");

    tick(&r);
    r.ok(&["archive", "--older-than", "0s"]);
    assert_eq!(r.where_is("old"), format!("{MONTH}/old.yaml"));
    r.task("next", dependent());
    tick(&r);
    assert_eq!(r.where_is("old"), format!("{MONTH}/old.yaml"));
    assert_eq!(input_v(&r, "next"), json!(1));
    assert_eq!(r.git_status(), "");
}

/// A corrupt record is never trusted: the month is walked file by file (an in-place edit is
/// then seen and recorded, as before the record), and the record is written again.
#[test]
fn a_corrupt_record_means_a_full_walk() {
    let r = recorded_repo();
    let mut bytes = std::fs::read(r.abs(RECORD)).expect("record");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(r.abs(RECORD), bytes).expect("write");
    let old = format!("{MONTH}/old.yaml");
    r.write(&old, &archived("Old", 2));
    let before = recordings(&r);
    tick(&r);
    assert_eq!(recordings(&r), before + 1, "the edit was seen");
    assert_eq!(r.git_status(), "");
    tick(&r);
    assert!(recorded(&r), "written again");
}

/// `coord validate` reads every file: an archived file broken in place is reported, while the
/// tick keeps the committed version and leaves the file to the person.
#[test]
fn validate_reports_an_archived_file_broken_in_place() {
    let r = recorded_repo();
    let old = format!("{MONTH}/old.yaml");
    r.write(&old, "title: [broken\n");
    let out = r.run(&["validate"]);
    assert!(!out.status.success(), "{out:?}");
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("old.yaml"), "{said}");
    r.task("next", dependent());
    r.git(&["add", "work/inbox/next.yaml"]);
    r.git(&["commit", "-q", "-m", "a dependent"]);
    tick(&r);
    assert_eq!(input_v(&r, "next"), json!(1));
    assert_eq!(r.git_status(), format!(" M {old}\n"));
}

/// `coord archive` killed at any point while it moves tasks into a recorded month: the folder
/// changed, so the recovery tick walks it file by file; every task is in one place, dependents
/// read the archived ones and `git status` is clean.
#[test]
fn a_killed_archive_into_a_recorded_month_loses_nothing() {
    for delay_ms in [0, 5, 15, 40, 100] {
        let r = recorded_repo();
        for i in 0..20 {
            r.write(&format!("work/done/d{i}.yaml"), &archived("Done", 1));
        }
        person_commits(&r, "done tasks");
        tick(&r);
        let mut child = r.spawn(&["archive", "--older-than", "0s"]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        r.ok(&["tick"]);
        r.ok(&["archive", "--older-than", "0s"]);
        tick(&r);
        let places = crate::harness::task_places(r.path());
        for (id, paths) in &places {
            assert_eq!(
                paths.len(),
                1,
                "{id} at {paths:?} (killed after {delay_ms} ms)"
            );
        }
        for i in 0..20 {
            assert_eq!(r.where_is(&format!("d{i}")), format!("{MONTH}/d{i}.yaml"));
        }
        r.task(
            "next",
            &dependent()
                .replace("[old]", "[d7]")
                .replace(".old.", ".d7."),
        );
        tick(&r);
        assert_eq!(input_v(&r, "next"), json!(1), "killed after {delay_ms} ms");
        assert_eq!(r.git_status(), "", "killed after {delay_ms} ms");
    }
}
