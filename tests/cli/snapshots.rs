//! Snapshots (insta) of every command's output, for people and with `--json`, so that a change
//! to what coord prints is deliberate: one scenario runs twice through the real binary, once
//! with `--json`, and each step's exit code, stdout and stderr are compared with
//! `tests/cli/snapshots/`. coord runs with a cleared environment, a HOME of its own and a fixed
//! clock; the temp folders, commit ids and generated ids are filtered out.
//!
//! After a deliberate change: `INSTA_UPDATE=always cargo test --test cli snapshots`, then read
//! the diff of `tests/cli/snapshots/` before committing it. CI runs with `INSTA_UPDATE=no`, so
//! a changed or missing snapshot fails the run.

use crate::harness::{git_in, TestRepo};

/// One step of the scenario: a snapshot name, the arguments and the exit code expected.
type Step<'a> = (&'a str, &'a [&'a str], i32);

/// The scenario: an empty folder made into a repo, agents, tasks through their states, the
/// board, history, housekeeping and a sync, and a failure.
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
    ("show_missing", &["show", "nope"], 1),
];

/// Runs the scenario (with `--json` when `json`) and checks each step against its snapshot.
fn scenario(json: bool) {
    let r = TestRepo::empty();
    let suffix = if json { "_json" } else { "" };
    for (name, args, code) in STEPS {
        if *name == "sync" {
            add_origin(&r);
        }
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
        assert_eq!(out.status.code(), Some(*code), "{text}");
        insta::with_settings!({
            filters => vec![
                (r"\b[0-9a-f]{40}\b", "[COMMIT]"),
                (r"generated-id-[a-z2-9]{6}", "generated-id-[RANDOM]"),
            ],
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(format!("{name}{suffix}"), text);
        });
    }
}

/// Gives the repo an empty bare remote `origin` (in its HOME) for `coord sync`.
fn add_origin(r: &TestRepo) {
    git_in(r.home(), &["init", "-q", "--bare", "origin.git"]);
    let origin = r.home().join("origin.git");
    r.git(&["remote", "add", "origin", origin.to_str().expect("utf8")]);
}

#[test]
fn every_command_prints_what_its_snapshot_shows() {
    scenario(false);
}

#[test]
fn every_command_answers_json_as_its_snapshot_shows() {
    scenario(true);
}
