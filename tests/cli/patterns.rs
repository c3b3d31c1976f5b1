//! Workflow patterns end to end: pipelines, fan-out with
//! a join, rules, approval tiers, expressions, cycles, handoff limits, failing dependencies,
//! context passing and archiving.

use crate::harness::TestRepo;
use crate::steps::{at, complete, config, coord, show, state, tick_at};
use serde_json::json;

const MIN: i64 = 60;
const DAY: i64 = 86_400;

#[test]
fn three_step_pipeline_by_next_agent_then_result_next_agent() {
    let mut r = TestRepo::with_agents(&["research", "writer", "editor"]);
    r.task("p", "title: Article\nagent: research\nnext_agent: writer\n");
    tick_at(&mut r, 0);
    complete(&r, "p", &json!({"notes": "facts"}), &[]);
    tick_at(&mut r, MIN);
    assert_eq!(state(&r, "p"), "done");
    assert_eq!(r.where_is("p.writer"), "work/assigned/writer/p.writer.yaml");
    let c = coord(&r, "p.writer");
    assert_eq!(c["parent"], json!("p"));
    assert_eq!(c["workflow"], json!("p"));
    assert_eq!(c["chain"], json!(["p"]));
    assert_eq!(
        show(&r, "p.writer")["task"]["input"]["previous"],
        json!({"notes": "facts"})
    );

    complete(
        &r,
        "p.writer",
        &json!({"draft": "text"}),
        &["--next-agent", "editor"],
    );
    tick_at(&mut r, 2 * MIN);
    let id = "p.writer.editor";
    assert_eq!(r.where_is(id), format!("work/assigned/editor/{id}.yaml"));
    let c = coord(&r, id);
    assert_eq!(c["workflow"], json!("p"), "the root of the chain");
    assert_eq!(c["chain"], json!(["p", "p.writer"]));
    assert_eq!(
        show(&r, id)["task"]["input"]["previous"],
        json!({"draft": "text"})
    );
    complete(&r, id, &json!({"final": true}), &[]);
    tick_at(&mut r, 3 * MIN);
    for t in ["p", "p.writer", id] {
        assert_eq!(state(&r, t), "done", "{t}");
    }
    tick_at(&mut r, 4 * MIN);
    assert!(
        r.find("p.writer.editor.editor").is_empty(),
        "no further handoff"
    );
}

#[test]
fn previous_output_is_copied_up_to_100_kib_and_referenced_beyond() {
    let mut r = TestRepo::with_agents(&["a", "b"]);
    r.task("big", "title: Big\nagent: a\nnext_agent: b\n");
    tick_at(&mut r, 0);
    let blob = "x".repeat(150 * 1024);
    complete(&r, "big", &json!({"blob": blob}), &[]);
    tick_at(&mut r, MIN);
    let prev = &show(&r, "big.b")["task"]["input"]["previous"];
    assert_eq!(prev["task"], json!("big"), "{prev}");
    assert!(prev["note"]
        .as_str()
        .unwrap_or_default()
        .contains("result.output of task big"));
    assert!(r.read(&r.where_is("big.b")).len() < 10 * 1024, "not copied");
}

#[test]
fn fan_out_of_three_with_a_join_holding_every_output() {
    let mut r = TestRepo::with_agents(&["lead", "legal", "security", "finance", "pm"]);
    r.task(
        "f",
        "title: Launch\nagent: lead\nnext_agent: [legal, security, finance]\njoin_agent: pm\n",
    );
    tick_at(&mut r, 0);
    complete(&r, "f", &json!({"plan": "go"}), &[]);
    tick_at(&mut r, MIN);
    for a in ["legal", "security", "finance"] {
        assert_eq!(
            r.where_is(&format!("f.{a}")),
            format!("work/assigned/{a}/f.{a}.yaml")
        );
    }
    assert_eq!(r.where_is("f.join"), "work/blocked/f.join.yaml");
    let status = r.ok(&["status"]);
    assert!(
        status.lines().any(|l| l.starts_with("  f.join \"")
            && l.ends_with(
                "\": waiting for f.legal (assigned), f.security (assigned), f.finance (assigned)"
            )),
        "{status}"
    );
    for (i, a) in ["legal", "security", "finance"].iter().enumerate() {
        complete(
            &r,
            &format!("f.{a}"),
            &json!({"verdict": format!("{a} ok"), "n": i}),
            &[],
        );
        tick_at(&mut r, (2 + i as i64) * MIN);
    }
    assert_eq!(r.where_is("f.join"), "work/assigned/pm/f.join.yaml");
    let results = &coord(&r, "f.join")["input"]["results"];
    for (i, a) in ["legal", "security", "finance"].iter().enumerate() {
        assert_eq!(
            results[format!("f.{a}")],
            json!({"verdict": format!("{a} ok"), "n": i}),
            "{results}"
        );
    }
}

