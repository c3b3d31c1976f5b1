//! How failures leave the binary: one `error:` line with its causes, or in `--json` mode one
//! JSON object on stderr carrying the exit code; and "nothing to claim" told as an answer, not
//! as an error.

use crate::harness::TestRepo;
use serde_json::Value;

fn json_of(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not one JSON value ({e}): {text}"))
}

#[test]
fn in_json_mode_an_error_is_one_json_object_on_stderr_with_the_exit_code() {
    let repo = TestRepo::new();
    let (out, err) = repo.code(&["--json", "approve", "nope"], 1);
    assert_eq!(out, "", "nothing on stdout");
    let e = json_of(&err);
    assert_eq!(e["version"], 1, "{e}");
    assert_eq!(e["error"]["exit_code"], 1, "{e}");
    assert_eq!(e["error"]["code"], "not_found", "{e}");
    let message = e["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no task 'nope'"), "{e}");
}

#[test]
fn in_json_mode_a_usage_error_found_after_parsing_exits_2_as_json() {
    let repo = TestRepo::new();
    let (_, err) = repo.code(&["--json", "new", "t", "--input", "no-equals-sign"], 2);
    let e = json_of(&err);
    assert_eq!(e["error"]["exit_code"], 2, "{e}");
    assert_eq!(e["error"]["code"], "usage", "{e}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn nothing_to_claim_is_an_answer_exit_4_not_an_error() {
    let repo = TestRepo::with_agents(&["p --pull"]);
    let (out, err) = repo.code(&["claim", "--agent", "p"], 4);
    assert_eq!(out, "");
    assert!(!err.contains("error:"), "{err}");
    assert!(err.contains("nothing to claim for agent p"), "{err}");

    let (out, err) = repo.code(&["--json", "claim", "--agent", "p"], 4);
    assert_eq!(err, "", "nothing on stderr in --json mode");
    let answer = json_of(&out);
    assert_eq!(answer["version"], 1, "{answer}");
    assert_eq!(answer["claimed"], false, "{answer}");
    assert_eq!(answer["agent"], "p", "{answer}");
    assert!(
        answer["why"].is_string() || answer["why"].is_null(),
        "{answer}"
    );
}

/// Why nothing could be claimed is told from what kept the agent out (its limit, its circuit,
/// its profile disabled), never from words in a name: a task reserved for an agent called
/// `limit-bot` is not the claimer's limit.
#[test]
fn nothing_to_claim_names_no_reason_found_in_another_agents_name() {
    let repo = TestRepo::with_agents(&["p --pull", "limit-bot --pull"]);
    repo.ok(&["new", "reserved", "--id", "r", "--agent", "limit-bot"]);
    repo.ok(&["tick"]);
    let (_, err) = repo.code(&["claim", "--agent", "p"], 4);
    assert!(err.contains("nothing to claim for agent p"), "{err}");
    assert!(
        !err.contains("limit-bot"),
        "no reason of another agent's: {err}"
    );

    repo.ok(&["agents", "add", "q", "--pull", "--max-active", "1"]);
    repo.ok(&["new", "one", "--id", "a", "--agent", "q"]);
    repo.ok(&["new", "two", "--id", "b", "--agent", "q"]);
    repo.ok(&["tick"]);
    repo.ok(&["claim", "--agent", "q"]);
    let (_, err) = repo.code(&["claim", "--agent", "q"], 4);
    assert!(err.contains("at its limit (1/1)"), "the real reason: {err}");
}

#[test]
fn what_to_do_is_a_hint_line_after_the_error_and_hints_in_json() {
    let repo = TestRepo::new();
    repo.ok(&["keygen", "alice"]);
    let (_, err) = repo.code(&["keygen", "alice"], 1);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("error: ") && lines[0].ends_with("a key exists already"),
        "{err}"
    );
    assert_eq!(
        lines.last(),
        Some(&"hint: delete the key file first to replace it"),
        "{err}"
    );
    let (_, err) = repo.code(&["--json", "keygen", "alice"], 1);
    let e = json_of(&err);
    assert_eq!(
        e["error"]["hints"],
        serde_json::json!(["delete the key file first to replace it"]),
        "{e}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let (_, err) = repo.code(&["--json", "approve", "nope"], 1);
    assert!(json_of(&err)["error"].get("hints").is_none(), "{err}");
}

#[test]
fn serve_on_an_open_address_without_a_token_fails_with_a_hint() {
    let repo = TestRepo::new();
    let (_, err) = repo.code(&["serve", "--listen", "0.0.0.0:0"], 1);
    assert!(
        err.starts_with("error: listening on 0.0.0.0:0 (not loopback) needs a token\n"),
        "{err}"
    );
    assert!(err.contains("\nhint: set COORD_SERVE_TOKEN"), "{err}");
}

#[test]
fn demo_into_a_folder_that_is_not_empty_fails_with_a_hint() {
    let repo = TestRepo::new();
    let dir = repo.path().to_str().expect("utf-8 path").to_string();
    let (out, err) = repo.code(&["demo", &dir], 1);
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!("error: {dir} is not empty\nhint: pass an empty or new folder\n")
    );
}
