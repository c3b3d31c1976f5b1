//! The stat cache and the marks end to end: an unchanged task is taken from
//! `.git/coord/stat-cache.bin`, and an edit that keeps the file's size and mtime is still seen
//! (its ctime changed); the clean and quiet marks never hide a change, and a quiet tick wakes
//! up when something it waits for comes due.

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

/// The files in which an older coord kept what `.git/coord/index` holds now.
const OLD_LAYOUT: [&str; 4] = [
    ".git/coord/clean-mark",
    ".git/coord/clean-vouch",
    ".git/coord/quiet-mark",
    ".git/coord/quiet-board",
];

/// The marks are sections of one file, `.git/coord/index` (docs/design.md): a quiet tick keeps
/// its mark there, and the files of the earlier layout, which are never read, go at the
/// first write.
#[test]
fn the_marks_live_in_one_index_and_the_old_files_go() {
    let r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: First\n");
    for old in OLD_LAYOUT {
        r.write(old, "left by an older coord\n");
    }
    // As an older coord left `.git/coord/`: no index.
    let _ = std::fs::remove_file(r.abs(".git/coord/index"));
    r.ok(&["tick"]);
    settle_with(&r, Mark::Quiet);
    assert!(r.index_holds("quiet") && r.index_holds("vouch"));
    for old in OLD_LAYOUT {
        assert!(!r.exists(old), "{old} is removed");
    }
}

/// A damaged, cut, emptied or other-version index answers nothing: the tick plans (never an
/// error), writes the index again, and the next tick trusts it.
#[test]
fn a_damaged_index_is_ignored_and_written_again() {
    let r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: First\n");
    r.ok(&["tick"]);
    settle_with(&r, Mark::Quiet);
    let whole = std::fs::read(r.abs(".git/coord/index")).expect("the index");
    let mut flipped = whole.clone();
    *flipped.last_mut().expect("a byte") ^= 1;
    let mut other = whole.clone();
    other[..b"coord index 1".len()].copy_from_slice(b"coord index 0");
    let cut = whole[..whole.len() - 3].to_vec();
    for (what, bytes) in [
        ("flipped", flipped),
        ("cut", cut),
        ("empty", Vec::new()),
        ("other", other),
    ] {
        std::fs::write(r.abs(".git/coord/index"), bytes).expect("write");
        assert!(!r.index_holds("quiet"), "{what}");
        assert!(
            !tick_skips(&r, Mark::Quiet),
            "{what}: a damaged index answers nothing"
        );
        assert!(
            tick_skips(&r, Mark::Quiet),
            "{what}: the tick wrote it again"
        );
    }
}

/// What lets a tick skip work on an unchanged `work/`.
#[derive(Debug, Clone, Copy)]
enum Mark {
    /// The clean mark: the status scan is skipped, the tick still plans.
    Clean,
    /// The quiet mark: planning is skipped too.
    Quiet,
}

impl Mark {
    /// What a verbose tick says when this mark let it skip.
    fn says(self) -> &'static str {
        match self {
            Mark::Clean => "scan skipped",
            Mark::Quiet => "planning skipped",
        }
    }
}

