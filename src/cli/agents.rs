//! `coord agents`: lists agents with their load and circuit; `coord agents add` creates a
//! profile and commits it.

use super::{Ctx, AGENT_WAIT};
use crate::engine::{Op, Plan, Transition};
use crate::model::AgentName;
use crate::yaml::emit_block;
use anyhow::{bail, Result};
use serde_json::json;

/// Arguments of `coord agents`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Create an agent profile
    Add {
        /// The agent's name
        name: AgentName,
        /// A capability (repeatable)
        #[arg(long = "capability", value_name = "CAP")]
        capabilities: Vec<String>,
        /// Tasks assigned at once
        #[arg(long = "max-active", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
        max_active: u32,
        /// Take work only with `coord claim`
        #[arg(long)]
        pull: bool,
    },
}

/// Runs `coord agents`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    match args.action {
        None => list(ctx),
        Some(Action::Add {
            name,
            capabilities,
            max_active,
            pull,
        }) => add(ctx, &name, &capabilities, max_active, pull),
    }
}

fn list(ctx: &Ctx) -> Result<()> {
    let store = ctx.store()?;
    let (board, _) = store.load()?;
    let rows = crate::view::agents(&board);
    if ctx.json {
        super::print_answer(json!({ "agents": rows }));
        return Ok(());
    }
    if rows.is_empty() {
        out!("no agents; add one with 'coord agents add NAME'");
    }
    for r in rows {
        let caps: Vec<String> =
            serde_json::from_value(r["capabilities"].clone()).unwrap_or_default();
        let line = format!(
            "{:<20} {}/{} {:<8} {:<9} {}{}",
            r["name"].as_str().unwrap_or_default(),
            r["active"],
            r["max_active"],
            if r["enabled"] == json!(true) {
                r["assign"].as_str().unwrap_or_default()
            } else {
                "disabled"
            },
            r["circuit"].as_str().unwrap_or_default(),
            caps.join(","),
            r["error"]
                .as_str()
                .map(|e| format!("  ({e})"))
                .unwrap_or_default(),
        );
        out!("{}", crate::redact::error_line(&line));
    }
    Ok(())
}

fn add(ctx: &Ctx, name: &AgentName, caps: &[String], max_active: u32, pull: bool) -> Result<()> {
    let (coord, _lock) = ctx.session(AGENT_WAIT)?;
    let store = coord.store();
    let path = format!("{}/agents/{name}.yaml", store.work_dir());
    if store.abs(&path).symlink_metadata().is_ok() {
        bail!("{path} already exists; edit it instead");
    }
    let mut text = emit_block("capabilities", &json!(caps), 0);
    text.push_str(&emit_block("max_active", &json!(max_active), 0));
    if pull {
        text.push_str("assign: pull\n");
    }
    let t = Transition {
        subject: name.to_string(),
        from: "agent".into(),
        to: "added".into(),
        summary: format!("add agent {name}"),
        ops: vec![Op::Write {
            path: path.clone(),
            text,
        }],
        guard: Vec::new(),
        op: None,
    };
    let commits = ctx.apply(store, &Plan::one(t))?;
    if ctx.json {
        super::print_answer(
            json!({"op": "agents add", "agent": name, "path": path, "commits": commits}),
        );
    }
    Ok(())
}