#[test]
fn a_rule_fires_on_matching_output_and_not_otherwise() {
    let mut r = TestRepo::with_agents(&["analyst"]);
    config(
        &r,
        "rules:\n  - when: {agent: research, output_contains: competitor}\n    then: analyst\n",
    );
    r.task("hit", "title: Market\nagent: research\n");
    r.task("miss", "title: Weather\nagent: research\n");
    r.ok(&["agents", "add", "research", "--max-active", "2"]);
    tick_at(&mut r, 0);
    complete(
        &r,
        "hit",
        &json!({"summary": "A new Competitor appeared"}),
        &[],
    );
    complete(&r, "miss", &json!({"summary": "sunny"}), &[]);
    tick_at(&mut r, MIN);
    assert_eq!(state(&r, "hit"), "done");
    assert_eq!(
        r.where_is("hit.analyst"),
        "work/assigned/analyst/hit.analyst.yaml"
    );
    assert_eq!(state(&r, "miss"), "done");
    assert!(r.find("miss.analyst").is_empty(), "the rule did not match");
}

#[test]
fn ask_me_first_waits_for_approval_or_is_rejected() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task(
        "ask",
        "title: Delete prod data\nagent: alice\nauthority: ask_me_first\n",
    );
    r.task(
        "no",
        "title: Rename the company\nagent: alice\nauthority: ask_me_first\n",
    );
    tick_at(&mut r, 0);
    tick_at(&mut r, MIN);
    assert_eq!(
        r.where_is("ask"),
        "work/review/ask.yaml",
        "not assigned before approval"
    );
    r.ok(&["approve", "ask"]);
    assert_eq!(state(&r, "ask"), "ready");
    tick_at(&mut r, 2 * MIN);
    assert_eq!(state(&r, "ask"), "assigned");
    r.ok(&["reject", "no", "--reason", "too risky"]);
    assert_eq!(r.where_is("no"), "work/failed/no.yaml");
    let e = &coord(&r, "no")["error"];
    assert_eq!(
        (e["code"].clone(), e["message"].clone()),
        (json!("rejected"), json!("too risky"))
    );
}

#[test]
fn do_it_and_show_me_holds_the_result_for_review_before_done_and_handoff() {
    let mut r = TestRepo::with_agents(&["bob", "alice --max-active 2"]);
    for id in ["show", "nope"] {
        r.task(
            id,
            &format!("title: {id}\nagent: alice\nauthority: do_it_and_show_me\nnext_agent: bob\n"),
        );
    }
    tick_at(&mut r, 0);
    complete(&r, "show", &json!({"diff": "+1"}), &[]);
    complete(&r, "nope", &json!({"diff": "-1"}), &[]);
    tick_at(&mut r, MIN);
    assert_eq!(r.where_is("show"), "work/review/show.yaml");
    assert_eq!(
        show(&r, "show")["task"]["result"]["output"],
        json!({"diff": "+1"})
    );
    assert!(r.find("show.bob").is_empty(), "no handoff before approval");
    r.ok(&["approve", "show"]);
    assert_eq!(state(&r, "show"), "done");
    assert_eq!(state(&r, "show.bob"), "ready");
    tick_at(&mut r, 2 * MIN);
    assert_eq!(state(&r, "show.bob"), "assigned");

    r.ok(&["reject", "nope", "--reason", "wrong diff"]);
    assert_eq!(state(&r, "nope"), "failed");
    assert_eq!(coord(&r, "nope")["error"]["code"], json!("rejected"));
    assert!(r.find("nope.bob").is_empty(), "no handoff after reject");
}

