//! A person's commands on one task: `approve` / `reject` (authority gate), `cancel`,
//! `retry` and `reassign`; each calls its operation ([`crate::ops::Coord`]) and, with `--json`, prints
//! what it did ([`crate::ops::Acted`]).

use super::Ctx;
use crate::error::CliError;
use crate::model::{AgentName, TaskId};
use crate::ops::{Coord, PersonOp, Versioned};
use serde_json::json;

/// Arguments naming one task.
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// The task's id
    id: TaskId,
}

/// Arguments of `coord reject`.
#[derive(Debug, clap::Args)]
pub struct RejectArgs {
    /// The task's id
    id: TaskId,
    /// Why it is rejected
    #[arg(long)]
    reason: String,
}

/// Arguments of `coord cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// The task's id
    id: TaskId,
    /// Why it is cancelled
    #[arg(long, default_value = "")]
    reason: String,
}

/// Arguments of `coord reassign`.
#[derive(Debug, clap::Args)]
pub struct ReassignArgs {
    /// The task's id
    id: TaskId,
    /// The agent to give it to
    agent: AgentName,
}

/// Runs `coord approve`.
pub fn approve(ctx: &Ctx, a: IdArgs) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let commits = coord.approve(&a.id)?;
    done(ctx, &coord, PersonOp::Approve, &a.id, commits)
}

/// Runs `coord reject`.
pub fn reject(ctx: &Ctx, a: RejectArgs) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let commits = coord.reject(&a.id, &a.reason)?;
    done(ctx, &coord, PersonOp::Reject, &a.id, commits)
}

/// Runs `coord cancel`.
pub fn cancel(ctx: &Ctx, a: CancelArgs) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let commits = coord.cancel(&a.id, &a.reason)?;
    done(ctx, &coord, PersonOp::Cancel, &a.id, commits)
}

/// Runs `coord reassign`.
pub fn reassign(ctx: &Ctx, a: ReassignArgs) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let commits = coord.reassign(&a.id, &a.agent)?;
    if commits == 0 {
        ctx.status(&format!("coord: {} is {}'s already", a.id, a.agent));
    }
    done(ctx, &coord, PersonOp::Reassign, &a.id, commits)
}

/// Runs `coord retry`.
pub fn retry(ctx: &Ctx, a: IdArgs) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    let commits = coord.retry(&a.id)?;
    done(ctx, &coord, PersonOp::Retry, &a.id, commits)
}

/// With `--json`, prints what the command did ([`crate::ops::Acted`]).
fn done(
    ctx: &Ctx,
    coord: &Coord,
    op: PersonOp,
    id: &TaskId,
    commits: usize,
) -> Result<(), CliError> {
    if ctx.json {
        super::print_json(&json!(Versioned::of(coord.acted(op, id, commits)?)));
    }
    Ok(())
}
