//! Packing under faults, through the real binary: a tick whose commit crosses the
//! loose-object threshold runs `git repack` (src/git/pack.rs). Killed with SIGKILL at random
//! points of that packing, then a recovery tick: every object readable (`git fsck --strict`), every
//! task in one place, the work tree clean, no temporary pack file left behind. The same on a
//! full small tmpfs (`COORD_FULL_DISK_TEST`, as in faults.rs). A short run is in the default
//! suite; `COORD_STRESS` (set for the long sweep) makes it kill forty times.

use crate::harness::{git_env, git_in, task_places, Rng, TestRepo};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Loose objects a person's git left: enough for coord's next commit to pack them
/// (`PACK_LOOSE_FROM` is 6,700).
const LOOSE: usize = 7_000;

/// Returns the names in `.git/objects/pack` of `root`.
fn pack_dir(root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(root.join(".git/objects/pack"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Writes `n` distinct loose blobs into `root`'s object database, as a person's git leaves
/// them.
fn loose_objects(root: &Path, n: usize) {
    let repo = git2::Repository::open(root).expect("open");
    for i in 0..n {
        repo.blob(format!("left by a person's git, {i}\n").as_bytes())
            .expect("write a blob");
    }
}

/// A repository with agent a1 and a history of `mb` MB of incompressible files in one pack
/// (what the repack copies).
fn template(mb: usize) -> TestRepo {
    let r = TestRepo::empty_in_memory();
    r.ok(&["init"]);
    r.ok(&["agents", "add", "a1", "--max-active", "1000"]);
    r.git(&["config", "core.compression", "0"]);
    let mut random = std::fs::File::open("/dev/urandom").expect("urandom");
    for i in 0..mb.div_ceil(4) {
        let mut bytes = vec![0u8; 4 << 20];
        std::io::Read::read_exact(&mut random, &mut bytes).expect("random bytes");
        std::fs::write(r.abs(&format!("history-{i}.bin")), bytes).expect("write");
        r.git(&["add", "-A"]);
        r.git(&["commit", "-q", "-m", &format!("history {i}")]);
    }
    // Only the history keeps them: the work tree stays small.
    r.git(&["rm", "-q", "history-*.bin"]);
    r.git(&["commit", "-q", "-m", "history moved out"]);
    r.git(&["repack", "-a", "-d", "-q", "--window=0"]);
    r
}

/// A copy of `template` with `LOOSE` loose objects and task y in the inbox: its next tick
/// commits and packs.
fn copy_of(template: &TestRepo) -> TestRepo {
    let r = TestRepo::empty_in_memory();
    let ok = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", template.path().display()))
        .arg(r.path())
        .status()
        .expect("cp");
    assert!(ok.success(), "cp -a");
    loose_objects(r.path(), LOOSE);
    r.task("y", "title: y\n");
    r
}

/// Where a kill landed, from what `.git/objects/pack` held just before it.
fn stage(before: &BTreeSet<String>, now: &BTreeSet<String>) -> &'static str {
    let new: Vec<&String> = now.difference(before).collect();
    if new
        .iter()
        .any(|n| n.starts_with("tmp_") || n.starts_with(".tmp-"))
    {
        "packing"
    } else if before.is_subset(now) {
        "packed, old packs still there"
    } else {
        "old packs being removed"
    }
}

/// Asserts what a recovered repository must be: every object readable, task `id` and every
/// other task in one place, the work tree clean, and no file in `objects/pack` but whole packs
/// (an index always with its pack).
fn assert_recovered(root: &Path, ids: &[&str], what: &str) {
    git_in(root, &["fsck", "--no-progress", "--strict"]);
    let places = task_places(root);
    for id in ids {
        let at = places.get(*id).cloned().unwrap_or_default();
        assert_eq!(at, [format!("work/assigned/a1/{id}.yaml")], "{what}: {id}");
    }
    for (id, at) in &places {
        assert_eq!(at.len(), 1, "{what}: {id} is in {at:?}");
    }
    let status = git_in(root, &["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(status, "", "{what}");
    let files = pack_dir(root);
    let stray: Vec<&String> = files
        .iter()
        .filter(|n| {
            let whole = n.strip_prefix("pack-").and_then(|n| n.split_once('.'));
            !whole.is_some_and(|(hash, ext)| {
                hash.len() == 40 && ["pack", "idx", "rev", "bitmap"].contains(&ext)
            })
        })
        .collect();
    assert!(stray.is_empty(), "{what}: left in objects/pack: {stray:?}");
    for idx in files.iter().filter(|n| n.ends_with(".idx")) {
        let pack = idx.replace(".idx", ".pack");
        assert!(files.contains(&pack), "{what}: {idx} without its pack");
    }
}

/// Starts `coord tick` in `r` and returns it with the moment a new file showed in
/// `objects/pack` (None when it ended first).
fn tick_until_packing(
    r: &TestRepo,
    before: &BTreeSet<String>,
) -> (std::process::Child, Option<Instant>) {
    let mut child = r.spawn(&["tick"]);
    loop {
        if pack_dir(r.path()) != *before {
            return (child, Some(Instant::now()));
        }
        if child.try_wait().expect("try_wait").is_some() {
            return (child, None);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_tick_killed_at_random_points_of_packing_recovers_with_nothing_lost() {
    let long = std::env::var_os("COORD_STRESS").is_some();
    let kills = if long { 40 } else { 3 };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    eprintln!("pack kill seed {seed}");
    let mut rng = Rng(seed | 1);
    let template = template(8);
    let before = pack_dir(template.path());
    // A run to the end: it packs into one pack with a bitmap, and says how long the packing
    // takes here (the window the kills are drawn from).
    let r = copy_of(&template);
    let (mut child, started) = tick_until_packing(&r, &before);
    assert!(child.wait().expect("wait").success(), "the tick");
    let window = started.map_or(Duration::from_millis(300), |s| s.elapsed() * 5 / 4);
    let packs: Vec<String> = pack_dir(r.path())
        .into_iter()
        .filter(|n| n.ends_with(".idx") || n.ends_with(".bitmap"))
        .collect();
    assert_eq!(packs.len(), 2, "one pack and its bitmap: {packs:?}");
    assert_recovered(r.path(), &["y"], "not killed");
    let mut stages: std::collections::BTreeMap<&str, usize> = Default::default();
    for k in 0..kills {
        let r = copy_of(&template);
        let (mut child, started) = tick_until_packing(&r, &before);
        let delay = Duration::from_micros(rng.below(window.as_micros() as u64));
        let landed = match started {
            Some(s) => {
                std::thread::sleep(delay.saturating_sub(s.elapsed()));
                let at = stage(&before, &pack_dir(r.path()));
                let _ = child.kill();
                at
            }
            None => "done",
        };
        child.wait().expect("wait");
        *stages.entry(landed).or_default() += 1;
        let what = format!("kill {k} at {delay:?} ({landed})");
        r.ok(&["tick"]);
        assert_recovered(r.path(), &["y"], &what);
        // The next tick that commits (in the long run: packs again).
        if long {
            loose_objects(r.path(), LOOSE);
        }
        r.task("z", "title: z\n");
        r.ok(&["tick"]);
        assert_recovered(r.path(), &["y", "z"], &format!("{what}, then a tick"));
    }
    eprintln!("pack kills: window {window:?}, {stages:?}");
}

/// Kills `child` and waits until the kernel has it as a zombie (killed, not reaped yet).
fn kill_leaving_a_zombie(child: &mut std::process::Child) {
    child.kill().expect("kill");
    let stat = PathBuf::from(format!("/proc/{}/stat", child.id()));
    let start = Instant::now();
    while !std::fs::read_to_string(&stat).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    }) {
        assert!(start.elapsed() < Duration::from_secs(10), "no zombie");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Starts a tick in a copy of `template` and returns it once a file whose name starts with
/// `prefix` shows in `objects/pack`.
fn tick_until(r: &TestRepo, prefix: &str) -> std::process::Child {
    let mut child = r.spawn(&["tick"]);
    let start = Instant::now();
    while !pack_dir(r.path()).iter().any(|n| n.starts_with(prefix)) {
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the tick ended first"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {prefix} file"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    child
}

#[test]
fn a_packing_tick_killed_whose_process_is_not_reaped_yet_leaves_no_temporary_pack() {
    let template = template(8);
    let r = copy_of(&template);
    let mut child = tick_until(&r, "tmp_pack_");
    // A killed process stays a zombie until its parent waits for it (a supervisor that has
    // not yet, or a container whose first process never does): it is gone all the same.
    kill_leaving_a_zombie(&mut child);
    r.ok(&["tick"]);
    child.wait().expect("wait");
    assert_recovered(r.path(), &["y"], "zombie");
}

#[test]
fn a_pack_write_killed_leaves_no_temporary_pack_after_recovery() {
    let template = template(2);
    let r = copy_of(&template);
    let mut child = tick_until(&r, "tmp_pack_");
    child.kill().expect("kill");
    child.wait().expect("wait");
    r.ok(&["tick"]);
    assert_recovered(r.path(), &["y"], "pack write killed");
}

/// The script of [`packing_on_a_full_disk_fails_alone_and_the_next_tick_recovers`]: run in a
/// mount namespace of its own with a small tmpfs at `$1`, the coord binary at `$2`, the
/// template repository at `$4`; for each amount of space left it copies the template onto the
/// tmpfs, fills the disk, ticks (the commit packs), frees the space, ticks, drops a
/// task, ticks again, and copies the repo to `$3/free-<KB>` with the ticks' output and exit
/// codes.
const FULL_DISK: &str = r#"set -u
mnt=$1; coord=$2; out=$3; tpl=$4
mount -t tmpfs -o size=112m tmpfs "$mnt" || exit 99
for free in 512 8192; do
  cp -a "$tpl" "$mnt/r" || exit 98; cd "$mnt/r"
  printf 'title: y\n' > work/inbox/y.yaml; touch -d 2020-01-01 work/inbox/y.yaml
  left=$(df -k --output=avail "$mnt" | tail -n 1)
  dd if=/dev/zero of="$mnt/ballast" bs=1k count=$((left - free)) 2>/dev/null
  o=$out/free-$free; mkdir -p "$o"
  "$coord" tick > "$o/first.txt" 2>&1; first=$?
  ls .git/objects/pack > "$o/left.txt"
  rm -f "$mnt/ballast"
  "$coord" tick > "$o/second.txt" 2>&1; second=$?
  printf 'title: z\n' > work/inbox/z.yaml; touch -d 2020-01-02 work/inbox/z.yaml
  "$coord" tick > "$o/third.txt" 2>&1; third=$?
  cd /; cp -a "$mnt/r" "$o/repo"; echo "$first $second $third" > "$o/codes"
  rm -rf "$mnt/r"
done
"#;

#[test]
fn packing_on_a_full_disk_fails_alone_and_the_next_tick_recovers() {
    // 48 MB of history in one pack: packing it again with the 7,000 loose objects needs more
    // room than 8 MB left gives it.
    let template = template(48);
    loose_objects(template.path(), LOOSE);
    let shm = Path::new("/dev/shm");
    let out = tempfile::tempdir_in(shm)
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir");
    let mnt = tempfile::tempdir().expect("tempdir");
    let coord = assert_cmd::cargo::cargo_bin("coord");
    let unshare = if rustix::process::geteuid().is_root() {
        vec!["-m"]
    } else {
        vec!["-r", "-m"]
    };
    let ran = Command::new("unshare")
        .args(&unshare)
        .args(["sh", "-c", FULL_DISK, "sh"])
        .arg(mnt.path())
        .arg(&coord)
        .arg(out.path())
        .arg(template.path())
        .envs(git_env())
        .output();
    let ran = match ran {
        Ok(o) if o.status.code() != Some(99) && o.status.code() != Some(1) => o,
        _ => {
            assert!(
                std::env::var("COORD_FULL_DISK_TEST").as_deref() != Ok("require"),
                "COORD_FULL_DISK_TEST=require but a small tmpfs cannot be mounted in a private \
                 mount namespace here (unshare -r -m)"
            );
            eprintln!("skipped: cannot mount a small tmpfs in a private mount namespace here");
            return;
        }
    };
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    for free in [512, 8192] {
        let dir = out.path().join(format!("free-{free}"));
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
        let codes: Vec<String> = read("codes")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if codes[0] != "0" {
            let said = read("first.txt");
            assert!(
                said.contains("No space left on device") || said.contains("disk has room"),
                "{free} KB: the full disk is named: {said}"
            );
        }
        assert_eq!(
            codes[1..],
            ["0", "0"],
            "{free} KB: {}{}",
            read("second.txt"),
            read("third.txt")
        );
        let left = read("left.txt");
        let temporary: Vec<&str> = left
            .lines()
            .filter(|n| n.starts_with("tmp_") || n.starts_with(".tmp-"))
            .collect();
        assert!(temporary.is_empty(), "{free} KB: git left {temporary:?}");
        assert_recovered(
            &dir.join("repo"),
            &["y", "z"],
            &format!("{free} KB left: {left}"),
        );
    }
}
