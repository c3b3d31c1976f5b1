//! What `coord run` keeps of each attempt and how a person finds it: `coord logs` (and
//! `--follow` on a running attempt), the line of `coord show`, the task's board page, the
//! rotation of old attempts' logs; and the runner ending a command whose task was cancelled or
//! whose lease was lost.

use crate::agents_run::{args, repo, runner, stop, task, wait_until};
use crate::harness::TestRepo;
use crate::http::Server;
use std::path::Path;

/// A command that prints its attempt on stdout and stderr and fails.
fn failing() -> Vec<String> {
    [
        "sh",
        "-c",
        "echo \"out $COORD_ATTEMPT\"; echo \"err $COORD_ATTEMPT\" >&2; exit 1",
    ]
    .map(String::from)
    .to_vec()
}

/// Returns the number of `id`'s log files in the clone.
fn log_files(r: &TestRepo, id: &str) -> usize {
    std::fs::read_dir(r.abs(".git/coord/logs"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{id}@"))
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn logs_show_an_attempts_output_and_old_attempts_rotate_out() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: Fails\nagent: a\nmax_attempts: 5\n");
    let child = Runner::start(&r, &failing());
    wait_until(90, "five attempts failed", || {
        r.find("t").iter().any(|p| p.starts_with("work/failed/"))
    });
    let (code, out, err) = child.stop();
    assert_eq!(code, 0, "{out}{err}");

    let shown = r.ok(&["logs", "t"]);
    assert_eq!(
        shown,
        "==> stdout of t attempt 5 <==\nout 5\n\n==> stderr of t attempt 5 <==\nerr 5\n"
    );
    assert!(r.ok(&["logs", "t", "--attempt", "3"]).contains("err 3\n"));
    let (_, refused) = r.code(&["logs", "t", "--attempt", "1"], 1);
    assert!(
        refused.contains("no logs of t attempt 1") && refused.contains("3, 4, 5"),
        "{refused}"
    );
    assert_eq!(
        log_files(&r, "t"),
        6,
        "the last three attempts, two streams each"
    );
    let answer = r.json(&["logs", "t", "--attempt", "4"]);
    assert_eq!(answer["stdout"], "out 4\n", "{answer}");
    assert_eq!(answer["running"], false, "{answer}");

    let show = r.ok(&["show", "t"]);
    assert!(
        show.contains("logs: attempt 3, 4, 5 kept in this clone; see 'coord logs t --attempt 5'"),
        "{show}"
    );
    let s = Server::start(&r);
    let page = s.get("/tasks/t").body;
    assert!(
        page.contains("attempt 3, 4, 5 kept in this clone")
            && page.contains("<code>coord logs t --attempt 5</code>"),
        "{page}"
    );
}

#[test]
fn logs_follow_prints_a_running_attempt_until_it_ends() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: Slow\nagent: a\n");
    let cmd = [
        "sh",
        "-c",
        "echo first; sleep 2; echo second >&2; sleep 1; echo 'n: 1'",
    ]
    .map(String::from)
    .to_vec();
    let child = runner(&r, &args(&["a", "--once"], &cmd))
        .spawn()
        .expect("spawn");
    let log = r.abs(".git/coord/logs/t@1.stdout");
    wait_until(20, "the first line logged", || {
        std::fs::read_to_string(&log).is_ok_and(|s| s == "first\n")
    });
    let follow = r
        .spawn_cmd(&["logs", "t", "--follow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("follow");
    assert!(follow.status.success());
    let text = String::from_utf8_lossy(&follow.stdout);
    assert_eq!(
        text,
        "==> stdout of t attempt 1 <==\nfirst\n\n==> stderr of t attempt 1 <==\nsecond\n\n\
         ==> stdout of t attempt 1 <==\nn: 1\n"
    );
    let out = child.wait_with_output().expect("runner");
    assert!(out.status.success());
    assert_eq!(
        task(&r, "t")["task"]["result"]["output"]["text"],
        "first\nn: 1"
    );
}

/// A command that writes its pid and its background child's to `dir`, then waits.
fn waiting(dir: &Path) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "sleep 600 & echo $! > {d}/child; echo $$ > {d}/pid; wait",
            d = dir.display()
        ),
    ]
}

