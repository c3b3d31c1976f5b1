//! Files people and agents write in place: half-written files wait to settle,
//! results written any way are read, files past the size limit and files rewritten without
//! the `coord:` block are handled, and files that are not tasks are never committed.

use crate::harness::TestRepo;
use serde_json::Value;

fn repo() -> TestRepo {
    TestRepo::with_agents(&["alice"])
}

/// Sets a file's mtime far back, as if its writer finished long ago.
fn settle(r: &TestRepo, rel: &str) {
    crate::harness::set_old_mtime(&r.abs(rel));
}

fn append(r: &TestRepo, rel: &str, text: &str) {
    let mut all = r.read(rel);
    all.push_str(text);
    r.write_now(rel, &all);
}

fn status(r: &TestRepo) -> Value {
    r.json(&["status"])
}

#[test]
fn a_half_written_task_waits_to_settle_and_is_taken_whole() {
    let r = repo();
    r.write_now("work/inbox/deploy.yaml", "title: Deploy\nagent: alice\n");
    r.ok(&["tick"]);
    assert!(
        r.exists("work/inbox/deploy.yaml"),
        "taken before it settled"
    );
    assert!(!r.git(&["log", "--format=%B"]).contains("deploy"));
    let s = status(&r);
    assert_eq!(s["settling"][0]["path"], "work/inbox/deploy.yaml", "{s}");
    append(&r, "work/inbox/deploy.yaml", "authority: ask_me_first\n");
    settle(&r, "work/inbox/deploy.yaml");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("deploy"), "work/review/deploy.yaml");
}

#[test]
fn a_half_written_result_waits_to_settle() {
    let r = repo();
    r.task("a", "title: a\nagent: alice\n");
    r.ok(&["tick"]);
    let path = "work/assigned/alice/a.yaml";
    append(&r, path, "result:\n  status: success\n");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("a"), path, "completed before the output came");
    append(&r, path, "  output: {summary: all of it}\n");
    settle(&r, path);
    r.ok(&["tick"]);
    let done = r.read("work/done/a.yaml");
    assert!(done.contains("output: {summary: all of it}"), "{done}");
}

#[test]
fn a_file_renamed_in_is_taken_at_once() {
    let r = repo();
    r.write_now("work/inbox/.a.yaml.part", "title: a\nagent: alice\n");
    std::thread::sleep(std::time::Duration::from_millis(50));
    std::fs::rename(r.abs("work/inbox/.a.yaml.part"), r.abs("work/inbox/a.yaml")).expect("mv");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("a"), "work/assigned/alice/a.yaml");
}

#[test]
fn an_inbox_file_over_the_size_limit_is_quarantined_on_the_first_tick() {
    let r = repo();
    let big = format!("title: big\ndescription: \"{}\"\n", "x".repeat(2 << 20));
    r.task("big", &big);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("big"), "work/invalid/big.yaml");
    assert!(r
        .read("work/invalid/big.yaml.errors")
        .contains("byte limit"));
}

#[test]
fn a_result_that_passes_the_size_limit_fails_the_attempt_with_bad_result() {
    let r = repo();
    r.task("a", "title: a\nagent: alice\n");
    r.ok(&["tick"]);
    let path = "work/assigned/alice/a.yaml";
    let huge = format!(
        "result:\n  status: success\n  output: \"{}\"\n",
        "y".repeat(2 << 20)
    );
    append(&r, path, &huge);
    settle(&r, path);
    r.ok(&["tick"]);
    let at = r.where_is("a");
    assert_eq!(at, "work/ready/a.yaml", "retried");
    let text = r.read(&at);
    assert!(text.contains("code: bad_result"), "{text}");
    assert!(text.contains("limit"), "{text}");
    assert!(
        !text.contains("yyyy"),
        "the huge output stays in git history only"
    );
    assert_eq!(
        status(&r)["agents"][0]["active"],
        0,
        "the agent's slot is free"
    );
}

#[test]
fn a_malformed_result_fails_the_attempt_with_bad_result() {
    let r = repo();
    r.task("a", "title: a\nagent: alice\n");
    r.ok(&["tick"]);
    let path = "work/assigned/alice/a.yaml";
    append(&r, path, "result:\n  status: weird\n");
    settle(&r, path);
    r.ok(&["tick"]);
    let text = r.read(&r.where_is("a"));
    assert!(text.contains("code: bad_result"), "{text}");
    assert!(text.contains("status"), "{text}");
}

