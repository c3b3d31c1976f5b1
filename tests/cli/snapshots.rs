//! Snapshots (insta) of every command's output, for people and with `--json`, so that a change
//! to what coord prints is deliberate: one scenario runs twice through the real binary, once
//! with `--json`, and each step's exit code, stdout and stderr are compared with
//! `tests/cli/snapshots/`. coord runs with a cleared environment, a HOME of its own and a fixed
//! clock; the temp folders, commit ids and generated ids are filtered out.
//!
//! After a deliberate change: `INSTA_UPDATE=always cargo test --test cli snapshots`, then read
//! the diff of `tests/cli/snapshots/` before committing it. CI runs with `INSTA_UPDATE=no`, so
//! a changed or missing snapshot fails the run.

use crate::harness::TestRepo;

/// One step of the scenario: a snapshot name, the arguments and the exit code expected.
type Step<'a> = (&'a str, &'a [&'a str], i32);

/// The steps whose exit code differs with `--json`: Markdown is not a JSON answer (usage).
const JSON_CODES: &[(&str, i32)] = &[("status_markdown", 2)];

/// The command `coord run` runs in the scenario: it fails the task `job-broken` (exit 1, a
/// line on stderr) and answers every other with a YAML output.
const RUN_SCRIPT: &str =
    "if grep -q job-broken; then echo broken >&2; exit 1; fi; echo 'summary: ran'";

/// The scenario: an empty folder made into a repo, agents, tasks through their states, the
/// board, history, housekeeping, a sync, a runner, a person's review, and a failure.
const STEPS: &[Step<'static>] = &[
    ("init", &["init"], 0),
    ("agents_add", &["agents", "add", "p", "--pull"], 0),
    (
        "agents_add_q",
        &[
            "agents",
            "add",
            "q",
            "--capability",
            "x",
            "--max-active",
            "2",
        ],
        0,
    ),
    ("agents", &["agents"], 0),
    (
        "new",
        &[
            "new",
            "Write the spec",
            "--id",
            "spec",
            "--agent",
            "p",
            "--next-agent",
            "q",
            "--priority",
            "high",
        ],
        0,
    ),
    ("new_generated", &["new", "Generated id"], 0),
    (
        "new_capability",
        &["new", "Review the plan", "--id", "rev", "--capability", "x"],
        0,
    ),
    (
        "new_waiting",
        &["new", "Nobody can", "--id", "extra", "--capability", "zzz"],
        0,
    ),
    ("validate", &["validate"], 0),
    ("tick_dry_run", &["tick", "--dry-run"], 0),
    ("tick", &["tick"], 0),
    ("status", &["status"], 0),
    ("list", &["list"], 0),
    (
        "list_filtered",
        &["list", "--state", "assigned", "--agent", "q"],
        0,
    ),
    ("claim", &["claim", "--agent", "p"], 0),
    ("claim_nothing", &["claim", "--agent", "p"], 4),
    (
        "heartbeat",
        &["heartbeat", "spec", "--agent", "p", "--attempt", "1"],
        0,
    ),
    (
        "complete",
        &["complete", "spec", "--agent", "p", "--attempt", "1"],
        0,
    ),
    (
        "fail",
        &[
            "fail",
            "rev",
            "--error",
            "boom",
            "--fatal",
            "--agent",
            "q",
            "--attempt",
            "1",
        ],
        0,
    ),
    ("tick_results", &["tick"], 0),
    ("status_after", &["status"], 0),
    ("status_agent", &["status", "--agent", "q"], 0),
    ("status_markdown", &["status", "--markdown"], 0),
    ("show", &["show", "spec"], 0),
    ("log", &["log"], 0),
    ("log_task", &["log", "spec"], 0),
    ("cancel", &["cancel", "extra", "--reason", "not needed"], 0),
    ("retry", &["retry", "extra"], 0),
    (
        "archive_dry_run",
        &["archive", "--older-than", "0s", "--dry-run"],
        0,
    ),
    ("archive", &["archive", "--older-than", "0s"], 0),
    ("doctor", &["doctor"], 0),
    ("keygen", &["keygen", "p"], 0),
    ("prime", &["prime", "--agent", "p"], 0),
    ("sync", &["sync"], 0),
    (
        "new_for_run",
        &["new", "Run me", "--id", "job", "--agent", "p"],
        0,
    ),
    (
        "new_for_run_failing",
        &["new", "Run me too", "--id", "job-broken", "--agent", "p"],
        0,
    ),
    (
        "run",
        &["run", "p", "--once", "--", "sh", "-c", RUN_SCRIPT],
        0,
    ),
    (
        "agents_add_reviewed",
        &["agents", "add", "r", "--max-active", "5"],
        0,
    ),
    (
        "new_ask_first",
        &[
            "new",
            "Ask me first",
            "--id",
            "ask",
            "--agent",
            "r",
            "--authority",
            "ask_me_first",
        ],
        0,
    ),
    (
        "new_ask_again",
        &[
            "new",
            "Ask me again",
            "--id",
            "ask2",
            "--agent",
            "r",
            "--authority",
            "ask_me_first",
        ],
        0,
    ),
    ("tick_to_review", &["tick"], 0),
    ("approve", &["approve", "ask"], 0),
    (
        "reject",
        &["reject", "ask2", "--reason", "redo the summary"],
        0,
    ),
    ("show_missing", &["show", "nope"], 1),
];

