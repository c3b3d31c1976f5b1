//! Tests of the git layer against real temporary repositories.

use super::*;
use std::process::Command;
use tempfile::TempDir;

const NOW: i64 = 1_700_000_000;

pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "git {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// `git status --porcelain` listing every untracked file, one sorted line each.
fn status(dir: &Path) -> Vec<String> {
    let out = git(dir, &["status", "--porcelain", "--untracked-files=all"]);
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

pub(super) fn write(dir: &Path, path: &str, content: &str) {
    let full = dir.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, content).unwrap();
}

pub(super) fn new_repo() -> (TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::open_or_init(dir.path()).unwrap();
    (dir, repo)
}

pub(super) fn commit(repo: &Repo, paths: &[&str], message: &str) -> Option<Oid> {
    let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    let made = repo
        .commit_paths(&paths, message, &Identity::default(), now)
        .unwrap();
    repo.update_index(&paths).unwrap();
    made
}

fn rev(dir: &Path, spec: &str) -> String {
    git(dir, &["rev-parse", spec]).trim().to_string()
}

#[test]
fn identity_parses_name_and_email() {
    let id = Identity::parse("  Ada Lovelace <ada@example.com> ").unwrap();
    assert_eq!(id.name, "Ada Lovelace");
    assert_eq!(id.email, "ada@example.com");
    assert_eq!(Identity::default().to_string(), "coord <coord@localhost>");
    for bad in [
        "",
        "ada",
        "<ada@x>",
        "ada <>",
        "ada <a@x",
        "a<b <c@x>",
        "ada <a@x> z",
    ] {
        assert!(
            matches!(Identity::parse(bad), Err(GitError::BadIdentity(_))),
            "{bad}"
        );
    }
}

#[test]
fn unborn_branch_gets_a_root_commit_then_children() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    let head = repo.head().unwrap();
    assert_eq!((head.branch.as_deref(), head.oid), (Some("main"), None));
    assert_eq!(
        commit(&repo, &["work/a.yaml"], "nothing"),
        None,
        "absent path, no commit"
    );

    write(d, "work/a.yaml", "a: 1\n");
    let root = commit(&repo, &["work/a.yaml"], "coord: one").unwrap();
    assert_eq!(rev(d, "HEAD"), root.to_string());
    assert_eq!(git(d, &["rev-list", "--count", "HEAD"]).trim(), "1");
    let who = git(d, &["log", "-1", "--format=%an <%ae> %at|%cn <%ce> %ct"]);
    assert_eq!(
        who.trim(),
        format!("coord <coord@localhost> {NOW}|coord <coord@localhost> {NOW}")
    );

    write(d, "work/b.yaml", "b: 1\n");
    let child = commit(&repo, &["work/b.yaml", "work/a.yaml"], "coord: two").unwrap();
    assert_eq!(rev(d, "HEAD~1"), root.to_string());
    assert_eq!(repo.head().unwrap().oid, Some(child));

    assert_eq!(commit(&repo, &["work/a.yaml", "work/b.yaml"], "same"), None);
    assert_eq!(rev(d, "HEAD"), child.to_string());
    assert!(status(d).is_empty(), "{:?}", status(d));
}

#[test]
fn rename_is_one_commit_and_leaves_status_clean() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/inbox/t1.yaml", "id: t1\n");
    commit(&repo, &["work/inbox/t1.yaml"], "coord: new t1").unwrap();
    std::fs::create_dir_all(d.join("work/ready")).unwrap();
    std::fs::rename(d.join("work/inbox/t1.yaml"), d.join("work/ready/t1.yaml")).unwrap();

    let paths = ["work/inbox/t1.yaml", "work/ready/t1.yaml"];
    commit(&repo, &paths, "coord: ready t1").unwrap();
    assert_eq!(git(d, &["rev-list", "--count", "HEAD"]).trim(), "2");
    let shown = git(
        d,
        &["show", "--no-renames", "--name-status", "--format=", "HEAD"],
    );
    assert_eq!(shown, "D\twork/inbox/t1.yaml\nA\twork/ready/t1.yaml\n");
    assert!(status(d).is_empty(), "{:?}", status(d));
    // The stat data written into the index is right: no refresh needed to see it clean.
    assert_eq!(git(d, &["diff-files", "--name-only"]), "");
}

