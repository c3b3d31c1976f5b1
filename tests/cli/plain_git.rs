//! People using plain git in a clone while coord works in it: a commit, a merge or a rebase
//! made while `coord sync` or `coord claim --sync` is between its steps must neither be lost
//! nor be committed into by coord.

use crate::harness::{Net, TestRepo};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Holds the clone's first push at a gate: `origin`'s receive-pack runs through a script that
/// writes `started`, then waits for `go` to exist; later pushes pass. Returns (started, go).
pub fn gate_pushes(clone: &TestRepo) -> (PathBuf, PathBuf) {
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
pub fn wait_for(path: &std::path::Path) {
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
    clone.task("dropped", &crate::harness::task_yaml("dropped"));
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

/// Runs git in `dir`; returns whether it succeeded.
fn git_try(dir: &std::path::Path, args: &[&str]) -> bool {
    let mut c = std::process::Command::new("git");
    c.current_dir(dir).args(args);
    for (k, v) in crate::harness::git_env() {
        c.env(k, v);
    }
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c.status().is_ok_and(|s| s.success())
}

/// Gets `repo` out of a git operation with `abort` (e.g. `merge --abort`), trying again while
/// coord holds one of git's locks for a moment; returns git's complaint when it cannot.
fn abort(dir: &std::path::Path, abort: &[&str]) -> Option<String> {
    let mut last = String::new();
    for _ in 0..50 {
        let mut c = std::process::Command::new("git");
        c.current_dir(dir).args(abort);
        for (k, v) in crate::harness::git_env() {
            c.env(k, v);
        }
        let out = c.output().expect("git");
        if out.status.success() {
            return None;
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(last)
}

/// Edits the title of one task of `folder` in `repo`, if it has one.
fn edit_a_title(repo: &TestRepo, folder: &str, rng: &mut crate::harness::Rng, mark: &str) {
    let names: Vec<String> = std::fs::read_dir(repo.abs(folder))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(name) = rng.pick(&names) {
        let path = format!("{folder}/{name}");
        if let Ok(text) = std::fs::read_to_string(repo.abs(&path)) {
            let _ = std::fs::write(
                repo.abs(&path),
                text.replacen("title: ", &format!("title: {mark} "), 1),
            );
        }
    }
}

/// One round of a person working with plain git in a clone where coord watches and syncs:
/// edit and commit, pull with rebase or merge (aborting a conflict), stash and pop, gc.
/// Returns a line when git could not get out of an operation.
fn person_in_watched_clone(
    repo: &TestRepo,
    round: usize,
    rng: &mut crate::harness::Rng,
) -> Option<String> {
    let d = repo.path();
    edit_a_title(repo, "work/ready", rng, &format!("mine{round}"));
    git_try(d, &["commit", "-qam", &format!("my edit {round}")]);
    match rng.below(5) {
        0 => {
            if !git_try(d, &["pull", "-q", "--rebase", "origin", "main"])
                && d.join(".git/rebase-merge").exists()
            {
                if let Some(e) = abort(d, &["rebase", "--abort"]) {
                    return Some(format!("round {round}: git rebase --abort failed: {e}"));
                }
            }
        }
        1 => {
            if !git_try(d, &["pull", "-q", "--no-rebase", "origin", "main"])
                && d.join(".git/MERGE_HEAD").exists()
            {
                if let Some(e) = abort(d, &["merge", "--abort"]) {
                    return Some(format!("round {round}: git merge --abort failed: {e}"));
                }
            }
        }
        2 => {
            edit_a_title(repo, "work/ready", rng, "stashed");
            if git_try(d, &["stash", "-q"]) && !git_try(d, &["stash", "pop", "-q"]) {
                git_try(d, &["reset", "-q", "--merge"]);
            }
        }
        3 => {
            git_try(d, &["gc", "-q"]);
        }
        _ => {
            git_try(d, &["push", "-q", "origin", "main"]);
        }
    }
    None
}

/// Checks a repository's whole branch history: no conflict marker ever committed, and each
/// task id in one place at the tip.
fn check_history(repo: &TestRepo, branch: &str) {
    let markers = repo.git(&["log", "--format=%H %s", "-G^(<<<<<<<|>>>>>>>)( |$)", branch]);
    assert!(markers.is_empty(), "conflict markers committed:\n{markers}");
    let mut places: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for path in repo
        .git(&["ls-tree", "-r", "--name-only", branch, "work"])
        .lines()
    {
        if path.ends_with(".yaml") && !path.starts_with("work/agents/") {
            let (folder, name) = path.rsplit_once('/').expect("folder");
            places
                .entry(name.to_string())
                .or_default()
                .push(folder.to_string());
        }
    }
    for (id, at) in &places {
        if at.len() > 1 {
            let paths: Vec<String> = at.iter().map(|f| format!("{f}/{id}")).collect();
            let mut args = vec![
                "log",
                "--format=%h %p %an: %s",
                "--name-status",
                branch,
                "--",
            ];
            args.extend(paths.iter().map(String::as_str));
            panic!(
                "{id} is in {at:?} at the tip of {branch}:\n{}",
                repo.git(&args)
            );
        }
    }
}

/// `COORD_LONG=1`: a person works with plain git (commit, pull --rebase and merge with
/// conflicts aborted, stash, gc, push) in a clone where `coord watch` runs and `coord sync`
/// loops, while another person pushes edits of the same tasks and another clone syncs.
#[test]
fn people_running_git_in_a_clone_where_coord_works_never_corrupt_it() {
    if std::env::var_os("COORD_LONG").is_none() {
        return;
    }
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let net = Arc::new(Net::new(&["a1", "a2"]));
    net.person_adds("start", 20);
    let busy = Arc::new(Net::clone(&net));
    let other = Arc::new(Net::clone(&net));
    let mut watch = busy.spawn(&["watch", "--interval", "1s"]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    let problems = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    for (n, repo) in [Arc::clone(&busy), Arc::clone(&other)]
        .into_iter()
        .enumerate()
    {
        let (stop, problems) = (Arc::clone(&stop), Arc::clone(&problems));
        workers.push(std::thread::spawn(move || {
            let mut syncs = 0;
            while !stop.load(Ordering::Relaxed) {
                let out = repo.run(&["sync", "--wait", "5s"]);
                let err = String::from_utf8_lossy(&out.stderr).into_owned();
                syncs += 1;
                // Expected refusals: a person's merge to integrate, an operation in progress,
                // uncommitted changes in the way, the branch moved meanwhile.
                let expected = [
                    "but not a merge",
                    "in progress",
                    "unmerged",
                    "uncommitted",
                    "moved while coord",
                    "same lines",
                    "is held by",
                ];
                if !out.status.success() && !expected.iter().any(|e| err.contains(e)) {
                    problems
                        .lock()
                        .expect("log")
                        .push(format!("clone {n}: {err}"));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            syncs
        }));
    }
    {
        let (stop, busy, problems) = (Arc::clone(&stop), Arc::clone(&busy), Arc::clone(&problems));
        workers.push(std::thread::spawn(move || {
            let mut rng = crate::harness::Rng(7);
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                if let Some(p) = person_in_watched_clone(&busy, round, &mut rng) {
                    problems.lock().expect("log").push(p);
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(50 + rng.below(200)));
            }
            round
        }));
    }
    {
        let (stop, net) = (Arc::clone(&stop), Arc::clone(&net));
        workers.push(std::thread::spawn(move || {
            let mut rng = crate::harness::Rng(11);
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let d = net.seed.path();
                if git_try(d, &["pull", "-q", "--rebase", "origin", "main"]) {
                    edit_a_title(&net.seed, "work/ready", &mut rng, &format!("theirs{round}"));
                    net.seed.task(
                        &format!("more-{round}"),
                        &crate::harness::task_yaml(&format!("more-{round}")),
                    );
                    git_try(d, &["add", "-A", "work"]);
                    git_try(d, &["commit", "-qm", &format!("their edit {round}")]);
                    git_try(d, &["push", "-q", "origin", "main"]);
                } else {
                    git_try(d, &["rebase", "--abort"]);
                    git_try(d, &["reset", "-q", "--hard", "origin/main"]);
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(300 + rng.below(500)));
            }
            round
        }));
    }
    std::thread::sleep(Duration::from_secs(90));
    stop.store(true, Ordering::Relaxed);
    let rounds: Vec<usize> = workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect();
    let _ = std::process::Command::new("kill")
        .arg(watch.id().to_string())
        .status();
    let _ = watch.wait();
    eprintln!(
        "hostile: syncs {} + {}, person rounds {}, their pushes {}",
        rounds[0], rounds[1], rounds[2], rounds[3]
    );
    let problems = problems.lock().expect("log");
    assert!(problems.is_empty(), "{problems:#?}");
    for repo in [&*busy, &*other, &net.remote] {
        crate::harness::git_in(repo.path(), &["fsck", "--no-progress"]);
    }
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_history(&net.remote, "main");
        check_history(&busy, "main");
    }));
    if checked.is_err() {
        let keep = std::path::Path::new("/tmp/clones/busy");
        let _ = std::process::Command::new("cp")
            .arg("-a")
            .arg(busy.path())
            .arg(keep)
            .status();
        panic!(
            "history check failed; busy clone kept in {}",
            keep.display()
        );
    }
    assert!(
        busy.git(&["ls-files", "-u"]).is_empty(),
        "unmerged entries left"
    );
}
