//! `validate`: checks task files, agent profiles and coord.yaml, each against its own schema,
//! and returns every problem as `path:line:column: message`. A written `result:` the tick
//! would not accept is an error too. Unknown agents (also those a result's `next_agent`
//! names) are warnings (they may be added later). Works on files outside a repository too,
//! against the built-in schema.

use super::Error;
use crate::board::{split_copies, Board, Checks, Copies, TaskFile};
use crate::check::{self, Severity};
use crate::model::{State, TaskId};
use crate::schema::{Schema, Violation};
use crate::store::Store;
use crate::yaml::Limits;
use std::path::{Path, PathBuf};

/// What a validation found, one line each, secrets not yet redacted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    /// Problems that make a file invalid (`path:line:column: message`), sorted for a whole
    /// board.
    pub errors: Vec<String>,
    /// Problems that may go away (unknown agents, files the board left alone).
    pub warnings: Vec<String>,
    /// Files not checked because they are still being written (the settle rule), repo-relative.
    pub pending: Vec<String>,
}

/// Checks `paths` (relative to `dir`), or every task file of the repository around `dir`
/// when `paths` is empty.
pub fn validate(dir: &Path, paths: &[PathBuf]) -> Result<Validation, Error> {
    let mut found = Validation::default();
    let (errors, warnings) = (&mut found.errors, &mut found.warnings);
    if paths.is_empty() {
        let store = Store::open(dir)?;
        store.refuse_setup_left_out()?;
        let (board, _) = store.session(None).load_fresh()?;
        check_board(&board, errors, warnings);
        found.pending = board.settling.iter().map(|s| s.path.clone()).collect();
        return Ok(found);
    }
    let store = Store::open(dir).ok();
    if let Some(store) = &store {
        store.refuse_setup_left_out()?;
    }
    let builtin = Schema::builtin_task();
    let schema = store.as_ref().map_or(&builtin, |s| s.task_schema());
    let board = store
        .as_ref()
        .and_then(|s| s.session(None).load().ok())
        .map(|(b, _)| b);
    let root = store.as_ref().map(|s| s.root().to_path_buf());
    for p in paths {
        check_path(dir, p, schema, board.as_ref(), errors, warnings);
        if let (Some(board), Some(root)) = (&board, &root) {
            errors.extend(taken_id(
                board,
                root,
                &dir.join(p),
                &p.display().to_string(),
            ));
        }
    }
    Ok(found)
}

/// What a file reusing the id `holder` has is told (intake rejects it).
fn taken_message(id: &TaskId, holder: &str) -> String {
    format!("id '{id}' is taken by {holder}; give this task a free id (rename the file)")
}

/// Returns the error of a task file at `full` (shown as `shown`) whose id other live files
/// of the board hold, as intake would find it: a new inbox file (or a file outside the
/// board) reusing a taken id, or one copy of a duplicate id.
fn taken_id(board: &Board, root: &Path, full: &Path, shown: &str) -> Option<String> {
    let stem = full.file_stem()?.to_string_lossy().into_owned();
    let id = TaskId::new(&stem).ok()?;
    let same = |f: &&TaskFile| root.join(&f.path) == *full;
    let live: Vec<&TaskFile> = board
        .find(&id)
        .into_iter()
        .filter(|f| f.folder.state != State::Invalid)
        .collect();
    let holder = live.iter().find(|f| !same(f))?;
    let message = match split_copies(&live).kept.iter().any(same) {
        true => {
            let others: Vec<&str> = live
                .iter()
                .filter(|f| !same(f))
                .map(|f| f.path.as_str())
                .collect();
            format!("duplicate id '{id}', also in {}", others.join(", "))
        }
        false => taken_message(&id, &holder.path),
    };
    Some(Violation::file(message).render(shown))
}

fn check_path(
    dir: &Path,
    p: &Path,
    schema: &Schema,
    board: Option<&Board>,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let shown = p.display().to_string();
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    };
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bytes = match read_checked(&full) {
        Ok(b) => b,
        Err(e) => return errors.push(format!("{shown}:1:1: {e}")),
    };
    match kind_of(&full, board) {
        FileKind::Config => return errors.extend(check_config(&full, &shown)),
        FileKind::Profile => return errors.extend(check_profile(&bytes, &shown)),
        FileKind::Task => {}
    }
    match check::read_task(&stem, &bytes, schema, &Limits::default()) {
        Err(vs) => errors.extend(vs.iter().map(|v| v.render(&shown))),
        Ok(task) => {
            errors.extend(bad_result(&task, &shown));
            if let (Some(board), Ok(id)) = (board, TaskId::new(&stem)) {
                let ctx = Checks::new(board);
                split(
                    check::check_in_context(&id, &task, &ctx),
                    &shown,
                    errors,
                    warnings,
                );
                let unknown = check::unknown_result_agents(&task, &ctx);
                warnings.extend(unknown.iter().map(|v| v.render(&shown)));
            }
        }
    }
}

