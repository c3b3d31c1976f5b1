//! Foundation end to end: `new`, idempotency keys, `validate` on every fixture and
//! hostile input, refused ids, writing outside a repo, `agents`, and the global flags.

use crate::harness::{git_env, TestRepo, T0};
use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The crate's fixtures folder.
fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// Every file under `dir`, relative to it, sorted (.git excluded).
fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(
                    p.strip_prefix(root)
                        .expect("inside")
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Asserts stderr is one `error:` line (plus its `caused by:` lines) and nothing panicked.
fn assert_clean_error(stderr: &str) {
    let errors = stderr.lines().filter(|l| l.starts_with("error:")).count();
    assert_eq!(errors, 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    for bad in ["panicked", "backtrace", "RUST_BACKTRACE"] {
        assert!(!stderr.contains(bad), "{stderr}");
    }
}

#[test]
fn new_prints_an_id_and_commits_the_task_file() {
    let r = TestRepo::with_agents(&["alice"]);
    let before = r.commit_count();
    let id = r.ok(&[
        "new",
        "Fix the login bug",
        "--agent",
        "alice",
        "--priority",
        "high",
    ]);
    let id = id.trim();
    assert!(id.starts_with("fix-the-login-bug-"), "{id}");
    assert_eq!(id.len(), "fix-the-login-bug-".len() + 6, "{id}");
    let path = format!("work/inbox/{id}.yaml");
    assert_eq!(
        r.read(&path),
        "title: Fix the login bug\nagent: alice\npriority: high\n"
    );
    assert_eq!(r.commit_count(), before + 1);
    assert_eq!(
        r.git(&["show", "--name-only", "--format=", "HEAD"]),
        format!("{path}\n")
    );
    let msg = r.git(&["log", "-1", "--format=%B"]);
    assert!(
        msg.contains(&format!(
            "Coord-Task: {id}\nCoord-From: new\nCoord-To: inbox"
        )),
        "{msg}"
    );
    assert_eq!(r.git_status(), "");
    r.ok(&["validate"]);
}

#[test]
fn same_idempotency_key_gives_the_same_id_and_one_file() {
    let r = TestRepo::new();
    let a = r.ok(&["new", "Nightly report", "--idempotency-key", "ticket-4711"]);
    let commits = r.commit_count();
    let b = r.ok(&["new", "Nightly report", "--idempotency-key", "ticket-4711"]);
    assert_eq!(a, b);
    assert_eq!(r.commit_count(), commits, "the second new is a no-op");
    let (_, other) = r.code(
        &[
            "new",
            "Nightly report again",
            "--idempotency-key",
            "ticket-4711",
        ],
        1,
    );
    assert!(other.contains("with other fields"), "{other}");
    assert_eq!(
        r.commit_count(),
        commits,
        "other fields: refused, not dropped"
    );
    let id = a.trim();
    assert_eq!(r.find(id), vec![format!("work/inbox/{id}.yaml")]);
    assert_eq!(
        tree(&r.abs("work/inbox")),
        vec![".gitkeep".to_string(), format!("{id}.yaml")]
    );
    let json: serde_json::Value =
        r.json(&["new", "Nightly report", "--idempotency-key", "ticket-4711"]);
    assert_eq!(json["id"], id);
    assert_eq!(json["created"], false);
}

#[test]
fn idempotency_key_is_found_after_the_task_moved_on() {
    let r = TestRepo::with_agents(&["alice"]);
    let id = r
        .ok(&["new", "Ship it", "--idempotency-key", "k-1"])
        .trim()
        .to_string();
    r.ok(&["tick"]);
    assert_eq!(r.where_is(&id), format!("work/assigned/alice/{id}.yaml"));
    assert_eq!(
        r.ok(&["new", "Ship it", "--idempotency-key", "k-1"]).trim(),
        id
    );
    r.ok(&["complete", &id]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is(&id), format!("work/done/{id}.yaml"));
    let commits = r.commit_count();
    assert_eq!(
        r.ok(&["new", "Ship it", "--idempotency-key", "k-1"]).trim(),
        id
    );
    assert_eq!(r.find(&id).len(), 1);
    assert_eq!(tree(&r.abs("work/inbox")), vec![".gitkeep"]);
    assert_eq!(r.commit_count(), commits);
}

#[test]
fn a_title_alone_is_a_valid_task() {
    let r = TestRepo::new();
    r.task("login", "title: Fix the login bug\n");
    let (_, err) = r.code(&["validate"], 0);
    assert!(err.contains("all task files are valid"), "{err}");
    r.code(&["validate", "work/inbox/login.yaml"], 0);
    r.code(
        &[
            "validate",
            fixture("valid/minimal.yaml").to_str().expect("utf8"),
        ],
        0,
    );
    r.code(
        &[
            "validate",
            fixture("valid/commented.yaml").to_str().expect("utf8"),
        ],
        0,
    );
}

#[test]
fn every_invalid_fixture_points_at_the_offending_line() {
    // (file, line:column, a word of the message) as in fixtures/invalid/EXPECTED.md
    let expected = [
        ("bad-enum", "3:11", "urgent"),
        ("yaml-syntax", "4:1", "YAML syntax"),
        ("missing-title", "1:1", "title"),
        ("id-mismatch", "3:5", "something-else"),
        ("wrong-type", "3:15", "whole number"),
        ("unknown-key", "3:1", "priorty"),
        ("bad-duration", "3:10", "30 minutes"),
        ("bad-id-ref", "3:14", "../../etc"),
        ("empty-title", "2:8", "title"),
    ];
    let listed = std::fs::read_dir(fixture("invalid"))
        .expect("fixtures")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        })
        .count();
    assert_eq!(listed, expected.len(), "a fixture without an expectation");
    let r = TestRepo::new();
    for (name, pos, word) in expected {
        // Copied under its own name: the id-mismatch rule compares `id:` with the file stem.
        let rel = format!("tmp/{name}.yaml");
        std::fs::create_dir_all(r.abs("tmp")).expect("mkdir");
        std::fs::copy(fixture(&format!("invalid/{name}.yaml")), r.abs(&rel)).expect("copy");
        let (out, err) = r.code(&["validate", &rel], 1);
        let prefix = format!("{rel}:{pos}: ");
        let first = out.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&prefix),
            "{name}: want {prefix}, got:\n{out}"
        );
        assert!(
            out.lines().all(|l| l.starts_with(&prefix)),
            "{name}: one position only:\n{out}"
        );
        assert!(first.contains(word), "{name}: {first}");
        assert!(err.contains("problem(s) found"), "{name}: {err}");
    }
}

