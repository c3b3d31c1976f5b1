//! `coord man`: one roff page per command (`coord(1)`, `coord-list(1)`, `coord-agents-add(1)`)
//! from the command line definition: clap_mangen's name, synopsis, description, options and
//! subcommands, then the sections it does not write (exit status, environment, files,
//! examples, see also). `--output-dir` writes every page, so every page a page names exists.

use super::Cli;
use crate::error::{CliError, UsageError};
use anyhow::{Context, Result};
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// Arguments of `coord man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// The command whose page to print (e.g. `list`, `agents add`); none prints coord(1)
    #[arg(value_name = "COMMAND")]
    command: Vec<String>,
    /// Write every page (coord.1, coord-<command>.1, ...) into DIR instead of printing one
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    output_dir: Option<PathBuf>,
}

/// Prints the page of the command named, or writes every page into `--output-dir`.
pub fn man(args: ManArgs) -> Result<(), CliError> {
    let root = root();
    if let Some(dir) = args.output_dir {
        return Ok(write_all(&root, &dir)?);
    }
    let mut cmd = &root;
    for name in &args.command {
        cmd = cmd
            .get_subcommands()
            .find(|c| c.get_name() == name && !c.is_hide_set())
            .ok_or_else(|| unknown(cmd, name))?;
    }
    Ok(super::generate::write_stdout(&page(cmd)?)?)
}

/// Returns coord's command line, built (global options copied into every subcommand, which
/// are named `coord-list`, ...) and without clap's `help` subcommand, which has no page.
fn root() -> clap::Command {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    root
}

fn unknown(parent: &clap::Command, name: &str) -> UsageError {
    let names: Vec<&str> = visible(parent).map(|c| c.get_name()).collect();
    UsageError(format!(
        "no page for '{name}': name one of {} (or none, for coord(1))",
        names.join(", ")
    ))
}

/// Returns the subcommands that have a page.
fn visible(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
    cmd.get_subcommands().filter(|c| !c.is_hide_set())
}

/// Writes the page of `cmd` and of every subcommand under it into `dir`, creating it.
fn write_all(root: &clap::Command, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut stack = vec![root];
    while let Some(cmd) = stack.pop() {
        let path = dir.join(format!("{}.1", title(cmd)));
        std::fs::write(&path, page(cmd)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        stack.extend(visible(cmd));
    }
    Ok(())
}

/// Returns a command's page name: `coord`, `coord-list`, `coord-agents-add`.
fn title(cmd: &clap::Command) -> &str {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name())
}

/// Returns the roff page of `cmd`.
fn page(cmd: &clap::Command) -> Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone()).source(format!("coord {}", super::VERSION));
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut buf)?;
    }
    if visible(cmd).next().is_some() {
        man.render_subcommands_section(&mut buf)?;
    }
    buf.extend(sections(cmd).into_bytes());
    Ok(once_preamble(&buf))
}

/// Returns the page with the preamble clap_mangen writes before each section only once.
fn once_preamble(page: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(page);
    let preamble = [".ie \\n(.g .ds Aq \\(aq", ".el .ds Aq '"];
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i < preamble.len() || !preamble.contains(&line.trim_end()) {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

/// Returns the sections clap_mangen does not write, in roff.
fn sections(cmd: &clap::Command) -> String {
    let path = title(cmd).strip_prefix("coord").unwrap_or_default();
    let path = path.trim_start_matches('-').replace('-', " ");
    let mut out = heading("EXIT STATUS");
    for (code, meaning) in exit_codes(&path) {
        out.push_str(&item(&code.to_string(), meaning));
    }
    out.push_str(&heading("ENVIRONMENT"));
    for (name, meaning) in ENVIRONMENT {
        out.push_str(&item(name, meaning));
    }
    out.push_str(&heading("FILES"));
    for (name, meaning) in FILES {
        out.push_str(&item(name, meaning));
    }
    out.push_str(&heading("EXAMPLES"));
    for (what, line) in examples(&path) {
        out.push_str(&item(&line, &what));
    }
    out.push_str(&heading("SEE ALSO"));
    out.push_str(&text(&see_also(cmd).join(", ")));
    out.push('\n');
    out
}

/// Returns the exit codes command `path` (`""` for coord itself) can end with.
fn exit_codes(path: &str) -> Vec<(u8, &'static str)> {
    let mut codes = vec![
        (0, "success"),
        (
            1,
            "the command ran and found a problem (an error line names it)",
        ),
        (2, "the command line was wrong"),
        (3, "another coordinator holds the lock (see --wait)"),
    ];
    if path.is_empty() || path == "claim" {
        codes.push((4, "coord claim: no task to claim"));
    }
    if path.is_empty() || path == "verify" {
        codes.push((5, "coord verify: the history breaks a rule"));
    }
    codes
}

/// The environment variables every command reads.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "COORD_NOW",
        "the time to use as now (RFC 3339), as --now does",
    ),
    (
        "COORD_AGENT, COORD_ATTEMPT, COORD_EPOCH",
        "the agent, attempt and hub epoch a report is for, as --agent, --attempt and --epoch do",
    ),
    ("COORD_KEY_<AGENT>", "an agent's signing key, for --sign"),
    (
        "COORD_SERVE_TOKEN",
        "the token coord serve asks of every request",
    ),
    (
        "NO_COLOR",
        "when set and not empty, no colour (as --color never)",
    ),
    (
        "COORD_PAGER, PAGER",
        "the pager of list, log and show at a terminal (default less -FRX)",
    ),
    (
        "VISUAL, EDITOR",
        "the editor of coord new --edit (default vi)",
    ),
    ("TZ", "the time zone of times shown at a terminal"),
    (
        "GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL",
        "who commits, as git reads them",
    ),
];

