//! Crash safety (docs/behaviour.md): a tick over a 1,500-task inbox (grouped commits) killed with
//! SIGKILL at random points, then ticked to the end, leaves every task in exactly one place,
//! fully committed, each task's transitions in history with their trailers, `git fsck` clean.

use crate::harness::{task_places, Rng, TestRepo};
use std::path::Path;
use std::time::{Duration, Instant};

const TASKS: usize = 1_500;
const KILLS: usize = 10;

/// Returns the branch tip as git stores it (a loose ref in a fresh repo).
fn branch_tip(root: &Path) -> String {
    let head = std::fs::read_to_string(root.join(".git/HEAD")).expect("HEAD");
    let name = head
        .trim()
        .strip_prefix("ref: ")
        .expect("HEAD names a branch");
    std::fs::read_to_string(root.join(".git").join(name)).unwrap_or_default()
}

/// Waits (up to 30 s) until the branch moves on from `from` or the child exits.
fn wait_for_commit(root: &Path, from: &str, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while branch_tip(root) == from && Instant::now() < deadline {
        if child.try_wait().expect("try_wait").is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The folder for many commits: tmpfs when there is one (fsync is free there; a SIGKILL does
/// not lose the page cache, so durability against power loss is not what this test checks).
fn scratch() -> std::path::PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Asserts that history records every task's transitions, each with its trailers, as one
/// unbroken chain from the inbox to the folder the task is in (oldest commit first, read by
/// coord's trailer reader as `coord log` reads them): a kill never loses or doubles one.
fn assert_history_unbroken(r: &TestRepo, found: &std::collections::BTreeMap<String, Vec<String>>) {
    let log = coord::git::Repo::discover(r.path())
        .expect("repo")
        .log(None)
        .expect("log");
    let mut chains: std::collections::HashMap<String, Vec<(String, String)>> =
        std::collections::HashMap::new();
    for t in log
        .iter()
        .rev()
        .flat_map(coord::git::CommitInfo::transitions)
    {
        if let (false, Some(from), Some(to)) = (t.agent, t.from, t.to) {
            chains
                .entry(t.subject)
                .or_default()
                .push((from.to_string(), to.to_string()));
        }
    }
    for (id, paths) in found {
        let chain = chains.get(id).map(Vec::as_slice).unwrap_or_default();
        let state = paths[0].split('/').nth(1).expect("state folder");
        let unbroken = chain.windows(2).all(|w| w[0].1 == w[1].0);
        let ends = (
            chain.first().map(|t| t.0.as_str()),
            chain.last().map(|t| t.1.as_str()),
        );
        assert!(
            unbroken && ends == (Some("inbox"), Some(state)),
            "{id} at {paths:?}: history {chain:?}"
        );
    }
}

#[test]
fn a_tick_killed_at_random_points_recovers_to_a_consistent_committed_state() {
    let started = Instant::now();
    let r = TestRepo::empty_in(&scratch());
    r.ok(&["init", "-q"]);
    for a in ["a1", "a2", "a3"] {
        r.ok(&["-q", "agents", "add", a, "--max-active", "1000"]);
    }
    for i in 0..TASKS {
        r.task(
            &format!("t{i:04}"),
            &format!("# task {i}\ntitle: task number {i}\n"),
        );
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let (mut mid_tick, mut journals) = (0, 0);
    for round in 0..KILLS {
        let before = r.commit_count();
        let head = branch_tip(r.path());
        let mut child = r.spawn(&["-q", "tick"]);
        if round % 2 == 0 {
            // Kill while transitions are being applied: after its first commit.
            wait_for_commit(r.path(), &head, &mut child);
            std::thread::sleep(Duration::from_millis(5 + rng.below(296)));
        } else {
            // Kill anywhere: during start-up, recovery, loading or applying.
            std::thread::sleep(Duration::from_millis(5 + rng.below(1_500)));
        }
        let running = child.try_wait().expect("try_wait").is_none();
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let journal = r.exists(".git/coord/journal.json");
        let made = r.commit_count() - before;
        mid_tick += usize::from(running);
        journals += usize::from(journal);
        eprintln!("kill {round}: running={running} commits={made} journal left={journal}");
    }
    let mut ticks = 0;
    loop {
        ticks += 1;
        assert!(ticks <= 5, "the ticks do not settle");
        let (_, err) = r.code(&["tick"], 0);
        if err.ends_with("coord: nothing to do\n") {
            break;
        }
    }
    let found = task_places(r.path());
    assert_eq!(found.len(), TASKS, "no task lost, none invented");
    for (id, paths) in &found {
        assert_eq!(paths.len(), 1, "{id} in {paths:?}");
        assert!(paths[0].starts_with("work/assigned/a"), "{id} at {paths:?}");
        let text = r.read(&paths[0]);
        let idx: usize = id[1..].parse().expect("number");
        assert!(
            text.starts_with(&format!(
                "# task {idx}\ntitle: task number {idx}\ncoord:\n  state: assigned\n"
            )),
            "{text}"
        );
    }
    assert_eq!(
        r.git(&[
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--",
            "work"
        ]),
        ""
    );
    assert!(!r.exists(".git/coord/journal.json"));
    assert_history_unbroken(&r, &found);
    let fsck = r.git(&["fsck", "--strict", "--no-dangling", "--no-progress"]);
    assert_eq!(fsck, "", "git fsck after the kills");
    let n = r.commit_count();
    r.ok(&["tick"]);
    assert_eq!(r.commit_count(), n, "a further tick is a no-op");
    eprintln!(
        "crash test: {KILLS} kills, {mid_tick} while running, {journals} mid-transition (journal left); \
         {ticks} recovery ticks; {n} commits; {:?}",
        started.elapsed()
    );
}