#[test]
fn user_staged_unstaged_and_untracked_changes_are_left_alone() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    for path in ["work/a.yaml", "staged.txt", "unstaged.txt"] {
        write(d, path, "v1\n");
    }
    commit(
        &repo,
        &["work/a.yaml", "staged.txt", "unstaged.txt"],
        "base",
    )
    .unwrap();
    write(d, "staged.txt", "v2\n");
    git(d, &["add", "staged.txt"]);
    write(d, "unstaged.txt", "v2\n");
    write(d, "untracked.txt", "new\n");
    write(d, "work/a.yaml", "v2\n");
    write(d, "work/b.yaml", "new\n");
    let before = status(d);
    assert!(before.contains(&" M work/a.yaml".to_string()), "{before:?}");

    commit(&repo, &["work/a.yaml", "work/b.yaml"], "coord: tick").unwrap();

    let expected: Vec<String> = before
        .into_iter()
        .filter(|l| !l.contains("work/"))
        .collect();
    assert_eq!(status(d), expected);
    assert_eq!(
        expected,
        [" M unstaged.txt", "?? untracked.txt", "M  staged.txt"]
    );
    let stat = git(d, &["show", "--stat", "--format=", "HEAD"]);
    assert!(
        stat.contains("work/a.yaml") && stat.contains("work/b.yaml"),
        "{stat}"
    );
    assert!(!stat.contains(".txt"), "{stat}");
    assert_eq!(repo.read_head_file("staged.txt").unwrap().unwrap(), b"v1\n");
}

#[test]
fn nested_folders_appear_and_empty_ones_disappear() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/ready/keep.yaml", "k\n");
    write(d, "work/assigned/alice/x.yaml", "x\n");
    commit(
        &repo,
        &["work/ready/keep.yaml", "work/assigned/alice/x.yaml"],
        "add",
    )
    .unwrap();
    let files = git(d, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert_eq!(files, "work/assigned/alice/x.yaml\nwork/ready/keep.yaml\n");

    std::fs::remove_file(d.join("work/assigned/alice/x.yaml")).unwrap();
    commit(&repo, &["work/assigned/alice/x.yaml"], "remove").unwrap();
    let dirs = git(d, &["ls-tree", "-r", "-d", "--name-only", "HEAD"]);
    assert_eq!(dirs, "work\nwork/ready\n");
    assert!(status(d).is_empty(), "{:?}", status(d));
}

#[cfg(unix)]
#[test]
fn executable_bit_and_symlinks_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(
        d.join("work/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("run.sh", d.join("work/link")).unwrap();
    commit(&repo, &["work/run.sh", "work/link"], "modes").unwrap();
    let tree = git(d, &["ls-tree", "-r", "HEAD"]);
    assert!(tree.contains("100755 blob"), "{tree}");
    assert!(tree.contains("120000 blob"), "{tree}");
    assert_eq!(
        repo.read_head_file("work/link").unwrap().unwrap(),
        b"run.sh"
    );
    assert!(status(d).is_empty(), "{:?}", status(d));
}

#[test]
fn branch_moved_meanwhile_is_a_conflict_and_branch_is_unchanged() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    commit(&repo, &["work/a.yaml"], "one").unwrap();
    let stale = repo.resolve_head().unwrap();
    git(d, &["commit", "-q", "--allow-empty", "-m", "someone else"]);
    let theirs = rev(d, "main");

    write(d, "work/a.yaml", "2\n");
    let paths = ["work/a.yaml".to_string()];
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    let result = repo.commit_onto(&stale, &paths, "two", &Identity::default(), now);
    let Err(err) = result else {
        panic!("expected a conflict")
    };
    assert!(matches!(&err, GitError::Conflict { branch, .. } if branch == "refs/heads/main"));
    assert!(err.to_string().contains("nothing was committed"), "{err}");
    assert_eq!(rev(d, "main"), theirs);
}

#[test]
fn unborn_branch_created_meanwhile_is_a_conflict() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    let stale = repo.resolve_head().unwrap();
    git(d, &["commit", "-q", "--allow-empty", "-m", "someone else"]);
    let theirs = rev(d, "main");
    write(d, "work/a.yaml", "1\n");
    let paths = ["work/a.yaml".to_string()];
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    let result = repo.commit_onto(&stale, &paths, "one", &Identity::default(), now);
    assert!(matches!(result, Err(GitError::Conflict { .. })));
    assert_eq!(rev(d, "main"), theirs);
}

#[test]
fn detached_head_commits_on_head() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    let first = commit(&repo, &["work/a.yaml"], "one").unwrap();
    git(d, &["checkout", "-q", "--detach"]);
    write(d, "work/a.yaml", "2\n");
    let second = commit(&repo, &["work/a.yaml"], "two").unwrap();
    assert_eq!(
        repo.head().unwrap(),
        HeadInfo {
            branch: None,
            oid: Some(second)
        }
    );
    assert_eq!(rev(d, "main"), first.to_string());
}

