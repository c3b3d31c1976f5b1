//! coord refuses to write while git is in the middle of something (a merge, a rebase, a
//! cherry-pick, a revert, a bisect, unmerged index entries) or HEAD is detached: each writing
//! command exits 1 with one line saying what to finish first, and writes nothing. So it does
//! when git leaves task files out of the work tree (a sparse checkout), which it never
//! records as deleted.

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

/// Returns a repo where pull agent `p` finished task `d` and holds task `a`, all committed,
/// with a remote to sync with.
fn with_finished_and_held() -> TestRepo {
    let r = TestRepo::with_agents(&["p --pull --max-active 10"]);
    for id in ["d", "a"] {
        r.task(id, "title: a task\n");
        r.ok(&["tick"]);
        r.ok(&["claim", "--agent", "p"]);
    }
    r.ok(&["complete", "d", "--agent", "p"]);
    r.ok(&["tick"]);
    r.add_origin();
    assert_eq!(r.where_is("d"), "work/done/d.yaml");
    r
}

/// Returns the paths HEAD holds.
fn committed(r: &TestRepo) -> String {
    r.git(&["ls-tree", "-r", "--name-only", "HEAD"])
}

/// Asserts that writing commands are refused with one line naming `left_out` and the fix,
/// and leave HEAD and `git status` as they were (every committed task kept); then that
/// coord works again once the files are back.
fn refused_until_checked_out(r: &TestRepo, left_out: &str, check_out: &[&[&str]]) {
    let head = r.git(&["rev-parse", "HEAD"]);
    let before = committed(r);
    for args in [
        &["tick"][..],
        &["new", "Another task", "--id", "n"],
        &["sync"],
    ] {
        let (_, err) = r.code(args, 1);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "coord {args:?}: one line expected:\n{err}");
        for part in [left_out, "sparse-checkout disable", "nothing was written"] {
            assert!(lines[0].contains(part), "coord {args:?}: {err}");
        }
        assert_eq!(
            r.git(&["rev-parse", "HEAD"]),
            head,
            "coord {args:?} committed"
        );
        assert_eq!(committed(r), before);
    }
    let (out, _) = r.code(&["doctor"], 1);
    assert!(
        out.contains(left_out),
        "doctor names what is left out:\n{out}"
    );
    for args in check_out {
        r.git(args);
    }
    r.ok(&["tick"]);
    r.ok(&["new", "Another task", "--id", "n"]);
    assert_eq!(r.git_status(), "");
    assert!(committed(r).contains(left_out), "{left_out} kept");
}

/// A file flagged skip-worktree (`git update-index --skip-worktree`, what sparse checkouts
/// use) and missing from the work tree is one git counts as unchanged: coord must not record
/// it deleted (the task would leave HEAD), nor work without it (its id could be taken again,
/// its agent given more than its capacity): writing commands are refused until it is back.
#[test]
fn a_task_file_git_leaves_out_of_the_work_tree_stops_writing_commands() {
    let r = with_finished_and_held();
    r.git(&["update-index", "--skip-worktree", "work/done/d.yaml"]);
    std::fs::remove_file(r.abs("work/done/d.yaml")).expect("rm");
    assert_eq!(r.git_status(), "", "git sees no change");
    let check_out: [&[&str]; 2] = [
        &["update-index", "--no-skip-worktree", "work/done/d.yaml"],
        &["checkout", "--", "work/done/d.yaml"],
    ];
    refused_until_checked_out(&r, "work/done/d.yaml", &check_out);
}

/// A sparse checkout that leaves `work/done/` out: coord refuses to write (a new task could
/// take a finished one's id) until the folder is checked out again, and loses nothing.
#[test]
fn a_sparse_checkout_without_the_done_folder_stops_writing_commands() {
    let r = with_finished_and_held();
    r.git(&["sparse-checkout", "set", "--no-cone", "/*", "!/work/done/"]);
    assert!(
        !r.exists("work/done/d.yaml"),
        "the sparse checkout left it out"
    );
    refused_until_checked_out(&r, "work/done/d.yaml", &[&["sparse-checkout", "disable"]]);
}

