//! Engine end to end: people's bytes survive every transition, commits hold only
//! touched paths with trailers, a user's own changes are left alone, the lock, dry runs,
//! quarantine, hand moves, duplicates, and the status/show/log/claim/complete/fail/doctor
//! commands.

use crate::harness::TestRepo;
use std::fs::{File, OpenOptions};
use std::io::Write;

const HAND: &str = "# A hand-written task.   \n\
title:    \"Fix issue #42\"   # trailing comment\n\
\n\
description: |\n  line one\n    indented line\n\n\
labels: [ a,b ,  \"c\" ]\n\
capabilities:   []\n\
agent: alice\n\
input: {k: [1, 2], s: 'x'}\n\
# last comment before coord\n";

/// Returns the commits after `base` (oldest first).
fn commits_since(r: &TestRepo, base: &str) -> Vec<String> {
    let out = r.git(&["rev-list", "--reverse", &format!("{base}..HEAD")]);
    out.lines().map(str::to_string).collect()
}

fn head(r: &TestRepo) -> String {
    r.git(&["rev-parse", "HEAD"]).trim().to_string()
}

/// Returns the paths a commit touched (renames as both sides).
fn touched(r: &TestRepo, c: &str) -> Vec<String> {
    let out = r.git(&["show", "--name-only", "--no-renames", "--format=", c]);
    out.lines().map(str::to_string).collect()
}

#[test]
fn people_bytes_survive_intake_assignment_complete_and_done() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("hand", HAND);
    r.ok(&["tick"]);
    let assigned = r.read("work/assigned/alice/hand.yaml");
    assert!(
        assigned.starts_with(&format!("{HAND}coord:\n")),
        "{assigned}"
    );
    r.cmd(&["complete", "hand", "--output", "-"])
        .write_stdin("{\"summary\": \"done it\"}\n")
        .assert()
        .success();
    let with_result = r.read("work/assigned/alice/hand.yaml");
    assert!(
        with_result.starts_with(&format!("{HAND}result:\n")),
        "{with_result}"
    );
    r.ok(&["tick"]);
    let done = r.read("work/done/hand.yaml");
    assert!(done.starts_with(HAND), "{done}");
    assert!(done.contains("\ncoord:\n  state: done\n"), "{done}");
    assert!(done.contains("summary: done it"), "{done}");
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_users_changes_stay_as_they_were_and_out_of_coords_commits() {
    let r = TestRepo::with_agents(&["alice"]);
    r.write("tracked.txt", "v1\n");
    r.git(&["add", "tracked.txt"]);
    r.git(&["commit", "-qm", "a tracked file"]);
    let base = head(&r);
    r.write("notes.txt", "staged\n");
    r.git(&["add", "notes.txt"]);
    r.write("tracked.txt", "v2 unstaged\n");
    r.write("scratch.txt", "untracked\n");
    let theirs = "A  notes.txt\n M tracked.txt\n?? scratch.txt\n";
    r.task("t1", "title: one\nagent: alice\n");
    r.ok(&["tick"]);
    let commits = commits_since(&r, &base);
    let summaries: Vec<String> = commits
        .iter()
        .map(|c| r.git(&["log", "-1", "--format=%s", c]).trim().to_string())
        .collect();
    assert_eq!(
        summaries,
        [
            "coord: record external changes",
            "coord: accept t1 into ready",
            "coord: assign t1 to alice"
        ]
    );
    assert_eq!(touched(&r, &commits[0]), ["work/inbox/t1.yaml"]);
    assert_eq!(
        touched(&r, &commits[1]),
        ["work/inbox/t1.yaml", "work/ready/t1.yaml"]
    );
    assert_eq!(
        touched(&r, &commits[2]),
        ["work/assigned/alice/t1.yaml", "work/ready/t1.yaml"]
    );
    let bodies: Vec<String> = commits
        .iter()
        .map(|c| r.git(&["log", "-1", "--format=%b", c]))
        .collect();
    assert!(
        bodies[0].contains("work/inbox/t1.yaml"),
        "lists the paths: {}",
        bodies[0]
    );
    assert!(
        bodies[1]
            .trim_end()
            .ends_with("Coord-Task: t1\nCoord-From: inbox\nCoord-To: ready\nCoord-Origin: tick"),
        "{}",
        bodies[1]
    );
    assert!(
        bodies[2]
            .trim_end()
            .ends_with("Coord-Task: t1\nCoord-From: ready\nCoord-To: assigned\nCoord-Origin: tick"),
        "{}",
        bodies[2]
    );
    assert_eq!(r.git_status(), theirs);
    assert_eq!(r.git(&["diff", "--cached", "--name-only"]), "notes.txt\n");
    assert_eq!(r.git(&["show", ":notes.txt"]), "staged\n");
    assert_eq!(r.read("tracked.txt"), "v2 unstaged\n");
    assert_eq!(r.git(&["show", "HEAD:tracked.txt"]), "v1\n");
    let n = r.commit_count();
    let (_, err) = r.code(&["tick"], 0);
    assert_eq!(err, "coord: nothing to do\n");
    assert_eq!(r.commit_count(), n, "a second tick makes no commit");
    assert_eq!(r.git_status(), theirs);
}

