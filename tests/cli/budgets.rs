//! Cost metrics and budgets: results carry `metrics:` (from `coord complete --metrics`, a
//! hand-written `result:`, MCP, REST or a `coord run` program's output), coord totals them per
//! task, agent and day from the task files, and an agent whose budget is spent has its circuit
//! open, named in `status` and on the board, until the next day or a raised budget.

use crate::harness::TestRepo;
use crate::http::Server;

/// Gives `bot` a profile with `budget` and commits it.
fn budget(r: &TestRepo, budget: &str) {
    r.commit_file(
        "work/agents/bot.yaml",
        &format!("max_active: 1\nbudget: {budget}\n"),
        "set bot's budget",
    );
}

/// Completes the task `bot` holds as attempt 1, with `metrics`.
fn complete(r: &TestRepo, id: &str, metrics: &str) {
    r.ok(&[
        "complete",
        id,
        "--agent",
        "bot",
        "--attempt",
        "1",
        "--metrics",
        metrics,
    ]);
}

#[test]
fn a_spent_budget_opens_the_circuit_mid_run_until_the_next_day_or_a_raise() {
    let mut r = TestRepo::with_agents(&["bot"]);
    budget(&r, "{tokens_per_day: 1000}");
    for id in ["t1", "t2", "t3", "t4"] {
        r.task(id, &format!("title: Task {id}\nagent: bot\n"));
    }
    r.at("2026-11-28T09:00:00Z").ok(&["tick"]);
    assert_eq!(r.find("t1"), ["work/assigned/bot/t1.yaml"]);
    complete(&r, "t1", "tokens_in=600,tokens_out=100,cost=0.12,model=m1");
    r.at("2026-11-28T09:10:00Z").ok(&["tick"]);
    assert_eq!(r.find("t2"), ["work/assigned/bot/t2.yaml"]);
    complete(&r, "t2", "tokens_in=300,tokens_out=20,cost=0.05");
    r.at("2026-11-28T09:20:00Z").ok(&["tick"]);
    assert_eq!(r.find("t2"), ["work/done/t2.yaml"]);
    // 1,020 of 1,000 tokens: t3 waits, and status says why.
    assert_eq!(r.find("t3"), ["work/ready/t3.yaml"]);
    let status = r.json(&["status"]);
    let bot = &status["agents"][0];
    assert_eq!(bot["circuit"], "open");
    assert_eq!(bot["circuit_reason"], "budget: 1,020 of 1,000 tokens today");
    assert_eq!(bot["spent_today"]["tokens_in"], 900);
    let waiting = status["waiting"].to_string();
    assert!(
        waiting.contains("budget: 1,020 of 1,000 tokens today"),
        "{waiting}"
    );
    let text = r.ok(&["status"]);
    assert!(
        text.contains("circuit open (budget: 1,020 of 1,000 tokens today)"),
        "{text}"
    );
    assert!(text.contains("spent:"), "{text}");
    // Totals per agent and day, and per task in show.
    assert_eq!(status["spending"]["agents"]["bot"]["tokens_out"], 120);
    assert_eq!(status["spending"]["days"]["2026-11-28"]["results"], 2);
    let cost = status["spending"]["total"]["cost"].as_f64().unwrap_or(0.0);
    assert!((cost - 0.17).abs() < 1e-9, "{cost}");
    let shown = r.json(&["show", "t1"]);
    assert_eq!(shown["spent"]["tokens_in"], 600);
    assert_eq!(shown["task"]["result"]["metrics"]["model"], "m1");
    // The board's agents view names why, and /metrics counts what was spent.
    let s = Server::start(&r);
    let page = s.get("/agents").body;
    assert!(
        page.contains("circuit open: budget: 1,020 of 1,000 tokens today"),
        "{page}"
    );
    let metrics = s.get("/metrics").body;
    assert!(
        metrics.contains("coord_tokens_total{agent=\"bot\",direction=\"in\"} 900"),
        "{metrics}"
    );
    s.stop();
    // The next day the circuit closes by itself.
    r.at("2026-11-29T00:00:01Z").ok(&["tick"]);
    assert_eq!(r.find("t3"), ["work/assigned/bot/t3.yaml"]);
    complete(&r, "t3", "tokens_in=1100");
    r.at("2026-11-29T00:10:00Z").ok(&["tick"]);
    assert_eq!(r.find("t4"), ["work/ready/t4.yaml"]);
    let why = r.json(&["status"])["agents"][0]["circuit_reason"].clone();
    assert_eq!(why, "budget: 1,100 of 1,000 tokens today");
    // A person raises the budget: the circuit closes at the next tick.
    budget(&r, "{tokens_per_day: 5000}");
    r.at("2026-11-29T00:20:00Z").ok(&["tick"]);
    assert_eq!(r.find("t4"), ["work/assigned/bot/t4.yaml"]);
    assert_eq!(r.json(&["status"])["agents"][0]["circuit"], "closed");
}

