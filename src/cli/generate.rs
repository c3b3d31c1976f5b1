//! `coord completions <shell>` and `coord man`: shell completion scripts and the man page,
//! generated from the command line definition by clap's own generators. Prints to stdout; no
//! repository is needed.

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
    Ok(write_stdout(&buf)?)
}

/// Prints the man page `coord(1)` in roff: synopsis, global options and every subcommand.
pub fn man() -> Result<(), CliError> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut buf)
        .context("cannot render the man page")?;
    Ok(write_stdout(&buf)?)
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}
