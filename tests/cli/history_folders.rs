//! The history-folder record for the folders of finished tasks directly under `work/`
//! (`done/`, `failed/`, `cancelled/`; README "Finished tasks are history", docs/internals.md): a
//! tick takes their files from `.git/coord/history-folders` while the folder and HEAD's tree
//! for it are unchanged, so an in-place edit there is left to the person until it is
//! committed or staged or the folder's listing changes; everything else is seen as before.
//! Archive months: tests/cli/archive_months.rs.

use crate::finished::{
    dependent as dependent_titled, finished, input_v, person_commits, recordings, tick,
};
use crate::harness::{Net, TestRepo};
use serde_json::json;
use std::time::Duration;

const DONE: &str = "work/done";
const RECORD: &str = ".git/coord/history-folders";

/// Whether the record holds the folder `rel` (work-relative): its path is stored after its
/// length as 8 little-endian bytes.
fn recorded(r: &TestRepo, rel: &str) -> bool {
    let mut stored = (rel.len() as u64).to_le_bytes().to_vec();
    stored.extend_from_slice(rel.as_bytes());
    std::fs::read(r.abs(RECORD)).is_ok_and(|b| b.windows(stored.len()).any(|w| w == stored))
}

/// A repo with agent `bot` and the done task `old` (output 1) committed by a person, after a
/// tick that recorded `done/`.
fn recorded_repo() -> TestRepo {
    let r = TestRepo::with_agents(&["bot --max-active 5"]);
    r.write(&format!("{DONE}/old.yaml"), &finished("Old", 1));
    person_commits(&r, "a done task");
    tick(&r);
    assert!(recorded(&r, "done"), "done/ is recorded");
    r
}

/// A task for `bot` titled `Next` that waits for `dep` and takes its output `v` as input.
fn dependent(dep: &str) -> String {
    dependent_titled(dep, "Next")
}

/// Everything said on stdout and stderr.
fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// The rule: a done file edited in place is left to the person (nothing recorded, dependents
/// read the committed version) until the folder's listing changes: a completion into `done/`
/// makes the next tick walk it file by file, and the edit is then recorded and read.
#[test]
fn an_in_place_edit_in_done_is_recorded_once_a_completion_lands_in_done() {
    let r = recorded_repo();
    let old = format!("{DONE}/old.yaml");
    r.write(&old, &finished("Old", 2));
    let commits = r.commit_count();
    tick(&r);
    assert_eq!(r.commit_count(), commits, "nothing recorded");
    assert_eq!(r.git_status(), format!(" M {old}\n"));

    std::fs::remove_file(r.abs(".git/coord/stat-cache.bin")).expect("rm cache");
    r.task("next", &dependent("old"));
    r.git(&["add", "work/inbox/next.yaml"]);
    r.git(&["commit", "-q", "-m", "a dependent"]);
    tick(&r);
    assert_eq!(r.where_is("next"), "work/assigned/bot/next.yaml");
    assert_eq!(input_v(&r, "next"), json!(1), "the committed version");
    assert_eq!(r.git_status(), format!(" M {old}\n"));

    let before = recordings(&r);
    r.ok(&["complete", "next", "--agent", "bot"]);
    tick(&r);
    assert_eq!(r.where_is("next"), "work/done/next.yaml");
    r.task("next2", &dependent("old").replace("Next", "Next 2"));
    tick(&r);
    assert!(recordings(&r) > before, "the edit is recorded");
    assert_eq!(r.git_status(), "");
    assert_eq!(input_v(&r, "next2"), json!(2), "the edit is read");
    let log = r.git(&["log", "-1", "--format=%s", "--", &old]);
    assert_eq!(log.trim(), "coord: record external changes");

    // An edit the person commits (the folder's listing unchanged) is read at once.
    tick(&r);
    assert!(recorded(&r, "done"));
    r.write(&old, &finished("Old", 5));
    r.task("next3", &dependent("old").replace("Next", "Next 3"));
    person_commits(&r, "a corrected result and a dependent");
    tick(&r);
    assert_eq!(input_v(&r, "next3"), json!(5), "the committed edit is read");
    assert_eq!(r.git_status(), "");
}

