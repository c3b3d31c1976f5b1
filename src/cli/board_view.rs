//! Prints the board view ([`crate::view::board`]) for people: counts, one lane per agent with
//! its tasks and their lease ends, the review queue, then ready tasks that wait, held, blocked,
//! overdue and invalid tasks, each with its title. A long list shows its first entries and how
//! many more there are (`--all` lists them). Colour and times as [`super::human`] says.
//! Shared by status and demo.

use super::human::{Look, Times};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// Entries a list shows before it is summarised (`coord status --all` shows them all).
pub const LIST: usize = 10;

/// How the board is printed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// Colours (ANSI escapes).
    pub colour: bool,
    /// Every entry of every list.
    pub all: bool,
    /// How times are shown.
    pub times: Times,
}

impl Style {
    /// Returns the style of output that looks as `look` says (`--color`, `--utc`).
    pub fn of(look: Look, all: bool) -> Style {
        Style {
            colour: look.colour,
            all,
            times: look.times,
        }
    }

    /// Returns a time (RFC 3339 text) as this style shows it.
    fn time(&self, v: &Value) -> String {
        let look = Look {
            colour: false,
            times: self.times,
        };
        look.time_text(&line(v))
    }

    /// Returns `text` in the SGR colour `code` when colouring.
    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn heading(&self, text: &str) -> String {
        self.paint("1", &format!("{text}:"))
    }

    fn id(&self, v: &Value) -> String {
        self.paint("36", &line(v))
    }

    fn warn(&self, text: &str) -> String {
        self.paint("31", text)
    }

    fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
}

/// Prints the view for people.
pub fn print(v: &Value, style: Style) {
    out!("{}", render(v, style).trim_end());
}

/// Returns the view as lines for people.
pub fn render(v: &Value, st: Style) -> String {
    let mut out = String::new();
    out.push_str(&format!("tasks: {}\n", counts(v)));
    lanes(&mut out, v, st);
    spending(&mut out, &v["spending"], st);
    let held: HashMap<String, String> = v["held"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| (line(&h["id"]), line(&h["reason"])))
        .collect();
    section(&mut out, v, "review", "review queue", st, |r| {
        match held.get(&line(&r["id"])) {
            Some(why) => format!("{}: {why}", entry(r, st)),
            None => entry(r, st),
        }
    });
    if let Some(o) = v["oldest_ready"].as_object() {
        out.push_str(&format!(
            "oldest ready: {} (since {})\n",
            st.id(&o["id"]),
            line(&o["since"])
        ));
    }
    section(&mut out, v, "waiting", "ready but waiting", st, |w| {
        format!("{}: {}", entry(w, st), line(&w["reason"]))
    });
    // Held tasks are in the lanes (with an agent) and the review queue; any other is listed.
    let shown = shown_ids(v);
    let others: Vec<Value> = v["held"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| !shown.contains(&line(&h["id"])))
        .cloned()
        .collect();
    let rest = json!({ "held": others });
    section(
        &mut out,
        &rest,
        "held",
        "with an agent or awaiting approval",
        st,
        |h| format!("{}: {}", entry(h, st), line(&h["reason"])),
    );
    section(&mut out, v, "blocked", "blocked", st, |b| {
        let ids: Vec<String> = b["waiting_for"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|d| format!("{} ({})", line(d), line(&b["states"][line(d)])))
                    .collect()
            })
            .unwrap_or_default();
        let gates = b["gates"].as_array().into_iter().flatten().map(line);
        let ids: Vec<String> = ids.into_iter().chain(gates).collect();
        format!("{}: waiting for {}", entry(b, st), ids.join(", "))
    });
    section(&mut out, v, "overdue", "overdue", st, |o| {
        let due = st.warn(&format!("due {}", st.time(&o["due"])));
        format!("{} ({}): {due}", entry(o, st), line(&o["state"]))
    });
    invalid(&mut out, v, st);
    section(
        &mut out,
        v,
        "duplicates",
        "duplicate ids (run 'coord doctor')",
        st,
        |d| st.id(&d["id"]),
    );
    let settling = "still being written (read once unchanged for `settle`)";
    section(&mut out, v, "settling", settling, st, |f| {
        format!("{}: until {}", line(&f["path"]), line(&f["until"]))
    });
    section(&mut out, v, "problems", "problems", st, |p| {
        let at = if p["at"].is_string() {
            &p["at"]
        } else {
            &p["path"]
        };
        format!("{}: {}", line(at), line(&p["message"]))
    });
    out
}

