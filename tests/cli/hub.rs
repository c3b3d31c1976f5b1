//! `coord serve --hub` end to end: a bare remote, the hub on a clone of it, agents over HTTP;
//! writes committed at once and pushed in batches within the budget, the lease on the remote
//! (a second hub refused, a lapsed lease taken over in the next epoch, the old hub stopping),
//! and results for grants of an older epoch kept as `stale_result`.

use crate::harness::{git_in, Net, TestRepo};
use crate::http::{request, Resp};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A remote whose coord.yaml sets `hub:` and whose main holds `n` ready tasks `t0…`.
pub(crate) fn fleet(hub: &str, n: usize) -> Net {
    let net = Net::new(&[]);
    for agent in ["w", "v"] {
        net.seed
            .ok(&["agents", "add", agent, "--pull", "--max-active", "1000"]);
    }
    let yaml = net.seed.read("coord.yaml");
    net.seed.write("coord.yaml", &format!("{yaml}hub: {hub}\n"));
    net.seed.git(&["commit", "-q", "-am", "a hub"]);
    for i in 0..n {
        net.seed
            .ok(&["new", &format!("Task {i}"), "--id", &format!("t{i}")]);
    }
    net.seed.ok(&["tick"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    net
}

/// A running `coord serve --hub`, its stderr kept in a file; killed when dropped.
pub(crate) struct Hub {
    child: Child,
    pub(crate) addr: String,
    stderr: std::path::PathBuf,
}

impl Hub {
    /// Starts the hub in `clone` and waits for its address; panics with its stderr if it
    /// exits instead.
    pub(crate) fn start(clone: &TestRepo) -> Hub {
        Hub::try_start(clone).unwrap_or_else(|(code, err)| panic!("hub exited {code:?}: {err}"))
    }

    /// Starts the hub; its exit code and stderr when it does not serve.
    fn try_start(clone: &TestRepo) -> Result<Hub, (Option<i32>, String)> {
        Hub::try_start_with(clone, &[])
    }

    /// Starts the hub with more arguments (`--tick`); its exit code and stderr when it does
    /// not serve.
    fn try_start_with(clone: &TestRepo, more: &[&str]) -> Result<Hub, (Option<i32>, String)> {
        let stderr = clone.home().join(format!("hub-{}.err", std::process::id()));
        let file = std::fs::File::create(&stderr).expect("stderr file");
        let mut args = vec!["serve", "--hub", "--listen", "127.0.0.1:0"];
        args.extend(more);
        let mut cmd = clone.spawn_cmd(&args);
        cmd.stdout(Stdio::piped()).stderr(file);
        let mut child = cmd.spawn().expect("spawn coord serve --hub");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("read");
        match line.trim().strip_prefix("http://") {
            Some(addr) => Ok(Hub {
                addr: addr.to_string(),
                child,
                stderr,
            }),
            None => {
                let code = child.wait().expect("wait").code();
                Err((code, std::fs::read_to_string(&stderr).unwrap_or_default()))
            }
        }
    }

    pub(crate) fn post(&self, path: &str, body: Value) -> Resp {
        request(&self.addr, "POST", path, &[], body.to_string().as_bytes())
    }

    pub(crate) fn claim(&self, id: &str, agent: &str) -> Value {
        let r = self.post(&format!("/v1/tasks/{id}/claim"), json!({"agent": agent}));
        assert_eq!(r.status, 200, "claim {id}: {}", r.body);
        r.json()
    }

    pub(crate) fn task(&self, id: &str) -> Value {
        request(&self.addr, "GET", &format!("/v1/tasks/{id}"), &[], b"").json()
    }

    /// Waits up to `within` for the hub to exit; its code.
    fn exited(&mut self, within: Duration) -> Option<i32> {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub(crate) fn kill_9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends the hub `SIG<name>` (STOP, CONT).
    fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        let sent = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill -{name} {pid}");
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Returns the remote's main: the folder of task `id`'s file, or "" when it has none.
pub(crate) fn remote_place(net: &Net, id: &str) -> String {
    let files = git_in(
        net.remote.path(),
        &["ls-tree", "-r", "--name-only", "main", "work"],
    );
    files
        .lines()
        .find(|l| l.ends_with(&format!("/{id}.yaml")))
        .map(|l| l.rsplit_once('/').map_or("", |(d, _)| d).to_string())
        .unwrap_or_default()
}

/// Makes every later push from `clone` to its remote fail, as an unreachable remote does.
pub(crate) fn block_pushes(clone: &TestRepo) {
    let body = "echo 'remote unreachable' >&2\nexit 1";
    clone.wrap_remote_program("receivepack", "blocked-pushes", body);
}

/// Waits up to `within` for `done`.
pub(crate) fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

/// Makes every push of `clone` to its remote append a line to the returned file.
fn count_pushes(clone: &TestRepo) -> std::path::PathBuf {
    let pushes = clone.home().join("pushes");
    let count = format!(
        "echo push >> '{}'\nexec git-receive-pack \"$@\"",
        pushes.display()
    );
    clone.wrap_remote_program("receivepack", "count-pushes", &count);
    pushes
}

#[test]
fn hub_commits_each_write_at_once_and_pushes_them_in_batches_within_the_budget() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 1m}", 10);
    let clone = net.clone();
    let pushes = count_pushes(&clone);
    let started = Instant::now();
    let hub = Hub::start(&clone);
    for i in 0..10 {
        let before = clone.commit_count();
        let receipt = hub.claim(&format!("t{i}"), "w");
        assert_eq!(receipt["epoch"], 1, "{receipt}");
        assert_eq!(receipt["attempt"], 1, "{receipt}");
        assert!(
            clone.commit_count() > before,
            "claim {i} not committed at once"
        );
    }
    let all_there = eventually(Duration::from_secs(20), || {
        (0..10).all(|i| remote_place(&net, &format!("t{i}")) == "work/assigned/w")
    });
    assert!(all_there, "the claims did not all reach the remote");
    let ids = net.person_adds("p", 1);
    let integrated = eventually(Duration::from_secs(20), || {
        hub.task(&ids[0])["state"] == "ready"
    });
    assert!(integrated, "the person's task was not integrated");
    let seconds = started.elapsed().as_secs_f64();
    let pushed = std::fs::read_to_string(&pushes).unwrap_or_default();
    let n = pushed.lines().count();
    // One push takes the lease; then at most one a second (60 a minute).
    assert!(n as f64 <= seconds + 2.0, "{n} pushes in {seconds:.1} s");
    assert!(n < 10, "10 claims took {n} pushes: not batched");
}

#[test]
fn a_second_hub_an_hour_ahead_is_refused_while_the_lease_is_renewed_and_a_restarted_hub_keeps_its_epoch(
) {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 6s}", 3);
    let first = net.clone();
    let hub = Hub::start(&first);
    assert_eq!(hub.claim("t0", "w")["epoch"], 1);
    let landed = eventually(Duration::from_secs(20), || {
        remote_place(&net, "t0") == "work/assigned/w"
    });
    assert!(landed, "the first hub's grant did not reach the remote");
    // Its clock says the first hub's lease lapsed an hour ago: it must not decide.
    let mut second = net.clone();
    second.at("2026-11-22T11:00:00Z");
    let (code, err) = match Hub::try_start(&second) {
        Err(refused) => refused,
        Ok(_) => panic!("a second hub took the lease while the first renewed it"),
    };
    assert_ne!(code, Some(0));
    let line = err.lines().last().unwrap_or_default();
    let holder = first.path().display().to_string();
    assert!(
        line.contains("another hub holds the lease") && line.contains(&holder),
        "{err}"
    );
    // The first hub still grants in its epoch, and its grant stands.
    assert_eq!(hub.claim("t1", "v")["epoch"], 1);
    assert_eq!(hub.task("t0")["state"], "assigned");
    drop(hub);
    let again = Hub::start(&first);
    assert_eq!(again.claim("t2", "w")["epoch"], 1);
}

#[test]
fn a_hub_that_stops_renewing_is_taken_over_after_a_whole_lease_and_its_grants_get_a_full_lease_on_the_new_clock(
) {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 6s}", 2);
    let old = net.clone();
    let mut first = Hub::start(&old);
    assert_eq!(first.claim("t0", "w")["epoch"], 1);
    let landed = eventually(Duration::from_secs(20), || {
        remote_place(&net, "t0") == "work/assigned/w"
    });
    assert!(landed, "the old hub's grant did not reach the remote");
    first.signal("STOP");
    // A push the hub had started finishes in its own process.
    std::thread::sleep(Duration::from_secs(1));
    let mut newer = net.clone();
    newer.at("2026-11-22T11:00:00Z");
    let waited = Instant::now();
    let second = Hub::start(&newer);
    assert!(
        waited.elapsed() >= Duration::from_secs(6),
        "took over after {:?}, before a whole lease without renewal",
        waited.elapsed()
    );
    assert_eq!(second.claim("t1", "v")["epoch"], 2);
    // The old hub's grant was written an hour before by the new hub's clock; it stands.
    assert_eq!(second.task("t0")["state"], "assigned");
    first.signal("CONT");
    let code = first.exited(Duration::from_secs(20));
    assert!(code.is_some_and(|c| c != 0), "the old hub did not stop");
    let err = first.stderr();
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("a newer hub holds the lease") && last.contains("epoch 2"),
        "{err}"
    );
    assert_eq!(err.matches("newer hub").count(), 1, "{err}");
    drop(second);
    assert_eq!(remote_place(&net, "t0"), "work/assigned/w");
    // The inherited grant's 30m lease runs from the takeover, by the new hub's clock.
    newer.at("2026-11-22T11:29:00Z").ok(&["tick"]);
    assert_eq!(newer.where_is("t0"), "work/assigned/w/t0.yaml");
    newer.at("2026-11-22T11:31:00Z").ok(&["tick"]);
    let after = newer.where_is("t0");
    assert!(newer.read(&after).contains("code: timeout"), "{after}");
}

