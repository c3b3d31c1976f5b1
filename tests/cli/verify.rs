//! `coord verify`: a normal history (claims, completions, a failure retried, a handoff, an
//! expired lease with a zombie's late result, a reverted assignment, clones syncing through
//! a bare remote) verifies clean; histories made with plain git that break a rule are each
//! reported, with exit 5.

use crate::harness::{Net, TestRepo};
use crate::steps::{at, config, tick_at};
use serde_json::{json, Value};

const MIN: i64 = 60;

/// Runs `coord --json verify` plus `args`, asserts the exit code, returns the report.
fn verify(r: &TestRepo, args: &[&str], code: i32) -> Value {
    let full: Vec<&str> = ["--json", "verify"].iter().chain(args).copied().collect();
    let (out, _) = r.code(&full, code);
    let answer: Value = serde_json::from_str(&out).expect("one JSON value");
    answer["verified"].clone()
}

/// Returns the kinds of the findings, in order.
fn kinds(v: &Value) -> Vec<String> {
    let findings = v["findings"].as_array().expect("findings");
    findings
        .iter()
        .map(|f| f["kind"].as_str().expect("kind").to_string())
        .collect()
}

/// Alice (pull) claims `x`: attempt 1.
fn claimed() -> TestRepo {
    let mut r = TestRepo::new();
    config(&r, "defaults: {timeout: 10m}\n");
    r.ok(&["agents", "add", "alice", "--pull"]);
    r.ok(&["agents", "add", "bob", "--pull"]);
    r.task("x", "title: X\n");
    tick_at(&mut r, 0);
    assert_eq!(r.ok(&["claim", "--agent", "alice"]), "x\n");
    r
}

/// Commits everything under work/ with plain git and `message`.
fn commit_by_hand(r: &TestRepo, message: &str) {
    r.git(&["add", "-A", "work"]);
    r.git(&["commit", "-q", "-m", message]);
}

#[test]
fn a_normal_history_verifies_clean() {
    let mut r = claimed();
    // Alice's lease expires; bob gets attempt 2; alice's late result is set aside.
    tick_at(&mut r, 10 * MIN);
    r.at(&at(11 * MIN));
    assert_eq!(r.ok(&["claim", "--agent", "bob"]), "x\n");
    r.code(&["complete", "x", "--agent", "alice", "--attempt", "1"], 1);
    r.ok(&["complete", "x", "--agent", "bob", "--attempt", "2"]);
    // A reverted assignment: the next grant is a new attempt number.
    r.task("z", "title: Z\n");
    tick_at(&mut r, 12 * MIN);
    assert_eq!(r.ok(&["claim", "--agent", "alice"]), "z\n");
    let assign = r.git(&["log", "-1", "--format=%H"]);
    r.git(&["revert", "--no-edit", assign.trim()]);
    r.at(&at(13 * MIN));
    assert_eq!(r.ok(&["claim", "--agent", "bob"]), "z\n");
    r.ok(&["complete", "z", "--agent", "bob", "--attempt", "2"]);
    // A failure retried, then a success handed off to dave, who completes it.
    r.ok(&["agents", "add", "carol"]);
    r.ok(&["agents", "add", "dave"]);
    r.ok(&["new", "Y", "--id", "y", "--agent", "carol"]);
    tick_at(&mut r, 14 * MIN);
    r.ok(&[
        "fail",
        "y",
        "--error",
        "boom",
        "--agent",
        "carol",
        "--attempt",
        "1",
    ]);
    tick_at(&mut r, 15 * MIN);
    tick_at(&mut r, 22 * MIN);
    r.ok(&[
        "complete",
        "y",
        "--agent",
        "carol",
        "--attempt",
        "2",
        "--next-agent",
        "dave",
    ]);
    tick_at(&mut r, 23 * MIN);
    r.ok(&["complete", "y.dave", "--agent", "dave", "--attempt", "1"]);
    tick_at(&mut r, 24 * MIN);
    assert_eq!(r.find("y.dave"), ["work/done/y.dave.yaml"]);
    let v = verify(&r, &[], 0);
    assert_eq!(v["findings"], json!([]), "{v:#}");
    assert!(v["attempts"].as_u64() >= Some(6), "{v:#}");
    assert!(v["results"].as_u64() >= Some(4), "{v:#}");
    let out = r.ok(&["verify"]);
    assert!(
        out.starts_with("checked ") && out.trim_end().ends_with(": clean"),
        "{out}"
    );
}

#[test]
fn clones_syncing_through_a_bare_remote_verify_clean() {
    let net = Net::new(&[]);
    for a in ["p1", "p2"] {
        net.seed
            .ok(&["agents", "add", a, "--pull", "--max-active", "1000"]);
    }
    net.seed.git(&["push", "-q", "origin", "main"]);
    let (a, b) = (net.clone(), net.clone());
    net.person_adds("t", 3);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    // Both claim the same task; b loses its claim on sync and claims the next.
    assert_eq!(a.ok(&["claim", "--agent", "p1"]).trim(), "t-0");
    assert_eq!(b.ok(&["claim", "--agent", "p2"]).trim(), "t-0");
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let next = b.ok(&["claim", "--agent", "p2", "--sync"]);
    a.ok(&["complete", "t-0", "--agent", "p1", "--sync"]);
    b.ok(&["complete", next.trim(), "--agent", "p2", "--sync"]);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let v = verify(&a, &["--ref", "origin/main"], 0);
    assert_eq!(v["findings"], json!([]), "{v:#}");
    assert_eq!(v["attempts"], json!(2), "{v:#}");
    assert_eq!(v["results"], json!(2), "{v:#}");
    verify(&b, &[], 0);
}

