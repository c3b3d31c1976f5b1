//! Fencing end to end (docs/security.md): agents name the
//! agent and attempt they worked on, a zombie's report is refused and kept as a
//! `stale_result`, a waiting result is not overwritten silently, and attempt numbers only grow.

use crate::harness::TestRepo;
use crate::steps::{at, config, coord, show, state, tick_at};
use serde_json::{json, Value};

const MIN: i64 = 60;

/// Two pull agents; `x` claimed by alice (attempt 1), timed out, claimed by bob (attempt 2).
fn zombie_board() -> TestRepo {
    let mut r = TestRepo::new();
    config(
        &r,
        "defaults: {timeout: 10m}\nbackoff: {base: 1s, max: 1s}\n",
    );
    r.ok(&["agents", "add", "alice", "--pull"]);
    r.ok(&["agents", "add", "bob", "--pull"]);
    r.task("x", "title: Contested\n");
    tick_at(&mut r, 0);
    assert_eq!(r.ok(&["claim", "--agent", "alice"]), "x\n");
    tick_at(&mut r, 10 * MIN);
    assert_eq!(state(&r, "x"), "ready", "alice's lease expired");
    r.at(&at(11 * MIN));
    assert_eq!(r.ok(&["claim", "--agent", "bob"]), "x\n");
    assert_eq!(coord(&r, "x")["attempt"], json!(2));
    r
}

fn last_history(r: &TestRepo, id: &str) -> Value {
    coord(r, id)["history"]
        .as_array()
        .and_then(|h| h.last().cloned())
        .expect("history")
}