/// Returns the ids the lanes and the review queue show.
fn shown_ids(v: &Value) -> HashSet<String> {
    let lanes = v["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["tasks"].as_array().cloned().unwrap_or_default());
    let review = v["review"].as_array().cloned().unwrap_or_default();
    lanes.chain(review).map(|t| line(&t["id"])).collect()
}

/// `ready 2, assigned 1`, or `none`.
fn counts(v: &Value) -> String {
    let counts: Vec<String> = v["counts"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, n)| **n != json!(0))
                .map(|(s, n)| format!("{s} {n}"))
                .collect()
        })
        .unwrap_or_default();
    if counts.is_empty() {
        "none".to_string()
    } else {
        counts.join(", ")
    }
}

/// One lane per agent: load, mode and circuit, then the tasks in its folder.
fn lanes(out: &mut String, v: &Value, st: Style) {
    let agents = v["agents"].as_array().cloned().unwrap_or_default();
    if agents.is_empty() {
        return;
    }
    out.push_str(&format!("{}\n", st.heading("agents")));
    for a in &agents {
        out.push_str(&format!(
            "  {:<20} {}/{}  {}  circuit {}{}\n",
            line(&a["name"]),
            a["active"],
            a["limit"],
            mode(a),
            circuit(a, st),
            a["disabled_because"]
                .as_str()
                .map(|w| format!(" ({})", line(&json!(w))))
                .unwrap_or_default()
        ));
        let tasks = a["tasks"].as_array().cloned().unwrap_or_default();
        list(out, &tasks, "    ", st, |t| {
            let lease = match t["lease_expires_at"].as_str() {
                Some(l) => format!(
                    "attempt {}, lease until {}",
                    t["attempt"],
                    st.time(&json!(l))
                ),
                None => line(&t["state"]),
            };
            format!("{}  {}", entry(t, st), st.dim(&lease))
        });
    }
}

fn mode(a: &Value) -> String {
    if a["enabled"] == json!(false) {
        "disabled".to_string()
    } else {
        a["assign"].as_str().unwrap_or("push").to_string()
    }
}

fn circuit(a: &Value, st: Style) -> String {
    if let Some(why) = a["circuit_reason"].as_str() {
        return st.warn(&format!("open ({})", line(&json!(why))));
    }
    match a["open_until"].as_str() {
        Some(t) if a["probe_due"] == json!(true) => {
            st.warn(&format!("open until {t}, next task is a probe"))
        }
        Some(t) if a["circuit"] == json!("open") => st.warn(&format!("open until {t}")),
        _ => line(&a["circuit"]),
    }
}

/// What the tasks spent (`result.metrics`): in all, by agent and for the last days.
fn spending(out: &mut String, s: &Value, st: Style) {
    if s["total"]["results"].as_u64().unwrap_or(0) == 0 {
        return;
    }
    out.push_str(&format!("{}\n", st.heading("spent")));
    out.push_str(&format!("  {:<20} {}\n", "in all", totals(&s["total"])));
    for (agent, t) in s["agents"].as_object().into_iter().flatten() {
        out.push_str(&format!("  {:<20} {}\n", line(&json!(agent)), totals(t)));
    }
    let days: Vec<_> = s["days"].as_object().into_iter().flatten().collect();
    for (day, t) in days.iter().rev().take(7) {
        out.push_str(&format!("  {:<20} {}\n", day, totals(t)));
    }
}

/// One line of totals: tokens in and out, cost, results.
fn totals(t: &Value) -> String {
    let n = |k: &str| crate::model::metrics::grouped(t[k].as_u64().unwrap_or(0));
    format!(
        "{} tokens in, {} out, cost {:.2}, {} result(s)",
        n("tokens_in"),
        n("tokens_out"),
        t["cost"].as_f64().unwrap_or(0.0),
        n("results")
    )
}

fn invalid(out: &mut String, v: &Value, st: Style) {
    if let Some(m) = v["invalid"].as_object().filter(|m| !m.is_empty()) {
        out.push_str(&format!("{}\n", st.heading("invalid")));
        let entries: Vec<Value> = m
            .iter()
            .map(|(id, why)| json!({"id": id, "reason": why}))
            .collect();
        list(out, &entries, "  ", st, |e| {
            format!("{}: {}", st.id(&e["id"]), line(&e["reason"]))
        });
    }
}

/// A task's id and, when it has one, its title in quotes.
fn entry(t: &Value, st: Style) -> String {
    match t["title"].as_str() {
        Some(title) => format!("{} \"{}\"", st.id(&t["id"]), line(&json!(title))),
        None => st.id(&t["id"]),
    }
}

