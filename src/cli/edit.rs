//! `coord edit <id>`: opens a copy of the task's file in `$VISUAL` / `$EDITOR` (as `coord new
//! --edit` does), checks what was saved, offers to open it again when it does not read, and
//! commits it through [`crate::ops::Coord::edit_save`]. The person's text is never lost: a
//! draft that is not committed is kept and named.

use super::Ctx;
use crate::error::{CliError, UsageError};
use crate::model::TaskId;
use crate::ops::EditSource;
use anyhow::Context;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Arguments of `coord edit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task's id
    id: TaskId,
}

/// Runs `coord edit`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    if ctx.json {
        return Err(UsageError(
            "coord edit opens an editor and has no --json answer; write the file and 'coord tick', or use 'coord show --json'".into(),
        )
        .into());
    }
    let coord = ctx.coord()?;
    let source = coord.edit_start(&args.id)?;
    let draft = draft_path(&source.id);
    std::fs::write(&draft, &source.text)
        .with_context(|| format!("cannot write the draft {}", draft.display()))?;
    let text = edited(&coord, &source, &draft)?;
    let kept = |e: crate::ops::Error| {
        let line = format!("{e} (the text is kept in {})", draft.display());
        anyhow::Error::from(e).context(line)
    };
    let n = coord.edit_save(&source, &text).map_err(kept)?;
    let _ = std::fs::remove_file(&draft);
    match n {
        0 => ctx.status(&format!(
            "coord: {} unchanged; nothing to commit",
            source.id
        )),
        _ => out!("{}", source.id),
    }
    Ok(())
}

/// Opens the draft in the editor until what is saved in it reads, or the person gives up;
/// returns the text.
fn edited(coord: &crate::ops::Coord, source: &EditSource, draft: &Path) -> anyhow::Result<String> {
    let shown = draft.display().to_string();
    loop {
        super::new_text::edit(draft)?;
        let text = std::fs::read_to_string(draft)
            .with_context(|| format!("cannot read the draft {shown}"))?;
        let problems = coord.edit_check(source, &text, &shown);
        let Some(first) = problems.first() else {
            return Ok(text);
        };
        err!("{first}");
        if !open_again()? {
            return Err(UsageError(format!(
                "{} was not changed (the text is kept in {shown})",
                source.path
            ))
            .into());
        }
    }
}

/// Asks on stderr whether to open the editor again and reads the answer on stdin: yes for
/// an empty line or one starting with `y`; no at the end of input (a script).
fn open_again() -> anyhow::Result<bool> {
    let stdin = std::io::stdin();
    err!("Open the editor again to fix it? [Y/n]");
    let mut line = String::new();
    let read = stdin
        .lock()
        .read_line(&mut line)
        .context("cannot read the answer on stdin")?;
    let answer = line.trim().to_ascii_lowercase();
    Ok(read > 0 && (answer.is_empty() || answer.starts_with('y')))
}

/// Where the draft of task `id` is written: the system's temporary folder, named after the
/// task and this process.
fn draft_path(id: &TaskId) -> PathBuf {
    std::env::temp_dir().join(format!("coord-edit-{id}-{}.yaml", std::process::id()))
}