#[test]
fn changed_paths_lists_every_kind_of_change_under_the_prefix() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    let base = [
        "work/a.yaml",
        "work/b.yaml",
        "work/c.yaml",
        "other/x.txt",
        ".gitignore",
    ];
    for path in base {
        write(d, path, "1\n");
    }
    write(d, ".gitignore", "*.tmp\n");
    commit(&repo, &base, "base").unwrap();
    assert!(repo.changed_paths("work/").unwrap().is_empty());

    write(d, "work/a.yaml", "2\n");
    std::fs::remove_file(d.join("work/b.yaml")).unwrap();
    git(d, &["mv", "work/c.yaml", "work/d.yaml"]);
    write(d, "work/new/deep/e.yaml", "new\n");
    write(d, "work/ignored.tmp", "junk\n");
    write(d, "other/x.txt", "changed outside the prefix\n");
    write(d, "workshop/z.yaml", "outside\n");

    let changed = repo.changed_paths("work/").unwrap();
    let expected = ["work/a.yaml", "work/b.yaml", "work/c.yaml", "work/d.yaml"];
    let expected: Vec<&str> = expected
        .into_iter()
        .chain(["work/new/deep/e.yaml"])
        .collect();
    assert_eq!(changed, expected);

    // Recording them leaves nothing to record.
    commit(
        &repo,
        &changed.iter().map(String::as_str).collect::<Vec<_>>(),
        "external",
    )
    .unwrap();
    assert!(repo.changed_paths("work/").unwrap().is_empty());
    assert_eq!(status(d), [" M other/x.txt", "?? workshop/z.yaml"]);
}

#[test]
fn log_reads_trailers_newest_first_and_respects_limit() {
    let (dir, repo) = new_repo();
    assert!(
        repo.log(None).unwrap().is_empty(),
        "unborn HEAD has no history"
    );
    for (i, to) in ["ready", "assigned", "done"].into_iter().enumerate() {
        write(dir.path(), "work/t.yaml", &format!("{i}\n"));
        let message = format!("coord: {to} t\n\nCoord-Task: t\nCoord-To: {to}");
        commit(&repo, &["work/t.yaml"], &message).unwrap();
    }
    let log = repo.log(None).unwrap();
    let summaries: Vec<&str> = log.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(
        summaries,
        ["coord: done t", "coord: assigned t", "coord: ready t"]
    );
    let trailers = [("Coord-Task", "t"), ("Coord-To", "done")].map(|(k, v)| (k.into(), v.into()));
    assert_eq!(log[0].trailers, trailers);
    assert_eq!(log[0].time.as_second(), NOW);
    assert_eq!(log[0].oid, rev(dir.path(), "HEAD"));
    assert_eq!(repo.log(Some(2)).unwrap(), log[..2]);
}

#[test]
fn trailers_read_as_typed_endpoints_and_a_stray_value_as_none() {
    use crate::model::{Circuit, Endpoint, State};
    let trailers = [
        ("Coord-Task", "t"),
        ("Coord-From", "new"),
        ("Coord-To", "inbox"),
        ("Coord-Agent", "alice"),
        ("Coord-From", "agent"),
        ("Coord-To", "circuit half_open"),
        ("Coord-Task", "u"),
        ("Coord-From", "nowhere"),
        ("Coord-To", "done"),
    ];
    let ends: Vec<_> = recorded(trailers)
        .into_iter()
        .map(|r| (r.subject, r.agent, r.from, r.to))
        .collect();
    assert_eq!(
        ends,
        [
            (
                "t".into(),
                false,
                Some(Endpoint::New),
                Some(State::Inbox.into())
            ),
            (
                "alice".into(),
                true,
                Some(Endpoint::Agent),
                Some(Endpoint::Circuit(Circuit::HalfOpen))
            ),
            ("u".into(), false, None, Some(State::Done.into())),
        ]
    );
}

#[test]
fn read_head_file_returns_none_when_absent() {
    let (dir, repo) = new_repo();
    assert_eq!(repo.read_head_file("work/a.yaml").unwrap(), None);
    write(dir.path(), "work/a.yaml", "a\n");
    commit(&repo, &["work/a.yaml"], "a").unwrap();
    assert_eq!(repo.read_head_file("work/a.yaml").unwrap().unwrap(), b"a\n");
    assert_eq!(repo.read_head_file("work/b.yaml").unwrap(), None);
    assert!(matches!(
        repo.read_head_file("work"),
        Err(GitError::BadPath { .. })
    ));
}

#[test]
fn discover_finds_the_root_from_a_subfolder() {
    let (dir, _) = new_repo();
    std::fs::create_dir_all(dir.path().join("work/inbox")).unwrap();
    let repo = Repo::discover(&dir.path().join("work/inbox")).unwrap();
    let root = dir.path().canonicalize().unwrap();
    assert_eq!(repo.workdir().canonicalize().unwrap(), root);
    assert_eq!(repo.git_dir().canonicalize().unwrap(), root.join(".git"));
    let again = Repo::open_or_init(dir.path()).unwrap();
    assert_eq!(again.git_dir(), repo.git_dir());
}

#[test]
fn discover_outside_a_repository_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let err = Repo::discover(dir.path()).unwrap_err();
    assert!(matches!(err, GitError::NotARepository { .. }), "{err:?}");
    assert!(
        err.to_string().contains("is not in a git repository"),
        "{err}"
    );
}

#[test]
fn bare_repository_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "--bare"]);
    assert!(matches!(
        Repo::discover(dir.path()),
        Err(GitError::Bare { .. })
    ));
}

