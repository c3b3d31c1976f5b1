//! What users read: a mistaken name fails at once with one line and a hint, the board shows
//! everything that is wrong, and every message says what is wrong in the user's words and how
//! to fix it.

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
        board.contains("overdue:\n  d \"Report\" (assigned): due 2026-11-22"),
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

#[test]
fn errors_name_the_file_where_it_is_now() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("bad", "title: x\npriority: urgent\n");
    r.ok(&["tick"]);
    r.ok(&["tick"]);
    let errors = r.read("work/invalid/bad.yaml.errors");
    assert!(
        errors.starts_with("work/invalid/bad.yaml:2:11: priority:"),
        "{errors}"
    );
    let board = r.ok(&["status"]);
    assert!(
        board.contains("bad: work/invalid/bad.yaml:2:11: priority:"),
        "{board}"
    );
}

/// A board with one of each thing a person must act on, committed so only the tick's view
/// matters.
fn troubled_board() -> TestRepo {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.write("work/ready/broken.yaml", "title: [x\n");
    r.write("work/agents/bob.yaml", "max_active: lots\n");
    r.write("work/agents/carol.yaml", "enabled: false\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "a person's edits"]);
    r.write("work/inbox/fresh.yaml", "title: [y\n");
    let outside = r.abs("outside.yaml");
    std::fs::write(&outside, "title: x\n").expect("write");
    std::os::unix::fs::symlink(&outside, r.abs("work/inbox/link.yaml")).expect("symlink");
    r
}

#[test]
fn status_shows_every_file_that_waits_for_a_person_and_why_agents_are_disabled() {
    let r = troubled_board();
    let board = r.ok(&["status"]);
    for want in [
        "work/ready/broken.yaml:2:1: YAML syntax",
        "work/inbox/link.yaml: symlink refused",
        "bob                  0/1  disabled  circuit closed (its profile does not read: work/agents/bob.yaml:1:13: max_active",
        "carol                0/1  disabled  circuit closed (work/agents/carol.yaml says enabled: false)",
    ] {
        assert!(board.contains(want), "want {want:?} in\n{board}");
    }
    let json: serde_json::Value = r.json(&["status"]);
    let problems = json["problems"].as_array().expect("problems");
    let paths: Vec<&str> = problems.iter().filter_map(|p| p["path"].as_str()).collect();
    assert!(paths.contains(&"work/ready/broken.yaml"), "{json}");
    assert!(
        problems
            .iter()
            .any(|p| p["at"] == "work/ready/broken.yaml:2:1"),
        "{json}"
    );
    assert!(paths.contains(&"work/inbox/link.yaml"), "{json}");
}

#[test]
fn tick_does_not_say_nothing_to_do_while_files_wait_for_a_person() {
    let r = troubled_board();
    for _ in 0..2 {
        let (_, err) = r.code(&["tick"], 0);
        assert!(!err.contains("nothing to do"), "{err}");
        assert!(err.contains("need a person"), "{err}");
        assert!(err.contains("'coord status'"), "{err}");
    }
}

#[test]
fn doctor_offers_fix_only_where_it_can_act_and_the_fix_acts() {
    let r = TestRepo::with_agents(&["alice"]);
    r.ok(&["new", "One", "--id", "one", "--agent", "alice"]);
    r.ok(&["tick"]);
    let branch = r.git(&["branch", "--show-current"]);
    r.git(&["checkout", "-qb", "other"]);
    let path = "work/assigned/alice/one.yaml";
    r.write(
        path,
        &r.read(path).replace("title: One", "title: One from other"),
    );
    r.git(&["commit", "-qam", "other"]);
    r.git(&["checkout", "-q", branch.trim()]);
    r.write(
        path,
        &r.read(path).replace("title: One", "title: One from main"),
    );
    r.git(&["commit", "-qam", "main"]);
    let conflicted = std::process::Command::new("git")
        .current_dir(r.path())
        .args(["merge", "-q", "other"])
        .envs(crate::harness::git_env())
        .output()
        .expect("git merge");
    assert!(!conflicted.status.success(), "the merge conflicts");
    let (out, _) = r.code(&["doctor"], 1);
    assert!(out.contains("merge is in progress"), "{out}");
    assert!(
        !out.contains("--fix"),
        "no fix is offered that cannot act:\n{out}"
    );

    let r = TestRepo::with_agents(&["alice"]);
    r.task("dropped", "title: dropped by hand\n");
    let outside = r.abs("outside.yaml");
    std::fs::write(&outside, "title: x\n").expect("write");
    std::os::unix::fs::symlink(&outside, r.abs("work/inbox/link.yaml")).expect("symlink");
    let (out, _) = r.code(&["doctor"], 1);
    assert!(
        out.contains("1 uncommitted change(s)"),
        "the symlink is not offered:\n{out}"
    );
    assert!(out.contains("doctor --fix"), "{out}");
    r.code(&["doctor", "--fix"], 1);
    let (out, _) = r.code(&["doctor"], 1);
    assert!(
        !out.contains("uncommitted"),
        "--fix recorded the change:\n{out}"
    );
    assert!(out.contains("symlink refused"), "{out}");
}

#[test]
fn validate_checks_profiles_and_coord_yaml_against_their_own_rules() {
    let r = TestRepo::with_agents(&["alice"]);
    r.write(
        "work/agents/alice.yaml",
        "capabilities: [x]\nmax_active: 2\n",
    );
    r.ok(&["validate", "work/agents/alice.yaml"]);
    r.write("work/agents/bob.yaml", "max_active: lots\n");
    let (out, _) = r.code(&["validate", "work/agents/bob.yaml"], 1);
    assert!(
        out.starts_with("work/agents/bob.yaml:1:13: max_active:"),
        "{out}"
    );
    assert!(!out.contains("title"), "a profile is not a task:\n{out}");
    let (out, _) = r.code(&["validate"], 1);
    assert!(
        out.contains("work/agents/bob.yaml:1:13: max_active:"),
        "{out}"
    );
    r.write("work/agents/bob.yaml", "max_active: 2\n");
    r.ok(&["validate", "coord.yaml"]);
    r.write("coord.yaml", "defaults:\n  timeout: 5 minutes\n");
    let (out, _) = r.code(&["validate", "coord.yaml"], 1);
    assert!(
        out.starts_with("coord.yaml:2:12: defaults.timeout:"),
        "{out}"
    );
    assert!(out.contains("30m"), "{out}");
    let (_, err) = r.code(&["validate"], 1);
    assert!(err.contains("coord.yaml:2:12: defaults.timeout:"), "{err}");
}

#[test]
fn validate_reports_a_malformed_result_with_the_file_and_the_fix() {
    let r = TestRepo::new();
    r.ok(&["-q", "agents", "add", "alice", "--max-active", "2"]);
    r.task("a", "title: a\nagent: alice\n");
    r.task("b", "title: b\nagent: alice\n");
    r.ok(&["tick"]);
    r.ok(&["validate"]);
    let a = "work/assigned/alice/a.yaml";
    let mut text = r.read(a);
    text.push_str("result:\n  status: weird\n");
    r.write(a, &text);
    let b = "work/assigned/alice/b.yaml";
    let mut text = r.read(b);
    text.push_str("result:\n  status: success\n  next_agent: ghost\n");
    r.write(b, &text);
    for args in [&["validate"][..], &["validate", a]] {
        let (out, err) = r.code(args, 1);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {out}");
        assert!(lines[0].starts_with(&format!("{a}:")), "{args:?}: {out}");
        assert!(lines[0].contains("status"), "{args:?}: {out}");
        assert!(
            lines[0].contains("a result is 'status: success' with 'output:'"),
            "{args:?}: {out}"
        );
        if args.len() == 1 {
            let warned = format!("{b}:");
            let warning = err.lines().find(|l| l.contains(&warned));
            let warning = warning.unwrap_or_else(|| panic!("{err}"));
            assert!(
                warning.contains("result.next_agent names unknown agent 'ghost'"),
                "{err}"
            );
        }
    }
    let (_, err) = r.code(&["validate", b], 0);
    assert!(err.contains("'coord agents add ghost'"), "{err}");
}

/// A reader that closed stderr (a runner that stopped reading a command's stderr) gets the
/// exit code, never a panic: error and status lines are dropped when they cannot be written.
#[test]
fn a_closed_stderr_never_makes_coord_panic() {
    let r = TestRepo::with_agents(&["alice"]);
    r.ok(&["new", "A task", "--agent", "alice", "--id", "a"]);
    let closed = |args: &[&str]| {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        r.spawn_cmd(args)
            .stdout(std::process::Stdio::null())
            .stderr(writer)
            .status()
            .expect("coord")
            .code()
    };
    assert_eq!(closed(&["log", "nosuch"]), Some(1), "an error line");
    assert_eq!(closed(&["tick"]), Some(0), "status lines");
    assert_eq!(
        closed(&["claim", "--agent", "nosuch"]),
        Some(1),
        "an error line"
    );
}

#[test]
fn doctor_names_a_rejected_file_that_has_a_live_tasks_id() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("deploy", "title: Deploy\n");
    r.ok(&["tick"]);
    // The second half of `echo … > f; echo … >> f`, written after the first was taken in.
    r.task("deploy", "authority: ask_me_first\n");
    r.ok(&["tick"]);
    assert_eq!(
        r.find("deploy"),
        [
            "work/assigned/alice/deploy.yaml",
            "work/invalid/deploy.yaml"
        ]
    );
    let (out, _) = r.code(&["doctor"], 1);
    let line = out
        .lines()
        .find(|l| l.contains("work/invalid/deploy.yaml"))
        .unwrap_or_else(|| panic!("doctor misses the duplicate id:\n{out}"));
    assert!(line.contains("'deploy'"), "{line}");
    assert!(line.contains("work/assigned/alice/deploy.yaml"), "{line}");
}

