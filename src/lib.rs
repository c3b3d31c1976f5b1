//! coord: a git-native, file-driven coordinator for work shared between AI agents and people.
//!
//! Tasks are YAML files in a git repository; a task's state is the folder its file sits in.
//! The library is layered so that deciding is pure and doing is thin:
//! [`yaml`], [`schema`] and [`check`] read task files; [`board`] is a snapshot of `work/`;
//! [`engine`] plans transitions from a snapshot; [`store`] applies them on disk and [`git`]
//! records each as a commit; [`cli`] is the command line on top.

#![deny(missing_docs)]

pub mod board;
pub mod check;
pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod error;
pub mod expr;
pub mod fuzz;
pub mod git;
pub mod lock;
pub mod model;
pub mod ops;
pub mod redact;
pub mod run;
pub mod schema;
pub mod serve;
pub mod sign;
pub mod store;
pub mod sync;
pub(crate) mod term;
pub mod view;
pub mod watch;
pub mod yaml;

use clap::Parser;
use std::ffi::OsString;
use std::process::ExitCode;

/// Runs the command line `args` (program name first) and returns the exit code.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                error::Exit::Usage
            } else {
                error::Exit::Ok
            };
            let _ = e.print();
            return code.into();
        }
    };
    let json = cli.json();
    match cli::run(cli) {
        Ok(()) => error::Exit::Ok.into(),
        Err(e) => {
            e.print(json);
            e.exit().into()
        }
    }
}
