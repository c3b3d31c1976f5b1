//! `coord sync` against a real bare remote on disk: clones syncing concurrently in rounds,
//! agents pushing results from other clones, and a person's commits never lost.

use crate::harness::{git_env, task_yaml, Net, TestRepo, T0};
use std::collections::BTreeMap;
use std::process::{Command, Output};

/// Runs `coord sync` in every repo at once (real processes); returns their outputs.
fn sync_all(repos: &[&TestRepo]) -> Vec<Output> {
    let children: Vec<_> = repos
        .iter()
        .map(|r| {
            let mut c = Command::new(assert_cmd::cargo::cargo_bin("coord"));
            c.arg("-C")
                .arg(r.path())
                .args(["sync", "--max-retries", "30"]);
            for (k, v) in git_env() {
                c.env(k, v);
            }
            c.env("COORD_NOW", T0);
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c.spawn().expect("spawn coord sync")
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect()
}

/// Asserts every sync succeeded; returns how many rejected pushes they reported.
fn all_ok(outs: &[Output]) -> usize {
    let mut rejected = 0;
    for o in outs {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "coord sync failed:\n{err}");
        rejected += err.matches("push rejected").count();
    }
    rejected
}

/// What the remote holds: every task file's folder, assignment commits per task, and whether
/// any file carries a conflict marker.
pub struct RemoteView {
    pub places: BTreeMap<String, Vec<String>>,
    pub assignments: BTreeMap<String, usize>,
    pub markers: Vec<String>,
    pub done_with_result: usize,
}

pub fn look_at_remote(net: &Net) -> RemoteView {
    let check = net.clone();
    let (verified, _) = check.code(&["verify"], 0);
    assert!(verified.trim_end().ends_with(": clean"), "{verified}");
    let files = check.git(&["ls-files", "work"]);
    let mut places: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut markers = Vec::new();
    let mut done_with_result = 0;
    for path in files
        .lines()
        .filter(|p| p.ends_with(".yaml") && !p.starts_with("work/agents/"))
    {
        let text = check.read(path);
        if text.contains("<<<<<<<") || text.contains(">>>>>>>") {
            markers.push(path.to_string());
        }
        let (folder, name) = path.rsplit_once('/').expect("folder");
        if folder == "work/done" && text.contains("\nresult:") {
            done_with_result += 1;
        }
        let id = name.trim_end_matches(".yaml").to_string();
        places.entry(id).or_default().push(folder.to_string());
    }
    // A commit of a large tick pass records several transitions, each from its Coord-Task.
    let log = check.git(&["log", "--format=%(trailers:only,unfold)%x00"]);
    // An agent's result is a commit from assigned to assigned; an assignment comes from
    // another state.
    let mut assignments = BTreeMap::new();
    for commit in log.split('\0') {
        let mut moves: Vec<(String, String, String)> = Vec::new();
        for line in commit.lines() {
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            match key {
                "Coord-Task" => moves.push((value.to_string(), String::new(), String::new())),
                "Coord-From" => moves
                    .last_mut()
                    .into_iter()
                    .for_each(|m| m.1 = value.into()),
                "Coord-To" => moves
                    .last_mut()
                    .into_iter()
                    .for_each(|m| m.2 = value.into()),
                _ => {}
            }
        }
        for (task, from, to) in moves {
            if to == "assigned" && from != "assigned" {
                *assignments.entry(task).or_insert(0) += 1;
            }
        }
    }
    RemoteView {
        places,
        assignments,
        markers,
        done_with_result,
    }
}

/// Asserts each id sits in exactly one place on the remote, in `allowed` folders, with exactly
/// one assignment commit, and that no file has conflict markers.
pub fn assert_exactly_once(view: &RemoteView, ids: &[String], allowed: &[&str]) {
    assert!(
        view.markers.is_empty(),
        "conflict markers in {:?}",
        view.markers
    );
    for id in ids {
        let places = view
            .places
            .get(id)
            .unwrap_or_else(|| panic!("{id} is not on the remote"));
        assert_eq!(places.len(), 1, "{id} is in {places:?}");
        assert!(
            allowed.iter().any(|a| places[0].starts_with(a)),
            "{id} is in {}",
            places[0]
        );
        assert_eq!(
            view.assignments.get(id),
            Some(&1),
            "assignment commits of {id}"
        );
    }
    assert_eq!(view.places.len(), ids.len(), "no other task files");
}

/// Each clone drops `n` files by hand into its inbox without committing.
fn drop_files(clones: &[&TestRepo], round: usize, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for (c, clone) in clones.iter().enumerate() {
        for i in 0..n {
            let id = format!("drop-{round}-{c}-{i}");
            clone.task(&id, &task_yaml(&id));
            ids.push(id);
        }
    }
    ids
}

#[test]
fn three_clones_syncing_concurrently_assign_every_task_exactly_once() {
    let start = std::time::Instant::now();
    let net = Net::new(&["alice", "bob"]);
    let clones = [net.clone(), net.clone(), net.clone()];
    let refs: Vec<&TestRepo> = clones.iter().collect();
    let mut ids = Vec::new();
    let mut rejected = 0;
    for round in 0..5 {
        ids.extend(net.person_adds(&format!("seed-{round}"), 30));
        ids.extend(drop_files(&refs, round, 10));
        rejected += all_ok(&sync_all(&refs));
    }
    rejected += all_ok(&sync_all(&refs));
    assert_eq!(ids.len(), 300);
    let view = look_at_remote(&net);
    assert_exactly_once(&view, &ids, &["work/assigned/"]);
    for c in &clones {
        assert_eq!(c.git_status(), "", "clean after sync");
    }
    eprintln!(
        "300 tasks, 3 clones, 6 rounds: {rejected} rejected pushes, {:?}",
        start.elapsed()
    );
}

#[test]
fn agents_pushing_results_from_another_clone_lose_nothing() {
    let net = Net::new(&["alice"]);
    let coordinators = [net.clone(), net.clone()];
    let agent = net.clone();
    let mut ids = Vec::new();
    let mut completed = Vec::new();
    for round in 0..4 {
        ids.extend(net.person_adds(&format!("seed-{round}"), 20));
        ids.extend(drop_files(&[&coordinators[0]], round, 5));
        // The agent completes tasks it saw assigned on the remote, then all sync at once.
        let mine: Vec<String> = ids
            .iter()
            .filter(|id| {
                !completed.contains(*id) && agent.exists(&format!("work/assigned/alice/{id}.yaml"))
            })
            .take(15)
            .cloned()
            .collect();
        for id in &mine {
            agent.ok(&["complete", id]);
        }
        completed.extend(mine);
        all_ok(&sync_all(&[&coordinators[0], &coordinators[1], &agent]));
    }
    all_ok(&sync_all(&[&coordinators[0], &coordinators[1], &agent]));
    assert!(
        completed.len() >= 30,
        "the agent completed {}",
        completed.len()
    );
    let view = look_at_remote(&net);
    assert_exactly_once(&view, &ids, &["work/assigned/alice", "work/done"]);
    for id in &ids {
        let place = &view.places[id][0];
        let want = if completed.contains(id) {
            "work/done"
        } else {
            "work/assigned/alice"
        };
        assert_eq!(place, want, "{id}");
    }
    assert_eq!(
        view.done_with_result,
        completed.len(),
        "every result reached the remote"
    );
}

#[test]
fn a_persons_unpushed_commit_is_pushed_when_it_can_be_and_never_dropped() {
    let net = Net::new(&["alice"]);
    let mine = net.clone();
    mine.commit_file("NOTES.md", "my notes\n", "my notes");
    mine.ok(&["sync"]);
    let check = net.clone();
    assert_eq!(
        check.read("NOTES.md"),
        "my notes\n",
        "pushed when the remote had not moved"
    );

    // Now the remote moves on while the person has another local commit: sync copies it onto
    // the remote tip, as `git pull --rebase` would, but by meaning.
    mine.write("NOTES.md", "more notes\n");
    mine.git(&["commit", "-q", "-am", "more notes"]);
    mine.task("local-task", &task_yaml("local-task"));
    net.person_adds("other", 2);
    mine.ok(&["sync"]);
    let check = net.clone();
    assert_eq!(check.read("NOTES.md"), "more notes\n");
    assert_eq!(check.find("local-task").len(), 1);
    assert_eq!(check.find("other-0").len(), 1);
    let log = check.git(&["log", "--format=%an|%s", "--", "NOTES.md"]);
    assert_eq!(log, "Test Person|more notes\nTest Person|my notes\n");

    // A merge cannot be copied without losing a parent: sync stops and changes nothing.
    mine.git(&["switch", "-q", "-c", "side"]);
    mine.write("SIDE.md", "side\n");
    mine.git(&["add", "SIDE.md"]);
    mine.git(&["commit", "-q", "-m", "side work"]);
    mine.git(&["switch", "-q", "main"]);
    mine.git(&["merge", "-q", "--no-ff", "-m", "merge side", "side"]);
    net.person_adds("more", 1);
    let before = mine.git(&["rev-parse", "HEAD"]);
    let (_, err) = mine.code(&["sync"], 1);
    assert!(err.contains("a merge by Test Person"), "{err}");
    assert!(err.contains("merge side"), "{err}");
    assert!(err.contains("coord doctor"), "{err}");
    assert_eq!(mine.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(mine.git_status(), "");
}

/// A remote where task `t-0` is ready, with a push agent `a1` and a pull agent `p2`, and two
/// clones of it.
fn one_ready_task_two_agents() -> (Net, TestRepo, TestRepo) {
    let net = Net::new(&[]);
    net.seed.ok(&["agents", "add", "p2", "--pull"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    net.person_adds("t", 1);
    net.clone().ok(&["sync"]);
    net.seed.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    net.seed.ok(&["agents", "add", "a1", "--max-active", "10"]);
    net.seed.git(&["push", "-q", "origin", "main"]);
    let (mine, theirs) = (net.clone(), net.clone());
    assert_eq!(mine.find("t-0"), ["work/ready/t-0.yaml"]);
    (net, mine, theirs)
}

/// The commit that last changed `path`: author, committer and message.
fn last_change(repo: &TestRepo, path: &str) -> String {
    repo.git(&[
        "log",
        "-1",
        "--format=%an <%ae> %ad|%cn <%ce> %cd|%B",
        "--",
        path,
    ])
}

#[test]
fn a_persons_commit_over_an_unpushed_assignment_is_replayed_and_the_task_stays_assigned_once() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    theirs.ok(&["claim", "--agent", "p2", "--sync"]);
    mine.ok(&["tick"]);
    assert_eq!(mine.find("t-0"), ["work/assigned/a1/t-0.yaml"]);
    mine.commit_file("NOTES.md", "my notes\n", "my notes");

    mine.ok(&["sync"]);

    let check = net.clone();
    assert_eq!(
        check.find("t-0"),
        ["work/assigned/p2/t-0.yaml"],
        "p2's claim won"
    );
    assert_eq!(check.read("NOTES.md"), "my notes\n");
    assert_eq!(
        last_change(&check, "NOTES.md"),
        last_change(&mine, "NOTES.md")
    );
    let view = look_at_remote(&net);
    assert!(
        view.places.values().all(|p| p.len() == 1),
        "{:?}",
        view.places
    );
    assert_eq!(mine.find("t-0"), ["work/assigned/p2/t-0.yaml"]);
    assert_eq!(mine.git_status(), "");
}

#[test]
fn a_persons_commit_editing_a_task_coord_assigned_here_lands_on_the_remotes_copy() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    theirs.ok(&["claim", "--agent", "p2", "--sync"]);
    mine.ok(&["tick"]);
    let path = "work/assigned/a1/t-0.yaml";
    let text = mine
        .read(path)
        .replace("title: Task t-0", "title: Task t-0, clarified");
    mine.write(path, &text);
    mine.git(&["commit", "-q", "-am", "clarify t-0"]);

    mine.ok(&["sync"]);

    let check = net.clone();
    assert_eq!(check.find("t-0"), ["work/assigned/p2/t-0.yaml"]);
    let task = check.read("work/assigned/p2/t-0.yaml");
    assert!(task.contains("title: Task t-0, clarified"), "{task}");
    assert!(task.contains("assigned_to: p2"), "{task}");
}

#[test]
fn a_persons_commits_are_replayed_with_their_modes_and_links() {
    let net = Net::new(&["alice"]);
    let mine = net.clone();
    mine.write("run.sh", "echo hi\n");
    mine.write("tool.sh", "echo tool\n");
    mine.git(&["add", "run.sh", "tool.sh"]);
    mine.git(&["commit", "-q", "-m", "scripts"]);
    mine.ok(&["sync"]);

    mine.git(&["update-index", "--chmod=+x", "tool.sh"]);
    mine.git(&["commit", "-q", "-m", "make tool.sh executable"]);
    mine.write("run.sh", "echo hello\n");
    mine.git(&["update-index", "--add", "--chmod=+x", "run.sh"]);
    std::os::unix::fs::symlink("run.sh", mine.abs("go")).expect("symlink");
    mine.git(&["add", "go"]);
    mine.git(&["commit", "-q", "-m", "run.sh executable, a link to it"]);
    net.person_adds("other", 1);
    mine.ok(&["sync"]);

    let check = net.clone();
    let tree = check.git(&["ls-tree", "HEAD", "run.sh", "tool.sh", "go"]);
    let modes: Vec<&str> = tree.lines().map(|l| &l[..6]).collect();
    assert_eq!(modes, ["120000", "100755", "100755"], "{tree}");
    assert_eq!(check.read("run.sh"), "echo hello\n");
    assert_eq!(check.find("other-0").len(), 1);
}

/// A remote with task `p` of `alice`, handing off to `next` (with a join by `dave` when
/// several), done and waiting in review for its result's approval, and two clones of it.
fn awaiting_approval(next: &[&str]) -> (Net, TestRepo, TestRepo) {
    let net = Net::new(&[]);
    let seed = &net.seed;
    for agent in ["alice", "bob", "carol", "dave"] {
        seed.ok(&["agents", "add", agent, "--pull"]);
    }
    let mut new = vec!["new", "P", "--id", "p", "--agent", "alice"];
    new.extend(["--authority", "do_it_and_show_me"]);
    for n in next {
        new.extend(["--next-agent", n]);
    }
    if next.len() > 1 {
        new.extend(["--join-agent", "dave"]);
    }
    seed.ok(&new);
    seed.ok(&["tick"]);
    seed.ok(&["claim", "--agent", "alice"]);
    seed.ok(&["complete", "p", "--agent", "alice"]);
    seed.ok(&["tick"]);
    assert_eq!(seed.find("p"), ["work/review/p.yaml"]);
    seed.git(&["push", "-q", "origin", "main"]);
    let (mine, theirs) = (net.clone(), net.clone());
    (net, mine, theirs)
}

/// The task files on `repo`'s HEAD whose `coord.parent` is `p`.
fn steps_of_p(repo: &TestRepo) -> Vec<String> {
    let found = repo.git(&["grep", "-l", "parent: p$", "--", "work"]);
    found.lines().map(String::from).collect()
}

#[test]
fn an_approve_whose_handoff_step_id_another_clone_took_hands_off_at_a_free_id() {
    let (net, mine, theirs) = awaiting_approval(&["bob"]);
    theirs.ok(&["new", "Someone else's task", "--id", "p.bob"]);
    theirs.ok(&["sync"]);
    mine.ok(&["approve", "p"]);
    assert_eq!(mine.find("p.bob"), ["work/ready/p.bob.yaml"]);

    let out = mine.ok(&["sync"]);

    let check = net.clone();
    assert_eq!(check.find("p"), ["work/done/p.yaml"]);
    assert!(check
        .read(&check.where_is("p.bob"))
        .contains("Someone else's task"));
    assert_eq!(steps_of_p(&check), ["work/ready/p.bob.2.yaml"], "{out}");
    assert!(check.read("work/ready/p.bob.2.yaml").contains("agent: bob"));
    check.ok(&["tick"]);
    assert_eq!(steps_of_p(&check).len(), 1, "a tick makes no second step");
}

#[test]
fn a_fan_out_whose_step_id_another_clone_took_joins_the_steps_it_really_made() {
    let (net, mine, theirs) = awaiting_approval(&["bob", "carol"]);
    theirs.ok(&["new", "Someone else's task", "--id", "p.carol"]);
    theirs.ok(&["sync"]);
    mine.ok(&["approve", "p"]);

    let out = mine.ok(&["sync"]);

    let check = net.clone();
    let steps = steps_of_p(&check);
    assert_eq!(
        steps,
        [
            "work/blocked/p.join.yaml",
            "work/ready/p.bob.yaml",
            "work/ready/p.carol.2.yaml"
        ],
        "{out}"
    );
    let join = check.read("work/blocked/p.join.yaml");
    assert!(join.contains("p.carol.2"), "{join}");
    assert!(
        !join.contains("p.carol\n") && !join.contains("p.carol,"),
        "{join}"
    );
    check.ok(&["tick"]);
    assert_eq!(steps_of_p(&check).len(), 3, "a tick makes no second step");
}

/// A remote with `t-0` in `ready/` and a three-line `notes.yaml` (with a `result:` key, as
/// any YAML file may have), a clone of it, and the remote then moved on by another clone that
/// changed the notes' last line.
fn notes_and_a_ready_task() -> (Net, TestRepo) {
    let (net, mine, _) = one_ready_task_two_agents();
    let seed = &net.seed;
    seed.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    seed.commit_file("notes.yaml", "a: 1\nb: 2\nresult: 3\n", "notes");
    seed.git(&["push", "-q", "origin", "main"]);
    mine.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    seed.commit_file("notes.yaml", "a: 1\nb: 2\nresult: 30\n", "their notes");
    seed.git(&["push", "-q", "origin", "main"]);
    (net, mine)
}

#[test]
fn a_persons_hand_move_replayed_with_a_merged_edit_keeps_the_task() {
    let (net, mine) = notes_and_a_ready_task();
    mine.git(&["mv", "work/ready/t-0.yaml", "work/cancelled/t-0.yaml"]);
    mine.commit_file(
        "notes.yaml",
        "a: 10\nb: 2\nresult: 3\n",
        "cancel t-0, notes",
    );

    mine.ok(&["sync"]);

    let check = net.clone();
    assert_eq!(check.find("t-0"), ["work/cancelled/t-0.yaml"]);
    assert_eq!(
        check.read("notes.yaml"),
        "a: 10\nb: 2\nresult: 30\n",
        "merged as text"
    );
}

/// A person's hand move of a task the remote moved on meanwhile (reassigned by hand while
/// its agent finished it) stops sync with what met and advice that keeps one task: move it
/// again from where it is now, never "add it again under another id"; the drop drops the
/// whole move, and a result written into the moved copy is kept as a stale result of the
/// task where it is, never credited to the remote's attempt.
#[test]
fn a_hand_move_of_a_task_the_remote_moved_on_says_to_move_it_again() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    theirs.ok(&["sync"]);
    mine.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    let (from, to) = ("work/assigned/a1/t-0.yaml", "work/assigned/p2/t-0.yaml");
    assert_eq!(mine.where_is("t-0"), from);
    theirs.ok(&["complete", "t-0", "--agent", "a1"]);
    theirs.ok(&["sync"]);
    std::fs::create_dir_all(mine.abs("work/assigned/p2")).expect("mkdir");
    mine.git(&["mv", from, to]);
    mine.git(&["commit", "-q", "-m", "hand t-0 to p2"]);
    let text = mine.read(to);
    let result = "result:\n  status: success\n  output: {by: p2 by hand}\n";
    mine.commit_file(to, &format!("{text}{result}"), "p2's result");

    let err = sync_stops(&mine);

    let says = "it moves t-0 to work/assigned/p2/t-0.yaml, and origin moved that task to work/done/t-0.yaml meanwhile";
    assert!(err.contains(says), "{err}");
    assert!(
        err.contains("look at work/done/t-0.yaml and move it again if you still mean to"),
        "{err}"
    );
    let drop = err
        .split("'coord sync ")
        .nth(1)
        .and_then(|r| r.split('\'').next());
    let args: Vec<&str> = drop.expect("a drop").split(' ').collect();
    let out = mine.run(&[&["sync"], &args[..]].concat());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("stale_result"),
        "{said}"
    );
    let check = net.clone();
    assert_eq!(check.find("t-0"), ["work/done/t-0.yaml"]);
    let done = check.read("work/done/t-0.yaml");
    assert!(
        done.contains("stale_result") && done.contains("p2 by hand"),
        "{done}"
    );
    assert!(!done.contains("agent: p2"), "{done}");
}