fn pid_in(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn alive(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // A zombie has ended: only its parent has not read its status yet.
    !stat.is_empty()
        && !stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'))
}

/// A runner that a failed test stops too (SIGTERM; its commands get a second).
struct Runner(Option<std::process::Child>);

impl Runner {
    fn start(r: &TestRepo, cmd: &[String]) -> Runner {
        let child = runner(r, &args(&["a", "--interval", "1s", "--grace", "1s"], cmd))
            .spawn()
            .expect("spawn");
        Runner(Some(child))
    }

    fn stop(mut self) -> (i32, String, String) {
        stop(self.0.take().expect("running"))
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            let _ = stop(child);
        }
    }
}

/// Starts a runner for `a` on a waiting command and returns it with the folder of the pids,
/// once both processes run.
fn running_command(r: &TestRepo) -> (Runner, tempfile::TempDir) {
    let seen = tempfile::tempdir().expect("tmp");
    let child = Runner::start(r, &waiting(seen.path()));
    wait_until(20, "the command and its child started", || {
        !pid_in(seen.path(), "pid").is_empty() && !pid_in(seen.path(), "child").is_empty()
    });
    (child, seen)
}

#[test]
fn run_ends_a_command_whose_task_was_cancelled() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: Long\nagent: a\n");
    let (child, seen) = running_command(&r);
    let (pid, kid) = (pid_in(seen.path(), "pid"), pid_in(seen.path(), "child"));
    r.ok(&["cancel", "t", "--reason", "not needed any more"]);
    wait_until(10, "the command and its child ended", || {
        !alive(&pid) && !alive(&kid)
    });
    let (code, out, err) = child.stop();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("t attempt 1: dropped: ended the command: the task was cancelled"),
        "{out}"
    );
    let shown = task(&r, "t")["task"].to_string();
    assert!(shown.contains("not needed any more"), "{shown}");
}

#[test]
fn run_ends_a_command_whose_lease_was_lost() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: Long\nagent: a\ntimeout: 1h\nmax_attempts: 1\n");
    let (child, seen) = running_command(&r);
    let (pid, kid) = (pid_in(seen.path(), "pid"), pid_in(seen.path(), "child"));
    // Another coordinator whose clock is past the lease takes the task back.
    r.ok(&["--now", "2099-01-01T00:00:00Z", "tick"]);
    wait_until(10, "the command and its child ended", || {
        !alive(&pid) && !alive(&kid)
    });
    let (code, out, err) = child.stop();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("t attempt 1: dropped: ended the command: the task was taken back"),
        "{out}"
    );
    let shown = task(&r, "t")["task"].to_string();
    assert!(shown.contains("the lease expired"), "{shown}");
}

#[test]
fn a_long_stderr_keeps_its_end_and_logs_are_the_owners_alone() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: Loud\nagent: a\n");
    let cmd = [
        "sh",
        "-c",
        "head -c 100000 /dev/zero | tr '\\0' x >&2; echo ' the end' >&2; echo 'n: 1'",
    ]
    .map(String::from)
    .to_vec();
    let out = runner(&r, &args(&["a", "--once"], &cmd))
        .output()
        .expect("run");
    assert!(out.status.success());
    let err = r.abs(".git/coord/logs/t@1.stderr");
    let kept = std::fs::read(&err).expect("stderr log");
    assert_eq!(kept.len(), 64 * 1024, "bounded");
    assert!(kept.ends_with(b"x the end\n"), "its end is kept");
    for stream in ["stdout", "stderr"] {
        let meta = std::fs::metadata(r.abs(&format!(".git/coord/logs/t@1.{stream}"))).expect("log");
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777;
        assert_eq!(mode, 0o600, "{stream}");
    }
}
