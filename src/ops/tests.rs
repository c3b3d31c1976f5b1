//! Tests of the operations through the library alone: what a tick commits, how its commits
//! are marked, and the quiet mark it leaves. Does I/O in temporary repositories.

use super::{Claimed, Coord, FindingCode, How, Options, Reported, Verdict};
use crate::engine::commands::{self, Fence};
use jiff::Timestamp;
use std::path::Path;

const NOW: &str = "2026-11-22T10:00:00Z";

fn init(dir: &Path) {
    let opts = Options {
        now: Some(NOW.parse::<Timestamp>().expect("time")),
        ..Options::default()
    };
    super::init(dir, super::Setup::default(), opts, Box::new(|_| {})).expect("init");
    let config = std::fs::read_to_string(dir.join("coord.yaml")).expect("config");
    std::fs::write(dir.join("coord.yaml"), config + "\nsettle: 0s\n").expect("config");
    std::fs::write(
        dir.join("work/agents/alice.yaml"),
        "capabilities: [code]\nmax_active: 1\n",
    )
    .expect("agent");
}

fn open(dir: &Path) -> Coord {
    let opts = Options {
        now: Some(NOW.parse::<Timestamp>().expect("time")),
        ..Options::default()
    };
    Coord::open(dir, opts).expect("open")
}

/// Returns the trailers of the newest commit whose summary starts with `prefix`.
fn trailers(coord: &Coord, prefix: &str) -> Vec<(String, String)> {
    let log = coord.store().repo.log(None).expect("log");
    let c = log
        .into_iter()
        .find(|c| c.summary.starts_with(prefix))
        .unwrap_or_else(|| panic!("no commit '{prefix}'"));
    c.trailers
}

#[test]
fn tick_commits_are_marked_as_the_ticks_and_command_commits_are_not() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    for id in ["a", "b"] {
        let task = "title: T\ncapabilities: [code]\n";
        std::fs::write(t.path().join(format!("work/inbox/{id}.yaml")), task).expect("task");
    }
    let coord = open(t.path());
    let ticked = coord.tick().expect("tick");
    assert!(ticked.commits > 0, "{ticked:?}");
    let tick = ("Coord-Origin".to_string(), "tick".to_string());
    assert!(trailers(&coord, "coord: assign a").contains(&tick));
    assert!(!trailers(&coord, "coord: record external").contains(&tick));
    let id = "b".parse().expect("id");
    coord
        .act(&|b, i| commands::cancel(b, i, &id, "not needed"))
        .expect("cancel");
    assert!(!trailers(&coord, "coord: cancel b").contains(&tick));
}

#[test]
fn a_tick_that_plans_nothing_leaves_the_quiet_mark_for_the_next_one() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    let first = open(t.path()).tick().expect("tick");
    assert!(!first.quiet);
    // Stat data younger than the settle margin (50 ms) is not trusted for a mark.
    std::thread::sleep(std::time::Duration::from_millis(120));
    // The first pass recorded the profile; the second finds nothing and leaves the mark.
    let second = open(t.path()).tick().expect("tick");
    assert_eq!((second.quiet, second.commits), (false, 0), "{second:?}");
    let third = open(t.path()).tick().expect("tick");
    assert!(third.quiet, "{third:?}");
}

#[test]
fn nothing_to_claim_and_a_stale_report_are_outcomes_not_errors() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    let profile = "capabilities: [code]\nmax_active: 1\nassign: pull\n";
    std::fs::write(t.path().join("work/agents/alice.yaml"), profile).expect("agent");
    let coord = open(t.path());
    let alice = "alice".parse().expect("agent");
    coord.tick().expect("tick");
    let nothing = coord.claim(&alice, None).expect("claim");
    assert!(matches!(nothing, Claimed::Nothing { .. }), "{nothing:?}");
    std::fs::write(
        t.path().join("work/inbox/a.yaml"),
        "title: T\ncapabilities: [code]\n",
    )
    .expect("task");
    coord.tick().expect("tick");
    let Claimed::Granted(receipt) = coord.claim(&alice, None).expect("claim") else {
        panic!("nothing granted");
    };
    let late = How {
        fence: Fence {
            agent: Some(alice.clone()),
            attempt: Some(receipt.attempt + 1),
            epoch: None,
        },
        ..How::default()
    };
    let done = Verdict::Success {
        output: None,
        next_agents: Vec::new(),
    };
    let reported = coord
        .report(&receipt.id, &done, &late, None)
        .expect("report");
    assert!(matches!(reported, Reported::Stale(_)), "{reported:?}");
    let on_time = How {
        fence: Fence {
            attempt: Some(receipt.attempt),
            ..late.fence
        },
        ..How::default()
    };
    let reported = coord
        .report(&receipt.id, &done, &on_time, None)
        .expect("report");
    assert!(matches!(reported, Reported::Written { .. }), "{reported:?}");
}