fn report(r: &TestRepo, args: &[&str], env: &[(&str, &str)], code: i32) -> String {
    let mut c = r.cmd(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run coord");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "coord {args:?}: {err}");
    err
}

#[test]
fn a_zombie_complete_is_refused_and_kept_as_a_stale_result() {
    let mut r = zombie_board();
    let args = ["complete", "x", "--agent", "alice", "--attempt", "1"];
    let err = report(&r, &args, &[], 1);
    assert!(
        err.contains("task 'x' is attempt 2 of bob, not attempt 1 of alice")
            && err.contains("stale_result"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(show(&r, "x")["task"]["result"].is_null(), "not accepted");
    let last = last_history(&r, "x");
    assert_eq!(last["event"], json!("stale_result"));
    assert_eq!(last["result"]["status"], json!("success"));
    assert_eq!(last["result"]["agent"], json!("alice"));
    assert_eq!(last["result"]["attempt"], json!(1));
    assert_eq!(r.git_status(), "", "the refusal is committed");

    let env = [("COORD_AGENT", "alice"), ("COORD_ATTEMPT", "1")];
    report(&r, &["fail", "x", "--error", "late"], &env, 1);
    assert_eq!(last_history(&r, "x")["result"]["status"], json!("failure"));
    report(&r, &["heartbeat", "x"], &env, 1);

    let env = [("COORD_AGENT", "bob"), ("COORD_ATTEMPT", "2")];
    report(&r, &["heartbeat", "x"], &env, 0);
    report(&r, &["complete", "x"], &env, 0);
    tick_at(&mut r, 12 * MIN);
    assert_eq!(state(&r, "x"), "done", "bob's own result is accepted");
}

#[test]
fn a_zombie_report_after_the_task_went_back_is_kept_too() {
    let mut r = zombie_board();
    tick_at(&mut r, 21 * MIN + 1);
    assert_eq!(state(&r, "x"), "ready", "bob timed out as well");
    let args = [
        "fail",
        "x",
        "--error",
        "too late",
        "--agent",
        "bob",
        "--attempt",
        "2",
    ];
    let err = report(&r, &args, &[], 1);
    assert!(err.contains("task 'x' is ready (last attempt 2)"), "{err}");
    assert_eq!(last_history(&r, "x")["event"], json!("stale_result"));
}

#[test]
fn a_report_without_fence_stamps_the_first_attempt_and_says_so() {
    let r = TestRepo::with_agents(&["alice --pull"]);
    r.task("x", "title: First\n");
    r.ok(&["tick"]);
    assert_eq!(r.ok(&["claim", "--agent", "alice"]), "x\n");
    let err = report(&r, &["complete", "x"], &[], 0);
    assert!(
        err.contains("stamped the result for attempt 1 of alice"),
        "{err}"
    );
}

/// Once a task was handed on (alice timed out, bob holds attempt 2), a report naming no
/// attempt may be alice's late one: it is refused, naming the flags of the current attempt,
/// and nothing is written.
#[test]
fn a_report_without_fence_on_a_task_handed_on_is_refused_naming_the_attempt() {
    let r = zombie_board();
    let head = r.git(&["rev-parse", "HEAD"]);
    for args in [&["complete", "x"][..], &["fail", "x", "--error", "E"]] {
        let err = report(&r, args, &[], 1);
        assert!(
            err.contains("attempt 2 of bob") && err.contains("--agent bob --attempt 2"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head, "nothing committed");
    assert!(show(&r, "x")["task"]["result"].is_null(), "not accepted");
    let env = [("COORD_AGENT", "bob"), ("COORD_ATTEMPT", "2")];
    report(&r, &["complete", "x"], &env, 0);
}

#[test]
fn claim_prints_the_attempt_and_a_json_receipt() {
    let mut r = zombie_board();
    tick_at(&mut r, 21 * MIN + 1);
    r.task("y", "title: Another\n");
    tick_at(&mut r, 22 * MIN);
    let out = r.run(&["claim", "--agent", "alice"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("x is attempt 3 of alice") && err.contains("--attempt 3"),
        "{err}"
    );
    let receipt: Value = r.json(&["claim", "--agent", "bob"]);
    assert_eq!(
        receipt,
        json!({
            "version": 1,
            "claimed": true,
            "id": "y",
            "agent": "bob",
            "attempt": 1,
            "lease_expires_at": at(32 * MIN),
            "path": "work/assigned/bob/y.yaml",
        })
    );
}

#[test]
fn a_second_result_is_refused_unless_replaced() {
    let r = zombie_board();
    let env = [("COORD_AGENT", "bob"), ("COORD_ATTEMPT", "2")];
    report(&r, &["complete", "x"], &env, 0);
    let err = report(&r, &["complete", "x"], &env, 1);
    assert!(
        err.contains("already has a result") && err.contains("--replace"),
        "{err}"
    );
    let err = report(&r, &["fail", "x", "--error", "oops"], &env, 1);
    assert!(err.contains("--replace"), "{err}");
    assert_eq!(show(&r, "x")["task"]["result"]["status"], json!("success"));
    report(&r, &["fail", "x", "--error", "oops", "--replace"], &env, 0);
    assert_eq!(show(&r, "x")["task"]["result"]["status"], json!("failure"));
    let last = last_history(&r, "x");
    assert_eq!(last["event"], json!("replaced_result"));
    assert_eq!(last["result"]["status"], json!("success"));
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_reverted_assignment_never_grants_its_attempt_number_again() {
    let mut r = TestRepo::new();
    config(&r, "defaults: {timeout: 10m}\n");
    r.ok(&["agents", "add", "alice", "--pull"]);
    r.ok(&["agents", "add", "bob", "--pull"]);
    r.task("x", "title: Contested\n");
    tick_at(&mut r, 0);
    assert_eq!(r.ok(&["claim", "--agent", "alice"]), "x\n");
    assert_eq!(coord(&r, "x")["attempt"], json!(1));
    let assign = r.git(&["log", "-1", "--format=%H"]);
    r.git(&["revert", "--no-edit", assign.trim()]);
    assert_eq!(r.where_is("x"), "work/ready/x.yaml");
    r.at(&at(MIN));
    assert_eq!(r.ok(&["claim", "--agent", "bob"]), "x\n");
    let c = coord(&r, "x");
    assert_eq!(c["attempt"], json!(2), "attempt 1 was granted before");
    assert_eq!(
        c["attempt_base"],
        json!(1),
        "the skipped number does not count against max_attempts"
    );
    let args = ["complete", "x", "--agent", "alice", "--attempt", "1"];
    let err = report(&r, &args, &[], 1);
    assert!(err.contains("attempt 2 of bob"), "{err}");
    // A hand edit of the coord: block cannot lower it either.
    let path = r.where_is("x");
    let text = r.read(&path).replace("attempt: 2", "attempt: 0");
    r.write(&path, &text);
    r.git(&["mv", &path, "work/ready/x.yaml"]);
    let text = r
        .read("work/ready/x.yaml")
        .replace("state: assigned", "state: ready");
    r.write("work/ready/x.yaml", &text);
    r.git(&["commit", "-qam", "take it back by hand"]);
    r.at(&at(2 * MIN));
    assert_eq!(r.ok(&["claim", "--agent", "alice"]), "x\n");
    assert_eq!(coord(&r, "x")["attempt"], json!(3));
}
