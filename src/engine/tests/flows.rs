//! Completion, retries, timeouts, fencing, dependencies, handoffs, authority and cancellation,
//! followed through several ticks with exact outcomes.

use super::harness::{agent, at, summaries, tid, Sim};
use crate::engine::commands::{self, Fence};
use crate::engine::retry::backoff;
use crate::engine::Note;
use crate::model::{AgentName, ErrorCode, ErrorInfo, HistoryEntry, State};
use serde_json::json;

fn sim_with(agents: &[&str]) -> Sim {
    let mut s = Sim::new();
    for a in agents {
        s.add_agent(a, "");
    }
    s
}

fn error_of(s: &Sim, id: &str) -> ErrorInfo {
    s.coord(id).error.expect("an error")
}

#[test]
fn success_completes_and_hands_off_to_a_deterministic_child() {
    let mut s = sim_with(&["alice", "bob"]);
    s.drop_task(
        "a",
        "title: Draft\nagent: alice\nnext_agent: bob\nlabels: [api]\n",
    );
    s.tick(at(0));
    s.report(
        "a",
        json!({"status": "success", "output": {"summary": "v1"}}),
    );
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        [
            "complete a",
            "hand off a to bob as a.bob",
            "assign a.bob to bob"
        ]
    );
    assert_eq!(p.transitions[1].from, "new");
    assert_eq!(s.path_of("a"), "done/a.yaml");
    assert_eq!(
        s.coord("a").finished_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T10:01:00Z")
    );
    assert_eq!(s.path_of("a.bob"), "assigned/bob/a.bob.yaml");
    let child = s.task("a.bob");
    assert_eq!(child.spec.title, "Draft: next step, by bob");
    assert_eq!(child.spec.agent, Some(agent("bob")));
    assert_eq!(child.spec.labels, ["api"]);
    assert_eq!(
        child.spec.input,
        Some(json!({"previous": {"summary": "v1"}}))
    );
    assert_eq!(child.coord.parent, Some(tid("a")));
    assert_eq!(child.coord.workflow, Some(tid("a")));
    assert_eq!(child.coord.chain, [tid("a")]);
    assert_eq!(child.coord.attempt, 1);
    assert!(
        s.tick(at(61)).is_empty(),
        "a repeated tick creates no second child"
    );
}

#[test]
fn result_next_agent_overrides_the_task() {
    let mut s = sim_with(&["alice", "bob", "carol"]);
    s.drop_task("a", "title: x\nagent: alice\nnext_agent: bob\n");
    s.tick(at(0));
    s.report("a", json!({"status": "success", "next_agent": "carol"}));
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        [
            "complete a",
            "hand off a to carol as a.carol",
            "assign a.carol to carol"
        ]
    );
    assert_eq!(
        s.task("a.carol").spec.input,
        Some(json!({"previous": null}))
    );
}

#[test]
fn fan_out_creates_children_and_a_join_that_collects_every_output() {
    let mut s = sim_with(&["lead", "x", "y", "pm"]);
    s.drop_task(
        "p",
        "title: Plan\nagent: lead\nnext_agent: [x, y]\njoin_agent: pm\n",
    );
    s.tick(at(0));
    s.report("p", json!({"status": "success", "output": "go"}));
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        [
            "complete p",
            "hand off p to x as p.x",
            "hand off p to y as p.y",
            "create join task p.join for pm",
            "assign p.x to x",
            "assign p.y to y",
        ]
    );
    assert_eq!(s.path_of("p.join"), "blocked/p.join.yaml");
    let join = s.task("p.join");
    assert_eq!(join.spec.depends_on, [tid("p.x"), tid("p.y")]);
    assert_eq!(join.spec.agent, Some(agent("pm")));
    assert!(p.notes.contains(&Note::Blocked {
        id: tid("p.join"),
        open: vec![tid("p.x"), tid("p.y")],
        gates: Vec::new()
    }));

    s.report("p.x", json!({"status": "success", "output": {"v": 1}}));
    assert_eq!(summaries(&s.tick(at(120))), ["complete p.x"]);
    assert_eq!(s.path_of("p.join"), "blocked/p.join.yaml");

    s.report("p.y", json!({"status": "success", "output": {"v": 2}}));
    let p = s.tick(at(180));
    assert_eq!(
        summaries(&p),
        [
            "complete p.y",
            "unblock p.join: dependencies done",
            "assign p.join to pm"
        ]
    );
    assert_eq!(
        s.coord("p.join").input,
        Some(json!({"results": {"p.x": {"v": 1}, "p.y": {"v": 2}}}))
    );
    assert!(s.tick(at(181)).is_empty());
}

