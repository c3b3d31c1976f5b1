//! Benchmark of `coord serve` (release binary) on a repository of 10,000 tasks, each figure
//! next to a baseline taken in the same run, in turns so drift of a shared machine hits both:
//!
//! a. `GET /v1/tasks/{id}` p50 (goal ≤ 5 ms) next to `GET /healthz` (the HTTP floor) and to
//!    `coord --json show` (what a client pays without the server);
//! b. `GET /` (the board, goal ≤ 200 ms) next to `coord status`;
//! c. latency from the commit of a `coord new` (its process exit) to the `transition` event
//!    on `/v1/events` (goal ≤ 1 s), next to the time of that `coord new` itself;
//! d. the server's resident memory (goal ≤ 64 MB at 10,000 tasks) next to the same server on
//!    an empty repository.
//!
//! Run with `cargo bench --bench serve`; `COORD_BENCH_TASKS` (default 10,000) sizes it. Plain
//! HTTP/1.1 over std's TcpStream, one request per connection, with the tests' client
//! (`tests/cli/http_client.rs`). See docs/performance.md.

#[path = "../tests/cli/http_client.rs"]
mod http_client;

use http_client::{memory_mb, request, Events};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NOW: &str = "2026-11-22T10:00:00Z";

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let n = std::env::var("COORD_BENCH_TASKS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n: &usize| *n >= 10)
        .unwrap_or(10_000);
    let repo = Repo::seeded(n);
    let server = Server::start(&repo);
    println!("## coord serve on {n} tasks (median / p95, ms)");
    let id = format!("d-{:05}", n / 2);
    one_task(&repo, &server, &id);
    board(&repo, &server);
    events(&repo, &server, 20);
    memory(&server);
}

/// a. One task over HTTP, the HTTP floor, and the CLI.
fn one_task(repo: &Repo, server: &Server, id: &str) {
    let path = format!("/v1/tasks/{id}");
    let runs: [(&str, &dyn Fn()); 2] = [
        ("GET /v1/tasks/{id}", &|| server.get_ok(&path)),
        ("GET /healthz      ", &|| server.get_ok("/healthz")),
    ];
    let http = time_in_turn(&runs, 500);
    let cli = time_in_turn(
        &[("coord --json show", &|| {
            repo.coord(&["--json", "show", id]);
        })],
        15,
    );
    print_rows(&runs, &http);
    println!("coord --json show  {}", fmt(cli[0]));
    println!(
        "a. GET task p50 {:.2} ms (goal <= 5): {:.1}x /healthz, {:.3}x coord show\n",
        http[0].0,
        http[0].0 / http[1].0,
        http[0].0 / cli[0].0
    );
}

/// b. The board page and `coord status`.
fn board(repo: &Repo, server: &Server) {
    let runs: [(&str, &dyn Fn()); 2] = [
        ("GET /       ", &|| server.get_ok("/")),
        ("coord status", &|| {
            repo.coord(&["status"]);
        }),
    ];
    let t = time_in_turn(&runs, 15);
    print_rows(&runs, &t);
    println!(
        "b. GET / p50 {:.1} ms (goal <= 200): {:.2}x coord status\n",
        t[0].0,
        t[0].0 / t[1].0
    );
}

/// c. From a `coord new`'s exit to its `transition` event.
fn events(repo: &Repo, server: &Server, rounds: usize) {
    let mut stream = server.events();
    let mut latency = Vec::new();
    let mut command = Vec::new();
    for i in 0..rounds {
        let id = format!("ev-{i}");
        let t = Instant::now();
        repo.coord(&["new", "An event", "--id", &id]);
        command.push(ms(t.elapsed()));
        let committed = Instant::now();
        let needle = format!("\"task\":\"{id}\"");
        assert!(
            stream.until(Duration::from_secs(30), |seen| seen.contains(&needle)),
            "no transition event for {id}"
        );
        latency.push(ms(committed.elapsed()));
    }
    let (l, c) = (stats(latency), stats(command));
    println!("commit -> event    {}", fmt(l));
    println!("coord new          {}", fmt(c));
    println!(
        "c. event p50 {:.0} ms, p95 {:.0} ms (goal <= 1000): {:.2}x the coord new that made it\n",
        l.0,
        l.1,
        l.0 / c.0
    );
}