#[test]
fn a_second_coordinator_gets_exit_3_naming_the_holder() {
    let r = TestRepo::new();
    r.task("t1", "title: one\n");
    let lock_path = r.abs(".git/coord.lock");
    let mut held: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .expect("open lock");
    held.try_lock().expect("the test takes the lock");
    held.set_len(0).expect("truncate");
    let me = std::process::id();
    write!(held, "{me}").expect("pid");
    held.flush().expect("flush");
    let n = r.commit_count();
    let (_, err) = r.code(&["tick"], 3);
    let named = format!("coord.lock is held by pid {me} (");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(&named), "{err}");
    assert!(err.contains("another coordinator is running"), "{err}");
    let start = std::time::Instant::now();
    let (_, err) = r.code(&["tick", "--wait", "1s"], 3);
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(900),
        "it waited"
    );
    assert!(err.contains(&named), "{err}");
    assert_eq!(r.commit_count(), n);
    assert!(r.exists("work/inbox/t1.yaml"));
    drop(held);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("t1"), "work/ready/t1.yaml");
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("t1", "title: one\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "drop t1"]);
    let n = r.commit_count();
    let out = r.ok(&["tick", "--dry-run"]);
    assert_eq!(
        out,
        "t1: inbox -> ready: accept t1 into ready\nt1: ready -> assigned: assign t1 to alice\n"
    );
    assert_eq!(r.commit_count(), n);
    assert_eq!(r.git_status(), "");
    assert_eq!(r.where_is("t1"), "work/inbox/t1.yaml");
    let json: serde_json::Value = r.json(&["tick", "--dry-run"]);
    assert_eq!(json["transitions"].as_array().expect("array").len(), 2);
    assert_eq!(r.commit_count(), n);
}

#[test]
fn a_settled_invalid_file_is_quarantined_at_once_and_others_proceed() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("bad", "title: [unclosed\n");
    r.task("good", "title: good\n");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("good"), "work/assigned/alice/good.yaml");
    assert_eq!(r.where_is("bad"), "work/invalid/bad.yaml");
    assert_eq!(
        r.read("work/invalid/bad.yaml"),
        "title: [unclosed\n",
        "original bytes kept"
    );
    let errors = r.read("work/invalid/bad.yaml.errors");
    assert!(
        errors.starts_with("work/invalid/bad.yaml:2:1: YAML syntax"),
        "{errors}"
    );
    assert_eq!(r.git_status(), "");
    let status = r.ok(&["status"]);
    assert!(
        status.contains("invalid:\n  bad: work/invalid/bad.yaml:2:1: YAML syntax"),
        "{status}"
    );
}

#[test]
fn a_hand_move_between_agents_is_adopted() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.task("t1", "# mine\ntitle: one\nagent: alice\n");
    r.ok(&["tick"]);
    std::fs::create_dir_all(r.abs("work/assigned/bob")).expect("mkdir");
    r.git(&[
        "mv",
        "work/assigned/alice/t1.yaml",
        "work/assigned/bob/t1.yaml",
    ]);
    r.git(&["commit", "-qm", "give t1 to bob"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("t1"), "work/assigned/bob/t1.yaml");
    let text = r.read("work/assigned/bob/t1.yaml");
    assert!(
        text.starts_with("# mine\ntitle: one\nagent: alice\ncoord:\n"),
        "{text}"
    );
    assert!(text.contains("  assigned_to: bob\n"), "{text}");
    assert!(r.git(&["log", "-1", "--format=%s"]).contains("adopt t1"));
    assert_eq!(r.git_status(), "");
    let n = r.commit_count();
    r.ok(&["tick"]);
    assert_eq!(r.commit_count(), n);
}

