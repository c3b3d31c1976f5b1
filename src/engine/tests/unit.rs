//! Intake, assignment and adoption, one behaviour per test, with exact outcomes.

use super::harness::{at, summaries, tid, Sim};
use crate::engine::commands::{self, CommandError};
use crate::engine::{Note, Op};
use crate::model::{State, TaskId};

fn waiting(notes: &[Note], id: &str) -> Vec<String> {
    notes
        .iter()
        .filter_map(|n| match n {
            Note::Waiting { id: i, reason } if i.as_str() == id => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn minimal_task_is_accepted_and_assigned_to_the_only_agent_in_one_tick() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.drop_task("a", "title: Fix the login bug\n");
    let p = s.tick(at(0));
    assert_eq!(summaries(&p), ["accept a into ready", "assign a to alice"]);
    assert_eq!(
        p.transitions[0].ops[0],
        Op::Move {
            from: "work/inbox/a.yaml".into(),
            to: "work/ready/a.yaml".into()
        }
    );
    assert_eq!(
        p.transitions[1].ops[0],
        Op::Move {
            from: "work/ready/a.yaml".into(),
            to: "work/assigned/alice/a.yaml".into()
        }
    );
    assert_eq!(
        (
            p.transitions[1].from.to_string().as_str(),
            p.transitions[1].to.to_string().as_str()
        ),
        ("ready", "assigned")
    );
    assert_eq!(
        s.text("assigned/alice/a.yaml"),
        "title: Fix the login bug\n\
         coord:\n  state: assigned\n  assigned_to: alice\n  attempt: 1\n  \
         created_at: 2026-11-22T10:00:00Z\n  assigned_at: 2026-11-22T10:00:00Z\n  \
         lease_expires_at: 2026-11-22T10:30:00Z\n"
    );
    assert!(s.tick(at(1)).is_empty(), "second tick changes nothing");
}

#[test]
fn explicit_agent_wins_over_name_order() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.add_agent("bob", "");
    s.drop_task("a", "title: x\nagent: bob\n");
    let p = s.tick(at(0));
    assert_eq!(summaries(&p), ["accept a into ready", "assign a to bob"]);
    assert_eq!(s.path_of("a"), "assigned/bob/a.yaml");
}

#[test]
fn explicit_agent_that_does_not_exist_is_rejected_at_intake() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.drop_task("a", "title: x\nagent: zed\n");
    let p = s.tick(at(0));
    assert_eq!(
        summaries(&p),
        ["reject a: unknown agent 'zed'; add it with 'coord agents add zed'"]
    );
    assert_eq!(
        s.text("invalid/a.yaml.errors"),
        "work/invalid/a.yaml:2:8: unknown agent 'zed'; add it with 'coord agents add zed'\n"
    );
}

