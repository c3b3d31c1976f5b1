//! Faults of the disk and of git (docs/security.md): one file that cannot be moved does not
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

#[test]
fn every_writing_command_takes_wait_in_milliseconds() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("t", "title: t\nagent: alice\n");
    r.ok(&["tick"]);
    let held = r.hold_coord_lock();
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
    // A `git repack` killed midway (a process that is gone), and one still running (this one).
    let pack = r.abs(".git/objects/pack");
    std::fs::create_dir_all(&pack).expect("mkdir");
    std::fs::write(pack.join(".tmp-999999999-pack-0a1b.pack"), "half").expect("write");
    let running = format!(".tmp-{}-pack-0a1b.pack", std::process::id());
    std::fs::write(pack.join(&running), "being written").expect("write");
    // A killed coordinator leaves its pid in the lock file; a clean one empties it.
    std::fs::write(r.abs(".git/coord.lock"), "4242").expect("write");
    let (_, err) = r.code(&["tick"], 0);
    assert!(err.contains("removed 3 temporary object file(s)"), "{err}");
    assert!(!fan.join("tmp_object_git2_AbCdEf").exists());
    assert!(!r.exists(".git/objects/tmp_object_git2_XyZ"));
    assert!(!pack.join(".tmp-999999999-pack-0a1b.pack").exists());
    assert!(pack.join(&running).exists(), "a live repack's file stays");
    std::fs::remove_file(pack.join(&running)).expect("rm");
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

/// The script of [`a_full_disk_fails_the_tick_and_the_next_one_after_space_is_freed_recovers`]:
/// run in a mount namespace of its own, with a small tmpfs at `$1` and the coord binary at
/// `$2`; for each amount of space left (every [`FULL_DISK_STEP`] KB up to [`FULL_DISK_MAX`],
/// so that the disk fills at every stage of a tick: writes, moves, objects, index, branch),
/// it fills the disk, ticks, notes what git's index holds that HEAD does not, frees the
/// space, ticks again and copies the repo to `$3/free-<KB>`, where both ticks' output and
/// exit codes go.
const FULL_DISK: &str = r#"set -u
mnt=$1; coord=$2; out=$3
mount -t tmpfs -o size=8m tmpfs "$mnt" || exit 99
for free in $(seq 0 16 640); do
  r=$mnt/r; mkdir "$r"; cd "$r"
  "$coord" -q init && printf '\nsettle: 0s\n' >> coord.yaml && "$coord" -q agents add a1 \
    --max-active 100 && git commit -qam settle || exit 98
  for i in $(seq 1 20); do printf 'title: t%s\nagent: a1\n' $i > work/inbox/t$i.yaml; done
  "$coord" -q tick || exit 97
  for i in $(seq 1 30); do printf 'title: u%s\nagent: a1\n' $i > work/inbox/u$i.yaml; done
  left=$(df -k --output=avail "$mnt" | tail -n 1)
  dd if=/dev/zero of="$mnt/ballast" bs=1k count=$((left - free)) 2>/dev/null
  o=$out/free-$free; mkdir -p "$o"
  "$coord" tick > "$o/first.txt" 2>&1; first=$?
  git diff --cached --name-only > "$o/cached.txt" 2>&1
  rm -f "$mnt/ballast"
  "$coord" tick > "$o/second.txt" 2>&1; second=$?
  cd /; cp -a "$r" "$o/repo"; echo "$first $second" > "$o/codes"
  rm -rf "$r"
done
"#;

/// The amounts of space left that the full-disk sweep tries: every this many KB.
const FULL_DISK_STEP: usize = 16;

/// The most space left that the full-disk sweep tries, in KB.
const FULL_DISK_MAX: usize = 640;

/// Set to `require` (as `.ci/run` does) to fail instead of skipping where no private mount
/// namespace with a small tmpfs can be made.
const FULL_DISK_REQUIRE: &str = "COORD_FULL_DISK_TEST";

