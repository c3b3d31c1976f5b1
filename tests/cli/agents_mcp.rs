//! `coord mcp`: the real binary as an MCP server over stdio, driven by the official SDK's
//! client (rmcp with `transport-child-process`), as an LLM agent's host would drive it.

use crate::harness::{TestRepo, EVERY_NEW_FLAG};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

pub(crate) type Client = RunningService<RoleClient, ()>;

/// Runs `f` against `coord mcp` started in `r` (with its fixed clock).
pub(crate) fn with_server<F: std::future::Future<Output = ()>>(
    r: &TestRepo,
    f: impl FnOnce(Client) -> F,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::from(r.spawn_cmd(&["mcp"]));
        cmd.stderr(std::process::Stdio::null());
        let transport = TokioChildProcess::new(cmd).expect("spawn coord mcp");
        let client = ().serve(transport).await.expect("initialize");
        f(client).await;
    });
}

/// Calls a tool; returns whether it answered a tool error, and its structured answer.
pub(crate) async fn call(
    client: &rmcp::Peer<RoleClient>,
    tool: &'static str,
    args: Value,
) -> (bool, Value) {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .expect("tools/call answered");
    let value = result
        .structured_content
        .clone()
        .expect("structured answer");
    (result.is_error == Some(true), value)
}

/// Calls a tool that must succeed and returns its answer.
pub(crate) async fn ok(client: &rmcp::Peer<RoleClient>, tool: &'static str, args: Value) -> Value {
    let (failed, v) = call(client, tool, args).await;
    assert!(!failed, "{tool} failed: {v}");
    v
}

/// Calls a tool that must refuse; returns its answer as text (a coord error's object, or the
/// SDK's error for arguments that do not deserialize).
async fn refused(client: &Client, tool: &'static str, args: Value) -> String {
    let Value::Object(object) = args.clone() else {
        panic!("arguments are an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(object))
        .await
        .expect("tools/call answered");
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} {args} is refused: {result:?}"
    );
    format!("{result:?}")
}

async fn read(client: &Client, uri: &str) -> Value {
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .expect("resources/read");
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => {
            serde_json::from_str(text).expect("json")
        }
        other => panic!("{other:?}"),
    }
}

fn pull_repo() -> TestRepo {
    TestRepo::with_agents(&["p --pull"])
}

#[test]
fn mcp_initializes_lists_tools_and_runs_new_claim_heartbeat_complete() {
    let repo = pull_repo();
    let r = &repo;
    with_server(r, |client| async move {
        let info = client.peer_info().expect("server info");
        assert_eq!(
            info.server_info.as_ref().map(|i| i.name.as_str()),
            Some("coord")
        );
        assert!(info.capabilities.tools.is_some() && info.capabilities.resources.is_some());
        let tools = client.list_all_tools().await.expect("tools/list");
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "approve",
                "cancel",
                "claim",
                "complete",
                "fail",
                "heartbeat",
                "lease_status",
                "list",
                "log",
                "new",
                "reassign",
                "reject",
                "retry",
                "show",
                "status"
            ]
        );
        let complete = tools
            .iter()
            .find(|t| t.name == "complete")
            .expect("complete");
        let schema = json!(complete.input_schema);
        assert_eq!(
            schema["required"],
            json!(["id", "agent", "attempt"]),
            "{schema}"
        );
        assert_eq!(schema["additionalProperties"], false, "{schema}");

        let made = ok(
            &client,
            "new",
            json!({"title": "Write the spec", "input": {"topic": "api"}, "id": "spec"}),
        )
        .await;
        assert_eq!(
            made,
            json!({"id": "spec", "path": "work/inbox/spec.yaml", "created": true})
        );
        r.ok(&["tick"]);
        let listed = ok(&client, "list", json!({"state": "ready"})).await;
        assert_eq!(listed["tasks"][0]["id"], "spec", "{listed}");

        let claimed = ok(&client, "claim", json!({"agent": "p"})).await;
        assert_eq!(claimed["claimed"], true, "{claimed}");
        assert_eq!(claimed["id"], "spec");
        assert_eq!(claimed["attempt"], 1);
        let beat = ok(
            &client,
            "heartbeat",
            json!({"id": "spec", "agent": "p", "attempt": 1}),
        )
        .await;
        assert!(beat["lease_expires_at"].is_string(), "{beat}");
        let done = ok(
            &client,
            "complete",
            json!({"id": "spec", "agent": "p", "attempt": 1, "output": {"pages": 3}}),
        )
        .await;
        assert_eq!(done["recorded"], true, "{done}");

        let none = ok(&client, "claim", json!({"agent": "p"})).await;
        assert_eq!(
            none["claimed"], false,
            "nothing to claim is an answer: {none}"
        );
        assert_eq!(none["agent"], "p", "{none}");

        let task = read(&client, "coord://task/spec").await;
        assert_eq!(task["task"]["result"]["output"]["pages"], 3, "{task}");
        assert_eq!(task["task"]["result"]["attempt"], 1, "{task}");
        let shown = ok(&client, "show", json!({"id": "spec"})).await;
        assert_eq!(shown, task, "the tool and the resource show the same task");
        let board = read(&client, "coord://board").await;
        assert_eq!(board, ok(&client, "status", json!({})).await);
        let log = ok(&client, "log", json!({"id": "spec"})).await;
        assert!(
            log["entries"].as_array().is_some_and(|e| e.len() >= 3),
            "{log}"
        );
        client.cancel().await.expect("close");
    });
    let shown = r.json(&["show", "spec"]);
    assert_eq!(shown["task"]["result"]["output"]["pages"], 3, "{shown}");
    assert_eq!(r.git_status(), "", "every change committed");
}