/// A hand move still being written (held back whole) of a task the remote moved meanwhile
/// stops sync before it moves onto the remote: switched over, the move would later land as
/// a plain add, the task in two places.
#[test]
fn a_hand_move_still_being_written_of_a_task_the_remote_moved_stops_sync() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    theirs.ok(&["sync"]);
    let (from, to) = ("work/ready/t-0.yaml", "work/assigned/p2/t-0.yaml");
    std::fs::create_dir_all(mine.abs("work/assigned/p2")).expect("mkdir");
    mine.git(&["mv", from, to]);
    let text = mine.read(to);
    mine.write_now(to, &format!("{text}# mine\n"));

    let (_, err) = mine.code(&["sync"], 1);

    let says = format!("{to} is still being written, and origin changed task t-0 meanwhile");
    assert!(err.contains(&says), "{err}");
    assert_eq!(net.clone().find("t-0"), ["work/assigned/a1/t-0.yaml"]);
    crate::harness::set_old_mtime(&mine.abs(to));
    // Settled, coord's recording of the move is left out with a line (the task moved on).
    let out = mine.run(&["sync"]);
    let said = String::from_utf8_lossy(&out.stderr);
    let dropped = format!("dropped: coord: record external changes ({to}: the task is at work/assigned/a1/t-0.yaml on the remote)");
    assert!(out.status.success() && said.contains(&dropped), "{said}");
    assert_eq!(net.clone().find("t-0"), ["work/assigned/a1/t-0.yaml"]);
}

