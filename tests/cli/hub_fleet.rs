//! A fleet through one hub, end to end. A bare remote whose `pre-receive` hook counts pushes
//! and rejects those beyond a rate; one `coord serve --hub` on a clone of it, on the system
//! clock, at a fixed loopback address; agents on machines of their own (folders with no
//! repository): half behind `coord run --hub` around a stand-in agent program, half looping
//! `coord claim --hub` / `coord complete --hub`; every fourth task hands off to another agent
//! (`next_agent`). Mid-run the hub is killed (-9) and started again twice, a person pushes new
//! tasks to the remote twice, a second hub on another clone is refused while the lease is
//! live, and the lease is let lapse and a hub on that other clone takes over at the same
//! address.
//!
//! The checker reads the remote's whole history (`coord verify` on a fresh clone) and the
//! agents' own ledgers (every claim answer each got, every result each sent and how it was
//! answered): no (task, attempt) held by two agents, no result an agent was told was recorded
//! missing from the remote, every task done, and the pushes within the hook's budget.
//!
//! `COORD_FLEET_AGENTS` (default 6) and `COORD_FLEET_TASKS` (default 40) size it; the full
//! size is 64 agents and 2,000 tasks (docs/fleet.md).

use crate::harness::{git_env, git_in, task_yaml, Net, TestRepo};
use crate::http_client::try_request;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The hub's push budget and lease: a batch a second, a lease of six.
const HUB: &str = "hub: {remote: origin, pushes_per_minute: 60, lease: 6s}";
const PUSHES_PER_MINUTE: usize = 60;
/// An agent's lease on a task: a result lost with a failed-over hub comes back this soon.
const DEFAULTS: &str = "defaults: {timeout: 20s, max_attempts: 10, priority: normal}";
const BACKOFF: &str = "backoff: {base: 1s, max: 2s}";

/// How many agents and tasks; `COORD_FLEET_AGENTS` and `COORD_FLEET_TASKS` set them.
struct Size {
    agents: usize,
    tasks: usize,
}

impl Size {
    fn from_env() -> Size {
        let var = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Size {
            agents: var("COORD_FLEET_AGENTS", 6).max(2),
            tasks: var("COORD_FLEET_TASKS", 40).max(8),
        }
    }

    /// The agents behind `coord run --hub`: `r0`, `r1`, …
    fn runners(&self) -> Vec<String> {
        (0..self.agents.div_ceil(2))
            .map(|i| format!("r{i}"))
            .collect()
    }

    /// The agents looping `coord claim/complete --hub`: `c0`, `c1`, …
    fn loopers(&self) -> Vec<String> {
        (0..self.agents / 2).map(|i| format!("c{i}")).collect()
    }

    /// Every task id that ends done: `t0000…`, and each fourth one's handoff `t0003.r1`.
    fn ids(&self) -> Vec<String> {
        let runners = self.runners();
        let mut ids = Vec::new();
        for i in 0..self.tasks {
            ids.push(format!("t{i:04}"));
            if let Some(next) = handoff(i, &runners) {
                ids.push(format!("t{i:04}.{next}"));
            }
        }
        ids
    }
}

/// The agent task `i` hands off to, for every fourth task.
fn handoff(i: usize, runners: &[String]) -> Option<&String> {
    (i % 4 == 3).then(|| &runners[i / 4 % runners.len()])
}

/// The remote's `pre-receive` hook: logs `<unix second> ok|rejected` per push into `log`,
/// rejecting a push when `limit` were accepted in the last 60 seconds.
fn rate_hook(log: &Path, limit: usize) -> String {
    format!(
        "#!/bin/sh\ncat >/dev/null\nlog='{log}'\nnow=$(date +%s)\ntouch \"$log\"\n\
         recent=$(awk -v t=$((now - 60)) '$1 > t && $2 == \"ok\"' \"$log\" | wc -l)\n\
         if [ \"$recent\" -ge {limit} ]; then\n  echo \"$now rejected\" >> \"$log\"\n  \
         echo \"rate limit: {limit} pushes a minute\" >&2\n  exit 1\nfi\n\
         echo \"$now ok\" >> \"$log\"\n",
        log = log.display()
    )
}

