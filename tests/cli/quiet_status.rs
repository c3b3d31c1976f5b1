//! `coord status` from the board a quiet tick saved, through the real binary: it prints
//! byte for byte what loading and planning prints (plain, `--json`, `--markdown`, `--all`,
//! with the tentative line), and never once the repository changed, the clock passed what the
//! board waits for, or the saved file is damaged.

use crate::harness::TestRepo;
use std::time::Duration;

/// coord's private index, which holds the saved board, relative to the repo root.
const SAVED: &str = ".git/coord/index";
/// What `coord status -v` says when it shows the saved board.
const SAYS_SAVED: &str = "showing the board it saved";

/// Returns `coord status` (with `args`)'s stdout and stderr.
fn status(r: &TestRepo, args: &[&str]) -> (String, String) {
    let out = r.run(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (text(&out.stdout), text(&out.stderr))
}

/// Returns whether `coord -v status` showed the saved board.
fn shows_saved(r: &TestRepo) -> bool {
    status(r, &["-v", "status"]).1.contains(SAYS_SAVED)
}

/// Returns what `args` print when status loads and plans: the saved board is taken out of the
/// index for the run and put back after.
fn full_path(r: &TestRepo, args: &[&str]) -> (String, String) {
    let saved = std::fs::read(r.abs(SAVED)).ok();
    r.forget_quiet_mark();
    let out = status(r, args);
    if let Some(bytes) = saved {
        std::fs::write(r.abs(SAVED), bytes).expect("put the saved board back");
    }
    out
}

/// Lets every stamp fall behind the racy window and ticks until a tick plans nothing and
/// saves the board; checks that status then shows it.
fn settle(r: &TestRepo) {
    std::thread::sleep(Duration::from_millis(200));
    r.forget_quiet_mark();
    r.ok(&["tick"]);
    std::thread::sleep(Duration::from_millis(200));
    r.forget_quiet_mark();
    let said = status(r, &["tick", "-v"]).1;
    assert!(
        r.index_holds("quiet"),
        "a quiet tick saves the board: {said}"
    );
    assert!(shows_saved(r), "status should show the saved board");
}

/// A board with something in every list status shows: lanes with leases, the review queue,
/// ready tasks waiting (one overdue), a blocked task, an invalid one, a done one.
fn busy_board() -> TestRepo {
    let r = TestRepo::with_agents(&["writer", "coder"]);
    r.task("docs", "title: Write the docs\nagent: writer\n");
    r.task("build", "title: Fix the build\nagent: coder\n");
    r.task(
        "ask",
        "title: Delete the old data\nagent: coder\nauthority: ask_me_first\n",
    );
    r.task(
        "late",
        "title: Late work\ncapabilities: [gpu]\ndue: 2026-01-01T00:00:00Z\n",
    );
    r.task("gpu", "title: Needs a GPU\ncapabilities: [gpu]\n");
    r.task("after", "title: After the GPU work\ndepends_on: [gpu]\n");
    r.task("bad", "title: [unclosed\n");
    r.ok(&["tick"]);
    r.ok(&["tick"]);
    r
}

#[test]
fn status_from_the_saved_board_prints_what_loading_and_planning_prints() {
    let r = busy_board();
    // A remote-tracking branch from before the assignments: they are tentative.
    let first = r.git(&["rev-list", "--max-parents=0", "HEAD"]);
    r.git(&["update-ref", "refs/remotes/origin/main", first.trim()]);
    settle(&r);
    let board = r.json(&["status"]);
    for list in ["held", "waiting", "blocked", "overdue", "review"] {
        assert!(
            board[list].as_array().is_some_and(|l| !l.is_empty()),
            "{list} is empty: {board}"
        );
    }
    assert!(board["invalid"].as_object().is_some_and(|m| !m.is_empty()));
    let forms: [&[&str]; 5] = [
        &["status"],
        &["--json", "status"],
        &["status", "--markdown"],
        &["status", "--all"],
        &["status", "--agent", "writer"],
    ];
    for args in forms {
        let saved = status(&r, args);
        let full = full_path(&r, args);
        assert_eq!(saved, full, "{args:?}");
    }
    let (_, said) = status(&r, &["status"]);
    assert!(said.contains("not on origin/main"), "{said}");
    let (_, said) = status(&r, &["-v", "status", "--agent", "writer"]);
    assert!(
        !said.contains(SAYS_SAVED),
        "one agent's board is planned: {said}"
    );
    // The remote-tracking branch is read when status runs, not saved.
    let head = r.git(&["rev-parse", "HEAD"]);
    r.git(&["update-ref", "refs/remotes/origin/main", head.trim()]);
    let (_, said) = status(&r, &["-v", "status"]);
    assert!(!said.contains("not on origin/main"), "{said}");
    assert_eq!(status(&r, &["status"]), full_path(&r, &["status"]));
}

/// A change a person makes.
type Change = dyn Fn(&TestRepo);

#[test]
fn no_change_the_quiet_mark_sees_is_hidden_from_status() {
    let r = TestRepo::with_agents(&["bot --max-active 3"]);
    r.task("a", "title: First\n");
    r.task("b", "title: Second\n");
    r.ok(&["tick"]);
    let changes: [(&str, &Change, Option<&str>); 8] = [
        (
            "same-size edit",
            &|r| {
                let rel = r.where_is("b");
                let text = r.read(&rel).replace("title: Second", "title: Secund");
                r.write(&rel, &text);
            },
            Some("Secund"),
        ),
        (
            "new file",
            &|r| r.write("work/ready/c.yaml", "title: Third\n"),
            Some("ready 1"),
        ),
        (
            "deleted file",
            &|r| std::fs::remove_file(r.abs(&r.where_is("c"))).expect("rm"),
            None,
        ),
        (
            "staged file",
            &|r| {
                r.write("work/inbox/d.yaml", "title: Fourth\n");
                r.git(&["add", "work/inbox/d.yaml"]);
            },
            Some("inbox 1"),
        ),
        (
            "HEAD moved back, the index kept",
            &|r| {
                r.git(&["reset", "-q", "--soft", "HEAD~1"]);
            },
            None,
        ),
        (
            "coord.yaml edited",
            &|r| {
                let text = r.read("coord.yaml");
                r.write("coord.yaml", &format!("{text}\n# a comment\n"));
            },
            None,
        ),
        (
            "task schema edited",
            &|r| {
                let text = r.read("schemas/task.schema.json");
                r.write("schemas/task.schema.json", &format!("{text}\n"));
            },
            None,
        ),
        (
            "a commit outside work/",
            &|r| {
                r.write("notes.txt", "notes\n");
                r.git(&["add", "notes.txt"]);
                r.git(&["commit", "-q", "-m", "notes"]);
            },
            None,
        ),
    ];
    for (what, change, shows) in changes {
        settle(&r);
        let before = status(&r, &["status"]).0;
        change(&r);
        std::thread::sleep(Duration::from_millis(200));
        assert!(!shows_saved(&r), "{what}: status showed the saved board");
        let after = status(&r, &["status"]).0;
        assert_eq!(after, full_path(&r, &["status"]).0, "{what}");
        if let Some(text) = shows {
            assert!(
                !before.contains(text) && after.contains(text),
                "{what}: {after}"
            );
        }
    }
}

#[test]
fn status_shows_the_new_truth_once_a_lease_expires() {
    let mut r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: Slow\n");
    r.ok(&["tick"]);
    let expires = r.stamp("a", "lease_expires_at");
    settle(&r);
    let second = jiff::SignedDuration::from_secs(1);
    r.at(&(expires - second).to_string());
    assert!(shows_saved(&r), "the lease has not expired yet");
    let before = status(&r, &["--json", "status"]).0;
    r.at(&expires.to_string());
    assert!(!shows_saved(&r), "the lease expired");
    let after = status(&r, &["--json", "status"]);
    assert_eq!(after, full_path(&r, &["--json", "status"]));
    assert_ne!(before, after.0, "the task is no longer held");
}

#[test]
fn status_shows_the_new_truth_once_a_task_is_overdue() {
    let mut r = TestRepo::with_agents(&["bot"]);
    r.task(
        "a",
        "title: Needs a GPU\ncapabilities: [gpu]\ndue: 2026-11-22T12:00:00Z\n",
    );
    r.ok(&["tick"]);
    settle(&r);
    r.at("2026-11-22T12:00:00Z");
    assert!(shows_saved(&r), "due now is not overdue yet");
    assert!(!status(&r, &["status"]).0.contains("overdue"));
    r.at("2026-11-22T12:00:01Z");
    assert!(!shows_saved(&r), "past its due time");
    let after = status(&r, &["status"]);
    assert_eq!(after, full_path(&r, &["status"]));
    assert!(after.0.contains("overdue"), "{}", after.0);
}

#[test]
fn status_shows_the_new_truth_once_an_open_circuit_may_probe() {
    let mut r = TestRepo::with_agents(&["bot"]);
    r.write(
        "work/agents/bot.yaml",
        "capabilities: []\ncoord:\n  consecutive_failures: 3\n  circuit: open\n  open_until: 2026-11-22T12:00:00Z\n",
    );
    r.git(&["add", "work/agents/bot.yaml"]);
    r.git(&["commit", "-q", "-m", "open circuit"]);
    settle(&r);
    r.at("2026-11-22T11:59:59Z");
    assert!(shows_saved(&r), "the circuit is still open");
    let before = r.json(&["status"]);
    assert_eq!(before["agents"][0]["probe_due"], false, "{before}");
    r.at("2026-11-22T12:00:00Z");
    assert!(!shows_saved(&r), "its probe is due");
    let after = r.json(&["status"]);
    assert_eq!(after["agents"][0]["probe_due"], true, "{after}");
}

#[test]
fn a_damaged_saved_board_is_never_shown() {
    let r = TestRepo::with_agents(&["writer"]);
    r.task("docs", "title: Write the docs\nagent: writer\n");
    r.ok(&["tick"]);
    settle(&r);
    let whole = std::fs::read(r.abs(SAVED)).expect("saved");
    let at = whole
        .windows(5)
        .position(|w| w == b"Write")
        .expect("the title is saved");
    let mut damaged = whole.clone();
    damaged[at + 2] = b'o';
    let cut = whole[..whole.len() / 2].to_vec();
    let mut old = whole.clone();
    old[..b"coord index 1".len()].copy_from_slice(b"coord index 0");
    for (what, bytes) in [("damaged", damaged), ("cut", cut), ("old format", old)] {
        std::fs::write(r.abs(SAVED), bytes).expect("write");
        assert!(!shows_saved(&r), "{what}");
        let out = status(&r, &["status"]).0;
        assert!(
            out.contains("Write the docs") && !out.contains("Wrote"),
            "{what}: {out}"
        );
    }
}

#[test]
fn no_board_is_saved_where_results_must_be_signed() {
    let r = TestRepo::with_agents(&["bot"]);
    let cfg = r.read("coord.yaml").replace(
        "require_signed_results: false",
        "require_signed_results: true",
    );
    r.write("coord.yaml", &cfg);
    r.task("a", "title: First\n");
    r.ok(&["tick"]);
    std::thread::sleep(Duration::from_millis(200));
    r.ok(&["tick"]);
    assert!(!r.index_holds("quiet"));
    assert!(!shows_saved(&r));
}
