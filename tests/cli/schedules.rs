//! Recurring tasks: `work/schedules/<name>.yaml` makes the tick create one task per slot,
//! across clock jumps, clones and reverts; `coord schedules` lists the next slots.

use crate::harness::{git_in, Net, TestRepo};

const HOURLY: &str = "# every hour, on the hour\ncron: '0 * * * *'\ntimezone: UTC\ncatch_up: latest\ntask:\n  title: Hourly report\n  agent: bot\n  labels: [report]\n";

/// Returns the ids of the tasks that schedule `name` created, one per creating commit, in
/// the history of `rev` in the repository at `dir` (oldest first).
fn created(dir: &std::path::Path, rev: &str, name: &str) -> Vec<String> {
    let log = git_in(dir, &["log", "--reverse", "--format=%s", rev]);
    let prefix = format!("coord: schedule {name}: new task ");
    log.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| rest.split(' ').next().unwrap_or_default().to_string())
        .collect()
}

fn hourly_repo() -> TestRepo {
    let r = TestRepo::with_agents(&["bot"]);
    r.commit_file(
        "work/schedules/hourly.yaml",
        HOURLY,
        "add the hourly schedule",
    );
    r
}

#[test]
fn one_task_per_slot_across_clock_jumps_forward_and_back() {
    let mut r = hourly_repo();
    r.at("2026-11-28T03:20:00Z").ok(&["tick"]);
    // Created and taken in by the same tick.
    assert_eq!(
        r.find("hourly.20261128T0300Z"),
        ["work/assigned/bot/hourly.20261128T0300Z.yaml"]
    );
    let text = r.read("work/assigned/bot/hourly.20261128T0300Z.yaml");
    assert!(text.starts_with("# Created by schedule 'hourly' for the slot 2026-11-28T03:00:00Z.\ntitle: Hourly report\n"), "{text}");
    r.at("2026-11-28T03:50:00Z").ok(&["tick"]);
    // The clock jumps forward four hours: only the latest missed slot runs.
    r.at("2026-11-28T07:10:00Z").ok(&["tick"]);
    // And back: no slot before the last one run comes again.
    r.at("2026-11-28T05:30:00Z").ok(&["tick"]);
    r.at("2026-11-28T06:59:00Z").ok(&["tick"]);
    r.at("2026-11-28T08:00:00Z").ok(&["tick"]);
    r.at("2026-11-28T08:00:30Z").ok(&["tick"]);
    assert_eq!(
        created(r.path(), "HEAD", "hourly"),
        [
            "hourly.20261128T0300Z",
            "hourly.20261128T0700Z",
            "hourly.20261128T0800Z"
        ]
    );
}

#[test]
fn skip_runs_only_slots_seen_within_grace() {
    let mut r = TestRepo::with_agents(&["bot"]);
    let skip = HOURLY.replace("catch_up: latest", "catch_up: skip\ngrace: 10m");
    r.commit_file("work/schedules/tight.yaml", &skip, "add a schedule");
    r.at("2026-11-28T03:20:00Z").ok(&["tick"]);
    r.at("2026-11-28T04:05:00Z").ok(&["tick"]);
    r.at("2026-11-28T05:30:00Z").ok(&["tick"]);
    assert_eq!(created(r.path(), "HEAD", "tight"), ["tight.20261128T0400Z"]);
}

#[test]
fn a_paused_schedule_creates_nothing() {
    let mut r = TestRepo::with_agents(&["bot"]);
    let paused = format!("{HOURLY}paused: true\n");
    r.commit_file(
        "work/schedules/hourly.yaml",
        &paused,
        "add a paused schedule",
    );
    r.at("2026-11-28T03:20:00Z").ok(&["tick"]);
    assert!(created(r.path(), "HEAD", "hourly").is_empty());
    let listed = r.json(&["schedules"]);
    assert_eq!(listed["schedules"][0]["paused"], true);
    assert_eq!(listed["schedules"][0]["next"], serde_json::json!([]));
}

#[test]
fn a_reverted_scheduled_task_is_not_created_again() {
    let mut r = hourly_repo();
    let before = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    r.at("2026-11-28T03:20:00Z").ok(&["tick"]);
    assert_eq!(r.find("hourly.20261128T0300Z").len(), 1);
    r.git(&["revert", "--no-edit", &format!("{before}..HEAD")]);
    assert!(r.find("hourly.20261128T0300Z").is_empty());
    r.at("2026-11-28T03:30:00Z").ok(&["tick"]);
    r.at("2026-11-28T03:59:00Z").ok(&["tick"]);
    assert!(r.find("hourly.20261128T0300Z").is_empty(), "re-created");
    // A fresh clone has no record of its own: history alone says the slot ran.
    std::fs::remove_file(r.abs(".git/coord/schedule-slots.json")).expect("remove record");
    r.at("2026-11-28T03:59:30Z").ok(&["tick"]);
    assert!(r.find("hourly.20261128T0300Z").is_empty(), "re-created");
    r.at("2026-11-28T04:00:00Z").ok(&["tick"]);
    assert_eq!(
        created(r.path(), "HEAD", "hourly"),
        ["hourly.20261128T0300Z", "hourly.20261128T0400Z"]
    );
}

