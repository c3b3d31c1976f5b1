//! `/metrics` in the Prometheus text format: tasks and the oldest task's age per state (from
//! the snapshot), counters of the transitions in the branch's history (retries, dead
//! letters, lease expiries), each counted once however often history was rewritten, and what every coord process of the clone counted
//! in its stats (ticks and their duration, rejected pushes), whoever ran them. Pure.

use super::hub::Snapshot;
use crate::model::State;
use crate::ops::events::Change;
use crate::ops::LogEntry;
use crate::store::Stats;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// The transitions in the branch's history.
#[derive(Debug, Default)]
pub struct Counters {
    by_edge: BTreeMap<(String, String), u64>,
    retries: u64,
    dead_letters: u64,
    lease_expiries: u64,
}

/// The counters as a file keeps them, with the commit they count up to.
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    head: String,
    edges: Vec<(String, String, u64)>,
    retries: u64,
    dead_letters: u64,
    lease_expiries: u64,
}

impl Counters {
    /// Reads the counters saved at `path`, with the commit they count up to; None when there
    /// are none or they do not read.
    pub fn load(path: &Path) -> Option<(Counters, String)> {
        let bytes = crate::fsx::read_private(path).ok()?;
        let saved: Saved = serde_json::from_slice(&bytes).ok()?;
        let by_edge = saved.edges.into_iter().map(|(f, t, n)| ((f, t), n));
        let counters = Counters {
            by_edge: by_edge.collect(),
            retries: saved.retries,
            dead_letters: saved.dead_letters,
            lease_expiries: saved.lease_expiries,
        };
        Some((counters, saved.head))
    }

    /// Saves the counters at `path` with the commit they count up to, so that a restart
    /// counts only the commits made since. A file that cannot be written is not an error:
    /// the next start counts the whole history again.
    pub fn save(&self, path: &Path, head: &str) {
        let saved = Saved {
            head: head.to_string(),
            edges: (self.by_edge.iter())
                .map(|((f, t), n)| (f.clone(), t.clone(), *n))
                .collect(),
            retries: self.retries,
            dead_letters: self.dead_letters,
            lease_expiries: self.lease_expiries,
        };
        if let Ok(bytes) = serde_json::to_vec(&saved) {
            let _ = crate::fsx::write_private(path, &bytes, false);
        }
    }

    /// Counts the transitions a move of HEAD added and takes back those it removed.
    pub fn apply(&mut self, change: &Change) {
        for e in &change.added {
            self.count(e, true);
        }
        for e in &change.removed {
            self.count(e, false);
        }
    }

    /// Counts one transition, or takes it back (`up` false).
    fn count(&mut self, t: &LogEntry, up: bool) {
        let end = |p: &Option<crate::model::Endpoint>| p.map_or("none".into(), |p| p.to_string());
        let (from, to, summary) = (end(&t.from), end(&t.to), t.summary.as_str());
        let step = |n: &mut u64| *n = if up { *n + 1 } else { n.saturating_sub(1) };
        if from == "assigned" && to == "ready" && summary.starts_with("retry ") {
            step(&mut self.retries);
            if summary.contains(" after timeout") {
                step(&mut self.lease_expiries);
            }
        }
        if from == "assigned" && to == "failed" {
            step(&mut self.dead_letters);
            if summary.contains(": timeout ") {
                step(&mut self.lease_expiries);
            }
        }
        step(self.by_edge.entry((from, to)).or_default());
    }
}

