//! Fault tests of the store through the failure-injection hook (`inject`): every operation
//! of a tick made to fail in turn (the fail-at-N sweep), and a run stopped at one chosen step.
//! Test-only; does I/O in temporary repositories.

use crate::cli::{self, Cli};
use crate::error::CliError;
use crate::fsx::inject::{count, crash_on, fail_at, fail_on, failed};
use clap::Parser;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const NOW: &str = "2026-11-22T10:00:00Z";

/// Runs coord in-process; after `init`, sets `settle: 0s` (these tests write files and tick
/// at once, and copy repos with fresh file times: they test faults, not the settle rule).
/// Each run waits up to 10 s for the coordinator lock: a stopped run released it, but a child
/// process another test of this process forks meanwhile holds a copy of the lock's file
/// descriptor until it execs, and the flock lasts as long as any copy does.
fn coord(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let d = dir.to_str().expect("utf8");
    let argv = ["coord", "-C", d, "-q", "--now", NOW, "--wait", "10s"]
        .into_iter()
        .chain(args.iter().copied());
    cli::run(Cli::try_parse_from(argv).expect("arguments")).map_err(CliError::into_error)?;
    if args.first() == Some(&"init") {
        let mut config = fs::read_to_string(dir.join("coord.yaml")).unwrap_or_default();
        config.push_str("\nsettle: 0s\n");
        fs::write(dir.join("coord.yaml"), config)?;
        let who = ["-c", "user.name=p", "-c", "user.email=p@x"];
        git(
            dir,
            &[&who[..], &["commit", "-qm", "settle", "coord.yaml"]].concat(),
        );
    }
    Ok(())
}

/// Returns a fresh folder holding a copy of `from` (a repo made once, run many times).
fn copy_of(from: &Path) -> tempfile::TempDir {
    let to = tempfile::tempdir().expect("tempdir");
    copy_tree(from, to.path());
    to
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for e in fs::read_dir(from)
        .expect("read dir")
        .map(|e| e.expect("entry"))
    {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().expect("type").is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).expect("copy");
        }
    }
}

/// Returns every file under `work/` with its bytes.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.join("work")];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir)
            .expect("read dir")
            .map(|e| e.expect("entry"))
        {
            if e.file_type().expect("type").is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(root).expect("inside").to_owned();
                out.insert(rel.display().to_string(), fs::read(e.path()).expect("read"));
            }
        }
    }
    out
}

/// A repo where one tick does intake, assignment, completion and a handoff, after
/// recording a dropped file.
fn template() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init", "--agents", "alice,bob"]).expect("init");
    fs::write(
        d.join("work/inbox/t2.yaml"),
        "title: two\nagent: alice\nnext_agent: bob\n",
    )
    .expect("write");
    coord(d, &["tick"]).expect("tick");
    coord(d, &["complete", "t2"]).expect("complete");
    fs::write(
        d.join("work/inbox/t1.yaml"),
        "# keep me\ntitle: one\nagent: alice\n",
    )
    .expect("write");
    fs::write(
        d.join("work/inbox/t3.yaml"),
        "title: three\ndepends_on: [t1]\n",
    )
    .expect("write");
    t
}

fn assert_no_partial_file(root: &Path, n: usize) {
    for (path, bytes) in snapshot(root) {
        assert!(
            !path.ends_with(crate::fsx::TEMP_SUFFIX),
            "N={n}: {path} left"
        );
        if path.ends_with(".yaml") {
            let doc = crate::yaml::parse_bytes(&bytes, &crate::yaml::Limits::default());
            assert!(doc.is_ok(), "N={n}: {path} does not parse");
        }
    }
}