#[test]
fn retryable_failure_backs_off_then_is_reassigned() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\n");
    s.tick(at(0));
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "boom"}}),
    );
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        [
            "retry a after agent_failure (attempt 1/3)",
            "agent alice: 1 failed attempt(s) in a row, circuit closed"
        ]
    );
    assert_eq!(
        s.text("agents/alice.yaml"),
        "coord:\n  consecutive_failures: 1\n  circuit: closed\n"
    );
    let delay = backoff("a", 1, &s.config.backoff).as_secs();
    assert!(delay > 0, "this test needs a real wait; pick another id");
    let c = s.coord("a");
    assert_eq!(s.path_of("a"), "ready/a.yaml");
    assert_eq!(c.state, Some(State::Ready));
    assert_eq!(c.attempt, 1);
    assert_eq!(c.assigned_to, None);
    assert_eq!(c.not_before, Some(at(60 + delay)));
    assert_eq!(
        c.history,
        [HistoryEntry::from_value(json!({
            "at": "2026-11-22T10:01:00Z",
            "attempt": 1,
            "agent": "alice",
            "error": {"code": "agent_failure", "message": "boom"},
            "result": {"status": "failure", "error": {"message": "boom"}, "attempt": 1, "agent": "alice"},
        }))]
    );
    assert!(
        s.task("a").result.is_none(),
        "the result block is gone from the file"
    );
    assert!(!s.text("ready/a.yaml").contains("\nresult:"));

    let p = s.tick(at(60 + delay - 1));
    assert!(p.is_empty());
    assert_eq!(
        p.notes,
        [Note::Waiting {
            id: tid("a"),
            reason: format!("backing off until {}", at(60 + delay))
        }]
    );
    let p = s.tick(at(60 + delay));
    assert_eq!(summaries(&p), ["assign a to alice"]);
    let c = s.coord("a");
    assert_eq!((c.attempt, c.not_before), (2, None));
}

#[test]
fn exhausted_attempts_go_to_failed() {
    let mut s = sim_with(&["alice"]);
    s.config.backoff.base = crate::model::Duration::from_secs(0);
    s.drop_task("a", "title: x\nmax_attempts: 2\n");
    s.tick(at(0));
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "one"}}),
    );
    let p = s.tick(at(10));
    assert_eq!(
        summaries(&p),
        [
            "retry a after agent_failure (attempt 1/2)",
            "assign a to alice",
            "agent alice: 1 failed attempt(s) in a row, circuit closed"
        ],
        "zero backoff: straight back; the profile counts the failure"
    );
    s.report(
        "a",
        json!({"status": "failure", "error": {"code": "oops", "message": "two"}}),
    );
    let p = s.tick(at(20));
    assert_eq!(
        summaries(&p),
        [
            "fail a: oops (attempts exhausted)",
            "agent alice: 2 failed attempt(s) in a row, circuit closed"
        ]
    );
    assert_eq!(s.path_of("a"), "failed/a.yaml");
    let c = s.coord("a");
    assert_eq!(c.attempt, 2);
    assert_eq!(c.history.len(), 2);
    assert_eq!(
        c.finished_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T10:00:20Z")
    );
    assert_eq!(c.error.and_then(|e| e.code), Some("oops".into()));
    assert!(
        s.task("a").result.is_some(),
        "the last result stays for people to read"
    );
    assert!(s.tick(at(30)).is_empty());
}

