//! A Jepsen-style run: a bare remote on a RAM disk, clones syncing in loops, pull agents on
//! their own clones (two of them running as the same agent) doing claim → work → complete → sync, a person pushing new tasks and edits
//! with plain git, and random kill -9 of some runs; then a checker over the remote's whole
//! history. Short by default (4 syncing clones for 20 s); `COORD_LONG=1` runs 8 syncing clones
//! for 3 minutes.

use crate::harness::{git_env, git_in, task_yaml, Net, Rng, TestRepo, T0};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What every worker records.
#[derive(Default)]
struct Log {
    /// (exit code, seconds) of every `coord sync` that was not killed.
    syncs: Vec<(Option<i32>, f64)>,
    killed: usize,
    rejected: usize,
    lost_claims: usize,
    /// Pushes of `claim --sync` / `complete --sync` rejected and redone.
    claim_races: usize,
    /// Tasks whose `complete --sync` reported success.
    completed: BTreeSet<String>,
    claims: usize,
    /// How many `claim --sync` runs exited 0 with each id: every grant is a new attempt,
    /// and no lease runs out here (the clock is fixed), so each id is granted once at most.
    granted: BTreeMap<String, usize>,
    pushes_by_person: usize,
    failures: Vec<String>,
}

fn coord(repo: &TestRepo, args: &[&str]) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("coord"));
    c.arg("-C").arg(repo.path()).args(args);
    for (k, v) in git_env() {
        c.env(k, v);
    }
    c.env("COORD_NOW", T0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs coord; with `kill_after`, kills it with SIGKILL after that delay. Returns None when
/// it was killed before it ended.
fn run(repo: &TestRepo, args: &[&str], kill_after: Option<Duration>) -> Option<Output> {
    let mut child = coord(repo, args).spawn().expect("spawn coord");
    if let Some(delay) = kill_after {
        let start = Instant::now();
        while start.elapsed() < delay {
            if child.try_wait().expect("try_wait").is_some() {
                return Some(child.wait_with_output().expect("output"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    Some(child.wait_with_output().expect("output"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One `coord sync`, maybe killed; recorded in the log.
fn one_sync(repo: &TestRepo, rng: &mut Rng, log: &Mutex<Log>) {
    let kill = (rng.below(10) == 0).then(|| Duration::from_millis(rng.below(400)));
    let start = Instant::now();
    let out = run(repo, &["sync", "--wait", "5s"], kill);
    let secs = start.elapsed().as_secs_f64();
    let mut log = log.lock().expect("log");
    match out {
        None => log.killed += 1,
        Some(o) => {
            let err = stderr(&o);
            log.rejected += err.matches("push rejected").count();
            log.lost_claims += err.matches("lost claim").count();
            if !matches!(o.status.code(), Some(0 | 3)) {
                log.failures
                    .push(format!("sync exited {:?}: {err}", o.status.code()));
            }
            log.syncs.push((o.status.code(), secs));
        }
    }
}

/// A pull agent: claim with --sync, work, complete with --sync, sync.
fn agent_round(repo: &TestRepo, agent: &str, rng: &mut Rng, log: &Mutex<Log>) {
    let kill = (rng.below(12) == 0).then(|| Duration::from_millis(rng.below(300)));
    let Some(o) = run(repo, &["claim", "--agent", agent, "--sync"], kill) else {
        log.lock().expect("log").killed += 1;
        return;
    };
    log.lock().expect("log").claim_races += stderr(&o).matches("push rejected").count();
    match o.status.code() {
        Some(0) => {}
        Some(4) => {
            std::thread::sleep(Duration::from_millis(100));
            return;
        }
        code => {
            let mut log = log.lock().expect("log");
            if code != Some(3) {
                log.failures
                    .push(format!("claim exited {code:?}: {}", stderr(&o)));
            }
            return;
        }
    }
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    {
        let mut log = log.lock().expect("log");
        log.claims += 1;
        *log.granted.entry(id.clone()).or_default() += 1;
    }
    std::thread::sleep(Duration::from_millis(rng.below(200)));
    let out = run(repo, &["complete", &id, "--sync"], None).expect("not killed");
    log.lock().expect("log").claim_races += stderr(&out).matches("push rejected").count();
    if out.status.success() {
        log.lock().expect("log").completed.insert(id);
    }
    one_sync(repo, rng, log);
}

/// A person: pulls, adds tasks and edits a ready task's title with plain git, pushes.
fn person_round(seed: &TestRepo, round: usize, rng: &mut Rng, log: &Mutex<Log>) {
    let git = |args: &[&str]| {
        let mut c = Command::new("git");
        c.current_dir(seed.path()).args(args);
        for (k, v) in git_env() {
            c.env(k, v);
        }
        c.output().expect("git")
    };
    let pulled = git(&["pull", "-q", "--rebase", "origin", "main"]);
    if !pulled.status.success() {
        git(&["rebase", "--abort"]);
        git(&["reset", "-q", "--hard", "origin/main"]);
        return;
    }
    for i in 0..(1 + rng.below(3)) {
        let id = format!("p{round}-{i}");
        seed.task(&id, &task_yaml(&id));
    }
    let ready: Vec<String> = std::fs::read_dir(seed.abs("work/ready"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if let Some(name) = ready.get(rng.below(ready.len().max(1) as u64) as usize) {
        let path = format!("work/ready/{name}");
        let text = seed.read(&path).replacen("title: ", "title: edited, ", 1);
        seed.write(&path, &text);
    }
    git(&["add", "-A", "work"]);
    git(&["commit", "-q", "-m", &format!("person round {round}")]);
    let pushed = git(&["push", "-q", "origin", "main"]);
    if pushed.status.success() {
        log.lock().expect("log").pushes_by_person += 1;
    } else {
        git(&["reset", "-q", "--hard", "origin/main"]);
    }
}

fn spawn_loop(
    stop: &Arc<AtomicBool>,
    seed: u64,
    mut body: impl FnMut(usize, &mut Rng) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let mut rng = Rng(seed | 1);
        let mut round = 0;
        while !stop.load(Ordering::Relaxed) {
            body(round, &mut rng);
            round += 1;
        }
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn clones_agents_and_people_with_kill_9_keep_every_task_exactly_once() {
    let long = std::env::var_os("COORD_LONG").is_some();
    let run_for = Duration::from_secs(if long { 180 } else { 20 });
    let clones = if long { 8 } else { 4 };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    eprintln!("jepsen seed {seed}");
    let net = Arc::new(Net::new(&[]));
    for a in ["p1", "p2"] {
        net.seed
            .ok(&["agents", "add", a, "--pull", "--max-active", "1000"]);
    }
    net.seed.git(&["push", "-q", "origin", "main"]);
    net.person_adds("start", 10);
    let log = Arc::new(Mutex::new(Log::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    let syncers: Vec<Arc<TestRepo>> = (0..clones).map(|_| Arc::new(Net::clone(&net))).collect();
    for (n, clone) in syncers.iter().enumerate() {
        let (clone, log) = (Arc::clone(clone), Arc::clone(&log));
        workers.push(spawn_loop(&stop, seed + n as u64, move |_, rng| {
            one_sync(&clone, rng, &log);
            std::thread::sleep(Duration::from_millis(rng.below(300)));
        }));
    }
    // Two clones work as p1 (two runners of one pull agent), one as p2.
    let names = ["p1", "p2", "p1"];
    let agents: Vec<Arc<TestRepo>> = names.iter().map(|_| Arc::new(Net::clone(&net))).collect();
    for (n, clone) in agents.iter().enumerate() {
        let (clone, log) = (Arc::clone(clone), Arc::clone(&log));
        let name = names[n].to_string();
        workers.push(spawn_loop(&stop, seed + 10 + n as u64, move |_, rng| {
            agent_round(&clone, &name, rng, &log);
        }));
    }
    {
        let (net, log) = (Arc::clone(&net), Arc::clone(&log));
        workers.push(spawn_loop(&stop, seed + 20, move |round, rng| {
            person_round(&net.seed, round, rng, &log);
            std::thread::sleep(Duration::from_millis(500 + rng.below(1000)));
        }));
    }
    // On a slow or loaded machine the run goes on until the agents have worked (a claim and a
    // completion), up to ten times as long: the checks below need both.
    let started = std::time::Instant::now();
    std::thread::sleep(run_for);
    while started.elapsed() < run_for * 10 {
        let worked = {
            let log = log.lock().expect("log");
            log.claims > 0 && !log.completed.is_empty()
        };
        if worked {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }
    // Settle: every clone syncs until its sync succeeds, so every result is processed.
    for clone in syncers.iter().chain(&agents) {
        for _ in 0..3 {
            let o = run(clone, &["sync", "--wait", "5s"], None).expect("not killed");
            assert!(o.status.success(), "final sync: {}", stderr(&o));
        }
    }
    let log = log.lock().expect("log");
    check_remote(&net, &log.completed);
    let mut times: Vec<f64> = log.syncs.iter().map(|(_, s)| *s).collect();
    times.sort_by(f64::total_cmp);
    eprintln!(
        "jepsen: {} syncs ({} runs killed), {} rejected sync pushes, {} lost claims, {} rejected claim/complete pushes redone, {} claims, {} completed, {} person pushes, sync p50 {:.2}s p99 {:.2}s max {:.2}s",
        log.syncs.len(),
        log.killed,
        log.rejected,
        log.lost_claims,
        log.claim_races,
        log.claims,
        log.completed.len(),
        log.pushes_by_person,
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().copied().unwrap_or(0.0)
    );
    assert!(log.failures.is_empty(), "{:#?}", log.failures);
    let twice: Vec<_> = log.granted.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "tasks granted to two claims: {twice:?}");
    assert!(
        log.claims > 0 && !log.completed.is_empty(),
        "the agents worked"
    );
}

/// Checks the remote's whole history.
fn check_remote(net: &Net, completed: &BTreeSet<String>) {
    let check = net.clone();
    let git = |args: &[&str]| git_in(check.path(), args);
    git_in(net.remote.path(), &["fsck", "--no-progress"]);
    // coord's own checker, as a team runs it, finds the same history clean.
    let (out, _) = check.code(&["verify", "--ref", "origin/main"], 0);
    assert!(out.trim_end().ends_with(": clean"), "{out}");
    eprintln!("jepsen: coord verify: {}", out.trim_end());
    // Every task id in exactly one place at the tip.
    let mut places: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in git(&["ls-files", "work"]).lines() {
        if path.ends_with(".yaml") && !path.starts_with("work/agents/") {
            let (folder, name) = path.rsplit_once('/').expect("folder");
            let id = name.trim_end_matches(".yaml").to_string();
            places.entry(id).or_default().push(folder.to_string());
        }
    }
    for (id, at) in &places {
        assert_eq!(at.len(), 1, "{id} is in {at:?} at the tip");
    }
    // No conflict marker was ever committed.
    let markers = git(&["log", "--format=%H", "-G^(<<<<<<<|>>>>>>>) ", "main"]);
    assert!(markers.is_empty(), "conflict markers in {markers}");
    // No (task, attempt) assigned to two agents in any commit.
    let mut holders: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut attempts: BTreeMap<String, String> = BTreeMap::new();
    for commit in git(&["rev-list", "main"]).lines() {
        for line in git(&["ls-tree", "-r", commit, "work/assigned"]).lines() {
            let Some((meta, path)) = line.split_once('\t') else {
                continue;
            };
            let blob = meta.split_whitespace().nth(2).expect("blob").to_string();
            let parts: Vec<&str> = path.split('/').collect();
            let [_, _, agent, name] = parts[..] else {
                continue;
            };
            let attempt = attempts
                .entry(blob.clone())
                .or_insert_with(|| {
                    git(&["cat-file", "-p", &blob])
                        .lines()
                        .find_map(|l| l.trim().strip_prefix("attempt:").map(str::trim))
                        .unwrap_or("?")
                        .to_string()
                })
                .clone();
            let id = name.trim_end_matches(".yaml").to_string();
            holders
                .entry((id, attempt))
                .or_default()
                .insert(agent.to_string());
        }
    }
    for ((id, attempt), agents) in &holders {
        assert_eq!(agents.len(), 1, "{id} attempt {attempt} held by {agents:?}");
    }
    // Every result a complete reported is accepted or kept as stale.
    for id in completed {
        let at = places
            .get(id)
            .unwrap_or_else(|| panic!("{id} vanished"))
            .first()
            .expect("place");
        let text = check.read(&format!("{at}/{id}.yaml"));
        let accepted = at == "work/done" && text.contains("status: success");
        assert!(
            accepted || text.contains("stale_result"),
            "{id}'s reported result is lost: {at}\n{text}"
        );
    }
}