#[test]
fn capabilities_pick_an_agent_having_all_of_them() {
    let mut s = Sim::new();
    s.add_agent("alice", "capabilities: [design]\n");
    s.add_agent("bob", "capabilities: [code, review]\n");
    s.drop_task("a", "title: x\ncapabilities: [review, code]\n");
    s.drop_task("b", "title: y\ncapabilities: [design]\n");
    s.drop_task("c", "title: z\ncapabilities: [code, legal]\n");
    let p = s.tick(at(0));
    assert_eq!(
        summaries(&p),
        [
            "accept a into ready",
            "accept b into ready",
            "accept c into ready",
            "assign a to bob",
            "assign b to alice",
        ]
    );
    assert_eq!(s.path_of("c"), "ready/c.yaml");
    assert_eq!(
        waiting(&p.notes, "c"),
        [r#"no agent has capabilities ["code", "legal"]"#]
    );
}

#[test]
fn wip_limit_and_least_loaded_then_name_tie_break() {
    let mut s = Sim::new();
    s.add_agent("bob", "max_active: 2\n");
    s.add_agent("alice", "max_active: 2\n");
    s.add_agent("carol", "max_active: 1\n");
    for id in ["t1", "t2", "t3", "t4", "t5", "t6"] {
        s.drop_task(id, "title: x\n");
    }
    let p = s.tick(at(0));
    let assigns: Vec<String> = summaries(&p)
        .into_iter()
        .filter(|x| x.starts_with("assign"))
        .collect();
    assert_eq!(
        assigns,
        [
            "assign t1 to alice", // all at 0: by name
            "assign t2 to bob",   // alice 1, bob 0, carol 0: bob before carol by name
            "assign t3 to carol", // alice 1, bob 1, carol 0
            "assign t4 to alice", // alice 1, bob 1, carol full
            "assign t5 to bob",
        ]
    );
    assert_eq!(
        waiting(&p.notes, "t6"),
        ["agent alice is at its limit (2/2); agent bob is at its limit (2/2); agent carol is at its limit (1/1)"]
    );
    // A finished task frees a slot; the waiting one takes it at the next tick.
    s.report("t3", serde_json::json!({"status": "success"}));
    let p = s.tick(at(60));
    assert_eq!(summaries(&p), ["complete t3", "assign t6 to carol"]);
}

#[test]
fn queue_order_is_priority_then_due_then_age_then_id() {
    let mut s = Sim::new();
    s.drop_task("zz-old", "title: x\npriority: high\n");
    assert_eq!(summaries(&s.tick(at(0))), ["accept zz-old into ready"]);
    s.drop_task("low", "title: x\npriority: low\n");
    s.drop_task("n-b", "title: x\n");
    s.drop_task("n-a", "title: x\npriority: normal\n");
    s.drop_task("crit", "title: x\npriority: critical\n");
    s.drop_task(
        "due-late",
        "title: x\npriority: high\ndue: 2026-12-02T00:00:00Z\n",
    );
    s.drop_task(
        "due-early",
        "title: x\npriority: high\ndue: 2026-12-01T00:00:00Z\n",
    );
    s.drop_task("a-new", "title: x\npriority: high\n");
    s.add_agent("alice", "max_active: 100\n");
    let p = s.tick(at(60));
    let assigns: Vec<String> = summaries(&p)
        .into_iter()
        .filter_map(|x| {
            x.strip_prefix("assign ")
                .map(|r| r.trim_end_matches(" to alice").to_string())
        })
        .collect();
    assert_eq!(
        assigns,
        [
            "crit",
            "due-early",
            "due-late",
            "zz-old",
            "a-new",
            "n-a",
            "n-b",
            "low"
        ]
    );
}

#[test]
fn pull_agents_get_work_only_by_claim() {
    let mut s = Sim::new();
    s.add_agent("alice", "assign: pull\n");
    s.drop_task("a", "title: x\n");
    s.drop_task("b", "title: y\npriority: high\n");
    let p = s.tick(at(0));
    assert_eq!(
        summaries(&p),
        ["accept a into ready", "accept b into ready"]
    );
    assert_eq!(
        waiting(&p.notes, "a"),
        ["agent alice takes work with 'coord claim'"]
    );

    let alice = super::harness::agent("alice");
    let claim = s
        .command(|b, i| commands::claim(b, i, &alice, None))
        .expect("claim");
    assert_eq!(claim.receipt.id, tid("b"), "the best ready task");
    assert_eq!(claim.receipt.attempt, 1);
    assert_eq!(claim.receipt.path, "work/assigned/alice/b.yaml");
    assert_eq!(summaries(&claim.plan), ["assign b to alice"]);
    assert_eq!(s.path_of("b"), "assigned/alice/b.yaml");
    assert_eq!(s.coord("b").attempt, 1);
    assert!(s.tick(at(1)).is_empty());

    let err = s
        .command(|b, i| commands::claim(b, i, &alice, None))
        .expect_err("at limit");
    assert_eq!(
        err,
        CommandError::NothingToClaim {
            agent: alice.clone(),
            why: ": agent alice is at its limit (1/1)".into()
        }
    );
}

#[test]
fn disabled_agents_get_no_work() {
    let mut s = Sim::new();
    s.add_agent("alice", "enabled: false\n");
    s.add_agent("bob", "");
    s.drop_task("a", "title: x\nagent: alice\n");
    s.drop_task("b", "title: y\n");
    let p = s.tick(at(0));
    assert_eq!(
        summaries(&p),
        [
            "accept a into ready",
            "accept b into ready",
            "assign b to bob"
        ]
    );
    assert_eq!(waiting(&p.notes, "a"), ["agent alice is disabled"]);
}

#[test]
fn settled_invalid_inbox_file_goes_to_invalid_with_errors_at_once() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    let bad = "title: x\npriority: urgent\nlabels: [a, 7]\n";
    s.drop_task("a", bad);
    let p = s.tick(at(0));
    assert_eq!(p.transitions.len(), 1);
    let t = &p.transitions[0];
    assert_eq!(
        (t.from.to_string().as_str(), t.to.to_string().as_str()),
        ("inbox", "invalid")
    );
    assert_eq!(
        t.ops[0],
        Op::Move {
            from: "work/inbox/a.yaml".into(),
            to: "work/invalid/a.yaml".into()
        }
    );
    let Op::Write { path, text } = &t.ops[1] else {
        panic!("expected a .errors write, got {:?}", t.ops[1]);
    };
    assert_eq!(path, "work/invalid/a.yaml.errors");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, (l, c)) in lines.iter().zip([(2, 11), (3, 13)]) {
        let prefix = format!("work/invalid/a.yaml:{l}:{c}: ");
        assert!(
            line.starts_with(&prefix),
            "{line:?} should start with {prefix:?}"
        );
        assert!(line.len() > prefix.len(), "{line:?} has a message");
    }
    assert_eq!(s.text("invalid/a.yaml"), bad, "original bytes kept");
    assert!(s.tick(at(120)).is_empty());
}

