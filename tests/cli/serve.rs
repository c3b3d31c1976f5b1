//! `coord serve` end to end: the real binary on an ephemeral port, asked over plain HTTP.

use crate::harness::TestRepo;
use crate::http::{request, Server};
use serde_json::{json, Value};
use std::time::Duration;

fn ready_task(r: &TestRepo, id: &str) {
    r.ok(&["new", "Write the docs", "--id", id]);
    r.ok(&["tick"]);
}

#[test]
fn serve_reads_tasks_with_etags_board_agents_health_and_openapi() {
    let r = TestRepo::with_agents(&["writer", "puller --pull"]);
    r.ok(&[
        "new",
        "Write the docs",
        "--id",
        "docs",
        "--priority",
        "high",
    ]);
    let s = Server::start(&r);

    let one = s.get("/v1/tasks/docs");
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.json()["task"]["title"], "Write the docs");
    let mut shown = json_of(&r.ok(&["--json", "show", "docs"]));
    shown.as_object_mut().expect("object").remove("version");
    assert_eq!(one.json(), shown);
    let etag = one.header("etag").expect("etag").to_string();
    assert!(etag.starts_with('"'), "strong ETag: {etag}");
    let again = s.req("GET", "/v1/tasks/docs", &[("If-None-Match", &etag)], "");
    assert_eq!(again.status, 304);
    assert_eq!(again.body, "");
    let other = s.req("GET", "/v1/tasks/docs", &[("If-None-Match", "\"x\"")], "");
    assert_eq!(other.status, 200);

    let log = s.get("/v1/tasks/docs/log");
    assert_eq!(log.status, 200, "{}", log.body);
    assert!(log.header("etag").expect("etag").starts_with("W/"));
    assert_eq!(log.json()["items"][0]["to"], "inbox");
    let tag = log.header("etag").expect("etag").to_string();
    assert_eq!(
        s.req("GET", "/v1/tasks/docs/log", &[("If-None-Match", &tag)], "")
            .status,
        304
    );

    let board = s.get("/v1/board");
    assert_eq!(board.json()["counts"]["inbox"], 1);
    let agents = s.get("/v1/agents").json();
    assert_eq!(agents, json_of(&r.ok(&["--json", "agents"]))["agents"]);
    assert_eq!(s.get("/healthz").json()["status"], "ok");

    let api = s.get("/v1/openapi.json").json();
    for p in [
        "/v1/tasks",
        "/v1/tasks/{id}",
        "/v1/tasks/{id}/log",
        "/v1/tasks/{id}/claim",
        "/v1/tasks/{id}/complete",
        "/v1/tasks/{id}/fail",
        "/v1/tasks/{id}/heartbeat",
        "/v1/tasks/{id}/approve",
        "/v1/tasks/{id}/reject",
        "/v1/tasks/{id}/cancel",
        "/v1/tasks/{id}/retry",
        "/v1/tasks/{id}/reassign",
        "/v1/board",
        "/v1/agents",
        "/v1/events",
        "/metrics",
        "/healthz",
    ] {
        assert!(api["paths"].get(p).is_some(), "openapi.json lacks {p}");
    }
    let metrics = s.get("/metrics");
    assert!(
        metrics.body.contains("coord_tasks{state=\"inbox\"} 1"),
        "{}",
        metrics.body
    );
    assert!(metrics
        .body
        .contains("# TYPE coord_transitions_total counter"));
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).expect("json")
}