#[test]
fn non_retryable_failure_fails_at_once() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\n");
    s.tick(at(0));
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "bad input", "retryable": false}}),
    );
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        [
            "fail a: agent_failure (not retryable)",
            "agent alice: 1 failed attempt(s) in a row, circuit closed"
        ]
    );
    assert_eq!(s.path_of("a"), "failed/a.yaml");
    assert_eq!(s.coord("a").attempt, 1);
    assert_eq!(error_of(&s, "a").message, "bad input");
}

#[test]
fn expired_lease_is_a_timeout() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\ntimeout: 10m\n");
    s.tick(at(0));
    assert_eq!(
        s.coord("a")
            .lease_expires_at
            .map(|t| t.to_string())
            .as_deref(),
        Some("2026-11-22T10:10:00Z")
    );
    assert!(s.tick(at(599)).is_empty());
    let p = s.tick(at(600));
    assert_eq!(summaries(&p)[0], "retry a after timeout (attempt 1/3)");
    let c = s.coord("a");
    assert_eq!(c.history.len(), 1);
    let HistoryEntry::FailedAttempt {
        agent,
        error,
        result,
        ..
    } = &c.history[0]
    else {
        panic!("not a failed attempt: {:?}", c.history[0]);
    };
    assert_eq!(error.code.as_deref(), Some("timeout"));
    assert_eq!(agent.as_ref().map(|a| a.as_str()), Some("alice"));
    assert!(result.is_none());
}

#[test]
fn heartbeat_extends_the_lease() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\ntimeout: 10m\n");
    s.tick(at(0));
    s.now = at(500);
    let id = tid("a");
    s.command(|b, i| commands::heartbeat(b, i, &id, &Default::default()))
        .expect("heartbeat");
    assert_eq!(
        s.coord("a")
            .lease_expires_at
            .map(|t| t.to_string())
            .as_deref(),
        Some("2026-11-22T10:18:20Z")
    );
    assert!(s.tick(at(600)).is_empty());
}

#[test]
fn a_heartbeat_with_more_than_half_the_lease_left_plans_nothing() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\ntimeout: 10m\n");
    s.tick(at(0));
    s.now = at(299);
    let id = tid("a");
    let plan = s
        .command(|b, i| commands::heartbeat(b, i, &id, &Default::default()))
        .expect("heartbeat");
    assert!(plan.transitions.is_empty(), "{:?}", plan.transitions);
    let wrong = Fence {
        agent: Some(AgentName::new("bob").expect("name")),
        attempt: Some(1),
        epoch: None,
    };
    let refused = s.command(|b, i| commands::heartbeat(b, i, &id, &wrong));
    assert!(refused.is_err(), "a fenced heartbeat is refused first");
}

#[test]
fn a_hubs_grant_records_its_epoch_and_every_fenced_command_checks_it() {
    let mut s = sim_with(&["alice"]);
    s.epoch = Some(2);
    s.drop_task("a", "title: x\ntimeout: 10m\n");
    s.tick(at(0));
    assert_eq!(s.coord("a").epoch, Some(2));
    let id = tid("a");
    let fence = |epoch| Fence {
        agent: Some(agent("alice")),
        attempt: Some(1),
        epoch,
    };
    let other = s.command(|b, i| commands::heartbeat(b, i, &id, &fence(Some(1))));
    assert!(
        matches!(&other, Err(commands::CommandError::Stale(m)) if m.contains("granted in epoch 2")),
        "{other:?}"
    );
    let unnamed = s.command(|b, i| commands::release(b, i, &id, &fence(None)));
    assert!(
        matches!(
            unnamed,
            Err(commands::CommandError::NoEpoch { epoch: 2, .. })
        ),
        "{unnamed:?}"
    );
    let late = s.command(|b, i| {
        let mut report = commands::Report::new(json!({"status": "success"}));
        report.fence = fence(Some(1));
        commands::report(b, i, &id, report)
    });
    let stale = late.expect("set aside").outcome;
    assert!(matches!(stale, commands::Outcome::Stale(_)), "{stale:?}");
    let kept = s.coord("a").history;
    assert!(
        matches!(kept.last(), Some(HistoryEntry::StaleResult { result, .. }) if result["epoch"] == 1),
        "{kept:?}"
    );
    s.command(|b, i| commands::release(b, i, &id, &fence(Some(2))))
        .expect("the grant's own epoch releases it");
    assert_eq!(s.path_of("a"), "ready/a.yaml");
}

