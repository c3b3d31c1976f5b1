//! `coord doctor [--fix]`: consistency checks of `work/` (SPEC 4) with a fix for each finding
//! that can be fixed safely: committing stray changes and adopting hand moves.

use super::{Ctx, Found};
use crate::board::{Board, TaskFile};
use crate::engine;
use crate::model::{Duration, State, TaskId};
use crate::store::Store;
use anyhow::Result;
use serde_json::json;
use std::collections::HashSet;

/// Arguments of `coord doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Commit stray changes under work/ and adopt hand moves
    #[arg(long)]
    fix: bool,
}

/// Runs `coord doctor`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    if args.fix {
        let (coord, _lock) = ctx.session(Duration::from_secs(0))?;
        let store = coord.store();
        let (board, _) = store.load()?;
        ctx.apply(store, &engine::adoption_plan(&board, &ctx.inputs(store)))?;
    }
    let store = ctx.store()?;
    let (board, _) = store.load()?;
    let findings: Vec<String> = findings(&store, &board)?
        .iter()
        .map(|f| crate::redact::error_line(f))
        .collect();
    if ctx.json {
        super::print_json(&json!(findings));
    } else {
        for f in &findings {
            out!("{f}");
        }
    }
    if findings.is_empty() {
        ctx.status("coord: no problems found");
        Ok(())
    } else {
        Err(Found(format!("{} finding(s)", findings.len())).into())
    }
}

fn findings(store: &Store, board: &Board) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let unfinished = store.repo.unfinished()?;
    if let Some(state) = &unfinished {
        out.push(format!(
            "{}: {state}; coord writes nothing until then",
            store.root().display()
        ));
    }
    // Offer `--fix` only where it can act: not while git is in the middle of something.
    let fix = if unfinished.is_some() {
        " once the git operation above is finished"
    } else {
        ", or run 'coord doctor --fix'"
    };
    duplicates(board, &mut out);
    for p in &board.problems {
        out.push(format!("{}: {}", p.path, p.message));
    }
    let known: HashSet<&TaskId> = board.tasks.iter().map(|t| &t.id).collect();
    for t in &board.tasks {
        task_findings(board, t, &known, fix, &mut out);
    }
    for a in board.agents.values() {
        if let Some(e) = &a.error {
            out.push(format!(
                "agent {}: profile does not read: {}; the agent gets no work until it is fixed",
                a.name, e.message
            ));
        }
    }
    // Files reported as problems (symlinks, stray files) are never recorded: no fix to offer.
    let changed: Vec<String> = store
        .repo
        .changed_paths(&format!("{}/", store.work_dir()))?
        .into_iter()
        .filter(|c| !board.problems.iter().any(|p| &p.path == c))
        .collect();
    if !changed.is_empty() {
        out.push(format!(
            "{} uncommitted change(s) under {}/ (e.g. {}); the next tick records them{fix}",
            changed.len(),
            store.work_dir(),
            changed[0]
        ));
    }
    if store.private_dir().join("journal.json").exists() {
        out.push(
            "an interrupted transition is journaled; the next coord command finishes it"
                .to_string(),
        );
    }
    Ok(out)
}

fn task_findings(
    board: &Board,
    t: &TaskFile,
    known: &HashSet<&TaskId>,
    fix: &str,
    out: &mut Vec<String>,
) {
    if matches!(t.folder.state, State::Inbox | State::Invalid) {
        return;
    }
    let d = match &t.read {
        Ok(d) => d,
        Err(errors) => {
            let first = errors
                .first()
                .map(|v| v.render(&t.path))
                .unwrap_or_default();
            out.push(format!(
                "{first} (the file is left where it is until a person fixes it)"
            ));
            return;
        }
    };
    if t.folder.state == State::Archived {
        return;
    }
    let recorded = d.coord.state.as_str();
    let agent_ok = t.folder.state != State::Assigned || d.coord.assigned_to == t.folder.agent;
    if recorded != t.folder.state.as_str() || !agent_ok {
        out.push(format!(
            "{}: sits in {} but its coord block says {}; the next tick adopts the folder{fix}",
            t.path,
            t.folder,
            if recorded.is_empty() {
                "nothing"
            } else {
                recorded
            }
        ));
    }
    if t.folder.state.is_final() {
        return;
    }
    for dep in d.spec.depends_on.iter().filter(|dep| !known.contains(dep)) {
        out.push(format!(
            "{}: depends on '{dep}', which does not exist",
            t.path
        ));
    }
    if let Some(a) = d
        .spec
        .agent
        .as_ref()
        .filter(|a| !board.agents.contains_key(*a))
    {
        out.push(format!(
            "{}: agent '{a}' is unknown; add it with 'coord agents add {a}'",
            t.path
        ));
    }
}

fn duplicates(board: &Board, out: &mut Vec<String>) {
    for (id, live) in board.live_by_id() {
        if live.len() < 2 {
            continue;
        }
        let keep = live
            .iter()
            .find(|f| {
                f.read
                    .as_ref()
                    .is_ok_and(|d| d.coord.state == f.folder.state.as_str())
            })
            .unwrap_or(&live[0]);
        let others: Vec<&str> = live
            .iter()
            .filter(|f| f.path != keep.path)
            .map(|f| f.path.as_str())
            .collect();
        out.push(format!(
            "duplicate id '{id}' in {} places: keep {} (its coord block agrees with its folder) and 'git rm' {}",
            live.len(),
            keep.path,
            others.join(", ")
        ));
    }
}