#[test]
fn hand_move_between_agents_is_adopted_as_a_new_attempt() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.add_agent("bob", "");
    s.drop_task("a", "title: x\nagent: alice\n");
    s.tick(at(0));
    s.hand_move("assigned/alice/a.yaml", "assigned/bob/a.yaml");
    let p = s.tick(at(600));
    assert_eq!(summaries(&p), ["adopt a, moved by hand to assigned/bob"]);
    assert_eq!(p.transitions[0].ops.len(), 1, "a rewrite only, no move");
    let c = s.coord("a");
    assert_eq!(c.state, Some(State::Assigned));
    assert_eq!(c.assigned_to, Some(super::harness::agent("bob")));
    assert_eq!(c.attempt, 2);
    assert_eq!(
        c.assigned_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T10:10:00Z")
    );
    assert_eq!(
        c.lease_expires_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-22T10:40:00Z")
    );
    assert!(s.tick(at(601)).is_empty());
}

#[test]
fn hand_move_back_to_ready_is_adopted_and_reassigned() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.drop_task("a", "title: x\n");
    s.tick(at(0));
    s.hand_move("assigned/alice/a.yaml", "ready/a.yaml");
    let p = s.tick(at(60));
    assert_eq!(
        summaries(&p),
        ["adopt a, moved by hand to ready", "assign a to alice"]
    );
    assert_eq!(s.coord("a").attempt, 2);
}

#[test]
fn duplicate_id_is_noted_and_never_assigned() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.drop_task("a", "title: x\n");
    s.tick(at(0));
    let text = s.text("assigned/alice/a.yaml");
    // An editor saves the old copy back at the path it was moved from.
    s.files
        .insert("ready/a.yaml".into(), text.clone().into_bytes());
    // The agent answers in its copy: still not acted on.
    let answered = text.replace("coord:", "result:\n  status: success\ncoord:");
    s.files
        .insert("assigned/alice/a.yaml".into(), answered.into_bytes());
    let p = s.tick(at(60));
    assert!(p.is_empty(), "{:?}", summaries(&p));
    assert_eq!(
        p.notes,
        [Note::Duplicate {
            id: tid("a"),
            paths: vec![
                "work/assigned/alice/a.yaml".into(),
                "work/ready/a.yaml".into()
            ]
        }]
    );
    assert_eq!(s.paths_of("a"), ["assigned/alice/a.yaml", "ready/a.yaml"]);
    let id: TaskId = tid("a");
    let err = s
        .command(|b, i| commands::approve(b, i, &id))
        .expect_err("dup");
    assert_eq!(err, CommandError::Duplicate(tid("a")));
    let alice = super::harness::agent("alice");
    assert!(s
        .command(|b, i| commands::claim(b, i, &alice, None))
        .is_err());
}

