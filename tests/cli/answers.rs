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