/// A person's uncommitted edit of a file the remote changed (outside `work/`, which coord
/// never records) stops sync before it writes anything, naming the file, as often as it is
/// run: the stopped switch is not taken for one a crash cut short, whose files the next run
/// would write over. Committed, the edit merges.
#[test]
fn a_sync_stopped_by_an_uncommitted_edit_never_writes_over_it_later() {
    let (net, mine) = notes_and_a_ready_task();
    let edit = "a: 10\nb: 2\nresult: 3\n";
    mine.write("notes.yaml", edit);
    for _ in 0..2 {
        let err = sync_stops(&mine);
        let says = "notes.yaml, which it changes, has uncommitted changes here; commit or stash";
        assert!(err.contains(says), "{err}");
        assert_eq!(mine.read("notes.yaml"), edit, "the edit was written over");
    }
    mine.git(&["commit", "-q", "-am", "my notes"]);
    mine.ok(&["sync"]);
    assert_eq!(net.clone().read("notes.yaml"), "a: 10\nb: 2\nresult: 30\n");
}

/// A person's edit still being written of a task the remote changed stops sync before it
/// moves onto the remote, and the next sync (the edit settled) merges it.
#[test]
fn a_sync_stopped_by_an_edit_still_being_written_never_writes_over_it_later() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    let path = "work/ready/t-0.yaml";
    let text = theirs.read(path);
    theirs.commit_file(path, &format!("# theirs\n{text}"), "their note");
    theirs.git(&["push", "-q", "origin", "main"]);
    mine.write_now(path, &format!("{text}# mine\n"));

    let (_, err) = mine.code(&["sync"], 1);
    let says = format!("{path} is still being written, and origin changed task t-0");
    assert!(err.contains(&says), "{err}");
    crate::harness::set_old_mtime(&mine.abs(path));
    mine.ok(&["sync"]);

    let mine_now = mine.read(&mine.where_is("t-0"));
    assert!(
        mine_now.contains("# mine"),
        "the edit was written over: {mine_now}"
    );
    let check = net.clone();
    let landed = check.read(&check.where_is("t-0"));
    assert!(
        landed.contains("# theirs") && landed.contains("# mine"),
        "{landed}"
    );
}