#[test]
fn a_forged_grant_of_a_held_attempt_to_another_agent_is_reported() {
    let r = claimed();
    let text = r.read("work/assigned/alice/x.yaml");
    r.write(
        "work/assigned/bob/x.yaml",
        &text.replace("assigned_to: alice", "assigned_to: bob"),
    );
    r.git(&["rm", "-q", "work/assigned/alice/x.yaml"]);
    commit_by_hand(
        &r,
        "coord: assign x to bob\n\nCoord-Task: x\nCoord-From: ready\nCoord-To: assigned",
    );
    let v = verify(&r, &[], 5);
    assert_eq!(kinds(&v), ["granted_to_two_agents"], "{v:#}");
    let f = &v["findings"][0];
    assert_eq!((&f["task"], &f["attempt"]), (&json!("x"), &json!(1)));
    assert_eq!(f["agents"], json!(["alice", "bob"]));
    assert_eq!(f["commits"].as_array().map(Vec::len), Some(2));
    let (out, _) = r.code(&["verify"], 5);
    assert!(
        out.starts_with("granted_to_two_agents: x attempt 1: granted to two agents (alice, bob)"),
        "{out}"
    );
    assert!(
        out.lines()
            .last()
            .is_some_and(|l| l.ends_with(": 1 finding(s)")),
        "{out}"
    );
}

#[test]
fn an_attempt_granted_twice_to_one_agent_is_reported() {
    let r = claimed();
    let held = r.read("work/assigned/alice/x.yaml");
    r.git(&["mv", "work/assigned/alice/x.yaml", "work/ready/x.yaml"]);
    commit_by_hand(&r, "take x back by hand");
    r.git(&["mv", "work/ready/x.yaml", "work/assigned/alice/x.yaml"]);
    r.write("work/assigned/alice/x.yaml", &held);
    commit_by_hand(
        &r,
        "coord: assign x to alice\n\nCoord-Task: x\nCoord-From: ready\nCoord-To: assigned",
    );
    let v = verify(&r, &[], 5);
    assert_eq!(kinds(&v), ["granted_twice"], "{v:#}");
    assert_eq!(v["findings"][0]["agents"], json!(["alice"]));
}

#[test]
fn a_result_accepted_for_an_agent_that_did_not_hold_the_attempt_is_reported() {
    let r = claimed();
    let text = r.read("work/assigned/alice/x.yaml");
    let forged = format!("{text}result:\n  status: success\n  attempt: 1\n  agent: bob\n");
    r.git(&["rm", "-q", "work/assigned/alice/x.yaml"]);
    r.write(
        "work/done/x.yaml",
        &forged.replace("state: assigned", "state: done"),
    );
    commit_by_hand(
        &r,
        "coord: complete x\n\nCoord-Task: x\nCoord-From: assigned\nCoord-To: done",
    );
    let v = verify(&r, &[], 5);
    assert_eq!(kinds(&v), ["wrong_holder"], "{v:#}");
    assert_eq!(v["findings"][0]["agents"], json!(["bob", "alice"]));
}

#[test]
fn a_reported_result_dropped_later_is_reported_lost() {
    let r = claimed();
    r.ok(&["complete", "x", "--agent", "alice", "--attempt", "1"]);
    let text = r.read("work/assigned/alice/x.yaml");
    let start = text.find("result:").expect("a result");
    let end = text[start..].find("coord:").expect("coord after result") + start;
    r.write(
        "work/assigned/alice/x.yaml",
        &format!("{}{}", &text[..start], &text[end..]),
    );
    commit_by_hand(&r, "drop the result by hand");
    let v = verify(&r, &[], 5);
    assert_eq!(kinds(&v), ["result_lost"], "{v:#}");
    let f = &v["findings"][0];
    assert_eq!(
        (&f["attempt"], &f["agents"]),
        (&json!(1), &json!(["alice"]))
    );
    assert_eq!(f["paths"], json!(["work/assigned/alice/x.yaml"]));
}

#[test]
fn a_task_id_in_two_places_at_the_tip_is_reported() {
    let r = claimed();
    r.write("work/done/x.yaml", &r.read("work/assigned/alice/x.yaml"));
    commit_by_hand(&r, "copy x");
    let v = verify(&r, &[], 5);
    assert_eq!(kinds(&v), ["two_places"], "{v:#}");
    let mut paths: Vec<String> =
        serde_json::from_value(v["findings"][0]["paths"].clone()).expect("paths");
    paths.sort();
    assert_eq!(paths, ["work/assigned/alice/x.yaml", "work/done/x.yaml"]);
    // An older revision, before the copy, is clean.
    verify(&r, &["--ref", "HEAD~1"], 0);
}

#[test]
fn a_ref_that_names_no_commit_is_a_usage_error() {
    let r = claimed();
    let (_, err) = r.code(&["verify", "--ref", "origin/nowhere"], 2);
    assert!(
        err.contains("--ref origin/nowhere names no commit"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
