//! Every `--json` answer against its JSON Schema under `schemas/json/` (docs/json.md): each
//! command runs through the real binary, and its stdout (or, for a failure, its stderr) must be
//! one JSON value the schema accepts. Every schema there is used here and listed in the docs.

use crate::harness::TestRepo;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// The folder of the answer schemas.
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/json");

/// Asserts that `text` is one JSON value that `schema` (a file name under `schemas/json/`
/// without `.json`) accepts, and returns it.
pub(crate) fn check(schema: &str, args: &[&str], text: &str) -> Value {
    let path = Path::new(DIR).join(format!("{schema}.json"));
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let schema_json: Value = serde_json::from_str(&raw).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema_json).expect("schema compiles");
    let value: Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("coord {args:?}: not one JSON value ({e}): {text:?}"));
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "coord {args:?} against schemas/json/{schema}.json: {errors:?}\n{value:#}"
    );
    assert_eq!(value["version"], 1, "coord {args:?}: {value}");
    value
}

/// Runs `coord --json ARGS`, expects exit `code`, and checks stdout against `schema`.
fn answer(r: &TestRepo, schema: &str, args: &[&str], code: i32) -> Value {
    let full: Vec<&str> = ["--json"].iter().chain(args).copied().collect();
    let (out, _) = r.code(&full, code);
    check(schema, args, &out)
}

/// Runs `coord --json ARGS`, expects exit `code`, and checks stderr against the error schema.
fn failure(r: &TestRepo, args: &[&str], code: i32) -> Value {
    let full: Vec<&str> = ["--json"].iter().chain(args).copied().collect();
    let (out, err) = r.code(&full, code);
    assert_eq!(out, "", "coord {args:?}: nothing on stdout");
    check("error", args, &err)
}

#[test]
fn every_json_answer_matches_its_schema() {
    let mut used = BTreeSet::new();
    let mut ok = |r: &TestRepo, schema: &'static str, args: &[&str], code: i32| {
        used.insert(schema);
        answer(r, schema, args, code)
    };
    let r = TestRepo::empty();
    ok(&r, "init", &["init"], 0);
    ok(&r, "init", &["init"], 0);
    ok(&r, "agents-add", &["agents", "add", "p", "--pull"], 0);
    ok(
        &r,
        "agents-add",
        &["agents", "add", "q", "--capability", "x"],
        0,
    );
    ok(&r, "agents", &["agents"], 0);
    r.write(
        "work/schedules/daily.yaml",
        "cron: '0 9 * * *'\ntask: {title: Daily digest}\n",
    );
    ok(&r, "schedules", &["schedules"], 0);
    let hooked = TestRepo::new();
    let config = hooked.read("coord.yaml")
        + "\nwebhooks: {ops: {url: \"http://127.0.0.1:9/h\", events: [done]}}\n";
    hooked.commit_file("coord.yaml", &config, "a webhook");
    let listed = ok(&hooked, "webhooks", &["webhooks"], 0);
    assert_eq!(listed["endpoints"][0]["name"], "ops", "{listed}");
    ok(&r, "webhooks-retry", &["webhooks", "retry", "--all"], 0);
    ok(
        &r,
        "new",
        &[
            "new",
            "First",
            "--id",
            "a",
            "--agent",
            "p",
            "--next-agent",
            "q",
        ],
        0,
    );
    ok(
        &r,
        "new",
        &["new", "Second", "--id", "b", "--agent", "q"],
        0,
    );
    ok(&r, "validate", &["validate"], 0);
    ok(&r, "tick", &["tick", "--dry-run"], 0);
    let ticked = ok(&r, "tick", &["tick"], 0);
    assert!(!ticked["transitions"].as_array().expect("list").is_empty());
    ok(&r, "claim", &["claim", "--agent", "p"], 0);
    ok(&r, "claim", &["claim", "--agent", "p"], 4);
    let fence = ["--agent", "p", "--attempt", "1"];
    ok(
        &r,
        "heartbeat",
        &[&["heartbeat", "a"][..], &fence].concat(),
        0,
    );
    ok(&r, "report", &[&["complete", "a"][..], &fence].concat(), 0);
    ok(&r, "status", &["status"], 0);
    ok(&r, "list", &["list"], 0);
    ok(
        &r,
        "list",
        &["list", "--state", "assigned", "--priority", "normal"],
        0,
    );
    ok(&r, "show", &["show", "a"], 0);
    ok(&r, "log", &["log"], 0);
    ok(&r, "doctor", &["doctor"], 0);
    ok(&r, "verify", &["verify"], 0);
    ok(&r, "gate", &["cancel", "b"], 0);
    ok(&r, "gate", &["retry", "b"], 0);
    ok(&r, "tick", &["tick"], 0);
    ok(
        &r,
        "archive",
        &["archive", "--older-than", "0s", "--dry-run"],
        0,
    );
    ok(&r, "archive", &["archive", "--older-than", "0s"], 0);
    ok(&r, "keygen", &["keygen", "p"], 0);
    ok(&r, "prime", &["prime"], 0);
    ok(&r, "prime", &["prime", "--install"], 0);
    ok(&r, "prime", &["prime", "--uninstall"], 0);
    r.write(".git/coord/logs/a@1.stdout", "out\n");
    ok(&r, "logs", &["logs", "a"], 0);
    r.write("work/inbox/bad.yaml", "title: [unclosed\n");
    let invalid = ok(&r, "validate", &["validate"], 1);
    assert_eq!(invalid["valid"], false, "{invalid}");
    ok(&r, "doctor", &["doctor"], 1);
    r.add_origin();
    ok(&r, "sync", &["sync"], 0);
    let copy = r.read(&r.where_is("a"));
    r.commit_file("work/cancelled/a.yaml", &copy, "copy a by hand");
    let found = ok(&r, "verify", &["verify"], 5);
    assert_eq!(
        found["verified"]["findings"][0]["kind"], "two_places",
        "{found}"
    );
    let issues = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/import/github/issues.json"
    );
    ok(&r, "import", &["import", "github", issues, "--dry-run"], 0);
    ok(&r, "import", &["import", "github", issues], 0);
    failure(&r, &["show", "nope"], 1);
    used.insert("error");
    let all = schema_names();
    let missing: Vec<&String> = all
        .iter()
        .filter(|n| !used.contains(n.as_str()) && !["demo", "run", "export"].contains(&n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "schemas no command was checked against: {missing:?}"
    );
}