#[test]
fn doctor_findings_carry_their_code_path_and_fix() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    std::fs::write(t.path().join("work/inbox/a.yaml"), "title: T\nagent: bob\n").expect("task");
    std::fs::write(t.path().join("work/inbox/b.yaml"), "title: T\n").expect("task");
    let coord = open(t.path());
    coord.tick().expect("tick");
    let (board, _) = coord.read().load().expect("load");
    let b = board
        .tasks
        .iter()
        .find(|f| f.id.as_str() == "b")
        .expect("b");
    std::fs::rename(t.path().join(&b.path), t.path().join("work/done/b.yaml")).expect("hand move");
    let found = open(t.path()).doctor().expect("doctor");
    let moved = found
        .iter()
        .find(|f| f.code == FindingCode::HandMoved)
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!(moved.path.as_deref(), Some("work/done/b.yaml"));
    assert_eq!(moved.fix.as_deref(), Some("coord doctor --fix"));
    assert!(
        found.iter().any(|f| f.code == FindingCode::Uncommitted),
        "{found:?}"
    );
    open(t.path()).doctor_fix().expect("fix");
    let after = open(t.path()).doctor().expect("doctor");
    assert!(
        !after.iter().any(|f| f.code == FindingCode::HandMoved),
        "{after:?}"
    );
}

/// Runs git as a person in `dir`; returns whether it succeeded.
fn person_git(dir: &Path, args: &[&str]) -> bool {
    std::process::Command::new("git")
        .args([
            "-c",
            "user.name=person",
            "-c",
            "user.email=person@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git")
        .status
        .success()
}

#[test]
fn a_persons_commit_or_stash_between_coords_commits_never_records_them_in_reverse() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    for id in ["a", "b", "c"] {
        let task = "title: T\ncapabilities: [code]\n";
        std::fs::write(t.path().join(format!("work/inbox/{id}.yaml")), task).expect("task");
    }
    let dir = t.path().to_path_buf();
    let tried = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = tried.clone();
    let coord = open(t.path()).with_sink(Box::new(move |event| {
        if matches!(event, super::Event::Applied(..)) {
            // Whatever git lets the person do here must not undo coord's commits.
            person_git(&dir, &["commit", "-q", "-m", "a person's commit"]);
            person_git(&dir, &["stash", "-q"]);
            seen.set(seen.get() + 1);
        }
    }));
    let ticked = coord.tick().expect("tick");
    assert!(ticked.commits > 1 && tried.get() > 1, "{ticked:?}");
    let git_out = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(t.path())
            .output()
            .expect("git");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(git_out(&["log", "--author=person", "--oneline"]), "");
    assert_eq!(git_out(&["stash", "list"]), "");
    assert_eq!(git_out(&["status", "--porcelain", "--", "work"]), "");
}

/// Returns every file under `work/` but the agents' profiles, with its folder, sorted.
fn layout(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for folder in ["inbox", "ready", "blocked", "assigned/alice", "invalid"] {
        let Ok(entries) = std::fs::read_dir(dir.join("work").join(folder)) else {
            continue;
        };
        for e in entries {
            let name = e.expect("entry").file_name().to_string_lossy().to_string();
            if name != ".gitkeep" {
                found.push(format!("{folder}/{name}"));
            }
        }
    }
    found.sort();
    found
}

