//! `coord list`: tasks as rows for people and scripts, filtered by state, agent, capability and
//! priority (every filter given must pass).

use crate::harness::TestRepo;
use serde_json::Value;

fn ids(r: &TestRepo, filters: &[&str]) -> Vec<String> {
    let full: Vec<&str> = ["--json", "list"].iter().chain(filters).copied().collect();
    let v: Value = serde_json::from_str(&r.ok(&full)).expect("json");
    assert_eq!(v["version"], 1, "{v}");
    v["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_str().expect("id").to_string())
        .collect()
}

fn repo() -> TestRepo {
    let r = TestRepo::with_agents(&["alice", "bob --capability design"]);
    r.ok(&[
        "new",
        "Fix the login bug",
        "--id",
        "login",
        "--agent",
        "alice",
        "--priority",
        "high",
    ]);
    r.ok(&[
        "new",
        "Draw the logo",
        "--id",
        "logo",
        "--capability",
        "design",
    ]);
    r.ok(&[
        "new",
        "Write the docs",
        "--id",
        "docs",
        "--capability",
        "writing",
        "--priority",
        "low",
    ]);
    r.ok(&["tick"]);
    r
}

#[test]
fn list_filters_by_state_agent_capability_and_priority() {
    let r = repo();
    let mut all = ids(&r, &[]);
    all.sort();
    assert_eq!(all, ["docs", "login", "logo"]);
    assert_eq!(ids(&r, &["--state", "ready"]), ["docs"]);
    assert_eq!(ids(&r, &["--agent", "bob"]), ["logo"]);
    assert_eq!(ids(&r, &["--capability", "design"]), ["logo"]);
    assert_eq!(ids(&r, &["--priority", "high"]), ["login"]);
    assert_eq!(ids(&r, &["--priority", "normal"]), ["logo"]);
    assert_eq!(
        ids(&r, &["--state", "assigned", "--priority", "low"]),
        Vec::<String>::new()
    );
}

#[test]
fn list_prints_aligned_rows_for_people() {
    let r = repo();
    let out = r.ok(&["list", "--state", "assigned"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("ID "), "{out}");
    let title_at = |l: &str, t: &str| l.find(t).unwrap_or_else(|| panic!("{t} in {out}"));
    let title = lines[1].rsplit("  ").next().expect("title").trim();
    assert_eq!(
        title_at(lines[0], "TITLE"),
        title_at(lines[1], title),
        "{out}"
    );
    let (_, err) = r.code(&["list", "--state", "done"], 0);
    assert_eq!(err, "coord: no task matches\n");
}

#[test]
fn list_refuses_an_unknown_agent_and_an_unknown_state() {
    let r = repo();
    let (_, err) = r.code(&["list", "--agent", "ghost"], 1);
    assert!(err.contains("ghost"), "{err}");
    let (_, err) = r.code(&["list", "--state", "sleeping"], 2);
    assert!(err.contains("unknown state \"sleeping\""), "{err}");
}

#[test]
fn list_gives_a_task_without_a_priority_the_configured_default_as_serve_does() {
    let r = TestRepo::with_agents(&["alice"]);
    let config = r.read("coord.yaml");
    assert!(config.contains("priority: normal"), "{config}");
    r.write(
        "coord.yaml",
        &config.replace("priority: normal", "priority: high"),
    );
    r.ok(&["new", "Plain", "--id", "plain"]);
    r.ok(&["new", "Later", "--id", "later", "--priority", "low"]);
    assert_eq!(ids(&r, &["--priority", "high"]), ["plain"]);
    assert!(ids(&r, &["--priority", "normal"]).is_empty());
    assert_eq!(ids(&r, &["--priority", "low"]), ["later"]);
}
