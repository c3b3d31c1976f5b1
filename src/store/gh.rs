//! The gates on GitHub (`pr_merged`, `run_succeeded`; docs/files.md), answered by the `gh`
//! CLI run in the repository: each gate asked at most once per `gate_interval` (by the
//! planning clock), each call cut off after [`GH_TIMEOUT`], and once a call times out no other
//! is made in the same pass. The last answer of each gate is kept in
//! `.git/coord/gh-gates.json`, and stands (with the failure, for `status`) while gh fails, is
//! absent or is not logged in. Does I/O (a child process, a private file).

use crate::model::gate::Gate;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `gh` call may take before it is killed.
pub const GH_TIMEOUT: Duration = Duration::from_secs(10);

/// The file of last answers, in coord's private folder.
const FILE: &str = "gh-gates.json";

/// What `gh` last said of one gate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Whether the gate was open, as of `said_at`; None before any answer.
    pub open: Option<bool>,
    /// What gh said, in words (`state OPEN`, `status completed, conclusion failure`).
    pub said: Option<String>,
    /// When gh said it.
    #[serde(default, with = "crate::model::time::recorded")]
    pub said_at: Option<Timestamp>,
    /// When coord last asked (answered or not).
    #[serde(default, with = "crate::model::time::recorded")]
    pub asked_at: Option<Timestamp>,
    /// Why the last call gave no answer.
    pub failed: Option<String>,
}

impl Answer {
    /// Returns the answer in words for `status`.
    pub fn words(&self) -> String {
        let said = match (&self.said, self.said_at) {
            (Some(s), Some(at)) => format!("gh said {s} at {}", crate::model::time::format(at)),
            _ => "no answer from gh yet".to_string(),
        };
        match &self.failed {
            Some(why) => format!("{said}; the last call failed: {why}"),
            None => said,
        }
    }
}

/// The answers to the GitHub gates of one operation.
#[derive(Debug)]
pub struct GhGates {
    /// The repository root, where gh runs.
    root: PathBuf,
    /// The file of last answers.
    file: PathBuf,
    /// How often a gate may be asked.
    interval: SignedDuration,
    /// The answers, read from the file on first use.
    known: RefCell<Option<BTreeMap<String, Answer>>>,
    /// Set once a call timed out: no other is made by this operation.
    gave_up: Cell<bool>,
}

impl GhGates {
    /// Returns the answers kept in `private_dir` for the repository at `root`.
    pub fn new(root: &Path, private_dir: &Path, interval: SignedDuration) -> GhGates {
        GhGates {
            root: root.to_path_buf(),
            file: private_dir.join(FILE),
            interval,
            known: RefCell::new(None),
            gave_up: Cell::new(false),
        }
    }

    /// Returns whether `gate` is open at `now`: the last answer while it is younger than the
    /// interval (or open: a merge or a green run stays so), else gh's answer now, else the
    /// last answer again.
    pub fn open(&self, gate: &Gate, now: Timestamp) -> Option<bool> {
        let key = serde_json::to_string(gate).ok()?;
        let mut known = self.known.borrow_mut();
        let known = known.get_or_insert_with(|| read(&self.file));
        let last = known.get(&key).cloned().unwrap_or_default();
        let fresh = last
            .asked_at
            .is_some_and(|at| now < at.saturating_add(self.interval).unwrap_or(at));
        if last.open == Some(true) || fresh || self.gave_up.get() {
            return last.open;
        }
        let mut next = last;
        next.asked_at = Some(now);
        match self.ask(gate) {
            Ok((open, said)) => {
                next.open = Some(open);
                next.said = Some(said);
                next.said_at = Some(now);
                next.failed = None;
            }
            Err(why) => next.failed = Some(why),
        }
        let open = next.open;
        known.insert(key, next);
        write(&self.file, known);
        open
    }

    /// Returns the last answer to `gate` in words.
    pub fn last_answer(&self, gate: &Gate) -> Option<String> {
        let key = serde_json::to_string(gate).ok()?;
        let mut known = self.known.borrow_mut();
        let known = known.get_or_insert_with(|| read(&self.file));
        Some(known.get(&key).cloned().unwrap_or_default().words())
    }

    /// Asks gh about `gate`: whether it is open and what gh said.
    fn ask(&self, gate: &Gate) -> Result<(bool, String), String> {
        let (args, read): (Vec<String>, Reader) = match gate {
            Gate::PrMerged(pr) => (pr_args(pr), read_pr),
            Gate::RunSucceeded(run) => run_args(run),
            _ => return Err("not a gate gh answers".into()),
        };
        let out = self.run(&args)?;
        let v: Value = serde_json::from_slice(&out)
            .map_err(|e| format!("gh printed what is not JSON ({e})"))?;
        read(&v).ok_or_else(|| format!("gh's answer lacks the fields asked for: {v}"))
    }

