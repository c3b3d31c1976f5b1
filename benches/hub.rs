//! Benchmark of a fleet through one hub (`coord serve --hub`) against a local bare remote,
//! next to the CLI on one clone of the same repository in the same run:
//!
//! a. tasks a second end to end through the hub: A agents (threads, each a REST loop of
//!    `POST /v1/agents/{agent}/claim` and `…/tasks/{id}/complete` over loopback) take
//!    every one of N ready tasks; timed to the last answer and to the remote holding every
//!    result; next to `coord claim` + `coord complete` one after another on a clone (half
//!    before the hub's run, half after, so drift of a shared machine hits both): the ratio;
//! b. claim latency over loopback, p50 / p99 / max;
//! c. pushes a minute the remote received (counted by its `pre-receive` hook) against the
//!    hub's `pushes_per_minute`.
//!
//! Run with `cargo bench --bench hub`. `COORD_BENCH_TASKS` (default 10,000),
//! `COORD_BENCH_AGENTS` (64), `COORD_BENCH_CLI_TASKS` (the CLI's claim + complete pairs, 100)
//! and `COORD_BENCH_PUSHES` (the hub's `pushes_per_minute`, 6) size it; `COORD_BENCH_BIN`
//! measures another binary, `COORD_BENCH_DIR` puts the repositories elsewhere (default
//! `/dev/shm` when there is one). See docs/performance.md and docs/fleet.md.

#[path = "../tests/cli/http_client.rs"]
mod http_client;

use http_client::try_request;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NOW: &str = "2026-11-22T10:00:00Z";

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|n: &usize| *n > 0)
            .unwrap_or(default)
    };
    let (n, agents) = (
        var("COORD_BENCH_TASKS", 10_000),
        var("COORD_BENCH_AGENTS", 64),
    );
    let (cli_pairs, budget) = (
        var("COORD_BENCH_CLI_TASKS", 100),
        var("COORD_BENCH_PUSHES", 6),
    );
    println!("## a fleet through one hub: {n} tasks, {agents} agents, {budget} pushes a minute");
    println!("load average at the start: {}", load_average());
    let net = Net::seeded(n, agents, budget);
    let cli = Repo::clone_of(&net);
    let hub_clone = Repo::clone_of(&net);
    cli.coord(&["status"]);
    let before = cli_pairs_per_second(&cli, cli_pairs / 2);
    let fleet = run_fleet(&net, &hub_clone, agents);
    let after = cli_pairs_per_second(&cli, cli_pairs - cli_pairs / 2);
    let by_cli = (before + after) / 2.0;
    println!(
        "CLI claim + complete on one clone: {before:.2} / {after:.2} tasks/s (before / after)"
    );
    println!(
        "a. through the hub {:.1} tasks/s to the last answer ({:.1} s), {:.1} tasks/s until \
         the remote held every result ({:.1} s): {:.1}x / {:.1}x the CLI's {by_cli:.2} tasks/s",
        fleet.done as f64 / fleet.answered,
        fleet.answered,
        fleet.done as f64 / fleet.landed,
        fleet.landed,
        fleet.done as f64 / fleet.answered / by_cli,
        fleet.done as f64 / fleet.landed / by_cli
    );
    println!(
        "   {} of {n} tasks completed; {} completes refused after their claim was answered \
         (goal 0)",
        fleet.done, fleet.refused
    );
    let c = &fleet.claims;
    println!(
        "b. claim latency over loopback: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} claims)",
        pct(c, 0.50),
        pct(c, 0.99),
        pct(c, 1.0),
        c.len()
    );
    println!(
        "c. {} pushes in {:.1} s: {:.1} a minute (budget {budget})",
        fleet.pushes,
        fleet.landed,
        fleet.pushes as f64 * 60.0 / fleet.landed
    );
    println!("load average at the end: {}", load_average());
}

/// What the fleet's run measured.
struct Fleet {
    /// Seconds from the first claim to the last answer.
    answered: f64,
    /// Seconds from the first claim until the remote held every result.
    landed: f64,
    /// Every claim's latency, ms, sorted.
    claims: Vec<f64>,
    /// Pushes the remote received meanwhile.
    pushes: usize,
    /// Tasks completed (answered 200).
    done: usize,
    /// Completes refused (409) after their claim was answered: grants the hub lost.
    refused: usize,
}

