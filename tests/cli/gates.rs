//! Gates (`wait_for:`): a task waits in `blocked/` for a time, a ref, a merge or a path on a
//! branch of the real repository, `status` names what it waits for, and the tick moves it
//! once every gate is open.

use crate::harness::TestRepo;

/// Commits `rel` on a new branch `branch` made from the current one, and comes back.
fn commit_on_branch(r: &TestRepo, branch: &str, rel: &str) {
    r.git(&["checkout", "-q", "-b", branch]);
    r.commit_file(rel, "text\n", &format!("work on {branch}"));
    r.git(&["checkout", "-q", "main"]);
}

#[test]
fn a_task_gated_on_a_branch_merge_moves_once_the_branch_is_merged() {
    let mut r = TestRepo::with_agents(&["bot"]);
    commit_on_branch(&r, "feature", "src/feature.txt");
    r.task(
        "deploy",
        "title: Deploy the feature\nagent: bot\nwait_for:\n  - merged: {ref: feature, into: main}\n",
    );
    r.at("2026-11-28T03:00:00Z").ok(&["tick"]);
    assert_eq!(r.find("deploy"), ["work/blocked/deploy.yaml"]);
    let status = r.json(&["status"]);
    assert_eq!(status["blocked"][0]["id"], "deploy");
    assert_eq!(
        status["blocked"][0]["gates"],
        serde_json::json!(["feature merged into main"])
    );
    let text = r.ok(&["status"]);
    assert!(text.contains("feature merged into main"), "{text}");
    r.at("2026-11-28T03:02:00Z").ok(&["tick"]);
    assert_eq!(r.find("deploy"), ["work/blocked/deploy.yaml"]);
    r.git(&["merge", "-q", "--no-ff", "feature", "-m", "merge feature"]);
    r.at("2026-11-28T03:04:00Z").ok(&["tick"]);
    assert_eq!(r.find("deploy"), ["work/assigned/bot/deploy.yaml"]);
    let log = r.git(&["log", "--format=%s"]);
    assert!(
        log.contains("unblock deploy: dependencies done, gates open"),
        "{log}"
    );
}

#[test]
fn time_ref_and_path_gates_open_one_by_one() {
    let mut r = TestRepo::with_agents(&["bot"]);
    r.task(
        "release",
        "title: Release\nagent: bot\nwait_for:\n  - time: 2026-11-28T05:00:00Z\n  - ref: v1.0\n  - path: {branch: main, path: docs/ready.md}\n",
    );
    r.at("2026-11-28T03:00:00Z").ok(&["tick"]);
    let gates = |r: &TestRepo| r.json(&["status"])["blocked"][0]["gates"].clone();
    assert_eq!(
        gates(&r),
        serde_json::json!([
            "time 2026-11-28T05:00:00Z",
            "ref v1.0 to exist",
            "docs/ready.md on main"
        ])
    );
    r.git(&["tag", "v1.0"]);
    r.at("2026-11-28T03:02:00Z").ok(&["tick"]);
    assert_eq!(
        gates(&r),
        serde_json::json!(["time 2026-11-28T05:00:00Z", "docs/ready.md on main"])
    );
    r.commit_file("docs/ready.md", "yes\n", "ready");
    r.at("2026-11-28T03:04:00Z").ok(&["tick"]);
    assert_eq!(gates(&r), serde_json::json!(["time 2026-11-28T05:00:00Z"]));
    assert_eq!(r.find("release"), ["work/blocked/release.yaml"]);
    r.at("2026-11-28T05:00:00Z").ok(&["tick"]);
    assert_eq!(r.find("release"), ["work/assigned/bot/release.yaml"]);
}

#[test]
fn a_malformed_gate_is_refused_at_intake() {
    let r = TestRepo::with_agents(&["bot"]);
    r.task("bad", "title: Bad\nwait_for:\n  - merged: {ref: feature}\n");
    r.ok(&["tick"]);
    assert_eq!(r.find("bad"), ["work/invalid/bad.yaml"]);
}

/// A stand-in for the GitHub CLI `gh` (the test machine has none, and no network): it answers
/// `gh pr view N [--repo R] --json state,mergedAt` and `gh run view ID [--repo R] --json
/// status,conclusion` as the real one does (the same arguments, the same JSON shape on
/// stdout, an error on stderr and exit 1 for what it does not know), from the files
/// `pr-N.json` and `run-ID.json` beside it, and logs each call's arguments to `calls`.
const GH_STAND_IN: &str = r#"#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/calls"
case "$1 $2" in
  "pr view") file="$dir/pr-$3.json" ;;
  "run view") file="$dir/run-$3.json" ;;
  *) echo "unknown command \"$1\" for \"gh\"" >&2; exit 1 ;;
esac
if [ -f "$file" ]; then cat "$file"; else echo "GraphQL: Could not resolve $3" >&2; exit 1; fi
"#;

