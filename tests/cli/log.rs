//! `coord log` for people: aligned columns, no entries that change no state (`assigned ->
//! assigned`: results written, heartbeats) unless `--all`, and people's edits, additions and
//! deletions of task files, with who made them.

use crate::harness::TestRepo;
use serde_json::Value;

fn repo() -> TestRepo {
    let r = TestRepo::with_agents(&["p --pull"]);
    r.ok(&["new", "Write the spec", "--id", "spec"]);
    r.ok(&["new", "Two", "--id", "two", "--capability", "zz"]);
    r.ok(&["tick"]);
    r.ok(&["claim", "--agent", "p"]);
    r.ok(&["heartbeat", "spec", "--agent", "p", "--attempt", "1"]);
    r.ok(&["complete", "spec", "--agent", "p", "--attempt", "1"]);
    r.ok(&["tick"]);
    r
}

#[test]
fn log_leaves_out_entries_that_change_no_state_unless_all() {
    let r = repo();
    let log = r.ok(&["log", "spec"]);
    assert!(!log.contains("assigned -> assigned"), "{log}");
    assert!(log.contains("assigned -> done"), "{log}");
    let all = r.ok(&["log", "spec", "--all"]);
    assert!(
        all.contains("assigned -> assigned  p reports success"),
        "{all}"
    );
    let v: Value = r.json(&["log", "spec"]);
    let noise = v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["from"] == e["to"])
        .count();
    assert_eq!(noise, 0, "{v}");
}

#[test]
fn log_shows_peoples_edits_and_deletions_with_who() {
    let r = repo();
    r.write(
        "work/ready/two.yaml",
        "title: Two, edited\ncapabilities: [zz]\n",
    );
    r.git(&["commit", "-q", "-am", "retitle two"]);
    r.git(&["rm", "-q", "work/done/spec.yaml"]);
    r.git(&["commit", "-q", "-m", "drop spec"]);
    let log = r.ok(&["log"]);
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines[0].contains("spec")
            && lines[0].contains("deleted from done")
            && lines[0].ends_with("by Test Person: drop spec"),
        "{log}"
    );
    assert!(
        lines[1].contains("two")
            && lines[1].contains("edited in ready")
            && lines[1].ends_with("by Test Person: retitle two"),
        "{log}"
    );
    let v: Value = r.json(&["log", "two", "--limit", "1"]);
    assert_eq!(v["entries"][0]["op"], "edit", "{v}");
    assert_eq!(v["entries"][0]["by"], "Test Person", "{v}");
    r.write(
        "work/ready/two.yaml",
        "title: Two, again\ncapabilities: [zz]\n",
    );
    r.ok(&["tick"]);
    let recorded = r.ok(&["log", "two", "--limit", "1"]);
    assert!(recorded.contains("edited in ready"), "{recorded}");
}

#[test]
fn log_columns_are_aligned() {
    let r = repo();
    let log = r.ok(&["log"]);
    let lines: Vec<&str> = log.lines().collect();
    let summary = lines[0].find("complete spec").expect("newest entry");
    let change = lines[0].find("assigned -> done").expect("newest entry");
    for l in &lines {
        for col in [change, summary] {
            assert!(
                l[..col].ends_with("  ") && !l[col..].starts_with(' '),
                "column {col} of {l:?}:\n{log}"
            );
        }
    }
}
