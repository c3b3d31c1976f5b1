//! The `--json` answers of the commands that act on one task: one object each, with
//! a version, on stdout and nothing else there; pinned field by field so that a change is
//! deliberate.

use crate::harness::TestRepo;
use crate::steps::tick_at;
use serde_json::{json, Value};

#[test]
fn person_commands_answer_one_json_object() {
    let mut r = TestRepo::new();
    r.task("t", "title: T\n");
    tick_at(&mut r, 0);
    assert_eq!(
        r.json(&["cancel", "t", "--reason", "not needed"]),
        json!({"version": 1, "op": "cancel", "id": "t", "commits": 1, "state": "cancelled"})
    );
    assert_eq!(
        r.json(&["retry", "t"]),
        json!({"version": 1, "op": "retry", "id": "t", "commits": 1, "state": "inbox"})
    );
}

#[test]
fn agent_commands_answer_one_json_object() {
    let mut r = TestRepo::with_agents(&["p --pull --max-active 2"]);
    r.task("x", "title: X\n");
    r.task("y", "title: Y\n");
    tick_at(&mut r, 0);
    let fence = ["--agent", "p", "--attempt", "1"];
    let claimed = [
        r.ok(&["claim", "--agent", "p"]),
        r.ok(&["claim", "--agent", "p"]),
    ];
    assert_eq!(claimed.concat().len(), 4, "{claimed:?}");
    for id in ["x", "y"] {
        let beat = r.json(&[&["heartbeat", id][..], &fence].concat());
        assert_eq!(beat["version"], 1, "{beat}");
        assert_eq!(beat["op"], "heartbeat", "{beat}");
        assert_eq!(beat["id"], id, "{beat}");
        assert_eq!(beat["state"], "assigned", "{beat}");
        assert!(beat["lease_expires_at"].is_string(), "{beat}");
    }
    assert_eq!(
        r.json(&[&["complete", "x"][..], &fence].concat()),
        json!({"version": 1, "op": "complete", "id": "x", "agent": "p", "state": "assigned",
               "attempt": 1, "recorded": true})
    );
    assert_eq!(
        r.json(&[&["fail", "y", "--error", "boom"][..], &fence].concat()),
        json!({"version": 1, "op": "fail", "id": "y", "agent": "p", "state": "assigned",
               "attempt": 1, "recorded": true})
    );
}

#[test]
fn status_markdown_with_json_is_refused_with_a_json_error_and_no_text_on_stdout() {
    let r = TestRepo::new();
    let (out, err) = r.code(&["--json", "status", "--markdown"], 2);
    assert_eq!(out, "", "no Markdown on stdout in --json mode");
    let error: Value = serde_json::from_str(err.trim()).expect("one JSON error on stderr");
    assert_eq!(error["error"]["code"], "usage", "{error}");
    let message = error["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("--markdown") && message.contains("--json"),
        "{message}"
    );
}