#[test]
fn export_lines_match_their_schema() {
    let r = TestRepo::new();
    let issues = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/import/github/issues.json"
    );
    r.ok(&["import", "github", issues]);
    r.ok(&["tick"]);
    let raw = std::fs::read_to_string(Path::new(DIR).join("export.json")).expect("schema");
    let schema: Value = serde_json::from_str(&raw).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let out = r.ok(&["export"]);
    assert_eq!(out.lines().count(), 4, "{out}");
    for line in out.lines() {
        let value: Value = serde_json::from_str(line).expect("one JSON object a line");
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{line}: {errors:?}");
    }
}

#[test]
fn run_json_events_match_their_schema() {
    let r = TestRepo::with_agents(&["w"]);
    r.ok(&["new", "Works", "--id", "good", "--agent", "w"]);
    let stdout = r.ok_on_system_clock(&[
        "--json",
        "run",
        "w",
        "--once",
        "--",
        "sh",
        "-c",
        "cat >/dev/null",
    ]);
    let events: Vec<Value> = stdout.lines().map(|l| check("run", &["run"], l)).collect();
    let kinds: Vec<&Value> = events.iter().map(|e| &e["event"]).collect();
    assert_eq!(kinds, ["started", "done"], "{stdout}");
}

#[test]
fn demo_json_matches_its_schema() {
    let r = TestRepo::empty();
    let dir = r.abs("demo");
    let dir = dir.to_str().expect("utf8");
    let out = r.ok_on_system_clock(&["--json", "demo", dir]);
    let v = check("demo", &["demo"], &out);
    assert_eq!(v["board"]["counts"]["done"], 9, "{v}");
}

/// The command that rewrites the generated schemas from the types.
const REWRITE: &str = "COORD_WRITE_SCHEMAS=1 cargo test --test cli schemas::";

#[test]
fn generated_schemas_match_the_answer_types() {
    let write = std::env::var_os("COORD_WRITE_SCHEMAS").is_some();
    let mut stale = Vec::new();
    for generated in coord::ops::schemas() {
        let path = Path::new(DIR).join(format!("{}.json", generated.name));
        let text =
            serde_json::to_string_pretty(&generated.schema).expect("a schema is JSON") + "\n";
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        if write {
            std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        } else {
            stale.push(format!("schemas/json/{}.json", generated.name));
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from what the answer types generate; rewrite them with {REWRITE}"
    );
}

#[test]
fn every_answer_schema_is_listed_in_docs_json() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md"))
        .expect("docs/json.md");
    for name in schema_names() {
        let listed = format!("schemas/json/{name}.json");
        assert!(
            docs.contains(&listed),
            "docs/json.md does not list {listed}"
        );
    }
}

/// Returns the names of the schemas under `schemas/json/`, without `.json`.
fn schema_names() -> BTreeSet<String> {
    std::fs::read_dir(DIR)
        .expect("schemas/json")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect()
}
