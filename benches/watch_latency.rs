//! Drop-to-commit latency of `coord watch`: a task file is written under a temporary name and
//! renamed into `work/inbox/` (the safe way to write), and the clock stops when HEAD's commit
//! assigns it. Prints p50, p95 and max over the drops.
//!
//! Run with `cargo bench --bench watch_latency` (optionally `-- 100` for the number of drops).
//! Not part of `cargo test`. The repository lives in a temporary folder (set TMPDIR to compare
//! a RAM file system with a disk: coord fsyncs each move and write).

use coord::git::Repo;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let drops: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    coord(root, &["init", "-q"]);
    coord(
        root,
        &["agents", "add", "alice", "--max-active", "1000", "-q"],
    );
    let mut watch = Command::new(env!("CARGO_BIN_EXE_coord"))
        .arg("-C")
        .arg(root)
        .args(["watch", "-q", "--interval", "1h"])
        .stderr(Stdio::null())
        .spawn()
        .expect("start coord watch");
    let repo = Repo::discover(root).expect("repo");
    // The first tick runs at start; wait for it by dropping a warm-up task.
    latency(root, &repo, "warm-up", Duration::from_secs(30));
    let mut samples: Vec<Duration> = (0..drops)
        .map(|i| latency(root, &repo, &format!("t{i}"), Duration::from_secs(30)))
        .collect();
    let _ = Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status();
    let _ = watch.wait();
    samples.sort();
    let pct = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    println!(
        "coord watch drop-to-commit over {drops} drops ({}): p50 {:?}, p95 {:?}, max {:?}",
        root.display(),
        pct(50),
        pct(95),
        samples[samples.len() - 1]
    );
}

/// Writes a task into the inbox and returns how long until HEAD's commit assigns it.
fn latency(root: &Path, repo: &Repo, id: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    let part = root.join(format!("work/inbox/.{id}.yaml.part"));
    std::fs::write(&part, format!("title: {id}\n")).expect("write a task");
    std::fs::rename(&part, root.join(format!("work/inbox/{id}.yaml"))).expect("rename it in");
    let want = format!("coord: assign {id} to alice");
    while start.elapsed() < limit {
        let head = repo.log(Some(1)).expect("log");
        if head.first().is_some_and(|c| c.summary == want) {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("{id} was not assigned within {limit:?}");
}

fn coord(root: &Path, args: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_coord"))
        .arg("-C")
        .arg(root)
        .args(args)
        .status()
        .expect("run coord");
    assert!(status.success(), "coord {args:?}");
}
