//! `coord schedules`: lists every schedule of `work/schedules/` with its next slots and the
//! latest slot run (calls [`crate::ops::Coord::schedules`]); exit 1 when one does not read.

use super::{Ctx, Found};
use crate::error::CliError;

/// Arguments of `coord schedules`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many next slots to show per schedule
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    next: u16,
}

/// Runs `coord schedules`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let rows = ctx.coord()?.schedules(usize::from(args.next))?;
    if ctx.json {
        super::print_answer(serde_json::json!({ "schedules": rows }));
    } else if rows.is_empty() {
        ctx.status("coord: no schedules; add one as work/schedules/<name>.yaml (docs/files.md)");
    }
    for row in rows.iter().filter(|_| !ctx.json) {
        match (&row.error, &row.cron) {
            (Some(e), _) => out!("{}  invalid: {e}", row.name),
            (None, Some(cron)) => {
                let next = match row.paused {
                    true => "paused".to_string(),
                    false => format!("next {}", row.next.join(", ")),
                };
                let last = row.last_slot.as_deref().unwrap_or("none");
                let tz = row.timezone.as_deref().unwrap_or("UTC");
                out!("{}  '{cron}' {tz}  last {last}  {next}", row.name);
            }
            (None, None) => {}
        }
    }
    let bad = rows.iter().filter(|r| r.error.is_some()).count();
    match bad {
        0 => Ok(()),
        n => Err(Found(format!(
            "{n} schedule(s) do not read; fix them and run 'coord schedules' again"
        ))
        .into()),
    }
}
