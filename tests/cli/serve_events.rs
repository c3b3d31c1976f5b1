//! `/v1/events` exact and resumable, through the real binary: event ids from the clone's
//! event journal that stay valid across restarts, `Last-Event-ID` and `since` resuming with
//! no loss and no duplicate (also when the server is killed while it appends to the journal),
//! rewritten history (amend, reset, a sync's replay, a force-push
//! fetched by sync) publishing only the transitions that really changed, and `/metrics`
//! counting the transitions in history.

use crate::harness::{Net, Rng, TestRepo};
use crate::http::Server;
use crate::http_client::{Events, Sent};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// A transition as (task, from, to, op).
type Key = (String, String, String, String);

fn key(v: &Value) -> Key {
    let s = |k: &str| v[k].as_str().unwrap_or("none").to_string();
    (s("task"), s("from"), s("to"), s("op"))
}

/// Ten tasks dropped in the inbox and a tick: twenty transitions (inbox, ready, assigned).
fn round(r: &TestRepo, n: usize) {
    for i in 0..10 {
        r.task(&format!("t{n}-{i}"), "title: A task\n");
    }
    r.ok(&["tick"]);
}

/// Reads until `n` transitions came; fails the test after 30 s.
fn read(ev: &mut Events, n: usize) {
    let enough = ev.until(Duration::from_secs(30), |t| {
        t.matches("event: transition").count() >= n && t.ends_with("\n\n")
    });
    assert!(enough, "fewer than {n} transitions:\n{}", ev.seen);
}

/// The transitions of `coord log --json` (newest first there), oldest first.
fn logged(r: &TestRepo) -> Vec<Key> {
    let log = r.json(&["log", "--json"]);
    let mut keys: Vec<Key> = log["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(key)
        .collect();
    keys.reverse();
    keys
}

/// Asserts the ids increase one by one (none missing, none sent twice); returns the keys.
fn in_order(seen: &[Sent]) -> Vec<Key> {
    let ids: Vec<u64> = seen
        .iter()
        .map(|e| e.id.expect("a transition has an id"))
        .collect();
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "ids in order, none missing or repeated: {ids:?}"
    );
    seen.iter().map(|e| key(&e.data)).collect()
}

/// Asserts the ids increase one by one and no transition comes twice; returns the keys.
fn exactly_once(seen: &[Sent]) -> Vec<Key> {
    let keys = in_order(seen);
    let distinct: BTreeSet<&Key> = keys.iter().collect();
    assert_eq!(
        distinct.len(),
        keys.len(),
        "a transition came twice: {keys:?}"
    );
    keys
}