#[test]
fn mcp_refuses_a_stale_attempt_and_a_lost_claim_with_the_clis_error() {
    let repo = pull_repo();
    let r = &repo;
    r.task("z", "title: Z\n");
    r.ok(&["tick"]);
    with_server(r, |client| async move {
        let claimed = ok(&client, "claim", json!({"agent": "p"})).await;
        assert_eq!(claimed["attempt"], 1);
        let (failed, stale) = call(
            &client,
            "complete",
            json!({"id": "z", "agent": "p", "attempt": 2, "output": {"by": "zombie"}}),
        )
        .await;
        assert!(failed, "{stale}");
        assert_eq!(stale["error"]["code"], "stale", "{stale}");
        assert_eq!(stale["error"]["exit_code"], 1, "{stale}");
        let message = stale["error"]["message"]
            .as_str()
            .expect("message")
            .to_string();
        assert!(
            message.contains("is attempt 1 of p, not attempt 2 of p"),
            "{message}"
        );
        let (_, cli) = r.code(&["complete", "z", "--agent", "p", "--attempt", "2"], 1);
        assert_eq!(
            cli.lines().next(),
            Some(format!("error: {message}").as_str())
        );

        let (failed, lost) = call(
            &client,
            "heartbeat",
            json!({"id": "z", "agent": "q", "attempt": 1}),
        )
        .await;
        assert!(failed, "{lost}");
        assert_eq!(lost["error"]["code"], "stale", "{lost}");
        let (failed, missing) = call(&client, "show", json!({"id": "nosuch"})).await;
        assert!(
            failed
                && missing["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("no task 'nosuch'")),
            "{missing}"
        );
        let bad = client
            .call_tool(
                CallToolRequestParams::new("claim").with_arguments(
                    json!({"agent": "../x"})
                        .as_object()
                        .cloned()
                        .expect("object"),
                ),
            )
            .await;
        // The SDK answers arguments that do not deserialize as a tool error naming them.
        let bad = format!("{bad:?}");
        assert!(
            bad.contains("is_error: Some(true)") && bad.contains("../x"),
            "{bad}"
        );

        let done = ok(
            &client,
            "complete",
            json!({"id": "z", "agent": "p", "attempt": 1}),
        )
        .await;
        assert_eq!(done["recorded"], true);
        client.cancel().await.expect("close");
    });
    let shown = r.json(&["show", "z"]);
    assert_eq!(shown["task"]["result"]["attempt"], 1, "{shown}");
    let history = shown["task"]["coord"]["history"].to_string();
    assert!(
        history.contains("stale_result") && history.contains("zombie"),
        "{history}"
    );
}

#[test]
fn mcp_new_writes_every_field_coord_new_writes() {
    let r = TestRepo::with_agents(&["a", "b", "c"]);
    r.ok(&[&["new", "Ship it", "--id", "by-cli"], EVERY_NEW_FLAG].concat());
    with_server(&r, |client| async move {
        let tools = client.list_all_tools().await.expect("tools/list");
        let new = tools.iter().find(|t| t.name == "new").expect("new");
        let schema = json!(new.input_schema);
        for field in [
            "description",
            "authority",
            "due",
            "timeout",
            "max_attempts",
            "labels",
            "next_agent",
            "join_agent",
        ] {
            assert!(schema["properties"][field].is_object(), "{field}: {schema}");
        }
        let made = ok(
            &client,
            "new",
            json!({
                "title": "Ship it",
                "id": "by-mcp",
                "description": "Everything: docs, release notes.",
                "authority": "do_it_and_show_me",
                "due": "2026-12-01T17:00:00Z",
                "timeout": "2h",
                "max_attempts": 5,
                "labels": ["release"],
                "next_agent": ["a", "b"],
                "join_agent": "c",
            }),
        )
        .await;
        assert_eq!(made["path"], "work/inbox/by-mcp.yaml", "{made}");
        for (args, wrong) in [
            (json!({"title": "T", "max_attempts": 0}), "max_attempts"),
            (json!({"title": "T", "timeout": "soon"}), "soon"),
            (json!({"title": "T", "authority": "whenever"}), "whenever"),
            (json!({"title": "T", "join_agent": "c"}), "join agent"),
        ] {
            let answer = refused(&client, "new", args.clone()).await;
            assert!(answer.contains(wrong), "{args}: {answer}");
        }
        client.cancel().await.expect("close");
    });
    assert_eq!(
        r.read("work/inbox/by-mcp.yaml"),
        r.read("work/inbox/by-cli.yaml")
    );
    r.ok(&["validate"]);
    assert_eq!(r.git_status(), "", "every change committed");
}

/// `coord mcp` started in `r` with its pipes held by the test: lines go in raw, and each line
/// it prints comes back through a channel (so a missing reply fails instead of hanging).
struct RawServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl RawServer {
    fn start(r: &TestRepo) -> RawServer {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = r
            .spawn_cmd(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn coord mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        RawServer {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        use std::io::Write;
        writeln!(self.stdin, "{line}").expect("write a line");
        self.stdin.flush().expect("flush");
    }

    /// Returns the next line the server prints, as JSON.
    fn reply(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a reply within 20 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mcp_answers_a_line_that_is_not_json_with_a_parse_error_and_keeps_serving() {
    let r = pull_repo();
    let mut s = RawServer::start(&r);
    s.send("this is not json");
    let reply = s.reply();
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    assert_eq!(reply["id"], Value::Null, "{reply}");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    s.send("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
    assert_eq!(s.reply()["error"]["code"], -32700, "a cut-off line");
    s.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        .to_string(),
    );
    let init = s.reply();
    assert_eq!(init["id"], 2, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "coord", "{init}");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    s.send("}{");
    assert_eq!(s.reply()["error"]["code"], -32700, "after initialize too");
    s.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string());
    let pong = s.reply();
    assert_eq!(pong["id"], 3, "{pong}");
    assert!(pong["result"].is_object(), "{pong}");
}

/// A repo on tmpfs with `n` task files committed at once: one in ten ready, the others done.
fn seeded(n: usize) -> TestRepo {
    let r = TestRepo::empty_in_memory();
    r.ok(&["init"]);
    r.ok(&["agents", "add", "p", "--pull"]);
    for state in ["ready", "done"] {
        std::fs::create_dir_all(r.abs(&format!("work/{state}"))).expect("mkdir");
    }
    for i in 0..n {
        let state = if i % 10 == 0 { "ready" } else { "done" };
        let attempt = u8::from(state == "done");
        std::fs::write(
            r.abs(&format!("work/{state}/t-{i:05}.yaml")),
            format!(
                "title: Task {i} with a title of a usual length\npriority: normal\n\
                 coord:\n  state: {state}\n  attempt: {attempt}\n  created_at: 2026-11-22T09:00:00Z\n"
            ),
        )
        .expect("write task");
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "seed"]);
    r
}

/// Returns the size of a tool's answer as the client got it, in bytes.
fn size(v: &Value) -> usize {
    v.to_string().len()
}

#[test]
fn mcp_answers_stay_small_at_10000_tasks_and_list_pages_visit_every_task_once() {
    const N: usize = 10_000;
    const BOUND: usize = 64 * 1024;
    let r = seeded(N);
    let r = &r;
    with_server(r, |client| async move {
        let started = std::time::Instant::now();
        let status = ok(&client, "status", json!({})).await;
        eprintln!("status: {} bytes in {:?}", size(&status), started.elapsed());
        assert!(
            size(&status) < BOUND / 4,
            "status is {} bytes",
            size(&status)
        );
        assert_eq!(status["counts"]["done"], 9_000, "{status}");
        assert_eq!(status["counts"]["ready"], 1_000, "{status}");
        let full = ok(&client, "status", json!({"full": true})).await;
        assert!(full["waiting"].is_array(), "the whole board on request");
        assert_eq!(full["counts"], status["counts"]);

        let started = std::time::Instant::now();
        let first = ok(&client, "list", json!({})).await;
        eprintln!("list: {} bytes in {:?}", size(&first), started.elapsed());
        assert!(size(&first) < BOUND / 2, "list is {} bytes", size(&first));
        assert_eq!(
            first["tasks"].as_array().map(Vec::len),
            Some(100),
            "default limit"
        );
        assert!(first["next_cursor"].is_string(), "{}", first["next_cursor"]);

        let mut seen = std::collections::BTreeMap::<String, usize>::new();
        let mut cursor = Value::Null;
        let mut pages = 0;
        loop {
            let mut args = json!({"limit": 1000});
            if !cursor.is_null() {
                args["cursor"] = cursor.clone();
            }
            let page = ok(&client, "list", args).await;
            for t in page["tasks"].as_array().expect("tasks") {
                *seen
                    .entry(t["id"].as_str().expect("id").to_string())
                    .or_default() += 1;
            }
            pages += 1;
            cursor = page["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
            assert!(pages < 20, "the cursor moves on");
        }
        assert_eq!(pages, 10);
        assert_eq!(seen.len(), N, "every task");
        assert!(seen.values().all(|&n| n == 1), "each once");

        let ready = ok(&client, "list", json!({"state": "ready", "limit": 5})).await;
        let ids: Vec<&str> = ready["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .map(|t| t["id"].as_str().expect("id"))
            .collect();
        assert_eq!(ids, ["t-00000", "t-00010", "t-00020", "t-00030", "t-00040"]);
        let next = ok(
            &client,
            "list",
            json!({"state": "ready", "limit": 1, "cursor": ready["next_cursor"]}),
        )
        .await;
        assert_eq!(next["tasks"][0]["id"], "t-00050", "{next}");
        let bad = refused(&client, "list", json!({"cursor": "zz"})).await;
        assert!(bad.contains("cursor"), "{bad}");
        client.cancel().await.expect("close");
    });
}

/// Returns a `tools/call` request of `tool` with `args`.
fn tool_request(tool: &'static str, args: Value) -> rmcp::model::ClientRequest {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(tool).with_arguments(args),
    ))
}

#[test]
fn mcp_answers_ping_and_show_while_a_claim_waits_for_the_lock() {
    let repo = pull_repo();
    let r = &repo;
    r.task("z", "title: Z\n");
    r.ok(&["tick"]);
    with_server(r, |client| async move {
        let lock = r.hold_coord_lock();
        let claim = client
            .send_cancellable_request(
                tool_request("claim", json!({"agent": "p"})),
                rmcp::service::PeerRequestOptions::no_options(),
            )
            .await
            .expect("claim sent");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let started = std::time::Instant::now();
        let ping = rmcp::model::ClientRequest::PingRequest(Default::default());
        client.send_request(ping).await.expect("ping answered");
        let pinged = started.elapsed();
        let shown = ok(&client, "show", json!({"id": "z"})).await;
        let both = started.elapsed();
        eprintln!("with a claim in flight: ping {pinged:?}, ping and show {both:?}");
        assert_eq!(shown["state"], "ready", "the claim still waits: {shown}");
        assert!(
            both < std::time::Duration::from_secs(2),
            "ping and show answered at once, not after the claim: {both:?}"
        );
        drop(lock);
        let answer = claim.await_response().await.expect("claim answered");
        let rmcp::model::ServerResult::CallToolResult(answer) = answer else {
            panic!("{answer:?}")
        };
        let answer = answer.structured_content.expect("structured");
        assert_eq!(answer["claimed"], true, "{answer}");
        client.cancel().await.expect("close");
    });
    assert_eq!(r.where_is("z"), "work/assigned/p/z.yaml");
}

#[test]
fn mcp_a_cancelled_claim_leaves_no_claim_behind() {
    let repo = pull_repo();
    let r = &repo;
    r.task("z", "title: Z\n");
    r.ok(&["tick"]);
    with_server(r, |client| async move {
        let lock = r.hold_coord_lock();
        let gave_up = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            client.call_tool(
                CallToolRequestParams::new("claim")
                    .with_arguments(json!({"agent": "p"}).as_object().cloned().expect("obj")),
            ),
        )
        .await;
        assert!(
            gave_up.is_err(),
            "the claim waits for the lock: {gave_up:?}"
        );
        // Dropping the call sent notifications/cancelled; now the lock is let go, and the
        // cancelled claim (which tries the lock every 50 ms) goes first.
        drop(lock);
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        let claimed = ok(&client, "claim", json!({"agent": "p"})).await;
        assert_eq!(
            claimed["claimed"], true,
            "the task is still there: {claimed}"
        );
        assert_eq!(claimed["attempt"], 1, "{claimed}");
        client.cancel().await.expect("close");
    });
    let shown = r.json(&["show", "z"]);
    assert_eq!(shown["task"]["coord"]["attempt"], 1, "{shown}");
    let claims = r.git(&["log", "--format=%s", "--grep=^Coord-Op: claim"]);
    assert_eq!(claims.lines().count(), 1, "one claim: {claims}");
}

#[test]
fn mcp_a_pending_result_is_replaced_through_the_replace_argument_its_error_names() {
    let repo = pull_repo();
    let r = &repo;
    r.task("z", "title: Z\n");
    r.ok(&["tick"]);
    with_server(r, |client| async move {
        ok(&client, "claim", json!({"agent": "p"})).await;
        let first = json!({"id": "z", "agent": "p", "attempt": 1, "output": {"v": 1}});
        ok(&client, "complete", first.clone()).await;
        let (failed, pending) = call(&client, "complete", first).await;
        assert!(failed, "{pending}");
        assert_eq!(pending["error"]["code"], "result_pending", "{pending}");
        let text = pending.to_string();
        assert!(
            !text.contains("--"),
            "no CLI flag a tool cannot pass: {text}"
        );
        assert!(text.contains("replace: true"), "{text}");
        let again =
            json!({"id": "z", "agent": "p", "attempt": 1, "output": {"v": 2}, "replace": true});
        ok(&client, "complete", again).await;
        client.cancel().await.expect("close");
    });
    let shown = r.json(&["show", "z"]);
    assert_eq!(shown["task"]["result"]["output"]["v"], 2, "{shown}");
}

#[test]
fn mcp_tools_say_whether_they_only_read_or_destroy() {
    let r = pull_repo();
    with_server(&r, |client| async move {
        let tools = client.list_all_tools().await.expect("tools/list");
        let hint = |name: &str, key: &str| {
            let tool = tools.iter().find(|t| t.name == name).expect(name);
            json!(tool.annotations)[key].clone()
        };
        for name in ["status", "list", "show", "log", "lease_status"] {
            assert_eq!(hint(name, "readOnlyHint"), true, "{name}");
        }
        for name in [
            "new",
            "claim",
            "heartbeat",
            "complete",
            "fail",
            "approve",
            "retry",
        ] {
            assert_eq!(hint(name, "readOnlyHint"), false, "{name}");
            assert_eq!(hint(name, "destructiveHint"), false, "{name}");
        }
        for name in ["cancel", "reject", "reassign"] {
            assert_eq!(hint(name, "destructiveHint"), true, "{name}");
        }
        client.cancel().await.expect("close");
    });
}

#[test]
fn mcp_person_tools_approve_reject_cancel_and_retry_as_the_cli_does() {
    let repo = TestRepo::with_agents(&["a"]);
    let r = &repo;
    for id in ["x", "y"] {
        r.task(id, "title: Gate\nagent: a\nauthority: ask_me_first\n");
    }
    r.task("c", "title: C\nagent: a\n");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("x"), "work/review/x.yaml");
    with_server(r, |client| async move {
        let approved = ok(&client, "approve", json!({"id": "x"})).await;
        assert_eq!(approved["op"], "approve", "{approved}");
        assert_eq!(approved["id"], "x");
        assert!(
            approved["commits"].as_u64().is_some_and(|n| n >= 1),
            "{approved}"
        );
        let rejected = ok(&client, "reject", json!({"id": "y", "reason": "not now"})).await;
        assert_eq!(rejected["op"], "reject", "{rejected}");
        let cancelled = ok(&client, "cancel", json!({"id": "c", "reason": "dup"})).await;
        assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
        let retried = ok(&client, "retry", json!({"id": "c"})).await;
        assert_eq!(retried["state"], "inbox", "{retried}");
        let (failed, wrong) = call(&client, "approve", json!({"id": "c"})).await;
        assert!(failed, "{wrong}");
        assert_eq!(wrong["error"]["code"], "wrong_state", "{wrong}");
        client.cancel().await.expect("close");
    });
    let (_, cli) = r.code(&["--json", "approve", "c"], 1);
    assert!(cli.contains("wrong_state"), "{cli}");
    assert_eq!(r.where_is("c"), "work/inbox/c.yaml");
    assert_ne!(r.where_is("x"), "work/review/x.yaml");
    assert_eq!(r.git_status(), "", "every change committed");
}

#[test]
fn mcp_reassign_takes_a_held_task_from_its_agent_as_the_cli_does() {
    let repo = TestRepo::with_agents(&["a", "b"]);
    let r = &repo;
    r.task("h", "title: Held\nagent: a\n");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("h"), "work/assigned/a/h.yaml");
    with_server(r, |client| async move {
        let moved = ok(&client, "reassign", json!({"id": "h", "agent": "b"})).await;
        assert_eq!(moved["op"], "reassign", "{moved}");
        assert_eq!(moved["commits"], 1, "{moved}");
        assert_eq!(moved["state"], "assigned", "{moved}");
        let again = ok(&client, "reassign", json!({"id": "h", "agent": "b"})).await;
        assert_eq!(again["commits"], 0, "{again}");
        client.cancel().await.expect("close");
    });
    assert_eq!(r.where_is("h"), "work/assigned/b/h.yaml");
    let (_, err) = r.code(&["complete", "h", "--agent", "a", "--attempt", "1"], 1);
    assert!(err.contains("not accepted"), "{err}");
    assert_eq!(r.git_status(), "", "every change committed");
}