/// Runs a verbose tick with `mark` in force (for the clean mark alone, the quiet mark is
/// removed first); returns whether it said that the mark let it skip.
fn tick_skips(r: &TestRepo, mark: Mark) -> bool {
    if let Mark::Clean = mark {
        r.forget_quiet_mark();
    }
    let out = r.run(&["tick", "-v"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).contains(mark.says())
}

/// Returns whether a verbose tick said it skipped the status scan (the clean mark matched).
fn tick_skips_the_scan(r: &TestRepo) -> bool {
    tick_skips(r, Mark::Clean)
}

/// Lets every stamp fall behind the racy window, ticks (a quiet tick writes the marks), and
/// checks that a further tick trusts `mark`.
fn settle_with(r: &TestRepo, mark: Mark) {
    std::thread::sleep(Duration::from_millis(200));
    tick_skips(r, mark);
    assert!(tick_skips(r, mark), "the {mark:?} mark should be in force");
}

fn settle(r: &TestRepo) {
    settle_with(r, Mark::Clean);
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

/// Makes each kind of change a person makes under `work/` while `mark` is in force, and
/// checks that the next tick neither skips nor misses it.
fn no_change_under_work_is_hidden_by(mark: Mark) {
    let r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: First\n");
    r.task("b", "title: Second\n");
    r.ok(&["tick"]);
    let changes: [(&str, &Change); 4] = [
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
    ];
    for (what, change) in changes {
        settle_with(&r, mark);
        let before = recordings(&r);
        change(&r);
        // Past the racy window, only the digest's stat keys can tell the change apart.
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !tick_skips(&r, mark),
            "{what}: the {mark:?} mark let it skip"
        );
        assert_eq!(recordings(&r), before + 1, "{what} was not recorded");
        assert_eq!(r.git_status(), "", "{what}");
    }
}

#[test]
fn the_clean_mark_never_hides_a_change_under_work() {
    no_change_under_work_is_hidden_by(Mark::Clean);
}

#[test]
fn the_quiet_mark_never_hides_a_change_under_work() {
    no_change_under_work_is_hidden_by(Mark::Quiet);
}

#[test]
fn the_quiet_mark_never_hides_a_change_to_the_setup_or_head() {
    let r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: First\n");
    r.ok(&["tick"]);
    let changes: [(&str, &Change); 4] = [
        ("HEAD moved back, the index kept", &|r| {
            // The assignment is now a staged change under work/ that must be recorded.
            r.git(&["reset", "-q", "--soft", "HEAD~1"]);
        }),
        ("coord.yaml edited", &|r| {
            let text = r.read("coord.yaml");
            r.write("coord.yaml", &format!("{text}\n# a comment\n"));
        }),
        ("task schema edited", &|r| {
            let text = r.read("schemas/task.schema.json");
            r.write("schemas/task.schema.json", &format!("{text}\n"));
        }),
        ("a commit outside work/", &|r| {
            r.write("notes.txt", "notes\n");
            r.git(&["add", "notes.txt"]);
            r.git(&["commit", "-q", "-m", "notes"]);
        }),
    ];
    for (what, change) in changes {
        settle_with(&r, Mark::Quiet);
        change(&r);
        std::thread::sleep(Duration::from_millis(200));
        assert!(!tick_skips(&r, Mark::Quiet), "{what}: planning was skipped");
        let under_work = r.git(&["status", "--porcelain", "--untracked-files=all", "work"]);
        assert_eq!(under_work, "", "{what}: work/ left uncommitted");
    }
}

#[test]
fn a_quiet_tick_wakes_up_when_a_lease_expires_and_when_a_backoff_passes() {
    let mut r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: Slow\n");
    r.ok(&["tick"]);
    assert!(r.where_is("a").starts_with("work/assigned/bot/"));
    let expires = r.stamp("a", "lease_expires_at");
    settle_with(&r, Mark::Quiet);
    let second = jiff::SignedDuration::from_secs(1);
    r.at(&(expires - second).to_string());
    assert!(tick_skips(&r, Mark::Quiet), "the lease has not expired yet");
    r.at(&expires.to_string());
    assert!(!tick_skips(&r, Mark::Quiet), "the lease expired");
    assert!(
        r.git(&["log", "--format=%s"]).contains("after timeout"),
        "the expired attempt is retried"
    );
    let retry_at = r.stamp("a", "not_before");
    assert!(r.where_is("a").starts_with("work/ready/"), "it backs off");
    settle_with(&r, Mark::Quiet);
    r.at(&(retry_at - second).to_string());
    assert!(
        tick_skips(&r, Mark::Quiet),
        "the backoff has not passed yet"
    );
    r.at(&retry_at.to_string());
    r.ok(&["tick"]);
    assert!(
        r.where_is("a").starts_with("work/assigned/bot/"),
        "assigned again once the backoff passed"
    );
}

#[test]
fn a_repo_that_requires_signed_results_always_plans() {
    let r = TestRepo::with_agents(&["bot"]);
    let cfg = r.read("coord.yaml").replace(
        "require_signed_results: false",
        "require_signed_results: true",
    );
    assert!(cfg.contains("require_signed_results: true"), "{cfg}");
    r.write("coord.yaml", &cfg);
    r.task("a", "title: First\n");
    r.ok(&["tick"]);
    // Whether a result is accepted depends on keys outside the repo: no quiet mark.
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..2 {
        assert!(!tick_skips(&r, Mark::Quiet));
    }
    assert!(tick_skips(&r, Mark::Clean), "the clean mark still applies");
}

#[test]
fn an_invalid_inbox_file_is_quarantined_at_the_next_tick_even_when_quiet() {
    let r = TestRepo::with_agents(&["bot"]);
    r.ok(&["tick"]);
    r.write("work/inbox/bad.yaml", "title: [unclosed\n");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!tick_skips(&r, Mark::Quiet));
    assert!(r.exists("work/invalid/bad.yaml"), "quarantined");
}

