//! The completion scripts of `coord completions` complete task ids and agent names from the
//! repository: real bash sources the generated script and calls its completion function with
//! `COMP_WORDS` set, as bash does at a Tab; the candidates come from `coord __complete`.

use crate::harness::{git_env, TestRepo};
use std::path::Path;

/// Sources `script` in bash (in `dir`, the binary on `PATH`), sets `COMP_WORDS` to `words`
/// (the last being completed) and returns the candidates, one a line.
fn bash_candidates(dir: &Path, script: &Path, words: &[&str]) -> Vec<String> {
    let bin = assert_cmd::cargo::cargo_bin("coord");
    let bin_dir = bin.parent().expect("the binary's folder");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let body = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_coord_ids_and_agents coord '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len().saturating_sub(2)],
    );
    let out = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-c", &body])
        .current_dir(dir)
        .env("PATH", path)
        .envs(git_env())
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn bash_completes_task_ids_and_agent_names_from_the_repository() {
    let r = TestRepo::with_agents(&["alice", "albert", "bob"]);
    r.task("fix-login", "title: Fix login\n");
    r.task("fix-logout", "title: Fix logout\n");
    r.task("docs", "title: Docs\n");
    r.ok(&["tick"]);
    let script = r.home().join("coord.bash");
    std::fs::write(&script, r.ok(&["completions", "bash"])).expect("write the script");
    let at = |words: &[&str]| bash_candidates(r.path(), &script, words);
    assert_eq!(at(&["coord", "show", "fix"]), ["fix-login", "fix-logout"]);
    assert_eq!(
        at(&["coord", "approve", ""]),
        ["docs", "fix-login", "fix-logout"]
    );
    assert_eq!(
        at(&["coord", "reassign", "docs", "al"]),
        ["albert", "alice"]
    );
    assert_eq!(at(&["coord", "list", "--agent", "b"]), ["bob"]);
    assert_eq!(at(&["coord", "list", "--agent", "=", "b"]), ["bob"]);
    assert_eq!(at(&["coord", "agents", "disable", "bo"]), ["bob"]);
    assert_eq!(at(&["coord", "new", "x", "--depends-on", "d"]), ["docs"]);
    assert_eq!(
        at(&["coord", "sh"]),
        ["show"],
        "commands complete as before"
    );
    assert!(
        at(&["coord", "agents", "add", "b"]).is_empty(),
        "a new name"
    );
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let root = r.path().to_str().expect("utf8");
    assert_eq!(
        bash_candidates(
            elsewhere.path(),
            &script,
            &["coord", "-C", root, "edit", "d"]
        ),
        ["docs"]
    );
    assert!(bash_candidates(elsewhere.path(), &script, &["coord", "show", ""]).is_empty());
}

#[test]
fn every_script_asks_coord_for_ids_and_agents() {
    let r = TestRepo::empty();
    for shell in ["bash", "zsh", "fish"] {
        let script = r.ok(&["completions", shell]);
        assert!(script.contains("__complete --"), "{shell}: {script}");
    }
    let zsh = r.ok(&["completions", "zsh"]);
    assert!(zsh.contains("\n_coord_static() {") && zsh.contains("\n_coord() {"));
    let asked = |words: &[&str]| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("coord"))
            .args(["__complete", "--"])
            .args(words)
            .current_dir(r.path())
            .output()
            .expect("run coord __complete")
    };
    let none = asked(&["coord", "new", ""]);
    assert_eq!(none.status.code(), Some(1), "not an id's place: {none:?}");
    assert!(none.stdout.is_empty() && none.stderr.is_empty(), "{none:?}");
    let outside = asked(&["coord", "show", ""]);
    assert_eq!(outside.status.code(), Some(0), "an id's place: {outside:?}");
    assert!(
        outside.stdout.is_empty() && outside.stderr.is_empty(),
        "{outside:?}"
    );
}
