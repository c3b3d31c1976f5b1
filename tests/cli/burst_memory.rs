//! The memory of one tick over a big inbox burst, without timing anything: the
//! peak resident memory (`VmHWM`, read from `/proc` while the tick runs) of a child `coord
//! tick` taking a burst of inbox files in windows. Only with `COORD_LONG=1` (50,000 files,
//! a minute or more); the default suite runs 5,000 files (two windows) against the same
//! bound, which holds memory that grows with the burst instead of the window. The tick over
//! a burst starts itself again with glibc's malloc thresholds fixed (`cli/tick.rs`): the test
//! reads that from the child's environment.

use crate::harness::TestRepo;
use std::time::Duration;

/// The bound, in MB: the goal. A 50,000-task burst peaked at 174 MB before the fifth
/// pass and at 127-130 MB after it (release, docs/performance.md, section f); this test's
/// `COORD_LONG=1` run of the debug build is in the same place.
const BOUND_MB: f64 = 150.0;

/// What was read of a running child: its peak resident memory and whether its environment
/// had glibc's malloc thresholds fixed.
struct Seen {
    /// The highest `VmHWM` read, in MB.
    peak_mb: f64,
    /// Whether `/proc/PID/environ` showed `MALLOC_MMAP_THRESHOLD_` once.
    thresholds_fixed: bool,
}

/// Polls the peak resident memory and the environment of `child` until it exits.
fn watch_until_exit(child: &mut std::process::Child) -> Seen {
    let status = format!("/proc/{}/status", child.id());
    let environ = format!("/proc/{}/environ", child.id());
    let mut seen = Seen {
        peak_mb: 0.0,
        thresholds_fixed: false,
    };
    while child.try_wait().expect("wait").is_none() {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let hwm = text
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
        seen.peak_mb = seen.peak_mb.max(hwm.unwrap_or(0.0) / 1024.0);
        let env = std::fs::read(&environ).unwrap_or_default();
        seen.thresholds_fixed |= env
            .split(|&b| b == 0)
            .any(|v| v == b"MALLOC_MMAP_THRESHOLD_=131072");
        std::thread::sleep(Duration::from_millis(5));
    }
    seen
}

#[test]
fn a_tick_over_an_inbox_burst_stays_within_the_memory_bound() {
    let n = if std::env::var_os("COORD_LONG").is_some() {
        50_000
    } else {
        5_000
    };
    let r = TestRepo::empty_in_memory();
    r.ok(&["init"]);
    r.ok(&["agents", "add", "bot", "--max-active", "1000"]);
    std::fs::create_dir_all(r.abs("work/inbox")).expect("mkdir");
    for i in 0..n {
        let text = format!(
            "# Written by a person.\ntitle: Task {i}\ndescription: |\n  Longer text about \
             task {i},\n  on two lines.\npriority: normal\nlabels: [burst, batch-{}]\n",
            i % 10
        );
        std::fs::write(r.abs(&format!("work/inbox/t-{i:06}.yaml")), text).expect("write");
    }
    r.git(&["add", "-A"]);
    r.git(&["-c", "gc.auto=0", "commit", "-q", "-m", "people drop tasks"]);
    let mut child = r.spawn(&["tick", "-q"]);
    let seen = watch_until_exit(&mut child);
    let peak = seen.peak_mb;
    assert!(child.wait().expect("wait").success(), "the tick failed");
    let taken = std::fs::read_dir(r.abs("work/ready")).map_or(0, |d| d.count());
    assert!(taken >= n - 1_000, "the tick took {taken} of {n} files in");
    eprintln!("coord tick over {n} inbox files: peak RSS {peak:.1} MB (bound {BOUND_MB} MB)");
    assert!(peak > 0.0, "no memory figure was read");
    assert!(
        seen.thresholds_fixed,
        "a tick over an inbox burst starts itself again with glibc's malloc thresholds fixed"
    );
    assert!(
        peak <= BOUND_MB,
        "coord tick over {n} inbox files peaked at {peak:.1} MB, more than {BOUND_MB} MB"
    );
}

/// Returns the environment of a `coord tick` over `r` as it waits for the coordinator lock
/// the test holds: the restart with tuned malloc thresholds comes before the lock, so by the
/// time the tick says it is waiting, it has restarted or never will.
fn environment_of_a_waiting_tick(r: &TestRepo) -> Vec<String> {
    environment_of_waiting(r, r.spawn_cmd(&["tick", "--wait", "30s"]))
}

/// Returns the environment of `tick` (a command running `coord tick --wait`) as it waits for
/// the coordinator lock the test holds; the tick is killed then.
fn environment_of_waiting(r: &TestRepo, mut tick: std::process::Command) -> Vec<String> {
    use std::io::BufRead;
    let lock = r.hold_coord_lock();
    let mut child = tick
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn coord tick");
    let mut said = String::new();
    let stderr = child.stderr.take().expect("stderr");
    std::io::BufReader::new(stderr)
        .read_line(&mut said)
        .expect("read");
    let raw = std::fs::read(format!("/proc/{}/environ", child.id())).expect("environ");
    let _ = child.kill();
    let _ = child.wait();
    drop(lock);
    assert!(
        said.contains("waiting for"),
        "the tick waits for the lock: {said}"
    );
    raw.split(|&b| b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// A process the malloc restart started again finds its own id in `COORD_RESTARTED_PID` and
/// never execs again, even when the loader dropped its malloc variables (glibc does for a
/// setuid program), which would exec it for ever. Here a shell sets the marker to its own
/// id and execs coord (exec keeps the id), with no `MALLOC_*` set, over a burst that would
/// restart it.
#[test]
fn a_tick_marked_as_started_again_does_not_start_again() {
    let r = TestRepo::empty_in_memory();
    r.ok(&["init"]);
    std::fs::create_dir_all(r.abs("work/inbox")).expect("mkdir");
    for i in 0..=4_096 {
        let path = r.abs(&format!("work/inbox/t-{i:06}.yaml"));
        std::fs::write(path, format!("title: Task {i}\n")).expect("write");
    }
    let tick = r.spawn_cmd(&["tick", "--wait", "30s"]);
    let mut marked = std::process::Command::new("sh");
    marked
        .arg("-c")
        .arg("COORD_RESTARTED_PID=$$ exec \"$@\"")
        .arg("sh")
        .arg(tick.get_program())
        .args(tick.get_args())
        .env_clear()
        .envs(tick.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let env = environment_of_waiting(&r, marked);
    assert!(
        env.iter().any(|v| v.starts_with("COORD_RESTARTED_PID=")),
        "the marker reached coord: {env:?}"
    );
    assert!(
        !env.iter().any(|v| v.starts_with("MALLOC_")),
        "a process marked as started again started again: {env:?}"
    );
    let control = environment_of_a_waiting_tick(&r);
    assert!(
        control
            .iter()
            .any(|v| v.starts_with("MALLOC_MMAP_THRESHOLD_=")),
        "without the marker the same burst restarts the tick: {control:?}"
    );
}

/// Only a tick over more than one window of inbox files pays for the restart (the test
/// above sees a burst's): a small one runs as it started.
#[test]
fn a_tick_over_a_small_inbox_does_not_start_itself_again() {
    let r = TestRepo::new();
    for i in 0..10 {
        r.task(&format!("t{i}"), "title: small\n");
    }
    let env = environment_of_a_waiting_tick(&r);
    assert!(
        !env.iter().any(|v| v.starts_with("MALLOC_")),
        "a small tick restarted: {env:?}"
    );
}