/// Drops 50 tasks into the inbox; t03 depends on t40 and t41 on t02 (other windows of 16).
fn drop_burst(dir: &Path) {
    for i in 0..50 {
        let deps = match i {
            3 => "depends_on: [t40]\n",
            41 => "depends_on: [t02]\n",
            _ => "",
        };
        let task = format!("title: T{i}\ncapabilities: [code]\n{deps}");
        std::fs::write(dir.join(format!("work/inbox/t{i:02}.yaml")), task).expect("task");
    }
}

/// A tick over an inbox bigger than its window takes it window by window (what it holds at
/// once is bounded by the window) and ends where a tick over the whole inbox at once ends:
/// a task depending on one in a later window is admitted, not rejected as unknown.
#[test]
fn a_tick_over_an_inbox_bigger_than_its_window_ends_as_one_over_the_whole_inbox() {
    let (whole, windowed) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    for t in [&whole, &windowed] {
        init(t.path());
        drop_burst(t.path());
    }
    let at_once = open(whole.path()).tick().expect("tick");
    let (by_window, _) = tick_by_16(&open(windowed.path()), false);

    let ends = layout(windowed.path());
    assert_eq!(ends, layout(whole.path()));
    assert!(ends.contains(&"blocked/t03.yaml".to_string()), "{ends:?}");
    assert!(ends.contains(&"blocked/t41.yaml".to_string()), "{ends:?}");
    assert!(
        !ends
            .iter()
            .any(|p| p.starts_with("inbox/") || p.starts_with("invalid/")),
        "{ends:?}"
    );
    assert_eq!(ends.len(), 50, "{ends:?}");
    assert!(by_window.attention.is_empty(), "{by_window:?}");
    assert_eq!(by_window.commits, at_once.commits);
}

/// Runs a tick over the 50-task burst in windows of 16 (four windows); `person` is called on
/// every transition committed, as a person working beside the tick would act. Returns the
/// recordings of people's changes and the windows that skipped the status scan because the
/// window before vouched for `work/`.
fn windowed_tick(dir: &Path, person: impl Fn(&str) + 'static) -> (Vec<String>, usize) {
    use std::cell::RefCell;
    use std::rc::Rc;
    init(dir);
    drop_burst(dir);
    // Stamps within the racy window are not trusted: let the dropped files' settle.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (recorded, vouched) = (Rc::new(RefCell::new(Vec::new())), Rc::new(RefCell::new(0)));
    let (r, v) = (recorded.clone(), vouched.clone());
    let coord = open(dir).with_sink(Box::new(move |e| match e {
        super::Event::Recovered(line) => r.borrow_mut().push(line.to_string()),
        super::Event::Detail(d) if d.contains("as the last coord operation left it") => {
            *v.borrow_mut() += 1;
        }
        super::Event::Applied(t, _) => person(&t.subject),
        _ => {}
    }));
    tick_by_16(&coord, false);
    let recorded = recorded.borrow().clone();
    let vouched = *vouched.borrow();
    (recorded, vouched)
}

/// A tick over a big inbox paid a status scan of all of `work/` per window. A
/// window that found `work/` clean vouches for the next: with nobody else writing, every
/// window after the first skips the scan.
#[test]
fn windows_after_the_first_skip_the_status_scan_when_only_the_tick_wrote() {
    let dir = tempfile::tempdir().expect("dir");
    let (recorded, vouched) = windowed_tick(dir.path(), |_| {});
    assert_eq!(recorded, ["record external changes (51 paths)"]);
    assert_eq!(vouched, 3);
    assert_eq!(layout(dir.path()).len(), 50);
}

/// Returns a repo with a 50-file inbox burst.
fn burst() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    init(dir.path());
    drop_burst(dir.path());
    dir
}

/// Ticks as [`Coord::tick`] does, taking the inbox 16 files at a time (packing whenever it
/// may, with `pack_always`); returns the tick and how many times it packed.
fn tick_by_16(coord: &Coord, pack_always: bool) -> (super::Ticked, usize) {
    let session = coord.lock(std::time::Duration::ZERO).expect("lock");
    session.set_inbox_window(16);
    if pack_always {
        session.pack_always();
    }
    let ticked = coord.tick_on(&session).expect("tick");
    let packed = session.pack_runs();
    session.finish().expect("finish");
    (ticked, packed)
}