/// Not a test: prints how commit_paths of one file scales with the size of HEAD's tree.
/// Run with `cargo test --lib timing -- --ignored --nocapture`.
#[test]
#[ignore = "timing report, not a check"]
fn timing_commit_one_file_1k_vs_20k() {
    for n in [1_000, 20_000] {
        let (dir, repo) = new_repo();
        let d = dir.path();
        std::fs::create_dir_all(d.join("work/done")).unwrap();
        for i in 0..n {
            std::fs::write(
                d.join(format!("work/done/t{i:05}.yaml")),
                format!("id: t{i}\n"),
            )
            .unwrap();
        }
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "base"]);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let (mut tree, mut index, mut total) = (Vec::new(), Vec::new(), Vec::new());
        let now = jiff::Timestamp::from_second(NOW).unwrap();
        for round in 0..14 {
            // Odd rounds add to the big folder (its tree object is rewritten whole).
            let folder = if round % 2 == 0 { "inbox" } else { "done" };
            let path = format!("work/{folder}/new{round}.yaml");
            write(d, &path, "id: new\n");
            let start = std::time::Instant::now();
            let head = repo.resolve_head().unwrap();
            repo.commit_onto(
                &head,
                std::slice::from_ref(&path),
                "m",
                &Identity::default(),
                now,
            )
            .unwrap()
            .unwrap();
            let committed = start.elapsed();
            repo.update_index(&[path]).unwrap();
            total.push(start.elapsed());
            tree.push(committed);
            index.push(start.elapsed() - committed);
        }
        assert!(status(d).is_empty());
        let median = |v: &[std::time::Duration], parity: usize| {
            let mut v: Vec<_> = v.iter().skip(parity).step_by(2).collect();
            v.sort();
            *v[v.len() / 2]
        };
        for (parity, folder) in [(0, "other folder"), (1, "same folder")] {
            println!(
                "{n:>6} files, new file in {folder}: commit_paths {:?} = tree+commit+ref {:?} \
                 + index {:?} (median of 7)",
                median(&total, parity),
                median(&tree, parity),
                median(&index, parity)
            );
        }
    }
}

#[test]
fn commits_without_index_then_one_index_update_leave_status_clean() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    write(d, "work/gone.yaml", "1\n");
    commit(&repo, &["work/a.yaml", "work/gone.yaml"], "base").unwrap();
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    let id = Identity::default();
    write(d, "work/a.yaml", "2\n");
    write(d, "work/b.yaml", "new\n");
    std::fs::remove_file(d.join("work/gone.yaml")).unwrap();
    let first = ["work/a.yaml".to_string(), "work/gone.yaml".to_string()];
    repo.commit_paths(&first, "one", &id, now).unwrap().unwrap();
    let second = ["work/b.yaml".to_string()];
    repo.commit_paths(&second, "two", &id, now)
        .unwrap()
        .unwrap();
    assert_eq!(git(d, &["rev-list", "--count", "HEAD"]).trim(), "3");
    assert!(!status(d).is_empty(), "the index still has the old entries");
    // Edited after its commit, before the index update: must stay visible as unstaged.
    write(d, "work/b.yaml", "edited later\n");

    let all: Vec<String> = first.iter().chain(&second).cloned().collect();
    repo.update_index(&all).unwrap();
    assert_eq!(status(d), [" M work/b.yaml"]);
    assert_eq!(git(d, &["diff", "--cached", "--name-only"]), "");
    write(d, "work/b.yaml", "new\n");
    assert!(status(d).is_empty(), "{:?}", status(d));
}

#[test]
fn bad_paths_are_refused_before_anything_is_written() {
    let (dir, repo) = new_repo();
    std::fs::create_dir_all(dir.path().join("work/dir")).unwrap();
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    for bad in [
        "",
        "/etc/passwd",
        "../x",
        "work/../x",
        "work//x",
        "./x",
        ".git/config",
        "a\0b",
        "work/dir",
    ] {
        let result = repo.commit_paths(&[bad.to_string()], "m", &Identity::default(), now);
        assert!(
            matches!(result, Err(GitError::BadPath { .. })),
            "{bad:?}: {result:?}"
        );
    }
    assert_eq!(repo.head().unwrap().oid, None);
}

#[test]
fn stale_locks_of_a_killed_coord_are_removed_and_live_ones_waited_for() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    let ours = commit(&repo, &["work/a.yaml"], "coord: one").unwrap();
    let lock = repo.git_dir().join("refs/heads/main.lock");
    std::fs::write(&lock, format!("{ours}\n")).unwrap();
    let removed = repo.remove_stale_locks(std::time::Duration::ZERO).unwrap();
    assert_eq!(
        removed,
        vec![lock.clone()],
        "coord's own commit: removed at once"
    );

    write(d, "work/b.yaml", "2\n");
    let theirs = commit(&repo, &["work/b.yaml"], "a person's commit").unwrap();
    let index_lock = repo.git_dir().join("index.lock");
    std::fs::write(&index_lock, "").unwrap();
    std::fs::write(&lock, format!("{theirs}\n")).unwrap();
    let grace = std::time::Duration::from_millis(200);
    let removed = repo.remove_stale_locks(grace).unwrap();
    assert_eq!(
        removed,
        vec![index_lock, lock.clone()],
        "both outlived the grace"
    );

    std::fs::write(&lock, format!("{theirs}\n")).unwrap();
    let holder = std::thread::spawn({
        let lock = lock.clone();
        move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            std::fs::remove_file(lock).unwrap();
        }
    });
    let removed = repo
        .remove_stale_locks(std::time::Duration::from_secs(5))
        .unwrap();
    holder.join().unwrap();
    assert!(
        removed.is_empty(),
        "a live git's lock is waited for, not removed"
    );
}

