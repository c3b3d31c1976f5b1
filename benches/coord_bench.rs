//! Benchmark of the release `coord` binary against real temporary git repos (no criterion:
//! plain `Instant`, medians and p95 over repetitions), each row next to a baseline measured in
//! the same run. Run with `cargo bench --bench coord_bench`; `COORD_BENCH_SCALE=0.1` shrinks
//! every size for a quick run; `COORD_BENCH_ONLY=ce` (any letters of `abcdefg`) runs only those
//! sections; `COORD_BENCH_BIG=1` adds the 50,000-task burst (f) and the 100,000-task rows.
//! `COORD_BENCH_DIR` chooses where the repos go (default: the system temp folder);
//! `COORD_BENCH_BIN` measures another `coord` binary (an older build, to compare). See
//! docs/performance.md.
//!
//! a. one tick assigning 1,000 ready tasks next to a `git mv` + `git commit` loop;
//! b. time per transition with 1,000 vs 20,000 (big: 100,000) tasks already in the repo, and
//!    the marginal time per transition (a tick of twice the batch minus one of the batch);
//! c. a no-op `coord tick` and `coord status` on 10,000 (big: and 100,000) tasks next to
//!    `git status --porcelain`;
//! d. `coord new`, `claim`, `complete` at 10,000 tasks next to `git add` + `git commit` and
//!    `git mv` + `git commit`;
//! e. 10,000 tasks through inbox → done: time per transition, `.git` growth per transition,
//!    `.git` size next to `git gc --aggressive`'s, clone time next to a clone of the same files
//!    committed once;
//! f. (big) a 50,000-task inbox burst in one tick: wall time, peak RSS, `.git` growth;
//! g. `br` (beads_rust) and `backlog` (Backlog.md) listing 10,000 tasks, when on PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const NOW: &str = "2026-11-22T10:00:00Z";

/// The sizes of one run.
struct Sizes {
    scale: f64,
    big: bool,
}