#[test]
fn a_hand_written_result_with_metrics_counts_and_bad_metrics_are_refused() {
    let mut r = TestRepo::with_agents(&["bot"]);
    r.task("t1", "title: One\nagent: bot\n");
    r.at("2026-11-28T09:00:00Z").ok(&["tick"]);
    let path = "work/assigned/bot/t1.yaml";
    let text = r.read(path);
    r.write(
        path,
        &format!("{text}result:\n  status: success\n  metrics: {{tokens_in: 40, cost: 0.5}}\n"),
    );
    r.at("2026-11-28T09:10:00Z").ok(&["tick"]);
    assert_eq!(r.find("t1"), ["work/done/t1.yaml"]);
    // Quiet ticks later (done/ read as a block, status from the saved board) it still counts.
    r.at("2026-11-28T09:20:00Z").ok(&["tick"]);
    r.at("2026-11-28T09:30:00Z").ok(&["tick"]);
    let status = r.json(&["status"]);
    assert_eq!(status["spending"]["agents"]["bot"]["tokens_in"], 40);
    let (_, err) = r.code(&["complete", "t1", "--metrics", "tokens=5"], 2);
    assert!(err.contains("key \"tokens\" is not known"), "{err}");
}

#[test]
fn results_in_history_folders_taken_whole_still_count_for_budgets_and_status() {
    let mut r = TestRepo::with_agents(&["bot"]);
    r.at("2026-10-05T12:00:00Z");
    let old = crate::finished::finished_in("Old", "done", 1).replace(
        "  output: {v: 1}\n",
        "  output: {v: 1}\n  metrics: {tokens_in: 2000, cost: 3}\n",
    );
    r.write("work/done/old.yaml", &old);
    crate::finished::person_commits(&r, "a finished task");
    crate::finished::tick(&r);
    crate::finished::tick(&r);
    assert!(crate::history_blocks::judged(&r, "done"), "done is judged");
    let status = r.json(&["status"]);
    assert_eq!(status["spending"]["agents"]["bot"]["tokens_in"], 2000);
    assert_eq!(status["spending"]["days"]["2026-10-05"]["results"], 1);
    budget(&r, "{cost_per_day: 2.5}");
    r.task("next", "title: Next\nagent: bot\n");
    crate::finished::tick(&r);
    assert_eq!(r.find("next"), ["work/ready/next.yaml"]);
    let bot = &r.json(&["status"])["agents"][0];
    assert_eq!(bot["circuit_reason"], "budget: cost 3.00 of 2.50 today");
}

#[test]
fn coord_run_takes_metrics_from_the_program_and_stops_taking_work_once_the_budget_is_spent() {
    use crate::agents_run::{args, repo, run_to_end, state};
    let r = repo(&[("a", "max_active: 1\nbudget: {tokens_per_day: 1000}\n")]);
    for id in ["t1", "t2", "t3"] {
        r.task(id, &format!("title: Task {id}\nagent: a\n"));
    }
    let cmd: Vec<String> = [
        "sh",
        "-c",
        "echo '{\"ok\": true, \"metrics\": {\"tokens_in\": 600, \"model\": \"m\"}}'",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, out, err) = run_to_end(&r, &args(&["a", "--once"], &cmd));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().count(),
        2,
        "two tasks ran, then the budget stopped it: {out}"
    );
    assert_eq!(
        (state(&r, "t1"), state(&r, "t2")),
        ("done".into(), "done".into())
    );
    assert_eq!(state(&r, "t3"), "ready");
    let t1 = crate::agents_run::task(&r, "t1");
    assert_eq!(t1["task"]["result"]["metrics"]["tokens_in"], 600, "{t1}");
    assert_eq!(
        t1["task"]["result"]["output"],
        serde_json::json!({"ok": true})
    );
    let status = r.ok_on_system_clock(&["status"]);
    assert!(
        status.contains("circuit open (budget: 1,200 of 1,000 tokens today)"),
        "{status}"
    );
}

#[test]
fn metrics_arrive_through_mcp_and_rest() {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.task("by-mcp", "title: One\n");
    r.task("by-rest", "title: Two\n");
    r.ok(&["tick"]);
    crate::agents_mcp::with_server(&r, |client| async move {
        let claimed =
            crate::agents_mcp::ok(&client, "claim", serde_json::json!({"agent": "p"})).await;
        let id = claimed["id"].as_str().unwrap_or_default().to_string();
        let args = serde_json::json!({"id": id, "agent": "p", "attempt": 1, "metrics": {"tokens_out": 70, "cost": 0.25}});
        crate::agents_mcp::ok(&client, "complete", args).await;
    });
    r.ok(&["tick"]);
    let s = Server::start(&r);
    let claim = s.post("/v1/tasks/by-rest/claim", r#"{"agent": "p"}"#);
    assert_eq!(claim.status, 200, "{}", claim.body);
    let done = s.post(
        "/v1/tasks/by-rest/complete",
        r#"{"agent": "p", "attempt": 1, "metrics": {"tokens_out": 30, "duration_s": 12}}"#,
    );
    assert_eq!(done.status, 200, "{}", done.body);
    s.stop();
    let status = r.json(&["status"]);
    let p = &status["spending"]["agents"]["p"];
    assert_eq!(p["tokens_out"], 100, "{status}");
    assert_eq!(p["results"], 2, "{status}");
}
