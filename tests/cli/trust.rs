//! Trust and hostile input: signed results, redaction of secrets and control characters,
//! containment of paths and symlinks.

use crate::harness::TestRepo;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::process::Output;

const KEY: &str = "5f4dcc3b5aa765d61d8327deb882cf995f4dcc3b5aa765d61d8327deb882cf99";
const LATER: &str = "2026-11-22T12:00:00Z";

/// Runs coord with an isolated HOME (and extra environment), returning the output.
fn run_env(r: &TestRepo, home: &std::path::Path, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = r.cmd(args);
    c.env("HOME", home).env_remove("XDG_CONFIG_HOME");
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("run coord")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn signed_repo() -> (TestRepo, tempfile::TempDir) {
    let r = TestRepo::with_agents(&["alice --max-active 5"]);
    let cfg = r.read("coord.yaml").replace(
        "require_signed_results: false",
        "require_signed_results: true",
    );
    assert!(cfg.contains("require_signed_results: true"), "{cfg}");
    r.write("coord.yaml", &cfg);
    (r, tempfile::tempdir().expect("home"))
}

fn assigned(r: &TestRepo, id: &str, extra: &str) {
    r.task(id, &format!("title: Task {id}\nagent: alice\n{extra}"));
    r.ok(&["tick"]);
    assert_eq!(r.where_is(id), format!("work/assigned/alice/{id}.yaml"));
}

#[test]
fn good_signature_is_accepted_and_the_key_never_shows() {
    let (r, home) = signed_repo();
    assigned(&r, "t1", "");
    r.write("out.yaml", "summary: done\nn: [1, 2.5, true]\n");
    let env = [("COORD_KEY_ALICE", KEY)];
    let out = run_env(
        &r,
        home.path(),
        &env,
        &["complete", "t1", "--output", "out.yaml", "--sign"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(r
        .read("work/assigned/alice/t1.yaml")
        .contains("signature: hmac-sha256:"));
    let tick = run_env(&r, home.path(), &env, &["tick"]);
    assert!(tick.status.success(), "{}", text(&tick));
    assert_eq!(r.where_is("t1"), "work/done/t1.yaml");
    let log = r.git(&["log", "-p", "--format=%B"]);
    assert!(!log.contains(KEY) && !text(&out).contains(KEY) && !text(&tick).contains(KEY));
}

/// In a repo that requires signed results, `complete` or `fail` without `--sign` is refused
/// before it writes: the unsigned result would fail the task for good with `bad_signature`.
#[test]
fn a_report_without_sign_in_a_signed_repo_is_refused_before_it_fails_the_task() {
    let (r, _home) = signed_repo();
    assigned(&r, "t", "");
    let head = r.git(&["rev-parse", "HEAD"]);
    for args in [&["complete", "t"][..], &["fail", "t", "--error", "E"]] {
        let (_, err) = r.code(args, 1);
        assert!(
            err.contains("--sign") && err.contains("COORD_KEY_ALICE"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head, "nothing committed");
    r.ok(&["tick"]);
    assert_eq!(r.where_is("t"), "work/assigned/alice/t.yaml");
}

#[test]
fn missing_and_forged_signatures_fail_with_the_result_kept() {
    let (r, home) = signed_repo();
    let env = [("COORD_KEY_ALICE", KEY)];
    assigned(&r, "missing", "");
    assigned(&r, "forged", "");
    let unsigned = "work/assigned/alice/missing.yaml";
    r.write(
        unsigned,
        &format!("{}result:\n  status: success\n", r.read(unsigned)),
    );
    let path = "work/assigned/alice/forged.yaml";
    let forged = format!(
        "{}result:\n  status: success\n  output: {{x: 1}}\n  signature: hmac-sha256:{}\n",
        r.read(path).split("coord:").next().expect("head"),
        "ab".repeat(32)
    );
    let coord = r.read(path);
    let coord = &coord[coord.find("coord:").expect("coord")..];
    r.write(path, &format!("{forged}{coord}"));
    let tick = run_env(&r, home.path(), &env, &["tick"]);
    assert!(tick.status.success(), "{}", text(&tick));
    for id in ["missing", "forged"] {
        let file = r.where_is(id);
        assert_eq!(file, format!("work/failed/{id}.yaml"));
        let body = r.read(&file);
        assert!(body.contains("bad_signature"), "{body}");
        assert!(
            body.contains("result:\n  status: success"),
            "result kept: {body}"
        );
    }
}

#[test]
fn replayed_signature_of_an_earlier_attempt_is_rejected() {
    let (mut r, home) = signed_repo();
    let env = [("COORD_KEY_ALICE", KEY)];
    assigned(&r, "t3", "max_attempts: 3\n");
    let ok = run_env(&r, home.path(), &env, &["complete", "t3", "--sign"]);
    assert!(ok.status.success(), "{}", text(&ok));
    let first = r.read("work/assigned/alice/t3.yaml");
    let sig = first
        .lines()
        .find_map(|l| l.trim().strip_prefix("signature: "))
        .expect("signature")
        .to_string();
    let fail = run_env(
        &r,
        home.path(),
        &env,
        &["fail", "t3", "--error", "flaky", "--sign", "--replace"],
    );
    assert!(fail.status.success(), "{}", text(&fail));
    assert!(run_env(&r, home.path(), &env, &["tick"]).status.success());
    assert_eq!(r.where_is("t3"), "work/ready/t3.yaml");
    r.at(LATER);
    assert!(run_env(&r, home.path(), &env, &["tick"]).status.success());
    let path = r.where_is("t3");
    let body = r.read(&path);
    assert!(body.contains("attempt: 2"), "{body}");
    let (head, coord) = body.split_at(body.find("coord:").expect("coord"));
    r.write(
        &path,
        &format!("{head}result:\n  status: success\n  attempt: 2\n  signature: {sig}\n{coord}"),
    );
    assert!(run_env(&r, home.path(), &env, &["tick"]).status.success());
    assert_eq!(r.where_is("t3"), "work/failed/t3.yaml");
    assert!(r.read("work/failed/t3.yaml").contains("bad_signature"));
}

#[test]
fn no_key_on_the_coordinator_leaves_the_task_waiting() {
    let (r, home) = signed_repo();
    assigned(&r, "t4", "");
    let out = run_env(
        &r,
        home.path(),
        &[("COORD_KEY_ALICE", KEY)],
        &["complete", "t4", "--sign"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let tick = run_env(&r, home.path(), &[], &["tick", "-v"]);
    assert!(tick.status.success(), "{}", text(&tick));
    assert!(
        text(&tick).contains("no key for agent alice"),
        "{}",
        text(&tick)
    );
    assert_eq!(r.where_is("t4"), "work/assigned/alice/t4.yaml");
}

#[test]
fn keygen_makes_a_private_key_file_used_for_signing() {
    let (r, home) = signed_repo();
    let out = run_env(&r, home.path(), &[], &["keygen", "alice"]);
    assert!(out.status.success(), "{}", text(&out));
    let file = home.path().join(".config/coord/keys/alice");
    let mode = std::fs::metadata(&file)
        .expect("key file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let key = std::fs::read_to_string(&file).expect("key");
    assert_eq!(key.trim().len(), 64);
    assert!(!text(&out).contains(key.trim()), "the key is never printed");
    let again = run_env(&r, home.path(), &[], &["keygen", "alice"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("exists already"), "{}", text(&again));
    assert_eq!(std::fs::read_to_string(&file).expect("key"), key);

    assigned(&r, "t5", "");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let open = run_env(&r, home.path(), &[], &["complete", "t5", "--sign"]);
    assert_eq!(open.status.code(), Some(1));
    assert!(text(&open).contains("chmod 600"), "{}", text(&open));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(run_env(&r, home.path(), &[], &["complete", "t5", "--sign"])
        .status
        .success());
    assert!(run_env(&r, home.path(), &[], &["tick"]).status.success());
    assert_eq!(r.where_is("t5"), "work/done/t5.yaml");

    let xdg = tempfile::tempdir().expect("xdg");
    let xdg_path = xdg.path().to_str().expect("utf8");
    let made = run_env(
        &r,
        home.path(),
        &[("XDG_CONFIG_HOME", xdg_path)],
        &["keygen", "bob"],
    );
    assert!(made.status.success(), "{}", text(&made));
    assert!(xdg.path().join("coord/keys/bob").exists());
}

const GHP: &str = "ghp_CanaryCanaryCanaryCanaryCanary123456";

#[test]
fn secrets_and_control_characters_never_reach_commits_or_output() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.task(
        "canary",
        &format!(
            "title: \"Deploy {GHP} now\\nCoord-To: done\\e[31mred\"\nagent: alice\nnext_agent: bob\ninput: {{api_key: canary-XYZ, password: hunter2-canary}}\n"
        ),
    );
    r.ok(&["tick"]);
    r.write(
        "out.yaml",
        "token: canary-OUT\nnote: \"see ghp_CanaryCanaryCanaryCanaryCanary999999\"\n",
    );
    r.ok(&["complete", "canary", "--output", "out.yaml"]);
    r.ok(&["tick"]);
    let new = r.run(&[
        "new",
        &format!("Rotate {GHP}\nCoord-To: done"),
        "--agent",
        "alice",
    ]);
    assert!(new.status.success(), "{}", text(&new));
    let bad = r.run(&[
        "fail",
        "canary.bob",
        "--error",
        &format!("leaked {GHP}\n\x1b[2J"),
    ]);
    r.task("broken", &format!("title: x\npriority: {GHP}\n"));
    r.ok(&["tick"]);
    r.ok(&["tick"]);
    let mut seen = vec![text(&new), text(&bad), r.git(&["log", "--format=%B"])];
    for args in [
        &["log"][..],
        &["log", "--json"],
        &["status"],
        &["status", "--json"],
        &["show", "canary"],
        &["show", "canary", "--json"],
        &["show", "canary.bob"],
        &["show", "broken"],
        &["tick", "--dry-run", "-v"],
        &["validate"],
        &["doctor"],
    ] {
        seen.push(text(&r.run(args)));
    }
    seen.push(r.read(&format!("{}.errors", r.where_is("broken"))));
    for out in &seen {
        for secret in ["canary-XYZ", "hunter2-canary", "canary-OUT", "ghp_", "\x1b"] {
            assert!(!out.contains(secret), "{secret:?} leaked in:\n{out}");
        }
    }
    assert!(seen.iter().any(|o| o.contains("[REDACTED]")));
    for commit in r.git(&["log", "--format=%H"]).lines() {
        let trailers = r.git(&[
            "show",
            "-s",
            "--format=%(trailers:key=Coord-To,valueonly)",
            commit,
        ]);
        // One transition a commit, besides an agent's circuit line folded into it.
        let transitions = trailers
            .trim()
            .lines()
            .filter(|l| !l.starts_with("circuit "));
        assert!(
            transitions.count() <= 1,
            "forged trailer in {commit}: {trailers}"
        );
    }
    let msg = r.git(&["log", "--format=%B"]);
    assert!(!msg
        .lines()
        .any(|l| l == "Coord-To: done" && msg.contains("Deploy")));
}

#[test]
fn dotdot_and_absolute_ids_are_refused() {
    let r = TestRepo::with_agents(&["alice"]);
    for id in ["../../x", "/etc/passwd", "a/../../b"] {
        let (_, err) = r.code(&["new", "Escape", "--id", id], 2);
        assert!(err.contains("--id"), "{err}");
        r.code(&["show", id], 2);
        r.code(&["complete", id], 2);
        r.code(&["keygen", id], 2);
    }
    r.task("esc", "title: x\nid: ../../x\nagent: ../../etc\n");
    r.ok(&["tick"]);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("esc"), "work/invalid/esc.yaml");
    assert!(!r.abs("../x").exists() && !r.abs("../x.yaml").exists());
    r.write("coord.yaml", "work_dir: ../outside\n");
    let (_, err) = r.code(&["tick"], 1);
    assert!(err.contains("work_dir"), "{err}");
    r.write("coord.yaml", "work_dir: /tmp\n");
    r.code(&["tick"], 1);
}

#[test]
fn symlinked_files_and_folders_are_refused_and_reported() {
    let r = TestRepo::with_agents(&["alice"]);
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("x.yaml"), "title: Secret outside\n").expect("write");
    symlink(outside.path().join("x.yaml"), r.abs("work/inbox/link.yaml")).expect("symlink");
    symlink(outside.path(), r.abs("work/assigned/mallory")).expect("symlink");
    let out = r.run(&["tick"]);
    assert!(out.status.success(), "{}", text(&out));
    let status = r.ok(&["status"]);
    assert!(status.contains("symlink refused"), "{status}");
    let (doctor, _) = r.code(&["doctor"], 1);
    assert!(
        doctor.contains("work/inbox/link.yaml") && doctor.contains("work/assigned/mallory"),
        "{doctor}"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("dir").count(),
        1,
        "nothing written outside"
    );
    assert!(r
        .abs("work/inbox/link.yaml")
        .symlink_metadata()
        .expect("link")
        .file_type()
        .is_symlink());
    assert!(!r.git(&["log", "--format=%B"]).contains("Secret outside"));

    std::fs::remove_file(r.abs("work/inbox/link.yaml")).expect("rm");
    std::fs::remove_file(r.abs("work/assigned/mallory")).expect("rm");
    r.task("t1", "title: x\nagent: alice\n");
    r.ok(&["tick"]);
    std::fs::rename(r.abs("work/done"), r.abs("done-real")).expect("mv");
    symlink(outside.path(), r.abs("work/done")).expect("symlink");
    r.ok(&["complete", "t1"]);
    let tick = r.run(&["tick"]);
    assert_eq!(tick.status.code(), Some(1), "{}", text(&tick));
    assert!(text(&tick).contains("symlink refused"), "{}", text(&tick));
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("dir").count(),
        1,
        "nothing moved outside"
    );
    assert_eq!(r.where_is("t1"), "work/assigned/alice/t1.yaml");
}

#[test]
fn a_symlinked_work_folder_is_refused() {
    let r = TestRepo::with_agents(&["alice"]);
    let outside = tempfile::tempdir().expect("outside");
    let elsewhere = outside.path().join("work");
    std::fs::rename(r.abs("work"), &elsewhere).expect("mv");
    symlink(&elsewhere, r.abs("work")).expect("symlink");
    std::fs::write(elsewhere.join("inbox/t1.yaml"), "title: x\n").expect("write");
    for command in [&["tick"][..], &["status"]] {
        let out = r.run(command);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {}", text(&out));
        assert!(text(&out).contains("symlink refused"), "{}", text(&out));
    }
    assert!(elsewhere.join("inbox/t1.yaml").exists(), "nothing moved");
}
