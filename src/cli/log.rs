//! `coord log [<id>]`: prints [`crate::ops::Coord::history`], newest first, in aligned columns
//! (time, task, change, summary): coord's transitions, without those that change no state
//! unless `--all`, and people's edits, additions and deletions of task files.

use super::Ctx;
use crate::error::CliError;
use crate::model::{Endpoint, TaskId};
use crate::ops::LogEntry;

/// Arguments of `coord log`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this task's transitions
    id: Option<TaskId>,
    /// Show at most N transitions
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Also show entries that change no state (results written, heartbeats)
    #[arg(long)]
    all: bool,
}

impl Args {
    /// Returns the arguments for the whole log.
    pub fn all() -> Args {
        Args {
            id: None,
            limit: None,
            all: false,
        }
    }
}

/// Runs `coord log`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let entries = ctx
        .coord()?
        .history(args.id.as_ref(), args.limit, args.all)?;
    if ctx.json {
        super::print_answer(crate::ops::Log { entries });
        return Ok(());
    }
    let look = ctx.look;
    let rows: Vec<[String; 4]> = entries.iter().map(|e| row(e, look)).collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (when, task, change) = (width(0), width(1), width(2));
    for [time, id, what, summary] in &rows {
        let (time, id) = (format!("{time:<when$}"), format!("{id:<task$}"));
        out!(
            "{}  {}  {what:<change$}  {summary}",
            look.paint("2", &time),
            look.paint("36", &id)
        );
    }
    Ok(())
}

/// Returns an entry's columns: time (as `look` shows it), task, what changed, summary (with
/// who, for a person).
fn row(e: &LogEntry, look: super::human::Look) -> [String; 4] {
    let state = |s: &Option<Endpoint>| s.map_or_else(|| "?".into(), |s| s.to_string());
    let what = match (e.by.is_some(), e.op.as_deref()) {
        (true, Some("add")) => format!("added in {}", state(&e.to)),
        (true, Some("delete")) => format!("deleted from {}", state(&e.from)),
        (true, _) => format!("edited in {}", state(&e.from)),
        (false, _) => format!("{} -> {}", state(&e.from), state(&e.to)),
    };
    let summary = match &e.by {
        Some(who) => format!("by {who}: {}", e.summary),
        None => e.summary.clone(),
    };
    [look.time(e.time), e.subject.clone(), what, summary]
}