/// A task file flagged skip-worktree that is present but *changed* in the work tree: git
/// shows no change, so coord would act on the edit and commit it under its own name.
/// Writing commands refuse, as for a file left out.
#[test]
fn a_changed_task_file_git_is_told_to_skip_stops_writing_commands() {
    let r = with_finished_and_held();
    let path = "work/done/d.yaml";
    r.git(&["update-index", "--skip-worktree", path]);
    let text = r.read(path);
    r.write(path, &format!("# a person's hidden edit\n{text}"));
    assert_eq!(r.git_status(), "", "git shows nothing");
    refused_until_checked_out(&r, path, &[&["update-index", "--no-skip-worktree", path]]);
    assert!(r
        .git(&["show", &format!("HEAD:{path}")])
        .contains("hidden edit"));
}

/// A cone sparse checkout of `work` leaves `schemas/` out: coord would validate every task
/// against its built-in schema instead of the repo's. Writing commands are refused, as for a
/// task file left out.
#[test]
fn a_sparse_checkout_without_the_task_schema_stops_writing_commands() {
    let r = with_finished_and_held();
    r.git(&["sparse-checkout", "set", "--cone", "work"]);
    assert!(
        !r.exists("schemas/task.schema.json"),
        "the sparse checkout left it out"
    );
    // Read-only checks would judge tasks by the built-in schema, without a word.
    for args in [&["validate"][..], &["tick", "--dry-run"]] {
        let (_, err) = r.code(args, 1);
        assert!(
            err.contains("schemas/task.schema.json"),
            "coord {args:?}: {err}"
        );
        assert!(
            err.contains("git sparse-checkout disable"),
            "coord {args:?}: {err}"
        );
    }
    refused_until_checked_out(
        &r,
        "schemas/task.schema.json",
        &[&["sparse-checkout", "disable"]],
    );
}

/// A sparse index (`git sparse-checkout set --sparse-index`: git's `sdir` extension) cannot be
/// read by libgit2: writing commands say so in one line with the fix, instead of a read error,
/// and work again once the index is a full one.
#[test]
fn a_sparse_index_stops_writing_commands_with_its_fix() {
    let r = with_finished_and_held();
    std::fs::create_dir_all(r.abs("other/deep")).expect("mkdir");
    r.write("other/deep/notes.txt", "outside the cone\n");
    r.git(&["add", "other"]);
    r.git(&["commit", "-qm", "other"]);
    r.git(&[
        "sparse-checkout",
        "set",
        "--cone",
        "--sparse-index",
        "work",
        "schemas",
    ]);
    let head = r.git(&["rev-parse", "HEAD"]);
    for args in [&["tick"][..], &["new", "Another task", "--id", "n"]] {
        let (_, err) = r.code(args, 1);
        assert_eq!(
            err.lines().count(),
            1,
            "coord {args:?}: one line expected:\n{err}"
        );
        for part in [
            "git's index is a sparse index",
            "git sparse-checkout reapply --no-sparse-index",
            "nothing was written",
        ] {
            assert!(err.contains(part), "coord {args:?}: {err}");
        }
    }
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head);
    let (out, _) = r.code(&["doctor"], 1);
    assert!(out.contains("git's index is a sparse index"), "{out}");
    r.git(&["sparse-checkout", "reapply", "--no-sparse-index"]);
    r.ok(&["tick"]);
    r.ok(&["new", "Another task", "--id", "n"]);
    assert_eq!(r.git_status(), "");
}

/// A split index (`core.splitIndex`: git's `link` extension) cannot be read by libgit2 either:
/// one line with the fix, then everything works once the index is one file again.
#[test]
fn a_split_index_stops_writing_commands_with_its_fix() {
    let r = with_finished_and_held();
    r.git(&["config", "core.splitIndex", "true"]);
    r.git(&["update-index", "--split-index"]);
    let (_, err) = r.code(&["tick"], 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("git's index is split"), "{err}");
    assert!(err.contains("git update-index --no-split-index"), "{err}");
    let (out, _) = r.code(&["doctor"], 1);
    assert!(out.contains("git's index is split"), "{out}");
    r.git(&["config", "core.splitIndex", "false"]);
    r.git(&["update-index", "--no-split-index"]);
    r.ok(&["tick"]);
    assert_eq!(r.git_status(), "");
}
