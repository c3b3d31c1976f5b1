//! Overhead per task of `coord run` around a no-op command, next to what an agent scripting
//! the loop by hand pays: one `coord claim` plus one `coord complete` per task, and next to
//! `coord run --worktree` (a git worktree and branch per attempt), with the cost of a bare
//! `git worktree add` + `remove` named on its own. All run the release binary on the real
//! clock against repos with the same N ready tasks of a pull agent (on /dev/shm when there is
//! one, so fsync noise of a shared disk stays out), in turns A B W A B W so drift of a shared
//! machine hits each; each turn gives ratios, the medians are quoted.
//! Run with `cargo bench --bench run_overhead`; `COORD_BENCH_TASKS` (default 30) and
//! `COORD_BENCH_ROUNDS` (default 5) size it. See docs/performance.md.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let tasks = var("COORD_BENCH_TASKS", 30);
    let rounds = var("COORD_BENCH_ROUNDS", 5);
    let mut by_run = Vec::new();
    let mut by_hand = Vec::new();
    let mut by_tree = Vec::new();
    let mut git_trees = Vec::new();
    let mut ratios = Vec::new();
    let mut tree_ratios = Vec::new();
    for _ in 0..rounds {
        let a = per_task(&Repo::with_ready(tasks), tasks, run_once);
        let b = per_task(&Repo::with_ready(tasks), tasks, claim_complete);
        let w = per_task(&Repo::with_ready(tasks), tasks, run_once_in_worktrees);
        git_trees.push(worktree_add_remove(&Repo::with_ready(tasks), tasks));
        ratios.push(a.as_secs_f64() / b.as_secs_f64());
        tree_ratios.push(w.as_secs_f64() / a.as_secs_f64());
        by_run.push(a);
        by_hand.push(b);
        by_tree.push(w);
    }
    println!("{tasks} tasks, {rounds} rounds, ms per task: median (min..max)");
    println!(
        "  coord run --once -- true              {}",
        spread(&mut by_run)
    );
    println!(
        "  coord claim + complete                {}",
        spread(&mut by_hand)
    );
    println!(
        "  coord run --once --worktree -- true   {}",
        spread(&mut by_tree)
    );
    println!(
        "  git worktree add + remove             {}",
        spread(&mut git_trees)
    );
    println!("  ratio run / (claim + complete): {}", median(&mut ratios));
    println!(
        "  ratio run --worktree / run:     {}",
        median(&mut tree_ratios)
    );
}

/// Returns the median of `v` with its range.
fn median(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    format!(
        "median {:.2} (min {:.2}, max {:.2})",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1]
    )
}

/// Times `work` on `repo` and returns the time per task; checks every task ended done.
fn per_task(repo: &Repo, tasks: usize, work: fn(&Repo, usize)) -> Duration {
    let t = Instant::now();
    work(repo, tasks);
    let took = t.elapsed();
    repo.coord(&["tick"]);
    let done = std::fs::read_dir(repo.path().join("work/done"))
        .expect("done/")
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some()))
        .count();
    assert_eq!(done, tasks, "every task done");
    took / tasks as u32
}

/// `coord run p --once -- true`: the harness claims, runs, completes each task.
fn run_once(repo: &Repo, _tasks: usize) {
    repo.coord(&["run", "p", "--once", "--", "true"]);
}

/// `coord run p --once --worktree -- true`: as [`run_once`], each attempt in a worktree of its
/// own on a new branch, removed when the attempt ends.
fn run_once_in_worktrees(repo: &Repo, _tasks: usize) {
    repo.coord(&["run", "p", "--once", "--worktree", "--", "true"]);
}

/// The git part of a worktree per task, alone: `git worktree add -b` then `git worktree
/// remove`, N times, in a repo like the others; returns the time per task.
fn worktree_add_remove(repo: &Repo, tasks: usize) -> Duration {
    let t = Instant::now();
    for i in 0..tasks {
        let dir = repo.path().join(format!(".git/bench-trees/t{i}"));
        let dir = dir.to_str().expect("utf-8 path");
        let branch = format!("bench/t{i}");
        repo.git(&["worktree", "add", "--quiet", "-b", &branch, dir, "HEAD"]);
        repo.git(&["worktree", "remove", "--force", dir]);
    }
    t.elapsed() / tasks as u32
}

/// One `coord claim` and one `coord complete` per task, as a script around coord does.
fn claim_complete(repo: &Repo, tasks: usize) {
    for _ in 0..tasks {
        let out = repo.coord(&["claim", "--agent", "p"]);
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        repo.coord(&["complete", &id, "--agent", "p", "--attempt", "1"]);
    }
}

/// A temporary repo with a pull agent and N ready tasks.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn with_ready(tasks: usize) -> Repo {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        };
        let r = Repo {
            dir: dir.expect("tempdir"),
        };
        r.coord(&["init"]);
        r.coord(&["agents", "add", "p", "--pull", "--max-active", "1000"]);
        for i in 0..tasks {
            let path = r.path().join(format!("work/inbox/t{i:04}.yaml"));
            std::fs::write(&path, format!("title: Task {i}\n")).expect("write");
            // Older than the settle time, so the tick takes it at once.
            let old = std::time::SystemTime::now() - Duration::from_secs(3600);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(old))
                .expect("mtime");
        }
        r.coord(&["tick"]);
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn coord(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_coord"))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("COORD_NOW")
            .arg("-C")
            .arg(self.path())
            .arg("--quiet")
            .args(args)
            .output()
            .expect("run coord");
        assert!(out.status.success(), "coord {args:?}: {out:?}");
        out
    }
}

impl Repo {
    fn git(&self, args: &[&str]) {
        let out = Command::new("git")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(self.path())
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

fn var(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

fn spread(v: &mut [Duration]) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{:.1} ({:.1}..{:.1})",
        ms(v[v.len() / 2]),
        ms(v[0]),
        ms(v[v.len() - 1])
    )
}