impl Sizes {
    fn n(&self, base: usize) -> usize {
        ((base as f64 * self.scale) as usize).max(10)
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let sizes = Sizes {
        scale: std::env::var("COORD_BENCH_SCALE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1.0),
        big: std::env::var("COORD_BENCH_BIG").is_ok_and(|v| v == "1"),
    };
    let only = std::env::var("COORD_BENCH_ONLY").unwrap_or_else(|_| "abcdefg".to_string());
    println!("load average: {}", load_average());
    let n = |base| sizes.n(base);
    if only.contains('a') {
        assign_vs_shell(n(1_000));
    }
    if only.contains('b') {
        let large = if sizes.big { 100_000 } else { 20_000 };
        growth(n(1_000), n(large), n(200));
    }
    if only.contains('c') {
        noop(n(10_000), 15);
        if sizes.big {
            noop(n(100_000), 5);
        }
    }
    if only.contains('d') {
        single_task(n(10_000), 15);
    }
    if only.contains('e') {
        lifecycle(n(10_000));
    }
    if only.contains('f') && sizes.big {
        burst(n(50_000));
    }
    if only.contains('g') {
        others(n(10_000));
    }
    println!("load average at the end: {}", load_average());
}

/// The binary measured: `COORD_BENCH_BIN` (e.g. a copy of an older build, to compare), else
/// (also when it is set empty) the one this bench was built with.
fn coord_bin() -> PathBuf {
    std::env::var_os("COORD_BENCH_BIN")
        .filter(|bin| !bin.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_coord")), PathBuf::from)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

/// A temporary repo with `coord init` and one push agent that can take everything.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        Repo::with_limit(1_000)
    }

    /// A repo with as many agents `bot`, `bot1`, `bot2`, … (at most 1,000 tasks each) as
    /// `capacity` tasks need.
    fn with_limit(capacity: usize) -> Repo {
        let r = Repo::empty();
        r.coord(&["init"]);
        for i in 0..capacity.div_ceil(1_000) {
            let name = if i == 0 {
                "bot".to_string()
            } else {
                format!("bot{i}")
            };
            let max = capacity.clamp(1, 1_000).to_string();
            r.coord(&["agents", "add", &name, "--max-active", &max]);
        }
        r
    }

    /// A temporary folder with nothing in it.
    fn empty() -> Repo {
        let dir = match std::env::var_os("COORD_BENCH_DIR") {
            Some(base) => tempfile::tempdir_in(base),
            None => tempfile::tempdir(),
        };
        Repo {
            dir: dir.expect("tempdir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn coord(&self, args: &[&str]) -> Output {
        let out = env(Command::new(coord_bin()))
            .arg("-C")
            .arg(self.path())
            .args(args)
            .output()
            .expect("run coord");
        assert!(out.status.success(), "coord {args:?}: {out:?}");
        out
    }

    fn git(&self, args: &[&str]) -> Output {
        run_git(self.path(), args)
    }

    fn commits(&self) -> usize {
        let out = self.git(&["rev-list", "--count", "HEAD"]);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("count")
    }

    /// Writes `count` tasks named `<prefix>-<i>` into `folder` as coord leaves them there.
    fn seed(&self, folder: &str, prefix: &str, count: usize) {
        let dir = self.path().join("work").join(folder);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let state = folder.split('/').next().unwrap_or(folder);
        let state = if state == "archive" { "done" } else { state };
        for i in 0..count {
            let text = if state == "inbox" {
                inbox_text(prefix, i)
            } else {
                task_text(prefix, i, state)
            };
            std::fs::write(dir.join(format!("{prefix}-{i:06}.yaml")), text).expect("write");
        }
    }

    fn commit_all(&self) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", "seed"]);
    }

    /// Commits everything as `commit_all` does, then packs it in the foreground: without
    /// this, the `git gc --auto` that a commit of thousands of files starts in the background
    /// packs while coord is being timed (and coord, finding the objects loose, packs them
    /// again itself).
    fn commit_packed(&self) {
        self.git(&["add", "-A"]);
        self.git(&["-c", "gc.auto=0", "commit", "-q", "-m", "seed"]);
        self.git(&["gc", "-q"]);
    }

    /// The size of `.git` in bytes (file sizes, as `du --apparent-size` counts them).
    fn git_size(&self) -> u64 {
        dir_size(&self.path().join(".git"))
    }
}

fn run_git(dir: &Path, args: &[&str]) -> Output {
    let out = env(Command::new("git"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn task_text(prefix: &str, i: usize, state: &str) -> String {
    let result = if state == "done" {
        "result:\n  status: success\n  attempt: 1\n  agent: bot\n  output: {summary: done}\n"
    } else {
        ""
    };
    let attempt = u8::from(state == "done");
    format!(
        "{}{result}coord:\n  state: {state}\n  attempt: {attempt}\n  created_at: {NOW}\n",
        inbox_text(prefix, i)
    )
}

/// A task as a person drops it into the inbox.
fn inbox_text(prefix: &str, i: usize) -> String {
    format!(
        "# Written by a person.\ntitle: Task {prefix} {i}\ndescription: |\n  Longer text about \
         task {i},\n  on two lines.\npriority: normal\nlabels: [bench, batch-{}]\n",
        i % 10
    )
}

/// The result block an agent writes by hand into its assigned task.
const RESULT: &str =
    "result:\n  status: success\n  attempt: 1\n  agent: bot\n  output: {summary: done}\n";

fn env(mut c: Command) -> Command {
    c.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .env("COORD_NOW", NOW);
    c
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn kb(bytes: u64) -> f64 {
    bytes as f64 / 1024.0
}

/// Times one `coord tick`; returns (ms, commits made).
fn timed_tick(repo: &Repo) -> (f64, usize) {
    let before = repo.commits();
    let t = Instant::now();
    repo.coord(&["tick", "-q"]);
    let elapsed = ms(t.elapsed());
    (elapsed, repo.commits() - before)
}

fn assign_vs_shell(n: usize) {
    println!("## a. one tick assigning {n} ready tasks, next to a git mv + git commit loop");
    let coord = Repo::new();
    coord.seed("ready", "t", n);
    coord.commit_all();
    let (tick, made) = timed_tick(&coord);
    println!(
        "coord tick: {tick:.0} ms, {made} commits, {:.2} ms per transition",
        tick / n as f64
    );
    let shell = Repo::new();
    shell.seed("ready", "t", n);
    shell.commit_all();
    std::fs::create_dir_all(shell.path().join("work/assigned/bot")).expect("mkdir");
    let t = Instant::now();
    for i in 0..n {
        let name = format!("t-{i:06}.yaml");
        shell.git(&[
            "mv",
            &format!("work/ready/{name}"),
            &format!("work/assigned/bot/{name}"),
        ]);
        shell.git(&["commit", "-q", "-m", &format!("assign {name}")]);
    }
    let base = ms(t.elapsed());
    println!(
        "git mv + git commit loop: {base:.0} ms, {:.2} ms per task",
        base / n as f64
    );
    println!("speed-up of the tick over the loop: {:.1}x\n", base / tick);
}

fn growth(small: usize, large: usize, batch: usize) {
    println!("## b. assign {batch} tasks with {small} vs {large} tasks already in the repo");
    let mut results = Vec::new();
    let mut marginal = Vec::new();
    for existing in [small, large] {
        let (tick, made) = growth_tick(existing, batch);
        let per = tick / batch as f64;
        println!("{existing} existing: {made} commits, {per:.2} ms per transition");
        results.push(per);
        // The same on a repo of the same size with twice the batch: what each transition
        // adds beyond the tick's fixed cost (the issue's O(changed) part).
        let (twice, made) = growth_tick(existing, 2 * batch);
        let more = (twice - tick) / batch as f64;
        println!(
            "{existing} existing, {} assigned: {made} commits, {twice:.0} ms; marginal {more:.2} ms per transition",
            2 * batch
        );
        marginal.push(more);
    }
    println!(
        "ratio per transition, {large} / {small}: {:.2}",
        results[1] / results[0]
    );
    println!(
        "ratio marginal per transition, {large} / {small}: {:.2}\n",
        marginal[1] / marginal[0]
    );
}

/// One timed tick assigning `batch` ready tasks in a repo of `existing` finished tasks (1/5
/// in `done/`, the rest in four archive months), committed and packed, after a warm-up tick;
/// returns (ms, commits made).
fn growth_tick(existing: usize, batch: usize) -> (f64, usize) {
    let repo = Repo::new();
    let months = ["2026-07", "2026-08", "2026-09", "2026-10"];
    let in_done = existing / 5;
    repo.seed("done", "d", in_done);
    for (m, month) in months.iter().enumerate() {
        let share = (existing - in_done) / months.len();
        repo.seed(&format!("archive/{month}"), &format!("a{m}"), share);
    }
    // A real repo has a stat cache: one tick over the committed tasks warms it, so the
    // timed tick pays what each writing tick pays, not a fresh clone's first load.
    repo.commit_packed();
    repo.coord(&["tick", "-q"]);
    repo.seed("ready", "t", batch);
    repo.git(&["add", "-A"]);
    repo.git(&["-c", "gc.auto=0", "commit", "-q", "-m", "ready"]);
    timed_tick(&repo)
}

fn noop(n: usize, reps: usize) {
    println!("## c. no-op on {n} tasks ({reps} runs each, taken in turn; median / p95)");
    let repo = Repo::new();
    repo.seed("done", "d", n);
    repo.commit_all();
    repo.coord(&["tick", "-q"]);
    // The quiet mark: its file of the earlier layout (a binary built from before the private
    // index) or its section in the index.
    let quiet_mark = repo.path().join(".git/coord/quiet-mark");
    let git_dir = repo.path().join(".git");
    let runs: [(&str, &dyn Fn()); 4] = [
        ("coord tick (no-op): ", &|| {
            repo.coord(&["tick", "-q"]);
        }),
        ("coord tick (plans): ", &|| {
            // Without the quiet mark the tick reads the board and plans (the stat cache and
            // the clean mark still apply); removing it costs microseconds.
            let _ = std::fs::remove_file(&quiet_mark);
            coord::private_index::forget(&git_dir, coord::private_index::Section::Quiet);
            repo.coord(&["tick", "-q"]);
        }),
        ("coord status:       ", &|| {
            repo.coord(&["status"]);
        }),
        ("git status:         ", &|| {
            repo.git(&["status", "--porcelain"]);
        }),
    ];
    let times = time_in_turn(&runs, reps);
    for ((label, _), (median, p95)) in runs.iter().zip(&times) {
        println!("{label}{median:.1} / {p95:.1} ms");
    }
    let git = times[3].0;
    println!("ratio tick / git status: {:.2}", times[0].0 / git);
    println!(
        "ratio tick that plans / git status: {:.2}",
        times[1].0 / git
    );
    println!("ratio status / git status: {:.2}\n", times[2].0 / git);
}

/// d. One task at a time on a repo of `n` tasks: each command next to what a person would do
/// with git alone on an identical repo, taken in turn.
fn single_task(n: usize, reps: usize) {
    println!("## d. single-task commands at {n} tasks ({reps} runs each, in turn; median / p95)");
    let make = || {
        let repo = Repo::new();
        repo.seed("done", "d", n - 2 * reps - 2);
        repo.seed("ready", "t", reps + 1);
        repo.commit_all();
        // A first read fills the stat cache; a tick would assign the ready tasks.
        repo.coord(&["status"]);
        repo
    };
    let (coord, shell) = (make(), make());
    std::fs::create_dir_all(shell.path().join("work/assigned/bot")).expect("mkdir");
    let round = std::cell::Cell::new(0usize);
    let claimed = std::cell::RefCell::new(Vec::<String>::new());
    let shell_claimed = std::cell::RefCell::new(Vec::<String>::new());
    let runs: [(&str, &dyn Fn()); 6] = [
        ("coord new:                  ", &|| {
            coord.coord(&["new", &format!("New task {}", round.get())]);
        }),
        ("file + git add + git commit:", &|| {
            let rel = format!("work/inbox/new-{:06}.yaml", round.get());
            std::fs::write(shell.path().join(&rel), inbox_text("new", round.get())).expect("write");
            shell.git(&["add", &rel]);
            shell.git(&["commit", "-q", "-m", "new task"]);
        }),
        ("coord claim:                ", &|| {
            let out = coord.coord(&["claim", "--agent", "bot", "--json"]);
            claimed.borrow_mut().push(json_id(&out.stdout));
        }),
        ("git mv + git commit:        ", &|| {
            let name = format!("t-{:06}.yaml", round.get());
            shell.git(&[
                "mv",
                &format!("work/ready/{name}"),
                &format!("work/assigned/bot/{name}"),
            ]);
            shell.git(&["commit", "-q", "-m", "claim"]);
            shell_claimed.borrow_mut().push(name);
        }),
        ("coord complete:             ", &|| {
            let id = claimed.borrow().last().cloned().expect("claimed");
            coord.coord(&["complete", &id, "--agent", "bot", "--attempt", "1"]);
        }),
        ("edit + git add + git commit:", &|| {
            let name = shell_claimed.borrow().last().cloned().expect("claimed");
            let rel = format!("work/assigned/bot/{name}");
            let path = shell.path().join(&rel);
            let text = std::fs::read_to_string(&path).expect("read");
            std::fs::write(&path, format!("{text}{RESULT}")).expect("write");
            shell.git(&["add", &rel]);
            shell.git(&["commit", "-q", "-m", "complete"]);
            round.set(round.get() + 1);
        }),
    ];
    let times = time_in_turn(&runs, reps);
    for ((label, _), (median, p95)) in runs.iter().zip(&times) {
        println!("{label} {median:.1} / {p95:.1} ms");
    }
    for (i, what) in [(0, "new"), (2, "claim"), (4, "complete")] {
        println!(
            "ratio coord {what} / git: {:.2}",
            times[i].0 / times[i + 1].0
        );
    }
    println!();
}

/// Returns the `"id"` of a JSON receipt.
fn json_id(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let rest = text.split("\"id\"").nth(1).expect("an id in the receipt");
    rest.split('"').nth(1).expect("an id value").to_string()
}

/// e. `n` tasks from inbox to done (one tick takes them in and assigns them, agents write
/// their results by hand, one tick moves them to done).
fn lifecycle(n: usize) {
    println!("## e. {n} tasks inbox -> ready -> assigned -> done");
    let repo = Repo::with_limit(n);
    repo.seed("inbox", "t", n);
    repo.commit_packed();
    let before = repo.git_size();
    let (first, made_first) = timed_tick(&repo);
    for agent in std::fs::read_dir(repo.path().join("work/assigned")).expect("assigned") {
        let agent = agent.expect("agent folder");
        if !agent.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = agent.file_name().to_string_lossy().into_owned();
        let result = RESULT.replace("agent: bot", &format!("agent: {name}"));
        for e in std::fs::read_dir(agent.path())
            .expect("agent folder")
            .flatten()
        {
            // As an agent should: a temp file renamed over the task, so it is complete at once.
            let text = std::fs::read_to_string(e.path()).expect("read");
            let temp = repo.path().join("result.tmp");
            std::fs::write(&temp, format!("{text}{result}")).expect("write");
            std::fs::rename(&temp, e.path()).expect("rename");
        }
    }
    let (second, made_second) = timed_tick(&repo);
    let done = count_files(&repo.path().join("work/done"));
    let transitions = 3 * n;
    let total = first + second;
    println!(
        "ticks: {first:.0} ms ({made_first} commits) + {second:.0} ms ({made_second} commits); \
         {done} done; {:.3} ms per transition",
        total / transitions as f64
    );
    let size = repo.git_size();
    println!(
        ".git: {:.0} KB before, {:.0} KB after: {:.2} KB per transition",
        kb(before),
        kb(size),
        kb(size - before) / transitions as f64
    );
    let once = Repo::empty();
    copy_tree(&repo.path().join("work"), &once.path().join("work"));
    run_git(once.path(), &["init", "-q", "-b", "main"]);
    // Packed in the foreground: a plain commit of 10,000 files starts `git gc --auto` in the
    // background, which packed this repo while the first clones of both were being timed.
    once.commit_packed();
    let [clone, clone_once] = time_clones([repo.path(), once.path()]);
    println!(
        "git clone: {clone:.0} ms; the same files committed once: {clone_once:.0} ms; \
         ratio {:.2}",
        clone / clone_once
    );
    repo.git(&["gc", "-q", "--aggressive", "--prune=now"]);
    let gc = repo.git_size();
    println!(
        ".git after git gc --aggressive: {:.0} KB; ratio before gc / after: {:.2}",
        kb(gc),
        size as f64 / gc as f64
    );
    let [clone_gc, clone_once] = time_clones([repo.path(), once.path()]);
    println!(
        "git clone after git gc --aggressive (git's best packing of this history): {clone_gc:.0} \
         ms; the same files committed once: {clone_once:.0} ms; ratio {:.2}\n",
        clone_gc / clone_once
    );
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.flatten().count())
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// Times `git clone` of each repo through the pack protocol (a `file://` URL, as a remote
/// clone would transfer it), one after the other in 7 rounds, so that a busy moment of the
/// machine weighs on both; returns each one's median.
fn time_clones<const N: usize>(repos: [&Path; N]) -> [f64; N] {
    let mut times = [(); N].map(|()| Vec::new());
    for _ in 0..7 {
        for (repo, times) in repos.iter().zip(times.iter_mut()) {
            let url = format!("file://{}", repo.display());
            let into = Repo::empty();
            let t = Instant::now();
            run_git(into.path(), &["clone", "-q", &url, "c"]);
            times.push(ms(t.elapsed()));
        }
    }
    times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    })
}

/// f. One tick over a burst of `n` new inbox tasks (one agent takes 1,000 of them).
fn burst(n: usize) {
    println!("## f. one tick over a burst of {n} inbox tasks");
    let repo = Repo::new();
    repo.seed("inbox", "t", n);
    repo.commit_packed();
    let before = repo.git_size();
    let commits = repo.commits();
    let (elapsed, rss) = time_with_rss(&repo, &["tick", "-q"]);
    let transitions = n + 1_000.min(n);
    let size = repo.git_size();
    println!(
        "tick: {:.1} s, peak RSS {}, {} commits, {transitions} transitions",
        elapsed / 1000.0,
        rss.map_or("?".to_string(), |kb| format!(
            "{:.0} MB",
            kb as f64 / 1024.0
        )),
        repo.commits() - commits
    );
    println!(
        ".git growth: {:.0} KB, {:.2} KB per transition\n",
        kb(size - before),
        kb(size - before) / transitions as f64
    );
}

/// Runs coord under `/usr/bin/time` when it is there; returns (ms, peak RSS in KB).
fn time_with_rss(repo: &Repo, args: &[&str]) -> (f64, Option<u64>) {
    let time = PathBuf::from("/usr/bin/time");
    if !time.exists() {
        let t = Instant::now();
        repo.coord(args);
        return (ms(t.elapsed()), None);
    }
    let t = Instant::now();
    let out = env(Command::new(time))
        .args(["-f", "rss=%M"])
        .arg(coord_bin())
        .arg("-C")
        .arg(repo.path())
        .args(args)
        .output()
        .expect("run coord");
    let elapsed = ms(t.elapsed());
    assert!(out.status.success(), "coord {args:?}: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rss = stderr
        .lines()
        .find_map(|l| l.strip_prefix("rss="))
        .and_then(|v| v.trim().parse().ok());
    (elapsed, rss)
}

/// g. `br ready` (beads_rust) and `backlog task list` (Backlog.md) on `n` tasks each, next to
/// `coord status` on as many, when they are on PATH.
fn others(n: usize) {
    println!("## g. other tools on {n} tasks (when on PATH)");
    let found = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let coord = Repo::new();
    coord.seed("done", "d", n / 2);
    coord.seed("ready", "t", n - n / 2);
    coord.commit_all();
    coord.coord(&["tick", "-q"]);
    let status = median_ms(5, || {
        coord.coord(&["status"]);
    });
    println!("coord status: {status:.1} ms");
    if found("br") {
        let dir = Repo::empty();
        let br = |args: &[&str]| tool(dir.path(), "br", args);
        br(&["init"]);
        for i in 0..n {
            br(&["create", &format!("Task {i}")]);
        }
        let t = median_ms(5, || {
            br(&["ready"]);
        });
        println!(
            "br ready: {t:.1} ms; ratio coord status / br ready: {:.2}",
            status / t
        );
    } else {
        println!("br: not on PATH (cargo install beads_rust)");
    }
    if found("backlog") {
        let dir = Repo::empty();
        run_git(dir.path(), &["init", "-q", "-b", "main"]);
        let backlog = |args: &[&str]| tool(dir.path(), "backlog", args);
        backlog(&["init", "bench", "--defaults"]);
        for i in 0..n {
            backlog(&["task", "create", &format!("Task {i}")]);
        }
        let t = median_ms(5, || {
            backlog(&["task", "list", "--plain"]);
        });
        println!(
            "backlog task list: {t:.1} ms; ratio coord status / backlog: {:.2}",
            status / t
        );
    } else {
        println!("backlog: not on PATH (npm install -g backlog.md)");
    }
    println!();
}

fn tool(dir: &Path, name: &str, args: &[&str]) -> Output {
    let out = env(Command::new(name))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run tool");
    assert!(out.status.success(), "{name} {args:?}: {out:?}");
    out
}

fn median_ms(reps: usize, run: impl Fn()) -> f64 {
    let runs: [(&str, &dyn Fn()); 1] = [("", &run)];
    time_in_turn(&runs, reps)[0].0
}

/// Runs each of `runs` once, `reps` times over (after one warm-up round), taking them in turn
/// so a machine that slows down meanwhile slows all of them; returns each one's median and
/// p95 in ms.
fn time_in_turn(runs: &[(&str, &dyn Fn())], reps: usize) -> Vec<(f64, f64)> {
    let mut samples = vec![Vec::with_capacity(reps); runs.len()];
    for round in 0..=reps {
        for ((_, run), taken) in runs.iter().zip(samples.iter_mut()) {
            let t = Instant::now();
            run();
            if round > 0 {
                taken.push(ms(t.elapsed()));
            }
        }
    }
    samples
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            let p95 = ((v.len() * 95).div_ceil(100)).clamp(1, v.len()) - 1;
            (v[v.len() / 2], v[p95])
        })
        .collect()
}
