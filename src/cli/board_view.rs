//! Prints the board view ([`crate::view::board`]) for people: counts, agents, ready,
//! blocked, overdue and invalid tasks. Shared by status and demo.

use serde_json::{json, Value};

/// Prints the view for people.
pub fn print(v: &Value) {
    let counts: Vec<String> = v["counts"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, n)| **n != json!(0))
                .map(|(s, n)| format!("{s} {n}"))
                .collect()
        })
        .unwrap_or_default();
    out!(
        "tasks: {}",
        if counts.is_empty() {
            "none".to_string()
        } else {
            counts.join(", ")
        }
    );
    let agents = v["agents"].as_array().cloned().unwrap_or_default();
    if !agents.is_empty() {
        out!("agents:");
        for a in agents {
            let state = if a["enabled"] == json!(false) {
                "disabled"
            } else {
                a["assign"].as_str().unwrap_or("push")
            };
            let circuit = match a["open_until"].as_str() {
                Some(t) if a["probe_due"] == json!(true) => {
                    format!("open until {t}, next task is a probe")
                }
                Some(t) if a["circuit"] == json!("open") => format!("open until {t}"),
                _ => a["circuit"].as_str().unwrap_or_default().to_string(),
            };
            let why = a["disabled_because"]
                .as_str()
                .map(|w| format!(" ({})", crate::redact::one_line(w)))
                .unwrap_or_default();
            out!(
                "  {:<20} {}/{}  {state}  circuit {circuit}{why}",
                s(&a["name"]),
                a["active"],
                a["limit"]
            );
        }
    }
    if let Some(o) = v["oldest_ready"].as_object() {
        out!("oldest ready: {} (since {})", s(&o["id"]), s(&o["since"]));
    }
    section(v, "waiting", "ready but waiting", |w| {
        format!("{}: {}", s(&w["id"]), s(&w["reason"]))
    });
    section(v, "held", "with an agent or awaiting approval", |h| {
        format!("{}: {}", s(&h["id"]), s(&h["reason"]))
    });
    section(v, "blocked", "blocked", |b| {
        let ids: Vec<String> = b["waiting_for"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|d| format!("{} ({})", s(d), s(&b["states"][s(d)])))
                    .collect()
            })
            .unwrap_or_default();
        format!("{}: waiting for {}", s(&b["id"]), ids.join(", "))
    });
    section(v, "overdue", "overdue", |o| {
        format!("{} ({}): due {}", s(&o["id"]), s(&o["state"]), s(&o["due"]))
    });
    if let Some(m) = v["invalid"].as_object().filter(|m| !m.is_empty()) {
        out!("invalid:");
        for (id, reason) in m {
            out!("  {id}: {}", s(reason));
        }
    }
    section(v, "duplicates", "duplicate ids (run 'coord doctor')", |d| {
        s(&d["id"])
    });
    section(
        v,
        "settling",
        "still being written (read once unchanged for `settle`)",
        |f| format!("{}: until {}", s(&f["path"]), s(&f["until"])),
    );
    section(v, "problems", "problems", |p| {
        let at = if p["at"].is_string() {
            &p["at"]
        } else {
            &p["path"]
        };
        format!("{}: {}", s(at), s(&p["message"]))
    });
}

fn section(v: &Value, key: &str, title: &str, line: impl Fn(&Value) -> String) {
    if let Some(items) = v[key].as_array().filter(|a| !a.is_empty()) {
        out!("{title}:");
        for i in items {
            out!("  {}", crate::redact::one_line(&line(i)));
        }
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        other => other.to_string(),
    }
}
