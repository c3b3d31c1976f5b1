//! `coord demo [DIR]`: builds a sample repo ([`crate::ops::Coord::seed_demo`]: six agents, a
//! three-step pipeline, a fan-out of three with a join, a task that depends on both, two small
//! agent scripts); drives it to the end with one `coord run <agent> --once -- sh <script>` per
//! agent and round (the reviewer fails its first attempt, to show a retry); prints what each
//! run did, the board and the log. Needs only a POSIX `sh`.
//!
//! On the system clock a round that did nothing waits a second (a retry's backoff). With a
//! clock given (`--now`, `COORD_NOW`) round N runs N-1 minutes after it, without waiting, so
//! that the same clock gives the same rounds, times and log every time (the snapshot tests).

use super::{board_view, log, Ctx};
use crate::error::CliError;
use crate::ops::demo::{AGENTS, ECHO};
use crate::store::Store;
use anyhow::{bail, Context, Result};
use jiff::Timestamp;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Arguments of `coord demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to build the sample repo (default: a new folder under the system temp dir)
    dir: Option<PathBuf>,
}

/// At most this many rounds of runs.
const ROUNDS: usize = 30;

/// With a clock given, how much later each round runs than the one before: more than the
/// demo's backoff (1s), so a failed attempt is ready again in the next round.
const ROUND_STEP: jiff::SignedDuration = jiff::SignedDuration::from_secs(60);

/// Runs `coord demo`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
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
        return Err(CliError::problem(
            format!("{} is not empty", dir.display()),
            "pass an empty or new folder",
        ));
    }
    let demo = Ctx {
        dir: dir.clone(),
        quiet: true,
        json: false,
        ..ctx.clone()
    };
    crate::ops::init(
        &dir,
        crate::ops::Setup::default(),
        demo.options(),
        demo.sink(),
    )?;
    demo.coord()?.seed_demo()?;
    if !ctx.json {
        out!("coord demo: {}", dir.display());
    }
    let started = std::time::Instant::now();
    let rounds = drive(&dir, ctx.now_fixed.then_some(ctx.now), !ctx.json)?;
    let demo = demo.refreshed();
    let coord = demo.coord()?;
    let view = coord.status(None)?.board;
    if ctx.json {
        let log = coord.log(None, None)?;
        super::print_answer(json!({"dir": dir, "rounds": rounds, "board": view, "log": log}));
        return Ok(());
    }
    out!(
        "
coord demo: finished in {rounds} rounds of 'coord run --once' ({:.1}s)
",
        started.elapsed().as_secs_f64()
    );
    board_view::print(&view, board_view::Style::of(ctx.look, false));
    out!("\nlog (newest first):");
    log::run(&demo, log::Args::all())?;
    out!("\nlook around: cd {} && git log --stat", dir.display());
    out!(
        "run an agent yourself: coord -C {} run writer -- sh {ECHO}",
        dir.display()
    );
    Ok(())
}

/// Runs `coord run <agent> --once` for each agent in turn until no task is left open; returns
/// the rounds used. On the system clock (`clock` None) a round that did nothing waits a second
/// (a retry waits out its backoff); with a clock given, round N runs at `clock` plus N-1
/// [`ROUND_STEP`]s. Prints each run's lines when `print`.
fn drive(dir: &Path, clock: Option<Timestamp>, print: bool) -> Result<usize, CliError> {
    let exe = std::env::current_exe().context("cannot find the coord program to run agents")?;
    let mut at = clock;
    for round in 1..=ROUNDS {
        let mut did = false;
        for (agent, _, script) in AGENTS {
            for line in run_once(&exe, dir, at, agent, script)? {
                if print {
                    out!("  {agent:<10} {line}");
                }
                did = true;
            }
        }
        let (board, _) = Store::open(dir)?.session(None).load()?;
        if board.tasks.iter().all(|t| t.folder.state.is_final()) {
            return Ok(round);
        }
        match at {
            Some(t) => at = Some(later(t)?),
            None if !did => std::thread::sleep(std::time::Duration::from_secs(1)),
            None => {}
        }
    }
    Err(CliError::problem(
        format!("the demo did not finish in {ROUNDS} rounds"),
        format!("'coord -C {} status' shows why", dir.display()),
    ))
}

/// Returns the clock of the round after one at `t`, if coord can run at it.
fn later(t: Timestamp) -> Result<Timestamp> {
    match t.checked_add(ROUND_STEP) {
        Ok(next) if crate::clock::RANGE.contains(&next.as_second()) => Ok(next),
        _ => bail!("the demo's clock runs out of range after {t}; give an earlier --now"),
    }
}

/// Runs `coord run <agent> --once -- sh <script>` in `dir` at `clock` (None: the system
/// clock); returns its lines (one per task it ran).
fn run_once(
    exe: &Path,
    dir: &Path,
    clock: Option<Timestamp>,
    agent: &str,
    script: &str,
) -> Result<Vec<String>> {
    let mut cmd = Command::new(exe);
    cmd.arg("-C")
        .arg(dir)
        .args(["--quiet", "run", agent, "--once", "--", "sh", script])
        .env_remove("COORD_NOW");
    if let Some(t) = clock {
        cmd.env("COORD_NOW", t.to_string());
    }
    let out = cmd
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