/// A tick over a big inbox packed its loose objects after every commit that
/// brought the index in line, while the window's board was still held: the pack builder's
/// delta window over the big folders' trees came on top of the board (the heap peak of a
/// 50,000-task burst). The tick packs once per window, after the window's board is dropped,
/// and not again for the commit of people's changes before it.
#[test]
fn a_tick_packs_once_per_window_after_the_windows_board() {
    let dir = burst();
    let (ticked, packed) = tick_by_16(&open(dir.path()), true);
    assert!(ticked.commits >= 4, "{} commits", ticked.commits);
    assert_eq!(packed, 4, "one pack per window of 16 of the 50 inbox files");
    let loose = (0..=255u8)
        .filter_map(|b| std::fs::read_dir(dir.path().join(format!(".git/objects/{b:02x}"))).ok())
        .map(|d| d.count())
        .sum::<usize>();
    assert_eq!(loose, 0, "the last pack was made after the last commit");
}

/// Each time a tick packs, it merges the packs into one with a bitmap
/// of HEAD's history, so a clone sends that pack as it is. Checked by git: the bitmap agrees
/// with a walk of the history, every object is there, and every transition of the tick is
/// still in `coord log`.
#[test]
fn a_tick_that_packs_leaves_one_pack_with_a_bitmap_git_verifies() {
    let dir = burst();
    let coord = open(dir.path());
    tick_by_16(&coord, true);
    let pack_dir = dir.path().join(".git/objects/pack");
    let names: Vec<String> = std::fs::read_dir(&pack_dir)
        .expect("pack dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let count = |ext: &str| names.iter().filter(|n| n.ends_with(ext)).count();
    assert_eq!((count(".idx"), count(".bitmap")), (1, 1), "{names:?}");
    for args in [
        &["rev-list", "--test-bitmap", "HEAD"][..],
        &["fsck", "--strict", "--no-dangling"],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
    let every = coord.log(None, None).expect("log");
    let moved = every.iter().filter(|e| e.from.is_some()).count();
    assert!(
        moved >= 50,
        "every intake of the 50 tasks is in the log: {moved}"
    );
    let id = crate::model::TaskId::new("t07").expect("id");
    assert!(!coord.log(Some(&id), None).expect("log").is_empty());
}

/// A window's board (every task of `work/`, the window's inbox files parsed) was
/// still held while the window's plan was applied, under the commits' trees and the index:
/// the heap peak of a 50,000-task burst. The plan holds every text it writes, so no task is
/// held while a window's transitions are applied.
#[test]
fn no_task_is_held_while_a_windows_plan_is_applied() {
    use std::cell::Cell;
    use std::rc::Rc;
    let dir = tempfile::tempdir().expect("dir");
    init(dir.path());
    drop_burst(dir.path());
    let (applied, most) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let (a, m) = (applied.clone(), most.clone());
    let coord = open(dir.path()).with_sink(Box::new(move |e| {
        if let super::Event::Applied(..) = e {
            a.set(a.get() + 1);
            m.set(m.get().max(crate::check::live::tasks()));
        }
    }));
    tick_by_16(&coord, false);
    assert!(applied.get() >= 50, "{} transitions applied", applied.get());
    assert_eq!(
        most.get(),
        0,
        "tasks held while a window's plan was applied"
    );
}

/// A person's edit between two windows, to a file the tick did not touch or to one it just
/// committed, is still recorded as the person's (in its own commit before the next window's
/// tick commits), never folded into a tick commit.
#[test]
fn a_persons_edit_between_windows_is_recorded_before_the_next_window() {
    for (edited, at) in [("inbox/t49.yaml", "t01"), ("ready/t00.yaml", "t01")] {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("work").join(edited);
        let done = std::cell::Cell::new(false);
        let (recorded, vouched) = windowed_tick(dir.path(), move |subject| {
            if subject == at && !done.replace(true) {
                let text = std::fs::read_to_string(&file).expect("read") + "# by a person\n";
                std::fs::write(&file, text).expect("edit");
            }
        });
        assert_eq!(
            recorded,
            [
                "record external changes (51 paths)",
                "record external changes (1 paths)"
            ],
            "{edited}"
        );
        assert!(vouched <= 2, "{edited}: the window after the edit scans");
        let coord = open(dir.path());
        let log = coord.store().repo.log(None).expect("log");
        let person = log
            .iter()
            .position(|c| c.summary.starts_with("coord: record external changes"))
            .expect("the person's commit");
        let name = edited.rsplit('/').next().expect("name");
        let now_at = layout(dir.path()).into_iter().find(|p| p.ends_with(name));
        let text = now_at.map(|p| std::fs::read_to_string(dir.path().join("work").join(p)));
        assert!(
            text.is_some_and(|t| t.is_ok_and(|t| t.contains("# by a person"))),
            "{edited}: the person's line is kept"
        );
        assert!(person > 0, "{edited}: tick commits follow the person's");
    }
}

/// A load copied the text of every cached task out of the stat cache (4 MB, ~1,000
/// page faults at 10,000 tasks) though a command parses a handful. A load from the cache now
/// leaves each task's text in the cache file, and the task parses from it when used.
#[test]
fn a_load_from_the_stat_cache_holds_no_task_text() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    for i in 0..5 {
        let task = format!("title: Done {i}\ncoord:\n  state: done\n  attempt: 1\n");
        std::fs::write(t.path().join(format!("work/done/d{i}.yaml")), task).expect("task");
    }
    // Older than the timestamp granularity, so the first load may cache them.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let coord = open(t.path());
    let (first, _) = coord.read().load().expect("load");
    assert_eq!(first.tasks.len(), 5);
    let (board, _) = coord.read().load().expect("load from the cache");
    for (i, f) in board.tasks.iter().enumerate() {
        let task = f.read.as_ref().expect("reads");
        assert!(
            matches!(task.text(), crate::text::Text::Stored(_)),
            "{}: text copied out of the cache",
            f.path
        );
        assert_eq!(
            task.spec.title,
            format!("Done {i}"),
            "parsed from the cache file"
        );
    }
}

/// An operation that recorded people's changes keeps its walk for its own load only: a later
/// operation of the same `Coord` (an embedder's, a test's) reads `work/` as it is then.
#[test]
fn a_later_operation_never_reads_the_walk_an_earlier_one_kept() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    // alice's profile committed: the session below records nothing and keeps its walk.
    open(t.path()).tick().expect("tick");
    let coord = open(t.path());
    let bob = super::NewAgent {
        name: crate::model::AgentName::new("bob").expect("name"),
        capabilities: vec!["code".into()],
        max_active: 1,
        pull: false,
    };
    coord.add_agent(&bob).expect("add");
    let status = coord.status(None).expect("status");
    let agents: Vec<&str> = status.board["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(agents, ["alice", "bob"], "the profile add_agent wrote");
}

/// Returns the paths of the task files `at` has under `work/` in `dir`'s repository.
fn tasks_at(dir: &Path, at: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-tree", "-r", "--name-only", at, "work"])
        .current_dir(dir)
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|p| !p.starts_with("work/agents/"))
        .map(String::from)
        .collect()
}

