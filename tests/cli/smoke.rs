//! The two commands of the quick start, end to end.

use crate::harness::TestRepo;

#[test]
fn init_gives_layout_one_commit_and_clean_status() {
    let r = TestRepo::empty();
    r.ok(&["init"]);
    for d in [
        "inbox",
        "blocked",
        "ready",
        "review",
        "assigned",
        "done",
        "failed",
        "cancelled",
        "invalid",
        "archive",
        "agents",
    ] {
        assert!(r.exists(&format!("work/{d}/.gitkeep")), "{d}");
    }
    assert!(r.exists("schemas/task.schema.json"));
    assert!(r.exists("coord.yaml"));
    assert!(r.exists(".github/workflows/coord.yml"));
    assert_eq!(r.commit_count(), 1);
    assert_eq!(r.git_status(), "");
    r.ok(&["init"]);
    assert_eq!(r.commit_count(), 1, "a second init changes nothing");
}

#[test]
fn demo_runs_to_the_end() {
    let r = TestRepo::empty();
    let dir = r.abs("demo");
    let out = r.ok(&["demo", dir.to_str().expect("utf8")]);
    assert!(out.contains("tasks: done 9"), "{out}");
    assert!(out.contains("retry launch-plan.security"), "{out}");
    // Driven by `coord run` around the shipped scripts: the reviewer fails once, then passes.
    assert!(
        out.contains(
            "security   launch-plan.security attempt 1: failed: exit 1: scanner timed out"
        ),
        "{out}"
    );
    assert!(
        out.contains("security   launch-plan.security attempt 2: done"),
        "{out}"
    );
    assert!(
        out.contains("editor     market-research.writer.editor attempt 1: done"),
        "{out}"
    );
    let announce = std::fs::read_to_string(dir.join("work/done/announce.yaml")).expect("done");
    assert!(
        announce.contains("writer did: Announce the launch"),
        "{announce}"
    );
    assert!(dir.join("bin/reviewer-agent.sh").is_file());
    let status = std::process::Command::new("git")
        .current_dir(&dir)
        .args(["status", "--porcelain"])
        .output()
        .expect("git");
    assert!(status.stdout.is_empty());
}