#[test]
fn two_clones_ticking_one_schedule_create_each_slot_once_on_the_remote() {
    let net = Net::new(&["bot"]);
    net.seed.commit_file(
        "work/schedules/hourly.yaml",
        HOURLY,
        "add the hourly schedule",
    );
    net.seed.git(&["push", "-q", "origin", "main"]);
    let mut a = net.clone();
    let mut b = net.clone();
    // b creates the slot's task locally first; a pushes its own copy; b syncs after.
    b.at("2026-11-28T03:20:00Z").ok(&["tick"]);
    a.at("2026-11-28T03:21:00Z").ok(&["sync"]);
    b.at("2026-11-28T03:22:00Z").ok(&["sync"]);
    for hour in ["04", "05"] {
        a.at(&format!("2026-11-28T{hour}:01:00Z")).ok(&["sync"]);
        b.at(&format!("2026-11-28T{hour}:02:00Z")).ok(&["sync"]);
        a.at(&format!("2026-11-28T{hour}:03:00Z")).ok(&["sync"]);
    }
    assert_eq!(
        created(net.remote.path(), "main", "hourly"),
        [
            "hourly.20261128T0300Z",
            "hourly.20261128T0400Z",
            "hourly.20261128T0500Z"
        ]
    );
    b.ok(&["sync"]);
    assert_eq!(b.find("hourly.20261128T0300Z").len(), 1);
}

#[test]
fn schedules_lists_next_slots_and_names_a_bad_file() {
    let mut r = hourly_repo();
    r.at("2026-11-28T03:20:00Z");
    let out = r.ok(&["schedules"]);
    assert!(
        out.contains("hourly  '0 * * * *' UTC  last none  next 2026-11-28T04:00:00Z, 2026-11-28T05:00:00Z, 2026-11-28T06:00:00Z"),
        "{out}"
    );
    r.ok(&["tick"]);
    let listed = r.json(&["schedules", "--next", "1"]);
    let row = &listed["schedules"][0];
    assert_eq!(row["name"], "hourly");
    assert_eq!(row["last_slot"], "2026-11-28T03:00:00Z");
    assert_eq!(row["next"], serde_json::json!(["2026-11-28T04:00:00Z"]));
    assert_eq!(row["catch_up"], "latest");
    r.commit_file(
        "work/schedules/broken.yaml",
        "cron: '99 * * * *'\ntask: {title: x}\n",
        "add a broken schedule",
    );
    let (out, err) = r.code(&["schedules"], 1);
    assert!(
        out.contains(
            "broken  invalid: work/schedules/broken.yaml: cron '99 * * * *' does not parse"
        ),
        "{out}"
    );
    assert!(err.contains("1 schedule(s) do not read"), "{err}");
    let tick = r.json(&["tick"]);
    let attention = tick.to_string();
    assert!(attention.contains("broken.yaml"), "{attention}");
    r.commit_file(
        "work/schedules/broken.yaml",
        "cron: '0 * * * *'\ntask: {title: x, priority: urgent}\n",
        "a template that is not a task",
    );
    let (out, _) = r.code(&["schedules"], 1);
    assert!(
        out.contains("the task template is not a valid task"),
        "{out}"
    );
}

#[test]
fn a_schedule_name_too_long_for_its_slot_ids_is_named_not_skipped_silently() {
    let r = hourly_repo();
    let long = "n".repeat(120);
    r.commit_file(
        &format!("work/schedules/{long}.yaml"),
        "cron: '*/5 * * * *'\ntask: {title: t}\n",
        "a schedule with a long name",
    );
    let (out, err) = r.code(&["schedules"], 1);
    assert!(out.contains("rename the file"), "{out}");
    assert!(err.contains("1 schedule(s) do not read"), "{err}");
}

#[test]
fn a_slot_task_reverted_on_the_remote_is_not_created_again_by_a_fresh_clone() {
    let net = Net::new(&["bot"]);
    net.seed.commit_file(
        "work/schedules/hourly.yaml",
        HOURLY,
        "add the hourly schedule",
    );
    net.seed.git(&["push", "-q", "origin", "main"]);
    let before = net.seed.git(&["rev-parse", "HEAD"]).trim().to_string();
    let mut a = net.clone();
    a.at("2026-11-28T03:20:00Z").ok(&["sync"]);
    // A person reverts what the tick made and pushes the revert.
    net.seed.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    net.seed
        .git(&["revert", "--no-edit", &format!("{before}..HEAD")]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    // Clones that never saw the slot, and the one that made it, tick the same hour again.
    let mut fresh = net.clone();
    fresh.at("2026-11-28T03:40:00Z").ok(&["sync"]);
    a.at("2026-11-28T03:50:00Z").ok(&["sync"]);
    assert!(fresh.find("hourly.20261128T0300Z").is_empty(), "re-created");
    fresh.at("2026-11-28T04:01:00Z").ok(&["sync"]);
    assert_eq!(
        created(net.remote.path(), "main", "hourly"),
        ["hourly.20261128T0300Z", "hourly.20261128T0400Z"]
    );
}