#[test]
fn a_result_for_a_grant_of_an_older_epoch_is_kept_as_stale_result_and_not_credited() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 6s}", 1);
    let old = net.clone();
    let first = Hub::start(&old);
    // The old hub's pushes fail from now on: its grant stays in its clone.
    block_pushes(&old);
    let granted = first.claim("t0", "w");
    assert_eq!(
        (granted["epoch"].clone(), granted["attempt"].clone()),
        (json!(1), json!(1))
    );
    first.kill_9();
    assert_eq!(remote_place(&net, "t0"), "work/ready");

    let mut newer = net.clone();
    newer.at("2026-11-22T10:05:00Z");
    let second = Hub::start(&newer);
    let regranted = second.claim("t0", "w");
    assert_eq!(
        (regranted["epoch"].clone(), regranted["attempt"].clone()),
        (json!(2), json!(1))
    );

    let zombie = json!({"agent": "w", "attempt": 1, "epoch": 1, "output": {"from": "old"}});
    let r = second.post("/v1/tasks/t0/complete", zombie);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("stale_result"), "{}", r.body);
    let beat = second.post(
        "/v1/tasks/t0/heartbeat",
        json!({"agent": "w", "attempt": 1, "epoch": 1}),
    );
    assert_eq!(beat.status, 409, "{}", beat.body);
    let task = second.task("t0");
    assert_eq!(task["state"], "assigned", "{task}");
    let history = task["task"]["coord"]["history"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let stale = history
        .iter()
        .find(|h| h["event"] == "stale_result")
        .unwrap_or_else(|| panic!("no stale_result in {task}"));
    assert_eq!(stale["result"]["epoch"], 1);
    assert!(task["task"].get("result").is_none(), "credited: {task}");

    let current = json!({"agent": "w", "attempt": 1, "epoch": 2, "output": {"from": "new"}});
    let r = second.post("/v1/tasks/t0/complete", current);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["recorded"], true, "{}", r.body);
    let task = second.task("t0");
    assert_eq!(task["task"]["result"]["output"]["from"], "new", "{task}");
}