fn sample_sum(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn events_resume_after_a_disconnect_and_a_restart_with_every_transition_once() {
    let r = TestRepo::with_agents(&["writer --max-active 1000"]);
    let s = Server::start(&r);
    let mut first = s.events();
    for n in 0..2 {
        round(&r, n);
    }
    read(&mut first, 60);
    // The client goes while the next round streams, then the server stops.
    round(&r, 2);
    let before = first.transitions();
    drop(first);
    for n in 3..5 {
        round(&r, n);
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(s);
    // Transitions made while no server runs are the journal's too.
    for n in 5..7 {
        round(&r, n);
    }
    let history: Vec<Key> = logged(&r)
        .into_iter()
        .filter(|k| k.0.starts_with('t'))
        .collect();
    assert_eq!(
        history.len(),
        7 * 30,
        "each task added, made ready, assigned"
    );
    let s = Server::start(&r);
    let last = before.last().and_then(|e| e.id).expect("an id");
    let header = format!("Last-Event-ID: {last}\r\n");
    let mut resumed = Events::open_at(&s.addr, "/v1/events", &header);
    read(&mut resumed, history.len() - before.len());
    let mut all = before.clone();
    all.extend(resumed.transitions());
    let keys = exactly_once(&all);
    assert_eq!(
        keys, history,
        "every transition of history, in its order, once"
    );
    let mut by_query = Events::open_at(&s.addr, &format!("/v1/events?since={last}"), "");
    read(&mut by_query, history.len() - before.len());
    assert_eq!(
        by_query.transitions(),
        resumed.transitions(),
        "since= is Last-Event-ID"
    );
    let bad = s.req("GET", "/v1/events?since=abc", &[], "");
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
fn events_survive_kills_of_the_server_while_transitions_stream() {
    let r = TestRepo::with_agents(&["writer --max-active 1000"]);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64 | 1);
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let s = Server::start(&r);
    let mut ev = s.events();
    r.task("base", "title: A task\n");
    r.ok(&["tick"]);
    read(&mut ev, 3);
    let mut seen = ev.transitions();
    drop(s);
    let open = |s: &Server, seen: &[Sent]| {
        let last = seen.last().and_then(|e| e.id).expect("an id");
        Events::open_at(&s.addr, "/v1/events", &format!("Last-Event-ID: {last}\r\n"))
    };
    for n in 0..6 {
        let s = Server::start(&r);
        let mut ev = open(&s, &seen);
        for i in 0..10 {
            r.task(&format!("t{n}-{i}"), "title: A task\n");
        }
        // The tick commits while the server reads history and appends to its journal; the
        // server is killed at a random point of that.
        let mut tick = r.spawn(&["tick"]);
        let wait = 300 + rng.below(1500);
        ev.until(Duration::from_millis(wait), |_| false);
        drop(s);
        assert!(tick.wait().expect("tick").success());
        let got = ev.transitions();
        eprintln!(
            "session {n}: killed after {wait} ms, {} transitions sent",
            got.len()
        );
        seen.extend(got);
    }
    let history: Vec<Key> = logged(&r)
        .into_iter()
        .filter(|k| k.0.starts_with('t') || k.0 == "base")
        .collect();
    assert_eq!(
        history.len(),
        3 + 6 * 30,
        "each task added, made ready, assigned"
    );
    let s = Server::start(&r);
    let mut last = open(&s, &seen);
    read(&mut last, history.len() - seen.len());
    last.until(Duration::from_millis(500), |_| false);
    seen.extend(last.transitions());
    let keys = exactly_once(&seen);
    assert_eq!(
        keys, history,
        "every transition of history, in its order, once (seed {seed})"
    );
    let m = s.get("/metrics").body;
    assert_eq!(
        sample_sum(&m, "coord_transitions_total{"),
        logged(&r).len() as f64,
        "the counters count each transition of history once: {m}"
    );
    let journal = std::fs::read_to_string(r.abs(".git/coord/events/log.jsonl")).expect("journal");
    let ids: Vec<u64> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["id"].as_u64())
        .collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "the journal holds each id once"
    );
}

