//! coord refuses to write while git is in the middle of something (a merge, a rebase, a
//! cherry-pick, a revert, a bisect, unmerged index entries) or HEAD is detached: each writing
//! command exits 1 with one line saying what to finish first, and writes nothing. A file git
//! skips in the work tree (a sparse checkout) is no change for coord to record.

use crate::harness::TestRepo;

/// A repo whose inbox task `a` was edited differently on `main` and on branch `side`.
fn diverged() -> TestRepo {
    let r = TestRepo::new();
    r.write("notes.txt", "base\n");
    r.git(&["add", "notes.txt"]);
    r.git(&["commit", "-q", "-m", "notes"]);
    r.git(&["switch", "-q", "-c", "side"]);
    r.write("notes.txt", "side\n");
    r.git(&["commit", "-q", "-am", "side notes"]);
    r.git(&["switch", "-q", "main"]);
    r.write("notes.txt", "main\n");
    r.git(&["commit", "-q", "-am", "main notes"]);
    r
}

/// Asserts that every writing command is refused with one line naming `what`, and that HEAD,
/// the index and the work tree are untouched.
fn refused_everywhere(r: &TestRepo, what: &str) {
    r.task("t1", "title: dropped during the operation\n");
    let head = r.git(&["rev-parse", "HEAD"]);
    let status = r.git_status();
    for args in [
        &["tick"][..],
        &["claim", "--agent", "alice"],
        &["new", "x"],
        &["cancel", "t1"],
        &["doctor", "--fix"],
        &["archive"],
        &["sync"],
    ] {
        let (_, err) = r.code(args, 1);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "coord {args:?}: one line expected:\n{err}");
        assert!(
            lines[0].contains(what) && lines[0].contains("nothing was written"),
            "coord {args:?}: {err}"
        );
    }
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head, "HEAD moved");
    assert_eq!(r.git_status(), status, "index or work tree changed");
    let (out, _) = r.code(&["doctor"], 1);
    assert!(out.contains(what), "doctor explains the state:\n{out}");
}

#[test]
fn tick_during_a_conflicted_merge_is_refused_and_the_merge_can_be_aborted() {
    let r = diverged();
    let merged = std::process::Command::new("git")
        .current_dir(r.path())
        .args(["merge", "-q", "side"])
        .envs(crate::harness::git_env())
        .output()
        .expect("git merge");
    assert!(!merged.status.success(), "the merge must conflict");
    refused_everywhere(&r, "merge");
    r.git(&["merge", "--abort"]);
    assert_eq!(r.read("notes.txt"), "main\n");
    r.ok(&["tick"]);
}

#[test]
fn tick_during_a_rebase_is_refused() {
    let r = diverged();
    r.git(&["switch", "-q", "side"]);
    let rebased = std::process::Command::new("git")
        .current_dir(r.path())
        .args(["rebase", "-q", "main"])
        .envs(crate::harness::git_env())
        .output()
        .expect("git rebase");
    assert!(
        !rebased.status.success(),
        "the rebase must stop on a conflict"
    );
    refused_everywhere(&r, "rebase");
    r.git(&["rebase", "--abort"]);
    r.ok(&["tick"]);
}

#[test]
fn a_detached_head_is_refused() {
    let r = TestRepo::new();
    r.git(&["switch", "-q", "--detach"]);
    refused_everywhere(&r, "detached");
    r.git(&["switch", "-q", "main"]);
    r.ok(&["tick"]);
    assert!(r.where_is("t1").starts_with("work/ready/"));
}

#[test]
fn a_cherry_pick_in_progress_is_refused() {
    let r = diverged();
    let picked = std::process::Command::new("git")
        .current_dir(r.path())
        .args(["cherry-pick", "side"])
        .envs(crate::harness::git_env())
        .output()
        .expect("git cherry-pick");
    assert!(!picked.status.success(), "the cherry-pick must conflict");
    refused_everywhere(&r, "cherry-pick");
}

/// Runs git in the repo and returns whether it succeeded (for commands expected to stop).
fn git_stops(r: &TestRepo, args: &[&str]) -> bool {
    let out = std::process::Command::new("git")
        .current_dir(r.path())
        .args(args)
        .envs(crate::harness::git_env())
        .output()
        .expect("git");
    !out.status.success()
}

#[test]
fn a_revert_in_progress_is_refused() {
    let r = diverged();
    r.write("notes.txt", "main, edited again\n");
    r.git(&["commit", "-q", "-am", "more notes"]);
    assert!(
        git_stops(&r, &["revert", "--no-edit", "HEAD~1"]),
        "the revert must conflict"
    );
    refused_everywhere(&r, "revert");
    r.git(&["revert", "--abort"]);
    r.ok(&["tick"]);
}

#[test]
fn a_bisect_in_progress_is_refused() {
    let r = diverged();
    r.git(&["bisect", "start", "HEAD", "HEAD~2"]);
    // bisect checks out a commit (detached); the bisect is named first.
    refused_everywhere(&r, "bisect");
    r.git(&["bisect", "reset"]);
    r.ok(&["tick"]);
}