/// A staged edit in `done/` gives the index stat data the record does not have: it is seen
/// and recorded as any change a person makes.
#[test]
fn a_staged_edit_in_done_is_recorded() {
    let r = recorded_repo();
    let old = format!("{DONE}/old.yaml");
    r.write(&old, &finished("Old", 2));
    r.git(&["add", &old]);
    let before = recordings(&r);
    r.task("next", &dependent("old"));
    tick(&r);
    assert_eq!(recordings(&r), before + 1, "recorded");
    assert_eq!(input_v(&r, "next"), json!(2));
    assert_eq!(r.git_status(), "");
}

/// A file added to or removed from a recorded `done/` by hand, and nothing else changed, is
/// seen and recorded by the next tick: the folder's stat key differs.
#[test]
fn a_file_added_or_removed_by_hand_in_done_is_seen() {
    let r = recorded_repo();
    let extra = format!("{DONE}/extra.yaml");
    r.write(&extra, &finished("Extra", 3));
    let before = recordings(&r);
    tick(&r);
    assert_eq!(recordings(&r), before + 1, "the new file is recorded");
    assert_eq!(r.git_status(), "");
    assert!(r.git(&["ls-files", &extra]).contains("extra.yaml"));
    r.task("next", &dependent("extra"));
    tick(&r);
    assert_eq!(input_v(&r, "next"), json!(3));

    tick(&r);
    assert!(recorded(&r, "done"));
    let before = recordings(&r);
    std::fs::remove_file(r.abs(&extra)).expect("rm");
    tick(&r);
    assert_eq!(recordings(&r), before + 1, "the removal is recorded");
    assert_eq!(r.git_status(), "");
    assert_eq!(r.git(&["ls-files", &extra]), "");
}

/// A task moved by hand out of a recorded `done/` and one moved into it are seen by the next
/// tick, each in one place, and dependents read them.
#[test]
fn hand_moves_out_of_and_into_done_are_seen_at_once() {
    let r = recorded_repo();
    r.write(
        "work/failed/gone.yaml",
        &finished("Gone", 5).replace("state: done", "state: failed"),
    );
    person_commits(&r, "a failed task");
    tick(&r);
    assert!(recorded(&r, "failed"), "failed/ is recorded");

    std::fs::create_dir_all(r.abs("work/archive/2026-10")).expect("mkdir");
    std::fs::rename(
        r.abs(&format!("{DONE}/old.yaml")),
        r.abs("work/archive/2026-10/old.yaml"),
    )
    .expect("mv out");
    r.task("next", &dependent("old"));
    tick(&r);
    assert_eq!(r.where_is("old"), "work/archive/2026-10/old.yaml");
    assert_eq!(input_v(&r, "next"), json!(1));
    assert_eq!(r.git_status(), "");

    tick(&r);
    assert!(recorded(&r, "done"), "done/ is recorded again");
    std::fs::rename(
        r.abs("work/archive/2026-10/old.yaml"),
        r.abs(&format!("{DONE}/old.yaml")),
    )
    .expect("mv in");
    r.task("next2", &dependent("old").replace("Next", "Next 2"));
    tick(&r);
    assert_eq!(r.where_is("old"), format!("{DONE}/old.yaml"));
    assert_eq!(input_v(&r, "next2"), json!(1));
    assert_eq!(r.git_status(), "");
}

