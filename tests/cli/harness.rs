//! The test repo: a temp dir with a git repo, a fixed clock, no user or system git config,
//! coord run with a cleared environment and a HOME of its own, and helpers to write task files,
//! run coord and git, and look at the result. The setups the areas share live here too: a repo
//! with agents (`with_agents("p --pull")`), a remote in its HOME (`add_origin`), and a bare
//! remote with a person's clone that seeded it (`Net`).

#![allow(dead_code)]

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The clock every test starts at.
pub const T0: &str = "2026-11-22T10:00:00Z";

/// A temporary repository driven through the real binary.
pub struct TestRepo {
    dir: tempfile::TempDir,
    /// The HOME coord runs with: an empty folder of this repo's own, outside it.
    home: tempfile::TempDir,
    /// The clock passed as COORD_NOW.
    pub now: String,
}

impl TestRepo {
    /// Returns an empty folder (no git repo).
    pub fn empty() -> TestRepo {
        TestRepo {
            dir: tempfile::tempdir().expect("tempdir"),
            home: tempfile::tempdir().expect("tempdir"),
            now: T0.to_string(),
        }
    }

    /// Returns an empty folder (no git repo) created inside `parent`, e.g. a tmpfs for tests
    /// that make thousands of commits.
    pub fn empty_in(parent: &Path) -> TestRepo {
        TestRepo {
            dir: tempfile::tempdir_in(parent).expect("tempdir"),
            home: tempfile::tempdir_in(parent).expect("tempdir"),
            now: T0.to_string(),
        }
    }