#[test]
fn validate_and_tick_name_the_files_still_being_written() {
    let r = TestRepo::with_agents(&["alice"]);
    let mut config = r.read("coord.yaml");
    config.push_str("\nsettle: 1h\n");
    r.commit_file("coord.yaml", &config, "settle for an hour");
    r.write_now("work/inbox/young.yaml", "title: Young\n");
    let (_, said) = r.code(&["validate"], 0);
    assert!(!said.contains("all task files are valid"), "{said}");
    assert!(
        said.contains("1 file(s) pending") && said.contains("work/inbox/young.yaml"),
        "{said}"
    );
    let json = r.json(&["validate"]);
    assert_eq!(
        json["pending"],
        serde_json::json!(["work/inbox/young.yaml"])
    );
    let (_, said) = r.code(&["tick"], 0);
    assert!(!said.contains("nothing to do"), "{said}");
    assert!(
        said.contains("1 file(s) pending (settling)") && said.contains("work/inbox/young.yaml"),
        "{said}"
    );
    let json = r.json(&["tick"]);
    assert_eq!(
        json["pending"],
        serde_json::json!(["work/inbox/young.yaml"])
    );
}

#[test]
fn retry_right_after_an_edit_waits_for_the_file_to_settle() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("bad", "nope: 1\n");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("bad"), "work/invalid/bad.yaml");
    // The person fixes the file and sends it back at once, within `settle` (2s).
    r.write_now("work/invalid/bad.yaml", "title: Fixed\n");
    r.ok(&["retry", "bad"]);
    assert_eq!(r.where_is("bad"), "work/inbox/bad.yaml");
    assert!(r.read("work/inbox/bad.yaml").contains("title: Fixed"));
}

