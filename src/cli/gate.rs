//! A person's commands on one task: `approve` / `reject` (authority gate), `cancel` and
//! `retry`; each calls its operation ([`crate::ops::Coord`]).

use super::Ctx;
use crate::model::TaskId;
use anyhow::Result;

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

/// Runs `coord approve`.
pub fn approve(ctx: &Ctx, a: IdArgs) -> Result<()> {
    ctx.coord()?.approve(&a.id)?;
    Ok(())
}

/// Runs `coord reject`.
pub fn reject(ctx: &Ctx, a: RejectArgs) -> Result<()> {
    ctx.coord()?.reject(&a.id, &a.reason)?;
    Ok(())
}

/// Runs `coord cancel`.
pub fn cancel(ctx: &Ctx, a: CancelArgs) -> Result<()> {
    ctx.coord()?.cancel(&a.id, &a.reason)?;
    Ok(())
}

/// Runs `coord retry`.
pub fn retry(ctx: &Ctx, a: IdArgs) -> Result<()> {
    ctx.coord()?.retry(&a.id)?;
    Ok(())
}
