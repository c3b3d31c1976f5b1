//! The command line: global flags, one subcommand per file, and the shared way a writing
//! command opens the store, takes the lock and recovers before it acts. No task logic here.

/// Prints a line on stdout; a closed pipe (`coord log | head`) ends the program quietly
/// instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format_args!($($arg)*))
    };
}

/// Prints a line on stderr; a closed or broken stderr loses the line instead of panicking.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::cli::write_err(format_args!($($arg)*))
    };
}

mod agents;
mod archive;
mod board_markdown;
pub(crate) mod board_view;
pub(crate) mod complete;
mod demo;
mod doctor;
mod edit;
mod gate;
mod generate;
mod hub;
pub(crate) mod human;
mod import;
mod init;
mod keygen;
mod list;
mod log;
mod logs;
mod man;
mod mcp;
pub(crate) mod new;
mod new_text;
mod prime;
mod report;
mod run;
mod run_output;
mod schedules;
mod serve;
mod show;
mod status;
mod sync;
mod synced;
mod tick;
mod validate;
mod verify;
pub mod wait;
pub(crate) mod watch;
mod webhooks;

use crate::engine::Transition;
use crate::error::{CliError, UsageError};
use crate::ops::{self, Coord, Event};
use crate::store::{Applied, Store};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use jiff::Timestamp;
use std::io::IsTerminal;
use std::path::PathBuf;

/// coord's version and the commit it was built from, when known (`coord --version`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("COORD_BUILD_COMMIT"));

/// The help heading of the options every command takes.
const GLOBAL: &str = "Global options";

/// coord: a git-native, file-driven coordinator for work shared between AI agents and people.
#[derive(Debug, Parser)]
#[command(name = "coord", version = VERSION, about, max_term_width = 100)]
pub struct Cli {
    /// Run as if started in DIR
    #[arg(short = 'C', global = true, value_name = "DIR", help_heading = GLOBAL)]
    dir: Option<PathBuf>,
    /// Print machine-readable JSON on stdout
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
    /// Print less
    #[arg(short, long, global = true, help_heading = GLOBAL)]
    quiet: bool,
    /// Print more (repeat for more)
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = GLOBAL)]
    verbose: u8,
    /// Use this time as now (RFC 3339), for reproducible runs; COORD_NOW sets it too
    #[arg(long, global = true, value_name = "TIME", help_heading = GLOBAL)]
    now: Option<String>,
    /// In a command that writes, wait this long for another coordinator's lock (e.g. 30s,
    /// 500ms; default 10s for agent and person commands, 0s for tick and sync)
    #[arg(long, global = true, value_name = "DURATION", help_heading = GLOBAL)]
    wait: Option<wait::FlagDuration>,
    /// When to colour output: auto (on a terminal, unless NO_COLOR is set), always or never
    #[arg(long, global = true, value_enum, default_value_t, value_name = "WHEN", help_heading = GLOBAL)]
    color: human::ColorChoice,
    /// Show times in UTC (RFC 3339) on a terminal too, not local with how long ago
    #[arg(long, global = true, help_heading = GLOBAL)]
    utc: bool,
    /// Print long output (list, log, show) straight to the terminal, without COORD_PAGER,
    /// PAGER or less
    #[arg(long, global = true, help_heading = GLOBAL)]
    no_pager: bool,
    #[command(subcommand)]
    command: Command,
    /// Whether these are the process's own arguments, so that starting the process again
    /// runs this command again (see [`Cli::of_this_process`]).
    #[arg(skip)]
    own_arguments: bool,
}