/// Writes an executable script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, body).expect("write script");
    let mut perms = std::fs::metadata(path).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(path, perms).expect("chmod");
}

/// A free loopback port, for every hub of the run in turn.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A running `coord serve --hub` on the system clock; killed when dropped.
struct Hub {
    child: Child,
    stderr: PathBuf,
}

impl Hub {
    /// Starts the hub in `clone` listening on `listen`; its exit code and stderr when it
    /// does not serve.
    fn try_start(clone: &TestRepo, listen: &str, n: usize) -> Result<Hub, (Option<i32>, String)> {
        let stderr = clone.home().join(format!("hub-{n}.err"));
        let file = std::fs::File::create(&stderr).expect("stderr file");
        let mut cmd = clone.spawn_cmd(&["serve", "--hub", "--listen", listen]);
        cmd.env_remove("COORD_NOW")
            .stdout(Stdio::piped())
            .stderr(file);
        let mut child = cmd.spawn().expect("spawn coord serve --hub");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("read");
        if line.starts_with("http://") {
            return Ok(Hub { child, stderr });
        }
        let code = child.wait().expect("wait").code();
        Err((code, std::fs::read_to_string(&stderr).unwrap_or_default()))
    }

    /// Starts the hub, trying again for up to `within` (the port just freed, the lease not
    /// yet lapsed); panics with the last refusal.
    fn start(clone: &TestRepo, listen: &str, n: usize, within: Duration) -> Hub {
        let end = Instant::now() + within;
        loop {
            match Hub::try_start(clone, listen, n) {
                Ok(hub) => return hub,
                Err(e) if Instant::now() >= end => panic!("hub {n} did not start: {e:?}"),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn kill_9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What an agent's ledger holds: a claim answer it got, or a result it sent and what it was
/// told.
#[derive(Debug, Clone)]
enum Entry {
    /// It was granted `attempt` of `id` (with the hub's `epoch`, when the answer said).
    Granted {
        agent: String,
        id: String,
        attempt: u64,
        epoch: Option<u64>,
    },
    /// It sent its result for `attempt` of `id`; `recorded` when told it was recorded.
    Sent {
        agent: String,
        id: String,
        attempt: u64,
        recorded: bool,
    },
}

/// A `coord claim/complete --hub` agent in a folder of its own: claims, works a moment,
/// completes, logging every answer, until `stop`.
fn looper(url: String, name: String, stop: Arc<AtomicBool>) -> Vec<Entry> {
    let folder = TestRepo::empty_in_memory();
    let output = folder.path().join("output.yaml");
    std::fs::write(&output, format!("by: {name}\n")).expect("output");
    let output = output.to_str().expect("utf8").to_string();
    let mut ledger = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let o = folder
            .cmd(&["--json", "claim", "--hub", &url, "--agent", &name])
            .env_remove("COORD_NOW")
            .output()
            .expect("coord claim --hub");
        let answer: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        if o.status.code() != Some(0) || answer["claimed"] != true {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let id = answer["id"].as_str().expect("an id").to_string();
        let attempt = answer["attempt"].as_u64().expect("an attempt");
        ledger.push(Entry::Granted {
            agent: name.clone(),
            id: id.clone(),
            attempt,
            epoch: answer["epoch"].as_u64(),
        });
        std::thread::sleep(Duration::from_millis(50));
        let n = attempt.to_string();
        loop {
            let args = [
                "--json",
                "complete",
                &id,
                "--hub",
                &url,
                "--agent",
                &name,
                "--attempt",
                &n,
                "--output",
                &output,
            ];
            let o = folder
                .cmd(&args)
                .env_remove("COORD_NOW")
                .output()
                .expect("coord complete --hub");
            let err = String::from_utf8_lossy(&o.stderr);
            let down = err.contains("cannot reach the hub")
                || err.contains("lease lapsed")
                || err.contains("stopped writing");
            if down && !o.status.success() {
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
            ledger.push(Entry::Sent {
                agent: name.clone(),
                id: id.clone(),
                attempt,
                recorded: o.status.success(),
            });
            break;
        }
    }
    ledger
}

/// A `coord --json run --hub` agent in a folder of its own around a stand-in agent program
/// (a shell script that logs the task and attempt it was given and prints `by: <agent>`),
/// started again whenever it exits, until `stop`. Returns where its ledgers are.
fn runner(url: String, name: String, stop: Arc<AtomicBool>) -> (PathBuf, PathBuf) {
    let folder = TestRepo::empty_in_memory();
    // The ledgers outlive the folder: the checker reads them, then removes them.
    let keep = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir")
        .keep();
    let given = keep.join("given.log");
    let events = keep.join("events.jsonl");
    let program = keep.join("agent.sh");
    // A stand-in for an agent program: reads the task, logs what it was given, answers.
    script(
        &program,
        &format!(
            "#!/bin/sh\ncat >/dev/null\necho \"$COORD_TASK_ID $COORD_ATTEMPT\" >> '{}'\n\
             sleep 0.05\necho \"by: $COORD_AGENT\"\n",
            given.display()
        ),
    );
    let program = program.to_str().expect("utf8").to_string();
    while !stop.load(Ordering::SeqCst) {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&events)
            .expect("events file");
        let args = [
            "--json",
            "run",
            "--hub",
            &url,
            &name,
            "--interval",
            "1s",
            "--",
            "sh",
            &program,
        ];
        let mut child = folder
            .spawn_cmd(&args)
            .env_remove("COORD_NOW")
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .expect("coord run --hub");
        while !stop.load(Ordering::SeqCst) {
            if child.try_wait().expect("try_wait").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(200));
    }
    (given, events)
}

/// Reads a runner's ledgers: what its program was given, and what it sent.
fn runner_ledger(name: &str, given: &Path, events: &Path) -> Vec<Entry> {
    let mut ledger = Vec::new();
    for line in std::fs::read_to_string(given).unwrap_or_default().lines() {
        let (id, attempt) = line.split_once(' ').expect("id attempt");
        ledger.push(Entry::Granted {
            agent: name.to_string(),
            id: id.to_string(),
            attempt: attempt.parse().expect("attempt"),
            epoch: None,
        });
    }
    for line in std::fs::read_to_string(events).unwrap_or_default().lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if e["event"] == "started" {
            continue;
        }
        ledger.push(Entry::Sent {
            agent: name.to_string(),
            id: e["id"].as_str().unwrap_or_default().to_string(),
            attempt: e["attempt"].as_u64().unwrap_or_default(),
            recorded: e["event"] == "done" && e["recorded"] == true,
        });
    }
    let _ = std::fs::remove_dir_all(given.parent().expect("folder"));
    ledger
}

/// Stops the agents when dropped, also when the test fails: each runner's thread ends its
/// `coord run` within a poll (100 ms) of the flag, and is given a second for it.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if !self.0.swap(true, Ordering::SeqCst) {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// The number of done tasks the hub at `addr` shows; None when it does not answer.
fn done_count(addr: &str) -> Option<usize> {
    let r = try_request(addr, "GET", "/v1/board", &[], b"")?;
    let board: Value = serde_json::from_str(&r.body).ok()?;
    board["counts"]["done"].as_u64().map(|n| n as usize)
}

/// Waits up to `within` for the hub at `addr` to show `n` done tasks.
fn until_done(addr: &str, n: usize, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if done_count(addr).is_some_and(|d| d >= n) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// The remote main's task files: id → folder.
fn remote_places(remote: &Path) -> BTreeMap<String, String> {
    let files = git_in(remote, &["ls-tree", "-r", "--name-only", "main", "work"]);
    files
        .lines()
        .filter(|l| l.ends_with(".yaml") && !l.starts_with("work/agents/"))
        .filter_map(|l| {
            let (dir, file) = l.rsplit_once('/')?;
            Some((file.strip_suffix(".yaml")?.to_string(), dir.to_string()))
        })
        .collect()
}

/// A person adds `n` tasks `<prefix>-<i>` to the remote by hand from `clone` (a commit of
/// inbox files, pulled onto the remote's main and pushed, again after a lost race); returns
/// their ids.
fn person_adds(clone: &TestRepo, prefix: &str, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for id in &ids {
        clone.task(id, &task_yaml(id));
    }
    clone.git(&["add", "work/inbox"]);
    clone.git(&["commit", "-q", "-m", &format!("add {prefix} tasks")]);
    for _ in 0..20 {
        clone.git(&["pull", "-q", "--rebase", "origin", "main"]);
        let mut push = std::process::Command::new("git");
        push.current_dir(clone.path())
            .args(["push", "-q", "origin", "main"])
            .envs(git_env());
        if push.output().expect("git push").status.success() {
            return ids;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("the person could not push {prefix}'s tasks");
}

/// Ids of the tasks whose files the commits of `clone` after `since` touch: what a hub
/// committed and never pushed.
fn unpushed(clone: &TestRepo, since: &str) -> BTreeSet<String> {
    let names = clone.git(&["log", "--name-only", "--format=", &format!("{since}..HEAD")]);
    names
        .lines()
        .filter_map(|l| l.rsplit_once('/').map(|(_, f)| f))
        .filter_map(|f| f.strip_suffix(".yaml"))
        .map(String::from)
        .collect()
}

/// A fleet of `COORD_FLEET_AGENTS` agents (half `coord run --hub`, half `coord claim/complete
/// --hub` loops) finishes `COORD_FLEET_TASKS` tasks and their handoffs, and tasks a person
/// pushes meanwhile, through one hub that is killed (-9) twice and failed over once; the remote's history verifies clean, every result
/// an agent was told was recorded is the one on the remote, no (task, attempt) is held by two
/// agents, and the remote's hook never had to reject a push.
#[test]
fn a_fleet_through_a_hub_killed_twice_and_failed_over_keeps_every_answer() {
    let size = Size::from_env();
    let (runners, loopers) = (size.runners(), size.loopers());
    let mut ids = size.ids();
    let net = Net::new(&[]);
    let seed = &net.seed;
    for a in runners.iter().chain(&loopers) {
        seed.ok(&["agents", "add", a, "--pull", "--max-active", "1000"]);
    }
    let yaml = seed
        .read("coord.yaml")
        .replace(
            "defaults: {timeout: 30m, max_attempts: 3, priority: normal}",
            DEFAULTS,
        )
        .replace("backoff: {base: 1m, max: 1h}", BACKOFF);
    seed.write("coord.yaml", &format!("{yaml}{HUB}\n"));
    for i in 0..size.tasks {
        let next = handoff(i, &runners).map_or(String::new(), |a| format!("next_agent: {a}\n"));
        seed.task(&format!("t{i:04}"), &format!("title: Task {i}\n{next}"));
    }
    seed.git(&["add", "-A"]);
    seed.git(&["commit", "-q", "-m", "people drop tasks"]);
    seed.ok(&["tick"]);
    seed.git(&["push", "-q", "origin", "main"]);

    // Each hub start may take the lease and push once before its first batch; a person
    // pushes twice.
    let (starts, people) = (4, 2);
    let limit = PUSHES_PER_MINUTE + 2 * starts + people;
    let pushes = net.seed.home().join("pushes.log");
    script(
        &net.remote.path().join("hooks/pre-receive"),
        &rate_hook(&pushes, limit),
    );

    let (first, other, person) = (net.clone(), net.clone(), net.clone());
    let addr = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{addr}");
    let started = Instant::now();
    let mut hub = Hub::start(&first, &addr, 1, Duration::from_secs(10));
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(Arc::clone(&stop));
    let run_threads: Vec<_> = runners
        .iter()
        .map(|name| {
            let (url, name, stop) = (url.clone(), name.clone(), Arc::clone(&stop));
            std::thread::spawn(move || runner(url, name, stop))
        })
        .collect();
    let loop_threads: Vec<_> = loopers
        .iter()
        .map(|name| {
            let (url, name, stop) = (url.clone(), name.clone(), Arc::clone(&stop));
            std::thread::spawn(move || looper(url, name, stop))
        })
        .collect();

    let total = ids.len() + 4;
    let step = Duration::from_secs(60 + total as u64 / 2);
    let at = |share: f64| (total as f64 * share) as usize;
    let progress = |what: &str, hub: &Hub, n: usize| {
        assert!(
            until_done(&addr, n, step),
            "{what}: the fleet stopped short of {n} done: {}",
            hub.stderr()
        );
    };

    progress("before the first kill", &hub, at(0.2));
    hub.kill_9();
    hub = Hub::start(&first, &addr, 2, Duration::from_secs(10));

    progress("before a person's push", &hub, at(0.3));
    ids.extend(person_adds(&person, "p1", 2));

    progress("before the second hub", &hub, at(0.35));
    let refused = Hub::try_start(&other, "127.0.0.1:0", 3);
    let (code, err) = refused
        .err()
        .expect("a second hub started beside a live one");
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains(&first.path().display().to_string()),
        "the refusal does not name the holder: {err}"
    );

    progress("before the second kill", &hub, at(0.5));
    hub.kill_9();
    hub = Hub::start(&first, &addr, 4, Duration::from_secs(10));

    progress("before another person's push", &hub, at(0.6));
    ids.extend(person_adds(&person, "p2", 2));

    progress("before the failover", &hub, at(0.7));
    hub.kill_9();
    let remote_at_failover = git_in(net.remote.path(), &["rev-parse", "main"])
        .trim()
        .to_string();
    first.git(&["fetch", "-q", "origin"]);
    let lost_with_hub = unpushed(&first, &remote_at_failover);
    hub = Hub::start(&other, &addr, 5, Duration::from_secs(40));
    assert!(
        hub.stderr().contains("in epoch 2"),
        "the new hub did not take the lease in the next epoch: {}",
        hub.stderr()
    );

    let finished = until_done(&addr, total, step);
    let landed = finished && {
        let end = Instant::now() + Duration::from_secs(30);
        let all_done = || {
            let places = remote_places(net.remote.path());
            ids.iter()
                .all(|id| places.get(id).is_some_and(|p| p == "work/done"))
        };
        while !all_done() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(300));
        }
        all_done()
    };
    let seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let mut ledger = Vec::new();
    for (name, t) in runners.iter().zip(run_threads) {
        let (given, events) = t.join().expect("runner");
        ledger.extend(runner_ledger(name, &given, &events));
    }
    for t in loop_threads {
        ledger.extend(t.join().expect("looper"));
    }
    let hub_log = hub.stderr();
    drop(hub);
    let places = remote_places(net.remote.path());
    let left: Vec<_> = ids
        .iter()
        .filter(|id| places.get(*id).is_none_or(|p| p != "work/done"))
        .map(|id| format!("{id} in {:?}", places.get(id)))
        .collect();
    assert!(
        finished && landed && left.is_empty(),
        "not every task is done on the remote: {left:?}; hub: {hub_log}"
    );

    let check = net.clone();
    let (verified, _) = check.code(&["verify"], 0);
    assert!(verified.trim_end().ends_with(": clean"), "{verified}");

    let report = check_ledgers(&check, &ledger, &lost_with_hub);
    let lost_claims: usize = (1..=5)
        .flat_map(|n| [&first, &other].map(|c| c.home().join(format!("hub-{n}.err"))))
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .map(|log| log.matches("lost claim").count())
        .sum();
    let log = std::fs::read_to_string(&pushes).unwrap_or_default();
    let accepted = log.lines().filter(|l| l.ends_with(" ok")).count();
    let rejected = log.lines().filter(|l| l.ends_with(" rejected")).count();
    eprintln!(
        "fleet: {} agents, {} tasks ({total} with handoffs), 2 kills, 1 failover: {seconds:.1} s, \
         {accepted} pushes ({rejected} rejected, limit {limit} a minute); {report}; {lost_claims} \"lost claim\" in the hubs' logs",
        size.agents, size.tasks
    );
    assert_eq!(
        rejected, 0,
        "the hook rejected pushes over {limit} a minute: {log}"
    );
}

/// Returns a done task's `result:` as (agent, attempt, `output.by`), read from its text.
fn result_of(text: &str) -> (String, u64, String) {
    let block = text
        .split_once("\nresult:\n")
        .map_or("", |(_, rest)| rest)
        .lines()
        .take_while(|l| l.starts_with(' '));
    let (mut agent, mut attempt, mut by) = (String::new(), 0, String::new());
    for line in block {
        if let Some(v) = line.strip_prefix("  agent: ") {
            agent = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("  attempt: ") {
            attempt = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = line.trim().strip_prefix("by: ") {
            by = v.trim().to_string();
        }
    }
    (agent, attempt, by)
}

/// Checks the agents' ledgers against the tasks on the remote (read in `check`, a fresh
/// clone): no (task, attempt) granted to two agents or run twice; every result an agent was
/// told was recorded is the task's result on the remote, unless the task was among those the
/// failed-over hub committed and never pushed (`lost_with_hub`: the documented window of a
/// failover, whose tasks must still end done by a later attempt). Returns a summary.
fn check_ledgers(check: &TestRepo, ledger: &[Entry], lost_with_hub: &BTreeSet<String>) -> String {
    // A grant is (task, attempt, epoch): the hub after a failover may grant the same attempt
    // number again in its own epoch. Agent routes that do not say the epoch count as one.
    let mut holders: BTreeMap<(String, u64, Option<u64>), Vec<String>> = BTreeMap::new();
    let (mut sent, mut recorded, mut in_window, mut refused) = (0, 0, 0, 0);
    for e in ledger {
        match e {
            Entry::Granted {
                agent,
                id,
                attempt,
                epoch,
            } => holders
                .entry((id.clone(), *attempt, *epoch))
                .or_default()
                .push(agent.clone()),
            Entry::Sent {
                agent,
                id,
                attempt,
                recorded: told,
            } => {
                sent += 1;
                if !*told {
                    // Refused: its task came back meanwhile (a failover, a lapsed lease).
                    refused += 1;
                    continue;
                }
                recorded += 1;
                let result = result_of(&check.read(&format!("work/done/{id}.yaml")));
                let same = result == (agent.clone(), *attempt, agent.clone());
                if !same && lost_with_hub.contains(id) {
                    in_window += 1;
                    continue;
                }
                assert!(
                    same,
                    "results lost: {agent} was told its result for {id} attempt {attempt} \
                     was recorded; the remote holds {result:?}"
                );
            }
        }
    }
    for ((id, attempt, _), agents) in &holders {
        let regranted_after_failover = lost_with_hub.contains(id);
        assert!(
            agents.len() == 1 || regranted_after_failover,
            "({id}, {attempt}) held twice: granted to {agents:?}"
        );
    }
    format!(
        "{} grants, {sent} results sent, {refused} refused, {recorded} told recorded, \
         {in_window} of them lost with the failed-over hub's last batch",
        holders.values().map(Vec::len).sum::<usize>()
    )
}