#[test]
fn new_inbox_file_with_a_taken_id_is_a_duplicate_not_an_intake() {
    let mut s = Sim::new();
    s.drop_task("a", "title: x\n");
    s.tick(at(0));
    s.drop_task("a", "title: again\n");
    let p = s.tick(at(1));
    assert!(p.is_empty(), "{:?}", summaries(&p));
    assert_eq!(
        p.notes,
        [Note::Duplicate {
            id: tid("a"),
            paths: vec!["work/inbox/a.yaml".into(), "work/ready/a.yaml".into()]
        }]
    );
}

/// docs/behaviour.md: a new inbox file under another name than the task holding its id (`d.yml`
/// next
/// to a done `d.yaml`) fails intake's unique-id check and goes to invalid/; the task keeping the
/// id goes on. A task sent in with it naming that id in `depends_on` cannot be told which of
/// the two it means, so it goes to invalid/ too rather than run against the old one.
#[test]
fn new_inbox_file_reusing_a_done_tasks_id_under_another_name_is_rejected() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.put("done/d.yaml", "title: D\ncoord:\n  state: done\n");
    s.put("inbox/d.yml", "title: another d\n");
    s.drop_task("e", "title: needs d\ndepends_on: [d]\n");
    let p = s.tick(at(0));
    assert_eq!(
        summaries(&p),
        [
            "reject d: id 'd' is taken by work/done/d.yaml; rename this file to a free id and move it back to work/inbox/",
            "reject e: depends on 'd', whose new file work/inbox/d.yml is rejected in this pass (the id is taken by work/done/d.yaml): give that task a free id, name it in depends_on, and move this file back to the inbox",
        ]
    );
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    assert_eq!(s.text("invalid/d.yml"), "title: another d\n", "bytes kept");
    assert_eq!(
        s.text("invalid/d.yml.errors"),
        "work/invalid/d.yml:1:1: id 'd' is taken by work/done/d.yaml; rename this file to a free id and move it back to work/inbox/\n"
    );
    assert_eq!(s.paths_of("d"), ["done/d.yaml", "invalid/d.yml"]);
    assert!(s.tick(at(1)).is_empty());
    // Sent in again on its own, the dependent means the task holding the id.
    s.hand_move("invalid/e.yaml", "inbox/e.yaml");
    assert_eq!(
        summaries(&s.tick(at(2))),
        ["accept e into ready", "assign e to alice"]
    );
}

/// An unreadable new inbox file reusing a taken id is rejected once, with both reasons.
#[test]
fn an_unreadable_inbox_file_reusing_a_taken_id_is_rejected_once() {
    let mut s = Sim::new();
    s.put("done/d.yaml", "title: D\ncoord:\n  state: done\n");
    s.put("inbox/d.yml", "title: [unclosed\n");
    let p = s.tick(at(0));
    assert_eq!(p.transitions.len(), 1, "{:?}", summaries(&p));
    let errors = s.text("invalid/d.yml.errors");
    assert_eq!(errors.lines().count(), 2, "{errors}");
    assert!(errors.starts_with("work/invalid/d.yml:1:1: id 'd' is taken by work/done/d.yaml"));
}

/// Two new inbox files of one id (`a.yaml` and `a.yml`): neither is unique, both go to
/// invalid/, each naming the other.
#[test]
fn two_new_inbox_files_of_one_id_are_both_rejected() {
    let mut s = Sim::new();
    s.drop_task("a", "title: one\n");
    s.put("inbox/a.yml", "title: two\n");
    let p = s.tick(at(0));
    assert_eq!(
        summaries(&p),
        [
            "reject a: id 'a' is taken by work/inbox/a.yml; rename this file to a free id and move it back to work/inbox/",
            "reject a: id 'a' is taken by work/inbox/a.yaml; rename this file to a free id and move it back to work/inbox/",
        ]
    );
    assert!(
        s.files.keys().all(|k| k.starts_with("invalid/")),
        "{:?}",
        s.files.keys()
    );
}

