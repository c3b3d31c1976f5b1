//! Resilience end to end, every time-based step driven
//! by COORD_NOW: leases and heartbeats, retries with backoff, the dead letter, fatal errors,
//! the circuit breaker, fencing of zombie results, cancel and retry.

use crate::harness::TestRepo;
use crate::steps::{at, complete, config, coord, profile, show, state, tick_at, ts};
use serde_json::json;

const MIN: i64 = 60;

fn repo(yaml: &str, agents: &[&str]) -> TestRepo {
    let r = TestRepo::with_agents(agents);
    config(&r, yaml);
    r
}

/// Asserts `not_before` lies in [now, now + ceiling] and returns it in seconds after T0.
fn check_backoff(r: &TestRepo, id: &str, now: i64, ceiling: i64) -> i64 {
    let c = coord(r, id);
    let nb = ts(c["not_before"].as_str().expect("not_before set"));
    let delay = nb.as_second() - ts(&at(now)).as_second();
    assert!(
        (0..=ceiling).contains(&delay),
        "{id} attempt {}: delay {delay}s outside [0, {ceiling}]",
        c["attempt"]
    );
    now + delay
}

#[test]
fn lease_expiry_retries_with_backoff_until_the_dead_letter() {
    let mut r = repo(
        "defaults: {timeout: 10m, max_attempts: 3}\nbackoff: {base: 1m, max: 1h}\n",
        &["alice"],
    );
    r.task("t", "title: Slow work\nagent: alice\n");
    tick_at(&mut r, 0);
    assert_eq!(r.where_is("t"), "work/assigned/alice/t.yaml");
    assert_eq!(coord(&r, "t")["lease_expires_at"], json!(at(10 * MIN)));
    tick_at(&mut r, 10 * MIN - 1);
    assert_eq!(state(&r, "t"), "assigned", "the lease still runs");

    let mut now = 10 * MIN;
    for attempt in 1..=2u64 {
        tick_at(&mut r, now);
        assert_eq!(state(&r, "t"), "ready", "attempt {attempt} timed out");
        let c = coord(&r, "t");
        assert_eq!(c["attempt"], json!(attempt));
        let last = &c["history"][attempt as usize - 1];
        assert_eq!(last["error"]["code"], json!("timeout"));
        assert_eq!(last["agent"], json!("alice"));
        let ceiling = MIN << (attempt - 1);
        let nb = check_backoff(&r, "t", now, ceiling);
        if nb > now {
            tick_at(&mut r, nb - 1);
            assert_eq!(state(&r, "t"), "ready", "not_before is respected");
        }
        tick_at(&mut r, nb);
        assert_eq!(state(&r, "t"), "assigned");
        assert_eq!(coord(&r, "t")["attempt"], json!(attempt + 1));
        now = nb + 10 * MIN;
    }
    tick_at(&mut r, now);
    assert_eq!(r.where_is("t"), "work/failed/t.yaml");
    let c = coord(&r, "t");
    assert_eq!(c["error"]["code"], json!("timeout"));
    assert_eq!(c["history"].as_array().map(Vec::len), Some(3));
    let log = r.ok(&["log", "t"]);
    assert!(
        log.contains("fail t: timeout (attempts exhausted)"),
        "{log}"
    );
}

#[test]
fn heartbeat_keeps_a_task_past_its_first_lease() {
    let mut r = repo("defaults: {timeout: 10m}\n", &["alice"]);
    r.task("t", "title: Long work\nagent: alice\n");
    tick_at(&mut r, 0);
    r.at(&at(8 * MIN));
    r.ok(&["heartbeat", "t"]);
    assert_eq!(coord(&r, "t")["lease_expires_at"], json!(at(18 * MIN)));
    tick_at(&mut r, 15 * MIN);
    assert_eq!(
        state(&r, "t"),
        "assigned",
        "past the first lease, within the new one"
    );
    tick_at(&mut r, 18 * MIN);
    assert_eq!(state(&r, "t"), "ready", "the extended lease ran out");
}

#[test]
fn backoff_stays_within_full_jitter_bounds_for_attempts_one_to_six_and_the_cap() {
    let mut r = repo(
        "defaults: {timeout: 1m, max_attempts: 7}\nbackoff: {base: 1m, max: 10m}\ncircuit_breaker: {failure_threshold: 100}\n",
        &["alice", "bob", "carol"],
    );
    for (id, agent) in [("j1", "alice"), ("j2", "bob"), ("j3", "carol")] {
        r.task(id, &format!("title: Flaky {id}\nagent: {agent}\n"));
    }
    tick_at(&mut r, 0);
    let mut now = 0;
    for attempt in 1..=6u32 {
        now += MIN;
        tick_at(&mut r, now);
        let ceiling = (MIN << (attempt - 1)).min(10 * MIN);
        let mut latest = now;
        for id in ["j1", "j2", "j3"] {
            assert_eq!(state(&r, id), "ready", "{id} attempt {attempt}");
            latest = latest.max(check_backoff(&r, id, now, ceiling));
        }
        now = latest;
        tick_at(&mut r, now);
        for id in ["j1", "j2", "j3"] {
            assert_eq!(coord(&r, id)["attempt"], json!(attempt + 1), "{id}");
        }
    }
}