#[test]
fn the_same_idempotency_key_with_other_fields_is_a_conflict_in_mcp_and_the_cli() {
    let repo = pull_repo();
    let r = &repo;
    let first = r.json(&["new", "Write", "--idempotency-key", "k1", "--json"]);
    let (_, cli) = r.code(&["--json", "new", "Rewrite", "--idempotency-key", "k1"], 1);
    assert!(cli.contains("\"conflict\""), "{cli}");
    assert!(
        cli.contains("k1") && cli.contains(first["id"].as_str().expect("id")),
        "{cli}"
    );
    let again = r.json(&["new", "Write", "--idempotency-key", "k1", "--json"]);
    assert_eq!(
        (again["id"].clone(), again["created"].clone()),
        (first["id"].clone(), json!(false))
    );
    with_server(r, |client| async move {
        let made = ok(
            &client,
            "new",
            json!({"title": "Plan", "idempotency_key": "k2"}),
        )
        .await;
        let replay = ok(
            &client,
            "new",
            json!({"title": "Plan", "idempotency_key": "k2"}),
        )
        .await;
        assert_eq!(replay["id"], made["id"], "{replay}");
        assert_eq!(replay["created"], false, "{replay}");
        let (failed, other) = call(
            &client,
            "new",
            json!({"title": "Other plan", "idempotency_key": "k2"}),
        )
        .await;
        assert!(failed, "{other}");
        assert_eq!(other["error"]["code"], "conflict", "{other}");
        let (failed, cli_key) = call(
            &client,
            "new",
            json!({"title": "Other", "idempotency_key": "k1"}),
        )
        .await;
        assert!(
            failed && cli_key["error"]["code"] == "conflict",
            "{cli_key}"
        );
        client.cancel().await.expect("close");
    });
    let inbox = r.git(&["ls-files", "work/inbox/*.yaml"]);
    assert_eq!(inbox.lines().count(), 2, "one task per key: {inbox}");
}

