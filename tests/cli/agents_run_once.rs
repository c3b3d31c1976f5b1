//! `coord run` runs each attempt once, across runners killed with SIGKILL and started again at
//! once: every command appends its (task, attempt, pid, start, end) to a ledger, and no two
//! entries of one (task, attempt) overlap. Also: a timeout ends the command's whole process
//! group, and a background process holding its pipes does not hold up the slot.

use crate::agents_run::{args, repo, runner, state, stop, wait_until};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// A ledger file and the program that writes it.
struct Ledger {
    dir: tempfile::TempDir,
}

/// One run of the program: its pid and when it started and ended (nanoseconds; no end: it
/// never said it ended).
#[derive(Debug)]
struct Entry {
    pid: i32,
    start: u128,
    end: Option<u128>,
}

impl Ledger {
    fn new() -> Ledger {
        let dir = tempfile::tempdir().expect("tmp");
        let script = format!(
            "#!/bin/sh\n\
             ledger={}\n\
             line() {{ echo \"$1 $COORD_TASK_ID $COORD_ATTEMPT $$ $(date +%s%N)\" >> \"$ledger\"; }}\n\
             line start\n\
             trap 'line end; exit 1' TERM INT\n\
             sleep \"$1\" & sleep \"$1\" &\n\
             wait\n\
             line end\n\
             echo \"by: $COORD_AGENT\"\n",
            dir.path().join("ledger").display()
        );
        std::fs::write(dir.path().join("prog.sh"), script).expect("script");
        Ledger { dir }
    }

    /// The command: the program, whose two children sleep `secs`.
    fn command(&self, secs: &str) -> Vec<String> {
        let prog = self.dir.path().join("prog.sh");
        vec!["sh".into(), prog.display().to_string(), secs.into()]
    }

    fn text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ledger")).unwrap_or_default()
    }

    fn starts(&self) -> usize {
        self.text()
            .lines()
            .filter(|l| l.starts_with("start"))
            .count()
    }

    /// The entries by (task, attempt).
    fn entries(&self) -> BTreeMap<(String, u32), Vec<Entry>> {
        let mut by: BTreeMap<(String, u32), Vec<Entry>> = BTreeMap::new();
        for line in self.text().lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [what, task, attempt, pid, at] = f[..] else {
                panic!("bad ledger line {line:?}");
            };
            let key = (task.to_string(), attempt.parse().expect("attempt"));
            let (pid, at) = (pid.parse().expect("pid"), at.parse().expect("time"));
            let runs = by.entry(key).or_default();
            if what == "start" {
                runs.push(Entry {
                    pid,
                    start: at,
                    end: None,
                });
            } else if let Some(e) = runs.iter_mut().find(|e| e.pid == pid) {
                e.end = Some(at);
            }
        }
        by
    }

    /// Asserts that no two runs of one (task, attempt) overlap in time.
    fn assert_no_overlap(&self) {
        for (key, runs) in self.entries() {
            for (i, a) in runs.iter().enumerate() {
                for b in &runs[i + 1..] {
                    let apart =
                        a.end.is_some_and(|e| e <= b.start) || b.end.is_some_and(|e| e <= a.start);
                    assert!(
                        apart,
                        "{key:?} ran twice at once: {a:?} {b:?}\n{}",
                        self.text()
                    );
                }
            }
        }
    }

    /// Kills every process group the ledger names (what a failing run left behind).
    fn clean_up(&self) {
        for runs in self.entries().values() {
            for e in runs {
                let _ = kill_group(e.pid);
            }
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.clean_up();
    }
}

/// Sends SIGKILL to process group `pgid`.
fn kill_group(pgid: i32) -> std::io::Result<std::process::ExitStatus> {
    std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(std::process::Stdio::null())
        .status()
}

/// Kills a runner with SIGKILL and reaps it.
fn kill9(mut child: Child) {
    child.kill().expect("kill -9");
    child.wait().expect("reap");
}

#[test]
fn a_runner_killed_and_started_again_never_runs_one_attempt_twice_at_once() {
    let r = repo(&[("a", "")]);
    r.task("t", "title: Long\nagent: a\n");
    let ledger = Ledger::new();
    let cmd = ledger.command("60");
    let head = ["a", "--grace", "1s"];
    let first = runner(&r, &args(&head, &cmd)).spawn().expect("spawn");
    wait_until(20, "the command started", || ledger.starts() == 1);
    kill9(first);
    let second = runner(&r, &args(&head, &cmd)).spawn().expect("spawn");
    wait_until(20, "a second start", || ledger.starts() == 2);
    let (code, out, err) = stop(second);
    assert_eq!(code, 0, "{err}");
    ledger.assert_no_overlap();
    let runs = ledger.entries();
    assert_eq!(runs[&("t".to_string(), 1)].len(), 1, "{}", ledger.text());
    assert!(
        out.contains("t attempt 1: failed: coord run was killed while the command ran"),
        "{out}"
    );
    let history = crate::agents_run::task(&r, "t")["task"]["coord"]["history"].to_string();
    assert!(history.contains("coord run was killed"), "{history}");
}

