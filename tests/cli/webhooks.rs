//! Outbound webhooks through the real binary and a real HTTP receiver on a loopback port of
//! the test's own: every transition of a run delivered under the event journal's id across a
//! kill -9 of `coord watch` and a receiver that answers 500 for a while (retried with growing
//! gaps), signatures checked with the recipe of docs/webhooks.md, and a receiver gone for
//! good ending in a dead-letter record that `coord status` and `/metrics` show.

use crate::harness::{git_in, Net, TestRepo};
use crate::http::Server;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The secret the tests sign with, passed to coord in `HOOK_SECRET`.
const SECRET: &str = "s3cret-for-the-receiver";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Hit {
    at: Instant,
    headers: BTreeMap<String, String>,
    body: String,
    status: u16,
}

impl Hit {
    fn id(&self) -> u64 {
        self.header("x-coord-event-id")
            .parse()
            .expect("a numeric event id")
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// A webhook receiver: answers 500 to its first `fail_first` requests, then 200, each after
/// `delay`.
struct Receiver {
    port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    fn start(fail_first: usize, delay: Duration) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let kept = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let hits = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, &hits, fail_first, delay));
            }
        });
        Receiver { port, hits }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("hits").clone()
    }

    /// The ids answered 200.
    fn delivered(&self) -> BTreeSet<u64> {
        self.hits()
            .iter()
            .filter(|h| h.status == 200)
            .map(Hit::id)
            .collect()
    }

    /// Waits until `done` holds of the ids delivered; fails the test after `limit`.
    fn wait(&self, limit: Duration, what: &str, done: impl Fn(&BTreeSet<u64>) -> bool) {
        let start = Instant::now();
        while !done(&self.delivered()) {
            assert!(
                start.elapsed() < limit,
                "{what}: {} ids delivered after {limit:?}",
                self.delivered().len()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Reads requests from one connection (kept alive while the client keeps it) and answers
/// each.
fn serve(stream: TcpStream, hits: &Mutex<Vec<Hit>>, fail_first: usize, delay: Duration) {
    let mut out = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let status = {
            let mut hits = hits.lock().expect("hits");
            let status = if hits.len() < fail_first { 500 } else { 200 };
            hits.push(Hit {
                at: Instant::now(),
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
                status,
            });
            status
        };
        std::thread::sleep(delay);
        let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
        if out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// Commits a coord.yaml with one webhook endpoint `ops` for `url`, fast retries, and
/// `extra` keys of its own.
fn configure(r: &TestRepo, url: &str, extra: &str) {
    let config = r.read("coord.yaml");
    let hooks = format!(
        "settle: 0s\nwebhooks:\n  ops:\n    url: {url}\n    secret_env: HOOK_SECRET\n    retry: {{base: 200ms, max: 2s}}\n    timeout: 5s\n{extra}"
    );
    r.commit_file("coord.yaml", &format!("{config}\n{hooks}"), "webhooks");
}

/// Starts `coord watch` with the secret in its environment.
fn watch(r: &TestRepo) -> Child {
    let mut c = r.spawn_cmd(&["watch", "--interval", "1s"]);
    c.env("HOOK_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c.spawn().expect("spawn coord watch")
}

/// The last id of the clone's event journal.
fn journal_last(r: &TestRepo) -> u64 {
    let mark: serde_json::Value =
        serde_json::from_str(&r.read(".git/coord/events/mark.json")).expect("mark");
    mark["last"].as_u64().expect("last")
}

/// The verify recipe of docs/webhooks.md: the one ```sh block of its "Verifying" section.
fn recipe() -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/webhooks.md"))
        .expect("docs/webhooks.md");
    let start = doc.find("```sh\n").expect("a ```sh block") + 6;
    let len = doc[start..].find("```").expect("its end");
    doc[start..start + len].to_string()
}

/// Runs the recipe on a delivery; returns whether it accepts it.
fn verifies(hit: &Hit, body: &str) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("body.json"), body).expect("body");
    let status = std::process::Command::new("bash")
        .arg("-c")
        .arg(recipe())
        .current_dir(dir.path())
        .env("HOOK_SECRET", SECRET)
        .env("COORD_TIMESTAMP", hit.header("x-coord-timestamp"))
        .env("COORD_SIGNATURE", hit.header("x-coord-signature"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("bash");
    status.success()
}

/// Tasks that make `3 * tasks` transitions (added, ready, assigned).
fn drop_tasks(r: &TestRepo, tasks: usize) {
    for i in 0..tasks {
        r.task(&format!("t{i:05}"), "title: A task\nagent: writer\n");
    }
}

/// 167 tasks make 501 transitions; `COORD_WEBHOOK_TASKS=1000` makes the run 3000.
#[test]
fn every_transition_is_delivered_once_by_id_across_a_kill_and_a_failing_receiver() {
    let tasks: usize = std::env::var("COORD_WEBHOOK_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(167);
    let r = TestRepo::with_agents(&["writer --max-active 1000"]);
    // A slow receiver (2 ms an answer), so that the kill comes mid-run.
    let receiver = Receiver::start(4, Duration::from_millis(2));
    configure(&r, &receiver.url(), "    max_attempts: 20\n");
    let mut first = watch(&r);
    std::thread::sleep(Duration::from_millis(500));
    drop_tasks(&r, tasks);
    let total = (3 * tasks) as u64;
    let limit = Duration::from_secs(60 + tasks as u64 / 10);
    receiver.wait(limit, "a third before the kill", |ids| {
        ids.len() as u64 >= total / 3
    });
    first.kill().expect("kill -9");
    first.wait().expect("reaped");
    let before = receiver.delivered().len() as u64;
    assert!(before < total, "the kill came mid-run: {before} of {total}");
    let mut second = watch(&r);
    receiver.wait(limit, "every transition", |ids| ids.len() as u64 >= total);
    std::thread::sleep(Duration::from_millis(500));
    second.kill().expect("kill");
    second.wait().expect("reaped");

    assert_eq!(journal_last(&r), total, "one journal id per transition");
    let hits = receiver.hits();
    let ok: Vec<&Hit> = hits.iter().filter(|h| h.status == 200).collect();
    let ids: BTreeSet<u64> = ok.iter().map(|h| h.id()).collect();
    assert_eq!(ids, (1..=total).collect(), "every id, none other");
    let mut by_transition: BTreeMap<(String, String, String), BTreeSet<u64>> = BTreeMap::new();
    for h in &ok {
        let v = h.json();
        assert_eq!(
            v["id"].as_u64(),
            Some(h.id()),
            "the body names the header's id"
        );
        let s = |k: &str| v[k].as_str().unwrap_or("none").to_string();
        by_transition
            .entry((s("task"), s("from"), s("to")))
            .or_default()
            .insert(h.id());
    }
    assert_eq!(by_transition.len() as u64, total, "every transition");
    assert!(
        by_transition.values().all(|ids| ids.len() == 1),
        "a transition under two ids"
    );
    eprintln!(
        "{} deliveries of {total} events, {} before the kill; tries of event 1 {:?} apart",
        ok.len(),
        before,
        hits.iter()
            .filter(|h| h.id() == 1)
            .map(|h| h.at)
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect::<Vec<_>>()
    );
    // At least once: an event delivered just before the kill may come again, no more.
    assert!(
        ok.len() as u64 <= total + 2,
        "{} deliveries of {total} events: a restart floods",
        ok.len()
    );
    // The first event was refused four times, then retried with growing gaps.
    let tries: Vec<&Hit> = hits.iter().filter(|h| h.id() == 1).collect();
    assert!(tries.len() >= 5, "{} tries of event 1", tries.len());
    let gaps: Vec<Duration> = tries.windows(2).map(|w| w[1].at - w[0].at).collect();
    // The nth wait is at least half of 200 ms doubled n-1 times (the rest is jitter, and
    // the time a busy deliverer takes to come back).
    for (n, gap) in gaps.iter().take(4).enumerate() {
        let floor = Duration::from_millis(95 << n);
        assert!(*gap >= floor, "wait {n} at least {floor:?}: {gaps:?}");
    }
    assert!(gaps[3] > gaps[0] * 2, "backoff doubles: {gaps:?}");
    // The event's fields.
    let v = ok
        .iter()
        .find(|h| h.id() == total)
        .expect("the last")
        .json();
    for key in [
        "kind", "task", "from", "to", "commit", "time", "agent", "attempt",
    ] {
        assert!(v.get(key).is_some(), "{key} in {v}");
    }
    let assigned = ok
        .iter()
        .map(|h| h.json())
        .find(|v| v["to"] == "assigned")
        .expect("an assignment");
    assert_eq!(assigned["agent"], "writer", "{assigned}");
    assert_eq!(assigned["attempt"], 1, "{assigned}");
    assert_eq!(assigned["kind"], "transition", "{assigned}");
}

#[test]
fn signatures_verify_with_the_documented_recipe_and_a_changed_body_does_not() {
    let r = TestRepo::with_agents(&["writer --max-active 10"]);
    let receiver = Receiver::start(0, Duration::ZERO);
    configure(&r, &receiver.url(), "");
    let mut w = watch(&r);
    std::thread::sleep(Duration::from_millis(500));
    drop_tasks(&r, 2);
    receiver.wait(Duration::from_secs(30), "six events", |ids| ids.len() >= 6);
    w.kill().expect("kill");
    w.wait().expect("reaped");
    for hit in receiver.hits() {
        assert!(hit.header("x-coord-signature").starts_with("sha256="));
        assert!(verifies(&hit, &hit.body), "{hit:?}");
        let forged = hit.body.replace("A task", "B task");
        let changed = hit.body.replacen('1', "2", 1);
        assert!(!verifies(&hit, &changed), "a changed body: {changed}");
        assert!(!verifies(&hit, &format!("{forged} ")), "a longer body");
    }
}

#[test]
fn a_receiver_down_for_good_ends_in_a_dead_letter_that_status_and_metrics_show() {
    let r = TestRepo::with_agents(&["writer"]);
    // A port nobody listens on: every connection is refused.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    configure(
        &r,
        &format!("http://127.0.0.1:{port}/hook"),
        "    max_attempts: 3\n",
    );
    let mut w = watch(&r);
    std::thread::sleep(Duration::from_millis(500));
    drop_tasks(&r, 1);
    let dead = r.abs(".git/coord/webhooks/dead.jsonl");
    let start = Instant::now();
    let count = || {
        std::fs::read_to_string(&dead)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    while count() < 3 {
        assert!(start.elapsed() < Duration::from_secs(30), "no dead letters");
        std::thread::sleep(Duration::from_millis(100));
    }
    w.kill().expect("kill");
    w.wait().expect("reaped");
    let status = r.json(&["status"]);
    let problems = status["problems"].to_string();
    assert!(
        problems.contains("webhook ops") && problems.contains("after 3 attempts"),
        "{problems}"
    );
    let text = r.ok(&["status"]);
    assert!(text.contains("webhook ops"), "{text}");
    let s = Server::start(&r);
    let page = s.req("GET", "/", &[], "").body;
    assert!(page.contains("webhook ops gave up"), "the board shows it");
    let metrics = s.req("GET", "/metrics", &[], "").body;
    assert!(
        metrics.contains("coord_webhook_dead_letters{endpoint=\"ops\"} 3"),
        "{metrics}"
    );
}

#[test]
fn one_deliverer_of_serve_and_watch_posts_with_the_ids_of_the_event_stream() {
    let r = TestRepo::with_agents(&["writer --max-active 100"]);
    let receiver = Receiver::start(0, Duration::ZERO);
    configure(&r, &receiver.url(), "");
    let env = [("HOOK_SECRET", SECRET)];
    let s = Server::start_with(&r, &["--listen", "127.0.0.1:0"], &env);
    // A watch of the same clone: one of the two delivers, never both.
    let mut w = watch(&r);
    let mut stream = s.events();
    for round in 0..5 {
        for i in 0..4 {
            r.task(&format!("r{round}-{i}"), "title: A task\n");
        }
        r.ok(&["--wait", "30s", "tick"]);
        std::thread::sleep(Duration::from_millis(150));
    }
    let total = 5 * 4 * 3;
    let seen = stream.until(Duration::from_secs(30), |t| {
        t.matches("event: transition").count() >= total && t.ends_with("\n\n")
    });
    assert!(seen, "the stream got {}", stream.transitions().len());
    receiver.wait(Duration::from_secs(30), "every transition", |ids| {
        ids.len() >= total
    });
    let key = |v: &serde_json::Value| {
        let s = |k: &str| v[k].as_str().unwrap_or("none").to_string();
        (s("task"), s("from"), s("to"))
    };
    let streamed: BTreeMap<u64, _> = stream
        .transitions()
        .iter()
        .map(|e| (e.id.expect("an id"), key(&e.data)))
        .collect();
    let posted: BTreeMap<u64, _> = receiver
        .hits()
        .iter()
        .map(|h| (h.id(), key(&h.json())))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    w.kill().expect("kill");
    w.wait().expect("reaped");
    assert_eq!(receiver.hits().len(), total, "each event posted once");
    assert_eq!(streamed.len(), total, "each transition streamed once");
    assert_eq!(posted, streamed, "the same events under the same ids");
}

/// Waits until `path` holds a cursor at or past `id`; fails the test after 20 seconds.
fn wait_cursor(r: &TestRepo, name: &str, id: u64) {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(r.abs(&format!(".git/coord/webhooks/{name}.json")));
        let at = text
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["cursor"].as_u64());
        if at.is_some_and(|at| at >= id) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "cursor {at:?} < {id}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_cursor_deleted_while_delivering_or_corrupt_at_a_restart_loses_no_event() {
    let r = TestRepo::with_agents(&["writer"]);
    let receiver = Receiver::start(0, Duration::ZERO);
    configure(&r, &receiver.url(), "");
    let mut w = watch(&r);
    // The new endpoint's starting point is saved at once.
    wait_cursor(&r, "ops", 0);
    let first = journal_last(&r);
    drop_tasks(&r, 1);
    receiver.wait(Duration::from_secs(20), "the first task", |ids| {
        ids.len() >= 3
    });
    std::fs::remove_file(r.abs(".git/coord/webhooks/ops.json")).expect("rm cursor");
    r.task("t-after-rm", "title: A task\nagent: writer\n");
    r.ok(&["--wait", "30s", "tick"]);
    let gone = journal_last(&r);
    receiver.wait(Duration::from_secs(20), "after the cursor went", |ids| {
        ((first + 1)..=gone).all(|id| ids.contains(&id))
    });
    w.kill().expect("kill");
    w.wait().expect("reaped");
    let before = journal_last(&r);
    assert!(before > first);
    std::fs::write(r.abs(".git/coord/webhooks/ops.json"), "{").expect("corrupt");
    r.task("t-after-corrupt", "title: A task\nagent: writer\n");
    r.ok(&["tick"]);
    let mut w = watch(&r);
    let start = Instant::now();
    while journal_last(&r) <= before {
        assert!(start.elapsed() < Duration::from_secs(20), "no new events");
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = journal_last(&r);
    receiver.wait(Duration::from_secs(20), "after the corrupt cursor", |ids| {
        ((before + 1)..=last).all(|id| ids.contains(&id))
    });
    w.kill().expect("kill");
    w.wait().expect("reaped");
    let text = r.ok(&["status"]);
    assert!(
        text.contains("webhook ops") && text.contains("cursor"),
        "{text}"
    );
}

#[test]
fn a_variable_that_is_not_utf8_does_not_break_a_tick() {
    use std::os::unix::ffi::OsStrExt;
    let r = TestRepo::with_agents(&["writer"]);
    let bad = std::ffi::OsStr::from_bytes(b"\xff");
    r.cmd(&["tick"]).env("FOO", bad).assert().success();
    r.cmd(&["tick"])
        .env("COORD_KEY_WRITER", bad)
        .assert()
        .success();
}

#[test]
fn a_hanging_endpoint_never_delays_a_healthy_one() {
    let r = TestRepo::with_agents(&["writer"]);
    let healthy = Receiver::start(0, Duration::ZERO);
    let hanging = Receiver::start(0, Duration::from_secs(60));
    let extra = format!(
        "  slow:\n    url: {}\n    retry: {{base: 200ms, max: 2s}}\n    timeout: 4s\n",
        hanging.url()
    );
    configure(&r, &healthy.url(), &extra);
    let mut w = watch(&r);
    wait_cursor(&r, "slow", 0);
    drop_tasks(&r, 4);
    let start = Instant::now();
    healthy.wait(Duration::from_secs(30), "the healthy endpoint", |ids| {
        ids.len() >= 9
    });
    let took = start.elapsed();
    w.kill().expect("kill");
    w.wait().expect("reaped");
    assert!(
        took < Duration::from_secs(4),
        "the healthy one took {took:?}"
    );
}

/// A remote whose main holds coord.yaml with the endpoint `ops` (see [`configure`]), the
/// agent `alice`, and the person's clone that seeded it.
fn cron_net(url: &str, extra: &str) -> Net {
    let net = Net::new(&["alice"]);
    configure(&net.seed, url, extra);
    net.seed.git(&["push", "-q", "origin", "main"]);
    net
}

/// A clone of depth 1, as actions/checkout makes for each run of the workflow.
fn checkout(net: &Net) -> TestRepo {
    let r = TestRepo::empty_in_memory();
    let url = format!("file://{}", net.remote.path().display());
    git_in(r.path(), &["clone", "-q", "--depth", "1", &url, "."]);
    r
}

/// One run of the cron job in `r`: `coord sync` with `flags`, the secret in its environment;
/// returns its stderr and how long it took.
fn cron_sync(r: &TestRepo, flags: &[&str]) -> (String, Duration) {
    let args: Vec<&str> = ["sync"].iter().chain(flags).copied().collect();
    let start = Instant::now();
    let out = r
        .cmd(&args)
        .env("HOOK_SECRET", SECRET)
        .output()
        .expect("coord sync");
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "coord {args:?}: {stderr}");
    (stderr, took)
}

/// The agent's clone completes every task assigned to it and syncs (delivering nothing).
fn agent_completes(agent: &TestRepo) -> usize {
    agent.ok(&["sync"]);
    let dir = agent.abs("work/assigned/alice");
    let ids: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".yaml").map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    for id in &ids {
        agent.ok(&["complete", id]);
    }
    agent.ok(&["sync"]);
    ids.len()
}

/// Asserts that the receiver took every event once by id: each id names one transition
/// and each transition one id, the ids run from 1 without a gap, and `expected` transitions
/// came; returns how many deliveries there were.
fn assert_each_once(receiver: &Receiver, expected: usize) -> usize {
    let ok: Vec<Hit> = receiver
        .hits()
        .into_iter()
        .filter(|h| h.status == 200)
        .collect();
    let mut by_id: BTreeMap<u64, BTreeSet<(String, String, String)>> = BTreeMap::new();
    let mut by_key: BTreeMap<(String, String, String), BTreeSet<u64>> = BTreeMap::new();
    for h in &ok {
        let v = h.json();
        assert_eq!(
            v["id"].as_u64(),
            Some(h.id()),
            "the body names the header's id"
        );
        let s = |k: &str| v[k].as_str().unwrap_or("none").to_string();
        let key = (s("task"), s("from"), s("to"));
        by_id.entry(h.id()).or_default().insert(key.clone());
        by_key.entry(key).or_default().insert(h.id());
        assert!(verifies(h, &h.body), "signed: {h:?}");
    }
    let twice: Vec<_> = by_id.iter().filter(|(_, k)| k.len() > 1).collect();
    assert!(twice.is_empty(), "an id for two transitions: {twice:?}");
    let split: Vec<_> = by_key.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(split.is_empty(), "a transition under two ids: {split:?}");
    let ids: Vec<u64> = by_id.keys().copied().collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "ids from 1, no gap"
    );
    assert_eq!(
        by_key.len(),
        expected,
        "every transition: {:?}",
        by_key.keys()
    );
    ok.len()
}

#[test]
fn a_cron_loop_of_one_shot_syncs_delivers_every_transition_once() {
    let receiver = Receiver::start(0, Duration::ZERO);
    let net = cron_net(&receiver.url(), "");
    let (cron, agent) = (net.clone(), net.clone());
    cron_sync(&cron, &["--webhooks"]);
    let mut expected = 0;
    for round in 0..4 {
        expected += 3 * net.person_adds(&format!("r{round}"), 5).len();
        cron_sync(&cron, &["--webhooks"]);
        expected += agent_completes(&agent);
        cron_sync(&cron, &["--webhooks"]);
    }
    let deliveries = assert_each_once(&receiver, expected);
    assert_eq!(deliveries, expected, "each delivered once");
}

#[test]
fn cron_runs_from_fresh_clones_neither_flood_nor_lose_with_a_receiver_failing_a_while() {
    // The first five tries fail: the first run with events ends before its retries do.
    let receiver = Receiver::start(5, Duration::ZERO);
    let net = cron_net(&receiver.url(), "    max_attempts: 20\n");
    let agent = net.clone();
    cron_sync(&checkout(&net), &["--webhooks"]);
    let mut expected = 3 * net.person_adds("first", 5).len();
    let (said, _) = cron_sync(&checkout(&net), &["--webhooks-for", "1s"]);
    assert!(receiver.delivered().is_empty(), "still failing");
    assert!(said.contains("pending"), "{said}");
    for round in 0..3 {
        expected += 3 * net.person_adds(&format!("r{round}"), 4).len();
        cron_sync(&checkout(&net), &["--webhooks-for", "10s"]);
        expected += agent_completes(&agent);
        cron_sync(&checkout(&net), &["--webhooks-for", "10s"]);
    }
    let deliveries = assert_each_once(&receiver, expected);
    assert!(
        deliveries <= expected + 2,
        "{deliveries} deliveries of {expected} events: a fresh clone floods"
    );
}

#[test]
fn a_one_shot_sync_never_hangs_on_a_dead_receiver_and_its_events_wait() {
    let hanging = Receiver::start(0, Duration::from_secs(60));
    let net = cron_net(&hanging.url(), "    max_attempts: 20\n");
    let config = net
        .seed
        .read("coord.yaml")
        .replace("timeout: 5s", "timeout: 1s");
    net.seed
        .commit_file("coord.yaml", &config, "a short timeout");
    net.seed.git(&["push", "-q", "origin", "main"]);
    let cron = net.clone();
    cron_sync(&cron, &["--webhooks"]);
    net.person_adds("late", 2);
    let (said, took) = cron_sync(&cron, &["--webhooks-for", "2s"]);
    assert!(took < Duration::from_secs(8), "took {took:?}: {said}");
    assert!(said.contains("pending"), "{said}");
    let listed = cron.json(&["webhooks"]);
    let ops = &listed["endpoints"][0];
    assert_eq!(ops["name"], "ops", "{listed}");
    assert!(ops["pending"].as_u64() >= Some(6), "{listed}");
    assert!(ops["failures"].as_u64() >= Some(1), "{listed}");
}

#[test]
fn a_one_shot_tick_delivers_its_transitions() {
    let r = TestRepo::with_agents(&["writer --max-active 10"]);
    let receiver = Receiver::start(0, Duration::ZERO);
    configure(&r, &receiver.url(), "");
    r.cmd(&["tick", "--webhooks"])
        .env("HOOK_SECRET", SECRET)
        .assert()
        .success();
    drop_tasks(&r, 2);
    r.cmd(&["tick", "--webhooks"])
        .env("HOOK_SECRET", SECRET)
        .assert()
        .success();
    assert_each_once(&receiver, 6);
}

#[test]
fn coord_webhooks_lists_endpoints_and_retry_resends_dead_letters() {
    let r = TestRepo::with_agents(&["writer --max-active 10"]);
    // Every event fails its one try, then the receiver is fixed.
    let receiver = Receiver::start(3, Duration::ZERO);
    configure(&r, &receiver.url(), "    max_attempts: 1\n");
    let tick = |r: &TestRepo| {
        r.cmd(&["tick", "--webhooks"])
            .env("HOOK_SECRET", SECRET)
            .assert()
            .success();
    };
    tick(&r);
    drop_tasks(&r, 1);
    tick(&r);
    assert!(receiver.delivered().is_empty());
    let listed = r.json(&["webhooks"]);
    let ops = &listed["endpoints"][0];
    assert_eq!(
        (&ops["name"], &ops["pending"], &ops["dead_letters"]),
        (&"ops".into(), &0.into(), &3.into()),
        "{listed}"
    );
    let text = r.ok(&["webhooks"]);
    assert!(
        text.contains(&receiver.url()) && text.contains("3 dead"),
        "{text}"
    );
    let (_, err) = r.code(&["webhooks", "retry", "nope"], 2);
    assert!(err.contains("no webhook 'nope'"), "{err}");
    let out = r
        .cmd(&["--json", "webhooks", "retry", "ops"])
        .env("HOOK_SECRET", SECRET)
        .output()
        .expect("retry");
    assert!(out.status.success(), "{out:?}");
    let retried: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        retried["sent"].as_array().map(Vec::len),
        Some(3),
        "{retried}"
    );
    assert_eq!(receiver.delivered(), BTreeSet::from([1, 2, 3]));
    assert!(
        receiver.hits().iter().all(|h| verifies(h, &h.body)),
        "signed"
    );
    assert_eq!(r.json(&["webhooks"])["endpoints"][0]["dead_letters"], 0);
    assert!(
        !r.ok(&["status"]).contains("webhook ops"),
        "no problem left"
    );
}

#[test]
fn a_one_shot_sync_leaves_delivery_to_the_watch_of_its_clone() {
    let receiver = Receiver::start(0, Duration::ZERO);
    let net = cron_net(&receiver.url(), "");
    let cron = net.clone();
    let mut w = watch(&cron);
    wait_cursor(&cron, "ops", 0);
    let added = net.person_adds("w", 3).len();
    let out = cron
        .cmd(&["--wait", "30s", "sync", "--webhooks"])
        .env("HOOK_SECRET", SECRET)
        .output()
        .expect("coord sync");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("another process of this clone delivers"),
        "{said}"
    );
    receiver.wait(Duration::from_secs(30), "the watch delivers", |ids| {
        ids.len() >= 3 * added
    });
    std::thread::sleep(Duration::from_millis(500));
    w.kill().expect("kill");
    w.wait().expect("reaped");
    assert_each_once(&receiver, 3 * added);
}