#[test]
fn zombie_result_for_an_old_attempt_is_set_aside() {
    let mut s = sim_with(&["alice"]);
    s.config.backoff.base = crate::model::Duration::from_secs(0);
    s.drop_task("a", "title: x\ntimeout: 10m\n");
    s.tick(at(0));
    let p = s.tick(at(600));
    assert_eq!(
        summaries(&p),
        [
            "retry a after timeout (attempt 1/3)",
            "assign a to alice",
            "agent alice: 1 failed attempt(s) in a row, circuit closed"
        ]
    );
    assert_eq!(s.coord("a").attempt, 2);
    // The first attempt's process wakes up and answers.
    s.write_result_raw(
        "a",
        "result:\n  status: success\n  attempt: 1\n  output: late\n",
    );
    let p = s.tick(at(660));
    assert_eq!(
        summaries(&p),
        ["set aside a stale result for a (not attempt 2)"]
    );
    assert_eq!(s.path_of("a"), "assigned/alice/a.yaml");
    let t = s.task("a");
    assert!(t.result.is_none());
    let last = t.coord.history.last().expect("history");
    assert_eq!(last.event(), Some("stale_result"));
    assert_eq!(last.result().expect("result")["output"], "late");
    assert!(s.tick(at(661)).is_empty());
}

#[test]
fn dependencies_block_until_done() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: first\n");
    s.drop_task("b", "title: second\ndepends_on: [a]\n");
    let p = s.tick(at(0));
    assert_eq!(
        summaries(&p),
        [
            "accept a into ready",
            "accept b into blocked",
            "assign a to alice"
        ]
    );
    assert!(p.notes.contains(&Note::Blocked {
        id: tid("b"),
        open: vec![tid("a")],
        gates: Vec::new()
    }));
    s.report("a", json!({"status": "success"}));
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        [
            "complete a",
            "unblock b: dependencies done",
            "assign b to alice"
        ]
    );
}

#[test]
fn failed_dependency_fails_its_dependents_in_cascade() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: first\n");
    s.drop_task("b", "title: second\ndepends_on: [a]\n");
    s.drop_task("c", "title: third\ndepends_on: [b]\n");
    s.tick(at(0));
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "no", "retryable": false}}),
    );
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        [
            "fail a: agent_failure (not retryable)",
            "fail b: dependency a failed",
            "fail c: dependency b failed",
            "agent alice: 1 failed attempt(s) in a row, circuit closed"
        ]
    );
    let e = error_of(&s, "c");
    assert_eq!(
        (e.code.as_deref(), e.retryable),
        (Some("dependency_failed"), Some(false))
    );
    assert_eq!(s.ids_in("failed"), ["a", "b", "c"]);
}

#[test]
fn ask_me_first_waits_in_review_until_approved() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\nauthority: ask_me_first\n");
    let p = s.tick(at(0));
    assert_eq!(summaries(&p), ["accept a into review"]);
    assert_eq!(s.coord("a").review, Some(crate::model::Review::Start));
    assert!(s.tick(at(60)).is_empty());
    let id = tid("a");
    s.command(|b, i| commands::approve(b, i, &id))
        .expect("approve");
    assert_eq!(s.path_of("a"), "ready/a.yaml");
    assert_eq!(s.coord("a").review, None);
    assert_eq!(summaries(&s.tick(at(120))), ["assign a to alice"]);
}

#[test]
fn do_it_and_show_me_holds_the_result_for_review_before_done_and_handoff() {
    let mut s = sim_with(&["alice", "bob"]);
    s.drop_task(
        "a",
        "title: x\nagent: alice\nauthority: do_it_and_show_me\nnext_agent: bob\n",
    );
    s.tick(at(0));
    s.report("a", json!({"status": "success", "output": 42}));
    let p = s.tick(at(60));
    assert_eq!(summaries(&p), ["hold a for review of its result"]);
    assert_eq!(s.coord("a").review, Some(crate::model::Review::Result));
    assert!(s.tick(at(61)).is_empty());
    let id = tid("a");
    let plan = s
        .command(|b, i| commands::approve(b, i, &id))
        .expect("approve");
    assert_eq!(
        summaries(&plan),
        ["complete a", "hand off a to bob as a.bob"]
    );
    assert_eq!(s.path_of("a"), "done/a.yaml");
    assert_eq!(s.path_of("a.bob"), "ready/a.bob.yaml");
    assert_eq!(s.task("a.bob").spec.input, Some(json!({"previous": 42})));
    assert_eq!(summaries(&s.tick(at(120))), ["assign a.bob to bob"]);
}

