//! The user docs, run: every fenced block marked ```` ```sh test ```` in README.md's tour, the
//! guide's tutorial and each cookbook recipe runs as it is written, in a fresh folder, with
//! the built `coord` on PATH as the installed one and stand-ins for the LLM CLIs the recipes
//! call (`claude`, `codex`, `gemini`: scripts with the real CLIs' interface, a prompt as the
//! last argument, that print a YAML answer).

use crate::harness::{git_env, TestRepo};
use std::path::Path;

/// The blocks marked for testing in a doc, per `## ` section: (heading, script).
fn sections(doc: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc))
        .expect("read the doc");
    let mut out: Vec<(String, String)> = Vec::new();
    let mut heading = String::new();
    let mut in_block = false;
    for line in text.lines() {
        if in_block {
            if line == "```" {
                in_block = false;
            } else {
                let script = &mut out.last_mut().expect("a section").1;
                script.push_str(line);
                script.push('\n');
            }
        } else if let Some(h) = line.strip_prefix("## ") {
            heading = h.to_string();
        } else if line == "```sh test" {
            in_block = true;
            if out.last().is_none_or(|(h, _)| *h != heading) {
                out.push((heading.clone(), String::new()));
            }
        }
    }
    assert!(!in_block, "{doc}: a block is not closed");
    out
}

/// The stand-in for an LLM CLI: the prompt is its last argument; it answers in YAML. Asked
/// to commit a change (as a coding agent is), it writes `changes/<task id>.md` and commits it.
const LLM_STAND_IN: &str = r#"#!/bin/sh
# A stand-in for an LLM CLI (claude -p, codex exec, gemini -p): the prompt is the last
# argument; the answer is YAML on stdout. Asked to commit a change, it writes
# changes/<task id>.md and commits it.
for prompt in "$@"; do :; done
[ -n "$prompt" ] || { echo "no prompt" >&2; exit 2; }
title=$(printf '%s' "$prompt" | sed -n 's/.*"title": *"\([^"]*\)".*/\1/p' | head -n 1)
files="[]"
case "$prompt" in
*"commit your change"*)
  mkdir -p changes
  printf '%s\n' "$title" > "changes/$COORD_TASK_ID.md"
  git add changes && git commit -q -m "$title"
  files="[changes/$COORD_TASK_ID.md]" ;;
esac
printf 'summary: %s did %s in %s\nfiles: %s\n' "$(basename "$0")" "$title" "$(pwd)" "$files"
"#;

/// A folder with `coord` (the binary under test) and the LLM stand-ins.
fn tools() -> TestRepo {
    let dir = TestRepo::empty();
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("coord"), dir.abs("coord"))
        .expect("symlink coord");
    for cli in ["claude", "codex", "gemini"] {
        let path = dir.abs(cli);
        std::fs::write(&path, LLM_STAND_IN).expect("write stand-in");
        let mut perms = std::fs::metadata(&path).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).expect("chmod");
    }
    dir
}

/// Runs a doc's script in a fresh folder (bash, stopping at the first failing command) and
/// returns what it printed.
fn run(name: &str, script: &str) -> String {
    let tools = tools();
    let dir = TestRepo::empty_in_memory();
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .args([
            "--noprofile",
            "--norc",
            "-e",
            "-o",
            "pipefail",
            "-x",
            "-c",
            script,
        ])
        .current_dir(dir.path())
        .env_clear()
        .envs(git_env())
        .env("PATH", path)
        .env("HOME", dir.home())
        .output()
        .expect("run bash");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed:\n{said}");
    said
}

#[test]
fn the_readme_tour_runs_on_a_fresh_repository() {
    let sections = sections("README.md");
    let tour: String = sections.iter().map(|(_, s)| s.as_str()).collect();
    let said = run("README tour", &tour);
    assert!(said.contains("login.reviewer attempt 1: done"), "{said}");
    assert!(said.contains("login  assigned -> done"), "{said}");
    assert!(
        said.contains("docs \"Document the login fix\": backing off"),
        "{said}"
    );
}

#[test]
fn the_guide_tutorial_runs_on_a_fresh_repository() {
    let sections = sections("docs/guide.md");
    assert_eq!(sections.len(), 1, "one tutorial");
    let said = run("guide tutorial", &sections[0].1);
    assert!(
        said.contains("march.editor attempt 1: failed (fatal)"),
        "{said}"
    );
    assert!(said.contains("tasks: done 2, review 1"), "{said}");
    assert!(
        said.contains("send  review -> blocked  approve send"),
        "{said}"
    );
    assert!(
        said.contains("send  ready -> assigned  assign send to writer"),
        "{said}"
    );
}

/// What each cookbook recipe must have printed, by its heading.
const RECIPE_OUTCOMES: &[(&str, &[&str])] = &[
    (
        "Three coding agents and a reviewer on one repository",
        &[
            "tasks: done 6",
            "reviewer             0/3  push",
            "  coord/add-a-health-endpoint-",
            "  coord/log-requests-as-json-",
        ],
    ),
    (
        "Agents on two laptops plus CI",
        &[
            "changelog.checker attempt 1: done",
            "changelog          done",
            "| done | 2 |",
        ],
    ),
    (
        "A human review queue",
        &[
            "post \"Post about the release\": its result waits for approval",
            "post     done",
            "cleanup  failed",
        ],
    ),
    (
        "`coord watch` as a systemd service",
        &["keys  assigned  alice"],
    ),
    (
        "Coming from beads, Backlog.md, Taskmaster or GitHub issues",
        &[
            "2 from github: 2 new, 0 unchanged",
            "2 from github: 0 new, 2 unchanged",
            "\"id\":\"gh-14\",\"state\":\"ready\"",
        ],
    ),
];

#[test]
fn every_cookbook_recipe_runs_on_a_fresh_repository() {
    let recipes = sections("docs/cookbook.md");
    let names: Vec<&str> = recipes.iter().map(|(h, _)| h.as_str()).collect();
    let want: Vec<&str> = RECIPE_OUTCOMES.iter().map(|(h, _)| *h).collect();
    assert_eq!(names, want);
    let outputs: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = recipes
            .iter()
            .map(|(name, script)| s.spawn(move || run(name, script)))
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("the recipe ran"))
            .collect()
    });
    for ((name, musts), said) in RECIPE_OUTCOMES.iter().zip(&outputs) {
        for must in *musts {
            assert!(said.contains(must), "{name}: no {must:?} in\n{said}");
        }
    }
    let unit = &recipes[3].1;
    assert!(unit.contains("coord-watch.service"), "{unit}");
}
