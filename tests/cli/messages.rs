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

#[test]
fn a_date_alone_is_a_valid_due_and_is_overdue_after_that_day() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("d", "title: Report\ndue: 2026-11-22\n");
    r.ok(&["validate"]);
    r.ok(&["tick"]);
    assert!(r.where_is("d").contains("assigned/"), "{}", r.where_is("d"));
    r.at("2026-11-22T23:59:00Z");
    assert!(!r.ok(&["status"]).contains("overdue"));
    r.at("2026-11-23T00:00:01Z");
    let board = r.ok(&["status"]);
    assert!(
        board.contains("overdue:\n  d (assigned): due 2026-11-22"),
        "{board}"
    );
}

#[test]
fn invalid_files_get_messages_in_plain_words_with_a_fix() {
    let r = TestRepo::with_agents(&["alice"]);
    let cases = [
        ("a", "title: x\ndue: next week\n", "2026-12-01T17:00:00Z"),
        ("b", "title: x\ntimeout: 5 minutes\n", "30m"),
        (
            "c",
            "title: x\nnext_agent: 5\n",
            "list of distinct agent names",
        ),
        ("d", "title: [x\n", "']'"),
        ("e", "title: a: b\n", "quote"),
        ("f", "title: x\n\tlabels: [a]\n", "spaces"),
        (
            "g",
            "<<<<<<< HEAD\ntitle: x\n=======\ntitle: y\n>>>>>>> other\n",
            "conflict",
        ),
        ("h", "title: 'it's'\n", "''"),
        ("i", "title: \"x\n", "closing"),
    ];
    for (id, text, _) in &cases {
        r.task(id, text);
    }
    let (out, _) = r.code(&["validate"], 1);
    for (id, _, want) in &cases {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("work/inbox/{id}.yaml:")))
            .unwrap_or_else(|| panic!("no line for {id}: {out}"));
        assert!(line.contains(want), "{id}: want {want:?} in {line}");
        for jargon in [
            "oneOf",
            "schemas listed",
            "does not match \"^",
            "while parsing",
            "while scanning",
            "SPEC",
        ] {
            assert!(!line.contains(jargon), "{id}: {jargon:?} in {line}");
        }
    }
}

#[test]
fn ids_from_non_ascii_titles_keep_their_letters() {
    let r = TestRepo::with_agents(&["alice"]);
    let id = r.ok(&["new", "Überprüfung der Straße"]);
    assert!(id.starts_with("uberprufung-der-strasse-"), "{id}");
    let id = r.ok(&["new", "Café crème à la française"]);
    assert!(id.starts_with("cafe-creme-a-la-francaise-"), "{id}");
}

#[test]
fn messages_point_to_the_docs_users_have_not_to_the_spec() {
    let r = TestRepo::with_agents(&["alice"]);
    r.write("work/stuff/a.yaml", "title: x\n");
    let (out, _) = r.code(&["doctor"], 1);
    assert!(out.contains("docs/files.md"), "{out}");
    assert!(!out.contains("SPEC"), "{out}");
    r.write("coord.yaml", "max_handof: 3\n");
    let (_, err) = r.code(&["status"], 1);
    assert!(err.contains("docs/files.md"), "{err}");
    assert!(!err.contains("SPEC"), "{err}");
}
