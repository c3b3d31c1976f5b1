//! `coord verify [--ref REV]`: prints [`crate::ops::Coord::verify`] as one summary line when
//! the history is clean, else one line per finding; exit 5 when there are findings.

use super::Ctx;
use crate::error::{CliError, Exit};
use crate::ops::{Verified, Violation, ViolationKind};
use serde_json::json;

/// Arguments of `coord verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The branch or commit whose history to check (e.g. origin/main after `git fetch`)
    #[arg(long = "ref", value_name = "REV", default_value = "HEAD")]
    rev: String,
}

/// Runs `coord verify`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let verified = ctx.coord()?.verify(Some(&args.rev))?;
    if ctx.json {
        super::print_answer(json!({ "verified": verified }));
    } else {
        for v in &verified.findings {
            out!("{}", line(v));
        }
        out!("{}", summary(&verified));
    }
    match verified.findings.len() {
        0 => Ok(()),
        n => Err(CliError::answered(
            Exit::Violations,
            format!("{n} finding(s) in the history of {}", args.rev),
        )),
    }
}

/// Returns the closing line: what was walked and whether it is clean.
fn summary(v: &Verified) -> String {
    let verdict = match v.findings.len() {
        0 => "clean".to_string(),
        n => format!("{n} finding(s)"),
    };
    format!(
        "checked {} commits of {}, {} attempts, {} results, {} tasks: {verdict}",
        v.commits, v.rev, v.attempts, v.results, v.tasks
    )
}

/// Returns one finding as a line naming the rule, the task and what is involved.
fn line(v: &Violation) -> String {
    let attempt = v
        .attempt
        .map_or_else(String::new, |a| format!(" attempt {a}"));
    let who = v.agents.join(", ");
    let commits: Vec<&str> = v.commits.iter().map(|c| &c[..c.len().min(12)]).collect();
    let commits = commits.join(", ");
    let paths = v.paths.join(", ");
    let what = match v.kind {
        ViolationKind::GrantedToTwoAgents => format!("granted to two agents ({who}) in {commits}"),
        ViolationKind::GrantedTwice => format!("granted to {who} twice, in {commits}"),
        ViolationKind::WrongHolder => {
            format!("result accepted in {commits} names {who}: not the attempt that held it")
        }
        ViolationKind::ResultLost => {
            format!("result of {who} reported in {commits} is kept nowhere at the tip ({paths})")
        }
        ViolationKind::TwoPlaces => format!("in two places at the tip: {paths}"),
    };
    format!("{}: {}{attempt}: {what}", kind_name(v.kind), v.task)
}

/// Returns the finding kind as `--json` names it.
fn kind_name(k: ViolationKind) -> &'static str {
    match k {
        ViolationKind::GrantedToTwoAgents => "granted_to_two_agents",
        ViolationKind::GrantedTwice => "granted_twice",
        ViolationKind::WrongHolder => "wrong_holder",
        ViolationKind::ResultLost => "result_lost",
        ViolationKind::TwoPlaces => "two_places",
    }
}