/// docs/behaviour.md: a new inbox file reusing a done task's id under another file name fails
/// intake's
/// unique-id check; it goes to invalid/ with its bytes and the done task keeps its id. A task
/// sent in with it naming that id goes to invalid/ too (which d1 it means cannot be told);
/// sent in again, it runs after the done d1. Before, the copy sat in inbox/ as a duplicate
/// and the dependent waited for ever.
#[test]
fn a_new_inbox_file_reusing_a_done_tasks_id_is_rejected_and_nothing_waits_for_ever() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("d1", "title: D1\n");
    r.ok(&["tick"]);
    r.ok(&["complete", "d1", "--agent", "alice", "--attempt", "1"]);
    r.ok(&["tick"]);
    r.write("work/inbox/d1.yml", "title: another d1\n");
    r.task("e", "title: needs d1\ndepends_on: [d1]\n");
    let (doctor, _) = r.code(&["doctor"], 1);
    assert!(
        doctor.contains(
            "new task file work/inbox/d1.yml reuses id 'd1' of work/done/d1.yaml: the next tick \
             moves it to invalid/; rename it to a free id"
        ),
        "{doctor}"
    );
    let taken = "work/inbox/d1.yml:1:1: id 'd1' is taken by work/done/d1.yaml; give this task \
                 a free id (rename the file)";
    for args in [&["validate", "work/inbox/d1.yml"][..], &["validate"]] {
        let (out, err) = r.code(args, 1);
        assert!(
            out.contains(taken) || err.contains(taken),
            "{args:?}: {out}{err}"
        );
    }
    r.ok(&["tick"]);
    assert_eq!(r.find("d1"), ["work/done/d1.yaml", "work/invalid/d1.yml"]);
    assert_eq!(r.read("work/invalid/d1.yml"), "title: another d1\n");
    assert_eq!(
        r.read("work/invalid/d1.yml.errors"),
        "work/invalid/d1.yml:1:1: id 'd1' is taken by work/done/d1.yaml; rename this file to a \
         free id and move it back to work/inbox/\n"
    );
    assert!(r
        .read("work/invalid/e.yaml.errors")
        .contains("depends on 'd1', whose new file work/inbox/d1.yml is rejected in this pass"));
    let status = r.ok(&["status"]);
    assert!(!status.contains("duplicate"), "{status}");
    std::fs::rename(r.abs("work/invalid/e.yaml"), r.abs("work/inbox/e.yaml")).expect("mv");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("e"), "work/assigned/alice/e.yaml");
    assert_eq!(r.git_status(), "");
}

