//! A write a server answered is in every read that starts after the answer: the task, the
//! lists, the board, on a plain `coord serve` and on a hub, whether the write succeeded or was
//! refused after keeping something (a stale result), and whatever the server's own reading of
//! the repository is doing meanwhile.

use crate::harness::TestRepo;
use crate::http::{Resp, Server};
use crate::hub::{fleet, Hub};
use serde_json::{json, Value};

/// How many writes each test reads back.
const ROUNDS: usize = 8;

/// Tasks besides those written and read back, so that each reading takes a while.
const BULK: usize = 300;

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// Adds `n` ready tasks `t0…` for agent `w` and the bulk, committed by one tick.
fn seed(r: &TestRepo, n: usize) {
    for i in 0..n {
        r.write(&format!("work/inbox/t{i}.yaml"), &format!("title: T{i}\n"));
    }
    for i in 0..BULK {
        r.write(
            &format!("work/inbox/bulk{i}.yaml"),
            &format!("title: Bulk {i}\n"),
        );
    }
    r.ok(&["tick"]);
}

/// Returns the ids of a `GET /v1/tasks` page.
fn ids(page: &Resp) -> Vec<String> {
    let items = page.json()["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|t| t["id"].as_str().map(str::to_string))
        .collect()
}

/// Returns how many `stale_result` entries task `t` (as `GET /v1/tasks/{id}` answers) has.
fn stale_results(t: &Value) -> usize {
    let history = t["task"]["coord"]["history"].as_array().cloned();
    history
        .unwrap_or_default()
        .iter()
        .filter(|h| h["event"] == "stale_result")
        .count()
}

/// One server under test: a GET and a POST with headers.
trait Api {
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp;
    fn origin(&self) -> String;
}

impl Api for Server {
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        self.req(method, path, headers, body)
    }
    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Api for Hub {
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        crate::http::request(&self.addr, method, path, headers, body.as_bytes())
    }
    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Claims, completes, reports a stale result for and adds a task each round, reading each
/// write back at once through the task, the filtered list and the board.
fn reads_follow_writes(s: &dyn Api) {
    let post = |path: &str, body: Value| s.send("POST", path, &[], &body.to_string());
    let get = |path: &str| s.send("GET", path, &[], "");
    let origin = s.origin();
    for i in 0..ROUNDS {
        let id = format!("t{i}");
        let claimed = post(&format!("/v1/tasks/{id}/claim"), json!({"agent": "w"}));
        assert_eq!(claimed.status, 200, "claim {id}: {}", claimed.body);
        let epoch = claimed.json()["epoch"].clone();
        let shown = get(&format!("/v1/tasks/{id}"));
        assert_eq!(
            shown.json()["state"],
            "assigned",
            "round {i}: the claim answered 200 but the read shows {}",
            shown.body
        );
        let listed = ids(&get("/v1/tasks?state=assigned&limit=1000"));
        assert!(
            listed.contains(&id),
            "round {i}: the claim answered 200 but assigned lists {listed:?}"
        );

        let report = |attempt: u32| {
            let body = json!({"agent": "w", "attempt": attempt, "epoch": epoch});
            post(&format!("/v1/tasks/{id}/complete"), body)
        };
        let stale = report(7);
        assert_eq!(stale.status, 409, "stale report {id}: {}", stale.body);
        let kept = get(&format!("/v1/tasks/{id}")).json();
        assert_eq!(
            stale_results(&kept),
            1,
            "round {i}: the stale result was kept before the 409 but the read lacks it: {kept}"
        );

        let done = report(1);
        assert_eq!(done.status, 200, "complete {id}: {}", done.body);
        let result = get(&format!("/v1/tasks/{id}")).json();
        assert_eq!(
            result["task"]["result"]["attempt"], 1,
            "round {i}: the result answered 200 but the read lacks it: {result}"
        );

        let title = format!("Added {i}");
        let form = format!("title=Added+{i}&back=%2F");
        let headers = [FORM, ("Origin", origin.as_str())];
        let made = s.send("POST", "/tasks", &headers, &form);
        assert_eq!(made.status, 303, "new task form: {}", made.body);
        let board = get("/v1/board").body;
        assert!(
            board.contains(&title),
            "round {i}: the form answered 303 but the board lacks {title:?}"
        );
    }
}

#[test]
fn a_plain_servers_reads_show_every_write_it_answered() {
    let r = TestRepo::with_agents(&["w --pull --max-active 1000"]);
    seed(&r, ROUNDS);
    let s = Server::start(&r);
    reads_follow_writes(&s);
}

#[test]
fn a_hubs_reads_show_every_write_it_answered() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 1m}", ROUNDS);
    let clone = net.clone();
    for i in 0..BULK {
        clone.write(
            &format!("work/inbox/bulk{i}.yaml"),
            &format!("title: Bulk {i}\n"),
        );
    }
    clone.ok(&["tick"]);
    let hub = Hub::start(&clone);
    reads_follow_writes(&hub);
}
