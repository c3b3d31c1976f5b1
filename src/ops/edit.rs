//! `coord edit`: a person's rewrite of one task file as a whole, in three steps a front end
//! runs around its editor: [`Coord::edit_start`] reads the file (refusing a task an agent
//! holds), [`Coord::edit_check`] tells why an edited text would not do, and
//! [`Coord::edit_save`] commits the person's bytes as they are, in one commit that `coord
//! sync` replays as a person's edit. The `coord:` block and an agent's `result:` are not the
//! person's to change here, so an edit never moves a task past an approval or a report.

use super::{Coord, Error, Folders};
use crate::board::{content_hash, Board, Checks, TaskFile};
use crate::check::{self, Severity};
use crate::engine::{Op, OpKind, Operation, Plan, Transition};
use crate::model::{Endpoint, State, TaskId};
use crate::schema::Violation;
use crate::store::Origin;
use crate::yaml::Limits;

/// The blocks of a task file that are not the person's: coord's record and the agent's
/// report.
const KEPT_BLOCKS: [(&str, &str); 2] = [
    ("coord", "coord's record"),
    ("result", "the agent's report"),
];

/// A task file as `coord edit` found it: what the editor opens and what the save is guarded by.
#[derive(Debug, Clone)]
pub struct EditSource {
    /// The task.
    pub id: TaskId,
    /// The file, repo-relative.
    pub path: String,
    /// Its text when the edit started.
    pub text: String,
    /// The state its folder stands for.
    pub state: State,
}

impl Coord {
    /// Reads task `id`'s file for an edit. Refused for an unknown id, a task with several
    /// copies, a file that is not UTF-8, and a task an agent holds (`assigned`): an edit
    /// then could change the work under the agent or its report.
    pub fn edit_start(&self, id: &TaskId) -> Result<EditSource, Error> {
        let (board, _) = self.read().load()?;
        let file = one_file(&board, id)?;
        refuse_held(file)?;
        let bytes = self
            .store()
            .read_file(&file.path, Limits::default().max_bytes)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            Error::Refused(format!(
                "{} is not UTF-8 text; edit it with a tool that keeps its bytes",
                file.path
            ))
        })?;
        Ok(EditSource {
            id: id.clone(),
            path: file.path.clone(),
            text,
            state: file.folder.state,
        })
    }

    /// Returns the problems of `text` as the new content of the task `source` names, each as
    /// `shown:line:column: message` (empty when it may be saved): what `coord validate`
    /// would find, and a change to its `coord:` or `result:` block.
    pub fn edit_check(&self, source: &EditSource, text: &str, shown: &str) -> Vec<String> {
        let limits = Limits::default();
        let task = match check::read_task(
            source.id.as_str(),
            text.as_bytes(),
            self.store().task_schema(),
            &limits,
        ) {
            Ok(task) => task,
            Err(found) => return found.iter().map(|v| v.render(shown)).collect(),
        };
        let mut errors: Vec<String> = changed_blocks(&source.text, text)
            .iter()
            .map(|v| v.render(shown))
            .collect();
        if let Ok((board, _)) = self.read().load() {
            let ctx = Checks::new(&board);
            errors.extend(
                check::check_in_context(&source.id, &task, &ctx)
                    .into_iter()
                    .filter(|(s, _)| *s == Severity::Error)
                    .map(|(_, v)| v.render(shown)),
            );
        }
        errors
    }

    /// Commits `text` as task `source`'s file, byte for byte, in one commit; returns the
    /// commits made (none when the text is the file's already). Refused when the file
    /// changed since [`Coord::edit_start`] read it (the caller keeps the text), when an
    /// agent took the task meanwhile, and when `text` does not pass [`Coord::edit_check`].
    pub fn edit_save(&self, source: &EditSource, text: &str) -> Result<usize, Error> {
        if text == source.text {
            return Ok(0);
        }
        if let Some(why) = self.edit_check(source, text, &source.path).first() {
            return Err(Error::Refused(why.clone()));
        }
        let session = self.session_over(super::AGENT_WAIT, Folders::Finished)?;
        let (board, _) = session.load()?;
        let file = one_file(&board, &source.id)?;
        refuse_held(file)?;
        if file.path != source.path || file.hash != content_hash(source.text.as_bytes()) {
            return Err(Error::Refused(format!(
                "task '{}' changed while it was being edited (now {}); nothing was written",
                source.id, file.path
            )));
        }
        let t = Transition {
            subject: source.id.to_string(),
            from: Endpoint::State(file.folder.state),
            to: Endpoint::State(file.folder.state),
            summary: format!("edit {}", source.id),
            ops: vec![Op::Write {
                path: file.path.clone(),
                text: text.to_string(),
            }],
            guard: vec![(file.path.clone(), file.hash)],
            op: Some(Operation::of(OpKind::Edit)),
        };
        let n = super::apply(
            &session,
            &self.sink,
            &Plan::one(t),
            self.now,
            Origin::Command,
        )?;
        if let Some((path, why)) = session.first_skipped() {
            return Err(Error::Unchanged { path, why });
        }
        session.finish()?;
        Ok(n)
    }
}

