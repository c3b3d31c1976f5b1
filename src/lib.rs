//! coord: a git-native, file-driven coordinator for work shared between AI agents and people.
//!
//! Tasks are YAML files in a git repository; a task's state is the folder its file sits in.
//! The library is layered so that deciding is pure and doing is thin: the store reads `work/`
//! into a board, the engine plans transitions from it, the store applies them and git records
//! each as a commit. Every front end (the command line, `coord serve`, the MCP server, the
//! agent runner, `watch`, `sync`) drives it through one type, [`ops::Coord`]: open a
//! repository at one instant, call an operation, get a typed outcome or an [`ops::Error`].
//! The public modules are [`ops`] (the operations), [`model`] (task and agent names, states,
//! durations), [`watch`] (the watch loop a long-running front end drives), [`error`] (how the
//! command line reports a failure), and [`yaml`], [`git`] and [`fuzz`], which tests, benchmarks
//! and the fuzz targets use; the rest (store, engine, board, schema, serve, cli, ...) is
//! private to the crate.
//!
//! Embedding coord:
//!
//! ```
//! use coord::ops::{self, Coord, NewAgent, NewTask, Options};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! ops::init(dir.path(), ops::Setup::default(), Options::default(), Box::new(|_| {}))?;
//! let coord = Coord::open(dir.path(), Options::default())?;
//! coord.add_agent(&NewAgent {
//!     name: coord::model::AgentName::new("alice")?,
//!     capabilities: vec!["code".into()],
//!     max_active: 1,
//!     pull: false,
//! })?;
//! let task = NewTask {
//!     title: "Write the README".into(),
//!     capabilities: vec!["code".into()],
//!     ..NewTask::default()
//! };
//! let created = coord.new_task(&task)?;
//! let ticked = coord.tick()?;
//! assert!(ticked.commits >= 1, "the tick moved the task on");
//! let status = coord.status(None)?;
//! assert_eq!(status.board["counts"]["assigned"], 1);
//! let shown = coord.show(&created.id)?;
//! assert_eq!(shown.copy.state.as_str(), "assigned");
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub(crate) mod board;
pub(crate) mod check;
pub(crate) mod cli;
pub(crate) mod client;
pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod engine;
pub mod error;
pub(crate) mod expr;
pub(crate) mod fsx;
pub mod fuzz;
pub mod git;
pub(crate) mod hash;
pub(crate) mod lock;
pub(crate) mod mcp;
pub mod model;
pub use store::private as private_index;
pub mod ops;
pub(crate) mod redact;
pub(crate) mod run;
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod sign;
pub(crate) mod store;
pub(crate) mod sync;
pub(crate) mod term;
pub(crate) mod text;
pub(crate) mod view;
pub mod watch;
pub mod yaml;

use clap::Parser;
use std::ffi::OsString;
use std::process::ExitCode;

/// Runs the command line `args` (program name first) and returns the exit code.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    if let Some(answered) = cli::complete::answer(&args) {
        return answered;
    }
    let own = args
        .iter()
        .eq(std::env::args_os().collect::<Vec<_>>().iter());
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli.of_this_process(own),
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