/// Files a `git checkout`, `git reset --hard` or `git pull` of another commit adds to or
/// changes in a recorded `done/` are seen: HEAD's tree for the folder differs.
#[test]
fn a_checkout_reset_or_pull_of_another_commit_is_seen_in_done() {
    let r = recorded_repo();
    let base = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    r.git(&["checkout", "-q", "-b", "other"]);
    r.write(&format!("{DONE}/extra.yaml"), &finished("Extra", 3));
    r.write(&format!("{DONE}/old.yaml"), &finished("Old", 4));
    person_commits(&r, "other done tasks");
    let other = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    r.git(&["checkout", "-q", "-"]);
    tick(&r);
    assert!(recorded(&r, "done"));

    r.git(&["checkout", "-q", "other"]);
    r.task("n1", &dependent("extra"));
    r.task("n2", &dependent("old").replace("Next", "Next 2"));
    tick(&r);
    assert_eq!(input_v(&r, "n1"), json!(3), "a file added by checkout");
    assert_eq!(input_v(&r, "n2"), json!(4), "a file changed by checkout");
    assert_eq!(r.git_status(), "");

    tick(&r);
    r.git(&["reset", "-q", "--hard", &base]);
    r.task("n3", &dependent("old").replace("Next", "Next 3"));
    tick(&r);
    assert_eq!(input_v(&r, "n3"), json!(1), "the reset version");
    assert!(r.find("extra").is_empty(), "extra is gone with the reset");
    assert_eq!(r.git_status(), "");

    // A pull merging a commit that adds a done file.
    let remote = TestRepo::empty_in_memory();
    crate::harness::git_in(remote.path(), &["init", "-q", "--bare"]);
    let url = remote.path().to_str().expect("utf8").to_string();
    r.git(&["remote", "add", "up", &url]);
    r.git(&["push", "-q", "up", &format!("{other}:refs/heads/main")]);
    tick(&r);
    assert!(recorded(&r, "done"));
    r.git(&["pull", "-q", "--no-rebase", "--no-edit", "up", "main"]);
    r.task("n4", &dependent("extra").replace("Next", "Next 4"));
    tick(&r);
    assert_eq!(input_v(&r, "n4"), json!(3), "a file added by pull");
    assert_eq!(r.git_status(), "");
}