#[test]
fn a_full_disk_fails_the_tick_and_the_next_one_after_space_is_freed_recovers() {
    let out = tempfile::tempdir().expect("tempdir");
    let mnt = tempfile::tempdir().expect("tempdir");
    let coord = assert_cmd::cargo::cargo_bin("coord");
    // A private mount namespace: root's, or an unprivileged user's own where allowed.
    let unshare = if rustix::process::geteuid().is_root() {
        vec!["-m"]
    } else {
        vec!["-r", "-m"]
    };
    let mut cmd = Command::new("unshare");
    cmd.args(&unshare)
        .args(["sh", "-c", FULL_DISK, "sh"])
        .arg(mnt.path())
        .arg(&coord)
        .arg(out.path());
    for (k, v) in crate::harness::git_env() {
        cmd.env(k, v);
    }
    let ran = cmd.env("COORD_NOW", crate::harness::T0).output();
    let ran = match ran {
        Ok(o) if o.status.code() != Some(99) && o.status.code() != Some(1) => o,
        _ => {
            assert!(
                std::env::var(FULL_DISK_REQUIRE).as_deref() != Ok("require"),
                "{FULL_DISK_REQUIRE}=require but a small tmpfs cannot be mounted in a private \
                 mount namespace here (unshare -r -m)"
            );
            eprintln!(
                "skipped: cannot mount a small tmpfs in a private mount namespace here \
                 ({FULL_DISK_REQUIRE}=require makes this a failure)"
            );
            return;
        }
    };
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let mut failed_full = 0;
    let mut index_behind = Vec::new();
    for free in (0..=FULL_DISK_MAX).step_by(FULL_DISK_STEP) {
        let dir = out.path().join(format!("free-{free}"));
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
        let codes = read("codes");
        let (first, second) = codes.trim().split_once(' ').expect("two codes");
        failed_full += usize::from(first != "0");
        if first != "0" {
            let said = read("first.txt");
            let named = said.contains("No space left on device")
                || said.contains("check that .git is writable and the disk has room");
            assert!(named, "{free} KB: the full disk is named: {said}");
            let cached = read("cached.txt");
            if !cached.is_empty() && !said.contains(INDEX_FIX) {
                index_behind.push(format!("{free} KB: {said}staged: {cached}"));
            }
        }
        assert_eq!(
            second,
            "0",
            "{free} KB left, then freed: {}",
            read("second.txt")
        );
        let repo = dir.join("repo");
        let places = crate::harness::task_places(&repo);
        assert_eq!(places.len(), 50, "{free} KB: {places:?}");
        for (id, paths) in &places {
            assert_eq!(paths.len(), 1, "{free} KB: {id} is in {paths:?}");
            assert!(
                paths[0].starts_with("work/assigned/a1/"),
                "{free} KB: {paths:?}"
            );
        }
        let git = |args: &[&str]| crate::harness::git_in(&repo, args);
        assert_eq!(git(&["status", "--porcelain", "--untracked-files=all"]), "");
        git(&["fsck", "--no-progress", "--strict"]);
    }
    assert!(failed_full > 0, "the disk was full for some ticks");
    assert!(
        index_behind.is_empty(),
        "{} of {failed_full} failed ticks left git's index behind HEAD without saying \
         '{INDEX_FIX}':\n{}",
        index_behind.len(),
        index_behind.join("\n")
    );
}

/// What a tick that could not bring git's index up to its commits tells a person to run.
const INDEX_FIX: &str = "git reset -q";

/// Runs `coord args` in `r` and returns whether it ended within 20 s (killing it otherwise).
fn ends_in_time(r: &TestRepo, args: &[&str]) -> bool {
    let mut child = r.spawn(args);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if child.try_wait().expect("wait").is_some() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    false
}