impl Cli {
    /// Marks the command line as the process's own (`coord::run` given
    /// `std::env::args_os()`): a command may then start the process again to tune it
    /// (`exec_again_with`). A caller running coord in its own process never is.
    pub fn of_this_process(mut self, own: bool) -> Cli {
        self.own_arguments = own;
        self
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the work layout, schema, coord.yaml and workflow, and commit them
    Init(init::Args),
    /// Write a new task into work/inbox/ and print its id
    New(new::Args),
    /// Edit a task's file in $VISUAL or $EDITOR; checked before it is committed
    Edit(edit::Args),
    /// Bring in the tasks of beads, Backlog.md, Taskmaster or GitHub issues, in one commit
    Import(import::ImportArgs),
    /// Print tasks as JSON Lines, one task per line
    Export(import::ExportArgs),
    /// Check task files; exit 1 if any is invalid
    Validate(validate::Args),
    /// Run one reconciliation pass
    Tick(tick::Args),
    /// Tick on every change under work/ (debounced) and every interval, until Ctrl-C
    Watch(watch::Args),
    /// Show the board: counts, agents, waiting and invalid tasks
    Status(status::Args),
    /// Show one task
    Show(show::Args),
    /// List tasks as rows, filtered by state, agent, capability and priority
    List(list::Args),
    /// Show transitions from git history, newest first
    Log(log::Args),
    /// Print the stdout and stderr 'coord run' kept of a task's attempt; --follow a running one
    Logs(logs::Args),
    /// Check the whole history of a branch: attempts granted once, results kept; exit 5 if not
    Verify(verify::Args),
    /// Take the best ready task for an agent (pull model); exit 4 when none
    Claim(report::ClaimArgs),
    /// Write a success result into an assigned task
    Complete(report::CompleteArgs),
    /// Write a failure result into an assigned task
    Fail(report::FailArgs),
    /// Extend the lease of an assigned task
    Heartbeat(report::HeartbeatArgs),
    /// Approve a task waiting in review
    Approve(gate::IdArgs),
    /// Reject a task waiting in review
    Reject(gate::RejectArgs),
    /// Cancel a task that is not final (in the inbox too)
    Cancel(gate::CancelArgs),
    /// Send a failed, invalid or cancelled task back to the inbox
    Retry(gate::IdArgs),
    /// Give a task to another agent (one an agent holds gets a new attempt)
    Reassign(gate::ReassignArgs),
    /// Create a signing key for an agent (outside the repository)
    Keygen(keygen::Args),
    /// List agents, or add, disable, enable or remove one
    Agents(agents::Args),
    /// Move old done and cancelled tasks to work/archive/<YYYY-MM>/
    Archive(archive::Args),
    /// Check the work folder for inconsistencies
    Doctor(doctor::Args),
    /// Fetch, tick and push; on a rejected push, redo on the newer remote and retry
    Sync(sync::Args),
    /// Build a sample repo and run a pipeline and a fan-out to the end with simulated agents
    Demo(demo::Args),
    /// List recurring tasks (work/schedules/) with their next slots
    Schedules(schedules::Args),
    /// List the webhook endpoints with their cursor, pending events and dead letters, or
    /// send dead letters again
    Webhooks(webhooks::Args),
    /// Run a command once per task of an agent: task JSON on stdin, heartbeats, timeout, report
    Run(run::Args),
    /// Serve the REST API under /v1, the live board at / and /metrics over HTTP
    Serve(serve::Args),
    /// Print instructions for an agent working in this repo, or install them in AGENTS.md
    Prime(prime::Args),
    /// Serve this repo to an MCP client over stdio: board, new tasks and the agent loop
    Mcp(mcp::Args),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish)
    Completions(generate::CompletionsArgs),
    /// Print the man page of coord or of one command in roff, or write them all
    Man(man::ManArgs),
}

/// What every command gets: the flags that apply to all of them.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The directory to work in.
    pub dir: PathBuf,
    /// JSON output.
    pub json: bool,
    /// Less output.
    pub quiet: bool,
    /// More output.
    pub verbose: u8,
    /// The clock.
    pub now: Timestamp,
    /// Whether the clock was given (`--now`, COORD_NOW) rather than read from the system.
    pub now_fixed: bool,
    /// How long to wait for the coordinator lock (`--wait`), when given.
    pub wait: Option<std::time::Duration>,
    /// Whether starting the process again runs this command again ([`Cli::of_this_process`]).
    pub restartable: bool,
    /// How values printed on stdout look: colour and times.
    pub look: human::Look,
}

impl Ctx {
    /// Returns a quiet context for `dir` at `now` (RFC 3339) or at the system clock, waiting
    /// `wait` for the lock when given.
    pub fn new(
        dir: PathBuf,
        now: Option<&str>,
        wait: Option<std::time::Duration>,
    ) -> Result<Ctx, UsageError> {
        Ok(Ctx {
            dir,
            json: false,
            quiet: true,
            verbose: 0,
            now: crate::clock::now(now).map_err(UsageError)?,
            now_fixed: now.is_some(),
            wait,
            restartable: false,
            look: human::Look::default(),
        })
    }

    /// Prints a status line on stderr unless quiet.
    pub fn status(&self, line: &str) {
        if !self.quiet {
            err!("{line}");
        }
    }

    /// Returns this context with the clock read again, unless it was given (long-running
    /// commands such as `watch` tick at the current time).
    pub fn refreshed(&self) -> Ctx {
        let mut ctx = self.clone();
        if !self.now_fixed {
            if let Ok(now) = crate::clock::now(None) {
                ctx.now = now;
            }
        }
        ctx
    }

    /// Opens the store of the repo around `dir`, for commands that only read.
    pub fn store(&self) -> Result<Store, crate::store::StoreError> {
        Store::open(&self.dir)
    }

    /// Opens the repo around `dir` for operations at this context's clock, printing their
    /// progress on stderr.
    pub fn coord(&self) -> Result<Coord, ops::Error> {
        Ok(Coord::open(&self.dir, self.options())?.with_sink(self.sink()))
    }

