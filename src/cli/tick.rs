//! `coord tick`: one reconciliation pass ([`crate::ops::Coord::tick`]); `--dry-run` prints the
//! plan. With `--json` both answer the same object: the transitions made (or planned).

use super::Ctx;
use crate::engine;
use crate::error::CliError;
use crate::ops::describe;
use serde_json::json;

/// Arguments of `coord tick`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the plan and change nothing
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    deliver: super::webhooks::Deliver,
}

/// Runs `coord tick`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let coord = ctx.coord()?;
    if args.dry_run {
        let planned = coord.plan()?;
        print_plan(ctx, &planned.plan, &planned.attention);
        if !ctx.json {
            for line in &planned.attention {
                out!("needs a person: {line}");
            }
        }
        return Ok(());
    }
    if coord.inbox_is_a_burst() {
        fix_malloc_thresholds(ctx);
    }
    let once = args.deliver.prepare(ctx, None)?;
    let ticked = coord.tick()?;
    let skipped = ticked.skipped;
    if ctx.json {
        super::print_answer(json!({
            "dry_run": false,
            "commits": ticked.commits,
            "transitions": ticked.transitions,
            "skipped": skipped,
            "attention": ticked.attention,
            "pending": ticked.pending,
            "notes": [],
        }));
    } else if let Some(first) = ticked.attention.first() {
        ctx.status(&format!(
            "coord: {} file(s) need a person, e.g. {first}; 'coord status' lists them",
            ticked.attention.len(),
        ));
    } else if let Some(first) = ticked.pending.first() {
        ctx.status(&format!(
            "coord: {} file(s) pending (settling): still being written, e.g. {first}; a tick reads them once unchanged for `settle`",
            ticked.pending.len()
        ));
    } else if ticked.commits == 0 && skipped == 0 {
        ctx.status("coord: nothing to do");
    }
    args.deliver.deliver(ctx, once)?;
    if skipped > 0 {
        return Err(super::Found(format!(
            "{skipped} task file(s) left where they were after a file operation failed; the other tasks moved; 'coord status' lists them"
        ))
        .into());
    }
    Ok(())
}

/// Starts coord again with glibc's mmap and trim thresholds fixed at their initial 128 KiB,
/// unless either is set. By default glibc raises both after each big buffer is freed (up to
/// 32 and 64 MiB), so the later big buffers of a tick over an inbox burst (a board's vector of
/// every task, the stat cache's bytes) come from the heap, whose freed middle is never given
/// back: 167 MB peak for a 50,000-task burst, 152 MB with the thresholds fixed
/// (docs/performance.md, section f). Only for a burst: the exec costs a process start.
fn fix_malloc_thresholds(ctx: &Ctx) {
    super::exec_again_with(
        ctx,
        &[
            ("MALLOC_MMAP_THRESHOLD_", "131072"),
            ("MALLOC_TRIM_THRESHOLD_", "131072"),
        ],
    );
}

fn print_plan(ctx: &Ctx, plan: &engine::Plan, attention: &[String]) {
    if ctx.json {
        let ts: Vec<_> = plan
            .transitions
            .iter()
            .map(super::transition_json)
            .collect();
        let notes: Vec<String> = plan.notes.iter().map(describe).collect();
        super::print_answer(json!({
            "dry_run": true,
            "commits": 0,
            "transitions": ts,
            "skipped": 0,
            "attention": attention,
            "notes": notes,
        }));
        return;
    }
    if plan.transitions.is_empty() {
        out!("nothing to do");
    }
    for t in &plan.transitions {
        out!(
            "{}: {} -> {}: {}",
            t.subject,
            t.from,
            t.to,
            crate::redact::one_line(&t.summary)
        );
    }
    if ctx.verbose > 0 {
        for note in &plan.notes {
            out!("note: {}", describe(note));
        }
    }
}
