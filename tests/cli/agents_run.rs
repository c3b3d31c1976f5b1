//! `coord run`: the agent harness, driven through the binary on the real clock. Each runner
//! ticks before it looks for work, so pipelines move with no other coordinator running.

use crate::harness::TestRepo;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A repo whose coord.yaml retries at once (backoff of a second) and hands b's output to c.
pub(crate) fn repo(agents: &[(&str, &str)]) -> TestRepo {
    let r = TestRepo::new();
    r.write(
        "coord.yaml",
        "defaults: {timeout: 30m, max_attempts: 3}\nbackoff: {base: 1s, max: 1s}\n\
         rules:\n  - when: {agent: b}\n    then: c\n",
    );
    for (name, profile) in agents {
        r.write(&format!("work/agents/{name}.yaml"), profile);
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "agents"]);
    r
}

/// `coord run` on the real clock (no COORD_NOW), output captured.
pub(crate) fn runner(r: &TestRepo, args: &[&str]) -> Command {
    let mut c = r.spawn_cmd(&[]);
    c.env_remove("COORD_NOW").arg("run").args(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Runs `coord run` to its end and returns (exit code, stdout, stderr).
pub(crate) fn run_to_end(r: &TestRepo, args: &[&str]) -> (i32, String, String) {
    let out = runner(r, args).output().expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Waits until `cond` holds, up to `secs`.
pub(crate) fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

/// Sends SIGTERM and returns (exit code, stdout, stderr) once the runner exits.
pub(crate) fn stop(child: Child) -> (i32, String, String) {
    signal(&child, "-TERM");
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Returns the task file of `id` as JSON.
pub(crate) fn task(r: &TestRepo, id: &str) -> Value {
    let out = r.ok(&["show", id, "--json"]);
    serde_json::from_str(&out).expect("json")
}

pub(crate) fn state(r: &TestRepo, id: &str) -> String {
    let found = r.find(id);
    match found.as_slice() {
        [one] => one.split('/').nth(1).unwrap_or("").to_string(),
        _ => format!("{found:?}"),
    }
}

/// A command that saves its stdin as `<id>.<attempt>.json` in `dir` and prints `by: <agent>`.
fn echo_agent(dir: &Path) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "cat > {}/$COORD_TASK_ID.$COORD_ATTEMPT.json; echo \"by: $COORD_AGENT\"",
            dir.display()
        ),
    ]
}

pub(crate) fn args<'a>(head: &[&'a str], cmd: &'a [String]) -> Vec<&'a str> {
    let mut v = head.to_vec();
    v.push("--");
    v.extend(cmd.iter().map(|s| s.as_str()));
    v
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("stdin saved")).expect("stdin is json")
}

#[test]
fn run_drives_a_three_step_pipeline_alone() {
    let r = repo(&[
        ("a", "max_active: 1\n"),
        ("b", "max_active: 1\n"),
        ("c", "max_active: 1\n"),
    ]);
    let seen = tempfile::tempdir().expect("tmp");
    r.task(
        "spec",
        "title: Write the spec\nagent: a\nnext_agent: b\ninput: {topic: api}\n",
    );
    let cmd = echo_agent(seen.path());
    let runners: Vec<Child> = ["a", "b", "c"]
        .iter()
        .map(|a| runner(&r, &args(&[a], &cmd)).spawn().expect("spawn"))
        .collect();
    wait_until(30, "the last step done", || state(&r, "spec.b.c") == "done");
    for child in runners {
        let (code, _, err) = stop(child);
        assert_eq!(code, 0, "{err}");
    }
    let first = read_json(&seen.path().join("spec.1.json"));
    assert_eq!(first["title"], "Write the spec");
    assert_eq!(first["input"]["topic"], "api");
    assert_eq!(first["attempt"], 1);
    let second = read_json(&seen.path().join("spec.b.1.json"));
    assert_eq!(second["previous"]["by"], "a", "{second}");
    let third = read_json(&seen.path().join("spec.b.c.1.json"));
    assert_eq!(third["previous"]["by"], "b", "{third}");
    assert_eq!(task(&r, "spec.b.c")["task"]["result"]["output"]["by"], "c");
    for id in ["spec", "spec.b", "spec.b.c"] {
        assert_eq!(state(&r, id), "done", "{id}");
    }
    assert_eq!(r.git_status(), "", "every change committed");
}

