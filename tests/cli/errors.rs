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
    let repo = TestRepo::new();
    repo.ok(&["agents", "add", "p", "--pull"]);
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
