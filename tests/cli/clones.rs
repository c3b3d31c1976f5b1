//! Clones of one bare remote: a killed `coord sync` leaves no git process behind.

use crate::harness::TestRepo;
use crate::sync::Net;
use std::path::Path;
use std::time::{Duration, Instant};

/// Returns the pids of processes whose command line mentions `needle` or whose working
/// directory is `dir`.
fn processes_about(needle: &str, dir: &Path) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
        if cmdline.contains(needle) || cwd.as_deref() == Some(dir) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Makes the clone's fetches slow: its `origin` runs upload-pack through a script that says
/// it started, then sleeps. Returns the marker file the script writes.
fn slow_upload_pack(clone: &TestRepo, secs: u32) -> std::path::PathBuf {
    let script = clone.abs(".git/slow-upload-pack");
    let marker = clone.abs(".git/slow-upload-pack.started");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch '{}'\nsleep {secs}\nexec git-upload-pack \"$@\"\n",
            marker.display()
        ),
    )
    .expect("write script");
    let mut perms = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod");
    clone.git(&[
        "config",
        "remote.origin.uploadpack",
        script.to_str().expect("utf8"),
    ]);
    marker
}

#[test]
fn a_sync_killed_during_a_slow_fetch_leaves_no_git_running() {
    let net = Net::new(&["alice"]);
    let clone = net.clone();
    let marker = slow_upload_pack(&clone, 20);
    let mut sync = clone.spawn(&["sync"]);
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "fetch never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let root = clone.path().canonicalize().expect("canonical");
    assert!(
        processes_about("slow-upload-pack", &root)
            .iter()
            .any(|(_, c)| c.contains("fetch")),
        "git fetch runs while sync waits for it"
    );
    sync.kill().expect("kill -9");
    sync.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut left = processes_about("slow-upload-pack", &root);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_about("slow-upload-pack", &root);
    }
    assert!(left.is_empty(), "left running after kill -9: {left:?}");
    clone.git(&["config", "--unset", "remote.origin.uploadpack"]);
    clone.ok(&["sync"]);
}
