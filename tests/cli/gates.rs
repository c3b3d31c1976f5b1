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