#[test]
fn an_index_write_killed_inside_libgit2_does_not_stop_the_next_one() {
    // libgit2 writes coord's index copy through `.git/coord/index.next.lock`; a run killed
    // inside that write leaves the lock, and no other process ever takes it.
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    commit(&repo, &["work/a.yaml"], "coord: one").unwrap();
    let coord_dir = repo.git_dir().join("coord");
    std::fs::create_dir_all(&coord_dir).unwrap();
    std::fs::write(coord_dir.join("index.next"), "half an index").unwrap();
    std::fs::write(coord_dir.join("index.next.lock"), "half an index").unwrap();
    let hold = repo.hold_index().unwrap();
    repo.update_index_holding(&["work/a.yaml".to_string()], Some(hold))
        .unwrap();
    assert!(!repo.git_dir().join("index.lock").exists());
    assert!(!coord_dir.join("index.next.lock").exists());
    let out = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

/// Holds `lock` (as another git process would) and releases it after `ms` milliseconds.
fn hold_for(lock: PathBuf, ms: u64) -> std::thread::JoinHandle<()> {
    std::fs::write(&lock, "held by a test\n").unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(ms));
        std::fs::remove_file(lock).unwrap();
    })
}

#[test]
fn a_branch_lock_held_for_a_moment_is_waited_for() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    commit(&repo, &["work/a.yaml"], "one").unwrap();
    let holder = hold_for(d.join(".git/refs/heads/main.lock"), 400);
    write(d, "work/a.yaml", "2\n");
    let made = commit(&repo, &["work/a.yaml"], "two");
    holder.join().unwrap();
    assert_eq!(made.map(|o| o.to_string()), Some(rev(d, "main")));
}

#[test]
fn a_branch_lock_held_throughout_is_named_and_no_move_is_reported() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    commit(&repo, &["work/a.yaml"], "one").unwrap();
    let before = rev(d, "main");
    std::fs::write(d.join(".git/refs/heads/main.lock"), "held\n").unwrap();
    write(d, "work/a.yaml", "2\n");
    let paths = ["work/a.yaml".to_string()];
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    let start = std::time::Instant::now();
    let err = repo
        .commit_paths(&paths, "two", &Identity::default(), now)
        .unwrap_err();
    assert!(start.elapsed() >= locks::LOCK_WAIT, "{:?}", start.elapsed());
    assert!(matches!(err, GitError::Locked { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("refs/heads/main.lock is held by an unknown process (no process on this machine has it open) for "), "{message}");
    assert!(
        message.contains("remove the file and run coord again"),
        "{message}"
    );
    assert!(!message.contains("moved"), "{message}");
    assert_eq!(rev(d, "main"), before);
}

#[test]
fn an_index_lock_held_for_a_moment_is_waited_for() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    let paths = ["work/a.yaml".to_string()];
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    repo.commit_paths(&paths, "one", &Identity::default(), now)
        .unwrap();
    let holder = hold_for(d.join(".git/index.lock"), 400);
    repo.update_index(&paths).unwrap();
    holder.join().unwrap();
    assert_eq!(status(d), Vec::<String>::new());
}