/// Claims over HTTP through a hub cost about what the CLI's claims cost at 2,000 tasks (a
/// plain `coord serve` reads the whole repository again after each: about 9 times as long),
/// and concurrent claims queue in the hub instead of answering 503.
#[test]
fn hub_claims_at_2000_tasks_cost_about_what_cli_claims_cost_and_never_answer_503() {
    let n = 2000;
    let net = Net::new(&[]);
    let seed = &net.seed;
    seed.ok(&["agents", "add", "w", "--pull", "--max-active", "1000"]);
    let yaml = seed.read("coord.yaml");
    seed.write("coord.yaml", &format!("{yaml}hub: {{remote: origin}}\n"));
    for i in 0..n {
        seed.task(&format!("t{i}"), &format!("title: Task {i}\n"));
    }
    seed.git(&["add", "-A"]);
    seed.git(&["commit", "-q", "-m", "people drop tasks"]);
    seed.ok(&["tick"]);
    seed.git(&["push", "-q", "origin", "main"]);
    let cli = net.clone();
    cli.ok(&["status"]);
    let started = Instant::now();
    for _ in 0..5 {
        cli.ok(&["claim", "--agent", "w"]);
    }
    let by_cli = started.elapsed().as_secs_f64();

    let clone = net.clone();
    let hub = Hub::start(&clone);
    let started = Instant::now();
    for i in 0..5 {
        hub.claim(&format!("t{i}"), "w");
    }
    let by_hub = started.elapsed().as_secs_f64();
    eprintln!("5 claims at {n} tasks: CLI {by_cli:.2} s, hub over HTTP {by_hub:.2} s");
    // Alone about 0.3-1.3 times the CLI's; a plain `coord serve` takes about 9 times. Other
    // tests running at once slow the hub's background readings more than the CLI.
    assert!(
        by_hub <= 4.0 * by_cli,
        "hub {by_hub:.2} s vs CLI {by_cli:.2} s"
    );

    let addr = hub.addr.clone();
    let racers: Vec<_> = (10..20)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let body = json!({"agent": "w"}).to_string();
                let path = format!("/v1/tasks/t{i}/claim");
                request(&addr, "POST", &path, &[], body.as_bytes()).status
            })
        })
        .collect();
    let codes: Vec<u16> = racers
        .into_iter()
        .map(|t| t.join().expect("racer"))
        .collect();
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
}

/// Sends a request with `headers`; None when the hub is down (refused, or killed before it
/// answered).
fn try_request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Option<Resp> {
    std::net::TcpStream::connect(addr).ok()?;
    let body = body.to_string();
    std::panic::catch_unwind(|| request(addr, method, path, headers, body.as_bytes())).ok()
}