/// A remote where `a` is assigned to alice and `b` (for pull agent puller) waits for it, and
/// two clones of it: the agents' (returned) and a person's, who pushed a note meanwhile.
fn blocked_claim_net(root: &Path) -> std::path::PathBuf {
    let (remote, seed, agents, person) = (
        root.join("remote.git"),
        root.join("seed"),
        root.join("agents"),
        root.join("person"),
    );
    assert!(person_git(root, &["init", "-q", "--bare", "remote.git"]));
    init(&seed);
    let puller = "capabilities: [y]\nassign: pull\n";
    std::fs::write(seed.join("work/agents/puller.yaml"), puller).expect("agent");
    let a = "title: A\ncapabilities: [code]\n";
    std::fs::write(seed.join("work/inbox/a.yaml"), a).expect("task");
    let b = "title: B\ncapabilities: [y]\ndepends_on: [a]\n";
    std::fs::write(seed.join("work/inbox/b.yaml"), b).expect("task");
    open(&seed).tick().expect("tick");
    let remote_url = remote.to_string_lossy().into_owned();
    assert!(person_git(&seed, &["remote", "add", "origin", &remote_url]));
    assert!(person_git(&seed, &["push", "-q", "origin", "HEAD:main"]));
    for clone in [&agents, &person] {
        let to = clone.to_string_lossy().into_owned();
        assert!(person_git(
            root,
            &["clone", "-q", "-b", "main", &remote_url, &to]
        ));
    }
    std::fs::write(person.join("notes.txt"), "a note\n").expect("note");
    assert!(person_git(&person, &["add", "-A"]));
    assert!(person_git(&person, &["commit", "-q", "-m", "note"]));
    assert!(person_git(&person, &["push", "-q", "origin", "main"]));
    agents
}