#[test]
fn serve_creates_tasks_once_per_idempotency_key() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let body = r#"{"title": "Ship it", "priority": "high", "input": {"n": 1}}"#;
    let key = [("Idempotency-Key", "ticket-1")];
    let first = s.req("POST", "/v1/tasks", &key, body);
    assert_eq!(first.status, 201, "{}", first.body);
    let id = first.json()["id"].as_str().expect("id").to_string();
    assert_eq!(
        first.header("location"),
        Some(format!("/v1/tasks/{id}").as_str())
    );
    let second = s.req("POST", "/v1/tasks", &key, body);
    assert_eq!((second.status, second.json()), (201, first.json()));
    assert_eq!(second.header("idempotent-replayed"), Some("true"));
    assert_eq!(r.find(&id).len(), 1);
    let changed = s.req(
        "POST",
        "/v1/tasks",
        &key,
        r#"{"title": "Ship something else"}"#,
    );
    assert_eq!(changed.status, 409, "{}", changed.body);
    assert_eq!(
        changed.header("content-type"),
        Some("application/problem+json")
    );
    let all = s.get("/v1/tasks").json();
    assert_eq!(all["items"].as_array().map(Vec::len), Some(1));
    let plain = s.post("/v1/tasks", r#"{"title": "Another"}"#);
    assert_eq!(plain.status, 201);
    assert_eq!(
        s.get(&format!(
            "/v1/tasks/{}",
            plain.json()["id"].as_str().expect("id")
        ))
        .status,
        200
    );
}

