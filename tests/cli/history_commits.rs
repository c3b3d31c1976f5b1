//! How many commits a run makes: heartbeats that leave the committed lease well ahead, and an
//! agent's circuit lines, make no commit of their own; `coord log` still shows every circuit
//! change, and a heartbeat is committed while there is still half the lease to carry it to
//! the other clones.

use crate::harness::{Net, TestRepo};
use crate::steps::{at, coord, state, tick_at};

/// Ten tasks for one agent, each heartbeated a minute after it was assigned; every third one
/// fails its first attempt and succeeds on its second.
fn ten_tasks(r: &mut TestRepo) {
    for i in 0..10 {
        r.ok(&["new", &format!("Task {i}"), "--id", &format!("t{i}")]);
    }
    tick_at(r, 0);
    r.at(&at(60));
    for i in 0..10 {
        let id = format!("t{i}");
        r.ok(&["heartbeat", &id, "--agent", "alice", "--attempt", "1"]);
        match i % 3 {
            0 => r.ok(&[
                "fail",
                &id,
                "--error",
                "flaky",
                "--agent",
                "alice",
                "--attempt",
                "1",
            ]),
            _ => r.ok(&["complete", &id, "--agent", "alice", "--attempt", "1"]),
        };
    }
    tick_at(r, 120);
    tick_at(r, 3600);
    r.at(&at(3660));
    for i in (0..10).step_by(3) {
        let id = format!("t{i}");
        r.ok(&["heartbeat", &id, "--agent", "alice", "--attempt", "2"]);
        r.ok(&["complete", &id, "--agent", "alice", "--attempt", "2"]);
    }
    tick_at(r, 3720);
}

#[test]
fn ten_tasks_run_to_the_end_without_a_commit_per_heartbeat_or_circuit_line() {
    let mut r = TestRepo::with_agents(&["alice --max-active 10"]);
    let before = r.commit_count();
    ten_tasks(&mut r);
    for i in 0..10 {
        assert_eq!(state(&r, &format!("t{i}")), "done", "t{i}");
    }
    let commits = r.commit_count() - before;
    let subjects = r.git(&["log", "--format=%s"]);
    assert!(
        !subjects.lines().any(|s| s.starts_with("coord: heartbeat")),
        "{subjects}"
    );
    assert!(
        !subjects
            .lines()
            .any(|s| s.starts_with("coord: agent alice")),
        "{subjects}"
    );
    assert!(commits <= 62, "{commits} commits:\n{subjects}");
    let log = r.ok(&["log", "--all"]);
    assert!(
        log.contains("agent alice: 1 failed attempt(s) in a row, circuit closed"),
        "{log}"
    );
    assert!(
        log.contains("agent alice: 0 failed attempt(s) in a row, circuit closed"),
        "{log}"
    );
}

#[test]
fn a_heartbeat_is_committed_once_half_the_lease_is_gone() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("x", "title: x\ntimeout: 10m\n");
    tick_at(&mut r, 0);
    let lease = |r: &TestRepo| coord(r, "x")["lease_expires_at"].clone();
    let granted = lease(&r);
    let commits = r.commit_count();
    r.at(&at(240));
    let answer = r.json(&["heartbeat", "x", "--agent", "alice", "--attempt", "1"]);
    assert_eq!(answer["lease_expires_at"], granted, "the lease in force");
    assert_eq!(r.commit_count(), commits, "six minutes of ten left");
    r.at(&at(301));
    r.ok(&["heartbeat", "x", "--agent", "alice", "--attempt", "1"]);
    assert_eq!(r.commit_count(), commits + 1);
    assert_eq!(lease(&r), at(901).as_str());
    let (_, err) = r.code(&["heartbeat", "x", "--agent", "bob", "--attempt", "1"], 1);
    assert!(
        err.contains("refused"),
        "a fenced heartbeat is refused as before: {err}"
    );
}

#[test]
fn a_lease_heartbeated_in_one_clone_never_runs_out_in_another() {
    let net = Net::new(&["alice"]);
    let ids = net.person_adds("x", 1);
    let id = ids[0].as_str();
    let (mut a, mut b) = (net.clone(), net.clone());
    a.at(&at(0)).ok(&["sync"]);
    b.at(&at(0)).ok(&["sync"]);
    let mut heartbeats = 0;
    for minute in 1..=75 {
        if minute % 12 == 0 {
            a.at(&at(minute * 60));
            a.ok(&["heartbeat", id, "--agent", "alice", "--attempt", "1"]);
            a.ok(&["sync"]);
            heartbeats += 1;
        }
        if minute % 5 == 0 {
            b.at(&at(minute * 60)).ok(&["sync"]);
            assert_eq!(state(&b, id), "assigned", "minute {minute}");
            assert_eq!(coord(&b, id)["attempt"], 1, "minute {minute}");
        }
    }
    let check = net.clone();
    let text = check.read(&check.where_is(id));
    assert!(!text.contains("code: timeout"), "{text}");
    let committed = check
        .git(&["log", "--format=%s"])
        .lines()
        .filter(|s| s.starts_with(&format!("coord: heartbeat {id}")))
        .count();
    assert!(
        committed > 0 && committed < heartbeats,
        "{committed} of {heartbeats} heartbeats committed"
    );
}
