//! Large passes: a tick over many tasks commits its transitions in groups, and the
//! audit trail stays per task: `coord log <id>` and `git log -- <path>` show every transition
//! of every task with its trailers; small ticks keep one commit per transition.

use crate::harness::TestRepo;

/// A repo on a RAM file system with one agent `bot` that takes up to `max` tasks and `n`
/// tasks in the inbox, committed as people would.
fn burst(n: usize, max: usize) -> TestRepo {
    let r = TestRepo::empty_in_memory();
    r.ok(&["init"]);
    r.ok(&["agents", "add", "bot", "--max-active", &max.to_string()]);
    for i in 0..n {
        r.task(&format!("t-{i:03}"), &format!("title: Task {i}\n"));
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "people drop tasks"]);
    r
}

#[test]
fn a_large_tick_commits_in_groups_and_log_shows_every_transition() {
    let (n, assigned) = (150, 40);
    let r = burst(n, assigned);
    let before = r.commit_count();
    r.ok(&["tick"]);
    let made = r.commit_count() - before;
    assert!(
        (2..=32).contains(&made),
        "{} transitions in {made} commits",
        n + assigned
    );
    let log = r.ok(&["log", "--json"]);
    let answer: serde_json::Value = serde_json::from_str(&log).expect("json");
    let entries = answer["entries"].as_array().expect("entries");
    let moves = |id: &str| -> Vec<(String, String)> {
        entries
            .iter()
            .filter(|e| e["task"] == id && e["by"].is_null())
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                (s("from"), s("to"))
            })
            .collect()
    };
    for i in 0..n {
        let id = format!("t-{i:03}");
        let found = moves(&id);
        let expected = if r.find(&id)[0].starts_with("work/assigned/") {
            vec![
                ("ready".to_string(), "assigned".to_string()),
                ("inbox".to_string(), "ready".to_string()),
            ]
        } else {
            vec![("inbox".to_string(), "ready".to_string())]
        };
        assert_eq!(found, expected, "{id}");
    }
    let one = r.ok(&["log", "t-000"]);
    assert!(one.contains("inbox") && one.contains("ready"), "{one}");
    let path = r.where_is("t-149");
    let git_log = r.git(&["log", "--format=%B", "--", &path, "work/inbox/t-149.yaml"]);
    assert!(
        git_log.contains("Coord-Task: t-149\nCoord-From: inbox\nCoord-To: ready"),
        "{git_log}"
    );
}

/// A task taken in and assigned in the same large pass is committed once, in `assigned/`:
/// its version in `ready/` is in no tree of the history (one version fewer for a clone to
/// read), while `coord log` still shows both of its transitions (the test above).
#[test]
fn a_task_taken_in_and_assigned_in_one_large_pass_is_never_committed_in_ready() {
    let r = burst(150, 40);
    r.ok(&["tick"]);
    let in_ready = r.git(&["log", "--format=", "--name-only", "--", "work/ready/"]);
    let assigned = std::fs::read_dir(r.abs("work/assigned/bot")).expect("assigned");
    let mut count = 0;
    for e in assigned.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(!in_ready.contains(&format!("work/ready/{name}")), "{name}");
        count += 1;
    }
    assert_eq!(count, 40);
    assert!(
        in_ready.contains("work/ready/t-149.yaml"),
        "the others wait in ready/"
    );
}

#[test]
fn a_small_tick_keeps_one_commit_per_transition() {
    let r = burst(20, 5);
    let before = r.commit_count();
    r.ok(&["tick"]);
    assert_eq!(r.commit_count() - before, 25);
}

#[test]
fn serve_events_deliver_every_transition_of_a_grouped_commit() {
    let n = 100;
    let r = burst(n, 1);
    let s = crate::http::Server::start(&r);
    let mut events = s.events();
    r.ok(&["tick"]);
    let every = |t: &str| {
        (0..n).all(|i| t.contains(&format!(r#""task":"t-{i:03}","from":"inbox","to":"ready""#)))
    };
    let seen = events.until(std::time::Duration::from_secs(20), every);
    assert!(seen, "events so far:\n{}", events.seen);
    assert!(
        !events.seen.contains("changed in the work tree"),
        "{}",
        events.seen
    );
    let metrics = s.get("/metrics").body;
    assert!(
        metrics.contains(&format!(
            r#"coord_transitions_total{{from="inbox",to="ready"}} {n}"#
        )),
        "{metrics}"
    );
}
