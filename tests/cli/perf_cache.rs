//! The stat cache end to end: an unchanged task is taken from `.git/coord/stat-cache.bin`, and
//! an edit that keeps the file's size and mtime is still seen (its ctime changed).

use crate::harness::TestRepo;
use std::fs::{File, FileTimes};
use std::time::{Duration, SystemTime};

/// Sets a file's mtime to a fixed moment an hour ago.
fn age(r: &TestRepo, rel: &str, at: SystemTime) {
    let f = File::options().write(true).open(r.abs(rel)).expect("open");
    f.set_times(FileTimes::new().set_modified(at).set_accessed(at))
        .expect("set times");
}

#[test]
fn same_size_same_mtime_edit_is_read_again() {
    let r = TestRepo::new();
    r.task("a", "title: Cached task\npriority: high\n");
    r.ok(&["tick"]);
    let rel = "work/ready/a.yaml";
    assert!(r.exists(rel));
    let past = SystemTime::now() - Duration::from_secs(3600);
    age(&r, rel, past);
    // The ctime of a file cannot be set: let it fall behind the cache's racy window (50 ms for
    // filesystems with nanosecond stamps) so the next load may cache the file.
    std::thread::sleep(Duration::from_millis(200));
    r.ok(&["tick"]);
    let cache = std::fs::read(r.abs(".git/coord/stat-cache.bin")).expect("cache");
    let cache = String::from_utf8_lossy(&cache);
    assert!(cache.contains("ready/a.yaml"), "cached: {cache}");
    let before = r.read(rel);
    let after = before.replace("priority: high", "priority: low ");
    assert_eq!(before.len(), after.len());
    r.write(rel, &after);
    age(&r, rel, past);
    let shown = r.ok(&["show", "a", "--json"]);
    assert!(shown.contains("\"priority\": \"low\""), "{shown}");
}

#[test]
fn corrupt_cache_means_a_full_read() {
    let r = TestRepo::new();
    r.task("a", "title: Cached task\n");
    r.ok(&["tick"]);
    r.write(".git/coord/stat-cache.bin", "coord stat-cache 2\n");
    r.ok(&["tick"]);
    let shown = r.ok(&["show", "a", "--json"]);
    assert!(shown.contains("Cached task"), "{shown}");
    assert_eq!(r.git_status(), "");
}