#[test]
fn a_hand_written_result_handing_off_to_an_unknown_agent_is_a_bad_result() {
    let r = TestRepo::new();
    r.ok(&["-q", "agents", "add", "alice", "--max-active", "5"]);
    r.ok(&["-q", "agents", "add", "bob"]);
    r.task("a", "title: a\nagent: alice\n");
    r.task("b", "title: b\nagent: alice\n");
    r.ok(&["tick"]);
    let a = "work/assigned/alice/a.yaml";
    append(
        &r,
        a,
        "result:\n  status: success\n  output: {n: 1}\n  next_agent: [bob, ghost]\n",
    );
    settle(&r, a);
    let b = "work/assigned/alice/b.yaml";
    append(
        &r,
        b,
        "result:\n  status: success\n  output: {n: 2}\n  next_agent: bob\n",
    );
    settle(&r, b);
    let (_, err) = r.code(&["tick"], 0);
    assert!(err.contains("retry a after bad_result"), "{err}");
    let at = r.where_is("a");
    assert_eq!(at, "work/ready/a.yaml", "retried");
    let text = r.read(&at);
    assert!(text.contains("code: bad_result"), "{text}");
    let said: Vec<&str> = text.lines().filter(|l| l.contains("'ghost'")).collect();
    assert_eq!(said.len(), 1, "{text}");
    let named = format!("{a}:13:21: result.next_agent names unknown agent 'ghost'");
    assert!(said[0].contains(&named), "{text}");
    assert!(
        said[0].contains("add it with 'coord agents add ghost'"),
        "{text}"
    );
    assert!(
        text.contains("- ghost"),
        "the result is kept in history: {text}"
    );
    let log = r.git(&["log", "--format=%s"]);
    assert!(!log.contains("a.ghost") && !log.contains("a.bob"), "{log}");
    assert_eq!(
        r.where_is("b"),
        "work/done/b.yaml",
        "the other task goes on"
    );
    assert_eq!(r.where_is("b.bob"), "work/assigned/bob/b.bob.yaml");
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_result_appended_after_the_coord_block_completes_the_task() {
    let r = repo();
    r.task("a", "title: a\nagent: alice\n");
    r.ok(&["tick"]);
    let path = "work/assigned/alice/a.yaml";
    let mut text = r.read(path);
    text.push_str("result:\n  status: success\n  output: {n: 1}\n");
    r.write(path, &text);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("a"), "work/done/a.yaml");
}

#[test]
fn a_file_rewritten_without_its_coord_block_keeps_it() {
    let r = repo();
    r.task("a", "title: a\nagent: alice\n");
    r.ok(&["tick"]);
    let path = "work/assigned/alice/a.yaml";
    let before = r.read(path);
    let created = before
        .lines()
        .find(|l| l.contains("created_at"))
        .expect("created_at")
        .to_string();
    r.write(path, "title: a\nagent: alice\nresult:\n  status: success\n");
    r.ok(&["tick"]);
    let done = r.read("work/done/a.yaml");
    assert!(done.contains(&created), "{done}");
    assert!(done.contains("attempt: 1"), "{done}");
    assert!(!r.git(&["log", "--format=%s"]).contains("adopt a"));
}

#[test]
fn files_that_are_not_tasks_are_listed_as_stray_and_never_committed() {
    let r = repo();
    r.write("work/assigned/alice/scratch.bin", &"z".repeat(5 << 20));
    r.task("a", "title: a\n");
    r.ok(&["tick"]);
    let files = r.git(&["log", "--name-only", "--format="]);
    assert!(!files.contains("scratch.bin"), "{files}");
    let s = status(&r);
    let problems = s["problems"].to_string();
    assert!(problems.contains("work/assigned/alice/scratch.bin"), "{s}");
    r.ok(&["tick"]);
    assert!(!r
        .git(&["log", "--name-only", "--format="])
        .contains("scratch.bin"));
}

