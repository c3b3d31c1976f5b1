//! How failures leave the program: the exit code of each kind of error (SPEC 4) and the
//! rendering `error: …`, `caused by: …`, `hint: …` on stderr.

use crate::config::ConfigError;
use crate::engine::commands::CommandError;
use crate::lock::LockError;
use crate::store::StoreError;
use std::process::ExitCode;

/// Exit codes of SPEC 4.
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

/// Returns the exit code for an error.
pub fn exit_code(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if let Some(LockError::Held { .. }) = cause.downcast_ref::<LockError>() {
            return Exit::Locked;
        }
        if let Some(CommandError::NothingToClaim { .. }) = cause.downcast_ref::<CommandError>() {
            return Exit::NothingToClaim;
        }
        if cause.downcast_ref::<UsageError>().is_some()
            || matches!(
                cause.downcast_ref::<crate::ops::Error>(),
                Some(crate::ops::Error::Usage(_))
            )
        {
            return Exit::Usage;
        }
        let config = match cause.downcast_ref::<StoreError>() {
            Some(StoreError::Config(c)) => Some(c),
            _ => cause.downcast_ref::<ConfigError>(),
        };
        if config.is_some_and(|c| c.out_of_range) {
            return Exit::Usage;
        }
    }
    Exit::Problem
}

/// Prints an error and its causes on stderr, one line each, with secrets redacted; a cause
/// that says what the line before it said is not repeated.
pub fn report(err: &anyhow::Error) {
    let mut lines = err
        .chain()
        .map(|c| crate::redact::error_line(&c.to_string()));
    let mut last = String::new();
    if let Some(first) = lines.next() {
        crate::cli::write_err(format_args!("error: {first}"));
        last = first;
    }
    for line in lines {
        if line != last {
            crate::cli::write_err(format_args!("caused by: {line}"));
        }
        last = line;
    }
}
