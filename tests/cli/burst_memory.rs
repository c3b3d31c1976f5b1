//! The memory of one tick over a big inbox burst (issue 15), without timing anything: the
//! peak resident memory (`VmHWM`, read from `/proc` while the tick runs) of a child `coord
//! tick` taking a burst of inbox files in windows. Only with `COORD_LONG=1` (50,000 files,
//! a minute or more); the default suite runs 5,000 files (two windows) against the same
//! bound, which holds memory that grows with the burst instead of the window.

use crate::harness::TestRepo;
use std::time::Duration;

/// The bound, in MB: the peak measured after this session's changes (174 MB at 50,000 on
/// the 2-core VM) with a margin. Issue 15's goal is 150 MB, not met yet
/// (docs/performance.md, section f).
const BOUND_MB: f64 = 190.0;

/// Polls the peak resident memory of `child` until it exits; returns the highest value read,
/// in MB.
fn peak_until_exit(child: &mut std::process::Child) -> f64 {
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0.0_f64;
    while child.try_wait().expect("wait").is_none() {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let hwm = text
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
        peak = peak.max(hwm.unwrap_or(0.0) / 1024.0);
        std::thread::sleep(Duration::from_millis(5));
    }
    peak
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
    let peak = peak_until_exit(&mut child);
    assert!(child.wait().expect("wait").success(), "the tick failed");
    let taken = std::fs::read_dir(r.abs("work/ready")).map_or(0, |d| d.count());
    assert!(taken >= n - 1_000, "the tick took {taken} of {n} files in");
    eprintln!("coord tick over {n} inbox files: peak RSS {peak:.1} MB (bound {BOUND_MB} MB)");
    assert!(peak > 0.0, "no memory figure was read");
    assert!(
        peak <= BOUND_MB,
        "coord tick over {n} inbox files peaked at {peak:.1} MB, more than {BOUND_MB} MB"
    );
}