/// Unmerged entries with no operation in progress: a `git stash pop` that conflicted.
#[test]
fn unmerged_entries_after_a_conflicted_stash_pop_are_refused() {
    let r = diverged();
    r.write("notes.txt", "stashed\n");
    r.git(&["stash", "-q"]);
    r.write("notes.txt", "committed meanwhile\n");
    r.git(&["commit", "-q", "-am", "meanwhile"]);
    assert!(
        git_stops(&r, &["stash", "pop", "-q"]),
        "the pop must conflict"
    );
    refused_everywhere(&r, "unmerged entries");
    r.git(&["reset", "-q", "--merge"]);
    r.ok(&["tick"]);
}

#[test]
fn a_task_file_in_conflict_during_a_merge_is_never_committed() {
    let r = TestRepo::new();
    r.task("a", "title: base\n");
    r.git(&["add", "work"]);
    r.git(&["commit", "-q", "-m", "a"]);
    r.git(&["switch", "-q", "-c", "side"]);
    r.task("a", "title: side\n");
    r.git(&["commit", "-q", "-am", "side title"]);
    r.git(&["switch", "-q", "main"]);
    r.task("a", "title: main\n");
    r.git(&["commit", "-q", "-am", "main title"]);
    let merged = std::process::Command::new("git")
        .current_dir(r.path())
        .args(["merge", "-q", "side"])
        .envs(crate::harness::git_env())
        .output()
        .expect("git merge");
    assert!(!merged.status.success(), "the merge must conflict");
    assert!(r.read("work/inbox/a.yaml").contains("<<<<<<<"));
    refused_everywhere(&r, "merge");
    let markers = r.git(&["log", "--format=%H", "-G^(<<<<<<<|>>>>>>>)", "main"]);
    assert!(markers.is_empty(), "conflict markers committed: {markers}");
    r.git(&["merge", "--abort"]);
    assert_eq!(r.read("work/inbox/a.yaml"), "title: main\n");
    r.ok(&["tick"]);
    assert_eq!(r.find("a").len(), 1);
}

/// Returns a repo where pull agent `p` finished task `d` and holds task `a`, all committed.
fn with_finished_and_held() -> TestRepo {
    let r = TestRepo::with_agents(&["p --pull --max-active 10"]);
    for id in ["d", "a"] {
        r.task(id, "title: a task\n");
        r.ok(&["tick"]);
        r.ok(&["claim", "--agent", "p"]);
    }
    r.ok(&["complete", "d", "--agent", "p"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("d"), "work/done/d.yaml");
    r
}

/// Returns the paths HEAD holds under `work/`.
fn committed(r: &TestRepo) -> String {
    r.git(&["ls-tree", "-r", "--name-only", "HEAD", "work/"])
}

/// Asserts that writing commands leave every committed task in HEAD and `git status` clean.
fn nothing_recorded_as_deleted(r: &TestRepo, paths: &str) {
    let recorded = || {
        r.git(&["log", "--format=%s"])
            .matches("record external")
            .count()
    };
    let before = recorded();
    for args in [&["tick"][..], &["new", "Another task", "--id", "n"]] {
        r.ok(args);
        let now = committed(r);
        for path in paths.lines() {
            assert!(now.contains(path), "coord {args:?} deleted {path}:\n{now}");
        }
        assert_eq!(r.git_status(), "", "after coord {args:?}");
    }
    assert_eq!(recorded(), before, "a recording of changes nobody made");
}

/// A file flagged skip-worktree (`git update-index --skip-worktree`, what sparse checkouts
/// use) is missing from the work tree on purpose: git counts it as unchanged, and so must
/// coord, or its recording commits a deletion nobody made and the task leaves HEAD.
#[test]
fn a_file_git_skips_in_the_work_tree_is_not_recorded_as_deleted() {
    let r = with_finished_and_held();
    let before = committed(&r);
    r.git(&["update-index", "--skip-worktree", "work/done/d.yaml"]);
    std::fs::remove_file(r.abs("work/done/d.yaml")).expect("rm");
    assert_eq!(r.git_status(), "", "git sees no change");
    nothing_recorded_as_deleted(&r, &before);
}

/// A sparse checkout that leaves `work/done/` out keeps every finished task in HEAD while
/// coord goes on working in the folders it has.
#[test]
fn a_sparse_checkout_without_the_done_folder_keeps_the_finished_tasks() {
    let r = with_finished_and_held();
    let before = committed(&r);
    r.git(&["sparse-checkout", "set", "--no-cone", "/*", "!/work/done/"]);
    assert!(
        !r.exists("work/done/d.yaml"),
        "the sparse checkout left it out"
    );
    nothing_recorded_as_deleted(&r, &before);
    r.ok(&["complete", "a", "--agent", "p"]);
    r.ok(&["tick"]);
    let now = committed(&r);
    assert!(
        now.contains("work/done/a.yaml") && now.contains("work/done/d.yaml"),
        "{now}"
    );
    assert_eq!(r.git_status(), "");
}
