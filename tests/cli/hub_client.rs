//! The agent commands through a hub (`--hub URL`, `COORD_HUB`, `hub.url`): a real `coord
//! serve` on an ephemeral loopback port, agents in folders of their own. The same scenario
//! run here and through a server gives the same `--json` answers and exit codes; a claim
//! whose answer is lost in transit is not made twice; agent tokens act as their agent only;
//! signed results go through.

use crate::harness::TestRepo;
use crate::http::{request, Server};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An agent's folder: no repository, the clock of the tests.
fn agent_folder() -> TestRepo {
    TestRepo::empty()
}

/// Runs `args` in `folder` through the hub at `url` with `env`; returns the output.
fn through(folder: &TestRepo, url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    all.splice(1..1, ["--hub", url]);
    let mut c = folder.cmd(&all);
    c.envs(env.iter().copied());
    c.output().expect("run coord")
}

/// Returns the JSON printed on stdout, or on stderr when stdout is empty (an error).
fn answer(o: &Output) -> Value {
    let text = if o.stdout.is_empty() {
        &o.stderr
    } else {
        &o.stdout
    };
    serde_json::from_slice(text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The steps of the scenario, each run here and through the hub.
const STEPS: &[&[&str]] = &[
    &["new", "Write the docs", "--id", "docs", "--json"],
    &[
        "new",
        "Fix the bug",
        "--id",
        "bug",
        "--priority",
        "high",
        "--json",
    ],
    &[
        "new",
        "Once",
        "--id",
        "once",
        "--idempotency-key",
        "k1",
        "--json",
    ],
    &[
        "new",
        "Once",
        "--id",
        "once",
        "--idempotency-key",
        "k1",
        "--json",
    ],
    &["@tick"],
    &["claim", "--agent", "p", "--json"],
    &[
        "heartbeat",
        "bug",
        "--agent",
        "p",
        "--attempt",
        "1",
        "--json",
    ],
    &[
        "complete",
        "bug",
        "--agent",
        "p",
        "--attempt",
        "7",
        "--json",
    ],
    &[
        "complete",
        "bug",
        "--agent",
        "p",
        "--attempt",
        "1",
        "--json",
    ],
    &[
        "complete",
        "bug",
        "--agent",
        "p",
        "--attempt",
        "1",
        "--json",
    ],
    &["claim", "--agent", "p", "--json"],
    &[
        "fail",
        "docs",
        "--agent",
        "p",
        "--attempt",
        "1",
        "--error",
        "no",
        "--fatal",
        "--json",
    ],
    &["claim", "--agent", "p", "--json"],
    &["claim", "--agent", "p", "--json"],
    &["claim", "--agent", "nobody", "--json"],
    &["heartbeat", "nothing", "--agent", "p", "--json"],
];

/// Returns the exit code and the answer of each step, run in `repo` itself or, with a hub,
/// from an agent's folder through it (a tick runs in the hub's repository).
fn scenario(repo: &TestRepo, hub: Option<(&TestRepo, &str)>) -> Vec<(i32, Value)> {
    let mut seen = Vec::new();
    for step in STEPS {
        if step[0] == "@tick" {
            repo.ok(&["tick"]);
            continue;
        }
        let o = match hub {
            Some((folder, url)) => through(folder, url, step, &[]),
            None => repo.cmd(step).output().expect("run coord"),
        };
        seen.push((o.status.code().unwrap_or(-1), answer(&o)));
    }
    seen
}

#[test]
fn hub_commands_answer_as_the_local_ones() {
    let here = TestRepo::with_agents(&["p --pull"]);
    let local = scenario(&here, None);
    let there = TestRepo::with_agents(&["p --pull"]);
    let s = Server::start(&there);
    let folder = agent_folder();
    let url = format!("http://{}", s.addr);
    let remote = scenario(&there, Some((&folder, &url)));
    let codes: Vec<i32> = local.iter().map(|(c, _)| *c).collect();
    assert_eq!(codes, vec![0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 4, 1, 1]);
    assert_eq!(local[3].1["created"], json!(false));
    for (i, (l, r)) in local.iter().zip(&remote).enumerate() {
        assert_eq!(l.0, r.0, "step {i}: exit codes differ: {l:?} / {r:?}");
        let (mut l, mut r) = (l.1.clone(), r.1.clone());
        // An error's message may name where it happened; its kind and exit are the answer.
        for v in [&mut l, &mut r] {
            if let Some(e) = v.get_mut("error") {
                *e = json!({"code": e["code"], "exit_code": e["exit_code"]});
            }
        }
        assert_eq!(l, r, "step {i}: answers differ");
    }
    assert_eq!(there.where_is("bug"), "work/done/bug.yaml");
    assert!(there.read("work/done/bug.yaml").contains("stale_result"));
}

/// A proxy that forwards each request to `to` and the answer back, except that it drops the
/// answer of the first request (the server did the work; the client sees the connection
/// break): a network that loses an answer in transit.
fn lossy_proxy(to: String) -> (String, Arc<AtomicUsize>) {
    proxy(to, false)
}

/// A proxy as [`lossy_proxy`], or with `hang_up` one that hangs up on the first request (on
/// its client and the server) before the server answers it.
fn proxy(to: String, hang_up: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let (to, count) = (to.clone(), Arc::clone(&count));
            std::thread::spawn(move || relay(client, &to, &count, hang_up));
        }
    });
    (addr, seen)
}