/// A handoff whose child id (`<parent>.<agent>`) a person's new task took in the same pass
/// takes the next free id instead of vanishing without a word.
#[test]
fn a_handoff_whose_child_id_a_person_took_gets_the_next_free_id() {
    let r = TestRepo::with_agents(&["a", "c"]);
    r.task("p", "title: P\nagent: a\n");
    r.ok(&["tick"]);
    let text = r.read("work/assigned/a/p.yaml");
    r.write(
        "work/assigned/a/p.yaml",
        &format!("{text}result:\n  status: success\n  output: {{v: 1}}\n  next_agent: c\n"),
    );
    r.task("p.c", "title: a person's task named like the child\n");
    r.ok(&["tick"]);
    let log = r.git(&["log", "--format=%s"]);
    assert!(log.contains("coord: hand off p to c as p.c.2"), "{log}");
    assert_eq!(r.where_is("p.c.2"), "work/assigned/c/p.c.2.yaml");
    assert!(r
        .read("work/assigned/c/p.c.2.yaml")
        .contains("\n  parent: p\n"));
    assert!(!r.find("p.c").is_empty(), "the person's task stays");
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_duplicate_id_is_never_assigned_and_is_reported() {
    let r = TestRepo::with_agents(&["alice", "bob", "carol --max-active 5"]);
    r.task("t1", "title: one\nagent: alice\n");
    r.ok(&["tick"]);
    let copy = r.read("work/assigned/alice/t1.yaml");
    r.write("work/ready/t1.yaml", &copy);
    r.ok(&["tick"]);
    assert_eq!(
        r.find("t1"),
        ["work/assigned/alice/t1.yaml", "work/ready/t1.yaml"]
    );
    assert_eq!(
        r.read("work/ready/t1.yaml"),
        copy,
        "neither copy moved nor changed"
    );
    let status = r.ok(&["status"]);
    assert!(
        status.contains("duplicate ids (run 'coord doctor'):\n  t1"),
        "{status}"
    );
    let json: serde_json::Value = r.json(&["status"]);
    assert_eq!(
        json["duplicates"].as_array().expect("array").len(),
        1,
        "{json}"
    );
    let (out, _) = r.code(&["doctor"], 1);
    assert!(
        out.contains("duplicate id 't1' in 2 places: keep work/assigned/alice/t1.yaml"),
        "{out}"
    );
    let n = r.commit_count();
    r.ok(&["tick"]);
    assert_eq!(r.commit_count(), n);
}

#[test]
fn status_says_why_ready_tasks_wait() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("first", "title: first\nagent: alice\n");
    r.task("second", "title: second\nagent: alice\n");
    r.task("needx", "title: needs x\ncapabilities: [x]\n");
    r.ok(&["tick"]);
    let out = r.ok(&["status"]);
    assert!(out.contains("tasks: assigned 1, ready 2\n"), "{out}");
    assert!(
        out.contains("  needx \"needs x\": no agent has capabilities [\"x\"]\n"),
        "{out}"
    );
    assert!(
        out.contains("  second \"second\": agent alice is at its limit (1/1)\n"),
        "{out}"
    );
    let json: serde_json::Value = r.json(&["status"]);
    assert_eq!(json["counts"]["ready"], 2);
    assert_eq!(json["counts"]["assigned"], 1);
    assert_eq!(json["agents"][0]["name"], "alice");
    assert_eq!(json["agents"][0]["active"], 1);
    assert_eq!(json["waiting"].as_array().expect("array").len(), 2);
}

#[test]
fn show_and_log() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("t1", "title: one\n");
    r.task("t2", "title: two\n");
    r.ok(&["tick"]);
    let show = r.ok(&["show", "t1"]);
    assert!(
        show.starts_with("t1  [assigned]  work/assigned/alice/t1.yaml\n"),
        "{show}"
    );
    assert!(show.contains("title: one"), "{show}");
    let (_, err) = r.code(&["show", "nope"], 1);
    assert!(err.starts_with("error: "), "{err}");
    let log = r.ok(&["log"]);
    let first: Vec<&str> = log.lines().take(3).collect();
    assert!(
        first[0].contains("assign t1 to alice"),
        "newest first: {log}"
    );
    assert!(first[1].contains("accept t2 into ready"), "{log}");
    assert!(first[2].contains("accept t1 into ready"), "{log}");
    assert_eq!(r.ok(&["log", "--limit", "2"]).lines().count(), 2);
    let t1 = r.ok(&["log", "t1"]);
    assert_eq!(t1.lines().count(), 3, "{t1}");
    assert!(
        t1.lines()
            .nth(2)
            .is_some_and(|l| l.contains("added in inbox")),
        "{t1}"
    );
    assert!(t1.lines().all(|l| l.contains("t1")), "{t1}");
    let json: serde_json::Value = r.json(&["log", "t1"]);
    let rows = json["entries"].as_array().expect("array");
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[2]["op"], "add",
        "the file a person dropped, recorded by the tick"
    );
    assert_eq!(
        (rows[0]["from"].as_str(), rows[0]["to"].as_str()),
        (Some("ready"), Some("assigned"))
    );
    assert_eq!(
        (rows[1]["from"].as_str(), rows[1]["to"].as_str()),
        (Some("inbox"), Some("ready"))
    );
    assert!(rows.iter().all(|r| r["task"] == "t1"));
}

