//! `coord validate`: calls [`crate::ops::validate`] and prints every problem as
//! `path:line:column: message` (warnings on stderr); exit 1 when any file is invalid (with
//! `--json`, one object holding the same lines).

use super::{Ctx, Found};
use crate::error::CliError;
use std::path::PathBuf;

/// Arguments of `coord validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files to check (default: every task file under work/)
    paths: Vec<PathBuf>,
}

/// Runs `coord validate`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let found = crate::ops::validate(&ctx.dir, &args.paths)?;
    let redact = |lines: &[String]| -> Vec<String> {
        lines.iter().map(|l| crate::redact::error_line(l)).collect()
    };
    let (errors, warnings) = (redact(&found.errors), redact(&found.warnings));
    if ctx.json {
        super::print_answer(serde_json::json!({
            "valid": errors.is_empty(),
            "errors": errors,
            "warnings": warnings,
            "pending": found.pending,
        }));
    } else {
        for w in &warnings {
            err!("warning: {w}");
        }
        for e in &errors {
            out!("{e}");
        }
    }
    if let Some(first) = found.pending.first() {
        ctx.status(&format!(
            "coord: {} file(s) pending, not checked: still being written (e.g. {first}); run 'coord validate' again once unchanged for `settle`",
            found.pending.len()
        ));
    }
    if errors.is_empty() {
        ctx.status(match found.pending.is_empty() {
            true => "coord: all task files are valid",
            false => "coord: all task files read are valid",
        });
        Ok(())
    } else {
        Err(Found(format!(
            "{} problem(s) found; fix them and run 'coord validate' again",
            errors.len()
        ))
        .into())
    }
}