/// A hand move whose moved file is still being written waits whole (never the deletion
/// alone); when the remote changed the task meanwhile, sync stops naming the file and goes
/// on once the file settles, the move made with both edits.
#[test]
fn a_hand_move_still_being_written_waits_whole_and_lands_with_the_remotes_edit() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    let (from, to) = ("work/ready/t-0.yaml", "work/cancelled/t-0.yaml");
    let text = theirs.read(from);
    theirs.commit_file(from, &format!("# theirs\n{text}"), "their note");
    theirs.git(&["push", "-q", "origin", "main"]);
    mine.git(&["mv", from, to]);
    mine.write_now(to, &format!("{text}# mine\n"));

    let (_, err) = mine.code(&["sync"], 1);

    let says = format!("{to} is still being written, and origin changed task t-0");
    assert!(err.contains(&says), "{err}");
    assert_eq!(net.clone().find("t-0"), [from], "half a move pushed");
    crate::harness::set_old_mtime(&mine.abs(to));
    mine.ok(&["sync"]);
    let check = net.clone();
    let landed = check.read(&check.where_is("t-0"));
    assert!(
        landed.contains("# theirs") && landed.contains("# mine"),
        "{landed}"
    );
    assert_eq!(check.where_is("t-0"), to);
}

/// A `--drop-edit` value that names no change meeting the remote's (mistyped, or a list
/// quoted as one value) is said, not silently ignored.
#[test]
fn a_drop_edit_that_names_nothing_is_said() {
    let (net, mine) = notes_and_a_ready_task();
    mine.commit_file("notes.yaml", "a: 10\nb: 2\nresult: 3\n", "my notes");
    let value = "deadbeef00:work/x.yaml --drop-edit 0123456789:work/y.yaml";

    let out = mine.run(&["sync", "--drop-edit", value]);

    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("note: --drop-edit {value} named no change")),
        "{said}"
    );
    assert_eq!(net.clone().read("notes.yaml"), "a: 10\nb: 2\nresult: 30\n");
}

