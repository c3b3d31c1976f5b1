//! Faults of the disk and of git (SPEC 3.11, issue 12): one file that cannot be moved does not
//! stop the pass, git's own locks are waited for, and every writing command takes `--wait`.

use crate::harness::TestRepo;
use std::path::Path;
use std::process::Command;

/// Sets or clears the immutable attribute; false when the file system does not support it.
fn chattr(path: &Path, flag: &str) -> bool {
    Command::new("chattr")
        .arg(flag)
        .arg(path)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Clears the immutable attribute when dropped, so the temporary repo can be removed.
struct Immutable<'a>(&'a Path);

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        chattr(self.0, "-i");
    }
}

#[test]
fn an_immutable_task_file_is_skipped_with_a_note_and_the_others_move() {
    let r = TestRepo::empty_in_memory();
    r.ok(&["init", "-q", "--agents", "alice"]);
    r.ok(&["-q", "agents", "add", "bob", "--max-active", "5"]);
    for id in ["a", "b", "c"] {
        r.task(id, &format!("title: {id}\nagent: bob\n"));
    }
    r.git(&["add", "work"]);
    r.git(&["commit", "-qm", "three tasks"]);
    let stuck = r.abs("work/inbox/b.yaml");
    if !chattr(&stuck, "+i") {
        eprintln!("skipped: chattr +i is not supported here");
        return;
    }
    let guard = Immutable(&stuck);
    let (_, err) = r.code(&["tick"], 1);
    assert!(err.contains("work/inbox/b.yaml"), "{err}");
    assert!(err.contains("the other tasks moved"), "{err}");
    assert_eq!(r.where_is("a"), "work/assigned/bob/a.yaml");
    assert_eq!(r.where_is("c"), "work/assigned/bob/c.yaml");
    assert_eq!(r.where_is("b"), "work/inbox/b.yaml");
    assert_eq!(r.git_status(), "");
    let status = r.ok(&["status"]);
    assert!(status.contains("work/inbox/b.yaml"), "{status}");
    let (found, _) = r.code(&["doctor"], 1);
    assert!(found.contains("work/inbox/b.yaml"), "{found}");
    drop(guard);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("b"), "work/assigned/bob/b.yaml");
    let status = r.ok(&["status"]);
    assert!(!status.contains("work/inbox/b.yaml"), "{status}");
}

/// Holds the coordinator lock from the test process, as another coordinator would.
fn hold_coord_lock(r: &TestRepo) -> std::fs::File {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(r.abs(".git/coord.lock"))
        .expect("open lock");
    f.try_lock().expect("lock");
    f
}

#[test]
fn every_writing_command_takes_wait_in_milliseconds() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("t", "title: t\nagent: alice\n");
    r.ok(&["tick"]);
    let held = hold_coord_lock(&r);
    let commands: &[&[&str]] = &[
        &["tick"],
        &["new", "x"],
        &["claim", "--agent", "alice"],
        &["complete", "t"],
        &["fail", "t", "--error", "e"],
        &["heartbeat", "t"],
        &["approve", "t"],
        &["reject", "t", "--reason", "r"],
        &["cancel", "t"],
        &["retry", "t"],
        &["agents", "add", "bob"],
        &["archive"],
        &["doctor", "--fix"],
    ];
    for args in commands {
        let mut argv = args.to_vec();
        argv.extend(["--wait", "300ms"]);
        let start = std::time::Instant::now();
        let (_, err) = r.code(&argv, 3);
        let waited = start.elapsed();
        assert!(
            waited >= std::time::Duration::from_millis(300),
            "{argv:?}: {waited:?}"
        );
        assert!(
            waited < std::time::Duration::from_secs(5),
            "{argv:?}: {waited:?}"
        );
        assert!(err.contains("--wait"), "{argv:?}: {err}");
    }
    drop(held);
    r.code(&["claim", "--agent", "alice", "--wait", "500ms"], 4);
    let (_, err) = r.code(&["tick", "--wait", "500 ms"], 2);
    assert!(err.contains("not a duration"), "{err}");
}

#[test]
fn a_killed_runs_temporary_object_files_are_removed_by_recovery() {
    let r = TestRepo::new();
    let fan = r.abs(".git/objects/ab");
    std::fs::create_dir_all(&fan).expect("mkdir");
    std::fs::write(fan.join("tmp_object_git2_AbCdEf"), "half an object").expect("write");
    std::fs::write(r.abs(".git/objects/tmp_object_git2_XyZ"), "half").expect("write");
    // A killed coordinator leaves its pid in the lock file; a clean one empties it.
    std::fs::write(r.abs(".git/coord.lock"), "4242").expect("write");
    let (_, err) = r.code(&["tick"], 0);
    assert!(err.contains("removed 2 temporary object file(s)"), "{err}");
    assert!(!fan.join("tmp_object_git2_AbCdEf").exists());
    assert!(!r.exists(".git/objects/tmp_object_git2_XyZ"));
    r.git(&["fsck", "--strict"]);
}