/// Renders the metrics.
pub fn render(
    snap: &Snapshot,
    counters: &Counters,
    stats: &Stats,
    listeners: usize,
    now: Timestamp,
) -> String {
    let mut out = String::new();
    let mut counts: BTreeMap<State, u64> = State::ALL.iter().map(|s| (*s, 0)).collect();
    let mut oldest: BTreeMap<State, Timestamp> = BTreeMap::new();
    for t in &snap.board.tasks {
        *counts.entry(t.folder.state).or_default() += 1;
        // Finished tasks wait for nothing, and reading created_at parses the file: only open
        // states get an age.
        if t.folder.state.is_final() {
            continue;
        }
        let created = t
            .read
            .as_ref()
            .ok()
            .and_then(|task| task.peek(|d| d.coord.created_at));
        if let Some(c) = created {
            let e = oldest.entry(t.folder.state).or_insert(c);
            *e = (*e).min(c);
        }
    }
    head(&mut out, "coord_tasks", "gauge", "Tasks per state.");
    for (s, n) in &counts {
        let _ = writeln!(out, "coord_tasks{{state=\"{s}\"}} {n}");
    }
    let help = "Age of the oldest task in each open state, from its created_at.";
    head(&mut out, "coord_task_oldest_age_seconds", "gauge", help);
    for (s, t) in &oldest {
        let age = now.duration_since(*t).as_secs_f64().max(0.0);
        let _ = writeln!(
            out,
            "coord_task_oldest_age_seconds{{state=\"{s}\"}} {age:.0}"
        );
    }
    let help = "Transitions in the branch's history, each once however often it was rewritten.";
    head(&mut out, "coord_transitions_total", "counter", help);
    for ((from, to), n) in &counters.by_edge {
        let _ = writeln!(
            out,
            "coord_transitions_total{{from=\"{}\",to=\"{}\"}} {n}",
            label(from),
            label(to)
        );
    }
    let simple = [
        (
            "coord_retries_total",
            "Attempts sent back to ready for another try.",
            counters.retries,
        ),
        (
            "coord_dead_letters_total",
            "Tasks that failed for good after an attempt.",
            counters.dead_letters,
        ),
        (
            "coord_lease_expiries_total",
            "Attempts whose lease ran out without a result.",
            counters.lease_expiries,
        ),
    ];
    for (name, help, n) in simple {
        head(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {n}");
    }
    spent(&mut out, snap, now);
    recorded(&mut out, stats);
    let help = "Seconds the last read of the repository took.";
    head(&mut out, "coord_snapshot_read_seconds", "gauge", help);
    let _ = writeln!(
        out,
        "coord_snapshot_read_seconds {:.6}",
        snap.took.as_secs_f64()
    );
    head(
        &mut out,
        "coord_event_listeners",
        "gauge",
        "Clients listening to /v1/events.",
    );
    let _ = writeln!(out, "coord_event_listeners {listeners}");
    out
}

/// What the tasks spent by agent (`result.metrics`), summed from the task files.
fn spent(out: &mut String, snap: &Snapshot, now: Timestamp) {
    let s = snap.board.spending(now);
    let help = "Tokens the results of the tasks report (result.metrics), by agent and direction.";
    head(out, "coord_tokens_total", "counter", help);
    for (agent, t) in &s.agents {
        for (dir, n) in [("in", t.tokens_in), ("out", t.tokens_out)] {
            let _ = writeln!(
                out,
                "coord_tokens_total{{agent=\"{}\",direction=\"{dir}\"}} {n}",
                label(agent)
            );
        }
    }
    let help = "Cost the results of the tasks report (result.metrics), by agent.";
    head(out, "coord_cost_total", "counter", help);
    for (agent, t) in &s.agents {
        let _ = writeln!(
            out,
            "coord_cost_total{{agent=\"{}\"}} {}",
            label(agent),
            t.cost
        );
    }
}

/// What the coord processes of this clone recorded: ticks (a `coord tick` in a shell,
/// `coord watch`, a sync, `--tick`) and pushes the remote rejected.
fn recorded(out: &mut String, s: &Stats) {
    let rows = [
        (
            "coord_ticks_total",
            "counter",
            "Ticks run in this clone, by any coord process.",
            s.ticks as f64,
        ),
        (
            "coord_tick_seconds_total",
            "counter",
            "Seconds spent in those ticks.",
            s.tick_seconds,
        ),
        (
            "coord_tick_duration_seconds",
            "gauge",
            "Seconds the last tick took.",
            s.last_tick_seconds,
        ),
    ];
    for (name, kind, help, v) in rows {
        head(out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    }
    let name = "coord_push_rejections_total";
    let help = "Pushes of this clone the remote rejected: stale (it had moved on; retried after a fetch) or refused (a hook, a protected branch).";
    head(out, name, "counter", help);
    let _ = writeln!(out, "{name}{{reason=\"stale\"}} {}", s.pushes_stale);
    let _ = writeln!(out, "{name}{{reason=\"refused\"}} {}", s.pushes_refused);
}

/// Picks one figure of an endpoint's report.
type Pick = fn(&crate::ops::webhooks::Report) -> u64;

/// Renders each webhook endpoint's cursor, the events it has yet to take, the failed tries
/// of its next event and its dead letters.
pub fn webhooks(out: &mut String, endpoints: &[crate::ops::webhooks::Report]) {
    if endpoints.is_empty() {
        return;
    }
    let rows: [(&str, &str, &str, Pick); 4] = [
        (
            "coord_webhook_cursor",
            "gauge",
            "The last event id the endpoint took or gave up on.",
            |r| r.cursor,
        ),
        (
            "coord_webhook_pending",
            "gauge",
            "Events of the journal the endpoint has yet to take.",
            |r| r.pending,
        ),
        (
            "coord_webhook_failures",
            "gauge",
            "Failed tries of the endpoint's next event.",
            |r| u64::from(r.failures),
        ),
        (
            "coord_webhook_dead_letters",
            "gauge",
            "Events the endpoint was given up on (.git/coord/webhooks/dead.jsonl).",
            |r| r.dead,
        ),
    ];
    for (name, kind, help, value) in rows {
        head(out, name, kind, help);
        for r in endpoints {
            let _ = writeln!(
                out,
                "{name}{{endpoint=\"{}\"}} {}",
                label(&r.name),
                value(r)
            );
        }
    }
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Escapes a label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
