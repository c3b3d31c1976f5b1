//! `coord tick`: one reconciliation pass under the lock; `--dry-run` prints the plan.

use super::Ctx;
use crate::board::Board;
use crate::engine::{self, Note};
use crate::model::Duration;
use crate::store::{Loaded, Walk};
use anyhow::Result;
use serde_json::json;

/// Arguments of `coord tick`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the plan and change nothing
    #[arg(long)]
    dry_run: bool,
}

/// Runs `coord tick`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    if args.dry_run {
        let store = ctx.store()?;
        let (board, _) = store.load()?;
        let plan = engine::plan(&board, &ctx.inputs(&store));
        print_plan(ctx, &plan);
        if !ctx.json {
            for line in attention(&board, &plan.notes) {
                out!("needs a person: {}", crate::redact::error_line(&line));
            }
        }
        return Ok(());
    }
    let (store, _lock) = ctx.locked(Duration::from_secs(0))?;
    let pass = tick_pass(ctx, &store)?;
    let skipped = store.skipped_count();
    if ctx.json {
        super::print_json(
            &json!({ "transitions": pass.commits, "skipped": skipped, "attention": pass.attention }),
        );
    } else if let Some(first) = pass.attention.first() {
        ctx.status(&format!(
            "coord: {} file(s) need a person, e.g. {}; 'coord status' lists them",
            pass.attention.len(),
            crate::redact::error_line(first)
        ));
    } else if pass.commits == 0 && skipped == 0 {
        ctx.status("coord: nothing to do");
    }
    if skipped > 0 {
        return Err(super::Found(format!(
            "{skipped} task file(s) left where they were after a file operation failed; the other tasks moved; 'coord status' lists them"
        ))
        .into());
    }
    Ok(())
}

/// How many times one pass plans again after a task file could not be moved or rewritten
/// (each time without the files skipped so far); what is left waits for the next tick.
const MAX_ROUNDS: usize = 8;

/// Loads, plans, applies and commits one pass; returns the number of commits. The caller
/// holds the lock and has finished what a killed run left (`Ctx::locked`).
///
/// People's uncommitted changes under `work/` are recorded (as external changes) right after
/// the load and before anything is applied — one status scan per quiet tick, and a fresh load
/// when that recorded something the load may have missed — so each tick commit
/// holds only what the tick derived from committed files, and is marked so
/// (`Coord-Origin: tick`): `coord sync` may drop such commits and tick again without losing
/// anyone's bytes. A file that changes after the load fails its transition's guard and waits
/// for the next tick.
///
/// The pass starts with a walk of `work/` (names and stat data): when the quiet mark shows
/// that a tick which planned nothing saw this same state, and nothing that plan waited for is
/// due, it stops there. A pass that plans nothing and leaves no file for a person leaves that
/// mark for the next one.
///
/// A task file whose move or rewrite fails (immutable, unreadable, another mount, a full
/// disk) is left where it was and the pass plans again without it, so one such file never
/// stops the other tasks; the files skipped are recorded for `status` and `doctor`.
pub fn tick_once(ctx: &Ctx, store: &crate::store::Store) -> Result<usize> {
    Ok(tick_pass(ctx, store)?.commits)
}

/// What one pass did.
#[derive(Debug, Clone)]
pub struct Pass {
    /// The commits it made.
    pub commits: usize,
    /// Files the pass left alone because a person must act (refused symlinks, stray files,
    /// files that do not read, duplicate ids), one line each.
    pub attention: Vec<String>,
    /// The earliest instant (system clock) a file still being written settles, when one is.
    pub settles_at: Option<jiff::Timestamp>,
}