#[test]
fn expressions_resolve_with_and_without_default_and_fail_when_unresolvable() {
    let mut r = TestRepo::with_agents(&["alice --max-active 5"]);
    r.task("src", "title: Source\nagent: alice\n");
    tick_at(&mut r, 0);
    complete(
        &r,
        "src",
        &json!({"summary": "hello", "items": [{"name": "n0"}]}),
        &[],
    );
    r.task(
        "use",
        "title: Use\nagent: alice\ndepends_on: [src]\ninput:\n  text: ${tasks.src.result.output.summary}\n  first: ${tasks.src.result.output.items[0].name}\n  missing: '${tasks.src.result.output.nope ?? \"fallback\"}'\n  mixed: 'say ${tasks.src.result.output.summary}!'\n",
    );
    r.task("bad", "title: Bad\nagent: alice\ndepends_on: [src]\ninput:\n  x: ${tasks.src.result.output.nope}\n");
    r.task(
        "outside",
        "title: Outside\nagent: alice\ninput:\n  x: ${tasks.src.result.output.summary}\n",
    );
    tick_at(&mut r, MIN);
    assert_eq!(
        coord(&r, "use")["input"],
        json!({"text": "hello", "first": "n0", "missing": "fallback", "mixed": "say hello!"})
    );
    assert_eq!(r.where_is("bad"), "work/failed/bad.yaml");
    let e = &coord(&r, "bad")["error"];
    assert_eq!(e["code"], json!("bad_expression"));
    assert_eq!(e["retryable"], json!(false));
    assert_eq!(r.where_is("outside"), "work/invalid/outside.yaml");
    let errors = r.read("work/invalid/outside.yaml.errors");
    assert!(
        errors.contains("outside.yaml:4:")
            && errors.contains("expression reads task 'src', which is not in depends_on"),
        "{errors}"
    );
    assert!(
        !r.read("work/agents/alice.yaml")
            .contains("consecutive_failures: 1"),
        "bad input does not count"
    );
}

#[test]
fn cycles_among_inbox_files_are_rejected_with_the_cycle_spelled_out() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("a", "title: A\ndepends_on: [b]\n");
    r.task("b", "title: B\ndepends_on: [a]\n");
    r.task("x", "title: X\ndepends_on: [y]\n");
    r.task("y", "title: Y\ndepends_on: [z]\n");
    r.task("z", "title: Z\ndepends_on: [x]\n");
    tick_at(&mut r, 0);
    for (id, cycle) in [
        ("a", "a -> b -> a"),
        ("b", "b -> a -> b"),
        ("x", "x -> y -> z -> x"),
        ("y", "y -> z -> x -> y"),
        ("z", "z -> x -> y -> z"),
    ] {
        assert_eq!(r.where_is(id), format!("work/invalid/{id}.yaml"));
        let errors = r.read(&format!("work/invalid/{id}.yaml.errors"));
        assert_eq!(
            errors,
            format!("work/invalid/{id}.yaml:2:14: dependency cycle: {cycle}\n"),
            "{id}"
        );
    }
    let status = r.ok(&["status"]);
    assert!(
        status.contains("a: work/invalid/a.yaml:2:14: dependency cycle: a -> b -> a"),
        "{status}"
    );
}

#[test]
fn a_cycle_made_by_editing_a_blocked_task_is_rejected_at_the_next_tick() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("g", "title: G\nagent: alice\n");
    r.task("h", "title: H\ndepends_on: [g]\n");
    r.task("k", "title: K\ndepends_on: [h]\n");
    r.task("after", "title: After\ndepends_on: [k]\n");
    tick_at(&mut r, 0);
    assert_eq!(state(&r, "h"), "blocked");
    let text = r.read("work/blocked/h.yaml");
    r.write(
        "work/blocked/h.yaml",
        &text.replacen("depends_on: [g]", "depends_on: [g, k]", 1),
    );
    tick_at(&mut r, MIN);
    assert_eq!(
        r.read("work/invalid/h.yaml.errors"),
        "work/invalid/h.yaml:2:17: dependency cycle: h -> k -> h\n"
    );
    assert_eq!(
        r.read("work/invalid/k.yaml.errors"),
        "work/invalid/k.yaml:2:14: dependency cycle: k -> h -> k\n"
    );
    assert!(
        r.read("work/invalid/h.yaml").contains("depends_on: [g, k]"),
        "bytes kept"
    );
    assert_eq!(
        state(&r, "after"),
        "blocked",
        "a dependent waits for the fix"
    );
    let status = r.ok(&["status"]);
    assert!(
        status.contains("after \"After\": waiting for k (invalid)"),
        "{status}"
    );
    assert_eq!(r.git_status(), "");
}

#[test]
fn ping_pong_stops_at_max_handoffs() {
    let mut r = TestRepo::with_agents(&["ping", "pong"]);
    config(&r, "max_handoffs: 3\n");
    r.task("pp", "title: Rally\nagent: ping\n");
    tick_at(&mut r, 0);
    let (mut id, mut next) = ("pp".to_string(), "pong");
    let mut handoffs = 0;
    for step in 1..=10 {
        complete(&r, &id, &json!({"hit": step}), &["--next-agent", next]);
        tick_at(&mut r, step * MIN);
        if state(&r, &id) == "failed" {
            break;
        }
        handoffs += 1;
        id = format!("{id}.{next}");
        next = if next == "pong" { "ping" } else { "pong" };
    }
    assert_eq!(handoffs, 3);
    assert_eq!(id, "pp.pong.ping.pong");
    let e = &coord(&r, &id)["error"];
    assert_eq!(e["code"], json!("handoff_limit"));
    assert_eq!(e["retryable"], json!(false));
    assert_eq!(
        coord(&r, &id)["chain"],
        json!(["pp", "pp.pong", "pp.pong.ping"])
    );
}

