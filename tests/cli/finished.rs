//! What the tests of finished tasks share (the history-folder record, blocks, archive months,
//! the stat cache's files): finished task files as a person commits them, dependents reading
//! their output, a person's commit, and a tick once stamps are old enough to be trusted.

use crate::harness::TestRepo;
use std::time::Duration;

/// A finished task as a person commits it, in `state`, with the output `v`.
pub fn finished_in(title: &str, state: &str, v: u32) -> String {
    format!(
        "title: {title}\nresult:\n  status: success\n  attempt: 1\n  agent: bot\n  \
         output: {{v: {v}}}\ncoord:\n  state: {state}\n  attempt: 1\n  \
         created_at: 2026-10-01T10:00:00Z\n  finished_at: 2026-10-05T10:00:00Z\n"
    )
}

/// A done task as a person commits it, with the output `v`.
pub fn finished(title: &str, v: u32) -> String {
    finished_in(title, "done", v)
}

/// A task for `bot` titled `title` that waits for `dep` and takes its output `v` as input.
pub fn dependent(dep: &str, title: &str) -> String {
    format!(
        "title: {title}\nagent: bot\ndepends_on: [{dep}]\ninput:\n  v: ${{tasks.{dep}.result.output.v}}\n"
    )
}

/// The input `v` the task `id` was given.
pub fn input_v(r: &TestRepo, id: &str) -> serde_json::Value {
    r.json(&["show", id, "--json"])["task"]["coord"]["input"]["v"].clone()
}

/// Commits everything as a person does.
pub fn person_commits(r: &TestRepo, message: &str) {
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", message]);
}

/// Runs a tick once every stamp is old enough to be trusted (the racy-timestamp rule) and
/// returns what it said; it must succeed.
pub fn tick(r: &TestRepo) -> String {
    std::thread::sleep(Duration::from_millis(200));
    let out = r.run(&["tick"]);
    assert!(out.status.success(), "tick: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// How many commits recorded people's changes (`coord: record external changes`).
pub fn recordings(r: &TestRepo) -> usize {
    r.git(&["log", "--format=%s"])
        .lines()
        .filter(|s| *s == "coord: record external changes")
        .count()
}