/// `coord sync` while a done file holds an in-place edit no tick recorded and the remote
/// changed that same file: the person's edit is never overwritten or lost. Sync's own
/// recording scans every file (it takes nothing from the record): a settled edit is recorded
/// as the person's and meets the remote's as any edit of the same lines (sync stops with the
/// way on); one still being written is held back and sync stops before moving, with one line
/// naming the file and saying what to do.
#[test]
fn sync_never_overwrites_an_unrecorded_edit_in_done() {
    let net = Net::new(&["bot"]);
    let old = format!("{DONE}/old.yaml");
    net.seed.write(&old, &finished("Old", 1));
    person_commits(&net.seed, "a done task");
    net.seed.git(&["push", "-q", "origin", "main"]);
    let mine = net.clone();
    tick(&mine);
    tick(&mine);
    assert!(recorded(&mine, "done"));
    net.seed.write(&old, &finished("Theirs", 1));
    person_commits(&net.seed, "the remote's edit");
    net.seed.git(&["push", "-q", "origin", "main"]);

    mine.write_now(&old, &finished("Mine", 1));
    let out = mine.run(&["sync"]);
    assert_eq!(
        mine.read(&old),
        finished("Mine", 1),
        "the edit stays: {}",
        said(&out)
    );
    assert_eq!(out.status.code(), Some(1), "sync stops: {}", said(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.contains(&format!("{old} is still being written"))
            && first.contains("nothing was changed here"),
        "{err}"
    );
    assert_eq!(mine.git_status(), format!(" M {old}\n"));

    mine.write(&old, &finished("Mine", 2));
    let out = mine.run(&["sync"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("--drop-edit"), "{}", said(&out));
    assert_eq!(mine.read(&old), finished("Mine", 2), "the edit stays");
}

/// A corrupt or missing record is never trusted: `done/` is walked file by file, so an
/// in-place edit is then seen and recorded, and the record is written again.
#[test]
fn a_corrupt_or_missing_record_means_a_full_walk_of_done() {
    for how in ["corrupt", "cut", "missing"] {
        let r = recorded_repo();
        let bytes = std::fs::read(r.abs(RECORD)).expect("record");
        match how {
            "corrupt" => {
                let mut bad = bytes.clone();
                let at = bad.len() / 2;
                bad[at] ^= 1;
                std::fs::write(r.abs(RECORD), bad).expect("write");
            }
            "cut" => std::fs::write(r.abs(RECORD), &bytes[..bytes.len() / 2]).expect("write"),
            _ => std::fs::remove_file(r.abs(RECORD)).expect("rm"),
        }
        let old = format!("{DONE}/old.yaml");
        r.write(&old, &finished("Old", 2));
        let before = recordings(&r);
        tick(&r);
        assert_eq!(recordings(&r), before + 1, "{how}: the edit was seen");
        assert_eq!(r.git_status(), "", "{how}");
        tick(&r);
        assert!(recorded(&r, "done"), "{how}: written again");
    }
}

/// A tick killed at any point, also while it writes the record: the next ticks never trust a
/// torn record; every task is in one place, a file added by hand is seen and `git status` is
/// clean.
#[test]
fn a_tick_killed_while_it_writes_the_record_leaves_nothing_wrong() {
    for delay_ms in [0, 3, 10, 25, 60] {
        let r = TestRepo::with_agents(&["bot --max-active 5"]);
        for i in 0..300 {
            r.write(&format!("{DONE}/d{i}.yaml"), &finished("Done", i));
        }
        person_commits(&r, "done tasks");
        std::thread::sleep(Duration::from_millis(200));
        let mut child = r.spawn(&["tick"]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        tick(&r);
        r.write(&format!("{DONE}/added.yaml"), &finished("Added", 7));
        r.task("next", &dependent("added"));
        tick(&r);
        assert_eq!(input_v(&r, "next"), json!(7), "killed after {delay_ms} ms");
        r.task("n2", &dependent("d42").replace("Next", "Next 2"));
        tick(&r);
        assert_eq!(input_v(&r, "n2"), json!(42), "killed after {delay_ms} ms");
        for (id, paths) in crate::harness::task_places(r.path()) {
            assert_eq!(
                paths.len(),
                1,
                "{id} at {paths:?} (killed after {delay_ms} ms)"
            );
        }
        assert_eq!(r.git_status(), "", "killed after {delay_ms} ms");
        assert!(recorded(&r, "done"), "killed after {delay_ms} ms");
    }
}

/// The racy-timestamp rule: a folder whose own stamp is as new as the walk (its listing
/// changed within the same instant) is not recorded, so a later change at that stamp could
/// not hide behind the record; once settled it is.
#[test]
fn a_folder_changed_as_the_record_is_written_is_not_recorded() {
    let r = TestRepo::with_agents(&["bot --max-active 5"]);
    r.write(&format!("{DONE}/old.yaml"), &finished("Old", 1));
    person_commits(&r, "a done task");
    std::thread::sleep(Duration::from_millis(300));
    // The files are settled; the folder's listing changes now.
    std::fs::write(r.abs(&format!("{DONE}/scratch")), "x").expect("write");
    std::fs::remove_file(r.abs(&format!("{DONE}/scratch"))).expect("rm");
    r.ok(&["tick"]);
    assert!(!recorded(&r, "done"), "not settled: not recorded");
    tick(&r);
    assert!(recorded(&r, "done"), "settled: recorded");
}

/// `coord validate` reads every file: a done file broken in place is reported while the tick
/// leaves it to the person.
#[test]
fn validate_reports_a_done_file_broken_in_place() {
    let r = recorded_repo();
    let old = format!("{DONE}/old.yaml");
    r.write(&old, "title: [broken\n");
    let out = r.run(&["validate"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(said(&out).contains("old.yaml"), "{}", said(&out));
    r.task("next", &dependent("old"));
    r.git(&["add", "work/inbox/next.yaml"]);
    r.git(&["commit", "-q", "-m", "a dependent"]);
    tick(&r);
    assert_eq!(input_v(&r, "next"), json!(1));
    assert_eq!(r.git_status(), format!(" M {old}\n"));
}

/// A command that acts on a finished task sees its file as it is: an in-place edit nobody
/// staged is recorded first and the command acts on it. (`retry`, `archive` and `doctor
/// --fix` skipped such a file as "changed meanwhile; the next tick retries", and no tick
/// ever did: the rule leaves in-place edits of finished files to the person.)
#[test]
fn commands_acting_on_a_finished_task_record_its_in_place_edit_first() {
    let settled = || std::thread::sleep(Duration::from_millis(200));
    let old = format!("{DONE}/old.yaml");

    let r = recorded_repo();
    let failed = "work/failed/f.yaml";
    let text = finished("F", 1).replace("state: done", "state: failed");
    r.write(failed, &text);
    person_commits(&r, "a failed task");
    tick(&r);
    assert!(recorded(&r, "failed"));
    r.write(
        failed,
        &text.replace("title: F", "title: F\ndescription: a person's note"),
    );
    settled();
    r.ok(&["retry", "f"]);
    assert_eq!(r.where_is("f"), "work/inbox/f.yaml");
    assert!(r.read("work/inbox/f.yaml").contains("a person's note"));
    assert_eq!(r.git_status(), "");

    let r = recorded_repo();
    r.write(&old, &finished("Old", 2));
    settled();
    r.ok(&["archive", "--older-than", "0s"]);
    let archived = r.where_is("old");
    assert!(archived.starts_with("work/archive/"), "{archived}");
    assert!(r.read(&archived).contains("v: 2"), "{}", r.read(&archived));
    assert_eq!(r.git_status(), "");

    let r = recorded_repo();
    r.write(&old, &finished("Old", 3));
    settled();
    let found = said(&r.run(&["doctor"]));
    assert!(
        found.contains("in-place edit of a finished task") && !found.contains("next tick"),
        "{found}"
    );
    let fixed = r.run(&["doctor", "--fix"]);
    assert!(fixed.status.success(), "{}", said(&fixed));
    assert_eq!(r.git_status(), "");
}

/// In a checkout that converts line endings (`eol=crlf`), a finished file's bytes on disk
/// are not its committed bytes though git sees it clean. A tick that took the folder from the
/// record without the stat cache's entry reads the committed version; it must not pair those
/// bytes with the file's key in the cache, or every later command that moves the file
/// (`retry`, `archive`) skips it as "changed meanwhile" for ever.
#[test]
fn committed_bytes_a_checkout_converted_are_never_cached_as_the_files() {
    let r = recorded_repo();
    let failed = "work/failed/f.yaml";
    let text = finished("F", 1).replace("state: done", "state: failed");
    r.write(failed, &text);
    r.write(".gitattributes", "*.yaml text eol=crlf\n");
    person_commits(&r, "a failed task, checked out with CRLF");
    for path in [failed, &format!("{DONE}/old.yaml")] {
        std::fs::remove_file(r.abs(path)).expect("rm");
        r.git(&["checkout", "--", path]);
        crate::harness::set_old_mtime(&r.abs(path));
    }
    assert!(r.read(failed).contains("\r\n"), "a CRLF checkout");
    assert_eq!(r.git_status(), "");
    tick(&r);
    tick(&r);
    assert!(recorded(&r, "failed"));
    // A schema change voids every cache entry (their salt), and leaves the record.
    let schema = r.read("schemas/task.schema.json");
    r.write("schemas/task.schema.json", &format!("{schema}\n"));
    person_commits(&r, "schema: a trailing newline");
    tick(&r);

    r.ok(&["retry", "f"]);
    assert_eq!(r.where_is("f"), "work/inbox/f.yaml");
    r.ok(&["archive", "--older-than", "0s"]);
    assert!(r.where_is("old").starts_with("work/archive/"));
}

/// A read-only command that walks `done/` file by file (the record gone, or the folder
/// changed) while a finished file holds a person's unstaged in-place edit must not record the
/// folder: the stat cache pairs the file's key with the edit, and once the person undoes the
/// edit in place, a record naming that key would keep serving the edit, which exists nowhere
/// (dependents got it as input).
#[test]
fn an_unstaged_edit_seen_by_a_read_only_walk_is_never_served_after_it_is_undone() {
    for read_only in ["status", "list"] {
        let r = recorded_repo();
        let old = format!("{DONE}/old.yaml");
        r.write(&old, &finished("Old", 2));
        std::thread::sleep(Duration::from_millis(200));
        std::fs::remove_dir_all(r.abs(".git/coord")).expect("rm .git/coord");
        r.ok(&[read_only]);
        r.write(&old, &finished("Old", 1));
        assert_eq!(r.git_status(), "", "undone");
        std::thread::sleep(Duration::from_millis(200));

        let shown = r.json(&["show", "old", "--json"]);
        assert_eq!(shown["task"]["result"]["output"]["v"], json!(1), "{shown}");
        r.task("next", &dependent("old"));
        tick(&r);
        assert_eq!(input_v(&r, "next"), json!(1));
    }
}