/// A handoff whose child id a person's task already holds (here one dropped in the same
/// pass) takes the next free id, `<parent>.<agent>.2`, instead of being dropped; a repeated
/// pass finds that child and creates no second one.
#[test]
fn a_handoff_whose_child_id_is_taken_by_another_task_takes_the_next_free_id() {
    let mut s = sim_with(&["alice", "bob"]);
    s.drop_task("a", "title: Draft\nagent: alice\nnext_agent: bob\n");
    s.tick(at(0));
    s.report("a", json!({"status": "success", "output": 1}));
    s.drop_task("a.bob", "title: a person's task named like the child\n");
    let p = s.plan_at(at(60));
    // A pass that made the child but left the parent where it was: the next pass finds the
    // child it made instead of making another.
    let mut child_only = p.clone();
    child_only
        .transitions
        .retain(|t| t.summary.starts_with("hand off"));
    let mut s2 = s.clone();
    s2.apply(&child_only);
    assert_eq!(
        summaries(&s2.plan_at(at(60))),
        [
            "accept a.bob into ready",
            "complete a",
            "assign a.bob to alice",
            "assign a.bob.2 to bob"
        ]
    );
    s.apply(&p);
    assert_eq!(
        summaries(&p),
        [
            "accept a.bob into ready",
            "complete a",
            "hand off a to bob as a.bob.2",
            "assign a.bob to alice",
            "assign a.bob.2 to bob",
        ]
    );
    assert_eq!(s.task("a.bob.2").coord.parent, Some(tid("a")));
    assert_eq!(s.task("a.bob").coord.parent, None);
}

/// The step made at `<id>.2` is found again when the parent's completion runs again (a
/// revert of "complete a") after the person's task holding the plain id is gone: no second
/// step at the plain id.
#[test]
fn a_step_at_a_numbered_id_is_found_again_after_the_plain_id_is_freed() {
    let mut s = sim_with(&["alice", "bob"]);
    s.drop_task("a", "title: Draft\nagent: alice\nnext_agent: bob\n");
    s.tick(at(0));
    s.report("a", json!({"status": "success", "output": 1}));
    s.drop_task("a.bob", "title: a person's task\nagent: alice\n");
    let before = s.files.clone();
    s.tick(at(60));
    assert_eq!(s.task("a.bob.2").coord.parent, Some(tid("a")));
    s.files
        .retain(|p, _| !p.ends_with("/a.bob.yaml") && p != "done/a.yaml");
    let assigned = "assigned/alice/a.yaml".to_string();
    s.files.insert(assigned.clone(), before[&assigned].clone());
    assert_eq!(summaries(&s.tick(at(120))), ["complete a"]);
    assert_eq!(s.paths_of("a.bob"), Vec::<String>::new());
}

/// Steps are told apart by agent: with `p.alice` taken, alice's step is `p.alice.2`, which is
/// also the plain id of agent `alice.2`'s step; that one takes the next free id, and the join
/// waits on both.
#[test]
fn steps_for_agents_whose_names_collide_with_numbered_ids_are_each_made() {
    let mut s = sim_with(&["lead", "alice", "alice.2", "pm"]);
    s.drop_task(
        "p",
        "title: Plan\nagent: lead\nnext_agent: [alice, alice.2]\njoin_agent: pm\n",
    );
    s.tick(at(0));
    s.report("p", json!({"status": "success", "output": "go"}));
    s.drop_task("p.alice", "title: a person's task\nagent: pm\n");
    let p = s.tick(at(60));
    let made: Vec<String> = summaries(&p)
        .into_iter()
        .filter(|t| t.starts_with("hand off") || t.starts_with("create join"))
        .collect();
    assert_eq!(
        made,
        [
            "hand off p to alice as p.alice.2",
            "hand off p to alice.2 as p.alice.2.2",
            "create join task p.join for pm",
        ]
    );
    assert_eq!(
        s.task("p.join").spec.depends_on,
        [tid("p.alice.2"), tid("p.alice.2.2")]
    );
}