    /// Returns an empty folder on a RAM file system (`/dev/shm`) when there is one, for tests
    /// that make thousands of commits: coord fsyncs every move and write, which costs ~10 ms a
    /// time on a disk and nothing there.
    pub fn empty_in_memory() -> TestRepo {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap_or_else(|_| tempfile::tempdir().expect("tempdir"))
        } else {
            tempfile::tempdir().expect("tempdir")
        };
        TestRepo {
            dir,
            home: tempfile::tempdir().expect("tempdir"),
            now: T0.to_string(),
        }
    }

    /// Returns a repo initialized with `coord init`.
    pub fn new() -> TestRepo {
        let r = TestRepo::empty();
        r.ok(&["init"]);
        r
    }

    /// Returns a repo initialized with these agents, each added by `coord agents add` with the
    /// name and the flags it is given as: `"alice"`, `"p --pull"`, `"q --capability x
    /// --max-active 2"`.
    pub fn with_agents(agents: &[&str]) -> TestRepo {
        let r = TestRepo::new();
        for a in agents {
            let args: Vec<&str> = ["agents", "add"]
                .into_iter()
                .chain(a.split_whitespace())
                .collect();
            r.ok(&args);
        }
        r
    }

    /// Gives the repo a remote `origin`: an empty bare repository in its HOME, for `coord
    /// sync` to push to.
    pub fn add_origin(&self) {
        git_in(self.home(), &["init", "-q", "--bare", "origin.git"]);
        let origin = self.home().join("origin.git");
        self.git(&["remote", "add", "origin", origin.to_str().expect("utf8")]);
    }

    /// Returns the repo root.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Returns the HOME coord runs with.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// Returns an absolute path inside the repo.
    pub fn abs(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Makes `origin`'s `program` (`receivepack` or `uploadpack`) run through a shell script
    /// with `body` (which ends by exec'ing the real program), kept at `.git/<name>`.
    pub fn wrap_remote_program(&self, program: &str, name: &str, body: &str) {
        let script = self.abs(&format!(".git/{name}"));
        std::fs::write(&script, format!("#!/bin/sh\n{body}")).expect("write script");
        let mut perms = std::fs::metadata(&script).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&script, perms).expect("chmod");
        let key = format!("remote.origin.{program}");
        self.git(&["config", &key, script.to_str().expect("utf8")]);
    }

    /// Sets the clock.
    pub fn at(&mut self, now: &str) -> &mut Self {
        self.now = now.to_string();
        self
    }

    /// Returns a `coord` command ready to run in the repo.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::cargo_bin("coord").expect("binary");
        c.arg("-C").arg(self.path()).args(args);
        c.env_clear()
            .env("PATH", search_path())
            .env("HOME", self.home());
        env(&mut c, &self.now);
        c
    }

    /// Starts coord in the background (output discarded) and returns the running child.
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        let mut c = self.spawn_cmd(args);
        c.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c.spawn().expect("spawn coord")
    }

    /// Returns a plain `std::process::Command` for coord in the repo, for tests that manage
    /// the child's pipes themselves.
    pub fn spawn_cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("coord"));
        c.arg("-C").arg(self.path()).args(args);
        c.env_clear()
            .env("PATH", search_path())
            .env("HOME", self.home());
        for (k, v) in git_env() {
            c.env(k, v);
        }
        c.env("COORD_NOW", &self.now);
        c
    }

    /// Runs coord and returns its output, whatever the exit code.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run coord")
    }

    /// Runs coord, asserts success, returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        succeeded(args, &self.run(args))
    }

    /// Runs `coord --json ARGS`, asserts success, and returns stdout as one JSON value.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let full: Vec<&str> = ["--json"].iter().chain(args).copied().collect();
        let out = self.ok(&full);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("coord {args:?}: not one JSON value ({e}): {out:?}"))
    }

    /// Runs coord on the system clock (no `COORD_NOW`), asserts success, returns stdout: for
    /// commands that wait on real time (an agent's command, the demo's retry).
    pub fn ok_on_system_clock(&self, args: &[&str]) -> String {
        let out = self
            .cmd(args)
            .env_remove("COORD_NOW")
            .output()
            .expect("run coord");
        succeeded(args, &out)
    }

    /// Runs coord, asserts the exit code, returns (stdout, stderr).
    pub fn code(&self, args: &[&str], code: i32) -> (String, String) {
        let out = self.run(args);
        let (so, se) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert_eq!(
            out.status.code(),
            Some(code),
            "coord {args:?}:\nstdout: {so}\nstderr: {se}"
        );
        (so, se)
    }

    /// Writes a file (creating folders) as if long done, so the settle rule reads it at once
    /// (tests of the rule itself use `write_now`): its mtime is set far back, to a second no
    /// other write of this test run uses, so git still sees a same-size rewrite as a change.
    pub fn write(&self, rel: &str, text: &str) {
        self.write_now(rel, text);
        set_old_mtime(&self.abs(rel));
    }

    /// Writes a file (creating folders) just now, as a writer in progress would.
    pub fn write_now(&self, rel: &str, text: &str) {
        let p = self.abs(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// Reads a file.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.abs(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// Returns whether a file exists.
    pub fn exists(&self, rel: &str) -> bool {
        self.abs(rel).exists()
    }

    /// Returns whether coord's private index (`.git/coord/index`) holds the section `name`
    /// (`clean`, `vouch`, `quiet`).
    pub fn index_holds(&self, name: &str) -> bool {
        coord::private_index::held(&self.abs(".git"))
            .iter()
            .any(|s| s.name() == name)
    }

    /// Removes the quiet mark from coord's private index: the next tick plans.
    pub fn forget_quiet_mark(&self) {
        coord::private_index::forget(&self.abs(".git"), coord::private_index::Section::Quiet);
    }

    /// Drops a task into work/inbox/.
    pub fn task(&self, id: &str, yaml: &str) {
        self.write(&format!("work/inbox/{id}.yaml"), yaml);
    }

    /// Writes `rel` and commits it by hand, as a person does, with `message`.
    pub fn commit_file(&self, rel: &str, text: &str, message: &str) {
        self.write(rel, text);
        self.git(&["add", rel]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// Makes task `a` done by `agent` (a pull agent) and `b`, depending on it, ready.
    pub fn done_dependency_and_ready_dependent(&self, agent: &str) {
        self.ok(&["new", "A", "--id", "a"]);
        self.ok(&["new", "B", "--id", "b", "--depends-on", "a"]);
        self.ok(&["tick"]);
        self.ok(&["claim", "--agent", agent]);
        self.ok(&["complete", "a", "--agent", agent]);
        self.ok(&["tick"]);
        assert_eq!(self.find("b"), ["work/ready/b.yaml"]);
    }

    /// Returns the timestamp task `id`'s `coord:` block records under `key`.
    pub fn stamp(&self, id: &str, key: &str) -> jiff::Timestamp {
        let text = self.read(&self.where_is(id));
        let line = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} in {text}"));
        line.trim_matches('"').parse().expect("a timestamp")
    }

    /// Returns the repo-relative paths of every file of task `id` under work/.
    pub fn find(&self, id: &str) -> Vec<String> {
        let mut out = Vec::new();
        for name in [format!("{id}.yaml"), format!("{id}.yml")] {
            visit(&self.abs("work"), &mut |p| {
                if p.file_name().is_some_and(|n| n.to_string_lossy() == name) {
                    out.push(
                        p.strip_prefix(self.path())
                            .expect("inside")
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            });
        }
        out.sort();
        out
    }

    /// Returns the single path of task `id`, asserting there is exactly one.
    pub fn where_is(&self, id: &str) -> String {
        let found = self.find(id);
        assert_eq!(found.len(), 1, "task {id} found at {found:?}");
        found[0].clone()
    }

    /// Runs git in the repo and returns stdout; asserts success.
    pub fn git(&self, args: &[&str]) -> String {
        git_in(self.path(), args)
    }

    /// Returns `git status --porcelain` (untracked files included).
    pub fn git_status(&self) -> String {
        self.git(&["status", "--porcelain", "--untracked-files=all"])
    }

    /// Holds the coordinator lock from the test process, as another coordinator would,
    /// until the returned file is dropped.
    pub fn hold_coord_lock(&self) -> std::fs::File {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.abs(".git/coord.lock"))
            .expect("open lock");
        f.try_lock().expect("lock");
        f
    }

    /// Returns the number of commits on HEAD.
    pub fn commit_count(&self) -> usize {
        self.git(&["rev-list", "--count", "HEAD"])
            .trim()
            .parse()
            .expect("count")
    }
}

/// Sets a file's mtime years back, each call to a second of its own.
pub fn set_old_mtime(path: &Path) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let secs = 1_000_000_000 + NEXT.fetch_add(1, Ordering::Relaxed);
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .expect("set mtime");
}

fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            visit(&p, f);
        } else {
            f(&p);
        }
    }
}

