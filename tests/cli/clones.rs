//! Clones of one bare remote: a killed `coord sync` leaves no git process behind.

use crate::harness::{Net, TestRepo};
use std::path::Path;
use std::time::{Duration, Instant};

/// Returns the pids of processes whose command line mentions `needle` or whose working
/// directory is `dir`.
fn processes_about(needle: &str, dir: &Path) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
        if cmdline.contains(needle) || cwd.as_deref() == Some(dir) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Makes the clone's fetches slow: its `origin` runs upload-pack through a script that says
/// it started, then sleeps. Returns the marker file the script writes.
fn slow_upload_pack(clone: &TestRepo, secs: u32) -> std::path::PathBuf {
    let marker = clone.abs(".git/slow-upload-pack.started");
    let body = format!(
        "touch '{}'\nsleep {secs}\nexec git-upload-pack \"$@\"\n",
        marker.display()
    );
    clone.wrap_remote_program("uploadpack", "slow-upload-pack", &body);
    marker
}

#[test]
fn a_sync_killed_during_a_slow_fetch_leaves_no_git_running() {
    let net = Net::new(&["alice"]);
    let clone = net.clone();
    let marker = slow_upload_pack(&clone, 20);
    let mut sync = clone.spawn(&["sync"]);
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "fetch never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let root = clone.path().canonicalize().expect("canonical");
    assert!(
        processes_about("slow-upload-pack", &root)
            .iter()
            .any(|(_, c)| c.contains("fetch")),
        "git fetch runs while sync waits for it"
    );
    sync.kill().expect("kill -9");
    sync.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut left = processes_about("slow-upload-pack", &root);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_about("slow-upload-pack", &root);
    }
    assert!(left.is_empty(), "left running after kill -9: {left:?}");
    clone.git(&["config", "--unset", "remote.origin.uploadpack"]);
    clone.ok(&["sync"]);
}

/// Returns the remote's copy of a task file and where it is.
fn on_remote(net: &Net, id: &str) -> (String, String) {
    let check = net.clone();
    let at = check.where_is(id);
    (at.clone(), check.read(&at))
}

#[test]
fn a_result_for_a_task_cancelled_meanwhile_is_kept_as_stale_and_sync_goes_on() {
    let net = Net::new(&["alice"]);
    let (agent, person) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    agent.ok(&["sync"]);
    person.ok(&["sync"]);
    assert_eq!(agent.where_is("t-0"), "work/assigned/alice/t-0.yaml");
    agent.write("out.yaml", "answer: 42\n");
    agent.ok(&["complete", "t-0", "--output", "out.yaml"]);
    person.ok(&["cancel", "t-0", "--reason", "not needed"]);
    person.ok(&["sync"]);
    let (_, err) = agent.code(&["sync"], 0);
    assert!(err.contains("stale_result"), "{err}");
    let (at, text) = on_remote(&net, "t-0");
    assert_eq!(at, "work/cancelled/t-0.yaml");
    assert!(
        text.contains("event: stale_result") && text.contains("answer: 42"),
        "the result is kept in the history:\n{text}"
    );
    assert_eq!(agent.git_status(), "?? out.yaml\n");
}

#[test]
fn a_reassign_made_while_the_task_changed_upstream_lands_on_the_new_agent() {
    let net = Net::new(&["alice", "bob"]);
    let (agent, person) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    agent.ok(&["sync"]);
    person.ok(&["sync"]);
    assert_eq!(agent.where_is("t-0"), "work/assigned/alice/t-0.yaml");
    agent.ok(&["heartbeat", "t-0", "--agent", "alice", "--attempt", "1"]);
    let path = "work/assigned/alice/t-0.yaml";
    agent.write(
        path,
        &agent
            .read(path)
            .replace("title: Task t-0", "title: Task t-0, edited"),
    );
    agent.ok(&["sync"]);
    person.ok(&["reassign", "t-0", "bob"]);
    let (_, err) = person.code(&["sync"], 0);
    let (at, text) = on_remote(&net, "t-0");
    assert_eq!(at, "work/assigned/bob/t-0.yaml", "{err}");
    for field in [
        "title: Task t-0, edited",
        "agent: bob",
        "assigned_to: bob",
        "attempt: 2",
        "reassigned to bob",
    ] {
        assert!(text.contains(field), "{field}: {text}");
    }
    agent.ok(&["sync"]);
    let (_, err) = agent.code(
        &["heartbeat", "t-0", "--agent", "alice", "--attempt", "1"],
        1,
    );
    assert!(err.contains("stop working"), "{err}");
}

