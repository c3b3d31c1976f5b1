//! `coord run` and its command: what the command is given (no descriptor of the runner's own;
//! `coord prime` saying the runner reports), what it can say (a `next_agent` hands off), what
//! is kept of it (a successful command's stderr, the signal that killed it), and the LLM recipe
//! of docs/agents.md run as written, with a stand-in for the `llm` CLI.

use crate::agents_run::{args, repo, run_to_end, runner, state, task};
use crate::harness::TestRepo;
use std::path::Path;

/// Returns a PATH with `dir` and the folder of the coord binary first.
fn path_with(dir: &Path) -> String {
    let coord = assert_cmd::cargo::cargo_bin("coord");
    let bin = coord.parent().expect("bin dir").display().to_string();
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{bin}:{rest}", dir.display())
}

/// Runs `coord run <agent> --once -- sh -c <script>` with `dir` and coord on PATH; returns
/// (exit code, stdout, stderr).
fn run_script(r: &TestRepo, agent: &str, dir: &Path, script: &str) -> (i32, String, String) {
    let out = runner(r, &[agent, "--once", "--", "sh", "-c", script])
        .env("PATH", path_with(dir))
        .output()
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes an executable script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
}

/// Returns the script of the `coord run writer -- sh -c '…'` recipe in docs/agents.md.
fn docs_llm_recipe() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agents.md"))
        .expect("docs/agents.md");
    let start = readme
        .find("coord run writer -- sh -c '")
        .expect("the LLM recipe in docs/agents.md");
    let rest = &readme[start + "coord run writer -- sh -c '".len()..];
    let end = rest.find("'\n```").expect("the recipe's end");
    rest[..end].to_string()
}

/// A stand-in for the `llm` CLI (`llm -s SYSTEM`, the prompt on stdin, the answer on
/// stdout): it answers in YAML with the system prompt, the prompt's first line and its input.
const LLM: &str = r#"#!/bin/sh
[ "$1" = -s ] || { echo "usage: llm -s SYSTEM" >&2; exit 2; }
prompt=$(cat)
echo "system: $2"
echo "first: $(printf '%s\n' "$prompt" | head -n 1)"
echo "input: $(printf '%s\n' "$prompt" | sed -n 's/^Input: //p')"
"#;

#[test]
fn the_docs_llm_recipe_runs_with_a_stand_in_llm() {
    let r = repo(&[("writer", "")]);
    r.task(
        "intro",
        "title: Write the intro\nagent: writer\ninput: {topic: api}\n",
    );
    let bin = tempfile::tempdir().expect("tmp");
    script(bin.path(), "llm", LLM);
    let (code, out, err) = run_script(&r, "writer", bin.path(), &docs_llm_recipe());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("intro attempt 1: done"), "{out}{err}");
    let output = &task(&r, "intro")["task"]["result"]["output"];
    assert_eq!(output["first"], "Write the intro", "{output}");
    assert_eq!(output["input"]["topic"], "api", "{output}");
    assert_eq!(
        output["system"], "Do this task. Answer in YAML.",
        "{output}"
    );
}