/// One agent over REST: claims ready tasks and completes them with the grant's epoch until
/// none is left, riding out the hub's restarts (a claim whose answer is lost is sent again
/// with its `Idempotency-Key`, as `coord claim --hub` does); returns its ledger of (task,
/// attempt, epoch, agent).
fn agent_loop(
    addr: &std::sync::Mutex<String>,
    name: &str,
    seed: usize,
) -> Vec<(String, u64, u64, String)> {
    let mut ledger = Vec::new();
    let (mut idle, mut claims) = (0, 0);
    let at = || addr.lock().expect("addr").clone();
    while idle < 50 {
        let ready = "/v1/tasks?state=ready&limit=16";
        let Some(list) = try_request(&at(), "GET", ready, &[], &json!({})) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let items = list.json()["items"].as_array().cloned().unwrap_or_default();
        let Some(task) = items.get(seed % items.len().max(1)) else {
            idle += 1;
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        idle = 0;
        let id = task["id"].as_str().unwrap_or_default().to_string();
        let claim = json!({"agent": name});
        claims += 1;
        let key = format!("{name}-{claims}");
        let path = format!("/v1/tasks/{id}/claim");
        let r = loop {
            let sent = try_request(&at(), "POST", &path, &[("Idempotency-Key", &key)], &claim);
            match sent {
                Some(r) => break r,
                None => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        if r.status != 200 {
            continue;
        }
        let grant = r.json();
        let (attempt, epoch) = (grant["attempt"].as_u64(), grant["epoch"].as_u64());
        let (Some(attempt), Some(epoch)) = (attempt, epoch) else {
            panic!("a grant without attempt and epoch: {grant}");
        };
        let done =
            json!({"agent": name, "attempt": attempt, "epoch": epoch, "output": {"by": name}});
        let mut lost_answer = false;
        loop {
            match try_request(
                &at(),
                "POST",
                &format!("/v1/tasks/{id}/complete"),
                &[],
                &done,
            ) {
                Some(r) if r.status == 200 => {
                    ledger.push((id.clone(), attempt, epoch, name.to_string()));
                    break;
                }
                // The hub was killed after it committed the result and before it answered:
                // the retry finds the result there.
                Some(r) if r.status == 409 && lost_answer => {
                    let task = request(&at(), "GET", &format!("/v1/tasks/{id}"), &[], b"").json();
                    let result = &task["task"]["result"];
                    assert!(
                        task["state"] == "done"
                            && result["agent"] == name
                            && result["attempt"] == attempt,
                        "{name}'s result for {id} was lost: {} / {task}",
                        r.body
                    );
                    ledger.push((id.clone(), attempt, epoch, name.to_string()));
                    break;
                }
                Some(r) => panic!("{name} could not complete {id}: {} {}", r.status, r.body),
                None => {
                    lost_answer = true;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
    ledger
}

/// Eight agents over REST finish 160 tasks through one hub that is killed (-9) and started
/// again mid-run; the remote's whole history verifies clean, every task is done once with
/// the result of the agent whose ledger holds it, and the pushes stay within the budget.
#[test]
fn a_fleet_through_a_hub_killed_mid_run_loses_nothing_and_grants_nothing_twice() {
    let n = 160;
    let net = Net::new(&[]);
    let seed = &net.seed;
    let agents: Vec<String> = (0..8).map(|i| format!("a{i}")).collect();
    for a in &agents {
        seed.ok(&["agents", "add", a, "--pull", "--max-active", "1000"]);
    }
    let yaml = seed.read("coord.yaml");
    let hub_yaml = "hub: {remote: origin, pushes_per_minute: 120, lease: 1m}";
    seed.write("coord.yaml", &format!("{yaml}{hub_yaml}\n"));
    for i in 0..n {
        seed.task(&format!("t{i:03}"), &format!("title: Task {i}\n"));
    }
    seed.git(&["add", "-A"]);
    seed.git(&["commit", "-q", "-m", "people drop tasks"]);
    seed.ok(&["tick"]);
    seed.git(&["push", "-q", "origin", "main"]);

    let clone = net.clone();
    let pushes = count_pushes(&clone);
    let started = Instant::now();
    let hub = Hub::start(&clone);
    let addr = std::sync::Arc::new(std::sync::Mutex::new(hub.addr.clone()));
    let workers: Vec<_> = agents
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (addr, name) = (std::sync::Arc::clone(&addr), name.clone());
            std::thread::spawn(move || agent_loop(&addr, &name, i))
        })
        .collect();
    let done = |h: &Hub| -> usize {
        let board = request(&h.addr, "GET", "/v1/board", &[], b"");
        board.json()["counts"]["done"].as_u64().unwrap_or(0) as usize
    };
    assert!(
        eventually(Duration::from_secs(120), || done(&hub) >= n / 4),
        "the fleet made no progress"
    );
    hub.kill_9();
    let hub = Hub::start(&clone);
    *addr.lock().expect("addr") = hub.addr.clone();
    let mut ledgers = Vec::new();
    for w in workers {
        ledgers.extend(w.join().expect("agent"));
    }
    assert_eq!(done(&hub), n, "not every task is done");
    let pushed_all = eventually(Duration::from_secs(30), || {
        (0..n).all(|i| remote_place(&net, &format!("t{i:03}")) == "work/done")
    });
    assert!(pushed_all, "the remote lacks some results");
    let seconds = started.elapsed().as_secs_f64();

    let check = net.clone();
    let (verified, _) = check.code(&["verify"], 0);
    assert!(verified.trim_end().ends_with(": clean"), "{verified}");
    let mut credited = std::collections::BTreeMap::new();
    for (id, attempt, epoch, _) in &ledgers {
        assert!(
            credited.insert((id.clone(), *attempt), *epoch).is_none(),
            "({id}, {attempt}) completed twice"
        );
    }
    assert_eq!(
        credited.len(),
        n,
        "results lost: ledgers hold {}",
        credited.len()
    );
    for (id, _, _, agent) in &ledgers {
        let text = check.read(&format!("work/done/{id}.yaml"));
        assert!(text.contains(&format!("by: {agent}")), "{id}: {text}");
    }
    let n_pushes = std::fs::read_to_string(&pushes)
        .unwrap_or_default()
        .lines()
        .count();
    eprintln!("{n} tasks, 8 agents, one kill -9: {seconds:.1} s, {n_pushes} pushes");
    assert!(
        n_pushes as f64 <= seconds * 2.0 + 4.0,
        "{n_pushes} pushes in {seconds:.1} s over 120 a minute"
    );
}

/// An agent on another machine works through a hub with the CLI: `coord run --hub` in a
/// folder with no repository claims, runs and reports every task through the hub's agent
/// routes, whose claims carry the hub's epoch; the hub lands every result on the remote.
#[test]
fn coord_run_through_a_hub_lands_every_result_on_the_remote() {
    let net = fleet("{remote: origin, pushes_per_minute: 600, lease: 1m}", 6);
    let clone = net.clone();
    let hub = Hub::start(&clone);
    let url = format!("http://{}", hub.addr);
    let granted = hub.post("/v1/agents/v/claim", json!({}));
    assert_eq!(granted.status, 200, "{}", granted.body);
    let granted = granted.json();
    assert_eq!(granted["epoch"], 1, "{granted}");
    let taken = granted["id"].as_str().expect("an id").to_string();

    let folder = TestRepo::empty();
    let o = folder
        .cmd(&[
            "run",
            "--hub",
            &url,
            "w",
            "--once",
            "--",
            "sh",
            "-c",
            "cat >/dev/null",
        ])
        .output()
        .expect("coord run --hub");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let done = |id: &str| remote_place(&net, id) == "work/done";
    let rest: Vec<String> = (0..6)
        .map(|i| format!("t{i}"))
        .filter(|id| *id != taken)
        .collect();
    let landed = eventually(Duration::from_secs(20), || rest.iter().all(|id| done(id)));
    assert!(landed, "not all on the remote: {}", hub.stderr());
}

#[test]
fn board_forms_in_a_hub_queue_with_its_writes_land_in_the_next_batch_and_stop_once_the_lease_lapsed(
) {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 6s}", 2);
    let clone = net.clone();
    let hub = Hub::start(&clone);
    let origin = format!("http://{}", hub.addr);
    let form = |path: &str, body: &str| {
        let headers = [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Origin", origin.as_str()),
            ("Sec-Fetch-Site", "same-origin"),
        ];
        request(&hub.addr, "POST", path, &headers, body.as_bytes())
    };
    let cancelled = form("/tasks/t0/cancel", "reason=not+needed&back=%2F");
    assert_eq!(cancelled.status, 303, "{}", cancelled.body);
    let made = form("/tasks", "title=From+the+board&back=%2F");
    assert_eq!(made.status, 303, "{}", made.body);
    let landed = eventually(Duration::from_secs(20), || {
        let new_there = std::process::Command::new("git")
            .current_dir(net.remote.path())
            .args(["grep", "-q", "From the board", "main", "--", "work"])
            .status()
            .is_ok_and(|s| s.success());
        remote_place(&net, "t0") == "work/cancelled" && new_there
    });
    assert!(landed, "the board's actions did not reach the remote");
    // The remote cannot be reached: the lease lapses, and the forms are refused like the API.
    block_pushes(&clone);
    std::thread::sleep(Duration::from_secs(7));
    let before = clone.commit_count();
    let refused = form("/tasks/t1/cancel", "reason=late&back=%2F");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.body.contains("lease lapsed"), "{}", refused.body);
    let refused = form("/tasks", "title=Too+late&back=%2F");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(clone.commit_count(), before, "a refused form committed");
}

/// Makes the hub clone's pushes to its remote fail while `flag` exists (the remote out of
/// reach), so that what the hub commits stays in its clone until the flag is removed.
fn pushes_fail_while(clone: &TestRepo, flag: &std::path::Path) {
    let body = format!(
        "if [ -e '{}' ]; then echo 'the remote is out of reach' >&2; exit 1; fi\nexec git-receive-pack \"$@\"",
        flag.display()
    );
    clone.wrap_remote_program("receivepack", "down-while-flagged", &body);
}

/// The seed (a person) pulls, retitles the task file at `rel`, commits by hand and pushes.
fn person_retitles(net: &Net, rel: &str) {
    net.seed.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    let text = retitled(&net.seed.read(rel));
    net.seed.commit_file(rel, &text, &format!("retitle {rel}"));
    net.seed.git(&["push", "-q", "origin", "main"]);
}

/// Returns a task file's text with " (edited)" added to its title.
fn retitled(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| match l.starts_with("title: ") {
            true => format!("{l} (edited)"),
            false => l.to_string(),
        })
        .collect();
    lines.join("\n") + "\n"
}

/// Returns the claims on the remote's main, as (task, attempt, agent), one per claim commit.
fn claims_on_remote(net: &Net) -> Vec<(String, u64, String)> {
    let log = git_in(net.remote.path(), &["log", "--format=%B%x00", "main"]);
    log.split('\0')
        .filter_map(|message| {
            let field = |key: &str| {
                message
                    .lines()
                    .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
                    .map(str::trim)
            };
            (field("Coord-Op")? == "claim").then_some(())?;
            let attempt = field("Coord-Pre-Attempt")?.parse::<u64>().ok()? + 1;
            Some((
                field("Coord-Task")?.to_string(),
                attempt,
                field("Coord-By")?.to_string(),
            ))
        })
        .collect()
}

/// A task the hub's own tick accepted and then granted, in a batch that did not land, stays
/// granted when a person's push reaches the remote before the next batch: the claim's commit
/// lands, the task is not granted again, nothing is reported lost.
#[test]
fn a_grant_made_on_the_hubs_unpushed_tick_stands_when_a_persons_push_lands_first() {
    let net = fleet("{remote: origin, pushes_per_minute: 600, lease: 1m}", 1);
    let clone = net.clone();
    let flag = clone.home().join("remote-down");
    pushes_fail_while(&clone, &flag);
    let hub = Hub::start(&clone);
    std::fs::write(&flag, "").expect("flag");
    let ids = net.person_adds("p", 1);
    let accepted = eventually(Duration::from_secs(20), || {
        hub.task(&ids[0])["state"] == "ready"
    });
    assert!(
        accepted,
        "the hub did not accept {}: {}",
        ids[0],
        hub.stderr()
    );
    let grant = hub.claim(&ids[0], "w");
    assert_eq!(grant["attempt"], 1, "{grant}");
    person_retitles(&net, "work/ready/t0.yaml");
    std::fs::remove_file(&flag).expect("unflag");

    let landed = eventually(Duration::from_secs(20), || {
        remote_place(&net, &ids[0]) == "work/assigned/w"
    });
    let err = hub.stderr();
    assert!(landed, "the grant of {} did not land: {err}", ids[0]);
    assert!(!err.contains("lost claim"), "{err}");
    let again = hub.post(
        &format!("/v1/tasks/{}/claim", ids[0]),
        json!({"agent": "v"}),
    );
    assert_eq!(again.status, 409, "granted again: {}", again.body);
    let claims = claims_on_remote(&net);
    assert_eq!(claims, [(ids[0].clone(), 1, "w".to_string())], "{err}");
    let (verified, _) = net.clone().code(&["verify"], 0);
    assert!(verified.trim_end().ends_with(": clean"), "{verified}");
    let t0 = git_in(net.remote.path(), &["show", "main:work/ready/t0.yaml"]);
    assert!(
        t0.contains("title: Task 0 (edited)"),
        "the person's edit was lost: {t0}"
    );
}

/// What the agents of a mixed round were answered: grants (task, attempt, agent) and the
/// completions answered otherwise than 200.
#[derive(Default)]
struct Answers {
    grants: Vec<(String, u64, String)>,
    refused: Vec<String>,
}

/// One agent of a mixed round over REST: claims ready tasks (the newest arrivals first) and
/// completes them with the grant's attempt and epoch, until `busy` is off and nothing is
/// ready for a while.
fn mixed_agent(addr: &str, name: &str, busy: &AtomicBool, answers: &Mutex<Answers>) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut idle = 0;
    while Instant::now() < deadline && (idle < 30 || busy.load(Ordering::SeqCst)) {
        let list = request(addr, "GET", "/v1/tasks?state=ready&limit=100", &[], b"").json();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let ids: Vec<&str> = items.iter().filter_map(|t| t["id"].as_str()).collect();
        let fresh = ids.iter().find(|id| !id.starts_with('t'));
        let Some(id) = fresh.or(ids.first()) else {
            idle += 1;
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        idle = 0;
        let claim = json!({"agent": name}).to_string();
        let r = request(
            addr,
            "POST",
            &format!("/v1/tasks/{id}/claim"),
            &[],
            claim.as_bytes(),
        );
        if r.status != 200 {
            continue;
        }
        let grant = r.json();
        let attempt = grant["attempt"].as_u64().expect("attempt");
        let mut a = answers.lock().expect("answers");
        a.grants.push((id.to_string(), attempt, name.to_string()));
        drop(a);
        std::thread::sleep(Duration::from_millis(50));
        let done = json!({"agent": name, "attempt": attempt, "epoch": grant["epoch"], "output": {"by": name}});
        let path = format!("/v1/tasks/{id}/complete");
        let r = request(addr, "POST", &path, &[], done.to_string().as_bytes());
        if r.status != 200 {
            let why = format!("{name} completing {id}: {} {}", r.status, r.body);
            answers.lock().expect("answers").refused.push(why);
        }
    }
}

/// A person on another clone pushing during the batches: new tasks, edits of ready tasks and
/// edits of tasks the hub granted, in turn. A push that loses the race is given up.
fn mixed_person(person: &TestRepo, pushes: usize, rng: &mut crate::harness::Rng) {
    for k in 0..pushes {
        std::thread::sleep(Duration::from_millis(150 + rng.below(300)));
        person.git(&["fetch", "-q", "origin"]);
        person.git(&["reset", "-q", "--hard", "origin/main"]);
        let folder = ["work/inbox", "work/ready", "work/assigned"][k % 3];
        let files = person.git(&["ls-files", "work/ready", "work/assigned"]);
        let pick: Vec<&str> = files
            .lines()
            .filter(|f| f.starts_with(folder) && f.ends_with(".yaml"))
            .collect();
        if k % 3 == 0 {
            person.task(
                &format!("p{k}"),
                &crate::harness::task_yaml(&format!("p{k}")),
            );
        } else if let Some(rel) = rng.pick(&pick) {
            let text = retitled(&person.read(rel));
            person.write(rel, &text);
        } else {
            continue;
        }
        person.git(&["add", "-A", "work"]);
        person.git(&["commit", "-q", "-m", &format!("person's change {k}")]);
        let mut push = std::process::Command::new("git");
        push.current_dir(person.path())
            .args(["push", "-q", "origin", "main"]);
        for (key, value) in crate::harness::git_env() {
            push.env(key, value);
        }
        let _ = push.output().expect("git push");
    }
}

/// Rounds of a mixed run through a hub with `--tick`: agents claim and complete over REST,
/// tasks arrive over REST (the hub's tick accepts them between batches) and from a person's
/// pushes, and the person edits ready tasks and granted ones during the batches. No task is
/// granted twice in one attempt, every result is credited, every answered claim's commit is
/// on the remote (and no other), and a fresh clone verifies clean.
#[test]
fn a_persons_pushes_during_the_batches_never_drop_a_claim_the_hub_answered() {
    for round in 1..=3u64 {
        let net = fleet("{remote: origin, pushes_per_minute: 120, lease: 1m}", 6);
        let clone = net.clone();
        let hub = Hub::try_start_with(&clone, &["--tick"])
            .unwrap_or_else(|(code, err)| panic!("hub exited {code:?}: {err}"));
        let busy = Arc::new(AtomicBool::new(true));
        let answers = Arc::new(Mutex::new(Answers::default()));
        let agents: Vec<_> = ["w", "v"]
            .into_iter()
            .map(|name| {
                let (addr, busy, answers) = (hub.addr.clone(), busy.clone(), answers.clone());
                std::thread::spawn(move || mixed_agent(&addr, name, &busy, &answers))
            })
            .collect();
        let addr = hub.addr.clone();
        let creator = std::thread::spawn(move || {
            let mut rng = crate::harness::Rng(round * 7919);
            for k in 0..10 {
                std::thread::sleep(Duration::from_millis(100 + rng.below(300)));
                let body = json!({"title": format!("Rest {k}"), "id": format!("r{k}")});
                let r = request(&addr, "POST", "/v1/tasks", &[], body.to_string().as_bytes());
                assert!(r.status < 300, "create r{k}: {} {}", r.status, r.body);
            }
        });
        let person = net.clone();
        let mut rng = crate::harness::Rng(round * 104_729);
        mixed_person(&person, 12, &mut rng);
        creator.join().expect("creator");
        busy.store(false, Ordering::SeqCst);
        for a in agents {
            a.join().expect("agent");
        }
        let answers = std::mem::take(&mut *answers.lock().expect("answers"));
        let err = hub.stderr();
        let mut granted = answers.grants.clone();
        granted.sort();
        let before = granted.len();
        granted.dedup_by(|a, b| (&a.0, a.1) == (&b.0, b.1));
        assert_eq!(
            granted.len(),
            before,
            "round {round}: a (task, attempt) granted twice: {:?}\n{err}",
            answers.grants
        );
        assert!(
            answers.refused.is_empty(),
            "round {round}: results not credited: {:?}\n{err}",
            answers.refused
        );
        let on_remote = eventually(Duration::from_secs(30), || {
            let mut claims = claims_on_remote(&net);
            claims.sort();
            claims == granted
        });
        let claims = claims_on_remote(&net);
        assert!(
            on_remote,
            "round {round}: answered {granted:?}, on the remote {claims:?}\n{err}"
        );
        let (verified, _) = net.clone().code(&["verify"], 0);
        assert!(
            verified.trim_end().ends_with(": clean"),
            "round {round}: {verified}"
        );
        eprintln!("round {round}: {} grants, all on the remote", granted.len());
    }
}

#[test]
fn a_claim_over_mcp_goes_through_the_hubs_queue_and_lands_in_its_batch() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 1m}", 1);
    let clone = net.clone();
    let hub = Hub::start(&clone);
    let addr = hub.addr.clone();
    crate::serve_mcp::on_runtime(async move {
        let client = crate::serve_mcp::connect(&addr, None, ())
            .await
            .expect("initialize");
        let claimed = crate::agents_mcp::ok(&client, "claim", json!({"agent": "w"})).await;
        assert_eq!(
            (&claimed["claimed"], &claimed["id"]),
            (&json!(true), &json!("t0")),
            "{claimed}"
        );
        client.cancel().await.expect("close");
    });
    let landed = eventually(Duration::from_secs(20), || {
        remote_place(&net, "t0") == "work/assigned/w"
    });
    assert!(landed, "the claim did not reach the remote in a batch");
}

