//! `coord serve`'s memory at a few thousand tasks, without timing anything: the peak resident
//! memory (`VmHWM`) after the pages and queries people and scrapers make must grow per task no
//! faster than the goal allows (64 MB at 10,000 tasks), measured against the same
//! server on an empty repository. The server runs with two malloc arenas (it starts itself
//! again with `MALLOC_ARENA_MAX=2` unless the user set it).

use crate::harness::TestRepo;
use crate::http::Server;

/// The goal: resident memory at 10,000 tasks, in MB.
const GOAL_MB: f64 = 64.0;
/// Tasks the goal is stated for.
const GOAL_TASKS: f64 = 10_000.0;

/// A repo with `n` task files committed at once, nine in ten done and the rest ready, and no
/// stat cache: a fresh clone, whose first load parses every file.
fn seeded(n: usize) -> TestRepo {
    let r = TestRepo::empty_in_memory();
    r.ok(&["init"]);
    r.ok(&["agents", "add", "bot"]);
    for i in 0..n {
        let state = if i % 10 == 0 { "ready" } else { "done" };
        let result = if state == "done" {
            "result:\n  status: success\n  attempt: 1\n  agent: bot\n  output: {summary: done}\n"
        } else {
            ""
        };
        let attempt = u8::from(state == "done");
        std::fs::create_dir_all(r.abs(&format!("work/{state}"))).expect("mkdir");
        std::fs::write(
            r.abs(&format!("work/{state}/t-{i:05}.yaml")),
            format!(
                "title: Task {i}\ndescription: |\n  Longer text about task {i},\n  on two lines.\n\
                 priority: normal\ncapabilities: [nobody-has-it]\nlabels: [mem, batch-{}]\n{result}\
                 coord:\n  state: {state}\n  attempt: {attempt}\n  created_at: 2026-11-22T09:00:00Z\n",
                i % 10
            ),
        )
        .expect("write task");
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "--allow-empty", "-m", "seed"]);
    r
}

/// Asks what a person's browser and a scraper ask: the board, a column, the task list with
/// and without filters, the board view and the metrics.
fn browse(s: &Server) {
    for path in [
        "/",
        "/column/done",
        "/v1/tasks",
        "/v1/tasks?priority=normal",
        "/v1/tasks?capability=nobody-has-it&state=done",
        "/v1/board",
        "/metrics",
    ] {
        let a = s.get(path);
        assert_eq!(a.status, 200, "GET {path}: {}", a.body);
    }
}

#[test]
fn serve_memory_at_3000_tasks_grows_within_the_goal() {
    let n = 3_000;
    let empty = seeded(0);
    let idle = Server::start(&empty);
    browse(&idle);
    let base = idle.peak_memory_mb();
    drop(idle);
    let big = seeded(n);
    let s = Server::start(&big);
    browse(&s);
    let peak = s.peak_memory_mb();
    let bound = base + (GOAL_MB - base) * n as f64 / GOAL_TASKS;
    eprintln!(
        "coord serve peak RSS: {peak:.1} MB at {n} tasks, {base:.1} MB empty; bound {bound:.1} MB"
    );
    assert!(
        peak <= bound,
        "coord serve peaked at {peak:.1} MB with {n} tasks ({base:.1} MB empty): more than {bound:.1} MB, the growth the goal ({GOAL_MB} MB at 10,000 tasks) allows"
    );
}

/// The server starts itself again with two malloc arenas (glibc's default of up to eight per
/// core kept ~20 MB more than the heap held at 10,000 tasks), unless the user set a number.
#[test]
fn serve_runs_with_two_malloc_arenas_unless_told_otherwise() {
    let r = seeded(0);
    let arenas = |s: &Server| {
        s.environment()
            .into_iter()
            .find_map(|e| e.strip_prefix("MALLOC_ARENA_MAX=").map(str::to_string))
    };
    // The harness starts coord with a cleared environment: no value of the user's here.
    let s = Server::start(&r);
    assert_eq!(arenas(&s).as_deref(), Some("2"));
    drop(s);
    let s = Server::start_with(
        &r,
        &["--listen", "127.0.0.1:0"],
        &[("MALLOC_ARENA_MAX", "4")],
    );
    assert_eq!(arenas(&s).as_deref(), Some("4"), "the user's value stands");
}
