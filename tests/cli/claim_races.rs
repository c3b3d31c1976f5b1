//! Agents on many clones taking tasks with `coord claim --sync` and no hub: every clone gets
//! its share of the work, no claim gives up while tasks are ready, each task is granted once
//! on the remote (the claim refs `refs/coord/claims/<task>/<attempt>` pick one winner), and a
//! claimer killed between its claim ref and its branch push gives the task to no one twice.

use crate::harness::{git_in, Net, TestRepo};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// A remote with the pull agents `agents` (room for every task).
fn pull_net(agents: &[&str]) -> Net {
    let net = Net::new(&[]);
    for a in agents {
        net.seed
            .ok(&["agents", "add", a, "--pull", "--max-active", "1000"]);
    }
    net.seed.git(&["push", "-q", "origin", "main"]);
    net
}

/// What one clone's loop of `coord claim --sync` got: the ids it was told, each exit other
/// than 0 (a task) and 4 (nothing left) with its stderr, and the races its claims lost.
#[derive(Debug, Default)]
struct Claims {
    ids: Vec<String>,
    failures: Vec<(Option<i32>, String)>,
    /// Claim refs another clone created first.
    refs_lost: usize,
    /// Branch pushes rejected because the remote had moved.
    branch_rejected: usize,
}

/// Runs `coord claim --agent AGENT --sync` in `clone` until it exits 4 (nothing ready),
/// with `bin` (None: the binary under test).
fn claim_until_empty(clone: &TestRepo, agent: &str, bin: Option<&Path>) -> Claims {
    let mut got = Claims::default();
    loop {
        let mut cmd = clone.spawn_cmd(&["claim", "--agent", agent, "--sync", "--wait", "10s"]);
        if let Some(bin) = bin {
            cmd = with_program(cmd, bin);
        }
        let out = cmd.output().expect("run coord claim");
        let err = String::from_utf8_lossy(&out.stderr);
        got.refs_lost += err.matches("first; taking the next ready task").count();
        got.branch_rejected += err.matches("push rejected").count()
            + err.matches("the branch moved meanwhile").count();
        match out.status.code() {
            Some(0) => got
                .ids
                .push(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            Some(4) => return got,
            code => {
                let err = String::from_utf8_lossy(&out.stderr).into_owned();
                got.failures.push((code, err));
                if got.failures.len() > 20 {
                    return got;
                }
            }
        }
    }
}

/// What a race of clones claiming in loops came to.
struct Race {
    agents: Vec<String>,
    results: Vec<Claims>,
    took: Duration,
    net: Net,
}

/// `clones` clones (pull agents p1, p2, …) claim `tasks` ready tasks in loops at once with
/// `bin` (None: the binary under test), then each syncs once, so the claims whose branch
/// push lost a race reach the remote.
fn race(clones: usize, tasks: usize, bin: Option<&Path>) -> Race {
    let agents: Vec<String> = (1..=clones).map(|i| format!("p{i}")).collect();
    let names: Vec<&str> = agents.iter().map(String::as_str).collect();
    let net = pull_net(&names);
    let repos: Vec<TestRepo> = agents.iter().map(|_| net.clone()).collect();
    net.person_adds("t", tasks);
    net.clone().ok(&["sync"]);
    let start = Instant::now();
    let results: Vec<Claims> = std::thread::scope(|s| {
        let handles: Vec<_> = repos
            .iter()
            .zip(&agents)
            .map(|(clone, agent)| s.spawn(move || claim_until_empty(clone, agent, bin)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("claimer"))
            .collect()
    });
    let took = start.elapsed();
    for clone in &repos {
        clone.ok(&["sync"]);
    }
    Race {
        agents,
        results,
        took,
        net,
    }
}

/// Checks a race: no claim failed while work was ready, every task told to one agent, each
/// clone at least half its fair share, `coord verify` clean on a fresh clone, and every task
/// in its agent's folder there.
fn check(race: &Race, tasks: usize) {
    let counts: Vec<usize> = race.results.iter().map(|c| c.ids.len()).collect();
    for (agent, got) in race.agents.iter().zip(&race.results) {
        assert!(
            got.failures.is_empty(),
            "{agent}'s claims failed while work was ready: {:?}",
            got.failures
        );
    }
    let mut holder: BTreeMap<&str, &str> = BTreeMap::new();
    for (agent, got) in race.agents.iter().zip(&race.results) {
        for id in &got.ids {
            if let Some(other) = holder.insert(id, agent) {
                panic!("{id} was told to {other} and to {agent}");
            }
        }
    }
    assert_eq!(holder.len(), tasks, "claims per clone {counts:?}");
    let fair = tasks / race.agents.len();
    for (agent, n) in race.agents.iter().zip(&counts) {
        assert!(
            *n >= fair / 2,
            "{agent} got {n} of {tasks} tasks, under half its fair share of {fair}: {counts:?}"
        );
    }
    let check = race.net.clone();
    let (out, _) = check.code(&["verify"], 0);
    assert!(out.contains("clean"), "{out}");
    for (id, agent) in holder {
        assert_eq!(
            check.where_is(id),
            format!("work/assigned/{agent}/{id}.yaml")
        );
    }
}

/// Four clones claim ready tasks in loops at once (80 by default; `COORD_CLAIM_RACE_TASKS` sets
/// more, e.g. 200). Each clone gets at least half of its fair share, no claim exits 1 while
/// work is ready (it used to give up after 30 rejected pushes, and the clone that won once kept
/// winning while the others backed off for up to 5 s), and a fresh clone's `coord verify`
/// finds each task granted once.
#[test]
fn four_clones_claiming_in_loops_share_the_work_and_never_give_up_while_work_is_ready() {
    let tasks_var = std::env::var("COORD_CLAIM_RACE_TASKS").ok();
    let tasks: usize = tasks_var.and_then(|v| v.parse().ok()).unwrap_or(80);
    let race = race(4, tasks, None);
    let counts: Vec<usize> = race.results.iter().map(|c| c.ids.len()).collect();
    eprintln!("claims per clone {counts:?} in {:?}", race.took);
    check(&race, tasks);
}

/// Eight clones race for 40 tasks: the claim refs give each task to one clone (a loser of a
/// ref takes the next task at once, with no fetch or rebase), every claim is on the remote
/// once the clones synced, and the next claim prunes the refs of the claims that landed.
#[test]
fn eight_clones_claiming_by_claim_refs_grant_each_task_once() {
    let tasks = 40;
    let race = race(8, tasks, None);
    let lost: usize = race.results.iter().map(|c| c.refs_lost).sum();
    let counts: Vec<usize> = race.results.iter().map(|c| c.ids.len()).collect();
    eprintln!(
        "claims per clone {counts:?} in {:?}, {lost} claim refs lost",
        race.took
    );
    check(&race, tasks);
    let refs = git_in(
        race.net.remote.path(),
        &["for-each-ref", "refs/coord/claims/"],
    );
    assert!(
        refs.lines().count() <= tasks,
        "one claim ref per task at most: {refs}"
    );
    race.net.person_adds("u", 1);
    let clone = race.net.clone();
    clone.ok(&["sync"]);
    assert_eq!(
        clone.ok(&["claim", "--agent", "p1", "--sync"]).trim(),
        "u-0"
    );
    let refs = git_in(
        race.net.remote.path(),
        &["for-each-ref", "--format=%(refname)", "refs/coord/claims/"],
    );
    assert_eq!(
        refs.trim(),
        "refs/coord/claims/u-0/1",
        "the landed claims' refs are pruned"
    );
}

/// A remote hook that holds the first push creating a claim ref for a moment after the ref
/// is made (`post-receive`), writing `marker` first, so the test can kill the claimer there.
fn hold_first_claim_ref(remote: &Path, marker: &Path) {
    let hook = remote.join("hooks/post-receive");
    let body = format!(
        "#!/bin/sh\nif grep -q refs/coord/claims/ && [ ! -e '{m}' ]; then touch '{m}'; sleep 30; fi\n",
        m = marker.display()
    );
    std::fs::write(&hook, body).expect("hook");
    let mut perms = std::fs::metadata(&hook).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).expect("chmod");
}

/// A claimer killed with SIGKILL after its claim ref was created and before its branch push:
/// the ref holds the task (another clone's claim passes it over at once and exits 4), no one
/// holds it on the branch, and once the task's timeout has passed since another clone first
/// saw the ref, that clone's claim takes the task over the ref. The task is granted once in
/// the remote's history, and the killed clone's next claim finds nothing of its own to carry.
#[test]
fn a_claimer_killed_between_its_claim_ref_and_its_branch_push_gives_the_task_once() {
    let net = pull_net(&["p1", "p2"]);
    let (a, b) = (net.clone(), net.clone());
    net.seed.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    net.seed.task("t", "title: T\ntimeout: 3s\n");
    net.seed.git(&["add", "work/inbox"]);
    net.seed.git(&["commit", "-q", "-m", "add t"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    net.clone().ok(&["sync"]);
    let marker = net.remote.path().join("claim-ref-made");
    hold_first_claim_ref(net.remote.path(), &marker);
    let mut claimer = a.spawn(&["claim", "--agent", "p1", "--sync"]);
    let waited = Instant::now();
    while !marker.exists() {
        assert!(waited.elapsed() < Duration::from_secs(60), "no claim ref");
        std::thread::sleep(Duration::from_millis(20));
    }
    claimer.kill().expect("kill -9");
    claimer.wait().expect("reap");
    let refs = git_in(net.remote.path(), &["for-each-ref", "refs/coord/claims/"]);
    assert!(refs.contains("refs/coord/claims/t/1"), "{refs}");
    let (_, err) = b.code(&["claim", "--agent", "p2", "--sync"], 4);
    assert!(
        err.contains("held by another clone's claim") || err.contains("nothing"),
        "{err}"
    );
    assert_eq!(net.clone().where_is("t"), "work/ready/t.yaml");
    std::thread::sleep(Duration::from_secs(4));
    let got = b.ok(&["claim", "--agent", "p2", "--sync"]);
    assert_eq!(got.trim(), "t");
    a.code(&["claim", "--agent", "p1", "--sync"], 4);
    a.ok(&["sync"]);
    let check = net.clone();
    assert_eq!(check.where_is("t"), "work/assigned/p2/t.yaml");
    let (out, _) = check.code(&["verify"], 0);
    assert!(out.contains("clean"), "{out}");
}

/// The sweep behind docs/performance.md, "Push races between clones": 8 clones claim 40
/// tasks with claim refs, next to the same race with the binary `COORD_CLAIM_SWEEP` names (a
/// build without claim refs, whose claims race for the branch), alternating, `COORD_CLAIM_SWEEP_RUNS`
/// (default 2) times each. Prints claims/s and the rejected share of pushes. Skipped unless
/// `COORD_CLAIM_SWEEP` is set.
#[test]
fn sweep_claim_refs_against_branch_races() {
    let Some(baseline) = std::env::var_os("COORD_CLAIM_SWEEP") else {
        return;
    };
    let runs: usize = std::env::var("COORD_CLAIM_SWEEP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let (clones, tasks) = (8, 40);
    for run in 0..runs {
        for (label, bin) in [
            ("claim refs", None),
            ("branch races", Some(Path::new(&baseline))),
        ] {
            let race = race(clones, tasks, bin);
            let claims: usize = race.results.iter().map(|c| c.ids.len()).sum();
            let lost: usize = race.results.iter().map(|c| c.refs_lost).sum();
            let rejected: usize = race.results.iter().map(|c| c.branch_rejected).sum();
            let ref_pushes = if bin.is_none() { claims + lost } else { 0 };
            let pushes = claims + rejected + ref_pushes;
            let counts: Vec<usize> = race.results.iter().map(|c| c.ids.len()).collect();
            eprintln!(
                "run {run} {label}: {claims} claims in {:.1} s = {:.2}/s; pushes {pushes} \
                 ({ref_pushes} to claim refs), rejected {} ({lost} refs, {rejected} branch) = {:.0} %; per clone {counts:?}; load {}",
                race.took.as_secs_f64(),
                claims as f64 / race.took.as_secs_f64(),
                lost + rejected,
                100.0 * (lost + rejected) as f64 / pushes.max(1) as f64,
                std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
            );
        }
    }
}

/// Returns `cmd` (from [`TestRepo::spawn_cmd`]) running `bin` instead, with the same
/// arguments, directory and environment.
fn with_program(cmd: std::process::Command, bin: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(bin);
    c.args(cmd.get_args()).env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c
}

/// A fresh shallow clone (`git clone --depth 1`) fetches the claim refs with its first claim:
/// it passes over the task a killed claimer's ref holds and takes the next one.
#[test]
fn a_fresh_shallow_clone_passes_over_the_task_a_claim_ref_holds() {
    let net = pull_net(&["p1", "p2"]);
    let a = net.clone();
    net.person_adds("t", 2);
    net.clone().ok(&["sync"]);
    let marker = net.remote.path().join("claim-ref-made");
    hold_first_claim_ref(net.remote.path(), &marker);
    let mut claimer = a.spawn(&["claim", "--agent", "p1", "--sync"]);
    let waited = Instant::now();
    while !marker.exists() {
        assert!(waited.elapsed() < Duration::from_secs(60), "no claim ref");
        std::thread::sleep(Duration::from_millis(20));
    }
    claimer.kill().expect("kill -9");
    claimer.wait().expect("reap");
    let shallow = TestRepo::empty_in_memory();
    let url = format!("file://{}", net.remote.path().display());
    git_in(shallow.path(), &["clone", "-q", "--depth", "1", &url, "."]);
    assert_eq!(
        shallow.ok(&["claim", "--agent", "p2", "--sync"]).trim(),
        "t-1"
    );
    let check = net.clone();
    assert_eq!(check.where_is("t-0"), "work/ready/t-0.yaml");
    assert_eq!(check.where_is("t-1"), "work/assigned/p2/t-1.yaml");
    let (out, _) = check.code(&["verify"], 0);
    assert!(out.contains("clean"), "{out}");
}