#[test]
fn run_once_drives_a_fan_out_and_join_and_exits() {
    let r = repo(&[("a", ""), ("x", ""), ("y", ""), ("j", "")]);
    let seen = tempfile::tempdir().expect("tmp");
    r.task(
        "plan",
        "title: Plan\nagent: a\nnext_agent: [x, y]\njoin_agent: j\n",
    );
    let cmd = echo_agent(seen.path());
    for agent in ["a", "x", "y", "j"] {
        let (code, out, err) = run_to_end(&r, &args(&[agent, "--once"], &cmd));
        assert_eq!(code, 0, "{agent}: {err}");
        assert_eq!(out.lines().count(), 1, "one line per task: {out}");
        assert!(out.contains("attempt 1: done"), "{out}");
    }
    for id in ["plan", "plan.x", "plan.y", "plan.join"] {
        assert_eq!(state(&r, id), "done", "{id}");
    }
    let join = read_json(&seen.path().join("plan.join.1.json"));
    assert_eq!(join["input"]["results"]["plan.x"]["by"], "x", "{join}");
    assert_eq!(join["input"]["results"]["plan.y"]["by"], "y", "{join}");
    let (code, out, _) = run_to_end(&r, &args(&["a", "--once"], &cmd));
    assert_eq!((code, out.as_str()), (0, ""), "nothing left: exits at once");
}

#[test]
fn run_kills_a_hanging_command_at_the_timeout_and_the_retry_succeeds() {
    let r = repo(&[("a", "")]);
    r.task(
        "slow",
        "title: Hangs the first time\nagent: a\ntimeout: 2s\n",
    );
    let cmd: Vec<String> = [
        "sh",
        "-c",
        "if [ \"$COORD_ATTEMPT\" = 1 ]; then sleep 60; fi; echo fine",
    ]
    .map(String::from)
    .to_vec();
    let started = Instant::now();
    let child = runner(&r, &args(&["a"], &cmd)).spawn().expect("spawn");
    wait_until(20, "the retry done", || state(&r, "slow") == "done");
    let (code, out, err) = stop(child);
    assert_eq!(code, 0, "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        out.contains("slow attempt 1: failed: timeout: killed after 2s"),
        "{out}"
    );
    assert!(out.contains("slow attempt 2: done"), "{out}");
    let t = task(&r, "slow");
    assert_eq!(t["task"]["result"]["output"]["text"], "fine");
    let history = t["task"]["coord"]["history"].to_string();
    assert!(history.contains("killed after 2s"), "{history}");
}

#[test]
fn a_zombie_command_cannot_overwrite_the_next_attempts_result() {
    let r = repo(&[("p", "assign: pull\n")]);
    let flag = tempfile::tempdir().expect("tmp");
    r.task("z", "title: Slow\ntimeout: 1h\n");
    r.ok(&["tick"]);
    let cmd: Vec<String> = [
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "touch {}/started; sleep 1; echo 'by: zombie'",
            flag.path().display()
        ),
    ]
    .to_vec();
    let child = runner(&r, &args(&["p"], &cmd)).spawn().expect("spawn");
    wait_until(20, "the command started", || {
        flag.path().join("started").exists()
    });
    signal(&child, "-STOP");
    // Meanwhile the lease ends, the task is taken back and given to attempt 2, which reports.
    let later = "2099-01-01T00:00:00Z";
    r.cmd(&["tick"]).env("COORD_NOW", later).assert().success();
    let claimed = r
        .cmd(&["claim", "--agent", "p"])
        .env("COORD_NOW", "2099-01-01T02:00:00Z")
        .output()
        .expect("claim");
    assert_eq!(String::from_utf8_lossy(&claimed.stdout).trim(), "z");
    r.write("second.yaml", "by: second\n");
    let second = ["--agent", "p", "--attempt", "2"];
    r.cmd(&[&["complete", "z", "--output", "second.yaml"][..], &second].concat())
        .env("COORD_NOW", "2099-01-01T02:00:01Z")
        .assert()
        .success();
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "-CONT");
    let (code, out, err) = stop(child);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("z attempt 1: done"), "{out}");
    assert!(
        out.contains("not recorded") && out.contains("stale"),
        "{out}"
    );
    let t = task(&r, "z");
    assert_eq!(t["task"]["result"]["output"]["by"], "second", "{t}");
    assert_eq!(t["task"]["result"]["attempt"], 2, "{t}");
    let history = t["task"]["coord"]["history"].to_string();
    assert!(
        history.contains("stale_result") && history.contains("zombie"),
        "{history}"
    );
}

