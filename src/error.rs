//! How failures leave the program: a [`CliError`] carries the error with its causes, the exit
//! code (docs/commands.md), a code a script can act on and the hints that say what to do. It is
//! rendered
//! as `error: …`, `caused by: …` and `hint: …` lines on stderr, or in `--json` mode as one JSON
//! object on stderr; the MCP server answers a failed tool call with the same object.

use crate::config::ConfigError;
use crate::engine::commands::CommandError;
use crate::lock::LockError;
use crate::store::StoreError;
use serde_json::{json, Value};
use std::process::ExitCode;

/// Exit codes of docs/commands.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// All went well.
    Ok = 0,
    /// The command ran and found a problem.
    Problem = 1,
    /// The command line was wrong.
    Usage = 2,
    /// Another coordinator holds the lock.
    Locked = 3,
    /// Nothing to claim.
    NothingToClaim = 4,
    /// `coord verify` found history that breaks a rule.
    Violations = 5,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// A usage error found after parsing (a bad value the parser could not check).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The version of the JSON objects coord prints (docs/json.md).
pub const JSON_VERSION: u32 = crate::ops::JSON_VERSION;

/// A failure as the command line reports it (jj's `CommandError`): the error and its causes,
/// the exit code, a code naming the kind and hints. A library error is mapped by its type
/// (`From<ops::Error>`, `From<WatchError>`, ...), with the hint its type gives; an error a
/// command made itself (`anyhow`, reading a file it was given) is a problem (exit 1) unless a
/// library error in its chain says otherwise.
#[derive(Debug)]
pub struct CliError {
    error: anyhow::Error,
    exit: Exit,
    code: &'static str,
    hints: Vec<String>,
    answered: bool,
}

impl From<crate::ops::Error> for CliError {
    /// Maps an operation's error by its type.
    fn from(e: crate::ops::Error) -> CliError {
        let (exit, code) = ops_kind(&e);
        CliError::new(e.into(), exit, code)
    }
}

impl From<UsageError> for CliError {
    fn from(e: UsageError) -> CliError {
        CliError::new(e.into(), Exit::Usage, "usage")
    }
}

impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> CliError {
        let (exit, code) = classify(&error);
        CliError::new(error, exit, code)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        CliError::new(e.into(), Exit::Problem, "problem")
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> CliError {
        CliError::new(e.into(), Exit::Problem, "problem")
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> CliError {
        crate::ops::Error::from(e).into()
    }
}

impl From<crate::watch::WatchError> for CliError {
    fn from(e: crate::watch::WatchError) -> CliError {
        let hint = e.hint();
        CliError::new(e.into(), Exit::Problem, "problem").with_hints(hint)
    }
}

impl From<crate::sign::KeyError> for CliError {
    fn from(e: crate::sign::KeyError) -> CliError {
        let hint = e.hint();
        CliError::new(e.into(), Exit::Problem, "problem").with_hints(hint)
    }
}

impl From<crate::client::ClientError> for CliError {
    /// Maps a hub's refusal by the kind the server named, so a command through a hub exits
    /// as it would here; a network error is a problem naming the URL.
    fn from(e: crate::client::ClientError) -> CliError {
        let hint = e.hint();
        let (exit, code) = e.code().map_or((Exit::Problem, "problem"), kind_named);
        CliError::new(e.into(), exit, code).with_hints(hint)
    }
}

impl CliError {
    /// Returns a failure with its exit code and kind.
    pub fn new(error: anyhow::Error, exit: Exit, code: &'static str) -> CliError {
        CliError {
            error,
            exit,
            code,
            hints: Vec::new(),
            answered: false,
        }
    }

    /// Returns a problem (exit 1) saying `message`, with a hint saying what to do.
    pub fn problem(message: impl Into<String>, hint: impl Into<String>) -> CliError {
        CliError::new(anyhow::anyhow!(message.into()), Exit::Problem, "problem").with_hint(hint)
    }

    /// Adds a `hint:` line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    /// Adds the hints given.
    pub fn with_hints(mut self, hints: impl IntoIterator<Item = impl Into<String>>) -> CliError {
        self.hints.extend(hints.into_iter().map(Into::into));
        self
    }

    /// Returns the hints, in order.
    pub fn hints(&self) -> &[String] {
        &self.hints
    }

    /// Returns an exit with `exit` for an outcome the command already printed as its answer
    /// (nothing to claim): nothing more is printed.
    pub fn answered(exit: Exit, why: impl Into<String>) -> CliError {
        let mut e = CliError::from(anyhow::anyhow!(why.into()));
        e.exit = exit;
        e.answered = true;
        e
    }

    /// Returns the exit code.
    pub fn exit(&self) -> Exit {
        self.exit
    }

    /// Returns the error itself, without its exit code.
    pub fn into_error(self) -> anyhow::Error {
        self.error
    }

    /// Returns the message and each cause that says something the line before did not, with
    /// secrets redacted.
    fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .error
            .chain()
            .map(|c| crate::redact::error_line(&c.to_string()))
            .collect();
        lines.dedup();
        lines
    }

    /// Returns the message and its causes on one line, secrets redacted.
    pub fn one_line(&self) -> String {
        self.lines().join(": ")
    }

    /// Returns the error as one JSON object: `{"version", "error": {"code", "message",
    /// "caused_by", "exit_code"}}`, and `"hints"` in `error` when there are any.
    pub fn to_json(&self) -> Value {
        let mut lines = self.lines();
        let message = if lines.is_empty() {
            String::new()
        } else {
            lines.remove(0)
        };
        let mut error = json!({
            "code": self.code,
            "message": message,
            "caused_by": lines,
            "exit_code": self.exit as i32,
        });
        if !self.hints.is_empty() {
            error["hints"] = json!(self.hints);
        }
        json!({"version": JSON_VERSION, "error": error})
    }

    /// Prints the error on stderr: as lines, or as one JSON object with `json`.
    pub fn print(&self, json: bool) {
        if self.answered {
            return;
        }
        if json {
            let text = serde_json::to_string(&self.to_json()).unwrap_or_default();
            crate::term::write_err(format_args!("{text}"));
            return;
        }
        for (i, line) in self.lines().iter().enumerate() {
            let label = if i == 0 { "error" } else { "caused by" };
            crate::term::write_err(format_args!("{label}: {line}"));
        }
        for hint in &self.hints {
            crate::term::write_err(format_args!("hint: {}", crate::redact::error_line(hint)));
        }
    }
}

/// Returns the exit code and the kind of an operation's error, by its type.
fn ops_kind(e: &crate::ops::Error) -> (Exit, &'static str) {
    use crate::ops::Error;
    match e {
        Error::Command(c) => command_kind(c),
        Error::Lock(LockError::Held { .. }) => (Exit::Locked, "locked"),
        Error::Usage(_) => (Exit::Usage, "usage"),
        Error::Store(StoreError::Config(c)) if c.out_of_range => (Exit::Usage, "usage"),
        _ => (Exit::Problem, "problem"),
    }
}

/// Returns the exit code and the code naming the kind of an error a command made itself, from
/// the first library error in its chain that decides them (an operation's error wrapped in
/// the command's own context).
fn classify(err: &anyhow::Error) -> (Exit, &'static str) {
    err.chain()
        .find_map(kind_of)
        .unwrap_or((Exit::Problem, "problem"))
}