/// d. Resident memory here and on an empty repository.
fn memory(server: &Server) {
    let empty = Repo::seeded(0);
    let idle = Server::start(&empty);
    idle.get_ok("/");
    idle.get_ok("/v1/tasks");
    let (big, small) = (server.memory(), idle.memory());
    println!(
        "d. RSS {:.1} MB now, {:.1} MB at most (goal <= 64); empty repo {:.1} / {:.1} MB: {:.2}x",
        big.0,
        big.1,
        small.0,
        small.1,
        big.1 / small.1
    );
}

/// A temporary repo with `coord init`, one agent, and `n` tasks (nine in ten done, the rest
/// ready) committed at once, as `benches/coord_bench.rs` seeds them.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn seeded(n: usize) -> Repo {
        let r = Repo {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        r.coord(&["init"]);
        r.coord(&["agents", "add", "bot", "--max-active", "1000"]);
        let ready = n / 10;
        r.seed("done", "d", ready, n);
        r.seed("ready", "r", 0, ready);
        r.git(&["add", "-A"]);
        r.git(&["commit", "-q", "--allow-empty", "-m", "seed"]);
        r.coord(&["tick", "-q"]);
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn seed(&self, state: &str, prefix: &str, from: usize, to: usize) {
        let dir = self.path().join("work").join(state);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for i in from..to {
            std::fs::write(
                dir.join(format!("{prefix}-{i:05}.yaml")),
                task_text(i, state),
            )
            .expect("write");
        }
    }

    fn coord(&self, args: &[&str]) -> Output {
        let out = env(Command::new(env!("CARGO_BIN_EXE_coord")))
            .arg("-C")
            .arg(self.path())
            .args(args)
            .output()
            .expect("run coord");
        assert!(out.status.success(), "coord {args:?}: {out:?}");
        out
    }

    fn git(&self, args: &[&str]) {
        let out = env(Command::new("git"))
            .current_dir(self.path())
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

fn task_text(i: usize, state: &str) -> String {
    let (result, attempt) = if state == "done" {
        (
            "result:\n  status: success\n  attempt: 1\n  agent: bot\n  output: {summary: done}\n",
            1,
        )
    } else {
        ("", 0)
    };
    format!(
        "title: Task {i}\ndescription: |\n  Longer text about task {i},\n  on two lines.\n\
         priority: normal\ncapabilities: [nobody-has-it]\nlabels: [bench, batch-{}]\n{result}\
         coord:\n  state: {state}\n  attempt: {attempt}\n  created_at: {NOW}\n",
        i % 10
    )
}

fn env(mut c: Command) -> Command {
    c.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .env("COORD_NOW", NOW);
    c
}

/// A running `coord serve` on an ephemeral port; killed when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(repo: &Repo) -> Server {
        let mut child = env(Command::new(env!("CARGO_BIN_EXE_coord")))
            .arg("-C")
            .arg(repo.path())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start coord serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the address");
        let addr = line
            .trim()
            .strip_prefix("http://")
            .expect("coord serve prints its address")
            .to_string();
        Server { child, addr }
    }

    /// Sends a GET on a new connection, reads the whole answer and checks it is a 200.
    fn get_ok(&self, path: &str) {
        let a = request(&self.addr, "GET", path, &[], b"");
        assert_eq!(a.status, 200, "GET {path}: {}", a.body);
    }

    /// Opens `/v1/events` and waits for its `ready` event.
    fn events(&self) -> Events {
        Events::open(&self.addr)
    }

    /// Returns (VmRSS, VmHWM) in MB, from /proc.
    fn memory(&self) -> (f64, f64) {
        memory_mb(self.child.id())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs each of `runs` once, `reps` times over (after one warm-up round), in turn; returns
/// each one's median and p95 in ms.
fn time_in_turn(runs: &[(&str, &dyn Fn())], reps: usize) -> Vec<(f64, f64)> {
    let mut samples = vec![Vec::with_capacity(reps); runs.len()];
    for round in 0..=reps {
        for ((_, run), taken) in runs.iter().zip(samples.iter_mut()) {
            let t = Instant::now();
            run();
            if round > 0 {
                taken.push(ms(t.elapsed()));
            }
        }
    }
    samples.into_iter().map(stats).collect()
}

/// Median and p95 of samples in ms.
fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let p95 = ((v.len() * 95).div_ceil(100)).clamp(1, v.len()) - 1;
    (v[v.len() / 2], v[p95])
}

fn fmt((median, p95): (f64, f64)) -> String {
    format!("{median:.2} / {p95:.2}")
}

fn print_rows(runs: &[(&str, &dyn Fn())], times: &[(f64, f64)]) {
    for ((label, _), t) in runs.iter().zip(times) {
        println!("{label} {}", fmt(*t));
    }
}
