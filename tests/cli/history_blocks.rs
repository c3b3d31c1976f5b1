//! History folders as blocks (docs/internals.md "History folders as blocks"): once a load has
//! found every file of a recorded history folder a task file as its folder says, a tick takes
//! the folder whole, its ids alone, and puts on its board only the files the planner may ask
//! for. Each test checks the folders are judged (so the tick took them as blocks) and that
//! the tick still sees what it saw with a file each.

use crate::finished::{finished_in as finished, input_v, person_commits, tick};
use crate::harness::TestRepo;
use serde_json::json;
use std::time::Duration;

const RECORD: &str = ".git/coord/history-folders";

/// A task for `bot` titled `Next` that waits for `dep` and takes its output `v` as input.
fn dependent(dep: &str) -> String {
    crate::finished::dependent(dep, "Next")
}

/// Whether the record holds the folder `rel` (work-relative) judged: the flag byte follows
/// its path (length first, 8 bytes), its stat key (56 bytes) and its tree id (20 bytes).
pub fn judged(r: &TestRepo, rel: &str) -> bool {
    let mut stored = (rel.len() as u64).to_le_bytes().to_vec();
    stored.extend_from_slice(rel.as_bytes());
    let bytes = std::fs::read(r.abs(RECORD)).unwrap_or_default();
    let Some(at) = bytes.windows(stored.len()).position(|w| w == stored) else {
        return false;
    };
    bytes.get(at + stored.len() + 56 + 20) == Some(&1)
}

/// A repo with agent `bot`, the done task `old` (output 1), the failed task `bad` and the
/// archived task `arch` (output 7), committed by a person, after the ticks that recorded and
/// judged their folders.
fn blocked_repo() -> TestRepo {
    let r = TestRepo::with_agents(&["bot --max-active 5"]);
    r.write("work/done/old.yaml", &finished("Old", "done", 1));
    r.write("work/failed/bad.yaml", &finished("Bad", "failed", 2));
    r.write(
        "work/archive/2026-07/arch.yaml",
        &finished("Arch", "done", 7),
    );
    person_commits(&r, "finished tasks");
    tick(&r);
    for rel in ["done", "failed", "archive/2026-07"] {
        assert!(judged(&r, rel), "{rel} is judged");
    }
    r
}

#[test]
fn a_new_inbox_task_reusing_an_id_held_in_a_block_goes_to_invalid() {
    let r = blocked_repo();
    // Another file name: a copy under the same one is a file reappearing (a duplicate).
    r.write("work/inbox/old.yml", "title: Again\n");
    r.write("work/inbox/arch.yml", "title: Again\n");
    tick(&r);
    assert_eq!(
        r.find("old"),
        ["work/done/old.yaml", "work/invalid/old.yml"]
    );
    assert_eq!(
        r.find("arch"),
        ["work/archive/2026-07/arch.yaml", "work/invalid/arch.yml"]
    );
    let errors = r.read("work/invalid/old.yml.errors");
    assert!(errors.contains("work/done/old.yaml"), "{errors}");
}

#[test]
fn coord_new_refuses_an_id_held_in_a_block() {
    let r = blocked_repo();
    let (_, err) = r.code(&["new", "--id", "old", "Again"], 1);
    assert!(err.contains("old"), "{err}");
    assert_eq!(r.find("old"), ["work/done/old.yaml"]);
}

#[test]
fn a_live_copy_of_an_id_in_a_block_is_a_duplicate() {
    let r = blocked_repo();
    r.write("work/ready/old.yaml", &finished("Old", "ready", 1));
    person_commits(&r, "a copy");
    let said = tick(&r);
    assert!(said.contains("old exists in 2 places"), "{said}");
    assert_eq!(r.find("old"), ["work/done/old.yaml", "work/ready/old.yaml"]);
}

/// Two blocks holding one id: the copy added to the month makes that folder walked file by
/// file once; the ticks after take both as blocks and still report the duplicate.
#[test]
fn an_id_two_blocks_hold_is_a_duplicate() {
    let r = blocked_repo();
    r.write("work/archive/2026-07/old.yaml", &finished("Old", "done", 1));
    person_commits(&r, "a copy in the archive");
    let first = tick(&r);
    assert!(first.contains("old exists in 2 places"), "{first}");
    assert!(judged(&r, "archive/2026-07") && judged(&r, "done"));
    r.task("other", "title: Other\nagent: bot\n");
    let later = tick(&r);
    assert!(later.contains("old exists in 2 places"), "{later}");
}

