//! The hub's epoch fences every way an agent reports: a grant records the epoch of the hub
//! that made it, and a result, heartbeat or release is checked against it whether it comes
//! through the task routes, the agent routes (`coord complete/fail/heartbeat --hub`) or
//! `coord run --hub`. After a failover a result for the old hub's grant is kept as
//! `stale_result` and never credited; one naming no epoch is refused.

use crate::harness::TestRepo;
use crate::hub::{block_pushes, eventually, fleet, remote_place, Hub};
use serde_json::{json, Value};
use std::process::Output;
use std::time::Duration;

/// Returns stderr of `o`.
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Returns the `stale_result` entries of task `t` as a hub reads it.
fn stale_results(t: &Value) -> Vec<Value> {
    let history = t["task"]["coord"]["history"].as_array().cloned();
    history
        .unwrap_or_default()
        .into_iter()
        .filter(|h| h["event"] == "stale_result")
        .collect()
}

#[test]
fn after_a_failover_the_cli_reports_of_the_old_hubs_grant_are_not_credited() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 6s}", 1);
    let old = net.clone();
    let first = Hub::start(&old);
    // The old hub's pushes fail from now on: its grant stays in its clone.
    block_pushes(&old);
    let agent = TestRepo::empty();
    let url1 = format!("http://{}", first.addr);
    let granted = agent.json(&["claim", "--agent", "w", "--hub", &url1]);
    assert_eq!(
        (&granted["attempt"], &granted["epoch"]),
        (&json!(1), &json!(1))
    );
    first.kill_9();
    assert_eq!(remote_place(&net, "t0"), "work/ready");

    let newer = net.clone();
    let second = Hub::start(&newer);
    let url2 = format!("http://{}", second.addr);
    let again = agent.run(&["claim", "--agent", "w", "--hub", &url2]);
    assert!(again.status.success(), "{}", err(&again));
    assert!(
        err(&again).contains("attempt 1 of w") && err(&again).contains("--epoch 2"),
        "{}",
        err(&again)
    );

    let old_grant = ["--hub", &url2, "--agent", "w", "--attempt", "1"];
    let complete = |extra: &[&str]| {
        let mut args = vec!["complete", "t0"];
        args.extend(old_grant);
        args.extend(extra);
        agent.run(&args)
    };
    let zombie = complete(&["--epoch", "1"]);
    assert_eq!(zombie.status.code(), Some(1), "{}", err(&zombie));
    assert!(
        err(&zombie).contains("epoch 1") && err(&zombie).contains("stale_result"),
        "{}",
        err(&zombie)
    );
    let unnamed = complete(&[]);
    assert_eq!(unnamed.status.code(), Some(1), "{}", err(&unnamed));
    assert!(err(&unnamed).contains("--epoch"), "{}", err(&unnamed));
    let mut beat = vec!["heartbeat", "t0"];
    beat.extend(old_grant);
    beat.extend(["--epoch", "1"]);
    let beat = agent.run(&beat);
    assert_eq!(beat.status.code(), Some(1), "{}", err(&beat));
    assert!(
        err(&beat).contains("heartbeat was refused"),
        "{}",
        err(&beat)
    );

    let task = second.task("t0");
    assert!(task["task"].get("result").is_none(), "credited: {task}");
    let stale = stale_results(&task);
    assert_eq!(stale.len(), 1, "{task}");
    assert_eq!(stale[0]["result"]["epoch"], 1, "{task}");

    // The new grant's holder names its epoch as a script names its attempt.
    let mut args = vec!["complete", "t0"];
    args.extend(old_grant);
    let done = agent
        .cmd(&args)
        .env("COORD_EPOCH", "2")
        .output()
        .expect("run");
    assert!(done.status.success(), "{}", err(&done));
    let task = second.task("t0");
    assert_eq!(task["task"]["result"]["attempt"], 1, "{task}");
    assert_eq!(task["task"]["coord"]["epoch"], 2, "{task}");
}

#[test]
fn a_grant_the_old_hub_pushed_stands_after_a_failover_in_its_epoch() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 6s}", 1);
    let old = net.clone();
    let first = Hub::start(&old);
    assert_eq!(first.claim("t0", "w")["epoch"], 1);
    let landed = eventually(Duration::from_secs(20), || {
        remote_place(&net, "t0") == "work/assigned/w"
    });
    assert!(landed, "the old hub's grant did not reach the remote");
    first.kill_9();
    let newer = net.clone();
    let second = Hub::start(&newer);
    let beat = second.post(
        "/v1/agents/w/tasks/t0/heartbeat",
        json!({"attempt": 1, "epoch": 1}),
    );
    assert_eq!(beat.status, 200, "{}", beat.body);
    let done = second.post(
        "/v1/agents/w/tasks/t0/complete",
        json!({"attempt": 1, "epoch": 1, "output": {"from": "old"}}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(second.task("t0")["task"]["result"]["output"]["from"], "old");
}

#[test]
fn coord_run_through_a_hub_carries_the_epoch_from_claim_to_report() {
    let net = fleet("{remote: origin, pushes_per_minute: 600, lease: 1m}", 2);
    let clone = net.clone();
    let hub = Hub::start(&clone);
    let url = format!("http://{}", hub.addr);
    let folder = TestRepo::empty();
    let seen = folder.home().join("epochs");
    let script = format!(
        "echo \"$COORD_EPOCH\" >> {}; cat >/dev/null",
        seen.display()
    );
    let args = [
        "run", "--hub", &url, "w", "--once", "--", "sh", "-c", &script,
    ];
    let o = folder.run(&args);
    assert!(o.status.success(), "{}", err(&o));
    let epochs = std::fs::read_to_string(&seen).expect("the command ran");
    assert_eq!(epochs, "1\n1\n");
    let done = |id: &str| remote_place(&net, id) == "work/done";
    let landed = eventually(Duration::from_secs(20), || done("t0") && done("t1"));
    assert!(landed, "not on the remote: {}", err(&o));
}