/// A committed inbox file being rewritten in place is, until it settles, its committed
/// version standing in (docs/behaviour.md): neither a committed copy reusing a taken id nor a
/// committed invalid one is moved to invalid/ with its half-written bytes; each is rejected
/// whole once it settles.
#[test]
fn a_committed_inbox_file_being_rewritten_is_not_rejected_before_it_settles() {
    let r = repo();
    r.task("d1", "title: d1\nagent: alice\n");
    r.ok(&["tick"]);
    r.ok(&["complete", "d1", "--agent", "alice", "--attempt", "1"]);
    r.ok(&["tick"]);
    r.write("work/inbox/d1.yml", "title: new d1\n");
    r.write("work/inbox/bad.yaml", "title: [unclosed\n");
    r.git(&["add", "-A", "work"]);
    r.git(&["commit", "-qm", "a person's new files"]);
    r.write_now("work/inbox/d1.yml", "title: new d1, now being rewri");
    r.write_now("work/inbox/bad.yaml", "title: still bad, being rewri");
    r.ok(&["tick"]);
    for rel in ["work/inbox/d1.yml", "work/inbox/bad.yaml"] {
        assert!(r.exists(rel), "{rel} moved before it settled");
    }
    assert!(!r.exists("work/invalid/d1.yml") && !r.exists("work/invalid/bad.yaml"));
    append(&r, "work/inbox/d1.yml", "tten\n");
    append(&r, "work/inbox/bad.yaml", "tten: [\n");
    settle(&r, "work/inbox/d1.yml");
    settle(&r, "work/inbox/bad.yaml");
    r.ok(&["tick"]);
    assert_eq!(
        r.read("work/invalid/d1.yml"),
        "title: new d1, now being rewritten\n"
    );
    assert_eq!(
        r.read("work/invalid/bad.yaml"),
        "title: still bad, being rewritten: [\n"
    );
    assert_eq!(r.git_status(), "");
}

/// Returns the paths of task `id`'s files in HEAD's tree.
fn committed_copies(r: &TestRepo, id: &str) -> Vec<String> {
    r.git(&["ls-tree", "-r", "--name-only", "HEAD", "work"])
        .lines()
        .filter(|p| p.ends_with(&format!("/{id}.yaml")))
        .map(str::to_string)
        .collect()
}

/// A person's hand move (`git mv`) of a task whose moved file is still being written is
/// recorded whole once it settles, never as the deletion alone: HEAD (what `coord sync`
/// pushes) holds the task throughout.
#[test]
fn a_hand_move_still_settling_is_not_recorded_as_a_deletion_alone() {
    let r = repo();
    r.task("d", "title: d\nagent: alice\n");
    r.ok(&["tick"]);
    let (from, to) = ("work/assigned/alice/d.yaml", "work/ready/d.yaml");
    assert_eq!(r.where_is("d"), from);
    r.git(&["mv", from, to]);
    append(&r, to, "# reopened by hand\n");
    r.ok(&["tick"]);
    assert_eq!(committed_copies(&r, "d"), [from], "half a move recorded");
    settle(&r, to);
    r.ok(&["tick"]);
    assert_eq!(committed_copies(&r, "d").len(), 1, "{}", r.git_status());
    assert!(r.read(&r.where_is("d")).contains("# reopened by hand"));
}

/// A command on a task whose file someone is still writing (a person's note, an agent's
/// progress line) refuses with a way on instead of saying yes and doing nothing: the result,
/// cancel or heartbeat of a frozen file used to be left out silently. (With a `settle` of
/// 10 s or less, it waits for the file to settle instead.)
#[test]
fn a_command_on_a_task_still_being_written_refuses_and_works_once_it_settles() {
    let r = repo();
    let mut config = r.read("coord.yaml");
    config.push_str("\nsettle: 1h\n");
    r.commit_file("coord.yaml", &config, "settle for an hour");
    r.task("x", "title: x\nagent: alice\n");
    r.ok(&["tick"]);
    let path = "work/assigned/alice/x.yaml";
    append(&r, path, "# a note\n");
    for args in [
        &["complete", "x", "--agent", "alice"][..],
        &["fail", "x", "--agent", "alice", "--error", "E"],
        &["heartbeat", "x", "--agent", "alice"],
        &["cancel", "x"],
    ] {
        let (_, err) = r.code(args, 1);
        assert!(err.contains("task 'x' is being written"), "{args:?}: {err}");
    }
    settle(&r, path);
    r.ok(&["complete", "x", "--agent", "alice"]);
    r.ok(&["tick"]);
    let done = r.read(&r.where_is("x"));
    assert!(
        done.contains("# a note") && done.contains("status: success"),
        "{done}"
    );
}