fn kind_of(c: &(dyn std::error::Error + 'static)) -> Option<(Exit, &'static str)> {
    if let Some(e) = c.downcast_ref::<CommandError>() {
        return Some(command_kind(e));
    }
    if let Some(LockError::Held { .. }) = c.downcast_ref::<LockError>() {
        return Some((Exit::Locked, "locked"));
    }
    if c.is::<UsageError>()
        || matches!(
            c.downcast_ref::<crate::ops::Error>(),
            Some(crate::ops::Error::Usage(_))
        )
    {
        return Some((Exit::Usage, "usage"));
    }
    let config = match c.downcast_ref::<StoreError>() {
        Some(StoreError::Config(c)) => Some(c),
        _ => c.downcast_ref::<ConfigError>(),
    };
    config
        .filter(|c| c.out_of_range)
        .map(|_| (Exit::Usage, "usage"))
}

/// Returns the exit code and kind named `code` (as [`kind_code`] gives them to a hub's
/// clients); an unknown name is a problem.
fn kind_named(code: &str) -> (Exit, &'static str) {
    const PROBLEMS: [&str; 13] = [
        "not_found",
        "duplicate",
        "wrong_state",
        "unknown_agent",
        "unreadable",
        "sign",
        "unsafe",
        "stale",
        "result_pending",
        "unfenced",
        "unsigned",
        "being_written",
        "conflict",
    ];
    match code {
        "nothing_to_claim" => (Exit::NothingToClaim, "nothing_to_claim"),
        "locked" => (Exit::Locked, "locked"),
        "usage" => (Exit::Usage, "usage"),
        _ => PROBLEMS
            .iter()
            .find(|p| **p == code)
            .map_or((Exit::Problem, "problem"), |p| (Exit::Problem, *p)),
    }
}

/// Returns the kind of an error as the command line names it (`stale`, `locked`, `usage`,
/// ...), for a server to tell its clients; None when it has no kind of its own.
pub fn kind_code(c: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    kind_of(c).map(|(_, code)| code)
}

fn command_kind(e: &CommandError) -> (Exit, &'static str) {
    let code = match e {
        CommandError::NotFound(_) => "not_found",
        CommandError::Duplicate(_) => "duplicate",
        CommandError::WrongState { .. } => "wrong_state",
        CommandError::UnknownAgent { .. } => "unknown_agent",
        CommandError::Unreadable(_) => "unreadable",
        CommandError::NothingToClaim { .. } => return (Exit::NothingToClaim, "nothing_to_claim"),
        CommandError::Sign(_) => "sign",
        CommandError::Unsafe(_) => "unsafe",
        CommandError::Stale(_) => "stale",
        CommandError::ResultPending(_) => "result_pending",
        CommandError::Unfenced { .. } | CommandError::NoEpoch { .. } => "unfenced",
        CommandError::Unsigned { .. } => "unsigned",
        CommandError::BeingWritten(_) => "being_written",
    };
    (Exit::Problem, code)
}

/// Returns a report's error, with `hint` (how to replace the result) when a result is
/// already waiting.
pub fn replace_hint(e: crate::ops::Error, hint: &str) -> CliError {
    let pending = matches!(
        e,
        crate::ops::Error::Command(CommandError::ResultPending(_))
    );
    let e = CliError::from(e);
    match pending {
        true => e.with_hint(hint),
        false => e,
    }
}

/// Returns what `new` made, or refused (code `conflict`, as `POST /v1/tasks` answers 409)
/// when the idempotency key is an earlier task's whose fields differ: the new task would be
/// lost silently otherwise.
pub fn same_fields(
    created: crate::ops::Created,
    task: &crate::ops::NewTask,
) -> Result<crate::ops::Created, CliError> {
    if created.same {
        return Ok(created);
    }
    let key = task.idempotency_key.as_deref().unwrap_or_default();
    let error = anyhow::anyhow!(
        "idempotency key {key:?} was used before for task '{}' with other fields; nothing was written",
        created.id
    );
    Err(CliError::new(error, Exit::Problem, "conflict").with_hint(
        "use a new idempotency key for another task, or the same fields to get the first one",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgentName;
    use crate::ops::Error;

    fn exit_of(e: Error) -> (Exit, &'static str) {
        let e = CliError::from(e);
        (e.exit, e.code)
    }

    #[test]
    fn an_operations_error_is_mapped_by_its_type() {
        let held = LockError::held(std::env::temp_dir().join("no-such-coord.lock"));
        assert_eq!(exit_of(Error::Lock(held)), (Exit::Locked, "locked"));
        assert_eq!(
            exit_of(Error::Usage("--older-than is out of range".into())),
            (Exit::Usage, "usage")
        );
        let agent = AgentName::new("p").expect("name");
        let nothing = CommandError::NothingToClaim {
            agent,
            why: String::new(),
        };
        assert_eq!(
            exit_of(Error::Command(nothing)),
            (Exit::NothingToClaim, "nothing_to_claim")
        );
        let refused = Error::Refused("work/agents/p.yaml already exists; edit it instead".into());
        assert_eq!(exit_of(refused), (Exit::Problem, "problem"));
    }

    #[test]
    fn a_message_that_names_a_kind_does_not_make_an_error_that_kind() {
        let words = Error::Refused("nothing to claim: the lock is held; usage: coord".into());
        assert_eq!(exit_of(words), (Exit::Problem, "problem"));
    }
}
