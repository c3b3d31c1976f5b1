//! A person's commands on one task: `approve` / `reject` (authority gate), `cancel` and
//! `retry`. Each plans its transitions in the engine and commits them.

use super::Ctx;
use crate::engine::commands;
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
    ctx.act(&|b, i| commands::approve(b, i, &a.id))
}

/// Runs `coord reject`.
pub fn reject(ctx: &Ctx, a: RejectArgs) -> Result<()> {
    ctx.act(&|b, i| commands::reject(b, i, &a.id, &a.reason))
}

/// Runs `coord cancel`.
pub fn cancel(ctx: &Ctx, a: CancelArgs) -> Result<()> {
    ctx.act(&|b, i| commands::cancel(b, i, &a.id, &a.reason))
}

/// Runs `coord retry`.
pub fn retry(ctx: &Ctx, a: IdArgs) -> Result<()> {
    ctx.act(&|b, i| commands::retry(b, i, &a.id))
}