#[test]
fn events_after_amend_reset_and_restart_are_the_real_changes_and_metrics_match_the_log() {
    let r = TestRepo::with_agents(&["writer --max-active 100"]);
    for id in ["a", "b"] {
        r.task(id, "title: A task\n");
    }
    r.ok(&["tick"]);
    let s = Server::start(&r);
    let mut ev = s.events();
    r.task("c", "title: A task\n");
    r.ok(&["tick"]);
    read(&mut ev, 3);
    // A person amends coord's last commit; then drops it.
    r.write("notes.txt", "notes\n");
    r.git(&["add", "notes.txt"]);
    r.git(&["commit", "-q", "--amend", "--no-edit"]);
    let board_at = |ev: &mut Events, head: &str| {
        let head = format!(r#""head":"{}""#, head.trim());
        let seen = ev.until(Duration::from_secs(10), |t| t.contains(&head));
        assert!(seen, "no board event at {head}:\n{}", ev.seen);
    };
    board_at(&mut ev, &r.git(&["rev-parse", "HEAD"]));
    r.git(&["reset", "-q", "--hard", "HEAD~1"]);
    board_at(&mut ev, &r.git(&["rev-parse", "HEAD"]));
    r.task("d", "title: A task\n");
    r.ok(&["tick"]);
    read(&mut ev, 7);
    // Long enough for a change no commit explains to be reported (2 s).
    ev.until(Duration::from_secs(3), |_| false);
    let got: Vec<(String, String, String)> = in_order(&ev.transitions())
        .into_iter()
        .map(|k| (k.0, k.1, k.2))
        .collect();
    let t = |task: &str, from: &str, to: &str| (task.to_string(), from.to_string(), to.to_string());
    // The reset took c back to ready (the tick's last commit assigned it): the next tick
    // assigns it again, a real change.
    let expected = [
        t("c", "none", "inbox"),
        t("c", "inbox", "ready"),
        t("c", "ready", "assigned"),
        t("d", "none", "inbox"),
        t("d", "inbox", "ready"),
        t("c", "ready", "assigned"),
        t("d", "ready", "assigned"),
    ];
    assert_eq!(got, expected, "{}", ev.seen);
    let transitions = logged(&r).len() as f64;
    let m = s.get("/metrics").body;
    assert_eq!(
        sample_sum(&m, "coord_transitions_total{"),
        transitions,
        "{m}"
    );
    let last = ev.transitions().last().and_then(|e| e.id).expect("an id");
    drop(s);
    let s = Server::start(&r);
    let m = s.get("/metrics").body;
    assert_eq!(
        sample_sum(&m, "coord_transitions_total{"),
        transitions,
        "{m}"
    );
    let header = format!("Last-Event-ID: {last}\r\n");
    let mut after = Events::open_at(&s.addr, "/v1/events", &header);
    after.until(Duration::from_secs(2), |_| false);
    assert_eq!(after.transitions(), [], "nothing happened since");
    // A deleted journal starts ids again at 1: an id past its last starts afresh.
    drop(after);
    drop(s);
    std::fs::remove_dir_all(r.abs(".git/coord/events")).expect("delete the journal");
    let s = Server::start(&r);
    let mut afresh = Events::open_at(&s.addr, "/v1/events", &header);
    r.task("e", "title: A task\n");
    r.ok(&["tick"]);
    read(&mut afresh, 3);
    let tasks: Vec<String> = in_order(&afresh.transitions())
        .into_iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(tasks, ["e", "e", "e"], "{}", afresh.seen);
}

#[test]
fn events_after_a_sync_replay_and_a_fetched_force_push_are_the_real_changes() {
    let net = Net::new(&["writer"]);
    let a = net.clone();
    let s = Server::start(&a);
    let mut ev = s.events();
    // A local transition, then a sync that replays it onto what the remote got meanwhile.
    a.task("local", "title: A task\n");
    a.ok(&["tick"]);
    read(&mut ev, 3);
    net.person_adds("p", 2);
    a.ok(&["sync"]);
    read(&mut ev, 3 + 2 * 3);
    // A person adds a task; the sync assigns it; then the person rewords their commit and
    // force-pushes it over the sync's; the next sync fetches it and replays its own commits.
    net.person_adds("q", 1);
    a.ok(&["sync"]);
    read(&mut ev, 3 + 2 * 3 + 3);
    net.seed
        .git(&["commit", "-q", "--amend", "-m", "add q tasks, reworded"]);
    net.seed.git(&["push", "-q", "--force", "origin", "main"]);
    a.ok(&["sync"]);
    let head = format!(r#""head":"{}""#, a.git(&["rev-parse", "HEAD"]).trim());
    let synced = ev.until(Duration::from_secs(10), |t| t.contains(&head));
    assert!(synced, "no board event at {head}:\n{}", ev.seen);
    ev.until(Duration::from_secs(3), |_| false);
    let keys = exactly_once(&ev.transitions());
    let tasks: BTreeSet<&str> = keys.iter().map(|k| k.0.as_str()).collect();
    assert_eq!(
        tasks,
        BTreeSet::from(["local", "p-0", "p-1", "q-0"]),
        "{}",
        ev.seen
    );
    assert_eq!(keys.len(), 4 * 3, "{keys:?}");
}