#[test]
fn dependents_of_tasks_in_blocks_read_their_state_and_output() {
    let r = blocked_repo();
    r.task("next", &dependent("old"));
    r.task("late", &dependent("arch").replace("Next", "Late"));
    r.task("doomed", &dependent("bad").replace("Next", "Doomed"));
    tick(&r);
    assert_eq!(r.where_is("next"), "work/assigned/bot/next.yaml");
    assert_eq!(input_v(&r, "next"), json!(1));
    assert_eq!(r.where_is("late"), "work/assigned/bot/late.yaml");
    assert_eq!(input_v(&r, "late"), json!(7));
    assert_eq!(r.where_is("doomed"), "work/failed/doomed.yaml");
    assert!(r
        .read("work/failed/doomed.yaml")
        .contains("dependency_failed"));
}

/// A ready task whose dependency sits in a block leaves `blocked/` on a tick that admitted
/// it earlier (the dependency is read from the block only when asked for).
#[test]
fn a_blocked_task_goes_ready_when_its_dependency_is_in_a_block() {
    let r = blocked_repo();
    r.write(
        "work/blocked/wait.yaml",
        "title: Wait\ndepends_on: [old]\ncoord:\n  state: blocked\n  attempt: 0\n  created_at: 2026-10-01T10:00:00Z\n",
    );
    person_commits(&r, "a blocked task");
    tick(&r);
    assert!(judged(&r, "done"));
    assert_eq!(r.where_is("wait"), "work/assigned/bot/wait.yaml");
}