fn loose_count(dir: &Path) -> usize {
    let out = git(dir, &["count-objects", "-v"]);
    out.lines()
        .find_map(|l| l.strip_prefix("count: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[test]
fn packing_moves_loose_objects_into_one_pack_and_keeps_every_object() {
    let (dir, repo) = new_repo();
    for i in 0..40 {
        let path = format!("work/inbox/t-{i}.yaml");
        write(dir.path(), &path, &format!("title: task {i}\n"));
        commit(&repo, &[path.as_str()], &format!("add {i}"));
    }
    let before = loose_count(dir.path());
    assert!(before >= 120, "{before} loose objects");
    assert!(!repo.pack_loose_objects(usize::MAX).unwrap());
    assert_eq!(loose_count(dir.path()), before);
    assert!(repo.pack_loose_objects(0).unwrap());
    // git's empty tree (the repository's first tree) is built into git: it stays loose.
    let empty_tree = dir
        .path()
        .join(".git/objects/4b/825dc642cb6eb9a060e54bf8d69288fbee4904");
    assert_eq!(loose_count(dir.path()), usize::from(empty_tree.exists()));
    git(dir.path(), &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(
        git(dir.path(), &["rev-list", "--count", "HEAD"]).trim(),
        "40"
    );
    assert_eq!(
        repo.read_head_file("work/inbox/t-7.yaml").unwrap().unwrap(),
        b"title: task 7\n"
    );
    write(dir.path(), "work/inbox/t-7.yaml", "title: changed\n");
    assert!(commit(&repo, &["work/inbox/t-7.yaml"], "change").is_some());
    assert!(status(dir.path()).is_empty());
}

/// A repo whose `work/a.yaml` was edited differently on `main` and on `side`, with a change of
/// coord's (`work/b.yaml`) in the work tree waiting to be committed.
fn diverged_with_pending_change() -> (TempDir, Repo) {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "title: base\n");
    commit(&repo, &["work/a.yaml"], "base").unwrap();
    git(d, &["switch", "-q", "-c", "side"]);
    write(d, "work/a.yaml", "title: side\n");
    git(d, &["commit", "-q", "-am", "side"]);
    git(d, &["switch", "-q", "main"]);
    write(d, "work/a.yaml", "title: main\n");
    git(d, &["commit", "-q", "-am", "main"]);
    write(d, "work/b.yaml", "title: coord's\n");
    (dir, repo)
}

/// Runs git expecting it to stop on a conflict.
fn git_conflicts(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap();
    assert!(!out.status.success(), "git {args:?} should have conflicted");
}

#[test]
fn a_merge_started_while_coord_works_stops_its_next_commit_and_index_write() {
    let (dir, repo) = diverged_with_pending_change();
    let d = dir.path();
    let head = rev(d, "HEAD");
    git_conflicts(d, &["merge", "-q", "side"]);
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    let paths = ["work/b.yaml".to_string()];
    let result = repo.commit_paths(&paths, "coord: b", &Identity::default(), now);
    assert!(
        matches!(result, Err(GitError::Unfinished(Unfinished::Merge))),
        "{result:?}"
    );
    assert_eq!(rev(d, "HEAD"), head);
    let result = repo.update_index(&["work/a.yaml".to_string()]);
    assert!(matches!(result, Err(GitError::Unfinished(_))), "{result:?}");
    assert!(
        !git(d, &["ls-files", "-u"]).is_empty(),
        "the conflict stays"
    );
    git(d, &["merge", "--abort"]);
    assert_eq!(rev(d, "HEAD"), head);
}

#[test]
fn a_rebase_started_while_coord_works_stops_its_next_commit() {
    let (dir, repo) = diverged_with_pending_change();
    let d = dir.path();
    let head = rev(d, "main");
    git_conflicts(d, &["rebase", "-q", "side"]);
    let now = jiff::Timestamp::from_second(NOW).unwrap();
    let paths = ["work/b.yaml".to_string()];
    let result = repo.commit_paths(&paths, "coord: b", &Identity::default(), now);
    assert!(
        matches!(result, Err(GitError::Unfinished(Unfinished::Rebase))),
        "{result:?}"
    );
    git(d, &["rebase", "--abort"]);
    assert_eq!(rev(d, "main"), head);
    assert_eq!(repo.head().unwrap().branch.as_deref(), Some("main"));
}

#[test]
fn a_stash_pop_conflict_while_coord_works_stops_its_index_write() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "title: base\n");
    commit(&repo, &["work/a.yaml"], "base").unwrap();
    write(d, "work/a.yaml", "title: stashed\n");
    git(d, &["stash", "-q"]);
    write(d, "work/a.yaml", "title: committed\n");
    git(d, &["commit", "-q", "-am", "committed"]);
    git_conflicts(d, &["stash", "pop", "-q"]);
    let result = repo.update_index(&["work/a.yaml".to_string()]);
    assert!(
        matches!(result, Err(GitError::Unfinished(Unfinished::Unmerged(_)))),
        "{result:?}"
    );
    assert!(
        !git(d, &["ls-files", "-u"]).is_empty(),
        "the conflict stays"
    );
}

#[test]
fn switching_from_a_commit_the_branch_moved_on_from_writes_nothing() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    let first = commit(&repo, &["work/a.yaml"], "one").unwrap();
    write(d, "work/a.yaml", "2\n");
    let second = commit(&repo, &["work/a.yaml"], "two").unwrap();
    write(d, "notes.txt", "mine\n");
    git(d, &["add", "notes.txt"]);
    git(d, &["commit", "-q", "-m", "a person's commit"]);
    let theirs = rev(d, "main");
    let result = repo.switch_to(Some(second), first);
    assert!(matches!(result, Err(GitError::Moved { .. })), "{result:?}");
    assert_eq!(rev(d, "main"), theirs);
    assert_eq!(
        std::fs::read_to_string(d.join("work/a.yaml")).unwrap(),
        "2\n"
    );
    assert!(status(d).is_empty(), "{:?}", status(d));
    repo.switch_to(Some(Oid::from_str(&theirs).unwrap()), first)
        .unwrap();
    assert_eq!(rev(d, "main"), first.to_string());
}

