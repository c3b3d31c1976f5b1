//! What users read: a mistaken name fails at once with one line and a hint, the board shows
//! everything that is wrong, and every message says what is wrong in the user's words and how
//! to fix it (issue 13 items 7, 10 and 12).

use crate::harness::TestRepo;

/// Asserts stderr is exactly one `error:` line containing every word of `words`.
fn one_line_error(stderr: &str, words: &[&str]) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for w in words {
        assert!(lines[0].contains(w), "missing {w:?} in {stderr}");
    }
}

#[test]
fn claim_by_an_unknown_agent_fails_naming_the_known_agents() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["new", "Something to do"]);
    r.ok(&["tick"]);
    let before = r.commit_count();
    let (_, err) = r.code(&["claim", "--agent", "nosuch"], 1);
    one_line_error(&err, &["nosuch", "alice, bob", "coord agents add"]);
    assert_eq!(r.commit_count(), before);
}

#[test]
fn status_for_an_unknown_agent_fails() {
    let r = TestRepo::with_agents(&["alice"]);
    let (_, err) = r.code(&["status", "--agent", "nobody"], 1);
    one_line_error(&err, &["nobody", "alice"]);
    r.ok(&["status", "--agent", "alice"]);
}

#[test]
fn log_of_an_unknown_task_fails_but_a_known_one_without_history_does_not() {
    let r = TestRepo::with_agents(&["alice"]);
    let (_, err) = r.code(&["log", "nosuch"], 1);
    one_line_error(&err, &["nosuch", "coord status"]);
    let id = r.ok(&["new", "Known task"]);
    r.ok(&["log", id.trim()]);
}

#[test]
fn new_depending_on_an_unknown_task_fails_and_writes_nothing() {
    let r = TestRepo::with_agents(&["alice"]);
    let before = r.commit_count();
    let (_, err) = r.code(&["new", "x", "--depends-on", "nosuch"], 1);
    one_line_error(&err, &["--depends-on", "nosuch", "nothing was written"]);
    let (_, err) = r.code(&["new", "x", "--agent", "ghost"], 1);
    one_line_error(&err, &["ghost", "alice", "coord agents add ghost"]);
    let (_, err) = r.code(&["new", "x", "--next-agent", "ghost"], 1);
    one_line_error(&err, &["ghost", "alice"]);
    assert_eq!(r.commit_count(), before);
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}

#[test]
fn complete_handing_off_to_an_unknown_agent_fails_and_writes_nothing() {
    let r = TestRepo::with_agents(&["alice"]);
    let id = r.ok(&["new", "Work", "--agent", "alice"]);
    let id = id.trim();
    r.ok(&["tick"]);
    let path = r.where_is(id);
    let before = r.read(&path);
    let (_, err) = r.code(&["complete", id, "--next-agent", "ghost"], 1);
    one_line_error(&err, &["ghost", "alice", "coord agents add ghost"]);
    assert_eq!(r.read(&path), before);
    r.ok(&["complete", id, "--next-agent", "alice"]);
}