#[test]
fn an_ignored_file_under_work_means_no_clean_mark() {
    let r = TestRepo::with_agents(&["bot"]);
    // Only the top-level rules here (work/.gitignore from init would ignore the file too).
    r.git(&["rm", "-q", "work/.gitignore"]);
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
    assert!(!r.index_holds("clean"));
    r.write(".gitignore", "");
    let before = recordings(&r);
    r.ok(&["tick"]);
    assert_eq!(recordings(&r), before, "a stray file is never recorded");
    assert!(r.ok(&["status"]).contains("work/notes.log"), "but listed");
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

/// Runs a verbose single-task command; returns whether it said it skipped the status scan
/// (the vouch the last operation left, or the clean mark, held).
fn command_skips_the_scan(r: &TestRepo, args: &[&str]) -> bool {
    let args: Vec<&str> = ["-v"].iter().chain(args).copied().collect();
    let out = r.run(&args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stderr).contains("scan skipped")
}

/// Returns the arguments of a `coord new` of task `id` that goes the whole way (an
/// idempotency key makes it look at every task): it records people's changes first, trusting
/// the vouch the last operation left when it holds, and leaves one for the next operation.
fn full_new(id: &str) -> [&str; 6] {
    ["new", "Task by key", "--id", id, "--idempotency-key", id]
}

/// A repo with a pull agent `p` (up to 10 tasks at once) and ten ready tasks `t0`..`t9`,
/// where the last command left a vouch.
fn ready_for_commands() -> TestRepo {
    let r = TestRepo::with_agents(&["p --pull --max-active 10"]);
    for i in 0..10 {
        r.task(&format!("t{i}"), &format!("title: Task {i}\n"));
    }
    r.ok(&["tick"]);
    std::thread::sleep(Duration::from_millis(200));
    // Every stamp settled, the command's walk vouches for every file: it leaves a vouch.
    r.ok(&full_new("warmup"));
    assert!(r.index_holds("vouch"), "a vouch after the warm-up");
    r
}

/// A command going the whole way after coord's own commits trusts the vouch they
/// left instead of scanning all of `work/` (what made `coord claim` several times `git mv` +
/// `git commit` on 10,000 tasks), and leaves one for the next command in turn.
#[test]
fn commands_after_coords_own_commits_skip_the_status_scan() {
    let r = ready_for_commands();
    let before = recordings(&r);
    assert!(command_skips_the_scan(&r, &full_new("fresh")));
    assert!(command_skips_the_scan(&r, &full_new("another")));
    assert!(command_skips_the_scan(&r, &["tick"]));
    assert_eq!(r.git_status(), "");
    assert_eq!(recordings(&r), before, "nothing was anyone else's");
}

/// A change a person makes under `work/`, given the number of the round it is made in.
type NumberedChange = dyn Fn(&TestRepo, usize);

/// Every kind of change a person makes between two single-task commands is recorded as
/// theirs by the second, in its own commit before the command's, though the first left a
/// vouch for it.
#[test]
fn a_persons_change_before_a_command_is_recorded_as_theirs() {
    let r = ready_for_commands();
    let changes: [(&str, &NumberedChange); 8] = [
        ("no change at all", &|_, _| {}),
        ("same-size edit of an untouched file", &|r, _| {
            let text = r.read("work/ready/t9.yaml").replace("Task 9", "Task N");
            r.write("work/ready/t9.yaml", &text);
        }),
        ("edit of the file the last command committed", &|r, i| {
            let last = format!("work/inbox/last{i}.yaml");
            let text = r.read(&last) + "# by a person\n";
            r.write(&last, &text);
        }),
        // Same bytes, another mode: the content check alone would trust it.
        (
            "chmod +x of the file the last command committed",
            &|r, i| make_executable(&r.abs(&format!("work/inbox/last{i}.yaml"))),
        ),
        ("new file", &|r, _| {
            r.write("work/inbox/byhand.yaml", "title: By hand\n")
        }),
        ("deleted file", &|r, _| {
            std::fs::remove_file(r.abs("work/ready/t8.yaml")).expect("rm");
        }),
        ("staged file", &|r, _| {
            r.write("work/inbox/staged.yaml", "title: Staged\n");
            r.git(&["add", "work/inbox/staged.yaml"]);
        }),
        // HEAD has the file as it is: the recording restores the index entry, no commit.
        ("file taken out of the index only", &|r, _| {
            r.git(&["rm", "-q", "--cached", "work/ready/t7.yaml"]);
        }),
    ];
    for (i, (what, change)) in changes.into_iter().enumerate() {
        // A command whose own commit leaves the vouch the next one would trust (every other
        // stamp settled first, so that its walk vouches for every file).
        std::thread::sleep(Duration::from_millis(200));
        r.ok(&full_new(&format!("last{i}")));
        assert!(r.index_holds("vouch"), "{what}: no vouch to trust");
        let before = recordings(&r);
        change(&r, i);
        // Past the racy window, only the vouch's stat keys tell the change apart.
        std::thread::sleep(Duration::from_millis(200));
        let skipped = command_skips_the_scan(&r, &full_new(&format!("probe{i}")));
        let (changed, committed) = (i > 0, (1..7).contains(&i));
        assert_eq!(skipped, !changed, "{what}: scan skipped");
        assert_eq!(recordings(&r), before + usize::from(committed), "{what}");
        assert_eq!(r.git_status(), "", "{what}");
    }
}

/// With `core.fileMode` off (file systems where every file looks executable), git does not
/// look at the execute bit, and neither does the vouch: a chmod of the file the last command
/// committed leaves `git status` clean, and the next command still skips the scan.
#[test]
fn without_file_modes_a_chmod_is_no_change_for_the_vouch_either() {
    let r = ready_for_commands();
    r.git(&["config", "core.fileMode", "false"]);
    std::thread::sleep(Duration::from_millis(200));
    r.ok(&full_new("vouching"));
    make_executable(&r.abs("work/inbox/vouching.yaml"));
    assert_eq!(status_unrefreshed(&r), "", "git ignores the mode");
    std::thread::sleep(Duration::from_millis(200));
    assert!(command_skips_the_scan(&r, &full_new("probe")));
    assert_eq!(r.git_status(), "");
}

/// Sets the execute bits of the file at `path`.
fn make_executable(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `git status --porcelain` without refreshing the index: a refresh would change the index
/// checksum, and so the vouch's state, making the next command scan whatever the vouch checks.
fn status_unrefreshed(r: &TestRepo) -> String {
    r.git(&["--no-optional-locks", "status", "--porcelain"])
}

/// In a linked worktree (`git worktree add`) `.git` is a file, and the git config that
/// decides what a scan reports is the main repository's: a change to it (here
/// `core.fileMode`, which reveals a `chmod` made while git ignored modes) is seen by the
/// next command there, as in the main worktree.
#[test]
fn a_config_change_seen_from_a_linked_worktree_is_scanned_for() {
    let r = ready_for_commands();
    r.git(&["config", "core.fileMode", "false"]);
    let linked = TestRepo::empty();
    let at = linked.path().to_str().expect("utf8");
    r.git(&["worktree", "add", "-q", at, "-b", "side"]);
    linked.ok(&["tick"]);
    make_executable(&linked.abs("work/ready/t9.yaml"));
    std::thread::sleep(Duration::from_millis(200));
    linked.ok(&full_new("vouching"));
    // Read without refreshing the index: a refresh that rewrites it voids the vouch.
    assert_eq!(status_unrefreshed(&linked), "", "git ignores the mode yet");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        command_skips_the_scan(&linked, &full_new("control")),
        "a vouch holds in a linked worktree"
    );
    r.git(&["config", "core.fileMode", "true"]);
    assert!(
        !status_unrefreshed(&linked).is_empty(),
        "the mode shows now"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!command_skips_the_scan(&linked, &full_new("next")));
    assert_eq!(linked.git_status(), "");
}

/// A setting from a file the repo's config includes (`include.path`; the global config is
/// read the same way) counts as git resolves it: flipping `core.fileMode` there, which
/// reveals a `chmod` made while git ignored modes, is seen by the next command.
#[test]
fn a_setting_from_an_included_config_file_is_scanned_for() {
    let r = ready_for_commands();
    let elsewhere = TestRepo::empty();
    let included = elsewhere.abs("included.cfg");
    std::fs::write(&included, "[core]\n\tfileMode = false\n").expect("write");
    r.git(&["config", "--unset", "core.filemode"]);
    r.git(&["config", "include.path", included.to_str().expect("utf8")]);
    make_executable(&r.abs("work/ready/t9.yaml"));
    std::thread::sleep(Duration::from_millis(200));
    r.ok(&full_new("vouching"));
    assert!(r.index_holds("vouch"), "a vouch to trust");
    assert_eq!(r.git_status(), "", "git ignores the mode yet");
    std::fs::write(&included, "[core]\n\tfileMode = true\n").expect("write");
    assert!(!status_unrefreshed(&r).is_empty(), "the mode shows now");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!command_skips_the_scan(&r, &full_new("next")));
    assert_eq!(r.git_status(), "");
}

