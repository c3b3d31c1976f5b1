//! `coord demo [DIR]`: builds a sample repo with six agents, a three-step pipeline, a fan-out of
//! three with a join, and a task that depends on both, plus two small agent scripts; drives it
//! to the end with one `coord run <agent> --once -- sh <script>` per agent and round (the
//! reviewer fails its first attempt, to show a retry); prints what each run did, the board and
//! the log. Needs only a POSIX `sh`.

use super::{board_view, init, log, Ctx};
use crate::engine::{Op, Plan, Transition};
use crate::store::{Origin, Store};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Arguments of `coord demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to build the sample repo (default: a new folder under the system temp dir)
    dir: Option<PathBuf>,
}

/// The echo agent: answers who did which task, in YAML.
const ECHO: &str = "bin/echo-agent.sh";
/// The reviewer: fails its first attempt, approves the next.
const REVIEWER: &str = "bin/reviewer-agent.sh";

const SCRIPTS: &[(&str, &str)] = &[
    (ECHO, include_str!("../../templates/demo/echo-agent.sh")),
    (
        REVIEWER,
        include_str!("../../templates/demo/reviewer-agent.sh"),
    ),
];

/// coord.yaml of the demo: retries after a second, and the writer's draft of the research goes
/// on to the editor (the third step of the pipeline).
const CONFIG: &str = "\
# The demo's coord.yaml: a failed attempt is retried after a second (default 1m).
backoff: {base: 1s, max: 1s}
rules:
  - when: {agent: writer, output_contains: market-research}
    then: editor
";

/// At most this many rounds of runs.
const ROUNDS: usize = 30;

/// The agents, their profiles, and the script `coord run` drives for each.
const AGENTS: &[(&str, &str, &str)] = &[
    (
        "researcher",
        "capabilities: [research]\nmax_active: 1\n",
        ECHO,
    ),
    ("writer", "capabilities: [writing]\nmax_active: 2\n", ECHO),
    ("editor", "capabilities: [editing]\nmax_active: 1\n", ECHO),
    ("legal", "capabilities: [review]\nmax_active: 1\n", ECHO),
    (
        "security",
        "capabilities: [review]\nmax_active: 1\n",
        REVIEWER,
    ),
    ("pm", "capabilities: [planning]\nmax_active: 1\n", ECHO),
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
    let demo = Ctx {
        dir: dir.clone(),
        quiet: true,
        json: false,
        ..ctx.clone()
    };
    init::run(&demo, init::Args { agents: vec![] })?;
    seed(&demo)?;
    if !ctx.json {
        out!("coord demo: {}", dir.display());
    }
    let started = std::time::Instant::now();
    let rounds = drive(&dir, !ctx.json)?;
    let store = Store::open(&dir)?;
    let (board, _) = store.load()?;
    let reasons = crate::view::invalid_reasons(&store, &board);
    let demo = demo.refreshed();
    let view = crate::view::board::view(&board, &demo.inputs(&store), &reasons);
    if ctx.json {
        let log = demo.coord()?.log(None, None)?;
        super::print_answer(json!({"dir": dir, "rounds": rounds, "board": view, "log": log}));
        return Ok(());
    }
    out!(
        "\ncoord demo: finished in {rounds} rounds of 'coord run --once' ({:.1}s)\n",
        started.elapsed().as_secs_f64()
    );
    board_view::print(&view);
    out!("\nlog (newest first):");
    log::run(&demo, log::Args::all())?;
    out!("\nlook around: cd {} && git log --stat", dir.display());
    out!(
        "run an agent yourself: coord -C {} run writer -- sh {ECHO}",
        dir.display()
    );
    Ok(())
}

fn seed(ctx: &Ctx) -> Result<()> {
    let (coord, _lock) = ctx.session(super::AGENT_WAIT)?;
    let wd = coord.store().work_dir();
    let mut ops: Vec<Op> = AGENTS
        .iter()
        .map(|(n, p, _)| Op::Write {
            path: format!("{wd}/agents/{n}.yaml"),
            text: p.to_string(),
        })
        .collect();
    ops.extend(TASKS.iter().map(|(id, t)| Op::Write {
        path: format!("{wd}/inbox/{id}.yaml"),
        text: t.to_string(),
    }));
    ops.extend(SCRIPTS.iter().map(|(path, text)| Op::Write {
        path: path.to_string(),
        text: text.to_string(),
    }));
    ops.push(Op::Write {
        path: "coord.yaml".into(),
        text: CONFIG.into(),
    });
    let t = Transition {
        subject: "demo".into(),
        from: "new".into(),
        to: "inbox".into(),
        summary: "demo: six agents, three tasks, two agent scripts".into(),
        ops,
        guard: vec![],
        op: None,
    };
    coord.apply(&Plan::one(t), Origin::Command)?;
    Ok(())
}

/// Runs `coord run <agent> --once` for each agent in turn until no task is left open, waiting
/// a second when a round did nothing (a retry waits out its backoff); returns the rounds used.
/// Prints each run's lines when `print`.
fn drive(dir: &Path, print: bool) -> Result<usize> {
    let exe = std::env::current_exe().context("cannot find the coord program to run agents")?;
    for round in 1..=ROUNDS {
        let mut did = false;
        for (agent, _, script) in AGENTS {
            for line in run_once(&exe, dir, agent, script)? {
                if print {
                    out!("  {agent:<10} {line}");
                }
                did = true;
            }
        }
        let (board, _) = Store::open(dir)?.load()?;
        if board.tasks.iter().all(|t| t.folder.state.is_final()) {
            return Ok(round);
        }
        if !did {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    bail!("the demo did not finish in {ROUNDS} rounds; 'coord status' in the demo folder shows why")
}

/// Runs `coord run <agent> --once -- sh <script>` in `dir` on the real clock; returns its
/// lines (one per task it ran).
fn run_once(exe: &Path, dir: &Path, agent: &str, script: &str) -> Result<Vec<String>> {
    let out = Command::new(exe)
        .arg("-C")
        .arg(dir)
        .args(["--quiet", "run", agent, "--once", "--", "sh", script])
        .env_remove("COORD_NOW")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    if !out.status.success() {
        bail!(
            "'coord run {agent} --once' failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}