/// In the agents' clone of [`blocked_claim_net`]: alice completes `a`, a tick unblocks `b`,
/// and pull agent puller claims it without `--sync`; returns the receipt.
fn claim_a_task_this_clone_unblocked(coord: &Coord) -> crate::engine::commands::Receipt {
    let done = Verdict::Success {
        output: None,
        next_agents: Vec::new(),
    };
    let how = How {
        fence: Fence {
            agent: Some("alice".parse().expect("agent")),
            attempt: Some(1),
            epoch: None,
        },
        ..How::default()
    };
    let a = "a".parse().expect("id");
    coord.report(&a, &done, &how, None).expect("report");
    coord.tick().expect("tick");
    let puller = "puller".parse().expect("agent");
    let Claimed::Granted(receipt) = coord.claim(&puller, None).expect("claim") else {
        panic!("b not granted");
    };
    receipt
}

fn sync_options() -> crate::sync::Options {
    crate::sync::Options {
        remote: "origin".to_string(),
        branch: None,
        max_retries: 3,
        wait: std::time::Duration::from_secs(5),
        redo_on_reject: false,
        drop_edits: Vec::new(),
        now: NOW.parse::<Timestamp>().expect("time"),
        with_ref: None,
        ticks: crate::sync::Ticks::Redo,
    }
}

/// A sync that put off a claim (its task blocked on the remote until the sync's tick redoes
/// this clone's unblocking) and stopped before its tick, as a kill would stop it, has moved
/// the branch without the claim: the next sync replays it from the record. A record whose
/// replay the branch already holds (a sync killed after that move) is ended, never replayed
/// twice.
#[test]
fn a_claim_put_off_by_a_sync_stopped_before_its_tick_is_replayed_by_the_next_sync() {
    let t = tempfile::tempdir().expect("tempdir");
    let agents = blocked_claim_net(t.path());
    let coord = open(&agents);
    let receipt = claim_a_task_this_clone_unblocked(&coord);
    let mut stopped = |_: &crate::store::Session<'_>| -> Result<usize, crate::sync::TickError> {
        Err("stopped before the tick".into())
    };
    let said = std::cell::RefCell::new(Vec::new());
    let mut say = |line: &str| said.borrow_mut().push(line.to_string());
    let opts = sync_options();
    assert!(crate::sync::run(&agents, &opts, &mut stopped, &mut say).is_err());
    let record = agents.join(".git/coord/sync-put-off");
    assert!(record.exists(), "{said:?}");
    assert!(!tasks_at(&agents, "HEAD").contains(&"work/assigned/puller/b.yaml".to_string()));

    open(&agents).sync(&opts).expect("sync");

    let remote = t.path().join("remote.git");
    assert!(tasks_at(&remote, "main").contains(&"work/assigned/puller/b.yaml".to_string()));
    let b = std::fs::read_to_string(agents.join("work/assigned/puller/b.yaml")).expect("b");
    assert!(b.contains(&format!("attempt: {}", receipt.attempt)), "{b}");
    assert!(!record.exists());
    let head = coord
        .store()
        .repo
        .head()
        .expect("head")
        .oid
        .expect("a commit");
    let claimed = coord.store().repo.log(None).expect("log");
    let claim = claimed
        .iter()
        .find(|c| c.summary.starts_with("coord: claim b") || c.summary.contains("assign b"))
        .expect("the claim");
    let put_off = crate::sync::put_off::PutOff {
        commits: vec![claim.oid.parse().expect("oid")],
        made: Some(head),
        onto: None,
    };
    put_off.write(&agents.join(".git")).expect("record");
    let report = open(&agents).sync(&opts).expect("sync");
    assert!(report.lost.is_empty(), "{report:?}");
    assert!(!record.exists());
    assert_eq!(
        std::fs::read_to_string(agents.join("work/assigned/puller/b.yaml")).expect("b"),
        b
    );
}