#[test]
fn claim_complete_and_fail_write_results_with_the_attempt() {
    let r = TestRepo::with_agents(&["puller --pull"]);
    r.code(&["claim", "--agent", "puller"], 4);
    r.task("p1", "title: pulled\n");
    r.task("p2", "title: pulled too\n");
    r.ok(&["tick"]);
    assert_eq!(
        r.where_is("p1"),
        "work/ready/p1.yaml",
        "pull agents get nothing pushed"
    );
    let id = r.ok(&["claim", "--agent", "puller"]);
    assert_eq!(id, "p1\n");
    assert_eq!(r.where_is("p1"), "work/assigned/puller/p1.yaml");
    assert_eq!(r.git_status(), "");
    r.cmd(&["complete", "p1", "--output", "-"])
        .write_stdin("{\"answer\": 42}")
        .assert()
        .success();
    let text = r.read("work/assigned/puller/p1.yaml");
    assert!(
        text.contains("result:\n  status: success\n  output:\n    answer: 42\n  attempt: 1\n  agent: puller\n"),
        "{text}"
    );
    assert_eq!(r.git_status(), "");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("p1"), "work/done/p1.yaml");
    assert_eq!(r.ok(&["claim", "--agent", "puller"]), "p2\n");
    r.ok(&["fail", "p2", "--error", "disk full", "--fatal"]);
    let text = r.read("work/assigned/puller/p2.yaml");
    assert!(
        text.contains("result:\n  status: failure\n  error:\n    message: disk full\n    retryable: false\n  attempt: 1\n"),
        "{text}"
    );
    r.ok(&["tick"]);
    assert_eq!(r.where_is("p2"), "work/failed/p2.yaml");
    r.code(&["claim", "--agent", "puller"], 4);
    assert_eq!(r.git_status(), "");
}

#[test]
fn doctor_finds_and_fixes() {
    let r = TestRepo::with_agents(&["alice"]);
    let (_, err) = r.code(&["doctor"], 0);
    assert!(err.contains("no problems found"), "{err}");
    r.task("t1", "title: one\nagent: alice\n");
    r.ok(&["tick"]);
    // A hand move nobody committed: a state/folder mismatch and an uncommitted change.
    std::fs::rename(
        r.abs("work/assigned/alice/t1.yaml"),
        r.abs("work/ready/t1.yaml"),
    )
    .expect("mv");
    let (out, _) = r.code(&["doctor"], 1);
    assert!(
        out.contains("work/ready/t1.yaml: sits in ready but its coord block says assigned"),
        "{out}"
    );
    assert!(!r.git_status().is_empty());
    r.ok(&["doctor", "--fix"]);
    assert_eq!(r.git_status(), "");
    r.code(&["doctor"], 0);
}

/// A ready task whose file a person is editing (not settled yet) is passed over by a claim,
/// which takes the next task instead of failing with "does not read".
#[test]
fn a_claim_passes_over_a_ready_task_being_edited() {
    let r = TestRepo::with_agents(&["p --pull --max-active 5"]);
    r.task("t0", "title: T0\npriority: critical\n");
    r.task("t1", "title: T1\n");
    r.ok(&["tick"]);
    let text = r.read("work/ready/t0.yaml");
    r.write_now("work/ready/t0.yaml", &format!("{text}# a note\n"));
    assert_eq!(r.ok(&["claim", "--agent", "p"]).trim(), "t1");
    assert!(r.exists("work/ready/t0.yaml"));
}

/// A person re-opens a finished dependency by moving its file back out of `done/`: its ready
/// dependent is neither claimed nor assigned until the dependency is done again, and a tick
/// (here the one a claim with nothing to take runs) moves it back to `blocked/`.
#[test]
fn a_dependency_moved_back_out_of_done_stops_its_ready_dependent_until_done_again() {
    let r = TestRepo::with_agents(&["p --pull --max-active 5"]);
    r.done_dependency_and_ready_dependent("p");

    std::fs::rename(r.abs("work/done/a.yaml"), r.abs("work/ready/a.yaml")).expect("mv");
    let claimed = r.json(&["claim", "--agent", "p"]);
    assert_eq!(claimed["id"], "a", "{claimed}");
    let (_, said) = r.code(&["claim", "--agent", "p"], 4);
    assert_eq!(r.find("b"), ["work/blocked/b.yaml"], "{said}");

    r.ok(&["complete", "a", "--agent", "p"]);
    r.ok(&["tick"]);
    assert_eq!(r.find("b"), ["work/ready/b.yaml"]);
    assert_eq!(r.json(&["claim", "--agent", "p"])["id"], "b");
}

