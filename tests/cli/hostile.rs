//! People using plain git in a clone while coord works in it: a commit, a merge or a rebase
//! made while `coord sync` or `coord claim --sync` is between its steps must neither be lost
//! nor be committed into by coord.

use crate::harness::TestRepo;
use crate::sync::Net;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Holds the clone's first push at a gate: `origin`'s receive-pack runs through a script that
/// writes `started`, then waits for `go` to exist; later pushes pass. Returns (started, go).
fn gate_pushes(clone: &TestRepo) -> (PathBuf, PathBuf) {
    let started = clone.abs(".git/push.started");
    let go = clone.abs(".git/push.go");
    let body = format!(
        "[ -e '{0}' ] && exec git-receive-pack \"$@\"\ntouch '{0}'\nwhile [ ! -e '{1}' ]; do sleep 0.02; done\nexec git-receive-pack \"$@\"\n",
        started.display(),
        go.display()
    );
    clone.wrap_remote_program("receivepack", "gated-receive-pack", &body);
    (started, go)
}

/// Waits until `path` exists (the child got that far), at most 60 s.
fn wait_for(path: &std::path::Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never came",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A remote with one ready task for the pull agent p1, and a clone of it synced.
fn pull_clone() -> (Net, TestRepo) {
    let net = Net::new(&[]);
    net.seed.ok(&["agents", "add", "p1", "--pull"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    net.person_adds("t", 2);
    net.seed.ok(&["sync"]);
    let clone = net.clone();
    (net, clone)
}

#[test]
fn a_persons_commit_made_while_a_claim_push_is_rejected_is_kept() {
    let (net, clone) = pull_clone();
    let (started, go) = gate_pushes(&clone);
    let mut cmd = clone.spawn_cmd(&["claim", "--agent", "p1", "--sync"]);
    let claim = std::thread::spawn(move || cmd.output().expect("run coord"));
    wait_for(&started);
    // Another clone pushes meanwhile (the claim's push will be rejected), and the person
    // commits in the agent's clone.
    net.person_adds("late", 1);
    clone.write("notes.txt", "my notes\n");
    clone.git(&["add", "notes.txt"]);
    clone.git(&["commit", "-q", "-m", "my notes"]);
    let mine = clone.git(&["rev-parse", "HEAD"]);
    std::fs::write(&go, "").expect("go");
    let out = claim.join().expect("claim");
    let err = String::from_utf8_lossy(&out.stderr);
    let on_branch = clone.git(&["branch", "--contains", mine.trim()]);
    assert!(
        on_branch.contains("main"),
        "the person's commit left the branch (claim exited {:?}: {err})",
        out.status.code()
    );
    assert_eq!(clone.read("notes.txt"), "my notes\n");
    // The claim did not land, so the agent is not told it has the task.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(err.contains("moved on from it"), "{err}");
}

#[test]
fn a_claim_whose_commit_another_sync_of_the_clone_pushed_is_the_agents() {
    let (net, clone) = pull_clone();
    let (started, go) = gate_pushes(&clone);
    let mut cmd = clone.spawn_cmd(&["claim", "--agent", "p1", "--sync"]);
    let claim = std::thread::spawn(move || cmd.output().expect("run coord"));
    wait_for(&started);
    // A sync in the same clone (a watch machine, a cron) pushes the claim's commit first,
    // with a new task on top.
    clone.task("dropped", &crate::sync::task_yaml("dropped"));
    clone.ok(&["sync"]);
    std::fs::write(&go, "").expect("go");
    let out = claim.join().expect("claim");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let told = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let check = net.clone();
    let held: Vec<String> = check
        .git(&["ls-files", "work/assigned/p1"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        held,
        [format!("work/assigned/p1/{told}.yaml")],
        "the agent was told {told} and holds {held:?} on the remote ({err})"
    );
}

/// Creates git's lock file `rel` in `repo` as a person's git would hold it, and removes it
/// after `ms` milliseconds.
fn hold_git_lock(repo: &TestRepo, rel: &str, ms: u64) -> std::thread::JoinHandle<()> {
    let lock = repo.abs(rel);
    std::fs::write(&lock, "").expect("lock");
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(ms));
        std::fs::remove_file(&lock).expect("unlock");
    })
}

#[test]
fn a_sync_waits_for_a_persons_git_holding_the_remote_tracking_ref() {
    let (net, clone) = pull_clone();
    net.person_adds("more", 1);
    // A person's git pull or push in this clone is updating refs/remotes/origin/main.
    let held = hold_git_lock(&clone, ".git/refs/remotes/origin/main.lock", 500);
    let (_, err) = clone.code(&["sync"], 0);
    held.join().expect("held");
    assert!(clone.exists("work/ready/more-0.yaml"), "{err}");
}

#[test]
fn a_sync_waits_for_a_persons_git_holding_the_index_and_leaves_the_work_tree_consistent() {
    let (net, clone) = pull_clone();
    net.person_adds("more", 1);
    // A person's git status, commit or gc in this clone holds the index for a moment.
    let held = hold_git_lock(&clone, ".git/index.lock", 800);
    let (_, err) = clone.code(&["sync", "--wait", "5s"], 0);
    held.join().expect("held");
    assert!(clone.exists("work/ready/more-0.yaml"), "{err}");
    assert_eq!(clone.git_status(), "", "{err}");
    assert_eq!(
        clone.git(&["rev-parse", "HEAD"]),
        net.clone().git(&["rev-parse", "HEAD"])
    );
}
