//! `coord completions <shell>`: shell completion scripts generated from the command line
//! definition by clap's own generator, with bash, zsh and fish asking `coord __complete` for
//! task ids and agent names ([`super::complete`]). Prints to stdout; no repository is needed.

use super::Cli;
use crate::error::CliError;
use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

/// Arguments of `coord completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write completions for
    #[arg(value_enum)]
    shell: Shell,
}

/// Prints the completion script for a shell.
pub fn completions(args: CompletionsArgs) -> Result<(), CliError> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "coord", &mut buf);
    let script = super::complete::dynamic(args.shell, String::from_utf8_lossy(&buf).into_owned());
    Ok(write_stdout(script.as_bytes())?)
}

/// Writes bytes on stdout; a closed pipe is not an error.
pub(super) fn write_stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}