/// Asserts two snapshots are equal, showing the files that differ as text.
fn assert_same_files(got: &BTreeMap<String, Vec<u8>>, want: &BTreeMap<String, Vec<u8>>, n: usize) {
    let text = |m: &BTreeMap<String, Vec<u8>>, p: &String| {
        m.get(p).map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let differ: Vec<String> = got
        .keys()
        .chain(want.keys())
        .filter(|p| got.get(*p) != want.get(*p))
        .map(|p| format!("{p}:\n got {:?}\n want {:?}", text(got, p), text(want, p)))
        .collect();
    assert!(
        differ.is_empty(),
        "N={n}: the final state differs\n{}",
        differ.join("\n")
    );
}

/// Returns the task ids (file stems outside `work/agents/`) whose place or bytes differ.
fn ids_differing(
    a: &BTreeMap<String, Vec<u8>>,
    b: &BTreeMap<String, Vec<u8>>,
) -> std::collections::BTreeSet<String> {
    let tasks =
        |m: &BTreeMap<String, Vec<u8>>| -> std::collections::BTreeSet<(String, String, Vec<u8>)> {
            m.iter()
                .filter(|(p, _)| p.ends_with(".yaml") && !p.starts_with("work/agents/"))
                .map(|(p, bytes)| {
                    let name = p.rsplit('/').next().unwrap_or(p);
                    let id = name.trim_end_matches(".yaml").to_string();
                    (id, p.clone(), bytes.clone())
                })
                .collect()
        };
    let (a, b) = (tasks(a), tasks(b));
    a.symmetric_difference(&b)
        .map(|(id, _, _)| id.clone())
        .collect()
}

/// Asserts that the index holds HEAD's version of every path under `work/` (nothing staged),
/// so a person's next `git commit` cannot commit a reversal of coord's commits.
fn assert_index_agrees_with_head(root: &Path, n: usize) {
    let staged = git(root, &["diff", "--cached", "--name-status", "--", "work"]);
    assert_eq!(staged, "", "N={n}: the index disagrees with HEAD");
}

/// Each operation of a tick is made to fail in turn. A failure of one task's file operation
/// skips that task (recorded for `status`) while the others move; any other failure ends the
/// pass with a clean error (or, in a best-effort write such as a cache, is ignored). Either
/// way the index agrees with HEAD at once (unless writing the index was what failed), and the
/// next ticks converge on the same state as an uninjected run.
#[test]
fn failing_the_nth_operation_of_a_tick_leaves_a_clean_index_and_converges() {
    let base = template();
    let reference = copy_of(base.path());
    fail_at(None);
    coord(reference.path(), &["tick"]).expect("uninjected tick");
    let ops = count();
    let after_one = snapshot(reference.path());
    coord(reference.path(), &["tick"]).expect("second tick");
    let want = snapshot(reference.path());
    assert!(
        want.contains_key("work/assigned/bob/t2.bob.yaml"),
        "{:?}",
        want.keys()
    );
    assert!(ops > 20, "a whole tick has many operations ({ops})");
    let mut skipped = 0;
    for n in 1..=ops {
        let run = copy_of(base.path());
        fail_at(Some(n));
        let injected = coord(run.path(), &["tick"]);
        let what = failed();
        fail_at(None);
        let record = fs::read_to_string(run.path().join(".git/coord/skipped.json"));
        if let Err(err) = &injected {
            let why = if record.is_ok() {
                "left where they were after a file operation failed; the other tasks moved"
            } else {
                "injected failure"
            };
            assert!(format!("{err:#}").contains(why), "N={n}: {err:#}");
        }
        if let Ok(record) = record {
            assert!(record.contains("injected failure"), "N={n}: {record}");
            let behind = ids_differing(&snapshot(run.path()), &after_one);
            let stuck = behind.first().expect("the skipped task stays behind");
            assert!(
                record.contains(&format!("/{stuck}.yaml")),
                "N={n}: {record}"
            );
            assert!(
                behind
                    .iter()
                    .all(|id| id == stuck || id.starts_with(&format!("{stuck}."))),
                "N={n}: only the skipped task and its children stay behind: {behind:?}"
            );
            skipped += 1;
        }
        assert_no_partial_file(run.path(), n);
        if what.as_deref() != Some("git index") {
            assert_index_agrees_with_head(run.path(), n);
        }
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("N={n}: next tick: {e:#}"));
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("N={n}: third tick: {e:#}"));
        assert_same_files(&snapshot(run.path()), &want, n);
        let store = crate::store::Store::open(run.path()).expect("open");
        assert!(
            store
                .repo
                .changed_paths("work/")
                .expect("status")
                .is_empty(),
            "N={n}"
        );
    }
    assert!(skipped > 0, "some failures hit one task's file operations");
    eprintln!("fault sweep: {ops} operations failed in turn, {skipped} skipped one task");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf8")
}

