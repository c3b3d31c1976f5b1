//! People's edits of task files coord works on: an editor saving a file after coord moved it,
//! a task copied by hand into another folder.

use crate::harness::TestRepo;

/// An editor saves the file it had open at the path coord moved it from: the agent's
/// `complete` goes on, and the next tick carries the person's edit into the moved task (an
/// unchanged save is removed), leaving one file per id and nothing for `doctor`.
#[test]
fn an_editors_save_after_a_claim_never_blocks_complete_and_its_edit_is_kept() {
    let r = TestRepo::with_agents(&["p --pull --max-active 2"]);
    r.ok(&["new", "X", "--id", "x"]);
    r.ok(&["new", "Y", "--id", "y"]);
    r.ok(&["tick"]);
    let (x_before, y_before) = (r.read("work/ready/x.yaml"), r.read("work/ready/y.yaml"));
    r.ok(&["claim", "--agent", "p"]);
    r.ok(&["claim", "--agent", "p"]);
    r.write(
        "work/ready/x.yaml",
        &x_before.replace("title: X\n", "title: X\ndescription: a person's edit\n"),
    );
    r.write("work/ready/y.yaml", &y_before);
    r.ok(&["complete", "x", "--agent", "p", "--attempt", "1"]);
    r.ok(&["tick"]);
    assert_eq!(r.find("x"), ["work/done/x.yaml"]);
    assert!(
        r.read("work/done/x.yaml")
            .contains("description: a person's edit"),
        "{}",
        r.read("work/done/x.yaml")
    );
    assert_eq!(r.find("y"), ["work/assigned/p/y.yaml"]);
    assert_eq!(r.git_status(), "");
    let out = r.ok(&["doctor"]);
    assert!(!out.contains("'x'") && !out.contains("'y'"), "{out}");
    // Both saves stay in history: the edit was recorded before it was carried over.
    let log = r.git(&["log", "--format=%s"]);
    assert!(log.contains("record external changes"), "{log}");
    r.ok(&["complete", "y", "--agent", "p", "--attempt", "1"]);
}

/// A task copied by hand into an agent's folder (instead of moved) is one id in two places:
/// `doctor` gives one piece of advice for it, never also "the next tick adopts the folder"
/// for the copy it says to remove, and `doctor --fix` does what the advice says.
#[test]
fn doctor_gives_one_advice_for_a_copied_task_and_fix_follows_it() {
    let r = TestRepo::with_agents(&["bob --pull"]);
    r.ok(&["new", "X", "--id", "x"]);
    r.ok(&["tick"]);
    let text = r.read("work/ready/x.yaml");
    r.write("work/assigned/bob/x.yaml", &text);
    let (out, _) = r.code(&["--json", "doctor"], 1);
    let json: serde_json::Value = serde_json::from_str(&out).expect("one JSON value");
    let about_x: Vec<&serde_json::Value> = json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] != "uncommitted")
        .filter(|f| f["message"].as_str().is_some_and(|m| m.contains("x.yaml")))
        .collect();
    assert_eq!(about_x.len(), 1, "{json}");
    assert_eq!(about_x[0]["code"], "duplicate", "{json}");
    r.code(&["doctor", "--fix"], 0);
    assert_eq!(r.find("x"), ["work/ready/x.yaml"]);
    assert_eq!(r.git_status(), "");
}

/// A task file renamed by hand outside the inbox would change the task's id, and its
/// dependents would wait for the old one forever: the tick moves it back to its id's name,
/// says so, and the dependent goes on once the task is done.
#[test]
fn a_task_renamed_by_hand_keeps_its_id_and_its_dependents_go_on() {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.ok(&["new", "A", "--id", "a"]);
    r.ok(&["new", "B", "--id", "b", "--depends-on", "a"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("b"), "work/blocked/b.yaml");
    std::fs::rename(r.abs("work/ready/a.yaml"), r.abs("work/ready/renamed.yaml")).expect("rename");
    let (out, err) = r.code(&["tick"], 0);
    let said = format!("{out}{err}");
    assert!(
        said.contains("work/ready/renamed.yaml is task 'a' renamed by hand")
            && said.contains("moved back to work/ready/a.yaml"),
        "{said}"
    );
    assert!(r.find("renamed").is_empty());
    assert_eq!(r.where_is("a"), "work/ready/a.yaml");
    assert_eq!(r.git_status(), "");
    assert_eq!(r.ok(&["claim", "--agent", "p"]).trim(), "a");
    r.ok(&["complete", "a", "--agent", "p", "--attempt", "1"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("b"), "work/ready/b.yaml");
}

/// A rename a person commits is taken as meant, and never silently: status and doctor name the
/// task left depending on the old id.
#[test]
fn a_committed_rename_names_the_tasks_left_waiting_for_the_old_id() {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.ok(&["new", "A", "--id", "a"]);
    r.ok(&["new", "B", "--id", "b", "--depends-on", "a"]);
    r.ok(&["tick"]);
    r.git(&["mv", "work/ready/a.yaml", "work/ready/z.yaml"]);
    r.git(&["commit", "-qm", "rename a to z"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("z"), "work/ready/z.yaml");
    let status = r.ok(&["status"]);
    assert!(status.contains("waiting for a (missing)"), "{status}");
    let (out, _) = r.code(&["doctor"], 1);
    assert!(
        out.contains("depends on 'a', which does not exist"),
        "{out}"
    );
}

/// A task copied by hand into another folder, both copies then edited: `doctor --fix` keeps
/// the copy whose `coord:` block agrees with its folder, with the text of the copy written
/// last, and removes the other; the older edit stays in git history.
#[test]
fn doctor_fix_keeps_the_newest_edit_of_a_copied_task_and_loses_no_bytes() {
    let r = TestRepo::with_agents(&["bob --pull"]);
    r.ok(&["new", "X", "--id", "x"]);
    r.ok(&["tick"]);
    let text = r.read("work/ready/x.yaml");
    let edit = |what: &str| text.replace("title: X\n", &format!("title: X\ndescription: {what}\n"));
    r.write("work/ready/x.yaml", &edit("the older edit"));
    r.write("work/assigned/bob/x.yaml", &edit("the newest edit"));
    let (out, _) = r.code(&["doctor"], 1);
    let line = out.lines().find(|l| l.contains("'x'")).expect("x named");
    assert!(line.contains("coord doctor --fix"), "{line}");
    r.ok(&["doctor", "--fix"]);
    assert_eq!(r.find("x"), ["work/ready/x.yaml"]);
    let kept = r.read("work/ready/x.yaml");
    assert!(kept.contains("description: the newest edit"), "{kept}");
    assert!(kept.contains("state: ready"), "{kept}");
    assert_eq!(r.git_status(), "");
    let history = r.git(&["log", "-p", "--", "work/"]);
    assert!(history.contains("the older edit"), "{history}");
}
