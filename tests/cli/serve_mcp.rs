//! `coord serve` at `/mcp`: the MCP server over MCP's streamable HTTP transport, driven by the
//! official SDK's client (rmcp with its reqwest-based streamable HTTP client), as an LLM agent
//! on another machine connects: the agent loop landing in git, the notices on the session's
//! stream, and the server's guards (Host, Origin, the token, an agent's own token).

use crate::agents_mcp::{call, next_notice, ok, Listener};
use crate::harness::TestRepo;
use crate::http::Server;
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;

/// Connects `handler` to the MCP server of the `coord serve` at `addr`, with `token` as its
/// bearer token when given.
pub(crate) async fn connect<H: ClientHandler>(
    addr: &str,
    token: Option<&str>,
    handler: H,
) -> Result<RunningService<RoleClient, H>, ClientInitializeError> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    handler
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
}

/// Runs `f` on a runtime of its own.
pub(crate) fn on_runtime<F: std::future::Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Calls a tool that must refuse with a coord error; returns the error's code.
async fn refused_code(client: &rmcp::Peer<RoleClient>, tool: &'static str, args: Value) -> String {
    let (failed, answer) = call(client, tool, args).await;
    assert!(failed, "{tool} is refused: {answer}");
    answer["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("a coord error: {answer}"))
        .to_string()
}

#[test]
fn serve_mcp_initializes_lists_tools_and_claims_and_completes_into_git() {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.ok(&["new", "Write the spec", "--id", "spec"]);
    r.ok(&["tick"]);
    let s = Server::start(&r);
    on_runtime(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let client = connect(&s.addr, None, Listener(tx))
            .await
            .expect("initialize");
        let info = client.peer_info().expect("server info");
        assert_eq!(
            info.server_info.as_ref().map(|i| i.name.as_str()),
            Some("coord")
        );
        let tools = client.list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), 15, "{tools:?}");
        assert!(["claim", "complete", "status"]
            .iter()
            .all(|n| tools.iter().any(|t| t.name == *n)));

        let claimed = ok(&client, "claim", json!({"agent": "p"})).await;
        assert_eq!(
            (&claimed["claimed"], &claimed["id"], &claimed["attempt"]),
            (&json!(true), &json!("spec"), &json!(1)),
            "{claimed}"
        );
        // The claim names the agent: its notices come over the session's stream.
        let told = next_notice(&mut rx, 5).await;
        assert_eq!(
            (&told["event"], &told["id"]),
            (&json!("assigned"), &json!("spec"))
        );
        let done = ok(
            &client,
            "complete",
            json!({"id": "spec", "agent": "p", "attempt": 1, "output": {"pages": 3}}),
        )
        .await;
        assert_eq!(done["recorded"], true, "{done}");
        client.cancel().await.expect("close");
    });
    let shown = r.json(&["show", "spec"]);
    assert_eq!(shown["task"]["result"]["output"]["pages"], 3, "{shown}");
    let log = r.git(&["log", "--format=%s"]);
    assert!(
        log.lines().filter(|l| l.contains("spec")).count() >= 3,
        "the claim and the result are commits: {log}"
    );
    assert_eq!(r.git_status(), "", "every change committed");
}

/// An MCP initialize request, as a client's first POST sends it.
const INITIALIZE: &str = r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}"#;

#[test]
fn serve_mcp_refuses_another_host_and_another_sites_page() {
    let r = TestRepo::with_agents(&["p --pull"]);
    let s = Server::start(&r);
    let mcp = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let host = s.req(
        "POST",
        "/mcp",
        &[&mcp[..], &[("Host", "evil.example")]].concat(),
        INITIALIZE,
    );
    assert_eq!(host.status, 403, "{}", host.body);
    assert!(host.body.contains("is not this server"), "{}", host.body);
    let origin = s.req(
        "POST",
        "/mcp",
        &[&mcp[..], &[("Origin", "http://evil.example")]].concat(),
        INITIALIZE,
    );
    assert_eq!(origin.status, 403, "{}", origin.body);
    assert!(origin.body.contains("same-origin"), "{}", origin.body);
    let stream = s.req("GET", "/mcp", &[("Origin", "http://evil.example")], "");
    assert_eq!(stream.status, 403, "{}", stream.body);
}

/// The server's token, and agents a's and b's own.
const ADMIN: &str = "admin-token-0123456789";
const TOKEN_A: &str = "token-of-agent-a-0123";
const TOKEN_B: &str = "token-of-agent-b-0123";

/// Serves `r` with the server's token and agent tokens for a and b.
fn serve_with_tokens(r: &TestRepo) -> Server {
    let file = r.home().join("agent-tokens.yaml");
    std::fs::write(&file, format!("a: {TOKEN_A}\nb: {TOKEN_B}\n")).expect("write tokens");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let file = file.to_str().expect("utf8").to_string();
    Server::start_with(
        r,
        &["--listen", "127.0.0.1:0", "--agent-tokens", &file],
        &[("COORD_SERVE_TOKEN", ADMIN)],
    )
}

#[test]
fn serve_mcp_needs_the_token_and_an_agents_token_acts_as_that_agent_only() {
    let r = TestRepo::with_agents(&["a --pull", "b --pull"]);
    r.ok(&["new", "One", "--id", "one"]);
    r.ok(&["new", "Two", "--id", "two"]);
    r.ok(&["tick"]);
    let s = serve_with_tokens(&r);
    on_runtime(async {
        assert!(
            connect(&s.addr, None, ()).await.is_err(),
            "no token, no session"
        );
        assert!(connect(&s.addr, Some("not-the-token-0123456"), ())
            .await
            .is_err());

        let a = connect(&s.addr, Some(TOKEN_A), ())
            .await
            .expect("a's token");
        let before = r.commit_count();
        assert_eq!(
            refused_code(&a, "claim", json!({"agent": "b"})).await,
            "forbidden"
        );
        assert_eq!(r.commit_count(), before, "nothing written");
        let claimed = ok(&a, "claim", json!({"agent": "a"})).await;
        assert_eq!(claimed["claimed"], true, "{claimed}");
        let id = claimed["id"].as_str().expect("id").to_string();
        let before = r.commit_count();
        let as_b = json!({"id": id, "agent": "b", "attempt": 1, "output": {}});
        assert_eq!(refused_code(&a, "complete", as_b).await, "forbidden");
        let person = json!({"id": id, "reason": "mine"});
        assert_eq!(refused_code(&a, "cancel", person).await, "forbidden");
        assert_eq!(r.commit_count(), before, "nothing written");
        a.cancel().await.expect("close");

        let admin = connect(&s.addr, Some(ADMIN), ()).await.expect("the token");
        let claimed = ok(&admin, "claim", json!({"agent": "b"})).await;
        assert_eq!(claimed["claimed"], true, "{claimed}");
        admin.cancel().await.expect("close");
    });
    assert_eq!(r.where_is("one").split('/').nth(1), Some("assigned"));
    assert_eq!(r.where_is("two").split('/').nth(1), Some("assigned"));
}
