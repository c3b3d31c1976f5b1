//! `coord run --worktree`: each attempt's command runs in a git worktree of its own, on a
//! branch `coord/<task>-<attempt>`, never in the checkout coord commits in. Coding agents are
//! stand-in scripts that edit a file and `git commit` on their branch; a reviewer handed the
//! task checks out the same branch. Also: worktrees are removed when their attempt ends (a
//! failed one kept when coord.yaml says so), and a runner started after a kill -9 removes the
//! dead attempt's worktree and leaves a live runner's alone.

use crate::agents_run::{args, repo, runner, state, stop, task, wait_until};
use crate::harness::TestRepo;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A stand-in coding agent: writes `<task>.txt` in its worktree, waits a little (so the
/// three overlap with each other and with coord's commits), commits it on its branch, and
/// prints a summary. Any git failure (an index.lock held by coord) fails it.
const CODER: &str = r#"set -e
test "$PWD" = "$COORD_WORKTREE"
echo "work of $COORD_TASK_ID" > "$COORD_TASK_ID.txt"
sleep 1
git add "$COORD_TASK_ID.txt"
git commit -q -m "$COORD_TASK_ID: the change"
echo "summary: changed $COORD_TASK_ID.txt"
"#;

/// A stand-in reviewer: saves the branch it was handed and the files of its worktree.
fn reviewer(dir: &Path) -> String {
    format!(
        "set -e\n\
         out={}/$COORD_TASK_ID\n\
         echo \"$COORD_BRANCH\" > \"$out.branch\"\n\
         ls > \"$out.files\"\n\
         echo 'verdict: approved'\n",
        dir.display()
    )
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// The folder the worktrees go in by default.
fn trees(r: &TestRepo) -> PathBuf {
    r.abs(".git/coord/worktrees")
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn three_coding_agents_commit_on_their_own_branches_beside_coord_watch() {
    let r = repo(&[
        ("coder", "max_active: 3\n"),
        ("reviewer", "max_active: 3\n"),
    ]);
    let seen = tempfile::tempdir().expect("tmp");
    let ids = ["t1", "t2", "t3"];
    for id in ids {
        r.task(
            id,
            &format!("title: Change {id}\nagent: coder\nnext_agent: reviewer\n"),
        );
    }
    let watch = r
        .spawn_cmd(&["watch"])
        .env_remove("COORD_NOW")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn coord watch");
    let coder = sh(CODER);
    let review = sh(&reviewer(seen.path()));
    let coders = runner(
        &r,
        &args(&["coder", "--worktree", "--parallel", "3"], &coder),
    )
    .spawn()
    .expect("spawn");
    let reviewers = runner(&r, &args(&["reviewer", "--worktree"], &review))
        .spawn()
        .expect("spawn");
    let _watch = Killed(vec![watch]);
    let reviewed = || {
        ids.iter()
            .all(|id| state(&r, &format!("{id}.reviewer")) == "done")
    };
    let until = Instant::now() + Duration::from_secs(90);
    while !reviewed() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, out, err) = stop(coders);
    let (code2, out2, err2) = stop(reviewers);
    let said = format!("coders:\n{out}{err}\nreviewer:\n{out2}{err2}");
    assert!(
        reviewed(),
        "every review done: {}\n{said}",
        r.ok(&["status"])
    );
    assert_eq!((code, code2), (0, 0), "{said}");
    assert!(
        !out.contains("index.lock") && !err.contains("index.lock"),
        "{out}{err}"
    );
    assert_eq!(r.git_status(), "", "coord's checkout stays clean");
    for id in ids {
        let branch = format!("coord/{id}-1");
        let coded = task(&r, id)["task"].clone();
        assert_eq!(
            coded["coord"]["attempt"], 1,
            "ran once, never failed: {coded}"
        );
        let output = &coded["result"]["output"];
        assert_eq!(output["branch"], branch.as_str(), "{coded}");
        let head = r.git(&["rev-parse", &branch]);
        assert_eq!(output["commit"], head.trim(), "{coded}");
        assert_eq!(output["summary"], format!("changed {id}.txt"), "{coded}");
        let base = r.git(&["merge-base", "main", &branch]);
        let changed = r.git(&["diff", "--name-only", base.trim(), &branch]);
        assert_eq!(
            changed,
            format!("{id}.txt\n"),
            "{branch} holds exactly its change"
        );
        let commits = r.git(&["log", "--format=%s", &format!("{}..{branch}", base.trim())]);
        assert_eq!(commits, format!("{id}: the change\n"));
        let handed = std::fs::read_to_string(seen.path().join(format!("{id}.reviewer.branch")))
            .expect("the reviewer ran");
        assert_eq!(handed.trim(), branch, "the reviewer got the coder's branch");
        let files = std::fs::read_to_string(seen.path().join(format!("{id}.reviewer.files")))
            .expect("the reviewer ran");
        assert!(files.contains(&format!("{id}.txt")), "{files}");
        let reviewed = &task(&r, &format!("{id}.reviewer"))["task"]["result"]["output"];
        assert_eq!(reviewed["branch"], branch.as_str(), "{reviewed}");
        assert_eq!(reviewed["verdict"], "approved", "{reviewed}");
    }
    assert_eq!(
        entries(&trees(&r)),
        Vec::<String>::new(),
        "worktrees removed"
    );
    let listed = r.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
}

#[test]
fn a_failed_attempts_worktree_stays_when_asked_and_leftovers_are_committed() {
    let r = repo(&[("a", "max_active: 2\n")]);
    r.write(
        "coord.yaml",
        "defaults: {max_attempts: 1}\nrun: {worktree: true, keep_failed_worktrees: true}\n",
    );
    r.git(&["commit", "-qam", "keep failed worktrees"]);
    r.task("bad", "title: Fails\nagent: a\n");
    r.task("good", "title: Leaves its edit uncommitted\nagent: a\n");
    let script = "echo edit > \"$COORD_TASK_ID.txt\"; test \"$COORD_TASK_ID\" = good";
    let (code, _, err) = crate::agents_run::run_to_end(&r, &args(&["a", "--once"], &sh(script)));
    assert_eq!(code, 0, "{err}");
    assert_eq!(state(&r, "bad"), "failed");
    assert_eq!(state(&r, "good"), "done");
    assert_eq!(entries(&trees(&r)), vec!["bad-1".to_string()]);
    assert!(trees(&r).join("bad-1/bad.txt").exists());
    let output = &task(&r, "good")["task"]["result"]["output"];
    assert_eq!(output["branch"], "coord/good-1", "{output}");
    let shown = r.git(&["show", "--format=%an %s", "--name-only", "coord/good-1"]);
    assert!(
        shown.starts_with("coord good: changes attempt 1 left uncommitted\n"),
        "{shown}"
    );
    assert!(shown.contains("good.txt"), "{shown}");
    assert_eq!(r.git_status(), "", "coord's checkout stays clean");
}

#[test]
fn a_worktree_folder_inside_the_checkout_is_refused() {
    let r = repo(&[("a", "")]);
    r.write("coord.yaml", "run: {worktree_dir: trees}\n");
    r.git(&["commit", "-qam", "trees inside"]);
    let (code, _, err) =
        crate::agents_run::run_to_end(&r, &args(&["a", "--worktree", "--once"], &sh("true")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("run.worktree_dir"), "{err}");
}

#[test]
fn a_runner_after_a_kill_9_removes_the_dead_attempts_worktree_and_keeps_a_live_one() {
    let r = repo(&[("p", "assign: pull\nmax_active: 2\n")]);
    let long = sh("sleep 60");
    let start = || {
        runner(&r, &args(&["p", "--worktree", "--grace", "1s"], &long))
            .spawn()
            .expect("spawn")
    };
    r.task("x", "title: Dies with its runner\n");
    let mut dead = start();
    wait_until(30, "x's worktree", || trees(&r).join("x-1").exists());
    r.task("y", "title: Runs on\n");
    let live = start();
    wait_until(30, "y's worktree", || trees(&r).join("y-1").exists());
    dead.kill().expect("kill -9");
    dead.wait().expect("reap");
    let third = start();
    wait_until(30, "x's worktree removed", || {
        !trees(&r).join("x-1").exists()
    });
    wait_until(30, "x reported", || {
        task(&r, "x")["task"]["coord"]["history"]
            .to_string()
            .contains("coord run was killed")
    });
    assert!(
        trees(&r).join("y-1").exists(),
        "the live attempt keeps its worktree"
    );
    assert_eq!(state(&r, "y"), "assigned");
    let (code, _, err) = stop(third);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = stop(live);
    assert_eq!(code, 0, "{err}");
    assert!(
        !trees(&r).join("y-1").exists(),
        "a stopped attempt's worktree is removed"
    );
    assert_eq!(r.git_status(), "");
}

/// A branch `coord/<task>-<attempt>` that is there before the attempt starts (a person's, or
/// an earlier task of the same id) is not taken over: the attempt fails naming the branch and
/// the fix, its command never runs on it, and the branch stays as it was.
#[test]
fn an_attempt_never_starts_from_a_branch_it_did_not_make() {
    let r = repo(&[("a", "")]);
    r.git(&["switch", "-q", "-c", "coord/t-1"]);
    r.write("old.txt", "someone's work\n");
    r.git(&["add", "old.txt"]);
    r.git(&["commit", "-qm", "old work"]);
    r.git(&["switch", "-q", "main"]);
    let old = r.git(&["rev-parse", "coord/t-1"]);
    r.write("coord.yaml", "defaults: {max_attempts: 1}\n");
    r.git(&["commit", "-qam", "one attempt"]);
    r.task("t", "title: Edit\nagent: a\n");
    let seen = tempfile::tempdir().expect("tmp");
    let script = format!("ls > {}/files; echo ok", seen.path().display());
    let (code, out, err) =
        crate::agents_run::run_to_end(&r, &args(&["a", "--worktree", "--once"], &sh(&script)));
    assert_eq!(code, 0, "{err}");
    assert!(
        !seen.path().join("files").exists(),
        "the command ran:\n{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("t attempt 1"))
        .unwrap_or("");
    assert!(
        line.contains("failed") && line.contains("coord/t-1") && line.contains("git branch"),
        "{out}"
    );
    assert_eq!(state(&r, "t"), "failed");
    assert_eq!(
        r.git(&["rev-parse", "coord/t-1"]),
        old,
        "the branch is untouched"
    );
    assert!(entries(&trees(&r)).is_empty(), "no worktree left");
}
