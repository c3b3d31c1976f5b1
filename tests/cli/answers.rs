//! One answer per operation: `claim`, `heartbeat`, `complete`, `new` and a person's actions answer with the same
//! fields through `--json` (inside its `version` envelope), the REST routes and the MCP tools,
//! each the shape its schema under `schemas/json/` describes.

use crate::agents_mcp::{ok, with_server};
use crate::harness::TestRepo;
use crate::http::Server;
use crate::schemas::check;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The answers of one front end: claim, heartbeat, complete, a claim of nothing, new.
type Answers = [Value; 5];

/// Returns the answer's field names, without the `--json` envelope's `version`.
fn fields(v: &Value) -> Vec<String> {
    let object = v.as_object().unwrap_or_else(|| panic!("an object: {v}"));
    object.keys().filter(|k| *k != "version").cloned().collect()
}

/// Checks an answer of REST or MCP, given `version`, against the schema of its command.
fn versioned(schema: &str, v: &Value) {
    let mut with = json!({"version": 1});
    with.as_object_mut()
        .expect("object")
        .extend(v.as_object().expect("object").clone());
    check(schema, &[schema], &with.to_string());
}

#[test]
fn claim_heartbeat_and_report_answer_alike_from_every_front_end() {
    let r = TestRepo::with_agents(&["p --pull --max-active 3"]);
    for id in ["a", "b", "c"] {
        r.ok(&["new", "Work", "--id", id, "--agent", "p"]);
    }
    r.ok(&["tick"]);
    let mut by: BTreeMap<&str, Answers> = BTreeMap::new();

    let claim = r.json(&["claim", "--agent", "p"]);
    let id = claim["id"].as_str().expect("id").to_string();
    let fence = ["--agent", "p", "--attempt", "1"];
    let beat = r.json(&[&["heartbeat", &id][..], &fence].concat());
    let done = r.json(&[&["complete", &id][..], &fence].concat());
    // Tasks no agent here may take: no claim below finds them.
    let made = r.json(&["new", "More", "--id", "d1", "--capability", "x"]);
    by.insert("cli", [claim, beat, done, Value::Null, made]);

    let s = Server::start(&r);
    let claim = s.post("/v1/agents/p/claim", "{}").json();
    let id = claim["id"].as_str().expect("id").to_string();
    let at = |action: &str| format!("/v1/agents/p/tasks/{id}/{action}");
    let beat = s.post(&at("heartbeat"), r#"{"attempt": 1}"#).json();
    let done = s.post(&at("complete"), r#"{"attempt": 1}"#).json();
    let made = s
        .post(
            "/v1/tasks",
            r#"{"title": "More", "id": "d2", "capabilities": ["x"]}"#,
        )
        .json();
    by.insert("rest", [claim, beat, done, Value::Null, made]);

    let mcp = std::sync::Mutex::new(None);
    let slot = &mcp;
    with_server(&r, |client| async move {
        let claim = ok(&client, "claim", json!({"agent": "p"})).await;
        let fence = json!({"id": claim["id"], "agent": "p", "attempt": 1});
        let beat = ok(&client, "heartbeat", fence.clone()).await;
        let done = ok(&client, "complete", fence).await;
        let nothing = ok(&client, "claim", json!({"agent": "p"})).await;
        let made = ok(
            &client,
            "new",
            json!({"title": "More", "id": "d3", "capabilities": ["x"]}),
        )
        .await;
        *slot.lock().expect("lock") = Some([claim, beat, done, nothing, made]);
    });
    let mcp = mcp.into_inner().expect("lock").expect("the MCP answers");
    assert_eq!(mcp[3]["claimed"], false, "{}", mcp[3]);
    by.insert("mcp", mcp);
    let (out, _) = r.code(&["--json", "claim", "--agent", "p"], 4);
    by.get_mut("cli").expect("cli")[3] = serde_json::from_str(&out).expect("JSON");
    by.get_mut("rest").expect("rest")[3] = s.post("/v1/agents/p/claim", "{}").json();

    let schemas = ["claim", "heartbeat", "report", "claim", "new"];
    for (n, schema) in schemas.iter().enumerate() {
        let cli = fields(&by["cli"][n]);
        for front in ["rest", "mcp"] {
            let answer = &by[front][n];
            assert_eq!(fields(answer), cli, "{front} {schema}: {answer}");
            versioned(schema, answer);
        }
    }
}

#[test]
fn agents_answer_the_same_rows_from_the_command_line_and_rest() {
    let r = TestRepo::with_agents(&["p --pull", "q --capability x"]);
    let cli = r.json(&["agents"]);
    let s = Server::start(&r);
    let rest = s.get("/v1/agents").json();
    assert_eq!(rest, cli["agents"], "{rest}\n{cli}");
    versioned("agents", &json!({"agents": rest}));
}

#[test]
fn person_actions_answer_alike_from_every_front_end() {
    let r = TestRepo::with_agents(&["p --capability x"]);
    for id in ["c1", "c2", "c3"] {
        r.ok(&["new", "Not needed", "--id", id]);
    }
    let mut by: BTreeMap<&str, [Value; 2]> = BTreeMap::new();
    let cancel = r.json(&["cancel", "c1", "--reason", "not needed"]);
    let retry = r.json(&["retry", "c1"]);
    by.insert("cli", [cancel, retry]);

    let s = Server::start(&r);
    let cancel = s.post("/v1/tasks/c2/cancel", r#"{"reason": "not needed"}"#);
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    let retry = s.post("/v1/tasks/c2/retry", "");
    assert_eq!(retry.status, 200, "{}", retry.body);
    by.insert("rest", [cancel.json(), retry.json()]);

    let mcp = std::sync::Mutex::new(None);
    let slot = &mcp;
    with_server(&r, |client| async move {
        let cancel = ok(
            &client,
            "cancel",
            json!({"id": "c3", "reason": "not needed"}),
        )
        .await;
        let retry = ok(&client, "retry", json!({"id": "c3"})).await;
        *slot.lock().expect("lock") = Some([cancel, retry]);
    });
    by.insert(
        "mcp",
        mcp.into_inner().expect("lock").expect("the MCP answers"),
    );

    for (n, cli) in by["cli"].iter().enumerate() {
        let mut cli = cli.clone();
        let object = cli.as_object_mut().expect("object");
        object.remove("version");
        object.remove("id");
        for front in ["rest", "mcp"] {
            let mut answer = by[front][n].clone();
            versioned("gate", &answer);
            answer.as_object_mut().expect("object").remove("id");
            assert_eq!(answer, cli, "{front} against the command line");
        }
    }
}

#[test]
fn a_tasks_log_answers_the_same_entries_from_every_front_end() {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.ok(&["new", "Work", "--id", "w", "--agent", "p"]);
    r.ok(&["tick"]);
    r.ok(&["cancel", "w", "--reason", "not needed"]);
    let cli = r.json(&["log", "w"]);
    assert!(
        cli["entries"].as_array().is_some_and(|e| e.len() >= 2),
        "{cli}"
    );
    check("log", &["log", "w"], &cli.to_string());

    let s = Server::start(&r);
    let rest = s.get("/v1/tasks/w/log").json();
    assert_eq!(
        rest["items"], cli["entries"],
        "REST against the command line"
    );

    let mcp = std::sync::Mutex::new(None);
    let slot = &mcp;
    with_server(&r, |client| async move {
        *slot.lock().expect("lock") = Some(ok(&client, "log", json!({"id": "w"})).await);
    });
    let mcp = mcp.into_inner().expect("lock").expect("the MCP answer");
    assert_eq!(
        mcp,
        json!({"entries": cli["entries"]}),
        "MCP against the command line"
    );
}

/// Runs `f` against `coord mcp` in `r` and returns what it gives back.
fn from_mcp<T, F>(r: &TestRepo, f: impl FnOnce(crate::agents_mcp::Client) -> F) -> T
where
    F: std::future::Future<Output = T>,
{
    let slot = std::sync::Mutex::new(None);
    let out = &slot;
    with_server(r, |client| async move {
        *out.lock().expect("lock") = Some(f(client).await);
    });
    slot.into_inner().expect("lock").expect("the MCP answer")
}

/// Returns a `--json` answer without its `version`.
fn unversioned(mut v: Value) -> Value {
    v.as_object_mut().expect("object").remove("version");
    v
}

#[test]
fn a_task_answers_the_same_view_from_every_front_end() {
    let r = TestRepo::with_agents(&["p"]);
    r.task("t1", "title: one\nagent: p\n");
    r.task("t2", "title: two\n");
    r.ok(&["tick"]);
    // A copy by hand in another folder: the id is in two places.
    r.write("work/ready/t1.yaml", &r.read("work/assigned/p/t1.yaml"));
    let s = Server::start(&r);
    for id in ["t1", "t2"] {
        let cli = r.json(&["show", id]);
        check("show", &["show", id], &cli.to_string());
        let cli = unversioned(cli);
        let rest = s.get(&format!("/v1/tasks/{id}")).json();
        assert_eq!(rest, cli, "REST against the command line");
        let mcp = from_mcp(&r, |client| async move {
            ok(&client, "show", json!({ "id": id })).await
        });
        assert_eq!(mcp, cli, "MCP against the command line");
    }
}

#[test]
fn the_board_answers_alike_from_every_front_end() {
    let r = TestRepo::with_agents(&["p --max-active 1"]);
    r.task("t1", "title: one\nagent: p\n");
    r.task("t2", "title: two\nagent: p\n");
    r.task("t3", "title: three\ndepends_on: [t1]\n");
    r.ok(&["tick"]);
    let cli = r.json(&["status"]);
    check("status", &["status"], &cli.to_string());
    let cli = unversioned(cli);
    let s = Server::start(&r);
    let rest = s.get("/v1/board").json();
    assert_eq!(rest, cli, "REST against the command line");
    let mcp = from_mcp(&r, |client| async move {
        ok(&client, "status", json!({"full": true})).await
    });
    assert_eq!(mcp, cli, "MCP against the command line");
}

#[test]
fn the_task_routes_answer_reports_as_the_command_line_does() {
    let r = TestRepo::with_agents(&["p --pull --max-active 2"]);
    r.ok(&["new", "Work", "--id", "a", "--agent", "p"]);
    r.ok(&["tick"]);
    r.ok(&["claim", "--agent", "p"]);
    r.ok(&["new", "Work", "--id", "b", "--agent", "p"]);
    r.ok(&["tick"]);
    let fence = ["--agent", "p", "--attempt", "1"];
    let cli = [
        r.json(&[&["heartbeat", "a"][..], &fence].concat()),
        r.json(&[&["fail", "a", "--error", "no"][..], &fence].concat()),
    ];
    let s = Server::start(&r);
    let claimed = s.post("/v1/tasks/b/claim", r#"{"agent": "p"}"#);
    assert_eq!(claimed.status, 200, "{}", claimed.body);
    let fence = r#"{"agent": "p", "attempt": 1}"#;
    let beat = s.post("/v1/tasks/b/heartbeat", fence);
    let failed = s.post(
        "/v1/tasks/b/fail",
        r#"{"agent": "p", "attempt": 1, "error": "no"}"#,
    );
    let rest = [beat.json(), failed.json()];
    for ((cli, rest), schema) in cli.iter().zip(&rest).zip(["heartbeat", "report"]) {
        assert_eq!(fields(rest), fields(cli), "{schema}: {rest}");
        versioned(schema, rest);
    }
    assert_eq!(rest[0]["id"], "b", "{}", rest[0]);
    assert_eq!(rest[1]["op"], "fail", "{}", rest[1]);
}

#[test]
fn lease_status_answers_alike_from_mcp_and_the_agent_route() {
    let r = TestRepo::with_agents(&["p --pull --max-active 2"]);
    r.ok(&["new", "Work", "--id", "a", "--agent", "p"]);
    r.ok(&["tick"]);
    r.ok(&["claim", "--agent", "p"]);
    let s = Server::start(&r);
    for attempt in [1, 2] {
        let rest = s
            .get(&format!("/v1/agents/p/tasks/a/lost?attempt={attempt}"))
            .json();
        let mcp = from_mcp(&r, |client| async move {
            let fence = json!({"id": "a", "agent": "p", "attempt": attempt});
            ok(&client, "lease_status", fence).await
        });
        assert_eq!(rest, mcp, "REST against MCP, attempt {attempt}");
        assert_eq!(rest["held"], attempt == 1, "{rest}");
    }
}

/// Returns every item of a paged REST route, following `next_cursor` one item at a time.
fn all_pages(s: &Server, route: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut next = String::new();
    loop {
        let page = s.get(&format!("{route}?limit=1{next}")).json();
        items.extend(page["items"].as_array().expect("items").iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => next = format!("&cursor={c}"),
            None => return items,
        }
    }
}

#[test]
fn the_task_list_and_a_log_page_the_same_tasks_and_entries_as_the_command_line() {
    let r = TestRepo::with_agents(&["p --pull"]);
    for id in ["a", "b", "c"] {
        r.ok(&["new", "Work", "--id", id, "--agent", "p"]);
    }
    r.ok(&["tick"]);
    r.ok(&["cancel", "b", "--reason", "not needed"]);
    let s = Server::start(&r);
    let cli = r.json(&["list"]);
    // The command line lists in the board's order, the pages in id order.
    let mut rows = cli["tasks"].as_array().expect("tasks").clone();
    rows.sort_by_key(|r| (r["id"].to_string(), r["path"].to_string()));
    let copies = all_pages(&s, "/v1/tasks");
    assert_eq!(copies.len(), rows.len(), "{copies:?}\n{cli}");
    for (copy, row) in copies.iter().zip(&rows) {
        for field in ["id", "state", "agent", "path"] {
            assert_eq!(copy[field], row[field], "{field}: {copy}\n{row}");
        }
    }
    let log = r.json(&["log", "b"]);
    let entries = all_pages(&s, "/v1/tasks/b/log");
    assert_eq!(
        Value::from(entries),
        log["entries"],
        "REST log against the command line"
    );
}

#[test]
fn a_claim_by_id_answers_the_receipt_the_command_line_grants() {
    let r = TestRepo::with_agents(&["p --pull --max-active 2"]);
    r.ok(&["new", "Work", "--id", "a", "--agent", "p"]);
    r.ok(&["new", "Work", "--id", "b", "--agent", "p"]);
    r.ok(&["tick"]);
    let cli = r.json(&["claim", "--agent", "p"]);
    let s = Server::start(&r);
    let other = if cli["id"] == "a" { "b" } else { "a" };
    let rest = s.post(&format!("/v1/tasks/{other}/claim"), r#"{"agent": "p"}"#);
    assert_eq!(rest.status, 200, "{}", rest.body);
    let rest = rest.json();
    let mut granted = fields(&cli);
    granted.retain(|f| f != "claimed");
    assert_eq!(fields(&rest), granted, "{rest}\n{cli}");
    assert_eq!(rest["id"], other, "{rest}");
}

#[test]
fn work_answers_alike_from_the_claim_and_the_work_route() {
    let r = TestRepo::with_agents(&["p --pull --max-active 2"]);
    r.ok(&["new", "Work", "--id", "a", "--agent", "p"]);
    r.ok(&["tick"]);
    let s = Server::start(&r);
    let claimed = s.post("/v1/agents/p/claim", r#"{"work": true}"#).json();
    assert_eq!(claimed["claimed"], true, "{claimed}");
    let waiting = s.get("/v1/agents/p/work").json();
    // The lease left is counted when asked: a second may have passed.
    let steady = |w: &Value| {
        let mut w = w.clone();
        w.as_object_mut().expect("object").remove("lease_left_secs");
        w
    };
    let items = waiting["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{waiting}");
    assert_eq!(steady(&items[0]), steady(&claimed["work"]), "{waiting}");
    let keys = [
        "attempt",
        "branch",
        "epoch",
        "id",
        "json",
        "lease_left_secs",
        "path",
        "timeout_secs",
    ];
    let mut got = fields(&claimed["work"]);
    got.sort();
    assert_eq!(got, keys, "{claimed}");
    let none = s.post("/v1/agents/p/claim", r#"{"work": true}"#).json();
    assert_eq!(none, json!({"claimed": false, "work": null}), "{none}");
}