#[test]
fn a_failed_dependency_fails_its_dependents() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("base", "title: Base\nagent: alice\nmax_attempts: 1\n");
    r.task("top", "title: Top\ndepends_on: [base]\n");
    tick_at(&mut r, 0);
    let status = r.ok(&["status"]);
    assert!(
        status.contains("top \"Top\": waiting for base (assigned)"),
        "{status}"
    );
    r.ok(&["fail", "base", "--error", "broken"]);
    tick_at(&mut r, MIN);
    assert_eq!(state(&r, "base"), "failed");
    assert_eq!(coord(&r, "base")["error"]["code"], json!("agent_failure"));
    assert_eq!(r.where_is("top"), "work/failed/top.yaml");
    let e = &coord(&r, "top")["error"];
    assert_eq!(e["code"], json!("dependency_failed"));
    assert_eq!(e["message"], json!("dependency base failed"));
}

#[test]
fn archived_tasks_still_satisfy_dependencies_idempotency_keys_and_log() {
    let mut r = TestRepo::with_agents(&["alice", "bob"]);
    config(&r, "archive_after: 3d\n");
    r.at(&at(0));
    let id = r.ok(&[
        "new",
        "Old work",
        "--agent",
        "alice",
        "--id",
        "old",
        "--idempotency-key",
        "k-1",
    ]);
    assert_eq!(id.trim(), "old");
    r.task("gone", "title: Gone\nagent: bob\n");
    tick_at(&mut r, 0);
    complete(&r, "old", &json!({"v": 42}), &[]);
    r.ok(&["cancel", "gone"]);
    tick_at(&mut r, MIN);
    assert_eq!(state(&r, "old"), "done");
    assert_eq!(coord(&r, "old")["finished_at"], json!(at(MIN)));

    r.at(&at(2 * DAY));
    let commits = r.commit_count();
    r.ok(&["archive"]);
    assert_eq!(r.commit_count(), commits, "younger than archive_after");
    r.at(&at(3 * DAY + MIN));
    r.ok(&["archive"]);
    assert_eq!(r.commit_count(), commits + 2, "one commit per task");
    assert_eq!(r.where_is("old"), "work/archive/2026-11/old.yaml");
    assert_eq!(r.where_is("gone"), "work/archive/2026-11/gone.yaml");
    assert_eq!(r.git_status(), "");
    r.ok(&["archive", "--older-than", "0s"]);
    assert_eq!(r.commit_count(), commits + 2, "nothing left to archive");

    let again = r.ok(&["new", "Old work", "--idempotency-key", "k-1"]);
    assert_eq!(again.trim(), "old", "the key is found in the archive");
    let log = r.ok(&["log", "old"]);
    assert!(log.contains("archive old to archive/2026-11"), "{log}");
    assert!(log.contains("complete old"), "{log}");

    r.task(
        "next",
        "title: Next\nagent: alice\ndepends_on: [old]\ninput:\n  v: ${tasks.old.result.output.v}\n",
    );
    r.task("after-gone", "title: After gone\ndepends_on: [gone]\n");
    tick_at(&mut r, 3 * DAY + 2 * MIN);
    assert_eq!(state(&r, "next"), "assigned");
    assert_eq!(coord(&r, "next")["input"], json!({"v": 42}));
    assert_eq!(
        state(&r, "after-gone"),
        "failed",
        "an archived cancelled task is still cancelled"
    );
    tick_at(&mut r, 3 * DAY + 3 * MIN);
    assert_eq!(
        r.where_is("old"),
        "work/archive/2026-11/old.yaml",
        "the tick does not move it back"
    );
}

#[test]
fn archive_shards_by_the_month_of_finished_at() {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.task("late", "title: Late\nagent: alice\n");
    tick_at(&mut r, 0);
    complete(&r, "late", &json!({}), &[]);
    tick_at(&mut r, 9 * DAY);
    assert_eq!(
        coord(&r, "late")["finished_at"],
        json!("2026-12-01T10:00:00Z")
    );
    r.at(&at(40 * DAY));
    r.ok(&["archive", "--older-than", "1d"]);
    assert_eq!(r.where_is("late"), "work/archive/2026-12/late.yaml");
}