#[test]
fn sigterm_lets_running_commands_finish_then_fails_the_rest_as_retryable() {
    let r = repo(&[("a", "max_active: 3\n")]);
    r.task("quick", "title: Quick\nagent: a\n");
    r.task("long", "title: Long\nagent: a\n");
    let flag = tempfile::tempdir().expect("tmp");
    let cmd: Vec<String> = [
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "touch {}/$COORD_TASK_ID; if [ $COORD_TASK_ID = long ]; then sleep 60; else sleep 1; fi; echo ok",
            flag.path().display()
        ),
    ]
    .to_vec();
    let child = runner(&r, &args(&["a", "--parallel", "2", "--grace", "2s"], &cmd))
        .spawn()
        .expect("spawn");
    wait_until(20, "both started", || {
        flag.path().join("quick").exists() && flag.path().join("long").exists()
    });
    r.task("later", "title: Arrives during the drain\nagent: a\n");
    let sent = Instant::now();
    let (code, out, err) = stop(child);
    assert_eq!(code, 0, "{err}");
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert!(out.contains("quick attempt 1: done"), "{out}");
    assert!(
        out.contains("long attempt 1: failed: coord run was stopped"),
        "{out}"
    );
    assert!(
        !flag.path().join("later").exists(),
        "no new task taken while stopping"
    );
    let long = task(&r, "long");
    assert_eq!(long["task"]["result"]["error"]["retryable"], true, "{long}");
}

#[test]
fn two_runners_for_one_pull_agent_never_run_a_task_twice() {
    let r = repo(&[("p", "assign: pull\nmax_active: 4\n")]);
    for i in 0..8 {
        r.task(&format!("t{i}"), &format!("title: Task {i}\n"));
    }
    r.ok(&["tick"]);
    let log = tempfile::tempdir().expect("tmp");
    let cmd: Vec<String> = [
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "echo $COORD_TASK_ID >> {}/ran; sleep 0.2; echo ok",
            log.path().display()
        ),
    ]
    .to_vec();
    let both: Vec<Child> = (0..2)
        .map(|_| {
            runner(&r, &args(&["p", "--once", "--parallel", "2"], &cmd))
                .spawn()
                .expect("spawn")
        })
        .collect();
    for child in both {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let ran = std::fs::read_to_string(log.path().join("ran")).expect("ran");
    let mut ids: Vec<&str> = ran.lines().collect();
    ids.sort();
    let expected: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
    assert_eq!(ids, expected, "each task ran exactly once");
    for id in &expected {
        assert_eq!(state(&r, id), "done", "{id}");
    }
}