#[test]
fn serve_answers_bad_input_with_400_problems() {
    let r = TestRepo::with_agents(&["writer"]);
    ready_task(&r, "docs");
    let s = Server::start(&r);
    let bad = [
        ("GET", "/v1/tasks?state=bogus", ""),
        ("GET", "/v1/tasks?limit=0", ""),
        ("GET", "/v1/tasks?limit=abc", ""),
        ("GET", "/v1/tasks?cursor=zz", ""),
        ("GET", "/v1/tasks?priority=urgent", ""),
        ("GET", "/v1/tasks?colour=red", ""),
        ("GET", "/v1/tasks/..%2Fetc", ""),
        ("POST", "/v1/tasks", "{not json"),
        ("POST", "/v1/tasks", r#"{"title": ""}"#),
        ("POST", "/v1/tasks", r#"{"title": "x", "color": "red"}"#),
        (
            "POST",
            "/v1/tasks",
            r#"{"title": "x", "depends_on": ["nowhere"]}"#,
        ),
        ("POST", "/v1/tasks", r#"{"title": "x", "agent": "nobody"}"#),
        ("POST", "/v1/tasks/docs/claim", "{}"),
        ("POST", "/v1/tasks/docs/claim", r#"{"agent": 7}"#),
        ("POST", "/v1/tasks/docs/reject", "{}"),
    ];
    for (method, path, body) in bad {
        let a = s.req(method, path, &[], body);
        assert_eq!(a.status, 400, "{method} {path} {body}: {}", a.body);
        assert_eq!(a.json()["status"], 400);
        assert!(!a.json()["detail"].as_str().unwrap_or("").is_empty());
    }
    let big = format!(r#"{{"title": "{}"}}"#, "x".repeat(2 * 1024 * 1024));
    assert_eq!(s.post("/v1/tasks", &big).status, 413);
    assert_eq!(s.get("/v1/tasks/nope").status, 404);
    assert_eq!(s.post("/v1/tasks/docs/explode", "{}").status, 404);
}

#[test]
fn serve_runs_the_agent_and_person_actions_with_409_on_conflicts() {
    let r = TestRepo::with_agents(&["writer", "puller --pull"]);
    r.ok(&["new", "Write the docs", "--id", "docs", "--agent", "puller"]);
    r.ok(&["tick"]);
    let s = Server::start(&r);
    let claim = s.post("/v1/tasks/docs/claim", r#"{"agent": "puller"}"#);
    assert_eq!(claim.status, 200, "{}", claim.body);
    assert_eq!(claim.json()["attempt"], 1);
    assert_eq!(r.where_is("docs"), "work/assigned/puller/docs.yaml");
    let hb = s.post(
        "/v1/tasks/docs/heartbeat",
        r#"{"agent": "puller", "attempt": 1}"#,
    );
    assert_eq!(hb.status, 200, "{}", hb.body);
    let stale = s.post(
        "/v1/tasks/docs/complete",
        r#"{"agent": "puller", "attempt": 7}"#,
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert!(stale.json()["detail"]
        .as_str()
        .unwrap_or("")
        .contains("attempt 7"));
    let done = s.post(
        "/v1/tasks/docs/complete",
        r#"{"agent": "puller", "attempt": 1, "output": {"pages": 3}}"#,
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.json()["recorded"], true, "{}", done.body);
    let task = s.get("/v1/tasks/docs").json();
    assert_eq!(task["task"]["result"]["output"]["pages"], 3, "{task}");
    assert_eq!(s.post("/v1/tasks/docs/approve", "").status, 409);
    r.ok(&["tick"]);
    assert_eq!(s.post("/v1/tasks/docs/cancel", "{}").status, 409);
    r.ok(&["new", "Second", "--id", "second"]);
    r.ok(&["tick"]);
    let cancel = s.post("/v1/tasks/second/cancel", r#"{"reason": "not needed"}"#);
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    assert_eq!(cancel.json()["state"], "cancelled");
    let retry = s.post("/v1/tasks/second/retry", "");
    assert_eq!(
        (retry.status, retry.json()["state"].clone()),
        (200, json!("inbox"))
    );
}

#[test]
fn serve_two_concurrent_claims_give_one_200_and_one_409() {
    let r = TestRepo::with_agents(&["a1 --pull", "a2 --pull"]);
    ready_task(&r, "docs");
    let s = Server::start(&r);
    let addr = s.addr.clone();
    let claims: Vec<_> = ["a1", "a2"]
        .into_iter()
        .map(|agent| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let body = format!(r#"{{"agent": "{agent}"}}"#);
                request(&addr, "POST", "/v1/tasks/docs/claim", &[], body.as_bytes())
            })
        })
        .collect();
    let mut codes: Vec<u16> = claims
        .into_iter()
        .map(|t| t.join().expect("thread").status)
        .collect();
    codes.sort();
    assert_eq!(codes, vec![200, 409]);
    assert_eq!(r.find("docs").len(), 1);
    assert!(r.where_is("docs").starts_with("work/assigned/a"));
}

/// A repo with `n` inbox tasks `t0000`, `t0001`, ... committed at once.
fn inbox_of(n: usize) -> TestRepo {
    let r = TestRepo::empty_in_memory();
    r.ok(&["init"]);
    for i in 0..n {
        r.write_now(
            &format!("work/inbox/t{i:04}.yaml"),
            &format!("title: Task {i}\n"),
        );
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", &format!("{n} tasks")]);
    r
}

#[test]
fn serve_pages_through_1000_tasks() {
    let r = inbox_of(1000);
    let s = Server::start(&r);
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = s
            .get(&format!("/v1/tasks?state=inbox&limit=128{cursor}"))
            .json();
        for t in page["items"].as_array().expect("items") {
            ids.push(t["id"].as_str().expect("id").to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => break,
        }
    }
    let expected: Vec<String> = (0..1000).map(|i| format!("t{i:04}")).collect();
    assert_eq!(ids, expected);
    assert_eq!(s.get("/v1/tasks?state=ready").json()["items"], json!([]));
}

#[test]
fn serve_events_deliver_a_transition_made_by_the_cli() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let mut events = s.events();
    r.ok(&["new", "Write the docs", "--id", "docs"]);
    r.ok(&["tick"]);
    let seen = events.until(Duration::from_secs(5), |t| {
        t.contains(r#""task":"docs","from":"inbox","to":"ready""#)
            && t.contains(r#""from":"ready","to":"assigned""#)
            && t.contains("event: board")
    });
    assert!(seen, "events so far:\n{}", events.seen);
    std::fs::rename(
        r.abs("work/assigned/writer/docs.yaml"),
        r.abs("work/review/docs.yaml"),
    )
    .expect("move by hand");
    let by_hand = events.until(Duration::from_secs(5), |t| {
        t.contains(r#""task":"docs","from":"assigned","to":"review""#)
    });
    assert!(by_hand, "events so far:\n{}", events.seen);
    let metrics = s.get("/metrics").body;
    assert!(
        metrics.contains(r#"coord_transitions_total{from="inbox",to="ready"} 1"#),
        "{metrics}"
    );
}

#[test]
fn serve_answers_503_with_retry_after_while_the_lock_is_held() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let lock = r.hold_coord_lock();
    let a = s.post("/v1/tasks", r#"{"title": "Blocked by the lock"}"#);
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.header("retry-after").is_some());
    drop(lock);
    assert_eq!(s.post("/v1/tasks", r#"{"title": "Now"}"#).status, 201);
}

#[test]
fn serve_guards_tokens_origins_and_hosts() {
    let r = TestRepo::with_agents(&["writer"]);
    let out = r.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("COORD_SERVE_TOKEN"));

    let s = Server::start(&r);
    let page = s.get("/");
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").expect("csp");
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
    let evil = [("Origin", "http://evil.example")];
    assert_eq!(
        s.req("POST", "/v1/tasks", &evil, r#"{"title": "x"}"#)
            .status,
        403
    );
    assert_eq!(
        s.req("GET", "/v1/board", &[("Host", "evil.example")], "")
            .status,
        403
    );
    let same = format!("http://{}", s.addr);
    let ok = s.req(
        "POST",
        "/v1/tasks",
        &[("Origin", &same)],
        r#"{"title": "x"}"#,
    );
    assert_eq!(ok.status, 201, "{}", ok.body);
    drop(s);

    let env = [("COORD_SERVE_TOKEN", "s3cret-s3cret-s3cret")];
    let t = Server::start_with(&r, &["--listen", "127.0.0.1:0"], &env);
    assert_eq!(t.get("/v1/board").status, 401);
    let wrong = [("Authorization", "Bearer nope")];
    assert_eq!(t.req("GET", "/v1/board", &wrong, "").status, 401);
    let right = [("Authorization", "Bearer s3cret-s3cret-s3cret")];
    assert_eq!(t.req("GET", "/v1/board", &right, "").status, 200);
    let opened = t.get("/?token=s3cret-s3cret-s3cret");
    assert!(opened
        .header("set-cookie")
        .is_some_and(|c| c.contains("HttpOnly")));
    assert_eq!(
        t.req(
            "GET",
            "/board",
            &[("Cookie", "coord_token=s3cret-s3cret-s3cret")],
            ""
        )
        .status,
        200
    );
}

#[test]
fn serve_board_shows_columns_lanes_and_task_detail() {
    let r = TestRepo::with_agents(&["writer"]);
    r.ok(&[
        "new",
        "Write <the> docs",
        "--id",
        "docs",
        "--agent",
        "writer",
    ]);
    r.ok(&["new", "Later", "--id", "later", "--depends-on", "docs"]);
    r.ok(&["tick"]);
    let s = Server::start(&r);
    let page = s.get("/").body;
    assert!(
        page.contains(r#"<section class="column" data-state="assigned""#),
        "{page}"
    );
    assert!(
        page.contains("Write &lt;the&gt; docs"),
        "titles are escaped"
    );
    let agents = s.get("/agents").body;
    assert!(agents.contains(r#"data-agent="writer""#) && agents.contains("1/1"));
    assert!(
        page.contains("waits for docs"),
        "blocked reason shown: {page}"
    );
    assert!(page.contains(r#"<script src="/assets/board.js" defer>"#));
    let js = s.get("/assets/board.js");
    assert!(js.body.contains("EventSource"));
    let detail = s.get("/tasks/docs").body;
    assert!(
        detail.contains("assigned") && detail.contains("history"),
        "{detail}"
    );
    assert_eq!(s.get("/column/blocked").status, 200);
    assert_eq!(s.get("/column/nowhere").status, 404);
}

#[test]
fn serve_tick_runs_the_watch_loop_in_the_server_and_stops_with_it() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start_with(&r, &["--listen", "127.0.0.1:0", "--tick"], &[]);
    let mut ev = s.events();
    r.ok(&["new", "Write the docs", "--id", "docs", "--agent", "writer"]);
    let assigned = |seen: &str| {
        seen.lines()
            .any(|l| l.contains(r#""task":"docs""#) && l.contains(r#""to":"assigned""#))
    };
    assert!(
        ev.until(Duration::from_secs(30), assigned),
        "no tick assigned docs: {}",
        ev.seen
    );
    assert!(r.where_is("docs").starts_with("work/assigned/writer/"));
    let metrics = s.get("/metrics").body;
    assert!(
        metrics.contains("\ncoord_ticks_total ")
            && metrics.contains("\ncoord_tick_duration_seconds "),
        "{metrics}"
    );
    assert_eq!(
        s.stop(),
        Some(0),
        "SIGTERM stops the server and its tick loop"
    );
    assert_eq!(r.git_status(), "", "nothing left half done");
}

#[test]
fn serve_refuses_tick_options_without_tick() {
    let r = TestRepo::new();
    let (_, err) = r.code(&["serve", "--interval", "5s"], 2);
    assert!(err.contains("--tick"), "{err}");
}

/// Returns the value of one sample line of a metrics page (`name` with its labels).
fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
}

#[test]
fn serve_metrics_count_ticks_and_rejected_pushes_of_other_processes() {
    let net = crate::harness::Net::new(&["writer"]);
    let clone = net.clone();
    let s = Server::start(&clone);
    let before = s.get("/metrics").body;
    assert_eq!(sample(&before, "coord_ticks_total"), 0.0, "{before}");

    clone.ok(&["tick"]);
    clone.ok(&["tick"]);
    let ticked = s.get("/metrics").body;
    assert_eq!(sample(&ticked, "coord_ticks_total"), 2.0, "{ticked}");
    assert!(
        sample(&ticked, "coord_tick_seconds_total") > 0.0,
        "{ticked}"
    );
    assert!(sample(&ticked, "coord_tick_duration_seconds") > 0.0);

    // A sync whose push the remote rejects once: another clone pushed meanwhile.
    let (started, go) = crate::plain_git::gate_pushes(&clone);
    clone.ok(&["new", "Mine", "--id", "mine"]);
    let mut cmd = clone.spawn_cmd(&["sync"]);
    let sync = std::thread::spawn(move || cmd.output().expect("run coord sync"));
    crate::plain_git::wait_for(&started);
    net.person_adds("theirs", 1);
    std::fs::write(&go, "").expect("go");
    let out = sync.join().expect("sync");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("push rejected"),
        "{err}"
    );
    let synced = s.get("/metrics").body;
    let stale = r#"coord_push_rejections_total{reason="stale"}"#;
    assert_eq!(sample(&synced, stale), 1.0, "{synced}");
    assert_eq!(
        sample(&synced, r#"coord_push_rejections_total{reason="refused"}"#),
        0.0
    );
    assert_eq!(
        sample(&synced, "coord_ticks_total"),
        4.0,
        "the sync ticked twice (once per attempt): {synced}"
    );
}

#[test]
fn serve_filters_tasks_by_agent_capability_and_priority() {
    let r = TestRepo::with_agents(&["writer", "coder --capability rust"]);
    r.ok(&["new", "Docs", "--id", "docs", "--agent", "writer"]);
    r.ok(&["new", "Code", "--id", "code", "--capability", "rust"]);
    r.ok(&["new", "Urgent", "--id", "urgent", "--priority", "high"]);
    let s = Server::start(&r);
    let ids = |query: &str| -> Vec<String> {
        let page = s.get(&format!("/v1/tasks?{query}"));
        assert_eq!(page.status, 200, "{query}: {}", page.body);
        page.json()["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|t| t["id"].as_str().expect("id").to_string())
            .collect()
    };
    assert_eq!(ids("agent=writer"), ["docs"]);
    assert_eq!(ids("agent=coder"), Vec::<String>::new());
    assert_eq!(ids("capability=rust"), ["code"]);
    assert_eq!(ids("priority=high"), ["urgent"]);
    assert_eq!(
        ids("priority=normal"),
        ["code", "docs"],
        "the default priority"
    );
    assert_eq!(ids("state=inbox&capability=rust"), ["code"]);
    assert_eq!(ids("state=ready&agent=writer"), Vec::<String>::new());
}

#[test]
fn serve_fails_approves_and_rejects_through_the_api() {
    let mut r = TestRepo::with_agents(&["writer", "puller --pull"]);
    r.ok(&["new", "Flaky", "--id", "flaky", "--agent", "puller"]);
    for id in ["ask", "no"] {
        r.task(
            id,
            &format!("title: Delete {id}\nagent: writer\nauthority: ask_me_first\n"),
        );
    }
    r.ok(&["tick"]);
    r.at("2026-11-22T10:01:00Z").ok(&["tick"]);
    assert_eq!(r.where_is("ask"), "work/review/ask.yaml");
    let s = Server::start(&r);
    assert_eq!(
        s.post("/v1/tasks/flaky/claim", r#"{"agent": "puller"}"#)
            .status,
        200
    );
    let failed = s.post(
        "/v1/tasks/flaky/fail",
        r#"{"agent": "puller", "attempt": 1, "error": "out of memory"}"#,
    );
    assert_eq!(failed.status, 200, "{}", failed.body);
    assert_eq!(failed.json()["op"], "fail", "{}", failed.body);
    let task = s.get("/v1/tasks/flaky").json();
    assert_eq!(task["task"]["result"]["status"], "failure", "{task}");
    let approved = s.post("/v1/tasks/ask/approve", "");
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(r.where_is("ask"), "work/ready/ask.yaml");
    let rejected = s.post("/v1/tasks/no/reject", r#"{"reason": "too risky"}"#);
    assert_eq!(rejected.status, 200, "{}", rejected.body);
    assert_eq!(r.where_is("no"), "work/failed/no.yaml");
    assert_eq!(
        s.post("/v1/tasks/no/reject", r#"{"reason": "again"}"#)
            .status,
        409
    );
}

#[test]
fn serve_board_pages_a_long_column() {
    let r = inbox_of(560);
    let s = Server::start(&r);
    let board = s.get("/").body;
    let column = board
        .split(r#"<section class="column" data-state="inbox""#)
        .nth(1)
        .and_then(|c| c.split("</section>").next())
        .expect("the inbox column");
    assert_eq!(column.matches(r#"<li class="card""#).count(), 50);
    assert!(
        column.contains(r#"href="/column/inbox">510 more…"#),
        "{column}"
    );
    let first = s.get("/column/inbox").body;
    assert_eq!(first.matches(r#"<li class="card""#).count(), 500);
    assert!(
        first.contains(r#"href="/column/inbox?from=500""#),
        "{first}"
    );
    let second = s.get("/column/inbox?from=500").body;
    assert_eq!(second.matches(r#"<li class="card""#).count(), 60);
    assert!(second.contains("t0559") && !second.contains("t0499"));
}

#[test]
fn serve_board_screenshot_is_in_docs_and_the_readme() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let png = std::fs::read(root.join("docs/board.png")).expect("docs/board.png");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "docs/board.png is a PNG"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(readme.contains("](docs/board.png)"), "the README shows it");
}

#[test]
fn serve_metrics_count_retries_lease_expiries_dead_letters_and_ages() {
    let mut r = TestRepo::with_agents(&["writer"]);
    r.task(
        "docs",
        "title: Write the docs\nagent: writer\nmax_attempts: 2\n",
    );
    r.task("later", "title: Later\ncapabilities: [nobody]\n");
    r.ok(&["tick"]);
    // The server's clock: ages are measured at 13:30.
    let s = Server::start(r.at("2026-11-22T13:30:00Z"));
    let mut events = s.events();
    for at in ["11:00", "12:00", "13:00"] {
        r.at(&format!("2026-11-22T{at}:00Z")).ok(&["tick"]);
    }
    assert_eq!(r.where_is("docs"), "work/failed/docs.yaml");
    let failed = events.until(Duration::from_secs(10), |t| {
        t.contains(r#""task":"docs","from":"assigned","to":"failed""#)
    });
    assert!(failed, "events so far:\n{}", events.seen);
    let m = s.get("/metrics").body;
    assert_eq!(sample(&m, "coord_retries_total"), 1.0, "{m}");
    assert_eq!(sample(&m, "coord_lease_expiries_total"), 2.0, "{m}");
    assert_eq!(sample(&m, "coord_dead_letters_total"), 1.0, "{m}");
    assert_eq!(
        sample(&m, r#"coord_task_oldest_age_seconds{state="ready"}"#),
        3.5 * 3600.0,
        "later waits since 10:00: {m}"
    );
    assert!(
        !m.contains(r#"coord_task_oldest_age_seconds{state="failed"}"#),
        "finished states get no age: {m}"
    );
}

/// A git state that stops writing commands (here a merge in progress) is a conflict a person
/// must settle, not a server error: 409 with the one-line fix.
#[test]
fn serve_answers_409_while_git_stops_writing_commands() {
    let r = TestRepo::with_agents(&["puller --pull"]);
    r.ok(&["new", "Write the docs", "--id", "docs", "--agent", "puller"]);
    r.ok(&["tick"]);
    let head = r.git(&["rev-parse", "HEAD"]);
    std::fs::write(r.abs(".git/MERGE_HEAD"), format!("{}\n", head.trim())).expect("merge");
    let s = Server::start(&r);
    let claim = s.post("/v1/tasks/docs/claim", r#"{"agent": "puller"}"#);
    assert_eq!(claim.status, 409, "{}", claim.body);
    assert!(claim.json()["detail"]
        .as_str()
        .unwrap_or("")
        .contains("git merge --abort"));
}

#[test]
fn serve_refuses_to_claim_a_task_whose_dependency_was_moved_back_out_of_done() {
    let r = TestRepo::with_agents(&["puller --pull --max-active 5"]);
    r.done_dependency_and_ready_dependent("puller");
    std::fs::rename(r.abs("work/done/a.yaml"), r.abs("work/ready/a.yaml")).expect("mv");
    let s = Server::start(&r);
    let claim = s.post("/v1/tasks/b/claim", r#"{"agent": "puller"}"#);
    assert_eq!(claim.status, 409, "{}", claim.body);
    assert!(claim.body.contains("dependency 'a'"), "{}", claim.body);
    assert_eq!(r.where_is("b"), "work/ready/b.yaml");
}

#[test]
fn serve_events_report_a_persons_committed_move_once_as_theirs() {
    let r = TestRepo::with_agents(&["writer"]);
    r.ok(&["new", "Write the docs", "--id", "docs"]);
    let s = Server::start(&r);
    let mut events = s.events();
    r.git(&["mv", "work/inbox/docs.yaml", "work/cancelled/docs.yaml"]);
    // A person types the commit message meanwhile.
    std::thread::sleep(Duration::from_millis(500));
    r.git(&["commit", "-q", "-m", "Drop the docs task"]);
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let moved = format!(r#""commit":"{head}","time""#);
    let seen = events.until(Duration::from_secs(10), |t| {
        t.contains(&moved) && t.contains("event: board")
    });
    assert!(seen, "events so far:\n{}", events.seen);
    r.ok(&["tick"]);
    events.until(Duration::from_secs(3), |_| false);
    let docs: Vec<Value> = events
        .seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|e| e["task"] == "docs")
        .collect();
    assert_eq!(docs.len(), 1, "one event for the move: {docs:?}");
    assert_eq!(
        (&docs[0]["from"], &docs[0]["to"], &docs[0]["op"]),
        (&json!("inbox"), &json!("cancelled"), &json!("move"))
    );
    assert_eq!(docs[0]["commit"], json!(head));
    assert!(docs[0]["by"].is_string(), "{}", docs[0]);
    let metrics = s.get("/metrics").body;
    assert!(
        metrics.contains(r#"coord_transitions_total{from="inbox",to="cancelled"} 1"#),
        "{metrics}"
    );
}

#[test]
fn serve_reassigns_a_held_task_as_the_cli_does() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["new", "Write the docs", "--id", "docs", "--agent", "alice"]);
    r.ok(&["tick"]);
    let s = Server::start(&r);
    assert_eq!(s.post("/v1/tasks/docs/reassign", "{}").status, 400);
    let moved = s.post("/v1/tasks/docs/reassign", r#"{"agent": "bob"}"#);
    assert_eq!(moved.status, 200, "{}", moved.body);
    assert_eq!(moved.json()["state"], "assigned");
    assert_eq!(r.where_is("docs"), "work/assigned/bob/docs.yaml");
    let late = s.post(
        "/v1/tasks/docs/complete",
        r#"{"agent": "alice", "attempt": 1}"#,
    );
    assert_eq!(late.status, 409, "{}", late.body);
    let unknown = s.post("/v1/tasks/docs/reassign", r#"{"agent": "carol"}"#);
    assert_eq!(unknown.status, 400, "{}", unknown.body);
}