#[test]
fn sync_without_a_remote_says_there_is_none() {
    let r = TestRepo::with_agents(&["alice"]);
    let (_, err) = r.code(&["sync"], 1);
    assert!(!err.contains("access rights"), "{err}");
    assert!(
        err.contains("no remote 'origin'") && err.contains("git remote add origin"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// An editor saving a task file after coord moved it leaves a second copy under the old
/// name. Doctor keeps the copy coord moved; an old copy holding a person's edit is never
/// advised away without it: `doctor --fix` carries the edit into the task, and removes a
/// copy holding nothing new.
#[test]
fn doctor_never_drops_an_editors_copy_with_a_persons_edit_and_fixes_a_plain_one() {
    let r = TestRepo::with_agents(&["p --pull --max-active 2"]);
    r.ok(&["new", "X", "--id", "x"]);
    r.ok(&["new", "Y", "--id", "y"]);
    r.ok(&["tick"]);
    let (x_before, y_before) = (r.read("work/ready/x.yaml"), r.read("work/ready/y.yaml"));
    assert_eq!(r.ok(&["claim", "--agent", "p"]).trim(), "x");
    r.ok(&["claim", "--agent", "p"]);
    // The editors save what they had open: x with a person's line, y unchanged.
    r.write(
        "work/ready/x.yaml",
        &x_before.replace("title: X\n", "title: X\ndescription: a person's edit\n"),
    );
    r.write("work/ready/y.yaml", &y_before);
    let (out, _) = r.code(&["doctor"], 1);
    let x = out.lines().find(|l| l.contains("'x'")).expect("x named");
    assert!(
        x.contains("work/ready/x.yaml") && x.contains("copy"),
        "the edit is to be carried over, not dropped: {x}"
    );
    let y = out.lines().find(|l| l.contains("'y'")).expect("y named");
    assert!(y.contains("doctor --fix"), "{y}");
    r.ok(&["doctor", "--fix"]);
    assert_eq!(r.find("x"), ["work/assigned/p/x.yaml"]);
    assert!(r.read("work/assigned/p/x.yaml").contains("a person's edit"));
    assert_eq!(r.find("y"), ["work/assigned/p/y.yaml"]);
    r.ok(&["complete", "y", "--agent", "p", "--attempt", "1"]);
}