/// A file of coord's own under `.git/coord/` that is a FIFO (or a link to a device) is never
/// waited on or read without end: it reads as missing, so every command still ends (they
/// all hung in the read of the history-folder record, the stat cache or the quiet board).
#[test]
fn a_fifo_or_device_in_place_of_coords_own_files_never_hangs_a_command() {
    let r = TestRepo::with_agents(&["bot"]);
    r.ok(&["new", "A", "--id", "a", "--agent", "bot"]);
    r.ok(&["tick"]);
    r.ok(&["complete", "a", "--agent", "bot"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    r.ok(&["tick"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    r.ok(&["tick"]);
    let private = r.abs(".git/coord");
    let mut files: Vec<_> = ["", "stat-cache.d"]
        .iter()
        .flat_map(|d| std::fs::read_dir(private.join(d)).expect("ls").flatten())
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for name in ["history-folders", "stat-cache.bin", "done.bin", "index"] {
        assert!(
            files.iter().any(|p| p.ends_with(name)),
            "{name} in {files:?}"
        );
    }
    for file in &files {
        let kept = std::fs::read(file).expect("read");
        for odd in ["fifo", "device"] {
            std::fs::remove_file(file).expect("rm");
            match odd {
                "fifo" => assert!(Command::new("mkfifo")
                    .arg(file)
                    .status()
                    .expect("mkfifo")
                    .success()),
                _ => std::os::unix::fs::symlink("/dev/zero", file).expect("symlink"),
            }
            for args in [&["status"][..], &["tick"], &["show", "a"]] {
                assert!(
                    ends_in_time(&r, args),
                    "{args:?} with {} a {odd}",
                    file.display()
                );
            }
        }
        std::fs::remove_file(file).expect("rm");
        std::fs::write(file, kept).expect("put back");
    }
}

/// A run killed between writing one of coord's own files under `.git/coord/` and renaming
/// it leaves its temporary file; the recovery after a killed run removes those of processes
/// that are gone and leaves a live writer's (a kill -9 left one per run, for ever, at the
/// record's size).
#[test]
fn a_killed_runs_temporary_files_under_git_coord_are_removed_by_recovery() {
    let r = TestRepo::new();
    r.ok(&["tick"]);
    let dead = [
        ".git/coord/.history-folders.999999999.coord-tmp",
        ".git/coord/stat-cache.d/.done.bin.999999998.coord-tmp",
    ];
    std::fs::create_dir_all(r.abs(".git/coord/stat-cache.d")).expect("mkdir");
    for path in dead {
        std::fs::write(r.abs(path), "half a record").expect("write");
    }
    let live = format!(".git/coord/.index.{}.coord-tmp", std::process::id());
    std::fs::write(r.abs(&live), "being written").expect("write");
    std::fs::write(r.abs(".git/coord.lock"), "4242").expect("write");
    let (_, err) = r.code(&["tick"], 0);
    assert!(
        err.contains("removed 2 temporary file(s) a killed run left in .git/coord"),
        "{err}"
    );
    assert!(dead.iter().all(|p| !r.exists(p)));
    assert!(r.exists(&live), "a live writer's file stays");
}

/// Mounts `work/inbox` of the repo in `$1` onto itself (a mount point: a rename out of it
/// fails with EXDEV, as on a separate disk) and runs the rest of the arguments there.
const SELF_MOUNT: &str = r#"
mount --bind "$1/work/inbox" "$1/work/inbox" || exit 99
shift
exec "$@"
"#;

/// An inbox on another mount: the tick leaves the file where it is, names the real cause
/// (EXDEV) once, and blames nothing else (a later step of the same task used to be reported
/// as "the file changed meanwhile").
#[test]
fn a_move_across_mounts_is_named_by_its_cause_only() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("x", "title: X\nagent: alice\n");
    let unshare = if rustix::process::geteuid().is_root() {
        vec!["-m"]
    } else {
        vec!["-r", "-m"]
    };
    let tick = r.spawn_cmd(&["tick"]);
    let mut cmd = Command::new("unshare");
    cmd.args(&unshare)
        .args(["sh", "-c", SELF_MOUNT, "sh"])
        .arg(r.path())
        .arg(tick.get_program())
        .args(tick.get_args());
    for (k, v) in tick.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = match cmd.output() {
        Ok(o) if o.status.code() != Some(99) => o,
        _ => {
            eprintln!("skipped: cannot bind-mount in a private mount namespace here");
            return;
        }
    };
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("Invalid cross-device link"), "{said}");
    assert!(!said.contains("changed meanwhile"), "{said}");
    assert_eq!(r.where_is("x"), "work/inbox/x.yaml");
}