/// Starts the hub in `clone` and lets `agents` REST loops take every task.
fn run_fleet(net: &Net, clone: &Repo, agents: usize) -> Fleet {
    let hub = Hub::start(clone);
    let pushed_before = net.pushes();
    let done = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let loops: Vec<_> = (0..agents)
        .map(|i| {
            let (addr, done, refused) = (hub.addr.clone(), Arc::clone(&done), Arc::clone(&refused));
            std::thread::spawn(move || agent_loop(&addr, &format!("a{i}"), &done, &refused))
        })
        .collect();
    let mut claims: Vec<f64> = loops
        .into_iter()
        .flat_map(|t| t.join().expect("agent"))
        .collect();
    let answered = started.elapsed().as_secs_f64();
    let (done, refused) = (done.load(Ordering::SeqCst), refused.load(Ordering::SeqCst));
    let end = Instant::now() + Duration::from_secs(600);
    while net.done_on_remote() < done {
        assert!(
            Instant::now() < end,
            "the remote lacks results after 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let landed = started.elapsed().as_secs_f64();
    claims.sort_by(f64::total_cmp);
    Fleet {
        answered,
        landed,
        claims,
        pushes: net.pushes() - pushed_before,
        done,
        refused,
    }
}

/// One agent: claims the best ready task and completes it for the grant's attempt and epoch, through
/// the agent routes (as `coord claim/complete --hub` do), until none is left; returns its claims' latencies in ms (from the first try to the
/// answer).
fn agent_loop(addr: &str, agent: &str, done: &AtomicUsize, refused: &AtomicUsize) -> Vec<f64> {
    let mut latencies = Vec::new();
    let claim_path = format!("/v1/agents/{agent}/claim");
    for n in 0.. {
        let t = Instant::now();
        let r = send(
            addr,
            &claim_path,
            &format!("{agent}-claim-{n}"),
            "{}".into(),
        );
        latencies.push(ms(t.elapsed()));
        let grant: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
        if grant["claimed"] == false {
            break;
        }
        assert_eq!(r.status, 200, "claim: {}", r.body);
        let id = grant["id"].as_str().expect("an id");
        let body = serde_json::json!({
            "attempt": grant["attempt"],
            "epoch": grant["epoch"],
            "output": {"by": agent},
        });
        let path = format!("/v1/agents/{agent}/tasks/{id}/complete");
        let r = send(addr, &path, &format!("{agent}-done-{n}"), body.to_string());
        match r.status {
            200 => done.fetch_add(1, Ordering::SeqCst),
            // The hub answered the claim, then lost the grant: counted, printed.
            409 => {
                eprintln!(
                    "complete {id} refused after its claim was answered: {}",
                    r.body
                );
                refused.fetch_add(1, Ordering::SeqCst)
            }
            _ => panic!("complete {id}: {} {}", r.status, r.body),
        };
    }
    latencies
}

/// Posts `body` with an idempotency key, sending it again with the same key when the answer
/// does not come (a queue longer than the client's 30 s read timeout) or the server is busy.
fn send(addr: &str, path: &str, key: &str, body: String) -> http_client::Resp {
    let headers = [("Idempotency-Key", key)];
    loop {
        match try_request(addr, "POST", path, &headers, body.as_bytes()) {
            Some(r) if r.status != 503 => return r,
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `coord claim` + `coord complete` one after another, `pairs` times: tasks a second.
fn cli_pairs_per_second(cli: &Repo, pairs: usize) -> f64 {
    let started = Instant::now();
    for _ in 0..pairs {
        let out = cli.coord(&["claim", "--agent", "a0"]);
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        cli.coord(&["complete", &id, "--agent", "a0", "--attempt", "1"]);
    }
    pairs as f64 / started.elapsed().as_secs_f64()
}

/// A bare remote holding `n` ready tasks and `agents` pull agents, whose `pre-receive` hook
/// logs every push.
struct Net {
    remote: Repo,
    log: PathBuf,
}

impl Net {
    fn seeded(n: usize, agents: usize, budget: usize) -> Net {
        let remote = Repo::empty();
        git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
        let seed = Repo::empty();
        seed.coord(&["init"]);
        for i in 0..agents {
            let name = format!("a{i}");
            seed.coord(&["agents", "add", &name, "--pull", "--max-active", "1000"]);
        }
        let yaml = std::fs::read_to_string(seed.path().join("coord.yaml")).expect("coord.yaml");
        let hub = format!("hub: {{remote: origin, pushes_per_minute: {budget}, lease: 1m}}\n");
        std::fs::write(seed.path().join("coord.yaml"), format!("{yaml}{hub}")).expect("write");
        let inbox = seed.path().join("work/inbox");
        for i in 0..n {
            let text = format!("title: Task {i}\n");
            std::fs::write(inbox.join(format!("t{i:05}.yaml")), text).expect("task");
        }
        git(seed.path(), &["add", "-A"]);
        git(seed.path(), &["commit", "-q", "-m", "people drop tasks"]);
        seed.coord(&["tick"]);
        let url = remote.path().to_str().expect("utf8");
        git(seed.path(), &["remote", "add", "origin", url]);
        git(seed.path(), &["push", "-q", "origin", "main"]);
        let log = remote.path().join("pushes.log");
        let hook = remote.path().join("hooks/pre-receive");
        let body = format!(
            "#!/bin/sh\ncat >/dev/null\necho push >> '{}'\n",
            log.display()
        );
        std::fs::write(&hook, body).expect("hook");
        let mut perms = std::fs::metadata(&hook).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&hook, perms).expect("chmod");
        Net { remote, log }
    }

    /// Pushes the remote received so far.
    fn pushes(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Tasks the remote's main holds in work/done/.
    fn done_on_remote(&self) -> usize {
        let out = git(
            self.remote.path(),
            &["ls-tree", "--name-only", "main", "work/done/"],
        );
        out.lines().filter(|l| l.ends_with(".yaml")).count()
    }
}

/// A running `coord serve --hub`; killed when dropped.
struct Hub {
    child: Child,
    addr: String,
}

impl Hub {
    fn start(clone: &Repo) -> Hub {
        let mut child = env(&mut Command::new(coord_bin()))
            .arg("-C")
            .arg(clone.path())
            .args(["serve", "--hub", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start coord serve --hub");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("read");
        let addr = line
            .trim()
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("coord serve --hub printed {line:?}, not its address"))
            .to_string();
        Hub { child, addr }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary folder, on `COORD_BENCH_DIR`, else `/dev/shm` when there is one.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn empty() -> Repo {
        let base = std::env::var_os("COORD_BENCH_DIR")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
            .unwrap_or_else(std::env::temp_dir);
        Repo {
            dir: tempfile::tempdir_in(base).expect("tempdir"),
        }
    }

    /// A new clone of the net's remote.
    fn clone_of(net: &Net) -> Repo {
        let r = Repo::empty();
        let url = net.remote.path().to_str().expect("utf8");
        git(r.path(), &["clone", "-q", url, "."]);
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs coord here; panics unless it succeeds.
    fn coord(&self, args: &[&str]) -> Output {
        let out = env(&mut Command::new(coord_bin()))
            .arg("-C")
            .arg(self.path())
            .args(args)
            .output()
            .expect("run coord");
        assert!(
            out.status.success(),
            "coord {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// Runs git in `dir`; panics unless it succeeds; returns stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = env(&mut Command::new("git"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The environment of every process: no user git config, a fixed identity and clock.
fn env(c: &mut Command) -> &mut Command {
    c.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .env("COORD_NOW", NOW)
}

/// The binary measured: `COORD_BENCH_BIN`, else the one this bench was built with.
fn coord_bin() -> PathBuf {
    std::env::var_os("COORD_BENCH_BIN")
        .filter(|bin| !bin.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_coord")), PathBuf::from)
}

/// The value below which `share` of the sorted `values` lie.
fn pct(values: &[f64], share: f64) -> f64 {
    let i = ((values.len() as f64 * share).ceil() as usize).clamp(1, values.len().max(1));
    values.get(i - 1).copied().unwrap_or(0.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}