#[test]
fn a_persons_deletion_of_a_task_coord_moved_meanwhile_stops_sync() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    theirs.ok(&["claim", "--agent", "p2", "--sync"]);
    mine.git(&["rm", "-q", "work/ready/t-0.yaml"]);
    mine.git(&["commit", "-q", "-m", "drop t-0"]);
    let before = mine.git(&["rev-parse", "HEAD"]);

    let (_, err) = mine.code(&["sync"], 1);

    assert!(err.contains("work/ready/t-0.yaml"), "{err}");
    assert!(err.contains("--drop-edit"), "{err}");
    assert_eq!(mine.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(net.clone().find("t-0"), ["work/assigned/p2/t-0.yaml"]);
}

#[test]
fn a_persons_empty_commit_and_amended_tick_commit_are_not_dropped() {
    let (net, mine, _) = one_ready_task_two_agents();
    mine.git(&["commit", "-q", "--allow-empty", "-m", "release marker"]);
    mine.ok(&["tick"]);
    assert_eq!(mine.find("t-0"), ["work/assigned/a1/t-0.yaml"]);
    // The amended tick commit assigns a task made here, which the remote does not have.
    mine.ok(&["new", "Mine", "--id", "mine"]);
    mine.ok(&["tick"]);
    mine.write("NOTES.md", "added to coord's commit\n");
    mine.git(&["add", "NOTES.md"]);
    mine.git(&["commit", "-q", "--amend", "--no-edit"]);
    net.person_adds("other", 1);
    mine.ok(&["sync"]);

    let check = net.clone();
    let log = check.git(&["log", "--format=%s"]);
    assert!(log.contains("release marker"), "{log}");
    assert_eq!(check.read("NOTES.md"), "added to coord's commit\n");
    assert_eq!(check.find("t-0"), ["work/assigned/a1/t-0.yaml"]);
    assert!(check.where_is("mine").starts_with("work/assigned/"));
    let view = look_at_remote(&net);
    assert!(
        view.places.values().all(|p| p.len() == 1),
        "{:?}",
        view.places
    );
}

#[test]
fn a_commit_in_another_encoding_or_with_a_non_utf8_file_name_stops_sync() {
    use std::os::unix::ffi::OsStrExt;
    let net = Net::new(&["alice"]);
    let mine = net.clone();
    let mut commit = std::process::Command::new("git");
    commit
        .current_dir(mine.path())
        .args([
            "-c",
            "i18n.commitEncoding=ISO-8859-1",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
        ])
        .arg(std::ffi::OsStr::from_bytes(b"Caf\xe9"));
    for (k, v) in crate::harness::git_env() {
        commit.env(k, v);
    }
    assert!(commit.status().expect("git").success());
    net.person_adds("other", 1);
    let (_, err) = mine.code(&["sync"], 1);
    assert!(err.contains("a commit whose message is not UTF-8"), "{err}");

    mine.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(mine.path().join(name), "x\n").expect("write");
    mine.git(&["add", "-A"]);
    mine.git(&["commit", "-q", "-m", "a file"]);
    let (_, err) = mine.code(&["sync"], 1);
    assert!(err.contains("not UTF-8"), "{err}");
    assert_eq!(mine.git_status(), "");
}

#[test]
fn a_replayed_change_that_conflicts_stops_sync_and_keeps_the_local_branch() {
    let net = Net::new(&["alice"]);
    let (a, b) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    // Both clones record different edits of the same file; b pushes first.
    let path = "work/assigned/alice/t-0.yaml";
    b.write(
        path,
        &b.read(path)
            .replace("title: Task t-0", "title: Task t-0 (b)"),
    );
    b.ok(&["sync"]);
    a.write(
        path,
        &a.read(path)
            .replace("title: Task t-0", "title: Task t-0 (a)"),
    );
    let (_, err) = a.code(&["sync"], 1);
    assert!(err.contains("cannot apply") && err.contains(path), "{err}");
    assert!(
        a.read(path).contains("(a)"),
        "the local edit is still there"
    );
    assert!(a
        .git(&["log", "-1", "--format=%s"])
        .contains("record external changes"));
}

