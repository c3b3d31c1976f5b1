//! `coord new` makes every task the schema allows: description, authority, due,
//! timeout, max attempts, labels and a fan-out with a join; and handoff children carry their
//! own step's title and description, not a copy of the parent's.

use crate::harness::{TestRepo, EVERY_NEW_FLAG};
use crate::steps::{complete, show, tick_at};
use serde_json::json;

#[test]
fn handoff_children_carry_their_own_steps_title_and_description() {
    let mut r = TestRepo::with_agents(&["a", "b", "c", "pm"]);
    r.task(
        "spec",
        "title: Write the spec\ndescription: The API, every endpoint.\nagent: a\nnext_agent: [b, c]\njoin_agent: pm\n",
    );
    tick_at(&mut r, 0);
    complete(
        &r,
        "spec",
        &json!({"pages": 3}),
        &["--agent", "a", "--attempt", "1"],
    );
    tick_at(&mut r, 1);
    for (id, agent) in [("spec.b", "b"), ("spec.c", "c")] {
        let task = &show(&r, id)["task"];
        assert_eq!(
            task["title"],
            format!("Write the spec: next step, by {agent}"),
            "{task}"
        );
        let description = task["description"].as_str().unwrap_or_default();
        assert!(
            description.contains("by a when task spec (Write the spec) succeeded")
                && description.contains("input.previous")
                && !description.contains("every endpoint"),
            "{task}"
        );
    }
    let join = &show(&r, "spec.join")["task"];
    assert_eq!(
        join["title"], "Write the spec: join the results of spec.b, spec.c, by pm",
        "{join}"
    );
    let description = join["description"].as_str().unwrap_or_default();
    assert!(description.contains("input.results"), "{join}");
}

#[test]
fn new_writes_every_field_the_schema_allows() {
    let r = TestRepo::with_agents(&["a", "b", "c"]);
    let id = r.ok(&[&["new", "Ship it", "--id", "ship"], EVERY_NEW_FLAG].concat());
    assert_eq!(id.trim(), "ship");
    assert_eq!(
        r.read("work/inbox/ship.yaml"),
        "title: Ship it\ndescription: \"Everything: docs, release notes.\"\nnext_agent:\n  - a\n  - b\njoin_agent: c\nauthority: do_it_and_show_me\ntimeout: 2h\nmax_attempts: 5\ndue: 2026-12-01T17:00:00Z\nlabels:\n  - release\n"
    );
    r.ok(&["validate"]);
}

#[test]
fn a_fan_out_made_by_new_joins_at_the_join_agent() {
    let mut r = TestRepo::with_agents(&["a", "b", "c", "pm"]);
    r.ok(&[
        "new",
        "Plan",
        "--id",
        "plan",
        "--agent",
        "a",
        "--next-agent",
        "b",
        "--next-agent",
        "c",
        "--join-agent",
        "pm",
    ]);
    tick_at(&mut r, 0);
    complete(
        &r,
        "plan",
        &json!({"ok": true}),
        &["--agent", "a", "--attempt", "1"],
    );
    tick_at(&mut r, 1);
    assert_eq!(show(&r, "plan.join")["state"], "blocked");
    assert_eq!(show(&r, "plan.join")["task"]["agent"], "pm");
    assert_eq!(
        show(&r, "plan.join")["task"]["depends_on"],
        json!(["plan.b", "plan.c"])
    );
}

#[test]
fn new_refuses_what_the_tick_would_reject_with_a_usage_error() {
    let r = TestRepo::with_agents(&["a"]);
    for (args, want) in [
        (&["--join-agent", "a"][..], "give the agents to fan out to"),
        (&["--due", "next week"][..], "due"),
        (&["--timeout", "soon"][..], "soon"),
        (&["--max-attempts", "0"][..], "0"),
        (&["--authority", "maybe"][..], "just_do_it"),
    ] {
        let full: Vec<&str> = ["new", "T"].iter().chain(args).copied().collect();
        let (_, err) = r.code(&full, 2);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(want), "{full:?}: {err}");
    }
    let (_, err) = r.code(
        &["new", "T", "--next-agent", "a", "--join-agent", "ghost"],
        1,
    );
    assert!(err.contains("ghost"), "{err}");
    assert_eq!(r.find("T"), Vec::<String>::new());
}

/// A file still being written in the inbox is not read yet, but its id counts as taken (README
/// "Half-written files"): `coord new --id` refuses it, rather than make a second file of the
/// id that the next tick would send to invalid/ with the person's.
#[test]
fn new_refuses_the_id_of_an_inbox_file_still_being_written() {
    let r = TestRepo::new();
    r.write_now("work/inbox/s1.yml", "title: a person's s1\n");
    let (_, err) = r.code(&["new", "coord new s1", "--id", "s1"], 1);
    assert!(err.contains("a task with id 's1' already exists"), "{err}");
    assert!(!r.exists("work/inbox/s1.yaml"));
}