/// Posts `body` to `path` with `Idempotency-Key: key`; the answer's JSON, asserting 200.
fn post_keyed(hub: &Hub, path: &str, key: &str, body: Value) -> Value {
    let headers = [("Idempotency-Key", key)];
    let r = request(
        &hub.addr,
        "POST",
        path,
        &headers,
        body.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{path} with key {key}: {}", r.body);
    r.json()
}

/// Returns the ids of the tasks in the hub clone's `assigned/` folders.
fn assigned_in(clone: &TestRepo, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("t{i}"))
        .filter(|id| clone.where_is(id).starts_with("work/assigned/"))
        .collect()
}

/// A hub killed (-9) after it committed a claim, before the claimer read the answer: the
/// claim sent again with the same `Idempotency-Key` to the hub started again gets the same
/// grant (task, attempt, epoch), on the agent route and on the task route, and no other task
/// is assigned.
#[test]
fn a_claim_resent_with_its_key_to_a_hub_killed_after_committing_it_gets_the_same_grant() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 1m}", 4);
    let clone = net.clone();
    let hub = Hub::start(&clone);
    let lost = post_keyed(&hub, "/v1/agents/w/claim", "key-w-1", json!({}));
    assert_eq!(lost["claimed"], true, "{lost}");
    hub.kill_9();
    let hub = Hub::start(&clone);
    let again = post_keyed(&hub, "/v1/agents/w/claim", "key-w-1", json!({}));
    let grant = |v: &Value| (v["id"].clone(), v["attempt"].clone(), v["epoch"].clone());
    assert_eq!(grant(&again), grant(&lost), "{again}");
    assert_eq!(assigned_in(&clone, 4), [lost["id"].as_str().expect("id")]);

    let free = ["t0", "t1", "t2", "t3"]
        .into_iter()
        .find(|id| clone.where_is(id).starts_with("work/ready/"))
        .expect("a ready task");
    let path = format!("/v1/tasks/{free}/claim");
    let lost = post_keyed(&hub, &path, "key-v-1", json!({"agent": "v"}));
    hub.kill_9();
    let hub = Hub::start(&clone);
    let again = post_keyed(&hub, &path, "key-v-1", json!({"agent": "v"}));
    assert_eq!(grant(&again), grant(&lost), "{again}");
    assert_eq!(assigned_in(&clone, 4).len(), 2, "{again}");
    // Another key is another claim: the task is taken.
    let r = request(
        &hub.addr,
        "POST",
        &path,
        &[("Idempotency-Key", "key-v-2")],
        json!({"agent": "v"}).to_string().as_bytes(),
    );
    assert_eq!(r.status, 409, "{}", r.body);
}