    /// Returns the options operations open the repo with: this context's clock and wait.
    pub fn options(&self) -> ops::Options {
        ops::Options {
            now: Some(self.now),
            wait: self.wait,
            ..ops::Options::default()
        }
    }

    /// Returns how a long-running command opens the repo for each call: at the clock given,
    /// else at the system clock's time of the call; printing as [`Ctx::sink`] does.
    pub fn opener(&self) -> ops::Opener {
        let opts = ops::Options {
            now: self.now_fixed.then_some(self.now),
            wait: self.wait,
            ..ops::Options::default()
        };
        ops::Opener::new(self.dir.clone(), opts, self.printer())
    }

    /// Returns the sink that prints an operation's events as status lines on stderr: nothing
    /// with `--quiet`, no line per commit with `--json`, details only with `--verbose`.
    pub fn sink(&self) -> ops::Sink {
        Box::new(self.printer())
    }

    fn printer(&self) -> impl Fn(&Event<'_>) + Send + Sync + 'static {
        let (quiet, json, verbose) = (self.quiet, self.json, self.verbose > 0);
        move |event| {
            if quiet {
                return;
            }
            match event {
                Event::Recovered(line) => err!("coord: {line}"),
                Event::Status(line) => err!("{line}"),
                Event::Detail(line) if verbose => err!("{line}"),
                Event::Detail(_) => {}
                Event::Applied(t, applied) => applied_line(t, applied, json),
            }
        }
    }
}

/// Prints what happened to one applied transition.
fn applied_line(t: &Transition, applied: &Applied, json: bool) {
    let summary = crate::redact::one_line(&t.summary);
    match applied {
        Applied::Committed if json => {}
        Applied::Committed => err!("coord: {summary}"),
        Applied::LeftAsFound(why) => {
            err!("coord: {summary}, but {why}; the next tick looks at it again")
        }
        Applied::Failed(why) => {
            err!("coord: {why}; the other tasks go on, 'coord status' lists it")
        }
        Applied::Skipped => err!(
            "coord: skipped '{}': the file changed meanwhile; the next tick retries",
            t.subject
        ),
        Applied::AfterFailure(why) => err!(
            "coord: skipped '{}': {why}; the next tick retries",
            t.subject
        ),
    }
}

impl Cli {
    /// Whether `--json` was given: output, and errors, as JSON.
    pub fn json(&self) -> bool {
        self.json
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let dir = match cli.dir {
        Some(d) => d,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let terminal = std::io::stdout().is_terminal();
    let mut ctx = Ctx {
        json: cli.json,
        quiet: cli.quiet,
        verbose: cli.verbose,
        restartable: cli.own_arguments,
        ..Ctx::new(
            dir,
            cli.now.or_else(now_from_env).as_deref(),
            cli.wait.map(wait::FlagDuration::get),
        )?
    };
    ctx.look = human::Look {
        colour: cli.color.colour(terminal),
        times: human::Times::at_terminal(terminal && !cli.utc, ctx.now),
    };
    let paged = matches!(
        cli.command,
        Command::List(_) | Command::Log(_) | Command::Show(_)
    );
    if paged && terminal && !cli.no_pager {
        crate::term::start_pager();
    }
    let ran = dispatch(&ctx, cli.command);
    crate::term::finish_pager();
    ran
}

/// Runs one command.
fn dispatch(ctx: &Ctx, command: Command) -> Result<(), CliError> {
    match command {
        Command::Claim(a) => report::claim(ctx, a)?,
        Command::Init(a) => init::run(ctx, a)?,
        Command::New(a) => new::run(ctx, a)?,
        Command::Edit(a) => edit::run(ctx, a)?,
        Command::Import(a) => import::import(ctx, a)?,
        Command::Export(a) => import::export(ctx, a)?,
        Command::Validate(a) => validate::run(ctx, a)?,
        Command::Tick(a) => tick::run(ctx, a)?,
        Command::Watch(a) => watch::run(ctx, a)?,
        Command::Status(a) => status::run(ctx, a)?,
        Command::Show(a) => show::run(ctx, a)?,
        Command::List(a) => list::run(ctx, a)?,
        Command::Log(a) => log::run(ctx, a)?,
        Command::Logs(a) => logs::run(ctx, a)?,
        Command::Verify(a) => verify::run(ctx, a)?,
        Command::Complete(a) => report::complete(ctx, a)?,
        Command::Fail(a) => report::fail(ctx, a)?,
        Command::Heartbeat(a) => report::heartbeat(ctx, a)?,
        Command::Approve(a) => gate::approve(ctx, a)?,
        Command::Reject(a) => gate::reject(ctx, a)?,
        Command::Cancel(a) => gate::cancel(ctx, a)?,
        Command::Retry(a) => gate::retry(ctx, a)?,
        Command::Reassign(a) => gate::reassign(ctx, a)?,
        Command::Keygen(a) => keygen::run(ctx, a)?,
        Command::Agents(a) => agents::run(ctx, a)?,
        Command::Schedules(a) => schedules::run(ctx, a)?,
        Command::Webhooks(a) => webhooks::run(ctx, a)?,
        Command::Archive(a) => archive::run(ctx, a)?,
        Command::Doctor(a) => doctor::run(ctx, a)?,
        Command::Sync(a) => sync::run(ctx, a)?,
        Command::Demo(a) => demo::run(ctx, a)?,
        Command::Run(a) => run::run(ctx, a)?,
        Command::Serve(a) => serve::run(ctx, a)?,
        Command::Prime(a) => prime::run(ctx, a)?,
        Command::Mcp(a) => mcp::run(ctx, a)?,
        Command::Completions(a) => generate::completions(a)?,
        Command::Man(a) => man::man(a)?,
    }
    Ok(())
}

/// Returns the clock `COORD_NOW` sets, when set and not empty (read here rather than by clap,
/// whose usage lines would show a flag set from the environment as given).
fn now_from_env() -> Option<String> {
    std::env::var("COORD_NOW").ok().filter(|v| !v.is_empty())
}

/// Signals that a command ran and found a problem (exit 1) after printing it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Found(pub String);

impl From<Found> for CliError {
    fn from(e: Found) -> CliError {
        CliError::new(e.into(), crate::error::Exit::Problem, "problem")
    }
}

/// Starts coord again with the same arguments and `vars` added to its environment, unless
/// one of them is set already (by this exec, or by the user, whose value stands) or the
/// command line is not the process's own (`ctx.restartable`): glibc reads its malloc tunables
/// only when a process starts, hence the exec (the process keeps its id). It runs the same
/// binary (`/proc/self/exe`, also when the file was replaced by an upgrade meanwhile) under
/// the same `argv[0]`. Returns only when it did not exec; the command then runs as it is.
/// The exec also sets [`RESTARTED`] to the process id, so a process that finds its own id
/// there never execs again, even when the loader dropped `vars` (glibc drops `MALLOC_*` from
/// a setuid program's environment).
#[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
pub(crate) fn exec_again_with(ctx: &Ctx, vars: &[(&str, &str)]) {
    #[cfg(target_os = "linux")]
    if ctx.restartable
        && vars.iter().all(|(k, _)| std::env::var_os(k).is_none())
        && !restarted_already(std::env::var_os(RESTARTED).as_deref(), std::process::id())
    {
        use std::os::unix::process::CommandExt;
        let mut args = std::env::args_os();
        let mut again = std::process::Command::new("/proc/self/exe");
        if let Some(name) = args.next() {
            again.arg0(name);
        }
        again.env(RESTARTED, std::process::id().to_string());
        let _failed = again.args(args).envs(vars.iter().copied()).exec();
    }
}

/// The variable [`exec_again_with`] sets to the id of the process it started again.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const RESTARTED: &str = "COORD_RESTARTED_PID";

/// Returns whether `marker` ([`RESTARTED`]'s value) says process `pid` is one
/// [`exec_again_with`] started again already (a child coord inherits another id).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn restarted_already(marker: Option<&std::ffi::OsStr>, pid: u32) -> bool {
    marker.is_some_and(|m| m.to_str() == Some(pid.to_string().as_str()))
}

/// Prints a JSON value on stdout.
pub fn print_json(v: &serde_json::Value) {
    out!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// Prints a command's `--json` answer (docs/json.md): `"version"` first, then the fields of
/// `answer` (an object).
pub fn print_answer<T: serde::Serialize>(answer: T) {
    let versioned = ops::Versioned::of(answer);
    print_json(&serde_json::to_value(versioned).unwrap_or_default());
}

/// Returns a transition as a `--json` answer lists it: the task, the states and the summary.
fn transition_json(t: &Transition) -> serde_json::Value {
    serde_json::to_value(ops::Moved::of(t)).unwrap_or_default()
}

pub use crate::term::{write_err, write_out};

#[cfg(test)]
mod tests {
    use super::restarted_already;
    use std::ffi::OsStr;

    /// The exec's marker stops a second exec of the same process (whose malloc variables the
    /// loader may have dropped), not a child coord's first one.
    #[test]
    fn only_the_process_started_again_counts_as_restarted() {
        assert!(restarted_already(Some(OsStr::new("4242")), 4242));
        assert!(!restarted_already(Some(OsStr::new("4242")), 4243));
        assert!(!restarted_already(Some(OsStr::new("x")), 4242));
        assert!(!restarted_already(None, 4242));
    }
}
