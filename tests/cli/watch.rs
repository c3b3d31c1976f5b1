//! `coord watch`: a file dropped into the inbox is assigned and committed within a fraction of
//! a second, coord's own writes do not make it loop, and SIGTERM stops it cleanly.

use crate::harness::{git_env, TestRepo, T0};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A running `coord watch` with its stderr lines.
struct Watching {
    child: Child,
    lines: Receiver<String>,
}

impl Watching {
    /// Starts `coord watch` and waits until it says it is watching (or polling).
    fn start(r: &TestRepo, extra: &[&str]) -> Watching {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("coord"));
        c.arg("-C").arg(r.path()).arg("watch").args(extra);
        for (k, v) in git_env() {
            c.env(k, v);
        }
        c.env("COORD_NOW", T0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn coord watch");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let w = Watching { child, lines };
        w.wait_for_line("Ctrl-C stops", Duration::from_secs(20));
        w
    }

    /// Waits for a stderr line containing `text`; panics after `limit`.
    fn wait_for_line(&self, text: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line with {text:?} from coord watch: {e}"),
            }
        }
    }

    /// Sends SIGTERM and returns the exit code and the number of ticks it reports.
    fn stop(mut self) -> (Option<i32>, usize) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        let line = self.wait_for_line("stopped after", Duration::from_secs(20));
        let ticks = line
            .split_whitespace()
            .find_map(|w| w.parse().ok())
            .expect("tick count");
        (self.child.wait().expect("wait").code(), ticks)
    }
}

impl Drop for Watching {
    /// Kills a watch a failed test left running (after `stop` the child is reaped already).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls the repo until HEAD's log has a commit whose subject contains `text`; returns how long
/// it took. Panics after a generous limit.
fn wait_for_commit(r: &TestRepo, w: &Watching, text: &str) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if r.git(&["log", "-5", "--format=%s"]).contains(text) {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let said: Vec<String> = w.lines.try_iter().collect();
    panic!("no commit {text:?} within 20 s; coord watch said: {said:#?}");
}

/// A repo with agent alice, who may hold many tasks.
fn repo() -> TestRepo {
    TestRepo::with_agents(&["alice --max-active 100"])
}

fn drop_and_time(r: &TestRepo, w: &Watching, id: &str) -> Duration {
    r.task(id, &format!("title: Task {id}\n"));
    wait_for_commit(r, w, &format!("assign {id} to alice"))
}

#[test]
fn watch_assigns_a_dropped_file_quickly_and_stops_on_sigterm() {
    let r = repo();
    let w = Watching::start(&r, &["--interval", "1h"]);
    let first = drop_and_time(&r, &w, "first");
    let second = drop_and_time(&r, &w, "second");
    // A generous bound for a loaded 2-core machine; the benchmark measures the real latency.
    assert!(
        first.max(second) < Duration::from_secs(5),
        "{first:?} {second:?}"
    );
    let commits = r.commit_count();
    let (code, ticks) = w.stop();
    assert_eq!(code, Some(0));
    // Start, one tick per drop, and at most one empty follow-up each (plus slack for a burst
    // split in two): coord's own writes do not make it loop.
    assert!(ticks <= 6, "{ticks} ticks");
    assert_eq!(
        r.commit_count(),
        commits,
        "nothing committed after the assignment"
    );
    assert!(r.where_is("first").starts_with("work/assigned/alice/"));
    assert_eq!(r.git_status(), "");
}

/// Writes a task under a temporary name, renames it into the inbox and returns how long until
/// HEAD's commit assigns it.
fn rename_in_and_time(r: &TestRepo, w: &Watching, id: &str) -> Duration {
    let part = format!("work/inbox/.{id}.yaml.part");
    r.write_now(&part, &format!("title: Task {id}\n"));
    std::fs::rename(r.abs(&part), r.abs(&format!("work/inbox/{id}.yaml"))).expect("rename in");
    wait_for_commit(r, w, &format!("assign {id} to alice"))
}

#[test]
fn watch_commits_renamed_in_files_one_after_another() {
    let r = repo();
    let w = Watching::start(&r, &["--interval", "1h"]);
    let mut took: Vec<Duration> = (0..9)
        .map(|i| rename_in_and_time(&r, &w, &format!("r{i}")))
        .collect();
    took.sort();
    eprintln!(
        "renamed-in to commit (debug build): min {:?}, p50 {:?}, max {:?}",
        took[0], took[4], took[8]
    );
    // Wall-clock latency is the machine's load as much as coord's (CI shares 2 cores), so no
    // bound on it here: the short debounce is pinned by the loop's unit tests
    // (`watch::tests::a_burst_is_ticked_one_debounce_after_its_first_event`), and the goal
    // (p50 <= 100 ms in a release build) is measured by `cargo bench --bench watch_latency`.
    let (code, _) = w.stop();
    assert_eq!(code, Some(0));
}

#[test]
fn watch_with_polling_assigns_and_stops_on_sigterm() {
    let r = repo();
    let w = Watching::start(&r, &["--poll", "--interval", "1h"]);
    let took = drop_and_time(&r, &w, "polled");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let (code, ticks) = w.stop();
    assert_eq!(code, Some(0));
    assert!(ticks <= 4, "{ticks} ticks");
    assert!(r.where_is("polled").starts_with("work/assigned/alice/"));
}

/// Appends `chunks` to a file through one open handle, pausing between them, and checks
/// after each chunk but the last that `untaken` still holds.
fn write_in_chunks(path: &std::path::Path, chunks: &[&str], untaken: &dyn Fn(usize)) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open");
    for (i, chunk) in chunks.iter().enumerate() {
        f.write_all(chunk.as_bytes()).expect("write");
        f.flush().expect("flush");
        if i + 1 < chunks.len() {
            std::thread::sleep(Duration::from_millis(500));
            untaken(i);
        }
    }
}

