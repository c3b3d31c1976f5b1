//! A person's changes to agents and tasks from the command line: `agents disable|enable`
//! (no more work, then work again), `agents remove` (refused while the agent has unfinished
//! tasks), and `cancel` of a task still in the inbox; each one commit, with one error line
//! and nothing written when refused.

use crate::harness::TestRepo;

#[test]
fn a_disabled_agent_is_assigned_nothing_until_enabled_again() {
    let r = TestRepo::with_agents(&["alice"]);
    let before = r.commit_count();
    r.ok(&["agents", "disable", "alice"]);
    assert_eq!(r.commit_count(), before + 1);
    assert!(r.read("work/agents/alice.yaml").contains("enabled: false"));
    assert!(r.ok(&["agents"]).contains("disabled"));
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("spec"), "work/ready/spec.yaml");
    let (_, err) = r.code(&["agents", "disable", "alice"], 0);
    assert!(err.contains("already"), "{err}");
    r.ok(&["agents", "enable", "alice"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("spec"), "work/assigned/alice/spec.yaml");
    let answer = r.json(&["agents", "disable", "alice"]);
    assert_eq!(answer["op"], "agents disable");
    assert_eq!(answer["commits"], 1);
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}

#[test]
fn an_agent_with_unfinished_tasks_is_not_removed_and_one_without_is() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    let before = r.commit_count();
    let (_, err) = r.code(&["agents", "remove", "alice"], 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("spec") && err.contains("agents disable alice"),
        "{err}"
    );
    assert_eq!(r.commit_count(), before);
    assert!(r.exists("work/agents/alice.yaml"));
    r.ok(&["agents", "remove", "bob"]);
    assert_eq!(r.commit_count(), before + 1);
    assert!(!r.exists("work/agents/bob.yaml"));
    assert!(!r.ok(&["agents"]).contains("bob"));
    let (_, err) = r.code(&["agents", "remove", "bob"], 1);
    assert!(
        err.contains("no agent named bob") && err.contains("alice"),
        "{err}"
    );
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}

#[test]
fn a_task_in_the_inbox_can_be_cancelled() {
    let r = TestRepo::with_agents(&["alice"]);
    r.ok(&["new", "Not needed after all", "--id", "extra"]);
    assert_eq!(r.where_is("extra"), "work/inbox/extra.yaml");
    let before = r.commit_count();
    r.ok(&["cancel", "extra", "--reason", "not needed"]);
    assert_eq!(r.commit_count(), before + 1);
    assert_eq!(r.where_is("extra"), "work/cancelled/extra.yaml");
    assert!(r.ok(&["log", "extra"]).contains("inbox -> cancelled"));
    r.ok(&["tick"]);
    assert_eq!(r.where_is("extra"), "work/cancelled/extra.yaml");
    r.ok(&["retry", "extra"]);
    assert_eq!(r.where_is("extra"), "work/inbox/extra.yaml");
}

#[test]
fn a_task_no_agent_holds_yet_is_reassigned() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["agents", "disable", "alice"]);
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("spec"), "work/ready/spec.yaml");
    let before = r.commit_count();
    r.ok(&["reassign", "spec", "bob"]);
    assert_eq!(r.commit_count(), before + 1);
    assert!(r.read("work/ready/spec.yaml").contains("agent: bob"));
    assert!(r
        .ok(&["log", "--all", "spec"])
        .contains("reassign spec to bob"));
    r.ok(&["tick"]);
    assert_eq!(r.where_is("spec"), "work/assigned/bob/spec.yaml");
    let before = r.commit_count();
    let (_, err) = r.code(&["reassign", "spec", "carol"], 1);
    assert!(err.contains("carol") && err.contains("alice, bob"), "{err}");
    assert_eq!(r.commit_count(), before);
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}

#[test]
fn a_held_task_is_taken_from_its_agent_whose_late_result_is_set_aside() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("spec"), "work/assigned/alice/spec.yaml");
    let before = r.commit_count();
    let answer = r.json(&["reassign", "spec", "bob"]);
    assert_eq!(answer["op"], "reassign");
    assert_eq!(answer["state"], "assigned");
    assert_eq!(r.commit_count(), before + 1);
    assert_eq!(r.where_is("spec"), "work/assigned/bob/spec.yaml");
    let text = r.read("work/assigned/bob/spec.yaml");
    for field in ["agent: bob", "assigned_to: bob", "attempt: 2", "cancelled"] {
        assert!(text.contains(field), "{field}: {text}");
    }
    assert!(r.ok(&["log", "spec"]).contains("reassign spec"));
    let (_, err) = r.code(
        &["complete", "spec", "--agent", "alice", "--attempt", "1"],
        1,
    );
    assert!(err.contains("not accepted"), "{err}");
    let text = r.read("work/assigned/bob/spec.yaml");
    assert!(
        text.contains("stale_result") && !text.contains("\nresult:"),
        "{text}"
    );
    let (_, err) = r.code(&["heartbeat", "spec", "--agent", "alice"], 1);
    assert!(err.contains("stop working"), "{err}");
    r.ok(&["complete", "spec", "--agent", "bob", "--attempt", "2"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("spec"), "work/done/spec.yaml");
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}