/// A process that holds `lock` open (its stdout) until it is dropped, as a long git command
/// holds git's lock files.
struct Holding(std::process::Child);

impl Holding {
    /// Starts `sleep 60` with `lock` created as its stdout and dated `age` back.
    fn start(lock: &Path, age: std::time::Duration) -> Holding {
        let file = std::fs::File::create(lock).expect("create the lock");
        let past = std::time::SystemTime::now() - age;
        file.set_modified(past).expect("date the lock");
        let child = Command::new("sleep")
            .arg("60")
            .stdout(file)
            .spawn()
            .expect("start sleep");
        Holding(child)
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_git_lock_held_by_a_running_process_is_named_with_its_pid_command_and_age() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("t", "title: t\nagent: alice\n");
    let before = r.git(&["rev-parse", "HEAD"]);
    let lock = r.abs(".git/refs/heads/main.lock");
    let holder = Holding::start(&lock, std::time::Duration::from_secs(40));
    let (_, err) = r.code(&["tick"], 1);
    let named = format!(
        "refs/heads/main.lock is held by pid {} (sleep 60) for 4",
        holder.0.id()
    );
    assert!(err.contains(&named), "{err}");
    assert!(
        err.contains("run coord again when that process is done"),
        "{err}"
    );
    assert!(!err.contains("moved"), "{err}");
    assert!(
        lock.exists(),
        "recovery must not remove a lock a process holds"
    );
    assert_eq!(r.git(&["rev-parse", "HEAD"]), before);
    drop(holder);
    // Nobody holds it now: the next run takes it for a killed run's and goes on.
    let (_, err) = r.code(&["tick"], 0);
    assert!(err.contains("removed the stale lock"), "{err}");
    assert_eq!(r.where_is("t"), "work/assigned/alice/t.yaml");
}

#[test]
fn the_coordinator_lock_held_by_a_running_process_is_named_while_waiting_and_at_the_end() {
    let r = TestRepo::new();
    r.task("t", "title: t\n");
    let lock = r.abs(".git/coord.lock");
    // -o: the lock stays with flock itself, not with the sleep it runs.
    let Ok(child) = Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "60"])
        .spawn()
    else {
        eprintln!("skipped: flock(1) is not installed");
        return;
    };
    let holder = Holding(child);
    let start = std::time::Instant::now();
    while r.run(&["tick", "-q"]).status.code() != Some(3) {
        assert!(start.elapsed().as_secs() < 10, "flock never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let named = format!("coord.lock is held by pid {} (flock ", holder.0.id());
    let (_, err) = r.code(&["tick", "--wait", "1500ms"], 3);
    let waiting = err.lines().next().unwrap_or_default();
    assert!(waiting.starts_with("coord: waiting for "), "{err}");
    assert!(waiting.contains("(up to 1s in all): held by pid"), "{err}");
    assert!(err.contains(&named), "{err}");
    assert!(err.contains("sleep 60"), "{err}");
    assert!(err.contains("wait for it or pass --wait"), "{err}");
    drop(holder);
    r.ok(&["tick"]);
}

#[test]
fn an_index_lock_of_a_git_commit_waiting_for_its_editor_is_kept_and_named() {
    use std::os::unix::process::CommandExt;
    let r = TestRepo::with_agents(&["alice"]);
    r.task("t", "title: t\nagent: alice\n");
    r.write("notes.txt", "notes\n");
    r.git(&["add", "notes.txt"]);
    r.git(&["commit", "-qm", "notes"]);
    r.write("notes.txt", "a person's change\n");
    // `git commit -a` keeps index.lock, closed, while its editor runs; this editor ignores
    // its argument and waits.
    let mut commit = Command::new("git");
    commit.current_dir(r.path()).args(["commit", "-qa"]);
    for (k, v) in crate::harness::git_env() {
        commit.env(k, v);
    }
    let git = commit
        .env("GIT_EDITOR", "sleep 60 #")
        .process_group(0)
        .spawn()
        .expect("git commit");
    let group = format!("-{}", git.id());
    let editor = Holding(git);
    let lock = r.abs(".git/index.lock");
    let start = std::time::Instant::now();
    while !lock.exists() {
        assert!(start.elapsed().as_secs() < 10, "git commit took no lock");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (_, err) = r.code(&["tick"], 1);
    let named = format!(
        "index.lock is held, closed, by a git working in this repository: pid {} (git commit -qa)",
        editor.0.id()
    );
    assert!(err.contains(&named), "{err}");
    assert!(err.contains("waiting for its editor"), "{err}");
    assert!(
        lock.exists(),
        "recovery must not remove the lock of a running git"
    );
    let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
    drop(editor);
    let _ = std::fs::remove_file(&lock);
    r.ok(&["tick"]);
    assert_eq!(r.where_is("t"), "work/assigned/alice/t.yaml");
}
