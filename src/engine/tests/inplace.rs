//! Files written in place by agents and people: results appended after the `coord:`
//! block, malformed results, files rewritten without the `coord:` block, dependency failures
//! settled in one pass, large fan-out outputs.

use super::harness::{at, summaries, Sim};
use crate::model::{ErrorInfo, State};
use serde_json::json;

fn sim_with(agents: &[&str]) -> Sim {
    let mut s = Sim::new();
    for a in agents {
        s.add_agent(a, "");
    }
    s
}

fn append(s: &mut Sim, id: &str, text: &str) {
    let path = s.path_of(id);
    let mut t = s.text(&path);
    t.push_str(text);
    s.files.insert(path, t.into_bytes());
}

fn history_errors(s: &Sim, id: &str) -> Vec<ErrorInfo> {
    s.coord(id)
        .history
        .iter()
        .filter_map(|h| h.error().cloned())
        .collect()
}

#[test]
fn result_appended_after_the_coord_block_is_read() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: a\nagent: alice\n");
    s.tick(at(0));
    append(
        &mut s,
        "a",
        "result:\n  status: success\n  output: {n: 1}\n",
    );
    let p = s.tick(at(10));
    assert_eq!(summaries(&p), ["complete a"]);
    let text = s.text("done/a.yaml");
    assert!(
        text.ends_with("result:\n  status: success\n  output: {n: 1}\n"),
        "{text}"
    );
    assert_eq!(s.coord("a").state, Some(State::Done));
}

#[test]
fn malformed_result_fails_the_attempt_with_bad_result() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: a\nagent: alice\nmax_attempts: 2\n");
    s.tick(at(0));
    append(&mut s, "a", "result:\n  status: weird\n");
    let p = s.tick(at(10));
    assert_eq!(summaries(&p)[0], "retry a after bad_result (attempt 1/2)");
    let errs = history_errors(&s, "a");
    assert_eq!(errs[0].code.as_deref(), Some("bad_result"));
    assert!(errs[0].message.contains("status"), "{:?}", errs[0]);
    assert!(s.task("a").doc.value.get("result").is_none());
    assert_eq!(
        s.coord("a").history[0].result().expect("result")["status"],
        json!("weird")
    );
}

#[test]
fn a_failed_dependency_fails_every_waiting_dependent_in_one_tick() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("a", "title: a\nagent: alice\n");
    s.drop_task("b", "title: b\ndepends_on: [a]\nauthority: ask_me_first\n");
    s.drop_task("c", "title: c\ndepends_on: [b]\n");
    s.drop_task("d", "title: d\ndepends_on: [c]\n");
    s.tick(at(0));
    assert_eq!(s.ids_in("review"), ["b"]);
    s.report(
        "a",
        json!({"status": "failure", "error": {"message": "no", "retryable": false}}),
    );
    s.tick(at(60));
    assert_eq!(s.ids_in("failed"), ["a", "b", "c", "d"]);
    let e = s.coord("d").error.expect("error");
    assert_eq!(e.code.as_deref(), Some("dependency_failed"));
}

#[test]
fn inbox_files_coord_cannot_edit_are_quarantined_or_taken_on_first_sight() {
    let mut s = sim_with(&["alice"]);
    s.drop_task("marker", "title: m\n...\n");
    s.drop_task("first", "coord:\n  state: ready\ntitle: f\n");
    let filler = "x".repeat((1 << 20) - 40);
    s.drop_task("full", &format!("title: g\ndescription: \"{filler}\"\n"));
    let p = s.tick(at(0));
    assert!(s.ids_in("inbox").is_empty(), "{:?}", summaries(&p));
    assert_eq!(s.ids_in("invalid"), ["full", "marker"]);
    assert!(s.text("invalid/marker.yaml.errors").contains("'...'"));
    assert!(s.text("invalid/full.yaml.errors").contains("KiB limit"));
    assert_eq!(s.coord("first").state, Some(State::Assigned));
}

#[test]
fn a_join_of_large_outputs_runs_with_references() {
    let mut s = sim_with(&["alice", "bob", "carol"]);
    s.drop_task(
        "a",
        "title: a\nagent: alice\nnext_agent: [alice, bob]\njoin_agent: carol\n",
    );
    s.tick(at(0));
    s.report("a", json!({"status": "success", "output": {"n": 1}}));
    s.tick(at(10));
    let big = "z".repeat(40 * 1024);
    for child in ["a.alice", "a.bob"] {
        s.report(child, json!({"status": "success", "output": {"text": big}}));
    }
    let p = s.tick(at(20));
    assert!(
        summaries(&p).contains(&"assign a.join to carol".to_string()),
        "{:?}",
        summaries(&p)
    );
    let input = s.coord("a.join").input.expect("resolved input");
    let results = &input["results"];
    let referenced: Vec<_> = ["a.alice", "a.bob"]
        .iter()
        .filter(|c| results[**c].get("ref").is_some())
        .collect();
    assert_eq!(
        referenced.len(),
        1,
        "one output fits, the other is referenced"
    );
    let r = &results[*referenced[0]]["ref"];
    assert_eq!(r["pointer"], json!("/result/output"));
    assert!(
        r["path"].as_str().is_some_and(|p| p.starts_with("work/")),
        "{r}"
    );
}