/// An agent named `join` gets the child `p.join`; the join task of the fan-out then takes
/// the next free id instead of being left out.
#[test]
fn a_fan_out_to_an_agent_named_join_still_gets_its_join_task() {
    let mut s = sim_with(&["lead", "join", "x", "pm"]);
    s.drop_task(
        "p",
        "title: Plan\nagent: lead\nnext_agent: [join, x]\njoin_agent: pm\n",
    );
    s.tick(at(0));
    s.report("p", json!({"status": "success", "output": "go"}));
    let p = s.tick(at(60));
    assert!(
        summaries(&p).contains(&"create join task p.join.2 for pm".to_string()),
        "{:?}",
        summaries(&p)
    );
    assert_eq!(
        s.task("p.join.2").spec.depends_on,
        [tid("p.join"), tid("p.x")]
    );
}

/// A parent id long enough for its step's id to be hashed, with a `.` where the hashed id
/// cuts it, still gets its step (the cut would have made `..`, an invalid id).
#[test]
fn a_long_parent_id_cut_at_a_dot_still_gets_its_step() {
    let mut s = sim_with(&["alice", "bob"]);
    let id = format!("{}.{}", "a".repeat(99), "b".repeat(26));
    s.drop_task(&id, "title: Long\nagent: alice\nnext_agent: bob\n");
    s.tick(at(0));
    s.report(&id, json!({"status": "success", "output": 1}));
    let p = s.tick(at(60));
    let handoff = summaries(&p)
        .into_iter()
        .find(|t| t.starts_with("hand off"))
        .expect("a step is made");
    assert!(
        handoff.contains(&format!(" as {}.", "a".repeat(99))),
        "{handoff}"
    );
}

#[test]
fn reject_sends_a_task_in_review_to_failed() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\nauthority: ask_me_first\n");
    s.drop_task("b", "title: y\n");
    s.tick(at(0));
    let id = tid("a");
    s.command(|b, i| commands::reject(b, i, &id, "not now"))
        .expect("reject");
    assert_eq!(s.path_of("a"), "failed/a.yaml");
    assert_eq!(
        error_of(&s, "a"),
        ErrorInfo::new(ErrorCode::Rejected, "not now", false)
    );
    let id = tid("b");
    let err = s
        .command(|b, i| commands::reject(b, i, &id, "no"))
        .expect_err("not in review");
    assert!(
        matches!(err, commands::CommandError::WrongState { .. }),
        "{err:?}"
    );
}

#[test]
fn cancel_fails_blocked_dependents() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: first\n");
    s.drop_task("b", "title: second\ndepends_on: [a]\n");
    s.tick(at(0));
    let id = tid("a");
    let plan = s
        .command(|b, i| commands::cancel(b, i, &id, "changed my mind"))
        .expect("cancel");
    assert_eq!(
        summaries(&plan),
        [
            "cancel a: changed my mind",
            "fail b: dependency a cancelled"
        ]
    );
    assert_eq!(s.path_of("a"), "cancelled/a.yaml");
    assert_eq!(s.path_of("b"), "failed/b.yaml");
    assert_eq!(error_of(&s, "b").code.as_deref(), Some("dependency_failed"));
    assert!(
        s.tick(at(60)).is_empty(),
        "a cancelled task frees alice but nothing waits"
    );
}