#[test]
fn a_result_written_between_a_killed_move_and_recovery_is_kept() {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init"]).expect("init");
    fs::write(
        d.join("work/inbox/x.yaml"),
        "# mine\ntitle: x\ncapabilities: [z]\n",
    )
    .expect("write");
    coord(d, &["tick"]).expect("intake");
    assert!(d.join("work/ready/x.yaml").exists());
    coord(d, &["agents", "add", "a2", "--capability", "z"]).expect("agent");
    crash_on(Some(("create temp", 1)));
    let stopped = coord(d, &["tick"]);
    crash_on(None);
    assert!(stopped.is_err(), "the tick stops after the move");
    let half = d.join("work/assigned/a2/x.yaml");
    let text = fs::read_to_string(&half).expect("moved, not yet rewritten");
    assert!(text.contains("state: ready"), "{text}");
    let with_result = text.replace(
        "coord:\n",
        "result:\n  status: success\n  output: {answer: 42}\ncoord:\n",
    );
    fs::write(&half, with_result).expect("the agent writes its result");
    coord(d, &["tick"]).expect("recovery and tick");
    coord(d, &["tick"]).expect("next tick");
    let done = fs::read_to_string(d.join("work/done/x.yaml")).expect("done");
    assert!(done.starts_with("# mine\ntitle: x\n"), "{done}");
    assert!(done.contains("answer: 42"), "the result is kept: {done}");
    let committed = git(d, &["show", "HEAD:work/done/x.yaml"]);
    assert_eq!(committed, done);
    assert_eq!(git(d, &["status", "--porcelain"]), "");
}

/// A pass that fails after some commits leaves the index in line with HEAD: a person's next
/// unrelated `git commit` holds only their own change, never a reversal of coord's moves.
#[test]
fn a_person_commits_nothing_of_coords_after_a_pass_failed_midway() {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init", "--agents", "alice"]).expect("init");
    for id in ["a", "b", "c"] {
        coord(d, &["new", id, "--id", id, "--agent", "alice"]).expect("new");
    }
    fail_on(Some(("git commit", 2)));
    let failed = coord(d, &["tick"]);
    fail_on(None);
    assert!(failed.is_err(), "the second commit of the pass fails");
    fs::write(d.join("NOTES.md"), "mine\n").expect("write");
    git(d, &["add", "NOTES.md"]);
    git(
        d,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "commit",
            "-qm",
            "notes",
        ],
    );
    let changed = git(d, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(
        changed, "NOTES.md\n",
        "the person's commit holds only their file"
    );
}

/// How many inbox tasks the grouped-tick tests drop: with the two assignments, more than the
/// 64 transitions past which a tick commits in groups.
const GROUPED: usize = 80;

/// A repo with `GROUPED` tasks committed in the inbox and two agents: its next tick takes
/// them in and assigns two, in grouped commits.
fn grouped_template() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init", "--agents", "alice,bob"]).expect("init");
    commit_burst(d, GROUPED, |i| {
        (
            format!("g{i:02}"),
            format!("# task {i}\ntitle: task number {i}\n"),
        )
    });
    t
}

