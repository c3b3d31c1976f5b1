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

/// Returns whether a verbose tick said it skipped the status scan (the clean mark matched).
fn tick_skips_the_scan(r: &TestRepo) -> bool {
    let out = r.run(&["tick", "-v"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).contains("scan skipped")
}

/// Lets every stamp fall behind the racy window, ticks (a quiet tick writes the clean mark),
/// and checks that a further tick trusts the mark and skips the status scan.
fn settle(r: &TestRepo) {
    std::thread::sleep(Duration::from_millis(200));
    r.ok(&["tick"]);
    assert!(tick_skips_the_scan(r), "the clean mark should be in force");
}

/// A change a person makes under `work/`.
type Change = dyn Fn(&TestRepo);

/// Returns how many `record external changes` commits HEAD has.
fn recordings(r: &TestRepo) -> usize {
    r.git(&["log", "--format=%s"])
        .lines()
        .filter(|s| *s == "coord: record external changes")
        .count()
}

#[test]
fn the_clean_mark_never_hides_a_change_under_work() {
    let r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: First\n");
    r.task("b", "title: Second\n");
    r.ok(&["tick"]);
    let changes: [(&str, &Change); 5] = [
        ("same-size edit", &|r| {
            let rel = r.where_is("b");
            let text = r.read(&rel).replace("title: Second", "title: Secund");
            r.write(&rel, &text);
        }),
        ("new file", &|r| {
            r.write("work/ready/c.yaml", "title: Third\n")
        }),
        ("deleted file", &|r| {
            std::fs::remove_file(r.abs("work/ready/c.yaml")).expect("rm");
        }),
        ("staged file", &|r| {
            r.write("work/inbox/d.yaml", "title: Fourth\n");
            r.git(&["add", "work/inbox/d.yaml"]);
        }),
        ("file in a folder the walk does not enter", &|r| {
            r.write("work/assigned/bot/deep/e.txt", "notes\n");
        }),
    ];
    for (what, change) in changes {
        settle(&r);
        let before = recordings(&r);
        change(&r);
        // Past the racy window, only the digest's stat keys can tell the change apart.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!tick_skips_the_scan(&r), "{what}: the scan was skipped");
        assert_eq!(recordings(&r), before + 1, "{what} was not recorded");
        assert_eq!(r.git_status(), "", "{what}");
    }
}

#[test]
fn an_ignored_file_under_work_means_no_clean_mark() {
    let r = TestRepo::with_agents(&["bot"]);
    r.write(".gitignore", "*.log\n");
    r.git(&["add", ".gitignore"]);
    r.git(&["commit", "-q", "-m", "ignore logs"]);
    r.write("work/notes.log", "kept out of git\n");
    r.ok(&["tick"]);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !tick_skips_the_scan(&r),
        "an ignore rule change alone could reveal the file"
    );
    assert!(!r.exists(".git/coord/clean-mark"));
    r.write(".gitignore", "");
    let before = recordings(&r);
    r.ok(&["tick"]);
    assert_eq!(
        recordings(&r),
        before + 1,
        "the file no longer ignored is recorded"
    );
}

#[test]
fn a_cached_agent_profile_is_read_again_when_it_changes() {
    let r = TestRepo::with_agents(&["bot"]);
    for id in ["a", "b", "c"] {
        r.task(id, &format!("title: Task {id}\n"));
    }
    r.ok(&["tick"]);
    settle(&r);
    let cache = std::fs::read(r.abs(".git/coord/stat-cache.bin")).expect("cache");
    assert!(
        String::from_utf8_lossy(&cache).contains("agents/bot.yaml"),
        "the profile is cached"
    );
    r.write("work/agents/bot.yaml", "max_active: lots\n");
    r.ok(&["tick"]);
    let (out, err) = r.code(&["doctor"], 1);
    assert!(
        format!("{out}{err}").contains("agents/bot.yaml"),
        "the broken profile is reported: {out}{err}"
    );
    r.write("work/agents/bot.yaml", "max_active: 3\n");
    r.ok(&["tick"]);
    for id in ["a", "b", "c"] {
        assert!(r.where_is(id).starts_with("work/assigned/bot/"), "{id}");
    }
}

#[test]
fn a_repo_schema_proven_by_the_cache_is_still_checked_when_it_changes() {
    let r = TestRepo::with_agents(&["bot"]);
    let schema = r.read("schemas/task.schema.json");
    let tightened = schema.replacen(
        "\"required\": [\"title\"]",
        "\"required\": [\"title\", \"labels\"]",
        1,
    );
    assert_ne!(tightened, schema, "the schema requires a title");
    r.write("schemas/task.schema.json", &tightened);
    r.task("a", "title: Labelled\nlabels: [x]\n");
    r.ok(&["tick"]);
    settle(&r);
    r.task("b", "title: Unlabelled\n");
    r.ok(&["tick"]);
    r.ok(&["tick"]);
    assert!(
        r.where_is("b").starts_with("work/invalid/"),
        "the repo schema is applied"
    );
    r.write("schemas/task.schema.json", "{\"type\": \"no-such-type\"}");
    let (_, err) = r.code(&["tick"], 1);
    assert!(err.contains("schemas/task.schema.json"), "{err}");
    assert!(err.contains("not a valid JSON Schema"), "{err}");
}