#[test]
fn nothing_to_claim_answers_the_same_fields_in_mcp_and_the_cli() {
    let repo = pull_repo();
    let r = &repo;
    let (cli, _) = r.code(&["--json", "claim", "--agent", "p"], 4);
    let mut cli: Value = serde_json::from_str(&cli).expect("json");
    cli.as_object_mut().expect("object").remove("version");
    with_server(r, |client| async move {
        let none = ok(&client, "claim", json!({"agent": "p"})).await;
        assert_eq!(none, cli, "MCP {none}, CLI {cli}");
        assert!(none.get("why").is_some(), "{none}");
        client.cancel().await.expect("close");
    });
}

/// A client that passes on each log message's data the server sends.
#[derive(Clone)]
pub(crate) struct Listener(pub(crate) tokio::sync::mpsc::UnboundedSender<Value>);

impl rmcp::ClientHandler for Listener {
    #[allow(deprecated)] // The SDK marks MCP log messages as deprecated; clients still show them.
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.data);
    }
}

/// Waits up to `secs` for the next message the server sends.
pub(crate) async fn next_notice(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    secs: u64,
) -> Value {
    tokio::time::timeout(std::time::Duration::from_secs(secs), rx.recv())
        .await
        .expect("a notification in time")
        .expect("the server is still there")
}