#[test]
fn fatal_failure_dead_letters_at_once_while_a_retryable_one_retries() {
    let mut r = TestRepo::with_agents(&["alice", "bob"]);
    r.task("soft", "title: Soft\nagent: alice\n");
    r.task("hard", "title: Hard\nagent: bob\n");
    tick_at(&mut r, 0);
    r.ok(&["fail", "soft", "--error", "network blip"]);
    r.ok(&[
        "fail",
        "hard",
        "--error",
        "the input is nonsense",
        "--fatal",
    ]);
    tick_at(&mut r, MIN);
    assert_eq!(state(&r, "soft"), "ready");
    let soft = coord(&r, "soft");
    assert_eq!(soft["history"][0]["error"]["code"], json!("agent_failure"));
    assert_eq!(soft["history"][0]["result"]["status"], json!("failure"));
    assert!(
        show(&r, "soft")["task"]["result"].is_null(),
        "result moved to history"
    );
    assert_eq!(r.where_is("hard"), "work/failed/hard.yaml");
    let hard = coord(&r, "hard");
    assert_eq!(hard["attempt"], json!(1));
    assert_eq!(hard["error"]["code"], json!("agent_failure"));
    assert_eq!(hard["error"]["retryable"], json!(false));
    assert_eq!(
        show(&r, "hard")["task"]["result"]["status"],
        json!("failure"),
        "kept for review"
    );
}

#[test]
fn circuit_opens_after_threshold_probes_once_and_closes_or_reopens() {
    let mut r = repo(
        "defaults: {max_attempts: 5}\nbackoff: {base: 1s, max: 1s}\ncircuit_breaker: {failure_threshold: 2, open_for: 10m}\n",
        &[],
    );
    r.ok(&["agents", "add", "alice", "--max-active", "2"]);
    for id in ["t1", "t2", "t3", "t4"] {
        r.task(id, &format!("title: Work {id}\nagent: alice\n"));
    }
    tick_at(&mut r, 0);
    assert_eq!(state(&r, "t1"), "assigned");
    assert_eq!(state(&r, "t2"), "assigned");
    r.ok(&["fail", "t1", "--error", "crash", "--fatal"]);
    r.ok(&["fail", "t2", "--error", "crash", "--fatal"]);
    tick_at(&mut r, MIN);
    let p = profile(&r, "alice");
    assert!(p.contains("circuit: open"), "{p}");
    assert!(p.contains("consecutive_failures: 2"), "{p}");
    assert!(p.contains(&at(11 * MIN)), "{p}");
    assert_eq!(state(&r, "t3"), "ready", "no new work while open");
    let status = r.ok(&["status"]);
    assert!(
        status.contains(&format!("circuit open until {}", at(11 * MIN))),
        "{status}"
    );
    assert!(
        status.contains("t3 \"Work t3\": circuit of agent alice is open"),
        "{status}"
    );

    tick_at(&mut r, 11 * MIN - 1);
    assert_eq!(state(&r, "t3"), "ready", "still open");
    r.at(&at(11 * MIN));
    let status = r.ok(&["status"]);
    assert!(status.contains("next task is a probe"), "{status}");
    tick_at(&mut r, 11 * MIN);
    assert_eq!(state(&r, "t3"), "assigned", "the probe");
    assert_eq!(state(&r, "t4"), "ready", "exactly one probe");
    assert!(profile(&r, "alice").contains("circuit: half_open"));
    let status = r.ok(&["status"]);
    assert!(
        status.contains("half-open with a probe task running"),
        "{status}"
    );

    r.ok(&["fail", "t3", "--error", "still broken"]);
    tick_at(&mut r, 12 * MIN);
    let p = profile(&r, "alice");
    assert!(
        p.contains("circuit: open") && p.contains(&at(22 * MIN)),
        "{p}"
    );
    assert_eq!(state(&r, "t3"), "ready");
    assert_eq!(state(&r, "t4"), "ready");

    tick_at(&mut r, 22 * MIN);
    let probes: Vec<&str> = ["t3", "t4"]
        .into_iter()
        .filter(|id| state(&r, id) == "assigned")
        .collect();
    assert_eq!(probes.len(), 1, "exactly one probe: {probes:?}");
    let attempt = coord(&r, probes[0])["attempt"].to_string();
    complete(
        &r,
        probes[0],
        &json!({"ok": true}),
        &["--attempt", &attempt],
    );
    tick_at(&mut r, 23 * MIN);
    let p = profile(&r, "alice");
    assert!(
        p.contains("circuit: closed") && p.contains("consecutive_failures: 0"),
        "{p}"
    );
    assert_eq!(state(&r, probes[0]), "done");
    let other = if probes[0] == "t3" { "t4" } else { "t3" };
    assert_eq!(state(&r, other), "assigned", "closed again: work flows");
}