/// How long a hub may take to exit on SIGTERM: the write under way, then its last push
/// (bounded at 5 s by the hub), on a loaded machine.
const STOP_BOUND: Duration = Duration::from_secs(12);

/// Claims with `agent` through the hub's agent route until `stop`, reading the board after
/// each claim; returns the tasks it was granted (answered 200 with `claimed: true`).
fn polling_agent(addr: &str, agent: &str, stop: &AtomicBool) -> Vec<String> {
    let mut granted = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let path = format!("/v1/agents/{agent}/claim");
        match try_request(addr, "POST", &path, &[], &json!({})) {
            Some(r) if r.status == 200 && r.json()["claimed"] == true => {
                granted.extend(r.json()["id"].as_str().map(str::to_string));
            }
            Some(_) => {}
            None => return granted,
        }
        let _ = try_request(addr, "GET", "/v1/board", &[], &json!({}));
        std::thread::sleep(Duration::from_millis(50));
    }
    granted
}

#[test]
fn a_hub_stopped_by_sigterm_mid_run_pushes_what_it_answered_and_exits_promptly() {
    // A batch every 30 s: what the hub answers below waits for it.
    let net = fleet("{remote: origin, pushes_per_minute: 2, lease: 2m}", 40);
    let clone = net.clone();
    let mut hub = Hub::start(&clone);
    let grant = hub.claim("t0", "w");
    let done = hub.post(
        "/v1/agents/w/tasks/t0/complete",
        json!({"attempt": grant["attempt"], "epoch": grant["epoch"], "output": {"ok": 1}}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    let stop = Arc::new(AtomicBool::new(false));
    // Eight agents keep the hub's write queue full.
    let agents: Vec<_> = ["v", "w"]
        .repeat(4)
        .into_iter()
        .map(|a| {
            let (addr, stop) = (hub.addr.clone(), Arc::clone(&stop));
            std::thread::spawn(move || polling_agent(&addr, a, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    hub.signal("TERM");
    let code = hub.exited(STOP_BOUND);
    let took = sent.elapsed();
    stop.store(true, Ordering::SeqCst);
    let granted: Vec<String> = agents
        .into_iter()
        .flat_map(|a| a.join().expect("agent"))
        .collect();
    eprintln!("SIGTERM to exit: {took:?}, {} grants polled", granted.len());
    assert_eq!(
        code,
        Some(0),
        "no exit within {STOP_BOUND:?}: {}",
        hub.stderr()
    );
    assert_ne!(remote_place(&net, "t0"), "work/ready", "{}", hub.stderr());
    for id in &granted {
        let place = remote_place(&net, id);
        assert!(
            place.starts_with("work/assigned/"),
            "{id} was granted but is in {place:?} on the remote: {}",
            hub.stderr()
        );
    }
    let verified = net.clone().ok(&["verify"]);
    assert!(verified.trim_end().ends_with(": clean"), "{verified}");
}

#[test]
fn a_hub_whose_last_push_hangs_on_sigterm_stops_within_the_bound_and_its_next_start_pushes_it() {
    let net = fleet("{remote: origin, pushes_per_minute: 2, lease: 2m}", 2);
    let clone = net.clone();
    let mut hub = Hub::start(&clone);
    assert_eq!(hub.claim("t0", "w")["epoch"], 1);
    // The remote stops answering pushes.
    clone.wrap_remote_program("receivepack", "hanging-pushes", "sleep 30\nexit 1");
    let sent = Instant::now();
    hub.signal("TERM");
    let code = hub.exited(STOP_BOUND);
    eprintln!(
        "SIGTERM to exit with the push hanging: {:?}",
        sent.elapsed()
    );
    assert_eq!(
        code,
        Some(0),
        "no exit within {STOP_BOUND:?}: {}",
        hub.stderr()
    );
    let err = hub.stderr();
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("did not land") && last.contains("next start"),
        "{err}"
    );
    assert_eq!(remote_place(&net, "t0"), "work/ready");
    clone.git(&["config", "--unset", "remote.origin.receivepack"]);
    let again = Hub::start(&clone);
    assert_eq!(remote_place(&net, "t0"), "work/assigned/w", "nothing lost");
    assert_eq!(
        again.task("t0")["task"]["coord"]["epoch"],
        1,
        "its grant stands"
    );
}

/// Sends `POST path` with `body` from one thread per entry, all at once; the answers in order.
fn all_at_once(addr: &str, posts: Vec<(String, Value)>) -> Vec<Resp> {
    let start = Arc::new(std::sync::Barrier::new(posts.len()));
    let sent: Vec<_> = posts
        .into_iter()
        .map(|(path, body)| {
            let (addr, start) = (addr.to_string(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                request(&addr, "POST", &path, &[], body.to_string().as_bytes())
            })
        })
        .collect();
    sent.into_iter().map(|t| t.join().expect("post")).collect()
}

#[test]
fn agent_writes_queued_together_share_one_commit_and_each_is_answered_on_its_own_once_committed() {
    let net = fleet("{remote: origin, pushes_per_minute: 6, lease: 1m}", 16);
    let clone = net.clone();
    let hub = Hub::start(&clone);
    let before = clone.commit_count();
    let mut claims: Vec<(String, Value)> = ["w", "v"]
        .iter()
        .cycle()
        .take(14)
        .map(|a| (format!("/v1/agents/{a}/claim"), json!({})))
        .collect();
    // A claim refused in the group does not fail the others.
    claims.push(("/v1/agents/ghost/claim".into(), json!({})));
    let answers = all_at_once(&hub.addr, claims.clone());
    let mut granted = Vec::new();
    for ((path, _), r) in claims.iter().zip(&answers) {
        if path.contains("ghost") {
            assert!(r.status >= 400, "{path}: {} {}", r.status, r.body);
            continue;
        }
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let grant = r.json();
        assert_eq!(grant["claimed"], true, "{grant}");
        let id = grant["id"].as_str().expect("id").to_string();
        let agent = path.split('/').nth(3).expect("agent").to_string();
        granted.push((agent, id, grant["attempt"].clone(), grant["epoch"].clone()));
    }
    let mut ids: Vec<&String> = granted.iter().map(|(_, id, _, _)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 14, "a task granted twice: {granted:?}");
    let committed = clone.git(&["ls-tree", "-r", "--name-only", "HEAD", "work/assigned"]);
    for (agent, id, _, _) in &granted {
        let file = format!("work/assigned/{agent}/{id}.yaml");
        assert!(committed.contains(&file), "{file} answered, not committed");
    }
    let commits = clone.commit_count() - before;
    assert!(
        commits <= 7,
        "14 claims made {commits} commits: not grouped"
    );
    // Results for the grants, and one for an attempt never granted, all at once.
    let mut reports: Vec<(String, Value)> = granted
        .iter()
        .map(|(agent, id, attempt, epoch)| {
            let body = json!({"attempt": attempt, "epoch": epoch, "output": {"ok": true}});
            (format!("/v1/agents/{agent}/tasks/{id}/complete"), body)
        })
        .collect();
    let (agent, id, _, epoch) = &granted[0];
    let stale = json!({"attempt": 9, "epoch": epoch, "output": {"ok": false}});
    reports.insert(
        0,
        (format!("/v1/agents/{agent}/tasks/{id}/complete"), stale),
    );
    let before = clone.commit_count();
    let answers = all_at_once(&hub.addr, reports);
    assert_eq!(answers[0].status, 409, "{}", answers[0].body);
    for r in &answers[1..] {
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let commits = clone.commit_count() - before;
    assert!(
        commits <= 8,
        "15 reports made {commits} commits: not grouped"
    );
}
