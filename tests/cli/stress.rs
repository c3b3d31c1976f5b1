//! Several clones of one bare remote on a RAM disk, each with a person committing by hand with
//! plain git between syncs (new tasks, some depending on others; notes inside tasks; results
//! written into assigned tasks; done tasks moved back to ready/; hand reassignments; deletions;
//! notes outside work/) and running `coord complete` and `coord sync`, some syncs killed with
//! SIGKILL at a random point and run again; pull agents on clones of their own doing `claim
//! --sync` / `complete --sync`. Conflicts are resolved as sync's message says (save the version,
//! `--drop-edit`, make the edit again where the task is now, sync). Then, over every commit of
//! the remote: no task id in two places, no (task, attempt) credited to two agents, no task
//! entered assigned/ while a dependency was out of done/; at the tip: no note or hand-made task
//! lost; every clone clean, `git fsck` clean everywhere.
//!
//! A short run is part of the default suite; `COORD_STRESS=<rounds>` runs a long sweep (runs of
//! up to 40 rounds, each with a fresh remote); `COORD_STRESS_SEED=<seed>` repeats a run (each run
//! prints its seed and rounds).

use crate::harness::{git_env, Net, Rng, TestRepo, T0};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The push agents people's tasks go to (capability x) and the pull agents (capability y).
const PUSH_AGENTS: [&str; 2] = ["alice", "bob"];
const PULL_AGENTS: [&str; 2] = ["p1", "p2"];

/// A clone of the remote and whose it is: a person's (their git identity) or a pull agent's.
struct Clone {
    repo: TestRepo,
    name: String,
}

impl Clone {
    /// Runs git as the clone's person; returns the output whatever the exit code.
    fn git(&self, args: &[&str]) -> Output {
        let mut c = Command::new("git");
        c.current_dir(self.repo.path()).args(args);
        for (k, v) in git_env() {
            c.env(k, v);
        }
        let (who, mail) = (
            format!("Person {}", self.name),
            format!("{}@example.com", self.name),
        );
        c.env("GIT_AUTHOR_NAME", &who)
            .env("GIT_COMMITTER_NAME", &who)
            .env("GIT_AUTHOR_EMAIL", &mail)
            .env("GIT_COMMITTER_EMAIL", &mail);
        c.output().expect("run git")
    }

    /// Runs git and returns whether it succeeded.
    fn git_ok(&self, args: &[&str]) -> bool {
        self.git(args).status.success()
    }

