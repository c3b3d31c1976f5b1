//! `coord doctor [--fix]`: prints the findings of [`crate::ops::Coord::doctor`], after the
//! safe fixes with `--fix`.

use super::{Ctx, Found};
use crate::error::CliError;
use serde_json::json;

/// Arguments of `coord doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Commit stray changes under work/ and adopt hand moves
    #[arg(long)]
    fix: bool,
}

/// Runs `coord doctor`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    if args.fix {
        ctx.coord()?.doctor_fix()?;
    }
    let findings = ctx.coord()?.doctor()?;
    if ctx.json {
        super::print_answer(json!({ "findings": findings }));
    } else {
        for f in &findings {
            out!("{}", f.message);
        }
    }
    if findings.is_empty() {
        ctx.status("coord: no problems found");
        Ok(())
    } else {
        Err(Found(format!("{} finding(s)", findings.len())).into())
    }
}
