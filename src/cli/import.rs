//! `coord import` and `coord export`: read another tracker's files (or stdin) into
//! [`crate::ops::import`] and print what became of each item; print the board as JSON Lines.

use super::Ctx;
use crate::error::{CliError, Exit};
use crate::model::State;
use crate::ops::import::{self, ImportError, Imported, Item, Outcome, Source};
use std::io::Read;
use std::path::PathBuf;

/// Arguments of `coord import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The tracker the tasks come from
    source: Source,
    /// Its project folder or file (for github: a file of `gh issue list --json` output, or -
    /// for stdin)
    path: PathBuf,
    /// Print what would be imported and write nothing
    #[arg(long)]
    dry_run: bool,
}

/// Arguments of `coord export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Only tasks in this state (repeatable)
    #[arg(long, value_parser = super::list::parse_state)]
    state: Vec<State>,
}

/// Runs `coord import`.
pub fn import(ctx: &Ctx, args: ImportArgs) -> Result<(), CliError> {
    let items = read_items(args.source, &args.path).map_err(source_error)?;
    let imported = ctx.coord()?.import(args.source, &items, args.dry_run)?;
    if ctx.json {
        super::print_answer(serde_json::to_value(&imported)?);
        return Ok(());
    }
    for t in &imported.tasks {
        let what = match (&t.outcome, imported.dry_run) {
            (Outcome::Created, true) => "would create",
            (Outcome::Created, false) => "created",
            (Outcome::Unchanged, _) => "unchanged",
            (Outcome::Changed, _) => "changed",
        };
        let key = crate::redact::one_line(&t.key);
        out!("{what:<12}  {:<10}  {}  ({key})", t.state, t.id);
    }
    for note in &imported.notes {
        ctx.status(&format!("note: {}", crate::redact::one_line(note)));
    }
    ctx.status(&summary(&imported));
    Ok(())
}

/// Runs `coord export`.
pub fn export(ctx: &Ctx, args: ExportArgs) -> Result<(), CliError> {
    for task in ctx.coord()?.export(&args.state)? {
        out!("{}", serde_json::to_string(&task)?);
    }
    Ok(())
}

fn read_items(source: Source, path: &std::path::Path) -> Result<Vec<Item>, ImportError> {
    if path.as_os_str() != "-" {
        return import::read(source, path);
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| ImportError::Read {
            path: path.to_path_buf(),
            source: e,
        })?;
    match source {
        Source::Github => import::read_github(&text, "stdin"),
        _ => Err(ImportError::NotFound {
            path: path.to_path_buf(),
            what: "a project folder (only github reads stdin)",
        }),
    }
}

fn source_error(e: ImportError) -> CliError {
    CliError::new(e.into(), Exit::Problem, "import")
        .with_hint("'coord import --help' says which files each source reads")
}

/// Returns the closing line: counts, and the commit made.
fn summary(imported: &Imported) -> String {
    let (new, same, changed) = (
        imported.count(&Outcome::Created),
        imported.count(&Outcome::Unchanged),
        imported.count(&Outcome::Changed),
    );
    let done = match (imported.dry_run, imported.committed) {
        (true, _) => "dry run: nothing was written",
        (false, true) => "one commit",
        (false, false) => "nothing to write",
    };
    let mut line = format!(
        "coord: {} from {}: {new} new, {same} unchanged, {changed} changed in the source; {done}",
        imported.tasks.len(),
        imported.source.as_str()
    );
    if changed > 0 {
        line.push_str(
            "\ncoord: changed items are left as they are in coord: edit the coord task by hand to take the change",
        );
    }
    line
}