/// Returns the commands a message quotes ('…'), in order.
fn quoted_commands(message: &str) -> Vec<String> {
    message
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Two people edit the same lines of one task in two clones; the one who syncs second also
/// has an unpushed `coord new`. Following the printed advice word for word resolves it: the
/// unrelated commit reaches the remote and no task is duplicated (the advice used to be
/// `git reset --keep origin/main`, which dropped that commit).
#[test]
fn following_the_conflict_advice_keeps_the_other_unpushed_commits() {
    let net = Net::new(&["alice"]);
    let (a, b) = (net.clone(), net.clone());
    net.person_adds("t", 1);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let path = "work/assigned/alice/t-0.yaml";
    b.write(
        path,
        &b.read(path)
            .replace("title: Task t-0", "title: Task t-0 (b)"),
    );
    b.ok(&["sync"]);
    let unrelated = a.ok(&["new", "Unrelated work", "--id", "unrelated"]);
    assert_eq!(unrelated.trim(), "unrelated");
    a.write(
        path,
        &a.read(path)
            .replace("title: Task t-0", "title: Task t-0 (a)"),
    );
    let (_, err) = a.code(&["sync"], 1);
    let steps = quoted_commands(&err);
    assert_eq!(steps.len(), 3, "three commands to follow: {err}");
    assert!(
        steps[0].starts_with("git show ") && steps[0].ends_with("> my-edit.yaml"),
        "{err}"
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&steps[0])
        .current_dir(a.path())
        .envs(crate::harness::git_env())
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved = a.read("my-edit.yaml");
    assert!(saved.contains("title: Task t-0 (a)"), "{saved}");
    let second: Vec<&str> = steps[1].split_whitespace().collect();
    assert_eq!(second[..2], ["coord", "sync"], "{err}");
    a.ok(&second[1..]);
    // "make your edit again in <path>": the person keeps both titles.
    assert!(
        err.contains(&format!("make your edit again in {path}")),
        "{err}"
    );
    a.write(
        path,
        &a.read(path)
            .replace("title: Task t-0 (b)", "title: Task t-0 (a, b)"),
    );
    assert_eq!(steps[2], "coord sync", "{err}");
    a.ok(&["sync"]);
    let check = net.clone();
    assert_eq!(
        check.find("unrelated").len(),
        1,
        "the unpushed coord new survived"
    );
    assert_eq!(check.find("t-0"), [path]);
    assert!(check.read(path).contains("title: Task t-0 (a, b)"));
    let view = look_at_remote(&net);
    let ids = ["t-0".to_string(), "unrelated".to_string()];
    assert_exactly_once(&view, &ids, &["work/assigned/alice"]);
}

#[test]
fn sync_refuses_a_detached_head_and_another_branch() {
    let net = Net::new(&["alice"]);
    let a = net.clone();
    let (_, err) = a.code(&["sync", "--branch", "other"], 1);
    assert!(err.contains("git switch other"), "{err}");
    a.git(&["checkout", "-q", "--detach"]);
    let (_, err) = a.code(&["sync"], 1);
    assert!(err.contains("HEAD is detached"), "{err}");
}

#[test]
fn local_tick_commits_are_redone_on_the_remote_and_dropped_files_survive() {
    let net = Net::new(&["alice"]);
    let (a, b) = (net.clone(), net.clone());
    a.task("from-a", &task_yaml("from-a"));
    a.ok(&["tick"]);
    a.task("late-a", &task_yaml("late-a"));
    b.task("from-b", &task_yaml("from-b"));
    b.ok(&["sync"]);
    let (_, err) = a.code(&["sync"], 0);
    assert!(
        err.contains("dropped 2 tick commits to redo, replayed 2"),
        "{err}"
    );
    let ids: Vec<String> = ["from-a", "late-a", "from-b"].map(String::from).to_vec();
    assert_exactly_once(&look_at_remote(&net), &ids, &["work/assigned/alice"]);
    assert_eq!(a.git_status(), "");
}

/// Commits a submodule (a gitlink) at `path` pointing at `commit`, without a work tree.
fn set_gitlink(repo: &TestRepo, path: &str, commit: &str) {
    let info = format!("160000,{commit},{path}");
    repo.git(&["update-index", "--add", "--cacheinfo", &info]);
    repo.git(&["commit", "-q", "-m", "submodule"]);
}

/// A clone with a file, a submodule and a task `bob` (named like an agent) pushed, and a
/// second clone; then the remote moves on (another task, bob assigned to agent bob's peer).
fn shapes_and_a_moved_remote() -> (Net, TestRepo) {
    let net = Net::new(&["bob"]);
    let seed = &net.seed;
    seed.commit_file("f.txt", "a\nb\n", "a file");
    seed.task("bob", &crate::harness::task_yaml("bob"));
    seed.git(&["add", "-A"]);
    seed.git(&["commit", "-q", "-m", "task bob"]);
    set_gitlink(seed, "lib", &"1".repeat(40));
    seed.git(&["push", "-q", "origin", "main"]);
    let mine = net.clone();
    net.clone().ok(&["sync"]);
    (net, mine)
}

#[test]
fn links_submodules_and_a_task_named_like_an_agent_replay_without_a_false_conflict() {
    let (net, mine) = shapes_and_a_moved_remote();
    std::fs::remove_file(mine.abs("f.txt")).expect("rm");
    std::os::unix::fs::symlink("target.txt", mine.abs("f.txt")).expect("link");
    let task = "work/inbox/bob.yaml";
    mine.write(task, &(mine.read(task) + "description: more detail\n"));
    mine.git(&["add", "f.txt", task]);
    mine.git(&["commit", "-q", "-m", "a link, more detail"]);
    set_gitlink(&mine, "lib", &"2".repeat(40));

    mine.ok(&["sync"]);

    let check = net.clone();
    let tree = check.git(&["ls-tree", "HEAD", "f.txt", "lib"]);
    assert!(tree.contains("120000 blob"), "{tree}");
    assert!(
        tree.contains(&format!("160000 commit {}", "2".repeat(40))),
        "{tree}"
    );
    let at = "work/assigned/bob/bob.yaml";
    assert!(check.read(at).contains("description: more detail"));
}

/// Retitles the task at `path` to "T" in `repo` and pushes it with plain git.
fn retitle_and_push(repo: &TestRepo, path: &str) {
    repo.write(
        path,
        &repo.read(path).replace("title: Task t-0", "title: T"),
    );
    repo.git(&["commit", "-q", "-am", "retitle t-0"]);
    repo.git(&["push", "-q", "origin", "main"]);
}

/// Runs `coord sync` expecting it to stop, and returns its one error line.
fn sync_stops(repo: &TestRepo) -> String {
    let (_, err) = repo.code(&["sync"], 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!err.contains("class="), "a raw libgit2 error: {err}");
    err
}

#[test]
fn each_kind_of_clash_says_what_met_and_its_advice_works() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    mine.git(&["rm", "-q", "work/ready/t-0.yaml"]);
    mine.git(&["commit", "-q", "-m", "t-0 is not needed"]);
    let path = "work/ready/t-0.yaml";
    retitle_and_push(&theirs, path);
    let err = sync_stops(&mine);
    assert!(
        err.contains("it deletes work/ready/t-0.yaml, which origin changed meanwhile"),
        "{err}"
    );
    let drop = quoted_commands(&err)
        .into_iter()
        .find(|c| c.starts_with("coord sync --drop-edit"))
        .expect("the advice names a drop");
    let args: Vec<&str> = drop.split(' ').skip(1).collect();
    mine.ok(&args);
    let check = net.clone();
    assert!(check.read(&check.where_is("t-0")).contains("title: T"));

    theirs.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    theirs.commit_file("docs/guide.md", "the guide\n", "a guide");
    theirs.git(&["push", "-q", "origin", "main"]);
    let stops_on = |path: &str, says: &str| {
        mine.commit_file(path, "my version\n", "my file");
        let err = sync_stops(&mine);
        assert!(err.contains(says), "{err}");
        mine.git(&["reset", "-q", "--hard", "HEAD~1"]);
    };
    stops_on("docs", "it puts a file at docs, where origin has a folder");
    net.person_adds("n", 1);
    stops_on(
        "work/inbox/n-0.yaml",
        "it adds work/inbox/n-0.yaml, which origin added too",
    );
    stops_on(
        "work/inbox/n-0.yml",
        "and origin has a task with that id at work/inbox/n-0.yaml",
    );

    // A task named like agent p2, whose profile the remote deletes: an edit of the profile
    // is an edit of a deleted file, never to be made again in the task.
    theirs.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    theirs.commit_file("work/ready/p2.yaml", "title: named like p2\n", "task p2");
    theirs.git(&["push", "-q", "origin", "main"]);
    mine.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    theirs.git(&["rm", "-q", "work/agents/p2.yaml"]);
    theirs.git(&["commit", "-q", "-m", "retire p2"]);
    theirs.git(&["push", "-q", "origin", "main"]);
    stops_on(
        "work/agents/p2.yaml",
        "it changes work/agents/p2.yaml, which origin deleted",
    );
}