/// Commits put off by a sync that stopped before its tick are not replayed once a person
/// moved the branch elsewhere (`git reset --hard origin/main` discarding the clone's work):
/// the next sync says they were left out and pushes nothing of them (it pushed the
/// discarded claim and result).
#[test]
fn commits_put_off_are_left_out_once_the_branch_was_reset_elsewhere() {
    let t = tempfile::tempdir().expect("tempdir");
    let agents = blocked_claim_net(t.path());
    claim_a_task_this_clone_unblocked(&open(&agents));
    let mut stopped = |_: &crate::store::Session<'_>| -> Result<usize, crate::sync::TickError> {
        Err("stopped before the tick".into())
    };
    let opts = sync_options();
    assert!(crate::sync::run(&agents, &opts, &mut stopped, &mut |_| {}).is_err());
    assert!(agents.join(".git/coord/sync-put-off").exists());
    assert!(person_git(
        &agents,
        &["reset", "-q", "--hard", "origin/main"]
    ));

    let report = open(&agents).sync(&opts).expect("sync");

    assert_eq!(report.lost.len(), 0, "{report:?}");
    assert!(!agents.join(".git/coord/sync-put-off").exists());
    let remote = t.path().join("remote.git");
    let on_remote = tasks_at(&remote, "main");
    assert!(
        !on_remote
            .iter()
            .any(|p| p.starts_with("work/assigned/puller/")),
        "{on_remote:?}"
    );
}

/// A repo with a pull agent `alice` and one ready task `a` that allows two attempts.
fn one_ready_task(dir: &Path) -> Coord {
    init(dir);
    let profile = "capabilities: [code]\nmax_active: 1\nassign: pull\n";
    std::fs::write(dir.join("work/agents/alice.yaml"), profile).expect("agent");
    let task = "title: T\ncapabilities: [code]\nmax_attempts: 2\n";
    std::fs::write(dir.join("work/inbox/a.yaml"), task).expect("task");
    let coord = open(dir);
    coord.tick().expect("tick");
    assert!(dir.join("work/ready/a.yaml").exists());
    coord
}

#[test]
fn a_claim_withdrawn_before_its_commit_takes_nothing() {
    let t = tempfile::tempdir().expect("tempdir");
    let coord = one_ready_task(t.path());
    let before = coord.store().repo.log(None).expect("log").len();
    let alice = "alice".parse().expect("agent");
    let claimed = coord.claim_unless(&alice, None, &|| true).expect("claim");
    let Claimed::Nothing { why, .. } = claimed else {
        panic!("{claimed:?}")
    };
    assert!(why.contains("withdrawn before it took anything"), "{why}");
    assert!(t.path().join("work/ready/a.yaml").exists());
    assert_eq!(coord.store().repo.log(None).expect("log").len(), before);
}