#[test]
fn a_persons_edit_of_a_task_coord_assigned_meanwhile_lands_in_the_moved_file() {
    let net = Net::new(&["alice"]);
    let (person, ci) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    person.git(&["pull", "-q", "origin", "main"]);
    ci.git(&["pull", "-q", "origin", "main"]);
    ci.ok(&["sync"]);
    let path = "work/inbox/t-0.yaml";
    let edited = person.read(path).replace(
        "title: Task t-0",
        "title: Task t-0, edited\nprompt: do it well",
    );
    person.write(path, &edited);
    let (_, err) = person.code(&["sync"], 0);
    let (at, text) = on_remote(&net, "t-0");
    assert_eq!(at, "work/assigned/alice/t-0.yaml", "{err}");
    assert!(
        text.contains("title: Task t-0, edited\nprompt: do it well\n"),
        "{text}"
    );
    assert!(text.contains("assigned_to: alice"), "{text}");
    assert!(!text.contains("<<<<<<<"), "{text}");
    assert_eq!(person.git_status(), "");
    assert_eq!(person.find("t-0"), [at]);
}

/// A remote with pull agents (they take work only with `coord claim`).
fn pull_net(agents: &[&str]) -> Net {
    let net = Net::new(&[]);
    for a in agents {
        net.seed
            .ok(&["agents", "add", a, "--pull", "--max-active", "1000"]);
    }
    net.seed.git(&["push", "-q", "origin", "main"]);
    net
}

#[test]
fn two_clones_claiming_the_same_task_keep_one_claim_and_report_the_lost_one() {
    let net = pull_net(&["p1", "p2"]);
    let (a, b, ticker) = (net.clone(), net.clone(), net.clone());
    net.person_adds("t", 1);
    ticker.ok(&["sync"]);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    assert_eq!(a.where_is("t-0"), "work/ready/t-0.yaml");
    assert_eq!(a.ok(&["claim", "--agent", "p1"]).trim(), "t-0");
    assert_eq!(b.ok(&["claim", "--agent", "p2"]).trim(), "t-0");
    a.ok(&["sync"]);
    let (_, err) = b.code(&["sync"], 0);
    assert!(err.contains("lost claim"), "{err}");
    let (at, _) = on_remote(&net, "t-0");
    assert_eq!(at, "work/assigned/p1/t-0.yaml");
    assert_eq!(b.find("t-0"), [at]);
}

/// Runs `coord claim --sync` in each clone at once; returns (exit code, stdout) of each.
fn claim_all(clones: &[(&TestRepo, &str)]) -> Vec<(Option<i32>, String)> {
    let children: Vec<_> = clones
        .iter()
        .map(|(r, agent)| {
            let mut c = r.spawn_cmd(&["claim", "--agent", agent, "--sync"]);
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c.spawn().expect("spawn coord claim")
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().expect("wait");
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(
                matches!(o.status.code(), Some(0 | 4)),
                "claim exited {:?}: {err}",
                o.status.code()
            );
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).trim().to_string(),
            )
        })
        .collect()
}

#[test]
fn claims_with_sync_never_give_one_task_to_two_clones() {
    let net = pull_net(&["p1", "p2", "p3"]);
    let clones = [net.clone(), net.clone(), net.clone()];
    let ticker = net.clone();
    for round in 0..3 {
        // Two tasks for three claimers: two get one each, the third exits 4.
        net.person_adds(&format!("r{round}"), 2);
        ticker.ok(&["sync"]);
        let outs = claim_all(&[(&clones[0], "p1"), (&clones[1], "p2"), (&clones[2], "p3")]);
        let mut ids: Vec<&str> = outs
            .iter()
            .filter(|(code, _)| *code == Some(0))
            .map(|(_, id)| id.as_str())
            .collect();
        ids.sort();
        assert_eq!(ids.len(), 2, "{outs:?}");
        assert_ne!(ids[0], ids[1], "one task claimed twice: {outs:?}");
        for (code, id) in &outs {
            if *code == Some(0) {
                let (at, _) = on_remote(&net, id);
                assert!(at.starts_with("work/assigned/p"), "{id} is at {at}");
            }
        }
    }
}

/// Two runners of one pull agent in two clones make byte-identical claim commits (same parent,
/// file, time and message); the push of the second then found "its" commit on the remote and
/// reported the claim won, so both ran the task. Each claim is its own commit now.
#[test]
fn claims_with_sync_by_one_agent_in_two_clones_never_both_win() {
    let net = pull_net(&["p"]);
    let clones = [net.clone(), net.clone()];
    let ticker = net.clone();
    for round in 0..12 {
        net.person_adds(&format!("r{round}"), 1);
        ticker.ok(&["sync"]);
        let outs = claim_all(&[(&clones[0], "p"), (&clones[1], "p")]);
        let won: Vec<_> = outs.iter().filter(|(code, _)| *code == Some(0)).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: one task, two winners: {outs:?}"
        );
        let (at, _) = on_remote(&net, &won[0].1);
        assert!(at.starts_with("work/assigned/p/"), "{at}");
    }
}