/// Runs git in `dir` with the test environment and returns stdout; asserts success.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let mut c = std::process::Command::new("git");
    c.current_dir(dir).args(args);
    for (k, v) in git_env() {
        c.env(k, v);
    }
    let out = c.output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that coord, run with `args`, succeeded; returns its stdout.
fn succeeded(args: &[&str], out: &Output) -> String {
    assert!(
        out.status.success(),
        "coord {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every field `coord new` can write beyond its title, as flags (`--id` comes first): a
/// fan-out to a and b joined at c.
pub const EVERY_NEW_FLAG: &[&str] = &[
    "--description",
    "Everything: docs, release notes.",
    "--authority",
    "do_it_and_show_me",
    "--due",
    "2026-12-01T17:00:00Z",
    "--timeout",
    "2h",
    "--max-attempts",
    "5",
    "--label",
    "release",
    "--next-agent",
    "a",
    "--next-agent",
    "b",
    "--join-agent",
    "c",
];

/// Returns the PATH coord runs with (it runs git and `sh`): the test's own.
fn search_path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_default()
}

/// The environment every coord and git process gets: no user config, fixed identity.
pub fn git_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_AUTHOR_NAME", "Test Person"),
        ("GIT_AUTHOR_EMAIL", "person@example.com"),
        ("GIT_COMMITTER_NAME", "Test Person"),
        ("GIT_COMMITTER_EMAIL", "person@example.com"),
        ("NO_COLOR", "1"),
    ]
}

fn env(c: &mut Command, now: &str) {
    for (k, v) in git_env() {
        c.env(k, v);
    }
    c.env("COORD_NOW", now);
}

/// A small xorshift generator for the randomized tests; they print the seed so that a failing
/// run can be repeated.
pub struct Rng(pub u64);

impl Rng {
    /// Returns a number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    /// Returns one of `items`, None when there is none.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len() as u64) as usize])
    }
}

/// Returns every task file under `root`'s work/ by id (file stem), with its paths relative to
/// `root`: `.yaml` files outside `work/agents/`.
pub fn task_places(root: &Path) -> BTreeMap<String, Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<String>>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|x| x == "yaml")
                && !p.starts_with(root.join("work/agents"))
            {
                let id = p.file_stem().expect("stem").to_string_lossy().into_owned();
                let rel = p.strip_prefix(root).expect("inside");
                out.entry(id)
                    .or_default()
                    .push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, &root.join("work"), &mut out);
    out
}

/// A bare remote, a seeding clone (a person adding tasks) and more clones.
pub struct Net {
    /// The bare remote.
    pub remote: TestRepo,
    /// The person's clone that seeded it.
    pub seed: TestRepo,
}

impl Net {
    /// A remote whose main holds `coord init` and agents with room for every task.
    pub fn new(agents: &[&str]) -> Net {
        let remote = TestRepo::empty_in_memory();
        git_in(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
        let seed = TestRepo::empty_in_memory();
        seed.ok(&["init"]);
        for a in agents {
            seed.ok(&["agents", "add", a, "--max-active", "1000"]);
        }
        let url = remote.path().to_str().expect("utf8");
        seed.git(&["remote", "add", "origin", url]);
        seed.git(&["push", "-q", "origin", "main"]);
        Net { remote, seed }
    }

    /// A new clone of the remote.
    pub fn clone(&self) -> TestRepo {
        let r = TestRepo::empty_in_memory();
        let url = self.remote.path().to_str().expect("utf8");
        git_in(r.path(), &["clone", "-q", url, "."]);
        r
    }

    /// The seed pulls, commits `n` inbox tasks by hand (a person's commit) and pushes.
    pub fn person_adds(&self, prefix: &str, n: usize) -> Vec<String> {
        self.seed
            .git(&["pull", "-q", "--ff-only", "origin", "main"]);
        let ids: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
        for id in &ids {
            self.seed.task(id, &task_yaml(id));
        }
        self.seed.git(&["add", "work/inbox"]);
        self.seed
            .git(&["commit", "-q", "-m", &format!("add {prefix} tasks")]);
        self.seed.git(&["push", "-q", "origin", "main"]);
        ids
    }
}

/// Returns the text of a task a person drops: a comment and a title.
pub fn task_yaml(id: &str) -> String {
    format!("# dropped by a person\ntitle: Task {id}\n")
}