#[test]
fn mcp_tells_its_agent_of_an_assignment_a_lost_lease_and_a_cancel() {
    let r = pull_repo();
    r.ok(&["new", "First", "--id", "one"]);
    r.ok(&["new", "Second", "--id", "two"]);
    r.ok(&["tick"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::from(r.spawn_cmd(&["mcp", "--agent", "p"]));
        cmd.stderr(std::process::Stdio::null());
        let transport = TokioChildProcess::new(cmd).expect("spawn coord mcp");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let client = Listener(tx).serve(transport).await.expect("initialize");
        let claimed = ok(&client, "claim", json!({"agent": "p"})).await;
        let id = claimed["id"].as_str().expect("id").to_string();
        let told = next_notice(&mut rx, 5).await;
        assert_eq!(told["event"], "assigned", "{told}");
        assert_eq!(
            (told["id"].as_str(), told["attempt"].as_u64()),
            (Some(id.as_str()), Some(1))
        );
        let status = ok(
            &client,
            "lease_status",
            json!({"id": id, "agent": "p", "attempt": 1}),
        )
        .await;
        assert_eq!(status["held"], true, "{status}");
        assert!(status["lease_expires_at"].is_string(), "{status}");

        // A tick whose clock is past the lease takes the task back.
        r.ok(&["--now", "2099-01-01T00:00:00Z", "tick"]);
        let expired = std::time::Instant::now();
        let told = next_notice(&mut rx, 5).await;
        assert!(
            expired.elapsed() < std::time::Duration::from_secs(3),
            "within a tick"
        );
        assert_eq!(told["event"], "lease_lost", "{told}");
        assert_eq!(told["id"].as_str(), Some(id.as_str()), "{told}");
        let status = ok(
            &client,
            "lease_status",
            json!({"id": id, "agent": "p", "attempt": 1}),
        )
        .await;
        assert_eq!(
            (status["held"].clone(), status["lost"].clone()),
            (json!(false), json!("lease_lost")),
            "{status}"
        );

        let other = ok(&client, "claim", json!({"agent": "p"})).await;
        let other = other["id"].as_str().expect("id").to_string();
        assert_eq!(next_notice(&mut rx, 5).await["event"], "assigned");
        r.ok(&["cancel", &other, "--reason", "not needed"]);
        let told = next_notice(&mut rx, 5).await;
        assert_eq!(told["event"], "cancelled", "{told}");
        assert_eq!(told["id"].as_str(), Some(other.as_str()), "{told}");
        client.cancel().await.expect("close");
    });
}
