//! Benchmark of the release `coord` binary against real temporary git repos (no criterion:
//! plain `Instant`, medians and p95 over repetitions). Run with `cargo bench --bench coord_bench`;
//! `COORD_BENCH_SCALE=0.1` shrinks every size for a quick run; `COORD_BENCH_ONLY=c` (or any
//! letters of `abc`) runs only those sections. See docs/performance.md.
//!
//! a. assigning 1,000 ready tasks (one commit each) next to `git mv` + `git commit` per task;
//! b. time per transition with 1,000 vs 20,000 tasks already in the repo;
//! c. a no-op `coord tick` (with the quiet mark, and planning without it) and `coord status`
//!    on 10,000 tasks next to `git status`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const NOW: &str = "2026-11-22T10:00:00Z";

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let scale: f64 = std::env::var("COORD_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let n = |base: usize| ((base as f64 * scale) as usize).max(10);
    let only = std::env::var("COORD_BENCH_ONLY").unwrap_or_else(|_| "abc".to_string());
    if only.contains('a') {
        assign_vs_shell(n(1_000));
    }
    if only.contains('b') {
        growth(n(1_000), n(20_000), n(200));
    }
    if only.contains('c') {
        noop(n(10_000), 15);
    }
}

/// A temporary repo with `coord init` and one push agent that can take everything.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let r = Repo {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        r.coord(&["init"]);
        r.coord(&["agents", "add", "bot", "--max-active", "1000"]);
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
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

    fn git(&self, args: &[&str]) -> Output {
        let out = env(Command::new("git"))
            .current_dir(self.path())
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out
    }

    fn commits(&self) -> usize {
        let out = self.git(&["rev-list", "--count", "HEAD"]);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("count")
    }

    /// Writes `count` tasks named `<prefix>-<i>` into `folder` as coord leaves them there,
    /// then commits them all at once.
    fn seed(&self, folder: &str, prefix: &str, count: usize) {
        let dir = self.path().join("work").join(folder);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let state = folder.split('/').next().unwrap_or(folder);
        let state = if state == "archive" { "done" } else { state };
        for i in 0..count {
            let text = task_text(prefix, i, state);
            std::fs::write(dir.join(format!("{prefix}-{i:05}.yaml")), text).expect("write");
        }
    }

    fn commit_all(&self) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", "seed"]);
    }
}

fn task_text(prefix: &str, i: usize, state: &str) -> String {
    let result = if state == "done" {
        "result:\n  status: success\n  attempt: 1\n  agent: bot\n  output: {summary: done}\n"
    } else {
        ""
    };
    let attempt = u8::from(state == "done");
    format!(
        "# Written by a person.\ntitle: Task {prefix} {i}\ndescription: |\n  Longer text about \
         task {i},\n  on two lines.\npriority: normal\nlabels: [bench, batch-{}]\n{result}coord:\n  \
         state: {state}\n  attempt: {attempt}\n  created_at: {NOW}\n",
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Times one `coord tick` that assigns every ready task; returns (ms per commit, commits).
fn tick_per_commit(repo: &Repo) -> (f64, usize) {
    let before = repo.commits();
    let t = Instant::now();
    repo.coord(&["tick", "-q"]);
    let elapsed = t.elapsed();
    let made = repo.commits() - before;
    (ms(elapsed) / made.max(1) as f64, made)
}

fn assign_vs_shell(n: usize) {
    println!("## a. assign {n} ready tasks, one commit each");
    let coord = Repo::new();
    coord.seed("ready", "t", n);
    coord.commit_all();
    let (per, made) = tick_per_commit(&coord);
    println!("coord tick: {made} commits, {per:.2} ms per transition");
    let shell = Repo::new();
    shell.seed("ready", "t", n);
    shell.commit_all();
    std::fs::create_dir_all(shell.path().join("work/assigned/bot")).expect("mkdir");
    let t = Instant::now();
    for i in 0..n {
        let name = format!("t-{i:05}.yaml");
        shell.git(&[
            "mv",
            &format!("work/ready/{name}"),
            &format!("work/assigned/bot/{name}"),
        ]);
        shell.git(&["commit", "-q", "-m", &format!("assign {name}")]);
    }
    let base = ms(t.elapsed()) / n as f64;
    println!("shell git mv + git commit: {base:.2} ms per task");
    println!("ratio coord / shell: {:.2}\n", per / base);
}

fn growth(small: usize, large: usize, batch: usize) {
    println!("## b. assign {batch} tasks with {small} vs {large} tasks already in the repo");
    let mut results = Vec::new();
    for existing in [small, large] {
        let repo = Repo::new();
        let months = ["2026-07", "2026-08", "2026-09", "2026-10"];
        let in_done = existing / 5;
        repo.seed("done", "d", in_done);
        for (m, month) in months.iter().enumerate() {
            let share = (existing - in_done) / months.len();
            repo.seed(&format!("archive/{month}"), &format!("a{m}"), share);
        }
        repo.seed("ready", "t", batch);
        repo.commit_all();
        let (per, made) = tick_per_commit(&repo);
        println!("{existing} existing: {made} commits, {per:.2} ms per transition");
        results.push(per);
    }
    println!("ratio large / small: {:.2}\n", results[1] / results[0]);
}

fn noop(n: usize, reps: usize) {
    println!("## c. no-op on {n} tasks ({reps} runs each, taken in turn; median / p95)");
    let repo = Repo::new();
    repo.seed("done", "d", n);
    repo.commit_all();
    repo.coord(&["tick", "-q"]);
    let quiet_mark = repo.path().join(".git/coord/quiet-mark");
    let runs: [(&str, &dyn Fn()); 4] = [
        ("coord tick (no-op): ", &|| {
            repo.coord(&["tick", "-q"]);
        }),
        ("coord tick (plans): ", &|| {
            // Without the quiet mark the tick reads the board and plans (the stat cache and
            // the clean mark still apply); removing it costs microseconds.
            let _ = std::fs::remove_file(&quiet_mark);
            repo.coord(&["tick", "-q"]);
        }),
        ("coord status:       ", &|| {
            repo.coord(&["status"]);
        }),
        ("git status:         ", &|| {
            repo.git(&["status", "--porcelain"]);
        }),
    ];
    let times = time_in_turn(&runs, reps);
    for ((label, _), (median, p95)) in runs.iter().zip(&times) {
        println!("{label}{median:.1} / {p95:.1} ms");
    }
    let git = times[3].0;
    println!("ratio tick / git status: {:.1}", times[0].0 / git);
    println!(
        "ratio tick that plans / git status: {:.1}",
        times[1].0 / git
    );
}

/// Runs each of `runs` once, `reps` times over (after one warm-up round), taking them in turn
/// so a machine that slows down meanwhile slows all of them; returns each one's median and
/// p95 in ms.
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
    samples
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            let p95 = ((v.len() * 95).div_ceil(100)).clamp(1, v.len()) - 1;
            (v[v.len() / 2], v[p95])
        })
        .collect()
}