#[test]
fn id_mismatch_compares_with_the_file_stem() {
    let r = TestRepo::new();
    let text = std::fs::read_to_string(fixture("invalid/id-mismatch.yaml")).expect("fixture");
    r.write("tmp/something-else.yaml", &text);
    r.code(&["validate", "tmp/something-else.yaml"], 0);
}

/// Runs `coord validate <rel>` and returns (stdout, wall time); asserts exit 1.
fn validate_timed(r: &TestRepo, rel: &str) -> (String, Duration) {
    let start = Instant::now();
    let out = r.run(&["validate", rel]);
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{rel}: {stdout}{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    eprintln!("validate {rel}: {took:?}");
    assert!(took < Duration::from_secs(2), "{rel} took {took:?}");
    (stdout, took)
}

#[test]
fn hostile_files_are_rejected_fast_with_a_clear_message() {
    let r = TestRepo::new();
    std::fs::create_dir_all(r.abs("tmp")).expect("mkdir");
    for (name, pos, says) in [
        ("billion-laughs", "10:31", "expands to over"),
        ("custom-tag", "3:8", "custom tag"),
        ("multi-doc", "3:1", "one YAML document"),
        ("not-utf8", "2:11", "not valid UTF-8"),
    ] {
        let rel = format!("tmp/{name}.yaml");
        std::fs::copy(fixture(&format!("hostile/{name}.yaml")), r.abs(&rel)).expect("copy");
        let (out, _) = validate_timed(&r, &rel);
        assert!(out.starts_with(&format!("{rel}:{pos}: ")), "{out}");
        assert!(out.contains(says), "{out}");
        assert_eq!(out.lines().count(), 1, "{out}");
    }
}

#[test]
fn deep_nesting_hits_the_depth_limit() {
    let r = TestRepo::new();
    let n = 100_000;
    r.write(
        "tmp/deep-seq.yaml",
        &format!("{}{}\n", "[".repeat(n), "]".repeat(n)),
    );
    r.write(
        "tmp/deep-map.yaml",
        &format!("title: {}x{}\n", "{a: ".repeat(n), "}".repeat(n)),
    );
    for rel in ["tmp/deep-seq.yaml", "tmp/deep-map.yaml"] {
        let (out, _) = validate_timed(&r, rel);
        assert!(out.starts_with(&format!("{rel}:1:")), "{out}");
        assert!(out.contains("nesting deeper than 64 levels"), "{out}");
    }
}

#[test]
fn a_100_mb_file_is_refused_by_the_size_limit() {
    let r = TestRepo::new();
    let path = r.abs("tmp/huge.yaml");
    std::fs::create_dir_all(r.abs("tmp")).expect("mkdir");
    std::fs::write(&path, "title: huge\ndescription: |\n  x\n").expect("write");
    // Sparse: the size is 100 MB but nothing else is written.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(100 * 1024 * 1024).expect("set_len");
    let (out, _) = validate_timed(&r, "tmp/huge.yaml");
    assert_eq!(
        out,
        "tmp/huge.yaml:1:1: file is larger than the 1048576 byte limit\n"
    );
}

#[test]
fn a_path_id_is_refused_and_nothing_is_written() {
    let r = TestRepo::new();
    let outside = r.path().parent().expect("parent").to_path_buf();
    let before_tree = tree(r.path());
    let commits = r.commit_count();
    for bad in ["../../x", "../x", "a/b", "..", ".hidden", ""] {
        let (_, err) = r.code(&["new", "Escape", "--id", bad], 2);
        assert_clean_error(&err);
        assert!(err.contains("nothing was written"), "{err}");
    }
    assert_eq!(tree(r.path()), before_tree);
    assert_eq!(r.commit_count(), commits);
    assert_eq!(r.git_status(), "");
    assert!(!outside.join("x.yaml").exists());
    assert!(!r.abs("work/x.yaml").exists());
}

#[test]
fn writing_commands_fail_clearly_outside_a_git_repo() {
    let r = TestRepo::empty();
    for args in [
        &["new", "Fix the login bug"][..],
        &["tick"][..],
        &["agents", "add", "alice"][..],
    ] {
        let (out, err) = r.code(args, 1);
        assert_eq!(out, "", "{args:?}");
        assert_clean_error(&err);
        assert!(
            err.contains("is not in a git repository"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    }
    assert_eq!(tree(r.path()), Vec::<String>::new(), "nothing written");
}

#[test]
fn agents_add_and_list() {
    let r = TestRepo::new();
    let before = r.commit_count();
    r.ok(&["agents", "add", "alice"]);
    r.ok(&[
        "agents",
        "add",
        "bob",
        "--capability",
        "review",
        "--capability",
        "design",
        "--max-active",
        "3",
    ]);
    assert_eq!(r.commit_count(), before + 2);
    assert_eq!(
        r.git(&["show", "--name-only", "--format=", "HEAD"]),
        "work/agents/bob.yaml\n"
    );
    assert!(r
        .git(&["log", "-1", "--format=%B"])
        .contains("Coord-Agent: bob"));
    assert!(r.read("work/agents/bob.yaml").contains("max_active: 3"));
    assert_eq!(r.git_status(), "");
    let list = r.ok(&["agents"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert!(
        lines[0].starts_with("alice") && lines[0].contains("0/1"),
        "{list}"
    );
    assert!(
        lines[1].starts_with("bob") && lines[1].contains("0/3"),
        "{list}"
    );
    assert!(lines[1].contains("review"), "{list}");
    let answer: serde_json::Value = r.json(&["agents"]);
    let json = &answer["agents"];
    let names: Vec<&str> = json
        .as_array()
        .expect("array")
        .iter()
        .map(|a| a["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(json[1]["max_active"], 3);
    assert_eq!(
        json[1]["capabilities"],
        serde_json::json!(["review", "design"])
    );
    let (_, err) = r.code(&["agents", "add", "../evil"], 2);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!r.exists("work/evil.yaml"));
}

/// A coord command run from `cwd` without the harness's `-C`.
fn bare_cmd(cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::cargo_bin("coord").expect("binary");
    c.current_dir(cwd).args(args);
    for (k, v) in git_env() {
        c.env(k, v);
    }
    c.env("COORD_NOW", T0);
    c
}

#[test]
fn dash_c_runs_as_if_started_there() {
    let r = TestRepo::new();
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let inbox = r.abs("work/inbox");
    let out = bare_cmd(
        elsewhere.path(),
        &["-C", inbox.to_str().expect("utf8"), "new", "From afar"],
    )
    .output()
    .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(r.where_is(&id), format!("work/inbox/{id}.yaml"));
    assert_eq!(tree(elsewhere.path()), Vec::<String>::new());
    // Without -C, a folder outside any repository is refused.
    let out = bare_cmd(elsewhere.path(), &["new", "Nowhere"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn now_sets_the_clock_and_a_bad_one_is_a_usage_error() {
    let r = TestRepo::with_agents(&["alice"]);
    r.ok(&[
        "--now",
        "2030-01-02T03:04:05Z",
        "new",
        "Later",
        "--id",
        "later",
    ]);
    assert_eq!(
        r.git(&["log", "-1", "--format=%ct"]).trim(),
        "1893553445",
        "commit time = --now"
    );
    r.ok(&["--now", "2030-01-02T03:04:05Z", "tick"]);
    let text = r.read("work/assigned/alice/later.yaml");
    assert!(text.contains("assigned_at: 2030-01-02T03:04:05Z"), "{text}");
    assert!(
        text.contains("lease_expires_at: 2030-01-02T03:34:05Z"),
        "{text}"
    );
    let (_, err) = r.code(&["--now", "yesterday", "status"], 2);
    assert_clean_error(&err);
    assert!(err.contains("RFC 3339"), "{err}");
}

#[test]
fn json_and_quiet_flags() {
    let r = TestRepo::new();
    let out = r
        .cmd(&["-q", "agents", "add", "alice"])
        .output()
        .expect("run");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "-q prints nothing on stderr"
    );
    r.task("t1", "title: one\n");
    let out = r.cmd(&["-q", "tick"]).output().expect("run");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let loud = r.cmd(&["tick"]).output().expect("run");
    assert_eq!(
        String::from_utf8_lossy(&loud.stderr),
        "coord: nothing to do\n"
    );
    let json: serde_json::Value = r.json(&["tick"]);
    assert_eq!(
        json,
        serde_json::json!({"version": 1, "dry_run": false, "commits": 0, "transitions": [],
            "skipped": 0, "attention": [], "pending": [], "notes": []})
    );
    let json: serde_json::Value = r.json(&["new", "Two", "--id", "t2"]);
    assert_eq!(
        json,
        serde_json::json!({"version": 1, "id": "t2", "path": "work/inbox/t2.yaml", "created": true})
    );
}

#[test]
fn a_closed_stdout_pipe_ends_quietly_without_a_panic() {
    let r = TestRepo::new();
    let mut child = r
        .spawn_cmd(&["log", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
