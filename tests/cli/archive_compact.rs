//! Archived tasks held compactly by the planner (docs/internals.md, "Archived tasks are
//! history"): an archived task that is the one live copy of its id gets no planning entry,
//! only a lookup by id. Every rule reads it as before: a dependency on it is satisfied when it
//! was done and fails its dependents when it failed or was cancelled, an expression reads its
//! output, its id stays taken, a command on it names its state, and a person moving it out of
//! the archive by hand makes it live again.

use crate::harness::TestRepo;
use serde_json::json;
use std::time::Duration;

const MONTH: &str = "work/archive/2026-10";

/// An archived task ending in `state` as a person commits it, with the output `v`.
fn archived(title: &str, v: u32, state: &str) -> String {
    format!(
        "title: {title}\nresult:\n  status: success\n  attempt: 1\n  agent: bot\n  \
         output: {{v: {v}}}\ncoord:\n  state: {state}\n  attempt: 1\n  \
         created_at: 2026-10-01T10:00:00Z\n  finished_at: 2026-10-05T10:00:00Z\n"
    )
}

/// A repo with agent `bot` and the archived tasks `old` (done, output 1), `bad` (failed) and
/// `gone` (cancelled), committed by a person, after a tick that recorded their month.
fn archived_repo() -> TestRepo {
    let r = TestRepo::with_agents(&["bot --max-active 5"]);
    r.write(&format!("{MONTH}/old.yaml"), &archived("Old", 1, "done"));
    r.write(&format!("{MONTH}/bad.yaml"), &archived("Bad", 2, "failed"));
    r.write(
        &format!("{MONTH}/gone.yaml"),
        &archived("Gone", 3, "cancelled"),
    );
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "archive"]);
    tick(&r);
    r
}

/// Runs a tick once every stamp is old enough to be trusted (the racy-timestamp rule).
fn tick(r: &TestRepo) {
    std::thread::sleep(Duration::from_millis(200));
    r.ok(&["tick"]);
}

/// The error code task `id`'s `coord:` block records.
fn error_code(r: &TestRepo, id: &str) -> serde_json::Value {
    r.json(&["show", id, "--json"])["task"]["coord"]["error"]["code"].clone()
}

#[test]
fn a_dependency_on_an_archived_done_task_is_satisfied_and_its_output_read() {
    let r = archived_repo();
    r.task(
        "next",
        "title: Next\nagent: bot\ndepends_on: [old]\ninput:\n  v: ${tasks.old.result.output.v}\n",
    );
    tick(&r);
    assert_eq!(r.where_is("next"), "work/assigned/bot/next.yaml");
    let shown = r.json(&["show", "next", "--json"]);
    assert_eq!(shown["task"]["coord"]["input"]["v"], json!(1));
    assert_eq!(r.where_is("old"), format!("{MONTH}/old.yaml"));
}

#[test]
fn a_dependency_on_an_archived_failed_or_cancelled_task_fails_its_dependents() {
    let r = archived_repo();
    r.task("n2", "title: N2\nagent: bot\ndepends_on: [bad]\n");
    r.task("n3", "title: N3\nagent: bot\ndepends_on: [gone]\n");
    tick(&r);
    assert_eq!(r.where_is("n2"), "work/failed/n2.yaml");
    assert_eq!(r.where_is("n3"), "work/failed/n3.yaml");
    assert_eq!(error_code(&r, "n2"), json!("dependency_failed"));
    assert_eq!(error_code(&r, "n3"), json!("dependency_failed"));
}

/// A new file reusing an archived id under another name goes to `invalid/`; one under the
/// same name is a second copy of the task (docs/security.md): reported, and the archived task
/// stays.
#[test]
fn a_new_task_reusing_an_archived_id_is_rejected() {
    let r = archived_repo();
    r.write("work/inbox/old.yml", "title: Reuse\n");
    r.task("gone", "title: Same name\n");
    tick(&r);
    assert_eq!(
        r.find("old"),
        ["work/archive/2026-10/old.yaml", "work/invalid/old.yml"]
    );
    let errors = r.read("work/invalid/old.yml.errors");
    assert!(
        errors.contains("id 'old' is taken by work/archive/2026-10/old.yaml"),
        "{errors}"
    );
    let status = r.ok(&["status"]);
    assert!(
        status.contains("duplicate ids (run 'coord doctor'):\n  gone\n"),
        "the second copy is reported: {status}"
    );
    assert_eq!(
        r.find("gone"),
        ["work/archive/2026-10/gone.yaml", "work/inbox/gone.yaml"]
    );
    let (_, err) = r.code(&["new", "Again", "--id", "bad"], 1);
    assert!(err.contains("a task with id 'bad' already exists"), "{err}");
}

#[test]
fn status_list_show_and_commands_name_archived_tasks() {
    let r = archived_repo();
    r.task("fresh", "title: Fresh\n");
    tick(&r);
    let status = r.ok(&["status"]);
    assert!(status.contains("archived 3"), "{status}");
    let list = r.ok(&["list", "--state", "archived"]);
    for id in ["old", "bad", "gone"] {
        assert!(list.contains(id), "{list}");
    }
    let shown = r.json(&["show", "old", "--json"]);
    assert_eq!(shown["task"]["result"]["output"]["v"], json!(1), "{shown}");
    let (_, err) = r.code(&["cancel", "old"], 1);
    assert!(err.contains("task 'old' is archived"), "{err}");
    assert_eq!(r.where_is("old"), format!("{MONTH}/old.yaml"));
}

/// A person moving an archived task out by hand (to `ready/`, to run it again) makes it live:
/// the tick assigns it and dependents wait for it again.
#[test]
fn a_task_moved_out_of_the_archive_by_hand_is_live_again() {
    let r = archived_repo();
    std::fs::rename(
        r.abs(&format!("{MONTH}/old.yaml")),
        r.abs("work/ready/old.yaml"),
    )
    .expect("mv");
    r.task("next", "title: Next\nagent: bot\ndepends_on: [old]\n");
    tick(&r);
    assert_eq!(r.where_is("old"), "work/assigned/bot/old.yaml");
    assert_eq!(r.where_is("next"), "work/blocked/next.yaml");
    assert_eq!(r.git_status(), "");
}