/// Runs the scenario (with `--json` when `json`) and checks each step against its snapshot.
fn scenario(json: bool) {
    let r = TestRepo::empty();
    for (name, args, code) in STEPS {
        if *name == "sync" {
            r.add_origin();
        }
        let code = match JSON_CODES.iter().find(|(n, _)| n == name) {
            Some((_, json_code)) if json => *json_code,
            _ => *code,
        };
        check(&r, name, json, args, code);
    }
}

/// Runs `coord [--json] <args>` in `r`, asserts its exit code and compares what it printed with
/// snapshot `name` (`name_json` with `--json`). Filtered out: the repo and HOME folders, commit
/// ids, generated ids, the build's commit (`--version`, the man page) and how long things took.
fn check(r: &TestRepo, name: &str, json: bool, args: &[&str], code: i32) {
    let suffix = if json { "_json" } else { "" };
    let full: Vec<&str> = json
        .then_some("--json")
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let out = r.run(&full);
    let transcript = format!(
        "$ coord {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
        full.join(" "),
        out.status
            .code()
            .map_or("signal".to_string(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let text = transcript
        .replace(&r.path().display().to_string(), "[REPO]")
        .replace(&r.home().display().to_string(), "[HOME]");
    assert_eq!(out.status.code(), Some(code), "{text}");
    insta::with_settings!({
        filters => vec![
            (r"\b[0-9a-f]{40}\b", "[COMMIT]"),
            (r"generated-id-[a-z2-9]{6}", "generated-id-[RANDOM]"),
            (r"\(commit [0-9a-f]{12}\)", "(commit [BUILD])"),
            (r"\(\d+\.\ds\)", "([SECONDS]s)"),
            (r#""seconds":[0-9.]+"#, r#""seconds":[SECONDS]"#),
        ],
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(format!("{name}{suffix}"), text);
    });
}

#[test]
fn every_command_prints_what_its_snapshot_shows() {
    scenario(false);
}

#[test]
fn every_command_answers_json_as_its_snapshot_shows() {
    scenario(true);
}

/// The shells `coord completions` writes for.
const SHELLS: &[&str] = &["bash", "zsh", "fish", "powershell", "elvish"];

#[test]
fn demo_runs_the_same_at_a_fixed_clock_as_its_snapshot_shows() {
    let r = TestRepo::empty();
    for json in [false, true] {
        let dir = r.home().join(if json { "demo-json" } else { "demo" });
        let dir = dir.to_str().expect("utf8");
        check(&r, "demo", json, &["demo", dir], 0);
    }
}

#[test]
fn completions_man_and_help_print_what_their_snapshots_show_with_or_without_json() {
    let r = TestRepo::empty();
    let mut commands: Vec<(String, Vec<&str>)> = SHELLS
        .iter()
        .map(|sh| (format!("completions_{sh}"), vec!["completions", sh]))
        .collect();
    commands.push(("man".to_string(), vec!["man"]));
    commands.push(("man_list".to_string(), vec!["man", "list"]));
    commands.push(("help".to_string(), vec!["--help"]));
    commands.push(("help_list".to_string(), vec!["list", "--help"]));
    for (name, args) in &commands {
        check(&r, name, false, args, 0);
        let mut with_json = vec!["--json"];
        with_json.extend(args.iter().copied());
        assert_eq!(
            r.run(&with_json).stdout,
            r.run(args).stdout,
            "coord --json {args:?} prints what it prints without --json"
        );
    }
}
