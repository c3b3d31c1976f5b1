//! The hub's epoch fences every way an agent reports: a grant records the epoch of the hub
//! that made it, and a result, heartbeat or release is checked against it whether it comes
//! through the task routes, the agent routes (`coord complete/fail/heartbeat --hub`) or
//! `coord run --hub`. After a failover a result for the old hub's grant is kept as
//! `stale_result` and never credited; one naming no epoch is refused. Agent routes write
//! only into their own agent's tasks.

use crate::harness::TestRepo;
use crate::http::{request, Server};
use crate::hub::{block_pushes, eventually, fleet, remote_place, Hub};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Output, Stdio};
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

const ADMIN: &str = "admin-token-0123456789";
const TOKEN_A: &str = "token-of-agent-a-0123";
const TOKEN_GHOST: &str = "token-of-agent-ghost-01";

/// Writes an agent tokens file for a and `ghost` (an agent with no profile) in `there`'s
/// home; returns its path.
fn tokens_file(there: &TestRepo) -> String {
    let file = there.home().join("agent-tokens.yaml");
    let text = format!("a: {TOKEN_A}\nghost: {TOKEN_GHOST}\n");
    std::fs::write(&file, text).expect("write tokens");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    file.to_str().expect("utf8").to_string()
}

#[test]
fn an_agents_token_writes_nothing_into_another_agents_task() {
    let there = TestRepo::with_agents(&["a --pull", "b --pull"]);
    there.ok(&["new", "One", "--id", "one"]);
    there.ok(&["tick"]);
    there.ok(&["claim", "--agent", "b"]);
    let file = tokens_file(&there);
    let s = Server::start_with(
        &there,
        &["--listen", "127.0.0.1:0", "--agent-tokens", &file],
        &[("COORD_SERVE_TOKEN", ADMIN)],
    );
    let commits = there.commit_count();
    let auth = format!("Bearer {TOKEN_A}");
    for action in ["complete", "fail", "heartbeat"] {
        let path = format!("/v1/agents/a/tasks/one/{action}");
        let body = json!({"attempt": 1, "error": "not mine"}).to_string();
        let r = request(
            &s.addr,
            "POST",
            &path,
            &[("Authorization", &auth)],
            body.as_bytes(),
        );
        assert_eq!(r.status, 403, "{action}: {}", r.body);
        assert!(r.body.contains("never agent a's"), "{}", r.body);
    }
    assert_eq!(there.commit_count(), commits, "a refusal writes nothing");
    let shown = there.json(&["show", "one"]);
    let history = &shown["task"]["coord"]["history"];
    assert!(history.as_array().is_none_or(Vec::is_empty), "{shown}");

    let cancel = request(
        &s.addr,
        "POST",
        "/v1/tasks/one/cancel",
        &[("Authorization", &auth)],
        b"{}",
    );
    assert_eq!(cancel.status, 403, "{}", cancel.body);
    let detail = cancel.json()["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        detail.ends_with("this needs the server's token") && !detail.contains("  "),
        "{detail:?}"
    );
}

#[test]
fn an_agent_tokens_file_naming_an_agent_without_a_profile_is_warned_about_at_start() {
    let there = TestRepo::with_agents(&["a --pull"]);
    let file = tokens_file(&there);
    let log = there.home().join("serve.err");
    let mut cmd = there.spawn_cmd(&["serve", "--listen", "127.0.0.1:0", "--agent-tokens", &file]);
    cmd.env("COORD_SERVE_TOKEN", ADMIN)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log"));
    let mut child = cmd.spawn().expect("spawn coord serve");
    let mut line = String::new();
    let out = child.stdout.take().expect("stdout");
    BufReader::new(out).read_line(&mut line).expect("read");
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.starts_with("http://"), "did not serve: {line:?}");
    let text = std::fs::read_to_string(&log).expect("stderr");
    let warned: Vec<&str> = text.lines().filter(|l| l.contains("ghost")).collect();
    assert_eq!(warned.len(), 1, "{text}");
    assert!(
        warned[0].contains("no profile") && warned[0].contains("work/agents/ghost.yaml"),
        "{text}"
    );
}

#[test]
fn a_result_for_a_grant_the_failed_over_hub_never_pushed_is_never_credited() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 6s}", 1);
    let old = net.clone();
    let first = Hub::start(&old);
    // The old hub's pushes fail from now on: its grant, answered 200, stays in its clone.
    block_pushes(&old);
    let granted = first.claim("t0", "w");
    assert_eq!(
        (&granted["attempt"], &granted["epoch"]),
        (&json!(1), &json!(1))
    );
    first.kill_9();

    let newer = net.clone();
    let second = Hub::start(&newer);
    let report = json!({"attempt": 1, "epoch": 1, "output": {"from": "lost"}});
    let by_agent = second.post("/v1/agents/w/tasks/t0/complete", report.clone());
    let mut named = report;
    named["agent"] = json!("w");
    let by_task = second.post("/v1/tasks/t0/complete", named);
    assert_eq!(by_agent.status, 403, "{}", by_agent.body);
    assert!(
        by_agent.body.contains("older hub") && by_agent.body.contains("not credited"),
        "{}",
        by_agent.body
    );
    assert_eq!(by_task.status, 409, "{}", by_task.body);
    assert!(by_task.body.contains("stale_result"), "{}", by_task.body);
    let task = second.task("t0");
    assert_eq!(task["state"], "ready", "{task}");
    assert!(task["task"].get("result").is_none(), "credited: {task}");
    assert_eq!(stale_results(&task).len(), 1, "{task}");

    // The next grant is a new attempt of the new epoch, and the remote's history is clean.
    let again = second.claim("t0", "v");
    assert_eq!(again["epoch"], 2, "{again}");
    drop(second);
    let (verified, _) = newer.code(&["verify"], 0);
    assert!(verified.trim_end().ends_with(": clean"), "{verified}");
}