/// Prints `title:` and the list under `key`, when it has entries.
fn section(
    out: &mut String,
    v: &Value,
    key: &str,
    title: &str,
    st: Style,
    show: impl Fn(&Value) -> String,
) {
    if let Some(items) = v[key].as_array().filter(|a| !a.is_empty()) {
        out.push_str(&format!("{}\n", st.heading(title)));
        list(out, items, "  ", st, show);
    }
}

/// Prints the entries, indented; past [`LIST`] of them (without `--all`) only how many more.
fn list(
    out: &mut String,
    items: &[Value],
    indent: &str,
    st: Style,
    show: impl Fn(&Value) -> String,
) {
    let shown = if st.all { items.len() } else { LIST };
    for i in items.iter().take(shown) {
        out.push_str(&format!("{indent}{}\n", show(i)));
    }
    if items.len() > shown {
        let more = format!(
            "… {} more (coord status --all lists them)",
            items.len() - shown
        );
        out.push_str(&format!("{indent}{}\n", st.dim(&more)));
    }
}

/// A value from the view as one line of text: control characters (an escape sequence in a
/// title) become spaces, secrets are redacted.
fn line(v: &Value) -> String {
    let s = match v {
        Value::String(x) => x.clone(),
        other => other.to_string(),
    };
    crate::redact::one_line(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(waiting: usize) -> Value {
        json!({
            "counts": {"ready": waiting, "assigned": 1, "review": 1, "done": 0},
            "agents": [{
                "name": "alice", "active": 1, "limit": 2, "enabled": true, "assign": "push",
                "circuit": "open", "open_until": "2026-11-22T11:00:00Z", "probe_due": false,
                "tasks": [{"id": "docs", "title": "Write the docs", "state": "assigned",
                           "attempt": 2, "lease_expires_at": "2026-11-22T10:30:00Z"}],
            }],
            "review": [{"id": "ask", "title": "Delete \u{1b}[31mprod", "agent": "alice"}],
            "held": [{"id": "ask", "reason": "waits for approval"}, {"id": "docs", "reason": "alice works on it"}],
            "waiting": (0..waiting).map(|i| json!({"id": format!("w{i:02}"), "title": format!("Wait {i}"), "reason": "no agent has capabilities [\"x\"]"})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn lanes_list_tasks_with_leases_and_the_review_queue_has_titles() {
        let text = render(&view(2), Style::default());
        assert!(
            text.starts_with("tasks: ready 2, assigned 1, review 1\n"),
            "{text}"
        );
        assert!(text.contains("agents:\n  alice                1/2  push  circuit open until 2026-11-22T11:00:00Z\n    docs \"Write the docs\"  attempt 2, lease until 2026-11-22T10:30:00Z\n"), "{text}");
        assert!(
            text.contains("review queue:\n  ask \"Delete  [31mprod\": waits for approval\n"),
            "a title's escape sequence is defused: {text}"
        );
        assert!(
            !text.contains("awaiting approval:"),
            "held tasks shown in lanes and the queue are not listed again: {text}"
        );
        assert!(text.contains("ready but waiting:\n  w00 \"Wait 0\": no agent has capabilities [\"x\"]\n  w01 \"Wait 1\": "), "{text}");
        assert!(!text.contains('\u{1b}'), "no colour unless asked: {text:?}");
    }

    #[test]
    fn a_long_list_is_summarised_unless_all() {
        let short = render(&view(LIST + 5), Style::default());
        assert!(short.contains("  w09 \"Wait 9\""), "{short}");
        assert!(!short.contains("w10"), "{short}");
        assert!(
            short.contains("  … 5 more (coord status --all lists them)\n"),
            "{short}"
        );
        let all = render(
            &view(LIST + 5),
            Style {
                all: true,
                ..Style::default()
            },
        );
        assert!(
            all.contains("  w14 \"Wait 14\"") && !all.contains("more (coord"),
            "{all}"
        );
    }

    #[test]
    fn colour_marks_headings_ids_and_an_open_circuit() {
        let text = render(
            &view(1),
            Style {
                colour: true,
                ..Style::default()
            },
        );
        assert!(text.contains("\x1b[1magents:\x1b[0m"), "{text:?}");
        assert!(text.contains("\x1b[36mdocs\x1b[0m"), "{text:?}");
        assert!(
            text.contains("\x1b[31mopen until 2026-11-22T11:00:00Z\x1b[0m"),
            "{text:?}"
        );
    }
}