/// The files coord reads and writes in a repository.
const FILES: &[(&str, &str)] = &[
    ("coord.yaml", "the settings of the repository"),
    ("work/inbox/, work/ready/, work/agents/<agent>/, work/review/, work/done/, work/failed/, work/cancelled/", "task files, one YAML file per task, in the folder of its state"),
    ("work/agents/<agent>.yaml", "an agent's profile"),
    ("work/schema/", "the JSON Schema task files are checked against"),
    ("work/archive/<YYYY-MM>/", "archived tasks"),
];

/// Returns examples of command `path`: what each does and the command line.
fn examples(path: &str) -> Vec<(String, String)> {
    let own: &[(&str, &str)] = match path {
        "" => &[
            (
                "Start a repository with two agents",
                "coord init --agents alice,bob",
            ),
            (
                "Add a task and run a pass",
                "coord new \"Write the spec\" && coord tick",
            ),
        ],
        "init" => &[(
            "Start without the GitHub workflow",
            "coord init --no-workflow",
        )],
        "new" => &[
            (
                "A task for one agent",
                "coord new \"Fix the login\" --agent alice --priority high",
            ),
            (
                "A task waiting for another",
                "coord new \"Review it\" --depends-on fix-the-login",
            ),
        ],
        "edit" => &[(
            "Change a task in another editor",
            "EDITOR=nano coord edit fix-the-login",
        )],
        "validate" => &[("Check every task file", "coord validate")],
        "tick" => &[("Show the plan without writing", "coord tick --dry-run")],
        "watch" => &[(
            "Tick on every change and each minute",
            "coord watch --interval 60s",
        )],
        "status" => &[("One agent's board", "coord status --agent alice")],
        "show" => &[("One task as JSON", "coord --json show fix-the-login")],
        "list" => &[(
            "Assigned tasks of one agent",
            "coord list --state assigned --agent alice",
        )],
        "log" => &[(
            "The last ten transitions of a task",
            "coord log fix-the-login --limit 10",
        )],
        "verify" => &[(
            "Check the remote's history",
            "coord verify --ref origin/main",
        )],
        "claim" => &[("Take the best ready task", "coord claim --agent alice")],
        "complete" => &[(
            "Report success with an output",
            "coord complete fix-the-login --output result.yaml",
        )],
        "fail" => &[(
            "Report a failure not worth retrying",
            "coord fail fix-the-login --error \"no access\" --fatal",
        )],
        "heartbeat" => &[("Extend the lease", "coord heartbeat fix-the-login")],
        "approve" => &[("Accept a task in review", "coord approve fix-the-login")],
        "reject" => &[(
            "Send a task in review back",
            "coord reject fix-the-login --reason \"add a test\"",
        )],
        "cancel" => &[(
            "Cancel a task",
            "coord cancel fix-the-login --reason \"not needed\"",
        )],
        "retry" => &[("Run a failed task again", "coord retry fix-the-login")],
        "keygen" => &[("Create alice's signing key", "coord keygen alice")],
        "agents" => &[("List agents with their load", "coord agents")],
        "agents add" => &[(
            "An agent that only pulls work",
            "coord agents add ci --pull --capability rust",
        )],
        "archive" => &[(
            "Archive what finished a month ago",
            "coord archive --older-than 30d",
        )],
        "doctor" => &[("Repair what can be repaired", "coord doctor --fix")],
        "sync" => &[("Fetch, tick and push", "coord sync --remote origin")],
        "demo" => &[("Build and run the sample", "coord demo /tmp/coord-demo")],
        "run" => &[(
            "Run a script per task of alice",
            "coord run alice --once -- ./agent.sh",
        )],
        "serve" => &[("The API and board, ticking too", "coord serve --tick")],
        "prime" => &[(
            "Write instructions into AGENTS.md",
            "coord prime --agent alice --install",
        )],
        "mcp" => &[("Serve the repo to an MCP client", "coord mcp")],
        "completions" => &[(
            "Completions for bash",
            "coord completions bash > ~/.local/share/bash-completion/completions/coord",
        )],
        "man" => &[(
            "Install every page",
            "coord man --output-dir ~/.local/share/man/man1",
        )],
        _ => &[],
    };
    let mut list: Vec<(String, String)> = own
        .iter()
        .map(|(w, l)| (w.to_string(), l.to_string()))
        .collect();
    let help = format!("coord {path} --help").replace("  ", " ");
    list.push(("This page's options, as help text".to_string(), help));
    list
}

/// Returns the pages `cmd`'s page refers to: coord(1) and its parent's, and git(1).
fn see_also(cmd: &clap::Command) -> Vec<String> {
    let name = title(cmd);
    let mut pages = Vec::new();
    if name != "coord" {
        pages.push("coord(1)".to_string());
    }
    if let Some((parent, _)) = name.rsplit_once('-').filter(|(p, _)| *p != "coord") {
        pages.push(format!("{parent}(1)"));
    }
    pages.push("git(1)".to_string());
    pages
}

fn heading(name: &str) -> String {
    format!(".SH \"{name}\"\n")
}

fn item(tag: &str, body: &str) -> String {
    format!(
        ".TP\n{}{}",
        text(&format!("\\fB{}\\fR", escape(tag))),
        text(&escape(body))
    )
}

/// Returns one line of roff text (a line starting with `.` or `'` is guarded).
fn text(line: &str) -> String {
    match line.chars().next() {
        Some('.' | '\'') => format!("\\&{line}\n"),
        _ => format!("{line}\n"),
    }
}

/// Escapes what roff reads as markup: backslashes and hyphens (which roff may break or render
/// as a dash).
fn escape(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}