/// Writes `n` inbox files (`id_and_text(i)` gives the i-th one's id and text) and commits
/// them as a person would.
fn commit_burst(d: &Path, n: usize, id_and_text: impl Fn(usize) -> (String, String)) {
    for i in 0..n {
        let (id, text) = id_and_text(i);
        fs::write(d.join(format!("work/inbox/{id}.yaml")), text).expect("write");
    }
    let who = ["-c", "user.name=p", "-c", "user.email=p@x"];
    git(d, &["add", "work"]);
    git(d, &[&who[..], &["commit", "-qm", "burst"]].concat());
}

/// Returns, per task, the transitions history records for it, oldest first, as coord's own
/// trailer reader (`coord log`) reads them.
fn history_of_tasks(root: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let log = crate::git::Repo::discover(root)
        .expect("repo")
        .log(None)
        .expect("log");
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for t in log
        .iter()
        .rev()
        .flat_map(crate::git::CommitInfo::transitions)
    {
        if let (false, Some(from), Some(to)) = (t.agent, t.from, t.to) {
            out.entry(t.subject)
                .or_default()
                .push((from.to_string(), to.to_string()));
        }
    }
    out
}

/// Asserts what a grouped tick must leave however it was stopped, once ticked again: every
/// task in exactly one place, the layout of an unstopped run, each task's transitions in
/// history as one unbroken chain from the inbox to where it is, nothing uncommitted, no
/// journal, and `git fsck` clean.
fn assert_grouped_recovered(root: &Path, want: &BTreeMap<String, Vec<u8>>, case: &str) {
    let got = snapshot(root);
    assert_same_files(&got, want, 0);
    let tasks: Vec<&String> = got
        .keys()
        .filter(|p| p.ends_with(".yaml") && !p.starts_with("work/agents/"))
        .collect();
    assert_eq!(tasks.len(), GROUPED, "{case}: every task once: {tasks:?}");
    let history = history_of_tasks(root);
    for path in tasks {
        let id = path
            .rsplit('/')
            .next()
            .expect("name")
            .trim_end_matches(".yaml");
        let chain = history.get(id).map(Vec::as_slice).unwrap_or_default();
        let state = path.split('/').nth(1).expect("state folder");
        assert_eq!(
            chain.first().map(|t| t.0.as_str()),
            Some("inbox"),
            "{case}: {id}: {chain:?}"
        );
        assert_eq!(
            chain.last().map(|t| t.1.as_str()),
            Some(state),
            "{case}: {id}: {chain:?}"
        );
        let unbroken = chain.windows(2).all(|w| w[0].1 == w[1].0);
        assert!(unbroken, "{case}: {id}: {chain:?}");
    }
    assert_eq!(
        git(root, &["status", "--porcelain", "--untracked-files=all"]),
        "",
        "{case}"
    );
    assert!(!root.join(".git/coord/journal.json").exists(), "{case}");
    let fsck = std::process::Command::new("git")
        .args([
            "-C",
            root.to_str().expect("utf8"),
            "fsck",
            "--strict",
            "--no-dangling",
        ])
        .output()
        .expect("git fsck");
    let said = String::from_utf8_lossy(&fsck.stdout) + String::from_utf8_lossy(&fsck.stderr);
    assert!(
        fsck.status.success() && said.trim().is_empty(),
        "{case}: git fsck: {said}"
    );
}