#[test]
fn a_held_task_with_a_result_waiting_or_its_own_agent_is_left_as_it_is() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    let before = r.commit_count();
    let (_, err) = r.code(&["reassign", "spec", "alice"], 0);
    assert!(err.contains("already"), "{err}");
    r.ok(&["complete", "spec", "--agent", "alice", "--attempt", "1"]);
    let before_refused = r.commit_count();
    let (_, err) = r.code(&["reassign", "spec", "bob"], 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("result waiting"), "{err}");
    assert_eq!(r.commit_count(), before_refused);
    assert_eq!(before + 1, before_refused);
    assert_eq!(r.where_is("spec"), "work/assigned/alice/spec.yaml");
}

#[test]
fn a_held_task_waits_in_ready_for_an_agent_that_cannot_take_it_now() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    r.ok(&["agents", "disable", "bob"]);
    r.ok(&["reassign", "spec", "bob"]);
    assert_eq!(r.where_is("spec"), "work/ready/spec.yaml");
    let text = r.read("work/ready/spec.yaml");
    assert!(
        text.contains("agent: bob") && !text.contains("lease_expires_at"),
        "{text}"
    );
    r.ok(&["agents", "enable", "bob"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("spec"), "work/assigned/bob/spec.yaml");
    assert!(r.read("work/assigned/bob/spec.yaml").contains("attempt: 2"));
}

#[test]
fn a_task_on_stdin_is_written_with_the_flags_filling_what_it_leaves_out() {
    let r = TestRepo::with_agents(&["alice"]);
    let out = r
        .cmd(&["new", "-", "--priority", "high", "--agent", "alice"])
        .write_stdin("title: From stdin\nid: piped\nlabels: [docs]\nagent: alice\n")
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "piped");
    let text = r.read("work/inbox/piped.yaml");
    for field in [
        "title: From stdin",
        "priority: high",
        "docs",
        "agent: alice",
    ] {
        assert!(text.contains(field), "{field}: {text}");
    }
    let before = r.commit_count();
    for (bad, code, why) in [
        ("title: x\ncolour: red\n", 2, "colour"),
        ("title: [x\n", 2, "does not read"),
        ("title: x\nagent: ghost\n", 1, "ghost"),
    ] {
        let out = r.cmd(&["new", "-"]).write_stdin(bad).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(why), "{err}");
    }
    assert_eq!(r.commit_count(), before);
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}

/// Writes a stand-in editor in `r`'s HOME: a script that, like an editor a person saves
/// with, replaces the file it is given with `text`. Returns its path.
fn editor(r: &TestRepo, name: &str, text: &str) -> String {
    let path = r.home().join(name);
    let script = format!("#!/bin/sh\nprintf '%s' '{text}' > \"$1\"\n");
    std::fs::write(&path, script).expect("write editor");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&path, mode).expect("chmod");
    path.display().to_string()
}

#[test]
fn a_task_written_in_the_editor_is_checked_before_it_is_saved() {
    let r = TestRepo::with_agents(&["alice"]);
    let good = editor(&r, "good.sh", "title: Edited\nid: edited\nagent: alice\n");
    let out = r
        .cmd(&["new", "--edit"])
        .env("EDITOR", &good)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    assert!(r.read("work/inbox/edited.yaml").contains("agent: alice"));
    let before = r.commit_count();
    let bad = editor(&r, "bad.sh", "title: [Edited\n");
    let out = r
        .cmd(&["new", "--edit"])
        .env("EDITOR", &bad)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("nothing was written") && err.contains("kept in"),
        "{err}"
    );
    let kept = err
        .split("kept in ")
        .nth(1)
        .and_then(|k| k.split(')').next());
    let kept = kept.expect("the draft's path");
    assert!(std::fs::read_to_string(kept)
        .expect("kept")
        .contains("[Edited"));
    std::fs::remove_file(kept).expect("remove the draft");
    let untouched = r
        .cmd(&["new", "--edit"])
        .env("EDITOR", "true")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&untouched.stderr);
    assert_eq!(untouched.status.code(), Some(2), "{err}");
    assert!(err.contains("title is empty"), "{err}");
    assert_eq!(r.commit_count(), before);
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}