/// What a file given to `coord validate` is, by where it sits.
enum FileKind {
    Config,
    Profile,
    Task,
}

fn kind_of(full: &Path, board: Option<&Board>) -> FileKind {
    if full.file_name().is_some_and(|n| n == "coord.yaml") {
        return FileKind::Config;
    }
    let agents_dir = board.map_or("work/agents".to_string(), |b| {
        format!("{}/agents", b.work_dir)
    });
    let parent = full
        .parent()
        .map(|p| p.to_string_lossy().replace('\\', "/"));
    if parent.is_some_and(|p| p.ends_with(&format!("/{agents_dir}"))) {
        return FileKind::Profile;
    }
    FileKind::Task
}

/// Returns coord.yaml's problem, at its line and column, named as the user gave the path.
fn check_config(full: &Path, shown: &str) -> Option<String> {
    let e = crate::config::Config::load(full).err()?;
    let pos = e.pos.unwrap_or(crate::yaml::Pos { line: 1, col: 1 });
    Some(format!("{shown}:{}:{}: {}", pos.line, pos.col, e.message))
}

/// Returns every problem of an agent profile, checked against the profile schema.
fn check_profile(bytes: &[u8], shown: &str) -> Vec<String> {
    match crate::yaml::parse_bytes(bytes, &Limits::default()) {
        Err(e) => vec![Violation::at(e.pos, e.message).render(shown)],
        Ok(doc) if doc.value.is_null() => Vec::new(),
        Ok(doc) => Schema::builtin_agent()
            .validate(&doc)
            .iter()
            .map(|v| v.render(shown))
            .collect(),
    }
}

fn read_checked(p: &Path) -> Result<Vec<u8>, String> {
    let meta = p
        .symlink_metadata()
        .map_err(|e| format!("cannot read: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err("symlink refused; point at the file itself".into());
    }
    if meta.len() > Limits::default().max_bytes as u64 {
        return Err(format!(
            "file is larger than the {} byte limit",
            Limits::default().max_bytes
        ));
    }
    std::fs::read(p).map_err(|e| format!("cannot read: {e}"))
}

fn check_board(board: &Board, errors: &mut Vec<String>, warnings: &mut Vec<String>) {
    let ctx = Checks::new(board);
    for (id, all) in board.live_by_id() {
        let Copies { taken, kept: live } = split_copies(&all);
        for (f, holder) in taken {
            errors.push(format!("{}:1:1: {}", f.path, taken_message(id, holder)));
        }
        if live.len() > 1 {
            let paths: Vec<&str> = live.iter().map(|f| f.path.as_str()).collect();
            errors.push(format!(
                "{}:1:1: duplicate id '{id}', also in {}",
                paths[0],
                paths[1..].join(", ")
            ));
        }
    }
    for f in &board.tasks {
        if f.folder.state == State::Invalid {
            continue;
        }
        match &f.read {
            Err(vs) => errors.extend(vs.iter().map(|v| v.render(&f.path))),
            Ok(task) if !f.folder.state.is_final() => {
                errors.extend(bad_result(task, &f.path));
                let unknown = check::unknown_result_agents(task, &ctx);
                warnings.extend(unknown.iter().map(|v| v.render(&f.path)));
                split(
                    check::check_in_context(&f.id, task, &ctx),
                    &f.path,
                    errors,
                    warnings,
                );
            }
            Ok(_) => {}
        }
    }
    for p in &board.problems {
        warnings.push(format!("{}: {}", p.path, p.message));
    }
    // A profile's error is already `path:line:column: message`.
    errors.extend(
        board
            .agents
            .values()
            .filter_map(|a| a.error.as_ref())
            .map(|e| e.message.clone()),
    );
    errors.sort();
}

/// Returns the line for a `result:` the tick would not accept (`bad_result`), if any.
fn bad_result(task: &check::TaskDoc, path: &str) -> Option<String> {
    let why = task.bad_result.as_deref()?;
    Some(check::bad_result_line(path, why))
}

fn split(
    found: Vec<(Severity, crate::schema::Violation)>,
    path: &str,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    for (sev, v) in found {
        match sev {
            Severity::UnknownAgent => warnings.push(v.render(path)),
            Severity::Error => errors.push(v.render(path)),
        }
    }
}