#[test]
fn a_claim_with_sync_sees_the_remote_first_and_exits_4_when_it_lost() {
    let net = pull_net(&["p1", "p2"]);
    let (a, b, ticker) = (net.clone(), net.clone(), net.clone());
    net.person_adds("t", 1);
    ticker.ok(&["sync"]);
    b.ok(&["sync"]);
    assert_eq!(a.ok(&["claim", "--agent", "p1", "--sync"]).trim(), "t-0");
    assert_eq!(
        b.where_is("t-0"),
        "work/ready/t-0.yaml",
        "b has not fetched"
    );
    b.code(&["claim", "--agent", "p2", "--sync"], 4);
    assert_eq!(b.where_is("t-0"), "work/assigned/p1/t-0.yaml");
    // The result is reported only once it is on the remote.
    a.ok(&["complete", "t-0", "--sync"]);
    let (_, text) = on_remote(&net, "t-0");
    assert!(text.contains("status: success"), "{text}");
}

#[test]
fn sync_remote_in_coord_yaml_makes_every_claim_push() {
    let net = pull_net(&["p1"]);
    net.seed.write("coord.yaml", "sync:\n  remote: origin\n");
    net.seed
        .git(&["commit", "-qam", "claims go through origin"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    let (a, ticker) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    ticker.ok(&["sync"]);
    assert_eq!(a.ok(&["claim", "--agent", "p1"]).trim(), "t-0");
    let (at, _) = on_remote(&net, "t-0");
    assert_eq!(at, "work/assigned/p1/t-0.yaml");
}

#[test]
fn status_says_which_local_assignments_are_not_on_the_remote_yet() {
    let net = pull_net(&["p1"]);
    let (a, ticker) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    ticker.ok(&["sync"]);
    a.ok(&["sync"]);
    a.ok(&["claim", "--agent", "p1"]);
    let out = a.run(&["status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not on origin/main") && err.contains("t-0"),
        "{err}"
    );
    a.ok(&["sync"]);
    let out = a.run(&["status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("not on origin/main"), "{err}");
}

#[test]
fn a_result_with_sync_for_a_task_cancelled_on_the_remote_is_kept_as_stale() {
    let net = Net::new(&["alice"]);
    let (agent, person) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    agent.ok(&["sync"]);
    person.ok(&["sync"]);
    person.ok(&["cancel", "t-0", "--reason", "not needed"]);
    person.ok(&["sync"]);
    agent.write("out.yaml", "answer: 42\n");
    let (_, err) = agent.code(&["complete", "t-0", "--output", "out.yaml", "--sync"], 1);
    assert!(
        err.contains("stale_result") && err.contains("cancelled"),
        "{err}"
    );
    let (at, text) = on_remote(&net, "t-0");
    assert_eq!(at, "work/cancelled/t-0.yaml");
    assert!(
        text.contains("event: stale_result") && text.contains("answer: 42"),
        "{text}"
    );
}

/// A person's hand move of a ready task, recorded in their clone while another clone claimed
/// and finished the task on the remote, must not bring the task back in a second place: the
/// remote keeps one copy of every id (the Jepsen checker found `assigned/p1` and `done` at a
/// tip after a killed run's half-undone work tree was recorded and replayed).
#[test]
fn a_hand_move_of_a_task_that_moved_on_upstream_never_makes_a_second_copy() {
    let net = pull_net(&["p1", "p2"]);
    let (person, agent) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    person.ok(&["sync"]);
    agent.ok(&["sync"]);
    assert_eq!(person.where_is("t-0"), "work/ready/t-0.yaml");
    agent.ok(&["claim", "--agent", "p2", "--sync"]);
    agent.ok(&[
        "complete",
        "t-0",
        "--agent",
        "p2",
        "--attempt",
        "1",
        "--sync",
    ]);
    agent.ok(&["sync"]);
    assert_eq!(on_remote(&net, "t-0").0, "work/done/t-0.yaml");
    std::fs::create_dir_all(person.abs("work/assigned/p1")).expect("mkdir");
    std::fs::rename(
        person.abs("work/ready/t-0.yaml"),
        person.abs("work/assigned/p1/t-0.yaml"),
    )
    .expect("hand move");
    let (out, err) = person.code(&["sync"], 0);
    let view = crate::sync::look_at_remote(&net);
    assert_eq!(
        view.places.get("t-0").map(Vec::as_slice),
        Some(&["work/done".to_string()][..]),
        "{out}{err}"
    );
    assert!(err.contains("t-0"), "the dropped move is reported: {err}");
    person.code(&["verify", "--ref", "origin/main"], 0);
}

/// What the remote moves meanwhile in [`race`]: a person's title edit of the task (the
/// operation's precondition still holds) or a command (it no longer does).
enum Meanwhile<'a> {
    EditTitle,
    Run(&'a [&'a str]),
    /// A command that is refused (exit 1) but still writes, such as a zombie's report.
    RunFailing(&'a [&'a str]),
}

/// Clone `b` prepares task `t` (a pull agent's task, or one that waits for review); clone `a`
/// does `local` without pushing while `b` moves the remote; then `a` syncs. Returns a's sync
/// stderr and where and what `t` is on the remote.
fn race(
    extra: &str,
    prepare: &[&[&str]],
    local: &[&str],
    meanwhile: Meanwhile,
) -> (String, String, String) {
    let net = pull_net(&["p1", "p2"]);
    net.seed.task("t", &format!("title: Task t\n{extra}"));
    net.seed.git(&["add", "work/inbox"]);
    net.seed.git(&["commit", "-q", "-m", "add t"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    let (a, b) = (net.clone(), net.clone());
    b.ok(&["sync"]);
    for cmd in prepare {
        b.ok(cmd);
        b.ok(&["sync"]);
    }
    a.ok(&["sync"]);
    match a.run(local).status.code() {
        Some(0) => {}
        // A zombie's report is refused but set aside in history: that is the local change.
        _ => assert!(local.contains(&"--attempt"), "{local:?} failed"),
    }
    match meanwhile {
        Meanwhile::EditTitle => {
            let path = b.where_is("t");
            b.write(
                &path,
                &b.read(&path).replace("title: Task t", "title: Task t (b)"),
            );
        }
        Meanwhile::Run(cmd) => {
            b.ok(cmd);
        }
        Meanwhile::RunFailing(cmd) => {
            b.code(cmd, 1);
        }
    }
    b.ok(&["sync"]);
    let (_, err) = a.code(&["sync"], 0);
    let (at, text) = on_remote(&net, "t");
    assert_eq!(
        a.find("t"),
        std::slice::from_ref(&at),
        "a is on the remote's tip: {err}"
    );
    a.code(&["verify", "--ref", "origin/main"], 0);
    (err, at, text)
}

/// [`race`] on a pull agent's task.
fn race_with(
    prepare: &[&[&str]],
    local: &[&str],
    meanwhile: Meanwhile,
) -> (String, String, String) {
    race("", prepare, local, meanwhile)
}

/// Commands: one command's arguments.
type Cmd<'a> = &'a [&'a str];
/// (operation, extra task lines, commands before, the local command, where the task ends).
type Redone<'a> = (&'a str, &'a str, &'a [Cmd<'a>], Cmd<'a>, &'a str);
/// (operation, extra task lines, commands before, the local command, the remote's command
/// meanwhile, where the task ends, what a's sync says or the file keeps).
type Lost<'a> = (
    &'a str,
    &'a str,
    &'a [Cmd<'a>],
    Cmd<'a>,
    Cmd<'a>,
    &'a str,
    &'a str,
);

const CLAIMED: &[&[&str]] = &[&["claim", "--agent", "p1"]];
const CANCELLED: &[&[&str]] = &[
    &["claim", "--agent", "p1"],
    &["cancel", "t", "--reason", "x"],
];
const REVIEW: &str = "authority: ask_me_first\n";
/// Twenty minutes into a 30-minute lease: less than half is left, so a heartbeat commits.
const T1: &str = "2026-11-22T10:20:00Z";

/// Each operation replayed onto a remote that moved: where its precondition (the task's state,
/// agent and attempt, read from the commit's trailers) still holds it is redone on the moved
/// file (the remote's title edit stays); where it does not, it is dropped and reported, and a
/// result is kept in the task's history as `stale_result`.
#[test]
fn each_operation_is_redone_when_its_precondition_holds_on_the_moved_remote() {
    let edited = |text: &str| text.contains("title: Task t (b)");
    let cases: [Redone; 8] = [
        (
            "claim",
            "",
            &[],
            &["claim", "--agent", "p1"],
            "work/assigned/p1/",
        ),
        ("complete", "", CLAIMED, &["complete", "t"], "work/done/"),
        (
            "fail",
            "",
            CLAIMED,
            &["fail", "t", "--error", "boom", "--fatal"],
            "work/failed/",
        ),
        (
            "heartbeat",
            "",
            CLAIMED,
            &["--now", T1, "heartbeat", "t"],
            "work/assigned/p1/",
        ),
        (
            "cancel",
            "",
            CLAIMED,
            &["cancel", "t", "--reason", "no"],
            "work/cancelled/",
        ),
        ("retry", "", CANCELLED, &["retry", "t"], "work/ready/"),
        ("approve", REVIEW, &[], &["approve", "t"], "work/ready/"),
        (
            "reject",
            REVIEW,
            &[],
            &["reject", "t", "--reason", "no"],
            "work/failed/",
        ),
    ];
    for (kind, extra, prepare, local, place) in cases {
        let (err, at, text) = race(extra, prepare, local, Meanwhile::EditTitle);
        assert!(at.starts_with(place), "{kind}: t is at {at}: {err}");
        assert!(edited(&text), "{kind}: the remote's edit stays:\n{text}");
        assert!(
            !err.contains("coord: dropped") && !err.contains("lost claim"),
            "{kind}: {err}"
        );
        if kind == "heartbeat" {
            assert!(
                text.contains("lease_expires_at: 2026-11-22T10:50:00Z"),
                "{text}"
            );
        }
    }
}

#[test]
fn each_operation_whose_precondition_fails_on_the_moved_remote_is_dropped_and_reported() {
    let cancel: &[&str] = &["cancel", "t", "--reason", "meanwhile"];
    let cases: [Lost; 8] = [
        (
            "claim",
            "",
            &[],
            &["claim", "--agent", "p1"],
            &["claim", "--agent", "p2"],
            "work/assigned/p2/",
            "lost claim",
        ),
        (
            "complete",
            "",
            CLAIMED,
            &["complete", "t"],
            cancel,
            "work/cancelled/",
            "stale_result",
        ),
        (
            "fail",
            "",
            CLAIMED,
            &["fail", "t", "--error", "boom"],
            cancel,
            "work/cancelled/",
            "stale_result",
        ),
        (
            "heartbeat",
            "",
            CLAIMED,
            &["--now", T1, "heartbeat", "t"],
            cancel,
            "work/cancelled/",
            "dropped",
        ),
        (
            "cancel",
            "",
            CLAIMED,
            &["cancel", "t", "--reason", "no"],
            &["complete", "t"],
            "work/done/",
            "dropped",
        ),
        (
            "retry",
            "",
            CANCELLED,
            &["retry", "t"],
            &["retry", "t"],
            "work/ready/",
            "dropped",
        ),
        (
            "approve",
            REVIEW,
            &[],
            &["approve", "t"],
            &["reject", "t", "--reason", "no"],
            "work/failed/",
            "dropped",
        ),
        (
            "reject",
            REVIEW,
            &[],
            &["reject", "t", "--reason", "no"],
            &["approve", "t"],
            "work/ready/",
            "dropped",
        ),
    ];
    for (kind, extra, prepare, local, meanwhile, place, said) in cases {
        let (err, at, text) = race(extra, prepare, local, Meanwhile::Run(meanwhile));
        assert!(at.starts_with(place), "{kind}: t is at {at}: {err}");
        assert!(err.contains(said), "{kind}: {err}");
        if said == "stale_result" {
            assert!(
                text.contains("event: stale_result"),
                "{kind}: kept:\n{text}"
            );
        }
    }
}

/// A zombie's result set aside on the remote (a `stale_result` entry in the task's history)
/// while this clone's agent completed the same attempt: the completion is redone and the
/// remote's history entry stays (the replay used to paste the local `coord:` block over it).
#[test]
fn a_redone_result_keeps_the_history_the_remote_added_meanwhile() {
    let zombie: &[&str] = &["complete", "t", "--agent", "p2", "--attempt", "1"];
    let net_out = race(
        "",
        CLAIMED,
        &["complete", "t"],
        Meanwhile::RunFailing(zombie),
    );
    let (err, at, text) = net_out;
    assert!(at.starts_with("work/done/"), "{at}: {err}");
    assert!(
        text.contains("event: stale_result") && text.contains("agent: p2"),
        "{text}"
    );
}

/// A zombie's result set aside in this clone, for a task the remote cancelled meanwhile, is
/// still kept in the task's history (the replay used to drop it with the set-aside commit).
#[test]
fn a_result_set_aside_here_for_a_task_that_moved_on_is_still_kept() {
    let zombie: &[&str] = &["complete", "t", "--agent", "p2", "--attempt", "1"];
    let cancel: &[&str] = &["cancel", "t", "--reason", "meanwhile"];
    let (err, at, text) = race_with(CLAIMED, zombie, Meanwhile::Run(cancel));
    assert!(at.starts_with("work/cancelled/"), "{at}: {err}");
    assert!(
        text.contains("event: stale_result") && text.contains("agent: p2"),
        "{text}"
    );
}

/// A claim committed before operations were named in trailers (no `Coord-Op`, `Coord-Pre-*`)
/// is still replayed by its meaning, inferred from `Coord-From`/`Coord-To` and the file it
/// started from; `coord log` reads both kinds of commits.
#[test]
fn a_claim_written_before_operations_were_named_is_still_replayed_by_meaning() {
    let net = pull_net(&["p1", "p2"]);
    net.person_adds("t", 1);
    let (a, b) = (net.clone(), net.clone());
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    a.ok(&["claim", "--agent", "p1"]);
    let message = a.git(&["log", "-1", "--format=%B"]);
    assert!(message.contains("Coord-Op: claim\n") && message.contains("Coord-Pre-State: ready\n"));
    let old: String = message
        .lines()
        .filter(|l| {
            !l.starts_with("Coord-Op") && !l.starts_with("Coord-Pre") && !l.starts_with("Coord-By")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    // Amended as coord would have committed it (an amend by a person makes it theirs).
    let mut amend = std::process::Command::new("git");
    amend
        .current_dir(a.path())
        .args(["commit", "--amend", "-q", "-m", &old]);
    for (k, v) in crate::harness::git_env() {
        amend.env(k, v);
    }
    amend
        .env("GIT_COMMITTER_NAME", "coord")
        .env("GIT_COMMITTER_EMAIL", "coord@localhost");
    assert!(amend.status().expect("git").success());
    let log: serde_json::Value =
        serde_json::from_str(&a.ok(&["log", "t-0", "--json"])).expect("json");
    let log = &log["entries"];
    assert_eq!(log[0]["to"], "assigned");
    assert_eq!(log[0]["op"], serde_json::Value::Null, "{log}");
    b.ok(&["claim", "--agent", "p2"]);
    b.ok(&["sync"]);
    let log: serde_json::Value =
        serde_json::from_str(&b.ok(&["log", "t-0", "--json"])).expect("json");
    let log = &log["entries"];
    assert_eq!(log[0]["op"], "claim", "{log}");
    let (_, err) = a.code(&["sync"], 0);
    assert!(err.contains("lost claim"), "{err}");
    let (at, _) = on_remote(&net, "t-0");
    assert_eq!(at, "work/assigned/p2/t-0.yaml");
}

/// Writes a result into the task by hand in `agent`'s clone and commits it with plain git.
fn commit_result_by_hand(agent: &TestRepo, path: &str) {
    let text = agent.read(path) + "result:\n  status: success\n  output: {answer: THE-ANSWER}\n";
    agent.write(path, &text);
    agent.git(&["commit", "-q", "-am", "alice: result for t-0"]);
}

/// An agent writes `result:` into its task and commits it with plain git while the remote
/// changes the task: the result counts when the attempt is still the agent's (a person fixed
/// the title), and is kept in the task's history as a stale result when the attempt moved on
/// (the task was cancelled). Never dropped.
#[test]
fn a_result_committed_with_git_survives_a_remote_change_of_the_task() {
    for moved_on in [false, true] {
        let net = Net::new(&["alice"]);
        let (agent, person) = (net.clone(), net.clone());
        net.person_adds("t", 1);
        agent.ok(&["sync"]);
        person.ok(&["sync"]);
        let path = "work/assigned/alice/t-0.yaml";
        if moved_on {
            person.ok(&["cancel", "t-0", "--reason", "not needed"]);
            person.ok(&["sync"]);
        } else {
            let text = person
                .read(path)
                .replace("title: Task t-0", "title: Task t-0, clarified");
            person.write(path, &text);
            person.git(&["commit", "-q", "-am", "clarify t-0"]);
            person.git(&["push", "-q", "origin", "main"]);
        }
        commit_result_by_hand(&agent, path);

        agent.ok(&["sync"]);

        let (at, text) = on_remote(&net, "t-0");
        if moved_on {
            assert_eq!(at, "work/cancelled/t-0.yaml");
            assert!(
                text.contains("event: stale_result") && text.contains("THE-ANSWER"),
                "{text}"
            );
        } else {
            assert_eq!(at, "work/done/t-0.yaml");
            assert!(
                text.contains("title: Task t-0, clarified") && text.contains("THE-ANSWER"),
                "{text}"
            );
        }
        assert_eq!(agent.git_status(), "");
    }
}

/// A seed (not synced yet) where a is for alice and b, for pull agent puller, waits for a.
fn dependency_for_a_pull_agent() -> Net {
    let net = Net::new(&["alice"]);
    let seed = &net.seed;
    seed.ok(&["agents", "add", "puller", "--capability", "y", "--pull"]);
    seed.ok(&["new", "A", "--id", "a", "--agent", "alice"]);
    let b = [
        "new",
        "B",
        "--id",
        "b",
        "--depends-on",
        "a",
        "--capability",
        "y",
    ];
    seed.ok(&b);
    net
}

/// A remote where b, which depends on a done task a, is ready for pull agent puller.
fn done_dependency_and_ready_dependent_on_a_remote() -> Net {
    let net = dependency_for_a_pull_agent();
    let seed = &net.seed;
    seed.ok(&["tick"]);
    seed.ok(&["complete", "a"]);
    seed.ok(&["sync"]);
    net
}

/// A pull agent claims a ready task in its clone without `--sync`, while on the remote a
/// person moved the task's done dependency back to `ready/`: sync does not replay the claim
/// (it would not have been made), says it was lost, and the task waits again. A stray copy
/// of the dependency (a duplicate id) while it stays done lets the claim stand.
#[test]
fn a_claim_made_before_its_dependency_was_reopened_on_the_remote_is_lost() {
    for reopened in [true, false] {
        let net = done_dependency_and_ready_dependent_on_a_remote();
        let (person, agent) = (net.clone(), net.clone());
        if reopened {
            person.git(&["mv", "work/done/a.yaml", "work/ready/a.yaml"]);
        } else {
            person.write("work/inbox/a.yaml", "title: a stray copy\n");
            person.git(&["add", "-A"]);
        }
        person.git(&["commit", "-q", "-m", "a again"]);
        person.git(&["push", "-q", "origin", "main"]);
        assert_eq!(agent.json(&["claim", "--agent", "puller"])["id"], "b");

        let out = agent.run(&["sync"]);

        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let lost = err.contains("lost claim") && err.contains("dependency a");
        assert_eq!(lost, reopened, "{err}");
        let want = match reopened {
            true => "work/blocked/b.yaml",
            false => "work/assigned/puller/b.yaml",
        };
        assert_eq!(on_remote(&net, "b").0, want);
    }
}

/// A pull agent claims, without `--sync`, a task its own clone's tick unblocked (the
/// dependency was completed there and not pushed yet) while the remote moved on with an
/// unrelated commit. Sync drops the tick commit that unblocked the task and redoes it on the
/// new tip; the claim stands once that tick has unblocked the task again (it was lost, with
/// "the task changed on the remote meanwhile"), with the attempt the agent was told, and the
/// agent's result, reported before or after that sync, is credited to that attempt.
#[test]
fn a_claim_of_a_task_this_clones_own_tick_unblocked_stands_after_sync() {
    for reported_first in [false, true] {
        let net = dependency_for_a_pull_agent();
        let seed = &net.seed;
        seed.ok(&["sync"]);
        let (person, agent) = (net.clone(), net.clone());
        person.write("notes.txt", "a note\n");
        person.git(&["add", "-A"]);
        person.git(&["commit", "-q", "-m", "note"]);
        person.git(&["push", "-q", "origin", "main"]);
        agent.ok(&["complete", "a", "--agent", "alice"]);
        agent.ok(&["tick"]);
        let claim = agent.json(&["claim", "--agent", "puller"]);
        assert_eq!(claim["id"], "b", "{claim}");
        agent.write("out.yaml", "answer: B-RESULT\n");
        let complete = ["complete", "b", "--agent", "puller", "--output", "out.yaml"];
        if reported_first {
            agent.ok(&complete);
        }

        let out = agent.run(&["sync"]);

        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            !err.contains("lost claim") && !err.contains("stale"),
            "{err}"
        );
        let (at, text) = on_remote(&net, "b");
        assert_eq!(at, "work/assigned/puller/b.yaml", "{err}");
        let attempt = format!("attempt: {}", claim["attempt"]);
        assert!(text.contains(&attempt), "{attempt} in {text}");
        if !reported_first {
            agent.ok(&complete);
        }
        agent.ok(&["sync"]);
        let (at, text) = on_remote(&net, "b");
        assert_eq!(at, "work/done/b.yaml");
        assert!(
            text.contains("B-RESULT") && !text.contains("stale_result"),
            "{text}"
        );
        std::fs::remove_file(agent.abs("out.yaml")).expect("the output file");
        assert_eq!(agent.git_status(), "");
    }
}

/// Two clones make a task of the same id with `coord new`; the first syncs and its tick
/// moves it on. The second's sync does not drop its task (it was only in its clone): it
/// stops with the way out, and the task's text stays where the advice finds it; once it is
/// left out as asked, the second clone's later commits on its own x (its result) are left
/// out too, never applied to the first clone's x.
#[test]
fn a_new_task_whose_id_another_clone_took_first_is_not_dropped() {
    let net = Net::new(&["alice"]);
    let (first, second) = (net.clone(), net.clone());
    first.ok(&["new", "First x", "--id", "x"]);
    first.ok(&["sync"]);
    second.ok(&["new", "Second x", "--id", "x"]);
    second.ok(&["tick"]);
    second.write("out.yaml", "answer: SECOND-RESULT\n");
    second.ok(&["complete", "x", "--agent", "alice", "--output", "out.yaml"]);

    let (_, err) = second.code(&["sync"], 1);

    assert!(
        err.contains("it adds work/inbox/x.yaml, and origin has a task with that id"),
        "{err}"
    );
    let show = err
        .split('\'')
        .find(|c| c.starts_with("git show "))
        .expect("the advice saves the task");
    let spec = show
        .trim_start_matches("git show ")
        .split(' ')
        .next()
        .expect("spec");
    assert!(second.git(&["show", spec]).contains("Second x"));
    let drop = spec.to_string();
    second.ok(&["sync", "--drop-edit", &drop]);
    let (at, text) = on_remote(&net, "x");
    assert!(text.contains("First x"), "{text}");
    assert!(
        !text.contains("SECOND-RESULT"),
        "the other task's result landed on it: {text}"
    );
    assert!(at.starts_with("work/assigned/"), "{at}");
}

/// The same when a person handed the task to another agent by hand (`git mv`, no tick yet on
/// the remote): the result is the first agent's, kept as stale, never credited to the other
/// agent's attempt.
#[test]
fn a_result_committed_with_git_for_a_task_handed_to_another_agent_is_kept_as_stale() {
    let net = Net::new(&["alice", "bob"]);
    let (agent, person) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    agent.ok(&["sync"]);
    person.ok(&["sync"]);
    let from = agent.where_is("t-0");
    let to = if from.contains("/alice/") {
        "work/assigned/bob/t-0.yaml"
    } else {
        "work/assigned/alice/t-0.yaml"
    };
    std::fs::create_dir_all(person.abs(to).parent().expect("folder")).expect("mkdir");
    person.git(&["mv", &from, to]);
    person.git(&["commit", "-q", "-m", "hand t-0 over"]);
    person.git(&["push", "-q", "origin", "main"]);
    commit_result_by_hand(&agent, &from);

    agent.ok(&["sync"]);

    let (at, text) = on_remote(&net, "t-0");
    assert_eq!(at, to, "{text}");
    assert!(
        text.contains("event: stale_result") && text.contains("THE-ANSWER"),
        "{text}"
    );
}

/// An agent writes its result by hand and changes the title, while a person changed the same
/// title line on the remote: sync stops; dropping that edit as advised drops the result with
/// it (the person makes the edit again where the task is), never a false "moved on" stale
/// result.
#[test]
fn a_result_in_an_edit_dropped_after_a_conflict_is_dropped_with_it() {
    let net = Net::new(&["alice"]);
    let (agent, person) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    agent.ok(&["sync"]);
    person.ok(&["sync"]);
    let path = "work/assigned/alice/t-0.yaml";
    let text = person
        .read(path)
        .replace("title: Task t-0", "title: Theirs");
    person.write(path, &text);
    person.git(&["commit", "-q", "-am", "their title"]);
    person.git(&["push", "-q", "origin", "main"]);
    let text = agent.read(path).replace("title: Task t-0", "title: Mine");
    agent.write(path, &text);
    commit_result_by_hand(&agent, path);

    let (_, err) = agent.code(&["sync"], 1);
    let drop = err
        .split('\'')
        .find(|c| c.starts_with("coord sync --drop-edit"))
        .expect("the advice drops the edit")
        .to_string();
    let args: Vec<&str> = drop.split(' ').skip(1).collect();
    let (_, said) = agent.code(&args, 0);

    assert!(!said.contains("arrived after it moved on"), "{said}");
    let (at, text) = on_remote(&net, "t-0");
    assert_eq!(at, path);
    assert!(
        !text.contains("THE-ANSWER") && !text.contains("stale_result"),
        "{text}"
    );
}