#[test]
fn a_corrected_task_added_next_to_its_rejected_copy_lands_when_the_remote_moved() {
    let net = Net::new(&["alice"]);
    let seed = &net.seed;
    seed.commit_file("work/inbox/foo.yaml", "title: [broken\n", "foo");
    seed.ok(&["sync"]);
    assert!(seed.exists("work/invalid/foo.yaml"));
    let mine = net.clone();
    net.person_adds("other", 1);
    mine.commit_file("work/inbox/foo.yaml", "title: fixed foo\n", "foo, fixed");

    mine.ok(&["sync"]);

    let check = net.clone();
    let found = check.git(&["grep", "-l", "title: fixed foo", "--", "work"]);
    assert!(!found.is_empty(), "the corrected task is on the remote");
}

#[test]
fn a_repository_not_cloned_from_the_remote_is_told_so_not_called_a_merge() {
    let net = Net::new(&["alice"]);
    let mut fresh = TestRepo::empty_in_memory();
    fresh.at("2026-01-02T03:04:05Z").ok(&["init"]);
    let url = net.remote.path().to_str().expect("utf8");
    fresh.git(&["remote", "add", "origin", url]);

    let err = sync_stops(&fresh);

    assert!(err.contains("share no history"), "{err}");
    assert!(!err.contains("a merge"), "{err}");
}

/// A person renames the work folder while another clone moved a task: replayed file by file,
/// the task would be in the old folder and the new. Sync stops, and its advice works. With
/// the files moved in one commit and coord.yaml told in the next, it stops at the first
/// (replayed alone it would push the tasks outside coord's folder).
#[test]
fn a_move_of_the_work_folder_onto_a_remote_that_moved_tasks_stops_and_its_advice_works() {
    for files_first in [true, false] {
        let (net, mine, theirs) = one_ready_task_two_agents();
        theirs.ok(&["claim", "--agent", "p2", "--sync"]);
        mine.git(&["mv", "work", "tasks"]);
        if files_first {
            // The files moved in one commit, coord.yaml told in the next: the first stops.
            mine.git(&["commit", "-q", "-m", "move work/ to tasks/"]);
        }
        let the_move = mine.git(&["rev-parse", "--short=10", "HEAD"]);
        let config = mine
            .read("coord.yaml")
            .replace("work_dir: work", "work_dir: tasks");
        mine.write("coord.yaml", &config);
        mine.git(&["commit", "-q", "-am", "work/ is now tasks/"]);

        let err = sync_stops(&mine);

        assert!(err.contains("it moves the work folder"), "{err}");
        if files_first {
            assert!(err.contains(the_move.trim()), "{err}");
            continue;
        }
        let rebase = quoted_commands(&err)
            .into_iter()
            .find(|c| c.starts_with("git rebase"))
            .expect("the advice names a rebase");
        let args: Vec<&str> = rebase.split(' ').skip(1).collect();
        mine.git(&args);
        mine.ok(&["sync"]);
        assert_eq!(net.clone().find("t-0"), ["work/assigned/p2/t-0.yaml"]);
    }
}

/// Asserts that no commit of the remote has task `id` in more than one place.
fn never_in_two_places(net: &Net, id: &str) {
    let check = net.clone();
    for commit in check.git(&["rev-list", "HEAD"]).lines() {
        let files = check.git(&["ls-tree", "-r", "--name-only", commit, "work"]);
        let names = [format!("/{id}.yaml"), format!("/{id}.yml")];
        let at: Vec<&str> = files
            .lines()
            .filter(|p| names.iter().any(|n| p.ends_with(n.as_str())))
            .collect();
        assert!(at.len() < 2, "{id} in {at:?} at {commit}");
    }
}