    /// Runs `gh args` in the repository within [`GH_TIMEOUT`]; returns its stdout.
    fn run(&self, args: &[String]) -> Result<Vec<u8>, String> {
        let mut child = Command::new("gh")
            .args(args)
            .current_dir(&self.root)
            .env("GH_PROMPT_DISABLED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => "gh is not installed (not on PATH)".to_string(),
                _ => format!("cannot run gh: {e}"),
            })?;
        let deadline = Instant::now() + GH_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    self.gave_up.set(true);
                    return Err(format!("gh took longer than {}s", GH_TIMEOUT.as_secs()));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("cannot wait for gh: {e}")),
            }
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("cannot read gh's output: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!(
                "gh {} ({}; is it logged in? 'gh auth status')",
                crate::redact::one_line(first),
                out.status
            ));
        }
        Ok(out.stdout)
    }
}

/// Reads gh's JSON answer: whether the gate is open and what gh said, in words.
type Reader = fn(&Value) -> Option<(bool, String)>;

/// Splits `owner/repo#N` into `--repo owner/repo` and `N`.
fn split_repo(s: &str) -> (Vec<String>, &str) {
    match s.split_once('#') {
        Some((repo, rest)) => (vec!["--repo".into(), repo.to_string()], rest),
        None => (Vec::new(), s),
    }
}

/// `gh pr view N [--repo owner/repo] --json state,mergedAt`.
fn pr_args(pr: &str) -> Vec<String> {
    let (repo, n) = split_repo(pr);
    let mut args: Vec<String> = vec!["pr".into(), "view".into(), n.to_string()];
    args.extend(repo);
    args.extend(["--json".into(), "state,mergedAt".into()]);
    args
}

/// `{state, mergedAt}`: open once the state is MERGED.
fn read_pr(v: &Value) -> Option<(bool, String)> {
    let state = v.get("state")?.as_str()?;
    Some((state == "MERGED", format!("state {state}")))
}

/// `gh run view ID [--repo owner/repo] --json status,conclusion`, or for `workflow/branch`
/// `gh run list --workflow W --branch B --limit 1 [--repo owner/repo] --json
/// databaseId,status,conclusion`.
fn run_args(run: &str) -> (Vec<String>, Reader) {
    let (repo, rest) = split_repo(run);
    let json = ["--json".to_string()];
    match rest.split_once('/') {
        None => {
            let mut args: Vec<String> = vec!["run".into(), "view".into(), rest.to_string()];
            args.extend(repo);
            args.extend(json);
            args.push("status,conclusion".into());
            (args, read_run)
        }
        Some((workflow, branch)) => {
            let mut args: Vec<String> = ["run", "list", "--workflow", workflow, "--branch"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend([branch.to_string(), "--limit".into(), "1".into()]);
            args.extend(repo);
            args.extend(json);
            args.push("databaseId,status,conclusion".into());
            (args, read_latest_run)
        }
    }
}

/// `{status, conclusion}`: open once completed with success.
fn read_run(v: &Value) -> Option<(bool, String)> {
    let status = v.get("status")?.as_str()?;
    let conclusion = v.get("conclusion").and_then(Value::as_str).unwrap_or("");
    let open = status == "completed" && conclusion == "success";
    let said = match conclusion {
        "" => format!("status {status}"),
        c => format!("status {status}, conclusion {c}"),
    };
    Some((open, said))
}

/// `[{databaseId, status, conclusion}]`: the latest run, read as [`read_run`].
fn read_latest_run(v: &Value) -> Option<(bool, String)> {
    match v.as_array()?.first() {
        None => Some((false, "no run yet".into())),
        Some(run) => {
            let (open, said) = read_run(run)?;
            let id = run
                .get("databaseId")
                .map_or(String::new(), |i| format!("run {i}: "));
            Some((open, format!("{id}{said}")))
        }
    }
}

fn read(path: &Path) -> BTreeMap<String, Answer> {
    crate::fsx::read_private(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Saves the answers; a file that cannot be written only means gh is asked again.
fn write(path: &Path, known: &BTreeMap<String, Answer>) {
    if let Ok(bytes) = serde_json::to_vec_pretty(known) {
        let _ = crate::fsx::write_private(path, &bytes, false);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gh_is_asked_with_the_documented_arguments() {
        assert_eq!(
            pr_args("acme/app#12").join(" "),
            "pr view 12 --repo acme/app --json state,mergedAt"
        );
        assert_eq!(pr_args("7").join(" "), "pr view 7 --json state,mergedAt");
        assert_eq!(
            run_args("99").0.join(" "),
            "run view 99 --json status,conclusion"
        );
        assert_eq!(
            run_args("acme/app#ci.yml/release/1").0.join(" "),
            "run list --workflow ci.yml --branch release/1 --limit 1 --repo acme/app --json databaseId,status,conclusion"
        );
    }

    #[test]
    fn answers_read_as_gh_prints_them() {
        let pr = serde_json::json!({"state": "MERGED", "mergedAt": "2026-11-28T03:00:00Z"});
        assert_eq!(read_pr(&pr), Some((true, "state MERGED".into())));
        let run = serde_json::json!({"status": "completed", "conclusion": "failure"});
        assert_eq!(
            read_run(&run),
            Some((false, "status completed, conclusion failure".into()))
        );
        let none = serde_json::json!([]);
        assert_eq!(read_latest_run(&none), Some((false, "no run yet".into())));
    }
}