#[test]
fn a_zombie_result_for_an_old_attempt_is_set_aside() {
    let mut r = repo(
        "defaults: {timeout: 10m}\nbackoff: {base: 1s, max: 1s}\n",
        &["alice"],
    );
    r.task("z", "title: Zombie target\nagent: alice\n");
    tick_at(&mut r, 0);
    tick_at(&mut r, 10 * MIN);
    tick_at(&mut r, 11 * MIN);
    assert_eq!(coord(&r, "z")["attempt"], json!(2));
    let path = r.where_is("z");
    let text = r.read(&path);
    let zombie = "result:\n  status: success\n  attempt: 1\n  output: {late: true}\ncoord:\n";
    r.write(&path, &text.replacen("coord:\n", zombie, 1));
    tick_at(&mut r, 12 * MIN);
    assert_eq!(
        r.where_is("z"),
        "work/assigned/alice/z.yaml",
        "not acted on"
    );
    let s = show(&r, "z");
    assert!(
        s["task"]["result"].is_null(),
        "the stale result left the file"
    );
    let last = s["task"]["coord"]["history"]
        .as_array()
        .and_then(|h| h.last().cloned())
        .expect("history");
    assert_eq!(last["event"], json!("stale_result"));
    assert_eq!(last["result"]["output"]["late"], json!(true));
    assert_eq!(s["task"]["coord"]["attempt"], json!(2));
    complete(&r, "z", &json!({"on_time": true}), &["--attempt", "2"]);
    tick_at(&mut r, 13 * MIN);
    assert_eq!(state(&r, "z"), "done");
}

#[test]
fn cancel_fails_dependents_and_retry_runs_tasks_again_with_history() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("a", "title: A\nagent: alice\n");
    r.task("b", "title: B\nagent: alice\ndepends_on: [a]\n");
    r.task("c", "title: C\nagent: alice\ndepends_on: [b]\n");
    tick_at(&mut r, 0);
    assert_eq!(state(&r, "b"), "blocked");
    r.at(&at(MIN));
    r.ok(&["cancel", "a", "--reason", "not needed"]);
    assert_eq!(r.where_is("a"), "work/cancelled/a.yaml");
    assert_eq!(coord(&r, "a")["error"]["code"], json!("cancelled"));
    for (id, dep) in [("b", "a"), ("c", "b")] {
        assert_eq!(state(&r, id), "failed", "{id}");
        let e = &coord(&r, id)["error"];
        assert_eq!(e["code"], json!("dependency_failed"));
        assert_eq!(e["retryable"], json!(false));
        assert!(
            e["message"].as_str().unwrap_or_default().contains(dep),
            "{e}"
        );
    }
    assert!(
        !profile(&r, "alice").contains("consecutive_failures: 1"),
        "cancel does not count"
    );

    r.ok(&["retry", "a"]);
    assert_eq!(r.where_is("a"), "work/inbox/a.yaml");
    tick_at(&mut r, 2 * MIN);
    assert_eq!(state(&r, "a"), "assigned", "runs again");
    let c = coord(&r, "a");
    assert_eq!(
        c["attempt"],
        json!(2),
        "attempt numbers keep growing across a retry"
    );
    assert_eq!(c["attempt_base"], json!(1));
    assert_eq!(
        c["history"][0]["error"]["code"],
        json!("cancelled"),
        "history kept: {c}"
    );
    complete(&r, "a", &json!({"v": 1}), &["--attempt", "2"]);
    r.ok(&["retry", "b"]);
    tick_at(&mut r, 3 * MIN);
    assert_eq!(state(&r, "a"), "done");
    assert_eq!(state(&r, "b"), "assigned", "its dependency is done now");
    assert_eq!(
        coord(&r, "b")["history"][0]["error"]["code"],
        json!("dependency_failed")
    );
    let (_, err) = r.code(&["retry", "a"], 1);
    assert!(err.contains("only failed, invalid or cancelled"), "{err}");
}

#[test]
fn retry_of_an_invalid_task_after_the_fix() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("x", "title: X\nagent: zed\n");
    tick_at(&mut r, 0);
    assert_eq!(r.where_is("x"), "work/invalid/x.yaml");
    assert!(r
        .read("work/invalid/x.yaml.errors")
        .contains("unknown agent 'zed'"));
    r.ok(&["agents", "add", "zed"]);
    r.ok(&["retry", "x"]);
    assert!(!r.exists("work/invalid/x.yaml.errors"));
    tick_at(&mut r, MIN);
    assert_eq!(r.where_is("x"), "work/assigned/zed/x.yaml");
}