#[test]
fn a_fatal_exit_code_is_not_retried_and_a_second_push_runner_is_refused() {
    let r = repo(&[("a", "")]);
    let mut idle = runner(&r, &["a", "--", "true"]).spawn().expect("spawn");
    let mut first = String::new();
    let mut stderr = std::io::BufReader::new(idle.stderr.take().expect("stderr"));
    std::io::BufRead::read_line(&mut stderr, &mut first).expect("line");
    assert!(first.contains("serving push agent a"), "{first}");
    let (code, _, err) = run_to_end(&r, &["a", "--once", "--", "true"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("another 'coord run a'"), "{err}");
    let (code, _, _) = stop(idle);
    assert_eq!(code, 0);
    drop(stderr);
    r.task("bad", "title: Cannot work\nagent: a\n");
    let cmd = ["sh", "-c", "echo 'no such input' >&2; exit 100"].map(String::from);
    let (code, out, err) = run_to_end(&r, &args(&["a", "--once"], &cmd));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("bad attempt 1: failed (fatal): exit 100: no such input"),
        "{out}"
    );
    assert_eq!(state(&r, "bad"), "failed");
}

/// Two runners of one pull agent in two clones, with `--sync`: each task runs once. Their
/// claims of one task at the same second used to be the same commit, so the second push found
/// "its" claim on the remote and both ran it; each claim is its own commit now (`Coord-Op-Id`).
#[test]
fn runners_in_two_clones_with_sync_run_each_task_once() {
    let net = crate::harness::Net::new(&[]);
    net.seed
        .ok(&["agents", "add", "p", "--pull", "--max-active", "100"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    let ids = net.person_adds("s", 6);
    let (a, b) = (net.clone(), net.clone());
    let log = tempfile::tempdir().expect("tmp");
    let cmd: Vec<String> = [
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "echo $COORD_TASK_ID >> {}/ran; echo ok",
            log.path().display()
        ),
    ]
    .to_vec();
    let both: Vec<Child> = [&a, &b]
        .iter()
        .map(|r| {
            runner(
                r,
                &args(&["p", "--once", "--sync", "--parallel", "2"], &cmd),
            )
            .spawn()
            .expect("spawn")
        })
        .collect();
    let mut said = String::new();
    for child in both {
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        said += &format!("{}{err}\n", String::from_utf8_lossy(&out.stdout));
    }
    let ran = std::fs::read_to_string(log.path().join("ran")).expect("ran");
    let mut seen: Vec<&str> = ran.lines().collect();
    seen.sort();
    assert_eq!(
        seen, ids,
        "each task ran exactly once across the clones:\n{said}"
    );
    let check = net.clone();
    for id in &ids {
        assert_eq!(state(&check, id), "done", "{id} on the remote");
    }
}

/// With `--sync`, a push agent's runner runs only assignments that landed on the remote: when
/// the remote refuses the tick's push, the task assigned in this clone is not run (before, the
/// refused assignment stayed in the agent's folder here and ran).
#[test]
fn a_push_agent_with_sync_never_runs_an_assignment_the_remote_refused() {
    let net = crate::harness::Net::new(&["q"]);
    net.person_adds("h", 1);
    let hook = net.remote.path().join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho no pushes today >&2\nexit 1\n").expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let c = net.clone();
    let log = tempfile::tempdir().expect("tmp");
    let cmd: Vec<String> = [
        "sh".to_string(),
        "-c".to_string(),
        format!("echo $COORD_TASK_ID >> {}/ran", log.path().display()),
    ]
    .to_vec();
    let (_, out, err) = run_to_end(&c, &args(&["q", "--once", "--sync"], &cmd));
    assert!(err.contains("refused the push"), "{err}");
    assert!(
        !log.path().join("ran").exists(),
        "ran a refused assignment:\n{out}{err}"
    );
    assert_eq!(
        state(&c, "h-0"),
        "inbox",
        "the refused tick was undone here"
    );
}

#[test]
fn run_json_prints_one_object_per_task_event_and_nothing_else() {
    let r = repo(&[("a", "max_active: 2\n")]);
    r.task("good", "title: Good\nagent: a\n");
    r.task("bad", "title: Bad\nagent: a\n");
    let cmd = [
        "sh",
        "-c",
        "if [ $COORD_TASK_ID = bad ]; then echo broken >&2; exit 100; fi; echo 'n: 1'",
    ]
    .map(String::from);
    let out = runner(
        &r,
        &args(&["--json", "a", "--once", "--parallel", "2"], &cmd),
    )
    .output()
    .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let of = |id: &str| -> Vec<&Value> { events.iter().filter(|e| e["id"] == id).collect() };
    let good = of("good");
    assert_eq!(good.len(), 2, "{stdout}");
    assert_eq!(good[0]["event"], "started");
    assert_eq!(good[0]["agent"], "a");
    assert_eq!(good[0]["attempt"], 1);
    assert_eq!(good[1]["event"], "done");
    assert_eq!(good[1]["recorded"], true);
    assert!(good[1]["seconds"].is_number(), "{stdout}");
    let bad = of("bad");
    assert_eq!(bad.len(), 2, "{stdout}");
    assert_eq!(bad[1]["event"], "fatal");
    assert_eq!(bad[1]["message"], "exit 100: broken");
    assert_eq!(events.len(), 4, "only task events on stdout: {stdout}");
}

#[test]
fn run_off_a_terminal_prints_plain_lines_only() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: T\nagent: a\n");
    let (code, out, err) = run_to_end(&r, &["a", "--once", "--", "sh", "-c", "sleep 1.2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("t attempt 1: done (1."), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        !out.contains('\x1b') && !err.contains('\x1b') && !err.contains('\r'),
        "no live line off a terminal: {err:?}"
    );
}

/// A result the runner cannot record (here git is in the middle of a merge, so every writing
/// command refuses) is not a reason to run the same attempt again: the command runs once,
/// `--once` ends, and the task waits for its lease as any unreported one does.
#[test]
fn a_result_that_cannot_be_recorded_does_not_run_the_attempt_again() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: once\nagent: a\n");
    // Assigned on the clock the runner reads, so its lease is not over already.
    let mut tick = r.spawn_cmd(&["tick"]);
    assert!(tick
        .env_remove("COORD_NOW")
        .status()
        .expect("tick")
        .success());
    let head = r.git(&["rev-parse", "HEAD"]);
    std::fs::write(r.abs(".git/MERGE_HEAD"), format!("{}\n", head.trim())).expect("merge");
    let runs = r.abs(".git/runs");
    let cmd = format!(
        "echo run $COORD_TASK $COORD_ATTEMPT >> {}; echo '{{}}'",
        runs.display()
    );
    let mut child = runner(&r, &["a", "--once", "--", "sh", "-c", &cmd])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ended = child.try_wait().expect("wait").is_some();
    let _ = child.kill();
    let out = child.wait_with_output().expect("output");
    let out = String::from_utf8_lossy(&out.stdout);
    let ran = std::fs::read_to_string(&runs).expect("the command ran");
    assert_eq!(
        ran.lines().count(),
        1,
        "the attempt ran again: {ran}\n{out}"
    );
    assert!(ended, "--once did not end");
    let told = out
        .lines()
        .find(|l| l.contains("not recorded"))
        .unwrap_or_default();
    assert_eq!(told.matches("a merge is in progress").count(), 1, "{out}");
}

/// A command that writes a note into its own task file just before it ends: the report waits
/// for the file to settle instead of giving up ("not recorded: being written"), and the note
/// stays.
#[test]
fn a_report_waits_for_a_note_the_command_wrote_into_its_task_to_settle() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: T\nagent: a\n");
    let file = r.abs("work/assigned/a/t.yaml");
    let cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "cat >/dev/null; echo '# progress: noted' >> {}; echo 'by: a'",
            file.display()
        ),
    ];
    let (code, out, err) = run_to_end(&r, &args(&["a", "--once"], &cmd));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("attempt 1: done") && !out.contains("not recorded"),
        "{out}"
    );
    assert_eq!(task(&r, "t")["task"]["result"]["output"]["by"], "a");
    let text = std::fs::read_to_string(r.abs(&r.where_is("t"))).expect("read");
    assert!(text.contains("# progress: noted"), "{text}");
}
