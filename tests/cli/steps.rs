//! Helpers shared by the resilience and pattern tests: reading a task's state and coord block
//! through `coord show --json`, moving the clock, and reporting results the way agents do.

use crate::harness::{TestRepo, T0};
use serde_json::Value;

/// Returns `coord show --json <id>`.
pub fn show(r: &TestRepo, id: &str) -> Value {
    r.json(&["show", id])
}

/// Returns the task's state (its folder).
pub fn state(r: &TestRepo, id: &str) -> String {
    show(r, id)["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Returns the task's `coord:` block.
pub fn coord(r: &TestRepo, id: &str) -> Value {
    show(r, id)["task"]["coord"].clone()
}

/// Returns T0 plus `secs` seconds, formatted as coord writes times.
pub fn at(secs: i64) -> String {
    fmt(ts(T0) + jiff::SignedDuration::from_secs(secs))
}

/// Parses a time.
pub fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap_or_else(|e| panic!("time {s:?}: {e}"))
}

/// Formats a time as coord does.
pub fn fmt(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Sets the clock to T0 + `secs` and runs one tick.
pub fn tick_at(r: &mut TestRepo, secs: i64) {
    r.at(&at(secs));
    r.ok(&["tick"]);
}

/// Completes `id` with `output` (JSON) through `coord complete --output -`, plus extra args.
pub fn complete(r: &TestRepo, id: &str, output: &Value, extra: &[&str]) {
    let mut args = vec!["complete", id, "--output", "-"];
    args.extend_from_slice(extra);
    let out = r
        .cmd(&args)
        .write_stdin(output.to_string())
        .output()
        .expect("run coord");
    assert!(
        out.status.success(),
        "complete {id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes coord.yaml and commits it.
pub fn config(r: &TestRepo, yaml: &str) {
    r.write("coord.yaml", yaml);
    r.git(&["commit", "-q", "-m", "configure coord", "--", "coord.yaml"]);
}

/// Returns the text of an agent profile.
pub fn profile(r: &TestRepo, agent: &str) -> String {
    r.read(&format!("work/agents/{agent}.yaml"))
}