#[test]
fn person_owned_bytes_survive_assignment_retry_and_completion() {
    let original = "\
# Ticket 4711, written by hand.
title:    Fix   the login bug      # odd spacing stays
description: |
  Steps:
    1. open /login

    2. submit the form
labels: [auth,   urgent]   # a flow list
capabilities:
  - code     # block list
input: {url: \"https://x.test/login\", retries: 3}
priority: high
# a trailing note about the task
";
    let mut s = Sim::new();
    s.add_agent("alice", "capabilities: [code]\n");
    s.config.backoff.base = crate::model::Duration::from_secs(0);
    s.drop_task("a", original);
    let prefix_ok = |s: &Sim, what: &str| {
        let text = s.text(&s.path_of("a"));
        assert!(
            text.starts_with(original),
            "{what}: person bytes changed:\n{text}"
        );
        let rest = &text[original.len()..];
        assert!(
            rest.starts_with("coord:\n") || rest.starts_with("result:\n"),
            "{what}: unexpected tail:\n{rest}"
        );
    };
    s.tick(at(0));
    prefix_ok(&s, "assigned");
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "flaky"}}),
    );
    prefix_ok(&s, "failure reported");
    s.tick(at(60));
    prefix_ok(&s, "retried and reassigned");
    assert_eq!(s.coord("a").attempt, 2);
    s.report("a", json!({"status": "success", "output": {"fixed": true}}));
    s.tick(at(120));
    assert_eq!(s.path_of("a"), "done/a.yaml");
    prefix_ok(&s, "done");
    let text = s.text("done/a.yaml");
    let tail = &text[original.len()..];
    assert!(tail.starts_with("result:\n  status: success\n"), "{tail}");
}

#[test]
fn result_left_in_a_task_moved_back_to_ready_is_set_aside_when_reassigned() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: x\n");
    s.tick(at(0));
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "no"}}),
    );
    s.hand_move("assigned/alice/a.yaml", "ready/a.yaml");
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        ["adopt a, moved by hand to ready", "assign a to alice"]
    );
    let t = s.task("a");
    assert_eq!(t.coord.attempt, 2);
    assert!(
        t.result.is_none(),
        "the old attempt's result is not in the new attempt"
    );
    let last = t.coord.history.last().expect("history");
    assert_eq!(last.event(), Some("stale_result"));
    assert_eq!(last.result().expect("result")["attempt"], 1);
    assert!(s.tick(at(60)).is_empty(), "nothing left for the next tick");
}

#[test]
fn report_on_a_hand_moved_task_waits_for_adoption() {
    let mut s = Sim::new();
    s.add_agent("alice", "enabled: false\n");
    s.drop_task("a", "title: x\n");
    s.tick(at(0));
    s.hand_move("ready/a.yaml", "assigned/alice/a.yaml");
    let id = tid("a");
    let report = |b: &crate::board::Board, i: &crate::engine::Inputs<'_>| {
        let result = json!({"status": "success"});
        commands::report(b, i, &id, commands::Report::new(result))
    };
    let err = s.command(report).expect_err("no attempt yet");
    assert!(err.to_string().contains("run 'coord tick' first"), "{err}");
    assert_eq!(
        summaries(&s.tick(at(60))),
        ["adopt a, moved by hand to assigned/alice"]
    );
    s.command(report).expect("attempt 1 has started");
    assert_eq!(s.task("a").result.and_then(|r| r.attempt), Some(1));
    assert_eq!(summaries(&s.tick(at(120))), ["complete a"]);
}

#[test]
fn retry_keeps_attempt_numbers_growing_so_old_results_stay_fenced() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: first\nmax_attempts: 1\n");
    s.tick(at(0));
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "no"}}),
    );
    s.tick(at(60));
    assert_eq!(s.path_of("a"), "failed/a.yaml");
    let id = tid("a");
    s.command(|b, i| commands::retry(b, i, &id)).expect("retry");
    s.tick(at(120));
    assert_eq!(s.path_of("a"), "assigned/alice/a.yaml");
    let c = s.coord("a");
    assert_eq!((c.attempt, c.attempt_base), (2, 1));
    s.write_result_raw("a", "result:\n  status: success\n  attempt: 1\n");
    s.tick(at(180));
    assert_eq!(
        s.path_of("a"),
        "assigned/alice/a.yaml",
        "attempt 1's late result is fenced off"
    );
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "again"}}),
    );
    s.tick(at(240));
    assert_eq!(
        s.path_of("a"),
        "failed/a.yaml",
        "max_attempts counts from the retry"
    );
}