/// Returns whether a verbose tick said the index's stat data told it `work/` was clean.
fn tick_reads_the_index(r: &TestRepo) -> bool {
    let out = r.run(&["tick", "-v"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).contains("as the index records it")
}

/// After a person's `git commit` no vouch or mark holds, and the tick tells that `work/` is
/// clean from the walk's stat data and the index instead of libgit2's scan. A change made
/// after that commit, even an in-place edit that keeps the file's size and mtime (only its
/// ctime differs from what the index recorded), still sends it to the scan, which records it.
#[test]
fn after_a_persons_commit_the_index_tells_the_tick_and_a_later_edit_is_still_recorded() {
    let r = TestRepo::with_agents(&["bot"]);
    r.task("a", "title: First\n");
    r.ok(&["tick"]);
    let person_commits = |r: &TestRepo, name: &str| {
        r.write(&format!("work/ready/{name}.yaml"), "title: By a person\n");
        r.git(&["add", "-A"]);
        r.git(&["commit", "-q", "-m", "tasks by a person"]);
    };
    person_commits(&r, "p1");
    assert!(tick_reads_the_index(&r), "the index told a clean work/");
    assert_eq!(r.git_status(), "");
    person_commits(&r, "p2");
    let before = recordings(&r);
    let rel = r.where_is("a");
    let mtime = std::fs::metadata(r.abs(&rel))
        .and_then(|m| m.modified())
        .expect("mtime");
    let text = r.read(&rel).replace("title: First", "title: Fyrst");
    r.write(&rel, &text);
    age(&r, &rel, mtime);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!tick_reads_the_index(&r), "same size and mtime, new bytes");
    assert_eq!(recordings(&r), before + 1, "the edit was not recorded");
    assert_eq!(r.git_status(), "");
}

/// The walk goes through `assigned/bot/` before `assigned/bot-2/`; the index, in byte order,
/// has `bot-2/`'s entries first. The files and the entries are compared in order, and one
/// out of that order is still found: the index tells a clean `work/`.
#[test]
fn the_index_tells_a_clean_work_tree_it_orders_otherwise_than_the_walk() {
    let r = TestRepo::with_agents(&["bot --max-active 1", "bot-2 --max-active 1"]);
    r.task("a", "title: First\n");
    r.task("b", "title: Second\n");
    r.ok(&["tick"]);
    let folder = |id: &str| {
        r.where_is(id)
            .rsplit_once('/')
            .map(|(dir, _)| dir.to_string())
    };
    let mut folders = [folder("a"), folder("b")].map(Option::unwrap_or_default);
    folders.sort();
    assert_eq!(folders, ["work/assigned/bot", "work/assigned/bot-2"]);
    r.write("work/ready/p1.yaml", "title: By a person\n");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "a task by a person"]);
    assert!(tick_reads_the_index(&r), "the index told a clean work/");
    assert_eq!(r.git_status(), "");
}