/// A person re-opens a finished dependency, the tick blocks its dependent again, then the
/// person deletes the dependency: the dependent keeps waiting (the file may be mid-move; a
/// hostile test saw a half-recorded move unblock and assign it) and status names what it
/// waits for, until a person edits its `depends_on`.
#[test]
fn a_reopened_dependency_deleted_keeps_its_blocked_dependent_waiting_and_said() {
    let r = TestRepo::with_agents(&["p --pull --max-active 5"]);
    r.done_dependency_and_ready_dependent("p");
    std::fs::rename(r.abs("work/done/a.yaml"), r.abs("work/ready/a.yaml")).expect("mv");
    r.ok(&["tick"]);
    assert_eq!(r.find("b"), ["work/blocked/b.yaml"]);

    std::fs::remove_file(r.abs("work/ready/a.yaml")).expect("rm");
    r.ok(&["tick"]);

    assert_eq!(r.find("b"), ["work/blocked/b.yaml"]);
    let status = r.ok(&["status"]);
    assert!(status.contains("missing"), "{status}");
    let text = r.read("work/blocked/b.yaml");
    r.write(
        "work/blocked/b.yaml",
        &text.replace("depends_on:\n  - a\n", ""),
    );
    r.ok(&["tick"]);
    assert_eq!(r.find("b"), ["work/ready/b.yaml"]);
}

/// A dependency a person moves from `done/` to `failed/`: its ready dependent is not claimed
/// before the next tick fails it with the dependency.
#[test]
fn a_dependency_moved_to_failed_by_hand_fails_its_ready_dependent_unclaimed() {
    let r = TestRepo::with_agents(&["p --pull --max-active 5"]);
    r.done_dependency_and_ready_dependent("p");
    std::fs::rename(r.abs("work/done/a.yaml"), r.abs("work/failed/a.yaml")).expect("mv");
    r.code(&["claim", "--agent", "p"], 4);
    r.ok(&["tick"]);
    assert_eq!(r.find("b"), ["work/failed/b.yaml"]);
}

/// A dependency in two places (what a person's `git pull` merging two clones' moves can
/// leave) is left out of the plan as a duplicate: its blocked dependent still waits for it
/// (found by the stress test: the dependent was unblocked and assigned).
#[test]
fn a_dependency_in_two_places_keeps_its_dependent_blocked() {
    let r = TestRepo::with_agents(&["alice --capability x", "bob --capability x"]);
    r.ok(&["new", "A", "--id", "a", "--capability", "x"]);
    r.ok(&[
        "new",
        "B",
        "--id",
        "b",
        "--capability",
        "x",
        "--depends-on",
        "a",
    ]);
    r.ok(&["tick"]);
    let at = r.where_is("a");
    let other = if at.contains("/alice/") {
        "bob"
    } else {
        "alice"
    };
    let copy = format!("work/assigned/{other}/a.yaml");
    r.commit_file(&copy, &r.read(&at), "a copy of a, as a git pull can leave");
    r.ok(&["tick"]);
    assert_eq!(r.find("b"), ["work/blocked/b.yaml"]);
}

/// A pull agent's loop needs no tick between its commands: right after `complete` its claim
/// finds the finished task out of its count, and a task just made with `coord new` is
/// claimable at once (a claim with nothing to take runs one tick and looks again).
#[test]
fn a_pull_agent_claims_right_after_complete_and_new_without_a_tick() {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.task("a", "title: A\n");
    r.task("b", "title: B\n");
    r.ok(&["tick"]);
    assert_eq!(r.ok(&["claim", "--agent", "p"]), "a\n");
    r.ok(&["complete", "a", "--agent", "p"]);
    assert_eq!(r.ok(&["claim", "--agent", "p"]), "b\n");
    assert_eq!(r.where_is("a"), "work/done/a.yaml");
    r.ok(&["complete", "b", "--agent", "p"]);
    r.ok(&["new", "C", "--id", "c"]);
    assert_eq!(r.ok(&["claim", "--agent", "p"]), "c\n");
    assert_eq!(r.where_is("b"), "work/done/b.yaml");
    assert_eq!(r.git_status(), "");
}

/// An empty folder under `assigned/` without a profile (a typo; git does not even carry it
/// to other clones) is no agent: it receives no work, and doctor names it.
#[test]
fn an_empty_agent_folder_without_a_profile_is_no_agent() {
    let r = TestRepo::with_agents(&["p --pull"]);
    std::fs::create_dir_all(r.abs("work/assigned/bbob")).expect("mkdir");
    r.task("z", "title: Z\n");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("z"), "work/ready/z.yaml");
    assert!(
        !r.ok(&["status"]).contains("bbob  "),
        "not listed as an agent"
    );
    let (out, _) = r.code(&["doctor"], 1);
    assert!(
        out.contains("work/assigned/bbob") && out.contains("coord agents add bbob"),
        "{out}"
    );
}
