//! coord's own write of an index that spans many SHA-1 chunks: the write hashes
//! on from the state its read kept where the new bytes part from the old, and copies the
//! entries between changes as runs. Between ticks a person adds, commits, resets, checks
//! out and refreshes with git (git writes the index each time, the same size or not); after
//! every tick coord's index has the right checksum, `git status` is clean and the index is
//! HEAD's.

use crate::harness::{task_yaml, TestRepo};

/// A finished task, as many sit in a big repo.
fn done_task(i: usize) -> String {
    format!(
        "title: Done {i}\nresult:\n  status: success\n  attempt: 1\n  agent: bot\n  \
         output: {{summary: done}}\ncoord:\n  state: done\n  attempt: 1\n  \
         created_at: 2026-11-01T10:00:00Z\n"
    )
}

/// A repo with 1,500 done tasks committed by a person: an index of ~150 KB, several of the
/// 64 KiB chunks whose SHA-1 states a read keeps.
fn big_repo() -> TestRepo {
    let r = TestRepo::with_agents(&["bot --max-active 1000"]);
    for i in 0..1500 {
        r.write(&format!("work/done/d-{i:05}.yaml"), &done_task(i));
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "seed"]);
    let size = std::fs::metadata(r.abs(".git/index")).expect("index").len();
    assert!(size > 2 << 16, "{size} bytes");
    r
}

/// Drops `ids` into the inbox and commits them as a person does.
fn commit_new(r: &TestRepo, ids: &[&str]) {
    for id in ids {
        r.write(&format!("work/inbox/{id}.yaml"), &task_yaml(id));
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "new tasks"]);
}

/// Ticks, then checks the index coord wrote: its checksum is its content's SHA-1 (libgit2
/// checks it on reading; git only in `git fsck`), it is HEAD's, and the work tree is clean.
fn tick_and_check(r: &TestRepo, after: &str) {
    r.ok(&["tick", "-q"]);
    git2::Index::open(&r.abs(".git/index")).expect("the index's checksum is right");
    assert_eq!(r.git_status(), "", "after {after}");
    // Exits non-zero (and `git` fails the test) when the index is not HEAD's.
    r.git(&["diff", "--cached", "--quiet"]);
    let staged = r.git(&["ls-files", "-s"]).lines().count();
    let committed = r.git(&["ls-tree", "-r", "HEAD"]).lines().count();
    assert_eq!(staged, committed, "after {after}");
}

#[test]
fn git_reads_the_index_coord_writes_after_each_thing_a_person_does_with_git() {
    let r = big_repo();
    commit_new(&r, &["a1", "a2", "a3"]);
    tick_and_check(&r, "git add + git commit");
    assert_eq!(r.where_is("a2"), "work/assigned/bot/a2.yaml");

    commit_new(&r, &["b1", "b2"]);
    r.git(&["reset", "-q", "--hard", "HEAD~1"]);
    commit_new(&r, &["c1"]);
    tick_and_check(&r, "git reset --hard");

    r.git(&["checkout", "-q", "-b", "side"]);
    commit_new(&r, &["s1"]);
    r.git(&["checkout", "-q", "main"]);
    r.git(&["merge", "-q", "--ff-only", "side"]);
    tick_and_check(&r, "git checkout and a fast-forward");

    // git writes the index again with the same size: only the stat data of one entry moves.
    commit_new(&r, &["e1"]);
    let index = || std::fs::read(r.abs(".git/index")).expect("index");
    let before = index();
    r.write("work/done/d-00007.yaml", &done_task(7));
    r.git(&["update-index", "-q", "--refresh"]);
    let after = index();
    assert_eq!(after.len(), before.len());
    assert_ne!(after, before, "git wrote it again");
    tick_and_check(&r, "an index rewritten with the same size");

    // A person's same-size edit of a task coord just wrote, left uncommitted: the tick
    // records it, and the index it writes has it.
    let path = "work/assigned/bot/e1.yaml";
    let text = r.read(path).replacen("title: Task e1", "title: Task E1", 1);
    r.write(path, &text);
    tick_and_check(&r, "an uncommitted edit");
    assert!(r
        .git(&["show", &format!("HEAD:{path}")])
        .contains("Task E1"));
}

/// A tick killed with SIGKILL at points spread over its run (its index write among them)
/// leaves what the next tick finishes: the index it writes then has the right checksum, is
/// HEAD's, and the work tree is clean.
#[test]
fn a_tick_killed_anywhere_leaves_an_index_the_next_tick_writes_right() {
    let r = big_repo();
    commit_new(&r, &["w1", "w2"]);
    let start = std::time::Instant::now();
    tick_and_check(&r, "a tick run whole");
    let whole = start.elapsed();
    let rounds = 8;
    for round in 0..rounds {
        commit_new(&r, &[&format!("k{round}-a"), &format!("k{round}-b")]);
        let mut tick = r.spawn(&["tick", "-q"]);
        std::thread::sleep(whole * round / rounds);
        let _ = tick.kill();
        let _ = tick.wait();
        tick_and_check(&r, &format!("a kill {round}/{rounds} of the way in"));
        assert_eq!(
            r.where_is(&format!("k{round}-b")),
            format!("work/assigned/bot/k{round}-b.yaml")
        );
    }
}