/// Relays the requests of one connection, one at a time.
fn relay(mut client: TcpStream, to: &str, count: &AtomicUsize, hang_up: bool) {
    while let Some(req) = read_message(&mut client) {
        let mut server = TcpStream::connect(to).expect("connect to the server");
        server.write_all(&with_host(&req, to)).expect("forward");
        if hang_up && count.load(Ordering::SeqCst) == 0 {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(300));
            let _ = server.shutdown(std::net::Shutdown::Both);
            return;
        }
        let Some(res) = read_message(&mut server) else {
            return;
        };
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            return;
        }
        if client.write_all(&res).is_err() {
            return;
        }
    }
}

/// Returns the request with its `Host` the server's own.
fn with_host(req: &[u8], host: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(req);
    let lines: Vec<String> = text
        .split("\r\n")
        .map(|l| match l.to_ascii_lowercase().starts_with("host:") {
            true => format!("Host: {host}"),
            false => l.to_string(),
        })
        .collect();
    lines.join("\r\n").into_bytes()
}

/// Reads one HTTP message (headers and a Content-Length body).
fn read_message(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    buf.extend(body);
    Some(buf)
}

#[test]
fn hub_claim_whose_answer_is_lost_is_not_made_twice() {
    let there = TestRepo::with_agents(&["p --pull"]);
    there.ok(&["new", "First", "--id", "first"]);
    there.ok(&["new", "Second", "--id", "second"]);
    there.ok(&["tick"]);
    let s = Server::start(&there);
    let (proxy, seen) = lossy_proxy(s.addr.clone());
    let folder = agent_folder();
    let o = through(
        &folder,
        &format!("http://{proxy}"),
        &["claim", "--agent", "p", "--json"],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(seen.load(Ordering::SeqCst) >= 2, "the claim was sent again");
    let got = answer(&o);
    assert_eq!(
        (got["claimed"].clone(), got["attempt"].clone()),
        (json!(true), json!(1))
    );
    let held: Vec<String> = ["first", "second"]
        .iter()
        .filter(|id| there.where_is(id).starts_with("work/assigned/"))
        .map(|id| id.to_string())
        .collect();
    assert_eq!(
        held,
        vec![got["id"].as_str().unwrap_or_default().to_string()]
    );
}

#[test]
fn hub_claim_whose_client_hangs_up_is_still_made_once() {
    let there = TestRepo::with_agents(&["p --pull"]);
    there.ok(&["new", "First", "--id", "first"]);
    there.ok(&["new", "Second", "--id", "second"]);
    there.ok(&["tick"]);
    let s = Server::start(&there);
    let (proxy, seen) = proxy(s.addr.clone(), true);
    // The claim waits for the lock, so the hang-up comes while it runs.
    let lock = there.hold_coord_lock();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1200));
        drop(lock);
    });
    let folder = agent_folder();
    let o = through(
        &folder,
        &format!("http://{proxy}"),
        &["claim", "--agent", "p", "--json"],
        &[],
    );
    releaser.join().expect("releaser");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(seen.load(Ordering::SeqCst) >= 2, "the claim was sent again");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let held = ["first", "second"]
        .iter()
        .filter(|id| there.where_is(id).starts_with("work/assigned/"))
        .count();
    assert_eq!(held, 1, "one claim, whatever the network did");
}

