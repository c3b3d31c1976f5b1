//! People using plain git in a clone while coord works in it: a commit, a merge or a rebase
//! made while `coord sync` or `coord claim --sync` is between its steps must neither be lost
//! nor be committed into by coord.

use crate::harness::TestRepo;
use crate::sync::Net;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Holds the clone's pushes at a gate: `origin`'s receive-pack runs through a script that
/// writes `started`, then waits for `go` to exist. Returns (started, go).
fn gate_pushes(clone: &TestRepo) -> (PathBuf, PathBuf) {
    let script = clone.abs(".git/gated-receive-pack");
    let started = clone.abs(".git/push.started");
    let go = clone.abs(".git/push.go");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch '{}'\nwhile [ ! -e '{}' ]; do sleep 0.02; done\nexec git-receive-pack \"$@\"\n",
            started.display(),
            go.display()
        ),
    )
    .expect("write script");
    let mut perms = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod");
    clone.git(&[
        "config",
        "remote.origin.receivepack",
        script.to_str().expect("utf8"),
    ]);
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