/// A tick of more than 64 transitions (grouped commits) stopped, as by a kill -9, at steps
/// inside its first group (a move, a rewrite, a folder sync), at each group's commit, before
/// the cursor moves past a group, and at the index update, then ticked again: every task
/// ends in exactly one place with an unbroken history and `git fsck` clean, and the plan is
/// finished in grouped commits marked as the tick's.
#[test]
fn a_grouped_tick_stopped_at_any_step_recovers_every_task_with_its_history() {
    let base = grouped_template();
    let reference = copy_of(base.path());
    crash_on(None);
    let count = |d: &Path| -> usize {
        let n = git(d, &["rev-list", "--count", "HEAD"]);
        n.trim().parse().expect("count")
    };
    let before = count(reference.path());
    coord(reference.path(), &["tick"]).expect("uninjected tick");
    let tick_commits = count(reference.path()) - before;
    coord(reference.path(), &["tick"]).expect("second tick");
    let want = snapshot(reference.path());
    assert_grouped_recovered(reference.path(), &want, "unstopped");
    assert!(
        tick_commits < GROUPED / 4,
        "grouped: {tick_commits} commits"
    );
    let stops: [(&'static str, usize); 10] = [
        ("rename", 1),
        ("rename", 40),
        ("rename", 100),
        ("create temp", 50),
        ("fsync folder", 1),
        ("git commit", 1),
        ("git commit", 2),
        ("write private", 3),
        ("write private", 4),
        ("git index", 1),
    ];
    for stop in stops {
        let case = format!("stopped at {stop:?}");
        let run = copy_of(base.path());
        fail_at(None);
        crash_on(Some(stop));
        let stopped = coord(run.path(), &["tick"]);
        let hit = failed();
        crash_on(None);
        assert!(
            stopped.is_err() && hit.is_some(),
            "{case}: the tick stops there"
        );
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("{case}: recovery: {e:#}"));
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("{case}: next tick: {e:#}"));
        assert_grouped_recovered(run.path(), &want, &case);
        // Recovery finishes the tick's plan as the tick would have: grouped, as the tick's.
        let made = count(run.path()) - before;
        assert!(
            made <= tick_commits + 1,
            "{case}: {made} commits, {tick_commits} unstopped"
        );
        let last = git(run.path(), &["log", "-1", "--format=%B"]);
        assert!(last.contains(crate::store::TICK_TRAILER), "{case}: {last}");
    }
}

/// A run killed while a sync moved the branch leaves the switch journal and the branch's
/// `.lock`; the next run removes the stale lock before it finishes the switch (finishing it
/// first waited on that lock and failed, run after run).
#[test]
fn a_switch_killed_while_it_held_the_branch_lock_is_finished_by_the_next_run() {
    let base = template();
    let d = base.path();
    let from = git(d, &["rev-parse", "HEAD"]);
    let to = git(d, &["rev-parse", "HEAD~1"]);
    let journal = format!("refs/heads/main\n{}\n{}\n", from.trim(), to.trim());
    fs::create_dir_all(d.join(".git/coord")).expect("mkdir");
    fs::write(d.join(".git/coord/switch"), journal).expect("journal");
    let lock = d.join(".git/refs/heads/main.lock");
    fs::write(&lock, format!("{}\n", to.trim())).expect("lock");
    let out = std::process::Command::new("touch")
        .args(["-d", "1 minute ago"])
        .arg(&lock)
        .status()
        .expect("touch");
    assert!(out.success());
    coord(d, &["tick"]).expect("recovery and tick");
    assert!(!lock.exists());
    assert!(!d.join(".git/coord/switch").exists());
    let merged = git(d, &["merge-base", "--is-ancestor", to.trim(), "HEAD"]);
    assert_eq!(merged, "");
}

/// A tick of 1,100 inbox files (groups sized by the inbox: 1/16 of it) stopped after its first
/// group's commit and before the cursor moved past it: the recovery walked the folders again,
/// found the inbox smaller, cut the rest of the plan into smaller groups, and its second group
/// straddled the first group's end, so its commit recorded `inbox -> ready` again for tasks
/// already committed (the SIGKILL crash test saw that under load). Recovery cuts the plan as
/// the killed run did: every task's history holds each transition once.
#[test]
fn a_recovery_after_a_group_commit_records_no_transition_twice() {
    const TASKS: usize = 1_100;
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init"]).expect("init");
    commit_burst(d, TASKS, |i| {
        (format!("g{i:04}"), format!("title: task number {i}\n"))
    });
    fail_at(None);
    crash_on(Some(("write private", 4)));
    let stopped = coord(d, &["tick"]);
    crash_on(None);
    assert!(
        stopped.is_err(),
        "the tick stops after its first group's commit"
    );
    coord(d, &["tick"]).expect("recovery");
    coord(d, &["tick"]).expect("next tick");
    let history: Vec<_> = history_of_tasks(d)
        .into_iter()
        .filter(|(id, _)| id.starts_with('g'))
        .collect();
    assert_eq!(history.len(), TASKS);
    for (id, chain) in history {
        assert_eq!(chain, [("inbox".to_string(), "ready".to_string())], "{id}");
    }
}

