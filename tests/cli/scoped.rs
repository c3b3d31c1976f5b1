//! Scoped single-task commands: `claim`, `complete`/`fail` and `new` read only the
//! folders they act on and record nobody's changes. A person's uncommitted edit elsewhere
//! stays as it is, uncommitted, for the next tick to record as theirs; an edit of a file the
//! command touches is recorded first; an id is never given to a second live file, whether
//! or not its folder was read.

use crate::harness::TestRepo;

/// A repo with a pull agent `p` (up to 10 tasks at once) and ready tasks `t0`..`t4`.
fn ready() -> TestRepo {
    let r = TestRepo::with_agents(&["p --pull --max-active 10"]);
    for i in 0..5 {
        r.task(&format!("t{i}"), &format!("title: Task {i}\n"));
    }
    r.ok(&["tick"]);
    r
}

/// Returns how many `record external changes` commits HEAD has.
fn recordings(r: &TestRepo) -> usize {
    r.git(&["log", "--format=%s"])
        .lines()
        .filter(|s| *s == "coord: record external changes")
        .count()
}

/// Runs a verbose command; returns whether it read only its scope (it says so with -v).
fn in_scope(r: &TestRepo, args: &[&str]) -> bool {
    let args: Vec<&str> = ["-v"].iter().chain(args).copied().collect();
    let out = r.run(&args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stderr).contains("nothing to record")
}

/// Returns the paths HEAD's commit changed.
fn head_paths(r: &TestRepo) -> String {
    r.git(&["show", "--name-only", "--format=", "HEAD"])
}

#[test]
fn single_task_commands_read_only_their_scope() {
    let r = ready();
    let before = recordings(&r);
    assert!(in_scope(&r, &["new", "Fresh task"]));
    assert!(in_scope(&r, &["claim", "--agent", "p"]));
    assert!(r.where_is("t0").starts_with("work/assigned/p/"));
    let complete = ["complete", "t0", "--agent", "p", "--attempt", "1"];
    assert!(in_scope(&r, &complete));
    assert_eq!(r.git_status(), "");
    assert_eq!(recordings(&r), before, "nothing was anyone else's");
}

#[test]
fn a_persons_edit_elsewhere_survives_a_claim_and_the_next_tick_records_it() {
    let r = ready();
    let edited = r.read("work/ready/t4.yaml") + "# a person's note\n";
    r.write("work/ready/t4.yaml", &edited);
    r.write("work/inbox/byhand.yaml", "title: By hand\n");
    r.write("work/inbox/staged.yaml", "title: Staged\n");
    r.git(&["add", "work/inbox/staged.yaml"]);
    let before = recordings(&r);
    assert!(in_scope(&r, &["claim", "--agent", "p"]));
    assert!(r.where_is("t0").starts_with("work/assigned/p/"));
    assert_eq!(
        head_paths(&r),
        "work/assigned/p/t0.yaml\nwork/ready/t0.yaml\n"
    );
    assert_eq!(r.read("work/ready/t4.yaml"), edited, "untouched");
    assert_eq!(
        r.git_status(),
        "A  work/inbox/staged.yaml\n M work/ready/t4.yaml\n?? work/inbox/byhand.yaml\n",
        "still the person's, uncommitted"
    );
    assert_eq!(recordings(&r), before);
    r.ok(&["tick"]);
    assert_eq!(
        recordings(&r),
        before + 1,
        "the tick records them as theirs"
    );
    assert_eq!(r.git_status(), "");
    assert!(r.read("work/ready/t4.yaml").contains("# a person's note"));
}