#[test]
fn hub_unreachable_is_one_line_naming_the_url_and_the_fix() {
    let folder = agent_folder();
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let o = through(
        &folder,
        &url,
        &["claim", "--agent", "p", "--wait", "1s"],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "error: cannot reach the hub at {url}/v1/agents/p/claim"
        )),
        "{err}"
    );
    assert!(
        err.contains("hint: check that 'coord serve' runs there"),
        "{err}"
    );
    let bad = through(&folder, "hub:8088", &["claim", "--agent", "p"], &[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not an http:// or https:// URL"));
}

#[test]
fn hub_url_comes_from_the_environment_or_coord_yaml() {
    let there = TestRepo::with_agents(&["p --pull"]);
    let s = Server::start(&there);
    let url = format!("http://{}", s.addr);
    let folder = agent_folder();
    let mut c = folder.cmd(&["new", "By env", "--id", "env"]);
    c.env("COORD_HUB", &url).assert().success();
    folder.write("coord.yaml", &format!("hub:\n  url: {url}\n"));
    folder.ok(&["new", "By file", "--id", "file"]);
    assert_eq!(there.where_is("env"), "work/inbox/env.yaml");
    assert_eq!(there.where_is("file"), "work/inbox/file.yaml");
    let both = folder.run(&["claim", "--agent", "p", "--sync"]);
    assert_eq!(both.status.code(), Some(2));
}

/// A hub with the server's token `ADMIN` and tokens of its own for agents a and b.
const ADMIN: &str = "admin-token-0123456789";
const TOKEN_A: &str = "token-of-agent-a-0123";
const TOKEN_B: &str = "token-of-agent-b-0123";

fn hub_with_tokens(there: &TestRepo, env: &[(&str, &str)]) -> Server {
    let file = there.home().join("agent-tokens.yaml");
    std::fs::write(&file, format!("a: {TOKEN_A}\nb: {TOKEN_B}\n")).expect("write tokens");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let file = file.to_str().expect("utf8").to_string();
    let mut all = vec![("COORD_SERVE_TOKEN", ADMIN)];
    all.extend(env);
    Server::start_with(
        there,
        &["--listen", "127.0.0.1:0", "--agent-tokens", &file],
        &all,
    )
}

#[test]
fn hub_agent_tokens_act_as_their_agent_only() {
    let there = TestRepo::with_agents(&["a --pull", "b --pull"]);
    there.ok(&["new", "One", "--id", "one"]);
    there.ok(&["new", "Two", "--id", "two"]);
    there.ok(&["tick"]);
    let s = hub_with_tokens(&there, &[]);
    let url = format!("http://{}", s.addr);
    let folder = agent_folder();
    let as_a = [("COORD_HUB_TOKEN", TOKEN_A)];
    let o = through(&folder, &url, &["claim", "--agent", "a"], &as_a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    // a's token cannot claim, complete or heartbeat as b.
    for step in [
        vec!["claim", "--agent", "b"],
        vec!["complete", &id, "--agent", "b", "--attempt", "1"],
        vec!["heartbeat", &id, "--agent", "b", "--attempt", "1"],
    ] {
        let o = through(&folder, &url, &step, &as_a);
        assert_eq!(o.status.code(), Some(1), "{step:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("the token of agent a cannot act as agent b"),
            "{err}"
        );
    }
    let auth_a = format!("Bearer {TOKEN_A}");
    let raw = request(
        &s.addr,
        "POST",
        "/v1/tasks/one/claim",
        &[("Authorization", &auth_a)],
        br#"{"agent": "b"}"#,
    );
    assert_eq!(raw.status, 403, "{}", raw.body);
    assert!(raw
        .headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v == "application/problem+json"));
    let o = through(&folder, &url, &["claim", "--agent", "b"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("COORD_HUB_TOKEN"));
    // a's own report goes through; the server's token acts for everyone.
    let done = through(
        &folder,
        &url,
        &["complete", &id, "--agent", "a", "--attempt", "1"],
        &as_a,
    );
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let admin = [("COORD_HUB_TOKEN", ADMIN)];
    let o = through(&folder, &url, &["claim", "--agent", "b"], &admin);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn hub_agent_tokens_file_must_be_private_and_need_the_servers_token() {
    let there = TestRepo::with_agents(&["a --pull"]);
    let file = there.home().join("agent-tokens.yaml");
    std::fs::write(&file, format!("a: {TOKEN_A}\n")).expect("write tokens");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let path = file.to_str().expect("utf8");
    let mut c = there.cmd(&["serve", "--listen", "127.0.0.1:0", "--agent-tokens", path]);
    let o = c.env("COORD_SERVE_TOKEN", ADMIN).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("chmod 600"));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let o = there
        .cmd(&["serve", "--listen", "127.0.0.1:0", "--agent-tokens", path])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("COORD_SERVE_TOKEN"));
}

#[test]
fn hub_signed_results_are_signed_by_the_agent_and_checked_by_the_hub() {
    let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let there = TestRepo::with_agents(&["a --pull --max-active 2"]);
    there.commit_file(
        "coord.yaml",
        "require_signed_results: true\n",
        "require signed results",
    );
    there.ok(&["new", "One", "--id", "one"]);
    there.ok(&["new", "Two", "--id", "two"]);
    there.ok(&["tick"]);
    let with_key = [("COORD_KEY_A", key)];
    let s = hub_with_tokens(&there, &with_key);
    let url = format!("http://{}", s.addr);
    let folder = agent_folder();
    let env = [("COORD_HUB_TOKEN", TOKEN_A), ("COORD_KEY_A", key)];
    for _ in 0..2 {
        let o = through(&folder, &url, &["claim", "--agent", "a"], &env);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let signed = [
        "complete",
        "one",
        "--agent",
        "a",
        "--attempt",
        "1",
        "--sign",
    ];
    let o = through(&folder, &url, &signed, &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let wrong = [("COORD_HUB_TOKEN", TOKEN_A), ("COORD_KEY_A", &key[..48])];
    let forged = [
        "complete",
        "two",
        "--agent",
        "a",
        "--attempt",
        "1",
        "--sign",
    ];
    let o = through(&folder, &url, &forged, &wrong);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut tick = there.cmd(&["tick"]);
    tick.env("COORD_KEY_A", key).assert().success();
    assert_eq!(there.where_is("one"), "work/done/one.yaml");
    assert_ne!(there.where_is("two"), "work/done/two.yaml");
    let unnamed = through(&folder, &url, &["complete", "two", "--sign"], &env);
    assert_eq!(unnamed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unnamed.stderr).contains("--agent and --attempt"));
}

#[test]
fn hub_run_works_through_a_server_from_another_folder() {
    let there = TestRepo::with_agents(&["p --pull"]);
    for i in 0..20 {
        there.ok(&["new", &format!("Task {i}"), "--id", &format!("t{i:02}")]);
    }
    there.ok(&["tick"]);
    let s = Server::start(&there);
    let folder = agent_folder();
    // A stand-in agent: reads the task on stdin, answers with its id.
    let script = r#"id=$(cat | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -n 1); echo "{\"seen\": \"$id\"}""#;
    let url = format!("http://{}", s.addr);
    let o = through(
        &folder,
        &url,
        &["run", "p", "--once", "--json", "--", "sh", "-c", script],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    there.ok(&["tick"]);
    for i in 0..20 {
        let id = format!("t{i:02}");
        assert_eq!(there.where_is(&id), format!("work/done/{id}.yaml"));
        let text = there.read(&format!("work/done/{id}.yaml"));
        assert!(text.contains(&format!("seen: {id}")), "{text}");
    }
    assert!(
        !folder.exists(".git"),
        "the agent's folder stays no repository"
    );
}

#[test]
fn hub_run_serves_a_push_agent_through_a_server() {
    let there = TestRepo::with_agents(&["w --max-active 5"]);
    for i in 0..5 {
        there.ok(&[
            "new",
            &format!("Task {i}"),
            "--id",
            &format!("w{i}"),
            "--agent",
            "w",
        ]);
    }
    there.ok(&["tick"]);
    let s = Server::start(&there);
    let folder = agent_folder();
    let url = format!("http://{}", s.addr);
    let o = through(
        &folder,
        &url,
        &[
            "run",
            "w",
            "--once",
            "--",
            "sh",
            "-c",
            "cat >/dev/null; echo '{\"ok\": 1}'",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains(&format!("through the hub at {url}")),
        "{said}"
    );
    there.ok(&["tick"]);
    for i in 0..5 {
        assert_eq!(
            there.where_is(&format!("w{i}")),
            format!("work/done/w{i}.yaml")
        );
    }
    let refused = through(
        &folder,
        &url,
        &["run", "w", "--worktree", "--", "true"],
        &[],
    );
    assert_eq!(refused.status.code(), Some(2));
}

/// A proxy that forwards each request to the address in `to`, except that on the first it
/// runs `between` once the server answered (a hub killed and started again), sends the later
/// requests to the address that returns, and drops the answer: the claimer never reads it.
fn proxy_with_restart(to: String, between: impl FnOnce() -> String + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let to = Arc::new(std::sync::Mutex::new(to));
    type Between = Box<dyn FnOnce() -> String + Send>;
    let between: Arc<std::sync::Mutex<Option<Between>>> =
        Arc::new(std::sync::Mutex::new(Some(Box::new(between))));
    std::thread::spawn(move || {
        for mut client in listener.incoming().flatten() {
            let (to, between) = (Arc::clone(&to), Arc::clone(&between));
            std::thread::spawn(move || {
                while let Some(req) = read_message(&mut client) {
                    let target = to.lock().expect("to").clone();
                    let mut server = TcpStream::connect(&target).expect("connect to the hub");
                    server
                        .write_all(&with_host(&req, &target))
                        .expect("forward");
                    let Some(res) = read_message(&mut server) else {
                        return;
                    };
                    if let Some(restart) = between.lock().expect("between").take() {
                        *to.lock().expect("to") = restart();
                        return;
                    }
                    if client.write_all(&res).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// `coord claim --hub` whose hub is killed (-9) after it committed the claim and started
/// again before the answer arrived: the claim, sent again with its key, gets the same grant
/// from the new hub, and no second task is assigned.
#[test]
fn hub_claim_whose_hub_is_killed_before_it_answers_gets_the_same_grant_from_the_restarted_hub() {
    let net = crate::hub::fleet("{remote: origin, pushes_per_minute: 60, lease: 1m}", 2);
    let clone = Arc::new(net.clone());
    let hub = crate::hub::Hub::start(&clone);
    let first = hub.addr.clone();
    let held = Arc::new(std::sync::Mutex::new(None));
    let (c, h) = (Arc::clone(&clone), Arc::clone(&held));
    let proxy = proxy_with_restart(first, move || {
        hub.kill_9();
        let again = crate::hub::Hub::start(&c);
        let addr = again.addr.clone();
        *h.lock().expect("held") = Some(again);
        addr
    });
    let folder = agent_folder();
    let o = through(
        &folder,
        &format!("http://{proxy}"),
        &["claim", "--agent", "w", "--json"],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        held.lock().expect("held").is_some(),
        "the hub was not restarted"
    );
    let got = answer(&o);
    assert_eq!(
        (&got["attempt"], &got["epoch"]),
        (&json!(1), &json!(1)),
        "{got}"
    );
    let assigned: Vec<&str> = ["t0", "t1"]
        .into_iter()
        .filter(|id| clone.where_is(id).starts_with("work/assigned/"))
        .collect();
    assert_eq!(assigned, [got["id"].as_str().unwrap_or_default()], "{got}");
}