#[test]
fn a_next_agent_the_command_prints_hands_off() {
    let r = repo(&[("a", ""), ("rev", "")]);
    r.task("t", "title: Write\nagent: a\n");
    let (code, out, err) = run_to_end(
        &r,
        &[
            "a",
            "--once",
            "--",
            "sh",
            "-c",
            "echo 'summary: ok'; echo 'next_agent: rev'",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("t attempt 1: done"), "{out}");
    let result = &task(&r, "t")["task"]["result"];
    assert_eq!(result["next_agent"], "rev", "{result}");
    assert_eq!(result["output"]["summary"], "ok", "{result}");
    assert!(result["output"].get("next_agent").is_none(), "{result}");
    assert_eq!(state(&r, "t.rev"), "assigned", "the handoff went to rev");
}

#[test]
fn a_successful_commands_stderr_is_kept_and_a_killing_signal_is_named() {
    let r = repo(&[("a", "")]);
    r.task("ok", "title: Fine\nagent: a\n");
    r.task("shot", "title: Dies\nagent: a\nmax_attempts: 1\n");
    let cmd = [
        "sh",
        "-c",
        "echo \"warning: slow disk for $COORD_TASK_ID\" >&2; \
         if [ $COORD_TASK_ID = shot ]; then kill -KILL $$; fi; echo 'n: 1'",
    ]
    .map(String::from);
    let (code, out, err) = run_to_end(&r, &args(&["a", "--once"], &cmd));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ok attempt 1: done"), "{out}");
    let log = r.abs(".git/coord/logs/ok@1.stderr");
    let kept = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(kept, "warning: slow disk for ok\n", "{}", log.display());
    assert!(
        out.contains("shot attempt 1: failed (fatal): killed by SIGKILL (signal 9)")
            || out.contains("shot attempt 1: failed: killed by SIGKILL (signal 9)"),
        "{out}"
    );
    let shot = task(&r, "shot")["task"].to_string();
    assert!(shot.contains("killed by SIGKILL"), "{shot}");
}

#[test]
fn the_command_gets_no_descriptor_of_the_runners() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: T\nagent: a\n");
    let seen = tempfile::tempdir().expect("tmp");
    let pidfile = seen.path().join("pid");
    // `exec sleep` keeps exactly the descriptors the command was started with.
    let cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!("echo $$ > {}; exec sleep 3", pidfile.display()),
    ];
    let child = runner(&r, &args(&["a", "--once"], &cmd))
        .spawn()
        .expect("spawn");
    crate::agents_run::wait_until(20, "the command started", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid = std::fs::read_to_string(&pidfile).expect("pid");
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", pid.trim()))
        .expect("fds")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    fds.sort();
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let mut expected = vec!["0".to_string(), "1".into(), "2".into()];
    expected.extend(inherited());
    expected.sort();
    assert_eq!(
        fds, expected,
        "stdin, stdout, stderr and what the runner inherited"
    );
}

/// Returns the descriptors above 2 this test process passes on to what it starts (those
/// without close-on-exec, from whoever started the tests): the runner cannot close them.
fn inherited() -> Vec<String> {
    const CLOEXEC: u32 = 0o2000000;
    let flags = |fd: &str| -> Option<u32> {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
        let line = info.lines().find(|l| l.starts_with("flags:"))?;
        u32::from_str_radix(line["flags:".len()..].trim(), 8).ok()
    };
    std::fs::read_dir("/proc/self/fd")
        .expect("fds")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|fd| fd.parse::<u32>().is_ok_and(|n| n > 2))
        .filter(|fd| flags(fd).is_some_and(|f| f & CLOEXEC == 0))
        .collect()
}

#[test]
fn under_run_prime_says_the_runner_reports_and_a_self_report_is_not_called_lost() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: T\nagent: a\n");
    let seen = tempfile::tempdir().expect("tmp");
    let primed = seen.path().join("prime.txt");
    // An agent that follows the instructions it is given, and also reports itself.
    let body = format!(
        "coord prime > {p}; cat > /dev/null; \
         echo 'by: me' | coord complete $COORD_TASK_ID --agent $COORD_AGENT \
         --attempt $COORD_ATTEMPT --output - >/dev/null 2>&1; echo 'by: runner'",
        p = primed.display()
    );
    let (code, out, err) = run_script(&r, "a", seen.path(), &body);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&primed).expect("prime ran");
    assert!(text.contains("`coord run` reports for you"), "{text}");
    assert!(!text.contains("coord complete <id>"), "{text}");
    assert!(out.contains("t attempt 1: done"), "{out}");
    assert!(!out.contains("not recorded"), "{out}");
    assert_eq!(task(&r, "t")["task"]["result"]["output"]["by"], "me");
}