/// A burst leaves tens of thousands of tasks in `ready/`; the queue orders them and
/// the dependency step checks them from their summaries, so a pass parses only the tasks it
/// assigns (memory bounded by the pass's work, not by the ready folder).
#[test]
fn a_pass_parses_only_the_ready_tasks_it_assigns() {
    let mut s = Sim::new();
    s.add_agent("alice", "max_active: 2\n");
    s.put("done/d.yaml", "title: D\ncoord:\n  state: done\n");
    for i in 0..40 {
        let priority = if i == 17 || i == 33 { "high" } else { "normal" };
        let deps = if i % 2 == 0 { "depends_on: [d]\n" } else { "" };
        let text = format!(
            "title: T{i}\npriority: {priority}\n{deps}coord:\n  state: ready\n  created_at: 2026-11-22T09:00:{i:02}Z\n"
        );
        s.files
            .insert(format!("ready/t{i:02}.yaml"), text.into_bytes());
    }
    let board = s.board();
    let plan = s.plan_board(&board, at(0));
    assert_eq!(
        summaries(&plan),
        ["assign t17 to alice", "assign t33 to alice"]
    );
    assert_eq!(parsed_ids(&board), ["t17", "t33"]);
}

/// The ids of the tasks of `board` whose text has been parsed.
fn parsed_ids(board: &crate::board::Board) -> Vec<&str> {
    board
        .tasks
        .iter()
        .filter(|t| t.read.as_ref().is_ok_and(|task| task.is_parsed()))
        .map(|t| t.id.as_str())
        .collect()
}

/// `coord new` checks the task it writes against the board (unknown agents,
/// dependencies, cycles); the checks read the dependencies of the tasks on the new task's
/// dependency paths only, so a `new` on 10,000 finished tasks parses none of them.
#[test]
fn checking_a_new_task_parses_only_the_tasks_on_its_dependency_paths() {
    let mut s = Sim::new();
    for i in 0..30 {
        let text = format!("title: D{i}\ncoord:\n  state: done\n");
        s.files
            .insert(format!("done/d{i:02}.yaml"), text.into_bytes());
    }
    // b (done) depends on c (done), which depends on the id the new task takes: a cycle.
    s.put(
        "done/b.yaml",
        "title: B\ndepends_on: [c]\ncoord:\n  state: done\n",
    );
    s.put(
        "done/c.yaml",
        "title: C\ndepends_on: [n]\ncoord:\n  state: done\n",
    );
    let board = s.board();
    let new = crate::check::reread("title: N\ndepends_on: [b]\n").expect("parses");
    let found = crate::check::check_in_context(&tid("n"), &new, &crate::board::Checks::new(&board));
    let messages: Vec<&str> = found.iter().map(|(_, v)| v.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("n -> b -> c -> n")),
        "{messages:?}"
    );
    assert_eq!(parsed_ids(&board), Vec::<&str>::new());
}

/// The planner's memory is bounded by the tasks it may move: an archived task that is the one
/// copy of its id gets no entry, yet a lookup by id gives it as before.
#[test]
fn archived_tasks_get_no_planning_entry_but_are_found_by_id() {
    use crate::config::Config;
    use crate::engine::world::{AcceptAll, NoHistory, World};
    use crate::engine::Inputs;
    let mut s = Sim::new();
    s.add_agent("alice", "");
    let done = "title: Old\nresult:\n  status: success\n  attempt: 1\n  agent: alice\n  \
                output: {v: 7}\ncoord:\n  state: done\n  attempt: 1\n";
    for i in 0..50 {
        s.put(&format!("archive/2026-10/old-{i:02}.yaml"), done);
    }
    s.put("done/twin.yaml", done);
    s.put("archive/2026-10/twin.yaml", done);
    s.drop_task("a", "title: New\n");
    let board = s.board();
    let config = Config::default();
    let inputs = Inputs {
        config: &config,
        now: at(0),
        verifier: &AcceptAll,
        attempts: &NoHistory,
        sightings: &crate::engine::sighting::NoSightings,
        gates: &super::harness::NoGates,
        epoch: None,
    };
    let w = World::new(&board, &inputs);
    let live: Vec<&str> = w.live_entries().map(|e| e.id.as_str()).collect();
    assert_eq!(live, ["a"], "a duplicate id has no entry either");
    let old = w.entry(&tid("old-07")).expect("found by id");
    assert_eq!(old.folder.state, State::Archived);
    assert_eq!(
        w.output_of(&tid("old-07")),
        Some(serde_json::json!({"v": 7}))
    );
    assert!(w.id_taken(&tid("old-49")) && w.id_taken(&tid("twin")));
    assert!(!w.id_taken(&tid("old-50")));
    assert_eq!(w.id_count(), 52);
}