/// A tick that finds nothing to do saves what `coord status` shows: the tasks of its blocks
/// are counted.
#[test]
fn status_list_show_and_archive_see_the_tasks_of_blocks() {
    let r = blocked_repo();
    // A change that asks for nothing: the tick plans with the blocks and stays quiet.
    r.write("work/ready/.gitkeep", "kept\n");
    person_commits(&r, "a change elsewhere");
    tick(&r);
    let out = r.run(&["-v", "status", "--json"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("showing the board it saved"), "{said}");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let counts = status["counts"].clone();
    assert_eq!(counts["done"], json!(1), "{counts}");
    assert_eq!(counts["failed"], json!(1), "{counts}");
    assert_eq!(counts["archived"], json!(1), "{counts}");
    assert!(r.ok(&["list"]).contains("old"));
    assert!(r.ok(&["list", "--state", "archived"]).contains("arch"));
    assert_eq!(
        r.json(&["show", "old", "--json"])["task"]["title"],
        json!("Old")
    );
    r.ok(&["archive", "--older-than", "1d"]);
    assert_eq!(r.where_is("old"), "work/archive/2026-10/old.yaml");
}

/// A task a person moved into a recorded folder is adopted by the next tick even when a
/// command walked (and judged the folders) in between: a folder is judged only when every
/// file agrees with it.
#[test]
fn a_hand_move_into_done_is_adopted_after_a_command_walked() {
    let r = blocked_repo();
    r.write(
        "work/done/moved.yaml",
        "title: Moved\ncoord:\n  state: ready\n  attempt: 0\n",
    );
    person_commits(&r, "moved by hand");
    std::thread::sleep(Duration::from_millis(200));
    r.ok(&["status"]);
    tick(&r);
    assert!(r.read("work/done/moved.yaml").contains("state: done"));
}

/// A block file moved out by hand, or changed in place and committed, or changed by a reset,
/// is seen by the next tick: its folder's stat key or HEAD's tree for it differs.
#[test]
fn a_block_changed_by_hand_by_a_commit_or_a_reset_is_walked_again() {
    let r = blocked_repo();
    std::fs::rename(r.abs("work/done/old.yaml"), r.abs("work/ready/old.yaml")).expect("mv");
    tick(&r);
    assert!(r.read(&r.where_is("old")).contains("state: "));
    assert_ne!(r.where_is("old"), "work/done/old.yaml");

    let base = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    r.write(
        "work/archive/2026-07/arch.yaml",
        &finished("Arch", "done", 8),
    );
    person_commits(&r, "a corrected output");
    r.task("n1", &dependent("arch"));
    tick(&r);
    assert_eq!(input_v(&r, "n1"), json!(8), "the committed edit");

    tick(&r);
    assert!(judged(&r, "archive/2026-07"));
    r.git(&["reset", "-q", "--hard", &base]);
    r.task("n2", &dependent("arch").replace("Next", "Next 2"));
    tick(&r);
    assert_eq!(input_v(&r, "n2"), json!(7), "the reset version");

    // An edit in place, committed: the folder's listing is the same, HEAD's tree is not, and
    // a state the folder does not have is adopted.
    tick(&r);
    assert!(judged(&r, "failed"));
    r.write("work/failed/bad.yaml", &finished("Bad", "ready", 2));
    person_commits(&r, "a state edited in place");
    tick(&r);
    assert!(r.read("work/failed/bad.yaml").contains("state: failed"));

    // A checkout of a branch whose month holds another version of the file.
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write(
        "work/archive/2026-07/arch.yaml",
        &finished("Arch", "done", 9),
    );
    person_commits(&r, "another output on a branch");
    r.git(&["checkout", "-q", "-"]);
    tick(&r);
    tick(&r);
    assert!(judged(&r, "archive/2026-07"));
    r.git(&["checkout", "-q", "other"]);
    r.task("n3", &dependent("arch").replace("Next", "Next 3"));
    tick(&r);
    assert_eq!(input_v(&r, "n3"), json!(9), "the checked out version");
}

/// A cycle through tasks in blocks is found: the files of a block a dependency chain reaches
/// are put on the board in turn.
#[test]
fn a_dependency_cycle_through_blocks_is_found() {
    let r = blocked_repo();
    let with_dep = |title: &str, dep: &str| {
        finished(title, "done", 1).replace("result:", &format!("depends_on: [{dep}]\nresult:"))
    };
    r.write("work/done/d1.yaml", &with_dep("D1", "d2"));
    r.write("work/archive/2026-07/d2.yaml", &with_dep("D2", "x"));
    person_commits(&r, "a chain of finished tasks");
    tick(&r);
    tick(&r);
    assert!(judged(&r, "done") && judged(&r, "archive/2026-07"));
    r.task("x", "title: X\ndepends_on: [d1]\n");
    tick(&r);
    assert_eq!(r.where_is("x"), "work/invalid/x.yaml");
    let errors = r.read("work/invalid/x.yaml.errors");
    assert!(errors.contains("cycle"), "{errors}");
}

/// A tick with blocks writes the stat cache for what it read and keeps the files of the
/// blocks' folders, whose entries it did not take (a folder with no task on the board would
/// otherwise lose its file).
#[test]
fn a_tick_with_blocks_keeps_their_cache_files() {
    use std::os::unix::fs::MetadataExt;
    let r = blocked_repo();
    let done_file = r.abs(".git/coord/stat-cache.d/done.bin");
    let before = std::fs::metadata(&done_file)
        .expect("done/'s cache file")
        .ino();
    r.task("other", "title: Other\nagent: bot\n");
    tick(&r);
    tick(&r);
    let after = std::fs::metadata(&done_file).expect("kept").ino();
    assert_eq!(after, before, "done/'s file is left as it is");
    let main = std::fs::read(r.abs(".git/coord/stat-cache.bin")).expect("main file");
    let main = String::from_utf8_lossy(&main);
    assert!(
        main.contains("assigned/bot/other.yaml"),
        "the tick wrote the main file"
    );
}

/// A task a person moves by hand to another agent starts a new attempt there, which resolves
/// its input again: an input naming a task in a block gets that task's output, as a tick
/// over every file gives it. (The block file was not on the board, since only waiting tasks'
/// dependencies were followed: the attempt failed with `bad_expression`.)
#[test]
fn an_input_naming_a_block_task_is_resolved_again_after_a_hand_move() {
    let r = blocked_repo();
    r.ok(&["agents", "add", "amy"]);
    let task =
        "title: E\nagent: bot\ndepends_on: [old]\ninput:\n  v: ${tasks.old.result.output.v}\n";
    r.write("work/inbox/e.yaml", task);
    person_commits(&r, "e");
    tick(&r);
    assert_eq!(r.where_is("e"), "work/assigned/bot/e.yaml");
    assert_eq!(input_v(&r, "e"), json!(1));
    tick(&r);
    std::fs::create_dir_all(r.abs("work/assigned/amy")).expect("mkdir");
    r.git(&["mv", "work/assigned/bot/e.yaml", "work/assigned/amy/e.yaml"]);
    r.git(&["commit", "-q", "-m", "e to amy"]);

    tick(&r);

    assert_eq!(r.where_is("e"), "work/assigned/amy/e.yaml");
    let shown = r.json(&["show", "e", "--json"]);
    assert_eq!(shown["task"]["coord"]["input"]["v"], json!(1), "{shown}");
    assert!(shown["task"]["coord"]["error"].is_null(), "{shown}");
}