#[test]
fn watch_takes_a_file_written_in_chunks_only_when_its_writer_is_done() {
    let r = repo();
    let mut config = r.read("coord.yaml");
    config.push_str("\nsettle: 3s\n");
    r.write("coord.yaml", &config);
    let w = Watching::start(&r, &["--interval", "1h"]);
    let task = [
        "title: Deploy the release\n",
        "description: |\n  Roll it out.\n",
        "agent: alice\n",
        "authority: ask_me_first\n",
    ];
    let inbox = r.abs("work/inbox/deploy.yaml");
    write_in_chunks(&inbox, &task, &|i| {
        assert!(inbox.exists(), "taken after chunk {i}");
        assert!(
            !r.git(&["log", "--format=%B"]).contains("deploy"),
            "committed after chunk {i}"
        );
    });
    wait_for_commit(&r, &w, "accept deploy into review");
    let whole: String = task.concat();
    for c in r
        .git(&["log", "--format=%H", "--", "work/inbox/deploy.yaml"])
        .lines()
    {
        let at = format!("{c}:work/inbox/deploy.yaml");
        if let Ok(out) = Command::new("git")
            .current_dir(r.path())
            .args(["show", &at])
            .output()
        {
            if out.status.success() {
                assert_eq!(String::from_utf8_lossy(&out.stdout), whole, "commit {c}");
            }
        }
    }
    r.ok(&["approve", "deploy"]);
    wait_for_commit(&r, &w, "assign deploy to alice");
    let assigned = r.abs("work/assigned/alice/deploy.yaml");
    let result = [
        "result:\n",
        "  status: success\n",
        "  output: {summary: rolled out}\n",
    ];
    write_in_chunks(&assigned, &result, &|i| {
        assert!(assigned.exists(), "completed after chunk {i}");
    });
    wait_for_commit(&r, &w, "complete deploy");
    let done = r.read("work/done/deploy.yaml");
    assert!(done.contains("output: {summary: rolled out}"), "{done}");
    let (code, _) = w.stop();
    assert_eq!(code, Some(0));
}

/// Appends `text` to a file through a handle of its own, as a shell's `>>` does.
fn append(path: &std::path::Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .expect("open");
    f.write_all(text.as_bytes()).expect("append");
}

#[test]
fn watch_never_takes_a_file_whose_writer_closed_it_and_appends_again() {
    let r = repo();
    let w = Watching::start(&r, &["--interval", "1h"]);
    // `echo 'title: Deploy' > f; sleep 0.1; echo 'authority: ask_me_first' >> f`, with the
    // pause stretched to a second unless the first half is taken before it.
    let inbox = r.abs("work/inbox/deploy.yaml");
    std::fs::write(&inbox, "title: Deploy\nagent: alice\n").expect("first half");
    let until = Instant::now() + Duration::from_secs(1);
    while inbox.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    append(&inbox, "authority: ask_me_first\n");
    wait_for_commit(&r, &w, "accept deploy into review");
    assert_eq!(r.find("deploy"), ["work/review/deploy.yaml"]);
    assert!(r
        .read("work/review/deploy.yaml")
        .contains("authority: ask_me_first"));
    assert!(!r.git(&["log", "--format=%s"]).contains("assign deploy"));
    let (code, _) = w.stop();
    assert_eq!(code, Some(0));
}

#[test]
fn watch_takes_a_file_renamed_in_at_once_whatever_the_settle_time() {
    let r = repo();
    let mut config = r.read("coord.yaml");
    config.push_str("\nsettle: 1h\n");
    r.write("coord.yaml", &config);
    let w = Watching::start(&r, &["--interval", "1h"]);
    r.write_now("work/inbox/.quick.yaml.part", "title: Quick\n");
    std::fs::rename(
        r.abs("work/inbox/.quick.yaml.part"),
        r.abs("work/inbox/quick.yaml"),
    )
    .expect("rename in");
    let took = wait_for_commit(&r, &w, "assign quick to alice");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let (code, _) = w.stop();
    assert_eq!(code, Some(0));
}
