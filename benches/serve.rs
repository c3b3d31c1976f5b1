//! Benchmark of `coord serve` (release binary) on a repository of 10,000 tasks, each figure
//! next to a baseline taken in the same run, in turns so drift of a shared machine hits both:
//!
//! a. `GET /v1/tasks/{id}` p50 (goal ≤ 5 ms) next to `GET /healthz` (the HTTP floor) and to
//!    `coord --json show` (what a client pays without the server);
//! b. `GET /` (the board, goal ≤ 200 ms) and a filtered board (label and text search, which
//!    read every task) next to `coord status`;
//! c. latency from the commit of a `coord new` (its process exit) to the `transition` event
//!    on `/v1/events` (goal ≤ 1 s), next to the time of that `coord new` itself;
//! d. the server's resident memory (goal ≤ 64 MB at 10,000 tasks) next to the same server on
//!    an empty repository;
//! e. the server's resident memory with 100 open `/v1/events` streams next to none;
//! f. `coord mcp` answers at 10,000 tasks: `status` (summary and full) and `list` (default
//!    page and 1,000), bytes and time, next to an MCP `ping` (the stdio round trip) and to
//!    `coord --json status` (the same reading from a new process).
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
    streams(&server, 100);
    mcp(&repo);
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

/// b. The board page, a filtered board and `coord status`.
fn board(repo: &Repo, server: &Server) {
    let filtered = "/?label=batch-3&q=task%201";
    // The first filtered board after a start reads every task; later ones only changed files.
    let cold = Instant::now();
    server.get_ok(filtered);
    let cold = ms(cold.elapsed());
    let runs: [(&str, &dyn Fn()); 3] = [
        ("GET /        ", &|| server.get_ok("/")),
        ("GET /?label&q", &|| server.get_ok(filtered)),
        ("coord status ", &|| {
            repo.coord(&["status"]);
        }),
    ];
    let t = time_in_turn(&runs, 15);
    print_rows(&runs, &t);
    let size = |path: &str| request(&server.addr, "GET", path, &[], b"").body.len() / 1024;
    println!(
        "b. GET / p50 {:.1} ms (goal <= 200, {} KB): {:.2}x coord status; filtered board {:.1} ms \
         ({} KB): {:.2}x GET / (the first one {:.0} ms: {:.2}x coord status)\n",
        t[0].0,
        size("/"),
        t[0].0 / t[2].0,
        t[1].0,
        size(filtered),
        t[1].0 / t[0].0,
        cold,
        cold / t[2].0
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

/// e. Resident memory with `n` event streams open, next to the same server before.
fn streams(server: &Server, n: usize) {
    let before = server.memory();
    let open: Vec<Events> = (0..n).map(|_| server.events()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let with = server.memory();
    println!(
        "e. RSS with {} event streams {:.1} MB (peak {:.1}); before {:.1} MB: {:.2}x, {:.0} KB a stream\n",
        open.len(),
        with.0,
        with.1,
        before.0,
        with.0 / before.0,
        (with.0 - before.0) * 1024.0 / n as f64
    );
}

/// f. `coord mcp`'s `status` and `list` answers, next to a `ping`.
fn mcp(repo: &Repo) {
    let mut m = Mcp::start(repo);
    let calls: [(&str, &str, serde_json::Value); 5] = [
        ("ping                 ", "ping", serde_json::json!({})),
        ("status (summary)     ", "status", serde_json::json!({})),
        (
            "status full          ",
            "status",
            serde_json::json!({"full": true}),
        ),
        ("list (default page)  ", "list", serde_json::json!({})),
        (
            "list limit 1000      ",
            "list",
            serde_json::json!({"limit": 1000}),
        ),
    ];
    let mut rows = Vec::new();
    for (label, tool, args) in &calls {
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..=10 {
            let t = Instant::now();
            bytes = if *tool == "ping" {
                m.call("ping", serde_json::json!({}))
            } else {
                m.call(
                    "tools/call",
                    serde_json::json!({"name": tool, "arguments": args}),
                )
            };
            times.push(ms(t.elapsed()));
        }
        times.remove(0);
        let t = stats(times);
        println!("{label} {} ms, {:.1} KB", fmt(t), bytes as f64 / 1024.0);
        rows.push((t, bytes));
    }
    let cli = time_in_turn(
        &[("coord --json status", &|| {
            repo.coord(&["--json", "status"]);
        })],
        10,
    )[0];
    println!("coord --json status   {} ms", fmt(cli));
    println!(
        "f. MCP status {:.1} KB in {:.1} ms ({:.2}x coord --json status), full {:.0} KB; list \
         {:.1} KB in {:.1} ms ({:.2}x), 1000 {:.0} KB (goal: defaults well under 64 KB)",
        rows[1].1 as f64 / 1024.0,
        rows[1].0 .0,
        rows[1].0 .0 / cli.0,
        rows[2].1 as f64 / 1024.0,
        rows[3].1 as f64 / 1024.0,
        rows[3].0 .0,
        rows[3].0 .0 / cli.0,
        rows[4].1 as f64 / 1024.0
    );
}

/// `coord mcp` over its stdio, spoken line by line; killed when dropped.
struct Mcp {
    child: Child,
    to: std::process::ChildStdin,
    from: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Mcp {
    fn start(repo: &Repo) -> Mcp {
        let mut child = env(Command::new(env!("CARGO_BIN_EXE_coord")))
            .arg("-C")
            .arg(repo.path())
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start coord mcp");
        let to = child.stdin.take().expect("stdin");
        let from = BufReader::new(child.stdout.take().expect("stdout"));
        let mut m = Mcp {
            child,
            to,
            from,
            next: 0,
        };
        let init = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}});
        m.call("initialize", init);
        m.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: &serde_json::Value) {
        use std::io::Write;
        writeln!(self.to, "{v}").expect("write to coord mcp");
        self.to.flush().expect("flush");
    }

    /// Sends a request and returns the size of its answer in bytes.
    fn call(&mut self, method: &str, params: serde_json::Value) -> usize {
        self.next += 1;
        let id = self.next;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let mut line = String::new();
            let n = self.from.read_line(&mut line).expect("read coord mcp");
            assert!(n > 0, "coord mcp ended");
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {line}");
                return line.len();
            }
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