/// Returns the one live file of task `id`, or why there is none to edit.
fn one_file<'b>(board: &'b Board, id: &TaskId) -> Result<&'b TaskFile, Error> {
    match board.find(id).as_slice() {
        [one] => Ok(one),
        [] => Err(Error::Refused(format!(
            "no task '{id}'; 'coord list' shows the ids"
        ))),
        _ => Err(Error::Refused(format!(
            "task '{id}' has several copies; run 'coord doctor'"
        ))),
    }
}

/// Refuses a task an agent holds: its work and its report are the agent's until it reports.
fn refuse_held(file: &TaskFile) -> Result<(), Error> {
    if file.folder.state != State::Assigned {
        return Ok(());
    }
    let agent = file
        .read
        .as_ref()
        .ok()
        .and_then(|t| t.summary().assigned_to.clone())
        .map_or_else(|| "an agent".to_string(), |a| format!("agent '{a}'"));
    Err(Error::Refused(format!(
        "task '{}' is held by {agent}; an edit now could change its work or its report under it: edit it once it reports, or 'coord cancel {0}' and 'coord retry {0}' first",
        file.id
    )))
}

/// Returns a finding for each of `coord:` and `result:` whose value differs between `before`
/// and `after`, at the block's line in `after`.
fn changed_blocks(before: &str, after: &str) -> Vec<Violation> {
    let limits = Limits::default();
    let (Ok(old), Ok(new)) = (
        crate::yaml::parse(before, &limits),
        crate::yaml::parse(after, &limits),
    ) else {
        return Vec::new();
    };
    KEPT_BLOCKS
        .iter()
        .filter(|(key, _)| old.value.get(key) != new.value.get(key))
        .map(|(key, whose)| {
            Violation::at(
                new.pos_of(&format!("/{key}"), true),
                format!(
                    "'{key}:' is {whose} and 'coord edit' keeps it as it was; put it back and change the other keys"
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::changed_blocks;

    #[test]
    fn a_change_to_coord_or_result_is_found_at_its_line() {
        let before = "title: a\ncoord:\n  state: ready\n  attempt: 0\n";
        assert!(changed_blocks(
            before,
            "title: b\n# note\ncoord:\n  state: ready\n  attempt: 0\n"
        )
        .is_empty());
        let found = changed_blocks(before, "title: a\ncoord:\n  state: done\n  attempt: 0\n");
        assert_eq!(found.len(), 1);
        assert!(
            found[0].render("f").starts_with("f:2:"),
            "{}",
            found[0].render("f")
        );
        let found = changed_blocks(before, &format!("{before}result:\n  status: success\n"));
        assert!(
            found[0].message.contains("result"),
            "{:?}",
            found[0].message
        );
    }
}
