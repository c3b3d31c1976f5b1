//! `coord show <id>`: one task's state, file, fields, result and history, secrets redacted.

use super::human::{Look, Times};
use super::Ctx;
use crate::error::CliError;
use crate::model::TaskId;
use crate::redact::one_line;
use serde_json::{json, Value};

/// Arguments of `coord show`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task's id
    id: TaskId,
}

/// Runs `coord show`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let shown = coord.show(&args.id)?;
    if ctx.json {
        super::print_answer(&shown);
        return Ok(());
    }
    if !shown.other_copies.is_empty() {
        out!(
            "warning: {} copies of this id; run 'coord doctor'",
            shown.other_copies.len() + 1
        );
    }
    for c in shown.copies() {
        print_copy(&json!(c), ctx.look);
    }
    let dir = crate::run::logs::folder(coord.store().repo.git_dir());
    let kept = crate::run::logs::attempts(&dir, args.id.as_str());
    if let Some(last) = kept.last() {
        out!(
            "logs: attempt {} kept in this clone; see 'coord logs {} --attempt {last}' (--follow while it runs)",
            super::logs::list(&kept),
            args.id
        );
    }
    Ok(())
}

fn print_copy(c: &Value, look: Look) {
    out!(
        "{}  [{}]  {}",
        look.paint("36", &txt(&c["id"])),
        look.state(&txt(&c["state"])),
        txt(&c["path"])
    );
    if let Some(errors) = c["errors"].as_array() {
        for e in errors {
            out!("  {}", txt(e));
        }
        return;
    }
    let task = &c["task"];
    if let Some(fields) = task.as_object() {
        for (k, v) in fields
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "result" | "coord"))
        {
            out!("  {k}: {}", look.time_text(&txt(v)));
        }
    }
    if !task["result"].is_null() {
        out!("result:");
        print_map(&task["result"], "  ");
    }
    let coord = &task["coord"];
    if let Some(m) = coord.as_object() {
        out!("coord:");
        for (k, v) in m.iter().filter(|(k, _)| k.as_str() != "history") {
            out!("  {k}: {}", look.time_text(&txt(v)));
        }
    }
    if let Some(history) = coord["history"].as_array() {
        out!("history:");
        for h in history {
            out!("  - {}", history_line(h, look));
        }
    }
    let spent = &c["spent"];
    if spent["results"].as_u64().unwrap_or(0) > 0 {
        out!(
            "spent: {} tokens in, {} out, cost {:.2}, {:.0}s over {} result(s)",
            spent["tokens_in"],
            spent["tokens_out"],
            spent["cost"].as_f64().unwrap_or(0.0),
            spent["duration_s"].as_f64().unwrap_or(0.0),
            spent["results"]
        );
    }
}

/// Returns a history entry on one line: as compact JSON, or, when times are local, its time
/// first and the other fields after it.
fn history_line(h: &Value, look: Look) -> String {
    match (look.times, h["at"].as_str()) {
        (Times::Local { .. }, Some(at)) => {
            let mut rest = h.clone();
            if let Some(m) = rest.as_object_mut() {
                m.remove("at");
            }
            format!("{}  {}", look.paint("2", &look.time_text(at)), txt(&rest))
        }
        _ => txt(h),
    }
}

fn print_map(v: &Value, indent: &str) {
    match v.as_object() {
        Some(m) => {
            for (k, x) in m {
                out!("{indent}{k}: {}", one_line(&compact(x)));
            }
        }
        None => out!("{indent}{}", one_line(&compact(v))),
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn txt(v: &Value) -> String {
    one_line(&compact(v))
}