/// A repo whose next tick retries task `x` (agent `a` wrote a retryable failure; the backoff
/// is under a second, so no wait) and hands it back to `a` in the same plan, after taking in
/// 70 tasks no agent can take: a grouped plan whose second group moves `x` from
/// `assigned/a/` to `ready/` and back.
fn retry_template() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init", "--agents", "a"]).expect("init");
    let config = fs::read_to_string(d.join("coord.yaml")).expect("config");
    let config = config.replace(
        "backoff: {base: 1m, max: 1h}",
        "backoff: {base: 1s, max: 1s}",
    );
    fs::write(d.join("coord.yaml"), config).expect("config");
    fs::write(d.join("work/inbox/x.yaml"), "title: flaky\n").expect("write");
    coord(d, &["tick"]).expect("assign x");
    let failure = "result:\n  status: failure\n  error: {message: flaky, retryable: true}\n";
    let x = d.join(RETRIED);
    let text = fs::read_to_string(&x).expect("x assigned to a");
    fs::write(&x, format!("{text}{failure}")).expect("write");
    commit_burst(d, 70, |i| {
        (
            format!("f{i:02}"),
            format!("title: nobody takes {i}\ncapabilities: [none]\n"),
        )
    });
    t
}

/// Where the retried task is before and after the tick.
const RETRIED: &str = "work/assigned/a/x.yaml";

/// That grouped tick killed just before the retry's first move (the state is made by
/// stopping it at the second group's commit and putting `x` back as it was), or stopped
/// at that commit: recovery finishes the plan as the unstopped tick does, and history holds
/// `x`'s retry and reassignment once each. Before the retry moved anything, `x` is where its
/// reassignment puts it, which must not count as the reassignment having started: the retry
/// would be skipped and the failure counted a second time.
#[test]
fn a_grouped_retry_to_the_same_agent_stopped_anywhere_is_retried_once() {
    let base = retry_template();
    let reference = copy_of(base.path());
    crash_on(None);
    coord(reference.path(), &["tick"]).expect("uninjected tick");
    coord(reference.path(), &["tick"]).expect("second tick");
    let want = snapshot(reference.path());
    let x = String::from_utf8_lossy(&want[RETRIED]).into_owned();
    assert!(x.contains("attempt: 2"), "{x}");
    for put_back in [true, false] {
        let case = format!("stopped at the second group's commit, x put back: {put_back}");
        let run = copy_of(base.path());
        fail_at(None);
        crash_on(Some(("git commit", 2)));
        let stopped = coord(run.path(), &["tick"]);
        crash_on(None);
        assert!(stopped.is_err(), "{case}: the tick stops there");
        let journal = run.path().join(".git/coord/journal.json");
        assert!(journal.exists(), "{case}");
        if put_back {
            let _ = fs::remove_file(run.path().join("work/ready/x.yaml"));
            fs::copy(base.path().join(RETRIED), run.path().join(RETRIED)).expect("put back");
        }
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("{case}: recovery: {e:#}"));
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("{case}: next tick: {e:#}"));
        let got = snapshot(run.path());
        let text = |s: &BTreeMap<String, Vec<u8>>| {
            s.get(RETRIED)
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        assert_eq!(text(&got), text(&want), "{case}");
        assert_same_files(&got, &want, 0);
        let chain = |root: &Path| history_of_tasks(root).remove("x");
        assert_eq!(chain(run.path()), chain(reference.path()), "{case}");
    }
}
