//! `coord status` as people read it, through the real binary: a lane per agent with its tasks
//! and their lease ends, the review queue, titles, `--agent`, long lists summarised unless
//! `--all`, and colour on a terminal only (a pty from `script`), never with `NO_COLOR`.

use crate::harness::{git_env, TestRepo};

/// A board with an assigned task, one in review, and `waiting` ready tasks no agent can take.
fn board(waiting: usize) -> TestRepo {
    let mut r = TestRepo::with_agents(&["writer", "coder"]);
    r.ok(&["new", "Write the docs", "--id", "docs", "--agent", "writer"]);
    r.ok(&["new", "Fix the build", "--id", "build", "--agent", "coder"]);
    r.task(
        "ask",
        "title: Delete the old data\nagent: coder\nauthority: ask_me_first\n",
    );
    for i in 0..waiting {
        r.ok(&[
            "new",
            &format!("Needs x {i}"),
            "--id",
            &format!("w{i:02}"),
            "--capability",
            "x",
        ]);
    }
    r.ok(&["tick"]);
    r.at("2026-11-22T10:01:00Z").ok(&["tick"]);
    r
}

#[test]
fn status_shows_lanes_with_leases_the_review_queue_and_titles() {
    let r = board(2);
    let out = r.ok(&["status"]);
    assert!(
        out.contains("\n  writer               1/1  push  circuit closed\n    docs \"Write the docs\"  attempt 1, lease until 2026-11-22T1"),
        "{out}"
    );
    assert!(
        out.contains("\n    build \"Fix the build\"  attempt 1, lease until "),
        "{out}"
    );
    assert!(
        out.contains("review queue:\n  ask \"Delete the old data\": waits for approval to start: 'coord approve ask'"),
        "{out}"
    );
    assert!(
        out.contains(
            "ready but waiting:\n  w00 \"Needs x 0\": no agent has capabilities [\"x\"]\n"
        ),
        "{out}"
    );
    assert!(
        !out.contains("awaiting approval:"),
        "held tasks are not listed twice: {out}"
    );
    assert!(!out.contains('\u{1b}'), "no colour into a pipe: {out:?}");

    let writer = r.ok(&["status", "--agent", "writer"]);
    assert!(writer.contains("docs \"Write the docs\""), "{writer}");
    assert!(
        !writer.contains("build") && !writer.contains("coder"),
        "{writer}"
    );
}

#[test]
fn status_summarises_a_long_wait_list_unless_all() {
    let r = board(14);
    let out = r.ok(&["status"]);
    assert!(out.contains("  w09 \"Needs x 9\""), "{out}");
    assert!(!out.contains("w10"), "{out}");
    assert!(
        out.contains("  … 4 more (coord status --all lists them)\n"),
        "{out}"
    );
    let all = r.ok(&["status", "--all"]);
    assert!(all.contains("  w13 \"Needs x 13\""), "{all}");
    assert!(!all.contains("more (coord status --all"), "{all}");
}

/// Runs `coord status` on a pseudo-terminal (util-linux `script`), with NO_COLOR set or not.
fn status_on_a_terminal(r: &TestRepo, no_colour: Option<&str>) -> String {
    let coord = assert_cmd::cargo::cargo_bin("coord");
    let line = format!("{} -C {} status", coord.display(), r.path().display());
    let mut c = std::process::Command::new("script");
    c.args(["-qec", &line, "/dev/null"]);
    for (k, v) in git_env() {
        c.env(k, v);
    }
    c.env_remove("NO_COLOR").env("COORD_NOW", &r.now);
    if let Some(v) = no_colour {
        c.env("NO_COLOR", v);
    }
    let out = c.output().expect("run script");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

#[test]
fn status_is_in_colour_on_a_terminal_and_not_with_no_color() {
    let r = board(1);
    let tty = status_on_a_terminal(&r, None);
    assert!(tty.contains("\u{1b}[1magents:\u{1b}[0m"), "{tty:?}");
    assert!(tty.contains("\u{1b}[36mdocs\u{1b}[0m"), "{tty:?}");
    let plain = status_on_a_terminal(&r, Some("1"));
    assert!(
        plain.contains("agents:\n") && !plain.contains('\u{1b}'),
        "{plain:?}"
    );
}
