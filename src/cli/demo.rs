//! `coord demo [DIR]`: builds a sample repo with six agents, a three-step pipeline, a fan-out of
//! three with a join, and a task that depends on both; drives it to the end with simulated
//! agents inside this process (one of them fails once, to show a retry); prints board and log.

use super::{board_view, init, log, status, Ctx};
use crate::engine::commands::{self, Report};
use crate::engine::{Op, Plan, Transition};
use crate::model::{AgentName, State, TaskId};
use crate::store::{Origin, Store};
use anyhow::{bail, Context, Result};
use jiff::SignedDuration;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Arguments of `coord demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to build the sample repo (default: a new folder under the system temp dir)
    dir: Option<PathBuf>,
}

const AGENTS: &[(&str, &str)] = &[
    ("researcher", "capabilities: [research]\nmax_active: 1\n"),
    ("writer", "capabilities: [writing]\nmax_active: 2\n"),
    ("editor", "capabilities: [editing]\nmax_active: 1\n"),
    ("legal", "capabilities: [review]\nmax_active: 1\n"),
    ("security", "capabilities: [review]\nmax_active: 1\n"),
    ("pm", "capabilities: [planning]\nmax_active: 1\n"),
];

const TASKS: &[(&str, &str)] = &[
    (
        "market-research",
        "# Step 1 of a pipeline: research -> writer -> editor.\ntitle: Research the market for coord\nagent: researcher\npriority: high\nnext_agent: writer\nlabels: [launch]\n",
    ),
    (
        "launch-plan",
        "# A fan-out to three reviewers, joined by the pm.\ntitle: Review the launch plan\nagent: pm\nnext_agent: [legal, security, writer]\njoin_agent: pm\n",
    ),
    (
        "announce",
        "title: Announce the launch\ncapabilities: [writing]\ndepends_on: [market-research, launch-plan]\ninput:\n  summary: ${tasks.market-research.result.output.summary ?? \"no research\"}\n",
    ),
];

/// Runs `coord demo`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let dir = match args.dir {
        Some(d) => d,
        None => std::env::temp_dir().join(format!(
            "coord-demo-{}-{}",
            std::process::id(),
            ctx.now.as_second()
        )),
    };
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} is not empty; pass an empty or new folder",
            dir.display()
        );
    }
    let mut demo = Ctx {
        dir: dir.clone(),
        quiet: true,
        json: false,
        ..ctx.clone()
    };
    init::run(&demo, init::Args { agents: vec![] })?;
    seed(&demo)?;
    let rounds = drive(&mut demo)?;
    out!(
        "coord demo: {} finished in {rounds} rounds of simulated time\n",
        dir.display()
    );
    let store = Store::open(&dir)?;
    let (board, _) = store.load()?;
    let reasons = status::invalid_reasons(&store, &board);
    board_view::print(&board_view::view(&board, &demo.inputs(&store), &reasons));
    out!("\nlog (newest first):");
    log::run(&demo, log::Args::all())?;
    out!("\nlook around: cd {} && git log --stat", dir.display());
    Ok(())
}

fn seed(ctx: &Ctx) -> Result<()> {
    let (coord, _lock) = ctx.session(super::AGENT_WAIT)?;
    let wd = coord.store().work_dir();
    let mut ops: Vec<Op> = AGENTS
        .iter()
        .map(|(n, p)| Op::Write {
            path: format!("{wd}/agents/{n}.yaml"),
            text: p.to_string(),
        })
        .collect();
    ops.extend(TASKS.iter().map(|(id, t)| Op::Write {
        path: format!("{wd}/inbox/{id}.yaml"),
        text: t.to_string(),
    }));
    let t = Transition {
        subject: "demo".into(),
        from: "new".into(),
        to: "inbox".into(),
        summary: "demo: six agents and three tasks".into(),
        ops,
        guard: vec![],
        op: None,
    };
    coord.apply(&Plan::one(t), Origin::Command)?;
    Ok(())
}

/// Ticks and answers as the agents until no task is left open; returns the rounds used.
fn drive(ctx: &mut Ctx) -> Result<usize> {
    for round in 1..=40 {
        let coord = ctx.coord()?;
        coord.tick()?;
        let _lock = coord.session(std::time::Duration::ZERO)?;
        let (board, _) = coord.store().load()?;
        let open = board.tasks.iter().any(|t| !t.folder.state.is_final());
        if !open {
            return Ok(round);
        }
        for t in board
            .tasks
            .iter()
            .filter(|t| t.folder.state == State::Assigned)
        {
            let Ok(doc) = &t.read else { continue };
            if doc.result.is_some() {
                continue;
            }
            let Some(agent) = &t.folder.agent else {
                continue;
            };
            let result = answer(agent, &t.id, doc.coord.attempt, &doc.coord.input);
            let reported = commands::report(&board, &coord.inputs(), &t.id, Report::new(result))
                .context("the simulated agent could not report")?;
            coord.apply(&reported.plan, Origin::Command)?;
        }
        ctx.now += SignedDuration::from_mins(5);
    }
    bail!("the demo did not finish in 40 rounds; 'coord status' in the demo folder shows why")
}

/// Returns what a simulated agent answers.
fn answer(agent: &AgentName, id: &TaskId, attempt: u32, input: &Option<Value>) -> Value {
    let from_research = id.as_str().starts_with("market-research");
    match agent.as_str() {
        "researcher" => {
            json!({"status": "success", "output": {"summary": "three competitors, none git-native", "competitors": ["queue-x", "tracker-y", "script-z"]}})
        }
        "security" if attempt == 1 => {
            json!({"status": "failure", "error": {"message": "scanner timed out", "retryable": true}})
        }
        "writer" if from_research => {
            json!({"status": "success", "output": {"draft": "coord keeps agents and people in one git repo"}, "next_agent": "editor"})
        }
        "writer" => {
            json!({"status": "success", "output": {"text": format!("written from {}", input.as_ref().map_or("nothing".to_string(), |i| i.to_string()))}})
        }
        "pm" => {
            json!({"status": "success", "output": {"decision": "ship it", "seen": input.clone().unwrap_or(Value::Null)}})
        }
        other => json!({"status": "success", "output": {"verdict": "approved", "by": other}}),
    }
}
