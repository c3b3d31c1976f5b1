//! `coord serve --hub` end to end: a bare remote, the hub on a clone of it, agents over HTTP;
//! writes committed at once and pushed in batches within the budget, the lease on the remote
//! (a second hub refused, a lapsed lease taken over in the next epoch, the old hub stopping),
//! and results for grants of an older epoch kept as `stale_result`.

use crate::harness::{git_in, Net, TestRepo};
use crate::http::{request, Resp};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A remote whose coord.yaml sets `hub:` and whose main holds `n` ready tasks `t0…`.
fn fleet(hub: &str, n: usize) -> Net {
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
struct Hub {
    child: Child,
    addr: String,
    stderr: std::path::PathBuf,
}

impl Hub {
    /// Starts the hub in `clone` and waits for its address; panics with its stderr if it
    /// exits instead.
    fn start(clone: &TestRepo) -> Hub {
        Hub::try_start(clone).unwrap_or_else(|(code, err)| panic!("hub exited {code:?}: {err}"))
    }

    /// Starts the hub; its exit code and stderr when it does not serve.
    fn try_start(clone: &TestRepo) -> Result<Hub, (Option<i32>, String)> {
        let stderr = clone.home().join(format!("hub-{}.err", std::process::id()));
        let file = std::fs::File::create(&stderr).expect("stderr file");
        let mut cmd = clone.spawn_cmd(&["serve", "--hub", "--listen", "127.0.0.1:0"]);
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

    fn post(&self, path: &str, body: Value) -> Resp {
        request(&self.addr, "POST", path, &[], body.to_string().as_bytes())
    }

    fn claim(&self, id: &str, agent: &str) -> Value {
        let r = self.post(&format!("/v1/tasks/{id}/claim"), json!({"agent": agent}));
        assert_eq!(r.status, 200, "claim {id}: {}", r.body);
        r.json()
    }

    fn task(&self, id: &str) -> Value {
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

    fn kill_9(mut self) {
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
fn remote_place(net: &Net, id: &str) -> String {
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
fn block_pushes(clone: &TestRepo) {
    let body = "echo 'remote unreachable' >&2\nexit 1";
    clone.wrap_remote_program("receivepack", "blocked-pushes", body);
}

/// Waits up to `within` for `done`.
fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

#[test]
fn hub_commits_each_write_at_once_and_pushes_them_in_batches_within_the_budget() {
    let net = fleet("{remote: origin, pushes_per_minute: 60, lease: 1m}", 10);
    let clone = net.clone();
    let pushes = clone.home().join("pushes");
    let count = format!(
        "echo push >> '{}'\nexec git-receive-pack \"$@\"",
        pushes.display()
    );
    clone.wrap_remote_program("receivepack", "count-pushes", &count);
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
    assert_eq!(r.json()["task"]["result"]["output"]["from"], "new");
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

/// Sends a request; None when the hub is down (refused, or killed before it answered).
fn try_request(addr: &str, method: &str, path: &str, body: &Value) -> Option<Resp> {
    std::net::TcpStream::connect(addr).ok()?;
    let body = body.to_string();
    std::panic::catch_unwind(|| request(addr, method, path, &[], body.as_bytes())).ok()
}

/// One agent over REST: claims ready tasks and completes them with the grant's epoch until
/// none is left, riding out the hub's restarts; returns its ledger of (task, attempt, epoch,
/// agent).
fn agent_loop(
    addr: &std::sync::Mutex<String>,
    name: &str,
    seed: usize,
) -> Vec<(String, u64, u64, String)> {
    let mut ledger = Vec::new();
    let mut idle = 0;
    let at = || addr.lock().expect("addr").clone();
    while idle < 50 {
        let Some(list) = try_request(&at(), "GET", "/v1/tasks?state=ready&limit=16", &json!({}))
        else {
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
        let Some(r) = try_request(&at(), "POST", &format!("/v1/tasks/{id}/claim"), &claim) else {
            continue;
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
            match try_request(&at(), "POST", &format!("/v1/tasks/{id}/complete"), &done) {
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
    let pushes = clone.home().join("pushes");
    let count = format!(
        "echo push >> '{}'\nexec git-receive-pack \"$@\"",
        pushes.display()
    );
    clone.wrap_remote_program("receivepack", "count-pushes", &count);
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