#[test]
fn switching_while_a_persons_git_holds_the_index_waits_and_leaves_a_consistent_tree() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "1\n");
    let first = commit(&repo, &["work/a.yaml"], "one").unwrap();
    write(d, "work/a.yaml", "2\n");
    write(d, "work/b.yaml", "new\n");
    let second = commit(&repo, &["work/a.yaml", "work/b.yaml"], "two").unwrap();
    let holder = hold_for(d.join(".git/index.lock"), 400);
    repo.switch_to(Some(second), first).unwrap();
    holder.join().unwrap();
    assert_eq!(rev(d, "main"), first.to_string());
    assert_eq!(status(d), Vec::<String>::new());
    assert!(!d.join("work/b.yaml").exists());
}

/// Two commits: `first` with work/a.yaml, then `second` changing it and adding work/b.yaml.
fn two_commits(repo: &Repo, d: &Path) -> (Oid, Oid) {
    write(d, "work/a.yaml", "1\n");
    let first = commit(repo, &["work/a.yaml"], "one").unwrap();
    write(d, "work/a.yaml", "2\n");
    write(d, "work/b.yaml", "new\n");
    let second = commit(repo, &["work/a.yaml", "work/b.yaml"], "two").unwrap();
    (first, second)
}

/// A repo in the state a kill -9 inside `switch_to` leaves: switching from `second` back to
/// `first` (returned), journaled, work tree and index at `first`, branch still at `second`.
fn switch_killed_before_the_ref_moved() -> (TempDir, Repo, Oid) {
    let (dir, repo) = new_repo();
    let (first, second) = two_commits(&repo, dir.path());
    let switch = rewrite::Switch {
        refname: "refs/heads/main".into(),
        from: Some(second),
        to: first,
    };
    repo.journal_switch(&switch).unwrap();
    repo.checkout_to(
        "refs/heads/main",
        first,
        rewrite::Checkout::From(Some(second)),
    )
    .unwrap();
    (dir, repo, first)
}

#[test]
fn a_switch_killed_between_the_work_tree_and_the_branch_is_finished_by_the_next_run() {
    let (dir, repo, first) = switch_killed_before_the_ref_moved();
    let d = dir.path();
    assert!(
        !status(d).is_empty(),
        "the half-done switch shows as changes"
    );
    let done = repo.finish_switch().unwrap();
    assert!(done.unwrap().contains("finished an interrupted switch"));
    assert_eq!(rev(d, "main"), first.to_string());
    assert_eq!(status(d), Vec::<String>::new());
    assert!(!d.join("work/b.yaml").exists());
    assert_eq!(repo.finish_switch().unwrap(), None, "the journal is gone");
}

#[test]
fn a_switch_killed_after_the_branch_moved_only_drops_its_journal() {
    let (dir, repo, first) = switch_killed_before_the_ref_moved();
    let d = dir.path();
    git(d, &["update-ref", "refs/heads/main", &first.to_string()]);
    assert_eq!(repo.finish_switch().unwrap(), None);
    assert_eq!(rev(d, "main"), first.to_string());
    assert_eq!(status(d), Vec::<String>::new());
    assert!(!d.join(".git/coord/switch").exists());
}

#[test]
fn a_persons_commit_after_a_killed_switch_stands_and_the_switch_is_dropped() {
    let (dir, repo, _) = switch_killed_before_the_ref_moved();
    let d = dir.path();
    git(
        d,
        &["commit", "-q", "-m", "a person's commit of what they saw"],
    );
    let theirs = rev(d, "main");
    let done = repo.finish_switch().unwrap().unwrap();
    assert!(done.contains("the branch moved since"), "{done}");
    assert_eq!(rev(d, "main"), theirs);
    assert!(!d.join(".git/coord/switch").exists());
}

#[test]
fn a_switch_killed_while_libgit2_wrote_a_file_is_finished_and_other_files_stay() {
    let (dir, repo, first) = switch_killed_before_the_ref_moved();
    let d = dir.path();
    write(d, "work/a.yaml", "");
    write(d, "other.txt", "a person's file\n");
    let done = repo.finish_switch().unwrap();
    assert!(done.unwrap().contains("finished an interrupted switch"));
    assert_eq!(rev(d, "main"), first.to_string());
    assert_eq!(
        std::fs::read_to_string(d.join("work/a.yaml")).unwrap(),
        "1\n"
    );
    assert_eq!(status(d), vec!["?? other.txt".to_string()]);
}

/// A repo whose switch from `second` (work/a.yaml "a b c2") back to `first` ("a b c") was
/// journaled and killed before the checkout wrote anything.
fn switch_killed_before_the_checkout() -> (TempDir, Repo, Oid) {
    let (dir, repo) = new_repo();
    let d = dir.path();
    write(d, "work/a.yaml", "a\nb\nc\n");
    let first = commit(&repo, &["work/a.yaml"], "one").unwrap();
    write(d, "work/a.yaml", "a\nb\nc2\n");
    let second = commit(&repo, &["work/a.yaml"], "two").unwrap();
    let switch = rewrite::Switch {
        refname: "refs/heads/main".into(),
        from: Some(second),
        to: first,
    };
    repo.journal_switch(&switch).unwrap();
    (dir, repo, first)
}