#[test]
fn an_edit_of_the_claimed_task_is_recorded_before_the_claim() {
    let r = ready();
    let edited = r.read("work/ready/t0.yaml") + "# a person's note\n";
    r.write("work/ready/t0.yaml", &edited);
    let before = recordings(&r);
    assert!(!in_scope(&r, &["claim", "--agent", "p"]));
    assert_eq!(recordings(&r), before + 1, "recorded as the person's first");
    assert!(r.where_is("t0").starts_with("work/assigned/p/"));
    assert!(r
        .read("work/assigned/p/t0.yaml")
        .contains("# a person's note"));
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_staged_edit_of_the_claimed_task_is_recorded_before_the_claim() {
    let r = ready();
    let edited = r.read("work/ready/t0.yaml") + "# staged by a person\n";
    r.write("work/ready/t0.yaml", &edited);
    r.git(&["add", "work/ready/t0.yaml"]);
    let before = recordings(&r);
    assert!(!in_scope(&r, &["claim", "--agent", "p"]));
    assert_eq!(recordings(&r), before + 1, "recorded as the person's first");
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_ready_task_with_a_copy_in_an_unread_folder_is_never_claimed() {
    let r = ready();
    let copy = r.read("work/ready/t0.yaml");
    r.write("work/done/t0.yaml", &copy);
    let out = r.ok(&["claim", "--agent", "p"]);
    assert!(out.contains("t1"), "{out}");
    assert_eq!(
        r.find("t0"),
        ["work/done/t0.yaml", "work/ready/t0.yaml"],
        "both copies stay where they are"
    );
    assert!(r.where_is("t1").starts_with("work/assigned/p/"));
}

#[test]
fn new_never_takes_an_id_a_file_in_an_unread_folder_has() {
    let r = ready();
    r.write("work/done/taken.yaml", "title: Taken\n");
    let (_, err) = r.code(&["new", "Again", "--id", "taken"], 1);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(r.find("taken"), ["work/done/taken.yaml"]);
}

#[test]
fn a_result_for_a_task_a_person_edited_is_written_after_their_edit_is_recorded() {
    let r = ready();
    r.ok(&["claim", "--agent", "p"]);
    let edited = r.read("work/assigned/p/t0.yaml") + "# a person's note\n";
    r.write("work/assigned/p/t0.yaml", &edited);
    let before = recordings(&r);
    let complete = ["complete", "t0", "--agent", "p", "--attempt", "1"];
    assert!(!in_scope(&r, &complete));
    assert_eq!(recordings(&r), before + 1, "recorded as the person's first");
    let text = r.read("work/assigned/p/t0.yaml");
    assert!(text.contains("# a person's note") && text.contains("status: success"));
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_claim_whose_input_reads_another_task_goes_the_whole_way() {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.task("dep", "title: Dep\n");
    r.ok(&["tick"]);
    r.ok(&["claim", "--agent", "p"]);
    let output = r.home().join("output.json");
    std::fs::write(&output, r#"{"summary": "from dep"}"#).expect("write");
    let output = output.to_str().expect("utf8");
    r.ok(&[
        "complete",
        "dep",
        "--agent",
        "p",
        "--attempt",
        "1",
        "--output",
        output,
    ]);
    r.ok(&["tick"]);
    let uses = "title: Uses\ndepends_on: [dep]\ninput:\n  x: ${tasks.dep.result.output.summary ?? \"none\"}\n";
    r.task("uses", uses);
    r.ok(&["tick"]);
    assert!(!in_scope(&r, &["claim", "--agent", "p"]));
    assert!(r.where_is("uses").starts_with("work/assigned/p/"));
    let text = r.read("work/assigned/p/uses.yaml");
    assert!(
        text.contains("x: from dep"),
        "resolved from the dependency: {text}"
    );
}

/// Runs a verbose tick; returns whether it trusted the vouch left before it (no scan).
fn tick_skips_the_scan(r: &TestRepo) -> bool {
    let out = r.run(&["-v", "tick"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).contains("scan skipped")
}

/// `ready()` with a vouch left: every stamp settled, then a `new` that goes the whole way.
fn vouched() -> TestRepo {
    let r = ready();
    std::thread::sleep(std::time::Duration::from_millis(200));
    r.ok(&["new", "By key", "--idempotency-key", "k"]);
    assert!(r.index_holds("vouch"), "a vouch to carry");
    r
}

#[test]
fn scoped_commands_carry_the_vouch_to_the_next_tick() {
    let r = vouched();
    assert!(in_scope(&r, &["new", "Fresh task"]));
    assert!(in_scope(&r, &["claim", "--agent", "p"]));
    let complete = ["complete", "t0", "--agent", "p", "--attempt", "1"];
    assert!(in_scope(&r, &complete));
    let before = recordings(&r);
    assert!(tick_skips_the_scan(&r), "the carried vouch holds");
    assert_eq!(recordings(&r), before);
    assert_eq!(r.git_status(), "");
}

#[test]
fn a_persons_edit_between_scoped_commands_is_still_recorded_by_the_tick() {
    let r = vouched();
    assert!(in_scope(&r, &["claim", "--agent", "p"]));
    let text = r.read("work/ready/t4.yaml").replace("Task 4", "Task N");
    r.write("work/ready/t4.yaml", &text);
    r.write("work/inbox/byhand.yaml", "title: By hand\n");
    // Past the racy window: only the carried vouch's stat keys tell the edit apart.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(in_scope(&r, &["claim", "--agent", "p"]));
    let before = recordings(&r);
    assert!(!tick_skips_the_scan(&r), "the vouch no longer holds");
    assert_eq!(recordings(&r), before + 1, "recorded as the person's");
    assert_eq!(r.git_status(), "");
}

/// A person's `git rm --cached` + `git commit` between two scoped commands moves HEAD and the
/// index without touching a file's stat data: the carried vouch must not hold, so the next
/// tick scans and records the untracked task file as the person's change (once it has
/// settled: the test wrote it a moment ago), leaving `git status` clean.
#[test]
fn a_persons_commit_between_scoped_commands_voids_the_carried_vouch() {
    let r = vouched();
    assert!(in_scope(&r, &["claim", "--agent", "p"]));
    r.git(&["rm", "-q", "--cached", "work/ready/t4.yaml"]);
    r.git(&["commit", "-qm", "a person untracks t4"]);
    assert!(in_scope(&r, &["claim", "--agent", "p"]));
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let before = recordings(&r);
    assert!(!tick_skips_the_scan(&r), "the vouch no longer holds");
    assert_eq!(recordings(&r), before + 1, "recorded as the person's");
    assert_eq!(r.git_status(), "");
    assert!(r
        .git(&["ls-files", "work/ready/t4.yaml"])
        .contains("t4.yaml"));
}