    /// Runs coord; with `kill_after`, kills it with SIGKILL after that delay. Returns None when
    /// it was killed before it ended.
    fn coord(&self, args: &[&str], kill_after: Option<Duration>) -> Option<Output> {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("coord"));
        c.arg("-C").arg(self.repo.path()).args(args);
        for (k, v) in git_env() {
            c.env(k, v);
        }
        c.env("COORD_NOW", T0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn coord");
        if let Some(delay) = kill_after {
            let start = Instant::now();
            while start.elapsed() < delay {
                if child.try_wait().expect("try_wait").is_some() {
                    return Some(child.wait_with_output().expect("output"));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        Some(child.wait_with_output().expect("output"))
    }

    /// Returns the tracked task files under `folder` (`work/done`, `work/assigned/alice`, …),
    /// agent profiles aside.
    fn tasks_in(&self, folder: &str) -> Vec<String> {
        let out = self.git(&["ls-files", folder]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|p| p.ends_with(".yaml") && !p.starts_with("work/agents/"))
            .map(str::to_string)
            .collect()
    }

    /// Commits `paths` (already staged or tracked) with `message`; on failure puts the work
    /// tree back as HEAD has it. Returns whether it committed.
    fn commit(&self, paths: &[&str], message: &str) -> bool {
        let mut args = vec!["commit", "-q", "-m", message, "--"];
        args.extend(paths);
        if self.git_ok(&args) {
            return true;
        }
        let mut undo = vec!["reset", "-q", "HEAD", "--"];
        undo.extend(paths);
        self.git(&undo);
        let mut checkout = vec!["checkout", "-q", "HEAD", "--"];
        checkout.extend(paths);
        self.git(&checkout);
        false
    }
}

/// What the workers did and what the checks expect to find.
#[derive(Default)]
struct Ledger {
    /// Tasks people made by hand, by id (removed when a person deletes the task).
    made: BTreeSet<String>,
    /// Ids a person deleted: their notes may go with them.
    deleted: BTreeSet<String>,
    /// (clone, line) of every note committed outside work/ (`notes/<clone>.txt`).
    notes_outside: Vec<(String, String)>,
    /// (task id, line) of every note committed inside a task.
    notes_inside: Vec<(String, String)>,
    /// (task id, marker) of every result a person wrote into an assigned task and committed.
    hand_results: Vec<(String, String)>,
    syncs: usize,
    killed: usize,
    conflicts: usize,
    remade: usize,
    /// Conflicts whose advice's first step (`git show <commit>:<path>`) failed.
    advice_show_failed: usize,
    /// Conflicts whose advice leaves the change to the person (add it again under another id,
    /// if still wanted): the first line of each.
    let_go: Vec<String>,
    /// Ids of the tasks whose change a person let go: later edits of the task in the same
    /// sync (a result written into the moved copy) are dropped with it, with a line.
    let_go_ids: BTreeSet<String>,
    claims: usize,
    completes: usize,
    /// What `complete --sync` said when it exited 1 (the task moved on meanwhile).
    set_aside: Vec<String>,
    person_commits: usize,
    /// Milliseconds of every sync that ran to the end.
    sync_ms: Vec<u64>,
    failures: Vec<String>,
}

type Shared = Arc<Mutex<Ledger>>;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A conflict as sync's message states it: the `commit:path` to drop, and what its advice says
/// to do after.
struct Conflict {
    drop: String,
    then: Then,
}

/// What a conflict's advice says to do once sync went on without the change.
enum Then {
    /// Make the edit again in this file (two edits of the same lines).
    EditAgain(String),
    /// Delete this file again if the person still means to (a deletion of a changed file).
    DeleteAgain(String),
    /// Anything else (add it again under another id, if still wanted, …): our people let go.
    LetGo,
}

fn parse_conflict(err: &str) -> Option<Conflict> {
    // The advice repeats the values already given: the new one is the last.
    let command = err
        .split("'coord sync --drop-edit ")
        .nth(1)?
        .split('\'')
        .next()?;
    let drop = command.rsplit("--drop-edit ").next()?.trim().to_string();
    let between = |from: &str, to: &str| {
        let rest = err.split(from).nth(1)?;
        rest.split(to).next().map(str::to_string)
    };
    let then = if let Some(there) = between("make your edit again in ", " (your version") {
        Then::EditAgain(there)
    } else if let Some(there) = between("look at ", " and delete it again") {
        Then::DeleteAgain(there)
    } else {
        Then::LetGo
    };
    Some(Conflict { drop, then })
}

/// Makes a dropped edit again as the advice says: the note lines of the saved version that the
/// task's file (where the remote has it now) lacks are put back at its top and committed.
fn remake(clone: &Clone, saved: &str, there: &str, ledger: &Shared) {
    let Some(there) = where_now(clone, there) else {
        return;
    };
    let there = there.as_str();
    let now = clone.repo.read(there);
    let missing: Vec<&str> = saved
        .lines()
        .filter(|l| l.starts_with("# note ") && !now.lines().any(|n| n == *l))
        .collect();
    if missing.is_empty() {
        return;
    }
    let text = format!("{}\n{now}", missing.join("\n"));
    clone.repo.write(there, &text);
    if clone.commit(
        &[there],
        &format!("{}: my edit again in {there}", clone.name),
    ) {
        ledger.lock().expect("ledger").remade += 1;
    }
}

/// Returns where the task of `there` (the file a conflict's advice names) is in the clone now:
/// there, or where the tick of the sync that went on without the change moved it; None when it
/// is gone.
fn where_now(clone: &Clone, there: &str) -> Option<String> {
    if clone.repo.exists(there) {
        return Some(there.to_string());
    }
    clone.repo.find(&id_of(there)).into_iter().next()
}

/// Returns the line of sync's stderr that says what met.
fn first_line(text: &str) -> String {
    let mut lines = text.lines();
    let said = lines.clone().find(|l| l.contains("cannot apply"));
    said.or(lines.next()).unwrap_or("").to_string()
}

/// Deletes `there` again after sync went on without a deletion, as the advice says, when the
/// person still means to (they always do): commits the deletion.
fn delete_again(clone: &Clone, there: &str, ledger: &Shared) {
    let Some(there) = where_now(clone, there) else {
        return;
    };
    let there = there.as_str();
    if clone.git_ok(&["rm", "-q", there]) {
        let msg = format!("{}: delete {there} again", clone.name);
        if clone.commit(&[there], &msg) {
            ledger.lock().expect("ledger").remade += 1;
        }
    }
}

/// Syncs until a sync succeeds, resolving every conflict as its message says. Returns whether
/// it got there.
fn sync_until_ok(clone: &Clone, ledger: &Shared) -> bool {
    let mut drops: Vec<String> = Vec::new();
    let mut saved: Vec<(Option<String>, String)> = Vec::new();
    for _ in 0..20 {
        let mut args = vec!["sync", "--wait", "10s"];
        for d in &drops {
            args.extend(["--drop-edit", d.as_str()]);
        }
        let start = Instant::now();
        let out = clone.coord(&args, None).expect("not killed");
        let mut l = ledger.lock().expect("ledger");
        l.syncs += 1;
        if out.status.success() {
            l.sync_ms.push(start.elapsed().as_millis() as u64);
            drop(l);
            if saved.is_empty() {
                return true;
            }
            for (text, there) in saved.drain(..) {
                match text {
                    Some(text) => remake(clone, &text, &there, ledger),
                    None => delete_again(clone, &there, ledger),
                }
            }
            drops.clear();
            continue;
        }
        let err = stderr(&out);
        let Some(c) = parse_conflict(&err) else {
            l.failures.push(format!(
                "[{}] sync exited {:?}: {err}",
                clone.name,
                out.status.code()
            ));
            drop(l);
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        l.conflicts += 1;
        match c.then {
            Then::EditAgain(there) => {
                let shown = clone.git(&["show", &c.drop]);
                if shown.status.success() {
                    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
                    saved.push((Some(text), there));
                } else {
                    l.advice_show_failed += 1;
                }
            }
            Then::DeleteAgain(there) => saved.push((None, there)),
            Then::LetGo => {
                l.let_go.push(first_line(&err));
                let path = c.drop.split_once(':').map_or("", |(_, p)| p);
                l.let_go_ids.insert(id_of(path));
            }
        }
        drops.push(c.drop);
    }
    false
}

/// One `coord sync`: killed at a random point one time in four (then run again at once, before
/// the person touches anything), else run to the end.
fn sync(clone: &Clone, rng: &mut Rng, ledger: &Shared) {
    if rng.below(4) == 0 {
        let typical = {
            let l = ledger.lock().expect("ledger");
            let ms = &l.sync_ms;
            (ms.iter().sum::<u64>() / ms.len().max(1) as u64).max(50)
        };
        let delay = Duration::from_millis(rng.below(typical * 3 / 2));
        if clone.coord(&["sync"], Some(delay)).is_none() {
            ledger.lock().expect("ledger").killed += 1;
        }
    }
    if !sync_until_ok(clone, ledger) {
        let msg = format!("[{}] could not sync in 20 tries", clone.name);
        ledger.lock().expect("ledger").failures.push(msg);
    }
}

/// Returns a task id from a repo-relative path.
fn id_of(path: &str) -> String {
    let name = path.rsplit('/').next().expect("name");
    name.trim_end_matches(".yaml").to_string()
}

/// A person at work in a clone: their name, the round (for ids and note lines), the run's
/// ledger.
struct Person<'a> {
    clone: &'a Clone,
    round: usize,
    ledger: &'a Shared,
}

impl Person<'_> {
    /// The tag of this round's notes and results: `c2 7`.
    fn tag(&self) -> String {
        format!("{} {}", self.clone.name, self.round)
    }

    /// Commits `paths` with `message` as the person; counts it.
    fn commit(&self, paths: &[&str], message: &str) -> bool {
        let ok = self
            .clone
            .commit(paths, &format!("{}: {message}", self.clone.name));
        if ok {
            self.ledger.lock().expect("ledger").person_commits += 1;
        }
        ok
    }

    /// The task files under `folder`.
    fn tasks_in(&self, folder: &str) -> Vec<String> {
        self.clone.tasks_in(folder)
    }

    /// The push agents' assigned task files.
    fn assigned(&self) -> Vec<String> {
        PUSH_AGENTS
            .iter()
            .flat_map(|a| self.tasks_in(&format!("work/assigned/{a}")))
            .collect()
    }

    /// A new task in the inbox, for a push or a pull agent, one time in three depending on a
    /// task the clone has.
    fn new_task(&self, rng: &mut Rng) {
        let id = format!("{}-{}", self.clone.name, self.round);
        let path = format!("work/inbox/{id}.yaml");
        let cap = if rng.below(2) == 0 { "x" } else { "y" };
        let mut text = format!("title: hand {}\ncapabilities: [{cap}]\n", self.tag());
        let all = self.tasks_in("work");
        if let Some(dep) = rng.pick(&all).filter(|_| rng.below(3) == 0) {
            text.push_str(&format!("depends_on: [{}]\n", id_of(dep)));
        }
        self.clone.repo.write(&path, &text);
        self.clone.git(&["add", &path]);
        if self.commit(&[&path], &format!("new task {id}")) {
            self.ledger.lock().expect("ledger").made.insert(id);
        }
    }

    /// A note line at the top of a task file.
    fn note_in_task(&self, rng: &mut Rng) {
        let Some(path) = rng.pick(&self.tasks_in("work")).cloned() else {
            return;
        };
        let line = format!("# note {}", self.tag());
        let text = format!("{line}\n{}", self.clone.repo.read(&path));
        self.clone.repo.write(&path, &text);
        if self.commit(&[&path], &format!("note in {path}")) {
            let mut l = self.ledger.lock().expect("ledger");
            l.notes_inside.push((id_of(&path), line));
        }
    }

    /// A done task moved back to ready/ with `git mv`.
    fn redo(&self, rng: &mut Rng) {
        let Some(path) = rng.pick(&self.tasks_in("work/done")).cloned() else {
            return;
        };
        let to = format!("work/ready/{}.yaml", id_of(&path));
        if self.clone.git_ok(&["mv", &path, &to]) {
            self.commit(&[&path, &to], &format!("redo {path}"));
        }
    }

    /// A result written by hand into a push agent's task.
    fn hand_result(&self, rng: &mut Rng) {
        let open: Vec<String> = self
            .assigned()
            .into_iter()
            .filter(|p| !self.clone.repo.read(p).contains("\nresult:"))
            .collect();
        let Some(path) = rng.pick(&open).cloned() else {
            return;
        };
        let marker = format!("by {}", self.tag());
        let text = format!(
            "{}result:\n  status: success\n  output: {{by: \"{marker}\"}}\n",
            self.clone.repo.read(&path)
        );
        self.clone.repo.write(&path, &text);
        if self.commit(&[&path], &format!("result for {path}")) {
            let mut l = self.ledger.lock().expect("ledger");
            l.hand_results.push((id_of(&path), marker));
        }
    }

    /// A line added to the person's notes file outside work/.
    fn note_outside(&self) {
        let path = format!("notes/{}.txt", self.clone.name);
        let old = std::fs::read_to_string(self.clone.repo.abs(&path)).unwrap_or_default();
        self.clone
            .repo
            .write(&path, &format!("{old}{}\n", self.tag()));
        self.clone.git(&["add", &path]);
        if self.commit(&[&path], &format!("note {}", self.round)) {
            let mut l = self.ledger.lock().expect("ledger");
            l.notes_outside.push((self.clone.name.clone(), self.tag()));
        }
    }

    /// `coord complete` for a push agent's task, as its runner would.
    fn complete(&self, rng: &mut Rng) {
        let agent = PUSH_AGENTS[rng.below(2) as usize];
        let Some(path) = rng
            .pick(&self.tasks_in(&format!("work/assigned/{agent}")))
            .cloned()
        else {
            return;
        };
        let args = ["complete", &id_of(&path), "--agent", agent];
        if self
            .clone
            .coord(&args, None)
            .is_some_and(|o| o.status.success())
        {
            self.ledger.lock().expect("ledger").completes += 1;
        }
    }

    /// A push agent's task handed to the other push agent with `git mv`.
    fn hand_over(&self, rng: &mut Rng) {
        let Some(path) = rng.pick(&self.assigned()).cloned() else {
            return;
        };
        let other = if path.contains("/alice/") {
            "bob"
        } else {
            "alice"
        };
        let to = format!("work/assigned/{other}/{}.yaml", id_of(&path));
        std::fs::create_dir_all(self.clone.repo.abs(&format!("work/assigned/{other}")))
            .expect("mkdir");
        if self.clone.git_ok(&["mv", &path, &to]) {
            self.commit(&[&path, &to], &format!("hand {path} to {other}"));
        }
    }

    /// A ready or done task deleted with `git rm`.
    fn delete(&self, rng: &mut Rng) {
        let mut open = self.tasks_in("work/ready");
        open.extend(self.tasks_in("work/done"));
        let Some(path) = rng.pick(&open).cloned() else {
            return;
        };
        if self.clone.git_ok(&["rm", "-q", &path])
            && self.commit(&[&path], &format!("remove {path}"))
        {
            let mut l = self.ledger.lock().expect("ledger");
            l.made.remove(&id_of(&path));
            l.deleted.insert(id_of(&path));
        }
    }
}

/// One thing a person does by hand and commits with plain git, or a coord command they run.
fn person_step(clone: &Clone, round: usize, rng: &mut Rng, ledger: &Shared) {
    let person = Person {
        clone,
        round,
        ledger,
    };
    match rng.below(9) {
        0 => person.new_task(rng),
        1 => person.note_in_task(rng),
        2 => person.redo(rng),
        3 => person.hand_result(rng),
        4 => person.note_outside(),
        5 => person.complete(rng),
        6 => sync(clone, rng, ledger),
        7 => person.hand_over(rng),
        _ => person.delete(rng),
    }
}

/// A pull agent's round: claim with --sync, complete with --sync, sometimes a sync.
fn agent_step(clone: &Clone, rng: &mut Rng, ledger: &Shared) {
    let agent = clone.name.as_str();
    let Some(o) = clone.coord(
        &["claim", "--agent", agent, "--sync", "--wait", "10s"],
        None,
    ) else {
        return;
    };
    match o.status.code() {
        Some(0) => {}
        Some(4) => {
            std::thread::sleep(Duration::from_millis(50));
            return;
        }
        code => {
            let msg = format!("[{agent}] claim exited {code:?}: {}", stderr(&o));
            ledger.lock().expect("ledger").failures.push(msg);
            return;
        }
    }
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    ledger.lock().expect("ledger").claims += 1;
    let args = [
        "complete",
        id.as_str(),
        "--agent",
        agent,
        "--sync",
        "--wait",
        "10s",
    ];
    let done = clone.coord(&args, None).expect("not killed");
    match done.status.code() {
        Some(0) => ledger.lock().expect("ledger").completes += 1,
        // The task moved on (a person reopened, reassigned or deleted it): the result is
        // kept in the task's history as stale, and the agent told so.
        Some(1) => ledger.lock().expect("ledger").set_aside.push(stderr(&done)),
        code => {
            let msg = format!("[{agent}] complete {id} exited {code:?}: {}", stderr(&done));
            ledger.lock().expect("ledger").failures.push(msg);
        }
    }
    if rng.below(3) == 0 {
        sync(clone, rng, ledger);
    }
}

/// The remote with push agents alice and bob (capability x, three tasks at a time), pull agents
/// p1 and p2 (capability y), chains of tasks t<i>-1 ← t<i>-2 ← t<i>-3 for the pull agents and
/// six tasks s<i> for the push agents.
fn setup() -> Net {
    let net = Net::new(&[]);
    for a in PUSH_AGENTS {
        net.seed
            .ok(&["agents", "add", a, "--capability", "x", "--max-active", "3"]);
    }
    for a in PULL_AGENTS {
        net.seed.ok(&[
            "agents",
            "add",
            a,
            "--pull",
            "--capability",
            "y",
            "--max-active",
            "2",
        ]);
    }
    for i in 1..=3 {
        for j in 1..=3 {
            let id = format!("t{i}-{j}");
            let mut args = vec!["new", id.as_str(), "--id", id.as_str(), "--capability", "y"];
            let dep = format!("t{i}-{}", j - 1);
            if j > 1 {
                args.extend(["--depends-on", dep.as_str()]);
            }
            net.seed.ok(&args);
        }
    }
    for i in 1..=6 {
        let id = format!("s{i}");
        net.seed.ok(&["new", &id, "--id", &id, "--capability", "x"]);
    }
    net.seed.git(&["push", "-q", "origin", "main"]);
    net
}

/// What the checks found and counted.
struct Figures {
    commits: usize,
}

/// One run: `people` person clones and the two pull agents, `rounds` rounds each, all at once.
fn run(seed: u64, people: usize, rounds: usize) -> (Ledger, Figures) {
    eprintln!("stress run: seed {seed}, {rounds} rounds (repeat with COORD_STRESS_SEED={seed} COORD_STRESS={rounds})");
    let net = setup();
    let ledger: Shared = Arc::default();
    let clones: Vec<Arc<Clone>> = (1..=people)
        .map(|k| format!("c{k}"))
        .chain(PULL_AGENTS.iter().map(|a| a.to_string()))
        .map(|name| {
            Arc::new(Clone {
                repo: net.clone(),
                name,
            })
        })
        .collect();
    let workers: Vec<_> = clones
        .iter()
        .enumerate()
        .map(|(n, clone)| {
            let (clone, ledger) = (Arc::clone(clone), Arc::clone(&ledger));
            std::thread::spawn(move || {
                let mut rng = Rng((seed ^ (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
                let person = n < people;
                for round in 0..rounds {
                    if person {
                        person_step(&clone, round, &mut rng, &ledger);
                        if rng.below(2) == 0 {
                            sync(&clone, &mut rng, &ledger);
                        }
                    } else {
                        agent_step(&clone, &mut rng, &ledger);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    // Settle: every clone syncs until it succeeds, twice round, so each sees the others' work.
    for _ in 0..2 {
        for clone in &clones {
            assert!(sync_until_ok(clone, &ledger), "[{}] final sync", clone.name);
        }
    }
    let ledger = Arc::try_unwrap(ledger)
        .ok()
        .expect("workers done")
        .into_inner()
        .expect("ledger");
    let figures = check(&net, &clones, &ledger);
    (ledger, figures)
}

/// A task file's fields the checks read: coord's attempt and assignee, the accepted result's
/// agent and attempt, and the ids it depends on.
#[derive(Clone, Default)]
struct TaskInfo {
    attempt: Option<u64>,
    assigned_to: Option<String>,
    result: Option<(Option<String>, Option<u64>)>,
    depends_on: Vec<String>,
}

/// Reads the top-level block `key:` of a task's YAML: its direct `  field: value` children.
fn block<'a>(text: &'a str, key: &str) -> Option<BTreeMap<&'a str, &'a str>> {
    let mut lines = text.lines().skip_while(|l| *l != format!("{key}:"));
    lines.next()?;
    let fields = lines
        .take_while(|l| l.starts_with(' '))
        .filter_map(|l| l.strip_prefix("  ")?.split_once(": "))
        .filter(|(k, _)| !k.starts_with(' '))
        .collect();
    Some(fields)
}

fn task_info(text: &str) -> TaskInfo {
    let coord = block(text, "coord").unwrap_or_default();
    let result = block(text, "result").map(|r| {
        let agent = r.get("agent").map(|s| s.to_string());
        (agent, r.get("attempt").and_then(|a| a.parse().ok()))
    });
    let mut depends_on = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some(flow) = l.strip_prefix("depends_on: [") {
            let items = flow.trim_end_matches(']').split(',');
            depends_on.extend(
                items
                    .map(|d| d.trim().to_string())
                    .filter(|d| !d.is_empty()),
            );
        } else if l == "depends_on:" {
            for item in lines.by_ref().map_while(|l| l.trim().strip_prefix("- ")) {
                depends_on.push(item.trim().to_string());
            }
        }
    }
    TaskInfo {
        attempt: coord.get("attempt").and_then(|a| a.parse().ok()),
        assigned_to: coord.get("assigned_to").map(|s| s.to_string()),
        result,
        depends_on,
    }
}

/// The task files of one commit under work/ (agent profiles aside): (path, blob).
type Files = Vec<(String, git2::Oid)>;

/// Lists the task files under `tree` (the tree at `prefix`), each subtree once over the whole
/// history (`memo`).
fn files(
    repo: &git2::Repository,
    tree: git2::Oid,
    prefix: &str,
    memo: &mut HashMap<(git2::Oid, String), Arc<Files>>,
) -> Arc<Files> {
    let key = (tree, prefix.to_string());
    if let Some(f) = memo.get(&key) {
        return Arc::clone(f);
    }
    let mut out = Vec::new();
    let t = repo.find_tree(tree).expect("tree");
    for e in t.iter() {
        let name = e.name().expect("utf8 name");
        let path = format!("{prefix}/{name}");
        match e.kind() {
            Some(git2::ObjectType::Tree) if path != "work/agents" => {
                out.extend(files(repo, e.id(), &path, memo).iter().cloned());
            }
            Some(git2::ObjectType::Blob) if name.ends_with(".yaml") || name.ends_with(".yml") => {
                out.push((path, e.id()));
            }
            _ => {}
        }
    }
    let out = Arc::new(out);
    memo.insert(key, Arc::clone(&out));
    out
}

/// The id and folder of a task file's path (`work/assigned/alice/x.yaml` → x, assigned/alice).
fn split(path: &str) -> (String, String) {
    let (folder, name) = path.rsplit_once('/').expect("folder");
    let id = name.trim_end_matches(".yaml").trim_end_matches(".yml");
    (
        id.to_string(),
        folder.trim_start_matches("work/").to_string(),
    )
}

/// The violations the checks found.
struct Found(BTreeSet<String>);

impl Found {
    /// Records a violation.
    fn add(&mut self, what: String) {
        self.0.insert(what);
    }
}

/// The walk over the remote's history, oldest commit first, and what it carries from one commit
/// to the next.
struct History<'r> {
    repo: &'r git2::Repository,
    remote: &'r Path,
    memo: HashMap<(git2::Oid, String), Arc<Files>>,
    infos: HashMap<git2::Oid, TaskInfo>,
    /// The agents each (task, attempt) was assigned to or credited with a result.
    credited: BTreeMap<(String, u64), BTreeSet<String>>,
    /// The sets of places each id was found in at once (each reported once).
    seen_twice: HashMap<String, BTreeSet<String>>,
    /// The ids under assigned/ in the commit before.
    assigned_before: BTreeSet<String>,
}

impl History<'_> {
    fn info(&mut self, blob: git2::Oid) -> TaskInfo {
        let repo = self.repo;
        self.infos
            .entry(blob)
            .or_insert_with(|| {
                let b = repo.find_blob(blob).expect("blob");
                task_info(&String::from_utf8_lossy(b.content()))
            })
            .clone()
    }

    /// Checks one commit; returns its task files.
    fn commit(&mut self, commit: &git2::Commit, bad: &mut Found) -> Arc<Files> {
        let subject = commit.summary().ok().flatten().unwrap_or("").to_string();
        let c = format!("{} {subject:?}", &commit.id().to_string()[..10]);
        let list = match commit.tree().expect("tree").get_path(Path::new("work")) {
            Ok(e) => files(self.repo, e.id(), "work", &mut self.memo),
            Err(_) => Arc::new(Vec::new()),
        };
        let mut places: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (path, _) in list.iter() {
            places.entry(split(path).0).or_default().push(path.clone());
        }
        for (id, at) in &places {
            let new = self
                .seen_twice
                .entry(id.clone())
                .or_default()
                .insert(at.join(" "));
            if at.len() > 1 && new {
                let log = story(self.remote, &commit.id().to_string(), at);
                bad.add(format!("TWO PLACES in {c}: {at:?}\n{log}"));
            }
        }
        let folder_of: HashMap<String, String> = list.iter().map(|(p, _)| split(p)).collect();
        let mut assigned_now = BTreeSet::new();
        for (path, blob) in list.iter() {
            let (id, folder) = split(path);
            let t = self.info(*blob);
            if let Some(agent) = folder.strip_prefix("assigned/") {
                assigned_now.insert(id.clone());
                let who = t.assigned_to.clone().unwrap_or_else(|| agent.to_string());
                if let Some(a) = t.attempt {
                    self.credited
                        .entry((id.clone(), a))
                        .or_default()
                        .insert(who);
                }
                if !self.assigned_before.contains(&id) {
                    entered(&id, &t, &folder_of, &format!("{folder} in {c}"), bad);
                }
            }
            if let (true, Some((Some(agent), Some(a)))) = (folder == "done", &t.result) {
                let key = (id.clone(), *a);
                self.credited.entry(key).or_default().insert(agent.clone());
            }
        }
        self.assigned_before = assigned_now;
        list
    }
}

/// A task that entered assigned/ (`where_`) with one of its dependencies out of done/ is a
/// violation; a dependency that is gone is none.
fn entered(
    id: &str,
    t: &TaskInfo,
    folder_of: &HashMap<String, String>,
    where_: &str,
    bad: &mut Found,
) {
    let open: Vec<(&String, &String)> = t
        .depends_on
        .iter()
        .filter_map(|d| folder_of.get(d).map(|f| (d, f)))
        .filter(|(_, f)| *f != "done" && !f.starts_with("archive"))
        .collect();
    if !open.is_empty() {
        bad.add(format!(
            "{id} entered {where_} while {open:?} (dependency, folder)"
        ));
    }
}

/// Walks every commit of the remote's main, oldest first; returns how many and the tip's task
/// files by id with their text.
fn walk_history(
    net: &Net,
    repo: &git2::Repository,
    bad: &mut Found,
) -> (usize, HashMap<String, String>) {
    let mut walk = repo.revwalk().expect("revwalk");
    walk.push_ref("refs/heads/main").expect("main");
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
        .expect("sort");
    let mut history = History {
        repo,
        remote: net.remote.path(),
        memo: HashMap::new(),
        infos: HashMap::new(),
        credited: BTreeMap::new(),
        seen_twice: HashMap::new(),
        assigned_before: BTreeSet::new(),
    };
    let (mut commits, mut tip) = (0, Arc::default());
    for oid in walk {
        let commit = repo.find_commit(oid.expect("walk")).expect("commit");
        tip = history.commit(&commit, bad);
        commits += 1;
    }
    for ((id, attempt), agents) in &history.credited {
        if agents.len() > 1 {
            bad.add(format!("{id} attempt {attempt} credited to {agents:?}"));
        }
    }
    let at_tip = tip
        .iter()
        .map(|(p, b)| {
            let blob = repo.find_blob(*b).expect("blob");
            let text = String::from_utf8_lossy(blob.content()).into_owned();
            (split(p).0, text)
        })
        .collect();
    (commits, at_tip)
}

/// The whole-history checks; panics with every violation found.
fn check(net: &Net, clones: &[Arc<Clone>], ledger: &Ledger) -> Figures {
    let repo = git2::Repository::open_bare(net.remote.path()).expect("open the remote");
    let mut bad = Found(BTreeSet::new());
    let (commits, at_tip) = walk_history(net, &repo, &mut bad);
    lost_at_tip(net, ledger, &at_tip, &mut bad);
    for clone in clones {
        let status = clone.git(&["status", "--porcelain", "--untracked-files=all"]);
        let status = String::from_utf8_lossy(&status.stdout).into_owned();
        if !status.is_empty() {
            bad.add(format!("[{}] not clean:\n{status}", clone.name));
        }
        fsck(clone.repo.path(), &clone.name, &mut bad);
    }
    fsck(net.remote.path(), "remote", &mut bad);
    hand_results_lost(&repo, ledger, &mut bad);
    if !bad.0.is_empty() {
        let kept = keep(net, clones);
        let (n, all) = (bad.0.len(), join(&bad.0));
        panic!("{n} violations (repos kept in {kept}):\n{all}");
    }
    Figures { commits }
}

/// The commits up to `commit` that touched `paths`, with the files they changed: how a task came
/// to be where the check found it.
fn story(remote: &Path, commit: &str, paths: &[String]) -> String {
    let mut args = vec![
        "log",
        "-12",
        "--format=%h %an: %s",
        "--name-status",
        commit,
        "--",
    ];
    args.extend(paths.iter().map(String::as_str));
    let out = Command::new("git")
        .current_dir(remote)
        .args(&args)
        .output()
        .expect("git log");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Copies the remote and the clones of a failed run where they outlive the test; returns where.
fn keep(net: &Net, clones: &[Arc<Clone>]) -> String {
    let to = std::env::temp_dir().join(format!("coord-stress-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&to);
    let copy = |from: &Path, name: &str| {
        let _ = Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to.join(name))
            .status();
    };
    copy(net.remote.path(), "remote.git");
    for c in clones {
        copy(c.repo.path(), &c.name);
    }
    to.display().to_string()
}

fn join(lines: &BTreeSet<String>) -> String {
    lines.iter().cloned().collect::<Vec<_>>().join("\n")
}

fn fsck(dir: &Path, name: &str, bad: &mut Found) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["fsck", "--no-progress", "--strict"])
        .envs(git_env())
        .output()
        .expect("git fsck");
    if !out.status.success() {
        bad.add(format!("[{name}] git fsck: {}", stderr(&out)));
    }
}

/// Every note and every hand-made task (not deleted by a person) is on the remote's tip.
fn lost_at_tip(net: &Net, ledger: &Ledger, at_tip: &HashMap<String, String>, bad: &mut Found) {
    for id in &ledger.made {
        if !at_tip.contains_key(id) {
            bad.add(format!("LOST hand-made task {id}"));
        }
    }
    for (id, line) in &ledger.notes_inside {
        let kept = at_tip.get(id).is_some_and(|t| t.lines().any(|l| l == line));
        if !kept && !ledger.deleted.contains(id) {
            bad.add(format!("LOST note {line:?} in task {id}"));
        }
    }
    let remote = net.remote.path();
    for (clone, line) in &ledger.notes_outside {
        let out = Command::new("git")
            .current_dir(remote)
            .args(["show", &format!("main:notes/{clone}.txt")])
            .output()
            .expect("git show");
        if !String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == line)
        {
            bad.add(format!("LOST note {line:?} in notes/{clone}.txt"));
        }
    }
}

/// Every result a person wrote by hand into a task and committed reached the remote (accepted,
/// or kept in the task's history as stale), unless a person deleted the task or let go a
/// conflicting change of it (sync drops the task's later edits with it, with a line).
fn hand_results_lost(repo: &git2::Repository, ledger: &Ledger, bad: &mut Found) {
    for (id, marker) in &ledger.hand_results {
        if ledger.deleted.contains(id) || ledger.let_go_ids.contains(id) {
            continue;
        }
        let grep = Command::new("git")
            .current_dir(repo.path())
            .args(["log", "--format=%h", "-S", marker, "main"])
            .output()
            .expect("git log -S");
        if grep.stdout.is_empty() {
            bad.add(format!("LOST result {marker:?} written into {id}"));
        }
    }
}

/// Runs the stress runs; panics on a violation or an unexpected failure of a command.
fn sweep(seed: u64, total_rounds: usize, per_run: usize, people: usize) {
    let start = Instant::now();
    let (mut done, mut n) = (0, 0);
    let mut totals = Ledger::default();
    let mut commits = 0;
    while done < total_rounds {
        let rounds = per_run.min(total_rounds - done);
        let (ledger, figures) = run(seed.wrapping_add(n), people, rounds);
        assert!(
            ledger.failures.is_empty(),
            "seed {}: {:#?}",
            seed.wrapping_add(n),
            ledger.failures
        );
        commits += figures.commits;
        add(&mut totals, ledger);
        done += rounds;
        n += 1;
    }
    let mut ms = totals.sync_ms.clone();
    ms.sort_unstable();
    let p = |q: f64| {
        ms.get(((ms.len().max(1) - 1) as f64 * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    eprintln!(
        "stress: {n} run(s), {done} rounds x {people} people + {} pull agents in {:.1}s: {commits} commits on the remotes, {} person commits, {} syncs ({} killed, p50 {} ms, p99 {} ms), {} conflicts ({} edits made again, advice's git show failed {}, {} let go: {:?}), {} claims, {} completes, {} hand-made tasks kept, {} notes in tasks, {} notes outside work/, {} hand results",
        PULL_AGENTS.len(),
        start.elapsed().as_secs_f64(),
        totals.person_commits,
        totals.syncs,
        totals.killed,
        p(0.5),
        p(0.99),
        totals.conflicts,
        totals.remade,
        totals.advice_show_failed,
        totals.let_go.len(),
        totals.let_go,
        totals.claims,
        totals.completes,
        totals.made.len(),
        totals.notes_inside.len(),
        totals.notes_outside.len(),
        totals.hand_results.len(),
    );
}

/// Adds one run's counts to the totals.
fn add(totals: &mut Ledger, l: Ledger) {
    totals.made.extend(l.made);
    totals.notes_inside.extend(l.notes_inside);
    totals.notes_outside.extend(l.notes_outside);
    totals.hand_results.extend(l.hand_results);
    totals.let_go_ids.extend(l.let_go_ids);
    totals.syncs += l.syncs;
    totals.killed += l.killed;
    totals.conflicts += l.conflicts;
    totals.remade += l.remade;
    totals.advice_show_failed += l.advice_show_failed;
    totals.let_go.extend(l.let_go);
    totals.claims += l.claims;
    totals.completes += l.completes;
    totals.person_commits += l.person_commits;
    totals.sync_ms.extend(l.sync_ms);
}

#[test]
fn clones_with_people_committing_and_syncs_killed_keep_every_invariant_over_the_whole_history() {
    let seed = std::env::var("COORD_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let rounds = std::env::var("COORD_STRESS")
        .ok()
        .and_then(|s| s.parse().ok());
    match rounds {
        Some(rounds) => sweep(seed, rounds, 40, 4),
        None => sweep(seed, 8, 8, 3),
    }
}

/// Found by the run above: a person moves a task between agents' folders by hand (`git mv
/// work/assigned/bob/x.yaml work/assigned/alice/`) while another clone added a note inside
/// it. sync stopped and named only the deleted path; as advised, the person synced with
/// `--drop-edit` (the delete was left out, the add landed: x assigned to both agents on the
/// remote), then deleted the old file again. Now the move lands with both changes, or stops as
/// one conflict; followed as its advice says, the remote never has x in two places.
#[test]
fn a_hand_move_resolved_as_the_conflict_advises_never_puts_the_task_in_two_places() {
    let net = Net::new(&[]);
    for a in PUSH_AGENTS {
        net.seed
            .ok(&["agents", "add", a, "--capability", "x", "--max-active", "3"]);
    }
    net.seed.task("x", "title: x\ncapabilities: [x]\n");
    net.seed.ok(&["sync"]);
    let (person, other) = (net.clone(), net.clone());
    let from = person.where_is("x");
    let to = if from.contains("/alice/") {
        "work/assigned/bob/x.yaml"
    } else {
        "work/assigned/alice/x.yaml"
    };
    other.commit_file(&from, &format!("# a note\n{}", other.read(&from)), "a note");
    other.ok(&["sync"]);
    std::fs::create_dir_all(person.abs(to).parent().expect("folder")).expect("mkdir");
    person.git(&["mv", &from, to]);
    person.git(&["commit", "-q", "-m", "hand x over"]);
    let out = person.run(&["sync"]);
    if !out.status.success() {
        let err = stderr(&out);
        let conflict = parse_conflict(&err).unwrap_or_else(|| panic!("a conflict: {err}"));
        person.ok(&["sync", "--drop-edit", &conflict.drop]);
        if let Then::DeleteAgain(there) = conflict.then {
            person.git(&["rm", "-q", &there]);
            person.git(&["commit", "-q", "-m", "delete it again"]);
            person.ok(&["sync"]);
        }
    }
    let check = net.clone();
    for commit in check.git(&["rev-list", "HEAD"]).lines() {
        let files = check.git(&["ls-tree", "-r", "--name-only", commit, "work/assigned"]);
        let x: Vec<&str> = files.lines().filter(|p| p.ends_with("/x.yaml")).collect();
        let subject = check.git(&["log", "-1", "--format=%s", commit]);
        assert!(x.len() < 2, "x in {x:?} in {subject}");
    }
    assert_eq!(check.find("x").len(), 1, "{:?}", check.find("x"));
}

/// Found by the long run: a `coord sync` killed while its `git fetch` updated the
/// remote-tracking ref leaves `refs/remotes/origin/main.lock` behind (the fetch dies with
/// coord). Every later sync retried the fetch thirty times and failed with "…may have crashed
/// in this repository earlier:; remove the file manually to continue", without naming the
/// file: the clone was stuck until a person found it. A lock no process has open, older than
/// git ever holds one, is a killed git's (a live one is waited for:
/// `plain_git::a_sync_waits_for_a_persons_git_holding_the_remote_tracking_ref`).
#[test]
fn a_tracking_ref_lock_left_by_a_killed_fetch_does_not_stop_later_syncs() {
    let net = Net::new(&["a1"]);
    let (clone, other) = (net.clone(), net.clone());
    let lock = clone.abs(".git/refs/remotes/origin/main.lock");
    std::fs::create_dir_all(lock.parent().expect("folder")).expect("mkdir");
    std::fs::write(&lock, "").expect("write the lock");
    crate::harness::set_old_mtime(&lock);
    other.commit_file("notes.txt", "a note\n", "a note");
    other.git(&["push", "-q", "origin", "main"]);
    let (_, err) = clone.code(&["sync"], 0);
    assert!(clone.exists("notes.txt"), "{err}");
    assert!(!lock.exists(), "{err}");
}