/// Runners of a push and a pull agent, three tasks at once each, killed with SIGKILL in turn
/// and started again at once; each command has two children. `COORD_RUN_SWEEP=N` kills N
/// times (default 4).
#[test]
fn a_kill_9_sweep_of_runners_never_overlaps_one_attempt() {
    let kills: usize = std::env::var("COORD_RUN_SWEEP")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4);
    let r = repo(&[
        ("a", "max_active: 3\n"),
        ("p", "assign: pull\nmax_active: 3\n"),
    ]);
    r.write(
        "coord.yaml",
        "defaults: {timeout: 5s, max_attempts: 20}\nbackoff: {base: 1s, max: 1s}\n\
         circuit_breaker: {failure_threshold: 1000, open_for: 1s}\n",
    );
    let ids: Vec<String> = (0..4)
        .flat_map(|i| [format!("a{i}"), format!("p{i}")])
        .collect();
    for id in &ids {
        let agent = &id[..1];
        r.task(id, &format!("title: Sweep\nagent: {agent}\n"));
    }
    let ledger = Ledger::new();
    let cmd = ledger.command("1");
    let start = |agent: &str| {
        let head = [agent, "--parallel", "3", "--grace", "1s"];
        runner(&r, &args(&head, &cmd)).spawn().expect("spawn")
    };
    let mut runners = [start("a"), start("p")];
    let began = Instant::now();
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(300 + (k as u64 * 137) % 600));
        let i = k % 2;
        let agent = ["a", "p"][i];
        let fresh = start(agent);
        kill9(std::mem::replace(&mut runners[i], fresh));
    }
    let ended = |id: &String| matches!(state(&r, id).as_str(), "done" | "failed");
    let until = Instant::now() + Duration::from_secs(120);
    while !ids.iter().all(ended) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let all_ended = ids.iter().all(ended);
    let mut said = String::new();
    for child in runners {
        let (code, out, err) = stop(child);
        said += &format!("exit {code}\n{out}{err}\n");
    }
    assert!(all_ended, "{}\n{said}", r.ok(&["status"]));
    ledger.assert_no_overlap();
    for id in &ids {
        assert_eq!(state(&r, id), "done", "{id}: {}", ledger.text());
    }
    eprintln!(
        "sweep: {kills} kills, {} runs of {} tasks in {:.1}s",
        ledger.starts(),
        ids.len(),
        began.elapsed().as_secs_f64()
    );
}

/// Returns whether `pid` is gone (or a zombie, ended but not yet reaped).
pub(crate) fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

/// Reads the pids the commands wrote into `dir`.
fn pids_in(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

#[test]
fn a_background_process_holding_the_pipes_does_not_hold_up_the_slot() {
    let r = repo(&[("a", "")]);
    r.task(
        "hang",
        "title: Hangs\nagent: a\ntimeout: 2s\nmax_attempts: 1\n",
    );
    r.task("left", "title: Leaves one behind\nagent: a\n");
    r.task("next", "title: Next\nagent: a\n");
    let pids = tempfile::tempdir().expect("tmp");
    let dir: PathBuf = pids.path().to_path_buf();
    // Each command leaves a process in a session of its own holding its stdout and stderr;
    // `hang` also waits in the foreground.
    let cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "setsid sh -c 'echo $$ > {}/$COORD_TASK_ID; exec sleep 600' & \
             if [ $COORD_TASK_ID = hang ]; then sleep 60; fi; echo ok",
            dir.display()
        ),
    ];
    let started = Instant::now();
    let child = runner(&r, &args(&["a", "--grace", "1s"], &cmd))
        .spawn()
        .expect("spawn");
    let over = |id: &str| matches!(state(&r, id).as_str(), "done" | "failed");
    wait_until(30, "all three ran", || {
        over("hang") && over("left") && over("next")
    });
    let took = started.elapsed();
    let (code, out, err) = stop(child);
    let left: Vec<i32> = pids_in(&dir);
    for pid in &left {
        let _ = kill_group(*pid);
    }
    assert_eq!(code, 0, "{err}");
    assert!(took < Duration::from_secs(15), "{took:?}\n{out}");
    assert!(
        out.contains("hang attempt 1: failed: timeout: killed after 2s"),
        "{out}"
    );
    assert!(out.contains("left attempt 1: done"), "{out}");
    assert!(out.contains("next attempt 1: done"), "{out}");
    assert_eq!(left.len(), 3, "each command started its background process");
    for pid in left {
        assert!(gone(pid), "{pid} still runs:\n{out}");
    }
}