/// Runs one pass as [`tick_once`] does, saying also when a file it left unread settles.
/// No quiet mark is left while a file settles: the settle rule runs on the system clock,
/// which the mark's deadline (on coord's clock, maybe `--now`) cannot stand for.
pub fn tick_pass(ctx: &Ctx, store: &crate::store::Store) -> Result<Pass> {
    let walked = store.walk_work()?;
    if store.is_quiet(&walked, ctx.now) {
        if ctx.verbose > 0 {
            ctx.status("coord: nothing changed since a tick found nothing to do, and nothing it waits for is due; planning skipped ('coord status' shows what waits)");
        }
        return Ok(Pass {
            commits: 0,
            attention: Vec::new(),
            settles_at: None,
        });
    }
    let (mut board, _) = load_recorded(ctx, store, walked)?;
    let mut n = 0;
    let mut rounds = 0;
    let plan = loop {
        let plan = engine::plan(&board, &ctx.inputs(store));
        let skipped = store.skipped_count();
        store.mark_tick_commits(true);
        let applied = ctx.apply(store, &plan);
        store.mark_tick_commits(false);
        n += applied?;
        rounds += 1;
        if store.skipped_count() == skipped || rounds == MAX_ROUNDS {
            break plan;
        }
        (board, _) = store.load()?;
    };
    store.save_skipped()?;
    let attention = attention(&board, &plan.notes);
    // A pass that leaves files for a person is not quiet: the next one says so again.
    let clean = store.skipped_count() == 0 && attention.is_empty();
    if n == 0 && plan.is_empty() && board.settling.is_empty() && clean {
        store.set_quiet_mark(ctx.now, plan.deadline);
    }
    if ctx.verbose > 0 {
        for note in &plan.notes {
            ctx.status(&format!("note: {}", describe(note)));
        }
    }
    Ok(Pass {
        commits: n,
        attention,
        settles_at: board.settling.iter().map(|s| s.until).min(),
    })
}

/// Returns one line per file a person must act on.
fn attention(board: &Board, notes: &[Note]) -> Vec<String> {
    let files = board
        .problems
        .iter()
        .map(|p| format!("{}: {}", p.path, p.message));
    let noted = notes
        .iter()
        .filter(|n| matches!(n, Note::Unreadable { .. } | Note::Duplicate { .. }))
        .map(describe);
    files.chain(noted).collect()
}

/// Loads `work/` and records people's uncommitted changes (skipping the status scan when the
/// load shows nothing changed since a scan found `work/` clean); when something was recorded,
/// the load may have missed it (a file dropped meanwhile), so it loads again, until a load and
/// the recording after it agree (at most a few rounds; a busy inbox is caught next tick).
fn load_recorded(ctx: &Ctx, store: &crate::store::Store, walked: Walk) -> Result<(Board, Loaded)> {
    let mut loaded = store.load_walked(walked)?;
    for _ in 0..3 {
        let recorded = store.record_external_changes(ctx.now, Some(&loaded.1.listing))?;
        if store.scan_skipped() && ctx.verbose > 0 {
            ctx.status("coord: work/ is as a status scan last found it clean; scan skipped");
        }
        if recorded.is_empty() {
            break;
        }
        for line in recorded {
            ctx.status(&format!("coord: {line}"));
        }
        loaded = store.load()?;
    }
    Ok(loaded)
}

fn print_plan(ctx: &Ctx, plan: &engine::Plan) {
    if ctx.json {
        let ts: Vec<_> = plan
            .transitions
            .iter()
            .map(|t| json!({"subject": t.subject, "from": t.from, "to": t.to, "summary": crate::redact::one_line(&t.summary), "paths": t.paths()}))
            .collect();
        let notes: Vec<String> = plan.notes.iter().map(describe).collect();
        super::print_json(&json!({"transitions": ts, "notes": notes}));
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

/// Returns a note as one line for people, secrets redacted.
pub fn describe(note: &Note) -> String {
    crate::redact::error_line(&describe_raw(note))
}

fn describe_raw(note: &Note) -> String {
    match note {
        Note::Waiting { id, reason } | Note::Held { id, reason } => {
            format!("{id} waits: {reason}")
        }
        Note::Blocked { id, open } => {
            let open: Vec<&str> = open.iter().map(|i| i.as_str()).collect();
            format!("{id} is blocked on {}", open.join(", "))
        }
        Note::Duplicate { id, paths } => {
            format!(
                "{id} exists in {} places ({}); run 'coord doctor'",
                paths.len(),
                paths.join(", ")
            )
        }
        Note::Unreadable { path, errors } => {
            format!(
                "{path} does not read: {}",
                errors.first().cloned().unwrap_or_default()
            )
        }
        Note::Settling { path, until } => {
            format!("{path} is still being written; it is read once unchanged until {until}")
        }
        Note::Skipped { path, message } => format!("{path} left alone: {message}"),
    }
}