/// Puts the stand-in `gh` in its own folder in the repo's HOME; returns the folder.
fn gh_stand_in(r: &TestRepo) -> std::path::PathBuf {
    let dir = r.home().join("gh-bin");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let gh = dir.join("gh");
    std::fs::write(&gh, GH_STAND_IN).expect("write gh");
    let mut perms = std::fs::metadata(&gh).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&gh, perms).expect("chmod");
    dir
}

/// Runs coord with `path` as PATH; asserts success, returns stdout.
fn with_path(r: &TestRepo, path: &str, args: &[&str]) -> String {
    let out = r.cmd(args).env("PATH", path).output().expect("run coord");
    assert!(out.status.success(), "coord {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn gh_gates_move_the_task_once_the_pull_request_is_merged_and_the_run_is_green() {
    let mut r = TestRepo::with_agents(&["bot"]);
    let dir = gh_stand_in(&r);
    let on = format!("{}:/usr/bin:/bin", dir.display());
    let off = "/usr/bin:/bin";
    let answer = |name: &str, json: &str| std::fs::write(dir.join(name), json).expect("write");
    answer("pr-12.json", "{\"mergedAt\":null,\"state\":\"OPEN\"}\n");
    answer(
        "run-4242.json",
        "{\"conclusion\":\"\",\"status\":\"in_progress\"}\n",
    );
    r.task(
        "deploy",
        "title: Deploy\nagent: bot\nwait_for:\n  - pr_merged: acme/app#12\n  - run_succeeded: 4242\n",
    );
    r.at("2026-11-28T03:00:00Z");
    with_path(&r, &on, &["tick"]);
    assert_eq!(r.find("deploy"), ["work/blocked/deploy.yaml"]);
    let gates = |r: &TestRepo, path: &str| {
        let out = with_path(r, path, &["--json", "status"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        v["blocked"][0]["gates"].clone()
    };
    assert_eq!(
        gates(&r, &on),
        serde_json::json!([
            "pull request acme/app#12 merged (gh said state OPEN at 2026-11-28T03:00:00Z)",
            "run 4242 succeeded (gh said status in_progress at 2026-11-28T03:00:00Z)"
        ])
    );
    let calls = || std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    assert_eq!(
        calls(),
        "pr view 12 --repo acme/app --json state,mergedAt\nrun view 4242 --json status,conclusion\n"
    );
    // Merged, but gh is asked again only once gate_interval (1m) has passed.
    answer(
        "pr-12.json",
        "{\"mergedAt\":\"2026-11-28T03:00:30Z\",\"state\":\"MERGED\"}\n",
    );
    r.at("2026-11-28T03:00:40Z");
    with_path(&r, &on, &["tick"]);
    assert_eq!(calls().lines().count(), 2);
    r.at("2026-11-28T03:02:00Z");
    with_path(&r, &on, &["tick"]);
    assert_eq!(calls().lines().count(), 4);
    assert_eq!(
        gates(&r, &on),
        serde_json::json!([
            "run 4242 succeeded (gh said status in_progress at 2026-11-28T03:02:00Z)"
        ])
    );
    // gh gone from PATH: the tick goes on, and status shows the last answer and the failure.
    answer(
        "run-4242.json",
        "{\"conclusion\":\"success\",\"status\":\"completed\"}\n",
    );
    r.at("2026-11-28T03:04:00Z");
    with_path(&r, off, &["tick"]);
    assert_eq!(r.find("deploy"), ["work/blocked/deploy.yaml"]);
    let shown = gates(&r, off).to_string();
    assert!(
        shown.contains("gh said status in_progress at 2026-11-28T03:02:00Z; the last call failed: gh is not installed"),
        "{shown}"
    );
    // Back on PATH and green: the task moves.
    r.at("2026-11-28T03:06:00Z");
    with_path(&r, &on, &["tick"]);
    assert_eq!(r.find("deploy"), ["work/assigned/bot/deploy.yaml"]);
}

#[test]
fn a_gh_that_hangs_is_cut_off_and_the_tick_goes_on() {
    let mut r = TestRepo::with_agents(&["bot"]);
    let dir = gh_stand_in(&r);
    // This stand-in never answers, as a gh stuck on the network would.
    std::fs::write(dir.join("gh"), "#!/bin/sh\nexec sleep 60\n").expect("write gh");
    let path = format!("{}:/usr/bin:/bin", dir.display());
    r.task(
        "deploy",
        "title: Deploy\nagent: bot\nwait_for:\n  - pr_merged: 7\n  - run_succeeded: ci.yml/main\n",
    );
    r.at("2026-11-28T03:00:00Z");
    let started = std::time::Instant::now();
    with_path(&r, &path, &["tick"]);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(25), "{took:?}");
    assert_eq!(r.find("deploy"), ["work/blocked/deploy.yaml"]);
    let out = with_path(&r, "/usr/bin:/bin", &["--json", "status"]);
    assert!(
        out.contains("no answer from gh yet; the last call failed: gh took longer than 10s"),
        "{out}"
    );
}