#[test]
fn a_claim_withdrawn_after_its_commit_is_released_and_its_attempt_not_counted() {
    let t = tempfile::tempdir().expect("tempdir");
    let coord = one_ready_task(t.path());
    let alice = "alice".parse().expect("agent");
    let asked = std::cell::Cell::new(0);
    let late = || {
        asked.set(asked.get() + 1);
        asked.get() > 1
    };
    let claimed = coord.claim_unless(&alice, None, &late).expect("claim");
    let Claimed::Nothing { why, .. } = claimed else {
        panic!("{claimed:?}")
    };
    assert!(why.contains("went back to ready"), "{why}");
    assert!(t.path().join("work/ready/a.yaml").exists(), "released");
    let op = ("Coord-Op".to_string(), "release".to_string());
    assert!(trailers(&coord, "coord: release a").contains(&op));
    let coord = open(t.path());
    let Claimed::Granted(second) = coord.claim(&alice, None).expect("claim") else {
        panic!("the released task is claimed again");
    };
    assert_eq!(
        second.attempt, 2,
        "the withdrawn attempt's number is not given again"
    );
    let failed = Verdict::Failure {
        message: "flaky".into(),
        retryable: true,
    };
    let how = How {
        fence: Fence {
            agent: Some(alice.clone()),
            attempt: Some(2),
            epoch: None,
        },
        ..How::default()
    };
    coord.report(&second.id, &failed, &how, None).expect("fail");
    coord.tick().expect("tick");
    assert!(
        t.path().join("work/ready/a.yaml").exists(),
        "one failed attempt of two: retried, the withdrawn one not counted"
    );
}

#[test]
fn a_task_caught_half_way_through_a_move_is_shown_once_the_move_is_over() {
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    std::fs::write(
        t.path().join("work/inbox/a.yaml"),
        "title: T\ncapabilities: [code]\n",
    )
    .expect("task");
    let coord = open(t.path());
    coord.tick().expect("tick");
    let id = "a".parse().expect("id");
    let before = coord.show(&id).expect("show");
    let path = before.copy.path.clone();
    // A coordinator holds the lock in the middle of moving the file: it is in no folder.
    let held = crate::lock::acquire(coord.store().repo.git_dir(), std::time::Duration::ZERO)
        .expect("lock");
    let (from, to) = (t.path().join(&path), t.path().join("moving"));
    std::fs::rename(&from, &to).expect("take the file out");
    let mover = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::fs::rename(&to, &from).expect("put the file back");
        drop(held);
    });
    let shown = coord.show(&id).expect("show");
    mover.join().expect("mover");
    assert!(shown.other_copies.is_empty(), "{shown:?}");
    assert_eq!(shown, before);
}

/// A group commit stopped at its commit, as a kill -9 there stops it, is finished whole by
/// the next run: every claim of the group committed, none lost, `work/` clean.
#[test]
fn a_group_commit_stopped_at_its_commit_is_finished_whole_by_the_next_run() {
    use crate::fsx::inject::crash_on;
    let t = tempfile::tempdir().expect("tempdir");
    init(t.path());
    for agent in ["p1", "p2"] {
        let profile = "capabilities: [y]\nassign: pull\n";
        let path = t.path().join(format!("work/agents/{agent}.yaml"));
        std::fs::write(path, profile).expect("agent");
    }
    for id in ["a", "b"] {
        let task = "title: T\ncapabilities: [y]\n";
        std::fs::write(t.path().join(format!("work/inbox/{id}.yaml")), task).expect("task");
    }
    let coord = open(t.path());
    coord.tick().expect("tick");
    let session = coord.group_session().expect("group");
    for agent in ["p1", "p2"] {
        let agent = agent.parse().expect("agent");
        let claimed = coord.claim_in_group(&session, &agent, None).expect("claim");
        assert!(matches!(claimed, Some(Claimed::Granted(_))), "{claimed:?}");
    }
    crash_on(Some(("git commit", 1)));
    let stopped = coord.commit_group(session);
    crash_on(None);
    assert!(stopped.is_err(), "the commit was to be stopped");
    drop(coord);
    open(t.path()).tick().expect("the next run");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(t.path())
            .args(args)
            .output()
            .expect("git");
        String::from_utf8(out.stdout).expect("utf8")
    };
    let committed = git(&["ls-tree", "-r", "--name-only", "HEAD", "work/assigned"]);
    for id in ["a", "b"] {
        assert!(committed.contains(&format!("/{id}.yaml")), "{committed}");
    }
    assert_eq!(git(&["status", "--porcelain", "work"]), "");
}