#[test]
fn a_persons_edit_after_a_killed_switch_is_merged_onto_its_target_not_written_over() {
    let (dir, repo, first) = switch_killed_before_the_checkout();
    let d = dir.path();
    write(d, "work/a.yaml", "A\nb\nc2\n");
    let done = repo.finish_switch().unwrap().unwrap();
    assert!(
        done.contains("work/a.yaml was changed after it was cut short"),
        "{done}"
    );
    assert_eq!(rev(d, "main"), first.to_string());
    let now = std::fs::read_to_string(d.join("work/a.yaml")).unwrap();
    assert_eq!(now, "A\nb\nc\n");
}

#[test]
fn a_persons_edit_after_a_killed_switch_that_does_not_merge_is_saved() {
    let (dir, repo, first) = switch_killed_before_the_checkout();
    let d = dir.path();
    write(d, "work/a.yaml", "a\nb\nmine\n");
    let done = repo.finish_switch().unwrap().unwrap();
    let saved = d.join(format!(".git/coord/kept/{first}/work/a.yaml"));
    assert!(done.contains(&saved.display().to_string()), "{done}");
    assert_eq!(std::fs::read_to_string(saved).unwrap(), "a\nb\nmine\n");
    let now = std::fs::read_to_string(d.join("work/a.yaml")).unwrap();
    assert_eq!(now, "a\nb\nc\n");
}

#[test]
fn a_switch_over_an_uncommitted_edit_stops_before_its_journal() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    let (first, second) = two_commits(&repo, d);
    write(d, "work/a.yaml", "mine\n");
    let err = repo.switch_to(Some(second), first).unwrap_err();
    assert!(
        err.to_string().contains("work/a.yaml, which it changes"),
        "{err}"
    );
    assert!(!d.join(".git/coord/switch").exists());
    assert_eq!(
        std::fs::read_to_string(d.join("work/a.yaml")).unwrap(),
        "mine\n"
    );
}

#[test]
fn a_persons_commit_while_a_switch_waits_for_the_index_is_not_written_over() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    let (first, second) = two_commits(&repo, d);
    let tree = format!("{second}^{{tree}}");
    let theirs = git(
        d,
        &[
            "commit-tree",
            &tree,
            "-p",
            &second.to_string(),
            "-m",
            "mine",
        ],
    );
    let theirs = theirs.trim().to_string();
    let holder = hold_for(d.join(".git/index.lock"), 400);
    let (dir_path, commit) = (d.to_path_buf(), theirs.clone());
    let person = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        git(&dir_path, &["update-ref", "refs/heads/main", &commit]);
    });
    let result = repo.switch_to(Some(second), first);
    holder.join().unwrap();
    person.join().unwrap();
    assert!(result.is_err(), "{result:?}");
    assert_eq!(rev(d, "main"), theirs);
    assert!(
        git(d, &["diff", "--cached", "--name-only"]).is_empty(),
        "the index was written over the person's commit"
    );
}

/// One commit of a group of paths spread over a big folder, a nested one, a new one and the
/// root: the tree built folder by folder (each folder's tree read once) is the one git makes of
/// the same work tree.
#[test]
fn a_group_commit_over_a_big_folder_builds_the_tree_git_would() {
    let (dir, repo) = new_repo();
    let d = dir.path();
    let mut all = vec!["top.txt".to_string(), "work/done/old.yaml".to_string()];
    for i in 0..300 {
        all.push(format!("work/inbox/t{i:03}.yaml"));
    }
    for path in &all {
        write(d, path, &format!("{path}\n"));
    }
    let all_refs: Vec<&str> = all.iter().map(String::as_str).collect();
    commit(&repo, &all_refs, "base").unwrap();

    let mut group = Vec::new();
    for i in (0..300).step_by(3) {
        let from = format!("work/inbox/t{i:03}.yaml");
        let to = format!("work/assigned/a/b/t{i:03}.yaml");
        write(d, &to, &format!("{to}\n"));
        std::fs::remove_file(d.join(&from)).unwrap();
        group.extend([from, to]);
    }
    write(d, "work/inbox/t001.yaml", "edited\n");
    write(d, "top.txt", "edited\n");
    std::fs::remove_file(d.join("work/done/old.yaml")).unwrap();
    group.extend(["work/inbox/t001.yaml", "top.txt", "work/done/old.yaml"].map(String::from));
    group.push("work/never/was.yaml".to_string());
    let refs: Vec<&str> = group.iter().map(String::as_str).collect();
    commit(&repo, &refs, "group").unwrap();

    assert!(status(d).is_empty(), "{:?}", status(d));
    let ours = rev(d, "HEAD^{tree}");
    git(d, &["add", "-A"]);
    assert_eq!(git(d, &["write-tree"]).trim(), ours);
    let dirs = git(d, &["ls-tree", "-r", "-d", "--name-only", "HEAD"]);
    assert_eq!(
        dirs,
        "work\nwork/assigned\nwork/assigned/a\nwork/assigned/a/b\nwork/inbox\n"
    );
}