/// `coord sync` run in a loop in a clone until dropped.
struct SyncLoop {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SyncLoop {
    fn start(c: &crate::harness::TestRepo) -> SyncLoop {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut sync = c.spawn_cmd(&["sync"]);
        sync.env_remove("COORD_NOW")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = sync.status();
            }
        });
        SyncLoop {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SyncLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `coord run --sync --once` rounds beside a `coord sync` loop in the same clone, until a
/// round finds nothing to claim: the loop's commits land while the runner's claims and results
/// are pushed. Every runner ends well; a claim the loop's commit put off is run by the runner
/// that made it once it lands, so no task is left on the remote held by the agent, waiting out
/// its lease; no attempt runs twice; and a step the loop's next sync pushes is not told as
/// "not recorded", and lands.
#[test]
fn run_with_sync_beside_a_sync_loop_in_the_same_clone_runs_every_claim_it_made() {
    let net = crate::harness::Net::new(&[]);
    net.seed
        .ok(&["agents", "add", "p", "--pull", "--max-active", "100"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    let ids = net.person_adds("s", 24);
    let c = net.clone();
    let looping = SyncLoop::start(&c);
    let ledger = Ledger::new();
    let cmd = ledger.command("0");
    let mut said = String::new();
    let mut codes = Vec::new();
    for _ in 0..8 {
        let before = ledger.starts();
        let (code, out, err) = crate::agents_run::run_to_end(
            &c,
            &args(&["p", "--once", "--sync", "--parallel", "3"], &cmd),
        );
        codes.push(code);
        said += &format!("{out}{err}\n");
        if ledger.starts() == before {
            break;
        }
    }
    drop(looping);
    assert!(codes.iter().all(|&c| c == 0), "{codes:?}\n{said}");
    assert!(!said.contains("not recorded"), "{said}");
    for (key, runs) in ledger.entries() {
        assert_eq!(runs.len(), 1, "{key:?} ran {} times:\n{said}", runs.len());
    }
    let mut last = c.spawn_cmd(&["sync"]);
    assert!(last
        .env_remove("COORD_NOW")
        .status()
        .expect("sync")
        .success());
    // Every task is done on the remote: none was claimed and left unrun.
    let check = net.clone();
    for id in &ids {
        assert_eq!(state(&check, id), "done", "{id} on the remote:\n{said}");
    }
}

/// `coord complete --sync` beside a `coord sync` loop in the same clone (run by the agent's
/// command, so each completes the attempt it was given): a result whose push the loop's own
/// push carried is accepted, never set aside as the task's `stale_result` nor told as not
/// accepted, and every task ends done.
#[test]
fn complete_with_sync_beside_a_sync_loop_never_sets_its_own_result_aside() {
    let net = crate::harness::Net::new(&[]);
    net.seed
        .ok(&["agents", "add", "p", "--pull", "--max-active", "100"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    let ids = net.person_adds("k", 16);
    let c = net.clone();
    let looping = SyncLoop::start(&c);
    let log = tempfile::tempdir().expect("tmp");
    let script = format!(
        "{} complete \"$COORD_TASK_ID\" --sync >> {log}/out 2>&1 || echo \"exit $? $COORD_TASK_ID\" >> {log}/out",
        assert_cmd::cargo::cargo_bin("coord").display(),
        log = log.path().display()
    );
    let cmd = ["sh", "-c", &script].map(String::from);
    let (code, out, err) = crate::agents_run::run_to_end(
        &c,
        &args(&["p", "--once", "--sync", "--parallel", "3"], &cmd),
    );
    drop(looping);
    let said = std::fs::read_to_string(log.path().join("out")).unwrap_or_default();
    assert_eq!(code, 0, "{out}{err}\n{said}");
    assert!(
        !said.contains("not accepted") && !said.contains("exit "),
        "{said}\n{out}"
    );
    let mut last = c.spawn_cmd(&["sync"]);
    assert!(last
        .env_remove("COORD_NOW")
        .status()
        .expect("sync")
        .success());
    let check = net.clone();
    for id in &ids {
        assert_eq!(state(&check, id), "done", "{id}:\n{said}");
        let shown = check.ok(&["show", id]);
        assert!(!shown.contains("stale_result"), "{shown}");
    }
}