/// A person hands a task to another agent by hand (`git mv`) while another clone edited the
/// task in place: the move lands with both changes; when both changed the same line, the
/// conflict names the move's new path and dropping it drops the whole move. Never the task
/// in two places, in any commit.
#[test]
fn a_hand_move_of_a_task_the_remote_edited_moves_it_with_both_changes_or_not_at_all() {
    for same_line in [false, true] {
        let (net, mine, theirs) = one_ready_task_two_agents();
        mine.ok(&["tick"]);
        mine.ok(&["sync"]);
        theirs.git(&["pull", "-q", "--ff-only", "origin", "main"]);
        let (from, to) = ("work/assigned/a1/t-0.yaml", "work/assigned/p2/t-0.yaml");
        let text = theirs.read(from);
        theirs.write(from, &text.replace("title: Task t-0", "title: Their title"));
        theirs.git(&["commit", "-q", "-am", "their change"]);
        theirs.git(&["push", "-q", "origin", "main"]);
        std::fs::create_dir_all(mine.abs("work/assigned/p2")).expect("mkdir");
        mine.git(&["mv", from, to]);
        if same_line {
            mine.write(
                to,
                &mine.read(to).replace("title: Task t-0", "title: My title"),
            );
        }
        mine.git(&["commit", "-q", "-am", "hand t-0 to p2"]);

        if same_line {
            let err = sync_stops(&mine);
            let commit = &mine.git(&["rev-parse", "HEAD"])[..10];
            let drop = format!("{commit}:{to}");
            assert!(err.contains(&format!("--drop-edit {drop}")), "{err}");
            mine.ok(&["sync", "--drop-edit", &drop]);
        } else {
            mine.ok(&["sync"]);
            let check = net.clone();
            assert_eq!(check.where_is("t-0"), to);
            let task = check.read(to);
            assert!(task.contains("title: Their title"), "{task}");
        }
        never_in_two_places(&net, "t-0");
    }
}

/// Only a task moved within the work folder is a hand move: a README moved next to the
/// deletion of another README the remote edited is no move of that file (the deletion
/// stops); a task reopened as a `.yml` twin of its `.yaml` id is (it moves with the remote's
/// edit, one place in every commit).
#[test]
fn hand_moves_are_paired_by_task_id_and_only_for_tasks() {
    let (net, mine, theirs) = one_ready_task_two_agents();
    for f in ["a/README.md", "c/README.md"] {
        net.seed.commit_file(f, "read me\n", "a readme");
    }
    net.seed.git(&["push", "-q", "origin", "main"]);
    for r in [&mine, &theirs] {
        r.git(&["pull", "-q", "--ff-only", "origin", "main"]);
    }
    theirs.commit_file("c/README.md", "read me, edited\n", "edit c");
    let path = "work/ready/t-0.yaml";
    retitle_and_push(&theirs, path);
    std::fs::create_dir_all(mine.abs("b")).expect("mkdir");
    mine.git(&["mv", "a/README.md", "b/README.md"]);
    mine.git(&["rm", "-q", "c/README.md"]);
    mine.git(&["commit", "-q", "-m", "readmes"]);
    let err = sync_stops(&mine);
    assert!(err.contains("it deletes c/README.md"), "{err}");
    mine.git(&["reset", "-q", "--hard", "HEAD~1"]);

    std::fs::create_dir_all(mine.abs("work/cancelled")).expect("mkdir");
    mine.git(&["mv", path, "work/cancelled/t-0.yml"]);
    mine.git(&["commit", "-q", "-m", "cancel t-0 by hand"]);
    mine.ok(&["sync"]);

    let check = net.clone();
    assert!(check.read("work/cancelled/t-0.yml").contains("title: T"));
    never_in_two_places(&net, "t-0");
}

/// Two unpushed commits each clash: the advice for the second repeats the `--drop-edit` the
/// first was dropped with, and following each printed command literally ends the sync.
#[test]
fn the_advice_after_a_drop_repeats_the_drops_already_given() {
    let (net, mine, _) = one_ready_task_two_agents();
    mine.commit_file("work/inbox/n-0.yaml", "title: mine 0\n", "my n-0");
    mine.commit_file("work/inbox/n-1.yaml", "title: mine 1\n", "my n-1");
    net.person_adds("n", 2);
    let mut drops: Vec<String> = vec!["sync".to_string()];
    for _ in 0..2 {
        let (_, err) = mine.code(&drops.iter().map(String::as_str).collect::<Vec<_>>(), 1);
        let command = quoted_commands(&err)
            .into_iter()
            .find(|c| c.starts_with("coord sync"))
            .expect("the advice names a sync");
        for given in drops.iter().filter(|d| d.contains(':')) {
            assert!(
                command.contains(given.as_str()),
                "{command} forgets {given}"
            );
        }
        drops = command.split(' ').skip(1).map(String::from).collect();
    }
    mine.ok(&drops.iter().map(String::as_str).collect::<Vec<_>>());
    let check = net.clone();
    let theirs = check.read(&check.where_is("n-1"));
    assert!(!theirs.contains("mine 1"), "{theirs}");
}

#[test]
fn status_warns_when_this_clones_pushes_near_the_remotes_budget() {
    let net = Net::new(&["alice"]);
    let c = net.clone();
    let config = c.read("coord.yaml") + "sync: {pushes_per_minute: 1}\n";
    c.commit_file("coord.yaml", &config, "a push budget of 1 a minute");
    let warned = |c: &TestRepo| {
        let (_, err) = c.code(&["status"], 0);
        err.contains("pushes_per_minute")
    };
    for i in 0..7 {
        c.write(&format!("work/inbox/t{i}.yaml"), "title: t\n");
        c.ok(&["sync", "--remote", "origin"]);
        assert!(!warned(&c), "no warning after {} pushes", i + 1);
    }
    c.write("work/inbox/t7.yaml", "title: t\n");
    c.ok(&["sync", "--remote", "origin"]);
    let (_, err) = c.code(&["status"], 0);
    assert!(
        err.contains("this clone pushed 8 times in the last 10 minutes")
            && err.contains("about 1 a minute"),
        "{err}"
    );
}
